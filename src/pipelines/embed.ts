import { statSync } from "node:fs";
import { readSentenceTransformerConfig, type Pooling, type SentenceTransformerConfig } from "../formats/index.js";
import type { Model } from "../llm.js";
import type { ModelInfo } from "../models/index.js";
import { inputTemplateOf, type EncodeOptions, type ModelInput, type Tokenizer } from "../tokenizer/index.js";
import { OptionError } from "../units/index.js";
import type { EncoderRunner } from "./encoder-runner.js";
import { describe, knownOptions } from "./inputs.js";

export interface EmbedOptions {
  /**
   * L2-normalize each vector (default: true when the folder has a Normalize module, else false; a
   * GGUF, encoder or decoder: true, as llama.cpp's tools). An encoder's Normalize module normalizes even when false
   */
  readonly normalize?: boolean;
  /** how token vectors become one (default: the folder's 1_Pooling config, else "mean") */
  readonly pooling?: Pooling;
  /**
   * keep the first `dimensions` components (sentence-transformers' truncate_dim, OpenAI's
   * `dimensions`): taken after pooling, before normalizing, so a normalized vector stays of unit
   * length. Meaningful for Matryoshka-trained models; any model's vectors can be cut.
   */
  readonly dimensions?: number;
  /**
   * text put before each text input (sentence-transformers' encode(prompt=...), e.g. "query: ");
   * token-id inputs are taken as they are
   */
  readonly prompt?: string;
  /**
   * one of the folder's prompts (config_sentence_transformers.json) by name, as
   * encode(prompt_name=...); without prompt or promptName the folder's default_prompt_name applies
   */
  readonly promptName?: string;
  /**
   * a generative model's embeddings (embeddingsOf): stops the call while it waits behind the
   * model's other passes (its engine's), or between passes, rejecting with the signal's reason
   */
  readonly signal?: AbortSignal;
}

/** EmbedOptions' names: any other key is refused (normalize_embeddings, prompt_name ... would otherwise be ignored) */
export const EMBED_OPTIONS: readonly string[] = ["normalize", "pooling", "dimensions", "prompt", "promptName", "signal"];

/** the prompt options alone: what decides an input's tokens */
export type PromptOptions = Pick<EmbedOptions, "prompt" | "promptName">;

/**
 * One input to embed: a text, or token ids of the model's vocabulary. Token ids are a text's
 * tokens as POST /tokenize gives them; the model's special tokens ([CLS] ... [SEP], <s> ... </s>)
 * are added where they are missing, so ids that already carry them (transformers'
 * tokenizer(text).input_ids) are taken as they are.
 */
export type EmbeddingInput = string | readonly number[];

const POOLINGS: readonly Pooling[] = ["mean", "cls", "max", "mean_sqrt_len", "weightedmean", "lasttoken"];

/** Python's str.isspace() for one UTF-16 unit (every such character is in the BMP): JavaScript's \s without U+FEFF, with U+001C-U+001F and U+0085 */
function isPythonSpace(c: number): boolean {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c === 0x85 || c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000;
}

/**
 * str.strip(), which sentence-transformers' Transformer.tokenize applies to each text before it
 * lower-cases and tokenizes it: a byte-level BPE (RoBERTa) or SentencePiece model would otherwise
 * read a leading space or a trailing newline as tokens of their own. (A scan, not a regex: /\s+$/
 * is quadratic on a long run of spaces inside the text.)
 */
function stripLikePython(text: string): string {
  let start = 0, end = text.length;
  while (start < end && isPythonSpace(text.charCodeAt(start))) start++;
  while (end > start && isPythonSpace(text.charCodeAt(end - 1))) end--;
  return text.slice(start, end);
}

/**
 * What is wrong with a list of token ids for this tokenizer, if anything: the first id that is
 * not one of its vocabulary, or is its padding token (ids of a padded batch: without their
 * attention mask the pads would be embedded as tokens, and the vector would not be the text's).
 */
