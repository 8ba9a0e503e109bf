// Q4_K batches by slots (relaxed build): q8.ts's Q4_0 group kernel carried over to Q4_K's
// super-blocks. A thread's four rows are unpacked once per matmul into its slot (a byte a weight,
// the eight 6-bit scales ready for their broadcasts, the mins, d and dmin as f32), and the
// activations go by slots of four tokens: one vector holds the same four values of four tokens,
// so one int8 dot against four weights broadcast in every lane adds each token's products in
// that token's own lanes, and each activation load serves two rows. kquant-groups.ts's kernel
// (token after token, one row at a time) unpacked every sub-block for each group of eight tokens
// and loaded each token's activations once per row.
//
// Every token's super-block value is the exact integer superQ4_K computes (integer sums in any
// order are the same number), converted and scaled by the same f32 operations in the same order,
// and added to its sum in super-block order: the same bits as superQ4_K one token at a time.
//
// Group stream, per super-block of 256 weights (276 n bytes for a group of n = 8 or 4 tokens:
// groups of eight, then one of four where four or more tokens are left), token k of the group:
//   0      the n activation scales d (f32)
//   4 n    token k at 4 n + 16 k: its 8 sums of 32 activations (i16; the min term)
//   20 n   sub-block j, slot i (values 4i..4i+3 of the sub-block) at 20 n + 4 n (8 j + i) + 4 k:
//          token k's four int8
// Unpacked row, per super-block (312 bytes): the 256 weights (0..15) in order, the eight scales
// each twice in 32 bits (the int16 pair a pmaddwd multiplies), the eight mins (i16), d, dmin (f32).
import { f16 } from "./half";
import { dotAddU8, dotI8I7, lanesSum } from "./simd";
import { scalesMinsK4 } from "./kquant";

/** bytes of a super-block of a group of n tokens, and where its parts start */
// @ts-ignore: decorator
@inline function slotGroupBytes(n: usize): usize { return 276 * n; }
// @ts-ignore: decorator
@inline function sums32(n: usize): usize { return n << 2; }
// @ts-ignore: decorator
@inline function acts(n: usize): usize { return 20 * n; }

/** bytes of one unpacked super-block of a row in the slot, and where its parts start */
const UNPACKED: usize = 312;
const SCALES: usize = 256;
const MINS: usize = 288;
const D: usize = 304;
const DMIN: usize = 308;
/** the running sums of two rows x eight tokens after the four unpacked rows */
const SUMS_BYTES: usize = 64;


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
  for (let b: usize = 0; b < nb; b++, o += slotGroupBytes(n)) {
    for (let k: usize = 0; k < n; k++) {
      const i = (<usize>t + k) * nb + b;
      store<f32>(o + (k << 2), load<f32>(xd + (i << 2)));
      const bs = xb + (i << 6);
      for (let j: usize = 0; j < 8; j++) store<i16>(o + sums32(n) + (k << 4) + (j << 1), <i16>(load<i32>(bs + (j << 3)) + load<i32>(bs + (j << 3), 4)));
      const q = xq + (i << 9);
      for (let j: usize = 0; j < 8; j++) {
        const x = q + (j << 6);
        const lo = i8x16.narrow_i16x8_s(v128.load(x), v128.load(x, 16));
        const hi = i8x16.narrow_i16x8_s(v128.load(x, 32), v128.load(x, 48));
        const at = o + acts(n) + ((j << 3) * slot) + (k << 2);
        v128.store32_lane(at, lo, 0);
        v128.store32_lane(at + slot, lo, 1);
        v128.store32_lane(at + 2 * slot, lo, 2);
        v128.store32_lane(at + 3 * slot, lo, 3);
        v128.store32_lane(at + 4 * slot, hi, 0);
        v128.store32_lane(at + 5 * slot, hi, 1);
        v128.store32_lane(at + 6 * slot, hi, 2);
        v128.store32_lane(at + 7 * slot, hi, 3);
      }
    }
  }
  return o;
}

