import { readF16 } from "../../tensor/quant/index.js";
import { i8 } from "./int8.js";

/**
 * Q8_0 weights x Q8_0 activations (ggml_vec_dot_q8_0_q8_0): per block of 32 the exact integer
 * sum of q_w * q_x, scaled by d_w * d_x. The scales are f16 data; products and the sum over
 * blocks are float64 (the value ggml's f32 SIMD paths approximate to ~1e-7 relative, in
 * whatever order they add).
 */
export function dotQ8_0(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  let sum = 0;
  for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 32, wo += 34, xo += 34) {
    let sumi = 0;
    for (let j = 0; j < 32; j++) sumi += i8(w[wo + 2 + j]!) * i8(x[xo + 2 + j]!);
    sum += sumi * readF16(w, wo) * readF16(x, xo);
  }
  return sum;
}