export function tokenIdsProblem(ids: readonly unknown[], tokenizer: Tokenizer, vocabSize: number): { at: number; problem: string } | undefined {
  const t = tokenizer;
  // a padding id that doubles as another special token (a tokenizer padding with [SEP] or </s>) is that token
  const pad = t.padId !== undefined && ![t.clsId, t.sepId, t.bosId, t.eosId, t.unkId].includes(t.padId) ? t.padId : undefined;
  for (const [at, id] of ids.entries()) {
    if (typeof id !== "number" || !Number.isInteger(id) || id < 0 || id >= vocabSize) return { at, problem: `is ${JSON.stringify(id) ?? String(id)}: token ids are integers in [0, ${vocabSize})` };
    if (id === pad) return { at, problem: `is the padding token (id ${pad}): send each input's ids without padding` };
  }
  return undefined;
}

/**
 * One input's tokens before its text is encoded: token ids as they are, or a text to encode
 * (with `options`) and the ids around it. Kept apart from the encoding so that the same inputs give
 * the same tokens encoded whole (tokenize) or a slice at a time (tokenizeAsync: a multi-megabyte
 * input must not hold the event loop, a server's /health and its other requests, for seconds).
 */
type PlannedTokens = { readonly ids: number[] } | { readonly text: string; readonly options: EncodeOptions; readonly before: readonly number[]; readonly after: readonly number[] };

function encodedNow(tokenizer: Tokenizer, plans: readonly PlannedTokens[]): number[][] {
  return plans.map((p) => ("ids" in p ? p.ids : joined(p.before, tokenizer.encode(p.text, p.options), p.after)));
}

async function encodedInSlices(tokenizer: Tokenizer, plans: readonly PlannedTokens[]): Promise<number[][]> {
  const out: number[][] = [];
  for (const p of plans) out.push("ids" in p ? p.ids : joined(p.before, await tokenizer.encodeAsync(p.text, p.options), p.after));
  return out;
}

function joined(before: readonly number[], ids: number[], after: readonly number[]): number[] {
  return before.length === 0 && after.length === 0 ? ids : [...before, ...ids, ...after];
}

/**
 * The tokens of each input as the model takes them, special tokens included, not truncated
 * (texts stripped, and lower-cased when the sentence-transformers folder says so, as encode()).
 */
export function embeddingTokens(runner: EncoderRunner, inputs: readonly EmbeddingInput[], options: PromptOptions = {}): number[][] {
  return encodedNow(runner.tokenizer, encoderPlans(runner, inputs, options));
}

/** embeddingTokens, each text encoded a slice at a time (the event loop turning between slices) */
export function embeddingTokensAsync(runner: EncoderRunner, inputs: readonly EmbeddingInput[], options: PromptOptions = {}): Promise<number[][]> {
  return encodedInSlices(runner.tokenizer, encoderPlans(runner, inputs, options));
}

function encoderPlans(runner: EncoderRunner, inputs: readonly EmbeddingInput[], options: PromptOptions): PlannedTokens[] {
  const st = runner.opened.sentenceTransformers;
  const lower = st?.doLowerCase ?? false;
  const prompt = promptOf(options, st?.prompts ?? {}, st?.defaultPromptName) ?? "";
  const { prefix, suffix } = inputTemplateOf(runner.tokenizer).single;
  const vocabSize = runner.model.info.vocabSize;
  return inputs.map((input, i) => {
    const where = inputs.length === 1 ? "the input" : `input ${i}`;
    if (typeof input === "string") {
      // as encode(): the prompt joins the text before Transformer.tokenize strips it
      const text = stripLikePython(prompt + input);
      return { text: lower ? text.toLowerCase() : text, options: { addSpecialTokens: false }, before: prefix.map((t) => t.id), after: suffix.map((t) => t.id) };
    }
    if (!Array.isArray(input)) throw new TypeError(`embed: ${where}: expected a string or an array of token ids, got ${describe(input)}`);
    const bad = tokenIdsProblem(input, runner.tokenizer, vocabSize);
    if (bad) throw new RangeError(`embed: ${where}: token ${bad.at} ${bad.problem}`);
    const starts = prefix.length > 0 && prefix.every((t, j) => input[j] === t.id);
    // a token counts as the prefix or the suffix, not both ([SEP] alone becomes [CLS] [SEP])
    const ends = suffix.length > 0 && input.length >= (starts ? prefix.length : 0) + suffix.length && suffix.every((t, j) => input[input.length - suffix.length + j] === t.id);
    return { ids: [...(starts ? [] : prefix.map((t) => t.id)), ...input, ...(ends ? [] : suffix.map((t) => t.id))] };
  });
}

