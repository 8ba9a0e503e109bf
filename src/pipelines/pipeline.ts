import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { isEncoderModel, loadsAsEncoder, transformerFolder } from "../formats/index.js";
import { resolveModelReference } from "../hub/index.js";
import { loadModel, type LoadModelOptions, type Model } from "../llm.js";
import { disposer, EMBED_OPTIONS, embeddingMaxTokens, embeddingsOf, embeddingTokens, embeddingTokensAsync, embedWith, type DecoderEmbeddingModel, type EmbeddingVectors, type EmbedOptions } from "./embed.js";
import { EncoderRunner, type EncoderLoadOptions } from "./encoder-runner.js";
import { FEATURE_EXTRACTION_OPTIONS, featureExtraction, type FeatureExtractionOptions } from "./feature-extraction.js";
import { folderGeneration } from "./generation-config.js";
import { FILL_MASK_OPTIONS, fillMask, type FillMaskOptions } from "./fill-mask.js";
import { knownOptions, textsOf } from "./inputs.js";
import { TEXT_CLASSIFICATION_OPTIONS, textClassification, type TextClassificationInput, type TextClassificationOptions } from "./text-classification.js";
import { TEXT_GENERATION_OPTIONS, textGeneration, type TextGenerationOptions } from "./text-generation.js";
import { TOKEN_CLASSIFICATION_OPTIONS, tokenClassification, type TokenClassificationOptions } from "./token-classification.js";
import type { ChatMessageInput } from "../chat/index.js";
import type { EncoderInfo } from "../models/index.js";
import { OptionError, shownValue } from "../units/index.js";

export type PipelineTask =
  | "text-classification" | "sentiment-analysis"
  | "token-classification" | "ner"
  | "fill-mask"
  | "feature-extraction"
  | "text-generation";

/** transformers' default model for each task (used when pipeline() is given none) */
export const DEFAULT_MODELS: Readonly<Record<PipelineTask | "embeddings", string>> = {
  "text-classification": "distilbert/distilbert-base-uncased-finetuned-sst-2-english",
  "sentiment-analysis": "distilbert/distilbert-base-uncased-finetuned-sst-2-english",
  "token-classification": "dbmdz/bert-large-cased-finetuned-conll03-english",
  ner: "dbmdz/bert-large-cased-finetuned-conll03-english",
  "fill-mask": "distilbert/distilroberta-base",
  "feature-extraction": "distilbert/distilbert-base-cased",
  "text-generation": "openai-community/gpt2",
  embeddings: "sentence-transformers/all-MiniLM-L6-v2",
};

export const PIPELINE_TASKS = Object.keys(DEFAULT_MODELS).filter((t) => t !== "embeddings") as PipelineTask[];

/**
 * onWarning (text-generation, fill-mask, token-classification): where their warnings go, one line
 * each (default process.emitWarning): text-generation's load's and calls', fill-mask's targets that
 * are not vocabulary entries, token-classification's words guessed from spaces (first, average, max
 * with a tokenizer that marks no continuing token), text-classification's, fill-mask's and
 * feature-extraction's inputs cut with truncation left out (transformers' warnings); memoryMargin
 * (text-generation only): the free memory its default KV pool leaves unused, as loadModel's
 */
export type PipelineOptions = EncoderLoadOptions & Pick<LoadModelOptions, "contextSize" | "quantize" | "onWarning" | "memoryMargin">;

/**
 * The options a task's calls take, also taken by pipeline() as the pipeline's own: each call uses
 * them unless it gives its own, as transformers' pipeline(task, model, aggregation_strategy=...)
 */
const CALL_OPTIONS: Readonly<Record<PipelineTask, readonly string[]>> = {
  "text-classification": TEXT_CLASSIFICATION_OPTIONS,
  "sentiment-analysis": TEXT_CLASSIFICATION_OPTIONS,
  "token-classification": TOKEN_CLASSIFICATION_OPTIONS,
  ner: TOKEN_CLASSIFICATION_OPTIONS,
  "fill-mask": FILL_MASK_OPTIONS,
  "feature-extraction": FEATURE_EXTRACTION_OPTIONS,
  "text-generation": TEXT_GENERATION_OPTIONS,
};

/** EncoderLoadOptions' names */
const LOAD_OPTIONS = ["backend", "threads", "batchSize", "maxLength", "onWarning"];

