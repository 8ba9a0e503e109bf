// Q4_K, Q5_K and Q6_K weights against Q8_K activations (ggml's vec_dot_q4_K_q8_K / q5_K / q6_K):
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
import { dot16, dot16u, dotI8I7, hsumI32, lookup16, scaled, scaledBy } from "./simd";
import { superQ2_K, superQ3_K } from "./kquant-low";
import { superIQ4_XS, superIQ4_XS4 } from "./iq4";
import { iq4Values } from "./q8";

// Q4_K's packed 6-bit scale (which = 0) or min (which = 1) of sub-block j (ggml get_scale_min_k4)
// @ts-ignore: decorator
@inline export function scaleMinK4(q: usize, j: i32, which: i32): i32 {
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

/**
 * bit b of each byte of h moved to bit 4 (0x10 or 0), Q5_K's fifth bit: 16-bit shifts and the mask
 * (only bit 4 of each byte is kept, so nothing that crossed a byte survives)
 */
// @ts-ignore: decorator
@inline function fifthBit(h: v128, b: i32): v128 {
  return v128.and(b <= 4 ? i16x8.shl(h, 4 - b) : i16x8.shr_u(h, b - 4), i8x16.splat(0x10));
}

/**
 * 16 unsigned weights of a Q4_K block (0..15: the low or high nibbles of v) or a Q5_K block (0..31:
 * with the fifth bits of h at bit b). 16-bit shifts and the mask: i8x16.shr_u would build its own
 * mask per use. Q5_K's int16 lanes of the dots stay within 4 * 31 * 127.
 */
// @ts-ignore: decorator
@inline export function weights(q5: bool, v: v128, h: v128, high: bool, b: i32, mask: v128): v128 {
  const nibbles = v128.and(high ? i16x8.shr_u(v, 4) : v, mask);
  return q5 ? v128.or(nibbles, fifthBit(h, b)) : nibbles;
}

/** where a Q4_K / Q5_K block's nibbles start: after d, dmin, the 12 scale bytes (and Q5_K's 32 bytes of fifth bits) */
// @ts-ignore: decorator
@inline export function nibblesAt(q5: bool): usize {
  return q5 ? 48 : 16;
}

/**
 * Q4_K's eight 6-bit scales and eight mins (get_scale_min_k4 for j = 0..7) from the 12 bytes at
 * sc, all at once on three words: bytes 0..7 of the vector the scales, 8..15 the mins (a
 * scalar's own extraction costs ~6 operations, and the min term wants all eight)
 */
// @ts-ignore: decorator
@inline export function scalesMinsK4(sc: usize): v128 {
  const w0 = load<u32>(sc), w1 = load<u32>(sc, 4), w2 = load<u32>(sc, 8);
  const s03 = w0 & 0x3f3f3f3f, m03 = w1 & 0x3f3f3f3f;
  const s47 = (w2 & 0x0f0f0f0f) | (((w0 >> 6) & 0x03030303) << 4);
  const m47 = ((w2 >> 4) & 0x0f0f0f0f) | (((w1 >> 6) & 0x03030303) << 4);
  return i64x2.replace_lane(i64x2.splat(<i64>s03 | (<i64>s47 << 32)), 1, <i64>m03 | (<i64>m47 << 32));
}

/**
 * one Q4_K super-block (144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins,
 * 128 bytes of nibbles) against one Q8_K super-block of activations; q5: a Q5_K block (176 bytes:
 * the same with 32 bytes of fifth bits before the nibbles, bit 2j / 2j + 1 of byte l for weight l
 * of sub-block 2j / 2j + 1: weights 0..31). The min term's eight products in the lanes of two
 * vectors (the mins unpacked at once): the same exact integer as one sub-block at a time
 */
// @ts-ignore: decorator
@inline function superQ4_K(relaxed: bool, q5: bool, p: usize, qx: usize, dx: f32, bs: usize): f32 {
  const sc = p + 4;
  const mask = i8x16.splat(0x0f);
  const h0 = q5 ? v128.load(p, 16) : mask, h1 = q5 ? v128.load(p, 32) : mask;
  const scalesMins = scalesMinsK4(sc);
  // the eight scales as int16 lanes; sub-block k's broadcast is bytes 2k, 2k + 1 of them in every lane
  const scales = i16x8.extend_low_i8x16_u(scalesMins);
  let pick = i16x8.splat(0x0100);
  let isum = i32x4.splat(0);
  // Q5_K: the fifth bits of sub-blocks 2j and 2j + 1 are bits 2j and 2j + 1 of h0 / h1's bytes,
  // shifted down to bits 0 and 1 for each j (constant shifts in the loop)
  let f0 = h0, f1 = h1;
  for (let j = 0; j < 4; j++) {
    // 32 bytes: low nibbles are sub-block 2j, high nibbles sub-block 2j + 1
    const q = p + nibblesAt(q5) + (<usize>j << 5);
    const v0 = v128.load(q);
    const v1 = v128.load(q, 16);
    // 64 activations: int16 or int8
    const x = qx + (<usize>j << (relaxed ? 6 : 7));
    const half: usize = relaxed ? 32 : 64;
    const la = weights(q5, v0, f0, false, 0, mask), lb = weights(q5, v1, f1, false, 0, mask);
    const ha = weights(q5, v0, f0, true, 1, mask), hb = weights(q5, v1, f1, true, 1, mask);
    const pa = dotU(relaxed, la, lb, x);
    const pb = dotU(relaxed, ha, hb, x + half);
    const sa = lookup16(scales, pick), sb = lookup16(scales, i16x8.add(pick, i16x8.splat(0x0202)));
    pick = i16x8.add(pick, i16x8.splat(0x0404));
    isum = i32x4.add(isum, i32x4.add(scaledBy(relaxed, pa, sa), scaledBy(relaxed, pb, sb)));
    if (q5) {
      f0 = i16x8.shr_u(f0, 2);
      f1 = i16x8.shr_u(f1, 2);
    }
  }
  // the min term: each sub-block's min times the sum of its 32 activations (two group sums of 16)
  const mins = i16x8.extend_high_i8x16_u(scalesMins);
  const b0 = v128.load(bs), b1 = v128.load(bs, 16), b2 = v128.load(bs, 32), b3 = v128.load(bs, 48);
  const g03 = i32x4.add(i32x4.shuffle(b0, b1, 0, 2, 4, 6), i32x4.shuffle(b0, b1, 1, 3, 5, 7));
  const g47 = i32x4.add(i32x4.shuffle(b2, b3, 0, 2, 4, 6), i32x4.shuffle(b2, b3, 1, 3, 5, 7));
  const msum = i32x4.add(i32x4.mul(g03, i32x4.extend_low_i16x8_u(mins)), i32x4.mul(g47, i32x4.extend_high_i16x8_u(mins)));
  const d = f16(load<u16>(p)) * dx;
  const dmin = f16(load<u16>(p, 2)) * dx;
  // both horizontal sums at once: lane 0 isum's, lane 2 msum's (exact integers)
  const halves = i32x4.add(i32x4.shuffle(isum, msum, 0, 1, 4, 5), i32x4.shuffle(isum, msum, 2, 3, 6, 7));
  const sums = i32x4.add(halves, i32x4.shuffle(halves, halves, 1, 0, 3, 2));
  return d * <f32>i32x4.extract_lane(sums, 0) - dmin * <f32>i32x4.extract_lane(sums, 2);
}

/** q + 32 (0..63) of 16 Q6_K weights: 4 bits of l from bit lowShift, 2 bits of h from bit highShift (16-bit shifts: the bits that cross a byte are masked off) */
// @ts-ignore: decorator
@inline export function q6(l: v128, h: v128, lowShift: i32, highShift: i32): v128 {
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
  const low = i8x16.splat(0x0f), high = i8x16.splat(0x30);
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
      // weights l, l+32, l+64, l+96 of the half: q6 with each shift written out (the two high
      // bits moved to bits 4 and 5 by one shift and the mask)
      const u0 = v128.or(v128.and(l0, low), v128.and(i16x8.shl(h, 4), high));
      const u1 = v128.or(v128.and(l1, low), v128.and(i16x8.shl(h, 2), high));
      const u2 = v128.or(v128.and(i16x8.shr_u(l0, 4), low), v128.and(h, high));
      const u3 = v128.or(v128.and(i16x8.shr_u(l1, 4), low), v128.and(i16x8.shr_u(h, 2), high));
      isum = i32x4.add(isum, scaled(relaxed, dotQ6(relaxed, u0, xo), <i32>load<i8>(sc + c)));
      isum = i32x4.add(isum, scaled(relaxed, dotQ6(relaxed, u1, xo + (32 << e)), <i32>load<i8>(sc + c + 2)));
      isum = i32x4.add(isum, scaled(relaxed, dotQ6(relaxed, u2, xo + (64 << e)), <i32>load<i8>(sc + c + 4)));
      isum = i32x4.add(isum, scaled(relaxed, dotQ6(relaxed, u3, xo + (96 << e)), <i32>load<i8>(sc + c + 6)));
    }
  }
  if (relaxed) {
    // the + 32 back out: scale g covers weights 16 g .. 16 g + 15, whose activation sum is group
    // sum g; the sixteen products in the lanes of four vectors, 32 times them taken off isum's
    // lanes before the one horizontal sum (the same exact integer)
    const sv = v128.load(p, 192);
    const nl = i16x8.extend_low_i8x16_s(sv), nh = i16x8.extend_high_i8x16_s(sv);
    let offset = i32x4.mul(v128.load(bs), i32x4.extend_low_i16x8_s(nl));
    offset = i32x4.add(offset, i32x4.mul(v128.load(bs, 16), i32x4.extend_high_i16x8_s(nl)));
    offset = i32x4.add(offset, i32x4.mul(v128.load(bs, 32), i32x4.extend_low_i16x8_s(nh)));
    offset = i32x4.add(offset, i32x4.mul(v128.load(bs, 48), i32x4.extend_high_i16x8_s(nh)));
    isum = i32x4.sub(isum, i32x4.shl(offset, 5));
  }
  return (f16(load<u16>(p, 208)) * dx) * <f32>hsumI32(isum);
}

