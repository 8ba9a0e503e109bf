import type { Tensor } from "../tensor/index.js";

/**
 * The compute backend: the hot matrix kernels over every weight format. Models call only
 * this interface for weight-touching work, so the same model code runs on the plain-TS
 * reference kernels (the executable spec) and on the WebAssembly SIMD kernels.
 *
 * Numerics follow ggml's CPU backend so results match llama.cpp: activations are converted
 * to the weight's "vec_dot type" before the dot product (Q8_0 for Q8_0/Q4_0/Q5_0, Q8_1 for
 * Q4_1/Q5_1, Q8_K for the k-quants, F16 for F16, BF16 for BF16, F32 for F32).
 */
/**
 * What a matmul applies to its results while they are still in the kernel's hands (no second
 * pass over the output): `bias` (one float per output row) added as one f32 addition each, the
 * same bits as adding it afterwards; then `activation` ("gelu-erf": geluErf below, the same
 * values as calling it afterwards).
 */
export interface MatmulEpilogue {
  bias?: Float32Array;
  activation?: "gelu-erf";
}

export interface Backend {
  readonly name: string;
  /**
   * Which kernels add in llama.cpp's x86 order, bit for bit as the reference kernels: "all" (the
   * reference backend); "q8_0+attention" (the wasm backend where Relaxed SIMD's multiply-add is
   * fused: the kernels whose last-ulp differences flip quantized activations); "none".
   */
  readonly llamaCppOrder: "all" | "q8_0+attention" | "none";
  /** worker threads used by the kernels (1 for the reference backend) */
  readonly threads: number;
  /**
   * Memory for weights, 64-byte aligned, placed where this backend's kernels read it in
   * place (the loader reads tensor bytes from the file straight into it: no second copy).
   * `name` (the tensor's) is for errors, e.g. a tensor too large for the backend's memory.
   */
  allocWeights(byteLength: number, name?: string): Uint8Array;
  /**
   * out[t * rows + r] = sum_c W[r, c] * x[t * cols + c] for every token t < nTokens, then the
   * epilogue. W has dims [cols, rows] (ggml order); x holds nTokens rows of `cols` floats.
   */
  matmul(out: Float32Array, w: Tensor, x: Float32Array, nTokens: number, epilogue?: MatmulEpilogue): void;
  /** out[i * cols ...] = W row ids[i], dequantized to f32 (embedding lookup) */
  getRows(out: Float32Array, w: Tensor, ids: ArrayLike<number>): void;
  /**
   * Float memory the kernels read in place (the KV cache). It is recycled once the returned
   * array is garbage-collected, so keep the array itself (not only subarrays of it) alive.
   */
  allocActivations(length: number): Float32Array;
  /**
   * Causal attention of nTokens queries (at positions startPos...) against cached keys and
   * values, as defined by kernels/ops/attention.ts. keys/values come from allocActivations;
   * position p is their row rows[p] (the paged KV cache's row index), or row p without `rows`.
   */
  attention(out: Float32Array, q: Float32Array, keys: Float32Array, values: Float32Array, nTokens: number, startPos: number, nHeads: number, nKvHeads: number, headDim: number, scale: number, rows?: Int32Array): void;
  /**
   * Bidirectional attention of one sequence's n tokens among themselves (encoders), as defined by
   * kernels/ops/bidirectional-attention.ts: q, k and v hold n rows `stride` floats apart (head h
   * in columns h * headDim ..., so they may be column blocks of one fused projection); out gets n
   * rows of nHeads * headDim.
   */
  bidirectionalAttention(out: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array, n: number, nHeads: number, headDim: number, scale: number, stride?: number): void;
  /** out[i] = gelu(x[i]) in the erf form for i < n (out may be x), as kernels/ops/activations.ts's geluErf to f32 rounding (the wasm kernel: within 5e-7) */
  geluErf(out: Float32Array, x: Float32Array, n: number): void;
  /** out[i] = silu(gate[i]) * up[i] for i < n, as kernels/ops/activations.ts's swiglu (same bits) */
  swiglu(out: Float32Array, gate: Float32Array, up: Float32Array, n: number): void;
  /** releases workers and memory; the backend is unusable afterwards */
  dispose(): void;
}
