/** median of a non-empty list (mean of the two middle values for an even count) */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new Error("median of an empty list");
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * The p-th percentile (0..100) of a non-empty list, linearly interpolated between the two
 * nearest ranks (numpy's default), so percentile(xs, 50) is the median.
 */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) throw new Error("percentile of an empty list");
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile must be in 0..100, got ${p}`);
  const s = [...values].sort((a, b) => a - b);
  const at = ((s.length - 1) * p) / 100;
  const lo = Math.floor(at);
  const hi = Math.min(lo + 1, s.length - 1);
  return s[lo]! + (s[hi]! - s[lo]!) * (at - lo);
}

/** the median of each of `metrics` over the samples */
export function medians<M extends string>(samples: readonly Readonly<Record<M, number>>[], metrics: readonly M[]): Record<M, number> {
  const out = {} as Record<M, number>;
  for (const m of metrics) out[m] = median(samples.map((s) => s[m]));
  return out;
}

/** a / b per metric (NaN where b is 0) */
export function ratios<M extends string>(a: Readonly<Record<M, number>>, b: Readonly<Record<M, number>>, metrics: readonly M[]): Record<M, number> {
  const out = {} as Record<M, number>;
  for (const m of metrics) out[m] = b[m] === 0 ? NaN : a[m] / b[m];
  return out;
}

/**
 * The sample fields derived from raw times. No decode steps (`--gen-tokens 0`, llama-bench's
 * -n 0, which skips its tg test) measure no rate: NaN (shown "-", null in JSON), not 0 tok/s.
 */
export function rates(promptTokens: number, prefillMs: number, genTokens: number, decodeMs: number): { prefillTokensPerSecond: number; decodeTokensPerSecond: number } {
  return {
    prefillTokensPerSecond: prefillMs > 0 ? (promptTokens * 1000) / prefillMs : 0,
    decodeTokensPerSecond: genTokens === 0 ? NaN : decodeMs > 0 ? (genTokens * 1000) / decodeMs : 0,
  };
}
