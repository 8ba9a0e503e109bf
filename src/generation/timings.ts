/** What the engine did and how long it took, reported with every generation. */
export interface Timings {
  /** model load time (ms), as measured by loadModel */
  loadMs: number;
  /** tokens in the prompt (after templating and special tokens) */
  promptTokens: number;
  /** tokens generated */
  completionTokens: number;
  /** prefill: the whole prompt in one batched pass (ms) */
  prefillMs: number;
  /** time to first token: prefill + sampling the first token (ms) */
  ttftMs: number;
  /** time per output token after the first: decode ms / (completionTokens - 1) */
  tpotMs: number;
  /** total decode time after the first token (ms) */
  decodeMs: number;
  /** prompt tokens per second during prefill */
  prefillTokensPerSecond: number;
  /** generated tokens per second after the first */
  decodeTokensPerSecond: number;
  /** wall time of the whole generation (ms) */
  totalMs: number;
  /** time the request waited for room in the engine before its prefill began (ms; part of TTFT) */
  queueMs: number;
  /** prompt tokens whose K/V came from the prefix cache (not computed; prefill tokens/s counts the whole prompt) */
  cachedPromptTokens: number;
}

export function computeTimings(
  loadMs: number, promptTokens: number, completionTokens: number, t0: number, tPrefill: number, tFirst: number, tEnd: number,
  engine: { queueMs: number; cachedPromptTokens: number } = { queueMs: 0, cachedPromptTokens: 0 },
): Timings {
  const decodeMs = completionTokens > 0 ? tEnd - tFirst : 0;
  const prefillMs = tPrefill - t0;
  return {
    loadMs: round(loadMs),
    promptTokens,
    completionTokens,
    prefillMs: round(prefillMs),
    ttftMs: round(completionTokens > 0 ? tFirst - t0 : tEnd - t0),
    ...decodeRates(decodeMs, completionTokens),
    decodeMs: round(decodeMs),
    prefillTokensPerSecond: round(prefillMs > 0 ? (promptTokens * 1000) / prefillMs : 0),
    totalMs: round(tEnd - t0),
    queueMs: round(engine.queueMs),
    cachedPromptTokens: engine.cachedPromptTokens,
  };
}

/**
 * the decode rates of `tokens` sampled in `decodeMs` after the first: each token after the first
 * took one decode step (the first came from the prefill's logits), as llama-server's n_gen_steps
 */
export function decodeRates(decodeMs: number, tokens: number): Pick<Timings, "tpotMs" | "decodeTokensPerSecond"> {
  const steps = Math.max(0, tokens - 1);
  return { tpotMs: round(steps > 0 ? decodeMs / steps : 0), decodeTokensPerSecond: round(steps > 0 && decodeMs > 0 ? (steps * 1000) / decodeMs : 0) };
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}

export function formatTimings(t: Timings): string {
  return [
    `load ${t.loadMs.toFixed(1)} ms`,
    `prompt ${t.promptTokens} tok, prefill ${t.prefillMs.toFixed(1)} ms (${t.prefillTokensPerSecond.toFixed(1)} tok/s)`,
    `TTFT ${t.ttftMs.toFixed(1)} ms`,
    `completion ${t.completionTokens} tok, TPOT ${t.tpotMs.toFixed(2)} ms (${t.decodeTokensPerSecond.toFixed(1)} tok/s)`,
  ].join(" | ");
}
