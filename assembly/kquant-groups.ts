// Q5_K batches eight tokens at a time, then four (relaxed build; Q4_K's and Q6_K's go by slots,
// kquant-slots.ts, and rowQ4_KGroup keeps Q5_K only), over a group
// stream: the activations of the group's tokens interleaved per super-block, so that every load
// in the inner loops is a constant offset from one pointer and a weight vector, unpacked once,
// serves the group. The four-token tiles of kquant.ts (superQ4_K4 / superQ6_K4, now the plain
// build's) spilled their accumulators and unpacked each Q6_K vector once per four tokens; here
// the integer accumulators stay in registers. Every token's super-block value is the exact integer kquant.ts computes (integer
// sums in any order are the same number), converted and scaled by the same f32 operations in
// the same order, and added to its sum in super-block order: the same bits as superQ4_K /
// superQ6_K one token at a time.
//
// Group stream, per super-block of 256 weights (308 n bytes for a group of n = 8 or 4 tokens:
// groups of eight, then one of four where four or more tokens are left), token k of the group:
//   0      the n activation scales d (f32)
//   4 n    token k at 4 n + 32 k: its 16 sums of 16 activations (i16; Q6_K's offset term)
//   36 n   token k at 36 n + 16 k: its 8 sums of 32 activations (i16; Q4_K's / Q5_K's min term)
//   52 n   sub-block j (32 weights) of token k at 52 n + 32 n j + 32 k: 32 int8
// (|sum of 16| <= 2032, |sum of 32| <= 4064: both fit int16)
import { f16 } from "./half";
import { dotI8I7, lanesSum } from "./simd";
import { nibblesAt, scalesMinsK4, weights } from "./kquant";

/** bytes of a super-block of a group of n tokens, and where its parts start (kquant-slots.ts's streams too) */
// @ts-ignore: decorator
@inline export function kgroupBytes(n: usize): usize { return 308 * n; }
// @ts-ignore: decorator
@inline export function sums16(n: usize): usize { return n << 2; }
// @ts-ignore: decorator
@inline export function sums32(n: usize): usize { return 36 * n; }
// @ts-ignore: decorator
@inline export function acts(n: usize): usize { return 52 * n; }

/**
 * token k's head of super-block i in a group of n at o: its scale (from xd) and its sums of 16 and
 * of 32 (from the i32 sums of 16 at xb), as both group streams hold them
 */
// @ts-ignore: decorator
@inline export function packTokenSums(xd: usize, xb: usize, i: usize, o: usize, k: usize, n: usize): void {
  store<f32>(o + (k << 2), load<f32>(xd + (i << 2)));
  const bs = xb + (i << 6);
  for (let j: usize = 0; j < 16; j++) store<i16>(o + sums16(n) + (k << 5) + (j << 1), <i16>load<i32>(bs + (j << 2)));
  for (let j: usize = 0; j < 8; j++) store<i16>(o + sums32(n) + (k << 4) + (j << 1), <i16>(load<i32>(bs + (j << 3)) + load<i32>(bs + (j << 3), 4)));
}

/**
 * Writes the group streams of a batch from the Q8_K activations (int16 at xq, 512 bytes a
 * super-block; scales at xd; i32 sums of 16 at xb; before packQ8_K narrows them) to g: groups of
 * eight tokens, then one of four where four or more are left, one after the other.
 */
export function packQ8_KGroups(xq: usize, xd: usize, xb: usize, g: usize, cols: i32, nTok: i32): void {
  let o = g, t = 0;
  for (; t + 8 <= nTok; t += 8) o = packKGroup(xq, xd, xb, o, cols, t, 8);
  if (t + 4 <= nTok) packKGroup(xq, xd, xb, o, cols, t, 4);
}

/** tokens [t, t + n) as one group at o; returns its end */
function packKGroup(xq: usize, xd: usize, xb: usize, o: usize, cols: i32, t: i32, n: usize): usize {
  const nb = <usize>(cols >> 8);
  for (let b: usize = 0; b < nb; b++, o += kgroupBytes(n)) {
    for (let k: usize = 0; k < n; k++) {
      const i = (<usize>t + k) * nb + b;
      packTokenSums(xd, xb, i, o, k, n);
      const q = xq + (i << 9);
      for (let j: usize = 0; j < 8; j++) {
        const x = q + (j << 6);
        const a = o + acts(n) + ((j * n) << 5) + (k << 5);
        v128.store(a, i8x16.narrow_i16x8_s(v128.load(x), v128.load(x, 16)));
        v128.store(a, i8x16.narrow_i16x8_s(v128.load(x, 32), v128.load(x, 48)), 16);
      }
    }
  }
  return o;
}

