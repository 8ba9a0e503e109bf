import { GGMLType } from "../../tensor/index.js";
import { dotBF16, dotF16, dotF32 } from "./dot-float.js";
import { dotQ2_K } from "./dot-q2_k.js";
import { dotQ3_K } from "./dot-q3_k.js";
import { dotQ4_0 } from "./dot-q4_0.js";
import { dotQ4_1 } from "./dot-q4_1.js";
import { dotQ4_K } from "./dot-q4_k.js";
import { dotQ5_0 } from "./dot-q5_0.js";
import { dotQ5_1 } from "./dot-q5_1.js";
import { dotQ5_K } from "./dot-q5_k.js";
import { dotQ6_K } from "./dot-q6_k.js";
import { dotQ8_0 } from "./dot-q8_0.js";
import { dotIQ4_NL, dotIQ4_XS } from "./dot-iq4.js";
import { dotINT8, dotNF4 } from "./dot-memory-only.js";
import { dotIQ1_M, dotIQ1_S, dotIQ2_S, dotIQ2_XS, dotIQ2_XXS, dotIQ3_S, dotIQ3_XXS, dotMXFP4, dotTQ1_0, dotTQ2_0 } from "./dot-iq-grid.js";
import { quantizeActivationsQ8_0, quantizeActivationsQ8_1 } from "./activation-quant.js";
import { quantizeRow } from "../../tensor/quant/index.js";
import type { DotKernel } from "./dot-kernel.js";

export type { DotKernel } from "./dot-kernel.js";

export interface VecDot {
  /** the type ggml converts activations to before the dot product */
  readonly vecDotType: GGMLType;
  readonly dot: DotKernel;
  /** converts an activation row to vecDotType exactly as llama.cpp's CPU backend does */
  readonly convert: (src: Float32Array, dst: Uint8Array, n: number) => void;
}

const viaQuantizeRow = (type: GGMLType) => (src: Float32Array, dst: Uint8Array, n: number) => quantizeRow(type, src, dst, n);
const toF32 = viaQuantizeRow(GGMLType.F32), toF16 = viaQuantizeRow(GGMLType.F16), toBF16 = viaQuantizeRow(GGMLType.BF16), toQ8_K = viaQuantizeRow(GGMLType.Q8_K);
const toQ8_0 = (src: Float32Array, dst: Uint8Array, n: number) => quantizeActivationsQ8_0(dst, src, n);
const toQ8_1 = (src: Float32Array, dst: Uint8Array, n: number) => quantizeActivationsQ8_1(dst, src, n);

/** ggml-cpu's type_traits_cpu: weight type -> (vec_dot_type, vec_dot) */
export const VEC_DOT: ReadonlyMap<GGMLType, VecDot> = new Map<GGMLType, VecDot>([
  [GGMLType.F32, { vecDotType: GGMLType.F32, dot: dotF32, convert: toF32 }],
  [GGMLType.F16, { vecDotType: GGMLType.F16, dot: dotF16, convert: toF16 }],
  [GGMLType.BF16, { vecDotType: GGMLType.BF16, dot: dotBF16, convert: toBF16 }],
  [GGMLType.Q4_0, { vecDotType: GGMLType.Q8_0, dot: dotQ4_0, convert: toQ8_0 }],
  [GGMLType.Q4_1, { vecDotType: GGMLType.Q8_1, dot: dotQ4_1, convert: toQ8_1 }],
  [GGMLType.Q5_0, { vecDotType: GGMLType.Q8_0, dot: dotQ5_0, convert: toQ8_0 }],
  [GGMLType.Q5_1, { vecDotType: GGMLType.Q8_1, dot: dotQ5_1, convert: toQ8_1 }],
  [GGMLType.Q8_0, { vecDotType: GGMLType.Q8_0, dot: dotQ8_0, convert: toQ8_0 }],
  [GGMLType.Q2_K, { vecDotType: GGMLType.Q8_K, dot: dotQ2_K, convert: toQ8_K }],
  [GGMLType.Q3_K, { vecDotType: GGMLType.Q8_K, dot: dotQ3_K, convert: toQ8_K }],
  [GGMLType.Q4_K, { vecDotType: GGMLType.Q8_K, dot: dotQ4_K, convert: toQ8_K }],
  [GGMLType.Q5_K, { vecDotType: GGMLType.Q8_K, dot: dotQ5_K, convert: toQ8_K }],
  [GGMLType.Q6_K, { vecDotType: GGMLType.Q8_K, dot: dotQ6_K, convert: toQ8_K }],
  [GGMLType.IQ4_NL, { vecDotType: GGMLType.Q8_0, dot: dotIQ4_NL, convert: toQ8_0 }],
  [GGMLType.IQ4_XS, { vecDotType: GGMLType.Q8_K, dot: dotIQ4_XS, convert: toQ8_K }],
  // tsllm's in-memory formats (no ggml counterpart): f32 activations
  [GGMLType.NF4, { vecDotType: GGMLType.F32, dot: dotNF4, convert: toF32 }],
  [GGMLType.INT8, { vecDotType: GGMLType.F32, dot: dotINT8, convert: toF32 }],
  [GGMLType.IQ2_XXS, { vecDotType: GGMLType.Q8_K, dot: dotIQ2_XXS, convert: toQ8_K }],
  [GGMLType.IQ2_XS, { vecDotType: GGMLType.Q8_K, dot: dotIQ2_XS, convert: toQ8_K }],
  [GGMLType.IQ2_S, { vecDotType: GGMLType.Q8_K, dot: dotIQ2_S, convert: toQ8_K }],
  [GGMLType.IQ3_XXS, { vecDotType: GGMLType.Q8_K, dot: dotIQ3_XXS, convert: toQ8_K }],
  [GGMLType.IQ3_S, { vecDotType: GGMLType.Q8_K, dot: dotIQ3_S, convert: toQ8_K }],
  [GGMLType.IQ1_S, { vecDotType: GGMLType.Q8_K, dot: dotIQ1_S, convert: toQ8_K }],
  [GGMLType.IQ1_M, { vecDotType: GGMLType.Q8_K, dot: dotIQ1_M, convert: toQ8_K }],
  [GGMLType.TQ1_0, { vecDotType: GGMLType.Q8_K, dot: dotTQ1_0, convert: toQ8_K }],
  [GGMLType.TQ2_0, { vecDotType: GGMLType.Q8_K, dot: dotTQ2_0, convert: toQ8_K }],
  [GGMLType.MXFP4, { vecDotType: GGMLType.Q8_0, dot: dotMXFP4, convert: toQ8_0 }],
]);
