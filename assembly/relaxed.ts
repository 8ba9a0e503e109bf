// Q8_0 / Q4_0 block dots on Relaxed SIMD's int8 dot (i16x8.relaxed_dot_i8x16_i7x16_s: signed
// int8 x 7-bit unsigned, pairs added into int16; pmaddubsw on x86), used by q8.ts's relaxed
// variants (Q8_0 decode; Q4_0 decode and tiles). They multiply int8 directly where the SIMD128
// kernels widen both sides to int16 first.
//
// The activations are repacked once per matmul (packQ8_0 / packQ4_0, shared by all rows and
// threads) so that each weight block costs a few byte ops:
// - Q8_0 x Q8_0: a = a+ - a- with a+ = max(a, 0) and a- = max(-a, 0), both 0..127 (the
//   quantizer never writes -128), so w * a = w * a+ - w * a-: two int8 dots on the weights as
//   stored, subtracted in int16 (at each position one of a+, a- is 0, so every int16 is a sum
//   of two products w * a, at most 2 * 128 * 127 in size: exact for every weight byte, -128
//   included).
// - Q4_0: the stored nibble n = w + 8 (0..15) is the 7-bit operand, a the signed one, and
//   sum (n - 8) a = sum n a - 8 sum a with the last term precomputed per lane.
// Each block gives an i32x4 whose lanes add up to the block's exact integer dot; the kernels
// (q8.ts) use only that total (lanesSum), so which products land in which lane is free and the
// results equal the SIMD128 build's bit for bit.
//
// Packed activation block (64 bytes, in place of the 32 int16 quantizeRowQ8_0 writes):
//   Q8_0: a+ of weights 0..15, a+ of 16..31, a- of 0..15, a- of 16..31
//   Q4_0: a of 0..15, a of 16..31, i32x4 8 * (sum of a per lane), and in the first block of
//   each group of four blocks of a row, i32x4 8 * (sum of a) of the group's blocks (the
//   single-token kernel subtracts the four at once; a last group of 1-3 blocks takes the
//   per-lane sums)
import { dotI8I7 as dot, hsumI32, lanesSum, lookup16 } from "./simd";

/** 32 int16 activations at q -> the 32 int8 values of one half (lo: 0..15, hi: 16..31) */
// @ts-ignore: decorator
@inline function narrowed(q: usize, half: usize): v128 {
  return i8x16.narrow_i16x8_s(v128.load(q + (half << 5)), v128.load(q + (half << 5), 16));
}

/** rewrites nBlocks int16 activation blocks at q (64 bytes each) into the packed Q8_0 layout above */
export function packQ8_0(q: usize, nBlocks: i32): void {
  for (let b = 0; b < nBlocks; b++) {
    const p = q + (<usize>b << 6);
    // activations never hold -128 (quantizeRowQ8_0 rounds into -127..127), so -a fits 7 bits
    const lo = narrowed(p, 0);
    const hi = narrowed(p, 1);
    const zero = i8x16.splat(0);
    v128.store(p, i8x16.max_s(lo, zero));
    v128.store(p, i8x16.max_s(hi, zero), 16);
    v128.store(p, i8x16.max_s(i8x16.neg(lo), zero), 32);
    v128.store(p, i8x16.max_s(i8x16.neg(hi), zero), 48);
  }
}

/** the same for Q4_0 weights (nBlocks, blocksPerRow per row): int8 activations, per-lane and per-group sums times 8 */
export function packQ4_0(q: usize, nBlocks: i32, blocksPerRow: i32): void {
  for (let b = 0; b < nBlocks; b++) {
    const p = q + (<usize>b << 6);
    const lo = narrowed(p, 0);
    const hi = narrowed(p, 1);
    const pairs = i16x8.add(i16x8.extadd_pairwise_i8x16_s(lo), i16x8.extadd_pairwise_i8x16_s(hi));
    const sums = i32x4.shl(i32x4.extadd_pairwise_i16x8_s(pairs), 3);
    v128.store(p, lo);
    v128.store(p, hi, 16);
    v128.store(p, sums, 32);
    // this block's total, in lane b % 4 of its group's vector (the group's first block, bytes 48..63)
    const k = (b % blocksPerRow) & 3;
    store<i32>(p - (<usize>k << 6) + 48 + (<usize>k << 2), hsumI32(sums));
  }
}

// never called in the SIMD128 build: the host dispatches these kernels on the relaxed build only

const LOW_NIBBLES = memory.data<u8>([15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15]);
const ONES_I16 = memory.data<u16>([1, 1, 1, 1, 1, 1, 1, 1]);