/** `count` (1..4) rows from row r of a Q4_K weight unpacked into the slot, nb super-blocks each */
// @ts-ignore: decorator
@inline function unpackRows(w: usize, rowBytes: usize, r: i32, count: i32, nb: i32, slot: usize): void {
  const mask = i8x16.splat(0x0f);
  for (let i = 0; i < count; i++) {
    let p = w + <usize>(r + i) * rowBytes;
    let q = slot + <usize>i * <usize>nb * UNPACKED;
    for (let b = 0; b < nb; b++, p += 144, q += UNPACKED) {
      // 32 bytes a pair of sub-blocks: low nibbles sub-block 2j, high nibbles 2j + 1
      for (let j: usize = 0; j < 4; j++) {
        const v0 = v128.load(p + 16 + (j << 5)), v1 = v128.load(p + 16 + (j << 5), 16);
        const u = q + (j << 6);
        v128.store(u, v128.and(v0, mask));
        v128.store(u, v128.and(v1, mask), 16);
        v128.store(u, v128.and(i16x8.shr_u(v0, 4), mask), 32);
        v128.store(u, v128.and(i16x8.shr_u(v1, 4), mask), 48);
      }
      const scalesMins = scalesMinsK4(p + 4);
      const scales = i16x8.extend_low_i8x16_u(scalesMins);
      v128.store(q + SCALES, i8x16.shuffle(scales, scales, 0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7));
      v128.store(q + SCALES, i8x16.shuffle(scales, scales, 8, 9, 8, 9, 10, 11, 10, 11, 12, 13, 12, 13, 14, 15, 14, 15), 16);
      v128.store(q + MINS, i16x8.extend_high_i8x16_u(scalesMins));
      store<f32>(q + D, f16(load<u16>(p)));
      store<f32>(q + DMIN, f16(load<u16>(p, 2)));
    }
  }
}

/** the min term of one row (mins at m) for four tokens (their sums of 32 at x): the tokens' integers in the lanes */
// @ts-ignore: decorator
@inline function minTerm(m: v128, x: usize): v128 {
  return lanesSum(i32x4.dot_i16x8_s(m, v128.load(x)), i32x4.dot_i16x8_s(m, v128.load(x, 16)), i32x4.dot_i16x8_s(m, v128.load(x, 32)), i32x4.dot_i16x8_s(m, v128.load(x, 48)));
}

/** one super-block's values of a row (unpacked at p) for four tokens (scales dx), its integers isum and msum; superQ4_K's f32 steps */
// @ts-ignore: decorator
@inline function values(p: usize, dx: v128, isum: v128, msum: v128): v128 {
  const wd = v128.load32_splat(p + D), wm = v128.load32_splat(p + DMIN);
  return f32x4.sub(f32x4.mul(f32x4.mul(wd, dx), f32x4.convert_i32x4_s(isum)), f32x4.mul(f32x4.mul(wm, dx), f32x4.convert_i32x4_s(msum)));
}

/** one slot's dot added to c: int16 pairs (pmaddubsw), or on VNNI's dot (`u8`) int32 lanes */
// @ts-ignore: decorator
@inline function slotDot(c: v128, x: v128, w: v128, u8: bool): v128 {
  return u8 ? dotAddU8(x, w, c) : i16x8.add(c, dotI8I7(x, w));
}

/** a sub-block's lanes times its scale (the int16 pair s): int16 lanes by pmaddwd, VNNI's int32 lanes by a multiply with s's low half */
// @ts-ignore: decorator
@inline function scaled(c: v128, s: v128, u8: bool): v128 {
  return u8 ? i32x4.mul(c, v128.and(s, i32x4.splat(0xffff))) : i32x4.dot_i16x8_s(c, s);
}

/**
 * Two unpacked rows (pa, pb) against the eight (`four`: four) tokens of the slot stream at g;
 * sums: 64 bytes of the slot for the running sums. Per sub-block the int16 lanes of each (row,
 * four tokens) take eight dots of four values (at most 8 x 2 x 15 x 127), then one pmaddwd by
 * the sub-block's scale carries them into int32 lanes.
 */