/** what loading takes, by the kind of model a task loads (a decoder has no batchSize; maxLength is its calls') */
const ENCODER_LOAD = [...LOAD_OPTIONS, "contextSize", "quantize"];
const DECODER_LOAD = ["backend", "threads", "contextSize", "quantize", "onWarning", "memoryMargin"];

/**
 * Refuses an onWarning that is not a function, naming the function the caller called: it would
 * throw at the first warning, mid-call, and checked further down (loadModel's, EncoderRunner's)
 * the message would name another function's option. Checked before anything is loaded.
 */
function checkOnWarning(fn: string, options: { readonly onWarning?: unknown }): void {
  if (options.onWarning !== undefined && typeof options.onWarning !== "function") throw new OptionError(`${fn}: onWarning: expected a function (message: string) => void, got ${shownValue(options.onWarning)}`, "onWarning");
}

/** the options among `names` */
function pick(options: object, names: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(options).filter(([k]) => names.includes(k)));
}

interface PipelineBase {
  readonly task: PipelineTask;
  /** the model's local path */
  readonly path: string;
  /** stops the worker threads and frees the weights */
  dispose(): void;
  /** `using clf = await pipeline(...)` disposes it when the block ends */
  [Symbol.dispose](): void;
}

/** what an encoder task's pipeline tells of its inputs' length (a longer input is truncated) */
interface EncoderPipelineBase extends PipelineBase {
  /** tokens one input keeps, special tokens included */
  readonly maxTokens: number;
  /** an input's tokens before truncation, special tokens included (a pair: both texts') */
  countTokens(text: string, pair?: string): number;
}

export type TextClassificationPipeline = EncoderPipelineBase & ((input: TextClassificationInput | readonly TextClassificationInput[], options?: TextClassificationOptions) => Promise<unknown>);
/** input: a text, a list of texts, or with isSplitIntoWords a list of words (one pre-split text, answered as a batch of one: [[entities]]) or a list of such lists */
export type TokenClassificationPipeline = EncoderPipelineBase & ((input: string | readonly string[] | readonly (readonly string[])[], options?: TokenClassificationOptions) => Promise<unknown>);
export type FillMaskPipeline = EncoderPipelineBase & ((input: string | readonly string[], options?: FillMaskOptions) => Promise<unknown>);
export type FeatureExtractionPipeline = EncoderPipelineBase & ((input: string | readonly string[], options?: FeatureExtractionOptions) => Promise<number[][][] | number[][][][]>);
export type TextGenerationPipeline = PipelineBase & ((input: string | readonly string[] | readonly ChatMessageInput[], options?: TextGenerationOptions) => Promise<unknown>) & {
  readonly model: Model;
  /** whether a call with these options samples (doSample as the call resolves it: the options, the pipeline's, the folder's generation_config.json) */
  readonly samples: (options?: TextGenerationOptions) => boolean;
};

export type AnyPipeline = TextClassificationPipeline | TokenClassificationPipeline | FillMaskPipeline | FeatureExtractionPipeline | TextGenerationPipeline;

/**
 * text-generation loads the folder's own model (its config.json), as transformers' pipeline does,
 * so a decoder folder that also carries sentence-transformers modules generates with its top model.
 * Not loadsAsEncoder, which reads modules.json first: only a folder with no model of its own is
 * told apart by it, a sentence-transformers folder whose Transformer module sits in a subfolder
 * (0_Transformer/): refused naming that folder to pass (isEncoderModel already tells an encoder there).
 */
function checkGenerator(path: string): void {
  if (isEncoderModel(path)) throw new Error(`${path}: text-generation needs a decoder (causal LM); this is an encoder`);
  if (!statSync(path).isDirectory() || existsSync(join(path, "config.json"))) return;
  const module = transformerFolder(path);
  if (module === path) return;
  throw new Error(`${path}: no config.json of its own: a sentence-transformers folder whose Transformer module is ${module} (modules.json); text-generation loads a folder's own model, as transformers' pipeline does: pass ${module} to generate with it`);
}

