// Q4_1 and Q5_1 weights (ggml's legacy formats with a block minimum) against Q8_1 activations
// (ggml_vec_dot_q4_1_q8_1 / q5_1_q8_1): per block of 32, d_w * d_x * sum(q_w * q_x) + m_w * s_x,
// where s_x = d_x * sum(q_x) as the activation block's f16 carries it. The integer dot is exact
// (int8 widened to int16, i32x4.dot_i16x8_s); the blocks add in f32 where the reference adds in
// f64 (within the matmul tolerance). The activations come as Q8_0's int16 values and f16 scales
// (the same q and d as Q8_1's) plus the host's s_x per block, f32 at xb.
import { f16At, f16TableAddress } from "./half";
import { hsumI32 } from "./simd";
import { fifthBits } from "./q8";

/** weights 0..15 (high = false) or 16..31 of a block, unsigned, as int8: Q4_1's nibbles at p + 4, or Q5_1's at p + 8 with the fifth bits of qh at p + 4 */
// @ts-ignore: decorator
@inline function weights(q5: bool, p: usize, high: bool): v128 {
  if (!q5) {
    const v = v128.load(p, 4);
    return high ? i8x16.shr_u(v, 4) : v128.and(v, i8x16.splat(0x0f));
  }
  const v = v128.load(p, 8);
  const nibbles = high ? i8x16.shr_u(v, 4) : v128.and(v, i8x16.splat(0x0f));
  return v128.or(nibbles, fifthBits(p + 4, high));
}

// @ts-ignore: decorator
@inline function matQ1(q5: bool, w: usize, rowBytes: usize, xq: usize, xs: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  const table = f16TableAddress();
  const nb = cols >> 5;
  const bb: usize = q5 ? 24 : 20;
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * rowBytes;
    for (let t = 0; t < nTok; t++) {
      const x0 = xq + ((<usize>t * <usize>cols) << 1);
      const dx0 = xs + ((<usize>t * <usize>nb) << 2), sx0 = xb + ((<usize>t * <usize>nb) << 2);
      let sum: f32 = 0;
      for (let b = 0; b < nb; b++) {
        const p = wr + <usize>b * bb, x = x0 + (<usize>b << 6);
        const lo = weights(q5, p, false), hi = weights(q5, p, true);
        let s = i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_u(lo), v128.load(x));
        s = i32x4.add(s, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_u(lo), v128.load(x, 16)));
        s = i32x4.add(s, i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_u(hi), v128.load(x, 32)));
        s = i32x4.add(s, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_u(hi), v128.load(x, 48)));
        const dx = load<f32>(dx0 + (<usize>b << 2)), sx = load<f32>(sx0 + (<usize>b << 2));
        sum += f16At(p, table) * dx * <f32>hsumI32(s) + f16At(p + 2, table) * sx;
      }
      store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), sum);
    }
  }
}

export function matQ4_1(w: usize, rowBytes: usize, xq: usize, xs: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matQ1(false, w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1);
}

export function matQ5_1(w: usize, rowBytes: usize, xq: usize, xs: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matQ1(true, w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1);
}
