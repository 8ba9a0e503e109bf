import type { GGUFEntry, SourceTensorInfo } from "../formats/index.js";
import { GGMLType, typeForRows, typeInfo, typeName } from "../tensor/index.js";

/*
 * llama-quantize's file types (llama_ftype) and the per-tensor mixture its llama-quant.cpp picks
 * for them (llama.cpp as node-llama-cpp 3.21.1 ships it), for the file types whose tensor types
 * tsllm writes. Q4_K_M is not "every matrix Q4_K": the LM head gets Q6_K, and some attn_v and
 * ffn_down layers get Q6_K too; even Q4_0 writes output.weight as Q6_K. --pure is llama-quantize's
 * flag for one type everywhere.
 */

/** a file type: general.file_type's number and the type its matrices start from */
interface FileType {
  readonly ftype: number;
  readonly base: GGMLType;
}

/** llama-quantize's names (lower-cased) for the file types tsllm writes */
export const FILE_TYPES: Readonly<Record<string, FileType>> = {
  f32: { ftype: 0, base: GGMLType.F32 },
  f16: { ftype: 1, base: GGMLType.F16 },
  bf16: { ftype: 32, base: GGMLType.BF16 },
  q4_0: { ftype: 2, base: GGMLType.Q4_0 },
  q4_1: { ftype: 3, base: GGMLType.Q4_1 },
  q5_0: { ftype: 8, base: GGMLType.Q5_0 },
  q5_1: { ftype: 9, base: GGMLType.Q5_1 },
  q8_0: { ftype: 7, base: GGMLType.Q8_0 },
  q2_k: { ftype: 10, base: GGMLType.Q2_K },
  q3_k_s: { ftype: 11, base: GGMLType.Q3_K },
  q3_k_m: { ftype: 12, base: GGMLType.Q3_K },
  q3_k_l: { ftype: 13, base: GGMLType.Q3_K },
  q4_k_s: { ftype: 14, base: GGMLType.Q4_K },
  q4_k_m: { ftype: 15, base: GGMLType.Q4_K },
  q5_k_s: { ftype: 16, base: GGMLType.Q5_K },
  q5_k_m: { ftype: 17, base: GGMLType.Q5_K },
  q6_k: { ftype: 18, base: GGMLType.Q6_K },
  iq4_nl: { ftype: 25, base: GGMLType.IQ4_NL },
  iq4_xs: { ftype: 30, base: GGMLType.IQ4_XS },
};

/** llama-quantize's aliases: Q3_K, Q4_K and Q5_K name the _M mixtures */
export const FILE_TYPE_ALIASES: Readonly<Record<string, string>> = { q3_k: "q3_k_m", q4_k: "q4_k_m", q5_k: "q5_k_m" };

/** the file type a name means (aliases resolved), or undefined */
export function fileTypeOf(name: string): FileType | undefined {
  return FILE_TYPES[FILE_TYPE_ALIASES[name] ?? name];
}

/** what the mixture reads of the model (llama.cpp's hparams as its quantize loads them) */
interface ModelShape {
  readonly arch: string;
  readonly layers: number;
  /** n_head / n_head_kv of layer 0 (0 when n_head_kv is 0) */
  readonly gqa: number;
  readonly experts: number;
  /** llama.cpp's LLM_TYPE_70B: llama with 80 layers and grouped-query attention */
  readonly is70B: boolean;
}

function numberKey(metadata: ReadonlyMap<string, GGUFEntry>, key: string): number | undefined {
  const v = metadata.get(key)?.value;
  // per-layer arrays (head_count_kv of a hybrid model): llama.cpp's n_gqa() reads layer 0
  const first = typeof v === "object" && v !== null && "length" in v ? (v as ArrayLike<unknown>)[0] : v;
  return typeof first === "number" ? first : typeof first === "bigint" ? Number(first) : undefined;
}

