import { GGMLType, typeInfo } from "./dtypes.js";
import { OptionError } from "../units/index.js";

/**
 * The weight formats a user can ask for by name (load-time `quantize`, `tsllm quantize --type`),
 * and llama.cpp's rule for matrices whose rows are not whole blocks of the asked type.
 */

/** GGUF types (llama.cpp reads them) */
export const FILE_QUANTIZATIONS = ["q8_0", "q6_k", "q5_k", "q4_k", "q3_k", "q2_k", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl", "iq4_xs"] as const;
/** tsllm's in-memory formats (load_in_4bit / load_in_8bit analogues; no file holds them) */
export const MEMORY_QUANTIZATIONS = ["nf4", "int8"] as const;
export type FileQuantization = (typeof FILE_QUANTIZATIONS)[number];
export type Quantization = FileQuantization | (typeof MEMORY_QUANTIZATIONS)[number];
export const QUANTIZATIONS: readonly Quantization[] = [...FILE_QUANTIZATIONS, ...MEMORY_QUANTIZATIONS];

const TYPE_OF: Readonly<Record<Quantization, GGMLType>> = {
  q8_0: GGMLType.Q8_0, q6_k: GGMLType.Q6_K, q5_k: GGMLType.Q5_K, q4_k: GGMLType.Q4_K, q3_k: GGMLType.Q3_K, q2_k: GGMLType.Q2_K,
  q5_1: GGMLType.Q5_1, q5_0: GGMLType.Q5_0, q4_1: GGMLType.Q4_1, q4_0: GGMLType.Q4_0, iq4_nl: GGMLType.IQ4_NL, iq4_xs: GGMLType.IQ4_XS,
  nf4: GGMLType.NF4, int8: GGMLType.INT8,
};

export function isQuantization(s: string): s is Quantization {
  return Object.hasOwn(TYPE_OF, s);
}

export function isFileQuantization(s: string): s is FileQuantization {
  return (FILE_QUANTIZATIONS as readonly string[]).includes(s);
}

/** the ggml type of a quantization name; throws with the valid names */
export function quantizationType(name: string): GGMLType {
  if (!isQuantization(name)) throw new OptionError(`quantize: expected one of ${QUANTIZATIONS.join(", ")}, found ${JSON.stringify(name)}`, "quantize");
  return TYPE_OF[name];
}

/**
 * llama-quant.cpp's tensor_type_fallback (llama.cpp as node-llama-cpp 3.21.1 ships it): the type
 * used when a matrix's rows are not a multiple of the asked type's block. NF4 (blocks of 64)
 * falls back to INT8, whose rows have any length.
 */
export const ROW_FALLBACK: ReadonlyMap<GGMLType, GGMLType> = new Map<GGMLType, GGMLType>([
  [GGMLType.IQ4_XS, GGMLType.IQ4_NL],
  [GGMLType.Q2_K, GGMLType.Q4_0],
  [GGMLType.Q3_K, GGMLType.Q4_0],
  [GGMLType.Q4_K, GGMLType.Q5_0],
  [GGMLType.Q5_K, GGMLType.Q5_1],
  [GGMLType.Q6_K, GGMLType.Q8_0],
  [GGMLType.NF4, GGMLType.INT8],
]);

/** `want`, or its fallback, for a matrix with rows of `cols` values; undefined when neither divides them */
export function typeForRows(want: GGMLType, cols: number): GGMLType | undefined {
  for (let type: GGMLType | undefined = want; type !== undefined; type = ROW_FALLBACK.get(type)) {
    if (cols % typeInfo(type).blockSize === 0) return type;
  }
  return undefined;
}
