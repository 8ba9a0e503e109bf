import type { LanguageModel } from "../models/index.js";
import { effectiveBatch, scoredLogits } from "./evaluate.js";
import { tokenNll } from "./log-softmax.js";
import { MeanAccumulator } from "./stats.js";
import { planWindows, windowTokens } from "./windows.js";

export interface PerplexityOptions {
  /** window size in tokens (llama.cpp's --ctx-size; its default is 512) */
  ctx: number;
  /** tokens per forward pass (default: the whole window) */
  batch?: number;
  /** BOS id written over each window's first token; leave undefined for models without BOS */
  bosId?: number;
  /** evaluate at most this many windows (llama.cpp's --chunks) */
  chunks?: number;
  /** called after each window with the running estimate */
  onChunk?: (progress: PerplexityProgress) => void;
  signal?: AbortSignal;
}

export interface PerplexityProgress {
  /** 1-based index of the window just finished */
  chunk: number;
  chunks: number;
  /** exp(mean NLL) over every token scored so far */
  perplexity: number;
}

export interface PerplexityResult {
  /** exp of the mean negative log-likelihood of the scored tokens */
  perplexity: number;
  /** standard error of the perplexity: ppl x SE(mean NLL), as llama.cpp reports it */
  standardError: number;
  /** mean negative log-likelihood (nats per token) */
  meanNll: number;
  /** tokens scored (chunks x (ctx - 1 - ctx/2)) */
  tokens: number;
  /** windows evaluated */
  chunks: number;
  ctx: number;
  batch: number;
  /** the running estimate after each window */
  runningPerplexity: number[];
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Perplexity as llama.cpp's `perplexity` tool computes it (see windows.ts for the windows and
 * the scored half). `tokens` is the whole text tokenized once, BOS first when the model adds it.
 */
export async function computePerplexity(model: LanguageModel, tokens: readonly number[], options: PerplexityOptions): Promise<PerplexityResult> {
  const plan = planWindows(tokens.length, options.ctx, options.chunks);
  const batch = effectiveBatch(options.batch, plan.ctx);
  const vocab = model.info.vocabSize;
  const cache = model.createCache(plan.ctx);
  const nll = new MeanAccumulator();
  const running: number[] = [];
  for (let i = 0; i < plan.chunks; i++) {
    if (options.signal?.aborted) throw new Error("perplexity: aborted");
    const window = windowTokens(tokens, plan, i, options.bosId);
    const rows = await scoredLogits(model, cache, window, plan, batch);
    for (let r = 0; r < plan.scoredPerChunk; r++) {
      // the original text token (not the BOS substitute) is the target
      const target = tokens[i * plan.ctx + plan.first + r + 1]!;
      nll.add(tokenNll(rows.subarray(r * vocab, (r + 1) * vocab), target));
    }
    const ppl = Math.exp(nll.mean);
    running.push(ppl);
    options.onChunk?.({ chunk: i + 1, chunks: plan.chunks, perplexity: ppl });
    await yieldToEventLoop();
  }
  const perplexity = Math.exp(nll.mean);
  return {
    perplexity,
    standardError: perplexity * nll.standardError,
    meanNll: nll.mean,
    tokens: nll.count,
    chunks: plan.chunks,
    ctx: plan.ctx,
    batch,
    runningPerplexity: running,
  };
}
