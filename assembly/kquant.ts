// Q4_K and Q6_K weights against Q8_K activations (ggml's vec_dot_q4_K_q8_K / q6_K_q8_K):
// per super-block of 256 an exact integer sum of sub-block dots times their integer scales,
// then one float multiply by weight scale * activation scale. Activations are split: q (xq),
// one f32 d per super-block (xd), int32 sums of each 16 q (xb).
//
// Two ways to the same integer: the SIMD128 kernels widen quants and activations (int16 q as
// quantizeRowQ8_K stores them) for i32x4.dot_i16x8_s; the relaxed build's kernels (relaxed =
// true; activations narrowed to int8 by packQ8_K) feed the unsigned quants as stored (Q4_K
// nibbles 0..15, Q6_K q + 32 in 0..63, the 32 taken back through the group sums) to the int8
// dot and multiply the int16 results by the sub-block scales with one dot_i16x8_s. The sums
// are exact, so both give the same bits.
import { f16 } from "./half";
import { dot16, dot16u, dotI8I7, hsumI32 } from "./simd";

// Q4_K's packed 6-bit scale (which = 0) or min (which = 1) of sub-block j (ggml get_scale_min_k4)
// @ts-ignore: decorator
@inline function scaleMinK4(q: usize, j: i32, which: i32): i32 {
  if (j < 4) return which == 0 ? load<u8>(q + j) & 63 : load<u8>(q + j + 4) & 63;
  if (which == 0) return (load<u8>(q + j + 4) & 0xf) | ((load<u8>(q + j - 4) >> 6) << 4);
  return (load<u8>(q + j + 4) >> 4) | ((load<u8>(q + j) >> 6) << 4);
}

/** rewrites nBlocks int16 Q8_K super-blocks at q (512 bytes each) to int8, each in the first 256 of its bytes (relaxed kernels) */
export function packQ8_K(q: usize, nBlocks: i32): void {
  for (let b = 0; b < nBlocks; b++) {
    const p = q + (<usize>b << 9);
    // ascending: a write never reaches bytes still to be read
    for (let j: usize = 0; j < 256; j += 16) v128.store(p + j, i8x16.narrow_i16x8_s(v128.load(p + (j << 1)), v128.load(p + (j << 1), 16)));
  }
}

/** 16 unsigned quants (0..15) of a Q4_K or Q4-style register against 32 activations at x: int16 pairs (relaxed) or int32 (SIMD128) */
// @ts-ignore: decorator
@inline function dotU(relaxed: bool, u0: v128, u1: v128, x: usize): v128 {
  // relaxed: int8 activations, int16 lanes at most 4 * 15 * 127
  if (relaxed) return i16x8.add(dotI8I7(v128.load(x), u0), dotI8I7(v128.load(x, 16), u1));
  return i32x4.add(dot16u(u0, x), dot16u(u1, x + 32));
}

/** a sub-block's dot (from dotU or the Q6_K dot) times its integer scale s, as int32 lanes */
// @ts-ignore: decorator
@inline function scaled(relaxed: bool, dot: v128, s: i32): v128 {
  return relaxed ? i32x4.dot_i16x8_s(dot, i16x8.splat(<i16>s)) : i32x4.mul(dot, i32x4.splat(s));
}

/**
 * one Q4_K super-block (144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins,
 * 128 bytes of nibbles) against one Q8_K super-block of activations
 */
// @ts-ignore: decorator
@inline function superQ4_K(relaxed: bool, p: usize, qx: usize, dx: f32, bs: usize): f32 {
  const sc = p + 4;
  const mask = i8x16.splat(0x0f);
  let isum = i32x4.splat(0);
  for (let j = 0; j < 4; j++) {
    // 32 bytes: low nibbles are sub-block 2j, high nibbles sub-block 2j + 1
    const q = p + 16 + (<usize>j << 5);
    const v0 = v128.load(q);
    const v1 = v128.load(q, 16);
    // 64 activations: int16 or int8
    const x = qx + (<usize>j << (relaxed ? 6 : 7));
    const half: usize = relaxed ? 32 : 64;
    // 16-bit shifts and the mask: i8x16.shr_u would build its own mask per use
    const pa = dotU(relaxed, v128.and(v0, mask), v128.and(v1, mask), x);
    const pb = dotU(relaxed, v128.and(i16x8.shr_u(v0, 4), mask), v128.and(i16x8.shr_u(v1, 4), mask), x + half);
    isum = i32x4.add(isum, i32x4.add(scaled(relaxed, pa, scaleMinK4(sc, 2 * j, 0)), scaled(relaxed, pb, scaleMinK4(sc, 2 * j + 1, 0))));
  }
  // the min term: each sub-block's min times the sum of its activations (two group sums)
  let msum = 0;
  for (let j = 0; j < 8; j++) msum += scaleMinK4(sc, j, 1) * (load<i32>(bs + (<usize>j << 3)) + load<i32>(bs + (<usize>j << 3), 4));
  const d = f16(load<u16>(p)) * dx;
  const dmin = f16(load<u16>(p, 2)) * dx;
  return d * <f32>hsumI32(isum) - dmin * <f32>msum;
}

