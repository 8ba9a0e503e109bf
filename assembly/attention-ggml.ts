// Causal attention in llama.cpp's order (x86 CPU backend, no flash attention, F32 cache), bit
// for bit as the reference (src/kernels/ops/attention.ts): q.k as ggml_vec_dot_f32 (four
// 16-lane fused multiply-add accumulators per 64 elements, then a tree sum), softmax with
// ggml_v_expf over 16-lane chunks whose sums add in f64, and the weighted values as tinyBLAS
// (batches: one 16-lane accumulator over the positions) or ggml_vec_dot_f32 (one token). Its
// fused multiply-adds are Relaxed SIMD's f32x4.relaxed_madd, fused on x86 CPUs with FMA: so this
// kernel exists only in the relaxed build, and the host uses it only where the runtime fuses.
// Unlike attention.ts (online softmax) it keeps one row of scores per item, O(context) floats
// of per-thread scratch. headDim must be a multiple of 4 (the host checks).
//
// The same order over an f16 cache (llama.cpp's default cache without flash attention;
// HALF_KEYS / HALF_VALUES): f16 keys meet a query the host rounded to f16, and a batch's q.k is
// tinyBLAS's (one 16-lane accumulator); the softmax weights are rounded to f16 before the values.
// Read in place (decode), halves enter the arithmetic times 2^-112 (half.ts's scaledHalves: an
// integer move), the query and the weights times 2^112, so each product is the same real number
// and the bits do not change; that move maps Inf/NaN halves to finite values, so the kernel reports
// any it met and the host redoes the pass in the reference order. headDim must then be a multiple
// of 8. A prompt's f16 rows are instead converted to f32 rows once for the pass (every token's
// heads read them; KEYS_STAGED / VALUES_STAGED: f32 rows, position j at row j), exact, and read
// as f32 rows in f16's order.

import { expGgml, fma } from "./ggml-math";
import { rowAt } from "./attention";
import { F16_UNSCALE, roundF16x4, scaledHalves } from "./half";
import { store4, store8 } from "./simd";

/** attendGgml's `halves` bits: the cache's keys, its values are f16 (the f16 order) */
export const HALF_KEYS: i32 = 1;
export const HALF_VALUES: i32 = 2;
/** ... and were converted to f32 rows for this pass, position j at row j */
export const KEYS_STAGED: i32 = 4;
export const VALUES_STAGED: i32 = 8;

/** the reference's reduce16 (_mm512_reduce_add_ps): lanes 0..15 held as four vectors */
// @ts-ignore: decorator
@inline function reduce16(a0: v128, a1: v128, a2: v128, a3: v128): f32 {
  const b = f32x4.add(f32x4.add(a3, a1), f32x4.add(a2, a0));
  return (f32x4.extract_lane(b, 0) + f32x4.extract_lane(b, 2)) + (f32x4.extract_lane(b, 1) + f32x4.extract_lane(b, 3));
}

/**
 * (acc0 + acc2) + (acc1 + acc3) of ggml_vec_dot_f32's four 16-lane accumulators, at lanes
 * o/4..o/4+3, for n = 64 floats at x and y (o = 16, 48: quarter 1's low and high halves; 0, 32:
 * quarter 0's). Stored before the next is computed: V8 hoists a straight-line body's loads
 * above its arithmetic, and the 32 loads of a whole dot spilled half of them. For 64 floats each
 * accumulator lane holds one product, which ggml forms as a fused multiply-add onto +0; a plain
 * multiply gives the same number but for -0 where a factor is zero, a sign that leaves no trace
 * past the softmax (e^(s - max) is 1 for either zero), and V8 emits it without the register copy
 * its destructive FMA needed
 */
// @ts-ignore: decorator
@inline function eighth64(x: usize, y: usize, o: usize): v128 {
  const a = x + o, b = y + o;
  return f32x4.add(f32x4.add(f32x4.mul(v128.load(a), v128.load(b)), f32x4.mul(v128.load(a, 128), v128.load(b, 128))), f32x4.add(f32x4.mul(v128.load(a, 64), v128.load(b, 64)), f32x4.mul(v128.load(a, 192), v128.load(b, 192))));
}

/** eighth64 over n = 64 * chunks floats: each of its four accumulators run over the chunks */
// @ts-ignore: decorator
@inline function eighth(x: usize, y: usize, o: usize, chunks: i32): v128 {
  if (chunks == 1) return eighth64(x, y, o);
  const z = f32x4.splat(0);
  let a0 = z, a1 = z, a2 = z, a3 = z;
  let a = x + o, b = y + o;
  for (let c = 0; c < chunks; c++, a += 256, b += 256) {
    a0 = fma(v128.load(a), v128.load(b), a0);
    a1 = fma(v128.load(a, 64), v128.load(b, 64), a1);
    a2 = fma(v128.load(a, 128), v128.load(b, 128), a2);
    a3 = fma(v128.load(a, 192), v128.load(b, 192), a3);
  }
  return f32x4.add(f32x4.add(a0, a2), f32x4.add(a1, a3));
}

/**
 * One key's dot at x with the query at y before reduce16's last step, stored at `at`: quarters 1
 * and 0 (lanes 4..7 + 12..15, 0..3 + 8..11: reduce16's (q3 + q1) and (q2 + q0)) added, each quarter
 * its high half + its low half; `half` is scratch for one vector
 */
