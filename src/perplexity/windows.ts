/**
 * llama.cpp's perplexity windows: the token stream (tokenized once, BOS first when the
 * vocabulary adds one) is cut into floor(n / ctx) non-overlapping windows of ctx tokens; each
 * window's first token is replaced by BOS (when the model adds BOS) and is evaluated from an
 * empty cache. Only the second half is scored: the logits at positions first..ctx-2
 * (first = floor(ctx / 2)) predict the tokens at first+1..ctx-1, so every scored token has at
 * least ctx/2 tokens of context. Each window scores ctx - 1 - first tokens.
 */
import { OptionError, shownValue } from "../units/index.js";

export interface WindowPlan {
  readonly ctx: number;
  /** windows to evaluate */
  readonly chunks: number;
  /** position of the first logits row that is scored */
  readonly first: number;
  /** tokens scored per window */
  readonly scoredPerChunk: number;
}

export function planWindows(nTokens: number, ctx: number, maxChunks?: number): WindowPlan {
  if (!Number.isInteger(ctx) || ctx < 4) throw new OptionError(`ctx must be an integer >= 4, got ${shownValue(ctx)}`, "ctx");
  if (nTokens < 2 * ctx) {
    throw new RangeError(`perplexity with a context of ${ctx} needs at least ${2 * ctx} tokens; the text tokenizes to only ${nTokens}`);
  }
  if (maxChunks !== undefined && (!Number.isInteger(maxChunks) || maxChunks < 1)) {
    throw new OptionError(`chunks must be a positive integer, got ${shownValue(maxChunks)}`, "chunks");
  }
  const all = Math.floor(nTokens / ctx);
  const first = Math.floor(ctx / 2);
  return { ctx, chunks: maxChunks === undefined ? all : Math.min(all, maxChunks), first, scoredPerChunk: ctx - 1 - first };
}

/** the tokens window `i` evaluates: tokens[i*ctx, (i+1)*ctx) with the first replaced by `bosId` when given */
export function windowTokens(tokens: readonly number[], plan: WindowPlan, i: number, bosId: number | undefined): number[] {
  const w = tokens.slice(i * plan.ctx, (i + 1) * plan.ctx);
  if (bosId !== undefined) w[0] = bosId;
  return w;
}
