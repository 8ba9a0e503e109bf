import { GGUFError, type GGUFMetadata } from "../formats/index.js";
import type { ModelInfo } from "./model.js";

/** A decoder's shape as read from its metadata. */
export type DecoderShape = Pick<ModelInfo, "embeddingLength" | "blockCount" | "headCount" | "headCountKv" | "headDim" | "feedForwardLength" | "contextLength"> & {
  readonly normEps: number;
  /** RoPE models only */
  readonly rope?: { readonly ropeDim: number; readonly base: number };
};

/** the most of any one size a model file may declare: far above any real model, far below what would exhaust memory */
const MAX_SIZE = 1 << 20;

/**
 * Checks every hyper-parameter against its range and the others before any weight is read, so a
 * hostile or broken file fails at load with the file and key named (not later as a spin in
 * attention, an invalid typed array length or NaN logits). `key` maps a field to its metadata key.
 */
export function checkDecoderShape(meta: GGUFMetadata, shape: DecoderShape, key: (field: keyof DecoderShape | "ropeDim" | "ropeBase") => string): void {
  const fail = (field: Parameters<typeof key>[0], msg: string): never => {
    throw new GGUFError(meta.path, key(field), msg);
  };
  const size = (field: keyof DecoderShape, v: number, max = MAX_SIZE) => {
    if (!Number.isInteger(v) || v < 1 || v > max) fail(field, `expected an integer in [1, ${max}], found ${v}`);
  };
  size("embeddingLength", shape.embeddingLength);
  size("blockCount", shape.blockCount, 4096);
  size("headCount", shape.headCount, 4096);
  size("headCountKv", shape.headCountKv, 4096);
  size("feedForwardLength", shape.feedForwardLength);
  size("contextLength", shape.contextLength, 1 << 24);
  if (shape.headCount % shape.headCountKv !== 0) fail("headCountKv", `${shape.headCount} heads cannot be grouped over ${shape.headCountKv} KV heads`);
  if (!Number.isInteger(shape.headDim) || shape.headDim < 1 || shape.headDim > 4096) {
    fail("headDim", `head size ${shape.headDim} (embedding ${shape.embeddingLength} / ${shape.headCount} heads) is not an integer in [1, 4096]`);
  }
  if (!(Number.isFinite(shape.normEps) && shape.normEps > 0 && shape.normEps < 1)) fail("normEps", `expected a norm epsilon in (0, 1), found ${shape.normEps}`);
  if (shape.rope) {
    const { ropeDim, base } = shape.rope;
    if (!Number.isInteger(ropeDim) || ropeDim < 2 || ropeDim % 2 !== 0 || ropeDim > shape.headDim) fail("ropeDim", `expected an even number of rotated dimensions in [2, head size ${shape.headDim}], found ${ropeDim}`);
    if (!(Number.isFinite(base) && base > 0)) fail("ropeBase", `expected a positive RoPE frequency base, found ${base}`);
  }
}

/**
 * The vocabulary the token embedding must have rows for: `key` (`ARCH.vocab_size`, config.json's
 * vocab_size for a HF folder) where the metadata declares it, as transformers sizes wte from it
 * (llama.cpp reads the key as n_vocab too), so a transposed or wrong embedding is refused against
 * the declared shape; else the embedding's own `rows` (most GGUF files declare none).
 */
export function declaredVocabSize(meta: GGUFMetadata, key: string, rows: number): number {
  return meta.number(key) ?? rows;
}
