/**
 * Bidirectional (encoder) scaled-dot-product attention over one sequence: every token sees every
 * token of its own sequence and nothing else, which is what a padding mask computes for the
 * real rows of a padded batch (padded keys get weight exp(-inf) = 0), without the padding.
 *
 * q, k, v, out: n rows of nHeads * headDim (head h in columns h * headDim ...), each row
 * `stride` floats apart (so Q, K and V can be column blocks of one fused projection).
 * Scores, softmax and the weighted sum are accumulated in float64 (JS numbers). Each head's
 * keys and values are first copied contiguous ([n][headDim]), so the inner loops run over
 * consecutive floats, and the scores are computed four keys at a time.
 */
export function bidirectionalAttention(
  out: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array,
  n: number, nHeads: number, headDim: number, scale: number, stride = nHeads * headDim,
): void {
  const d = nHeads * headDim;
  const kh = new Float64Array(n * headDim), vh = new Float64Array(n * headDim);
  const w = new Float64Array(n), qi = new Float64Array(headDim), acc = new Float64Array(headDim);
  for (let h = 0; h < nHeads; h++) {
    const c = h * headDim;
    for (let j = 0; j < n; j++) {
      const r = j * stride + c, o = j * headDim;
      for (let e = 0; e < headDim; e++) {
        kh[o + e] = k[r + e]!;
        vh[o + e] = v[r + e]!;
      }
    }
    for (let i = 0; i < n; i++) {
      const r = i * stride + c;
      for (let e = 0; e < headDim; e++) qi[e] = q[r + e]!;
      // four keys at a time: four independent sums over consecutive floats (each summed in e order)
      let j = 0;
      for (; j + 4 <= n; j += 4) {
        const o0 = j * headDim, o1 = o0 + headDim, o2 = o1 + headDim, o3 = o2 + headDim;
        let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (let e = 0; e < headDim; e++) {
          const qe = qi[e]!;
          s0 += qe * kh[o0 + e]!;
          s1 += qe * kh[o1 + e]!;
          s2 += qe * kh[o2 + e]!;
          s3 += qe * kh[o3 + e]!;
        }
        w[j] = s0; w[j + 1] = s1; w[j + 2] = s2; w[j + 3] = s3;
      }
      for (; j < n; j++) {
        const o = j * headDim;
        let s0 = 0;
        for (let e = 0; e < headDim; e++) s0 += qi[e]! * kh[o + e]!;
        w[j] = s0;
      }
      let max = -Infinity;
      for (let j = 0; j < n; j++) {
        const s = w[j]! * scale;
        w[j] = s;
        if (s > max) max = s;
      }
      let sum = 0;
      for (let j = 0; j < n; j++) {
        const x = Math.exp(w[j]! - max);
        w[j] = x;
        sum += x;
      }
      acc.fill(0);
      for (let j = 0; j < n; j++) {
        const p = w[j]! / sum, o = j * headDim;
        for (let e = 0; e < headDim; e++) acc[e] = acc[e]! + p * vh[o + e]!;
      }
      const o = i * d + c;
      for (let e = 0; e < headDim; e++) out[o + e] = acc[e]!;
    }
  }
}
