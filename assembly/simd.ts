// Small SIMD helpers shared by the kernels; all inlined.

/** sum of the four f32 lanes, in a fixed order so every thread gets the same bits */
// @ts-ignore: decorator
@inline export function hsumF32(v: v128): f32 {
  return (f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1)) + (f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3));
}

/** four vectors to at, at + 16, ... */
// @ts-ignore: decorator
@inline export function store4(at: usize, a0: v128, a1: v128, a2: v128, a3: v128): void {
  v128.store(at, a0);
  v128.store(at, a1, 16);
  v128.store(at, a2, 32);
  v128.store(at, a3, 48);
}

/** eight vectors to at, at + 16, ..., at + 112 */
// @ts-ignore: decorator
@inline export function store8(at: usize, a0: v128, a1: v128, a2: v128, a3: v128, a4: v128, a5: v128, a6: v128, a7: v128): void {
  v128.store(at, a0);
  v128.store(at, a1, 16);
  v128.store(at, a2, 32);
  v128.store(at, a3, 48);
  v128.store(at, a4, 64);
  v128.store(at, a5, 80);
  v128.store(at, a6, 96);
  v128.store(at, a7, 112);
}

/** sum of the four i32 lanes (exact) */
// @ts-ignore: decorator
@inline export function hsumI32(v: v128): i32 {
  return i32x4.extract_lane(v, 0) + i32x4.extract_lane(v, 1) + i32x4.extract_lane(v, 2) + i32x4.extract_lane(v, 3);
}

/** [sum(a), sum(b), sum(c), sum(d)]: four integer dots reduced into one vector's lanes (exact) */
// @ts-ignore: decorator
@inline export function lanesSum(a: v128, b: v128, c: v128, d: v128): v128 {
  const ab = i32x4.add(i32x4.shuffle(a, b, 0, 4, 1, 5), i32x4.shuffle(a, b, 2, 6, 3, 7));
  const cd = i32x4.add(i32x4.shuffle(c, d, 0, 4, 1, 5), i32x4.shuffle(c, d, 2, 6, 3, 7));
  return i32x4.add(i32x4.shuffle(ab, cd, 0, 1, 4, 5), i32x4.shuffle(ab, cd, 2, 3, 6, 7));
}

/**
 * acc + f32(sums) * (dw * dx): four blocks' exact integer totals, each scaled by its weight
 * scale times its activation scale, added into the lanes of a row's accumulator (lane k holds
 * blocks k, k + 4, k + 8, ...). The single-token row kernels of every build accumulate so, one
 * conversion and one multiply-add per four blocks.
 */
// @ts-ignore: decorator
@inline export function scaleAdd4(acc: v128, sums: v128, dw: v128, dx: v128): v128 {
  return f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(sums), f32x4.mul(dw, dx)));
}

/**
 * Integer dot of 16 int8 weights (one i8x16 register) with 16 activations at x (int8
 * values stored as int16): widen the weights to i16 and multiply-add pairs into four i32 lanes.
 */
// @ts-ignore: decorator
@inline export function dot16(q: v128, x: usize): v128 {
  return i32x4.add(
    i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(q), v128.load(x)),
    i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(q), v128.load(x, 16)),
  );
}

/** same for 16 unsigned (0..255) weights */
// @ts-ignore: decorator
@inline export function dot16u(q: v128, x: usize): v128 {
  return i32x4.add(
    i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_u(q), v128.load(x)),
    i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_u(q), v128.load(x, 16)),
  );
}

/**
 * Relaxed SIMD's int8 dot: signed int8 a times 7-bit b (0..127), pairs added into int16
 * (pmaddubsw on x86). Only in the relaxed build; the host never runs its callers on the other.
 */
// @ts-ignore: decorator
@inline export function dotI8I7(a: v128, b: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return i16x8.relaxed_dot_i8x16_i7x16_s(a, b);
  unreachable();
  return a;
}

/**
 * Relaxed SIMD's int8 dot with an int32 accumulator: signed a times b, four neighbouring products
 * per int32 lane, added to c. Where the runtime lowers it to VNNI's vpdpbusd, b is read as
 * unsigned bytes (0..255) and every sum is exact: the host probes that (probeDotAdd) before it
 * runs any caller. Only in the relaxed build.
 */
// @ts-ignore: decorator
@inline export function dotAddU8(a: v128, b: v128, c: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, c);
  unreachable();
  return a;
}

/** a k-quant sub-block's dot (int16 pairs from the relaxed int8 dot, or int32 lanes) times its integer scale s, as int32 lanes */
// @ts-ignore: decorator
@inline export function scaled(relaxed: bool, dot: v128, s: i32): v128 {
  return relaxed ? i32x4.dot_i16x8_s(dot, i16x8.splat(<i16>s)) : i32x4.mul(dot, i32x4.splat(s));
}

/** the same with the scale already in every int16 lane of s (0..32767) */
// @ts-ignore: decorator
@inline export function scaledBy(relaxed: bool, dot: v128, s: v128): v128 {
  return relaxed ? i32x4.dot_i16x8_s(dot, s) : i32x4.mul(dot, i32x4.extend_low_i16x8_s(s));
}

/**
 * byte i of `table` at each lane's index (0..15): Relaxed SIMD's swizzle (pshufb alone) in the
 * relaxed build, the SIMD128 one (which also zeroes indices above 15) otherwise; the same bytes
 * for these indices
 */
// @ts-ignore: decorator
@inline export function lookup16(table: v128, idx: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return i8x16.relaxed_swizzle(table, idx);
  return i8x16.swizzle(table, idx);
}
