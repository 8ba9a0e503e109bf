import type { HFModelConfig, GGUFEntry } from "../formats/index.js";
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
