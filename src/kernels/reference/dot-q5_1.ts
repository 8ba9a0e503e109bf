import { readF16 } from "../../tensor/quant/index.js";
import { i8 } from "./int8.js";

/** Q5_1 weights x Q8_1 activations (ggml_vec_dot_q5_1_q8_1); see dot-q4_1.ts for the min term */
export function dotQ5_1(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  let sum = 0;
  for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 32, wo += 24, xo += 36) {
    const qh = (w[wo + 4]! | (w[wo + 5]! << 8) | (w[wo + 6]! << 16) | (w[wo + 7]! << 24)) >>> 0;
    let sumi = 0;
    for (let j = 0; j < 16; j++) {
      const q = w[wo + 8 + j]!;
      const v0 = (q & 0x0f) | (((qh >>> j) & 1) << 4);
      const v1 = (q >>> 4) | (((qh >>> (j + 16)) & 1) << 4);
      sumi += v0 * i8(x[xo + 4 + j]!) + v1 * i8(x[xo + 20 + j]!);
    }
    sum += readF16(w, wo) * readF16(x, xo) * sumi + readF16(w, wo + 2) * readF16(x, xo + 2);
  }
  return sum;
}
