import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from "node:worker_threads";
import { DONE, FAILED, GEN, KIND, MAIN_WAITING, NEXT, pollFor, ROWS, SLEEPERS, SPACE, STOP } from "./control.js";
import type { KernelExports } from "./module.js";
import type { SpaceAnnouncement, WorkerInit } from "./worker.js";

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
  /**
   * Makes a further memory (index = the next free one) known to the workers: each is sent it
   * on its port, and an empty job in it makes every worker take it and instantiate the kernels
   * over it now, not while a real job waits for it.
   */
  addSpace(space: PoolSpace): void;
  /** stops and releases the workers */
  close(): void;
}

/**
 * Under tsx (this file is .ts) the worker is TypeScript: Node 20 does not pass --import hooks
 * on to workers, so a small bootstrap registers tsx in the worker before importing it.
 */
function spawnWorker(init: WorkerInit): Worker {
  const options = { workerData: init, transferList: [init.port] };
  if (import.meta.url.endsWith(".ts")) {
    const url = new URL("./worker.ts", import.meta.url).href;
    const boot = `import("tsx/esm/api").then((api) => { api.register(); return import(${JSON.stringify(url)}); });`;
    return new Worker(boot, { ...options, eval: true });
  }
  return new Worker(new URL("./worker.js", import.meta.url), options);
}

/** first message of a worker: ready, or the error that stopped it from starting */
function started(worker: Worker, port: MessagePort, index: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const fail = (why: string): void => reject(new Error(`wasm backend: worker ${index} failed to start: ${why}`));
    port.once("message", (m: { ready?: boolean; error?: string }) => (m.ready ? resolve() : fail(String(m.error))));
    worker.once("error", (e) => fail(e.message));
    worker.once("exit", (code) => fail(`exited with code ${code}`));
  });
}

export async function createThreadPool(module: WebAssembly.Module, first: PoolSpace, threads: number): Promise<ThreadPool> {
  const { memory, ctrl, f16Table } = first;
  const control = first.control;
  const spaces: PoolSpace[] = [first];
  const workers: Worker[] = [];
  const ports: MessagePort[] = [];
  const close = (): void => {
    Atomics.store(control, STOP, 1);
    Atomics.add(control, GEN, 1);
    Atomics.notify(control, GEN);
    for (const p of ports) p.close();
    // the workers leave their loop and exit; unref'd, they never hold the process open
  };
  try {
    const starting: Promise<void>[] = [];
    for (let i = 1; i < threads; i++) {
      const { port1, port2 } = new MessageChannel();
      const worker = spawnWorker({ module, memory, ctrl, f16Table, threads, port: port2 });
      workers.push(worker);
      ports.push(port1);
      starting.push(started(worker, port1, i));
    }
    await Promise.all(starting);
  } catch (e) {
    close();
    for (const w of workers) void w.terminate();
    throw e;
  }
  for (const w of workers) {
    w.removeAllListeners("error");
    w.removeAllListeners("exit");
    // errors after start arrive through FAILED and the port; keep one listener so an
    // unexpected worker crash is not an unhandled 'error' event
    w.on("error", () => {});
    w.unref();
  }
  for (const p of ports) {
    p.removeAllListeners("message");
    p.unref();
  }

  /** polls DONE for SPIN_MS, then sleeps on it until every thread is done */
  function waitAllDone(): void {
    while (pollFor(control, DONE, (done) => done === threads) === undefined) {
      const done = Atomics.load(control, DONE);
      if (done === threads) return;
      Atomics.store(control, MAIN_WAITING, 1);
      Atomics.wait(control, DONE, done);
      Atomics.store(control, MAIN_WAITING, 0);
    }
  }

  function workerErrors(): string[] {
    const errors: string[] = [];
    ports.forEach((p, i) => {
      for (let m = receiveMessageOnPort(p); m; m = receiveMessageOnPort(p)) {
        const msg = m.message as { error?: string };
        if (msg.error) errors.push(`worker ${i + 1}: ${msg.error}`);
      }
    });
    return errors;
  }

  function run(index = 0): void {
    const job = spaces[index];
    if (!job) throw new Error(`wasm backend: no memory ${index} (the pool knows ${spaces.length})`);
    Atomics.store(job.control, NEXT, 0);
    Atomics.store(control, SPACE, index);
    Atomics.store(control, DONE, 0);
    // the bump of GEN (sequentially consistent) publishes the job words of any memory
    Atomics.add(control, GEN, 1);
    if (Atomics.load(control, SLEEPERS) > 0) Atomics.notify(control, GEN);
    let mainError: unknown;
    try {
      job.kernels.work(job.ctrl);
    } catch (e) {
      mainError = e;
    }
    Atomics.add(control, DONE, 1);
    // even when our share failed, wait: the workers are still reading the job's memory
    waitAllDone();
    if (Atomics.load(control, FAILED) !== 0) {
      Atomics.store(control, FAILED, 0);
      throw new Error(`wasm kernel failed on a worker thread: ${workerErrors().join("; ") || "no message"}`);
    }
    if (mainError !== undefined) throw mainError;
  }

  return {
    threads,
    run,
    addSpace(space: PoolSpace): void {
      const index = spaces.length;
      const announcement: SpaceAnnouncement = { space: index, memory: space.memory, ctrl: space.ctrl, f16Table: space.f16Table };
      // postMessage queues the message on the worker's port before it returns, and the GEN bump
      // of the job below comes after: a worker that sees the job finds the message there
      for (const p of ports) p.postMessage(announcement);
      spaces.push(space);
      space.control[KIND] = 0;
      space.control[ROWS] = 0;
      run(index);
    },
    close,
  };
}
