// F32, F16 and BF16 weights against f32 activations (already rounded to the weight's vec_dot
// type by the caller). Rows are done four at a time so each activation vector loaded from
// memory serves four weight rows; each row keeps its own four-lane accumulator.
import { f16, F16_REBIAS } from "./half";
import { hsumF32 } from "./simd";

/**
 * four f16 weights at p as f32x4: sign-extend to i32, shift the 15 payload bits to the f32
 * exponent/mantissa position, keep the sign, rescale. Exact for normal and subnormal values;
 * Inf/NaN weights come out as large finite numbers (model weights are finite).
 */
// @ts-ignore: decorator
@inline function loadF16x4(p: usize): v128 {
  const bits = v128.and(i32x4.shl(v128.load16x4_s(p), 13), i32x4.splat(0x8fffe000));
  return f32x4.mul(bits, f32x4.splat(F16_REBIAS));
}

/** four bf16 weights at p as f32x4: bf16 is the top half of an f32 */
// @ts-ignore: decorator
@inline function loadBF16x4(p: usize): v128 {
  return i32x4.shl(v128.load16x4_u(p), 16);
}

// @ts-ignore: decorator
@inline function loadW(kind: i32, p: usize): v128 {
  if (kind == 0) return v128.load(p);
  if (kind == 1) return loadF16x4(p);
  return loadBF16x4(p);
}

// @ts-ignore: decorator
@inline function scalarW(kind: i32, p: usize): f32 {
  if (kind == 0) return load<f32>(p);
  if (kind == 1) return f16(load<u16>(p));
  return reinterpret<f32>(<u32>load<u16>(p) << 16);
}

// weight bytes per element: 4 for f32, 2 for f16/bf16
// @ts-ignore: decorator
@inline function shift(kind: i32): i32 {
  return kind == 0 ? 2 : 1;
}

// @ts-ignore: decorator
@inline function rows4(kind: i32, w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, nTok: i32, r: i32): void {
  const sh = shift(kind);
  const w0 = w + <usize>r * rowBytes;
  const w1 = w0 + rowBytes;
  const w2 = w1 + rowBytes;
  const w3 = w2 + rowBytes;
  const vec = cols & ~3;
  for (let t = 0; t < nTok; t++) {
    const xt = x + ((<usize>t * <usize>cols) << 2);
    let a0 = f32x4.splat(0);
    let a1 = f32x4.splat(0);
    let a2 = f32x4.splat(0);
    let a3 = f32x4.splat(0);
    for (let i = 0; i < vec; i += 4) {
      const xv = v128.load(xt + (<usize>i << 2));
      const o = <usize>i << sh;
      a0 = f32x4.add(a0, f32x4.mul(loadW(kind, w0 + o), xv));
      a1 = f32x4.add(a1, f32x4.mul(loadW(kind, w1 + o), xv));
      a2 = f32x4.add(a2, f32x4.mul(loadW(kind, w2 + o), xv));
      a3 = f32x4.add(a3, f32x4.mul(loadW(kind, w3 + o), xv));
    }
    let s0 = hsumF32(a0);
    let s1 = hsumF32(a1);
    let s2 = hsumF32(a2);
    let s3 = hsumF32(a3);
    for (let i = vec; i < cols; i++) {
      const xv = load<f32>(xt + (<usize>i << 2));
      const o = <usize>i << sh;
      s0 += scalarW(kind, w0 + o) * xv;
      s1 += scalarW(kind, w1 + o) * xv;
      s2 += scalarW(kind, w2 + o) * xv;
      s3 += scalarW(kind, w3 + o) * xv;
    }
    const ot = out + ((<usize>t * <usize>rows + <usize>r) << 2);
    store<f32>(ot, s0);
    store<f32>(ot, s1, 4);
    store<f32>(ot, s2, 8);
    store<f32>(ot, s3, 12);
  }
}

// @ts-ignore: decorator
@inline function rows1(kind: i32, w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, nTok: i32, r: i32): void {
  const sh = shift(kind);
  const w0 = w + <usize>r * rowBytes;
  const vec = cols & ~3;
  for (let t = 0; t < nTok; t++) {
    const xt = x + ((<usize>t * <usize>cols) << 2);
    let a0 = f32x4.splat(0);
    for (let i = 0; i < vec; i += 4) {
      a0 = f32x4.add(a0, f32x4.mul(loadW(kind, w0 + (<usize>i << sh)), v128.load(xt + (<usize>i << 2))));
    }
    let s0 = hsumF32(a0);
    for (let i = vec; i < cols; i++) s0 += scalarW(kind, w0 + (<usize>i << sh)) * load<f32>(xt + (<usize>i << 2));
    store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), s0);
  }
}

// One exported function per weight type so `kind` is a constant inside each (the branches in
// loadW fold away).

export function matF32(w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  let r = r0;
  for (; r + 4 <= r1; r += 4) rows4(0, w, rowBytes, x, out, rows, cols, nTok, r);
  for (; r < r1; r++) rows1(0, w, rowBytes, x, out, rows, cols, nTok, r);
}

export function matF16(w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  let r = r0;
  for (; r + 4 <= r1; r += 4) rows4(1, w, rowBytes, x, out, rows, cols, nTok, r);
  for (; r < r1; r++) rows1(1, w, rowBytes, x, out, rows, cols, nTok, r);
}

export function matBF16(w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  let r = r0;
  for (; r + 4 <= r1; r += 4) rows4(2, w, rowBytes, x, out, rows, cols, nTok, r);
  for (; r < r1; r++) rows1(2, w, rowBytes, x, out, rows, cols, nTok, r);
}