// @ts-ignore: decorator
@inline function keyPartials(x: usize, y: usize, at: usize, half: usize, chunks: i32): void {
  v128.store(at, eighth(x, y, 16, chunks));
  v128.store(at, f32x4.add(eighth(x, y, 48, chunks), v128.load(at)));
  v128.store(half, eighth(x, y, 0, chunks));
  v128.store(at, f32x4.add(v128.load(at), f32x4.add(eighth(x, y, 32, chunks), v128.load(half))));
}

/**
 * eighth64 for two keys at xa and xb with one query at y (its four vectors loaded once for both),
 * each result combined as keyPartials combines that piece: mode 0 stored at t, 1 added to what
 * is at t (e + t), 2 stored at h, 3 added as t + (e + h)
 */
// @ts-ignore: decorator
@inline function eighth64x2(xa: usize, xb: usize, y: usize, o: usize, ta: usize, tb: usize, ha: usize, hb: usize, mode: i32): void {
  const b = y + o, a = xa + o, c = xb + o;
  const q0 = v128.load(b), q1 = v128.load(b, 64), q2 = v128.load(b, 128), q3 = v128.load(b, 192);
  const ea = f32x4.add(f32x4.add(f32x4.mul(v128.load(a), q0), f32x4.mul(v128.load(a, 128), q2)), f32x4.add(f32x4.mul(v128.load(a, 64), q1), f32x4.mul(v128.load(a, 192), q3)));
  const eb = f32x4.add(f32x4.add(f32x4.mul(v128.load(c), q0), f32x4.mul(v128.load(c, 128), q2)), f32x4.add(f32x4.mul(v128.load(c, 64), q1), f32x4.mul(v128.load(c, 192), q3)));
  storePieces(ea, eb, ta, tb, ha, hb, mode);
}

/** eighth64x2's results ea and eb for its two keys, combined as `mode` says */
// @ts-ignore: decorator
@inline function storePieces(ea: v128, eb: v128, ta: usize, tb: usize, ha: usize, hb: usize, mode: i32): void {
  if (mode == 0) {
    v128.store(ta, ea);
    v128.store(tb, eb);
  } else if (mode == 1) {
    v128.store(ta, f32x4.add(ea, v128.load(ta)));
    v128.store(tb, f32x4.add(eb, v128.load(tb)));
  } else if (mode == 2) {
    v128.store(ha, ea);
    v128.store(hb, eb);
  } else {
    v128.store(ta, f32x4.add(v128.load(ta), f32x4.add(ea, v128.load(ha))));
    v128.store(tb, f32x4.add(v128.load(tb), f32x4.add(eb, v128.load(hb))));
  }
}

/** eighth64's sum over a key's four vectors k0..k3 and a query's q0..q3 held in registers */
// @ts-ignore: decorator
@inline function eighthOf(k0: v128, k1: v128, k2: v128, k3: v128, q0: v128, q1: v128, q2: v128, q3: v128): v128 {
  return f32x4.add(f32x4.add(f32x4.mul(k0, q0), f32x4.mul(k2, q2)), f32x4.add(f32x4.mul(k1, q1), f32x4.mul(k3, q3)));
}

/**
 * eighth64x2 for two heads' queries at ya and yb (heads of one KV group) over the same two keys:
 * the keys' eight vectors loaded once for both heads, each head's products and sums as
 * eighth64x2's; the first head's results stored (ta, tb; halves ha) before the second's query is
 * loaded (V8 would otherwise hoist every load), the second's at tc, td (halves hc)
 */
// @ts-ignore: decorator
@inline function eighth64x2x2(xa: usize, xb: usize, ya: usize, yb: usize, o: usize, ta: usize, tb: usize, tc: usize, td: usize, ha: usize, hc: usize, mode: i32): void {
  const a = xa + o, c = xb + o;
  const a0 = v128.load(a), a1 = v128.load(a, 64), a2 = v128.load(a, 128), a3 = v128.load(a, 192);
  const c0 = v128.load(c), c1 = v128.load(c, 64), c2 = v128.load(c, 128), c3 = v128.load(c, 192);
  let b = ya + o;
  let q0 = v128.load(b), q1 = v128.load(b, 64), q2 = v128.load(b, 128), q3 = v128.load(b, 192);
  storePieces(
    eighthOf(a0, a1, a2, a3, q0, q1, q2, q3),
    eighthOf(c0, c1, c2, c3, q0, q1, q2, q3),
    ta, tb, ha, ha + 16, mode,
  );
  b = yb + o;
  q0 = v128.load(b); q1 = v128.load(b, 64); q2 = v128.load(b, 128); q3 = v128.load(b, 192);
  storePieces(
    eighthOf(a0, a1, a2, a3, q0, q1, q2, q3),
    eighthOf(c0, c1, c2, c3, q0, q1, q2, q3),
    tc, td, hc, hc + 16, mode,
  );
}

