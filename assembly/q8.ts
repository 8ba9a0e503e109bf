// Q8_0, Q4_0 and Q5_0 weights against Q8_0 activations (ggml's vec_dot_q8_0_q8_0 / q4_0_q8_0 / q5_0_q8_0):
// per block of 32 an exact integer dot (widen int8 to int16, i32x4.dot_i16x8_s; the relaxed
// build's int8 dot, relaxed.ts), scaled by weight scale * activation scale. A row for one
// token takes four blocks at a time: their four totals in one vector's lanes, one conversion,
// one multiply by the four scales; for batches, 4x4 tiles of rows x tokens decode each weight
// block once per four tokens, the four tokens' totals in the lanes.
import { f16, f16At, f16TableAddress, f16x4, f16x4At, f16x4BitsAt, f16x4Finite } from "./half";
import { dotAddU8, dotI8I7, hsumF32, lanesSum, lookup16, scaleAdd4 } from "./simd";
import { groupBlockBytes, packGroups } from "./groups";
import { blockIQ4_NL, blockQ4_0, blockQ8_0, dotQ4_0Packed, groupQ4_0, lowNibbles, nibblesQ4_0, onesI16 } from "./relaxed";

// @ts-ignore: decorator
@inline function dotQ8_0(p: usize, x0: v128, x1: v128, x2: v128, x3: v128): v128 {
  // p points at a 34-byte block: f16 scale, then 32 int8
  let s = i32x4.dot_i16x8_s(v128.load8x8_s(p, 2), x0);
  s = i32x4.add(s, i32x4.dot_i16x8_s(v128.load8x8_s(p, 10), x1));
  s = i32x4.add(s, i32x4.dot_i16x8_s(v128.load8x8_s(p, 18), x2));
  return i32x4.add(s, i32x4.dot_i16x8_s(v128.load8x8_s(p, 26), x3));
}

// @ts-ignore: decorator
@inline function dotQ4_0(p: usize, x0: v128, x1: v128, x2: v128, x3: v128): v128 {
  // p points at an 18-byte block: f16 scale, 16 bytes; byte j holds weight j (low nibble)
  // and weight j + 16 (high nibble), both stored + 8
  const v = v128.load(p, 2);
  const lo = i8x16.sub(v128.and(v, i8x16.splat(0x0f)), i8x16.splat(8));
  const hi = i8x16.sub(i8x16.shr_u(v, 4), i8x16.splat(8));
  let s = i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(lo), x0);
  s = i32x4.add(s, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(lo), x1));
  s = i32x4.add(s, i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(hi), x2));
  return i32x4.add(s, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(hi), x3));
}

// Q5_0 blocks (22 bytes): f16 scale, 32 high bits (bit j belongs to weight j), then 16 bytes of
// low nibbles laid out as Q4_0's; weights are stored + 16.
const BIT_OF_BYTE = memory.data<u8>([1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128]);

/** which byte of a 32-bit word byte j of fifthBits reads (bits 0..15, then 16..31), and 0x10 */
const SPREAD_LOW = memory.data<u8>([0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]);
const SPREAD_HIGH = memory.data<u8>([2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3]);
const FIFTH_BIT = memory.data<u8>([16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16]);

/**
 * 0x10 in byte j (0..15) where bit j (high: bit 16 + j) of the little-endian 32 bits at qh is set,
 * else 0: byte j >> 3 of the word (of its upper half for high) put in byte j by one byte lookup,
 * then each byte keeps its own bit (BIT_OF_BYTE). The lookup tables and masks are loads from
 * memory, not constants: V8 11 builds a 128-bit constant with four instructions at each use,
 * where a load from L1 is one (an earlier splat of 16 bits and a swizzle were five).
 */
// @ts-ignore: decorator
@inline export function fifthBits(qh: usize, high: bool): v128 {
  const spread = lookup16(v128.load32_zero(qh), v128.load(high ? SPREAD_HIGH : SPREAD_LOW));
  const select = v128.load(BIT_OF_BYTE);
  return v128.and(i8x16.eq(v128.and(spread, select), select), v128.load(FIFTH_BIT));
}

/** weights 0..15 (high = false) or 16..31 (high = true) of the Q5_0 block at p, as int8 */
// @ts-ignore: decorator
@inline function q5Weights(p: usize, high: bool): v128 {
  const v = v128.load(p, 6);
  const nibbles = high ? i8x16.shr_u(v, 4) : v128.and(v, i8x16.splat(0x0f));
  return i8x16.sub(v128.or(nibbles, fifthBits(p + 2, high)), i8x16.splat(16));
}

/** weights 0..15 (high: 16..31) of the Q5_0 block at p as stored, nibble and fifth bit: 0..31 (the relaxed int8 dot's 7-bit operand) */
// @ts-ignore: decorator
@inline function q5Unsigned(p: usize, low: v128, high: bool): v128 {
  const v = v128.load(p, 6);
  // a 16-bit shift and the mask, as nibblesQ4_0
  return v128.or(v128.and(high ? i16x8.shr_u(v, 4) : v, low), fifthBits(p + 2, high));
}

