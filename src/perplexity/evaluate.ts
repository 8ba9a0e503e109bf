import type { KVCache } from "../cache/index.js";
import type { LanguageModel } from "../models/index.js";
import { OptionError, shownValue } from "../units/index.js";
import type { WindowPlan } from "./windows.js";

/**
 * Runs one window through the model from an empty cache, `batch` tokens per forward pass, and
 * returns (on any backend: the reads are awaited) the logits rows of the scored positions (plan.scoredPerChunk rows of vocab floats,
 * row r belonging to position plan.first + r). Passes that end before the scored half ask
 * only for their last row, so their LM-head work is skipped.
 */
export async function scoredLogits(model: LanguageModel, cache: KVCache, window: readonly number[], plan: WindowPlan, batch: number): Promise<Float32Array> {
  const vocab = model.info.vocabSize;
  const lastScored = plan.ctx - 2;
  const out = new Float32Array(plan.scoredPerChunk * vocab);
  cache.truncate(0);
  for (let start = 0; start < window.length; start += batch) {
    const part = window.slice(start, start + batch);
    const end = start + part.length; // exclusive
    const overlaps = end > plan.first && start <= lastScored;
    const logits = await model.forwardAsync(part, cache, { allLogits: overlaps });
    if (!overlaps) continue;
    // rows of this pass that fall in [first, lastScored]
    const from = Math.max(start, plan.first);
    const to = Math.min(end - 1, lastScored);
    for (let pos = from; pos <= to; pos++) {
      out.set(logits.subarray((pos - start) * vocab, (pos - start + 1) * vocab), (pos - plan.first) * vocab);
    }
  }
  return out;
}

/** validates a --batch style value against the window size; returns the effective batch (at most ctx) */
export function effectiveBatch(batch: number | undefined, ctx: number): number {
  if (batch === undefined) return ctx;
  if (!Number.isInteger(batch) || batch < 1) throw new OptionError(`batch must be a positive integer, got ${shownValue(batch)}`, "batch");
  return Math.min(batch, ctx);
}
