import { realpathSync, statSync } from "node:fs";
import { GGUFTensorSource, readGGUFHeader, splitCount, writeGGUF, ggufEntry, type GGUFEntry, type GGUFWriteEntry, type SourceTensorInfo } from "../formats/index.js";
import { GGMLType, isFileQuantization, quantizationType, typeInfo, typeName, FILE_QUANTIZATIONS, type FileQuantization } from "../tensor/index.js";
import { convertHFToGGUF, tensorSpecs } from "./convert.js";
import { FILE_TYPE_ALIASES, FILE_TYPES, fileTypeOf, planTensorTypes, type TypeFallback } from "./quant-mixture.js";

/**
 * `tsllm quantize`: a GGUF file or a Hugging Face folder -> a GGUF of one of llama-quantize's file
 * types, with the per-tensor mixture llama-quantize picks for it (quant-mixture.ts), or one type
 * everywhere with `pure`.
 */

/** what --type accepts: llama-quantize's names for the file types tsllm writes, aliases included */
export const QUANTIZE_TYPES: readonly string[] = [...Object.keys(FILE_TYPES), ...Object.keys(FILE_TYPE_ALIASES)];
/** what --tensor-type accepts: tensor types (ggml's names), as llama-quantize's --tensor-type */
export const TENSOR_TYPES: readonly string[] = [...FILE_QUANTIZATIONS, "f32", "f16", "bf16"];

export interface QuantizeOptions {
  /** the file type (QUANTIZE_TYPES) */
  readonly type: string;
  /** every quantized tensor the file type's base type, no mixture (llama-quantize --pure) */
  readonly pure?: boolean;
  /** keep output.weight in its stored type (llama-quantize --leave-output-tensor) */
  readonly leaveOutputTensor?: boolean;
  /** [pattern, type]: tensors whose name the regular expression matches get `type` (TENSOR_TYPES; the first match wins; llama-quantize --tensor-type) */
  readonly tensorTypes?: readonly (readonly [string, string])[];
  /** output.weight's tensor type (TENSOR_TYPES; llama-quantize --output-tensor-type) */
  readonly outputTensorType?: string;
  /** token_embd.weight's tensor type (TENSOR_TYPES; llama-quantize --token-embedding-type) */
  readonly tokenEmbeddingType?: string;
  /** a Hugging Face folder's tokenizer from this GGUF's tokenizer.* keys (as tsllm convert --vocab) */
  readonly vocab?: string;
}

export interface QuantizeResult {
  readonly tensors: number;
  /** tensors per written type */
  readonly types: Record<string, number>;
  /** matrices whose rows the asked type's blocks do not divide, and what they became */
  readonly fallbacks: readonly TypeFallback[];
  readonly bytes: number;
}

function tensorTypeOf(name: string, where: string): GGMLType {
  if (name === "f32") return GGMLType.F32;
  if (name === "f16") return GGMLType.F16;
  if (name === "bf16") return GGMLType.BF16;
  if (!isFileQuantization(name)) throw new Error(`${where}: expected one of ${TENSOR_TYPES.join(", ")}, found ${JSON.stringify(name)}`);
  return quantizationType(name as FileQuantization);
}

/** the per-tensor rule, counting what it writes into `types` */
function planner(options: QuantizeOptions, fromFolder: boolean, fallbacks: TypeFallback[], types: Record<string, number>): (infos: readonly SourceTensorInfo[], metadata: ReadonlyMap<string, GGUFEntry>) => (info: SourceTensorInfo) => GGMLType {
  const overrides = (options.tensorTypes ?? []).map(([pattern, t]) => {
    let re: RegExp;
    try {
      re = new RegExp(pattern);
    } catch (e) {
      throw new Error(`--tensor-type ${pattern}=${t}: ${(e as Error).message}`);
    }
    return [re, tensorTypeOf(t, `--tensor-type ${pattern}=${t}`)] as const;
  });
  const explicit: { outputTensorType?: GGMLType; tokenEmbeddingType?: GGMLType } = {};
  if (options.outputTensorType !== undefined) explicit.outputTensorType = tensorTypeOf(options.outputTensorType, `--output-tensor-type ${options.outputTensorType}`);
  if (options.tokenEmbeddingType !== undefined) explicit.tokenEmbeddingType = tensorTypeOf(options.tokenEmbeddingType, `--token-embedding-type ${options.tokenEmbeddingType}`);
  return (infos, metadata) => {
    const plan = planTensorTypes(infos, metadata, { fileType: options.type, pure: options.pure ?? false, leaveOutputTensor: options.leaveOutputTensor ?? false, overrides, fromFolder, ...explicit }, fallbacks);
    for (const t of plan.values()) types[typeName(t)] = (types[typeName(t)] ?? 0) + 1;
    return (info) => plan.get(info.name)!;
  };
}

