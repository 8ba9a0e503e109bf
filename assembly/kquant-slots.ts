// Q4_K, Q5_K and Q6_K batches by slots (relaxed build): q8.ts's Q4_0 group kernel carried over
// to the k-quants' super-blocks. A thread's four rows are unpacked once per matmul into its slot
// (a byte a weight, the scales ready for their broadcasts, Q4_K's / Q5_K's mins, d and dmin as
// f32), and the activations go by slots of four tokens: one vector holds the same four values of
// four tokens, so one int8 dot against four weights broadcast in every lane adds each token's
// products in that token's own lanes, and each activation load serves two rows. (The kernels
// before these went token after token, one row at a time, unpacking every sub-block for each
// group of eight tokens and loading each token's activations once per row.)
//
// Every token's super-block value is the exact integer superQ4_K / superQ6_K computes (integer
// sums in any order are the same number), converted and scaled by the same f32 operations in the
// same order, and added to its sum in super-block order: the same bits as one token at a time.
//
// Group stream, per super-block of 256 weights (308 n bytes for a group of n = 8 or 4 tokens:
// groups of eight, then one of four where four or more tokens are left), token k of the group:
//   0      the n activation scales d (f32)
//   4 n    token k at 4 n + 32 k: its 16 sums of 16 activations (i16; Q6_K's offset term)
//   36 n   token k at 36 n + 16 k: its 8 sums of 32 (i16; Q4_K's / Q5_K's min term)
//   52 n   slot i (values 4i..4i+3 of the super-block, i = 0..63) at 52 n + 4 n i + 4 k: token k's four int8
// (|sum of 16| <= 2048, |sum of 32| <= 4096: both fit int16.)
// Unpacked Q4_K / Q5_K row, per super-block (312 bytes): the 256 weights (0..15 / 0..31) in
// order, the eight scales each twice in 32 bits (the int16 pair a pmaddwd multiplies), the eight
// mins (i16), d, dmin (f32). Unpacked Q6_K row (356 bytes): the 256 weights as stored (0..63), the
// sixteen scales each twice in 32 bits, 32 times each scale (i16: the offset of 32 against the
// sums of 16), d (f32).
import { f16 } from "./half";
import { dotAddU8, dotI8I7, lanesSum } from "./simd";
import { nibblesAt, scalesMinsK4, weights } from "./kquant";

/** the weight types (matKSlots' kind), as literal arguments: each inlined copy is compiled for its own */
export const K4: i32 = 0;
export const K5: i32 = 1;
export const K6: i32 = 2;

/** bytes of a super-block of a group of n tokens, and where its parts start */
// @ts-ignore: decorator
@inline function kgroupBytes(n: usize): usize { return 308 * n; }
// @ts-ignore: decorator
@inline function sums16(n: usize): usize { return n << 2; }
// @ts-ignore: decorator
@inline function sums32(n: usize): usize { return 36 * n; }
// @ts-ignore: decorator
@inline function acts(n: usize): usize { return 52 * n; }

/**
 * token k's head of super-block i in a group of n at o: its scale (from xd) and its sums of 16 and
 * of 32 (from the i32 sums of 16 at xb)
 */
// @ts-ignore: decorator
@inline function packTokenSums(xd: usize, xb: usize, i: usize, o: usize, k: usize, n: usize): void {
  store<f32>(o + (k << 2), load<f32>(xd + (i << 2)));
  const bs = xb + (i << 6);
  for (let j: usize = 0; j < 16; j++) store<i16>(o + sums16(n) + (k << 5) + (j << 1), <i16>load<i32>(bs + (j << 2)));
  for (let j: usize = 0; j < 8; j++) store<i16>(o + sums32(n) + (k << 4) + (j << 1), <i16>(load<i32>(bs + (j << 3)) + load<i32>(bs + (j << 3), 4)));
}

/** bytes of one unpacked super-block of a row in the slot, and where its parts start */
// @ts-ignore: decorator
@inline function unpackedBytes(k: i32): usize { return k == K6 ? 356 : 312; }
const SCALES: usize = 256;
/** Q4_K / Q5_K: the eight mins; Q6_K: 32 times the sixteen scales (i16) */
// @ts-ignore: decorator
@inline function offsetsAt(k: i32): usize { return k == K6 ? 320 : 288; }
// @ts-ignore: decorator
@inline function dAt(k: i32): usize { return k == K6 ? 352 : 304; }
/** Q4_K's / Q5_K's dmin */
const DMIN: usize = 308;

