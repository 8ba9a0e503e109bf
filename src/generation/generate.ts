import type { KVCache } from "../cache/kv-cache.js";
import type { LanguageModel } from "../models/model.js";
import { normalizePrompt, type PromptNormalization } from "../chat/normalize.js";
import { createSampler, type SamplingOptions } from "../sampling/index.js";
import type { Tokenizer } from "../tokenizer/index.js";
import { tokenLogprobs, validateLogprobs, type TokenLogprob } from "./logprobs.js";
import { createStopMatcher } from "./stop-strings.js";
import { computeTimings, type Timings } from "./timings.js";

export interface GenerateOptions extends SamplingOptions {
  /** most tokens to generate (default 256) */
  maxTokens?: number;
  /** stop when the generated text contains any of these (the stop string is not returned) */
  stop?: string | readonly string[];
  /** add BOS/EOS as the model's metadata says (default true) */
  addSpecialTokens?: boolean;
  /** keep generating past end-of-generation tokens */
  ignoreEos?: boolean;
  /** abort the generation; the result so far is returned with finishReason "abort" */
  signal?: AbortSignal;
  /** more token ids that end the generation like end-of-generation tokens (a chat template's end of turn) */
  stopTokens?: readonly number[];
  /** Unicode normalization of a text prompt before tokenizing: "nfkc" folds full-width forms (default "none") */
  normalize?: PromptNormalization;
  /** report each generated token's log-probability and the top `logprobs` alternatives (see logprobs.ts) */
  logprobs?: number;
}

/**
 * One generated token and the text it completed ("" while UTF-8 bytes or a possible stop
 * string are pending). A last step without a token releases text held back until the end.
 */
export interface GenerationStep {
  token: number | undefined;
  text: string;
  /** with the `logprobs` option: the token's log-probability and the top alternatives */
  logprob?: TokenLogprob;
}

export type FinishReason = "stop" | "length" | "abort";

export interface GenerationResult {
  prompt: string;
  completion: string;
  promptTokens: number[];
  completionTokens: number[];
  /** "stop": an end-of-generation token or a stop string; "length": maxTokens or the context is full */
  finishReason: FinishReason;
  timings: Timings;
  /** with the `logprobs` option: one entry per completion token */
  logprobs?: TokenLogprob[];
}

/** The model, its tokenizer and one KV cache, reused across calls (the longest common prompt prefix is not recomputed). */
export interface GenerationContext {
  readonly model: LanguageModel;
  readonly tokenizer: Tokenizer;
  readonly cache: KVCache;
  /** tokens whose K/V are in the cache, in order */
  cachedTokens: number[];
  readonly loadMs: number;
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

function validate(options: GenerateOptions): void {
  const { maxTokens } = options;
  if (maxTokens !== undefined && (!Number.isInteger(maxTokens) || maxTokens < 0)) {
    throw new RangeError(`maxTokens must be a non-negative integer, got ${maxTokens}`);
  }
}

/**
 * Prefills the prompt in one batched pass, then decodes one token per step with the KV cache.
 * Yields each step; returns the full result (with timings) as the generator's return value.
 */
export async function* generateSteps(ctx: GenerationContext, prompt: string | readonly number[], options: GenerateOptions = {}): AsyncGenerator<GenerationStep, GenerationResult> {
  validate(options);
  const t0 = performance.now();
  const { model, tokenizer, cache } = ctx;
  const promptTokens = typeof prompt === "string" ? tokenizer.encode(normalizePrompt(prompt, options.normalize), { addSpecialTokens: options.addSpecialTokens ?? true }) : [...prompt];
  if (promptTokens.length === 0) throw new Error("the prompt is empty (no tokens): give some text or enable addSpecialTokens");
  if (promptTokens.length >= cache.capacity) {
    throw new RangeError(`the prompt has ${promptTokens.length} tokens but the context holds ${cache.capacity}; use a larger contextSize or a shorter prompt`);
  }
  // everything that is not a generation option is a sampling option (unknown keys are rejected there)
  const { maxTokens: _m, stop: _s, addSpecialTokens: _a, ignoreEos: _i, signal: _g, stopTokens: _t, normalize: _n, logprobs: _l, ...samplingOptions } = options;
  const topLogprobs = validateLogprobs(options.logprobs);
  const logprobs: TokenLogprob[] | undefined = topLogprobs === undefined ? undefined : [];
  const sampler = createSampler(samplingOptions);
  const maxTokens = options.maxTokens ?? 256;
  const stops = options.stop === undefined ? [] : typeof options.stop === "string" ? [options.stop] : [...options.stop];
  const stopMatcher = createStopMatcher(stops);
  const decoder = tokenizer.createStreamDecoder({ skipSpecialTokens: true });
  const endIds = options.stopTokens?.length ? new Set([...tokenizer.endOfGenerationIds, ...options.stopTokens]) : tokenizer.endOfGenerationIds;

  // reuse the cached prefix; at least the last prompt token is recomputed to get its logits
  let common = 0;
  const limit = Math.min(ctx.cachedTokens.length, promptTokens.length - 1);
  while (common < limit && ctx.cachedTokens[common] === promptTokens[common]) common++;
  cache.truncate(common);
  ctx.cachedTokens = promptTokens.slice(0, common);
  let logits = model.forward(promptTokens.slice(common), cache);
  ctx.cachedTokens = [...promptTokens];
  const tPrefill = performance.now();

  const history = [...promptTokens];
  const completionTokens: number[] = [];
  let completion = "";
  let finishReason: FinishReason = "length";
  let tFirst = tPrefill;
  // the next token sits at position cache.length: it must fit in the context
  while (completionTokens.length < maxTokens && cache.length < cache.capacity) {
    if (options.signal?.aborted) { finishReason = "abort"; break; }
    const token = sampler.sample(logits, history);
    if (completionTokens.length === 0) tFirst = performance.now();
    if (!options.ignoreEos && endIds.has(token)) { finishReason = "stop"; break; }
    completionTokens.push(token);
    history.push(token);
    const { emit, stopped } = stopMatcher.push(decoder.push(token));
    completion += emit;
    if (logprobs) {
      const lp = tokenLogprobs(logits, token, topLogprobs!);
      logprobs.push(lp);
      yield { token, text: emit, logprob: lp };
    } else {
      yield { token, text: emit };
    }
    if (stopped) { finishReason = "stop"; break; }
    if (completionTokens.length >= maxTokens || cache.length + 1 >= cache.capacity) break;
    logits = model.forward([token], cache);
    ctx.cachedTokens.push(token);
    await yieldToEventLoop();
  }
  if (finishReason !== "stop") {
    const { emit, stopped } = stopMatcher.push(decoder.flush());
    let tail = emit;
    if (stopped) finishReason = "stop";
    else tail += stopMatcher.flush();
    completion += tail;
    if (tail) yield { token: undefined, text: tail };
  }
  const tEnd = performance.now();
  return {
    prompt: typeof prompt === "string" ? prompt : tokenizer.decode(promptTokens),
    completion,
    promptTokens,
    completionTokens,
    finishReason,
    timings: computeTimings(ctx.loadMs, promptTokens.length, completionTokens.length, t0, tPrefill, tFirst, tEnd),
    ...(logprobs ? { logprobs } : {}),
  };
}
