import type { GGUFEntry, HFEncoderConfig, HFModelConfig } from "../formats/index.js";
import { ggufEntry } from "../formats/index.js";

/**
 * config.json as llama.cpp's hyperparameter keys (`general.architecture`, `llama.block_count`,
 * ...). A Hugging Face folder is loaded through these keys by the same model builders as a
 * GGUF file, and `tsllm convert` writes them.
 */
/** f32 keys hold what a GGUF file would read back, so a folder and its conversion load identically */
const f32 = (v: number) => ggufEntry.f32(Math.fround(v));

export function hfModelMetadata(cfg: HFModelConfig, name?: string): [string, GGUFEntry][] {
  const a = cfg.arch;
  const m: [string, GGUFEntry][] = [
    ["general.architecture", ggufEntry.string(a)],
    ["general.name", ggufEntry.string(name ?? cfg.hfArchitecture)],
    [`${a}.vocab_size`, ggufEntry.u32(cfg.vocabSize)],
    [`${a}.context_length`, ggufEntry.u32(cfg.contextLength)],
    [`${a}.embedding_length`, ggufEntry.u32(cfg.hiddenSize)],
    [`${a}.block_count`, ggufEntry.u32(cfg.blockCount)],
    [`${a}.feed_forward_length`, ggufEntry.u32(cfg.feedForwardLength)],
    [`${a}.attention.head_count`, ggufEntry.u32(cfg.headCount)],
  ];
  if (a === "gpt2") {
    m.push([`${a}.attention.layer_norm_epsilon`, f32(cfg.normEps)]);
    return m;
  }
  m.push(
    [`${a}.attention.head_count_kv`, ggufEntry.u32(cfg.headCountKv)],
    [`${a}.rope.freq_base`, f32(cfg.ropeTheta)],
    [`${a}.rope.dimension_count`, ggufEntry.u32(cfg.headDim)],
    [`${a}.attention.layer_norm_rms_epsilon`, f32(cfg.normEps)],
  );
  if (cfg.headDim * cfg.headCount !== cfg.hiddenSize) {
    m.push([`${a}.attention.key_length`, ggufEntry.u32(cfg.headDim)], [`${a}.attention.value_length`, ggufEntry.u32(cfg.headDim)]);
  }
  if (cfg.ropeScaling?.type === "linear") {
    m.push([`${a}.rope.scaling.type`, ggufEntry.string("linear")], [`${a}.rope.scaling.factor`, f32(cfg.ropeScaling.factor)]);
  }
  return m;
}

/** llama.cpp's pooling_type values (LLAMA_POOLING_TYPE_*) */
export const GGUF_POOLING: Readonly<Record<string, number>> = { none: 0, mean: 1, cls: 2, lasttoken: 3 };

/** a BERT encoder's config.json as llama.cpp's `bert` keys (what its converter writes) */
export function hfEncoderMetadata(cfg: HFEncoderConfig, pooling: "mean" | "cls" | "lasttoken", name?: string): [string, GGUFEntry][] {
  const a = "bert";
  return [
    ["general.architecture", ggufEntry.string(a)],
    ["general.name", ggufEntry.string(name ?? cfg.hfArchitecture)],
    [`${a}.context_length`, ggufEntry.u32(cfg.maxPositions)],
    [`${a}.embedding_length`, ggufEntry.u32(cfg.hiddenSize)],
    [`${a}.feed_forward_length`, ggufEntry.u32(cfg.feedForwardLength)],
    [`${a}.block_count`, ggufEntry.u32(cfg.blockCount)],
    [`${a}.attention.head_count`, ggufEntry.u32(cfg.headCount)],
    [`${a}.attention.layer_norm_epsilon`, f32(cfg.normEps)],
    [`${a}.attention.causal`, ggufEntry.bool(false)],
    [`${a}.pooling_type`, ggufEntry.u32(GGUF_POOLING[pooling]!)],
    ["tokenizer.ggml.token_type_count", ggufEntry.u32(cfg.typeVocabSize)],
  ];
}
