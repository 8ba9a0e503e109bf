// Q4_K and Q6_K weights against Q8_K activations (ggml's vec_dot_q4_K_q8_K / q6_K_q8_K):
// per super-block of 256 an exact integer sum of sub-block dots times their integer scales,
// then one float multiply by weight scale * activation scale. Activations are split: int8 q
// (xq), one f32 d per super-block (xd), int32 sums of each 16 q (xb).
import { f16 } from "./half";
import { dot16, dot16u, hsumI32 } from "./simd";

// Q4_K's packed 6-bit scale (which = 0) or min (which = 1) of sub-block j (ggml get_scale_min_k4)
// @ts-ignore: decorator
@inline export function scaleMinK4(q: usize, j: i32, which: i32): i32 {
  if (j < 4) return which == 0 ? load<u8>(q + j) & 63 : load<u8>(q + j + 4) & 63;
  if (which == 0) return (load<u8>(q + j + 4) & 0xf) | ((load<u8>(q + j - 4) >> 6) << 4);
  return (load<u8>(q + j + 4) >> 4) | ((load<u8>(q + j) >> 6) << 4);
}

/**
 * one Q4_K super-block (144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins,
 * 128 bytes of nibbles) against one Q8_K super-block of activations
 */
// @ts-ignore: decorator
@inline function superQ4_K(p: usize, qx: usize, dx: f32, bs: usize): f32 {
  const sc = p + 4;
  const mask = i8x16.splat(0x0f);
  let isum = i32x4.splat(0);
  let msum = 0;
  for (let j = 0; j < 4; j++) {
    // 32 bytes: low nibbles are sub-block 2j, high nibbles sub-block 2j + 1
    const q = p + 16 + (<usize>j << 5);
    const v0 = v128.load(q);
    const v1 = v128.load(q, 16);
    const x = qx + (<usize>j << 7);
    const pa = i32x4.add(dot16u(v128.and(v0, mask), x), dot16u(v128.and(v1, mask), x + 32));
    const pb = i32x4.add(dot16u(i8x16.shr_u(v0, 4), x + 64), dot16u(i8x16.shr_u(v1, 4), x + 96));
    const s0 = scaleMinK4(sc, 2 * j, 0);
    const s1 = scaleMinK4(sc, 2 * j + 1, 0);
    isum = i32x4.add(isum, i32x4.add(i32x4.mul(pa, i32x4.splat(s0)), i32x4.mul(pb, i32x4.splat(s1))));
    // the min term: m * (sum of this sub-block's activations) = m * (two group sums)
    const b = bs + (<usize>j << 4);
    msum += scaleMinK4(sc, 2 * j, 1) * (load<i32>(b) + load<i32>(b, 4));
    msum += scaleMinK4(sc, 2 * j + 1, 1) * (load<i32>(b, 8) + load<i32>(b, 12));
  }
  const d = f16(load<u16>(p)) * dx;
  const dmin = f16(load<u16>(p, 2)) * dx;
  return d * <f32>hsumI32(isum) - dmin * <f32>msum;
}

/**
 * one Q6_K super-block (210 bytes: 128 bytes low nibbles, 64 bytes of 2-bit high parts,
 * 16 int8 scales, f16 d) against one Q8_K super-block of activations
 */
// @ts-ignore: decorator
@inline function superQ6_K(p: usize, qx: usize, dx: f32): f32 {
  const m4 = i8x16.splat(0x0f);
  const m2 = i8x16.splat(3);
  const k32 = i8x16.splat(32);
  let isum = i32x4.splat(0);
  for (let n = 0; n < 2; n++) {
    // each half of 128 weights: ql 64 bytes, qh 32 bytes, 8 scales (one per 16 weights)
    const ql = p + (<usize>n << 6);
    const qh = p + 128 + (<usize>n << 5);
    const sc = p + 192 + (<usize>n << 3);
    const x = qx + (<usize>n << 8);
    for (let c = 0; c < 2; c++) {
      const o = <usize>c << 4;
      const xo = x + (o << 1);
      const l0 = v128.load(ql + o);
      const l1 = v128.load(ql + o, 32);
      const h = v128.load(qh + o);
      // weight l, l+32, l+64, l+96 of the half: 4 low bits from ql, 2 high bits from qh, - 32
      const q1 = i8x16.sub(v128.or(v128.and(l0, m4), i8x16.shl(v128.and(h, m2), 4)), k32);
      const q2 = i8x16.sub(v128.or(v128.and(l1, m4), i8x16.shl(v128.and(i8x16.shr_u(h, 2), m2), 4)), k32);
      const q3 = i8x16.sub(v128.or(i8x16.shr_u(l0, 4), i8x16.shl(v128.and(i8x16.shr_u(h, 4), m2), 4)), k32);
      const q4 = i8x16.sub(v128.or(i8x16.shr_u(l1, 4), i8x16.shl(i8x16.shr_u(h, 6), 4)), k32);
      isum = i32x4.add(isum, i32x4.mul(dot16(q1, xo), i32x4.splat(<i32>load<i8>(sc + c))));
      isum = i32x4.add(isum, i32x4.mul(dot16(q2, xo + 64), i32x4.splat(<i32>load<i8>(sc + c + 2))));
      isum = i32x4.add(isum, i32x4.mul(dot16(q3, xo + 128), i32x4.splat(<i32>load<i8>(sc + c + 4))));
      isum = i32x4.add(isum, i32x4.mul(dot16(q4, xo + 192), i32x4.splat(<i32>load<i8>(sc + c + 6))));
    }
  }
  return (f16(load<u16>(p, 208)) * dx) * <f32>hsumI32(isum);
}

export function matQ4_K(w: usize, rowBytes: usize, xq: usize, xd: usize, xb: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  const nb = cols >> 8;
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * rowBytes;
    for (let t = 0; t < nTok; t++) {
      const tb = <usize>t * <usize>nb;
      let sum: f32 = 0;
      for (let b = 0; b < nb; b++) {
        const i = tb + <usize>b;
        sum += superQ4_K(wr + <usize>b * 144, xq + (i << 9), load<f32>(xd + (i << 2)), xb + (i << 6));
      }
      store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), sum);
    }
  }
}

export function matQ6_K(w: usize, rowBytes: usize, xq: usize, xd: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  const nb = cols >> 8;
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * rowBytes;
    for (let t = 0; t < nTok; t++) {
      const tb = <usize>t * <usize>nb;
      let sum: f32 = 0;
      for (let b = 0; b < nb; b++) {
        const i = tb + <usize>b;
        sum += superQ6_K(wr + <usize>b * 210, xq + (i << 9), load<f32>(xd + (i << 2)));
      }
      store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), sum);
    }
  }
}