/** one Q5_0 block at p against a packed activation block at x (packQ4_0): lanes adding up to sum n a, n = w + 16 (int16 lanes within 4 * 31 * 127) */
// @ts-ignore: decorator
@inline function biasedQ5_0(p: usize, x: usize, low: v128, ones: v128): v128 {
  return biasedLanes(q5Unsigned(p, low, false), q5Unsigned(p, low, true), x, ones);
}

// @ts-ignore: decorator
@inline function dotQ5_0(p: usize, x0: v128, x1: v128, x2: v128, x3: v128): v128 {
  const lo = q5Weights(p, false);
  const hi = q5Weights(p, true);
  let s = i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(lo), x0);
  s = i32x4.add(s, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(lo), x1));
  s = i32x4.add(s, i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(hi), x2));
  return i32x4.add(s, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(hi), x3));
}

const KVALUES_IQ4NL = memory.data<i8>([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]);

/**
 * kvalues_iq4nl (ggml-common.h): the 16 int8 levels an IQ4_NL / IQ4_XS index picks, loaded once
 * per call and passed down so that it stays in a register (as relaxed.ts's constants)
 */
// @ts-ignore: decorator
@inline export function iq4Values(): v128 {
  return v128.load(KVALUES_IQ4NL);
}

/** weights 0..15 (high = false) or 16..31 (high = true) of the IQ4_NL block at p (18 bytes: f16 scale, 16 bytes of indices laid out as Q4_0's), as int8 */
// @ts-ignore: decorator
@inline function iq4nlWeights(p: usize, high: bool, table: v128): v128 {
  const v = v128.load(p, 2);
  return lookup16(table, v128.and(high ? i16x8.shr_u(v, 4) : v, i8x16.splat(0x0f)));
}

// @ts-ignore: decorator
@inline function dotIQ4_NL(p: usize, x0: v128, x1: v128, x2: v128, x3: v128, table: v128): v128 {
  const lo = iq4nlWeights(p, false, table);
  const hi = iq4nlWeights(p, true, table);
  let s = i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(lo), x0);
  s = i32x4.add(s, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(lo), x1));
  s = i32x4.add(s, i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(hi), x2));
  return i32x4.add(s, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(hi), x3));
}

// kind: 0 Q8_0, 1 Q4_0, 2 Q5_0, 3 IQ4_NL
// @ts-ignore: decorator
@inline function blockDot(kind: i32, p: usize, x0: v128, x1: v128, x2: v128, x3: v128, table: v128): v128 {
  return kind == 0 ? dotQ8_0(p, x0, x1, x2, x3) : kind == 1 ? dotQ4_0(p, x0, x1, x2, x3) : kind == 2 ? dotQ5_0(p, x0, x1, x2, x3) : dotIQ4_NL(p, x0, x1, x2, x3, table);
}

// @ts-ignore: decorator
@inline function blockBytes(kind: i32): usize {
  return kind == 0 ? 34 : kind == 1 ? 18 : kind == 2 ? 22 : 18;
}

/** block b of a row (weights at p, activations at x): lanes adding up to its exact integer dot */
// @ts-ignore: decorator
@inline function blockInts(kind: i32, relaxed: bool, p: usize, x: usize, low: v128, ones: v128, table: v128): v128 {
  if (relaxed) {
    if (kind == 2) return i32x4.sub(biasedQ5_0(p, x, low, ones), q5Offsets(v128.load(x, 32)));
    return kind == 0 ? blockQ8_0(p, x, ones) : kind == 3 ? blockIQ4_NL(p, x, low, ones, table) : blockQ4_0(p, x, low, ones);
  }
  return blockDot(kind, p, v128.load(x), v128.load(x, 16), v128.load(x, 32), v128.load(x, 48), table);
}

/**
 * Row r for tokens tStart .. nTok - 1: four blocks at a time, their totals (lanesSum) scaled
 * into lane k of the accumulator for blocks k, k + 4, ...; the last 1-3 blocks the same way
 * with zero in the missing lanes. Block scales are computed from their bits (f16x4At / f16At:
 * the weight stream evicts the f16 table from L2); `finite`: the host checked that no scale of
 * the weight is Inf or NaN, and the relaxed Q4_0 path converts them without handling those.
 * Every build adds the same floats in the same order, so the same bits.
 */
// @ts-ignore: decorator
@inline function row(kind: i32, relaxed: bool, finite: bool, w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, tStart: i32, nTok: i32, r: i32): void {
  const wr = w + <usize>r * rowBytes;
  for (let t = tStart; t < nTok; t++) {
    const o = out + ((<usize>t * <usize>rows + <usize>r) << 2);
    rowsAt(kind, relaxed, finite, wr, 0, 1, xq + ((<usize>t * <usize>cols) << 1), xs + ((<usize>t * <usize>(cols >> 5)) << 2), cols, o, 0);
  }
}