/**
 * Q4_K (q5: Q5_K): one super-block at p against four tokens' activations (super-block i of tokens t..t+3:
 * qx, dx and group sums bs tokenStride bytes / 4 / 64 apart), each token's value added to its
 * sum: the nibbles are unpacked and the scales and mins decoded once for the four, and each
 * token's arithmetic is superQ4_K's, so the same bits.
 */
// @ts-ignore: decorator
@inline function superQ4_K4(relaxed: bool, q5: bool, p: usize, qx: usize, qStride: usize, xd: usize, dStride: usize, bs: usize, bStride: usize): v128 {
  const sc = p + 4;
  const mask = i8x16.splat(0x0f);
  const z = i32x4.splat(0);
  let i0 = z, i1 = z, i2 = z, i3 = z;
  const half: usize = relaxed ? 32 : 64;
  const h0 = q5 ? v128.load(p, 16) : mask, h1 = q5 ? v128.load(p, 32) : mask;
  for (let j = 0; j < 4; j++) {
    const q = p + nibblesAt(q5) + (<usize>j << 5);
    const v0 = v128.load(q);
    const v1 = v128.load(q, 16);
    const la = weights(q5, v0, h0, false, 2 * j, mask), lb = weights(q5, v1, h1, false, 2 * j, mask);
    const ha = weights(q5, v0, h0, true, 2 * j + 1, mask), hb = weights(q5, v1, h1, true, 2 * j + 1, mask);
    const sa = scaleMinK4(sc, 2 * j, 0), sb = scaleMinK4(sc, 2 * j + 1, 0);
    const x = qx + (<usize>j << (relaxed ? 6 : 7));
    i0 = i32x4.add(i0, i32x4.add(scaled(relaxed, dotU(relaxed, la, lb, x), sa), scaled(relaxed, dotU(relaxed, ha, hb, x + half), sb)));
    i1 = i32x4.add(i1, i32x4.add(scaled(relaxed, dotU(relaxed, la, lb, x + qStride), sa), scaled(relaxed, dotU(relaxed, ha, hb, x + qStride + half), sb)));
    i2 = i32x4.add(i2, i32x4.add(scaled(relaxed, dotU(relaxed, la, lb, x + 2 * qStride), sa), scaled(relaxed, dotU(relaxed, ha, hb, x + 2 * qStride + half), sb)));
    i3 = i32x4.add(i3, i32x4.add(scaled(relaxed, dotU(relaxed, la, lb, x + 3 * qStride), sa), scaled(relaxed, dotU(relaxed, ha, hb, x + 3 * qStride + half), sb)));
  }
  let m0 = 0, m1 = 0, m2 = 0, m3 = 0;
  for (let j = 0; j < 8; j++) {
    const m = scaleMinK4(sc, j, 1);
    const g = bs + (<usize>j << 3);
    m0 += m * (load<i32>(g) + load<i32>(g, 4));
    m1 += m * (load<i32>(g + bStride) + load<i32>(g + bStride, 4));
    m2 += m * (load<i32>(g + 2 * bStride) + load<i32>(g + 2 * bStride, 4));
    m3 += m * (load<i32>(g + 3 * bStride) + load<i32>(g + 3 * bStride, 4));
  }
  const wd = f16(load<u16>(p)), wm = f16(load<u16>(p, 2));
  let v = f32x4.splat(valueQ4_K(wd, wm, load<f32>(xd), i0, m0));
  v = f32x4.replace_lane(v, 1, valueQ4_K(wd, wm, load<f32>(xd + dStride), i1, m1));
  v = f32x4.replace_lane(v, 2, valueQ4_K(wd, wm, load<f32>(xd + 2 * dStride), i2, m2));
  return f32x4.replace_lane(v, 3, valueQ4_K(wd, wm, load<f32>(xd + 3 * dStride), i3, m3));
}

