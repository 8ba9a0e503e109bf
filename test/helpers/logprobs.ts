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

/** the index of the largest value */
export function argmax(x: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i]! > x[best]!) best = i;
  return best;
}

/**
 * tsllm's model stepped along llama.cpp's greedy run: the prompt, then llama.cpp's tokens one by
 * one (so both sides stay on one sequence even after a mismatch). Per step tsllm's argmax, and
 * the max |Δ logprob| against llama.cpp's distribution: after the prompt and the first `compared`
 * decode steps.
 */
export function stepAlongLlamaCpp<C>(
  lm: { forward(tokens: number[], cache: C): Float32Array },
  cache: C,
  prompt: number[],
  ref: { readonly promptLogprobs: Float64Array; readonly stepLogprobs: readonly Float64Array[]; readonly greedyTokens: readonly number[] },
  steps: number,
  compared = steps,
): { diffs: number[]; ours: number[] } {
  let logits = lm.forward(prompt, cache);
  const diffs = [maxLogprobDiff(logSoftmax(logits), ref.promptLogprobs)];
  const ours = [argmax(logits)];
  for (let i = 0; i + 1 < steps; i++) {
    logits = lm.forward([ref.greedyTokens[i]!], cache);
    ours.push(argmax(logits));
    if (i < compared) diffs.push(maxLogprobDiff(logSoftmax(logits), ref.stepLogprobs[i]!));
  }
  return { diffs, ours };
}
