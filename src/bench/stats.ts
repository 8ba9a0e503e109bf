import { METRICS, type EngineSample, type MetricMedians } from "./types.js";

/** median of a non-empty list (mean of the two middle values for an even count) */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new Error("median of an empty list");
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function medians(samples: readonly EngineSample[]): MetricMedians {
  const out = {} as MetricMedians;
  for (const m of METRICS) out[m] = median(samples.map((s) => s[m]));
  return out;
}

/** a / b per metric (NaN where b is 0) */
export function ratios(a: MetricMedians, b: MetricMedians): MetricMedians {
  const out = {} as MetricMedians;
  for (const m of METRICS) out[m] = b[m] === 0 ? NaN : a[m] / b[m];
  return out;
}

/** index of the first largest value (lowest id wins ties, like llama.cpp's greedy sampler) */
export function argmax(xs: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < xs.length; i++) if (xs[i]! > xs[best]!) best = i;
  return best;
}

/** the sample fields derived from raw times */
export function rates(promptTokens: number, prefillMs: number, genTokens: number, decodeMs: number): { prefillTokensPerSecond: number; decodeTokensPerSecond: number } {
  return {
    prefillTokensPerSecond: prefillMs > 0 ? (promptTokens * 1000) / prefillMs : 0,
    decodeTokensPerSecond: decodeMs > 0 ? (genTokens * 1000) / decodeMs : 0,
  };
}
