import type { ConstraintSpec, JsonSchema } from "../sampling/constraints/index.js";
import type { LanguageModel } from "../models/index.js";
import { SAMPLING_OPTION_NAMES, type SamplingOptions } from "../sampling/index.js";
import type { PromptNormalization } from "../tokenizer/index.js";
import { checkFlags, checkOptionKeys, OptionError, shownValue } from "../units/index.js";
import type { PromptLogprobs, TokenLogprob } from "./logprobs.js";
import type { SpeculativeStats } from "./speculative.js";
import type { Timings } from "./timings.js";

/** the constraint the options ask for (at most one of grammar, jsonSchema, json, choice, regex) */
export function constraintOf(options: GenerateOptions): ConstraintSpec | undefined {
  const preserved = options.preservedTokens;
  if (preserved !== undefined && (!Array.isArray(preserved) || preserved.some((t) => typeof t !== "string" || t === ""))) {
    throw new OptionError(`preservedTokens must be a list of special tokens' texts (non-empty strings), got ${shownValue(preserved)}`, "preservedTokens");
  }
  const given = (["grammar", "jsonSchema", "json", "choice", "regex"] as const).filter((k) => options[k] !== undefined);
  if (given.length > 1) throw new OptionError(`give one of grammar, jsonSchema, json, choice and regex, not ${given.join(" and ")}`, given[1]!);
  if (options.grammar !== undefined) return { grammar: options.grammar };
  if (options.jsonSchema !== undefined) return { jsonSchema: options.jsonSchema };
  if (options.json !== undefined) {
    if (options.json !== "value" && options.json !== "object") throw new OptionError(`json must be "value" or "object", got ${shownValue(options.json)}`, "json");
    return { json: options.json };
  }
  if (options.choice !== undefined) return { choice: options.choice };
  if (options.regex !== undefined) return { regex: options.regex };
  return undefined;
}

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
  /**
   * the engine slot (0..maxSequences-1, as Engine.slots lists them) to run in, llama-server's
   * id_slot: the request waits until that slot is free (others behind it go on) and runs there
   * (choice 0's sequence; more choices take the lowest free ones). All slots share one prefix
   * cache, so it finds the rows the slot's last request left as any slot would. Default: the slot
   * llama-server's get_available_slot would pick, the idle one whose last tokens are most like the
   * prompt, else the least recently used (EngineOptions.slotPromptSimilarity).
   */
  slot?: number;
  /** more token ids that end the generation like end-of-generation tokens (a chat template's end of turn) */
  stopTokens?: readonly number[];
  /** Unicode normalization of a text prompt before tokenizing: "nfkc" folds full-width forms (default "none") */
  normalize?: PromptNormalization;
  /** report each generated token's log-probability and the top `logprobs` alternatives (see logprobs.ts) */
  logprobs?: number;
  /**
   * with `logprobs`: report them from the distribution the token was drawn from (after logit bias,
   * penalties, temperature and the filters; the survivors only, so the top lists stop at them,
   * greedy's at its one token with probability 1), llama-server's `post_sampling_probs`, instead
   * of the model's own (default false)
   */
  logprobsAfterSampling?: boolean;
  /**
   * score the prompt too: each prompt token's log-probability given the tokens before it, and the
   * top `promptLogprobs` alternatives, in the result's `promptLogprobs` (vLLM's prompt_logprobs;
   * with maxTokens 0, the prompt's log-likelihood without generating). Computed in the prefill's
   * own chunked passes; the prompt is not taken from the prefix cache.
   */
  promptLogprobs?: number;
  /** beam search with this many beams (Hugging Face semantics, see beam.ts); sampling options are ignored */
  numBeams?: number;
  /** beam search: score = sum of logprobs / length^lengthPenalty (default 1) */
  lengthPenalty?: number;
  /** beam search: stop once numBeams hypotheses are done (true), by the score bound (false, default) or "never" */
  earlyStopping?: boolean | "never";
  /** beam search: sequences returned in `beams` (default 1) */
  numReturnSequences?: number;
  /**
   * never repeat an n-gram of this size (the prompt's included): a token that would complete an
   * n-gram already in the sequence is banned (transformers' no_repeat_ngram_size); sampling, greedy
   * and beam search, not speculative decoding
   */
  noRepeatNgramSize?: number;
  /**
   * the end-of-generation tokens are banned until this many tokens are generated (transformers'
   * min_new_tokens, MinNewTokensLengthLogitsProcessor); sampling and greedy, not beam search or
   * speculative decoding
   */
  minNewTokens?: number;
  /** token ids banned at every step (transformers' suppress_tokens, SuppressTokensLogitsProcessor: an id past the vocabulary bans nothing, as its isin mask); sampling and greedy */
  suppressTokens?: readonly number[];
  /** token ids banned at the first generated step only (transformers' begin_suppress_tokens; an id past the vocabulary bans nothing); sampling and greedy */
  beginSuppressTokens?: readonly number[];
  /**
   * token sequences never generated (transformers' bad_words_ids, NoBadWordsLogitsProcessor): a
   * sequence's last token is banned where the tokens before it (the prompt's included) end with
   * the rest of it; a one-token sequence is banned always, unless it is an end-of-generation token
   * (transformers leaves EOS out); sampling and greedy
   */
  badWordsIds?: readonly (readonly number[])[];
  /**
   * [token sequence, bias] pairs (transformers' sequence_bias, SequenceBiasLogitsProcessor): the
   * bias is added to a sequence's last token's logit where the tokens before it end with the rest
   * of it (a one-token sequence: always), before the repetition penalty and the sampler;
   * sampling and greedy
   */
  sequenceBias?: readonly (readonly [readonly number[], number])[];
  /**
   * the token generated first where the prompt is one token (transformers' forced_bos_token_id,
   * ForcedBOSTokenLogitsProcessor: it acts only while the sequence is one token long, an empty
   * prompt's BOS); sampling and greedy
   */
  forcedBosTokenId?: number;
  /**
   * the token (or one of the tokens) generated last, at the last step maxTokens allows
   * (transformers' forced_eos_token_id, ForcedEOSTokenLogitsProcessor at max_length - 1); sampling
   * and greedy
   */
  forcedEosTokenId?: number | readonly number[];
  /**
   * [start index, decay factor] (transformers' exponential_decay_length_penalty,
   * ExponentialDecayLengthPenalty): after `start` generated tokens, each step adds |logit| *
   * (factor^(generated - start) - 1) to the end-of-generation tokens' logits, after the repetition
   * penalty (a factor above 1 makes the end likelier step by step, below 1 less likely); sampling
   * and greedy
   */
  exponentialDecayLengthPenalty?: readonly [startIndex: number, decayFactor: number];
  /** speculative decoding: a loaded draft model with the target's vocabulary (temperature > 0: speculative sampling) */
  draftModel?: { readonly languageModel: LanguageModel };
  /** speculative decoding: tokens proposed per round */
  draftTokens?: number;
  /** speculative decoding without a draft model: propose from earlier n-grams (true = up to 3-grams) */
  promptLookup?: boolean | number;
  /** the completion follows this GBNF grammar (llama.cpp's syntax; start rule `root`) */
  grammar?: string;
  /** the completion is JSON valid under this JSON Schema (the subset src/sampling/constraints/json-schema.ts lists) */
  jsonSchema?: JsonSchema;
  /** the completion is a JSON value ("value") or object ("object", OpenAI's json_object) */
  json?: "value" | "object";
  /** the completion is one of these strings */
  choice?: readonly string[];
  /** the whole completion matches this regular expression (ECMAScript syntax; see constraints/regex.ts) */
  regex?: string;
  /**
   * special tokens, by their text (e.g. "<|python_tag|>", "[TOOL_CALLS]"), that a constraint may
   * take as one token where its grammar writes that text as a literal, and whose text the
   * completion keeps (llama.cpp's preserved tokens); other special tokens stay excluded
   */
  preservedTokens?: readonly string[];
  /** independent completions sharing one prefill (default 1); choice i samples with seed + i (see choices.ts) */
  n?: number;
  /**
   * a new line indented by fewer spaces and tabs than this ends the completion (finish reason
   * "length"), the text from that line's first other character on cut: llama-server's n_indent
   * (see line-limits.ts); default 0: none
   */
  minLineIndent?: number;
  /**
   * once this many milliseconds have passed since the first token, the next token whose text
   * holds a new line ends the completion (finish reason "length"): llama-server's
   * t_max_predict_ms; default 0: none
   */
  newLineAfterMs?: number;
}

