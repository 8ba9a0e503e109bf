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

/**
 * acc + w * x on four lanes: fused in the relaxed build (f32x4.relaxed_madd: one rounding where
 * the CPU has FMA, twice the multiply-adds per cycle), a multiply then an add in the SIMD128
 * build. Every path of a build (one token or a tile of several) adds in the same order with the
 * same instruction, so a row's result does not depend on the batch it is computed in.
 */
// @ts-ignore: decorator
@inline function madd(w: v128, x: v128, acc: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(w, x, acc);
  return f32x4.add(f32x4.mul(w, x), acc);
}

/** a row's result: its four lanes added (hsumF32), then the last cols % 4 products one by one */
// @ts-ignore: decorator
@inline function finish(kind: i32, acc: v128, wRow: usize, xRow: usize, vec: i32, cols: i32): f32 {
  const sh = shift(kind);
  let s = hsumF32(acc);
  for (let i = vec; i < cols; i++) s += scalarW(kind, wRow + (<usize>i << sh)) * load<f32>(xRow + (<usize>i << 2));
  return s;
}

/**
 * Four rows x two tokens (t, t + 1), prefill: each weight vector loaded (and converted, for
 * F16/BF16) once serves both tokens, each activation vector all four rows; eight independent
 * accumulators keep the multiply-add units busy (a single row's chain waits on its own latency).
 */
// @ts-ignore: decorator
@inline function tile4x2(kind: i32, w0: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, t: i32, r: i32): void {
  const sh = shift(kind);
  const w1 = w0 + rowBytes;
  const w2 = w1 + rowBytes;
  const w3 = w2 + rowBytes;
  const x0 = x + ((<usize>t * <usize>cols) << 2);
  const x1 = x0 + ((<usize>cols) << 2);
  const vec = cols & ~3;
  const z = f32x4.splat(0);
  let a00 = z, a01 = z, a10 = z, a11 = z, a20 = z, a21 = z, a30 = z, a31 = z;
  for (let i = 0; i < vec; i += 4) {
    const xa = v128.load(x0 + (<usize>i << 2));
    const xb = v128.load(x1 + (<usize>i << 2));
    const o = <usize>i << sh;
    const v0 = loadW(kind, w0 + o);
    a00 = madd(v0, xa, a00);
    a01 = madd(v0, xb, a01);
    const v1 = loadW(kind, w1 + o);
    a10 = madd(v1, xa, a10);
    a11 = madd(v1, xb, a11);
    const v2 = loadW(kind, w2 + o);
    a20 = madd(v2, xa, a20);
    a21 = madd(v2, xb, a21);
    const v3 = loadW(kind, w3 + o);
    a30 = madd(v3, xa, a30);
    a31 = madd(v3, xb, a31);
  }
  const o0 = out + ((<usize>t * <usize>rows + <usize>r) << 2);
  const o1 = o0 + ((<usize>rows) << 2);
  store<f32>(o0, finish(kind, a00, w0, x0, vec, cols));
  store<f32>(o1, finish(kind, a01, w0, x1, vec, cols));
  store<f32>(o0, finish(kind, a10, w1, x0, vec, cols), 4);
  store<f32>(o1, finish(kind, a11, w1, x1, vec, cols), 4);
  store<f32>(o0, finish(kind, a20, w2, x0, vec, cols), 8);
  store<f32>(o1, finish(kind, a21, w2, x1, vec, cols), 8);
  store<f32>(o0, finish(kind, a30, w3, x0, vec, cols), 12);
  store<f32>(o1, finish(kind, a31, w3, x1, vec, cols), 12);
}

/** four rows x one token (decode, and a batch's last odd token) */
// @ts-ignore: decorator
@inline function tile4x1(kind: i32, w0: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, t: i32, r: i32): void {
  const sh = shift(kind);
  const w1 = w0 + rowBytes;
  const w2 = w1 + rowBytes;
  const w3 = w2 + rowBytes;
  const vec = cols & ~3;
  const xt = x + ((<usize>t * <usize>cols) << 2);
  let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0;
  for (let i = 0; i < vec; i += 4) {
    const xv = v128.load(xt + (<usize>i << 2));
    const o = <usize>i << sh;
    a0 = madd(loadW(kind, w0 + o), xv, a0);
    a1 = madd(loadW(kind, w1 + o), xv, a1);
    a2 = madd(loadW(kind, w2 + o), xv, a2);
    a3 = madd(loadW(kind, w3 + o), xv, a3);
  }
  const ot = out + ((<usize>t * <usize>rows + <usize>r) << 2);
  store<f32>(ot, finish(kind, a0, w0, xt, vec, cols));
  store<f32>(ot, finish(kind, a1, w1, xt, vec, cols), 4);
  store<f32>(ot, finish(kind, a2, w2, xt, vec, cols), 8);
  store<f32>(ot, finish(kind, a3, w3, xt, vec, cols), 12);
}

