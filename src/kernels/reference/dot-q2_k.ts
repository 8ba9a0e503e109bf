import { q8kBsum, readF16, readF32 } from "../../tensor/quant/index.js";
import { i8 } from "./int8.js";

/**
 * Q2_K weights x Q8_K activations (ggml_vec_dot_q2_K_q8_K): per super-block
 * d_x * (d_w * sum_g scale_g * sum(q_w * q_x) - dmin_w * sum_g min_g * bsum_g),
 * the integer sums exact, the rest float64 (see dot-q8_0.ts).
 */
export function dotQ2_K(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  let sum = 0;
  for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 256, wo += 84, xo += 292) {
    let summs = 0;
    for (let g = 0; g < 16; g++) summs += q8kBsum(x, xo, g) * (w[wo + g]! >>> 4);
    let isum = 0;
    let is = 0;
    let q8 = xo + 4;
    for (let half = 0; half < 2; half++) {
      const q2 = wo + 16 + 32 * half;
      for (let shift = 0; shift < 8; shift += 2) {
        for (let k = 0; k < 2; k++) {
          let isuml = 0;
          for (let l = 0; l < 16; l++) isuml += i8(x[q8 + l]!) * ((w[q2 + 16 * k + l]! >>> shift) & 3);
          isum += (w[wo + is++]! & 0x0f) * isuml;
          q8 += 16;
        }
      }
    }
    const dx = readF32(x, xo);
    sum += dx * readF16(w, wo + 80) * isum - dx * readF16(w, wo + 82) * summs;
  }
  return sum;
}