/** The local path of `model`, or of the task's default model (with a clear error when it cannot be had). */
async function resolveFor(task: string, model: string | undefined): Promise<string> {
  if (model !== undefined) return resolveModelReference(model);
  const id = DEFAULT_MODELS[task as PipelineTask];
  try {
    return await resolveModelReference(id, { quiet: true });
  } catch (e) {
    throw new Error(`pipeline("${task}"): no model given, and transformers' default for this task, ${id}, is not available (${(e as Error).message}); download it with: tsllm download ${id}`);
  }
}

function attach<F extends (...a: never[]) => unknown, E extends object>(fn: F, extra: E): F & E {
  return Object.assign(fn, extra);
}

export async function pipeline(task: "text-classification" | "sentiment-analysis", model?: string, options?: PipelineOptions & TextClassificationOptions): Promise<TextClassificationPipeline>;
export async function pipeline(task: "token-classification" | "ner", model?: string, options?: PipelineOptions & TokenClassificationOptions): Promise<TokenClassificationPipeline>;
export async function pipeline(task: "fill-mask", model?: string, options?: PipelineOptions & FillMaskOptions): Promise<FillMaskPipeline>;
export async function pipeline(task: "feature-extraction", model?: string, options?: PipelineOptions & FeatureExtractionOptions): Promise<FeatureExtractionPipeline>;
export async function pipeline(task: "text-generation", model?: string, options?: Pick<PipelineOptions, "backend" | "threads" | "contextSize" | "quantize" | "onWarning" | "memoryMargin"> & TextGenerationOptions): Promise<TextGenerationPipeline>;
export async function pipeline(task: PipelineTask, model?: string, options?: PipelineOptions & (TextClassificationOptions | TokenClassificationOptions | FillMaskOptions | FeatureExtractionOptions | TextGenerationOptions)): Promise<AnyPipeline>;
/**
 * A Hugging Face-style pipeline: `await pipeline("sentiment-analysis", "folder")` returns a
 * function that takes inputs and returns what transformers' pipeline returns for them. Without
 * a model, transformers' default for the task (from the local Hub cache, or downloaded). A task's
 * call options given here (`{aggregationStrategy: "simple"}`, `{maxNewTokens: 20}`) are the
 * pipeline's own: each call uses them unless it gives its own.
 */
export async function pipeline(task: PipelineTask, model?: string, given?: PipelineOptions & object): Promise<AnyPipeline> {
  // an OptionError naming "task", as every other refused argument, so a caller can tell it without reading the message
  if (!PIPELINE_TASKS.includes(task)) throw new OptionError(`task: unknown pipeline task ${shownValue(task)} (supported: ${PIPELINE_TASKS.join(", ")})`, "task");
  const callNames = [...CALL_OPTIONS[task]];
  const loadNames = task === "text-generation" ? DECODER_LOAD : ENCODER_LOAD;
  const all = knownOptions("pipeline", given, [...loadNames, ...callNames]);
  const options: PipelineOptions = pick(all, loadNames);
  const calls = pick(all, callNames);
  checkOnWarning("pipeline", options);
  const warn = options.onWarning ?? ((message: string) => process.emitWarning(message));
  const path = await resolveFor(task, model);
  if (task === "text-generation") {
    checkGenerator(path);
    // the folder's generation settings, before the weights load: one it does not do refuses the folder
    const own = statSync(path).isDirectory() ? folderGeneration(path) : undefined;
    const m = await loadModel(path, { backend: options.backend, threads: options.threads, contextSize: options.contextSize, quantize: options.quantize, memoryMargin: options.memoryMargin, onWarning: warn });
    try {
      // the folder's generation settings under the options given, as transformers' pipeline (a GGUF has no generation_config.json)
      return attach(textGeneration(m, calls, warn, own ?? m.generationDefaults), { task, path, model: m, ...disposer(() => m.dispose()) });
    } catch (e) {
      m.dispose();
      throw e;
    }
  }
  const runner = await EncoderRunner.open(path, options);
  try {
    const base = { task, path, runner, maxTokens: runner.maxLength, countTokens: (text: string, pair?: string) => runner.tokenize(text, pair, Infinity).ids.length, ...disposer(() => runner.dispose()) };
    switch (task) {
      case "text-classification":
      case "sentiment-analysis":
        return attach(textClassification(runner, calls, warn), base);
      case "token-classification":
      case "ner":
        return attach(tokenClassification(runner, calls, warn), base);
      case "fill-mask":
        return attach(fillMask(runner, calls, warn), base);
      case "feature-extraction":
        return attach(featureExtraction(runner, calls, warn), base);
    }
  } catch (e) {
    runner.dispose();
    throw e;
  }
}