/** eight int16 scales s at q, each twice in 32 bits: the int16 pair a pmaddwd multiplies, one load-broadcast each */
// @ts-ignore: decorator
@inline function storeScalePairs(q: usize, s: v128): void {
  v128.store(q, i8x16.shuffle(s, s, 0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7));
  v128.store(q, i8x16.shuffle(s, s, 8, 9, 8, 9, 10, 11, 10, 11, 12, 13, 12, 13, 14, 15, 14, 15), 16);
}

/**
 * Writes the slot group streams of a batch from the Q8_K activations (int16 at xq, 512 bytes a
 * super-block; scales at xd; i32 sums of 16 at xb; before packQ8_K narrows them) to g: groups
 * of eight tokens, then one of four where four or more are left, one after the other.
 */
export function packQ8_KSlots(xq: usize, xd: usize, xb: usize, g: usize, cols: i32, nTok: i32): void {
  let o = g, t = 0;
  for (; t + 8 <= nTok; t += 8) o = packSlotGroup(xq, xd, xb, o, cols, t, 8);
  if (t + 4 <= nTok) packSlotGroup(xq, xd, xb, o, cols, t, 4);
}

/** tokens [t, t + n) as one group at o; returns its end */
function packSlotGroup(xq: usize, xd: usize, xb: usize, o: usize, cols: i32, t: i32, n: usize): usize {
  const nb = <usize>(cols >> 8);
  const slot = n << 2;
  for (let b: usize = 0; b < nb; b++, o += kgroupBytes(n)) {
    for (let k: usize = 0; k < n; k++) {
      const i = (<usize>t + k) * nb + b;
      packTokenSums(xd, xb, i, o, k, n);
      const q = xq + (i << 9);
      // 16 values at a time: slots 4j .. 4j + 3
      for (let j: usize = 0; j < 16; j++) {
        const v = i8x16.narrow_i16x8_s(v128.load(q + (j << 5)), v128.load(q + (j << 5), 16));
        const at = o + acts(n) + (j << 2) * slot + (k << 2);
        v128.store32_lane(at, v, 0);
        v128.store32_lane(at + slot, v, 1);
        v128.store32_lane(at + 2 * slot, v, 2);
        v128.store32_lane(at + 3 * slot, v, 3);
      }
    }
  }
  return o;
}

/** `count` (1..4) rows from row r of a weight of type k unpacked into the slot, nb super-blocks each */
// @ts-ignore: decorator
@inline function unpackRows(k: i32, w: usize, rowBytes: usize, r: i32, count: i32, nb: i32, slot: usize): void {
  for (let i = 0; i < count; i++) {
    let p = w + <usize>(r + i) * rowBytes;
    let q = slot + <usize>i * <usize>nb * unpackedBytes(k);
    for (let b = 0; b < nb; b++, p += k == K6 ? 210 : k == K5 ? 176 : 144, q += unpackedBytes(k)) {
      if (k == K6) unpackQ6_K(p, q);
      else unpackQ4_K(k == K5, p, q);
    }
  }
}

/**
 * one Q4_K super-block at p (144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128
 * bytes of nibbles) unpacked at q; q5: a Q5_K one (176 bytes: 32 bytes of fifth bits before the
 * nibbles, bit j of byte l for weight l of sub-block j), weights 0..31
 */
// @ts-ignore: decorator
@inline function unpackQ4_K(q5: bool, p: usize, q: usize): void {
  const mask = i8x16.splat(0x0f);
  // Q5_K: the fifth bits of sub-blocks 2j and 2j + 1 are bits 2j and 2j + 1 of f0 / f1's bytes,
  // shifted down to bits 0 and 1 for each j
  let f0 = q5 ? v128.load(p, 16) : mask, f1 = q5 ? v128.load(p, 32) : mask;
  // 32 bytes a pair of sub-blocks: low nibbles sub-block 2j, high nibbles 2j + 1
  for (let j: usize = 0; j < 4; j++) {
    const at = p + nibblesAt(q5) + (j << 5);
    const v0 = v128.load(at), v1 = v128.load(at, 16);
    const u = q + (j << 6);
    v128.store(u, weights(q5, v0, f0, false, 0, mask));
    v128.store(u, weights(q5, v1, f1, false, 0, mask), 16);
    v128.store(u, weights(q5, v0, f0, true, 1, mask), 32);
    v128.store(u, weights(q5, v1, f1, true, 1, mask), 48);
    if (q5) {
      f0 = i16x8.shr_u(f0, 2);
      f1 = i16x8.shr_u(f1, 2);
    }
  }
  const scalesMins = scalesMinsK4(p + 4);
  const scales = i16x8.extend_low_i8x16_u(scalesMins), mins = i16x8.extend_high_i8x16_u(scalesMins);
  storeScalePairs(q + SCALES, scales);
  v128.store(q + offsetsAt(K4), mins);
  store<f32>(q + dAt(K4), f16(load<u16>(p)));
  store<f32>(q + DMIN, f16(load<u16>(p, 2)));
}

