import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from "node:worker_threads";
import { DONE, FAILED, GEN, MAIN_WAITING, NEXT, POLLS_PER_CLOCK_READ, SLEEPERS, SPIN_MS, STOP } from "./control.js";
import type { KernelExports } from "./module.js";
import type { WorkerInit } from "./worker.js";

/**
 * The worker threads of one wasm backend and the barrier that runs a job on all of them.
 * The main thread takes part in every job (it runs work() too), so `threads` counts it.
 */
export interface ThreadPool {
  readonly threads: number;
  /** runs the job already written into the control block on every thread; throws if any kernel threw */
  run(): void;
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

export async function createThreadPool(
  module: WebAssembly.Module,
  memory: WebAssembly.Memory,
  kernels: KernelExports,
  ctrl: number,
  f16Table: number,
  threads: number,
): Promise<ThreadPool> {
  const control = new Int32Array(memory.buffer, ctrl, 64);
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

  function waitAllDone(): void {
    let deadline = performance.now() + SPIN_MS;
    for (let polls = 1; ; polls++) {
      const done = Atomics.load(control, DONE);
      if (done === threads) return;
      if (polls % POLLS_PER_CLOCK_READ === 0 && performance.now() > deadline) {
        Atomics.store(control, MAIN_WAITING, 1);
        Atomics.wait(control, DONE, done);
        Atomics.store(control, MAIN_WAITING, 0);
        deadline = performance.now() + SPIN_MS;
      }
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

  return {
    threads,
    run(): void {
      Atomics.store(control, DONE, 0);
      Atomics.store(control, NEXT, 0);
      Atomics.add(control, GEN, 1);
      if (Atomics.load(control, SLEEPERS) > 0) Atomics.notify(control, GEN);
      let mainError: unknown;
      try {
        kernels.work(ctrl);
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
    },
    close,
  };
}
