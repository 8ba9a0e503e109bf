import { readF16, writeF16 } from "./half.js";
import { makeQkx2Quants } from "./kquant-search.js";
import { fround, nearestInt } from "./round.js";

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

/** ggml's quantize_row_q2_K_ref (no importance weights) */
export function quantizeQ2_K(dst: Uint8Array, src: Float32Array, n: number): void {
  const f = fround;
  const L = new Uint8Array(256);
  const Laux = new Uint8Array(16);
  const weights = new Float32Array(16);
  const scales = new Float32Array(16);
  const mins = new Float32Array(16);
  for (let b = 0, o = 0; b < n; b += 256, o += Q2_K_BYTES) {
    const x = src.subarray(b, b + 256);
    let maxScale = 0;
    let maxMin = 0;
    for (let j = 0; j < 16; j++) {
      const g = x.subarray(16 * j, 16 * j + 16);
      for (let l = 0; l < 16; l++) weights[l] = Math.abs(g[l]!);
      const [scale, min] = makeQkx2Quants(16, 3, g, weights, L.subarray(16 * j), Laux, f(-0.5), f(0.1), 15, true);
      scales[j] = scale;
      mins[j] = min;
      if (scales[j]! > maxScale) maxScale = scales[j]!;
      if (mins[j]! > maxMin) maxMin = mins[j]!;
    }
    if (maxScale > 0) {
      const iscale = f(15 / maxScale);
      for (let j = 0; j < 16; j++) dst[o + j] = nearestInt(f(iscale * scales[j]!)) & 0xff;
      writeF16(dst, o + 80, f(maxScale / 15));
    } else {
      dst.fill(0, o, o + 16);
      writeF16(dst, o + 80, 0);
    }
    if (maxMin > 0) {
      const iscale = f(15 / maxMin);
      for (let j = 0; j < 16; j++) dst[o + j] = (dst[o + j]! | (nearestInt(f(iscale * mins[j]!)) << 4)) & 0xff;
      writeF16(dst, o + 82, f(maxMin / 15));
    } else {
      writeF16(dst, o + 82, 0);
    }
    const d = readF16(dst, o + 80);
    const dmin = readF16(dst, o + 82);
    for (let j = 0; j < 16; j++) {
      const dl = f(d * (dst[o + j]! & 0x0f));
      if (dl === 0) continue;
      const dm = f(dmin * (dst[o + j]! >>> 4));
      for (let i = 0; i < 16; i++) L[16 * j + i] = Math.max(0, Math.min(3, nearestInt(f(f(x[16 * j + i]! + dm) / dl))));
    }
    for (let half = 0; half < 2; half++) {
      const q = o + 16 + 32 * half;
      const y = 128 * half;
      for (let l = 0; l < 32; l++) dst[q + l] = L[y + l]! | (L[y + l + 32]! << 2) | (L[y + l + 64]! << 4) | (L[y + l + 96]! << 6);
    }
  }
}
