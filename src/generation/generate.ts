import type { ConstraintSpec, JsonSchema } from "../sampling/constraints/index.js";
import type { LanguageModel } from "../models/index.js";
import type { SamplingOptions } from "../sampling/index.js";
import type { PromptNormalization } from "../tokenizer/index.js";
import type { TokenLogprob } from "./logprobs.js";
import type { SpeculativeStats } from "./speculative.js";
import type { Timings } from "./timings.js";

/** the constraint the options ask for (at most one of grammar, jsonSchema, json, choice, regex) */
export function constraintOf(options: GenerateOptions): ConstraintSpec | undefined {
  const given = (["grammar", "jsonSchema", "json", "choice", "regex"] as const).filter((k) => options[k] !== undefined);
  if (given.length > 1) throw new RangeError(`give one of grammar, jsonSchema, json, choice and regex, not ${given.join(" and ")}`);
  if (options.grammar !== undefined) return { grammar: options.grammar };
  if (options.jsonSchema !== undefined) return { jsonSchema: options.jsonSchema };
  if (options.json !== undefined) {
    if (options.json !== "value" && options.json !== "object") throw new RangeError(`json must be "value" or "object", got ${JSON.stringify(options.json)}`);
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

/**
 * Why a completion ended where the reason alone does not say: which limit a "length" finish hit
 * (the completion's maxTokens, or the context: the KV cache holds no more positions), or, for a
 * "stop" under a constraint, that no token could follow (the grammar complete and the end token
 * not allowed, or no token of the vocabulary spells what the grammar needs)
 */
export type FinishDetail = `maxTokens (${number}) reached` | `context full (${number} tokens)` | "grammar complete" | "no token continues the grammar";

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
}

/** the number of completions `n` asks for, checked against the options it cannot be combined with */
export function validateChoices(options: GenerateOptions): number {
  const n = options.n ?? 1;
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`n must be an integer >= 1 (the number of completions), got ${String(options.n)}`);
  if (n > 1 && usesStrategy(options)) {
    throw new RangeError("n > 1 cannot be combined with beam search (use numReturnSequences) or speculative decoding");
  }
  if (options.numBeams !== undefined && (options.draftModel !== undefined || options.promptLookup)) {
    throw new RangeError("numBeams cannot be combined with speculative decoding (draftModel, promptLookup)");
  }
  if (options.draftModel !== undefined && options.promptLookup) throw new RangeError("draftModel and promptLookup are two ways of drafting: choose one");
  return n;
}

/** beam search or speculative decoding: token choices that are not one sample per step */
export function usesStrategy(options: GenerateOptions): boolean {
  return options.numBeams !== undefined || options.draftModel !== undefined || !!options.promptLookup;
}

/** everything that is not a generation option is a sampling option (unknown keys are rejected by the sampler) */
export function samplingOptionsOf(options: GenerateOptions): SamplingOptions {
  const { maxTokens: _m, stop: _s, addSpecialTokens: _a, ignoreEos: _i, signal: _g, stopTokens: _t, normalize: _n, logprobs: _l,
    numBeams: _nb, lengthPenalty: _lp, earlyStopping: _es, numReturnSequences: _nr, noRepeatNgramSize: _ng, draftModel: _dm, draftTokens: _dt, promptLookup: _pl, n: _nc, grammar: _gr, jsonSchema: _js, json: _jo, choice: _ch, regex: _rx,
    ...samplingOptions } = options;
  return samplingOptions;
}
