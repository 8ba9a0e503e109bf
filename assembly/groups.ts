// Group streams: a batch's quantized activations repacked for the kernels that take eight (or
// four) tokens at a time (q8-ggml.ts's Q8_0, q8.ts's Q4_0): per weight block of 32, the group's
// activation scales (f32), with `sums` 8 * each token's sum of its 32 values (i32, Q4_0's
// offset of 8), then the tokens' 32 values as int8, so that every load of the kernels' inner
// loop is a constant offset from one pointer. Without sums (Q8_0) each token's 32 values follow
// one another (for Q8_0's kernel on VNNI's dot, as the unsigned bytes value + 128); with sums
// (Q4_0, Q5_0) they go by fours: slot i holds values 4i..4i+3 of every token of the group, so
// that one vector holds the same four values of four tokens (q8.ts's rowsQ4_0Group).
import { hsumI32 } from "./simd";

/** bytes of one block of a group of n tokens */
// @ts-ignore: decorator
@inline export function groupBlockBytes(n: i32, sums: bool): usize {
  return (<usize>n) * (sums ? 40 : 36);
}

/**
 * Packs tokens [t, t + n) of the quantized activations (int16 at xq, cols per token; one f32
 * scale per block at xs) as one group at o; returns the end of the group
 */
export function packGroup(xq: usize, xs: usize, o: usize, cols: i32, t: i32, n: i32, sums: bool, unsignedActivations: bool = false): usize {
  const nb = <usize>(cols >> 5);
  const acts = (<usize>n) << (sums ? 3 : 2);
  // a + 128 as an unsigned byte is a with its top bit flipped
  const flip = i8x16.splat(unsignedActivations ? -128 : 0);
  for (let b: usize = 0; b < nb; b++, o += groupBlockBytes(n, sums)) {
    for (let k = 0; k < n; k++) {
      const tok = <usize>(t + k);
      store<f32>(o + (<usize>k << 2), load<f32>(xs + ((tok * nb + b) << 2)));
      const q = xq + ((tok * <usize>cols + (b << 5)) << 1);
      const lo = i8x16.narrow_i16x8_s(v128.load(q), v128.load(q, 16));
      const hi = i8x16.narrow_i16x8_s(v128.load(q, 32), v128.load(q, 48));
      if (sums) {
        // by slots: token k's four values of slot i at o + acts + (i * n + k) * 4
        const at = o + acts + (<usize>k << 2), slot = (<usize>n) << 2;
        v128.store32_lane(at, lo, 0);
        v128.store32_lane(at + slot, lo, 1);
        v128.store32_lane(at + 2 * slot, lo, 2);
        v128.store32_lane(at + 3 * slot, lo, 3);
        v128.store32_lane(at + 4 * slot, hi, 0);
        v128.store32_lane(at + 5 * slot, hi, 1);
        v128.store32_lane(at + 6 * slot, hi, 2);
        v128.store32_lane(at + 7 * slot, hi, 3);
      } else {
        v128.store(o + acts + (<usize>k << 5), v128.xor(lo, flip));
        v128.store(o + acts + (<usize>k << 5), v128.xor(hi, flip), 16);
      }
      if (sums) store<i32>(o + ((<usize>(n + k)) << 2), hsumI32(i32x4.extadd_pairwise_i16x8_s(i16x8.add(i16x8.extadd_pairwise_i8x16_s(lo), i16x8.extadd_pairwise_i8x16_s(hi)))) << 3);
    }
  }
  return o;
}

/** the group streams of a batch: groups of eight from token 0, then one of four where four or more tokens are left */
export function packGroups(xq: usize, xs: usize, g: usize, cols: i32, nTok: i32, sums: bool, unsignedActivations: bool = false): void {
  let o = g, t = 0;
  for (; t + 8 <= nTok; t += 8) o = packGroup(xq, xs, o, cols, t, 8, sums, unsignedActivations);
  if (t + 4 <= nTok) packGroup(xq, xs, o, cols, t, 4, sums, unsignedActivations);
}
