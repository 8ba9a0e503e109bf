import { readF32, writeF32 } from "./half.js";
import { fround, nearestInt } from "./round.js";

/**
 * Q8_K: super-blocks of 256 values in 292 bytes: f32 scale d, 256 int8 q, 16 little-endian
 * int16 bsums (sum of each group of 16 q). Only used for activations (the vec_dot type of the
 * k-quants): bsums carry the group sums the weights' min terms need.
 */
export const QK_K = 256;
export const Q8_K_BYTES = 292;

export function dequantizeQ8_K(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += QK_K, o += Q8_K_BYTES) {
    const d = readF32(src, o);
    for (let j = 0; j < QK_K; j++) dst[b + j] = ((src[o + 4 + j]! << 24) >> 24) * d;
  }
}

/** ggml's quantize_row_q8_K_ref: scale -127 / (the value of largest magnitude), ties to even */
export function quantizeQ8_K(dst: Uint8Array, src: Float32Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += QK_K, o += Q8_K_BYTES) {
    let amax = 0;
    let max = 0;
    for (let j = 0; j < QK_K; j++) {
      const ax = Math.abs(src[b + j]!);
      if (ax > amax) {
        amax = ax;
        max = src[b + j]!;
      }
    }
    if (amax === 0) {
      // ggml zeroes d and q and leaves bsums as they were; zero them too, to be deterministic
      dst.fill(0, o, o + Q8_K_BYTES);
      continue;
    }
    const iscale = fround(-127 / max);
    for (let j = 0; j < QK_K; j++) dst[o + 4 + j] = Math.min(127, nearestInt(fround(iscale * src[b + j]!))) & 0xff;
    for (let g = 0; g < QK_K / 16; g++) {
      let sum = 0;
      for (let i = 0; i < 16; i++) sum += (dst[o + 4 + g * 16 + i]! << 24) >> 24;
      dst[o + 4 + QK_K + 2 * g] = sum & 0xff;
      dst[o + 4 + QK_K + 2 * g + 1] = (sum >> 8) & 0xff;
    }
    writeF32(dst, o, 1 / iscale);
  }
}

/** the int16 bsum of group g (0..15) of the Q8_K block at byte offset o */
export function q8kBsum(src: Uint8Array, o: number, g: number): number {
  return ((src[o + 4 + QK_K + 2 * g]! | (src[o + 4 + QK_K + 2 * g + 1]! << 8)) << 16) >> 16;
}
