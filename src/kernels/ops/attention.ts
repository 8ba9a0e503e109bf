import { roundToF16 } from "../../tensor/quant/half.js";
import { expfGgml } from "./activations.js";

/**
 * Causal scaled-dot-product attention for a batch of query tokens against the KV cache.
 *
 * q: nTokens rows of nHeads * headDim. The cache holds rows of nKvHeads * headDim; position p
 * (p < startPos + nTokens) is row rows[p] (the paged cache's row index; without it row p).
 * Query token t sits at position startPos + t and sees positions <= its own. Grouped-query
 * attention: head h reads kv head floor(h / group) directly from the cache — nothing is copied
 * per head. Where the rows lie changes no arithmetic: positions are visited in order.
 *
 * This is the plain-TS spec, and it adds in the order llama.cpp's x86 CPU backend does (no
 * flash attention, F32 cache): q.k as ggml_vec_dot_f32 (four 16-lane FMA accumulators per 64
 * elements, then a tree sum), softmax with ggml_v_expf and 16-lane partial sums, and the
 * weighted sum of values as llamafile's tinyBLAS for a batch of >= 2 query tokens (one 16-lane
 * FMA accumulator) or ggml_vec_dot_f32 for a single token. An ulp here can flip the rounding
 * of the next layer's quantized activations, so matching the order is what makes Q8_0 models
 * agree with llama.cpp to the last bit rather than to ~1e-2.
 *
 * `halves` is the same order over an f16 cache (llama.cpp's default cache, no flash attention;
 * kCache / vCache then hold the f16 values as f32): ggml's matrix product converts the other
 * operand to f16 first — the query for f16 keys, the softmax weights for f16 values — and a batch
 * of >= 2 query tokens takes tinyBLAS for q.k as well (one 16-lane accumulator over the head),
 * one token ggml_vec_dot_f16 (vec_dot_f32's order, the elements past the last 64 added in f64).
 */
const f = Math.fround;
const LANES = 16;

/** _mm512_reduce_add_ps as GCC implements it: halves added down to one lane */
function reduce16(v: Float64Array | Float32Array): number {
  const a0 = f(v[8]! + v[0]!), a1 = f(v[9]! + v[1]!), a2 = f(v[10]! + v[2]!), a3 = f(v[11]! + v[3]!);
  const a4 = f(v[12]! + v[4]!), a5 = f(v[13]! + v[5]!), a6 = f(v[14]! + v[6]!), a7 = f(v[15]! + v[7]!);
  const b0 = f(a4 + a0), b1 = f(a5 + a1), b2 = f(a6 + a2), b3 = f(a7 + a3);
  return f(f(b0 + b2) + f(b1 + b3));
}

/** ggml_vec_dot_f32 (AVX-512): x[xo + i * xs] . y[yo + i * ys] for i < n */
export function vecDotF32(x: Float32Array, xo: number, xs: number, y: Float32Array, yo: number, ys: number, n: number, acc: Float32Array): number {
  const np = n & ~63;
  acc.fill(0);
  for (let i = 0; i < np; i += 64) {
    for (let j = 0; j < 4; j++) {
      for (let l = 0; l < LANES; l++) {
        const e = i + j * LANES + l;
        acc[j * LANES + l] = f(x[xo + e * xs]! * y[yo + e * ys]! + acc[j * LANES + l]!);
      }
    }
  }
  for (let l = 0; l < LANES; l++) {
    acc[l] = f(acc[l]! + acc[2 * LANES + l]!);
    acc[LANES + l] = f(acc[LANES + l]! + acc[3 * LANES + l]!);
  }
  for (let l = 0; l < LANES; l++) acc[l] = f(acc[l]! + acc[LANES + l]!);
  let sum = np > 0 ? reduce16(acc.subarray(0, LANES)) : 0;
  for (let i = np; i < n; i++) sum = f(sum + f(x[xo + i * xs]! * y[yo + i * ys]!));
  return sum;
}

/** which sides of the cache hold f16 values (attention's `halves`) */
export interface HalfSides {
  readonly keys: boolean;
  readonly values: boolean;
}

/** one 16-lane fused multiply-add accumulator over n elements, then reduce16: tinyBLAS's dot (n a multiple of 16) */
function tinyBlasDot(x: Float32Array, xo: number, y: Float32Array, yo: number, n: number, acc: Float32Array): number {
  acc.fill(0, 0, LANES);
  for (let i = 0; i < n; i += LANES) {
    for (let l = 0; l < LANES; l++) acc[l] = f(x[xo + i + l]! * y[yo + i + l]! + acc[l]!);
  }
  return reduce16(acc.subarray(0, LANES));
}

