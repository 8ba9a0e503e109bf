import { roundToF16 } from "../../tensor/quant/half.js";
import { attention, checkRows, vecDotF32 } from "../ops/attention.js";
import { expfLibm } from "../ops/expf.js";
import { dotQ4_0Lanes, dotQ8_0 } from "./dot-q8_0.js";
import { hadamardInPlace } from "../ops/hadamard.js";
import { decodeKV, encodeKVRow, halfSidesOf, kvBytes, kvRowFloats, type KVCacheEncoding, type KVCacheType } from "./kv-encoding.js";

/**
 * Causal attention over an encoded KV cache (f16, q8_0 or q4_0 keys and/or values), defined as
 * llama.cpp's CPU flash-attention kernel computes it for one query row at a time
 * (ggml_compute_forward_flash_attn_ext_f16_one_chunk — the path it takes for every quantized
 * cache, and for F16 ones below 512 keys in decode): the query converted to the key type's
 * vec_dot type (q8_0 for q8_0 / q4_0 keys, f16 for f16), each key's score by that type's dot,
 * scaled, then an online softmax in key order — on a new maximum the accumulator is rescaled by
 * expf(old - new), else the key weighs expf(s - max) — with values added as fused multiply-adds
 * into an f32 accumulator (f16 values: into an f16 accumulator, rounded each step, as
 * ggml_vec_mad_f16), and the sum S = S * ms + vs fused too; the result scaled by 1 / S.
 *
 * Block-format rows are stored rotated (reference/kv-encoding.ts): queries turn with the keys,
 * the output turns back with the values, as llama.cpp's graph does around its attention.
 * An f32 side of a mixed cache is computed as f16 (llama.cpp casts it to F16 for flash attention).
 * Caches read in llama.cpp's matrix-product order (no flash attention: f32 and f16 sides) go
 * through kernels/ops/attention.ts instead (attentionMatmulOrder below). Layout: keys/values hold rows of kvRowFloats(type, nKvHeads *
 * headDim) floats (bytes), position p in row rows[p]; head h's slice starts kvBytes(type, h *
 * headDim) bytes into its row.
 */
const f = Math.fround;
/** f32 fused multiply-add: the product of two f32 values is exact in f64, one rounding follows */
const fma = (a: number, b: number, c: number): number => f(a * b + c);

/** the type llama.cpp converts a query head to for keys of `type` (its vec_dot type; f16 for f32 keys, which it casts to F16) */
const queryType = (type: KVCacheType): KVCacheType => (type === "q8_0" || type === "q4_0" ? "q8_0" : "f16");

/** n elements of the row at bytes[offset...] as f32, f32 rows rounded to f16 (llama.cpp casts an f32 side to F16 for flash attention) */
function decodeAsHalves(type: KVCacheType, bytes: Uint8Array, offset: number, n: number, out: Float32Array): Float32Array {
  decodeKV(type, bytes, offset, n, out);
  if (type === "f32") for (let i = 0; i < n; i++) out[i] = roundToF16(out[i]!);
  return out;
}

/** the accumulators of dotF16's 16-lane order */
const lanes = new Float32Array(64);

/**
 * ggml_vec_dot_f16 on x86 over decoded halves: whole steps of 64 in the 16-lane order of
 * ggml_vec_dot_f32, the rest added in f64 (its ggml_float leftovers)
 */
function dotF16(k: Float32Array, q: Float32Array, headDim: number): number {
  const np = headDim & ~63;
  let sum = np > 0 ? vecDotF32(k, 0, 1, q, 0, 1, np, lanes) : 0;
  for (let i = np; i < headDim; i++) sum += k[i]! * q[i]!;
  return f(sum);
}

/** the key dot: the key slice of `type` at kBytes[ko...] against the converted query (its bytes, and as floats for f16/f32 keys) */
function keyDot(type: KVCacheType, kBytes: Uint8Array, ko: number, query: Uint8Array, queryHalves: Float32Array, headDim: number, scratch: Float32Array): number {
  switch (type) {
    case "f32":
    case "f16": return dotF16(decodeAsHalves(type, kBytes, ko, headDim, scratch), queryHalves, headDim);
    case "q8_0": return dotQ8_0(kBytes, ko, query, 0, headDim);
    case "q4_0": return dotQ4_0Lanes(kBytes, ko, query, 0, headDim);
  }
}

/**
 * Attention over f32 / f16 rows in llama.cpp's order without flash attention: the rows of the
 * attended positions decoded to f32 (f16 values are exact there), then ops/attention.ts with the
 * f16 sides marked, which converts the query and the weights as ggml's matrix products do
 */
