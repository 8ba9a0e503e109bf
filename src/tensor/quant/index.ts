import { GGMLType, rowByteLength, typeInfo, typeName } from "../dtypes.js";
import { dequantizeBF16, dequantizeF16, dequantizeF32, quantizeBF16, quantizeF16, quantizeF32 } from "./float.js";
import { dequantizeQ2_K, quantizeQ2_K } from "./q2_k.js";
import { dequantizeQ3_K, quantizeQ3_K } from "./q3_k.js";
import { dequantizeQ4_0, quantizeQ4_0 } from "./q4_0.js";
import { dequantizeQ4_1, quantizeQ4_1 } from "./q4_1.js";
import { dequantizeQ4_K, quantizeQ4_K } from "./q4_k.js";
import { dequantizeQ5_0, quantizeQ5_0 } from "./q5_0.js";
import { dequantizeQ5_1, quantizeQ5_1 } from "./q5_1.js";
import { dequantizeQ5_K, quantizeQ5_K } from "./q5_k.js";
import { dequantizeQ6_K, quantizeQ6_K } from "./q6_k.js";
import { dequantizeQ8_0, quantizeQ8_0 } from "./q8_0.js";
import { dequantizeQ8_1, quantizeQ8_1 } from "./q8_1.js";
import { dequantizeQ8_K, quantizeQ8_K } from "./q8_k.js";
import { dequantizeIQ1_M, dequantizeIQ1_S, dequantizeIQ2_S, dequantizeIQ2_XS, dequantizeIQ2_XXS, dequantizeIQ3_S, dequantizeIQ3_XXS, dequantizeMXFP4, dequantizeTQ1_0, dequantizeTQ2_0 } from "./iq-grid.js";
import { dequantizeIQ4_NL, dequantizeIQ4_XS, quantizeIQ4_NL, quantizeIQ4_XS } from "./iq4.js";
import { dequantizeINT8, quantizeINT8 } from "./int8-row.js";
import { dequantizeNF4, quantizeNF4 } from "./nf4.js";

/**
 * Row-level (de)quantization over every supported ggml type. A "row" is `n` values; for block
 * types n must be a whole number of blocks. The byte side is a Uint8Array starting at the row's
 * first block, at any byteOffset (nothing here assumes alignment).
 */

export { bf16BitsToF32, f16BitsToF32, f32ToBF16Bits, f32ToF16Bits, readF16, readF32, roundToF16, writeF16, writeF32 } from "./half.js";
export { nearestInt, roundAway } from "./round.js";
export { scaleMinK4, scaleQ3K } from "./kquant-scales.js";
export { q8kBsum } from "./q8_k.js";
export { KVALUES_IQ4NL, iq4xsScale } from "./iq4.js";
export { NF4_CODE } from "./nf4.js";
export * as iqGrid from "./iq-grid.js";

type Dequantizer = (dst: Float32Array, src: Uint8Array, n: number) => void;
type Quantizer = (dst: Uint8Array, src: Float32Array, n: number) => void;

const DEQUANTIZERS: ReadonlyMap<GGMLType, Dequantizer> = new Map<GGMLType, Dequantizer>([
  [GGMLType.F32, dequantizeF32],
  [GGMLType.F16, dequantizeF16],
  [GGMLType.BF16, dequantizeBF16],
  [GGMLType.Q4_0, dequantizeQ4_0],
  [GGMLType.Q4_1, dequantizeQ4_1],
  [GGMLType.Q5_0, dequantizeQ5_0],
  [GGMLType.Q5_1, dequantizeQ5_1],
  [GGMLType.Q8_0, dequantizeQ8_0],
  [GGMLType.Q8_1, dequantizeQ8_1],
  [GGMLType.Q2_K, dequantizeQ2_K],
  [GGMLType.Q3_K, dequantizeQ3_K],
  [GGMLType.Q4_K, dequantizeQ4_K],
  [GGMLType.Q5_K, dequantizeQ5_K],
  [GGMLType.Q6_K, dequantizeQ6_K],
  [GGMLType.Q8_K, dequantizeQ8_K],
  [GGMLType.IQ4_NL, dequantizeIQ4_NL],
  [GGMLType.IQ4_XS, dequantizeIQ4_XS],
  [GGMLType.NF4, dequantizeNF4],
  [GGMLType.INT8, dequantizeINT8],
  [GGMLType.IQ2_XXS, dequantizeIQ2_XXS],
  [GGMLType.IQ2_XS, dequantizeIQ2_XS],
  [GGMLType.IQ2_S, dequantizeIQ2_S],
  [GGMLType.IQ3_XXS, dequantizeIQ3_XXS],
  [GGMLType.IQ3_S, dequantizeIQ3_S],
  [GGMLType.IQ1_S, dequantizeIQ1_S],
  [GGMLType.IQ1_M, dequantizeIQ1_M],
  [GGMLType.TQ1_0, dequantizeTQ1_0],
  [GGMLType.TQ2_0, dequantizeTQ2_0],
  [GGMLType.MXFP4, dequantizeMXFP4],
]);

