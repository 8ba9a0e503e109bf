import { readF16, writeF16 } from "./half.js";
import { fround } from "./round.js";

/**
 * Q4_1: blocks of 32 weights in 20 bytes: f16 scale d, f16 min m, 16 bytes of nibbles (byte j:
 * weight j low, weight j + 16 high); weight = nibble * d + m.
 */
export const QK4_1 = 32;
export const Q4_1_BYTES = 20;

export function dequantizeQ4_1(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += QK4_1, o += Q4_1_BYTES) {
    const d = readF16(src, o);
    const m = readF16(src, o + 2);
    for (let j = 0; j < 16; j++) {
      const q = src[o + 4 + j]!;
      dst[b + j] = fround((q & 0x0f) * d) + m;
      dst[b + j + 16] = fround((q >>> 4) * d) + m;
    }
  }
}

/** ggml's quantize_row_q4_1_ref: d = (max - min) / 15, m = min */
export function quantizeQ4_1(dst: Uint8Array, src: Float32Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += QK4_1, o += Q4_1_BYTES) {
    let min = Infinity;
    let max = -Infinity;
    for (let j = 0; j < QK4_1; j++) {
      const v = src[b + j]!;
      if (v < min) min = v;
      if (v > max) max = v;
    }
    const d = fround(fround(max - min) / 15);
    const id = d !== 0 ? fround(1 / d) : 0;
    writeF16(dst, o, d);
    writeF16(dst, o + 2, min);
    for (let j = 0; j < 16; j++) {
      const x0 = Math.trunc(fround(fround(fround(src[b + j]! - min) * id) + 0.5));
      const x1 = Math.trunc(fround(fround(fround(src[b + j + 16]! - min) * id) + 0.5));
      dst[o + 4 + j] = Math.min(15, x0) | (Math.min(15, x1) << 4);
    }
  }
}
