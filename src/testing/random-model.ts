import { GGMLType, rowByteLength, typeName } from "../tensor/index.js";
import { canQuantize, quantizeRow } from "../tensor/quant/index.js";
import { readGGUFHeader, GGUFValueType, ggufEntry, writeGGUF, type GGUFTensorSpec, type GGUFWriteEntry } from "../formats/index.js";
import { canRandomQuantize, randomQuantizedRow } from "./random-quant.js";
import { deriveSeed, Rng } from "./rng.js";

export type RandomModelArch = "llama" | "qwen2" | "qwen3" | "gpt2";

/**
 * Shape and weight format of a random-weight model in llama.cpp's GGUF layout.
 *
 * Weight formats: every 2-D matrix, token_embd and (untied) output included, is stored in
 * `weightType`, as llama.cpp's quantize does for a pure Q8_0 model (a k-quant matrix whose
 * rows are not a multiple of 256 gets llama.cpp's fallback type, see `storageType`). 1-D tensors (norms,
 * biases, Qwen3's q/k norms) and GPT-2's position_embd stay F32. A type `quantizeRow` supports
 * is quantized from the same seeded normals the F32 model holds, so an F32 and a Q8_0 model
 * from the same spec and seed carry the same weights up to quantization; a block type without
 * a quantizer gets random quant bits from `randomQuantizedRow` instead.
 */
export interface RandomModelSpec {
  readonly arch: RandomModelArch;
  readonly embeddingLength: number;
  readonly blockCount: number;
  readonly headCount: number;
  readonly headCountKv: number;
  readonly feedForwardLength: number;
  readonly contextLength: number;
  /** RoPE base (not used by gpt2); default 10000 */
  readonly ropeTheta?: number;
  /** per-head size; default embeddingLength / headCount. Written as attention.key_length/value_length when it differs */
  readonly headDim?: number;
  /** no output.weight: the LM head is token_embd (llama.cpp falls back to it) */
  readonly tiedEmbeddings?: boolean;
  readonly weightType: GGMLType;
  /** standard deviation of the weights; default 0.02. Norm weights are 1 + std * N(0,1) */
  readonly std?: number;
  /** RMSNorm / LayerNorm epsilon; default 1e-5 (1e-6 for qwen2/qwen3) */
  readonly normEps?: number;
  readonly seed: number;
  /** a GGUF whose tokenizer.* keys are copied; the model's vocabulary size is its token count */
  readonly tokenizerFrom: string;
  /**
   * rows of token_embd (and output) instead of the token count: more is a padded embedding (as
   * Hugging Face checkpoints have), fewer a tokenizer with ids that have no row (llama.cpp refuses both)
   */
  readonly vocabSize?: number;
  /** more GGUF keys, written after the model's own (an embedding model's `<arch>.pooling_type`) */
  readonly extraMetadata?: readonly [string, GGUFWriteEntry][];
}

export interface RandomTensorPlan {
  readonly name: string;
  readonly type: GGMLType;
  readonly dims: number[];
  /** how the values are drawn: normal(std), norm weight 1 + normal(std) */
  readonly init: "normal" | "norm";
}

function headDimOf(s: RandomModelSpec): number {
  return s.headDim ?? s.embeddingLength / s.headCount;
}

function validate(s: RandomModelSpec): void {
  const bad = (field: string, msg: string) => new Error(`random model spec: ${field}: ${msg}`);
  for (const k of ["embeddingLength", "blockCount", "headCount", "headCountKv", "feedForwardLength", "contextLength"] as const) {
    if (!Number.isSafeInteger(s[k]) || s[k] < 1) throw bad(k, `expected a positive integer, found ${s[k]}`);
  }
  if (s.headCount % s.headCountKv !== 0) throw bad("headCountKv", `${s.headCountKv} does not divide headCount ${s.headCount}`);
  const hd = headDimOf(s);
  if (!Number.isInteger(hd) || hd < 2 || hd % 2 !== 0) throw bad("headDim", `expected an even integer, found ${hd}`);
  if (s.arch === "gpt2" && s.headCountKv !== s.headCount) throw bad("headCountKv", `gpt2 has no grouped-query attention: expected ${s.headCount}, found ${s.headCountKv}`);
  if (s.arch === "gpt2" && hd * s.headCount !== s.embeddingLength) throw bad("headDim", `gpt2 needs headDim * headCount = embeddingLength`);
}

