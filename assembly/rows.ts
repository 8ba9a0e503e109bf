// Row-wise and element-wise ops of a batch, split over the threads as jobs (a prompt's norms and
// residual additions otherwise ran in TypeScript on the main thread while the workers waited).
// Each gives the bits of its TypeScript op in src/kernels/ops/.

import { f16x4 } from "./half";

/**
 * RMSNorm of rows [r0, r1) of `width` floats at x into out (which may be x), as ops/norm.ts's
 * rmsNorm: each square rounded to f32 and summed in f64 in order (ggml_float), the scale
 * 1 / sqrt(mean + eps) in f32 (eps added in f64, then rounded, as the TS op does), then
 * x * scale rounded before the weight's multiplication (weight 0: none)
 */
export function rmsNormRows(x: usize, weight: usize, out: usize, width: i32, eps: f64, r0: i32, r1: i32): void {
  const rowBytes = (<usize>width) << 2;
  let r = r0;
  // four rows' sums side by side: each is one chain of dependent f64 additions (the order ggml
  // fixes), bound by the add's latency; four independent chains keep the adder busy
  for (; r + 4 <= r1; r += 4) {
    const x0 = x + <usize>r * rowBytes, x1 = x0 + rowBytes, x2 = x1 + rowBytes, x3 = x2 + rowBytes;
    let s0: f64 = 0, s1: f64 = 0, s2: f64 = 0, s3: f64 = 0;
    for (let i: usize = 0; i < rowBytes; i += 4) {
      const v0 = load<f32>(x0 + i), v1 = load<f32>(x1 + i), v2 = load<f32>(x2 + i), v3 = load<f32>(x3 + i);
      s0 += <f64>(v0 * v0);
      s1 += <f64>(v1 * v1);
      s2 += <f64>(v2 * v2);
      s3 += <f64>(v3 * v3);
    }
    scaleRow(x0, weight, out + <usize>r * rowBytes, width, eps, s0);
    scaleRow(x1, weight, out + <usize>(r + 1) * rowBytes, width, eps, s1);
    scaleRow(x2, weight, out + <usize>(r + 2) * rowBytes, width, eps, s2);
    scaleRow(x3, weight, out + <usize>(r + 3) * rowBytes, width, eps, s3);
  }
  for (; r < r1; r++) {
    const xr = x + <usize>r * rowBytes;
    let sum: f64 = 0;
    for (let i: usize = 0; i < rowBytes; i += 4) {
      const v = load<f32>(xr + i);
      sum += <f64>(v * v);
    }
    scaleRow(xr, weight, out + <usize>r * rowBytes, width, eps, sum);
  }
}

/** one row of rmsNormRows from its sum of squares */
function scaleRow(xr: usize, weight: usize, o: usize, width: i32, eps: f64, sum: f64): void {
  const rowBytes = (<usize>width) << 2;
  const mean = <f32>(sum / <f64>width);
  const scale: f32 = <f32>1 / sqrt<f32>(<f32>(<f64>mean + eps));
  const s = f32x4.splat(scale);
  let i: usize = 0;
  if (weight != 0) {
    for (; i + 16 <= rowBytes; i += 16) v128.store(o + i, f32x4.mul(f32x4.mul(v128.load(xr + i), s), v128.load(weight + i)));
    for (; i < rowBytes; i += 4) store<f32>(o + i, load<f32>(xr + i) * scale * load<f32>(weight + i));
  } else {
    for (; i + 16 <= rowBytes; i += 16) v128.store(o + i, f32x4.mul(v128.load(xr + i), s));
    for (; i < rowBytes; i += 4) store<f32>(o + i, load<f32>(xr + i) * scale);
  }
}

/** x[i] += y[i] for i in [i0, i1) (f32 additions: ops/elementwise.ts's addInPlace) */
export function addRange(x: usize, y: usize, i0: i32, i1: i32): void {
  let i = (<usize>i0) << 2;
  const end = (<usize>i1) << 2;
  for (; i + 16 <= end; i += 16) v128.store(x + i, f32x4.add(v128.load(x + i), v128.load(y + i)));
  for (; i < end; i += 4) store<f32>(x + i, load<f32>(x + i) + load<f32>(y + i));
}

