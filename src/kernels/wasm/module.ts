import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** The functions assembly/index.ts exports (pointers are byte offsets into the shared memory). */
export interface KernelExports {
  heapBase(): number;
  work(ctrl: number): void;
  useF16Table(table: number): void;
  fillF16Table(table: number): void;
  roundRowsF16(x: number, n: number): void;
  roundRowsBF16(x: number, n: number): void;
  quantizeRowQ8_0(x: number, qs: number, sc: number, n: number): void;
  quantizeRowQ8_K(x: number, qs: number, sc: number, bs: number, n: number): void;
}

/**
 * Where the compiled kernels live: next to this file once built (dist/kernels/wasm/), or in
 * dist/ when this file runs from src/ through tsx. `npm run build` (scripts/build-wasm.mjs)
 * produces it.
 */
const CANDIDATES = [new URL("./kernels.wasm", import.meta.url), new URL("../../../dist/kernels/wasm/kernels.wasm", import.meta.url)];

let compiled: WebAssembly.Module | undefined;

/** the compiled kernels module (compiled once per process, shared with the workers) */
export function kernelsModule(): WebAssembly.Module {
  if (compiled) return compiled;
  const found = CANDIDATES.map((u) => fileURLToPath(u)).find((p) => existsSync(p));
  if (!found) {
    throw new Error(`wasm backend: kernels.wasm not found (looked at ${CANDIDATES.map((u) => fileURLToPath(u)).join(", ")}); run "npm run build"`);
  }
  const bytes = readFileSync(found);
  try {
    compiled = new WebAssembly.Module(bytes);
  } catch (e) {
    throw new Error(`wasm backend: ${found} does not compile on this runtime (needs WebAssembly SIMD128 and threads): ${(e as Error).message}`);
  }
  return compiled;
}

/** an instance of the kernels over `memory` */
export function instantiateKernels(module: WebAssembly.Module, memory: WebAssembly.Memory): KernelExports {
  const instance = new WebAssembly.Instance(module, { env: { memory } });
  return instance.exports as unknown as KernelExports;
}