/** a token's super-block value d * isum - dmin * msum, as superQ4_K computes it */
// @ts-ignore: decorator
@inline function valueQ4_K(wd: f32, wm: f32, dx: f32, isum: v128, msum: i32): f32 {
  const d = wd * dx;
  const dmin = wm * dx;
  return d * <f32>hsumI32(isum) - dmin * <f32>msum;
}

/** Q6_K: one super-block against four tokens, as superQ4_K4 (the same bits as superQ6_K per token) */
// @ts-ignore: decorator
@inline function superQ6_K4(relaxed: bool, p: usize, qx: usize, qStride: usize, xd: usize, dStride: usize, bs: usize, bStride: usize): v128 {
  const e: usize = relaxed ? 0 : 1;
  const z = i32x4.splat(0);
  let i0 = z, i1 = z, i2 = z, i3 = z;
  for (let n = 0; n < 2; n++) {
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
      // one unpacked vector at a time against the four tokens (all four held at once spilled)
      for (let k = 0; k < 4; k++) {
        const u = q6((k & 1) != 0 ? l1 : l0, h, (k >> 1) << 2, k << 1);
        const sk = <i32>load<i8>(sc + c + (<usize>k << 1));
        const xk = xo + ((<usize>k << 5) << e);
        i0 = i32x4.add(i0, scaled(relaxed, dotQ6(relaxed, u, xk), sk));
        i1 = i32x4.add(i1, scaled(relaxed, dotQ6(relaxed, u, xk + qStride), sk));
        i2 = i32x4.add(i2, scaled(relaxed, dotQ6(relaxed, u, xk + 2 * qStride), sk));
        i3 = i32x4.add(i3, scaled(relaxed, dotQ6(relaxed, u, xk + 3 * qStride), sk));
      }
    }
  }
  const wd = f16(load<u16>(p, 208));
  let v = f32x4.splat(valueQ6_K(relaxed, p, wd, load<f32>(xd), i0, bs));
  v = f32x4.replace_lane(v, 1, valueQ6_K(relaxed, p, wd, load<f32>(xd + dStride), i1, bs + bStride));
  v = f32x4.replace_lane(v, 2, valueQ6_K(relaxed, p, wd, load<f32>(xd + 2 * dStride), i2, bs + 2 * bStride));
  return f32x4.replace_lane(v, 3, valueQ6_K(relaxed, p, wd, load<f32>(xd + 3 * dStride), i3, bs + 3 * bStride));
}

