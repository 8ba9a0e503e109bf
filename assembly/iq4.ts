// IQ4_XS weights against Q8_K activations (ggml's vec_dot_iq4_xs_q8_K): per super-block of 256
// an exact integer sum of the 8 sub-block dots times their 6-bit scales (stored + 32), then one
// float multiply by weight scale * activation scale, as the k-quants (kquant.ts). The 4-bit
// indices become int8 weights with one swizzle into kvalues_iq4nl per 16; activations are the
// int16 q quantizeRowQ8_K stores (xq), one f32 d per super-block (xd). IQ4_NL (blocks of 32
// against Q8_0) is Q4_0's kernel with that lookup (q8.ts). kquant.ts's matK runs these super-blocks
// on the k-quants' schedule (matIQ4_XS). The relaxed build reads the activations packed as IQ4_NL's
// are (a+ and a- per 32, packQ8_0) and takes the int8 dot against the looked-up weights, the scale
// in the pmaddwd that widens the pairs (subDotRelaxed), the eight scales decoded as one vector.
import { f16 } from "./half";
import { dot16, dotI8I7, hsumI32, lookup16 } from "./simd";
import { iq4Values } from "./q8";

/** the 6-bit scale - 32 of sub-block ib of the IQ4_XS block at p (f16 d, u16 scales_h, 4 bytes scales_l) */
// @ts-ignore: decorator
@inline function scaleIQ4_XS(p: usize, ib: i32): i32 {
  const sh = <i32>load<u16>(p, 2);
  const sl = <i32>load<u8>(p + 4 + <usize>(ib >> 1));
  return (((sl >> ((ib & 1) << 2)) & 0xf) | (((sh >> (ib << 1)) & 3) << 4)) - 32;
}

/**
 * the eight sub-block scales - 32 of the IQ4_XS block at p as int16 lanes, in a dozen vector
 * operations where scaleIQ4_XS takes about ten scalar ones per sub-block: lane ib's low four bits
 * from byte ib >> 1 of scales_l (its low or high nibble), its top two bits shifted down out of
 * scales_h by a multiply (bits 2ib..2ib+1 to 14..15) and a shift
 */
// @ts-ignore: decorator
@inline function scalesIQ4_XS(p: usize): v128 {
  const bytes = v128.load32_zero(p + 4);
  const spread = i8x16.swizzle(bytes, i8x16(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1));
  const low = v128.bitselect(i16x8.shr_u(spread, 4), v128.and(spread, i16x8.splat(0x0f)), i32x4.splat(<i32>0xffff0000));
  const high = i16x8.shr_u(i16x8.mul(i16x8.splat(<i16>load<u16>(p, 2)), i16x8(16384, 4096, 1024, 256, 64, 16, 4, 1)), 14);
  return i16x8.sub(v128.or(low, i16x8.shl(high, 4)), i16x8.splat(32));
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

/**
 * relaxed: sub-block ib's 32 weights (int8 lo: 0..15, hi: 16..31) against its activations packed
 * by packQ8_0 at x (a+ of 0..15, a+ of 16..31, a- of 0..15, a- of 16..31; Q8_K's 256 int16 are
 * eight such blocks), times the sub-block scale: w * a = w * a+ - w * a- on the int8 dot (each
 * int16 lane a sum of two products, at most 2 * 127 * 127), the scale multiplied in by the same
 * pmaddwd that widens the pairs to int32. The same integers as dot16's sums times the scale.
 */
// @ts-ignore: decorator
@inline function subDotRelaxed(lo: v128, hi: v128, x: usize, scale: v128): v128 {
  const dl = i16x8.sub(dotI8I7(lo, v128.load(x)), dotI8I7(lo, v128.load(x, 32)));
  const dh = i16x8.sub(dotI8I7(hi, v128.load(x, 16)), dotI8I7(hi, v128.load(x, 48)));
  return i32x4.add(i32x4.dot_i16x8_s(dl, scale), i32x4.dot_i16x8_s(dh, scale));
}

/** one IQ4_XS super-block (136 bytes) against one Q8_K super-block of activations at qx (int16, or packed: relaxed) with scale dx */
// @ts-ignore: decorator
@inline export function superIQ4_XS(relaxed: bool, p: usize, qx: usize, dx: f32, table: v128): f32 {
  let isum = i32x4.splat(0);
  if (relaxed) {
    // lane 0 of `scales` is sub-block ib's: splatted, then the lanes rotated down by one
    let scales = scalesIQ4_XS(p);
    for (let ib = 0; ib < 8; ib++) {
      const ls = i16x8.shuffle(scales, scales, 0, 0, 0, 0, 0, 0, 0, 0);
      scales = i16x8.shuffle(scales, scales, 1, 2, 3, 4, 5, 6, 7, 0);
      isum = i32x4.add(isum, subDotRelaxed(lowWeights(p, ib, table), highWeights(p, ib, table), qx + (<usize>ib << 6), ls));
    }
  } else {
    for (let ib = 0; ib < 8; ib++) {
      const x = qx + (<usize>ib << 6);
      const s = i32x4.add(dot16(lowWeights(p, ib, table), x), dot16(highWeights(p, ib, table), x + 32));
      isum = i32x4.add(isum, i32x4.mul(s, i32x4.splat(scaleIQ4_XS(p, ib))));
    }
  }
  return (f16(load<u16>(p)) * dx) * <f32>hsumI32(isum);
}

/**
 * One super-block against four tokens (super-block i of tokens t..t+3: qStride bytes and dStride
 * bytes apart): each sub-block unpacked once for the four; each lane's arithmetic is
 * superIQ4_XS's, so a token's bits do not depend on its batch.
 */
// @ts-ignore: decorator
@inline export function superIQ4_XS4(relaxed: bool, p: usize, qx: usize, qStride: usize, xd: usize, dStride: usize, table: v128): v128 {
  const z = i32x4.splat(0);
  let i0 = z, i1 = z, i2 = z, i3 = z;
  let scales = relaxed ? scalesIQ4_XS(p) : z;
  for (let ib = 0; ib < 8; ib++) {
    const lo = lowWeights(p, ib, table), hi = highWeights(p, ib, table);
    const x = qx + (<usize>ib << 6);
    if (relaxed) {
      // as superIQ4_XS
      const ls = i16x8.shuffle(scales, scales, 0, 0, 0, 0, 0, 0, 0, 0);
      scales = i16x8.shuffle(scales, scales, 1, 2, 3, 4, 5, 6, 7, 0);
      i0 = i32x4.add(i0, subDotRelaxed(lo, hi, x, ls));
      i1 = i32x4.add(i1, subDotRelaxed(lo, hi, x + qStride, ls));
      i2 = i32x4.add(i2, subDotRelaxed(lo, hi, x + 2 * qStride, ls));
      i3 = i32x4.add(i3, subDotRelaxed(lo, hi, x + 3 * qStride, ls));
      continue;
    }
    const ls = i32x4.splat(scaleIQ4_XS(p, ib));
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