/**
 * The prompt a call uses, as sentence-transformers' encode(): `prompt` as given, else the named
 * one of `prompts` (an unknown name is an error), else the default's, else none.
 */
function promptOf(options: PromptOptions, prompts: Readonly<Record<string, string>>, defaultName: string | undefined): string | undefined {
  const { prompt, promptName } = options;
  if (prompt !== undefined) {
    if (typeof prompt !== "string") throw new OptionError(`prompt: expected a string, got ${describe(prompt)}`, "prompt");
    return prompt;
  }
  if (promptName !== undefined) {
    const names = Object.keys(prompts);
    if (typeof promptName !== "string" || !Object.hasOwn(prompts, promptName)) {
      throw new OptionError(`promptName: expected one of this model's prompts (${names.length > 0 ? names.map((n) => JSON.stringify(n)).join(", ") : "it has none: config_sentence_transformers.json names none"}), got ${typeof promptName === "string" ? JSON.stringify(promptName) : describe(promptName)}`, "promptName");
    }
    return prompts[promptName];
  }
  return defaultName === undefined ? undefined : prompts[defaultName];
}

/**
 * How many first tokens of each input the pooling leaves out: with a Pooling whose include_prompt
 * is false (INSTRUCTOR, GritLM), sentence-transformers' encode() zeroes the attention mask of the
 * first prompt_length positions before pooling (the model still attends to them), prompt_length
 * being the length of the prompt tokenized alone, less the special token it ends with ([SEP],
 * EOS). Token-id inputs get no prompt, so nothing of theirs is left out. `promptTokens` tokenizes
 * a text as the model's inputs are, without a prompt.
 */
function excludedPromptTokens(inputs: readonly EmbeddingInput[], options: PromptOptions, st: SentenceTransformerConfig | undefined, pooling: Pooling, t: Tokenizer, promptTokens: (text: string) => number[]): number[] {
  const prompt = st?.includePrompt === false ? (promptOf(options, st.prompts ?? {}, st.defaultPromptName) ?? "") : "";
  if (prompt === "") return inputs.map(() => 0);
  // sentence-transformers' releases disagree on the first token's vector once the prompt is masked (token 0, or the first after the prompt)
  if (pooling === "cls") throw new OptionError(`pooling: "cls" with a prompt on a Pooling that leaves the prompt out (include_prompt: false) has no one answer in sentence-transformers (token 0, or the first token after the prompt); choose another pooling or no prompt`, "pooling");
  const ids = promptTokens(prompt), last = ids.at(-1);
  const special = last !== undefined && (t.isSpecial(last) || [t.clsId, t.sepId, t.bosId, t.eosId, t.padId, t.unkId, t.maskId].includes(last));
  const n = special ? ids.length - 1 : ids.length;
  return inputs.map((input) => (typeof input === "string" ? n : 0));
}

/** tokens (special tokens included) cut to `maxLength` as the tokenizer truncates one text: the text's end goes, the special tokens stay */
function modelInputOf(runner: EncoderRunner, ids: readonly number[], maxLength: number): Pick<ModelInput, "ids" | "typeIds"> {
  const { prefix, suffix } = inputTemplateOf(runner.tokenizer).single;
  const kept = ids.length <= maxLength ? [...ids] : [...ids.slice(0, maxLength - suffix.length), ...ids.slice(ids.length - suffix.length)];
  const typeIds = kept.map((_, j) => (j < prefix.length ? prefix[j]!.typeId : j >= kept.length - suffix.length ? suffix[j - kept.length + suffix.length]!.typeId : 0));
  return { ids: kept, typeIds };
}

