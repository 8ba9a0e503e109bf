import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";

/** The functions assembly/index.ts exports (pointers are byte offsets into the shared memory). */
export interface KernelExports {
  heapBase(): number;
  /** runs the job in the control block at ctrl as thread `thread` (0 = main) under tag `tag` */
  work(ctrl: number, tag: number, thread: number): void;
  /** the main thread's takeover of a worker's claim: rows [r0, r1) of the current job */
  workRows(ctrl: number, r0: number, r1: number): void;
  useF16Table(table: number): void;
  f16sFinite(p: number, stride: number, count: number): number;
  fillF16Table(table: number): void;
  roundRowsF16(x: number, n: number): void;
  roundRowsBF16(x: number, n: number): void;
  quantizeRowQ8_0(x: number, qs: number, sc: number, n: number): void;
  quantizeRowQ8_K(x: number, qs: number, sc: number, bs: number, n: number): void;
  packQ8_0(q: number, nBlocks: number): void;
  packQ4_0(q: number, nBlocks: number, blocksPerRow: number): void;
  packQ8_K(q: number, nBlocks: number): void;
  packQ8_0Exact(q: number, nBlocks: number): void;
  /** lane 0 of f32x4.relaxed_madd(a, a, c) (0 in the SIMD128 build) */
  probeMadd(a: number, c: number): number;
  attendGgmlScratchBytes(nAll: number, headDim: number): number;
  attendFullScratchBytes(n: number, headDim: number): number;
  swigluGgml(out: number, gate: number, up: number, n: number): void;
  /** lane 0 of the relaxed int8 dot of splat(a), splat(b) (0 in the SIMD128 build) */
  probeDot(a: number, b: number): number;
  /** lane 0 of the relaxed byte blend of splat(a), splat(b) under mask splat(m) (0 in the SIMD128 build) */
  probeBlend(a: number, b: number, m: number): number;
}

/** "plain": SIMD128 only; "relaxed": the same kernels built with Relaxed SIMD (its int8 dot for Q8_0 decode, Q4_0, Q4_K, Q6_K) */
export type KernelsVariant = "plain" | "relaxed";

/**
 * Where the compiled kernels live: next to this file once built (dist/kernels/wasm/), or in
 * dist/ when this file runs from src/ through tsx. `npm run build` (scripts/build-wasm.mjs)
 * produces both files.
 */
const FILES: Record<KernelsVariant, string> = { plain: "kernels.wasm", relaxed: "kernels-relaxed.wasm" };
const candidates = (file: string): string[] => [new URL(`./${file}`, import.meta.url), new URL(`../../../dist/kernels/wasm/${file}`, import.meta.url)].map((u) => fileURLToPath(u));

function readKernels(variant: KernelsVariant): { path: string; bytes: Uint8Array } {
  const paths = candidates(FILES[variant]);
  const found = paths.find((p) => existsSync(p));
  if (!found) throw new Error(`wasm backend: ${FILES[variant]} not found (looked at ${paths.join(", ")}); run "npm run build"`);
  return { path: found, bytes: readFileSync(found) };
}

let relaxedSupported: boolean | undefined;

/**
 * Whether this runtime runs the relaxed build. Node 20's V8 (11.3) has Relaxed SIMD behind
 * --experimental-wasm-relaxed-simd: if the build does not validate as is, the flag is switched
 * on (process-wide, so worker threads see it too; it only adds instructions to what
 * WebAssembly accepts) and the build validated again.
 */
export function relaxedSimdSupported(): boolean {
  if (relaxedSupported !== undefined) return relaxedSupported;
  let bytes: Uint8Array;
  try {
    bytes = readKernels("relaxed").bytes;
  } catch {
    return (relaxedSupported = false);
  }
  if (!WebAssembly.validate(bytes)) {
    try {
      setFlagsFromString("--experimental-wasm-relaxed-simd");
    } catch {
      // not V8, or flags locked: stay on the SIMD128 build
    }
  }
  return (relaxedSupported = WebAssembly.validate(bytes));
}

const compiled = new Map<KernelsVariant, WebAssembly.Module>();

/** the compiled kernels module of a variant (compiled once per process, shared with the workers) */
export function kernelsModule(variant: KernelsVariant = "plain"): WebAssembly.Module {
  const cached = compiled.get(variant);
  if (cached) return cached;
  if (variant === "relaxed" && !relaxedSimdSupported()) throw new Error("wasm backend: this runtime does not support WebAssembly Relaxed SIMD (the relaxed kernels build)");
  const { path, bytes } = readKernels(variant);
  let module: WebAssembly.Module;
  try {
    module = new WebAssembly.Module(bytes);
  } catch (e) {
    throw new Error(`wasm backend: ${path} does not compile on this runtime (needs WebAssembly SIMD128 and threads): ${(e as Error).message}`);
  }
  compiled.set(variant, module);
  return module;
}

/** an instance of the kernels over `memory` */
export function instantiateKernels(module: WebAssembly.Module, memory: WebAssembly.Memory): KernelExports {
  const instance = new WebAssembly.Instance(module, { env: { memory } });
  return instance.exports as unknown as KernelExports;
}
