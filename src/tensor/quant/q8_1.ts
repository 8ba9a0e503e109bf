import { readF16, writeF16 } from "./half.js";
import { fround, roundAway } from "./round.js";

/**
 * Q8_1: blocks of 32 values in 36 bytes: f16 scale d, f16 s = d * sum(q), 32 int8 q. Only used
 * for activations (the vec_dot type of Q4_1 and Q5_1): s carries the block sum the weights' min
 * term needs.
 */
export const QK8_1 = 32;
export const Q8_1_BYTES = 36;

export function dequantizeQ8_1(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += QK8_1, o += Q8_1_BYTES) {
    const d = readF16(src, o);
    for (let j = 0; j < QK8_1; j++) dst[b + j] = ((src[o + 4 + j]! << 24) >> 24) * d;
  }
}

/** ggml's quantize_row_q8_1_ref */
export function quantizeQ8_1(dst: Uint8Array, src: Float32Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += QK8_1, o += Q8_1_BYTES) {
    let amax = 0;
    for (let j = 0; j < QK8_1; j++) amax = Math.max(amax, Math.abs(src[b + j]!));
    const d = fround(amax / 127);
    const id = d !== 0 ? fround(1 / d) : 0;
    writeF16(dst, o, d);
    let sum = 0;
    for (let j = 0; j < QK8_1; j++) {
      const q = roundAway(fround(src[b + j]! * id));
      dst[o + 4 + j] = q & 0xff;
      sum += q;
    }
    writeF16(dst, o + 2, fround(sum * d));
  }
}