function modelShape(metadata: ReadonlyMap<string, GGUFEntry>): ModelShape {
  const arch = String(metadata.get("general.architecture")?.value ?? "");
  const layers = numberKey(metadata, `${arch}.block_count`) ?? 0;
  const heads = numberKey(metadata, `${arch}.attention.head_count`) ?? 0;
  const kv = numberKey(metadata, `${arch}.attention.head_count_kv`) ?? heads;
  return { arch, layers, gqa: kv === 0 ? 0 : Math.floor(heads / kv), experts: numberKey(metadata, `${arch}.expert_count`) ?? 0, is70B: arch === "llama" && layers === 80 && heads !== kv };
}

/** the position and token-type tables, which llama.cpp's converter writes F32 at every --outtype (its tensors "always in float32") */
export const FLOAT32_TABLES: ReadonlySet<string> = new Set(["position_embd.weight", "token_types.weight"]);

/** llama-quant.cpp's tensor_allows_quantization: the 2-D+ weights it quantizes (others keep their type) */
const NEVER_QUANTIZED = [
  "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight",
  "indexer.k_proj.weight", "indexer.q_proj.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
  ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
  ...["first", "w0", "w1", "w2", "v0", "v1", "v2", "a0", "a1", "a2", "g1", "g2", "decay_w1", "decay_w2", "lerp_fused"].map((s) => `time_mix_${s}.weight`),
];

function allowsQuantization(info: SourceTensorInfo, leaveOutputTensor: boolean): boolean {
  const n = info.name;
  if (info.dims.length < 2 || !n.endsWith("weight")) return false;
  if (n === "position_embd.weight" || n === "token_types.weight" || (leaveOutputTensor && n === "output.weight")) return false;
  return !NEVER_QUANTIZED.some((s) => n.includes(s));
}

type Category = "output" | "token_embd" | "attn_v" | "attn_k" | "attn_q" | "attn_output" | "ffn_up" | "ffn_gate" | "ffn_down" | "other";

/** llama-quant.cpp's tensor_get_category (attn_qkv and attn_kv_b count as attn_v, as category_is_attn_v has them) */
function category(name: string): Category {
  if (name === "output.weight") return "output";
  if (name === "token_embd.weight" || name === "per_layer_token_embd.weight") return "token_embd";
  if (name.includes("attn_qkv.weight") || name.includes("attn_kv_b.weight") || name.includes("attn_v.weight")) return "attn_v";
  if (name.includes("attn_k.weight")) return "attn_k";
  if (name.includes("attn_q.weight")) return "attn_q";
  if (name.includes("attn_output.weight")) return "attn_output";
  if (name.includes("ffn_up")) return "ffn_up";
  if (name.includes("ffn_gate")) return "ffn_gate";
  if (name.includes("ffn_down")) return "ffn_down";
  return "other";
}

/** the block number of blk.N.*, or -1 */
function layerOf(name: string): number {
  const m = /^blk\.(\d+)\./.exec(name);
  return m ? Number(m[1]) : -1;
}

/** llama-quant.cpp's use_more_bits: the first and last eighth of the layers and every third one between */
function useMoreBits(i: number, n: number): boolean {
  const e = Math.trunc(n / 8);
  return i < e || i >= Math.trunc((7 * n) / 8) || (i - e) % 3 === 2;
}

export interface MixtureOptions {
  /** a FILE_TYPES name or alias */
  readonly fileType: string;
  /** every quantized tensor the file type's base type (llama-quantize --pure) */
  readonly pure?: boolean;
  readonly leaveOutputTensor?: boolean;
  /** [regular expression, type]: the first match wins over the mixture (llama-quantize --tensor-type; a float file type ignores them, as llama-quantize does) */
  readonly overrides?: readonly (readonly [RegExp, GGMLType])[];
  /**
   * output.weight's type (llama-quantize --output-tensor-type): over the mixture, --pure and
   * --tensor-type, with any file type; a tied model's token_embd.weight takes it too where the
   * mixture would give it the LM head's type. --leave-output-tensor keeps output.weight as stored.
   */
  readonly outputTensorType?: GGMLType;
  /** token_embd.weight's type (llama-quantize --token-embedding-type): over everything else, with any file type */
  readonly tokenEmbeddingType?: GGMLType;
  /** the tensors are a Hugging Face folder's: its position / token-type tables are written F32, as llama.cpp's converter writes them before llama-quantize keeps them */
  readonly fromFolder?: boolean;
}