/**
 * The n rows (1 or 4) at w0 + k * stride against one token (activations x, their scales sx),
 * results at o0 + k * oStride. Decode takes rows a quarter of a claim apart: their four-block
 * steps alternate, four sequential streams for the hardware prefetcher (TinyLlama Q4_0 decode on
 * an Intel Xeon: 13.6 tok/s a row at a time, 14.6 with two neighbouring rows, 19.0 with two half
 * a claim apart, 23.6 with four a quarter apart). Each row gets the same operations in the same
 * order either way, so the same bits
 */
// @ts-ignore: decorator
@inline function rowsAt(kind: i32, relaxed: bool, finite: bool, w0: usize, stride: usize, n: i32, x: usize, sx: usize, cols: i32, o0: usize, oStride: usize): void {
  const bb = blockBytes(kind);
  const nb = cols >> 5;
  const rest = nb & 3;
  const end4 = w0 + <usize>(nb - rest) * bb;
  const low = relaxed ? lowNibbles() : v128.splat<i32>(0);
  const ones = relaxed ? onesI16() : v128.splat<i32>(0);
  const table = kind == 3 ? iq4Values() : v128.splat<i32>(0);
  let acc0 = f32x4.splat(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  const o1 = o0 + oStride, o2 = o1 + oStride, o3 = o2 + oStride;
  let p = w0;
  for (; p < end4; p += 4 * bb, x += 256, sx += 16) {
    acc0 = rowStep4(kind, relaxed, finite, p, x, sx, low, ones, table, o0, acc0);
    if (n > 1) acc1 = rowStep4(kind, relaxed, finite, p + stride, x, sx, low, ones, table, o1, acc1);
    if (n > 2) acc2 = rowStep4(kind, relaxed, finite, p + 2 * stride, x, sx, low, ones, table, o2, acc2);
    if (n > 3) acc3 = rowStep4(kind, relaxed, finite, p + 3 * stride, x, sx, low, ones, table, o3, acc3);
  }
  if (rest != 0) {
    acc0 = rowRest(kind, relaxed, p, x, sx, rest, low, ones, table, acc0);
    if (n > 1) acc1 = rowRest(kind, relaxed, p + stride, x, sx, rest, low, ones, table, acc1);
    if (n > 2) acc2 = rowRest(kind, relaxed, p + 2 * stride, x, sx, rest, low, ones, table, acc2);
    if (n > 3) acc3 = rowRest(kind, relaxed, p + 3 * stride, x, sx, rest, low, ones, table, acc3);
  }
  store<f32>(o0, hsumF32(acc0));
  if (n > 1) store<f32>(o1, hsumF32(acc1));
  if (n > 2) store<f32>(o2, hsumF32(acc2));
  if (n > 3) store<f32>(o3, hsumF32(acc3));
}

/** row()'s four blocks at p (activations at x, their scales at sx) added to acc; o: the token's output, a scratch word */
// @ts-ignore: decorator
@inline function rowStep4(kind: i32, relaxed: bool, finite: bool, p: usize, x: usize, sx: usize, low: v128, ones: v128, table: v128, o: usize, acc: v128): v128 {
  const bb = blockBytes(kind);
  if (relaxed && kind == 1) {
    const h = f16x4BitsAt(p, bb);
    return scaleAdd4(acc, groupQ4_0(p, x, low, ones), finite ? f16x4Finite(h) : f16x4(h), v128.load(sx));
  }
  if (relaxed && kind == 2) {
    // Q5_0 over packQ4_0's blocks: the group's 8 * sums twice (offsets: weights stored + 16).
    // A block's lanes stored into this token's output (written again at the end) before the
    // next block's loads: V8 would hoist all four blocks' loads and spill a third of the loop
    const b0 = biasedQ5_0(p, x, low, ones);
    store<i32>(o, i32x4.extract_lane(b0, 0));
    const b1 = biasedQ5_0(p + 22, x + 64, low, ones);
    store<i32>(o, i32x4.extract_lane(b1, 0));
    const b2 = biasedQ5_0(p + 44, x + 128, low, ones);
    store<i32>(o, i32x4.extract_lane(b2, 0));
    const s = lanesSum(b0, b1, b2, biasedQ5_0(p + 66, x + 192, low, ones));
    return scaleAdd4(acc, i32x4.sub(s, q5Offsets(v128.load(x, 48))), f16x4At(p, bb), v128.load(sx));
  }
  const s = lanesSum(blockInts(kind, relaxed, p, x, low, ones, table), blockInts(kind, relaxed, p + bb, x + 64, low, ones, table), blockInts(kind, relaxed, p + 2 * bb, x + 128, low, ones, table), blockInts(kind, relaxed, p + 3 * bb, x + 192, low, ones, table));
  return scaleAdd4(acc, s, f16x4At(p, bb), v128.load(sx));
}

/** row()'s last `rest` (1-3) blocks at p added to acc, their sums in lanes 0..rest - 1 */
// @ts-ignore: decorator
@inline function rowRest(kind: i32, relaxed: bool, p: usize, x: usize, sx: usize, rest: i32, low: v128, ones: v128, table: v128, acc: v128): v128 {
  const bb = blockBytes(kind);
  const zero = i32x4.splat(0), f16s = f16TableAddress();
  let dw = f32x4.replace_lane(f32x4.splat(0), 0, f16At(p, f16s));
  let dx = f32x4.replace_lane(f32x4.splat(0), 0, load<f32>(sx));
  if (rest > 1) {
    dw = f32x4.replace_lane(dw, 1, f16At(p + bb, f16s));
    dx = f32x4.replace_lane(dx, 1, load<f32>(sx, 4));
  }
  if (rest > 2) {
    dw = f32x4.replace_lane(dw, 2, f16At(p + 2 * bb, f16s));
    dx = f32x4.replace_lane(dx, 2, load<f32>(sx, 8));
  }
  const s1 = rest > 1 ? blockInts(kind, relaxed, p + bb, x + 64, low, ones, table) : zero;
  const s2 = rest > 2 ? blockInts(kind, relaxed, p + 2 * bb, x + 128, low, ones, table) : zero;
  return scaleAdd4(acc, lanesSum(blockInts(kind, relaxed, p, x, low, ones, table), s1, s2, zero), dw, dx);
}

// @ts-ignore: decorator
@inline function dotX(w0: v128, w1: v128, w2: v128, w3: v128, q: usize): v128 {
  let s = i32x4.dot_i16x8_s(w0, v128.load(q));
  s = i32x4.add(s, i32x4.dot_i16x8_s(w1, v128.load(q, 16)));
  s = i32x4.add(s, i32x4.dot_i16x8_s(w2, v128.load(q, 32)));
  return i32x4.add(s, i32x4.dot_i16x8_s(w3, v128.load(q, 48)));
}

/**
 * One weight block (at p) against the same block of four tokens (int16 at q, q + 2 * cols, ...): the
 * block is loaded and widened once for the four tokens; acc lanes are the four tokens.
 */
// @ts-ignore: decorator
@inline function tileBlock(kind: i32, relaxed: bool, low: v128, ones: v128, table: v128, p: usize, q: usize, cols: usize, dx: v128, acc: v128): v128 {
  if (relaxed) {
    // Q4_0 on the relaxed build (packed activations, assembly/relaxed.ts): the same exact integer sums
    const lo = nibblesQ4_0(p, low, false);
    const hi = nibblesQ4_0(p, low, true);
    const s = lanesSum(dotQ4_0Packed(lo, hi, q, ones), dotQ4_0Packed(lo, hi, q + 2 * cols, ones), dotQ4_0Packed(lo, hi, q + 4 * cols, ones), dotQ4_0Packed(lo, hi, q + 6 * cols, ones));
    return scaleTile(acc, s, dx, p);
  }
  let w0: v128, w1: v128, w2: v128, w3: v128;
  if (kind == 0) {
    w0 = v128.load8x8_s(p, 2);
    w1 = v128.load8x8_s(p, 10);
    w2 = v128.load8x8_s(p, 18);
    w3 = v128.load8x8_s(p, 26);
  } else {
    let lo: v128, hi: v128;
    if (kind == 1) {
      const v = v128.load(p, 2);
      lo = i8x16.sub(v128.and(v, i8x16.splat(0x0f)), i8x16.splat(8));
      hi = i8x16.sub(i8x16.shr_u(v, 4), i8x16.splat(8));
    } else if (kind == 2) {
      lo = q5Weights(p, false);
      hi = q5Weights(p, true);
    } else {
      lo = iq4nlWeights(p, false, table);
      hi = iq4nlWeights(p, true, table);
    }
    w0 = i16x8.extend_low_i8x16_s(lo);
    w1 = i16x8.extend_high_i8x16_s(lo);
    w2 = i16x8.extend_low_i8x16_s(hi);
    w3 = i16x8.extend_high_i8x16_s(hi);
  }
  const s = lanesSum(dotX(w0, w1, w2, w3, q), dotX(w0, w1, w2, w3, q + 2 * cols), dotX(w0, w1, w2, w3, q + 4 * cols), dotX(w0, w1, w2, w3, q + 6 * cols));
  return scaleTile(acc, s, dx, p);
}

/** acc + the four tokens' block sums s times their activation scales dx times the weight scale at p */
// @ts-ignore: decorator
@inline function scaleTile(acc: v128, s: v128, dx: v128, p: usize): v128 {
  return f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(s), f32x4.mul(dx, f32x4.splat(f16(load<u16>(p))))));
}

