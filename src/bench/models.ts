import { GGMLType, typeName } from "../tensor/index.js";
import { SMOLLM_135M, TINYLLAMA_1_1B, type RandomModelSpec } from "../testing/index.js";

/** A random-weight model the benchmark scripts know by name (generated once into the model cache). */
export interface BenchModel {
  readonly name: string;
  readonly spec: RandomModelSpec;
  /** generated only with --all or --only (a big file) */
  readonly onlyWithAll?: boolean;
}

/** `npm run bench`'s and `npm run bench:serve`'s models: the SmolLM-135M and TinyLlama-1.1B shapes in several weight types */
export const BENCH_MODELS: readonly BenchModel[] = [
  // IQ4_XS: as llama.cpp's quantize stores SmolLM's 576-wide rows, most matrices are IQ4_NL (ffn_down stays IQ4_XS)
  // IQ2_XS / IQ3_S likewise: the 576-wide matrices IQ4_NL (llama-quant.cpp's fallback), ffn_down IQ2_XS / IQ3_S
  ...[GGMLType.F32, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_K, GGMLType.IQ4_XS, GGMLType.IQ2_XS, GGMLType.IQ3_S].map((t) => ({ name: `smollm-${typeName(t).toLowerCase()}`, spec: { ...SMOLLM_135M, weightType: t } })),
  // the half-precision files, with --all or --only
  ...[GGMLType.F16, GGMLType.BF16].map((t) => ({ name: `smollm-${typeName(t).toLowerCase()}`, spec: { ...SMOLLM_135M, weightType: t }, onlyWithAll: true })),
  ...[GGMLType.Q8_0, GGMLType.Q4_0].map((t) => ({ name: `tinyllama-${typeName(t).toLowerCase()}`, spec: { ...TINYLLAMA_1_1B, weightType: t } })),
  // the F32 TinyLlama file is 4.4 GB, F16 / BF16 2.2 GB, the k-quants 0.6-0.9 GB (generated only with --all or --only; the wasm backend loads it across two memories)
  ...[GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K].map((t) => ({ name: `tinyllama-${typeName(t).toLowerCase()}`, spec: { ...TINYLLAMA_1_1B, weightType: t }, onlyWithAll: true })),
  // every TinyLlama matrix has rows of a multiple of 256, so these are IQ2_XS / IQ3_S throughout (random valid blocks)
  ...[GGMLType.IQ2_XS, GGMLType.IQ3_S].map((t) => ({ name: `tinyllama-${typeName(t).toLowerCase()}`, spec: { ...TINYLLAMA_1_1B, weightType: t }, onlyWithAll: true })),
];
