import { readF16, writeF16 } from "./half.js";
import { GROUP_MAX_EPS, makeQxQuantsRmse1 } from "./kquant-search.js";
import { fround as f, nearestInt } from "./round.js";

/**
 * Q6_K: super-blocks of 256 weights in 210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits),
 * 16 int8 scales (one per group of 16), f16 d. Weight = d * scale * (q - 32). In each
 * 128-weight half h (ql at 64h, qh at 32h), for l in 0..31: ql[l] holds weights l (low nibble)
 * and l + 64 (high), ql[l + 32] holds l + 32 and l + 96, and qh[l] holds the high bits of
 * l, l + 32, l + 64, l + 96 at shifts 0, 2, 4, 6.
 */
export const Q6_K_BYTES = 210;

export function dequantizeQ6_K(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += 256, o += Q6_K_BYTES) {
    const d = readF16(src, o + 208);
    for (let h = 0; h < 2; h++) {
      const ql = o + 64 * h;
      const qh = o + 128 + 32 * h;
      const sc = o + 192 + 8 * h;
      const y = b + 128 * h;
      for (let l = 0; l < 32; l++) {
        const is = l >>> 4;
        const hb = src[qh + l]!;
        const q1 = ((src[ql + l]! & 0x0f) | ((hb & 3) << 4)) - 32;
        const q2 = ((src[ql + l + 32]! & 0x0f) | (((hb >>> 2) & 3) << 4)) - 32;
        const q3 = ((src[ql + l]! >>> 4) | (((hb >>> 4) & 3) << 4)) - 32;
        const q4 = ((src[ql + l + 32]! >>> 4) | (((hb >>> 6) & 3) << 4)) - 32;
        dst[y + l] = f(d * ((src[sc + is]! << 24) >> 24)) * q1;
        dst[y + l + 32] = f(d * ((src[sc + is + 2]! << 24) >> 24)) * q2;
        dst[y + l + 64] = f(d * ((src[sc + is + 4]! << 24) >> 24)) * q3;
        dst[y + l + 96] = f(d * ((src[sc + is + 6]! << 24) >> 24)) * q4;
      }
    }
  }
}

/** ggml's quantize_row_q6_K_ref */
export function quantizeQ6_K(dst: Uint8Array, src: Float32Array, n: number): void {
  const L = new Uint8Array(256);
  const scales = new Float32Array(16);
  for (let b = 0, o = 0; b < n; b += 256, o += Q6_K_BYTES) {
    let maxScale = 0;
    let maxAbsScale = 0;
    for (let g = 0; g < 16; g++) {
      const scale = makeQxQuantsRmse1(16, 32, src.subarray(b + 16 * g, b + 16 * g + 16), L.subarray(16 * g));
      scales[g] = scale;
      if (Math.abs(scale) > maxAbsScale) {
        maxAbsScale = Math.abs(scale);
        maxScale = scale;
      }
    }
    if (maxAbsScale < GROUP_MAX_EPS) {
      dst.fill(0, o, o + Q6_K_BYTES);
      continue;
    }
    const iscale = f(-128 / maxScale);
    writeF16(dst, o + 208, f(1 / iscale));
    for (let g = 0; g < 16; g++) dst[o + 192 + g] = Math.min(127, nearestInt(f(iscale * scales[g]!))) & 0xff;
    const dAll = readF16(dst, o + 208);
    for (let g = 0; g < 16; g++) {
      const d = f(dAll * ((dst[o + 192 + g]! << 24) >> 24));
      if (d === 0) continue;
      for (let i = 0; i < 16; i++) {
        const l = nearestInt(f(src[b + 16 * g + i]! / d));
        L[16 * g + i] = Math.max(-32, Math.min(31, l)) + 32;
      }
    }
    for (let h = 0; h < 2; h++) {
      const ql = o + 64 * h;
      const qh = o + 128 + 32 * h;
      const x = 128 * h;
      for (let l = 0; l < 32; l++) {
        const q1 = L[x + l]!;
        const q2 = L[x + l + 32]!;
        const q3 = L[x + l + 64]!;
        const q4 = L[x + l + 96]!;
        dst[ql + l] = (q1 & 0x0f) | ((q3 & 0x0f) << 4);
        dst[ql + l + 32] = (q2 & 0x0f) | ((q4 & 0x0f) << 4);
        dst[qh + l] = (q1 >>> 4) | ((q2 >>> 4) << 2) | ((q3 >>> 4) << 4) | ((q4 >>> 4) << 6);
      }
    }
  }
}
