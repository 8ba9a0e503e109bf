// One thread of scripts/roofline.ts: instantiates the kernels over a memory of its own, waits for
// the start signal so every thread runs at once, runs one register-only loop and reports its time.
import { parentPort, workerData } from "node:worker_threads";

const { module, name, iterations, start } = workerData;
const memory = new WebAssembly.Memory({ initial: 1, maximum: 65536, shared: true });
const kernels = new WebAssembly.Instance(module, { env: { memory } }).exports;
kernels[name](1000, 7); // compiled and warm before the clock starts
const flag = new Int32Array(start);
Atomics.add(flag, 1, 1);
Atomics.wait(flag, 0, 0);
const t0 = performance.now();
const result = kernels[name](iterations, 7);
parentPort.postMessage({ ms: performance.now() - t0, result });
