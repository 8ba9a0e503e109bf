/**
 * The packed 6-bit scales of the k-quants.
 *
 * Q4_K / Q5_K: 12 bytes hold 8 (scale, min) pairs. Pairs 0..3: scale = s[j] & 63, min =
 * s[j + 4] & 63. Pairs 4..7: the low 4 bits come from s[j + 4] (scale low nibble, min high
 * nibble) and the top 2 bits from the spare top bits of s[j - 4] (scale) and s[j] (min).
 *
 * Q3_K: 12 bytes hold 16 signed 6-bit scales stored +32: low nibbles in bytes 0..7 (scale j
 * in the low nibble of byte j for j < 8, the high nibble of byte j - 8 otherwise), the top
 * 2 bits of scale j in bits 2*(j/4) of byte 8 + j%4.
 */

/** (scale | min << 8) of pair j (0..7) of the Q4_K/Q5_K scales at `s[o]` */
export function scaleMinK4(j: number, s: Uint8Array, o: number): number {
  if (j < 4) return (s[o + j]! & 63) | ((s[o + j + 4]! & 63) << 8);
  const sc = (s[o + j + 4]! & 0x0f) | ((s[o + j - 4]! >>> 6) << 4);
  const m = (s[o + j + 4]! >>> 4) | ((s[o + j]! >>> 6) << 4);
  return sc | (m << 8);
}

/** packs 8 (scale, min) pairs, each 0..63, into 12 bytes at `s[o]` (ggml's layout) */
export function packScaleMinK4(s: Uint8Array, o: number, scales: ArrayLike<number>, mins: ArrayLike<number>): void {
  s.fill(0, o, o + 12);
  for (let j = 0; j < 8; j++) {
    const ls = scales[j]!;
    const lm = mins[j]!;
    if (j < 4) {
      s[o + j] = ls;
      s[o + j + 4] = lm;
    } else {
      s[o + j + 4] = (ls & 0x0f) | ((lm & 0x0f) << 4);
      s[o + j - 4] = s[o + j - 4]! | ((ls >>> 4) << 6);
      s[o + j] = s[o + j]! | ((lm >>> 4) << 6);
    }
  }
}

/** signed scale j (0..15, already minus 32) of the Q3_K scales at `s[o]` */
export function scaleQ3K(j: number, s: Uint8Array, o: number): number {
  const low = j < 8 ? s[o + j]! & 0x0f : s[o + j - 8]! >>> 4;
  const high = (s[o + 8 + (j % 4)]! >>> (2 * (j >>> 2))) & 3;
  return (low | (high << 4)) - 32;
}
