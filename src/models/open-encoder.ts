import { encoderLayout } from "../convert/hf-encoder-tensors.js";
import { HFTensorSource } from "../convert/hf-tensors.js";
import { readHFEncoderConfig, SafetensorsModel, type HFEncoderConfig } from "../formats/index.js";
import { readSentenceTransformerConfig, type SentenceTransformerConfig } from "../formats/sentence-transformers.js";
import type { Backend } from "../kernels/index.js";
import { openTokenizer, type Tokenizer } from "../tokenizer/index.js";
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
  build(backend: Backend, options?: WeightStoreOptions): EncoderModel;
}

/**
 * Opens a Hugging Face encoder folder (BERT, RoBERTa / XLM-RoBERTa, DistilBERT; config.json,
 * safetensors, tokenizer files; sentence-transformers files if present). The checkpoint's
 * tensors are checked against the architecture here, before any weight is read.
 */
export function openEncoder(folder: string): OpenedEncoder {
  const config = readHFEncoderConfig(folder);
  const weights = SafetensorsModel.open(folder);
  const layout = (names: ReadonlySet<string>) => encoderLayout(config, names);
  new HFTensorSource(weights, layout).close();
  let tokenizer: Tokenizer;
  try {
    tokenizer = openTokenizer(folder);
  } catch (e) {
    throw new Error(`${folder}: cannot load the model's tokenizer: ${(e as Error).message}`);
  }
  const sentenceTransformers = readSentenceTransformerConfig(folder);
  return {
    path: folder,
    config,
    tokenizer,
    ...(sentenceTransformers ? { sentenceTransformers } : {}),
    build: (backend, options) => {
      const store = new WeightStore(new HFTensorSource(weights, layout), backend, options);
      try {
        const info = encoderConfig(config, store.parameterCount());
        const model = config.family === "distilbert" ? new DistilBertModel(info, backend, store) : new BertModel(info, backend, store);
        store.finish();
        return model;
      } finally {
        store.close();
      }
    },
  };
}
