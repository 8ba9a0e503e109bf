// IQ4_XS weights against Q8_K activations (ggml's vec_dot_iq4_xs_q8_K): per super-block of 256
// an exact integer sum of the 8 sub-block dots times their 6-bit scales (stored + 32), then one
// float multiply by weight scale * activation scale, as the k-quants (kquant.ts). The 4-bit
// indices become int8 weights with one swizzle into kvalues_iq4nl per 16; activations are the
// int16 q quantizeRowQ8_K stores (xq), one f32 d per super-block (xd). IQ4_NL (blocks of 32
// against Q8_0) is Q4_0's kernel with that lookup (q8.ts). kquant.ts's matK runs these super-blocks
// on the k-quants' schedule (matIQ4_XS).
import { f16 } from "./half";
import { dot16, hsumI32, lookup16 } from "./simd";
import { iq4Values } from "./q8";

/** the 6-bit scale - 32 of sub-block ib of the IQ4_XS block at p (f16 d, u16 scales_h, 4 bytes scales_l) */
// @ts-ignore: decorator
@inline function scaleIQ4_XS(p: usize, ib: i32): i32 {
  const sh = <i32>load<u16>(p, 2);
  const sl = <i32>load<u8>(p + 4 + <usize>(ib >> 1));
  return (((sl >> ((ib & 1) << 2)) & 0xf) | (((sh >> (ib << 1)) & 3) << 4)) - 32;
}

/** sub-block ib's 32 weights as int8 (lo: weights 0..15, hi: 16..31) */
// @ts-ignore: decorator
@inline function lowWeights(p: usize, ib: i32, table: v128): v128 {
  return lookup16(table, v128.and(v128.load(p + 8 + (<usize>ib << 4)), i8x16.splat(0x0f)));
}

// @ts-ignore: decorator
@inline function highWeights(p: usize, ib: i32, table: v128): v128 {
  return lookup16(table, v128.and(i16x8.shr_u(v128.load(p + 8 + (<usize>ib << 4)), 4), i8x16.splat(0x0f)));
}

/** one IQ4_XS super-block (136 bytes) against one Q8_K super-block of int16 activations at qx with scale dx */
// @ts-ignore: decorator
@inline export function superIQ4_XS(p: usize, qx: usize, dx: f32, table: v128): f32 {
  let isum = i32x4.splat(0);
  for (let ib = 0; ib < 8; ib++) {
    const x = qx + (<usize>ib << 6);
    const s = i32x4.add(dot16(lowWeights(p, ib, table), x), dot16(highWeights(p, ib, table), x + 32));
    isum = i32x4.add(isum, i32x4.mul(s, i32x4.splat(scaleIQ4_XS(p, ib))));
  }
  return (f16(load<u16>(p)) * dx) * <f32>hsumI32(isum);
}

/**
 * One super-block against four tokens (super-block i of tokens t..t+3: qStride bytes and dStride
 * bytes apart): each sub-block unpacked once for the four; each lane's arithmetic is
 * superIQ4_XS's, so a token's bits do not depend on its batch.
 */
// @ts-ignore: decorator
@inline export function superIQ4_XS4(p: usize, qx: usize, qStride: usize, xd: usize, dStride: usize, table: v128): v128 {
  const z = i32x4.splat(0);
  let i0 = z, i1 = z, i2 = z, i3 = z;
  for (let ib = 0; ib < 8; ib++) {
    const lo = lowWeights(p, ib, table), hi = highWeights(p, ib, table);
    const ls = i32x4.splat(scaleIQ4_XS(p, ib));
    const x = qx + (<usize>ib << 6);
    i0 = i32x4.add(i0, i32x4.mul(i32x4.add(dot16(lo, x), dot16(hi, x + 32)), ls));
    i1 = i32x4.add(i1, i32x4.mul(i32x4.add(dot16(lo, x + qStride), dot16(hi, x + qStride + 32)), ls));
    i2 = i32x4.add(i2, i32x4.mul(i32x4.add(dot16(lo, x + 2 * qStride), dot16(hi, x + 2 * qStride + 32)), ls));
    i3 = i32x4.add(i3, i32x4.mul(i32x4.add(dot16(lo, x + 3 * qStride), dot16(hi, x + 3 * qStride + 32)), ls));
  }
  const wd = f16(load<u16>(p));
  let v = f32x4.splat((wd * load<f32>(xd)) * <f32>hsumI32(i0));
  v = f32x4.replace_lane(v, 1, (wd * load<f32>(xd + dStride)) * <f32>hsumI32(i1));
  v = f32x4.replace_lane(v, 2, (wd * load<f32>(xd + 2 * dStride)) * <f32>hsumI32(i2));
  return f32x4.replace_lane(v, 3, (wd * load<f32>(xd + 3 * dStride)) * <f32>hsumI32(i3));
}
