import { readF16, writeF16 } from "./half.js";
import { fround, roundAway } from "./round.js";

/** Q8_0: blocks of 32 weights in 34 bytes: f16 scale d, 32 int8 q; weight = q * d. */
export const QK8_0 = 32;
export const Q8_0_BYTES = 34;

export function dequantizeQ8_0(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += QK8_0, o += Q8_0_BYTES) {
    const d = readF16(src, o);
    for (let j = 0; j < QK8_0; j++) dst[b + j] = ((src[o + 2 + j]! << 24) >> 24) * d;
  }
}

/** ggml's quantize_row_q8_0_ref: d = max|x| / 127, q = roundf(x / d) (ties away from zero) */
export function quantizeQ8_0(dst: Uint8Array, src: Float32Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += QK8_0, o += Q8_0_BYTES) {
    let amax = 0;
    for (let j = 0; j < QK8_0; j++) amax = Math.max(amax, Math.abs(src[b + j]!));
    const d = fround(amax / 127);
    const id = d !== 0 ? fround(1 / d) : 0;
    writeF16(dst, o, d);
    for (let j = 0; j < QK8_0; j++) dst[o + 2 + j] = roundAway(fround(src[b + j]! * id)) & 0xff;
  }
}