/** Quantizes the model at `input` (a GGUF file or a Hugging Face folder) into the GGUF `out`. */
export async function quantizeModel(input: string, out: string, options: QuantizeOptions): Promise<QuantizeResult> {
  const fileType = fileTypeOf(options.type);
  if (fileType === undefined) throw new Error(`--type: expected one of ${QUANTIZE_TYPES.join(", ")}, found ${JSON.stringify(options.type)}`);
  if (same(input, out)) throw new Error(`${out}: the output is the input; write it to another path`);
  const refused = tensorTypesRefusal(options.type, options.tensorTypes?.length ?? 0);
  if (refused !== undefined) throw new Error(refused);
  const fallbacks: TypeFallback[] = [];
  const types: Record<string, number> = {};
  const fromFolder = statSync(input).isDirectory();
  const plan = planner(options, fromFolder, fallbacks, types);
  let tensors: number, bytes: number;
  if (fromFolder) {
    ({ tensors, bytes } = await convertHFToGGUF(input, out, { tensorTypes: plan, fileType: fileType.ftype, ...(options.vocab !== undefined ? { vocab: options.vocab } : {}) }));
  } else {
    // a GGUF keeps its own tokenizer: a --vocab given for it would be silently ignored
    if (options.vocab !== undefined) throw new Error(`--vocab ${options.vocab}: only for a Hugging Face folder; ${input} is a GGUF file, whose tokenizer is kept`);
    const header = readGGUFHeader(input);
    if (splitCount(header) > 1) throw new Error(`${input}: a split GGUF; merge it first (llama-gguf-split --merge) or quantize its Hugging Face folder`);
    const metadata: [string, GGUFWriteEntry][] = [...header.metadata].filter(([k]) => k !== "general.file_type" && k !== "general.quantization_version");
    metadata.push(["general.file_type", ggufEntry.u32(fileType.ftype)], ["general.quantization_version", ggufEntry.u32(2)]);
    const source = new GGUFTensorSource(header);
    try {
      bytes = await writeGGUF(out, { metadata, tensors: tensorSpecs(source, header.tensors, plan(header.tensors, header.metadata)) }, [input]);
    } finally {
      source.close();
    }
    tensors = header.tensors.length;
  }
  return { tensors, types, fallbacks, bytes };
}

/**
 * Why `overrides` --tensor-type options are refused with the file type `type`, or undefined: with
 * a float file type llama-quantize writes every matrix in that type and leaves the overrides unused
 * (it reads them only for a quantized one), which a user would not notice.
 */
export function tensorTypesRefusal(type: string, overrides: number): string | undefined {
  const fileType = fileTypeOf(type);
  if (overrides === 0 || fileType === undefined || typeInfo(fileType.base).blockSize > 1) return undefined;
  return `--tensor-type with the file type ${type}: llama-quantize applies --tensor-type to quantized file types only (with f32, f16 or bf16 every matrix is written in that type, the overrides unused); give a quantized type (where --tensor-type NAME=f16 keeps those tensors F16), or leave --tensor-type out`;
}

/** whether two paths name the same file (a path that does not exist yet names nothing) */
function same(a: string, b: string): boolean {
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return false;
  }
}
