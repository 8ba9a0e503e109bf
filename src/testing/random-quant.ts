import { GGMLType, rowByteLength, typeInfo, typeName } from "../tensor/index.js";
import { f32ToF16Bits, writeF16, writeF32 } from "../tensor/quant/index.js";
import type { Rng } from "./rng.js";

/**
 * Byte layout of each block-quantized type's scale fields (ggml-common.h): where the f16
 * scale `d` (and `dmin`/`m`) sit in a block, and the size of the integer range the random
 * quant bits multiply, so `d` can be chosen to make the dequantized weights about `scale`
 * in magnitude.
 */
interface ScaleLayout {
  /** byte offset of the f16 scale d */
  readonly d: number;
  /** byte offset of the f16 min (dmin for k-quants, m for Q4_1/Q5_1), if any */
  readonly min?: number;
  /** typical largest |integer factor| multiplying d (quant level x sub-block scale) */
  readonly range: number;
  /** for types with a min: the min scale relative to d that centres the weights near zero */
  readonly minRatio?: number;
}

const LAYOUTS: Partial<Record<GGMLType, ScaleLayout>> = {
  // q in 0..15, weight (q - 8) * d
  [GGMLType.Q4_0]: { d: 0, range: 8 },
  // q in 0..15, weight q * d + m
  [GGMLType.Q4_1]: { d: 0, min: 2, range: 8, minRatio: -8 },
  // q in 0..31, weight (q - 16) * d
  [GGMLType.Q5_0]: { d: 0, range: 16 },
  [GGMLType.Q5_1]: { d: 0, min: 2, range: 16, minRatio: -16 },
  // q int8, weight q * d
  [GGMLType.Q8_0]: { d: 0, range: 128 },
  [GGMLType.Q8_1]: { d: 0, range: 128 },
  // scales[16] (4-bit scale | 4-bit min), qs[64] (2-bit), d @80, dmin @82; w = d*sc*q - dmin*m
  [GGMLType.Q2_K]: { d: 80, min: 82, range: 15 * 3 / 2, minRatio: 1.5 },
  // hmask[32], qs[64], scales[12] (6-bit, offset 32), d @108; w = d*(sc-32)*q, q in -4..3
  [GGMLType.Q3_K]: { d: 108, range: 32 * 4 / 2 },
  // d @0, dmin @2, scales[12] (6-bit scale and min), qs[128] (4-bit); w = d*sc*q - dmin*m
  [GGMLType.Q4_K]: { d: 0, min: 2, range: 63 * 15 / 2, minRatio: 7.5 },
  // d, dmin, scales[12], qh[32], qs[128] (5-bit)
  [GGMLType.Q5_K]: { d: 0, min: 2, range: 63 * 31 / 2, minRatio: 15.5 },
  // ql[128], qh[64], scales[16] int8, d @208; w = d*sc*(q-32)
  [GGMLType.Q6_K]: { d: 208, range: 128 * 32 / 2 },
};

/*
 * The types without a quantizer here (ggml's IQ2/IQ3/IQ1 quantizers need importance matrices and
 * grid searches): every grid index, sign field and 4-bit (3-bit) scale is valid, so their blocks
 * are random bytes with a finite f16 super-block scale d, chosen so the weights are about `scale`;
 * `typical` is the typical |weight| / d (sub-block scale x grid value; see tensor/quant/iq-grid.ts).
 * TQ1_0 / TQ2_0 get random trits (encoded as ggml's quantizer does) and MXFP4 a random E8M0
 * exponent near the scale.
 */
const GRID_LAYOUTS: Partial<Record<GGMLType, { readonly d: number; readonly typical: number }>> = {
  // d / 8 * (2 ls + 1) * grid (8, 25, 43)
  [GGMLType.IQ2_XXS]: { d: 0, typical: 40 },
  [GGMLType.IQ2_XS]: { d: 0, typical: 40 },
  [GGMLType.IQ2_S]: { d: 0, typical: 40 },
  // d / 4 * (2 ls + 1) * grid (4..62)
  [GGMLType.IQ3_XXS]: { d: 0, typical: 80 },
  // d * (2 ls + 1) * grid (1..15)
  [GGMLType.IQ3_S]: { d: 0, typical: 100 },
  // d / 8 * (2 ls + 1) * (8 grid +- 1), ls 3-bit
  [GGMLType.IQ1_S]: { d: 0, typical: 6 },
  [GGMLType.IQ1_M]: { d: -1, typical: 6 },
  // d * (t - 1)
  [GGMLType.TQ1_0]: { d: 52, typical: 1 },
  [GGMLType.TQ2_0]: { d: 64, typical: 1 },
};