/** one row x tokens [t0, t1) (the last rows % 4 rows of a claim) */
// @ts-ignore: decorator
@inline function rows1(kind: i32, w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, t0: i32, t1: i32, r: i32): void {
  const sh = shift(kind);
  const w0 = w + <usize>r * rowBytes;
  const vec = cols & ~3;
  for (let t = t0; t < t1; t++) {
    const xt = x + ((<usize>t * <usize>cols) << 2);
    let a0 = f32x4.splat(0);
    for (let i = 0; i < vec; i += 4) a0 = madd(loadW(kind, w0 + (<usize>i << sh)), v128.load(xt + (<usize>i << 2)), a0);
    store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), finish(kind, a0, w0, xt, vec, cols));
  }
}

/**
 * Activation bytes of one block of tokens: a claim's rows go over one block at a time, so the
 * block stays in L2 while every row group reads it (32 sentences of 128 tokens are 6 MB of
 * MiniLM activations: streamed from memory once per four rows they held the tiles to ~60% of
 * their in-cache rate), and the claim's rows stay in L2 across the blocks.
 */
const TOKEN_BLOCK_BYTES: i32 = 256 << 10;

/** rows [r0, r0 + 4) of an F16/BF16 weight converted to f32 at panel (cols floats a row): the values loadW gives, so the same bits */
// @ts-ignore: decorator
@inline function convertRows(kind: i32, w0: usize, rowBytes: usize, cols: i32, panel: usize): void {
  const sh = shift(kind);
  const vec = cols & ~3;
  const stride = (<usize>cols) << 2;
  for (let k: usize = 0; k < 4; k++) {
    const src = w0 + k * rowBytes, dst = panel + k * stride;
    let i = 0;
    for (; i < vec; i += 4) v128.store(dst + (<usize>i << 2), loadW(kind, src + (<usize>i << sh)));
    for (; i < cols; i++) store<f32>(dst + (<usize>i << 2), scalarW(kind, src + (<usize>i << sh)));
  }
}

/** token blocks at least this long convert an F16/BF16 row group once into the panel (fewer tokens: in the tiles) */
const PANEL_TOKENS: i32 = 4;

/**
 * rows [r0, r1) for every token: tiles of four rows x two tokens, the leftovers by the same
 * per-row arithmetic. panel (F16/BF16; 0 for none): this thread's 16 * cols bytes, where each
 * group of four rows is converted to f32 once per token block and the F32 tiles run on it (the
 * tiles converted each weight vector again for every pair of tokens: F16 ran at a third of F32).
 */
// @ts-ignore: decorator
@inline function matFloat(kind: i32, w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, panel: usize): void {
  const blockTokens = max<i32>(2, (TOKEN_BLOCK_BYTES / (cols << 2)) & ~1);
  for (let t0 = 0; t0 < nTok; t0 += blockTokens) {
    const t1 = min<i32>(nTok, t0 + blockTokens);
    const converted = kind != 0 && panel != 0 && t1 - t0 >= PANEL_TOKENS;
    let r = r0;
    for (; r + 4 <= r1; r += 4) {
      const w0 = w + <usize>r * rowBytes;
      let t = t0;
      if (converted) {
        convertRows(kind, w0, rowBytes, cols, panel);
        for (; t + 2 <= t1; t += 2) tile4x2(0, panel, (<usize>cols) << 2, x, out, rows, cols, t, r);
        if (t < t1) tile4x1(0, panel, (<usize>cols) << 2, x, out, rows, cols, t, r);
        continue;
      }
      for (; t + 2 <= t1; t += 2) tile4x2(kind, w0, rowBytes, x, out, rows, cols, t, r);
      if (t < t1) tile4x1(kind, w0, rowBytes, x, out, rows, cols, t, r);
    }
    for (; r < r1; r++) rows1(kind, w, rowBytes, x, out, rows, cols, t0, t1, r);
  }
}

// One exported function per weight type so `kind` is a constant inside each (the branches in
// loadW fold away).

export function matF32(w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matFloat(0, w, rowBytes, x, out, rows, cols, nTok, r0, r1, 0);
}

/** panel: this thread's 16 * cols bytes of scratch for batches (0: none) */
export function matF16(w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, panel: usize): void {
  matFloat(1, w, rowBytes, x, out, rows, cols, nTok, r0, r1, panel);
}

export function matBF16(w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, panel: usize): void {
  matFloat(2, w, rowBytes, x, out, rows, cols, nTok, r0, r1, panel);
}
