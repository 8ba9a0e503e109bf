// Q8_0 / Q4_0 block dots on Relaxed SIMD's int8 dot (i16x8.relaxed_dot_i8x16_i7x16_s: signed
// int8 x 7-bit unsigned, pairs added into int16; pmaddubsw on x86), used by q8.ts's relaxed
// variants (Q8_0 decode; Q4_0 decode and tiles). They multiply int8 directly where the SIMD128
// kernels widen both sides to int16 first.
//
// The activations are repacked once per matmul (packQ8_0 / packQ4_0, shared by all rows and
// threads) so that each weight block costs a shuffle and a few byte ops:
// - Q8_0 x Q8_0: a = a+ - a- with a+ = max(a, 0) and a- = max(-a, 0), both 0..127 (the
//   quantizer never writes -128), so w * a = w * a+ - w * a-: two int8 dots on the weights as
//   stored, subtracted in int16 (at each position one of a+, a- is 0, so every int16 is a sum
//   of two products w * a, at most 2 * 128 * 127 in size: exact for every weight byte, -128
//   included).
// - Q4_0: the stored nibble n = w + 8 (0..15) is the 7-bit operand, a the signed one, and
//   sum (n - 8) a = sum n a - 8 sum a with the last term precomputed per lane.
// Integer results per f32 lane must equal q8.ts's exactly, so that the float accumulation (the
// same scaleAdd in the same order) gives the same bits: q8.ts's lane i holds the products of
// weights 2i, 2i+1, 8+2i, 9+2i (and the same 16 further on), while the int8 dot sums four
// neighbouring bytes into lane i; the weight bytes are shuffled into that order (one pshufb)
// and the activations are stored in it.
//
// Packed activation block (64 bytes, in place of the 32 int16 quantizeRowQ8_0 writes):
//   Q8_0: a+ of weights 0..15 (shuffled), a+ of 16..31, a- of 0..15, a- of 16..31
//   Q4_0: a of 0..15 (shuffled), a of 16..31, i32x4 8 * (sum of a per lane), 16 unused bytes
import { f16At, f16TableAddress } from "./half";
import { dotI8I7 as dot, hsumF32, scaleAdd } from "./simd";

