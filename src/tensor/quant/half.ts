/**
 * IEEE binary16 ("f16") and bfloat16 ("bf16") conversions with ggml's rounding.
 *
 * ggml rounds f32 -> f16 to nearest, ties to even (GGML_FP32_TO_FP16; F16C's cvtps_ph with
 * round-to-nearest gives the same bits for every non-NaN input); values at or above 65520
 * become +-inf; NaN becomes the quiet NaN 0x7e00 with the input's sign (the portable path).
 * f32 -> bf16 also rounds to nearest even; NaN keeps its top bits and gets the quiet bit
 * forced (ggml_compute_fp32_to_bf16).
 */

// one scratch word to move between a float and its bits without allocating per call
const scratchF32 = new Float32Array(1);
const scratchU32 = new Uint32Array(scratchF32.buffer);

/** the bits of `x` rounded to f32 */
export function f32Bits(x: number): number {
  scratchF32[0] = x;
  return scratchU32[0]!;
}

/** the f32 whose bits are `bits` */
export function f32FromBits(bits: number): number {
  scratchU32[0] = bits >>> 0;
  return scratchF32[0]!;
}

/** round a finite, non-negative double to the nearest integer, ties to even (exact in float64) */
function roundHalfEvenNonNeg(v: number): number {
  const f = Math.floor(v);
  const r = v - f;
  if (r > 0.5) return f + 1;
  if (r < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** f16 bits (0..65535) of `x`, first rounded to f32 as ggml receives a float */
export function f32ToF16Bits(x: number): number {
  const w = f32Bits(x);
  const sign = (w >>> 16) & 0x8000;
  const abs = w & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00; // NaN
  // 65520 = halfway between 65504 (largest f16) and 65536: ties-to-even goes up, to inf
  if (abs >= 0x477ff000) return sign | 0x7c00;
  if (abs >= 0x38800000) {
    // normal f16: rebias the exponent (127 -> 15 is -112 << 23) and drop 13 mantissa bits,
    // rounding on the dropped bits; a carry out of the mantissa correctly bumps the exponent
    let h = (abs - 0x38000000) >>> 13;
    const rest = abs & 0x1fff;
    if (rest > 0x1000 || (rest === 0x1000 && (h & 1) === 1)) h++;
    return sign | h;
  }
  // subnormal f16 (or zero): units of 2^-24; 1024 units is the smallest normal, encoded 0x0400
  return sign | roundHalfEvenNonNeg(f32FromBits(abs) * 16777216);
}

function decodeF16(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 31) return mant === 0 ? sign * Infinity : NaN;
  return sign * (1024 + mant) * 2 ** (exp - 25);
}

/** every f16 value, decoded once: a table lookup is the fastest conversion in JS */
const F16_TABLE: Float32Array = (() => {
  const t = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) t[h] = decodeF16(h);
  return t;
})();

/** the value of f16 bits `h` (0..65535) */
export function f16BitsToF32(h: number): number {
  return F16_TABLE[h & 0xffff]!;
}

/** `x` rounded to the nearest f16 value (ties to even, as f32ToF16Bits), as a number */
export function roundToF16(x: number): number {
  return f16BitsToF32(f32ToF16Bits(x));
}

/** bf16 bits (0..65535) of `x`, first rounded to f32 */
export function f32ToBF16Bits(x: number): number {
  const u = f32Bits(x);
  if ((u & 0x7fffffff) > 0x7f800000) return ((u >>> 16) | 64) & 0xffff; // quiet NaN
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

/** the value of bf16 bits `h` (0..65535) */
export function bf16BitsToF32(h: number): number {
  return f32FromBits((h & 0xffff) << 16);
}

/** reads the little-endian f16 at `bytes[offset]` */
export function readF16(bytes: Uint8Array, offset: number): number {
  return F16_TABLE[bytes[offset]! | (bytes[offset + 1]! << 8)]!;
}

/** writes `x` as a little-endian f16 at `bytes[offset]` */
export function writeF16(bytes: Uint8Array, offset: number, x: number): void {
  const h = f32ToF16Bits(x);
  bytes[offset] = h & 0xff;
  bytes[offset + 1] = h >>> 8;
}

/** reads the little-endian f32 at `bytes[offset]` (any alignment) */
export function readF32(bytes: Uint8Array, offset: number): number {
  return f32FromBits(
    bytes[offset]! | (bytes[offset + 1]! << 8) | (bytes[offset + 2]! << 16) | (bytes[offset + 3]! << 24),
  );
}

/** writes `x` as a little-endian f32 at `bytes[offset]` (any alignment) */
export function writeF32(bytes: Uint8Array, offset: number, x: number): void {
  const u = f32Bits(x);
  bytes[offset] = u & 0xff;
  bytes[offset + 1] = (u >>> 8) & 0xff;
  bytes[offset + 2] = (u >>> 16) & 0xff;
  bytes[offset + 3] = u >>> 24;
}
