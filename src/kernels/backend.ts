import type { GGMLType, Tensor } from "../tensor/index.js";
import type { RopeParams } from "./ops/rope.js";
import type { KVCacheEncoding, KVCacheType, KVRowEncoding } from "./reference/kv-encoding.js";

/**
 * The compute backend. A backend owns the memory it computes in — host memory (reference),
 * its WebAssembly memories (wasm), GPU buffers (webgpu) — and every per-layer op of every
 * model goes through it: activations and the KV cache stay in that memory from the embedding
 * lookup to the logits. The one point where results come back to the caller is `read` (async)
 * or, for backends whose memory the host addresses, `readSync`. So the same model code runs on
 * the plain-TS reference kernels (the executable spec), the WebAssembly SIMD kernels and the GPU.
 *
 * Numerics follow ggml's CPU backend so results match llama.cpp: activations are converted
 * to the weight's "vec_dot type" before the dot product (Q8_0 for Q8_0/Q4_0/Q5_0, Q8_1 for
 * Q4_1/Q5_1, Q8_K for the k-quants, F16 for F16, BF16 for BF16, F32 for F32).
 *
 * Conventions: the output comes first; `out` may be the same array as an input where an op
 * says so; small weights (norm weights, biases) are host `Float32Array`s that never change
 * (a GPU backend uploads each once); lengths are in floats.
 */

/**
 * Floats in a backend's memory, or a view of some of them (`Backend.view`). Only the backend
 * that made one may be handed it. On the host-memory backends it is a Float32Array; a model
 * never relies on that.
 */
export interface DeviceArray {
  readonly length: number;
  /** a type-level mark only: a host Float32Array is not a DeviceArray until a backend made it one */
  readonly [deviceArrayBrand]: true;
}
declare const deviceArrayBrand: unique symbol;

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

