/**
 * A kernel worker: its own instance of the kernels over each of the backend's shared memories,
 * looping forever: wait for the main thread to bump GEN, run work() in the memory the job names
 * (take row chunks until none are left; the kernels count the rows done), note the job left. A
 * worker the OS stopped may come back after the main thread finished its job without it (see
 * pool.ts): it then joins whatever job is current. A kernel that throws is reported on the port
 * and flagged in FAILED, so the main thread never hangs on it.
 */
import { receiveMessageOnPort, workerData, type MessagePort } from "node:worker_threads";
import { FAILED, GEN, pollFor, SLEEPERS, SPACE, STOP } from "./control.js";
import { instantiateKernels, type KernelExports } from "./module.js";

export interface WorkerInit {
  module: WebAssembly.Module;
  /** memory 0: its control block synchronises the threads */
  memory: WebAssembly.Memory;
  /** byte offset of memory 0's control block */
  ctrl: number;
  /** byte offset of memory 0's f16 table */
  f16Table: number;
  /** this worker's index among the threads of a job (the main thread is 0) */
  thread: number;
  /** Int32 words, 16 apart: the GEN of each thread's last finished work() (the main thread waits on them after a failure) */
  left: SharedArrayBuffer;
  port: MessagePort;
}

/** a further memory of the backend, sent on the port before its first job (pool.ts addSpace) */
export interface SpaceAnnouncement {
  space: number;
  memory: WebAssembly.Memory;
  ctrl: number;
  f16Table: number;
}

interface Space {
  kernels: KernelExports;
  ctrl: number;
}

const init = workerData as WorkerInit;
const { memory, ctrl, thread, port } = init;
const left = new Int32Array(init.left);

function instantiate(m: WebAssembly.Memory, f16Table: number): KernelExports {
  const kernels = instantiateKernels(init.module, m);
  kernels.useF16Table(f16Table);
  return kernels;
}

const spaces: (Space | undefined)[] = [{ kernels: instantiate(memory, init.f16Table), ctrl }];
const control = new Int32Array(memory.buffer, ctrl, 64);
// read the generation before saying ready: the main thread may start the first job the moment
// it hears from us, and a worker that read GEN after that bump would wait for the next one
let gen = Atomics.load(control, GEN);
port.postMessage({ ready: true });

/**
 * The memory a job runs in; one not seen yet is taken from the port, where the main thread
 * put it before the job (this loop never returns to the event loop, so nothing else reads it).
 */
function space(index: number): Space {
  for (;;) {
    const known = spaces[index];
    if (known) return known;
    const m = receiveMessageOnPort(port);
    if (!m) throw new Error(`a job runs in memory ${index}, which was never sent to this worker`);
    const a = m.message as SpaceAnnouncement;
    spaces[a.space] = { kernels: instantiate(a.memory, a.f16Table), ctrl: a.ctrl };
  }
}

/** polls GEN for SPIN_MS, then sleeps on it; returns the new generation */
function nextJob(seen: number): number {
  for (;;) {
    const gen = pollFor(control, GEN, (g) => g !== seen);
    if (gen !== undefined) return gen;
    Atomics.add(control, SLEEPERS, 1);
    Atomics.wait(control, GEN, seen);
    Atomics.sub(control, SLEEPERS, 1);
  }
}

for (;;) {
  gen = nextJob(gen);
  if (Atomics.load(control, STOP) !== 0) break;
  try {
    const job = space(Atomics.load(control, SPACE));
    job.kernels.work(job.ctrl, gen, thread);
  } catch (e) {
    port.postMessage({ error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
    Atomics.store(control, FAILED, 1);
  }
  Atomics.store(left, thread * 16, gen);
}
port.close();
