// Preloaded with --require (Node runs --require modules in worker threads too, --import ones not):
// makes the wasm backend's kernel worker 1 stop for good once, after its start, through the
// production code (src/kernels/wasm/) unchanged. Once the file TSLLM_TEST_WORKER_TRIGGER names
// exists, it is removed and:
// - TSLLM_TEST_WORKER_DIES=throw / exit: the first kernel worker to finish a job, where it would
//   note the job left, throws (its loop rejects) or ends its thread (process.exit in a worker);
// - TSLLM_TEST_WORKER_DIES=terminate: the thread that started kernel worker 1 ends it from outside
//   with worker.terminate() (none of the worker's JavaScript runs), whatever it is doing then;
// - TSLLM_TEST_WORKER_DIES=oom: kernel worker 1 is started with a 64 MiB heap limit (resourceLimits)
//   and, where it would note a job left, fills its heap: Node ends its thread (ERR_WORKER_OUT_OF_MEMORY).
// Kernel workers of later loads run on.
const { isMainThread, workerData } = require("node:worker_threads");
const { existsSync, unlinkSync } = require("node:fs");

const how = process.env.TSLLM_TEST_WORKER_DIES;
const trigger = process.env.TSLLM_TEST_WORKER_TRIGGER;

/** whether this call removed the trigger (so only one thread acts on it) */
function fire() {
  try {
    unlinkSync(trigger);
    return true;
  } catch {
    return false; // not triggered yet, or another thread took it
  }
}

const isKernelWorkerStart = (data) => data?.thread === 1 && data.left instanceof SharedArrayBuffer;

if ((how === "terminate" || how === "oom") && trigger) {
  // in whichever thread starts the kernel workers: the ESM imports of node:worker_threads see this Worker too
  const threads = require("node:worker_threads");
  const Base = threads.Worker;
  threads.Worker = class extends Base {
    constructor(script, options) {
      const kernelWorker = isKernelWorkerStart(options?.workerData);
      super(script, kernelWorker && how === "oom" ? { ...options, resourceLimits: { maxOldGenerationSizeMb: 64 } } : options);
      if (!kernelWorker || how === "oom") return;
      const watch = setInterval(() => {
        if (!existsSync(trigger) || !fire()) return;
        clearInterval(watch);
        void this.terminate();
      }, 1);
      watch.unref();
      this.once("exit", () => clearInterval(watch));
    }
  };
  require("node:module").syncBuiltinESMExports();
}

if (!isMainThread && (how === "throw" || how === "exit" || how === "oom") && trigger && isKernelWorkerStart(workerData)) {
  const store = Atomics.store;
  const leftWord = workerData.thread * 16;
  Atomics.store = (array, index, value) => {
    if (array.buffer === workerData.left && index === leftWord && fire()) {
      Atomics.store = store;
      if (how === "exit") process.exit(3);
      if (how === "oom") {
        const held = [];
        for (;;) held.push(new Array(1 << 16).fill(held.length));
      }
      throw new Error("boom");
    }
    return store(array, index, value);
  };
}