/** A loaded embedding model (a sentence-transformers folder, or any encoder: mean pooling by default). */
export interface EmbeddingModel extends EmbeddingVectors {
  /** hidden size, layers, ... of the encoder */
  readonly info: EncoderInfo;
  /** why the encoder's backend runs nothing any more though the model was not disposed (Backend.failure: a kernel worker died, the GPU device was lost); undefined while it runs */
  readonly failure: string | undefined;
}

export async function loadEmbeddingModel(model?: string, given?: EncoderLoadOptions): Promise<EmbeddingModel> {
  const options = knownOptions("loadEmbeddingModel", given, LOAD_OPTIONS);
  checkOnWarning("loadEmbeddingModel", options);
  const path = await resolveFor("embeddings", model);
  const runner = await EncoderRunner.open(path, options);
  const maxTokens = embeddingMaxTokens(runner);
  return {
    path,
    tokenizer: runner.tokenizer,
    info: runner.model.info,
    dimensions: runner.model.info.hiddenSize,
    maxTokens,
    countTokens: (inputs, o) => embeddingTokens(runner, inputs, o).map((ids) => Math.min(ids.length, maxTokens)),
    tokenize: (inputs, o) => embeddingTokens(runner, inputs, o),
    tokenizeAsync: (inputs, o) => embeddingTokensAsync(runner, inputs, o),
    embed: (inputs, o) => embedWith(runner, inputs, o),
    get failure() {
      return runner.backend.failure;
    },
    ...disposer(() => runner.dispose()),
  };
}

/**
 * An embedding model of either kind: an encoder (sentence-transformers folder, BERT-family folder
 * or GGUF) as loadEmbeddingModel, or a decoder (a Llama / Qwen / GPT-2 GGUF or folder: Qwen3-Embedding,
 * gte-Qwen2 ...) loaded with loadModel and used as llama.cpp's embedding mode (embeddingsOf).
 */
export async function openEmbeddingModel(model?: string, given?: EncoderLoadOptions): Promise<EmbeddingModel | DecoderEmbeddingModel> {
  const options = knownOptions("openEmbeddingModel", given, LOAD_OPTIONS);
  checkOnWarning("openEmbeddingModel", options);
  const path = await resolveFor("embeddings", model);
  // (a Transformer module in 0_Transformer/ is read as an encoder: one holding a decoder is refused naming it)
  if (loadsAsEncoder(path)) return loadEmbeddingModel(path, options);
  return embeddingsOf(await loadModel(path, { backend: options.backend, threads: options.threads, onWarning: options.onWarning }));
}

/**
 * Sentence embeddings with sentence-transformers' semantics (modules.json, 1_Pooling, Normalize,
 * max_seq_length): one vector per text (a single text: one vector). `model` is a path or hub
 * reference (loaded and freed by this call), a model from loadEmbeddingModel, or a decoder's
 * from embeddingsOf (a decoder's path works too: llama.cpp's embedding mode, see embeddingsOf).
 */
export async function embed(model: string | EmbeddingModel | DecoderEmbeddingModel | undefined, texts: string, options?: EmbedOptions & EncoderLoadOptions): Promise<number[]>;
export async function embed(model: string | EmbeddingModel | DecoderEmbeddingModel | undefined, texts: readonly string[], options?: EmbedOptions & EncoderLoadOptions): Promise<number[][]>;
export async function embed(model: string | EmbeddingModel | DecoderEmbeddingModel | undefined, texts: string | readonly string[], given?: EmbedOptions & EncoderLoadOptions): Promise<number[] | number[][]> {
  const list = textsOf("embed", texts); // before a model is loaded for nothing
  const options = knownOptions("embed", given, [...EMBED_OPTIONS, ...LOAD_OPTIONS]);
  checkOnWarning("embed", options);
  const owned = typeof model !== "object";
  const m = typeof model === "object" ? model : await openEmbeddingModel(model, pick(options, LOAD_OPTIONS));
  try {
    const out = (await m.embed(list, pick(options, EMBED_OPTIONS))).map((v) => Array.from(v));
    return typeof texts === "string" ? out[0]! : out;
  } finally {
    if (owned) m.dispose();
  }
}