/** keyPartials2 for two heads (queries at ya and yb) over keys xa and xb: results at ta, tb and tc, td (half: scratch for four vectors) */
// @ts-ignore: decorator
@inline function keyPartials2x2(xa: usize, xb: usize, ya: usize, yb: usize, ta: usize, tb: usize, tc: usize, td: usize, half: usize): void {
  eighth64x2x2(xa, xb, ya, yb, 16, ta, tb, tc, td, half, half + 32, 0);
  eighth64x2x2(xa, xb, ya, yb, 48, ta, tb, tc, td, half, half + 32, 1);
  eighth64x2x2(xa, xb, ya, yb, 0, ta, tb, tc, td, half, half + 32, 2);
  eighth64x2x2(xa, xb, ya, yb, 32, ta, tb, tc, td, half, half + 32, 3);
}

/**
 * keyPartials (head size 64) for two keys at xa and xb, stored at ta and tb: the same operations
 * per key, the query's vectors loaded once for the pair (half: scratch for two vectors)
 */
// @ts-ignore: decorator
@inline function keyPartials2(xa: usize, xb: usize, y: usize, ta: usize, tb: usize, half: usize): void {
  eighth64x2(xa, xb, y, 16, ta, tb, half, half + 16, 0);
  eighth64x2(xa, xb, y, 48, ta, tb, half, half + 16, 1);
  eighth64x2(xa, xb, y, 0, ta, tb, half, half + 16, 2);
  eighth64x2(xa, xb, y, 32, ta, tb, half, half + 16, 3);
}

/**
 * ggml_vec_dot_f32 of n floats at x and y: the 64-float chunks through keyPartials (reduce16's
 * (q3 + q1) + (q2 + q0), then its last step), the rest added one by one; tmp is scratch for two vectors
 */
// @ts-ignore: decorator
@inline export function vecDot(x: usize, y: usize, n: i32, tmp: usize): f32 {
  const np = n & ~63;
  let sum: f32 = 0;
  if (np > 0) {
    keyPartials(x, y, tmp, tmp + 16, np >> 6);
    const b = v128.load(tmp);
    sum = (f32x4.extract_lane(b, 0) + f32x4.extract_lane(b, 2)) + (f32x4.extract_lane(b, 1) + f32x4.extract_lane(b, 3));
  }
  for (let i = np; i < n; i++) sum += load<f32>(x + (<usize>i << 2)) * load<f32>(y + (<usize>i << 2));
  return sum;
}

/** reduce16's last step for four dots at once: lane p = (b_p[0] + b_p[2]) + (b_p[1] + b_p[3]) */
// @ts-ignore: decorator
@inline function lastStep4(b0: v128, b1: v128, b2: v128, b3: v128): v128 {
  const s01 = f32x4.add(i32x4.shuffle(b0, b1, 0, 1, 4, 5), i32x4.shuffle(b0, b1, 2, 3, 6, 7));
  const s23 = f32x4.add(i32x4.shuffle(b2, b3, 0, 1, 4, 5), i32x4.shuffle(b2, b3, 2, 3, 6, 7));
  return f32x4.add(i32x4.shuffle(s01, s23, 0, 2, 4, 6), i32x4.shuffle(s01, s23, 1, 3, 5, 7));
}

/**
 * The most heads of one KV group that go through its keys and values together: each cached row
 * is then read from memory once per run and from L1 for the run's other heads
 */
const MAX_RUN: i32 = 8;
/** keys per block of the score pass: a block's key rows (8 KB at head size 64) stay in L1 across the run's heads */
const KEY_BLOCK: i32 = 32;

// @ts-ignore: decorator
@inline function runLength(group: i32): i32 {
  return min<i32>(group, MAX_RUN);
}

/**
 * per-thread scratch bytes: per head of a run its score row and value accumulators, the block's
 * partial dots of two heads and four vectors, a key block converted from f16, and the non-finite tally
 */
export function attendGgmlScratchBytes(nAll: i32, headDim: i32, group: i32): usize {
  const padded = (nAll + 63) & ~63;
  return (<usize>runLength(group)) * ((((<usize>padded) << 2) + ((<usize>(64 * headDim)) << 2))) + ((<usize>(2 * KEY_BLOCK) + 4) << 4) + ((<usize>(KEY_BLOCK * headDim)) << 2) + 16;
}

/**
 * Items [i0, i1) of the job (item = t * nHeads + h), as attend() in attention.ts, for a batch of
 * nTok query tokens; `scratch` holds attendGgmlScratchBytes(startPos + nTok, headDim, group) bytes
 * of this thread's own. Consecutive items of one token whose heads share a KV head go as one run
 * (same arithmetic per head as one at a time: only the order of independent sums changes)
 */
export function attendGgml(q: usize, k: usize, v: usize, rows: usize, out: usize, nHeads: i32, nKvHeads: i32, headDim: i32, startPos: i32, nTok: i32, scale: f32, i0: i32, i1: i32, scratch: usize, halves: i32, nonFinite: usize, plane: i32 = 0): void {
  const group = nHeads / nKvHeads;
  // the largest f16 bits (shifted left once, sign dropped) met, per lane, in the slot's last 16 bytes
  const tally = scratch + attendGgmlScratchBytes(startPos + nTok, headDim, group) - 16;
  v128.store(tally, i16x8.splat(0));
  let item = i0;
  while (item < i1) {
    const h = item % nHeads;
    const n = min<i32>(i1 - item, min<i32>((h / group + 1) * group - h, runLength(group)));
    attendRun(q, k, v, rows, out, nHeads, group, nKvHeads, headDim, startPos, nTok, scale, item, n, scratch, halves, tally, plane);
    item += n;
  }
  // an exponent of all ones (Inf, NaN) shifted left once is 0xf800 or more
  if (halves != 0 && v128.any_true(i16x8.ge_u(v128.load(tally), i16x8.splat(<i16>0xf800)))) atomic.store<i32>(nonFinite, 1);
}

