import type { DeviceArray } from "../../src/kernels/backend.js";
import { device, host } from "../../src/kernels/reference/index.js";

/**
 * Floats in host memory as the host-memory backends (reference, wasm) take them: their device
 * arrays are Float32Arrays (kernels/reference/host-memory.ts), the DeviceArray brand is type-level
 * only. `device(a)` marks a Float32Array as one (the same object).
 */
export type HostArray = Float32Array & DeviceArray;
export { device };

/** `length` zeroed floats in host memory */
export function hostArray(length: number): HostArray {
  return device(new Float32Array(length));
}

/** a device array of a host-memory backend as the Float32Array it is (throws for another backend's) */
export function onHost(a: DeviceArray): HostArray {
  return device(host(a));
}

/** `n` deterministic pseudo-random floats in [-2, 2) in host memory (a linear congruential sequence from `seed`) */
export function filled(n: number, seed: number): HostArray {
  let s = seed >>> 0;
  return device(Float32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s / 2 ** 32) * 4 - 2;
  }));
}
