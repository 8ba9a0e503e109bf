import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { GGMLType } from "../tensor/index.js";
import type { RandomModelSpec } from "./random-model.js";

/**
 * The project's shared test data (`<project root>/../shared`), resolved from this file so it
 * works from src/ (tsx) and dist/ alike. It may be absent (a fresh clone): callers check.
 */
export const SHARED_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "shared");
const vocab = (name: string) => join(SHARED_DIR, "tokenizer-tests", `ggml-vocab-${name}.gguf`);
/** stories260K's 512-token SentencePiece vocabulary keeps the tiny models tiny */
const STORIES_VOCAB = join(SHARED_DIR, "models", "stories260K.gguf");

/*
 * Presets are complete specs with weightType F32 and seed 1; override what you need:
 * `{ ...SMOLLM_135M, weightType: GGMLType.Q8_0 }`.
 */

/** SmolLM-135M's shape: 576 dim, 30 layers, 9/3 heads, ffn 1536, 49152-token starcoder vocab, tied */
export const SMOLLM_135M: RandomModelSpec = {
  arch: "llama",
  embeddingLength: 576,
  blockCount: 30,
  headCount: 9,
  headCountKv: 3,
  feedForwardLength: 1536,
  contextLength: 2048,
  ropeTheta: 10000,
  tiedEmbeddings: true,
  weightType: GGMLType.F32,
  seed: 1,
  tokenizerFrom: vocab("starcoder"),
};

/** TinyLlama-1.1B's shape: 2048 dim, 22 layers, 32/4 heads, ffn 5632, 32000-token llama vocab, untied */
export const TINYLLAMA_1_1B: RandomModelSpec = {
  arch: "llama",
  embeddingLength: 2048,
  blockCount: 22,
  headCount: 32,
  headCountKv: 4,
  feedForwardLength: 5632,
  contextLength: 2048,
  ropeTheta: 10000,
  tiedEmbeddings: false,
  weightType: GGMLType.F32,
  seed: 1,
  tokenizerFrom: vocab("llama-spm"),
};

/*
 * Tiny models for tests. Every row length (256, 512, 1024) is a multiple of 256, so every
 * ggml weight type, k-quants included, can be used.
 */

/** llama, grouped-query attention (4 heads / 2 kv heads of 64), untied, 512-token vocab */
export const tinyLlama: RandomModelSpec = {
  arch: "llama",
  embeddingLength: 256,
  blockCount: 2,
  headCount: 4,
  headCountKv: 2,
  feedForwardLength: 512,
  contextLength: 256,
  ropeTheta: 10000,
  tiedEmbeddings: false,
  weightType: GGMLType.F32,
  seed: 1,
  tokenizerFrom: STORIES_VOCAB,
};

/** qwen2: like tinyLlama plus Q/K/V biases, tied embeddings, byte-level BPE (starcoder) vocab */
export const tinyQwen2: RandomModelSpec = {
  ...tinyLlama,
  arch: "qwen2",
  ropeTheta: 1000000,
  tiedEmbeddings: true,
  tokenizerFrom: vocab("starcoder"),
};

/** qwen3: per-head q/k RMSNorm, head size 128 != 256/4 (so attention.key_length is written) */
export const tinyQwen3: RandomModelSpec = {
  ...tinyLlama,
  arch: "qwen3",
  headDim: 128,
  ropeTheta: 1000000,
  tiedEmbeddings: true,
};

/** gpt2: learned positions, LayerNorm with bias, fused QKV with bias, biased GELU MLP, GPT-2 vocab, tied like GPT-2 */
export const tinyGpt2: RandomModelSpec = {
  arch: "gpt2",
  embeddingLength: 256,
  blockCount: 2,
  headCount: 4,
  headCountKv: 4,
  feedForwardLength: 1024,
  contextLength: 256,
  tiedEmbeddings: true,
  weightType: GGMLType.F32,
  seed: 1,
  tokenizerFrom: vocab("gpt-2"),
};