/** headDim halves at src as f32 times 2^-112 to dst, their largest bits (shifted left once) into the tally vector */
// @ts-ignore: decorator
@inline function convertKey(src: usize, dst: usize, headDim: i32, seen: v128): v128 {
  for (let d: usize = 0; d < (<usize>headDim << 1); d += 16) {
    const h = v128.load(src + d);
    seen = i16x8.max_u(seen, i16x8.shl(h, 1));
    v128.store(dst + (d << 1), scaledHalves(h, false));
    v128.store(dst + (d << 1), scaledHalves(h, true), 16);
  }
  return seen;
}

/** tinyBLAS's dot of n floats at x and y (n a multiple of 16): one 16-lane fused accumulator, then reduce16 */
// @ts-ignore: decorator
@inline function tinyBlasDot(x: usize, y: usize, n: i32): f32 {
  const z = f32x4.splat(0);
  let a0 = z, a1 = z, a2 = z, a3 = z;
  for (let i: usize = 0; i < (<usize>n << 2); i += 64) {
    a0 = fma(v128.load(x + i), v128.load(y + i), a0);
    a1 = fma(v128.load(x + i, 16), v128.load(y + i, 16), a1);
    a2 = fma(v128.load(x + i, 32), v128.load(y + i, 32), a2);
    a3 = fma(v128.load(x + i, 48), v128.load(y + i, 48), a3);
  }
  return reduce16(a0, a1, a2, a3);
}

