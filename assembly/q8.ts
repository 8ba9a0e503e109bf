// Q8_0 and Q4_0 weights against Q8_0 activations (ggml's vec_dot_q8_0_q8_0 / q4_0_q8_0):
// per block of 32 an exact integer dot (widen int8 to int16, i32x4.dot_i16x8_s), scaled by
// weight scale * activation scale into four float lanes per row. Four rows share each block
// of activations loaded into registers.
import { f16 } from "./half";
import { hsumF32, scaleAdd } from "./simd";

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

// @ts-ignore: decorator
@inline function blockDot(kind: i32, p: usize, x0: v128, x1: v128, x2: v128, x3: v128): v128 {
  return kind == 0 ? dotQ8_0(p, x0, x1, x2, x3) : dotQ4_0(p, x0, x1, x2, x3);
}

// @ts-ignore: decorator
@inline function blockBytes(kind: i32): usize {
  return kind == 0 ? 34 : 18;
}

// @ts-ignore: decorator
@inline function rows4(kind: i32, w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r: i32): void {
  const bb = blockBytes(kind);
  const nb = cols >> 5;
  const w0 = w + <usize>r * rowBytes;
  const w1 = w0 + rowBytes;
  const w2 = w1 + rowBytes;
  const w3 = w2 + rowBytes;
  for (let t = 0; t < nTok; t++) {
    const qx = xq + <usize>t * <usize>cols;
    const sx = xs + ((<usize>t * <usize>nb) << 2);
    let a0 = f32x4.splat(0);
    let a1 = f32x4.splat(0);
    let a2 = f32x4.splat(0);
    let a3 = f32x4.splat(0);
    for (let b = 0; b < nb; b++) {
      const px = qx + (<usize>b << 5);
      const x0 = v128.load8x8_s(px);
      const x1 = v128.load8x8_s(px, 8);
      const x2 = v128.load8x8_s(px, 16);
      const x3 = v128.load8x8_s(px, 24);
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
    const qx = xq + <usize>t * <usize>cols;
    const sx = xs + ((<usize>t * <usize>nb) << 2);
    let a0 = f32x4.splat(0);
    for (let b = 0; b < nb; b++) {
      const px = qx + (<usize>b << 5);
      const o = <usize>b * bb;
      const s = blockDot(kind, w0 + o, v128.load8x8_s(px), v128.load8x8_s(px, 8), v128.load8x8_s(px, 16), v128.load8x8_s(px, 24));
      a0 = scaleAdd(a0, s, f16(load<u16>(w0 + o)) * load<f32>(sx + (<usize>b << 2)));
    }
    store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), hsumF32(a0));
  }
}

export function matQ8_0(w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  let r = r0;
  for (; r + 4 <= r1; r += 4) rows4(0, w, rowBytes, xq, xs, out, rows, cols, nTok, r);
  for (; r < r1; r++) rows1(0, w, rowBytes, xq, xs, out, rows, cols, nTok, r);
}

export function matQ4_0(w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  let r = r0;
  for (; r + 4 <= r1; r += 4) rows4(1, w, rowBytes, xq, xs, out, rows, cols, nTok, r);
  for (; r < r1; r++) rows1(1, w, rowBytes, xq, xs, out, rows, cols, nTok, r);
}
