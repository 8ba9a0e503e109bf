import { readF16, writeF16 } from "./half.js";
import { fround } from "./round.js";

/**
 * Q5_0: blocks of 32 weights in 22 bytes: f16 scale d, a little-endian u32 qh holding the 5th
 * bit of weight i at bit i, then 16 bytes of low nibbles (byte j: weight j low, weight j + 16
 * high); weight = (5-bit value - 16) * d.
 */
export const QK5_0 = 32;
export const Q5_0_BYTES = 22;

export function readU32(src: Uint8Array, o: number): number {
  return (src[o]! | (src[o + 1]! << 8) | (src[o + 2]! << 16) | (src[o + 3]! << 24)) >>> 0;
}

export function writeU32(dst: Uint8Array, o: number, v: number): void {
  dst[o] = v & 0xff;
  dst[o + 1] = (v >>> 8) & 0xff;
  dst[o + 2] = (v >>> 16) & 0xff;
  dst[o + 3] = v >>> 24;
}

export function dequantizeQ5_0(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += QK5_0, o += Q5_0_BYTES) {
    const d = readF16(src, o);
    const qh = readU32(src, o + 2);
    for (let j = 0; j < 16; j++) {
      const q = src[o + 6 + j]!;
      const h0 = ((qh >>> j) & 1) << 4;
      const h1 = ((qh >>> (j + 16)) & 1) << 4;
      dst[b + j] = (((q & 0x0f) | h0) - 16) * d;
      dst[b + j + 16] = (((q >>> 4) | h1) - 16) * d;
    }
  }
}

/** ggml's quantize_row_q5_0_ref: d = (the value of largest magnitude) / -16 */
export function quantizeQ5_0(dst: Uint8Array, src: Float32Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += QK5_0, o += Q5_0_BYTES) {
    let amax = 0;
    let max = 0;
    for (let j = 0; j < QK5_0; j++) {
      const v = src[b + j]!;
      if (amax < Math.abs(v)) {
        amax = Math.abs(v);
        max = v;
      }
    }
    const d = fround(max / -16);
    const id = d !== 0 ? fround(1 / d) : 0;
    writeF16(dst, o, d);
    let qh = 0;
    for (let j = 0; j < 16; j++) {
      const x0 = Math.min(31, Math.trunc(fround(fround(src[b + j]! * id) + 16.5)));
      const x1 = Math.min(31, Math.trunc(fround(fround(src[b + j + 16]! * id) + 16.5)));
      dst[o + 6 + j] = (x0 & 0x0f) | ((x1 & 0x0f) << 4);
      qh |= ((x0 & 0x10) >>> 4) << j;
      qh |= ((x1 & 0x10) >>> 4) << (j + 16);
    }
    writeU32(dst, o + 2, qh >>> 0);
  }
}
