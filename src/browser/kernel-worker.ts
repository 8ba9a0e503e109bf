/**
 * A kernel worker in a browser: a module Web Worker that the wasm backend's browser host
 * (src/kernels/wasm/host.browser.ts) starts per thread. Its first message carries the
 * start (the compiled kernels, the shared memory, its thread index) and the error mailbox;
 * later messages announce further memories, which the loop waits for when a job needs one.
 *
 * Once started, the loop holds this thread (it sleeps in Atomics.wait) and so does the main
 * thread's wait for a job: neither hears the other's events then. A loop that stops for good —
 * it threw outside a kernel, or its JavaScript was terminated (by the browser, or the DevTools
 * protocol) — says so itself through the shared words (markStopped), with why in the mailbox:
 * the main thread's job ends with that error where it waited forever. A thread ended outright
 * (worker.terminate(), a crash) runs none of this: it releases the Web Lock the worker took before
 * it said ready, and this script's other role, the host's watchdog (watch() below), says so for it.
 */
import { postToMailbox, type KernelWorkerInit, type KernelWorkerWatch } from "../kernels/wasm/host.browser.js";
import { endTold, markStopped } from "../kernels/wasm/control.js";
import { describeError, runKernelWorker, type SpaceAnnouncement } from "../kernels/wasm/worker-loop.js";
import { web, type WorkerScope } from "../platform/web.js";

const scope = globalThis as unknown as WorkerScope;
/** announcements not yet waited for; an Error for one that could not be read (messageerror) */
const announced: (SpaceAnnouncement | Error)[] = [];
let waiting: ((a: SpaceAnnouncement | Error) => void) | undefined;

/** the next announcement; one that could not be read fails the job that needs it (the loop reports it through the mailbox), where it was waited for forever */
function next(): SpaceAnnouncement | Promise<SpaceAnnouncement> {
  const a = announced.shift() ?? new Promise<SpaceAnnouncement | Error>((resolve) => (waiting = resolve));
  const read = (x: SpaceAnnouncement | Error): SpaceAnnouncement => {
    if (x instanceof Error) throw x;
    return x;
  };
  return a instanceof Promise ? a.then(read) : read(a);
}

function announce(a: SpaceAnnouncement | Error): void {
  if (waiting) {
    const w = waiting;
    waiting = undefined;
    w(a);
  } else announced.push(a);
}

// the start message (the kernels, the shared memory) could not be read here: say so, or the pool would wait for this worker forever
scope.onmessageerror = () => {
  scope.postMessage({ error: "its start message could not be read (messageerror)" });
  scope.close();
};

/**
 * The watchdog's part: waits for a kernel worker's lock, which the browser grants here once that
 * worker's thread has ended; an end nobody told of (endTold) was an outright one, so why goes
 * into its mailbox, then the word the pool's waits read (markStopped).
 */
function watchOver({ lock, mailbox, worker, script }: KernelWorkerWatch["watch"]): void {
  void web.navigator!.locks!.request(lock, async () => {
    if (endTold(worker)) return;
    postToMailbox(mailbox, `${script}: its thread was ended from outside (worker.terminate(), or it crashed)`);
    markStopped(worker);
  });
}

/** how often a free event loop looks whether the loop is still running (it is free only while the loop awaits an announcement, or once the loop has stopped) */
const WATCH_MS = 50;

scope.onmessage = (e) => {
  if ((e.data as Partial<KernelWorkerWatch>).watch) {
    // this thread is the host's watchdog: every message is a kernel worker to watch
    scope.onmessage = (later) => watchOver((later.data as KernelWorkerWatch).watch);
    watchOver((e.data as KernelWorkerWatch).watch);
    return;
  }
  const init = e.data as KernelWorkerInit;
  scope.onmessage = (later) => announce(later.data as SpaceAnnouncement);
  scope.onmessageerror = () => announce(new Error("a memory's announcement could not be read (messageerror)"));
  const locks = web.navigator?.locks;
  if (!init.lock || !locks) return start(init, false);
  // the lock first, then the loop: the watchdog asks for it once this worker has said ready
  let granted = false;
  locks
    .request(init.lock, () => {
      granted = true;
      start(init, true);
      // held while this thread lives
      return new Promise(() => undefined);
    })
    // refused (not granted): this worker runs unwatched, and says so, or the watchdog, granted the free lock, took it for ended
    .catch(() => granted || start(init, false));
};

/** runs the loop; `locked`: this thread holds its lock, which its ready message tells the host */
function start(init: KernelWorkerInit, locked: boolean): void {
  const script = (scope as { location?: { href?: string } }).location?.href ?? "kernel-worker.js";
  /** the loop awaits an announcement: this thread's event loop is free while it still runs */
  let awaiting = false;
  /** the loop has ended: on STOP, a failed start, or stopped for good */
  let ended = false;
  const stop = (why: string): void => {
    if (ended) return;
    ended = true;
    clearInterval(watch);
    postToMailbox(init.mailbox, `${script}: ${why}`);
    markStopped(init.start);
  };
  // set before the loop starts: terminated JavaScript runs nothing after it, but this thread's
  // event loop goes on, and a timer that runs while the loop neither awaits nor has ended finds it gone
  const watch = setInterval(() => {
    if (!awaiting) stop("its loop stopped running (its JavaScript was terminated)");
  }, WATCH_MS);
  const nextAwaited = (): SpaceAnnouncement | Promise<SpaceAnnouncement> => {
    const a = next();
    if (!(a instanceof Promise)) return a;
    awaiting = true;
    return a.finally(() => (awaiting = false));
  };
  const end = (): void => {
    ended = true;
    clearInterval(watch);
    scope.close();
  };
  runKernelWorker(init.start, {
    ready: () => scope.postMessage({ ready: true, locked }),
    startFailed: (message) => {
      scope.postMessage({ error: message });
      end();
    },
    kernelFailed: (message) => postToMailbox(init.mailbox, message),
    nextAnnouncement: nextAwaited,
    close: end,
  }).catch((e: unknown) => stop(`its loop threw ${describeError(e)}`));
}
