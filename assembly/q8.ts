// Q8_0, Q4_0 and Q5_0 weights against Q8_0 activations (ggml's vec_dot_q8_0_q8_0 / q4_0_q8_0 / q5_0_q8_0):
// per block of 32 an exact integer dot (widen int8 to int16, i32x4.dot_i16x8_s), scaled by
// weight scale * activation scale into four float lanes per row. Four rows share each block
// of activations loaded into registers; for batches, 4x4 tiles of rows x tokens decode each
// weight block once per four tokens.
import { f16 } from "./half";
import { hsumF32, scaleAdd } from "./simd";
import { dotQ4_0Packed, nibblesQ4_0, orderMask, rowRelaxed } from "./relaxed";

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

/** 0x10 in byte j (0..15) where bit j of the 16-bit `bits` is set, else 0 */
// @ts-ignore: decorator
@inline function fifthBits(bits: i32): v128 {
  // byte j of the splat holds bits >> 8 * (j & 1); the swizzle picks byte 0 for j < 8, byte 1 above
  const spread = i8x16.swizzle(i16x8.splat(<i16>bits), v128(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const select = v128.load(BIT_OF_BYTE);
  return v128.and(i8x16.eq(v128.and(spread, select), select), i8x16.splat(0x10));
}

/** weights 0..15 (high = false) or 16..31 (high = true) of the Q5_0 block at p, as int8 */
// @ts-ignore: decorator
@inline function q5Weights(p: usize, high: bool): v128 {
  const v = v128.load(p, 6);
  const qh = load<u32>(p, 2);
  const nibbles = high ? i8x16.shr_u(v, 4) : v128.and(v, i8x16.splat(0x0f));
  return i8x16.sub(v128.or(nibbles, fifthBits(<i32>(high ? qh >> 16 : qh & 0xffff))), i8x16.splat(16));
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

// @ts-ignore: decorator
@inline function blockDot(kind: i32, p: usize, x0: v128, x1: v128, x2: v128, x3: v128): v128 {
  return kind == 0 ? dotQ8_0(p, x0, x1, x2, x3) : kind == 1 ? dotQ4_0(p, x0, x1, x2, x3) : dotQ5_0(p, x0, x1, x2, x3);
}

// @ts-ignore: decorator
@inline function blockBytes(kind: i32): usize {
  return kind == 0 ? 34 : kind == 1 ? 18 : 22;
}

// @ts-ignore: decorator
@inline function rows4(kind: i32, w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, tStart: i32, nTok: i32, r: i32): void {
  const bb = blockBytes(kind);
  const nb = cols >> 5;
  const w0 = w + <usize>r * rowBytes;
  const w1 = w0 + rowBytes;
  const w2 = w1 + rowBytes;
  const w3 = w2 + rowBytes;
  for (let t = tStart; t < nTok; t++) {
    const qx = xq + ((<usize>t * <usize>cols) << 1);
    const sx = xs + ((<usize>t * <usize>nb) << 2);
    let a0 = f32x4.splat(0);
    let a1 = f32x4.splat(0);
    let a2 = f32x4.splat(0);
    let a3 = f32x4.splat(0);
    for (let b = 0; b < nb; b++) {
      const px = qx + (<usize>b << 6);
      const x0 = v128.load(px);
      const x1 = v128.load(px, 16);
      const x2 = v128.load(px, 32);
      const x3 = v128.load(px, 48);
      const dx = load<f32>(sx + (<usize>b << 2));
      const o = <usize>b * bb;
      a0 = scaleAdd(a0, blockDot(kind, w0 + o, x0, x1, x2, x3), f16(load<u16>(w0 + o)) * dx);
      a1 = scaleAdd(a1, blockDot(kind, w1 + o, x0, x1, x2, x3), f16(load<u16>(w1 + o)) * dx);
      a2 = scaleAdd(a2, blockDot(kind, w2 + o, x0, x1, x2, x3), f16(load<u16>(w2 + o)) * dx);
      a3 = scaleAdd(a3, blockDot(kind, w3 + o, x0, x1, x2, x3), f16(load<u16>(w3 + o)) * dx);
    }
    const ot = out + ((<usize>t * <usize>rows + <usize>r) << 2);
    store<f32>(ot, hsumF32(a0));
    store<f32>(ot, hsumF32(a1), 4);
    store<f32>(ot, hsumF32(a2), 8);
    store<f32>(ot, hsumF32(a3), 12);
  }
}

// @ts-ignore: decorator
@inline function rows1(kind: i32, w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r: i32): void {
  const bb = blockBytes(kind);
  const nb = cols >> 5;
  const w0 = w + <usize>r * rowBytes;
  for (let t = 0; t < nTok; t++) {
    const qx = xq + ((<usize>t * <usize>cols) << 1);
    const sx = xs + ((<usize>t * <usize>nb) << 2);
    let a0 = f32x4.splat(0);
    for (let b = 0; b < nb; b++) {
      const px = qx + (<usize>b << 6);
      const o = <usize>b * bb;
      const s = blockDot(kind, w0 + o, v128.load(px), v128.load(px, 16), v128.load(px, 32), v128.load(px, 48));
      a0 = scaleAdd(a0, s, f16(load<u16>(w0 + o)) * load<f32>(sx + (<usize>b << 2)));
    }
    store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), hsumF32(a0));
  }
}


/** [sum(a), sum(b), sum(c), sum(d)]: four integer dots reduced into one vector's lanes */
// @ts-ignore: decorator
@inline function lanesSum(a: v128, b: v128, c: v128, d: v128): v128 {
  const ab = i32x4.add(i32x4.shuffle(a, b, 0, 4, 1, 5), i32x4.shuffle(a, b, 2, 6, 3, 7));
  const cd = i32x4.add(i32x4.shuffle(c, d, 0, 4, 1, 5), i32x4.shuffle(c, d, 2, 6, 3, 7));
  return i32x4.add(i32x4.shuffle(ab, cd, 0, 1, 4, 5), i32x4.shuffle(ab, cd, 2, 3, 6, 7));
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
@inline function tileBlock(kind: i32, relaxed: bool, mask: v128, p: usize, q: usize, cols: usize, dx: v128, acc: v128): v128 {
  if (relaxed) {
    // Q4_0 on the relaxed build (packed activations, assembly/relaxed.ts): the same exact integer sums
    const lo = nibblesQ4_0(p, mask, false);
    const hi = nibblesQ4_0(p, mask, true);
    const s = lanesSum(dotQ4_0Packed(lo, hi, q), dotQ4_0Packed(lo, hi, q + 2 * cols), dotQ4_0Packed(lo, hi, q + 4 * cols), dotQ4_0Packed(lo, hi, q + 6 * cols));
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
    } else {
      lo = q5Weights(p, false);
      hi = q5Weights(p, true);
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
@inline function tile4x4(kind: i32, relaxed: bool, mask: v128, w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, t: i32, r: i32): void {
  const bb = blockBytes(kind);
  const nb = cols >> 5;
  const w0 = w + <usize>r * rowBytes;
  const w1 = w0 + rowBytes;
  const w2 = w1 + rowBytes;
  const w3 = w2 + rowBytes;
  const qx = xq + ((<usize>t * <usize>cols) << 1);
  const sx = xs + ((<usize>t * <usize>nb) << 2);
  const sStride = <usize>nb << 2;
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
    a0 = tileBlock(kind, relaxed, mask, w0 + o, q, cols, dx, a0);
    a1 = tileBlock(kind, relaxed, mask, w1 + o, q, cols, dx, a1);
    a2 = tileBlock(kind, relaxed, mask, w2 + o, q, cols, dx, a2);
    a3 = tileBlock(kind, relaxed, mask, w3 + o, q, cols, dx, a3);
  }
  const ot = out + ((<usize>t * <usize>rows + <usize>r) << 2);
  storeLanes(ot, rows, a0);
  storeLanes(ot + 4, rows, a1);
  storeLanes(ot + 8, rows, a2);
  storeLanes(ot + 12, rows, a3);
}

/**
 * relaxed: the relaxed build's kernels over packed activations (assembly/relaxed.ts), Q8_0 for
 * single tokens only (its tiles stay on SIMD128: two int8 dots per token, for a+ and a-, gain
 * nothing over a block widened once for four tokens)
 */
// @ts-ignore: decorator
@inline function matQ(kind: i32, relaxed: bool, w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  const mask = relaxed ? orderMask() : v128.splat<i32>(0);
  let r = r0;
  if (relaxed && kind == 0 && nTok > 1) unreachable();
  if (nTok == 1) {
    // decode streams weights that are not in any cache: one row after another is one
    // sequential stream the hardware prefetcher follows, where four interleaved rows of a few
    // hundred bytes each were not (3x slower on the 30 MB logits matrix). Same per-row
    // arithmetic as rows4, so the results are bit for bit the same.
    for (; r < r1; r++) {
      if (relaxed) rowRelaxed(kind, w, rowBytes, xq, xs, out, rows, cols, 0, nTok, r, mask);
      else rows1(kind, w, rowBytes, xq, xs, out, rows, cols, nTok, r);
    }
    return;
  }
  for (; r + 4 <= r1; r += 4) {
    let t = 0;
    for (; t + 4 <= nTok; t += 4) tile4x4(kind, relaxed, mask, w, rowBytes, xq, xs, out, rows, cols, t, r);
    if (relaxed) for (let i = 0; i < 4; i++) rowRelaxed(kind, w, rowBytes, xq, xs, out, rows, cols, t, nTok, r + i, mask);
    else rows4(kind, w, rowBytes, xq, xs, out, rows, cols, t, nTok, r);
  }
  for (; r < r1; r++) {
    if (relaxed) rowRelaxed(kind, w, rowBytes, xq, xs, out, rows, cols, 0, nTok, r, mask);
    else rows1(kind, w, rowBytes, xq, xs, out, rows, cols, nTok, r);
  }
}

export function matQ8_0(w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matQ(0, false, w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1);
}

export function matQ4_0(w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matQ(1, false, w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1);
}

/** relaxed build only: over activations packed by packQ8_0 (single tokens) / packQ4_0 */
export function matQ8_0Relaxed(w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matQ(0, true, w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1);
}

export function matQ4_0Relaxed(w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matQ(1, true, w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1);
}

export function matQ5_0(w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matQ(2, false, w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1);
}
