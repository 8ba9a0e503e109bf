/**
 * A kernel worker: its own instance of the kernels over the shared memory, looping forever:
 * wait for the main thread to bump GEN, run work() (take row chunks until none are left),
 * count itself DONE. A kernel that throws is reported on the port and flagged in FAILED, and
 * the worker still counts itself done, so the main thread never hangs on it.
 */
import { workerData, type MessagePort } from "node:worker_threads";
import { DONE, FAILED, GEN, MAIN_WAITING, POLLS_PER_CLOCK_READ, SLEEPERS, SPIN_MS, STOP } from "./control.js";
import { instantiateKernels } from "./module.js";

export interface WorkerInit {
  module: WebAssembly.Module;
  memory: WebAssembly.Memory;
  /** byte offset of the control block */
  ctrl: number;
  /** byte offset of the shared f16 table */
  f16Table: number;
  /** threads taking part in a job, the main thread included */
  threads: number;
  port: MessagePort;
}

const init = workerData as WorkerInit;
const { memory, ctrl, threads, port } = init;
const kernels = instantiateKernels(init.module, memory);
kernels.useF16Table(init.f16Table);
const control = new Int32Array(memory.buffer, ctrl, 64);
// read the generation before saying ready: the main thread may start the first job the moment
// it hears from us, and a worker that read GEN after that bump would wait for the next one
let gen = Atomics.load(control, GEN);
port.postMessage({ ready: true });

/** polls GEN for SPIN_MS, then sleeps on it; returns the new generation */
function nextJob(seen: number): number {
  let deadline = performance.now() + SPIN_MS;
  for (let polls = 1; ; polls++) {
    const gen = Atomics.load(control, GEN);
    if (gen !== seen) return gen;
    if (polls % POLLS_PER_CLOCK_READ === 0 && performance.now() > deadline) {
      Atomics.add(control, SLEEPERS, 1);
      Atomics.wait(control, GEN, seen);
      Atomics.sub(control, SLEEPERS, 1);
      deadline = performance.now() + SPIN_MS;
    }
  }
}

for (;;) {
  gen = nextJob(gen);
  if (Atomics.load(control, STOP) !== 0) break;
  try {
    kernels.work(ctrl);
  } catch (e) {
    port.postMessage({ error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
    Atomics.store(control, FAILED, 1);
  }
  if (Atomics.add(control, DONE, 1) + 1 === threads && Atomics.load(control, MAIN_WAITING) !== 0) {
    Atomics.notify(control, DONE);
  }
}
port.close();