/**
 * Sentence embeddings as sentence-transformers' encode(): tokens truncated to max_seq_length,
 * the last hidden state pooled over the sequence's tokens (special tokens included, padding never
 * present), cut to `dimensions`, then normalized when asked or when the model has a Normalize
 * module.
 */
export async function embedWith(runner: EncoderRunner, inputs: readonly EmbeddingInput[], given?: EmbedOptions): Promise<Float32Array[]> {
  const options = knownOptions("embed", given, EMBED_OPTIONS);
  const st = runner.opened.sentenceTransformers;
  const d = runner.model.info.hiddenSize;
  const { pooling, dims } = checkedOptions(inputs, options, st?.pooling ?? "mean", d);
  // a GGUF as llama.cpp's tools (embd_normalize 2); a folder as sentence-transformers' encode()
  const normalize = (options.normalize ?? runner.opened.gguf === true) || (st?.normalize ?? false);
  const maxLength = embeddingMaxTokens(runner);
  const tokens = (await embeddingTokensAsync(runner, inputs, options)).map((ids) => modelInputOf(runner, ids, maxLength));
  const skips = excludedPromptTokens(inputs, options, st, pooling, runner.tokenizer, (text) => embeddingTokens(runner, [text], { prompt: "" })[0]!);
  const hidden = (await runner.run(tokens)).hidden;
  return hidden.map((h, i) => pooled(h, d, pooling, dims, normalize, skips[i]!, inputs.length === 1 ? "the input" : `input ${i}`));
}

/** the pooling and kept dimensions `options` ask for, checked (with the inputs' list) */
function checkedOptions(inputs: readonly EmbeddingInput[], options: EmbedOptions, defaultPooling: Pooling, d: number): { pooling: Pooling; dims: number } {
  const pooling = options.pooling ?? defaultPooling;
  if (!POOLINGS.includes(pooling)) throw new OptionError(`pooling: expected one of ${POOLINGS.join(", ")}, got ${JSON.stringify(pooling)}`, "pooling");
  const dims = options.dimensions ?? d;
  if (!Number.isInteger(dims) || dims < 1 || dims > d) throw new OptionError(`dimensions: expected an integer in 1..${d} (this model's embeddings have ${d}), got ${describe(options.dimensions)}`, "dimensions");
  if (!Array.isArray(inputs)) throw new TypeError(`embed: expected a list of inputs, got ${describe(inputs)}`);
  return { pooling, dims };
}

/**
 * One vector from a sequence's token vectors (`h`: tokens x d): pooled over the tokens from
 * `skip` on (the prompt's left out: excludedPromptTokens), cut to `dims`, then L2-normalized when
 * asked (torch.nn.functional.normalize, as sentence-transformers' Normalize; llama.cpp's
 * embd_normalize 2 is the same division).
 */
function pooled(h: Float32Array, d: number, pooling: Pooling, dims: number, normalize: boolean, skip = 0, where = "the input"): Float32Array {
  const n = h.length / d, v = new Float64Array(d);
  // sentence-transformers would answer zeros (or -1e9s for max) for a sequence all prompt: no vector of the text
  if (skip >= n) throw new RangeError(`embed: ${where}: the prompt takes all its ${n} tokens (after truncation), and this model's Pooling leaves the prompt out (include_prompt: false): nothing is left to pool`);
  if (pooling === "cls") for (let j = 0; j < d; j++) v[j] = h[j]!;
  else if (pooling === "lasttoken") for (let j = 0; j < d; j++) v[j] = h[(n - 1) * d + j]!;
  else if (pooling === "max") {
    v.fill(-Infinity);
    for (let t = skip; t < n; t++) for (let j = 0; j < d; j++) v[j] = Math.max(v[j]!, h[t * d + j]!);
  } else if (pooling === "weightedmean") {
    // sentence-transformers' position-weighted mean (SGPT, arXiv:2202.08904): token t (from 0) weighs t + 1, a left-out prompt's tokens nothing
    for (let t = skip; t < n; t++) for (let j = 0; j < d; j++) v[j] = v[j]! + (t + 1) * h[t * d + j]!;
    for (let j = 0; j < d; j++) v[j] = v[j]! / ((n * (n + 1)) / 2 - (skip * (skip + 1)) / 2);
  } else {
    for (let t = skip; t < n; t++) for (let j = 0; j < d; j++) v[j] = v[j]! + h[t * d + j]!;
    const div = pooling === "mean" ? n - skip : Math.sqrt(n - skip);
    for (let j = 0; j < d; j++) v[j] = v[j]! / div;
  }
  const out = v.subarray(0, dims);
  if (normalize) {
    // torch.nn.functional.normalize: x / max(||x||, 1e-12)
    let s = 0;
    for (let j = 0; j < dims; j++) s += out[j]! * out[j]!;
    const norm = Math.max(Math.sqrt(s), 1e-12);
    for (let j = 0; j < dims; j++) out[j] = out[j]! / norm;
  }
  return Float32Array.from(out);
}