/**
 * A streamed step, told apart by `type` (`switch (step.type)` narrows it): a generated token, or
 * a completion's end. Every step's `text` is what to append to the completion so far.
 */
export type GenerationStep = TokenStep | EndStep;

/** One generated token and the text it completed ("" while UTF-8 bytes or a possible stop string are pending). */
export interface TokenStep {
  type: "token";
  token: number;
  text: string;
  /** with the `logprobs` option: the token's log-probability and the top alternatives */
  logprob?: TokenLogprob;
  endToken?: undefined;
}

/**
 * A completion's last step, without a token: the text held back until the end (bytes of an
 * unfinished character, a possible stop string's start) and the end-of-generation token that
 * ended it. It comes only when it carries one of the two (a completion cut by maxTokens on a
 * whole character has none): the stream's return value (or, from Model.submit, a "finish"
 * event) is what says the completion ended.
 */
export interface EndStep {
  type: "end";
  token: undefined;
  text: string;
  logprob?: undefined;
  /** when an end-of-generation token ended the completion: that token */
  endToken?: EndToken;
}

/**
 * The end-of-generation token that ended a completion (the model's EOS, a chat template's end of
 * turn, a stopTokens id). It is not one of completionTokens and adds no text; with the `logprobs`
 * option its logprob is here, not in `logprobs`, which keeps one entry per completion token.
 * (OpenAI's legacy completions, vLLM and llama-server list it after the completion's tokens:
 * lm-evaluation-harness reads the prompt's logprobs as all entries but that last one.)
 */
