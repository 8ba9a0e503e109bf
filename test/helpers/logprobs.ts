// Shared by the tests that compare next-token distributions.

/** log-softmax of one logits row, in float64 */
export function logSoftmax(logits: Float32Array): Float64Array {
  let max = -Infinity;
  for (const v of logits) max = Math.max(max, v);
  let sum = 0;
  for (const v of logits) sum += Math.exp(v - max);
  const lse = max + Math.log(sum);
  return Float64Array.from(logits, (v) => v - lse);
}

/** max |ours - theirs| over the tokens whose reference log-probability is finite (did not underflow) */
export function maxLogprobDiff(ours: Float64Array, theirs: Float64Array): number {
  if (ours.length !== theirs.length) throw new Error(`vocabulary sizes differ: ${ours.length} vs ${theirs.length}`);
  let m = 0;
  for (let i = 0; i < ours.length; i++) if (Number.isFinite(theirs[i]!)) m = Math.max(m, Math.abs(ours[i]! - theirs[i]!));
  return m;
}
