import { readF16 } from "./half.js";
import { scaleMinK4 } from "./kquant-scales.js";
import { quantizeScalesK4 } from "./q4_k.js";
import { fround } from "./round.js";

/**
 * Q5_K: super-blocks of 256 weights in 176 bytes: f16 d, f16 dmin, 12 bytes of 8 (scale, min)
 * pairs, qh[32], qs[128]. Weight = d * scale * q - dmin * min for its group of 32. In each
 * 64-weight chunk c, qs byte l holds weight l (low nibble) and l + 32 (high nibble); their 5th
 * bits are bits 2c and 2c + 1 of qh[l].
 */
export const Q5_K_BYTES = 176;

export function dequantizeQ5_K(dst: Float32Array, src: Uint8Array, n: number): void {
  let y = 0;
  for (let o = 0; y < n; o += Q5_K_BYTES) {
    const d = readF16(src, o);
    const min = readF16(src, o + 2);
    for (let c = 0; c < 4; c++) {
      const p1 = scaleMinK4(2 * c, src, o + 4);
      const p2 = scaleMinK4(2 * c + 1, src, o + 4);
      const d1 = fround(d * (p1 & 0xff));
      const m1 = fround(min * (p1 >>> 8));
      const d2 = fround(d * (p2 & 0xff));
      const m2 = fround(min * (p2 >>> 8));
      const ql = o + 48 + 32 * c;
      const u1 = 1 << (2 * c);
      const u2 = 2 << (2 * c);
      for (let l = 0; l < 32; l++) dst[y++] = fround(d1 * ((src[ql + l]! & 0x0f) + (src[o + 16 + l]! & u1 ? 16 : 0))) - m1;
      for (let l = 0; l < 32; l++) dst[y++] = fround(d2 * ((src[ql + l]! >>> 4) + (src[o + 16 + l]! & u2 ? 16 : 0))) - m2;
    }
  }
}

/** ggml's quantize_row_q5_K_ref */
export function quantizeQ5_K(dst: Uint8Array, src: Float32Array, n: number): void {
  const L = new Uint8Array(256);
  for (let b = 0, o = 0; b < n; b += 256, o += Q5_K_BYTES) {
    quantizeScalesK4(dst, o, src.subarray(b, b + 256), L, 31, -0.5, 15);
    dst.fill(0, o + 16, o + 48);
    for (let c = 0; c < 4; c++) {
      for (let l = 0; l < 32; l++) {
        const l1 = L[64 * c + l]!;
        const l2 = L[64 * c + 32 + l]!;
        if (l1 > 15) dst[o + 16 + l] = dst[o + 16 + l]! | (1 << (2 * c));
        if (l2 > 15) dst[o + 16 + l] = dst[o + 16 + l]! | (2 << (2 * c));
        dst[o + 48 + 32 * c + l] = (l1 & 0x0f) | ((l2 & 0x0f) << 4);
      }
    }
  }
}
