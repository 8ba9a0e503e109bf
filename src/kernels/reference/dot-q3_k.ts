import { readF16, readF32, scaleQ3K } from "../../tensor/quant/index.js";
import { i8 } from "./int8.js";

/**
 * Q3_K weights x Q8_K activations (ggml_vec_dot_q3_K_q8_K): per super-block
 * d_w * d_x * sum_g scale_g * sum(q_w * q_x), with q_w = low 2 bits - (hmask bit ? 0 : 4).
 */
export function dotQ3_K(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  let sum = 0;
  for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 256, wo += 110, xo += 292) {
    let isum = 0;
    let is = 0;
    let m = 1;
    let q8 = xo + 4;
    for (let half = 0; half < 2; half++) {
      const q3 = wo + 32 + 32 * half;
      for (let shift = 0; shift < 8; shift += 2) {
        for (let k = 0; k < 2; k++) {
          let isuml = 0;
          for (let l = 0; l < 16; l++) {
            const q = ((w[q3 + 16 * k + l]! >>> shift) & 3) - (w[wo + 16 * k + l]! & m ? 0 : 4);
            isuml += i8(x[q8 + l]!) * q;
          }
          isum += scaleQ3K(is++, w, wo + 96) * isuml;
          q8 += 16;
        }
        m <<= 1;
      }
    }
    sum += readF16(w, wo + 108) * readF32(x, xo) * isum;
  }
  return sum;
}