/** tensors of the model in file order, with llama.cpp's names and ggml-order dims */
export function planRandomModel(s: RandomModelSpec, vocabSize: number): RandomTensorPlan[] {
  validate(s);
  const E = s.embeddingLength, F = s.feedForwardLength, V = vocabSize;
  const hd = headDimOf(s);
  const q = s.headCount * hd, kv = s.headCountKv * hd;
  const W = s.weightType;
  const out: RandomTensorPlan[] = [];
  const mat = (name: string, cols: number, rows: number) => out.push({ name, type: storageType(W, cols, name), dims: [cols, rows], init: "normal" });
  const vec = (name: string, n: number, init: "normal" | "norm") => out.push({ name, type: GGMLType.F32, dims: [n], init });

  mat("token_embd.weight", E, V);
  if (s.arch === "gpt2") out.push({ name: "position_embd.weight", type: GGMLType.F32, dims: [E, s.contextLength], init: "normal" });
  for (let i = 0; i < s.blockCount; i++) {
    const p = `blk.${i}.`;
    if (s.arch === "gpt2") {
      vec(`${p}attn_norm.weight`, E, "norm");
      vec(`${p}attn_norm.bias`, E, "normal");
      mat(`${p}attn_qkv.weight`, E, 3 * E);
      vec(`${p}attn_qkv.bias`, 3 * E, "normal");
      mat(`${p}attn_output.weight`, E, E);
      vec(`${p}attn_output.bias`, E, "normal");
      vec(`${p}ffn_norm.weight`, E, "norm");
      vec(`${p}ffn_norm.bias`, E, "normal");
      mat(`${p}ffn_up.weight`, E, F);
      vec(`${p}ffn_up.bias`, F, "normal");
      mat(`${p}ffn_down.weight`, F, E);
      vec(`${p}ffn_down.bias`, E, "normal");
      continue;
    }
    vec(`${p}attn_norm.weight`, E, "norm");
    mat(`${p}attn_q.weight`, E, q);
    mat(`${p}attn_k.weight`, E, kv);
    mat(`${p}attn_v.weight`, E, kv);
    if (s.arch === "qwen2") {
      vec(`${p}attn_q.bias`, q, "normal");
      vec(`${p}attn_k.bias`, kv, "normal");
      vec(`${p}attn_v.bias`, kv, "normal");
    }
    if (s.arch === "qwen3") {
      vec(`${p}attn_q_norm.weight`, hd, "norm");
      vec(`${p}attn_k_norm.weight`, hd, "norm");
    }
    mat(`${p}attn_output.weight`, q, E);
    vec(`${p}ffn_norm.weight`, E, "norm");
    mat(`${p}ffn_gate.weight`, E, F);
    mat(`${p}ffn_up.weight`, E, F);
    mat(`${p}ffn_down.weight`, F, E);
  }
  vec("output_norm.weight", E, "norm");
  if (s.arch === "gpt2") vec("output_norm.bias", E, "normal");
  if (!s.tiedEmbeddings) mat("output.weight", E, V);

  for (const t of out) {
    try {
      rowByteLength(t.type, t.dims[0]!);
    } catch (e) {
      throw new Error(`random model spec: tensor "${t.name}" (${t.dims.join("x")}) cannot be stored as ${typeName(t.type)}: ${(e as Error).message}`);
    }
  }
  return out;
}

/**
 * The type a matrix of `cols`-long rows is stored in: `type`, or — for a k-quant whose
 * 256-wide super-blocks do not divide the rows (SmolLM-135M's 576) — the replacement
 * llama.cpp's quantize picks for such tensors (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
 * IQ4_XS and the grid i-quants -> IQ4_NL, TQ1_0 / TQ2_0 -> Q4_0).
 */
function storageType(type: GGMLType, cols: number, name: string): GGMLType {
  const fallback = K_QUANT_FALLBACK.get(type);
  if (fallback === undefined || cols % 256 === 0) return type;
  if (fallback === null) throw new Error(`random model spec: tensor "${name}" has rows of ${cols}, not a multiple of 256, so it cannot be ${typeName(type)}; llama.cpp's quantize stores such a tensor in another type (Q4_0 in current releases, IQ4_NL in older ones) — choose Q4_K, Q5_K, Q6_K, IQ4_XS or a non-k-quant type`);
  return fallback;
}

const K_QUANT_FALLBACK = new Map<GGMLType, GGMLType | null>([
  [GGMLType.Q2_K, null],
  [GGMLType.Q3_K, null],
  [GGMLType.Q4_K, GGMLType.Q5_0],
  [GGMLType.Q5_K, GGMLType.Q5_1],
  [GGMLType.Q6_K, GGMLType.Q8_0],
  [GGMLType.IQ4_XS, GGMLType.IQ4_NL],
  // llama-quant.cpp's tensor_type_fallback for the grid i-quants and the ternary types
  ...[GGMLType.IQ2_XXS, GGMLType.IQ2_XS, GGMLType.IQ2_S, GGMLType.IQ3_XXS, GGMLType.IQ3_S, GGMLType.IQ1_S, GGMLType.IQ1_M].map((t): [GGMLType, GGMLType] => [t, GGMLType.IQ4_NL]),
  [GGMLType.TQ1_0, GGMLType.Q4_0],
  [GGMLType.TQ2_0, GGMLType.Q4_0],
]);

