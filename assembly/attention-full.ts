// Bidirectional attention (encoders) of one sequence, one head per item, as two matrix products
// on the F32 matmul tiles (float.ts) with a two-pass softmax between them:
//   S = Q_h K_h^T, P = softmax(scale S) row by row, O_h = P V_h.
// The per-(query, key) online softmax of attention.ts streams every key through a scalar update
// (~19 GFLOP/s on MiniLM's 128-token heads); here both products run at the tiles' rate and the
// exps four lanes at a time. Each thread works in its own scratch slot: the head's queries
// (gathered contiguous), the scores, the values transposed and the head's output.
import { matF32 } from "./float";
import { expNeg4 } from "./attention";

/** bytes of one thread's slot for n tokens of headDim */
export function attendFullScratchBytes(n: i32, headDim: i32): usize {
  return (<usize>(3 * n * headDim + n * n) << 2) + 64;
}

/**
 * Heads [h0, h1): qkv holds n rows `rowBytes` apart, each the token's queries, keys and values
 * (d = nHeads * headDim floats each; head h in columns h * headDim ... of each); out gets n rows
 * of d floats; slot: this thread's scratch of attendFullScratchBytes(n, headDim) bytes.
 */
export function attendFull(qkv: usize, rowBytes: usize, out: usize, nHeads: i32, headDim: i32, n: i32, scale: f32, h0: i32, h1: i32, slot: usize): void {
  const dBytes = (<usize>(nHeads * headDim)) << 2;
  const q = qkv, k = qkv + dBytes, v = qkv + 2 * dBytes;
  const headBytes = (<usize>headDim) << 2;
  const qh = slot;
  const s = qh + ((<usize>(n * headDim)) << 2);
  const vt = s + ((<usize>(n * n)) << 2);
  const oh = vt + ((<usize>(n * headDim)) << 2);
  const nBytes = (<usize>n) << 2;
  for (let h = h0; h < h1; h++) {
    const col = (<usize>h) * headBytes;
    for (let t = 0; t < n; t++) memory.copy(qh + <usize>t * headBytes, q + <usize>t * rowBytes + col, headBytes);
    // scores: the keys as the weight rows (rowBytes apart), the queries as the tokens
    matF32(k + col, rowBytes, qh, s, n, headDim, n, 0, n);
    for (let t = 0; t < n; t++) softmaxRow(s + <usize>t * nBytes, n, scale);
    for (let j = 0; j < n; j++) {
      const src = v + <usize>j * rowBytes + col;
      for (let e = 0; e < headDim; e++) store<f32>(vt + <usize>e * nBytes + (<usize>j << 2), load<f32>(src + (<usize>e << 2)));
    }
    // output: the transposed values as the weight rows, the probabilities as the tokens
    matF32(vt, nBytes, s, oh, headDim, n, n, 0, headDim);
    for (let t = 0; t < n; t++) memory.copy(out + <usize>t * dBytes + col, oh + <usize>t * headBytes, headBytes);
  }
}

/** p = softmax(scale s) over n floats in place: the max, exps four lanes at a time, their sum, one reciprocal */
function softmaxRow(p: usize, n: i32, scale: f32): void {
  const sc = f32x4.splat(scale);
  let m: f32 = -Infinity;
  let i = 0;
  let mv = f32x4.splat(-Infinity);
  for (; i + 4 <= n; i += 4) {
    const x = f32x4.mul(v128.load(p + (<usize>i << 2)), sc);
    v128.store(p + (<usize>i << 2), x);
    mv = f32x4.max(mv, x);
  }
  m = max<f32>(max<f32>(f32x4.extract_lane(mv, 0), f32x4.extract_lane(mv, 1)), max<f32>(f32x4.extract_lane(mv, 2), f32x4.extract_lane(mv, 3)));
  for (; i < n; i++) {
    const x = load<f32>(p + (<usize>i << 2)) * scale;
    store<f32>(p + (<usize>i << 2), x);
    m = max<f32>(m, x);
  }
  const mm = f32x4.splat(m);
  let sv = f32x4.splat(0);
  i = 0;
  for (; i + 4 <= n; i += 4) {
    const e = expNeg4(f32x4.sub(v128.load(p + (<usize>i << 2)), mm));
    v128.store(p + (<usize>i << 2), e);
    sv = f32x4.add(sv, e);
  }
  let sum: f32 = (f32x4.extract_lane(sv, 0) + f32x4.extract_lane(sv, 1)) + (f32x4.extract_lane(sv, 2) + f32x4.extract_lane(sv, 3));
  for (; i < n; i++) {
    const e = f32x4.extract_lane(expNeg4(f32x4.splat(load<f32>(p + (<usize>i << 2)) - m)), 0);
    store<f32>(p + (<usize>i << 2), e);
    sum += e;
  }
  const inv = f32x4.splat(<f32>1 / sum);
  i = 0;
  for (; i + 4 <= n; i += 4) v128.store(p + (<usize>i << 2), f32x4.mul(v128.load(p + (<usize>i << 2)), inv));
  for (; i < n; i++) store<f32>(p + (<usize>i << 2), load<f32>(p + (<usize>i << 2)) * f32x4.extract_lane(inv, 0));
}