/** items [item, item + n) of one token, their heads sharing one KV head */
function attendRun(q: usize, k: usize, v: usize, rows: usize, out: usize, nHeads: i32, group: i32, nKvHeads: i32, headDim: i32, startPos: i32, nTok: i32, scale: f32, item: i32, n: i32, scratch: usize, halves: i32, tally: usize, plane: i32): void {
  const rowBytes = (<usize>headDim) << 2;
  // f16 sides in f16's order; halfK / halfV: read as halves in place (not staged as f32 rows)
  const halfKeyOrder = (halves & HALF_KEYS) != 0, halfValueOrder = (halves & HALF_VALUES) != 0;
  const kStaged = (halves & KEYS_STAGED) != 0, vStaged = (halves & VALUES_STAGED) != 0;
  const halfK = halfKeyOrder && !kStaged, halfV = halfValueOrder && !vStaged;
  // bytes of one KV head's row per side (2 bytes an f16), between positions' rows (a row of
  // every head, or in a cache of planes per KV head one head row; staged rows hold every head),
  // and to the KV head's rows (its slice of a row, or its plane); the row index (0: staged, row j at j)
  const kHead: usize = halfK ? rowBytes >> 1 : rowBytes, vHead: usize = halfV ? rowBytes >> 1 : rowBytes;
  const kPlane = <usize>(kStaged ? 0 : plane), vPlane = <usize>(vStaged ? 0 : plane);
  const kStride = kPlane != 0 ? kHead : kHead * <usize>nKvHeads, vStride = vPlane != 0 ? vHead : vHead * <usize>nKvHeads;
  const kIndex = kStaged ? 0 : rows, vIndex = vStaged ? 0 : rows;
  const nAll = startPos + nTok;
  const padded = (nAll + 63) & ~63;
  const scoreBytes = (<usize>padded) << 2;
  const accBytes = (<usize>(64 * headDim)) << 2;
  // per head i of the run: its scores at p0 + i * scoreBytes, its accumulators at acc0 + i * accBytes
  const p0 = scratch;
  const acc0 = p0 + (<usize>n) * scoreBytes;
  const partial = acc0 + (<usize>n) * accBytes;
  // the partial dots of a pair's second head (head size 64: two heads of the run at a time)
  const partialB = partial + ((<usize>KEY_BLOCK) << 4);
  const half = partialB + ((<usize>KEY_BLOCK) << 4);
  // f16 keys: each block's rows converted here, key i at keyBlock + (i - j0) * rowBytes
  const keyBlock = half + 64;
  let seen = v128.load(tally);
  const batch = nTok >= 2;
  const nAcc: usize = batch ? 16 : 64;
  const zero = f32x4.splat(0);
  const t = item / nHeads;
  const kvHead = <usize>((item % nHeads) / group);
  const kBase = k + kvHead * (kPlane != 0 ? kPlane * kHead : kHead);
  const vBase = v + kvHead * (vPlane != 0 ? vPlane * vHead : vHead);
  const nKeys = startPos + t + 1;
  const chunks = headDim >> 6;
  const scaleV = f32x4.splat(scale);
  // scores, scaled, block by block of keys, every head of the run through a block before the next
  for (let j0 = 0; j0 < nKeys; j0 += KEY_BLOCK) {
    const j1 = min<i32>(nKeys, j0 + KEY_BLOCK);
    // key i's row: in the cache, or (f16) converted into the key block once for the run's heads
    let kAt = kBase, kRowStride = kStride, kRows = kIndex;
    if (halfK) {
      for (let i = j0; i < j1; i++) seen = convertKey(kBase + rowAt(rows, i, kStride), keyBlock + (<usize>(i - j0)) * rowBytes, headDim, seen);
      kAt = keyBlock - (<usize>j0) * rowBytes;
      kRowStride = rowBytes;
      kRows = 0;
    }
    for (let r = 0; r < n; r++) {
      const qp = q + (<usize>(item + r)) * rowBytes;
      const p = p0 + (<usize>r) * scoreBytes;
      let j = j0;
      if (halfKeyOrder && batch && (headDim & 15) == 0) {
        // a batch over f16 keys: tinyBLAS (ggml converted the queries, so its matrix product takes them)
        for (; j < j1; j++) store<f32>(p + ((<usize>j) << 2), tinyBlasDot(keyRow(kAt, kRows, j, kRowStride), qp, headDim) * scale);
      } else if ((headDim & 63) == 0) {
        // Head sizes of 64k: each key's dot in four pieces, each stored before the next is
        // computed (see eighth64), then reduce16's last step for four keys at a time in one
        // vector, scaled and stored. Head size 64 gets the pieces written out (the loop over
        // chunks cost it ~30%)
        // Head size 64: heads two at a time (each key's vectors loaded once for both; the second
        // head's partials wait at partialB for its own turn, the odd one out goes alone)
        const second = chunks == 1 && (r & 1) == 1;
        const pieces = second ? partialB : partial;
        if (chunks == 1 && !second) {
          let i = j0;
          if (r + 1 < n) {
            const qb = qp + rowBytes;
            for (; i + 2 <= j1; i += 2) {
              const at = ((<usize>(i - j0)) << 4);
              keyPartials2x2(keyRow(kAt, kRows, i, kRowStride), keyRow(kAt, kRows, i + 1, kRowStride), qp, qb, partial + at, partial + at + 16, partialB + at, partialB + at + 16, half);
            }
            if (i < j1) keyPartials(keyRow(kAt, kRows, i, kRowStride), qb, partialB + ((<usize>(i - j0)) << 4), half, 1);
          } else {
            for (; i + 2 <= j1; i += 2) {
              const at = partial + ((<usize>(i - j0)) << 4);
              keyPartials2(keyRow(kAt, kRows, i, kRowStride), keyRow(kAt, kRows, i + 1, kRowStride), qp, at, at + 16, half);
            }
          }
          if (i < j1) keyPartials(keyRow(kAt, kRows, i, kRowStride), qp, partial + ((<usize>(i - j0)) << 4), half, 1);
        }
        else if (!second) for (let i = j0; i < j1; i++) keyPartials(keyRow(kAt, kRows, i, kRowStride), qp, partial + ((<usize>(i - j0)) << 4), half, chunks);
        for (; j + 4 <= j1; j += 4) {
          const at = pieces + ((<usize>(j - j0)) << 4);
          v128.store(p + ((<usize>j) << 2), f32x4.mul(lastStep4(v128.load(at), v128.load(at, 16), v128.load(at, 32), v128.load(at, 48)), scaleV));
        }
        for (; j < j1; j++) {
          const b = v128.load(pieces + ((<usize>(j - j0)) << 4));
          store<f32>(p + ((<usize>j) << 2), ((f32x4.extract_lane(b, 0) + f32x4.extract_lane(b, 2)) + (f32x4.extract_lane(b, 1) + f32x4.extract_lane(b, 3))) * scale);
        }
      }
      // other head sizes: ggml_vec_dot_f32 (for f16 keys ggml_vec_dot_f16, whose elements past the last 64 add in f64)
      for (; j < j1; j++) store<f32>(p + ((<usize>j) << 2), (halfKeyOrder ? vecDotF16(keyRow(kAt, kRows, j, kRowStride), qp, headDim, partial) : vecDot(keyRow(kAt, kRows, j, kRowStride), qp, headDim, partial)) * scale);
    }
  }
  // softmax, per head: e^(s - max) in 16-lane chunks, each chunk's tree sum added in f64. Chunks
  // wholly past the last unmasked key are e^-inf = 0, add 0 to the sum and are never read:
  // skipped; the masked tail of the last live chunk is -inf
  const live = (<usize>((nKeys + 15) & ~15)) << 2;
  for (let r = 0; r < n; r++) {
    const p = p0 + (<usize>r) * scoreBytes;
    let mv = f32x4.splat(-Infinity);
    let j = 0;
    for (; j + 4 <= nKeys; j += 4) mv = f32x4.max(mv, v128.load(p + ((<usize>j) << 2)));
    let m = max<f32>(max<f32>(f32x4.extract_lane(mv, 0), f32x4.extract_lane(mv, 1)), max<f32>(f32x4.extract_lane(mv, 2), f32x4.extract_lane(mv, 3)));
    for (; j < nKeys; j++) m = max<f32>(m, load<f32>(p + ((<usize>j) << 2)));
    for (let c = (<usize>nKeys) << 2; c < live; c += 4) store<f32>(p + c, -Infinity);
    const mvs = f32x4.splat(m);
    let sum: f64 = 0;
    for (let c: usize = 0; c < live; c += 64) {
      const e0 = expGgml(f32x4.sub(v128.load(p + c), mvs));
      const e1 = expGgml(f32x4.sub(v128.load(p + c, 16), mvs));
      const e2 = expGgml(f32x4.sub(v128.load(p + c, 32), mvs));
      const e3 = expGgml(f32x4.sub(v128.load(p + c, 48), mvs));
      v128.store(p + c, e0);
      v128.store(p + c, e1, 16);
      v128.store(p + c, e2, 32);
      v128.store(p + c, e3, 48);
      sum += <f64>reduce16(e0, e1, e2, e3);
    }
    const inv = f32x4.splat(<f32>(1 / sum));
    if (halfValueOrder) {
      // ggml converts the weights to f16 for the product with f16 values; times 2^112 against values taken times 2^-112 in place
      const u = f32x4.splat(halfV ? F16_UNSCALE : 1);
      for (let c: usize = 0; c < live; c += 16) v128.store(p + c, f32x4.mul(roundF16x4(f32x4.mul(v128.load(p + c), inv)), u));
    } else for (let c: usize = 0; c < live; c += 16) v128.store(p + c, f32x4.mul(v128.load(p + c), inv));
  }
  // weighted values, vectorised over the head's dimensions: accumulator l of dimension d is
  // the reference's lane l for that d (position j feeds lane j % 16 for tinyBLAS, j % 64 for
  // vec_dot's four accumulators). Each accumulator sees only its own positions, in order, so
  // it is run to the end over positions l, l + nAcc, ... in registers, 32 dimensions at a
  // time, for each head of the run in turn (the rows' lines are then in L1). The reference also
  // adds v * 0 for every masked or padded position: that leaves an accumulator unchanged (it
  // starts at +0 and a sum is -0 only if both terms are; finite v), so those positions are skipped
  // Lanes at or past nKeys see no position: they would stay +0 and add +0 in the sums below,
  // which changes no bit (an accumulator is never -0), so only the live lanes are swept and a
  // short context skips the sweeps, stores and sums of up to 63 empty lanes a head
  const lanes = min<usize>(nAcc, <usize>nKeys);
  for (let l: usize = 0; l < lanes; l++) {
    let d: usize = 0;
    for (; d + 128 <= rowBytes; d += 128) {
      // the barrier pays where a sweep is long (prompts: nKeys / 16 positions; decode after
      // 1536 keys: 24), and costs where it is short (decode after 128 keys: 2 positions a sweep)
      // heads two at a time: each row's vectors loaded (and converted) once for both
      let r = 0;
      for (; r + 2 <= n; r += 2) {
        const pa = p0 + (<usize>r) * scoreBytes, a = acc0 + (<usize>r) * accBytes + l * rowBytes + d;
        if (halfV) {
          seen = valueSweep16x2(pa, pa + scoreBytes, vBase + (d >> 1), rows, vStride, <i32>l, nKeys, <i32>nAcc, a, a + accBytes, seen, true);
          seen = valueSweep16x2(pa, pa + scoreBytes, vBase + (d >> 1) + 32, rows, vStride, <i32>l, nKeys, <i32>nAcc, a + 64, a + accBytes + 64, seen, true);
        } else {
          valueSweep16x2(pa, pa + scoreBytes, vBase + d, vIndex, vStride, <i32>l, nKeys, <i32>nAcc, a, a + accBytes, seen, false);
          valueSweep16x2(pa, pa + scoreBytes, vBase + d + 64, vIndex, vStride, <i32>l, nKeys, <i32>nAcc, a + 64, a + accBytes + 64, seen, false);
        }
      }
      if (halfV) for (; r < n; r++) seen = valueSweep32Half(p0 + (<usize>r) * scoreBytes, vBase + (d >> 1), rows, vStride, <i32>l, nKeys, <i32>nAcc, acc0 + (<usize>r) * accBytes + l * rowBytes + d, partial, seen);
      else if (<i32>nAcc * 8 <= nKeys) for (; r < n; r++) valueSweep32(p0 + (<usize>r) * scoreBytes, vBase + d, vIndex, vStride, <i32>l, nKeys, <i32>nAcc, acc0 + (<usize>r) * accBytes + l * rowBytes + d, partial, true);
      else for (; r < n; r++) valueSweep32(p0 + (<usize>r) * scoreBytes, vBase + d, vIndex, vStride, <i32>l, nKeys, <i32>nAcc, acc0 + (<usize>r) * accBytes + l * rowBytes + d, partial, false);
    }
    // the last dimensions, four (f16: eight) at a time
    for (; d < rowBytes; d += halfV ? 32 : 16) {
      for (let r = 0; r < n; r++) {
        const p = p0 + (<usize>r) * scoreBytes;
        let a0 = zero, a1 = zero;
        for (let j = <i32>l; j < nKeys; j += <i32>nAcc) {
          const pj = v128.load32_splat(p + ((<usize>j) << 2));
          if (halfV) {
            const h = v128.load(vBase + rowAt(rows, j, vStride) + (d >> 1));
            seen = i16x8.max_u(seen, i16x8.shl(h, 1));
            a0 = fma(scaledHalves(h, false), pj, a0);
            a1 = fma(scaledHalves(h, true), pj, a1);
          } else a0 = fma(v128.load(keyRow(vBase, vIndex, j, vStride) + d), pj, a0);
        }
        v128.store(acc0 + (<usize>r) * accBytes + l * rowBytes + d, a0);
        if (halfV) v128.store(acc0 + (<usize>r) * accBytes + l * rowBytes + d, a1, 16);
      }
    }
  }
  v128.store(tally, seen);
  for (let r = 0; r < n; r++) {
    const acc = acc0 + (<usize>r) * accBytes;
    const op = out + (<usize>(item + r)) * rowBytes;
    // the empty lanes of the last live group of 16 (or of the batch's 16) as the +0 they stand for
    const groupsEnd = (lanes + 15) & ~15;
    memory.fill(acc + lanes * rowBytes, 0, (groupsEnd - lanes) * rowBytes);
    const groups = groupsEnd >> 4;
    if (!batch && groups > 1) {
      // vec_dot's accumulators: 0 += 2, 1 += 3, then 0 += 1, leaving 16 lanes; a group past the
      // live ones is +0 and drops out of its sum
      for (let l: usize = 0; l < 16; l++) {
        const a0 = acc + l * rowBytes, a1 = a0 + 16 * rowBytes, a2 = a0 + 32 * rowBytes, a3 = a0 + 48 * rowBytes;
        for (let d: usize = 0; d < rowBytes; d += 16) {
          const left = groups >= 3 ? f32x4.add(v128.load(a0 + d), v128.load(a2 + d)) : v128.load(a0 + d);
          const right = groups == 4 ? f32x4.add(v128.load(a1 + d), v128.load(a3 + d)) : v128.load(a1 + d);
          v128.store(a0 + d, f32x4.add(left, right));
        }
      }
    }
    // the 16 lanes' tree sum, per dimension
    for (let d: usize = 0; d < rowBytes; d += 16) {
      const l = acc + d;
      const r0 = f32x4.add(v128.load(l + 8 * rowBytes), v128.load(l));
      const r1 = f32x4.add(v128.load(l + 9 * rowBytes), v128.load(l + rowBytes));
      const r2 = f32x4.add(v128.load(l + 10 * rowBytes), v128.load(l + 2 * rowBytes));
      const r3 = f32x4.add(v128.load(l + 11 * rowBytes), v128.load(l + 3 * rowBytes));
      const r4 = f32x4.add(v128.load(l + 12 * rowBytes), v128.load(l + 4 * rowBytes));
      const r5 = f32x4.add(v128.load(l + 13 * rowBytes), v128.load(l + 5 * rowBytes));
      const r6 = f32x4.add(v128.load(l + 14 * rowBytes), v128.load(l + 6 * rowBytes));
      const r7 = f32x4.add(v128.load(l + 15 * rowBytes), v128.load(l + 7 * rowBytes));
      const s0 = f32x4.add(r4, r0), s1 = f32x4.add(r5, r1), s2 = f32x4.add(r6, r2), s3 = f32x4.add(r7, r3);
      v128.store(op + d, f32x4.add(f32x4.add(s0, s2), f32x4.add(s1, s3)));
    }
  }
}

