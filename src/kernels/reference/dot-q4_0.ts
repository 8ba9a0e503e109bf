import { readF16 } from "../../tensor/quant/index.js";
import { i8 } from "./int8.js";

/**
 * Q4_0 weights x Q8_0 activations (ggml_vec_dot_q4_0_q8_0): per block, the integer sum of
 * (nibble - 8) * q_x scaled by d_w * d_x; float64 across blocks (see dot-q8_0.ts).
 */
export function dotQ4_0(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  let sum = 0;
  for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 32, wo += 18, xo += 34) {
    let sumi = 0;
    for (let j = 0; j < 16; j++) {
      const q = w[wo + 2 + j]!;
      sumi += ((q & 0x0f) - 8) * i8(x[xo + 2 + j]!) + ((q >>> 4) - 8) * i8(x[xo + 18 + j]!);
    }
    sum += sumi * readF16(w, wo) * readF16(x, xo);
  }
  return sum;
}
