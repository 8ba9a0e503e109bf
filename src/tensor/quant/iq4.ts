import { readF16, writeF16 } from "./half.js";
import { fround as f, nearestInt } from "./round.js";

/**
 * The 4-bit non-linear quants (ggml-common.h). Each weight is a 4-bit index into the 16 int8
 * values of kvalues_iq4nl, times a scale.
 *
 * IQ4_NL: blocks of 32 weights in 18 bytes: f16 d, then 16 bytes; byte j holds the index of
 * weight j (low nibble) and of weight j + 16 (high nibble), as Q4_0. Weight = d * value.
 *
 * IQ4_XS: super-blocks of 256 weights in 136 bytes: f16 d, u16 scales_h, 4 bytes scales_l,
 * 128 bytes of indices laid out as eight IQ4_NL blocks' 16 bytes. Sub-block ib (32 weights) has
 * the 6-bit scale ls = (nibble ib of scales_l) | (bits 2ib..2ib+1 of scales_h) << 4; weight =
 * d * (ls - 32) * value.
 */
export const KVALUES_IQ4NL: readonly number[] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];
export const IQ4_NL_BYTES = 18;
export const IQ4_XS_BYTES = 136;

/** the 6-bit scale (0..63, stored + 32) of sub-block ib (0..7) of the IQ4_XS block at byte offset o */
export function iq4xsScale(src: Uint8Array, o: number, ib: number): number {
  const sh = src[o + 2]! | (src[o + 3]! << 8);
  return ((src[o + 4 + (ib >> 1)]! >>> (4 * (ib & 1))) & 0xf) | (((sh >>> (2 * ib)) & 3) << 4);
}

/** ggml's dequantize_row_iq4_nl */
export function dequantizeIQ4_NL(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += 32, o += IQ4_NL_BYTES) {
    const d = readF16(src, o);
    for (let j = 0; j < 16; j++) {
      const q = src[o + 2 + j]!;
      dst[b + j] = f(d * KVALUES_IQ4NL[q & 0xf]!);
      dst[b + j + 16] = f(d * KVALUES_IQ4NL[q >>> 4]!);
    }
  }
}

/** ggml's dequantize_row_iq4_xs */
export function dequantizeIQ4_XS(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += 256, o += IQ4_XS_BYTES) {
    const d = readF16(src, o);
    for (let ib = 0; ib < 8; ib++) {
      const dl = f(d * (iq4xsScale(src, o, ib) - 32));
      const qs = o + 8 + 16 * ib;
      const y = b + 32 * ib;
      for (let j = 0; j < 16; j++) {
        dst[y + j] = f(dl * KVALUES_IQ4NL[src[qs + j]! & 0xf]!);
        dst[y + j + 16] = f(dl * KVALUES_IQ4NL[src[qs + j]! >>> 4]!);
      }
    }
  }
}

/*
 * ggml's best_index_int8 over kvalues_iq4nl: the index of the value nearest x, a tie going to the
 * upper one (`x - v[mu-1] < v[mu] - x ? mu-1 : mu` in f32; near a midpoint both differences are
 * exact in f32, so this is "the number of midpoints <= x"). The scale search calls it ~500 times
 * per block, so it is a table lookup: the midpoints are at least 5.5 apart, so each unit interval
 * [k, k + 1) of x holds at most one; BELOW[k] counts the midpoints under k, AT[k] is the one in
 * [k, k + 1) (or +Infinity).
 */
const MIDPOINTS = KVALUES_IQ4NL.slice(1).map((v, i) => (KVALUES_IQ4NL[i]! + v) / 2);
const BELOW = new Uint8Array(256);
const AT = new Float64Array(256).fill(Infinity);
for (let k = -128; k < 128; k++) {
  BELOW[k + 128] = MIDPOINTS.filter((m) => m < k).length;
  const m = MIDPOINTS.find((m) => m >= k && m < k + 1);
  if (m !== undefined) AT[k + 128] = m;
}

function bestIndex(x: number): number {
  if (x >= 127 || Number.isNaN(x)) return 15; // NaN: every C comparison is false, the search ends at 15
  if (x < -128) return 0;
  const k = Math.floor(x) + 128;
  return BELOW[k]! + (x >= AT[k]! ? 1 : 0);
}

const GROUP_MAX_EPS = f(1e-15);
/** the scale search width of ggml's quantize_iq4_nl / quantize_iq4_xs (what llama-quantize runs without an imatrix) */
const NTRY = 7;

/**
 * ggml's quantize_row_iq4_nl_impl without importance weights (weight = x^2), ntry = 7, over one
 * super-block x[0..superBlock) of 32-wide blocks: each block's scale is searched over 15
 * candidate grids; for superBlock 256 (IQ4_XS) the block scales are then quantized to 6 bits
 * against d = -max_scale / 32 and every index recomputed against its block's rounded scale.
 * Writes d (f16) at dst[o]; for IQ4_XS scales_h at o + 2 and scales_l at o + 4; indices at
 * dst[q4..q4 + superBlock / 2).
 */