/**
 * one Q6_K super-block at p (210 bytes: 128 bytes of low nibbles, 64 of high bit pairs, 16 int8
 * scales, f16 d) unpacked at q: weight 128 h + 32 k + l (h = 0, 1; k = 0..3; l = 0..31) is the
 * nibble of low byte 64 h + l (k = 0, 2: low / high nibble) or 64 h + 32 + l (k = 1, 3) with bits
 * 2k, 2k + 1 of high byte 32 h + l on top, as dequantize_row_q6_K reads them, stored + 32
 */
// @ts-ignore: decorator
@inline function unpackQ6_K(p: usize, q: usize): void {
  const low = i8x16.splat(0x0f), three = i8x16.splat(3);
  for (let h: usize = 0; h < 2; h++) {
    for (let c: usize = 0; c < 32; c += 16) {
      const l0 = v128.load(p + (h << 6) + c), l1 = v128.load(p + (h << 6) + 32 + c), hb = v128.load(p + 128 + (h << 5) + c);
      const u = q + (h << 7) + c;
      v128.store(u, v128.or(v128.and(l0, low), i8x16.shl(v128.and(hb, three), 4)));
      v128.store(u, v128.or(v128.and(l1, low), i8x16.shl(v128.and(i8x16.shr_u(hb, 2), three), 4)), 32);
      v128.store(u, v128.or(i8x16.shr_u(l0, 4), i8x16.shl(v128.and(i8x16.shr_u(hb, 4), three), 4)), 64);
      v128.store(u, v128.or(i8x16.shr_u(l1, 4), i8x16.shl(i8x16.shr_u(hb, 6), 4)), 96);
    }
  }
  const scales = v128.load(p, 192);
  const lo = i16x8.extend_low_i8x16_s(scales), hi = i16x8.extend_high_i8x16_s(scales);
  storeScalePairs(q + SCALES, lo);
  storeScalePairs(q + SCALES + 32, hi);
  v128.store(q + offsetsAt(K6), i16x8.shl(lo, 5));
  v128.store(q + offsetsAt(K6), i16x8.shl(hi, 5), 16);
  store<f32>(q + dAt(K6), f16(load<u16>(p, 208)));
}

/**
 * a row's offset term for four tokens (their stream at s, n tokens in the group, the first of the
 * four at k0): Q4_K's / Q5_K's eight mins against the sums of 32, Q6_K's sixteen 32 x scales
 * against the sums of 16; the tokens' integers in the lanes
 */
// @ts-ignore: decorator
@inline function offsetTerm(k: i32, o: usize, s: usize, n: usize, k0: usize): v128 {
  if (k != K6) {
    const m = v128.load(o), x = s + sums32(n) + (k0 << 4);
    return lanesSum(i32x4.dot_i16x8_s(m, v128.load(x)), i32x4.dot_i16x8_s(m, v128.load(x, 16)), i32x4.dot_i16x8_s(m, v128.load(x, 32)), i32x4.dot_i16x8_s(m, v128.load(x, 48)));
  }
  const lo = v128.load(o), hi = v128.load(o, 16), x = s + sums16(n) + (k0 << 5);
  return lanesSum(
    i32x4.add(i32x4.dot_i16x8_s(lo, v128.load(x)), i32x4.dot_i16x8_s(hi, v128.load(x, 16))),
    i32x4.add(i32x4.dot_i16x8_s(lo, v128.load(x, 32)), i32x4.dot_i16x8_s(hi, v128.load(x, 48))),
    i32x4.add(i32x4.dot_i16x8_s(lo, v128.load(x, 64)), i32x4.dot_i16x8_s(hi, v128.load(x, 80))),
    i32x4.add(i32x4.dot_i16x8_s(lo, v128.load(x, 96)), i32x4.dot_i16x8_s(hi, v128.load(x, 112))));
}

/**
 * one super-block's values of a row (unpacked at p) for four tokens (scales dx) from its integers
 * isum and offset term: superQ4_K's f32 steps (d dx isum - dmin dx msum; Q5_K's the same),
 * superQ6_K's (d dx (isum - offsets))
 */