/**
 * The constants the block dots take, loaded once per call so that they stay in registers (V8
 * rebuilds a constant such as extadd_pairwise's inside the loop): ones for the int16 -> int32
 * pairwise add as a dot, the low-nibble mask
 */
// @ts-ignore: decorator
@inline export function onesI16(): v128 {
  return v128.load(ONES_I16);
}

// @ts-ignore: decorator
@inline export function lowNibbles(): v128 {
  return v128.load(LOW_NIBBLES);
}

/** the Q8_0 block at p against a packed activation block at x: lanes adding up to the exact dot */
// @ts-ignore: decorator
@inline export function blockQ8_0(p: usize, x: usize, ones: v128): v128 {
  const wa = v128.load(p, 2);
  const wb = v128.load(p, 18);
  const da = i16x8.sub(dot(wa, v128.load(x)), dot(wa, v128.load(x, 32)));
  const db = i16x8.sub(dot(wb, v128.load(x, 16)), dot(wb, v128.load(x, 48)));
  // each int16 lane is up to 2 * 128 * 127 in size: the two halves are added as int32
  return i32x4.add(i32x4.dot_i16x8_s(da, ones), i32x4.dot_i16x8_s(db, ones));
}

/**
 * The IQ4_NL block at p (f16 scale, 16 bytes of indices) against a packQ8_0 activation block at
 * x, as blockQ8_0: its int8 weights (the indices looked up in `table`, kvalues_iq4nl, -127..113)
 * are the signed operand of the int8 dot against a+ and a-; the lanes add up to the exact dot
 */
// @ts-ignore: decorator
@inline export function blockIQ4_NL(p: usize, x: usize, low: v128, ones: v128, table: v128): v128 {
  const v = v128.load(p, 2);
  const wa = lookup16(table, v128.and(v, low));
  const wb = lookup16(table, v128.and(i16x8.shr_u(v, 4), low));
  const da = i16x8.sub(dot(wa, v128.load(x)), dot(wa, v128.load(x, 32)));
  const db = i16x8.sub(dot(wb, v128.load(x, 16)), dot(wb, v128.load(x, 48)));
  return i32x4.add(i32x4.dot_i16x8_s(da, ones), i32x4.dot_i16x8_s(db, ones));
}

/** the 32 nibbles of the Q4_0 block at p, low (weights 0..15) or high (16..31) */
// @ts-ignore: decorator
@inline export function nibblesQ4_0(p: usize, low: v128, high: bool): v128 {
  const v = v128.load(p, 2);
  // a 16-bit shift and the same mask: V8 builds i8x16.shr_u's own mask inside the loop
  return v128.and(high ? i16x8.shr_u(v, 4) : v, low);
}

/** Q4_0 nibbles (nibblesQ4_0) against a packed activation block at x: lanes adding up to the exact dot */
// @ts-ignore: decorator
@inline export function dotQ4_0Packed(lo: v128, hi: v128, x: usize, ones: v128): v128 {
  // int16 lanes stay within 4 * 15 * 127
  const d = i16x8.add(dot(v128.load(x), lo), dot(v128.load(x, 16), hi));
  return i32x4.sub(i32x4.dot_i16x8_s(d, ones), v128.load(x, 32));
}

/** one Q4_0 block at p against a packed activation block at x: lanes adding up to sum n a (the exact dot plus 8 sum a) */
// @ts-ignore: decorator
@inline function biasedQ4_0(p: usize, x: usize, low: v128, ones: v128): v128 {
  const v = v128.load(p, 2);
  return i32x4.dot_i16x8_s(i16x8.add(dot(v128.load(x), v128.and(v, low)), dot(v128.load(x, 16), v128.and(i16x8.shr_u(v, 4), low))), ones);
}

/**
 * Four Q4_0 blocks at p (18 bytes each) against four packed activation blocks at x: their
 * exact dots in the lanes (packQ4_0's group sums subtracted at once)
 */
// @ts-ignore: decorator
@inline export function groupQ4_0(p: usize, x: usize, low: v128, ones: v128): v128 {
  const s = lanesSum(biasedQ4_0(p, x, low, ones), biasedQ4_0(p + 18, x + 64, low, ones), biasedQ4_0(p + 36, x + 128, low, ones), biasedQ4_0(p + 54, x + 192, low, ones));
  return i32x4.sub(s, v128.load(x, 48));
}

/** one Q4_0 block at p against a packed activation block at x, its bytes loaded once for both halves: lanes adding up to the exact dot */
// @ts-ignore: decorator
@inline export function blockQ4_0(p: usize, x: usize, low: v128, ones: v128): v128 {
  return i32x4.sub(biasedQ4_0(p, x, low, ones), v128.load(x, 32));
}
