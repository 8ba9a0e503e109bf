import { q8kBsum, readF16, readF32, scaleMinK4 } from "../../tensor/quant/index.js";
import { i8 } from "./int8.js";

/** Q5_K weights x Q8_K activations (ggml_vec_dot_q5_K_q8_K); as dot-q4_k.ts with a 5th bit from qh */
export function dotQ5_K(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  let sum = 0;
  for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 256, wo += 176, xo += 292) {
    let isum = 0;
    let msum = 0;
    for (let c = 0; c < 4; c++) {
      const ql = wo + 48 + 32 * c;
      const q8 = xo + 4 + 64 * c;
      const u1 = 1 << (2 * c);
      const u2 = 2 << (2 * c);
      const p1 = scaleMinK4(2 * c, w, wo + 4);
      const p2 = scaleMinK4(2 * c + 1, w, wo + 4);
      let s1 = 0;
      let s2 = 0;
      for (let l = 0; l < 32; l++) {
        const h = w[wo + 16 + l]!;
        s1 += ((w[ql + l]! & 0x0f) + (h & u1 ? 16 : 0)) * i8(x[q8 + l]!);
        s2 += ((w[ql + l]! >>> 4) + (h & u2 ? 16 : 0)) * i8(x[q8 + 32 + l]!);
      }
      isum += (p1 & 0xff) * s1 + (p2 & 0xff) * s2;
      msum += (p1 >>> 8) * (q8kBsum(x, xo, 4 * c) + q8kBsum(x, xo, 4 * c + 1));
      msum += (p2 >>> 8) * (q8kBsum(x, xo, 4 * c + 2) + q8kBsum(x, xo, 4 * c + 3));
    }
    const dx = readF32(x, xo);
    sum += readF16(w, wo) * dx * isum - readF16(w, wo + 2) * dx * msum;
  }
  return sum;
}
