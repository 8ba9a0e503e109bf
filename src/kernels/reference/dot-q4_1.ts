import { readF16 } from "../../tensor/quant/index.js";
import { i8 } from "./int8.js";

/**
 * Q4_1 weights x Q8_1 activations (ggml_vec_dot_q4_1_q8_1): per block, d_w * d_x * sum(q_w *
 * q_x) + m_w * s_x, where s_x = d_x * sum(q_x) is the f16 the activation block carries.
 */
export function dotQ4_1(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  let sum = 0;
  for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 32, wo += 20, xo += 36) {
    let sumi = 0;
    for (let j = 0; j < 16; j++) {
      const q = w[wo + 4 + j]!;
      sumi += (q & 0x0f) * i8(x[xo + 4 + j]!) + (q >>> 4) * i8(x[xo + 20 + j]!);
    }
    sum += readF16(w, wo) * readF16(x, xo) * sumi + readF16(w, wo + 2) * readF16(x, xo + 2);
  }
  return sum;
}
