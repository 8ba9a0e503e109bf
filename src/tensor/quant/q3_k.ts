import { readF16 } from "./half.js";
import { scaleQ3K } from "./kquant-scales.js";
import { fround } from "./round.js";

/**
 * Q3_K: super-blocks of 256 weights in 110 bytes: hmask[32] (high bits), qs[64] (low 2 bits),
 * 12 bytes of 16 signed 6-bit scales, f16 d. Weight = d * scale * (q - 4 if its hmask bit is
 * clear, else q). Weight i's high bit: hmask byte i % 32, bit i / 32. Low bits: as in Q2_K.
 */
export const Q3_K_BYTES = 110;

export function dequantizeQ3_K(dst: Float32Array, src: Uint8Array, n: number): void {
  let y = 0;
  for (let o = 0; y < n; o += Q3_K_BYTES) {
    const dAll = readF16(src, o + 108);
    let is = 0;
    let m = 1;
    for (let half = 0; half < 2; half++) {
      const q = o + 32 + 32 * half;
      for (let shift = 0; shift < 8; shift += 2) {
        for (let k = 0; k < 2; k++) {
          const dl = fround(dAll * scaleQ3K(is++, src, o + 96));
          for (let l = 0; l < 16; l++) {
            const lo = (src[q + 16 * k + l]! >>> shift) & 3;
            const hi = src[o + 16 * k + l]! & m ? 0 : 4;
            dst[y++] = dl * (lo - hi);
          }
        }
        m <<= 1;
      }
    }
  }
}
