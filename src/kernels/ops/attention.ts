/**
 * Causal scaled-dot-product attention for a batch of query tokens against the KV cache.
 *
 * q: nTokens rows of nHeads * headDim. The cache holds rows of nKvHeads * headDim for
 * positions [0, startPos + nTokens). Query token t sits at position startPos + t and sees
 * positions <= its own. Grouped-query attention: head h reads kv head floor(h / group)
 * directly from the cache — nothing is copied per head.
 *
 * The softmax streams over the keys with a running max and sum (online softmax), so the
 * memory used is one score tile, not context x context.
 */
const TILE = 256;

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
  scores: Float32Array = new Float32Array(TILE),
): void {
  const group = nHeads / nKvHeads;
  const kvStride = nKvHeads * headDim;
  const acc = new Float64Array(headDim);
  for (let t = 0; t < nTokens; t++) {
    const nKeys = startPos + t + 1;
    for (let h = 0; h < nHeads; h++) {
      const qo = (t * nHeads + h) * headDim;
      const kvOff = Math.floor(h / group) * headDim;
      let runningMax = -Infinity;
      let runningSum = 0;
      acc.fill(0);
      for (let tileStart = 0; tileStart < nKeys; tileStart += TILE) {
        const tileEnd = Math.min(nKeys, tileStart + TILE);
        let tileMax = -Infinity;
        for (let j = tileStart; j < tileEnd; j++) {
          const ko = j * kvStride + kvOff;
          let dot = 0;
          for (let d = 0; d < headDim; d++) dot += q[qo + d]! * kCache[ko + d]!;
          const s = Math.fround(Math.fround(dot) * scale);
          scores[j - tileStart] = s;
          if (s > tileMax) tileMax = s;
        }
        const newMax = Math.max(runningMax, tileMax);
        const correction = runningMax === -Infinity ? 0 : Math.exp(runningMax - newMax);
        runningSum *= correction;
        for (let d = 0; d < headDim; d++) acc[d]! *= correction;
        for (let j = tileStart; j < tileEnd; j++) {
          const p = Math.exp(scores[j - tileStart]! - newMax);
          runningSum += p;
          const vo = j * kvStride + kvOff;
          for (let d = 0; d < headDim; d++) acc[d]! += p * vCache[vo + d]!;
        }
        runningMax = newMax;
      }
      const inv = 1 / runningSum;
      for (let d = 0; d < headDim; d++) out[qo + d] = acc[d]! * inv;
    }
  }
}