// @ts-ignore: decorator
@inline function order(v: v128): v128 {
  return i8x16.shuffle(v, v, 0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
}

/** 32 int16 activations at q -> the 32 int8 values of one half (lo: 0..15, hi: 16..31), in lane order */
// @ts-ignore: decorator
@inline function narrowed(q: usize, half: usize): v128 {
  return order(i8x16.narrow_i16x8_s(v128.load(q + (half << 5)), v128.load(q + (half << 5), 16)));
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

/** the same for Q4_0 weights: int8 activations and per-lane sums times 8 */
export function packQ4_0(q: usize, nBlocks: i32): void {
  for (let b = 0; b < nBlocks; b++) {
    const p = q + (<usize>b << 6);
    const lo = narrowed(p, 0);
    const hi = narrowed(p, 1);
    const pairs = i16x8.add(i16x8.extadd_pairwise_i8x16_s(lo), i16x8.extadd_pairwise_i8x16_s(hi));
    v128.store(p, lo);
    v128.store(p, hi, 16);
    v128.store(p, i32x4.shl(i32x4.extadd_pairwise_i16x8_s(pairs), 3), 32);
  }
}

// never called in the SIMD128 build: the host dispatches these kernels on the relaxed build only

/** order(v) as one pshufb: V8 rebuilds a shuffle's constant mask inside the loop (4 instructions), a mask in a local stays in a register */
// @ts-ignore: decorator
@inline function ordered(v: v128, mask: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return i8x16.relaxed_swizzle(v, mask);
  unreachable();
  return v;
}

const ORDER = memory.data<u8>([0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15]);
const LOW_NIBBLES = memory.data<u8>([15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15]);
const ONES_I16 = memory.data<u16>([1, 1, 1, 1, 1, 1, 1, 1]);

// @ts-ignore: decorator
@inline function blockQ8_0(p: usize, x: usize, mask: v128): v128 {
  const wa = ordered(v128.load(p, 2), mask);
  const wb = ordered(v128.load(p, 18), mask);
  const da = i16x8.sub(dot(wa, v128.load(x)), dot(wa, v128.load(x, 32)));
  const db = i16x8.sub(dot(wb, v128.load(x, 16)), dot(wb, v128.load(x, 48)));
  // each int16 lane is up to 2 * 128 * 127 in size: the two halves are added as int32
  return i32x4.add(i32x4.extadd_pairwise_i16x8_s(da), i32x4.extadd_pairwise_i16x8_s(db));
}

/** the 32 nibbles of the Q4_0 block at p, low (weights 0..15) and high (16..31), in lane order */
// @ts-ignore: decorator
@inline export function nibblesQ4_0(p: usize, mask: v128, high: bool): v128 {
  const v = ordered(v128.load(p, 2), mask);
  // a 16-bit shift and the same mask: V8 builds i8x16.shr_u's own mask inside the loop
  return v128.and(high ? i16x8.shr_u(v, 4) : v, i8x16.splat(0x0f));
}

/** Q4_0 nibbles (nibblesQ4_0) against a packed activation block at x: q8.ts's int32 lanes */
// @ts-ignore: decorator
@inline export function dotQ4_0Packed(lo: v128, hi: v128, x: usize): v128 {
  // int16 lanes stay within 4 * 15 * 127
  const d = i16x8.add(dot(v128.load(x), lo), dot(v128.load(x, 16), hi));
  return i32x4.sub(i32x4.extadd_pairwise_i16x8_s(d), v128.load(x, 32));
}

/** the relaxed kernels' shuffle mask, loaded once per call so that it stays in a register */
// @ts-ignore: decorator
@inline export function orderMask(): v128 {
  return v128.load(ORDER);
}

/**
 * The Q4_0 block at p against a packed activation block at x: dotQ4_0Packed(nibblesQ4_0(..)),
 * the same int32 lanes, with the block loaded and shuffled once for both nibble halves and the
 * pairwise int16 -> int32 add as a dot with `ones` (V8 rebuilds extadd_pairwise's constant and
 * shift masks inside a loop; constants loaded once stay in registers)
 */
// @ts-ignore: decorator
@inline function blockQ4_0(p: usize, x: usize, mask: v128, low: v128, ones: v128): v128 {
  const v = ordered(v128.load(p, 2), mask);
  const d = i16x8.add(dot(v128.load(x), v128.and(v, low)), dot(v128.load(x, 16), v128.and(i16x8.shr_u(v, 4), low)));
  return i32x4.sub(i32x4.dot_i16x8_s(d, ones), v128.load(x, 32));
}

/**
 * Row r for tokens tStart .. nTok - 1 (Q8_0: kind 0, Q4_0: 1) over packed activations: the
 * per-row arithmetic of q8.ts's rows1 / rows4, so the same bits. Block scales are computed
 * from their bits (f16At: the weight stream evicts the f16 table from L2).
 */
// @ts-ignore: decorator
@inline export function rowRelaxed(kind: i32, w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, tStart: i32, nTok: i32, r: i32, mask: v128): void {
  const bb: usize = kind == 0 ? 34 : 18;
  const nb = cols >> 5;
  const w0 = w + <usize>r * rowBytes;
  const end = w0 + <usize>nb * bb;
  const low = v128.load(LOW_NIBBLES);
  const ones = v128.load(ONES_I16);
  const table = f16TableAddress();
  for (let t = tStart; t < nTok; t++) {
    let x = xq + ((<usize>t * <usize>cols) << 1);
    let sx = xs + ((<usize>t * <usize>nb) << 2);
    let a0 = f32x4.splat(0);
    for (let p = w0; p < end; p += bb, x += 64, sx += 4) {
      const s = kind == 0 ? blockQ8_0(p, x, mask) : blockQ4_0(p, x, mask, low, ones);
      a0 = scaleAdd(a0, s, f16At(p, table) * load<f32>(sx));
    }
    store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), hsumF32(a0));
  }
}
