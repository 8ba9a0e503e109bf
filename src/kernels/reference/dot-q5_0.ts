import { readF16 } from "../../tensor/quant/index.js";
import { i8 } from "./int8.js";

/** Q5_0 weights x Q8_0 activations (ggml_vec_dot_q5_0_q8_0); see dot-q8_0.ts for the numerics */
export function dotQ5_0(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  let sum = 0;
  for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 32, wo += 22, xo += 34) {
    const qh = (w[wo + 2]! | (w[wo + 3]! << 8) | (w[wo + 4]! << 16) | (w[wo + 5]! << 24)) >>> 0;
    let sumi = 0;
    for (let j = 0; j < 16; j++) {
      const q = w[wo + 6 + j]!;
      const v0 = ((q & 0x0f) | (((qh >>> j) & 1) << 4)) - 16;
      const v1 = ((q >>> 4) | (((qh >>> (j + 16)) & 1) << 4)) - 16;
      sumi += v0 * i8(x[xo + 2 + j]!) + v1 * i8(x[xo + 18 + j]!);
    }
    sum += sumi * readF16(w, wo) * readF16(x, xo);
  }
  return sum;
}
