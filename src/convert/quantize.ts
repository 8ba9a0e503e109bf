import { realpathSync, statSync } from "node:fs";
import { GGUFTensorSource, readGGUFHeader, splitCount, writeGGUF, ggufEntry, type GGUFWriteEntry, type SourceTensorInfo } from "../formats/index.js";
import { GGMLType, isFileQuantization, quantizationType, typeForRows, typeName, FILE_QUANTIZATIONS, type FileQuantization } from "../tensor/index.js";
import { convertHFToGGUF, tensorSpecs } from "./convert.js";

/**
 * `tsllm quantize`: a GGUF file or a Hugging Face folder -> a GGUF whose matrices are `type`
 * (llama-quantize's uniform case: every 2-D weight the same type; no Q4_K_M-style mixture).
 */

/** what --type and --tensor-type accept: the GGUF quantizations plus the float types */
export const QUANTIZE_TYPES: readonly string[] = [...FILE_QUANTIZATIONS, "f32", "f16", "bf16"];

/** llama_ftype (general.file_type) of a uniform quantization; the k-quants as their _S variant (no mixture) */
const FILE_TYPE: Readonly<Record<string, number>> = {
  f32: 0, f16: 1, q4_0: 2, q4_1: 3, q8_0: 7, q5_0: 8, q5_1: 9, q2_k: 10, q3_k: 11, q4_k: 14, q5_k: 16, q6_k: 18, iq4_nl: 25, iq4_xs: 30, bf16: 32,
};

export interface QuantizeOptions {
  /** the type of every matrix (QUANTIZE_TYPES) */
  readonly type: string;
  /** keep output.weight in its stored type (llama-quantize --leave-output-tensor) */
  readonly leaveOutputTensor?: boolean;
  /** [pattern, type]: tensors whose name the regular expression matches get `type` (the first match wins; llama-quantize --tensor-type) */
  readonly tensorTypes?: readonly (readonly [string, string])[];
  /** a Hugging Face folder's tokenizer from this GGUF's tokenizer.* keys (as tsllm convert --vocab) */
  readonly vocab?: string;
}

export interface QuantizeResult {
  readonly tensors: number;
  /** tensors per written type */
  readonly types: Record<string, number>;
  /** matrices whose rows the asked type's blocks do not divide, and what they became */
  readonly fallbacks: readonly string[];
  readonly bytes: number;
}

function typeOfName(name: string, where: string): GGMLType {
  if (name === "f32") return GGMLType.F32;
  if (name === "f16") return GGMLType.F16;
  if (name === "bf16") return GGMLType.BF16;
  if (!isFileQuantization(name)) throw new Error(`${where}: expected one of ${QUANTIZE_TYPES.join(", ")}, found ${JSON.stringify(name)}`);
  return quantizationType(name as FileQuantization);
}

/** the per-tensor rule: overrides, then --leave-output-tensor, then the asked type (with llama.cpp's fallback, then F16) for matrices */
function planner(options: QuantizeOptions, fallbacks: string[]): (info: SourceTensorInfo) => GGMLType {
  const want = typeOfName(options.type, "--type");
  const overrides = (options.tensorTypes ?? []).map(([pattern, t]) => {
    let re: RegExp;
    try {
      re = new RegExp(pattern);
    } catch (e) {
      throw new Error(`--tensor-type ${pattern}=${t}: ${(e as Error).message}`);
    }
    return [re, typeOfName(t, `--tensor-type ${pattern}=${t}`)] as const;
  });
  const float = new Set([GGMLType.F32, GGMLType.F16, GGMLType.BF16]);
  return (info) => {
    if (info.dims.length < 2) return float.has(info.type) ? GGMLType.F32 : info.type;
    const cols = info.dims[0]!;
    const asked = overrides.find(([re]) => re.test(info.name))?.[1] ?? (options.leaveOutputTensor && info.name === "output.weight" ? info.type : info.name === "position_embd.weight" ? info.type : want);
    const type = typeForRows(asked, cols) ?? GGMLType.F16;
    if (type !== asked) fallbacks.push(`${info.name} (rows of ${cols}): ${typeName(asked)} -> ${typeName(type)}`);
    return type;
  };
}

/** Quantizes the model at `input` (a GGUF file or a Hugging Face folder) into the GGUF `out`. */
export async function quantizeModel(input: string, out: string, options: QuantizeOptions): Promise<QuantizeResult> {
  if (!QUANTIZE_TYPES.includes(options.type)) throw new Error(`--type: expected one of ${QUANTIZE_TYPES.join(", ")}, found ${JSON.stringify(options.type)}`);
  if (same(input, out)) throw new Error(`${out}: the output is the input; write it to another path`);
  const fallbacks: string[] = [];
  const plan = planner(options, fallbacks);
  const types: Record<string, number> = {};
  const counted = (info: SourceTensorInfo): GGMLType => {
    const t = plan(info);
    types[typeName(t)] = (types[typeName(t)] ?? 0) + 1;
    return t;
  };
  const fileType = FILE_TYPE[options.type]!;
  let tensors: number;
  if (statSync(input).isDirectory()) {
    tensors = (await convertHFToGGUF(input, out, { tensorType: counted, fileType, ...(options.vocab !== undefined ? { vocab: options.vocab } : {}) })).tensors;
  } else {
    // a GGUF keeps its own tokenizer: a --vocab given for it would be silently ignored
    if (options.vocab !== undefined) throw new Error(`--vocab ${options.vocab}: only for a Hugging Face folder; ${input} is a GGUF file, whose tokenizer is kept`);
    const header = readGGUFHeader(input);
    if (splitCount(header) > 1) throw new Error(`${input}: a split GGUF; merge it first (llama-gguf-split --merge) or quantize its Hugging Face folder`);
    const metadata: [string, GGUFWriteEntry][] = [...header.metadata].filter(([k]) => k !== "general.file_type" && k !== "general.quantization_version");
    metadata.push(["general.file_type", ggufEntry.u32(fileType)], ["general.quantization_version", ggufEntry.u32(2)]);
    const source = new GGUFTensorSource(header);
    try {
      await writeGGUF(out, { metadata, tensors: tensorSpecs(source, header.tensors, counted) }, [input]);
    } finally {
      source.close();
    }
    tensors = header.tensors.length;
  }
  return { tensors, types, fallbacks, bytes: statSync(out).size };
}

/** whether two paths name the same file (a path that does not exist yet names nothing) */
function same(a: string, b: string): boolean {
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return false;
  }
}
