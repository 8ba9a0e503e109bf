import { readF16, writeF16 } from "./half.js";
import { makeQ3Quants } from "./kquant-search.js";
import { scaleQ3K } from "./kquant-scales.js";
import { fround, nearestInt } from "./round.js";

/**
 * Q3_K: super-blocks of 256 weights in 110 bytes: hmask[32] (high bits), qs[64] (low 2 bits),
 * 12 bytes of 16 signed 6-bit scales, f16 d. Weight = d * scale * (q - 4 if its hmask bit is
 * clear, else q). Weight i's high bit: hmask byte i % 32, bit i / 32. Low bits: as in Q2_K.
 */
export const Q3_K_BYTES = 110;

export function dequantizeQ3_K(dst: Float32Array, src: Uint8Array, n: number): void {
  let y = 0;
  for (let o = 0; y < n; o += Q3_K_BYTES) {
    const dAll = readF16(src, o + 108);
    let is = 0;
    let m = 1;
    for (let half = 0; half < 2; half++) {
      const q = o + 32 + 32 * half;
      for (let shift = 0; shift < 8; shift += 2) {
        for (let k = 0; k < 2; k++) {
          const dl = fround(dAll * scaleQ3K(is++, src, o + 96));
          for (let l = 0; l < 16; l++) {
            const lo = (src[q + 16 * k + l]! >>> shift) & 3;
            const hi = src[o + 16 * k + l]! & m ? 0 : 4;
            dst[y++] = dl * (lo - hi);
          }
        }
        m <<= 1;
      }
    }
  }
}

/** ggml's quantize_row_q3_K_ref (no importance weights) */
export function quantizeQ3_K(dst: Uint8Array, src: Float32Array, n: number): void {
  const f = fround;
  const L = new Int8Array(256);
  const scales = new Float32Array(16);
  for (let b = 0, o = 0; b < n; b += 256, o += Q3_K_BYTES) {
    const x = src.subarray(b, b + 256);
    let maxScale = 0;
    let amax = 0;
    for (let j = 0; j < 16; j++) {
      scales[j] = makeQ3Quants(16, 4, x.subarray(16 * j, 16 * j + 16), L.subarray(16 * j));
      const scale = Math.abs(scales[j]!);
      if (scale > amax) {
        amax = scale;
        maxScale = scales[j]!;
      }
    }
    dst.fill(0, o + 96, o + 108);
    if (maxScale !== 0) {
      const iscale = f(-32 / maxScale);
      for (let j = 0; j < 16; j++) {
        let l = (nearestInt(f(iscale * scales[j]!)) << 24) >> 24;
        l = Math.max(-32, Math.min(31, l)) + 32;
        if (j < 8) dst[o + 96 + j] = l & 0x0f;
        else dst[o + 96 + j - 8] = dst[o + 96 + j - 8]! | ((l & 0x0f) << 4);
        l >>= 4;
        dst[o + 96 + 8 + (j % 4)] = dst[o + 96 + 8 + (j % 4)]! | (l << (2 * (j >>> 2)));
      }
      writeF16(dst, o + 108, f(1 / iscale));
    } else {
      writeF16(dst, o + 108, 0);
    }
    const dAll = readF16(dst, o + 108);
    for (let j = 0; j < 16; j++) {
      const d = f(dAll * scaleQ3K(j, dst, o + 96));
      if (d === 0) continue;
      for (let i = 0; i < 16; i++) L[16 * j + i] = Math.max(-4, Math.min(3, nearestInt(f(x[16 * j + i]! / d)))) + 4;
    }
    dst.fill(0, o, o + 32);
    let m = 0;
    let hm = 1;
    for (let j = 0; j < 256; j++) {
      if (L[j]! > 3) {
        dst[o + m] = dst[o + m]! | hm;
        L[j] = L[j]! - 4;
      }
      if (++m === 32) {
        m = 0;
        hm <<= 1;
      }
    }
    for (let half = 0; half < 2; half++) {
      const q = o + 32 + 32 * half;
      const y = 128 * half;
      for (let l = 0; l < 32; l++) dst[q + l] = L[y + l]! | (L[y + l + 32]! << 2) | (L[y + l + 64]! << 4) | (L[y + l + 96]! << 6);
    }
  }
}