/**
 * tokens one input keeps: max_seq_length (within the model's positions and a maxLength given), or
 * without one the model's and tokenizer's maximum. sentence-transformers' Transformer makes
 * max_seq_length the tokenizer's model_max_length and cuts to it, so tokenizer_config.json's own
 * model_max_length does not cut where max_seq_length is given, even when it is smaller
 */
export function embeddingMaxTokens(runner: EncoderRunner): number {
  const seq = runner.opened.sentenceTransformers?.maxSeqLength;
  return seq === undefined ? runner.maxLength : Math.min(seq, runner.givenMaxLength ?? runner.model.info.maxTokens);
}

const isDirectory = (path: string): boolean => statSync(path, { throwIfNoEntry: false })?.isDirectory() ?? false;

/** llama.cpp's LLAMA_POOLING_TYPE_* (the GGUF key `<arch>.pooling_type`) as sentence-transformers' pooling names; 0 (none) is undefined */
const GGUF_POOLINGS: Readonly<Record<number, Pooling | undefined>> = { 1: "mean", 2: "cls", 3: "lasttoken" };

/** rows of one embedding pass of a decoder at most: a batch is cut into passes of about this many tokens (the scratch grows with the rows) */
const DECODER_PASS_TOKENS = 512;

/**
 * llama.cpp's embd_normalize (common_embd_normalize, llama-embedding's --embd-normalize, llama-server's
 * embd_normalize), in place: -1 leaves the vector, 0 scales its largest magnitude to 32760 (int16's
 * range), 2 divides by the Euclidean norm, any other p by the p-norm; a zero vector stays zero.
 */
export function embdNormalize(v: Float32Array, p: number): void {
  if (p === -1) return;
  let sum = 0;
  if (p === 0) {
    for (const x of v) sum = Math.max(sum, Math.abs(x));
    sum /= 32760;
  } else {
    for (const x of v) sum += Math.abs(x) ** p;
    sum **= 1 / p;
  }
  const scale = sum > 0 ? 1 / sum : 0;
  for (let i = 0; i < v.length; i++) v[i] = v[i]! * scale;
}

/**
 * What an embedding model of either kind (an encoder's, pipeline.ts's EmbeddingModel, or a
 * decoder's) answers: its tokens and its vectors.
 */
export interface EmbeddingVectors {
  readonly path: string;
  readonly tokenizer: Tokenizer;
  readonly dimensions: number;
  /** tokens one input keeps (max_seq_length, the model's maximum or its context size); longer inputs are truncated */
  readonly maxTokens: number;
  /** token counts of the inputs as they would be embedded (after truncation; a text after its prompt) */
  countTokens(inputs: readonly EmbeddingInput[], options?: PromptOptions): number[];
  /** the tokens of each input as the model takes them (special tokens, BOS / EOS as the tokenizer adds them, a text after its prompt), before truncation: embed() takes them back as they are */
  tokenize(inputs: readonly EmbeddingInput[], options?: PromptOptions): number[][];
  /** tokenize, each text encoded a slice at a time: the event loop turns between slices (a server keeps answering while it tokenizes a multi-megabyte input) */
  tokenizeAsync(inputs: readonly EmbeddingInput[], options?: PromptOptions): Promise<number[][]>;
  /** one vector per input (a decoder's normalized unless `normalize: false`, llama.cpp's embd_normalize 2; an encoder's as its folder says); on any backend */
  embed(inputs: readonly EmbeddingInput[], options?: EmbedOptions): Promise<Float32Array[]>;
  /** frees the model */
  dispose(): void;
  /** `using m = await loadEmbeddingModel(...)` disposes it when the block ends */
  [Symbol.dispose](): void;
}