/** the block-quantized types `randomQuantizedRow` can fill */
export function canRandomQuantize(type: GGMLType): boolean {
  return LAYOUTS[type] !== undefined || GRID_LAYOUTS[type] !== undefined || type === GGMLType.Q8_K || type === GGMLType.MXFP4;
}

function randomGridRow(type: GGMLType, row: Uint8Array, rng: Rng, scale: number, typeSize: number): void {
  const layout = GRID_LAYOUTS[type]!;
  for (let o = 0; o < row.length; o += typeSize) {
    const d = (scale / layout.typical) * (0.5 + rng.uniform());
    if (type === GGMLType.TQ1_0) {
      // 48 bytes of 5 trits (t in 0..242), 4 bytes of 4 trits (shifted up one trit): byte = ceil(t * 256 / 243)
      for (let j = 0; j < 52; j++) {
        const t = j < 48 ? rng.u32() % 243 : (rng.u32() % 81) * 3;
        row[o + j] = Math.floor((t * 256 + 242) / 243);
      }
    } else if (type === GGMLType.TQ2_0) {
      for (let j = 0; j < 64; j++) row[o + j] = (rng.u32() % 3) | ((rng.u32() % 3) << 2) | ((rng.u32() % 3) << 4) | ((rng.u32() % 3) << 6);
    }
    if (layout.d >= 0) {
      writeF16(row, o + layout.d, d);
      continue;
    }
    // IQ1_M: the f16 scale in the top nibbles of the 4 u16 scale words at 48..55
    const h = f32ToF16Bits(d);
    for (let i = 0; i < 4; i++) row[o + 49 + 2 * i] = (row[o + 49 + 2 * i]! & 0x0f) | (((h >>> (4 * i)) & 0xf) << 4);
  }
}

/** MXFP4: an E8M0 exponent e with 2^(e - 128) * ~4 (the doubled E2M1 values' typical size) about `scale` */
function randomMXFP4Row(row: Uint8Array, rng: Rng, scale: number): void {
  const e0 = Math.round(Math.log2(scale / 4)) + 128;
  for (let o = 0; o < row.length; o += 17) row[o] = e0 + (rng.u32() % 2);
}

/**
 * Fills a row of `n` weights of a block-quantized `type` in `dst` with uniformly random quant
 * bits (and random packed sub-block scales for the k-quants) and finite f16 block scales,
 * chosen so the dequantized weights are about `scale` in magnitude. This gives a valid
 * tensor of every ggml weight type without needing a quantizer for it; the dequant+dot of
 * such a tensor can then be compared against llama.cpp.
 */
export function randomQuantizedRow(type: GGMLType, dst: Uint8Array, rng: Rng, scale: number, n: number = Math.floor(dst.length / typeInfo(type).typeSize) * typeInfo(type).blockSize): void {
  const bytes = rowByteLength(type, n);
  if (dst.length < bytes) throw new Error(`randomQuantizedRow: ${typeName(type)} row of ${n} needs ${bytes} bytes, dst has ${dst.length}`);
  const { blockSize, typeSize } = typeInfo(type);
  const row = dst.subarray(0, bytes);
  rng.fillBytes(row);
  if (type === GGMLType.Q8_K) {
    // d f32 @0, qs[256] int8 @4, bsums[16] int16 @260 = sums of each 16 quants
    for (let o = 0; o < bytes; o += typeSize) {
      writeF32(row, o, (scale / 128) * (0.5 + rng.uniform()));
      for (let g = 0; g < 16; g++) {
        let s = 0;
        for (let j = 0; j < 16; j++) s += (row[o + 4 + g * 16 + j]! << 24) >> 24;
        row[o + 260 + g * 2] = s & 0xff;
        row[o + 261 + g * 2] = (s >> 8) & 0xff;
      }
    }
    return;
  }
  if (GRID_LAYOUTS[type] !== undefined) return randomGridRow(type, row, rng, scale, typeSize);
  if (type === GGMLType.MXFP4) return randomMXFP4Row(row, rng, scale);
  const layout = LAYOUTS[type];
  if (!layout) throw new Error(`randomQuantizedRow: ${typeName(type)} is not a block-quantized type (use quantizeRow for float and integer types)`);
  for (let o = 0; o < bytes; o += typeSize) {
    // vary d a little per block, as a real quantizer's per-block scales do
    const d = (scale / layout.range) * (0.5 + rng.uniform());
    writeF16(row, o + layout.d, d);
    if (layout.min !== undefined) writeF16(row, o + layout.min, d * layout.minRatio!);
    if (type === GGMLType.Q8_1) {
      // s @2 = d * sum(qs), qs @4
      let sum = 0;
      for (let j = 0; j < blockSize; j++) sum += (row[o + 4 + j]! << 24) >> 24;
      writeF16(row, o + 2, d * sum);
    }
  }
}
