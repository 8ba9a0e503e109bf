// One thread of scripts/roofline.ts: instantiates the kernels over a memory of its own, waits for
// the start signal so every thread runs at once, runs one register-only loop and reports its time.
import { parentPort, workerData } from "node:worker_threads";

const { module, name, iterations, start } = workerData;
const memory = new WebAssembly.Memory({ initial: 1, maximum: 65536, shared: true });
const kernels = new WebAssembly.Instance(module, { env: { memory } }).exports;
// V8 runs a wasm function in its baseline compiler (Liftoff) until the optimized code, compiled in
// the background after enough calls, is ready: warm up and give it time before the clock starts
// (a cold long call ran the int8 loop at a fifth of its rate in Chromium)
for (let round = 0; round < 3; round++) {
  for (let i = 0; i < 20; i++) kernels[name](20_000, 7);
  await new Promise((r) => setTimeout(r, 100));
}
const flag = new Int32Array(start);
Atomics.add(flag, 1, 1);
Atomics.wait(flag, 0, 0);
const t0 = performance.now();
const result = kernels[name](iterations, 7);
parentPort.postMessage({ ms: performance.now() - t0, result });