/** a token's super-block value from its integer lanes, as superQ6_K computes it */
// @ts-ignore: decorator
@inline function valueQ6_K(relaxed: bool, p: usize, wd: f32, dx: f32, isum: v128, bs: usize): f32 {
  let total = hsumI32(isum);
  if (relaxed) {
    let offset = 0;
    for (let g = 0; g < 16; g++) offset += <i32>load<i8>(p + 192 + <usize>g) * load<i32>(bs + (<usize>g << 2));
    total -= offset << 5;
  }
  return (wd * dx) * <f32>total;
}

/** one super-block of a kind-`kind` row (matK's kinds) against one token's activations */
// @ts-ignore: decorator
@inline function superBlock(kind: i32, relaxed: bool, p: usize, qx: usize, dx: f32, bs: usize): f32 {
  if (kind == 5) return superIQ4_XS(relaxed, p, qx, dx, iq4Values());
  return kind < 2 ? superQ4_K(relaxed, kind == 1, p, qx, dx, bs) : kind == 2 ? superQ6_K(relaxed, p, qx, dx, bs) : kind == 3 ? superQ2_K(relaxed, p, qx, dx, bs) : superQ3_K(relaxed, p, qx, dx, bs);
}

/**
 * Rows [r0, r1) for tokens t0.. (the tokens before went eight at a time through
 * kquant-slots.ts). Batches go four tokens at a time through each row (superQ*_K4:
 * a super-block's unpacking and scales shared by the four; the four running sums in one vector's
 * lanes, each lane's f32 adds those of the one-token loop); the last 1-3 tokens and decode one at
 * a time.
 */
