/**
 * Bidirectional (encoder) scaled-dot-product attention over one sequence: every token sees every
 * token of its own sequence and nothing else, which is what a padding mask computes for the
 * real rows of a padded batch (padded keys get weight exp(-inf) = 0), without the padding.
 *
 * q, k, v, out: n rows of nHeads * headDim (head h in columns h * headDim ...), each row
 * `stride` floats apart (so Q, K and V can be column blocks of one fused projection).
 * Scores, softmax and the weighted sum are accumulated in float64.
 */
export function bidirectionalAttention(
  out: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array,
  n: number, nHeads: number, headDim: number, scale: number, stride = nHeads * headDim,
): void {
  const d = nHeads * headDim;
  const w = new Float64Array(n);
  const acc = new Float64Array(headDim);
  for (let h = 0; h < nHeads; h++) {
    const c = h * headDim;
    for (let i = 0; i < n; i++) {
      const qi = i * stride + c;
      let max = -Infinity;
      for (let j = 0; j < n; j++) {
        const kj = j * stride + c;
        let s = 0;
        for (let e = 0; e < headDim; e++) s += q[qi + e]! * k[kj + e]!;
        s *= scale;
        w[j] = s;
        if (s > max) max = s;
      }
      let sum = 0;
      for (let j = 0; j < n; j++) {
        const e = Math.exp(w[j]! - max);
        w[j] = e;
        sum += e;
      }
      acc.fill(0);
      for (let j = 0; j < n; j++) {
        const p = w[j]! / sum, vj = j * stride + c;
        for (let e = 0; e < headDim; e++) acc[e] += p * v[vj + e]!;
      }
      const o = i * d + c;
      for (let e = 0; e < headDim; e++) out[o + e] = acc[e]!;
    }
  }
}
