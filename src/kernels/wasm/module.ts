import { compileKernels, hostKernelsMemory, hostRunsRelaxedSimd } from "./host.js";
import type { KernelsMemory, KernelsVariant } from "./protocol.js";

export type { KernelsMemory, KernelsVariant } from "./protocol.js";

/** the memory the compiled kernels import: "shared" (Node, a cross-origin isolated page) or "unshared" (a page without isolation) */
export function kernelsMemory(): KernelsMemory {
  return hostKernelsMemory();
}

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
  /** activations rounded through f16, times 2^112: the F16 matmul kernels' (assembly/float.ts) */
  roundRowsF16(x: number, n: number, scaled: boolean): void;
  roundRowsBF16(x: number, n: number): void;
  quantizeRowQ8_0(x: number, qs: number, sc: number, n: number): void;
  quantizeRowQ8_K(x: number, qs: number, sc: number, bs: number, n: number): void;
  packQ8_0(q: number, nBlocks: number): void;
  packQ4_0(q: number, nBlocks: number, blocksPerRow: number): void;
  packQ8_K(q: number, nBlocks: number): void;
  packQ8_0Exact(q: number, nBlocks: number, signMasks: boolean): void;
  q8_0Regular(p: number, nBlocks: number): number;
  /** the group streams of the first nTok & ~7 tokens for the Q8_0 exact kernel (before packQ8_0Exact) */
  packQ8_0Groups(xq: number, xs: number, groups: number, cols: number, nTok: number, unsignedActivations: number): void;
  /** the same for the Q4_0 / Q5_0 batch kernels (assembly/q8.ts; before packQ4_0), `slots` 1 for Q4_0's layout by fours */
  packQ4_0Groups(xq: number, xs: number, groups: number, cols: number, nTok: number): void;
  /** the same for the Q4_K / Q5_K / Q6_K batch kernels (assembly/kquant-slots.ts; before packQ8_K) */
  packQ8_KSlots(xq: number, xd: number, xb: number, groups: number, cols: number, nTok: number): void;
  /** lane 0 of f32x4.relaxed_madd(a, a, c) (0 in the SIMD128 build) */
  probeMadd(a: number, c: number): number;
  attendGgmlScratchBytes(nAll: number, headDim: number, group: number): number;
  attendEncodedScratchBytes(headDim: number, group: number): number;
  attendFullScratchBytes(n: number, headDim: number): number;
  swigluGgml(out: number, gate: number, up: number, n: number): void;
  /** lane 0 of the relaxed int8 dot of splat(a), splat(b) (0 in the SIMD128 build) */
  probeDot(a: number, b: number): number;
  /** lane 0 of the relaxed int32 dot of splat(a), splat(b) added to splat(c) (0 in the SIMD128 build) */
  probeDotAdd(a: number, b: number, c: number): number;
  /** lane 0 of the relaxed byte blend of splat(a), splat(b) under mask splat(m) (0 in the SIMD128 build) */
  probeBlend(a: number, b: number, m: number): number;
}


let relaxedSupported: boolean | undefined;

/**
 * Whether this runtime runs the relaxed build (asked of the host once: Node may switch on a
 * V8 flag for it, see host.ts; a browser compiled it or not, see host.browser.ts).
 */
export function relaxedSimdSupported(): boolean {
  if (relaxedSupported === undefined) relaxedSupported = hostRunsRelaxedSimd();
  return relaxedSupported;
}

/** per variant and memory kind (a module imports one kind of memory) */
const compiled = new Map<string, WebAssembly.Module>();

/** the compiled kernels module of a variant (compiled once per process, shared with the workers) */
export function kernelsModule(variant: KernelsVariant = "plain"): WebAssembly.Module {
  const key = `${variant} ${kernelsMemory()}`;
  const cached = compiled.get(key);
  if (cached) return cached;
  if (variant === "relaxed" && !relaxedSimdSupported()) throw new Error("wasm backend: this runtime does not support WebAssembly Relaxed SIMD (the relaxed kernels build)");
  const module = compileKernels(variant);
  compiled.set(key, module);
  return module;
}

/** an instance of the kernels over `memory` */
export function instantiateKernels(module: WebAssembly.Module, memory: WebAssembly.Memory): KernelExports {
  const instance = new WebAssembly.Instance(module, { env: { memory } });
  return instance.exports as unknown as KernelExports;
}