/** ggml_vec_dot_f16 over values already converted: vec_dot_f32's order for whole 64s, the rest added in f64 */
function vecDotF16(x: Float32Array, xo: number, y: Float32Array, yo: number, n: number, acc: Float32Array): number {
  const np = n & ~63;
  let sum = np > 0 ? vecDotF32(x, xo, 1, y, yo, 1, np, acc) : 0;
  for (let i = np; i < n; i++) sum += f(x[xo + i]! * y[yo + i]!);
  return f(sum);
}

/** throws unless positions [0, nAll) all have a row (rows[p], or p) among the cache's cacheRows */
export function checkRows(rows: Int32Array | undefined, nAll: number, cacheRows: number): void {
  if (rows && rows.length < nAll) throw new Error(`attention: the row index holds ${rows.length} positions, ${nAll} are attended`);
  for (let j = 0; j < nAll; j++) {
    const r = rows ? rows[j]! : j;
    if (!(r >= 0 && r < cacheRows)) throw new Error(`attention: position ${j} maps to row ${r}, outside the cache's ${cacheRows} rows`);
  }
}

export function attention(
  out: Float32Array,
  q: Float32Array,
  kCache: Float32Array,
  vCache: Float32Array,
  nTokens: number,
  startPos: number,
  nHeads: number,
  nKvHeads: number,
  headDim: number,
  scale: number,
  rows?: Int32Array,
  halves?: HalfSides,
): void {
  const group = nHeads / nKvHeads;
  const kvStride = nKvHeads * headDim;
  const nAll = startPos + nTokens;
  // first float of each position's row
  const base = new Float64Array(nAll);
  checkRows(rows, nAll, Math.floor(Math.min(kCache.length, vCache.length) / kvStride));
  for (let j = 0; j < nAll; j++) base[j] = (rows ? rows[j]! : j) * kvStride;
  // llama.cpp pads the keys it attends over; padded keys weigh exactly 0, so padding to the
  // next multiple of 64 reproduces its lane layout
  const padded = Math.ceil(nAll / 64) * 64;
  const p = new Float32Array(padded);
  const column = new Float32Array(padded);
  const acc = new Float32Array(4 * LANES);
  const s = f(scale);
  // f16 keys: the query converted to f16; a batch's q.k by tinyBLAS where the head takes whole vectors
  const query = halves?.keys ? q.map(roundToF16) : q;
  const keysByTinyBlas = halves?.keys === true && nTokens >= 2 && headDim % LANES === 0;
  const keyDot = (kOff: number, qo: number): number =>
    !halves?.keys ? vecDotF32(kCache, kOff, 1, q, qo, 1, headDim, acc) : keysByTinyBlas ? tinyBlasDot(kCache, kOff, query, qo, headDim, acc) : vecDotF16(kCache, kOff, query, qo, headDim, acc);
  for (let t = 0; t < nTokens; t++) {
    const nKeys = startPos + t + 1;
    for (let h = 0; h < nHeads; h++) {
      const qo = (t * nHeads + h) * headDim;
      const kvOff = Math.floor(h / group) * headDim;
      // scores, scaled; masked positions are -inf
      let max = -Infinity;
      p.fill(-Infinity);
      for (let j = 0; j < nKeys; j++) {
        const w = f(keyDot(base[j]! + kvOff, qo) * s);
        p[j] = w;
        if (w > max) max = w;
      }
      // softmax: exp in 16-lane chunks, each chunk's sum added in f64
      let sum = 0;
      for (let c = 0; c < padded; c += LANES) {
        for (let l = 0; l < LANES; l++) p[c + l] = expfGgml(f(p[c + l]! - max));
        sum += reduce16(p.subarray(c, c + LANES));
      }
      const inv = f(1 / sum);
      for (let j = 0; j < padded; j++) p[j] = f(p[j]! * inv);
      // f16 values: the weights converted to f16 first
      if (halves?.values) for (let j = 0; j < padded; j++) p[j] = roundToF16(p[j]!);
      // weighted sum of the values, per output dimension d
      for (let d = 0; d < headDim; d++) {
        const vo = kvOff + d;
        let r: number;
        if (nTokens >= 2 && headDim % 4 === 0) {
          // tinyBLAS: one 16-lane accumulator over the positions, then the tree sum
          acc.fill(0, 0, LANES);
          for (let c = 0; c < padded; c += LANES) {
            for (let l = 0; l < LANES; l++) {
              const j = c + l;
              const v = j < nAll ? vCache[base[j]! + vo]! : 0;
              acc[l] = f(v * p[j]! + acc[l]!);
            }
          }
          r = reduce16(acc.subarray(0, LANES));
        } else {
          for (let j = 0; j < padded; j++) column[j] = j < nAll ? vCache[base[j]! + vo]! : 0;
          r = vecDotF32(column, 0, 1, p, 0, 1, padded, acc);
        }
        out[qo + d] = r;
      }
    }
  }
}
