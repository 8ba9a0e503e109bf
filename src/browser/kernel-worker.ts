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
const announced: SpaceAnnouncement[] = [];
let waiting: ((a: SpaceAnnouncement) => void) | undefined;

scope.onmessage = (e) => {
  const init = e.data as KernelWorkerInit;
  scope.onmessage = (later) => {
    const a = later.data as SpaceAnnouncement;
    if (waiting) {
      const w = waiting;
      waiting = undefined;
      w(a);
    } else announced.push(a);
  };
  void runKernelWorker(init.start, {
    ready: () => scope.postMessage({ ready: true }),
    startFailed: (message) => {
      scope.postMessage({ error: message });
      scope.close();
    },
    kernelFailed: (message) => postToMailbox(init.mailbox, message),
    nextAnnouncement: () => announced.shift() ?? new Promise<SpaceAnnouncement>((resolve) => (waiting = resolve)),
    close: () => scope.close(),
  });
};