// @ts-ignore: decorator
@inline function values(k: i32, p: usize, dx: v128, isum: v128, offsets: v128): v128 {
  const wd = v128.load32_splat(p + dAt(k));
  if (k == K6) return f32x4.mul(f32x4.mul(wd, dx), f32x4.convert_i32x4_s(i32x4.sub(isum, offsets)));
  const wm = v128.load32_splat(p + DMIN);
  return f32x4.sub(f32x4.mul(f32x4.mul(wd, dx), f32x4.convert_i32x4_s(isum)), f32x4.mul(f32x4.mul(wm, dx), f32x4.convert_i32x4_s(offsets)));
}

/** one slot's dot added to c: int16 pairs (pmaddubsw), or on VNNI's dot (`u8`) int32 lanes */
// @ts-ignore: decorator
@inline function slotDot(c: v128, x: v128, w: v128, u8: bool): v128 {
  return u8 ? dotAddU8(x, w, c) : i16x8.add(c, dotI8I7(x, w));
}

/** lanes times their scale (the int16 pair s): int16 lanes by pmaddwd, VNNI's int32 lanes by a multiply with s's (signed) high half */
// @ts-ignore: decorator
@inline function scaled(c: v128, s: v128, u8: bool): v128 {
  return u8 ? i32x4.mul(c, i32x4.shr_s(s, 16)) : i32x4.dot_i16x8_s(c, s);
}

/**
 * Two unpacked rows (pa, pb) against the eight (`four`: four) tokens of the slot stream at g;
 * sums: 64 bytes of the slot for the running sums. The lanes of each (row, four tokens) take the
 * dots of `run` slots that share a scale, then one multiply by the scale carries them into int32.
 * A scale covers 8 slots (Q4_K's and Q5_K's sub-blocks of 32 weights) or 4 (Q6_K's groups of 16).
 * VNNI's dot adds into int32 lanes, so a run is all of them; the int16 pairs hold at most 8 x 2
 * x 15 x 128 (Q4_K: a run of 8), 4 x 2 x 31 x 128 (Q5_K: two runs of 4 a scale) or 2 x 2 x 63
 * x 128 (Q6_K: two runs of 2 a scale).
 */
// @ts-ignore: decorator
@inline function rowsSlots(k: i32, pa: usize, pb: usize, nb: i32, g: usize, sums: usize, outA: usize, outB: usize, outStride: usize, four: bool, u8: bool): void {
  const n: usize = four ? 4 : 8;
  const slot = n << 2;
  const perScale: usize = k == K6 ? 4 : 8;
  // the int16 pairs of Q5_K and Q6_K take a scale's slots in two runs
  const halves = !u8 && k != K4;
  const run: usize = halves ? perScale >> 1 : perScale;
  const z = i32x4.splat(0);
  v128.store(sums, z);
  v128.store(sums, z, 16);
  v128.store(sums, z, 32);
  v128.store(sums, z, 48);
  let s = g;
  const ub = unpackedBytes(k);
  for (let b = 0, p = pa, q = pb; b < nb; b++, s += kgroupBytes(n), p += ub, q += ub) {
    let ia03 = z, ia47 = z, ib03 = z, ib47 = z;
    // run j: weights 4 run j .. 4 run (j + 1) - 1, all under one scale; pointers stepped, every
    // load a constant offset from one of them
    for (let pw = p, qw = q, x = s + acts(n), sc: usize = 0; pw < p + 256; sc += halves ? 2 : 4) {
      let c03 = z, c47 = z, e03 = z, e47 = z;
      const end = pw + (run << 2);
      for (; pw < end; pw += 4, qw += 4, x += slot) {
        const wa = v128.load32_splat(pw), wb = v128.load32_splat(qw);
        const x03 = v128.load(x);
        c03 = slotDot(c03, x03, wa, u8);
        e03 = slotDot(e03, x03, wb, u8);
        if (!four) {
          const x47 = v128.load(x, 16);
          c47 = slotDot(c47, x47, wa, u8);
          e47 = slotDot(e47, x47, wb, u8);
        }
      }
      // the run's scale: sc counts 2 bytes a run where two runs share one
      const at = SCALES + (sc & ~3);
      const sa = v128.load32_splat(p + at), sb = v128.load32_splat(q + at);
      ia03 = i32x4.add(ia03, scaled(c03, sa, u8));
      ib03 = i32x4.add(ib03, scaled(e03, sb, u8));
      if (!four) {
        ia47 = i32x4.add(ia47, scaled(c47, sa, u8));
        ib47 = i32x4.add(ib47, scaled(e47, sb, u8));
      }
    }
    const dx03 = v128.load(s);
    v128.store(sums, f32x4.add(v128.load(sums), values(k, p, dx03, ia03, offsetTerm(k, p + offsetsAt(k), s, n, 0))));
    v128.store(sums, f32x4.add(v128.load(sums, 32), values(k, q, dx03, ib03, offsetTerm(k, q + offsetsAt(k), s, n, 0))), 32);
    if (!four) {
      const dx47 = v128.load(s, 16);
      v128.store(sums, f32x4.add(v128.load(sums, 16), values(k, p, dx47, ia47, offsetTerm(k, p + offsetsAt(k), s, n, 4))), 16);
      v128.store(sums, f32x4.add(v128.load(sums, 48), values(k, q, dx47, ib47, offsetTerm(k, q + offsetsAt(k), s, n, 4))), 48);
    }
  }
  for (let k: usize = 0; k < n; k++) {
    store<f32>(outA + k * outStride, load<f32>(sums + ((k & 3) << 2) + ((k >> 2) << 4)));
    store<f32>(outB + k * outStride, load<f32>(sums + 32 + ((k & 3) << 2) + ((k >> 2) << 4)));
  }
}

