import type { LanguageModel } from "../models/index.js";
import { createSampler, Mt19937, type Sampler, type SamplingOptions } from "../sampling/index.js";
import type { PromptNormalization, Tokenizer } from "../tokenizer/index.js";
import { beamSearch, type BeamSequence } from "./beam.js";
import type { TokenLogprob } from "./logprobs.js";
import { speculativeGreedy, type SpeculativeStats } from "./speculative.js";
import type { Timings } from "./timings.js";

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

/** the number of completions `n` asks for, checked against the options it cannot be combined with */
export function validateChoices(options: GenerateOptions): number {
  const n = options.n ?? 1;
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`n must be an integer >= 1 (the number of completions), got ${String(options.n)}`);
  if (n > 1 && usesStrategy(options)) {
    throw new RangeError("n > 1 cannot be combined with beam search (use numReturnSequences) or speculative decoding");
  }
  return n;
}

/** beam search or speculative decoding: token choices that are not one sample per step */
export function usesStrategy(options: GenerateOptions): boolean {
  return options.numBeams !== undefined || options.draftModel !== undefined || !!options.promptLookup;
}

/** everything that is not a generation option is a sampling option (unknown keys are rejected by the sampler) */
export function samplingOptionsOf(options: GenerateOptions): SamplingOptions {
  const { maxTokens: _m, stop: _s, addSpecialTokens: _a, ignoreEos: _i, signal: _g, stopTokens: _t, normalize: _n, logprobs: _l,
    numBeams: _nb, lengthPenalty: _lp, earlyStopping: _es, numReturnSequences: _nr, noRepeatNgramSize: _ng, draftModel: _dm, draftTokens: _dt, promptLookup: _pl, n: _nc,
    ...samplingOptions } = options;
  return samplingOptions;
}

export interface AlternativeDecoding {
  /** the tokens to emit, without the end token */
  tokens: number[];
  finishReason: FinishReason;
  firstTokenAt: number;
  endAt: number;
  extra: Pick<GenerationResult, "beams" | "speculative">;
}

/**
 * Beam search or speculative decoding, as the options ask (usesStrategy): the whole run at once,
 * on caches of its own; the caller then emits the tokens through a Sequence (`accept`).
 */
export function alternativeDecoding(
  model: LanguageModel, tokenizer: Tokenizer, promptTokens: readonly number[], options: GenerateOptions,
  endIds: ReadonlySet<number>, maxTokens: number, sampler: Sampler,
): AlternativeDecoding {
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
