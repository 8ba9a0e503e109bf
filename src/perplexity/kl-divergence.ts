import type { LanguageModel } from "../models/index.js";
import { effectiveBatch, scoredLogits } from "./evaluate.js";
import { argmaxOf, logSoftmaxInto } from "./log-softmax.js";
import { MeanAccumulator } from "./stats.js";
import { planWindows, windowTokens } from "./windows.js";

export interface KlDivergenceOptions {
  ctx: number;
  batch?: number;
  bosId?: number;
  chunks?: number;
  onChunk?: (progress: KlDivergenceProgress) => void;
  signal?: AbortSignal;
}

export interface KlDivergenceProgress {
  chunk: number;
  chunks: number;
  perplexity: number;
  meanKl: number;
  sameTop: number;
}

/** a mean and its standard error */
export interface Estimate {
  value: number;
  standardError: number;
}

export interface KlDivergenceResult {
  /** perplexity of the model under test (the quantized one) */
  perplexity: Estimate;
  /** perplexity of the base (full-precision) model over the same tokens */
  basePerplexity: Estimate;
  /** mean over scored positions of KL(base || model) = sum_v p_base(v) (log p_base(v) - log p(v)), nats */
  meanKl: Estimate;
  /** largest per-position KL */
  maxKl: number;
  /** fraction of scored positions where both models' most likely token (argmax, lowest id on ties) agree */
  sameTop: Estimate;
  tokens: number;
  chunks: number;
  ctx: number;
  batch: number;
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Compares `model` against `base` as llama.cpp's `perplexity --kl-divergence` does: same
 * windows and scored positions as perplexity, and per position the KL divergence of the
 * model's next-token distribution from the base's, the NLL of the true next token under each,
 * and whether their top tokens agree. Differences from llama.cpp: both models run here (no
 * saved base-logits file) and the base log-probabilities are kept in float64 instead of
 * llama.cpp's 16-bit quantized copy (which also drops base terms with p < e^-16).
 */
export async function computeKlDivergence(model: LanguageModel, base: LanguageModel, tokens: readonly number[], options: KlDivergenceOptions): Promise<KlDivergenceResult> {
  const vocab = model.info.vocabSize;
  if (base.info.vocabSize !== vocab) {
    throw new RangeError(`--kl-divergence: the model's vocabulary has ${vocab} tokens but the base model's has ${base.info.vocabSize}`);
  }
  const plan = planWindows(tokens.length, options.ctx, options.chunks);
  const batch = effectiveBatch(options.batch, plan.ctx);
  const cache = model.createCache(plan.ctx);
  const baseCache = base.createCache(plan.ctx);
  const nll = new MeanAccumulator();
  const nllBase = new MeanAccumulator();
  const kl = new MeanAccumulator();
  const same = new MeanAccumulator();
  let maxKl = 0;
  const lp = new Float64Array(vocab);
  const lpBase = new Float64Array(vocab);
  for (let i = 0; i < plan.chunks; i++) {
    if (options.signal?.aborted) throw new Error("kl-divergence: aborted");
    const window = windowTokens(tokens, plan, i, options.bosId);
    const rows = await scoredLogits(model, cache, window, plan, batch);
    const baseRows = await scoredLogits(base, baseCache, window, plan, batch);
    for (let r = 0; r < plan.scoredPerChunk; r++) {
      const target = tokens[i * plan.ctx + plan.first + r + 1]!;
      logSoftmaxInto(lp, rows.subarray(r * vocab, (r + 1) * vocab));
      logSoftmaxInto(lpBase, baseRows.subarray(r * vocab, (r + 1) * vocab));
      nll.add(-lp[target]!);
      nllBase.add(-lpBase[target]!);
      let d = 0;
      for (let v = 0; v < vocab; v++) {
        const pb = Math.exp(lpBase[v]!);
        if (pb > 0) d += pb * (lpBase[v]! - lp[v]!);
      }
      kl.add(d);
      if (d > maxKl) maxKl = d;
      same.add(argmaxOf(lp) === argmaxOf(lpBase) ? 1 : 0);
    }
    options.onChunk?.({ chunk: i + 1, chunks: plan.chunks, perplexity: Math.exp(nll.mean), meanKl: kl.mean, sameTop: same.mean });
    await yieldToEventLoop();
  }
  const pplOf = (a: MeanAccumulator): Estimate => {
    const value = Math.exp(a.mean);
    return { value, standardError: value * a.standardError };
  };
  return {
    perplexity: pplOf(nll),
    basePerplexity: pplOf(nllBase),
    meanKl: { value: kl.mean, standardError: kl.standardError },
    maxKl,
    // a binomial proportion's standard error, as llama.cpp's "Same top p"
    sameTop: { value: same.mean, standardError: same.count > 1 ? Math.sqrt((same.mean * (1 - same.mean)) / (same.count - 1)) : 0 },
    tokens: nll.count,
    chunks: plan.chunks,
    ctx: plan.ctx,
    batch,
  };
}