export const attentionMatmulOrder: typeof attentionEncoded = (out, q, keys, values, nTokens, startPos, nHeads, nKvHeads, headDim, scale, encoding, rows) => {
  const width = nKvHeads * headDim;
  const kRow = 4 * kvRowFloats(encoding.k.type, width), vRow = 4 * kvRowFloats(encoding.v.type, width);
  const nAll = startPos + nTokens;
  checkRows(rows, nAll, Math.min(Math.floor(keys.length / kRow), Math.floor(values.length / vRow)));
  const k32 = new Float32Array(nAll * width), v32 = new Float32Array(nAll * width);
  for (let j = 0; j < nAll; j++) {
    const row = rows ? rows[j]! : j;
    decodeKV(encoding.k.type, keys, row * kRow, width, k32.subarray(j * width));
    decodeKV(encoding.v.type, values, row * vRow, width, v32.subarray(j * width));
  }
  attention(out, q, k32, v32, nTokens, startPos, nHeads, nKvHeads, headDim, scale, undefined, halfSidesOf(encoding));
};

export function attentionEncoded(
  out: Float32Array,
  q: Float32Array,
  keys: Uint8Array,
  values: Uint8Array,
  nTokens: number,
  startPos: number,
  nHeads: number,
  nKvHeads: number,
  headDim: number,
  scale: number,
  encoding: KVCacheEncoding,
  rows?: Int32Array,
): void {
  const types = { k: encoding.k.type, v: encoding.v.type };
  const group = nHeads / nKvHeads;
  const width = nKvHeads * headDim;
  const kRow = 4 * kvRowFloats(types.k, width), vRow = 4 * kvRowFloats(types.v, width);
  const nAll = startPos + nTokens;
  checkRows(rows, nAll, Math.min(Math.floor(keys.length / kRow), Math.floor(values.length / vRow)));
  // llama.cpp casts an f32 side to F16 before flash attention: f32 values accumulate as f16 ones
  const halfValues = types.v === "f16" || types.v === "f32";
  const s0 = f(scale);
  const acc = new Float32Array(headDim), v32 = new Float32Array(headDim), k32 = new Float32Array(headDim), queryHalves = new Float32Array(headDim);
  for (let t = 0; t < nTokens; t++) {
    const nKeys = startPos + t + 1;
    for (let h = 0; h < nHeads; h++) {
      const qo = (t * nHeads + h) * headDim;
      const kvh = Math.floor(h / group);
      const kOff = kvBytes(types.k, kvh * headDim), vOff = kvBytes(types.v, kvh * headDim);
      const qHead = q.slice(qo, qo + headDim);
      // the keys were stored rotated: the query turns with them (their dot is unchanged but for rounding)
      if (encoding.k.rotation > 0) hadamardInPlace(qHead, 0, headDim, encoding.k.rotation);
      const query = new Uint8Array(kvBytes(queryType(types.k), headDim));
      encodeKVRow(queryType(types.k), query, 0, qHead, 0, headDim);
      // f16 queries as floats, once per item
      if (queryType(types.k) === "f16") decodeKV("f16", query, 0, headDim, queryHalves);
      acc.fill(0);
      let S = 0, M = -Infinity;
      for (let j = 0; j < nKeys; j++) {
        const row = rows ? rows[j]! : j;
        const s = f(keyDot(types.k, keys, row * kRow + kOff, query, queryHalves, headDim, k32) * s0);
        let ms = 1, vs = 1;
        if (s > M) {
          ms = expfLibm(M - s);
          M = s;
          // the accumulator is f16 for f16 values: each scaled element rounds to f16 again
          for (let d = 0; d < headDim; d++) acc[d] = halfValues ? roundToF16(f(acc[d]! * ms)) : f(acc[d]! * ms);
        } else {
          vs = expfLibm(f(s - M));
        }
        decodeAsHalves(types.v, values, row * vRow + vOff, headDim, v32);
        for (let d = 0; d < headDim; d++) acc[d] = halfValues ? roundToF16(fma(v32[d]!, vs, acc[d]!)) : fma(v32[d]!, vs, acc[d]!);
        S = fma(S, ms, vs);
      }
      const inv = S === 0 ? 0 : f(1 / S);
      for (let d = 0; d < headDim; d++) out[qo + d] = f(acc[d]! * inv);
      // values were stored rotated: the weighted sum turns back
      if (encoding.v.rotation > 0) hadamardInPlace(out, qo, headDim, encoding.v.rotation);
    }
  }
}

