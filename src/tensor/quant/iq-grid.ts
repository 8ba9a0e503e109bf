import { f16BitsToF32, f32FromBits, readF16 } from "./half.js";
import { IQ1S_GRID_HEX, IQ2S_GRID_HEX, IQ2XS_GRID_HEX, IQ2XXS_GRID_HEX, IQ3S_GRID_HEX, IQ3XXS_GRID_HEX } from "./iq-grids-data.js";

/**
 * The grid-based i-quants (ggml-common.h): IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M.
 * Every 256-weight super-block decodes to 256 small integers `vals` (grid entries with their
 * signs; for IQ1 8 * grid + delta), 16 integer sub-block scales (one per 16 weights) and one f32
 * factor `dfac`, such that weight j = dfac * iscale[j >> 4] * vals[j]. This is how llama.cpp's
 * x86 IQ panel gemm (ggml-cpu/iqp.cpp, iqp_decode_*) decodes them, and its comment says that
 * product is bit-identical to dequantize_row_iq*: every factor is a short integer or an f16
 * times a power of two, so the product is exact in f32 (at most 22 significant bits).
 *
 * Block layouts (bytes):
 * - IQ2_XXS (66): f16 d, u16 qs[32]; per 32 weights two u32: 4 grid bytes (iq2xxs_grid) and
 *   4 x 7 sign bits + a 4-bit scale in the top bits. w = d * (0.5 + ls) / 4 * grid * sign
 * - IQ2_XS (74): f16 d, u16 qs[32] (9-bit iq2xs_grid index | 7 sign bits << 9), scales[8]
 *   (two 4-bit scales per 32 weights)
 * - IQ2_S (82): f16 d, qs[64] (32 low index bytes, then 32 sign bytes), qh[8] (2 high index
 *   bits per 8 weights), scales[8]
 * - IQ3_XXS (98): f16 d, qs[64] (iq3xxs_grid bytes, 4 weights each), 8 u32 of 4 x 7 sign bits
 *   + a 4-bit scale. w = d * (0.5 + ls) / 2 * grid * sign
 * - IQ3_S (110): f16 d, qs[64] (low 8 bits of 9-bit iq3s_grid indices), qh[8] (the 9th bits),
 *   signs[32] (one bit per weight), scales[4] (4-bit, per 32 weights). w = d * (1 + 2 ls) * grid * sign
 * - IQ1_S (50): f16 d, qs[32] (low 8 bits of 11-bit iq1s_grid indices), u16 qh[8] (per 32
 *   weights: 4 x 3 high index bits, a 3-bit scale, the delta's sign). w = d * (2 ls + 1) * (grid +- 1/8)
 * - IQ1_M (56): qs[32], qh[16] (per 8 weights 3 high index bits + a delta sign bit), scales[8]
 *   (as 4 u16: four 3-bit scales each, and in the top nibbles the f16 super-block scale)
 *
 * 7-bit sign fields carry the 8th sign as their parity (ksigns_iq2xs).
 */

