/**
 * The integer roundings ggml's quantizers use. Every quantizer computes in f32; here each f32
 * operation is written as `fround(a op b)`, which gives the same result as the f32 operation
 * because float64 has more than twice f32's precision (double rounding is then harmless).
 */

export const fround = Math.fround;

/**
 * ggml's nearest_int: adds 1.5 * 2^23 in f32 and reads the mantissa, i.e. rounds to nearest
 * with ties to even (valid for |x| <= 4194303, all the quantizers need).
 */
export function nearestInt(x: number): number {
  const f = Math.floor(x);
  const r = x - f;
  if (r > 0.5) return f + 1;
  if (r < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** C's roundf: to nearest, ties away from zero */
export function roundAway(x: number): number {
  const t = Math.trunc(x);
  const r = x - t;
  if (r >= 0.5) return t + 1;
  if (r <= -0.5) return t - 1;
  return t;
}