function quantizeIQ4Block(dst: Uint8Array, o: number, q4: number, x: Float32Array, superBlock: number, L: Uint8Array, scales: Float32Array): void {
  const values = KVALUES_IQ4NL;
  const v0 = values[0]!;
  const nb = superBlock / 32;
  let maxScale = 0, amaxScale = 0;
  for (let ib = 0; ib < nb; ib++) {
    const xo = 32 * ib;
    let amax = 0, max = 0;
    for (let j = 0; j < 32; j++) {
      const ax = Math.abs(x[xo + j]!);
      if (ax > amax) {
        amax = ax;
        max = x[xo + j]!;
      }
    }
    if (amax < GROUP_MAX_EPS) {
      scales[ib] = 0;
      L.fill(8, xo, xo + 32); // what the final requantization gives a zero block (the index of value 1)
      continue;
    }
    let d = f(-max / v0);
    let id = f(1 / d);
    let sumqx = 0, sumq2 = 0;
    for (let j = 0; j < 32; j++) {
      const xj = x[xo + j]!;
      const l = bestIndex(f(id * xj));
      L[xo + j] = l;
      const q = values[l]!;
      const w = f(xj * xj);
      sumqx = f(sumqx + f(f(w * q) * xj));
      sumq2 = f(sumq2 + f(f(w * q) * q));
    }
    d = sumq2 > 0 ? f(sumqx / sumq2) : 0;
    let best = f(d * sumqx);
    for (let itry = -NTRY; itry <= NTRY; itry++) {
      id = f((itry + v0) / max);
      sumqx = 0;
      sumq2 = 0;
      for (let j = 0; j < 32; j++) {
        const xj = x[xo + j]!;
        const q = values[bestIndex(f(id * xj))]!;
        const w = f(xj * xj);
        sumqx = f(sumqx + f(f(w * q) * xj));
        sumq2 = f(sumq2 + f(f(w * q) * q));
      }
      if (sumq2 > 0 && f(sumqx * sumqx) > f(best * sumq2)) {
        d = f(sumqx / sumq2);
        best = f(d * sumqx);
      }
    }
    scales[ib] = d;
    if (Math.abs(d) > amaxScale) {
      amaxScale = Math.abs(d);
      maxScale = d;
    }
  }

  if (nb > 1) {
    const d = f(-maxScale / 32);
    writeF16(dst, o, d);
    const id = d !== 0 ? f(1 / d) : 0;
    let scalesH = 0;
    for (let ib = 0; ib < nb; ib++) {
      let l = nearestInt(f(id * scales[ib]!));
      l = Math.max(-32, Math.min(31, l));
      const dl = f(d * l);
      const idl = dl !== 0 ? f(1 / dl) : 0;
      for (let j = 0; j < 32; j++) L[32 * ib + j] = bestIndex(f(idl * x[32 * ib + j]!));
      l += 32;
      const lLow = l & 0xf;
      if (ib % 2 === 0) dst[o + 4 + (ib >> 1)] = lLow;
      else dst[o + 4 + (ib >> 1)] = dst[o + 4 + (ib >> 1)]! | (lLow << 4);
      scalesH |= (l >> 4) << (2 * ib);
    }
    dst[o + 2] = scalesH & 0xff;
    dst[o + 3] = scalesH >>> 8;
  } else {
    writeF16(dst, o, scales[0]!);
    const id = scales[0] !== 0 ? f(1 / scales[0]!) : 0;
    for (let j = 0; j < 32; j++) L[j] = bestIndex(f(id * x[j]!));
  }
  for (let i = 0; i < nb; i++) {
    for (let j = 0; j < 16; j++) dst[q4 + 16 * i + j] = L[32 * i + j]! | (L[32 * i + 16 + j]! << 4);
  }
}

/** ggml's quantize_iq4_nl (no importance matrix): a valid block llama.cpp reads, not necessarily bit-identical to llama-quantize's (f32 contraction) */
export function quantizeIQ4_NL(dst: Uint8Array, src: Float32Array, n: number): void {
  const L = new Uint8Array(32);
  const scales = new Float32Array(1);
  for (let b = 0, o = 0; b < n; b += 32, o += IQ4_NL_BYTES) quantizeIQ4Block(dst, o, o + 2, src.subarray(b, b + 32), 32, L, scales);
}

/** ggml's quantize_iq4_xs (no importance matrix) */
export function quantizeIQ4_XS(dst: Uint8Array, src: Float32Array, n: number): void {
  const L = new Uint8Array(256);
  const scales = new Float32Array(8);
  for (let b = 0, o = 0; b < n; b += 256, o += IQ4_XS_BYTES) quantizeIQ4Block(dst, o, o + 8, src.subarray(b, b + 256), 256, L, scales);
}