/** a matrix whose rows the asked type's blocks do not divide, and the type it was written in instead */
export interface TypeFallback {
  readonly tensor: string;
  readonly rowLength: number;
  /** ggml's type names, as llama.cpp prints them: Q4_K */
  readonly asked: string;
  readonly type: string;
}

/**
 * Each tensor's type as llama-quantize picks it: tensors visited in its order (by block number,
 * then name), so that its per-layer counters see the same sequence; then a row length the type's
 * blocks do not divide falls back (tensor_type_fallback; F16 when the fallback does not divide
 * either). Fallbacks are pushed to `fallbacks`.
 */
export function planTensorTypes(infos: readonly SourceTensorInfo[], metadata: ReadonlyMap<string, GGUFEntry>, options: MixtureOptions, fallbacks: TypeFallback[]): Map<string, GGMLType> {
  const fileType = fileTypeOf(options.fileType);
  if (fileType === undefined) throw new Error(`quantize: expected one of ${[...Object.keys(FILE_TYPES), ...Object.keys(FILE_TYPE_ALIASES)].join(", ")}, found ${JSON.stringify(options.fileType)}`);
  const { ftype, base } = fileType;
  const shape = modelShape(metadata);
  const falcon = shape.arch === "falcon";
  const ordered = [...infos].sort((a, b) => layerOf(a.name) - layerOf(b.name) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const tied = !infos.some((t) => t.name === "output.weight");
  const nWv = infos.filter((t) => category(t.name) === "attn_v").length;
  const counters = { wv: 0, down: 0 };
  const quantized = typeInfo(base).blockSize > 1;

  /** llama_tensor_get_type_impl for the file types above (the IQ1/IQ2/IQ3/TQ/MXFP4 branches have no file type here) */
  const mixture = (info: SourceTensorInfo, cat: Category): GGMLType => {
    const n = shape.layers;
    if (cat === "output" || (tied && cat === "token_embd")) {
      if (options.outputTensorType !== undefined) return options.outputTensorType;
      if (falcon || info.dims[0]! % typeInfo(base).blockSize !== 0) return GGMLType.Q8_0;
      return base !== GGMLType.Q8_0 ? GGMLType.Q6_K : base;
    }
    let t = base;
    if (cat === "attn_v") {
      const i = counters.wv++;
      if (ftype === 10) t = shape.gqa >= 4 ? GGMLType.Q4_K : GGMLType.Q3_K;
      else if (ftype === 12) t = i < 2 ? GGMLType.Q5_K : GGMLType.Q4_K;
      else if (ftype === 13) t = GGMLType.Q5_K;
      else if ((ftype === 25 || ftype === 30) && shape.gqa >= 4) t = GGMLType.Q5_K;
      else if ((ftype === 15 || ftype === 17) && useMoreBits(i, nWv)) t = GGMLType.Q6_K;
      else if (ftype === 14 && i < 4) t = GGMLType.Q5_K;
      if (shape.is70B && (t === GGMLType.Q3_K || t === GGMLType.Q4_K)) t = GGMLType.Q5_K;
      if (shape.experts === 8) t = GGMLType.Q8_0;
    } else if (cat === "attn_k") {
      if (shape.experts === 8) t = GGMLType.Q8_0;
    } else if (cat === "ffn_down") {
      // a mixture-of-experts' expert tensors are not in layer order: llama.cpp reads the layer from the name
      const i = shape.experts > 1 ? layerOf(info.name) : counters.down;
      counters.down++;
      if (ftype === 10) t = GGMLType.Q3_K;
      else if (ftype === 12) t = i < Math.trunc(n / 16) ? GGMLType.Q5_K : !falcon || useMoreBits(i, n) ? GGMLType.Q4_K : GGMLType.Q3_K;
      else if (ftype === 13) t = falcon ? GGMLType.Q4_K : GGMLType.Q5_K;
      else if (ftype === 15) {
        if (falcon) t = i < Math.trunc(n / 16) ? GGMLType.Q6_K : useMoreBits(i, n) ? GGMLType.Q5_K : GGMLType.Q4_K;
        else if (useMoreBits(i, n)) t = GGMLType.Q6_K;
      } else if (i < Math.trunc(n / 8) && (ftype === 25 || ftype === 30)) t = GGMLType.Q5_K;
      else if (ftype === 17 && useMoreBits(i, n)) t = GGMLType.Q6_K;
      else if (ftype === 14 && !falcon && i < Math.trunc(n / 8)) t = GGMLType.Q5_K;
    } else if (cat === "attn_output") {
      if (!falcon) {
        if (shape.experts === 8) {
          if ([10, 11, 12, 14, 15, 25, 30].includes(ftype)) t = GGMLType.Q5_K;
        } else if (ftype === 10) t = GGMLType.Q3_K;
        else if (ftype === 12) t = GGMLType.Q4_K;
        else if (ftype === 13) t = GGMLType.Q5_K;
      } else if (ftype === 13) t = GGMLType.Q4_K;
    }
    return t;
  };

  const plan = new Map<string, GGMLType>();
  for (const info of ordered) {
    if (!allowsQuantization(info, options.leaveOutputTensor ?? false)) {
      // vectors are written F32, as llama.cpp's converter writes a folder's BF16 / F16 norms. From a
      // GGUF with F16 norms llama-quantize keeps them F16, and llama.cpp's CPU backend then aborts on
      // the first norm ("binary_op: unsupported types: dst: f32, src0: f32, src1: f16"): F32 loads
      const float = info.type === GGMLType.F32 || info.type === GGMLType.F16 || info.type === GGMLType.BF16;
      const f32 = info.dims.length < 2 || (options.fromFolder === true && FLOAT32_TABLES.has(info.name));
      plan.set(info.name, f32 && float ? GGMLType.F32 : info.type);
      continue;
    }
    const cat = category(info.name);
    // --token-embedding-type / --output-tensor-type: taken as given, before --tensor-type and the
    // mixture, with no fallback (llama-quantize then aborts on rows its blocks do not divide: refused here)
    const given = cat === "token_embd" ? options.tokenEmbeddingType : cat === "output" ? options.outputTensorType : undefined;
    if (given !== undefined) {
      const cols = info.dims[0]!;
      if (cols % typeInfo(given).blockSize !== 0) {
        const flag = cat === "output" ? "--output-tensor-type" : "--token-embedding-type";
        throw new Error(`${flag} ${typeName(given).toLowerCase()}: ${info.name} has rows of ${cols} values, not whole blocks of ${typeInfo(given).blockSize} (llama-quantize aborts on it); give a type whose blocks divide ${cols}, or leave ${flag} out`);
      }
      plan.set(info.name, given);
      continue;
    }
    // llama-quantize reads --tensor-type only for a quantized file type: F32/F16/BF16 write every matrix in theirs
    const manual = quantized ? options.overrides?.find(([re]) => re.test(info.name))?.[1] : undefined;
    // a manual type skips the mixture, and so its per-layer counters (llama.cpp counts only the tensors it visits)
    const asked = manual ?? (quantized && !options.pure ? mixture(info, cat) : base);
    const cols = info.dims[0]!;
    const type = typeForRows(asked, cols) ?? GGMLType.F16;
    if (type !== asked) fallbacks.push({ tensor: info.name, rowLength: cols, asked: typeName(asked), type: typeName(type) });
    plan.set(info.name, type);
  }
  return plan;
}