// @ts-ignore: decorator
@inline function storeLanes(out: usize, rows: usize, v: v128): void {
  store<f32>(out, f32x4.extract_lane(v, 0));
  store<f32>(out + (rows << 2), f32x4.extract_lane(v, 1));
  store<f32>(out + (rows << 3), f32x4.extract_lane(v, 2));
  store<f32>(out + rows * 12, f32x4.extract_lane(v, 3));
}

/** four rows x four tokens (t .. t+3): each weight block is decoded once per four tokens (prefill) */
// @ts-ignore: decorator
@inline function tile4x4(kind: i32, relaxed: bool, low: v128, ones: v128, w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, t: i32, r: i32): void {
  const bb = blockBytes(kind);
  const nb = cols >> 5;
  const w0 = w + <usize>r * rowBytes;
  const w1 = w0 + rowBytes;
  const w2 = w1 + rowBytes;
  const w3 = w2 + rowBytes;
  const qx = xq + ((<usize>t * <usize>cols) << 1);
  const sx = xs + ((<usize>t * <usize>nb) << 2);
  const sStride = <usize>nb << 2;
  const table = kind == 3 ? iq4Values() : v128.splat<i32>(0);
  let a0 = f32x4.splat(0);
  let a1 = f32x4.splat(0);
  let a2 = f32x4.splat(0);
  let a3 = f32x4.splat(0);
  for (let b = 0; b < nb; b++) {
    const sb = sx + (<usize>b << 2);
    let dx = f32x4.splat(load<f32>(sb));
    dx = f32x4.replace_lane(dx, 1, load<f32>(sb + sStride));
    dx = f32x4.replace_lane(dx, 2, load<f32>(sb + 2 * sStride));
    dx = f32x4.replace_lane(dx, 3, load<f32>(sb + 3 * sStride));
    const q = qx + (<usize>b << 6);
    const o = <usize>b * bb;
    a0 = tileBlock(kind, relaxed, low, ones, table, w0 + o, q, cols, dx, a0);
    a1 = tileBlock(kind, relaxed, low, ones, table, w1 + o, q, cols, dx, a1);
    a2 = tileBlock(kind, relaxed, low, ones, table, w2 + o, q, cols, dx, a2);
    a3 = tileBlock(kind, relaxed, low, ones, table, w3 + o, q, cols, dx, a3);
  }
  const ot = out + ((<usize>t * <usize>rows + <usize>r) << 2);
  storeLanes(ot, rows, a0);
  storeLanes(ot + 4, rows, a1);
  storeLanes(ot + 8, rows, a2);
  storeLanes(ot + 12, rows, a3);
}