/** one 32-weight sub-block's dot (unsigned weights u0, u1) for the token at x, times the scale s, added to acc */
// @ts-ignore: decorator
@inline function sub32(acc: v128, u0: v128, u1: v128, x: usize, s: v128): v128 {
  return i32x4.add(acc, i32x4.dot_i16x8_s(i16x8.add(dotI8I7(v128.load(x), u0), dotI8I7(v128.load(x, 16), u1)), s));
}

/** where in the thread's slot rowQ4_KGroup keeps the eight sub-block scales, each twice in 32 bits */
const SCALE_SLOTS: usize = 64;

/**
 * a store of an accumulator into the slot's spare bytes (sums + 32): a later load may not move
 * above a store, so each pair of tokens' activation loads stays next to its dots. Without it V8
 * loads all eight tokens' vectors first and spills accumulators and loaded vectors every pass.
 */
// @ts-ignore: decorator
@inline function storeBarrier(sums: usize, acc: v128): void {
  v128.store(sums, acc, 32);
}

/** adds the group's super-block values v03 (tokens 0..3) and v47 (4..7; none for `four`) to their sums at sums */
// @ts-ignore: decorator
@inline function addValues(sums: usize, v03: v128, v47: v128, four: bool): void {
  v128.store(sums, f32x4.add(v128.load(sums), v03));
  if (!four) v128.store(sums, f32x4.add(v128.load(sums, 16), v47), 16);
}

/**
 * Q4_K (q5: Q5_K): one row against the eight (`four`: four) tokens of the group stream at g;
 * sums: the thread's slot, 32 bytes for the running sums, 16 spare ones that the loop stores an
 * accumulator into after every two tokens (storeBarrier), and at SCALE_SLOTS the super-block's
 * scales for their broadcasts. superQ4_K's value per token: d * isum - dmin * msum with
 * d = wd * dx, dmin = wm * dx.
 */
