// TQ1_0 / TQ2_0 weights against Q8_K activations in the lanes of llama.cpp's AVX2
// ggml_vec_dot_tq1_0_q8_K / _tq2_0_q8_K (src/kernels/reference/dot-iq-grid.ts is the spec):
// per super-block 8 int32 lanes, lane L the exact sum of q * x over the weights j with
// (j % 32) / 4 == L (q the unsigned value 0..2) minus the group sums bsums[2L] + bsums[2L + 1];
// each lane accumulates fma(f32(lane), d_x * d_w, acc) (the FMA in f64: exact product, one
// rounding of the sum, bar the rare double rounding at an f32 midpoint), and the 8 lanes are
// added as hsum_float_8. One token at a time (these types are rare; no batch tiles).
import { f16 } from "./half";

/** 16 values (int16: weights j0..j0+7 in lo, j0+8..j0+15 in hi) against the int16 activations at x: the sums of each 4 consecutive, as 4 lanes */
// @ts-ignore: decorator
@inline function groups4(lo: v128, hi: v128, x: usize): v128 {
  const a = i32x4.dot_i16x8_s(lo, v128.load(x));
  const b = i32x4.dot_i16x8_s(hi, v128.load(x, 16));
  return i32x4.add(i32x4.shuffle(a, b, 0, 2, 4, 6), i32x4.shuffle(a, b, 1, 3, 5, 7));
}

/** trit n of 8 bytes (as u16 lanes) scaled by m (3^n, per lane): ((u8)(byte * m) * 3) >> 8 */
// @ts-ignore: decorator
@inline function trits(bytes16: v128, m: v128): v128 {
  return i16x8.shr_u(i16x8.mul(v128.and(i16x8.mul(bytes16, m), i16x8.splat(0xff)), i16x8.splat(3)), 8);
}

/** 16 trit-n values of the 16 bytes v against x: 4 group lanes */
// @ts-ignore: decorator
@inline function tritGroups(v: v128, pow3: i16, x: usize): v128 {
  const m = i16x8.splat(pow3);
  return groups4(trits(i16x8.extend_low_i8x16_u(v), m), trits(i16x8.extend_high_i8x16_u(v), m), x);
}

/**
 * lanes 0-3 (hi = false) or 4-7 (hi = true) of one TQ1_0 super-block (54 bytes: qs[48], qh[4],
 * f16 d) against the Q8_K q at x (int16). Weights 32n + m come from qs[m] (trit n): m < 16 in
 * lanes 0-3; weights 160 + 16n + m from qs[32 + m]: n even in lanes 0-3; weights 240 + k from
 * qh[k % 4] (trit k / 4): lanes 4-7.
 */
// @ts-ignore: decorator
@inline function lanesTQ1_0(p: usize, x: usize, hi: bool): v128 {
  let acc = i32x4.splat(0);
  const b = v128.load(p + (hi ? 16 : 0));
  for (let n = 0, m: i16 = 1; n < 5; n++, m *= 3) acc = i32x4.add(acc, tritGroups(b, m, x + (<usize>n << 6) + (hi ? 32 : 0)));
  const c = v128.load(p, 32);
  for (let n = hi ? 1 : 0, m: i16 = hi ? 3 : 1; n < 5; n += 2, m *= 9) acc = i32x4.add(acc, tritGroups(c, m, x + ((160 + (<usize>n << 4)) << 1)));
  if (!hi) return acc;
  const q = i16x8.extend_low_i8x16_u(i8x16.swizzle(v128.load32_zero(p + 48), i8x16(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3)));
  return i32x4.add(acc, groups4(trits(q, i16x8(1, 1, 1, 1, 3, 3, 3, 3)), trits(q, i16x8(9, 9, 9, 9, 27, 27, 27, 27)), x + (240 << 1)));
}

/** the same for TQ2_0 (66 bytes: qs[64] of 2-bit values, f16 d): weights 128jj + 32l + m from bits 2l of byte 32jj + m; m < 16 in lanes 0-3 */
// @ts-ignore: decorator
@inline function lanesTQ2_0(p: usize, x: usize, hi: bool): v128 {
  let acc = i32x4.splat(0);
  const three = i8x16.splat(3);
  const off: usize = hi ? 16 : 0;
  for (let jj = 0; jj < 2; jj++) {
    const b = v128.load(p + (<usize>jj << 5) + off);
    for (let l = 0; l < 4; l++) {
      const v = v128.and(i8x16.shr_u(b, l << 1), three);
      acc = i32x4.add(acc, groups4(i16x8.extend_low_i8x16_u(v), i16x8.extend_high_i8x16_u(v), x + ((<usize>((jj << 7) + (l << 5)) + off) << 1)));
    }
  }
  return acc;
}

// @ts-ignore: decorator
@inline function fmaAcc(acc: f32, sumi: i32, d: f32): f32 {
  return <f32>(<f64><f32>sumi * <f64>d + <f64>acc);
}

/** the pairwise sums [b0 + b1, b2 + b3, b4 + b5, b6 + b7] of the int32 group sums at bs */
// @ts-ignore: decorator
@inline function pairSums(bs: usize): v128 {
  const a = v128.load(bs), b = v128.load(bs, 16);
  return i32x4.add(i32x4.shuffle(a, b, 0, 2, 4, 6), i32x4.shuffle(a, b, 1, 3, 5, 7));
}

/** kind 0: TQ1_0, 1: TQ2_0; rows [r0, r1) for every token */
// @ts-ignore: decorator
@inline function matTQ(kind: i32, w: usize, rowBytes: usize, xq: usize, xs: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  const nb = cols >> 8;
  const bytes: usize = kind == 0 ? 54 : 66;
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * rowBytes;
    for (let t = 0; t < nTok; t++) {
      let l0: f32 = 0, l1: f32 = 0, l2: f32 = 0, l3: f32 = 0, l4: f32 = 0, l5: f32 = 0, l6: f32 = 0, l7: f32 = 0;
      for (let b = 0; b < nb; b++) {
        const p = wr + <usize>b * bytes;
        const i = <usize>t * <usize>nb + <usize>b;
        const x = xq + (i << 9);
        let lo = kind == 0 ? lanesTQ1_0(p, x, false) : lanesTQ2_0(p, x, false);
        let hi = kind == 0 ? lanesTQ1_0(p, x, true) : lanesTQ2_0(p, x, true);
        const bs = xb + (i << 6);
        lo = i32x4.sub(lo, pairSums(bs));
        hi = i32x4.sub(hi, pairSums(bs + 32));
        const d: f32 = load<f32>(xs + (i << 2)) * f16(load<u16>(p + bytes - 2));
        l0 = fmaAcc(l0, i32x4.extract_lane(lo, 0), d);
        l1 = fmaAcc(l1, i32x4.extract_lane(lo, 1), d);
        l2 = fmaAcc(l2, i32x4.extract_lane(lo, 2), d);
        l3 = fmaAcc(l3, i32x4.extract_lane(lo, 3), d);
        l4 = fmaAcc(l4, i32x4.extract_lane(hi, 0), d);
        l5 = fmaAcc(l5, i32x4.extract_lane(hi, 1), d);
        l6 = fmaAcc(l6, i32x4.extract_lane(hi, 2), d);
        l7 = fmaAcc(l7, i32x4.extract_lane(hi, 3), d);
      }
      store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)));
    }
  }
}

export function matTQ1_0(w: usize, rowBytes: usize, xq: usize, xs: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matTQ(0, w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1);
}

export function matTQ2_0(w: usize, rowBytes: usize, xq: usize, xs: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matTQ(1, w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1);
}
