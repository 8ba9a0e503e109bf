// Preloaded with --require (Node runs --require modules in worker threads too, --import ones not):
// makes the wasm backend's kernel worker 1 stop for good once, after its start, through the
// production worker (src/kernels/wasm/worker.ts) unchanged. Once the file TSLLM_TEST_WORKER_TRIGGER
// names exists, the first such worker to finish a job removes it and, where it would note the job
// left, throws (TSLLM_TEST_WORKER_DIES=throw: its loop rejects) or ends its thread
// (TSLLM_TEST_WORKER_DIES=exit: process.exit in a worker). Kernel workers of later loads run on.
const { isMainThread, workerData } = require("node:worker_threads");
const { unlinkSync } = require("node:fs");

const how = process.env.TSLLM_TEST_WORKER_DIES;
const trigger = process.env.TSLLM_TEST_WORKER_TRIGGER;
if (!isMainThread && how && trigger && workerData && workerData.thread === 1 && workerData.left instanceof SharedArrayBuffer) {
  const store = Atomics.store;
  const leftWord = workerData.thread * 16;
  Atomics.store = (array, index, value) => {
    if (array.buffer === workerData.left && index === leftWord) {
      let fired = false;
      try {
        unlinkSync(trigger);
        fired = true;
      } catch {
        // not triggered yet, or another worker took it
      }
      if (fired) {
        Atomics.store = store;
        if (how === "exit") process.exit(3);
        throw new Error("boom");
      }
    }
    return store(array, index, value);
  };
}
