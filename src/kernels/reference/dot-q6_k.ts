import { readF16, readF32 } from "../../tensor/quant/index.js";
import { i8 } from "./int8.js";

/**
 * Q6_K weights x Q8_K activations (ggml_vec_dot_q6_K_q8_K): per super-block
 * d_w * d_x * sum_g scale_g * sum((q_w - 32) * q_x) over the 16 groups of 16.
 */
export function dotQ6_K(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  let sum = 0;
  for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 256, wo += 210, xo += 292) {
    let isum = 0;
    for (let h = 0; h < 2; h++) {
      const ql = wo + 64 * h;
      const qh = wo + 128 + 32 * h;
      const sc = wo + 192 + 8 * h;
      const q8 = xo + 4 + 128 * h;
      // four sub-sums per 16-lane group: weights l, l+32, l+64, l+96 use scales is, is+2, is+4, is+6
      for (let is = 0; is < 2; is++) {
        let s1 = 0;
        let s2 = 0;
        let s3 = 0;
        let s4 = 0;
        for (let l = 16 * is; l < 16 * is + 16; l++) {
          const hb = w[qh + l]!;
          s1 += (((w[ql + l]! & 0x0f) | ((hb & 3) << 4)) - 32) * i8(x[q8 + l]!);
          s2 += (((w[ql + l + 32]! & 0x0f) | (((hb >>> 2) & 3) << 4)) - 32) * i8(x[q8 + l + 32]!);
          s3 += (((w[ql + l]! >>> 4) | (((hb >>> 4) & 3) << 4)) - 32) * i8(x[q8 + l + 64]!);
          s4 += (((w[ql + l + 32]! >>> 4) | (((hb >>> 6) & 3) << 4)) - 32) * i8(x[q8 + l + 96]!);
        }
        isum += i8(w[sc + is]!) * s1 + i8(w[sc + is + 2]!) * s2 + i8(w[sc + is + 4]!) * s3 + i8(w[sc + is + 6]!) * s4;
      }
    }
    sum += readF16(w, wo + 208) * readF32(x, xo) * isum;
  }
  return sum;
}