/**
 * One accumulator lane's weighted values for 32 dimensions (v: the value rows at those
 * dimensions): positions j0, j0 + step, ... below nKeys, each row times its probability at p,
 * into eight accumulators stored at a. With `barrier`, the first four multiply-adds are stored
 * to `spill` (64 bytes) mid-loop: that keeps V8 from hoisting the second four loads above them
 * (eight loaded vectors live beside eight accumulators spilled one, whose round trip through
 * memory then bounded the loop)
 */
// @ts-ignore: decorator
@inline function valueSweep32(p: usize, v: usize, rows: usize, kvStride: usize, j0: i32, nKeys: i32, step: i32, a: usize, spill: usize, barrier: bool): void {
  const zero = f32x4.splat(0);
  let a0 = zero, a1 = zero, a2 = zero, a3 = zero, a4 = zero, a5 = zero, a6 = zero, a7 = zero;
  for (let j = j0; j < nKeys; j += step) {
    const pj = v128.load32_splat(p + ((<usize>j) << 2));
    const vp = keyRow(v, rows, j, kvStride);
    a0 = fma(v128.load(vp), pj, a0);
    a1 = fma(v128.load(vp, 16), pj, a1);
    a2 = fma(v128.load(vp, 32), pj, a2);
    a3 = fma(v128.load(vp, 48), pj, a3);
    if (barrier) store4(spill, a0, a1, a2, a3);
    a4 = fma(v128.load(vp, 64), pj, a4);
    a5 = fma(v128.load(vp, 80), pj, a5);
    a6 = fma(v128.load(vp, 96), pj, a6);
    a7 = fma(v128.load(vp, 112), pj, a7);
  }
  store8(a, a0, a1, a2, a3, a4, a5, a6, a7);
}