// @ts-ignore: decorator
@inline function matK(kind: i32, relaxed: bool, w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, t0: i32 = 0): void {
  const nb = cols >> 8;
  // kind: 0 Q4_K, 1 Q5_K, 2 Q6_K, 3 Q2_K, 4 Q3_K (those two without four-token tiles), 5 IQ4_XS
  // (Q8_K activations too, no block sums: xb unused)
  const bb: usize = kind == 0 ? 144 : kind == 1 ? 176 : kind == 2 ? 210 : kind == 3 ? 84 : kind == 4 ? 110 : 136;
  const qStride = (<usize>nb) << 9, dStride = (<usize>nb) << 2, bStride = (<usize>nb) << 6;
  if (nTok == 1 && t0 == 0) {
    // decode: rows i, q + i, 2q + i and 3q + i of the range, super-block by super-block: four
    // sequential streams for the hardware prefetcher (each row's sum in the order below).
    // TinyLlama Q4_K decode on an Intel Xeon: 12.9 tok/s a row at a time, 18.2-19.2 with two
    // rows half a range apart, 21.1-21.5 with four (docs/kernels.md)
    const q = (r1 - r0) >> 2;
    const stride = <usize>q * rowBytes;
    for (let i = 0; i < q; i++) {
      const ra = r0 + i;
      const wa = w + <usize>ra * rowBytes;
      let s0: f32 = 0, s1: f32 = 0, s2: f32 = 0, s3: f32 = 0;
      for (let b = 0; b < nb; b++) {
        const qx = xq + (<usize>b << 9), dx = load<f32>(xd + (<usize>b << 2)), bs = xb + (<usize>b << 6);
        const pa = wa + <usize>b * bb;
        s0 += superBlock(kind, relaxed, pa, qx, dx, bs);
        s1 += superBlock(kind, relaxed, pa + stride, qx, dx, bs);
        s2 += superBlock(kind, relaxed, pa + 2 * stride, qx, dx, bs);
        s3 += superBlock(kind, relaxed, pa + 3 * stride, qx, dx, bs);
      }
      const o = out + (<usize>ra << 2), os = (<usize>q) << 2;
      store<f32>(o, s0);
      store<f32>(o + os, s1);
      store<f32>(o + 2 * os, s2);
      store<f32>(o + 3 * os, s3);
    }
    r0 += 4 * q;
  }
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * rowBytes;
    let t = t0;
    for (; (kind <= 2 || kind == 5) && t + 4 <= nTok; t += 4) {
      let acc = f32x4.splat(0);
      const tb = <usize>t * <usize>nb;
      for (let b = 0; b < nb; b++) {
        const i = tb + <usize>b;
        const p = wr + <usize>b * bb;
        acc = f32x4.add(acc, kind < 2 ? superQ4_K4(relaxed, kind == 1, p, xq + (i << 9), qStride, xd + (i << 2), dStride, xb + (i << 6), bStride) : kind == 2 ? superQ6_K4(relaxed, p, xq + (i << 9), qStride, xd + (i << 2), dStride, xb + (i << 6), bStride) : superIQ4_XS4(relaxed, p, xq + (i << 9), qStride, xd + (i << 2), dStride, iq4Values()));
      }
      const o = out + ((<usize>t * <usize>rows + <usize>r) << 2);
      const os = (<usize>rows) << 2;
      store<f32>(o, f32x4.extract_lane(acc, 0));
      store<f32>(o + os, f32x4.extract_lane(acc, 1));
      store<f32>(o + 2 * os, f32x4.extract_lane(acc, 2));
      store<f32>(o + 3 * os, f32x4.extract_lane(acc, 3));
    }
    for (; t < nTok; t++) {
      const tb = <usize>t * <usize>nb;
      let sum: f32 = 0;
      for (let b = 0; b < nb; b++) {
        const i = tb + <usize>b;
        const p = wr + <usize>b * bb;
        const qx = xq + (i << 9), dx = load<f32>(xd + (i << 2)), bs = xb + (i << 6);
        sum += superBlock(kind, relaxed, p, qx, dx, bs);
      }
      store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), sum);
    }
  }
}

