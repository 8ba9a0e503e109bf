// The grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) against Q8_K activations, in the order of llama.cpp's x86 IQ panel gemm
// (ggml-cpu/iqp.cpp; src/kernels/reference/dot-iq-grid.ts is the spec): each super-block of 256
// decoded 16 weights at a time into int8 (grid entries loaded by index, signs applied as
// (g ^ m) - m with m the byte mask of the sign bits; IQ1: 8 * grid + delta), the exact integer sum of the 16 sub-block
// dots times their integer scales, then acc = fma(f32(sum), dfac * d_x, acc), the fused
// multiply-add done in f64 (the product of two f32 is exact there, so only the rare f64-then-f32
// double rounding of the sum can differ from the hardware FMA). Activations are the int16 q
// quantizeRowQ8_K stores (xq), one f32 d per super-block (xd).
import { f16 } from "./half";
import { dot16, hsumI32 } from "./simd";
import { IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS } from "./iq-grids";

/** the kinds matGrid takes (compile-time constants after inlining) */
const IQ2_XS = 0, IQ3_S = 1, IQ2_XXS = 2, IQ2_S = 3, IQ3_XXS = 4, IQ1_S = 5, IQ1_M = 6;

/** 16 grid bytes with sign bits s (bit j: byte j negative) applied */
// @ts-ignore: decorator
@inline function signed(g: v128, s: u32): v128 {
  const sv = i8x16.swizzle(i16x8.splat(<i16>s), i8x16(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const bits = i8x16(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  const m = i8x16.eq(v128.and(sv, bits), bits);
  return i8x16.sub(v128.xor(g, m), m);
}

/** weights 16h..16h+15 of the IQ2_XS super-block at p (f16 d, u16 qs[32]: 9-bit index | 7 sign bits << 9, scales[8]) */
// @ts-ignore: decorator
@inline function halfIQ2_XS(p: usize, h: usize): v128 {
  const q0 = <u32>load<u16>(p + 2 + (h << 2)), q1 = <u32>load<u16>(p + 4 + (h << 2));
  let g = v128.load64_zero(IQ2XS_GRID + (<usize>(q0 & 511) << 3));
  g = v128.load64_lane(IQ2XS_GRID + (<usize>(q1 & 511) << 3), g, 1);
  return signed(g, <u32>load<u8>(KSIGNS_IQ2XS + <usize>(q0 >> 9)) | (<u32>load<u8>(KSIGNS_IQ2XS + <usize>(q1 >> 9)) << 8));
}

// @ts-ignore: decorator
@inline function scaleIQ2_XS(p: usize, h: usize): i32 {
  return (((<i32>load<u8>(p + 66 + (h >> 1))) >> (<i32>(h & 1) << 2)) & 0xf) * 2 + 1;
}

/**
 * weights 16h..16h+15 of the IQ3_S super-block at p (f16 d, qs[64]: low 8 bits of 9-bit
 * indices, qh[8]: their 9th bits, signs[32], scales[4]): grid entries k = 4(h & 1) .. +3 of
 * 32-group h >> 1
 */
// @ts-ignore: decorator
@inline function halfIQ3_S(p: usize, h: usize): v128 {
  const ib = h >> 1;
  const k0 = (h & 1) << 2;
  const qs = p + 2 + (ib << 3) + k0;
  const qh = (<u32>load<u8>(p + 66 + ib)) >> <u32>k0;
  let g = v128.load32_zero(IQ3S_GRID + ((<usize>load<u8>(qs) | (<usize>(qh & 1) << 8)) << 2));
  g = v128.load32_lane(IQ3S_GRID + ((<usize>load<u8>(qs, 1) | (<usize>((qh >> 1) & 1) << 8)) << 2), g, 1);
  g = v128.load32_lane(IQ3S_GRID + ((<usize>load<u8>(qs, 2) | (<usize>((qh >> 2) & 1) << 8)) << 2), g, 2);
  g = v128.load32_lane(IQ3S_GRID + ((<usize>load<u8>(qs, 3) | (<usize>((qh >> 3) & 1) << 8)) << 2), g, 3);
  return signed(g, <u32>load<u16>(p + 74 + (h << 1)));
}

// @ts-ignore: decorator
@inline function scaleIQ3_S(p: usize, h: usize): i32 {
  return (((<i32>load<u8>(p + 106 + (h >> 2))) >> (<i32>((h >> 1) & 1) << 2)) & 0xf) * 2 + 1;
}

/** two 8-byte grid entries a, b (byte offsets into grid) as one register */
// @ts-ignore: decorator
@inline function grid2(grid: usize, a: usize, b: usize): v128 {
  return v128.load64_lane(grid + b, v128.load64_zero(grid + a), 1);
}

/** IQ2_XXS (f16 d, per 32 weights: 4 grid bytes, then a u32 of 4 x 7 sign bits and a 4-bit scale on top) */
// @ts-ignore: decorator
@inline function halfIQ2_XXS(p: usize, h: usize): v128 {
  const q = p + 2 + ((h >> 1) << 3);
  const l = (h & 1) << 1;
  const aux = load<u32>(q, 4) >> (7 * <u32>l);
  const g = grid2(IQ2XXS_GRID, <usize>load<u8>(q + l) << 3, <usize>load<u8>(q + l + 1) << 3);
  return signed(g, <u32>load<u8>(KSIGNS_IQ2XS + <usize>(aux & 127)) | (<u32>load<u8>(KSIGNS_IQ2XS + <usize>((aux >> 7) & 127)) << 8));
}

// @ts-ignore: decorator
@inline function scaleIQ2_XXS(p: usize, h: usize): i32 {
  return <i32>(load<u32>(p + 6 + ((h >> 1) << 3)) >> 28) * 2 + 1;
}

/** IQ2_S (f16 d, qs[32] low index bytes, signs[32], qh[8]: 2 high bits per 8 weights, scales[8]) */
// @ts-ignore: decorator
@inline function halfIQ2_S(p: usize, h: usize): v128 {
  const ib = h >> 1;
  const l = (h & 1) << 1;
  const qh = <usize>load<u8>(p + 66 + ib);
  const a = <usize>load<u8>(p + 2 + (ib << 2) + l) | ((qh << (8 - (l << 1))) & 0x300);
  const b = <usize>load<u8>(p + 3 + (ib << 2) + l) | ((qh << (6 - (l << 1))) & 0x300);
  return signed(grid2(IQ2S_GRID, a << 3, b << 3), <u32>load<u16>(p + 34 + (h << 1)));
}

// @ts-ignore: decorator
@inline function scaleIQ2_S(p: usize, h: usize): i32 {
  return (((<i32>load<u8>(p + 74 + (h >> 1))) >> (<i32>(h & 1) << 2)) & 0xf) * 2 + 1;
}

/** IQ3_XXS (f16 d, qs[64] grid bytes (4 weights each), 8 u32 of 4 x 7 sign bits and a 4-bit scale) */
// @ts-ignore: decorator
@inline function halfIQ3_XXS(p: usize, h: usize): v128 {
  const qs = p + 2 + (h << 2);
  let g = v128.load32_zero(IQ3XXS_GRID + (<usize>load<u8>(qs) << 2));
  g = v128.load32_lane(IQ3XXS_GRID + (<usize>load<u8>(qs, 1) << 2), g, 1);
  g = v128.load32_lane(IQ3XXS_GRID + (<usize>load<u8>(qs, 2) << 2), g, 2);
  g = v128.load32_lane(IQ3XXS_GRID + (<usize>load<u8>(qs, 3) << 2), g, 3);
  const aux = load<u32>(p + 66 + ((h >> 1) << 2)) >> (14 * <u32>(h & 1));
  return signed(g, <u32>load<u8>(KSIGNS_IQ2XS + <usize>(aux & 127)) | (<u32>load<u8>(KSIGNS_IQ2XS + <usize>((aux >> 7) & 127)) << 8));
}

// @ts-ignore: decorator
@inline function scaleIQ3_XXS(p: usize, h: usize): i32 {
  return <i32>(load<u32>(p + 66 + ((h >> 1) << 2)) >> 28) * 2 + 1;
}

/** 8 * (two int8 iq1s_grid entries in {-1, 0, 1}) + their deltas (+-1 per 8 weights) */
// @ts-ignore: decorator
@inline function iq1Values(a: usize, b: usize, negA: bool, negB: bool): v128 {
  const g = i8x16.shl(grid2(IQ1S_GRID, a << 3, b << 3), 3);
  const ones: i64 = 0x0101010101010101;
  return i8x16.add(g, i64x2.replace_lane(i64x2.splat(negA ? -1 : ones), 1, negB ? -1 : ones));
}

/** IQ1_S (f16 d, qs[32] low index bytes, u16 qh[8]: per 32 weights 4 x 3 high index bits, a 3-bit scale, the delta's sign) */
// @ts-ignore: decorator
@inline function halfIQ1_S(p: usize, h: usize): v128 {
  const ib = h >> 1;
  const l = (h & 1) << 1;
  const qh = <usize>load<u16>(p + 34 + (ib << 1));
  const a = <usize>load<u8>(p + 2 + (ib << 2) + l) | (((qh >> (3 * l)) & 7) << 8);
  const b = <usize>load<u8>(p + 3 + (ib << 2) + l) | (((qh >> (3 * l + 3)) & 7) << 8);
  const neg = (qh & 0x8000) != 0;
  return iq1Values(a, b, neg, neg);
}

// @ts-ignore: decorator
@inline function scaleIQ1_S(p: usize, h: usize): i32 {
  return ((<i32>load<u16>(p + 34 + ((h >> 1) << 1)) >> 12) & 7) * 2 + 1;
}

/** IQ1_M (qs[32], qh[16]: per 8 weights 3 high index bits and a delta sign bit, 4 u16 scale words with the f16 d in their top nibbles) */
// @ts-ignore: decorator
@inline function halfIQ1_M(p: usize, h: usize): v128 {
  const qh = <usize>load<u8>(p + 32 + h);
  const a = <usize>load<u8>(p + (h << 1)) | ((qh << 8) & 0x700);
  const b = <usize>load<u8>(p + 1 + (h << 1)) | ((qh << 4) & 0x700);
  return iq1Values(a, b, (qh & 0x08) != 0, (qh & 0x80) != 0);
}

// @ts-ignore: decorator
@inline function scaleIQ1_M(p: usize, h: usize): i32 {
  const sc = <i32>load<u16>(p + 48 + ((h >> 2) << 1));
  return ((sc >> (6 * <i32>((h >> 1) & 1) + 3 * <i32>(h & 1))) & 7) * 2 + 1;
}

// @ts-ignore: decorator
@inline function half(kind: i32, p: usize, h: usize): v128 {
  if (kind == IQ2_XS) return halfIQ2_XS(p, h);
  if (kind == IQ3_S) return halfIQ3_S(p, h);
  if (kind == IQ2_XXS) return halfIQ2_XXS(p, h);
  if (kind == IQ2_S) return halfIQ2_S(p, h);
  if (kind == IQ3_XXS) return halfIQ3_XXS(p, h);
  if (kind == IQ1_S) return halfIQ1_S(p, h);
  return halfIQ1_M(p, h);
}

// @ts-ignore: decorator
@inline function scale(kind: i32, p: usize, h: usize): i32 {
  if (kind == IQ2_XS) return scaleIQ2_XS(p, h);
  if (kind == IQ3_S) return scaleIQ3_S(p, h);
  if (kind == IQ2_XXS) return scaleIQ2_XXS(p, h);
  if (kind == IQ2_S) return scaleIQ2_S(p, h);
  if (kind == IQ3_XXS) return scaleIQ3_XXS(p, h);
  if (kind == IQ1_S) return scaleIQ1_S(p, h);
  return scaleIQ1_M(p, h);
}

/** the super-block factor of iqp_decode_*: d, d / 4 or d / 8 (IQ1_M's d from its scale words' top nibbles) */
// @ts-ignore: decorator
@inline function dfac(kind: i32, p: usize): f32 {
  if (kind == IQ3_S) return f16(load<u16>(p));
  if (kind == IQ3_XXS) return f16(load<u16>(p)) * 0.25;
  if (kind == IQ1_M) {
    const b = <u32>load<u16>(p + 48) >> 12 | ((<u32>load<u16>(p + 50) >> 8) & 0x00f0) | ((<u32>load<u16>(p + 52) >> 4) & 0x0f00) | (<u32>load<u16>(p + 54) & 0xf000);
    return f16(<u16>b) * 0.125;
  }
  return f16(load<u16>(p)) * 0.125;
}

/** whether the two 16-weight halves of each 32-weight group share one scale (one multiply per 32) */
// @ts-ignore: decorator
@inline function pairScale(kind: i32): bool {
  return kind == IQ3_S || kind == IQ2_XXS || kind == IQ3_XXS || kind == IQ1_S;
}

/** block bytes per type */
// @ts-ignore: decorator
@inline function blockBytes(kind: i32): usize {
  if (kind == IQ2_XS) return 74;
  if (kind == IQ3_S) return 110;
  if (kind == IQ2_XXS) return 66;
  if (kind == IQ2_S) return 82;
  if (kind == IQ3_XXS) return 98;
  if (kind == IQ1_S) return 50;
  return 56;
}

/** acc + f32(sumi) * (dw * dx) rounded once (see the top) */
// @ts-ignore: decorator
@inline function fmaAcc(acc: f32, sumi: i32, dw: f32, dx: f32): f32 {
  return <f32>(<f64><f32>sumi * <f64>(dw * dx) + <f64>acc);
}

/** rows [r0, r1) for every token: four tokens at a time through each row (each super-block decoded once for the four), the rest one at a time, the same bits per token either way */
// @ts-ignore: decorator
@inline function matGrid(kind: i32, w: usize, rowBytes: usize, xq: usize, xd: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  const nb = cols >> 8;
  const bytes = blockBytes(kind);
  const qStride = (<usize>nb) << 9, dStride = (<usize>nb) << 2;
  const os = (<usize>rows) << 2;
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * rowBytes;
    let t = 0;
    for (; t + 4 <= nTok; t += 4) {
      let a0: f32 = 0, a1: f32 = 0, a2: f32 = 0, a3: f32 = 0;
      const tb = <usize>t * <usize>nb;
      for (let b = 0; b < nb; b++) {
        const p = wr + <usize>b * bytes;
        const i = tb + <usize>b;
        const x = xq + (i << 9);
        const z = i32x4.splat(0);
        let i0 = z, i1 = z, i2 = z, i3 = z;
        for (let h: usize = 0; h < 16; h += 2) {
          const q = half(kind, p, h), q1 = half(kind, p, h + 1);
          const xh = x + (h << 5);
          if (pairScale(kind)) {
            const s = i32x4.splat(scale(kind, p, h));
            i0 = i32x4.add(i0, i32x4.mul(i32x4.add(dot16(q, xh), dot16(q1, xh + 32)), s));
            i1 = i32x4.add(i1, i32x4.mul(i32x4.add(dot16(q, xh + qStride), dot16(q1, xh + qStride + 32)), s));
            i2 = i32x4.add(i2, i32x4.mul(i32x4.add(dot16(q, xh + 2 * qStride), dot16(q1, xh + 2 * qStride + 32)), s));
            i3 = i32x4.add(i3, i32x4.mul(i32x4.add(dot16(q, xh + 3 * qStride), dot16(q1, xh + 3 * qStride + 32)), s));
          } else {
            const s = i32x4.splat(scale(kind, p, h)), s1 = i32x4.splat(scale(kind, p, h + 1));
            i0 = i32x4.add(i0, i32x4.add(i32x4.mul(dot16(q, xh), s), i32x4.mul(dot16(q1, xh + 32), s1)));
            i1 = i32x4.add(i1, i32x4.add(i32x4.mul(dot16(q, xh + qStride), s), i32x4.mul(dot16(q1, xh + qStride + 32), s1)));
            i2 = i32x4.add(i2, i32x4.add(i32x4.mul(dot16(q, xh + 2 * qStride), s), i32x4.mul(dot16(q1, xh + 2 * qStride + 32), s1)));
            i3 = i32x4.add(i3, i32x4.add(i32x4.mul(dot16(q, xh + 3 * qStride), s), i32x4.mul(dot16(q1, xh + 3 * qStride + 32), s1)));
          }
        }
        const dw = dfac(kind, p);
        const d = xd + (i << 2);
        a0 = fmaAcc(a0, hsumI32(i0), dw, load<f32>(d));
        a1 = fmaAcc(a1, hsumI32(i1), dw, load<f32>(d + dStride));
        a2 = fmaAcc(a2, hsumI32(i2), dw, load<f32>(d + 2 * dStride));
        a3 = fmaAcc(a3, hsumI32(i3), dw, load<f32>(d + 3 * dStride));
      }
      const o = out + ((<usize>t * <usize>rows + <usize>r) << 2);
      store<f32>(o, a0);
      store<f32>(o + os, a1);
      store<f32>(o + 2 * os, a2);
      store<f32>(o + 3 * os, a3);
    }
    for (; t < nTok; t++) {
      const tb = <usize>t * <usize>nb;
      let acc: f32 = 0;
      for (let b = 0; b < nb; b++) {
        const p = wr + <usize>b * bytes;
        const i = tb + <usize>b;
        const x = xq + (i << 9);
        let isum = i32x4.splat(0);
        for (let h: usize = 0; h < 16; h += 2) {
          const xh = x + (h << 5);
          if (pairScale(kind)) {
            isum = i32x4.add(isum, i32x4.mul(i32x4.add(dot16(half(kind, p, h), xh), dot16(half(kind, p, h + 1), xh + 32)), i32x4.splat(scale(kind, p, h))));
          } else {
            isum = i32x4.add(isum, i32x4.mul(dot16(half(kind, p, h), xh), i32x4.splat(scale(kind, p, h))));
            isum = i32x4.add(isum, i32x4.mul(dot16(half(kind, p, h + 1), xh + 32), i32x4.splat(scale(kind, p, h + 1))));
          }
        }
        acc = fmaAcc(acc, hsumI32(isum), dfac(kind, p), load<f32>(xd + (i << 2)));
      }
      store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), acc);
    }
  }
}