/**
 * valueSweep32's accumulator lane for two heads over 16 dimensions: their weights at pa and pb,
 * each row's four vectors loaded once for both; four accumulators per head stored at a and b.
 * `half` (a constant at each call site): f16 rows read in place (v: the halves), converted once
 * for both heads and their bits tallied into `seen` (returned), as valueSweep32Half
 */
// @ts-ignore: decorator
@inline function valueSweep16x2(pa: usize, pb: usize, v: usize, rows: usize, kvStride: usize, j0: i32, nKeys: i32, step: i32, a: usize, b: usize, seen: v128, half: bool): v128 {
  const zero = f32x4.splat(0);
  let a0 = zero, a1 = zero, a2 = zero, a3 = zero, b0 = zero, b1 = zero, b2 = zero, b3 = zero;
  for (let j = j0; j < nKeys; j += step) {
    const o = (<usize>j) << 2;
    const wa = v128.load32_splat(pa + o), wb = v128.load32_splat(pb + o);
    const vp = keyRow(v, rows, j, kvStride);
    let v0: v128, v1: v128, v2: v128, v3: v128;
    if (half) {
      const h0 = v128.load(vp), h1 = v128.load(vp, 16);
      seen = i16x8.max_u(seen, i16x8.max_u(i16x8.shl(h0, 1), i16x8.shl(h1, 1)));
      v0 = scaledHalves(h0, false);
      v1 = scaledHalves(h0, true);
      v2 = scaledHalves(h1, false);
      v3 = scaledHalves(h1, true);
    } else {
      v0 = v128.load(vp);
      v1 = v128.load(vp, 16);
      v2 = v128.load(vp, 32);
      v3 = v128.load(vp, 48);
    }
    a0 = fma(v0, wa, a0);
    b0 = fma(v0, wb, b0);
    a1 = fma(v1, wa, a1);
    b1 = fma(v1, wb, b1);
    a2 = fma(v2, wa, a2);
    b2 = fma(v2, wb, b2);
    a3 = fma(v3, wa, a3);
    b3 = fma(v3, wb, b3);
  }
  store4(a, a0, a1, a2, a3);
  store4(b, b0, b1, b2, b3);
  return seen;
}

