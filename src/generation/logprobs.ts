import type { TokenProbabilities } from "../sampling/index.js";
import { OptionError, shownValue } from "../units/index.js";

/**
 * Log-probabilities reported with generated tokens. They are the model's own distribution:
 * log-softmax of the raw logits row, before logit bias, penalties, temperature and truncation
 * (llama.cpp's server reports n_probs the same way unless post-sampling probabilities are
 * requested), so they do not depend on the sampling settings. With `logprobsAfterSampling` they
 * are those of the distribution the token was drawn from instead (sampledLogprobs).
 */
export interface TopLogprob {
  token: number;
  logprob: number;
}

export interface TokenLogprob {
  /** the generated token */
  token: number;
  /** its log-probability under the model */
  logprob: number;
  /** the `k` most likely tokens, best first (lower id first on ties) */
  top: TopLogprob[];
}

/** a scored prompt's logprobs: one entry per prompt token, null for the first (no token before it predicts it) */
export type PromptLogprobs = (TokenLogprob | null)[];

/** the chosen token's logprob and the top `k` of a whole-vocabulary logits row */
export function tokenLogprobs(logits: Float32Array, token: number, k: number): TokenLogprob {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i]! > max) max = logits[i]!;
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! - max);
  const lse = max + Math.log(sum);
  return { token, logprob: logits[token]! - lse, top: topK(logits, k).map((t) => ({ token: t, logprob: logits[t]! - lse })) };
}

/**
 * The chosen token's logprob and the top `k` in the distribution the sampler drew it from (its
 * survivors, best first, with their probabilities after temperature): llama-server's
 * post_sampling_probs. Survivors of probability 0 (a bias of -inf) are not alternatives, as
 * llama-server leaves them out; fewer survivors than `k` give fewer.
 */
export function sampledLogprobs(drawn: TokenProbabilities, token: number, k: number): TokenLogprob {
  let logprob = -Infinity;
  for (let i = 0; i < drawn.ids.length; i++) if (drawn.ids[i] === token) { logprob = Math.log(drawn.probs[i]!); break; }
  const top: TopLogprob[] = [];
  for (let i = 0; i < Math.min(k, drawn.ids.length) && drawn.probs[i]! > 0; i++) top.push({ token: drawn.ids[i]!, logprob: Math.log(drawn.probs[i]!) });
  return { token, logprob, top };
}

/** ids of the k largest values, best first, lower id first on ties (a bounded insertion list) */
function topK(row: Float32Array, k: number): number[] {
  const n = Math.min(k, row.length);
  const best: number[] = [];
  for (let i = 0; i < row.length; i++) {
    const v = row[i]!;
    if (best.length === n) {
      if (n === 0 || !(v > row[best[n - 1]!]!)) continue;
      best.pop();
    }
    let j = best.length;
    while (j > 0 && v > row[best[j - 1]!]!) j--;
    best.splice(j, 0, i);
  }
  return best;
}

export function validateLogprobs(k: unknown, option = "logprobs"): number | undefined {
  if (k === undefined) return undefined;
  if (typeof k !== "number" || !Number.isInteger(k) || k < 0) throw new OptionError(`${option} must be an integer >= 0 (the number of top tokens to report), got ${shownValue(k)}`, option);
  return k;
}
