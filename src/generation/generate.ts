import type { KVCache } from "../cache/kv-cache.js";
import type { LanguageModel } from "../models/model.js";
import { normalizePrompt, type PromptNormalization } from "../chat/normalize.js";
import { createSampler, Mt19937, type SamplingOptions } from "../sampling/index.js";
import type { Tokenizer } from "../tokenizer/index.js";
import { beamSearch, type BeamSequence } from "./beam.js";
import { tokenLogprobs, validateLogprobs, type TokenLogprob } from "./logprobs.js";
import { speculativeGreedy, type SpeculativeStats } from "./speculative.js";
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
  /** beam search with this many beams (Hugging Face semantics, see beam.ts); sampling options are ignored */
  numBeams?: number;
  /** beam search: score = sum of logprobs / length^lengthPenalty (default 1) */
  lengthPenalty?: number;
  /** beam search: stop once numBeams hypotheses are done (true), by the score bound (false, default) or "never" */
  earlyStopping?: boolean | "never";
  /** beam search: sequences returned in `beams` (default 1) */
  numReturnSequences?: number;
  /** beam search: never repeat an n-gram of this size */
  noRepeatNgramSize?: number;
  /** speculative decoding: a loaded draft model with the target's vocabulary (temperature > 0: speculative sampling) */
  draftModel?: { readonly languageModel: LanguageModel };
  /** speculative decoding: tokens proposed per round */
  draftTokens?: number;
  /** speculative decoding without a draft model: propose from earlier n-grams (true = up to 3-grams) */
  promptLookup?: boolean | number;
  /** independent completions sharing one prefill (default 1); choice i samples with seed + i (see choices.ts) */
  n?: number;
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
  /** beam search: the returned sequences, best first (completionTokens is the first) */
  beams?: { tokens: number[]; text: string; score: number; sumLogprobs: number; finished: boolean }[];
  /** speculative decoding: how many proposed tokens the target accepted */
  speculative?: SpeculativeStats;
  /** with `n`: every completion, choice 0 first (the top-level completion is choice 0) */
  choices?: Choice[];
}

/** one of the `n` completions of a prompt */
export interface Choice {
  completion: string;
  completionTokens: number[];
  finishReason: FinishReason;
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
  /**
   * The last prefill's prompt and a copy of its last-position logits: a later generation of
   * the same prompt whose K/V rows are still cached starts from these instead of recomputing
   * the last prompt token, so `n` choices (and repeated calls) share one prefill bit for bit.
   */
  prefill?: { tokens: number[]; logits: Float32Array };
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
  const samplingOptions = samplingOptionsOf(options);
  const topLogprobs = validateLogprobs(options.logprobs);
  const logprobs: TokenLogprob[] | undefined = topLogprobs === undefined ? undefined : [];
  const sampler = createSampler(samplingOptions);
  const maxTokens = options.maxTokens ?? 256;
  const stops = options.stop === undefined ? [] : typeof options.stop === "string" ? [options.stop] : [...options.stop];
  const stopMatcher = createStopMatcher(stops);
  const decoder = tokenizer.createStreamDecoder({ skipSpecialTokens: true });
  const endIds = options.stopTokens?.length ? new Set([...tokenizer.endOfGenerationIds, ...options.stopTokens]) : tokenizer.endOfGenerationIds;

  // beam search and speculative decoding run first (on their own caches); the loop below then
  // emits their tokens through the same stop-string and streaming path
  const alt = alternativeDecoding(model, tokenizer, promptTokens, options, endIds, Math.min(maxTokens, cache.capacity - promptTokens.length), sampler);
  if (alt && logprobs) throw new RangeError("logprobs are not available with beam search or speculative decoding");
  let logits: Float32Array = new Float32Array(0);
  if (!alt && isPrimed(ctx, promptTokens)) {
    cache.truncate(promptTokens.length);
    ctx.cachedTokens = [...promptTokens];
    logits = ctx.prefill!.logits;
  } else if (!alt) {
    // reuse the cached prefix; at least the last prompt token is recomputed to get its logits
    let common = 0;
    const limit = Math.min(ctx.cachedTokens.length, promptTokens.length - 1);
    while (common < limit && ctx.cachedTokens[common] === promptTokens[common]) common++;
    cache.truncate(common);
    ctx.cachedTokens = promptTokens.slice(0, common);
    logits = model.forward(promptTokens.slice(common), cache);
    ctx.cachedTokens = [...promptTokens];
    ctx.prefill = { tokens: [...promptTokens], logits: logits.slice() };
  }
  const tPrefill = alt?.firstTokenAt ?? performance.now();

