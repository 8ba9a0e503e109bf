import { readF16, writeF16 } from "./half.js";
import { makeQkx2Quants } from "./kquant-search.js";
import { packScaleMinK4, scaleMinK4 } from "./kquant-scales.js";
import { fround as f, nearestInt } from "./round.js";

/**
 * Q4_K: super-blocks of 256 weights in 144 bytes: f16 d, f16 dmin, 12 bytes of 8 (scale, min)
 * pairs (6 bits each, see kquant-scales.ts), 128 bytes of nibbles. Weight = d * scale * q -
 * dmin * min for its group of 32. In each 64-weight chunk c, byte l (0..31) of the chunk's 32
 * bytes holds weight 64c + l (low nibble) and 64c + 32 + l (high nibble).
 */
export const Q4_K_BYTES = 144;

export function dequantizeQ4_K(dst: Float32Array, src: Uint8Array, n: number): void {
  let y = 0;
  for (let o = 0; y < n; o += Q4_K_BYTES) {
    const d = readF16(src, o);
    const min = readF16(src, o + 2);
    for (let c = 0; c < 4; c++) {
      const p1 = scaleMinK4(2 * c, src, o + 4);
      const p2 = scaleMinK4(2 * c + 1, src, o + 4);
      const d1 = f(d * (p1 & 0xff));
      const m1 = f(min * (p1 >>> 8));
      const d2 = f(d * (p2 & 0xff));
      const m2 = f(min * (p2 >>> 8));
      const q = o + 16 + 32 * c;
      for (let l = 0; l < 32; l++) dst[y++] = f(d1 * (src[q + l]! & 0x0f)) - m1;
      for (let l = 0; l < 32; l++) dst[y++] = f(d2 * (src[q + l]! >>> 4)) - m2;
    }
  }
}

/** ggml's quantize_row_q4_K_ref */
export function quantizeQ4_K(dst: Uint8Array, src: Float32Array, n: number): void {
  const L = new Uint8Array(256);
  for (let b = 0, o = 0; b < n; b += 256, o += Q4_K_BYTES) {
    quantizeScalesK4(dst, o, src.subarray(b, b + 256), L, 15, -1, 20);
    for (let c = 0; c < 4; c++) {
      for (let l = 0; l < 32; l++) dst[o + 16 + 32 * c + l] = L[64 * c + l]! | (L[64 * c + 32 + l]! << 4);
    }
  }
}

/**
 * The shared first half of quantize_row_q4_K_ref / quantize_row_q5_K_ref for one super-block
 * x[0..256): searches each group's (scale, min) with make_qkx2_quants (weights |x| + rms(x)),
 * quantizes them to 6 bits against f16 d and dmin (written at dst[o], dst[o + 2], the packed
 * pairs at dst[o + 4]), then requantizes every weight against its rounded scale into
 * L[0..256) (0..nmax).
 */
export function quantizeScalesK4(dst: Uint8Array, o: number, x: Float32Array, L: Uint8Array, nmax: number, rmin: number, nstep: number): void {
  const Laux = new Uint8Array(32);
  const weights = new Float32Array(32);
  const scales = new Float32Array(8);
  const mins = new Float32Array(8);
  const ls = new Uint8Array(8);
  const lm = new Uint8Array(8);
  let maxScale = 0;
  let maxMin = 0;
  for (let j = 0; j < 8; j++) {
    const g = x.subarray(32 * j, 32 * j + 32);
    let sumX2 = 0;
    for (let l = 0; l < 32; l++) sumX2 = f(sumX2 + f(g[l]! * g[l]!));
    const avX = f(Math.sqrt(f(sumX2 / 32)));
    for (let l = 0; l < 32; l++) weights[l] = avX + Math.abs(g[l]!);
    const [scale, min] = makeQkx2Quants(32, nmax, g, weights, L.subarray(32 * j), Laux, rmin, f(0.1), nstep, false);
    scales[j] = scale;
    mins[j] = min;
    if (scale > maxScale) maxScale = scale;
    if (min > maxMin) maxMin = min;
  }
  const invScale = maxScale > 0 ? f(63 / maxScale) : 0;
  const invMin = maxMin > 0 ? f(63 / maxMin) : 0;
  for (let j = 0; j < 8; j++) {
    ls[j] = Math.min(63, nearestInt(f(invScale * scales[j]!)) & 0xff);
    lm[j] = Math.min(63, nearestInt(f(invMin * mins[j]!)) & 0xff);
  }
  packScaleMinK4(dst, o + 4, ls, lm);
  writeF16(dst, o, f(maxScale / 63));
  writeF16(dst, o + 2, f(maxMin / 63));
  const dAll = readF16(dst, o);
  const dMinAll = readF16(dst, o + 2);
  for (let j = 0; j < 8; j++) {
    const p = scaleMinK4(j, dst, o + 4);
    const d = f(dAll * (p & 0xff));
    if (d === 0) continue;
    const dm = f(dMinAll * (p >>> 8));
    for (let i = 0; i < 32; i++) {
      const l = nearestInt(f(f(x[32 * j + i]! + dm) / d));
      L[32 * j + i] = Math.max(0, Math.min(nmax, l));
    }
  }
}