/**
 * RoPE in place on rows [r0, r1) of x, row r being head r % nHeads of token r / nHeads (headDim
 * floats), with each token's angles at `angles` (ropeDim floats: cos, sin of each pair, ops/rope.ts's
 * table), as ops/rope.ts's applyRope: pairs (2i, 2i + 1), or (i, i + ropeDim / 2) for neox;
 * x0 c - f32(x1 s) and x0 s + f32(x1 c) in f64, then rounded
 */
export function ropeRows(x: usize, angles: usize, headDim: i32, ropeDim: i32, nHeads: i32, neox: bool, r0: i32, r1: i32): void {
  const half = <usize>(ropeDim >> 1);
  for (let r = r0; r < r1; r++) {
    const o = x + ((<usize>r * <usize>headDim) << 2);
    const a = angles + ((<usize>(r / nHeads) * <usize>ropeDim) << 2);
    for (let i: usize = 0; i < half; i++) {
      const c = load<f32>(a + (i << 3)), s = load<f32>(a + (i << 3), 4);
      const pa = neox ? o + (i << 2) : o + (i << 3);
      const pb = neox ? pa + (half << 2) : pa + 4;
      const x0 = load<f32>(pa), x1 = load<f32>(pb);
      store<f32>(pa, <f32>(<f64>x0 * <f64>c - <f64>(x1 * s)));
      store<f32>(pb, <f32>(<f64>x0 * <f64>s + <f64>(x1 * c)));
    }
  }
}

/** rows [r0, r1) of `bytes` each from src (srcStride bytes apart) to dst (dstStride apart) */
export function copyRows(dst: usize, dstStride: usize, src: usize, srcStride: usize, bytes: usize, r0: i32, r1: i32): void {
  for (let r = r0; r < r1; r++) memory.copy(dst + <usize>r * dstStride, src + <usize>r * srcStride, bytes);
}

/**
 * Rows [r0, r1) of `width` f16 values, row r at src + rows[r] * srcStride (the cache's row index),
 * to f32 rows at dst, `width` floats apart: each value exact (Inf, NaN and subnormals included),
 * as decodeKV("f16") gives it; the i32 at `nonFinite` is set to 1 if any is Inf or NaN (the
 * attention that reads them skips masked positions, which the reference multiplies by 0). width is
 * a multiple of 4.
 */
export function halfRows(dst: usize, src: usize, rows: usize, srcStride: usize, width: i32, nonFinite: usize, r0: i32, r1: i32): void {
  const bytes = (<usize>width) << 1;
  // the largest magnitude bits met (each half shifted left once): 0xf800 and up is Inf or NaN
  let seen = i16x8.splat(0);
  for (let r = r0; r < r1; r++) {
    const s = src + (<usize>load<i32>(rows + ((<usize>r) << 2))) * srcStride, d = dst + ((<usize>r * <usize>width) << 2);
    let i: usize = 0;
    for (; i + 16 <= bytes; i += 16) {
      const h = v128.load(s + i);
      seen = i16x8.max_u(seen, i16x8.shl(h, 1));
      v128.store(d + (i << 1), f16x4(i32x4.shl(i32x4.extend_low_i16x8_u(h), 16)));
      v128.store(d + (i << 1), f16x4(i32x4.shl(i32x4.extend_high_i16x8_u(h), 16)), 16);
    }
    if (i < bytes) {
      const h = v128.load64_zero(s + i);
      seen = i16x8.max_u(seen, i16x8.shl(h, 1));
      v128.store(d + (i << 1), f16x4(i32x4.shl(i32x4.extend_low_i16x8_u(h), 16)));
    }
  }
  if (v128.any_true(i16x8.ge_u(seen, i16x8.splat(<i16>0xf800)))) atomic.store<i32>(nonFinite, 1);
}
