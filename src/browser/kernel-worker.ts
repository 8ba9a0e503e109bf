/**
 * A kernel worker in a browser: a module Web Worker that the wasm backend's browser host
 * (src/kernels/wasm/host.browser.ts) starts per thread. Its first message carries the
 * start (the compiled kernels, the shared memory, its thread index) and the error mailbox;
 * later messages announce further memories, which the loop waits for when a job needs one.
 */
import { postToMailbox, type KernelWorkerInit } from "../kernels/wasm/host.browser.js";
import { runKernelWorker, type SpaceAnnouncement } from "../kernels/wasm/worker-loop.js";
import type { WorkerScope } from "../platform/web.js";

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

scope.onmessage = (e) => {
  const init = e.data as KernelWorkerInit;
  scope.onmessage = (later) => announce(later.data as SpaceAnnouncement);
  scope.onmessageerror = () => announce(new Error("a memory's announcement could not be read (messageerror)"));
  void runKernelWorker(init.start, {
    ready: () => scope.postMessage({ ready: true }),
    startFailed: (message) => {
      scope.postMessage({ error: message });
      scope.close();
    },
    kernelFailed: (message) => postToMailbox(init.mailbox, message),
    nextAnnouncement: next,
    close: () => scope.close(),
  });
};