/** element-wise functions (kernels/ops/activations.ts defines each): GELU's tanh form (GPT-2), its erf form (BERT), ReLU, tanh */
export type UnaryOp = "gelu" | "gelu-erf" | "relu" | "tanh";

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
  /** whether matmul takes weights of this type, for backends that do not take every type the reference kernels do (absent: all of them); the loader asks before reading a tensor */
  readonly canMultiply?: (type: GGMLType) => boolean;
  /** the KV cache element types scatterRows and attention take (absent: all of reference/kv-encoding.ts's) */
  readonly kvCacheTypes?: readonly KVCacheType[];
  /**
   * Whether attention reads a cache of this encoding stored as one plane per KV head
   * (KVCacheEncoding.headPlane), which a KV block pool then uses: a head's rows one stream, not a
   * slice of every row (absent: never)
   */
  readonly kvHeadPlanes?: (encoding: KVCacheEncoding, headDim: number) => boolean;
  /**
   * The most bytes one allocActivations array may hold, where the device caps a single buffer
   * below what its memory holds (webgpu: the adapter's maxStorageBufferBindingSize, 128 MiB on
   * many). The load plan checks one layer's K or V array of the KV pool against it, so a context
   * too large is refused at load with one that fits, not at the first request. Absent: no cap
   * beyond memory (reference, wasm: the host memory plan covers them).
   */
  readonly maxBufferBytes?: number;

  // ---- memory ----

  /**
   * Memory for weights, 64-byte aligned, placed where this backend's kernels read it in
   * place (the loader reads tensor bytes from the file straight into it: no second copy).
   * `name` (the tensor's) is for errors, e.g. a tensor too large for the backend's memory.
   */
  allocWeights(byteLength: number, name?: string): Uint8Array;
  /**
   * `length` zeroed floats in the backend's memory (activations, the KV cache). They are
   * recycled once the returned array is garbage-collected, so keep it (not only views of it) alive.
   */
  allocActivations(length: number): DeviceArray;
  /** floats [offset, offset + length) of `a` (default: to its end), sharing its memory */
  view(a: DeviceArray, offset: number, length?: number): DeviceArray;
  /** dst[offset + i] = src[i] (host to backend memory) */
  write(dst: DeviceArray, src: ArrayLike<number>, offset?: number): void;
  /** a fresh host copy of `a`: the synchronisation point (resolves once every op before it has run) */
  read(a: DeviceArray): Promise<Float32Array>;
  /**
   * `read` of several arrays at once: their floats one after another, with one wait. On a GPU one
   * copy of each into one staging buffer and one map, where a read each took a staging buffer and
   * a map of their own (a KV block's rows lie in one range per layer, K or V and KV head plane:
   * 512 of them a block of a 32-layer model with 8 KV heads). Absent: a read each.
   */
  readonly readParts?: (parts: readonly DeviceArray[]) => Promise<Float32Array>;
  /**
   * every float of `a` set to zero. Where the host addresses the memory (reference, wasm) this
   * also backs its pages now rather than at first use: a new KV cache is cleared when made, as
   * llama.cpp clears a new context's KV buffer (a first touch costs ~12 us per 4 KB page on the
   * project's VM). Absent on a GPU, whose buffers are backed when created.
   */
  readonly clear?: (a: DeviceArray) => void;
  /** `read` without waiting, for backends whose memory the host addresses (reference, wasm); absent on a GPU */
  readonly readSync?: (a: DeviceArray) => Float32Array;
  /**
   * dst row dstRows[i] = src[i * width ...] for i < n: the KV cache's writes through its row
   * index. With an `encoding` other than plain f32 each row is stored encoded
   * (reference/kv-encoding.ts: rotated, then rows kvRowFloats(type, width) floats apart, as
   * llama.cpp stores such a cache).
   */
  scatterRows(dst: DeviceArray, dstRows: Int32Array, src: DeviceArray, width: number, n: number, encoding?: KVRowEncoding): void;
  /** dst[i * width ...] = src[srcRows[i] * width ...] for every i (a batch's rows whose logits are wanted, say) */
  gatherRows(dst: DeviceArray, src: DeviceArray, srcRows: ArrayLike<number>, width: number): void;
  /**
   * dst[r * dstStride + dstOffset + j] = src[r * srcStride + srcOffset + j] for r < rows, j < width:
   * a block of columns (a fused projection's q, k or v) copied out, or a block of rows copied.
   * The two ranges must not overlap unless dst and src are the same array and ranges are equal.
   */
  copy2d(dst: DeviceArray, dstOffset: number, dstStride: number, src: DeviceArray, srcOffset: number, srcStride: number, rows: number, width: number): void;

  // ---- ops (kernels/ops/ defines each one's numerics; the reference backend runs exactly those) ----

  /**
   * out[t * rows + r] = sum_c W[r, c] * x[t * cols + c] for every token t < nTokens, then the
   * epilogue. W has dims [cols, rows] (ggml order); x holds nTokens rows of `cols` floats.
   */
  matmul(out: DeviceArray, w: Tensor, x: DeviceArray, nTokens: number, epilogue?: MatmulEpilogue): void;
  /** out[i * cols ...] = W row ids[i], dequantized to f32 (embedding lookup) */
  getRows(out: DeviceArray, w: Tensor, ids: ArrayLike<number>): void;
  /** rmsNorm of kernels/ops/norm.ts over `rows` rows of `width` floats (out may be x; weight null: no scale) */
  rmsNorm(out: DeviceArray, x: DeviceArray, weight: Float32Array | null, width: number, rows: number, eps: number): void;
  /** layerNorm of kernels/ops/norm.ts (out may be x) */
  layerNorm(out: DeviceArray, x: DeviceArray, weight: Float32Array, bias: Float32Array, width: number, rows: number, eps: number): void;
  /** rotary embedding in place, kernels/ops/rope.ts's applyRope: x = nTokens rows of nHeads * p.headDim floats, token t at positions[t] */
  rope(x: DeviceArray, nTokens: number, nHeads: number, positions: ArrayLike<number>, p: RopeParams): void;
  /** x[r * bias.length + i] += bias[i] for r < rows */
  addBias(x: DeviceArray, bias: Float32Array, rows: number): void;
  /** x[i] += y[i] for i < x.length (the residual) */
  add(x: DeviceArray, y: DeviceArray): void;
  /** out[i] = silu(gate[i]) * up[i] for i < n, as kernels/ops/activations.ts's swiglu (same bits) */
  swiglu(out: DeviceArray, gate: DeviceArray, up: DeviceArray, n: number): void;
  /** out[i] = f(x[i]) for i < n (out may be x); "gelu-erf" on the wasm kernel is within 5e-7 of the reference */
  unary(op: UnaryOp, out: DeviceArray, x: DeviceArray, n: number): void;
  /**
   * Causal attention of nTokens queries (at positions startPos...) against cached keys and
   * values, as defined by kernels/ops/attention.ts. keys/values come from allocActivations;
   * position p is their row rows[p] (the paged KV cache's row index), or row p without `rows`.
   * `encoding` (default f32 both): how the rows are stored; any other than f32/f32 is defined by
   * reference/kv-attention.ts (llama.cpp's flash-attention numerics for such caches).
   */
  attention(out: DeviceArray, q: DeviceArray, keys: DeviceArray, values: DeviceArray, nTokens: number, startPos: number, nHeads: number, nKvHeads: number, headDim: number, scale: number, rows?: Int32Array, encoding?: KVCacheEncoding): void;
  /**
   * Bidirectional attention of one sequence's n tokens among themselves (encoders), as defined by
   * kernels/ops/bidirectional-attention.ts: q, k and v hold n rows `stride` floats apart (head h
   * in columns h * headDim ..., so they may be column blocks of one fused projection); out gets n
   * rows of nHeads * headDim.
   */
  bidirectionalAttention(out: DeviceArray, q: DeviceArray, k: DeviceArray, v: DeviceArray, n: number, nHeads: number, headDim: number, scale: number, stride?: number): void;
  /**
   * Why this backend runs no op any more though it was not disposed (the wasm backend: a kernel
   * worker that died; the webgpu backend: its GPU device lost; every op throws this), for a
   * server's health check to say so between requests. Undefined while it runs; absent where a
   * backend does not tell (reference).
   */
  readonly failure?: string;
  /** releases workers and memory; the backend is unusable afterwards */
  dispose(): void;
}

/**
 * Runs `prepare` (synchronous work such as parsing a model's header and building its tokenizer)
 * while `starting`, a backend being created, boots its worker threads and compiles its kernels on
 * the other cores; returns both. An error from `prepare` is the one raised, and a backend that did
 * start is then disposed.
 */
export async function whileBackendStarts<T>(starting: Promise<Backend>, prepare: () => T): Promise<[T, Backend]> {
  let prepared: T;
  try {
    prepared = prepare();
  } catch (e) {
    await starting.then(
      (backend) => backend.dispose(),
      () => undefined,
    );
    throw e;
  }
  return [prepared, await starting];
}
