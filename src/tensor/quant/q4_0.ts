import { readF16, writeF16 } from "./half.js";
import { fround } from "./round.js";

/**
 * Q4_0: blocks of 32 weights in 18 bytes: f16 scale d, then 16 bytes of nibbles. Byte j holds
 * weight j in its low nibble and weight j + 16 in its high nibble; weight = (nibble - 8) * d.
 */
export const QK4_0 = 32;
export const Q4_0_BYTES = 18;

export function dequantizeQ4_0(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += QK4_0, o += Q4_0_BYTES) {
    const d = readF16(src, o);
    for (let j = 0; j < 16; j++) {
      const q = src[o + 2 + j]!;
      dst[b + j] = ((q & 0x0f) - 8) * d;
      dst[b + j + 16] = ((q >>> 4) - 8) * d;
    }
  }
}

/** ggml's quantize_row_q4_0_ref: d = (the value of largest magnitude) / -8 */
export function quantizeQ4_0(dst: Uint8Array, src: Float32Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += QK4_0, o += Q4_0_BYTES) {
    let amax = 0;
    let max = 0;
    for (let j = 0; j < QK4_0; j++) {
      const v = src[b + j]!;
      if (amax < Math.abs(v)) {
        amax = Math.abs(v);
        max = v;
      }
    }
    const d = fround(max / -8);
    const id = d !== 0 ? fround(1 / d) : 0;
    writeF16(dst, o, d);
    for (let j = 0; j < 16; j++) {
      // (int8_t)(x*id + 8.5f): truncation toward zero, then at most 15
      const x0 = Math.trunc(fround(fround(src[b + j]! * id) + 8.5));
      const x1 = Math.trunc(fround(fround(src[b + j + 16]! * id) + 8.5));
      dst[o + 2 + j] = Math.min(15, x0) | (Math.min(15, x1) << 4);
    }
  }
}
