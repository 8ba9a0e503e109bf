// Register-only loops that measure what this runtime's SIMD can do at most (scripts/roofline.ts):
// eight independent accumulators, operands that never leave registers, no memory traffic. Each
// returns a value built from every accumulator so the optimizer keeps the work. The prefill
// kernels are reported as a fraction of these rates.

/** multiply-adds of the int8 relaxed dot (i32x4.relaxed_dot_i8x16_i7x16_add_s: 16 per instruction), `iterations` x 8 x 16 of them (relaxed build; 0 in the SIMD128 build) */
export function rooflineDotI8(iterations: i32, seed: i32): i32 {
  if (!ASC_FEATURE_RELAXED_SIMD) return 0;
  const a = i8x16.splat(<i8>(seed | 1)), b = i8x16.splat(<i8>((seed >> 8) & 63));
  let c0 = i32x4.splat(0), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
  for (let i = 0; i < iterations; i++) {
    c0 = i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, c0);
    c1 = i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, c1);
    c2 = i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, c2);
    c3 = i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, c3);
    c4 = i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, c4);
    c5 = i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, c5);
    c6 = i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, c6);
    c7 = i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, c7);
  }
  return i32x4.extract_lane(i32x4.add(i32x4.add(i32x4.add(c0, c1), i32x4.add(c2, c3)), i32x4.add(i32x4.add(c4, c5), i32x4.add(c6, c7))), 0);
}

/** multiply-adds of SIMD128's widening dot (i32x4.dot_i16x8_s + add: 8 per pair of instructions), `iterations` x 8 x 8 of them */
export function rooflineDotI16(iterations: i32, seed: i32): i32 {
  const a = i16x8.splat(<i16>(seed | 1)), b = i16x8.splat(<i16>((seed >> 8) & 127));
  let c0 = i32x4.splat(0), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
  for (let i = 0; i < iterations; i++) {
    c0 = i32x4.add(c0, i32x4.dot_i16x8_s(a, b));
    c1 = i32x4.add(c1, i32x4.dot_i16x8_s(a, b));
    c2 = i32x4.add(c2, i32x4.dot_i16x8_s(a, b));
    c3 = i32x4.add(c3, i32x4.dot_i16x8_s(a, b));
    c4 = i32x4.add(c4, i32x4.dot_i16x8_s(a, b));
    c5 = i32x4.add(c5, i32x4.dot_i16x8_s(a, b));
    c6 = i32x4.add(c6, i32x4.dot_i16x8_s(a, b));
    c7 = i32x4.add(c7, i32x4.dot_i16x8_s(a, b));
  }
  return i32x4.extract_lane(i32x4.add(i32x4.add(i32x4.add(c0, c1), i32x4.add(c2, c3)), i32x4.add(i32x4.add(c4, c5), i32x4.add(c6, c7))), 0);
}

/** f32 multiply-adds: fused (f32x4.relaxed_madd) in the relaxed build, mul + add in the SIMD128 one; `iterations` x 8 x 4 of them */
export function rooflineF32(iterations: i32, seed: f32): f32 {
  const a = f32x4.splat(<f32>1 + seed * <f32>1e-9), b = f32x4.splat(<f32>1e-7);
  let c0 = f32x4.splat(seed), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
  for (let i = 0; i < iterations; i++) {
    if (ASC_FEATURE_RELAXED_SIMD) {
      c0 = f32x4.relaxed_madd(c0, a, b);
      c1 = f32x4.relaxed_madd(c1, a, b);
      c2 = f32x4.relaxed_madd(c2, a, b);
      c3 = f32x4.relaxed_madd(c3, a, b);
      c4 = f32x4.relaxed_madd(c4, a, b);
      c5 = f32x4.relaxed_madd(c5, a, b);
      c6 = f32x4.relaxed_madd(c6, a, b);
      c7 = f32x4.relaxed_madd(c7, a, b);
    } else {
      c0 = f32x4.add(f32x4.mul(c0, a), b);
      c1 = f32x4.add(f32x4.mul(c1, a), b);
      c2 = f32x4.add(f32x4.mul(c2, a), b);
      c3 = f32x4.add(f32x4.mul(c3, a), b);
      c4 = f32x4.add(f32x4.mul(c4, a), b);
      c5 = f32x4.add(f32x4.mul(c5, a), b);
      c6 = f32x4.add(f32x4.mul(c6, a), b);
      c7 = f32x4.add(f32x4.mul(c7, a), b);
    }
  }
  return f32x4.extract_lane(f32x4.add(f32x4.add(f32x4.add(c0, c1), f32x4.add(c2, c3)), f32x4.add(f32x4.add(c4, c5), f32x4.add(c6, c7))), 0);
}

/**
 * Lane 0 of i32x4.relaxed_dot_i8x16_i7x16_add_s(splat(a), splat(b), splat(c)): with a = -128 and
 * b = 255 (outside i7) it tells how the runtime lowers the dot: -130560 + c where the four
 * products are added exactly (VNNI's vpdpbusd), -65536 + c where pairs saturate to int16 first
 * (pmaddubsw + pmaddwd). 0 in the SIMD128 build.
 */
export function probeDotAdd(a: i32, b: i32, c: i32): i32 {
  if (!ASC_FEATURE_RELAXED_SIMD) return 0;
  return i32x4.extract_lane(i32x4.relaxed_dot_i8x16_i7x16_add_s(i8x16.splat(<i8>a), i8x16.splat(<i8>b), i32x4.splat(c)), 0);
}