/**
 * Writes the Q4_0 / Q5_0 group streams of a batch (groups.ts, with each token's 8 * sum; the
 * tokens' values by fours, for rowsQ4_0Group) from the quantized activations (int16 at xq,
 * scales at xs; before packQ4_0 rewrites them) to g
 */
export function packQ4_0Groups(xq: usize, xs: usize, g: usize, cols: i32, nTok: i32): void {
  packGroups(xq, xs, g, cols, nTok, true);
}

/** Q5_0 weights lo, hi (0..31) against the 32 int8 activations at x: lanes adding up to sum n a (the exact dot plus 16 sum a) */
// @ts-ignore: decorator
@inline function biasedLanes(lo: v128, hi: v128, x: usize, ones: v128): v128 {
  return i32x4.dot_i16x8_s(i16x8.add(dotI8I7(v128.load(x), lo), dotI8I7(v128.load(x, 16), hi)), ones);
}

/** Q5_0's block offset terms from the stream's 8 * sums (packQ4_0's blocks, group streams): its weights are stored + 16 */
// @ts-ignore: decorator
@inline function q5Offsets(sums8: v128): v128 {
  return i32x4.shl(sums8, 1);
}

/**
 * Two Q4_0 rows (pa, pb: unpacked in the slot, unpackQ4_0Rows) against the eight (`four`: four)
 * tokens of a group stream by slots at g (relaxed build): each token's exact block dot, and
 * tile4x4's f32 steps per token (acc + f32(dot) * (dx * dw), block after block), so tile4x4's
 * bits. The stream holds the tokens' values by fours (groups.ts: slot i, values 4i..4i+3 of
 * every token) and each step puts four weights in every lane, so one dot of a slot adds each
 * token's products in that token's own lane: after the eight slots the lanes are the four
 * tokens' sums, with no transposition of lanes (whose shuffles bound the kernel that summed each
 * token's own lanes: docs/kernels.md). The four weights (low nibbles 4i..4i+3,
 * high ones 16 + 4i..) are one 32-bit load the load unit broadcasts, as is the block scale; each
 * activation load serves both rows. On the int16 pairs the products add up in int16 lanes (at
 * most 8 x 2 x 15 x 127) and one dot with ones finishes each sum; on VNNI's dot (`u8`) they add
 * straight into int32 lanes. Exact integers either way
 */