export interface EndToken {
  token: number;
  /** with the `logprobs` option: its log-probability and the top alternatives, from the same distribution as a completion token's */
  logprob?: TokenLogprob;
}

export type FinishReason = "stop" | "length" | "abort";

/**
 * Why a completion ended where the reason alone does not say: which limit a "length" finish hit
 * (the completion's maxTokens, or the context: the KV cache holds no more positions), or, for a
 * "stop" under a constraint, that no token could follow (the grammar complete and the end token
 * not allowed, or no token of the vocabulary spells what the grammar needs)
 */
export type FinishDetail = `maxTokens (${number}) reached` | `context full (${number} tokens)` | "grammar complete" | "no token continues the grammar" | `line indented less than ${number}` | `new line after ${number} ms`;

export interface GenerationResult {
  prompt: string;
  completion: string;
  promptTokens: number[];
  completionTokens: number[];
  /** "stop": an end-of-generation token or a stop string; "length": maxTokens or the context is full */
  finishReason: FinishReason;
  /** with finishReason "length": which limit it hit */
  finishDetail?: FinishDetail;
  timings: Timings;
  /** with the `logprobs` option: one entry per completion token */
  logprobs?: TokenLogprob[];
  /** finishReason "stop" at an end-of-generation token: that token (and its logprob, with the `logprobs` option) */
  endToken?: EndToken;
  /** with the `promptLogprobs` option: one entry per prompt token, null for the first (no token before it predicts it) */
  promptLogprobs?: PromptLogprobs;
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
  finishDetail?: FinishDetail;
  logprobs?: TokenLogprob[];
  endToken?: EndToken;
}

/** the number of completions `n` asks for, checked against the options it cannot be combined with */
export function validateChoices(options: GenerateOptions): number {
  const n = options.n ?? 1;
  if (!Number.isInteger(n) || n < 1) throw new OptionError(`n must be an integer >= 1 (the number of completions), got ${shownValue(options.n)}`, "n");
  if (n > 1 && usesStrategy(options)) {
    throw new OptionError("n > 1 cannot be combined with beam search (use numReturnSequences) or speculative decoding", "n");
  }
  if (options.numBeams !== undefined && (options.draftModel !== undefined || options.promptLookup)) {
    throw new OptionError("numBeams cannot be combined with speculative decoding (draftModel, promptLookup)", "numBeams");
  }
  if (options.draftModel !== undefined && options.promptLookup) throw new OptionError("draftModel and promptLookup are two ways of drafting: choose one", "promptLookup");
  return n;
}

/** beam search or speculative decoding: token choices that are not one sample per step */
export function usesStrategy(options: GenerateOptions): boolean {
  return options.numBeams !== undefined || options.draftModel !== undefined || !!options.promptLookup;
}