/**
 * valueSweep32 over f16 value rows (v: the rows' halves at those dimensions), the weights at p
 * times 2^112: each row's four vectors of halves converted as they are loaded, their bits
 * tallied into `seen` (returned); the first four multiply-adds stored mid-loop as valueSweep32's barrier
 */
// @ts-ignore: decorator
@inline function valueSweep32Half(p: usize, v: usize, rows: usize, vStride: usize, j0: i32, nKeys: i32, step: i32, a: usize, spill: usize, seen: v128): v128 {
  const zero = f32x4.splat(0);
  let a0 = zero, a1 = zero, a2 = zero, a3 = zero, a4 = zero, a5 = zero, a6 = zero, a7 = zero;
  for (let j = j0; j < nKeys; j += step) {
    const pj = v128.load32_splat(p + ((<usize>j) << 2));
    const vp = v + rowAt(rows, j, vStride);
    const h0 = v128.load(vp), h1 = v128.load(vp, 16);
    seen = i16x8.max_u(seen, i16x8.max_u(i16x8.shl(h0, 1), i16x8.shl(h1, 1)));
    a0 = fma(scaledHalves(h0, false), pj, a0);
    a1 = fma(scaledHalves(h0, true), pj, a1);
    a2 = fma(scaledHalves(h1, false), pj, a2);
    a3 = fma(scaledHalves(h1, true), pj, a3);
    store4(spill, a0, a1, a2, a3);
    const h2 = v128.load(vp, 32), h3 = v128.load(vp, 48);
    seen = i16x8.max_u(seen, i16x8.max_u(i16x8.shl(h2, 1), i16x8.shl(h3, 1)));
    a4 = fma(scaledHalves(h2, false), pj, a4);
    a5 = fma(scaledHalves(h2, true), pj, a5);
    a6 = fma(scaledHalves(h3, false), pj, a6);
    a7 = fma(scaledHalves(h3, true), pj, a7);
  }
  store8(a, a0, a1, a2, a3, a4, a5, a6, a7);
  return seen;
}

/** key (value) i's row: rows[i] * stride bytes from base, or (rows 0: converted rows) i * stride */
// @ts-ignore: decorator
@inline function keyRow(base: usize, rows: usize, i: i32, stride: usize): usize {
  return base + (rows != 0 ? rowAt(rows, i, stride) : (<usize>i) * stride);
}

/** ggml_vec_dot_f16 over converted halves: vecDot's order for whole 64s, the rest added in f64 (the products times 2^-112 x 2^112 are exact in f32) */
// @ts-ignore: decorator
@inline function vecDotF16(x: usize, y: usize, n: i32, tmp: usize): f32 {
  const np = n & ~63;
  let sum: f64 = np > 0 ? <f64>vecDot(x, y, np, tmp) : 0;
  for (let i = np; i < n; i++) sum += <f64>(load<f32>(x + (<usize>i << 2)) * load<f32>(y + (<usize>i << 2)));
  return <f32>sum;
}

/**
 * Lane 0 of f32x4.relaxed_madd(a, a, c), a probe for the host: 2^-24 for a = 1 + 2^-12,
 * c = -(1 + 2^-11) where it rounds once (a hardware FMA), 0 where it multiplies and adds
 * separately. (Arguments, not constants, so the optimizer cannot fold the probe.)
 */
export function probeMadd(a: f32, c: f32): f32 {
  if (!ASC_FEATURE_RELAXED_SIMD) return 0;
  return f32x4.extract_lane(fma(f32x4.splat(a), f32x4.splat(a), f32x4.splat(c)), 0);
}