function hexBytes(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = Number.parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** the grids as bytes: entry i at [8i, 8i + 8) (IQ3: [4i, 4i + 4)) */
export const IQ2XXS_GRID: Uint8Array = hexBytes(IQ2XXS_GRID_HEX);
export const IQ2XS_GRID: Uint8Array = hexBytes(IQ2XS_GRID_HEX);
export const IQ2S_GRID: Uint8Array = hexBytes(IQ2S_GRID_HEX);
export const IQ3XXS_GRID: Uint8Array = hexBytes(IQ3XXS_GRID_HEX);
export const IQ3S_GRID: Uint8Array = hexBytes(IQ3S_GRID_HEX);
/** iq1s_grid bytes are int8 in {-1, 0, 1} */
export const IQ1S_GRID: Int8Array = new Int8Array(hexBytes(IQ1S_GRID_HEX).buffer);

/** ksigns_iq2xs: 7 sign bits and their parity as the 8th */
export const KSIGNS_IQ2XS: Uint8Array = Uint8Array.from({ length: 128 }, (_, v) => {
  let p = 0;
  for (let b = v; b; b >>= 1) p ^= b & 1;
  return v | (p << 7);
});

export const IQ2_XXS_BYTES = 66, IQ2_XS_BYTES = 74, IQ2_S_BYTES = 82, IQ3_XXS_BYTES = 98, IQ3_S_BYTES = 110, IQ1_S_BYTES = 50, IQ1_M_BYTES = 56;

/** decodes the super-block at src[o]: vals[0..256), iscales[0..16); returns dfac */
export type SuperBlockDecoder = (src: Uint8Array, o: number, vals: Int8Array, iscales: Int8Array) => number;

const u16 = (s: Uint8Array, o: number) => s[o]! | (s[o + 1]! << 8);
const u32 = (s: Uint8Array, o: number) => (s[o]! | (s[o + 1]! << 8) | (s[o + 2]! << 16) | (s[o + 3]! << 24)) >>> 0;

/** 8 grid bytes at grid[g..] with sign byte s applied, to vals[v..v + 8) */
function signed8(vals: Int8Array, v: number, grid: Uint8Array, g: number, s: number): void {
  for (let j = 0; j < 8; j++) vals[v + j] = s & (1 << j) ? -grid[g + j]! : grid[g + j]!;
}

/** two 4-byte grid entries (a, b) with sign byte s, to vals[v..v + 8) */
function signed4x2(vals: Int8Array, v: number, grid: Uint8Array, a: number, b: number, s: number): void {
  for (let j = 0; j < 4; j++) {
    vals[v + j] = s & (1 << j) ? -grid[a + j]! : grid[a + j]!;
    vals[v + j + 4] = s & (1 << (j + 4)) ? -grid[b + j]! : grid[b + j]!;
  }
}

export const decodeIQ2_XXS: SuperBlockDecoder = (src, o, vals, iscales) => {
  for (let ib = 0; ib < 8; ib++) {
    const q = o + 2 + 8 * ib;
    const aux1 = u32(src, q + 4);
    iscales[2 * ib] = iscales[2 * ib + 1] = 2 * (aux1 >>> 28) + 1;
    for (let l = 0; l < 4; l++) signed8(vals, 32 * ib + 8 * l, IQ2XXS_GRID, 8 * src[q + l]!, KSIGNS_IQ2XS[(aux1 >>> (7 * l)) & 127]!);
  }
  return readF16(src, o) * 0.125;
};

export const decodeIQ2_XS: SuperBlockDecoder = (src, o, vals, iscales) => {
  for (let ib = 0; ib < 8; ib++) {
    const sc = src[o + 66 + ib]!;
    iscales[2 * ib] = 2 * (sc & 0xf) + 1;
    iscales[2 * ib + 1] = 2 * (sc >>> 4) + 1;
    for (let l = 0; l < 4; l++) {
      const q = u16(src, o + 2 + 8 * ib + 2 * l);
      signed8(vals, 32 * ib + 8 * l, IQ2XS_GRID, 8 * (q & 511), KSIGNS_IQ2XS[q >>> 9]!);
    }
  }
  return readF16(src, o) * 0.125;
};

export const decodeIQ2_S: SuperBlockDecoder = (src, o, vals, iscales) => {
  for (let ib = 0; ib < 8; ib++) {
    const sc = src[o + 74 + ib]!;
    iscales[2 * ib] = 2 * (sc & 0xf) + 1;
    iscales[2 * ib + 1] = 2 * (sc >>> 4) + 1;
    const qh = src[o + 66 + ib]!;
    for (let l = 0; l < 4; l++) {
      const idx = src[o + 2 + 4 * ib + l]! | ((qh << (8 - 2 * l)) & 0x300);
      signed8(vals, 32 * ib + 8 * l, IQ2S_GRID, 8 * idx, src[o + 34 + 4 * ib + l]!);
    }
  }
  return readF16(src, o) * 0.125;
};

export const decodeIQ3_XXS: SuperBlockDecoder = (src, o, vals, iscales) => {
  for (let ib = 0; ib < 8; ib++) {
    const aux = u32(src, o + 66 + 4 * ib);
    iscales[2 * ib] = iscales[2 * ib + 1] = 2 * (aux >>> 28) + 1;
    const qs = o + 2 + 8 * ib;
    for (let l = 0; l < 4; l++) signed4x2(vals, 32 * ib + 8 * l, IQ3XXS_GRID, 4 * src[qs + 2 * l]!, 4 * src[qs + 2 * l + 1]!, KSIGNS_IQ2XS[(aux >>> (7 * l)) & 127]!);
  }
  return readF16(src, o) * 0.25;
};

export const decodeIQ3_S: SuperBlockDecoder = (src, o, vals, iscales) => {
  for (let ib = 0; ib < 8; ib++) {
    const sc = src[o + 106 + (ib >> 1)]!;
    iscales[2 * ib] = iscales[2 * ib + 1] = 1 + 2 * (ib & 1 ? sc >>> 4 : sc & 0xf);
    const qh = src[o + 66 + ib]!;
    const qs = o + 2 + 8 * ib;
    for (let l = 0; l < 4; l++) {
      const a = src[qs + 2 * l]! | ((qh << (8 - 2 * l)) & 256);
      const b = src[qs + 2 * l + 1]! | ((qh << (7 - 2 * l)) & 256);
      signed4x2(vals, 32 * ib + 8 * l, IQ3S_GRID, 4 * a, 4 * b, src[o + 74 + 4 * ib + l]!);
    }
  }
  return readF16(src, o);
};

export const decodeIQ1_S: SuperBlockDecoder = (src, o, vals, iscales) => {
  for (let ib = 0; ib < 8; ib++) {
    const qh = u16(src, o + 34 + 2 * ib);
    iscales[2 * ib] = iscales[2 * ib + 1] = 2 * ((qh >>> 12) & 7) + 1;
    const delta = qh & 0x8000 ? -1 : 1;
    for (let l = 0; l < 4; l++) {
      const g = 8 * (src[o + 2 + 4 * ib + l]! | (((qh >>> (3 * l)) & 7) << 8));
      for (let j = 0; j < 8; j++) vals[32 * ib + 8 * l + j] = 8 * IQ1S_GRID[g + j]! + delta;
    }
  }
  return readF16(src, o) * 0.125;
};

/** IQ1_M's f16 super-block scale, spread over the top nibbles of its four u16 scale words */
export function iq1mScale(src: Uint8Array, o: number): number {
  const sc = (i: number) => u16(src, o + 48 + 2 * i);
  return f16BitsToF32((sc(0) >>> 12) | ((sc(1) >>> 8) & 0x00f0) | ((sc(2) >>> 4) & 0x0f00) | (sc(3) & 0xf000));
}

export const decodeIQ1_M: SuperBlockDecoder = (src, o, vals, iscales) => {
  for (let ib = 0; ib < 8; ib++) {
    const sc = u16(src, o + 48 + 2 * (ib >> 1));
    const shift = 6 * (ib & 1);
    iscales[2 * ib] = 2 * ((sc >>> shift) & 7) + 1;
    iscales[2 * ib + 1] = 2 * ((sc >>> (shift + 3)) & 7) + 1;
    const qs = o + 4 * ib, qh0 = src[o + 32 + 2 * ib]!, qh1 = src[o + 33 + 2 * ib]!;
    const idx = [src[qs]! | ((qh0 << 8) & 0x700), src[qs + 1]! | ((qh0 << 4) & 0x700), src[qs + 2]! | ((qh1 << 8) & 0x700), src[qs + 3]! | ((qh1 << 4) & 0x700)];
    const delta = [qh0 & 0x08 ? -1 : 1, qh0 & 0x80 ? -1 : 1, qh1 & 0x08 ? -1 : 1, qh1 & 0x80 ? -1 : 1];
    for (let l = 0; l < 4; l++) {
      const g = 8 * idx[l]!;
      for (let j = 0; j < 8; j++) vals[32 * ib + 8 * l + j] = 8 * IQ1S_GRID[g + j]! + delta[l]!;
    }
  }
  return iq1mScale(src, o) * 0.125;
};

const scratchVals = new Int8Array(256);
const scratchScales = new Int8Array(16);

/** dequantize_row_* of a grid type, through its decoder (the product is exact: see above) */
export function dequantizeGrid(decode: SuperBlockDecoder, typeSize: number): (dst: Float32Array, src: Uint8Array, n: number) => void {
  return (dst, src, n) => {
    for (let b = 0, o = 0; b < n; b += 256, o += typeSize) {
      const dfac = decode(src, o, scratchVals, scratchScales);
      for (let j = 0; j < 256; j++) dst[b + j] = Math.fround(dfac * scratchScales[j >> 4]! * scratchVals[j]!);
    }
  };
}

export const dequantizeIQ2_XXS = dequantizeGrid(decodeIQ2_XXS, IQ2_XXS_BYTES);
export const dequantizeIQ2_XS = dequantizeGrid(decodeIQ2_XS, IQ2_XS_BYTES);
export const dequantizeIQ2_S = dequantizeGrid(decodeIQ2_S, IQ2_S_BYTES);
export const dequantizeIQ3_XXS = dequantizeGrid(decodeIQ3_XXS, IQ3_XXS_BYTES);
export const dequantizeIQ3_S = dequantizeGrid(decodeIQ3_S, IQ3_S_BYTES);
export const dequantizeIQ1_S = dequantizeGrid(decodeIQ1_S, IQ1_S_BYTES);
export const dequantizeIQ1_M = dequantizeGrid(decodeIQ1_M, IQ1_M_BYTES);

/*
 * Ternary quants. TQ1_0 (54 bytes / 256): qs[48] with 5 trits per byte (byte = ceil(t * 256 / 243)
 * for the base-3 number t, trit n read as ((u8)(byte * 3^n) * 3) >> 8), qh[4] with 4 trits per
 * byte, f16 d; weights 0..159 from qs[0..32) (trit n of byte m: weight 32n + m), 160..239 from
 * qs[32..48) (160 + 16n + m), 240..255 from qh (240 + 4n + m). TQ2_0 (66 bytes): qs[64] of
 * 2-bit values q (weight 32 * 4 * (j / 32) + 32 * l + j % 32 from bits 2l of byte j), f16 d;
 * w = d * (q - 1).
 */
export const TQ1_0_BYTES = 54, TQ2_0_BYTES = 66;
const POW3 = [1, 3, 9, 27, 81, 243];
const trit = (byte: number, n: number) => ((((byte * POW3[n]!) & 0xff) * 3) >> 8);

/** the 256 ternary values (0, 1, 2: the weight is d * (t - 1)) of the TQ1_0 block at src[o] */
export function tritsTQ1_0(src: Uint8Array, o: number, t: Uint8Array): void {
  for (let n = 0; n < 5; n++) for (let m = 0; m < 32; m++) t[32 * n + m] = trit(src[o + m]!, n);
  for (let n = 0; n < 5; n++) for (let m = 0; m < 16; m++) t[160 + 16 * n + m] = trit(src[o + 32 + m]!, n);
  for (let n = 0; n < 4; n++) for (let m = 0; m < 4; m++) t[240 + 4 * n + m] = trit(src[o + 48 + m]!, n);
}

/** the 256 2-bit values of the TQ2_0 block at src[o] */
export function valuesTQ2_0(src: Uint8Array, o: number, t: Uint8Array): void {
  for (let j = 0; j < 64; j += 32) for (let l = 0; l < 4; l++) for (let m = 0; m < 32; m++) t[4 * j + 32 * l + m] = (src[o + j + m]! >>> (2 * l)) & 3;
}

const scratchTrits = new Uint8Array(256);

export function dequantizeTQ1_0(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += 256, o += TQ1_0_BYTES) {
    const d = readF16(src, o + 52);
    tritsTQ1_0(src, o, scratchTrits);
    for (let j = 0; j < 256; j++) dst[b + j] = Math.fround((scratchTrits[j]! - 1) * d);
  }
}