/**
 * Rows [r0, r1) of a Q4_K (kind K4), Q5_K (K5) or Q6_K (K6) weight over the batch's slot streams at
 * groups: eight tokens at a time, then four (out[t * rows + r]); slot: the thread's four unpacked
 * rows and 64 bytes (the host's GROUP_KERNELS). Four rows at a time are unpacked and taken in
 * pairs (an odd last row paired with itself). Returns the first token left for kquant.ts's tiles.
 */
export function matKSlots(kind: i32, w: usize, rowBytes: usize, groups: usize, slot: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, vnni: bool): i32 {
  if (kind == K6) return vnni ? slotsQ6_KU8(w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1) : slotsQ6_KI16(w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1);
  if (kind == K5) return vnni ? slotsQ5_KU8(w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1) : slotsQ5_KI16(w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1);
  return vnni ? slotsQ4_KU8(w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1) : slotsQ4_KI16(w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1);
}

// each a function of its own, so that each copy is compiled for its type and dot (q8.ts's groupTokens)
function slotsQ4_KU8(w: usize, rowBytes: usize, groups: usize, slot: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): i32 {
  return slots(K4, w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1, true);
}
function slotsQ4_KI16(w: usize, rowBytes: usize, groups: usize, slot: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): i32 {
  return slots(K4, w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1, false);
}
function slotsQ5_KU8(w: usize, rowBytes: usize, groups: usize, slot: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): i32 {
  return slots(K5, w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1, true);
}
function slotsQ5_KI16(w: usize, rowBytes: usize, groups: usize, slot: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): i32 {
  return slots(K5, w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1, false);
}
function slotsQ6_KU8(w: usize, rowBytes: usize, groups: usize, slot: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): i32 {
  return slots(K6, w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1, true);
}
function slotsQ6_KI16(w: usize, rowBytes: usize, groups: usize, slot: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): i32 {
  return slots(K6, w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1, false);
}

// @ts-ignore: decorator
@inline function slots(k: i32, w: usize, rowBytes: usize, groups: usize, slot: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, u8: bool): i32 {
  const nb = cols >> 8;
  const outStride = (<usize>rows) << 2;
  const rowSlot = <usize>nb * unpackedBytes(k);
  const sums = slot + 4 * rowSlot;
  for (let r = r0; r < r1; r += 4) {
    const count = min<i32>(4, r1 - r);
    unpackRows(k, w, rowBytes, r, count, nb, slot);
    let t = 0, g = groups;
    for (; t + 8 <= nTok; t += 8, g += <usize>nb * kgroupBytes(8)) {
      const o = out + <usize>t * outStride + (<usize>r << 2);
      for (let i = 0; i < count; i += 2) {
        const second = min<i32>(i + 1, count - 1);
        rowsSlots(k, slot + <usize>i * rowSlot, slot + <usize>second * rowSlot, nb, g, sums, o + (<usize>i << 2), o + (<usize>second << 2), outStride, false, u8);
      }
    }
    if (t + 4 <= nTok) {
      const o = out + <usize>t * outStride + (<usize>r << 2);
      for (let i = 0; i < count; i += 2) {
        const second = min<i32>(i + 1, count - 1);
        rowsSlots(k, slot + <usize>i * rowSlot, slot + <usize>second * rowSlot, nb, g, sums, o + (<usize>i << 2), o + (<usize>second << 2), outStride, true, u8);
      }
    }
  }
  return (nTok & ~7) | (nTok & 4);
}