// @ts-ignore: decorator
@inline function rowsQ4_0Group(q5: bool, pa: usize, pb: usize, nb: i32, g: usize, ones: v128, outA: usize, outB: usize, rows: usize, four: bool, u8: bool): void {
  let a03 = f32x4.splat(0), a47 = a03, b03 = a03, b47 = a03;
  const n = four ? 4 : 8;
  const blockBytes = groupBlockBytes(n, true);
  // the tokens' sums after their scales, their values after the sums (slots of n tokens x 4 bytes)
  const sums: usize = four ? 16 : 32, acts: usize = four ? 32 : 64, slot = (<usize>n) << 2;
  const end = g + <usize>nb * blockBytes;
  const zero = i32x4.splat(0);
  // each row: nb blocks of 32 weights, then nb f32 scales
  const scales = <usize>nb << 5;
  for (let p = pa, q = pb, d = pa + scales, e = pb + scales, s = g; s < end; p += 32, q += 32, d += 4, e += 4, s += blockBytes) {
    const x = s + acts;
    // row a's tokens 0..3 and 4..7, row b's: int16 lanes (VNNI: int32) adding up to their block dots
    let c03 = zero, c47 = zero, e03 = zero, e47 = zero;
    // step i: weights 4i..4i+3 and 16 + 4i.. in every lane, against slots i and i + 4 (a loop,
    // not four steps written out: V8 would hoist the block's loads above the arithmetic and spill)
    // pointers stepped rather than indexed: every load a constant offset from one of them
    for (let pi = p, qi = q, xl = x; pi < p + 16; pi += 4, qi += 4, xl += slot) {
      const xh = xl + 4 * slot;
      const wl = v128.load32_splat(pi), wh = v128.load32_splat(pi, 16);
      const vl = v128.load32_splat(qi), vh = v128.load32_splat(qi, 16);
      c03 = slotPair(q5, c03, xl, xh, wl, wh, ones, u8);
      e03 = slotPair(q5, e03, xl, xh, vl, vh, ones, u8);
      if (!four) {
        c47 = slotPair(q5, c47, xl + 16, xh + 16, wl, wh, ones, u8);
        e47 = slotPair(q5, e47, xl + 16, xh + 16, vl, vh, ones, u8);
      }
    }
    const da = v128.load32_splat(d), db = v128.load32_splat(e);
    // the offset term: Q4_0's weights are stored + 8 (the stream's 8 * sums), Q5_0's + 16
    const sums03 = q5 ? q5Offsets(v128.load(s + sums)) : v128.load(s + sums), dx03 = v128.load(s);
    a03 = f32x4.add(a03, f32x4.mul(f32x4.convert_i32x4_s(i32x4.sub(slotSums(q5, c03, ones, u8), sums03)), f32x4.mul(dx03, da)));
    b03 = f32x4.add(b03, f32x4.mul(f32x4.convert_i32x4_s(i32x4.sub(slotSums(q5, e03, ones, u8), sums03)), f32x4.mul(dx03, db)));
    if (!four) {
      const sums47 = q5 ? q5Offsets(v128.load(s + sums, 16)) : v128.load(s + sums, 16), dx47 = v128.load(s, 16);
      a47 = f32x4.add(a47, f32x4.mul(f32x4.convert_i32x4_s(i32x4.sub(slotSums(q5, c47, ones, u8), sums47)), f32x4.mul(dx47, da)));
      b47 = f32x4.add(b47, f32x4.mul(f32x4.convert_i32x4_s(i32x4.sub(slotSums(q5, e47, ones, u8), sums47)), f32x4.mul(dx47, db)));
    }
  }
  storeLanes(outA, rows, a03);
  storeLanes(outB, rows, b03);
  if (!four) {
    storeLanes(outA + (rows << 4), rows, a47);
    storeLanes(outB + (rows << 4), rows, b47);
  }
}

/**
 * Rows r..r + 3 of a Q4_0 (q5: Q5_0) weight unpacked into this thread's slot for rowsQ4_0Group,
 * once per matmul rather than once per group of eight tokens: per row nb blocks of 32 bytes
 * (weights 0..15, then 16..31, as stored: Q4_0's nibbles 0..15, Q5_0's with their fifth bits
 * 0..31), then the nb block scales as f32
 */
// @ts-ignore: decorator
@inline function unpackRows(q5: bool, w: usize, rowBytes: usize, r: i32, nb: i32, slot: usize, low: v128): void {
  const table = f16TableAddress();
  const rowSlot = <usize>nb * 36;
  const bb: usize = q5 ? 22 : 18;
  for (let i = 0; i < 4; i++) {
    let p = w + <usize>(r + i) * rowBytes;
    let q = slot + <usize>i * rowSlot, d = q + (<usize>nb << 5);
    const end = d;
    for (; q < end; q += 32, d += 4, p += bb) {
      if (q5) {
        v128.store(q, q5Unsigned(p, low, false));
        v128.store(q, q5Unsigned(p, low, true), 16);
      } else {
        const v = v128.load(p, 2);
        v128.store(q, v128.and(v, low));
        v128.store(q, v128.and(i16x8.shr_u(v, 4), low), 16);
      }
      store<u32>(d, load<u32>(table + (<usize>load<u16>(p) << 2)));
    }
  }
}

