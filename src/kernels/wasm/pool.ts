import { ClaimState, COMPLETED, FAILED, GEN, KIND, LEFT_STOPPED, LEFT_STRIDE, MAIN_WAITING, NEXT, RECORD_BYTES, RECORDS, ROWS, SLEEPERS, SPACE, SPIN_MS, STEALABLE, STOP } from "./control.js";
import type { KernelExports } from "./module.js";
import { spawnKernelWorker, type KernelThread } from "./host.js";
import type { SpaceAnnouncement } from "./worker-loop.js";

/** a memory as the pool sees it: the calling thread's kernels instance over it, its control block and f16 table */
export interface PoolSpace {
  readonly memory: WebAssembly.Memory;
  readonly kernels: KernelExports;
  readonly ctrl: number;
  /** the control block's words */
  readonly control: Int32Array;
  readonly f16Table: number;
}

/**
 * The worker threads of one wasm backend and the barrier that runs a job on all of them.
 * The main thread takes part in every job (it runs work() too), so `threads` counts it.
 * Jobs run in one of the backend's memories (`space`, 0 = the first); every thread holds an
 * instance of the kernels per memory. The barrier's words are always memory 0's.
 */
export interface ThreadPool {
  readonly threads: number;
  /** runs the job already written into memory `space`'s control block on every thread; throws if any kernel threw */
  run(space?: number): void;
  /** claims of workers the main thread took over (a worker stopped mid-claim in a stealable job) */
  readonly stolenClaims: number;
  /** why the pool runs no job any more (a worker stopped for good: the error every run() throws), undefined while it runs */
  readonly failure: string | undefined;
  /**
   * Makes a further memory (index = the next free one) known to the workers: each is sent it
   * (KernelThread.announce), and an empty job in it makes every worker take it and instantiate the kernels
   * over it now, not while a real job waits for it.
   */
  addSpace(space: PoolSpace): void;
  /** stops and releases the workers */
  close(): void;
}

/** first message of a worker: ready, or the error that stopped it from starting */
function started(thread: KernelThread, index: number): Promise<void> {
  return thread.started.catch((e: Error) => {
    throw new Error(`wasm backend: worker ${index} failed to start: ${e.message}`);
  });
}

/** main thread: polls between two looks at the clock and at FAILED */
const POLLS_PER_CHECK = 64;
/**
 * How long the main thread, out of rows, waits for a stealable job's last claims before it
 * takes them over, in milliseconds. Threads normally finish within a microsecond or two of each
 * other (claims shrink to 4 rows at the end); on this VM a worker's vCPU now and then stops for
 * 3-8 ms mid-claim, ~1 ms a token of TinyLlama decode, which the main thread then spends
 * computing the claim (tens of microseconds) instead of waiting.
 */
const STEAL_AFTER_MS = 0.03;
/** a sleeping main thread looks at FAILED this often, in milliseconds */
const SLEEP_CHECK_MS = 5;

/** whether this thread may sleep in Atomics.wait, which the pool's waits do once a job outlasts their spin (a window's main thread may not) */
function mayBlock(): boolean {
  try {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 1, 0);
    return true;
  } catch {
    return false;
  }
}

/** NEXT's 64-bit value: the tag in the high word, the row in the low one */
function tagged(tag: number, row: number): bigint {
  return BigInt.asIntN(64, (BigInt(tag >>> 0) << 32n) | BigInt(row));
}

function nextWord(space: PoolSpace): BigInt64Array {
  return new BigInt64Array(space.memory.buffer, space.ctrl + NEXT * 4, 1);
}

/**
 * Starts the workers. `signal` ends the wait for them (a worker that never answers its start
 * held it forever, and its thread with it): they are stopped and the pool's start rejects.
 */