// @ts-ignore: decorator
@inline function rowsQ4_KSlots(pa: usize, pb: usize, nb: i32, g: usize, sums: usize, outA: usize, outB: usize, outStride: usize, four: bool, u8: bool): void {
  const n: usize = four ? 4 : 8;
  const slot = n << 2;
  const z = i32x4.splat(0);
  v128.store(sums, z);
  v128.store(sums, z, 16);
  v128.store(sums, z, 32);
  v128.store(sums, z, 48);
  let s = g;
  for (let b = 0, p = pa, q = pb; b < nb; b++, s += slotGroupBytes(n), p += UNPACKED, q += UNPACKED) {
    let ia03 = z, ia47 = z, ib03 = z, ib47 = z;
    for (let j: usize = 0; j < 8; j++) {
      let c03 = z, c47 = z, e03 = z, e47 = z;
      const pw = p + (j << 5);
      // slot i of the sub-block: weights 4i..4i+3 of each row in every lane; pointers stepped,
      // every load a constant offset from one of them
      for (let pi = pw, qi = q + (j << 5), x = s + acts(n) + (j << 3) * slot; pi < pw + 32; pi += 4, qi += 4, x += slot) {
        const wa = v128.load32_splat(pi), wb = v128.load32_splat(qi);
        const x03 = v128.load(x);
        c03 = slotDot(c03, x03, wa, u8);
        e03 = slotDot(e03, x03, wb, u8);
        if (!four) {
          const x47 = v128.load(x, 16);
          c47 = slotDot(c47, x47, wa, u8);
          e47 = slotDot(e47, x47, wb, u8);
        }
      }
      const sa = v128.load32_splat(p + SCALES + (j << 2)), sb = v128.load32_splat(q + SCALES + (j << 2));
      ia03 = i32x4.add(ia03, scaled(c03, sa, u8));
      ib03 = i32x4.add(ib03, scaled(e03, sb, u8));
      if (!four) {
        ia47 = i32x4.add(ia47, scaled(c47, sa, u8));
        ib47 = i32x4.add(ib47, scaled(e47, sb, u8));
      }
    }
    const ma = v128.load(p + MINS), mb = v128.load(q + MINS);
    const m = s + sums32(n);
    const dx03 = v128.load(s);
    v128.store(sums, f32x4.add(v128.load(sums), values(p, dx03, ia03, minTerm(ma, m))));
    v128.store(sums, f32x4.add(v128.load(sums, 32), values(q, dx03, ib03, minTerm(mb, m))), 32);
    if (!four) {
      const dx47 = v128.load(s, 16);
      v128.store(sums, f32x4.add(v128.load(sums, 16), values(p, dx47, ia47, minTerm(ma, m + 64))), 16);
      v128.store(sums, f32x4.add(v128.load(sums, 48), values(q, dx47, ib47, minTerm(mb, m + 64))), 48);
    }
  }
  for (let k: usize = 0; k < n; k++) {
    store<f32>(outA + k * outStride, load<f32>(sums + ((k & 3) << 2) + ((k >> 2) << 4)));
    store<f32>(outB + k * outStride, load<f32>(sums + 32 + ((k & 3) << 2) + ((k >> 2) << 4)));
  }
}

/**
 * Rows [r0, r1) of a Q4_K weight over the batch's slot streams at groups: eight tokens at a
 * time, then four (out[t * rows + r]); slot: the thread's 4 x 312 bytes a super-block of a row, and 64 (the host's GROUP_KERNELS). Four rows at a time are
 * unpacked and taken in pairs (an odd last row paired with itself). Returns the first token left
 * for kquant.ts's tiles.
 */
export function matQ4_KSlots(w: usize, rowBytes: usize, groups: usize, slot: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, vnni: bool): i32 {
  return vnni ? slotsU8(w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1) : slotsI16(w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1);
}

// each a function of its own, so that each copy is compiled for its dot (q8.ts's groupTokens)
function slotsU8(w: usize, rowBytes: usize, groups: usize, slot: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): i32 {
  return slots(w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1, true);
}
function slotsI16(w: usize, rowBytes: usize, groups: usize, slot: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): i32 {
  return slots(w, rowBytes, groups, slot, out, rows, cols, nTok, r0, r1, false);
}

// @ts-ignore: decorator
@inline function slots(w: usize, rowBytes: usize, groups: usize, slot: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, u8: bool): i32 {
  const nb = cols >> 8;
  const outStride = (<usize>rows) << 2;
  const rowSlot = <usize>nb * UNPACKED;
  const sums = slot + 4 * rowSlot;
  for (let r = r0; r < r1; r += 4) {
    const count = min<i32>(4, r1 - r);
    unpackRows(w, rowBytes, r, count, nb, slot);
    let t = 0, g = groups;
    for (; t + 8 <= nTok; t += 8, g += <usize>nb * slotGroupBytes(8)) {
      const o = out + <usize>t * outStride + (<usize>r << 2);
      for (let i = 0; i < count; i += 2) {
        const second = min<i32>(i + 1, count - 1);
        rowsQ4_KSlots(slot + <usize>i * rowSlot, slot + <usize>second * rowSlot, nb, g, sums, o + (<usize>i << 2), o + (<usize>second << 2), outStride, false, u8);
      }
    }
    if (t + 4 <= nTok) {
      const o = out + <usize>t * outStride + (<usize>r << 2);
      for (let i = 0; i < count; i += 2) {
        const second = min<i32>(i + 1, count - 1);
        rowsQ4_KSlots(slot + <usize>i * rowSlot, slot + <usize>second * rowSlot, nb, g, sums, o + (<usize>i << 2), o + (<usize>second << 2), outStride, true, u8);
      }
    }
  }
  return (nTok & ~7) | (nTok & 4);
}