/**
 * one step of rowsQ4_0Group: slot xl (weights wl) and slot xh (weights wh) of four tokens added
 * to c: VNNI's int32 lanes, or the int16 pairs' lanes (Q4_0: int16, at most 8 x 2 x 15 x 127 after
 * the four steps; Q5_0's 0..31 would overflow that, so each step's pairs go to int32 lanes by a
 * dot with ones)
 */
// @ts-ignore: decorator
@inline function slotPair(q5: bool, c: v128, xl: usize, xh: usize, wl: v128, wh: v128, ones: v128, u8: bool): v128 {
  if (u8) return dotAddU8(v128.load(xh), wh, dotAddU8(v128.load(xl), wl, c));
  const pairs = i16x8.add(dotI8I7(v128.load(xl), wl), dotI8I7(v128.load(xh), wh));
  return q5 ? i32x4.add(c, i32x4.dot_i16x8_s(pairs, ones)) : i16x8.add(c, pairs);
}

/** a block's four token sums from slotPair's lanes: int32 already (VNNI, Q5_0) or Q4_0's int16 ones by a dot with ones */
// @ts-ignore: decorator
@inline function slotSums(q5: bool, c: v128, ones: v128, u8: bool): v128 {
  return u8 || q5 ? c : i32x4.dot_i16x8_s(c, ones);
}

/**
 * rows r..r + 3 over the tokens of the group streams at g: eight at a time, then four; returns
 * the tokens done. The four rows are unpacked into the slot first (unpackRows) and taken two at
 * a time (rowsQ4_0Group)
 */
// @ts-ignore: decorator
@inline function groupTokens(q5: bool, u8: bool, w: usize, rowBytes: usize, r: i32, nb: i32, groups: usize, slot: usize, out: usize, rows: i32, nTok: i32): i32 {
  unpackRows(q5, w, rowBytes, r, nb, slot, lowNibbles());
  let g = groups, t = 0;
  // `four` a literal at each call: the kernels inlined for eight tokens and for four
  for (; t + 8 <= nTok; t += 8, g += <usize>nb * groupBlockBytes(8, true)) groupRows(q5, u8, nb, g, slot, out + ((<usize>t * <usize>rows + <usize>r) << 2), rows, false);
  if (t + 4 <= nTok) {
    groupRows(q5, u8, nb, g, slot, out + ((<usize>t * <usize>rows + <usize>r) << 2), rows, true);
    t += 4;
  }
  return t;
}

/** groupTokens' four rows in the slot over one group at g, outputs from o (the first row of its first token) */
// @ts-ignore: decorator
@inline function groupRows(q5: bool, u8: bool, nb: i32, g: usize, slot: usize, o: usize, rows: i32, four: bool): void {
  const ones = onesI16();
  const stride = <usize>nb * 36;
  rowsQ4_0Group(q5, slot, slot + stride, nb, g, ones, o, o + 4, <usize>rows, four, u8);
  rowsQ4_0Group(q5, slot + 2 * stride, slot + 3 * stride, nb, g, ones, o + 8, o + 12, <usize>rows, four, u8);
}

// groupTokens' specialisations, each a function of its own: inlined side by side behind
// `vnni ? ... : ...`, the optimizer folded them into one body that reads u8 from a local (a
// branch per token in the inner loop, and both sides' values computed)
function groupTokensQ4_0U8(w: usize, rowBytes: usize, r: i32, nb: i32, groups: usize, slot: usize, out: usize, rows: i32, nTok: i32): i32 {
  return groupTokens(false, true, w, rowBytes, r, nb, groups, slot, out, rows, nTok);
}
function groupTokensQ4_0I16(w: usize, rowBytes: usize, r: i32, nb: i32, groups: usize, slot: usize, out: usize, rows: i32, nTok: i32): i32 {
  return groupTokens(false, false, w, rowBytes, r, nb, groups, slot, out, rows, nTok);
}
function groupTokensQ5_0U8(w: usize, rowBytes: usize, r: i32, nb: i32, groups: usize, slot: usize, out: usize, rows: i32, nTok: i32): i32 {
  return groupTokens(true, true, w, rowBytes, r, nb, groups, slot, out, rows, nTok);
}
function groupTokensQ5_0I16(w: usize, rowBytes: usize, r: i32, nb: i32, groups: usize, slot: usize, out: usize, rows: i32, nTok: i32): i32 {
  return groupTokens(true, false, w, rowBytes, r, nb, groups, slot, out, rows, nTok);
}