export function matIQ2_XS(w: usize, rowBytes: usize, xq: usize, xd: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matGrid(IQ2_XS, w, rowBytes, xq, xd, out, rows, cols, nTok, r0, r1);
}

export function matIQ3_S(w: usize, rowBytes: usize, xq: usize, xd: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matGrid(IQ3_S, w, rowBytes, xq, xd, out, rows, cols, nTok, r0, r1);
}

export function matIQ2_XXS(w: usize, rowBytes: usize, xq: usize, xd: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matGrid(IQ2_XXS, w, rowBytes, xq, xd, out, rows, cols, nTok, r0, r1);
}

export function matIQ2_S(w: usize, rowBytes: usize, xq: usize, xd: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matGrid(IQ2_S, w, rowBytes, xq, xd, out, rows, cols, nTok, r0, r1);
}

export function matIQ3_XXS(w: usize, rowBytes: usize, xq: usize, xd: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matGrid(IQ3_XXS, w, rowBytes, xq, xd, out, rows, cols, nTok, r0, r1);
}

export function matIQ1_S(w: usize, rowBytes: usize, xq: usize, xd: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matGrid(IQ1_S, w, rowBytes, xq, xd, out, rows, cols, nTok, r0, r1);
}

export function matIQ1_M(w: usize, rowBytes: usize, xq: usize, xd: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matGrid(IQ1_M, w, rowBytes, xq, xd, out, rows, cols, nTok, r0, r1);
}
