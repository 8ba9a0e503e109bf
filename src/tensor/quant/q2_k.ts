import { readF16 } from "./half.js";
import { fround } from "./round.js";

/**
 * Q2_K: super-blocks of 256 weights in 84 bytes: 16 scale bytes (low nibble: scale of a group
 * of 16, high nibble: its min), 64 bytes of 2-bit quants, f16 d, f16 dmin.
 * Weight = d * scale * q - dmin * min. Quants: in each 128-weight half, byte l (0..31) holds
 * weights l, l + 32, l + 64, l + 96 at bit shifts 0, 2, 4, 6.
 */
export const Q2_K_BYTES = 84;

export function dequantizeQ2_K(dst: Float32Array, src: Uint8Array, n: number): void {
  let y = 0;
  for (let o = 0; y < n; o += Q2_K_BYTES) {
    const d = readF16(src, o + 80);
    const min = readF16(src, o + 82);
    let is = 0;
    for (let half = 0; half < 2; half++) {
      const q = o + 16 + 32 * half;
      for (let shift = 0; shift < 8; shift += 2) {
        for (let k = 0; k < 2; k++) {
          const sc = src[o + is++]!;
          const dl = fround(d * (sc & 0x0f));
          const ml = fround(min * (sc >>> 4));
          for (let l = 0; l < 16; l++) dst[y++] = fround(dl * ((src[q + 16 * k + l]! >>> shift) & 3)) - ml;
        }
      }
    }
  }
}