  const history = [...promptTokens];
  const completionTokens: number[] = [];
  let completion = "";
  let finishReason: FinishReason = "length";
  let tFirst = tPrefill;
  // the next token sits at position cache.length: it must fit in the context
  while (completionTokens.length < maxTokens && (alt || cache.length < cache.capacity)) {
    if (options.signal?.aborted) { finishReason = "abort"; break; }
    const token = alt ? alt.tokens[completionTokens.length] : sampler.sample(logits, history);
    if (token === undefined) { finishReason = alt!.finishReason; break; }
    if (completionTokens.length === 0) tFirst = alt ? alt.firstTokenAt : performance.now();
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
    if (alt) continue;
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
  const tEnd = alt?.endAt ?? performance.now();
  return {
    prompt: typeof prompt === "string" ? prompt : tokenizer.decode(promptTokens),
    completion,
    promptTokens,
    completionTokens,
    finishReason,
    timings: computeTimings(ctx.loadMs, promptTokens.length, completionTokens.length, t0, tPrefill, tFirst, tEnd),
    ...(logprobs ? { logprobs } : {}),
    ...(alt?.extra ?? {}),
  };
}

/** everything that is not a generation option is a sampling option (unknown keys are rejected by the sampler) */
export function samplingOptionsOf(options: GenerateOptions): SamplingOptions {
  const { maxTokens: _m, stop: _s, addSpecialTokens: _a, ignoreEos: _i, signal: _g, stopTokens: _t, normalize: _n, logprobs: _l,
    numBeams: _nb, lengthPenalty: _lp, earlyStopping: _es, numReturnSequences: _nr, noRepeatNgramSize: _ng, draftModel: _dm, draftTokens: _dt, promptLookup: _pl, n: _nc,
    ...samplingOptions } = options;
  return samplingOptions;
}

/** the cache still holds exactly this prompt's rows and ctx.prefill has its last logits */
function isPrimed(ctx: GenerationContext, promptTokens: readonly number[]): boolean {
  const p = ctx.prefill;
  if (!p || p.tokens.length !== promptTokens.length || ctx.cachedTokens.length < promptTokens.length) return false;
  for (let i = 0; i < promptTokens.length; i++) {
    if (p.tokens[i] !== promptTokens[i] || ctx.cachedTokens[i] !== promptTokens[i]) return false;
  }
  return true;
}

interface AlternativeDecoding {
  /** the tokens to emit, without the end token */
  tokens: number[];
  finishReason: FinishReason;
  firstTokenAt: number;
  endAt: number;
  extra: Pick<GenerationResult, "beams" | "speculative">;
}

/** beam search or greedy speculative decoding when the options ask for it; undefined otherwise */
function alternativeDecoding(
  model: LanguageModel, tokenizer: Tokenizer, promptTokens: readonly number[], options: GenerateOptions,
  endIds: ReadonlySet<number>, maxTokens: number, sampler: ReturnType<typeof createSampler>,
): AlternativeDecoding | undefined {
  const ends = options.ignoreEos ? new Set<number>() : endIds;
  if (options.numBeams !== undefined) {
    const { sequences } = beamSearch(model, promptTokens, {
      numBeams: options.numBeams, maxTokens, endIds: ends, lengthPenalty: options.lengthPenalty,
      earlyStopping: options.earlyStopping, numReturnSequences: options.numReturnSequences, noRepeatNgramSize: options.noRepeatNgramSize,
    });
    const now = performance.now();
    const best = sequences[0];
    return {
      tokens: best?.tokens ?? [], finishReason: best?.finished ? "stop" : "length", firstTokenAt: now, endAt: now,
      extra: { beams: sequences.map((b: BeamSequence) => ({ ...b, text: tokenizer.decode(b.tokens, { skipSpecialTokens: true }) })) },
    };
  }
  if (options.draftModel === undefined && !options.promptLookup) return undefined;
  // temperature > 0: speculative sampling (rejection rule) over the sampler's processed
  // distributions, the draft with the same processors, all draws from one stream seeded like the sampler
  const sampling = sampler.options.temperature > 0 ? {
    target: sampler.distribution, draft: createSampler(sampler.options).distribution, rng: new Mt19937(sampler.options.seed),
  } : undefined;
  let firstTokenAt = 0;
  const r = speculativeGreedy(model, promptTokens, {
    maxTokens, draft: options.draftModel?.languageModel, draftTokens: options.draftTokens,
    promptLookup: typeof options.promptLookup === "number" ? options.promptLookup : undefined,
    choose: (logits, history) => sampler.sample(logits, history),
    sampling,
    endIds: ends,
    onToken: () => { firstTokenAt ||= performance.now(); return false; },
  });
  const endAt = performance.now();
  return { tokens: r.tokens, finishReason: r.finishReason, firstTokenAt: firstTokenAt || endAt, endAt, extra: { speculative: r.stats } };
}
