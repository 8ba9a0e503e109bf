/**
 * A kernel worker's loop, the same on every host: its own instance of the kernels over each
 * of the backend's shared memories, looping forever: wait for the main thread to bump GEN, run
 * work() in the memory the job names (take row chunks until none are left; the kernels count
 * the rows done), note the job left. A worker the OS stopped may come back after the main
 * thread finished its job without it (see pool.ts): it then joins whatever job is current. A
 * kernel that throws is reported through the link and flagged in FAILED, so the main thread
 * never hangs on it. worker.ts (Node worker_threads) and src/browser/kernel-worker.ts (a Web
 * Worker) start it, each with its host's link to the main thread.
 */
import { FAILED, GEN, LEFT_STRIDE, pollFor, SLEEPERS, SPACE, STOP } from "./control.js";
import { instantiateKernels, type KernelExports } from "./module.js";
import type { SpaceAnnouncement, WorkerStart } from "./protocol.js";

export type { SpaceAnnouncement, WorkerStart } from "./protocol.js";



/** a worker's channel to the main thread, as its host provides it */
export interface WorkerLink {
  /** the kernels are instantiated: the main thread may start jobs */
  ready(): void;
  /** the worker could not start */
  startFailed(message: string): void;
  /** a kernel threw; the main thread reads this synchronously once it sees FAILED */
  kernelFailed(message: string): void;
  /**
   * The next memory the main thread announced: at once where the host reads its channel
   * without the event loop (Node's receiveMessageOnPort; undefined if none is there), else a
   * promise the host's message handler resolves (a Web Worker: the loop yields to get it).
   */
  nextAnnouncement(): SpaceAnnouncement | undefined | Promise<SpaceAnnouncement>;
  close(): void;
}

interface Space {
  kernels: KernelExports;
  ctrl: number;
}

export const describeError = (e: unknown): string => (e instanceof Error ? `${e.name}: ${e.message}` : String(e));

/** runs the worker until the main thread sets STOP */
export async function runKernelWorker(init: WorkerStart, link: WorkerLink): Promise<void> {
  const { memory, ctrl, thread } = init;
  const left = new Int32Array(init.left);
  const instantiate = (m: WebAssembly.Memory, f16Table: number): KernelExports => {
    const kernels = instantiateKernels(init.module, m);
    kernels.useF16Table(f16Table);
    return kernels;
  };
  const spaces: (Space | undefined)[] = [];
  try {
    spaces[0] = { kernels: instantiate(memory, init.f16Table), ctrl };
  } catch (e) {
    link.startFailed(describeError(e));
    return;
  }
  const control = new Int32Array(memory.buffer, ctrl, 64);
  // read the generation before saying ready: the main thread may start the first job the moment
  // it hears from us, and a worker that read GEN after that bump would wait for the next one
  let gen = Atomics.load(control, GEN);
  link.ready();

  /** polls GEN for SPIN_MS, then sleeps on it; returns the new generation */
  const nextJob = (seen: number): number => {
    for (;;) {
      const g = pollFor(control, GEN, (v) => v !== seen);
      if (g !== undefined) return g;
      Atomics.add(control, SLEEPERS, 1);
      Atomics.wait(control, GEN, seen);
      Atomics.sub(control, SLEEPERS, 1);
    }
  };

  for (;;) {
    gen = nextJob(gen);
    if (Atomics.load(control, STOP) !== 0) break;
    try {
      const index = Atomics.load(control, SPACE);
      // a memory not seen yet comes through the link, where the main thread put it before the job
      let job = spaces[index];
      while (!job) {
        const pending = link.nextAnnouncement();
        const a = pending instanceof Promise ? await pending : pending;
        if (!a) throw new Error(`a job runs in memory ${index}, which was never sent to this worker`);
        spaces[a.space] = { kernels: instantiate(a.memory, a.f16Table), ctrl: a.ctrl };
        job = spaces[index];
      }
      job.kernels.work(job.ctrl, gen, thread);
    } catch (e) {
      link.kernelFailed(describeError(e));
      Atomics.store(control, FAILED, 1);
    }
    Atomics.store(left, thread * LEFT_STRIDE, gen);
  }
  link.close();
}