const QUANTIZERS: ReadonlyMap<GGMLType, Quantizer> = new Map<GGMLType, Quantizer>([
  [GGMLType.F32, quantizeF32],
  [GGMLType.F16, quantizeF16],
  [GGMLType.BF16, quantizeBF16],
  [GGMLType.Q4_0, quantizeQ4_0],
  [GGMLType.Q4_1, quantizeQ4_1],
  [GGMLType.Q5_0, quantizeQ5_0],
  [GGMLType.Q5_1, quantizeQ5_1],
  [GGMLType.Q8_0, quantizeQ8_0],
  [GGMLType.Q8_1, quantizeQ8_1],
  [GGMLType.Q8_K, quantizeQ8_K],
  [GGMLType.Q2_K, quantizeQ2_K],
  [GGMLType.Q3_K, quantizeQ3_K],
  [GGMLType.Q4_K, quantizeQ4_K],
  [GGMLType.Q5_K, quantizeQ5_K],
  [GGMLType.Q6_K, quantizeQ6_K],
  [GGMLType.IQ4_NL, quantizeIQ4_NL],
  [GGMLType.IQ4_XS, quantizeIQ4_XS],
  [GGMLType.NF4, quantizeNF4],
  [GGMLType.INT8, quantizeINT8],
]);

/** whether dequantizeRow supports `type` */
export function canDequantize(type: GGMLType): boolean {
  return DEQUANTIZERS.has(type);
}

/** whether quantizeRow supports `type` */
export function canQuantize(type: GGMLType): boolean {
  return QUANTIZERS.has(type);
}

function checkRow(fn: string, type: GGMLType, bytes: Uint8Array, floats: Float32Array, n: number): number {
  if (!Number.isInteger(n) || n < 0) throw new Error(`${fn}: n must be a non-negative integer, got ${n}`);
  const { blockSize, name } = typeInfo(type);
  if (n % blockSize !== 0) throw new Error(`${fn}: n = ${n} is not a multiple of the ${name} block size ${blockSize}`);
  const need = rowByteLength(type, n);
  if (bytes.length < need) throw new Error(`${fn}: ${name} row of ${n} values needs ${need} bytes, the byte buffer has ${bytes.length}`);
  if (floats.length < n) throw new Error(`${fn}: the float buffer holds ${floats.length} values, expected at least ${n}`);
  return need;
}

/** dst[0..n) = the `n` values of the `type` row whose bytes start at src[0] */
export function dequantizeRow(type: GGMLType, src: Uint8Array, dst: Float32Array, n: number): void {
  const f = DEQUANTIZERS.get(type);
  if (!f) throw new Error(`dequantizeRow: type ${typeName(type)} is not supported`);
  checkRow("dequantizeRow", type, src, dst, n);
  f(dst, src, n);
}

/** writes src[0..n) as a `type` row into dst[0..rowByteLength(type, n)), as ggml's reference quantizers do */
export function quantizeRow(type: GGMLType, src: Float32Array, dst: Uint8Array, n: number): void {
  const f = QUANTIZERS.get(type);
  if (!f) throw new Error(`quantizeRow: type ${typeName(type)} is not supported`);
  checkRow("quantizeRow", type, dst, src, n);
  f(dst, src, n);
}