/** dispose() and the same as [Symbol.dispose], so that `using` frees a loaded model */
export function disposer(dispose: () => void): { dispose(): void; [Symbol.dispose](): void } {
  return { dispose, [Symbol.dispose]: dispose };
}

/**
 * A generative (decoder) model used for embeddings, as llama.cpp's embedding mode: the hidden
 * states after the final norm, pooled, then L2-normalized unless `normalize: false`.
 */
export interface DecoderEmbeddingModel extends EmbeddingVectors {
  readonly info: ModelInfo;
  /** the loaded model the vectors come from */
  readonly model: Model;
  /** the pooling used when a call names none: a sentence-transformers folder's, else the GGUF's `<arch>.pooling_type`, else "lasttoken" */
  readonly pooling: Pooling;
  /**
   * llama.cpp's pooling for this model is "none" (a GGUF without `<arch>.pooling_type`, or 0, and
   * no sentence-transformers Pooling): llama-server's POST /embedding then answers every token's vector
   */
  readonly poolingNone: boolean;
  /** every token's hidden state after the final norm, as they are (llama.cpp's pooling "none"), per input (truncated as embed()) */
  tokenEmbeddings(inputs: readonly EmbeddingInput[], options?: PromptOptions & Pick<EmbedOptions, "signal">): Promise<Float32Array[][]>;
}

/**
 * Embeddings from a loaded decoder (Llama, Qwen, GPT-2 ...) as llama.cpp computes them
 * (llama-embedding, llama-server --embeddings, node-llama-cpp's getEmbeddingFor): a text gets the
 * tokenizer's special tokens (BOS, and EOS where the GGUF's add_eos_token says so), each input
 * runs alone from position 0 with causal attention, and the hidden states after the final norm
 * are pooled: by `pooling`, else the GGUF's `<arch>.pooling_type` (mean, cls, last), else the last
 * token (what llama.cpp returns for a model whose pooling is "none": Qwen3-Embedding-style
 * last-token pooling). Vectors are L2-normalized unless `normalize: false` (node-llama-cpp's raw
 * vectors). A Hugging Face folder with sentence-transformers' modules.json is used as encode()
 * uses it: its Pooling, its Normalize module (none: unnormalized), max_seq_length and prompts.
 */