/** the llama.cpp hyperparameter keys for `s` */
export function randomModelMetadata(s: RandomModelSpec, vocabSize: number): [string, GGUFWriteEntry][] {
  const a = s.arch;
  const hd = headDimOf(s);
  const m: [string, GGUFWriteEntry][] = [
    ["general.architecture", ggufEntry.string(a)],
    ["general.name", ggufEntry.string(`tsllm random ${a} ${typeName(s.weightType)}`)],
    [`${a}.vocab_size`, ggufEntry.u32(vocabSize)],
    [`${a}.context_length`, ggufEntry.u32(s.contextLength)],
    [`${a}.embedding_length`, ggufEntry.u32(s.embeddingLength)],
    [`${a}.block_count`, ggufEntry.u32(s.blockCount)],
    [`${a}.feed_forward_length`, ggufEntry.u32(s.feedForwardLength)],
    [`${a}.attention.head_count`, ggufEntry.u32(s.headCount)],
    [`${a}.attention.head_count_kv`, ggufEntry.u32(s.headCountKv)],
  ];
  if (hd * s.headCount !== s.embeddingLength) {
    m.push([`${a}.attention.key_length`, ggufEntry.u32(hd)], [`${a}.attention.value_length`, ggufEntry.u32(hd)]);
  }
  if (a === "gpt2") {
    m.push([`${a}.attention.layer_norm_epsilon`, ggufEntry.f32(s.normEps ?? 1e-5)]);
  } else {
    m.push(
      [`${a}.rope.freq_base`, ggufEntry.f32(s.ropeTheta ?? 10000)],
      [`${a}.rope.dimension_count`, ggufEntry.u32(hd)],
      [`${a}.attention.layer_norm_rms_epsilon`, ggufEntry.f32(s.normEps ?? (a === "llama" ? 1e-5 : 1e-6))],
    );
  }
  return m;
}

/** the tokenizer.* entries of a vocab GGUF and its token count */
export function readTokenizerEntries(path: string): { entries: [string, GGUFWriteEntry][]; vocabSize: number } {
  const h = readGGUFHeader(path);
  const entries = [...h.metadata].filter(([k]) => k.startsWith("tokenizer."));
  const tokens = h.metadata.get("tokenizer.ggml.tokens");
  if (!tokens || tokens.type !== GGUFValueType.ARRAY || !Array.isArray(tokens.value)) {
    throw new Error(`${path}: tokenizer.ggml.tokens: expected an array of strings (tokenizerFrom must be a GGUF with a vocabulary)`);
  }
  return { entries, vocabSize: tokens.value.length };
}

/** bytes of one planned tensor, drawn row by row from its own seeded stream */
export function tensorBytes(t: RandomTensorPlan, s: RandomModelSpec): Uint8Array {
  const rng = new Rng(deriveSeed(s.seed, t.name));
  const std = s.std ?? 0.02;
  const n = t.dims[0]!;
  let rows = 1;
  for (const d of t.dims.slice(1)) rows *= d;
  const rowBytes = rowByteLength(t.type, n);
  const out = new Uint8Array(rowBytes * rows);
  const quantize = canQuantize(t.type);
  if (!quantize && !canRandomQuantize(t.type)) throw new Error(`random model: tensor "${t.name}": no quantizer and no random filler for ${typeName(t.type)}`);
  const row = new Float32Array(n);
  for (let r = 0; r < rows; r++) {
    const dst = out.subarray(r * rowBytes, (r + 1) * rowBytes);
    if (quantize) {
      rng.fillNormal(row, std, t.init === "norm" ? 1 : 0);
      quantizeRow(t.type, row, dst, n);
    } else {
      randomQuantizedRow(t.type, dst, rng, std, n);
    }
  }
  return out;
}

/**
 * Writes a random-weight model that llama.cpp loads. Tensors are produced one at a time
 * while the file is written, so at most one tensor is in memory.
 */
export async function writeRandomModel(path: string, spec: RandomModelSpec): Promise<void> {
  const { entries, vocabSize: tokens } = readTokenizerEntries(spec.tokenizerFrom);
  const vocabSize = spec.vocabSize ?? tokens;
  const plan = planRandomModel(spec, vocabSize);
  const tensors: GGUFTensorSpec[] = plan.map((t) => ({ name: t.name, type: t.type, dims: t.dims, data: () => tensorBytes(t, spec) }));
  await writeGGUF(path, { metadata: [...randomModelMetadata(spec, vocabSize), ...entries, ...(spec.extraMetadata ?? [])], tensors });
}
