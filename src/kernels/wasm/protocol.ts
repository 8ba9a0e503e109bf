/**
 * What the wasm backend's threads tell each other, as types only: the pieces the host seams
 * (host.ts for Node, host.browser.ts for the browser), the worker loop and the pool share, so
 * none of them imports another for a type.
 */
import type { MessagePort } from "node:worker_threads";

/** "plain": SIMD128 only; "relaxed": the same kernels built with Relaxed SIMD (its int8 dot for Q8_0 decode, Q4_0, Q4_K, Q6_K) */
export type KernelsVariant = "plain" | "relaxed";

/**
 * How the backend's memories are made, which the kernels' compiled memory import must match:
 * "shared" (the threads' SharedArrayBuffer memory; a cross-origin isolated page, Node), or
 * "unshared" (a page without cross-origin isolation: one thread, the memory's buffer made
 * resizable so that views into it survive growth as a shared memory's do)
 */
export type KernelsMemory = "shared" | "unshared";

/** what a kernel worker is started with */
export interface WorkerStart {
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
}

/** a further memory of the backend, sent before its first job (pool.ts addSpace) */
export interface SpaceAnnouncement {
  space: number;
  memory: WebAssembly.Memory;
  ctrl: number;
  f16Table: number;
}

/** the main thread's handle on one kernel worker */
export interface KernelThread {
  /** resolves once the worker has its kernels instantiated; rejects with why it could not start */
  readonly started: Promise<void>;
  /** sends a further memory (pool.ts addSpace); the worker takes it before the job that runs in it */
  announce(a: SpaceAnnouncement): void;
  /** the kernel errors the worker reported, read synchronously (the main thread is blocked in a job when it needs them) */
  takeErrors(): string[];
  /** once started: the thread no longer keeps the process alive, and later errors arrive only through takeErrors */
  detach(): void;
  /** closes the main thread's end of the channel (the worker leaves its loop on STOP) */
  close(): void;
  /** stops the worker now (a failed start) */
  terminate(): void;
}

/** what a Node worker_threads kernel worker gets as workerData */
export interface WorkerInit extends WorkerStart {
  port: MessagePort;
}

/** what the Node host's supervisor thread (supervisor.ts) is started with */
export interface SupervisorInit {
  /** the source a kernel worker is started from (an evaluated bootstrap that imports worker.ts) */
  kernelWorkerSource: string;
}

/**
 * The Node host's messages to its supervisor: start kernel worker `id` with `init` (its report
 * port carries the supervisor's word on it: `{ error }` when its thread ends), or end it.
 */
export type SupervisorRequest = { spawn: { id: number; init: WorkerInit; reports: MessagePort } } | { terminate: number };