/** q + 32 (0..63) of 16 Q6_K weights: 4 bits of l from bit lowShift, 2 bits of h from bit highShift (16-bit shifts: the bits that cross a byte are masked off) */
// @ts-ignore: decorator
@inline function q6(l: v128, h: v128, lowShift: i32, highShift: i32): v128 {
  return v128.or(v128.and(i16x8.shr_u(l, lowShift), i8x16.splat(0x0f)), i16x8.shl(v128.and(i16x8.shr_u(h, highShift), i8x16.splat(3)), 4));
}

/** 16 Q6_K quants u (q + 32) against 16 activations at x */
// @ts-ignore: decorator
@inline function dotQ6(relaxed: bool, u: v128, x: usize): v128 {
  // relaxed: int16 lanes at most 2 * 63 * 127; SIMD128: the signed q
  return relaxed ? dotI8I7(v128.load(x), u) : dot16(i8x16.sub(u, i8x16.splat(32)), x);
}

/**
 * one Q6_K super-block (210 bytes: 128 bytes low nibbles, 64 bytes of 2-bit high parts,
 * 16 int8 scales, f16 d) against one Q8_K super-block of activations
 */
// @ts-ignore: decorator
@inline function superQ6_K(relaxed: bool, p: usize, qx: usize, dx: f32, bs: usize): f32 {
  const e: usize = relaxed ? 0 : 1; // log2 of an activation's bytes
  let isum = i32x4.splat(0);
  for (let n = 0; n < 2; n++) {
    // each half of 128 weights: ql 64 bytes, qh 32 bytes, 8 scales (one per 16 weights)
    const ql = p + (<usize>n << 6);
    const qh = p + 128 + (<usize>n << 5);
    const sc = p + 192 + (<usize>n << 3);
    const x = qx + ((<usize>n << 7) << e);
    for (let c = 0; c < 2; c++) {
      const o = <usize>c << 4;
      const xo = x + (o << e);
      const l0 = v128.load(ql + o);
      const l1 = v128.load(ql + o, 32);
      const h = v128.load(qh + o);
      // weights l, l+32, l+64, l+96 of the half
      isum = i32x4.add(isum, scaled(relaxed, dotQ6(relaxed, q6(l0, h, 0, 0), xo), <i32>load<i8>(sc + c)));
      isum = i32x4.add(isum, scaled(relaxed, dotQ6(relaxed, q6(l1, h, 0, 2), xo + (32 << e)), <i32>load<i8>(sc + c + 2)));
      isum = i32x4.add(isum, scaled(relaxed, dotQ6(relaxed, q6(l0, h, 4, 4), xo + (64 << e)), <i32>load<i8>(sc + c + 4)));
      isum = i32x4.add(isum, scaled(relaxed, dotQ6(relaxed, q6(l1, h, 4, 6), xo + (96 << e)), <i32>load<i8>(sc + c + 6)));
    }
  }
  let total = hsumI32(isum);
  if (relaxed) {
    // the + 32 back out: scale g covers weights 16 g .. 16 g + 15, whose activation sum is group sum g
    let offset = 0;
    for (let g = 0; g < 16; g++) offset += <i32>load<i8>(p + 192 + <usize>g) * load<i32>(bs + (<usize>g << 2));
    total -= offset << 5;
  }
  return (f16(load<u16>(p, 208)) * dx) * <f32>total;
}

// @ts-ignore: decorator
@inline function matK(q4: bool, relaxed: bool, w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  const nb = cols >> 8;
  const bb: usize = q4 ? 144 : 210;
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * rowBytes;
    for (let t = 0; t < nTok; t++) {
      const tb = <usize>t * <usize>nb;
      let sum: f32 = 0;
      for (let b = 0; b < nb; b++) {
        const i = tb + <usize>b;
        const p = wr + <usize>b * bb;
        sum += q4 ? superQ4_K(relaxed, p, xq + (i << 9), load<f32>(xd + (i << 2)), xb + (i << 6)) : superQ6_K(relaxed, p, xq + (i << 9), load<f32>(xd + (i << 2)), xb + (i << 6));
      }
      store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), sum);
    }
  }
}

export function matQ4_K(w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matK(true, false, w, rowBytes, xq, xd, xb, out, rows, cols, nTok, r0, r1);
}

export function matQ6_K(w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matK(false, false, w, rowBytes, xq, xd, xb, out, rows, cols, nTok, r0, r1);
}

/** relaxed build only, over activations packed by packQ8_K */
export function matQ4_KRelaxed(w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matK(true, true, w, rowBytes, xq, xd, xb, out, rows, cols, nTok, r0, r1);
}

export function matQ6_KRelaxed(w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matK(false, true, w, rowBytes, xq, xd, xb, out, rows, cols, nTok, r0, r1);
}