export function matQ4_K(w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matK(0, false, w, rowBytes, xq, xd, xb, out, rows, cols, nTok, r0, r1);
}

export function matQ5_K(w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matK(1, false, w, rowBytes, xq, xd, xb, out, rows, cols, nTok, r0, r1);
}

export function matQ6_K(w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matK(2, false, w, rowBytes, xq, xd, xb, out, rows, cols, nTok, r0, r1);
}

/** IQ4_XS (iq4.ts's super-blocks) on matK's schedule; xd: the Q8_K activations' scales */
export function matIQ4_XS(w: usize, rowBytes: usize, xq: usize, xd: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matK(5, false, w, rowBytes, xq, xd, 0, out, rows, cols, nTok, r0, r1);
}

/** the same over the Q8_K activations packed by packQ8_0 (a+ and a- per 32: relaxed build) */
export function matIQ4_XSRelaxed(w: usize, rowBytes: usize, xq: usize, xd: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matK(5, true, w, rowBytes, xq, xd, 0, out, rows, cols, nTok, r0, r1);
}

export function matQ2_K(w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matK(3, false, w, rowBytes, xq, xd, xb, out, rows, cols, nTok, r0, r1);
}

export function matQ3_K(w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matK(4, false, w, rowBytes, xq, xd, xb, out, rows, cols, nTok, r0, r1);
}

/** relaxed build only, over activations packed by packQ8_K, tokens t0.. (those before: kquant-slots.ts) */
export function matQ4_KRelaxed(w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, t0: i32): void {
  matK(0, true, w, rowBytes, xq, xd, xb, out, rows, cols, nTok, r0, r1, t0);
}

export function matQ5_KRelaxed(w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, t0: i32): void {
  matK(1, true, w, rowBytes, xq, xd, xb, out, rows, cols, nTok, r0, r1, t0);
}

export function matQ6_KRelaxed(w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, t0: i32): void {
  matK(2, true, w, rowBytes, xq, xd, xb, out, rows, cols, nTok, r0, r1, t0);
}

export function matQ2_KRelaxed(w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matK(3, true, w, rowBytes, xq, xd, xb, out, rows, cols, nTok, r0, r1);
}

export function matQ3_KRelaxed(w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matK(4, true, w, rowBytes, xq, xd, xb, out, rows, cols, nTok, r0, r1);
}