export async function createThreadPool(module: WebAssembly.Module, first: PoolSpace, threads: number, signal?: AbortSignal): Promise<ThreadPool> {
  if (!mayBlock()) throw new Error(`wasm backend: ${threads} threads need a thread that may block in Atomics.wait (a Worker or Node's main thread), not a page's main thread: run the model in a Worker (the browser engine's worker does) or use threads: 1`);
  const { memory, ctrl, f16Table } = first;
  const control = first.control;
  const spaces: PoolSpace[] = [first];
  /** per space: NEXT and NEXT_TAG as the one 64-bit word claim() compares and swaps */
  const nextWords: BigInt64Array[] = [nextWord(first)];
  /** per worker, a cache line of LEFT_STRIDE words: the GEN of its last finished work(), and whether it stopped for good (LEFT_STOPPED) */
  const left = new Int32Array(new SharedArrayBuffer(threads * LEFT_STRIDE * 4));
  let gen = Atomics.load(control, GEN);
  let stolenClaims = 0;
  const recordViews = new Map<PoolSpace, Int32Array>();
  const workers: KernelThread[] = [];
  const close = (): void => {
    Atomics.store(control, STOP, 1);
    Atomics.add(control, GEN, 1);
    Atomics.notify(control, GEN);
    for (const w of workers) w.close();
    // the workers leave their loop and exit; unref'd, they never hold the process open
  };
  try {
    const starting: Promise<void>[] = [];
    for (let i = 1; i < threads; i++) {
      left[i * LEFT_STRIDE] = gen;
      const worker = spawnKernelWorker({ module, memory, ctrl, f16Table, thread: i, left: left.buffer as SharedArrayBuffer });
      workers.push(worker);
      starting.push(started(worker, i));
    }
    await untilStartedOrAborted(Promise.all(starting), signal);
  } catch (e) {
    close();
    for (const w of workers) w.terminate();
    throw e;
  }
  for (const w of workers) w.detach();

  /** after a failure: waits until every worker has left job `tag` (they may still be writing its memory); a worker that stopped never does */
  function waitAllLeft(tag: number): void {
    for (let t = 1; t < threads; t++) {
      const at = t * LEFT_STRIDE;
      while (Atomics.load(left, at) !== tag) {
        throwIfWorkerStopped();
        Atomics.wait(left, at, Atomics.load(left, at), 1);
      }
    }
  }

  /** why this pool runs no job any more: a worker stopped for good (every later run throws it) */
  let stoppedWorker: string | undefined;

  /** why this pool runs no job any more, once a worker's loop has stopped for good (LEFT_STOPPED) */
  function workerStopped(): string | undefined {
    // (a plain loop: this runs before every job)
    for (let t = 1; stoppedWorker === undefined && t < threads; t++) {
      if (Atomics.load(left, t * LEFT_STRIDE + LEFT_STOPPED) === 0) continue;
      const why = workers[t - 1]!.takeErrors().join("; ") || "no message";
      stoppedWorker = `wasm backend: kernel worker ${t} stopped: ${why}; the backend cannot run without it: load the model again`;
    }
    return stoppedWorker;
  }

  /**
   * Throws once a worker's loop has stopped for good (LEFT_STOPPED): it never completes the rows
   * it claimed nor leaves a job, so the waits for it held this thread forever. The rows it left
   * half written and the threads the jobs were cut for are not recovered: the backend is done.
   */
  function throwIfWorkerStopped(): void {
    const why = workerStopped();
    if (why !== undefined) throw new Error(why);
  }

  /**
   * Takes over every claim of a stealable job that a worker is still computing: the claim's
   * record moves COMPUTING -> STOLEN (the worker's own move to PUBLISHING then fails, and it
   * drops its rows) and the main thread computes the rows itself.
   */
  function stealClaims(job: PoolSpace, tag: number): void {
    // the records never move once allocated (space.ts prepareStealing): one view per memory
    let records = recordViews.get(job);
    if (!records) {
      records = new Int32Array(job.memory.buffer, job.control[RECORDS]!, (threads * RECORD_BYTES) / 4);
      recordViews.set(job, records);
    }
    const computing = (tag << 2) | ClaimState.COMPUTING;
    for (let t = 1; t < threads; t++) {
      const i = (t * RECORD_BYTES) / 4;
      if (Atomics.compareExchange(records, i, computing, (tag << 2) | ClaimState.STOLEN) !== computing) continue;
      job.kernels.workRows(job.ctrl, records[i + 1]!, records[i + 2]!);
      stolenClaims++;
    }
  }

  /**
   * Waits until every row of job `tag` is done. A stealable job's claims still being computed
   * STEAL_AFTER_MS after the main thread ran out of rows are taken over (a worker whose vCPU
   * the host stopped would hold the job up for milliseconds); other jobs poll for SPIN_MS, then
   * sleep on COMPLETED. A worker's failure ends the wait with its error.
   */
  function waitCompleted(job: PoolSpace, rows: number, tag: number): void {
    const jc = job.control;
    const stealable = jc[STEALABLE] === 1;
    let since = -1;
    for (let polls = 1; ; polls++) {
      const done = Atomics.load(jc, COMPLETED);
      if (done === rows) return;
      if (polls % POLLS_PER_CHECK !== 0) continue;
      if (Atomics.load(control, FAILED) !== 0) {
        waitAllLeft(tag);
        throwIfWorkerFailed();
      }
      throwIfWorkerStopped();
      const now = performance.now();
      if (since < 0) since = now;
      else if (stealable && now - since > STEAL_AFTER_MS) {
        stealClaims(job, tag);
        since = now;
      } else if (!stealable && now - since > SPIN_MS) {
        Atomics.store(jc, MAIN_WAITING, 1);
        // a timeout, so that a worker's failure (which completes no rows) is seen
        Atomics.wait(jc, COMPLETED, done, SLEEP_CHECK_MS);
        Atomics.store(jc, MAIN_WAITING, 0);
      }
    }
  }

  function workerErrors(): string[] {
    const errors: string[] = [];
    workers.forEach((w, i) => {
      for (const error of w.takeErrors()) errors.push(`worker ${i + 1}: ${error}`);
    });
    return errors;
  }

  function run(index = 0): void {
    const job = spaces[index];
    if (!job) throw new Error(`wasm backend: no memory ${index} (the pool knows ${spaces.length})`);
    throwIfWorkerStopped();
    gen = (gen + 1) | 0;
    const rows = job.control[ROWS]!;
    Atomics.store(job.control, COMPLETED, 0);
    Atomics.store(nextWords[index]!, 0, tagged(gen, 0));
    Atomics.store(control, SPACE, index);
    // the store of GEN (sequentially consistent) publishes the job words of any memory
    Atomics.store(control, GEN, gen);
    if (Atomics.load(control, SLEEPERS) > 0) Atomics.notify(control, GEN);
    try {
      job.kernels.work(job.ctrl, gen, 0);
    } catch (e) {
      // the workers may still be writing this job's memory: let them leave it first
      waitAllLeft(gen);
      throwIfWorkerFailed();
      throw e;
    } finally {
      // no row of this job is left to claim from now on, whatever ROWS the next job's words
      // (written before its tag replaces this one) say: a late worker reading those words
      // under this tag would otherwise claim rows of the next job with them
      Atomics.store(nextWords[index]!, 0, tagged(gen, 0x7fffffff));
    }
    waitCompleted(job, rows, gen);
  }

  /** a worker's kernel error, as an exception (FAILED cleared for the next job) */
  function throwIfWorkerFailed(): void {
    if (Atomics.load(control, FAILED) === 0) return;
    Atomics.store(control, FAILED, 0);
    throw new Error(`wasm kernel failed on a worker thread: ${workerErrors().join("; ") || "no message"}`);
  }

  return {
    threads,
    run,
    get stolenClaims() {
      return stolenClaims;
    },
    get failure() {
      return workerStopped();
    },
    addSpace(space: PoolSpace): void {
      const index = spaces.length;
      const announcement: SpaceAnnouncement = { space: index, memory: space.memory, ctrl: space.ctrl, f16Table: space.f16Table };
      // announce() queues the message on the worker's channel before it returns, and the GEN bump
      // of the job below comes after: a worker that sees the job finds the message there
      for (const w of workers) w.announce(announcement);
      spaces.push(space);
      nextWords.push(nextWord(space));
      space.control[KIND] = 0;
      space.control[ROWS] = 0;
      run(index);
      // every worker instantiates the kernels over the memory before it grows (a job that
      // needs no rows ends at once: wait for the workers to have taken it)
      waitAllLeft(gen);
    },
    close,
  };
}

/** `started`, or a rejection as soon as `signal` aborts (the caller stops the workers) */
function untilStartedOrAborted(started: Promise<unknown>, signal: AbortSignal | undefined): Promise<unknown> {
  if (!signal) return started;
  let onAbort = (): void => undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(new Error("wasm backend: aborted while its kernel workers started"));
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  return Promise.race([started, aborted]).finally(() => signal.removeEventListener("abort", onAbort));
}