export function dequantizeTQ2_0(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += 256, o += TQ2_0_BYTES) {
    const d = readF16(src, o + 64);
    valuesTQ2_0(src, o, scratchTrits);
    for (let j = 0; j < 256; j++) dst[b + j] = Math.fround((scratchTrits[j]! - 1) * d);
  }
}

/*
 * MXFP4 (17 bytes / 32): an E8M0 exponent e, then 16 bytes of E2M1 nibbles laid out as Q4_0's
 * (low nibble weight j, high nibble weight j + 16). ggml stores the E2M1 values doubled
 * (kvalues_mxfp4) and halves the scale: w = kvalues_mxfp4[q] * 2^(e - 128).
 */
export const MXFP4_BYTES = 17;
export const KVALUES_MXFP4: readonly number[] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/** ggml's ggml_e8m0_to_fp32_half: 2^(e - 128) as an f32 (e = 0, 1: the subnormals 2^-128, 2^-127) */
export function e8m0Half(e: number): number {
  return e < 2 ? f32FromBits(0x00200000 << e) : f32FromBits((e - 1) << 23);
}

export function dequantizeMXFP4(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += 32, o += MXFP4_BYTES) {
    const d = e8m0Half(src[o]!);
    for (let j = 0; j < 16; j++) {
      const q = src[o + 1 + j]!;
      dst[b + j] = Math.fround(KVALUES_MXFP4[q & 0xf]! * d);
      dst[b + j + 16] = Math.fround(KVALUES_MXFP4[q >>> 4]! * d);
    }
  }
}
