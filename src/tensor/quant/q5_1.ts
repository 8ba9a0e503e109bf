import { readF16, writeF16 } from "./half.js";
import { readU32, writeU32 } from "./q5_0.js";
import { fround } from "./round.js";

/**
 * Q5_1: blocks of 32 weights in 24 bytes: f16 scale d, f16 min m, u32 qh (5th bit of weight i
 * at bit i), 16 bytes of low nibbles (byte j: weight j low, j + 16 high); weight = q * d + m.
 */
export const QK5_1 = 32;
export const Q5_1_BYTES = 24;

export function dequantizeQ5_1(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += QK5_1, o += Q5_1_BYTES) {
    const d = readF16(src, o);
    const m = readF16(src, o + 2);
    const qh = readU32(src, o + 4);
    for (let j = 0; j < 16; j++) {
      const q = src[o + 8 + j]!;
      const h0 = ((qh >>> j) & 1) << 4;
      const h1 = ((qh >>> (j + 16)) & 1) << 4;
      dst[b + j] = fround(((q & 0x0f) | h0) * d) + m;
      dst[b + j + 16] = fround(((q >>> 4) | h1) * d) + m;
    }
  }
}

/** ggml's quantize_row_q5_1_ref: d = (max - min) / 31, m = min */
export function quantizeQ5_1(dst: Uint8Array, src: Float32Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += QK5_1, o += Q5_1_BYTES) {
    let min = Infinity;
    let max = -Infinity;
    for (let j = 0; j < QK5_1; j++) {
      const v = src[b + j]!;
      if (v < min) min = v;
      if (v > max) max = v;
    }
    const d = fround(fround(max - min) / 31);
    const id = d !== 0 ? fround(1 / d) : 0;
    writeF16(dst, o, d);
    writeF16(dst, o + 2, min);
    let qh = 0;
    for (let j = 0; j < 16; j++) {
      // (uint8_t)(x + 0.5f): ggml applies no clamp here; the masks below keep 5 bits
      const x0 = Math.trunc(fround(fround(fround(src[b + j]! - min) * id) + 0.5)) & 0xff;
      const x1 = Math.trunc(fround(fround(fround(src[b + j + 16]! - min) * id) + 0.5)) & 0xff;
      dst[o + 8 + j] = (x0 & 0x0f) | ((x1 & 0x0f) << 4);
      qh |= ((x0 & 0x10) >>> 4) << j;
      qh |= ((x1 & 0x10) >>> 4) << (j + 16);
    }
    writeU32(dst, o + 4, qh >>> 0);
  }
}
