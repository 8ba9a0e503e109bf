// IQ2_XS and IQ3_S weights against Q8_K activations, in the order of llama.cpp's x86 IQ panel gemm
// (ggml-cpu/iqp.cpp; src/kernels/reference/dot-iq-grid.ts is the spec): each super-block of 256
// decoded 16 weights at a time into int8 (grid entries loaded by index, signs applied as
// (g ^ m) - m with m the byte mask of the sign bits), the exact integer sum of the 16 sub-block
// dots times their integer scales, then acc = fma(f32(sum), dfac * d_x, acc), the fused
// multiply-add done in f64 (the product of two f32 is exact there, so only the rare f64-then-f32
// double rounding of the sum can differ from the hardware FMA). Activations are the int16 q
// quantizeRowQ8_K stores (xq), one f32 d per super-block (xd).
import { f16 } from "./half";
import { dot16, hsumI32 } from "./simd";
import { IQ2XS_GRID, IQ3S_GRID, KSIGNS_IQ2XS } from "./iq-grids";

const IQ2_XS_BYTES: usize = 74;
const IQ3_S_BYTES: usize = 110;

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

/** kind 0: IQ2_XS, 1: IQ3_S (constants after inlining) */
// @ts-ignore: decorator
@inline function half(kind: i32, p: usize, h: usize): v128 {
  return kind == 0 ? halfIQ2_XS(p, h) : halfIQ3_S(p, h);
}

// @ts-ignore: decorator
@inline function scale(kind: i32, p: usize, h: usize): i32 {
  return kind == 0 ? scaleIQ2_XS(p, h) : scaleIQ3_S(p, h);
}

// @ts-ignore: decorator
@inline function dfac(kind: i32, p: usize): f32 {
  return kind == 0 ? f16(load<u16>(p)) * 0.125 : f16(load<u16>(p));
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
  const bytes = kind == 0 ? IQ2_XS_BYTES : IQ3_S_BYTES;
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
        for (let h: usize = 0; h < 16; h++) {
          const q = half(kind, p, h);
          const s = i32x4.splat(scale(kind, p, h));
          const xh = x + (h << 5);
          i0 = i32x4.add(i0, i32x4.mul(dot16(q, xh), s));
          i1 = i32x4.add(i1, i32x4.mul(dot16(q, xh + qStride), s));
          i2 = i32x4.add(i2, i32x4.mul(dot16(q, xh + 2 * qStride), s));
          i3 = i32x4.add(i3, i32x4.mul(dot16(q, xh + 3 * qStride), s));
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
        for (let h: usize = 0; h < 16; h++) isum = i32x4.add(isum, i32x4.mul(dot16(half(kind, p, h), x + (h << 5)), i32x4.splat(scale(kind, p, h))));
        acc = fmaAcc(acc, hsumI32(isum), dfac(kind, p), load<f32>(xd + (i << 2)));
      }
      store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), acc);
    }
  }
}

export function matIQ2_XS(w: usize, rowBytes: usize, xq: usize, xd: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matGrid(0, w, rowBytes, xq, xd, out, rows, cols, nTok, r0, r1);
}

export function matIQ3_S(w: usize, rowBytes: usize, xq: usize, xd: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matGrid(1, w, rowBytes, xq, xd, out, rows, cols, nTok, r0, r1);
}
