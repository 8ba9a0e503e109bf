import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { hfNameMap, permuteHeadRows, transposeBytes } from "../convert/index.js";
import { HF_ARCHITECTURES, type HFModelConfig, writeSafetensors, writeSafetensorsSharded, type SafetensorsTensorSpec } from "../formats/index.js";
import type { SafetensorsDType } from "../formats/index.js";
import { GGMLType } from "../tensor/index.js";
import { quantizeRow } from "../tensor/quant/index.js";
import { planRandomModel, readTokenizerEntries, type RandomModelSpec, type RandomTensorPlan } from "./random-model.js";
import { deriveSeed, Rng } from "./rng.js";

/**
 * The random-weight model of a `RandomModelSpec` written as a Hugging Face folder
 * (config.json + safetensors) instead of a GGUF: the same seeded values (`writeRandomModel`
 * draws each tensor row by row from a stream seeded by its GGUF name; so does this), laid out
 * as transformers stores them — HF names, Llama Q/K rows in the half-split RoPE order, GPT-2
 * Conv1D weights as [in, out] — so the folder and the F32 GGUF are the same model.
 */
export interface RandomHFOptions {
  /** dtype of the matrices (default F32) */
  readonly dtype?: "F32" | "F16" | "BF16";
  /** dtype of the tensors the GGUF keeps in F32: 1-D ones (norms, biases) and GPT-2's position table; default `dtype` */
  readonly vectorDtype?: "F32" | "F16" | "BF16";
  /** write shards of at most this many bytes plus model.safetensors.index.json */
  readonly shardBytes?: number;
  /** extra or replaced config.json fields */
  readonly config?: Readonly<Record<string, unknown>>;
  /** generation_config.json content, if any */
  readonly generationConfig?: Readonly<Record<string, unknown>>;
}

const HF_ARCH_NAME: Record<RandomModelSpec["arch"], string> = {
  llama: "LlamaForCausalLM",
  qwen2: "Qwen2ForCausalLM",
  qwen3: "Qwen3ForCausalLM",
  gpt2: "GPT2LMHeadModel",
};

/** config.json for the spec */
export function randomHFConfig(spec: RandomModelSpec, vocabSize: number): Record<string, unknown> {
  const hd = spec.headDim ?? spec.embeddingLength / spec.headCount;
  if (spec.arch === "gpt2") {
    return {
      architectures: [HF_ARCH_NAME.gpt2], model_type: "gpt2",
      vocab_size: vocabSize, n_embd: spec.embeddingLength, n_layer: spec.blockCount, n_head: spec.headCount,
      n_inner: spec.feedForwardLength, n_positions: spec.contextLength, n_ctx: spec.contextLength,
      layer_norm_epsilon: spec.normEps ?? 1e-5, tie_word_embeddings: spec.tiedEmbeddings ?? true,
    };
  }
  return {
    architectures: [HF_ARCH_NAME[spec.arch]], model_type: spec.arch,
    vocab_size: vocabSize, hidden_size: spec.embeddingLength, intermediate_size: spec.feedForwardLength,
    num_hidden_layers: spec.blockCount, num_attention_heads: spec.headCount, num_key_value_heads: spec.headCountKv,
    head_dim: hd, max_position_embeddings: spec.contextLength,
    rms_norm_eps: spec.normEps ?? (spec.arch === "llama" ? 1e-5 : 1e-6), rope_theta: spec.ropeTheta ?? 10000,
    tie_word_embeddings: spec.tiedEmbeddings ?? false,
  };
}

/** the f32 values of one planned tensor, exactly as writeRandomModel draws them */
function drawTensor(t: RandomTensorPlan, spec: RandomModelSpec): Float32Array {
  const rng = new Rng(deriveSeed(spec.seed, t.name));
  const n = t.dims.reduce((a, b) => a * b, 1);
  const out = new Float32Array(n);
  const cols = t.dims[0]!;
  for (let r = 0; r < n / cols; r++) rng.fillNormal(out.subarray(r * cols, (r + 1) * cols), spec.std ?? 0.02, t.init === "norm" ? 1 : 0);
  return out;
}

function encode(values: Float32Array, dtype: SafetensorsDType): Uint8Array {
  if (dtype === "F32") return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  const type = dtype === "BF16" ? GGMLType.BF16 : GGMLType.F16;
  const out = new Uint8Array(values.length * 2);
  quantizeRow(type, values, out, values.length);
  return out;
}

/** Writes the folder; returns its config. */
export async function writeRandomHFModel(folder: string, spec: RandomModelSpec, options: RandomHFOptions = {}): Promise<Record<string, unknown>> {
  const { vocabSize } = readTokenizerEntries(spec.tokenizerFrom);
  const plan = planRandomModel({ ...spec, weightType: GGMLType.F32 }, vocabSize);
  const config = { ...randomHFConfig(spec, vocabSize), ...options.config };
  const arch = HF_ARCHITECTURES[HF_ARCH_NAME[spec.arch]]!;
  const heads = { headCount: spec.headCount, headCountKv: spec.headCountKv };
  const map = hfNameMap({ arch, blockCount: spec.blockCount, ...heads } as HFModelConfig, new Set(["transformer.wte.weight"]));
  const tensors: SafetensorsTensorSpec[] = plan.map((t) => {
    const m = map.get(t.name);
    if (!m) throw new Error(`random HF model: no Hugging Face name for ${t.name}`);
    const keptF32 = t.dims.length === 1 || t.name === "position_embd.weight";
    const dtype = keptF32 ? (options.vectorDtype ?? options.dtype ?? "F32") : (options.dtype ?? "F32");
    const cols = t.dims[0]!, rows = t.dims.length > 1 ? t.dims[1]! : 1;
    const transposed = m.transform?.kind === "transpose";
    const shape = transposed ? [cols, rows] : [...t.dims].reverse();
    return {
      name: m.hf,
      dtype,
      shape,
      data: () => {
        let bytes = encode(drawTensor(t, spec), "F32");
        if (m.transform?.kind === "permute") bytes = permuteHeadRows(bytes, t.dims.length > 1 ? rows : cols, t.dims.length > 1 ? cols * 4 : 4, m.transform.heads, true);
        if (transposed) bytes = transposeBytes(bytes, rows, cols, 4);
        const f32 = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
        return encode(f32, dtype);
      },
    };
  });
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, "config.json"), JSON.stringify(config, null, 2) + "\n");
  if (options.generationConfig) writeFileSync(join(folder, "generation_config.json"), JSON.stringify(options.generationConfig, null, 2) + "\n");
  if (options.shardBytes !== undefined) await writeSafetensorsSharded(folder, tensors, options.shardBytes);
  else await writeSafetensors(join(folder, "model.safetensors"), tensors, { format: "pt" });
  return config;
}
