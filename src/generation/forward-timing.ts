import type { LanguageModel } from "../models/index.js";
import { argmax } from "../sampling/index.js";

/** What timeGreedyForward measured. */
export interface ForwardTiming {
  /** one batched forward of the whole prompt, including picking the first token (ms) */
  readonly prefillMs: number;
  /** `genTokens` single-token forwards through the KV cache, each followed by a greedy pick (ms) */
  readonly decodeMs: number;
  /** the greedy tokens: the first from the prefill, then one per decode step */
  readonly tokens: readonly number[];
}

/**
 * The raw forward pass timed, as llama-bench's prompt and generation tests are: the prompt in one
 * batched forward into a fresh KV cache of `contextSize` tokens, then `genTokens` single-token
 * forwards each followed by an argmax — no sampler, detokenizer or scheduler, so any engine can
 * be asked for the same work. The benchmark runs it in Node and in a browser's engine worker.
 */
export async function timeGreedyForward(lm: LanguageModel, promptTokens: readonly number[], genTokens: number, contextSize: number): Promise<ForwardTiming> {
  if (promptTokens.length === 0) throw new RangeError("timeGreedyForward: the prompt needs at least one token");
  if (!Number.isInteger(genTokens) || genTokens < 0) throw new RangeError(`timeGreedyForward: genTokens must be an integer >= 0, got ${genTokens}`);
  if (contextSize < promptTokens.length + genTokens) {
    throw new RangeError(`timeGreedyForward: a context of ${contextSize} tokens cannot hold ${promptTokens.length} prompt tokens and ${genTokens} decode steps`);
  }
  const cache = lm.createCache(contextSize);
  try {
    const tokens: number[] = [];
    const t1 = performance.now();
    let tok = argmax(await lm.forwardAsync(promptTokens, cache));
    const prefillMs = performance.now() - t1;
    tokens.push(tok);
    const t2 = performance.now();
    for (let i = 0; i < genTokens; i++) {
      tok = argmax(await lm.forwardAsync([tok], cache));
      tokens.push(tok);
    }
    return { prefillMs, decodeMs: performance.now() - t2, tokens };
  } finally {
    cache.free();
  }
}

/**
 * A prompt of two tokens and one decode step on a cache of its own, thrown away: the batch and
 * single-token kernels, the attention of both, the RoPE tables and the JavaScript around them
 * run once before any request (token 0 exists in every vocabulary; the engine's pool and its
 * prefix cache are not touched). Without it a first prompt in Chromium runs ~50% longer (its
 * JavaScript and wasm compiled on first use); Node's loader and the browser's both run it.
 */
export async function warmUpForward(model: LanguageModel): Promise<void> {
  const positions = Math.min(3, model.info.maxPositions ?? 3);
  const cache = model.createCache(positions);
  try {
    await model.forwardAsync(positions >= 2 ? [0, 0] : [0], cache);
    if (positions >= 3) await model.forwardAsync([0], cache);
  } finally {
    cache.free();
  }
}