export function embeddingsOf(model: Model): DecoderEmbeddingModel {
  // a sentence-transformers folder (Qwen3-Embedding, gte-Qwen2 as Hugging Face folders) says how, as for an encoder
  const st = isDirectory(model.path) ? readSentenceTransformerConfig(model.path) : undefined;
  const code = model.metadata.number(`${model.info.architecture}.pooling_type`);
  if (code === 4) throw new Error(`${model.path}: ${model.info.architecture}.pooling_type is 4 (rank): this is a reranker, which gives scores, not embeddings`);
  const pooling = st?.pooling ?? (code === undefined ? undefined : GGUF_POOLINGS[code]) ?? "lasttoken";
  const t = model.tokenizer, vocabSize = model.info.vocabSize, d = model.info.embeddingLength;
  const maxTokens = Math.min(model.contextSize, model.info.maxPositions ?? Infinity, st?.maxSeqLength ?? Infinity);
  const plans = (inputs: readonly EmbeddingInput[], options: PromptOptions = {}): PlannedTokens[] => {
    if (!Array.isArray(inputs)) throw new TypeError(`embed: expected a list of inputs, got ${describe(inputs)}`);
    // a GGUF names no prompts; a prompt given as text goes before each text, as a sentence-transformers folder's
    const prompt = promptOf(options, st?.prompts ?? {}, st?.defaultPromptName) ?? "";
    return inputs.map((input, i) => {
      const where = inputs.length === 1 ? "the input" : `input ${i}`;
      if (typeof input === "string") {
        // a sentence-transformers folder's Transformer strips (and maybe lower-cases) the text, as for an encoder; llama.cpp takes it as it is
        const text = st ? stripLikePython(prompt + input) : prompt + input;
        return { text: st?.doLowerCase ? text.toLowerCase() : text, options: { addSpecialTokens: true }, before: [], after: [] };
      }
      if (!Array.isArray(input)) throw new TypeError(`embed: ${where}: expected a string or an array of token ids, got ${describe(input)}`);
      if (input.length === 0) throw new RangeError(`embed: ${where}: an empty list of token ids`);
      const bad = tokenIdsProblem(input, t, vocabSize);
      if (bad) throw new RangeError(`embed: ${where}: token ${bad.at} ${bad.problem}`);
      // as node-llama-cpp's getEmbeddingFor: BOS / EOS added where the tokenizer adds them and the ids lack them
      const bos = t.addBos && t.bosId !== undefined && input[0] !== t.bosId ? [t.bosId] : [];
      const eos = t.addEos && t.eosId !== undefined && input[input.length - 1] !== t.eosId ? [t.eosId] : [];
      return { ids: [...bos, ...input, ...eos] };
    });
  };
  const tokenize = (inputs: readonly EmbeddingInput[], options?: PromptOptions): number[][] => encodedNow(t, plans(inputs, options));
  const tokenizeAsync = (inputs: readonly EmbeddingInput[], options?: PromptOptions): Promise<number[][]> => encodedInSlices(t, plans(inputs, options));
  // a long input keeps its first tokens, and its EOS where it ends with one (last-token pooling reads it)
  const cut = (ids: number[]): number[] => (ids.length <= maxTokens ? ids : t.addEos && ids[ids.length - 1] === t.eosId ? [...ids.slice(0, maxTokens - 1), ids[ids.length - 1]!] : ids.slice(0, maxTokens));
  return {
    path: model.path, tokenizer: t, info: model.info, model, dimensions: d, maxTokens, pooling, poolingNone: st === undefined && (code === undefined || code === 0),
    tokenEmbeddings: async (inputs, options = {}) =>
      (await model.hiddenStates((await tokenizeAsync(inputs, options)).map(cut), DECODER_PASS_TOKENS, options.signal)).map((h) => Array.from({ length: h.length / d }, (_, i) => h.slice(i * d, (i + 1) * d))),
    countTokens: (inputs, options) => tokenize(inputs, options).map((ids) => Math.min(ids.length, maxTokens)),
    tokenize,
    tokenizeAsync,
    embed: async (inputs, given) => {
      const options = knownOptions("embed", given, EMBED_OPTIONS);
      const { pooling: p, dims } = checkedOptions(inputs, options, pooling, d);
      // a sentence-transformers folder normalizes when it has a Normalize module (as encode()); a GGUF as llama.cpp's tools (embd_normalize 2)
      const normalize = options.normalize ?? st?.normalize ?? true;
      const sequences = (await tokenizeAsync(inputs, options)).map(cut);
      const where = (i: number) => (inputs.length === 1 ? "the input" : `input ${i}`);
      for (const [i, ids] of sequences.entries()) if (ids.length === 0) throw new RangeError(`embed: ${where(i)} has no tokens (an empty text, and a tokenizer that adds no BOS / EOS)`);
      const skips = excludedPromptTokens(inputs, options, st, p, t, (text) => tokenize([text], { prompt: "" })[0]!);
      // each input's rows are its own in any pass, so a batch equals one by one
      return (await model.hiddenStates(sequences, DECODER_PASS_TOKENS, options.signal)).map((h, i) => pooled(h, d, p, dims, normalize, skips[i]!, where(i)));
    },
    ...disposer(() => model.dispose()),
  };
}