/**
 * relaxed: the relaxed build's kernels over packed activations (assembly/relaxed.ts), Q8_0 for
 * single tokens only (its tiles stay on SIMD128: two int8 dots per token, for a+ and a-, gain
 * nothing over a block widened once for four tokens)
 */
// @ts-ignore: decorator
@inline function matQ(kind: i32, relaxed: bool, finite: bool, w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, groups: usize = 0, vnni: bool = false, slot: usize = 0): void {
  const low = relaxed ? lowNibbles() : v128.splat<i32>(0);
  const ones = relaxed ? onesI16() : v128.splat<i32>(0);
  let r = r0;
  if (relaxed && (kind == 0 || kind == 2 || kind == 3) && nTok > 1) unreachable();
  if (nTok == 1) {
    // decode streams weights that are not in any cache: four neighbouring rows interleaved
    // ran 3x slower than one at a time on the 30 MB logits matrix of an AMD EPYC; rows i, q + i,
    // 2q + i and 3q + i go together, four sequential streams (rowsAt)
    const q = (r1 - r0) >> 2;
    for (let i = 0; i < q; i++) {
      const a = r0 + i;
      rowsAt(kind, relaxed, finite, w + <usize>a * rowBytes, <usize>q * rowBytes, 4, xq, xs, cols, out + (<usize>a << 2), <usize>q << 2);
    }
    r = r0 + 4 * q;
    for (; r < r1; r++) row(kind, relaxed, finite, w, rowBytes, xq, xs, out, rows, cols, 0, nTok, r);
    return;
  }
  const nb = cols >> 5;
  for (; r + 4 <= r1; r += 4) {
    let t = 0;
    // Q4_0 (relaxed) and Q5_0 with group streams (relaxed build only): their tokens eight at a
    // time, then four, tile4x4's bits
    if (((relaxed && kind == 1) || kind == 2) && groups != 0) {
      if (kind == 2) t = vnni ? groupTokensQ5_0U8(w, rowBytes, r, nb, groups, slot, out, rows, nTok) : groupTokensQ5_0I16(w, rowBytes, r, nb, groups, slot, out, rows, nTok);
      else t = vnni ? groupTokensQ4_0U8(w, rowBytes, r, nb, groups, slot, out, rows, nTok) : groupTokensQ4_0I16(w, rowBytes, r, nb, groups, slot, out, rows, nTok);
    }
    for (; t + 4 <= nTok; t += 4) tile4x4(kind, relaxed, low, ones, w, rowBytes, xq, xs, out, rows, cols, t, r);
    for (let i = 0; i < 4; i++) row(kind, relaxed, finite, w, rowBytes, xq, xs, out, rows, cols, t, nTok, r + i);
  }
  for (; r < r1; r++) row(kind, relaxed, finite, w, rowBytes, xq, xs, out, rows, cols, 0, nTok, r);
}

export function matQ8_0(w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matQ(0, false, false, w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1);
}

export function matQ4_0(w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matQ(1, false, false, w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1);
}

/** relaxed build only: over activations packed by packQ8_0 (single tokens) / packQ4_0 */
export function matQ8_0Relaxed(w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matQ(0, true, false, w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1);
}

/** groups (or 0): the first tokens' group streams (packQ4_0Groups); vnni: they go through VNNI's dot (the host probed it) */
export function matQ4_0Relaxed(w: usize, rowBytes: usize, xq: usize, xs: usize, groups: usize, slot: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, vnni: bool): void {
  matQ(1, true, false, w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1, groups, vnni, slot);
}

/** matQ4_0Relaxed for a weight without Inf/NaN block scales (the host checked: f16sFinite) */
export function matQ4_0RelaxedFinite(w: usize, rowBytes: usize, xq: usize, xs: usize, groups: usize, slot: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, vnni: bool): void {
  matQ(1, true, true, w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1, groups, vnni, slot);
}

export function matQ5_0(w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matQ(2, false, false, w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1);
}

/** Q5_0 single tokens in the relaxed build, over activations packed by packQ4_0 */
export function matQ5_0Relaxed(w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matQ(2, true, false, w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1);
}

/**
 * Q5_0 batches in the relaxed build: the tokens of the group streams (packQ4_0Groups; the int16
 * activations left as they are) through the Q4_0 group kernel with Q5_0's weights, the rest as matQ5_0
 */
export function matQ5_0Groups(w: usize, rowBytes: usize, xq: usize, xs: usize, groups: usize, slot: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, vnni: bool): void {
  matQ(2, false, false, w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1, groups, vnni, slot);
}

/** IQ4_NL against Q8_0 activations: Q4_0's kernel with the indices looked up in kvalues_iq4nl (one swizzle per 16 weights) */
export function matIQ4_NL(w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matQ(3, false, false, w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1);
}

/** relaxed build only, single tokens over activations packed by packQ8_0 (Q8_0's a+ / a- split): the same bits as matIQ4_NL */
export function matIQ4_NLRelaxed(w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matQ(3, true, false, w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1);
}
