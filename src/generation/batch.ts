import type { KVCache } from "../cache/kv-cache.js";
import { normalizePrompt } from "../chat/normalize.js";
import type { LanguageModel } from "../models/model.js";
import { createSampler, type Sampler } from "../sampling/index.js";
import type { Tokenizer } from "../tokenizer/index.js";
import { samplingOptionsOf, type FinishReason, type GenerateOptions, type GenerationResult } from "./generate.js";
import { tokenLogprobs, validateLogprobs, type TokenLogprob } from "./logprobs.js";
import { createStopMatcher, type StopMatcher } from "./stop-strings.js";
import { computeTimings } from "./timings.js";

/**
 * Batched generation: several prompts (ragged lengths) run together, one forward pass per step
 * for every sequence still going, each with its own KV cache, sampler, stop strings and
 * detokenizer. Each result is the one generating that prompt alone gives: the steps below are
 * the solo loop's, applied per sequence.
 */
interface SequenceState {
  readonly prompt: string | readonly number[];
  readonly promptTokens: number[];
  readonly cache: KVCache;
  readonly sampler: Sampler;
  readonly stopMatcher: StopMatcher;
  readonly decoder: { push(id: number): string; flush(): string };
  readonly history: number[];
  readonly completionTokens: number[];
  readonly logprobs?: TokenLogprob[];
  completion: string;
  finishReason: FinishReason;
  done: boolean;
  logits: Float32Array;
  tFirst: number;
  tEnd: number;
}

export interface BatchContext {
  readonly model: LanguageModel;
  readonly tokenizer: Tokenizer;
  /** KV cache size of each sequence */
  readonly contextSize: number;
  readonly loadMs: number;
}

const UNSUPPORTED = ["numBeams", "draftModel", "promptLookup"] as const;

export async function generateBatch(ctx: BatchContext, prompts: readonly (string | readonly number[])[], options: GenerateOptions = {}): Promise<GenerationResult[]> {
  if (prompts.length === 0) throw new RangeError("generate: the batch of prompts is empty");
  for (const key of UNSUPPORTED) if (options[key] !== undefined && options[key] !== false) throw new RangeError(`generate: ${key} is not available for a batch of prompts`);
  if (options.n !== undefined && options.n !== 1) throw new RangeError("generate: n > 1 is not available for a batch of prompts");
  const maxTokens = options.maxTokens ?? 256;
  if (!Number.isInteger(maxTokens) || maxTokens < 0) throw new RangeError(`maxTokens must be a non-negative integer, got ${maxTokens}`);
  const topLogprobs = validateLogprobs(options.logprobs);
  const { model, tokenizer } = ctx;
  const t0 = performance.now();
  const stops = options.stop === undefined ? [] : typeof options.stop === "string" ? [options.stop] : [...options.stop];
  const endIds = options.stopTokens?.length ? new Set([...tokenizer.endOfGenerationIds, ...options.stopTokens]) : tokenizer.endOfGenerationIds;
  const samplingOptions = samplingOptionsOf(options);

  const states: SequenceState[] = prompts.map((prompt, i) => {
    const promptTokens = typeof prompt === "string" ? tokenizer.encode(normalizePrompt(prompt, options.normalize), { addSpecialTokens: options.addSpecialTokens ?? true }) : [...prompt];
    if (promptTokens.length === 0) throw new Error(`prompt ${i} is empty (no tokens)`);
    if (promptTokens.length >= ctx.contextSize) throw new RangeError(`prompt ${i} has ${promptTokens.length} tokens but the context holds ${ctx.contextSize}`);
    return {
      prompt, promptTokens, cache: model.createCache(ctx.contextSize), sampler: createSampler(samplingOptions),
      stopMatcher: createStopMatcher(stops), decoder: tokenizer.createStreamDecoder({ skipSpecialTokens: true }),
      history: [...promptTokens], completionTokens: [], ...(topLogprobs === undefined ? {} : { logprobs: [] }),
      completion: "", finishReason: "length", done: maxTokens === 0, logits: new Float32Array(0), tFirst: 0, tEnd: 0,
    };
  });

  // prefill: every prompt in one batched pass
  const prefillLogits = model.forwardBatch(states.map((s) => ({ tokens: s.promptTokens, cache: s.cache })));
  states.forEach((s, i) => (s.logits = prefillLogits[i]!));
  const tPrefill = performance.now();

  for (;;) {
    const continuing: SequenceState[] = [];
    const next: number[] = [];
    for (const s of states) {
      if (s.done) continue;
      const token = step(s, options, endIds, topLogprobs, maxTokens);
      if (token !== undefined) {
        continuing.push(s);
        next.push(token);
      }
    }
    if (continuing.length === 0) break;
    if (options.signal?.aborted) {
      for (const s of continuing) finish(s, "abort");
      break;
    }
    const logits = model.forwardBatch(continuing.map((s, i) => ({ tokens: [next[i]!], cache: s.cache })));
    continuing.forEach((s, i) => (s.logits = logits[i]!));
    await new Promise<void>((resolve) => setImmediate(resolve));
  }

  return states.map((s) => ({
    prompt: typeof s.prompt === "string" ? s.prompt : tokenizer.decode(s.promptTokens),
    completion: s.completion,
    promptTokens: s.promptTokens,
    completionTokens: s.completionTokens,
    finishReason: s.finishReason,
    timings: computeTimings(ctx.loadMs, s.promptTokens.length, s.completionTokens.length, t0, tPrefill, s.tFirst || tPrefill, s.tEnd || performance.now()),
    ...(s.logprobs ? { logprobs: s.logprobs } : {}),
  }));
}

/** one token for one sequence, as the solo loop takes it; returns the token to feed, or undefined when the sequence ended */
function step(s: SequenceState, options: GenerateOptions, endIds: ReadonlySet<number>, topLogprobs: number | undefined, maxTokens: number): number | undefined {
  if (s.completionTokens.length >= maxTokens || s.cache.length >= s.cache.capacity) return finish(s, "length");
  const token = s.sampler.sample(s.logits, s.history);
  if (s.completionTokens.length === 0) s.tFirst = performance.now();
  if (!options.ignoreEos && endIds.has(token)) return finish(s, "stop");
  s.completionTokens.push(token);
  s.history.push(token);
  if (s.logprobs) s.logprobs.push(tokenLogprobs(s.logits, token, topLogprobs!));
  const { emit, stopped } = s.stopMatcher.push(s.decoder.push(token));
  s.completion += emit;
  if (stopped) return finish(s, "stop");
  if (s.completionTokens.length >= maxTokens || s.cache.length + 1 >= s.cache.capacity) return finish(s, "length");
  return token;
}

function finish(s: SequenceState, reason: FinishReason): undefined {
  s.done = true;
  s.finishReason = reason;
  if (reason !== "stop") {
    const { emit, stopped } = s.stopMatcher.push(s.decoder.flush());
    s.completion += emit;
    if (stopped) s.finishReason = "stop";
    else s.completion += s.stopMatcher.flush();
  }
  s.tEnd = performance.now();
  return undefined;
}