// @ts-ignore: decorator
@inline function rowQ4_KGroup(q5: bool, wr: usize, bb: usize, nb: i32, g: usize, sums: usize, out: usize, outStride: usize, four: bool): void {
  const n: usize = four ? 4 : 8;
  const mask = i8x16.splat(0x0f);
  const z = i32x4.splat(0);
  v128.store(sums, z);
  v128.store(sums, z, 16);
  let s = g;
  for (let b = 0; b < nb; b++, s += kgroupBytes(n)) {
    const p = wr + <usize>b * bb;
    const sc = p + 4;
    let i0 = z, i1 = z, i2 = z, i3 = z, i4 = z, i5 = z, i6 = z, i7 = z;
    const scalesMins = scalesMinsK4(sc);
    // the eight scales as int16, each twice in an int32 (sub-block j's at slot + 4j), so that
    // each sub-block's broadcast is a load the load unit broadcasts: a swizzle per sub-block
    // bound this loop (shuffles: 74 -> 87 GOPS on one thread without it, docs/kernels.md)
    const scales = i16x8.extend_low_i8x16_u(scalesMins);
    v128.store(sums, i8x16.shuffle(scales, scales, 0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7), SCALE_SLOTS);
    v128.store(sums, i8x16.shuffle(scales, scales, 8, 9, 8, 9, 10, 11, 10, 11, 12, 13, 12, 13, 14, 15, 14, 15), SCALE_SLOTS + 16);
    // sub-block j: the low nibbles of 32 bytes (j even, loaded) or their high nibbles (j odd,
    // shifted down); Q5_K's fifth bits of sub-block j at bit 0 of f0 / f1 (shifted down each step)
    let v0 = mask, v1 = mask;
    let f0 = q5 ? v128.load(p, 16) : mask, f1 = q5 ? v128.load(p, 32) : mask;
    for (let j = 0; j < 8; j++) {
      if ((j & 1) == 0) {
        const q = p + nibblesAt(q5) + (<usize>(j >> 1) << 5);
        v0 = v128.load(q);
        v1 = v128.load(q, 16);
      } else {
        v0 = i16x8.shr_u(v0, 4);
        v1 = i16x8.shr_u(v1, 4);
      }
      const x = s + acts(n) + ((<usize>j * n) << 5);
      const sv = v128.load32_splat(sums + SCALE_SLOTS + (<usize>j << 2));
      const u0 = weights(q5, v0, f0, false, 0, mask), u1 = weights(q5, v1, f1, false, 0, mask);
      i0 = sub32(i0, u0, u1, x, sv);
      i1 = sub32(i1, u0, u1, x + 32, sv);
      storeBarrier(sums, i1);
      i2 = sub32(i2, u0, u1, x + 64, sv);
      i3 = sub32(i3, u0, u1, x + 96, sv);
      storeBarrier(sums, i3);
      if (!four) {
        i4 = sub32(i4, u0, u1, x + 128, sv);
        i5 = sub32(i5, u0, u1, x + 160, sv);
        storeBarrier(sums, i5);
        i6 = sub32(i6, u0, u1, x + 192, sv);
        i7 = sub32(i7, u0, u1, x + 224, sv);
        storeBarrier(sums, i7);
      }
      if (q5) {
        f0 = i16x8.shr_u(f0, 1);
        f1 = i16x8.shr_u(f1, 1);
      }
    }
    // the min term: each sub-block's min times its activation sum, for each token
    const mins = i16x8.extend_high_i8x16_u(scalesMins);
    const m = s + sums32(n);
    const m03 = lanesSum(i32x4.dot_i16x8_s(mins, v128.load(m)), i32x4.dot_i16x8_s(mins, v128.load(m, 16)), i32x4.dot_i16x8_s(mins, v128.load(m, 32)), i32x4.dot_i16x8_s(mins, v128.load(m, 48)));
    const wd = f32x4.splat(f16(load<u16>(p))), wm = f32x4.splat(f16(load<u16>(p, 2)));
    const dx03 = v128.load(s);
    const v03 = f32x4.sub(f32x4.mul(f32x4.mul(wd, dx03), f32x4.convert_i32x4_s(lanesSum(i0, i1, i2, i3))), f32x4.mul(f32x4.mul(wm, dx03), f32x4.convert_i32x4_s(m03)));
    let v47 = v03;
    if (!four) {
      const m47 = lanesSum(i32x4.dot_i16x8_s(mins, v128.load(m, 64)), i32x4.dot_i16x8_s(mins, v128.load(m, 80)), i32x4.dot_i16x8_s(mins, v128.load(m, 96)), i32x4.dot_i16x8_s(mins, v128.load(m, 112)));
      const dx47 = v128.load(s, 16);
      v47 = f32x4.sub(f32x4.mul(f32x4.mul(wd, dx47), f32x4.convert_i32x4_s(lanesSum(i4, i5, i6, i7))), f32x4.mul(f32x4.mul(wm, dx47), f32x4.convert_i32x4_s(m47)));
    }
    addValues(sums, v03, v47, four);
  }
  storeSums(sums, out, outStride, n);
}

/** the n tokens' sums to out, one token outStride bytes after the other */
// @ts-ignore: decorator
@inline function storeSums(sums: usize, out: usize, outStride: usize, n: usize): void {
  for (let k: usize = 0; k < n; k++) store<f32>(out + k * outStride, load<f32>(sums + (k << 2)));
}

/**
 * Rows [r0, r1) of the batch's groups of eight tokens, then of four (kind: 1 Q5_K, the one left;
 * out[t * rows + r]); the group streams at groups, 48 bytes of the thread's own at sums. Returns
 * the first token left for kquant.ts's tiles.
 */
export function matKGroups(kind: i32, w: usize, rowBytes: usize, groups: usize, sums: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): i32 {
  const nb = cols >> 8;
  const outStride = (<usize>rows) << 2;
  let t = 0, g = groups;
  for (; t + 8 <= nTok; t += 8, g += <usize>nb * kgroupBytes(8)) rowsOfGroup(kind, w, rowBytes, g, sums, out + <usize>t * outStride, outStride, nb, r0, r1, false);
  if (t + 4 <= nTok) {
    rowsOfGroup(kind, w, rowBytes, g, sums, out + <usize>t * outStride, outStride, nb, r0, r1, true);
    t += 4;
  }
  return t;
}

/** rows [r0, r1) of one group (out: its first token's outputs) */
// @ts-ignore: decorator
@inline function rowsOfGroup(kind: i32, w: usize, rowBytes: usize, g: usize, sums: usize, out: usize, outStride: usize, nb: i32, r0: i32, r1: i32, four: bool): void {
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * rowBytes;
    const o = out + ((<usize>r) << 2);
    rowQ4_KGroup(true, wr, 176, nb, g, sums, o, outStride, four);
  }
}
