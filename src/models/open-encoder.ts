import { encoderLayout, HFTensorSource } from "../convert/index.js";
import { statSync } from "node:fs";
import { FileFieldError, GGUFError, GGUFMetadata, GGUFTensorSource, readGGUFHeader, readHFEncoderConfig, SafetensorsModel, type HFEncoderConfig, type TensorSource, readSentenceTransformerConfig, transformerFolder, type SentenceTransformerConfig, type SourceTensorInfo } from "../formats/index.js";
import type { Backend } from "../kernels/index.js";
import { openTokenizer, tokenizerFromGGUF, type Tokenizer } from "../tokenizer/index.js";
import { BertModel } from "./bert.js";
import { DistilBertModel } from "./distilbert.js";
import { encoderConfig, type EncoderModel } from "./encoder.js";
import { WeightStore, type WeightStoreOptions } from "./weights.js";

/** An encoder folder, opened: config, tokenizer, sentence-transformers modules, and how to build it. */
export interface OpenedEncoder {
  readonly path: string;
  readonly config: HFEncoderConfig;
  readonly tokenizer: Tokenizer;
  /** modules.json & co., when the folder is a sentence-transformers model */
  readonly sentenceTransformers?: SentenceTransformerConfig;
  /**
   * opened from a llama.cpp GGUF (not a Hugging Face folder): its sentence embeddings are
   * L2-normalized unless asked otherwise, as llama.cpp's llama-embedding and llama-server
   * (embd_normalize 2 by default); a folder follows sentence-transformers (its Normalize module)
   */
  readonly gguf?: boolean;
  /** the weights as the encoder sees them (llama.cpp's bert names, stored type and size), none read yet */
  readonly tensors: ReadonlyMap<string, SourceTensorInfo>;
  build(backend: Backend, options?: WeightStoreOptions): EncoderModel;
}

/**
 * Opens a Hugging Face encoder folder (BERT, RoBERTa / XLM-RoBERTa, DistilBERT; config.json,
 * safetensors, tokenizer files; sentence-transformers files if present). The checkpoint's
 * tensors are checked against the architecture here, before any weight is read.
 */
export function openEncoder(folder: string): OpenedEncoder {
  if (statSync(folder).isFile()) return openGGUFEncoder(folder);
  // the encoder's own files: a sentence-transformers folder's Transformer module (0_Transformer/ in the older layout)
  const own = transformerFolder(folder);
  const config = readHFEncoderConfig(own);
  const weights = SafetensorsModel.open(own);
  const layout = (names: ReadonlySet<string>) => encoderLayout(config, names);
  const probe = new HFTensorSource(weights, layout);
  probe.close();
  let tokenizer: Tokenizer;
  try {
    tokenizer = openTokenizer(own);
  } catch (e) {
    // a file refused keeps its class (path, field, code): its line names the file in the folder
    if (e instanceof FileFieldError) throw e;
    throw new Error(`${own}: cannot load the model's tokenizer: ${(e as Error).message}`);
  }
  const sentenceTransformers = readSentenceTransformerConfig(folder);
  return {
    path: folder,
    config,
    tokenizer,
    ...(sentenceTransformers ? { sentenceTransformers } : {}),
    tensors: probe.tensors,
    build: (backend, options) => buildEncoder(config, new HFTensorSource(weights, layout), backend, options),
  };
}

function buildEncoder(config: HFEncoderConfig, source: TensorSource, backend: Backend, options?: WeightStoreOptions): EncoderModel {
  const store = new WeightStore(source, backend, options);
  try {
    const info = encoderConfig(config, store.parameterCount());
    const model = config.family === "distilbert" ? new DistilBertModel(info, backend, store) : new BertModel(info, backend, store);
    store.finish();
    return model;
  } finally {
    store.close();
  }
}

/** llama.cpp's pooling_type -> sentence-transformers' pooling (0 "none" and unknown: mean) */
const POOLING_OF: Record<number, "mean" | "cls" | "lasttoken"> = { 1: "mean", 2: "cls", 3: "lasttoken" };

/**
 * A GGUF of llama.cpp's `bert` architecture (what its converter and `tsllm convert` write): the
 * base encoder (no heads), its WordPiece vocabulary, and bert.pooling_type as the embedding's pooling.
 */
function openGGUFEncoder(path: string): OpenedEncoder {
  const header = readGGUFHeader(path);
  const meta = new GGUFMetadata(path, header.metadata);
  const arch = meta.string("general.architecture");
  if (arch !== "bert") throw new GGUFError(path, "general.architecture", `expected "bert" for an encoder, found ${JSON.stringify(arch)}`);
  const tensors = new Map(header.tensors.map((t) => [t.name, t]));
  const rows = (name: string) => {
    const t = tensors.get(name);
    if (!t) throw new GGUFError(path, `tensor "${name}"`, "required tensor is missing");
    return t.dims[1]!;
  };
  const config: HFEncoderConfig = {
    path, hfArchitecture: "BertModel", family: "bert", head: "base",
    vocabSize: rows("token_embd.weight"),
    hiddenSize: meta.requireNumber("bert.embedding_length"),
    blockCount: meta.requireNumber("bert.block_count"),
    headCount: meta.requireNumber("bert.attention.head_count"),
    feedForwardLength: meta.requireNumber("bert.feed_forward_length"),
    maxPositions: rows("position_embd.weight"),
    positionOffset: 0,
    typeVocabSize: rows("token_types.weight"),
    normEps: meta.number("bert.attention.layer_norm_epsilon") ?? 1e-12,
    activation: "gelu",
    labels: [],
    tieWordEmbeddings: true,
  };
  if (config.hiddenSize % config.headCount !== 0) throw new GGUFError(path, "bert.attention.head_count", `${config.headCount} heads do not divide the hidden size ${config.hiddenSize}`);
  const pooling = POOLING_OF[meta.number("bert.pooling_type") ?? 1] ?? "mean";
  return {
    path, config, tokenizer: tokenizerFromGGUF(meta),
    sentenceTransformers: { pooling, normalize: false, doLowerCase: false },
    gguf: true,
    tensors,
    build: (backend, options) => buildEncoder(config, new GGUFTensorSource(header), backend, options),
  };
}