/** the options of GenerateOptions that are not sampling options (a record, so the compiler names one left out) */
const GENERATION_OPTIONS: Record<Exclude<keyof GenerateOptions, keyof SamplingOptions>, true> = {
  maxTokens: true, stop: true, addSpecialTokens: true, ignoreEos: true, signal: true, stopTokens: true, normalize: true, logprobs: true, logprobsAfterSampling: true, promptLogprobs: true,
  numBeams: true, lengthPenalty: true, earlyStopping: true, numReturnSequences: true, noRepeatNgramSize: true, minNewTokens: true, suppressTokens: true, beginSuppressTokens: true, badWordsIds: true, sequenceBias: true, forcedBosTokenId: true, forcedEosTokenId: true, exponentialDecayLengthPenalty: true, draftModel: true, draftTokens: true,
  promptLookup: true, grammar: true, jsonSchema: true, json: true, choice: true, regex: true, preservedTokens: true, n: true, minLineIndent: true, newLineAfterMs: true, slot: true,
};

const OPTION_NAMES: readonly string[] = [...Object.keys(GENERATION_OPTIONS), ...SAMPLING_OPTION_NAMES];

/** everything that is not a generation option is a sampling option (checkGenerateOptions has refused unknown keys) */
export function samplingOptionsOf(options: GenerateOptions): SamplingOptions {
  return Object.fromEntries(Object.entries(options).filter(([k]) => !Object.hasOwn(GENERATION_OPTIONS, k))) as SamplingOptions;
}

/**
 * Refuses, with one error naming the option, what the typed signature would: options that are
 * not an object, an unknown key (with the option it likely misspells: the sampler's own refusal
 * listed only sampling options, not maxTokens), flags that are not booleans (`ignoreEos: "no"`
 * turned it on), a `stop` that is neither a string nor a list, a `signal` that is not an
 * AbortSignal, stopTokens that are not token ids (`"x"` was taken as a set of one string, -1
 * ignored), a promptLookup that is neither a flag nor a number. Ranges of the numeric options are
 * checked where they are used.
 */
export function checkGenerateOptions(options: unknown): asserts options is GenerateOptions {
  if (typeof options !== "object" || options === null || Array.isArray(options)) throw new OptionError(`generation options: expected an object, got ${shownValue(options)}`, "options");
  const o = options as Record<string, unknown>;
  checkOptionKeys(o, OPTION_NAMES);
  checkFlags(o, ["addSpecialTokens", "ignoreEos", "logprobsAfterSampling"]);
  const stop = o["stop"];
  if (stop !== undefined && typeof stop !== "string" && !Array.isArray(stop)) throw new OptionError(`stop: expected a string or an array of strings, got ${shownValue(stop)}`, "stop");
  const stopTokens = o["stopTokens"];
  if (stopTokens !== undefined) {
    if (!Array.isArray(stopTokens)) throw new OptionError(`stopTokens: expected an array of token ids, got ${shownValue(stopTokens)}`, "stopTokens");
    stopTokens.forEach((t, i) => {
      if (!Number.isSafeInteger(t) || (t as number) < 0) throw new OptionError(`stopTokens[${i}]: expected a token id (an integer >= 0), got ${shownValue(t)}`, "stopTokens");
    });
  }
  const signal = o["signal"];
  // (by its shape: an AbortController polyfill's signal works as well)
  const signalLike = typeof signal === "object" && signal !== null && typeof (signal as AbortSignal).aborted === "boolean" && typeof (signal as AbortSignal).addEventListener === "function";
  if (signal !== undefined && !signalLike) throw new OptionError(`signal: expected an AbortSignal, got ${shownValue(signal)}`, "signal");
  const slot = o["slot"];
  if (slot !== undefined && (!Number.isSafeInteger(slot) || (slot as number) < 0)) throw new OptionError(`slot: expected an engine slot's id (an integer >= 0, below maxSequences), got ${shownValue(slot)}`, "slot");
  const lookup = o["promptLookup"];
  if (lookup !== undefined && typeof lookup !== "boolean" && typeof lookup !== "number") throw new OptionError(`promptLookup: expected true, false or the longest n-gram to match (an integer >= 1), got ${shownValue(lookup)}`, "promptLookup");
  const draft = o["draftModel"] as { languageModel?: unknown } | undefined;
  if (draft !== undefined && (typeof draft !== "object" || draft === null || typeof draft.languageModel !== "object" || draft.languageModel === null)) {
    throw new OptionError(`draftModel: expected a loaded model (what loadModel returns), got ${shownValue(draft)}`, "draftModel");
  }
}
