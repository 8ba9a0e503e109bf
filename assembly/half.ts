// f16 / bf16 conversions inside the kernels, with ggml's rounding (round to nearest, ties to
// even), so activations converted here equal those of src/tensor/quant/half.ts bit for bit.

// address of a 65536-entry f32 table of every f16 value: one load converts a weight scale
let f16Table: usize = 0;

/** points this instance at the shared table (each worker instance has its own globals) */
export function useF16Table(table: usize): void {
  f16Table = table;
}

/** the table's address, for kernels that keep it in a local (a global is re-read every use) */
export function f16TableAddress(): usize {
  return f16Table;
}

/** fills the shared table; done once by the main thread before any kernel runs */
export function fillF16Table(table: usize): void {
  for (let h: u32 = 0; h < 65536; h++) store<f32>(table + (<usize>h << 2), decodeF16(h));
}

function decodeF16(h: u32): f32 {
  const sign: u32 = (h & 0x8000) << 16;
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp == 0) {
    // subnormal: mant * 2^-24 is exact in f32
    const v = <f32>mant * reinterpret<f32>(0x33800000);
    return sign ? -v : v;
  }
  if (exp == 31) return reinterpret<f32>(sign | 0x7f800000 | (mant << 13));
  return reinterpret<f32>(sign | ((exp + 112) << 23) | (mant << 13));
}

// 2^112 moves an f16 exponent placed in an f32's exponent field to its true value
export const F16_REBIAS: f32 = 5.192296858534828e33;

/**
 * The value of the f16 stored at p, computed rather than looked up (the same value as f16()):
 * the sign-extended bits shifted into an f32's exponent/mantissa, rescaled by 2^112 — exact for
 * every finite f16, subnormals included; Inf/NaN take the table. For kernels streaming weight
 * blocks: the stream evicts the table's lines from L2, and a missed lookup stalls the block's
 * chain (Q8_0 decode with varied block scales ran at 16 instead of 30 GB/s with the table).
 */
// @ts-ignore: decorator
@inline export function f16At(p: usize, table: usize): f32 {
  const h = <i32>load<i16>(p);
  if ((h & 0x7c00) == 0x7c00) return load<f32>(table + (<usize>(h & 0xffff) << 2));
  return reinterpret<f32>((h << 13) & 0x8fffe000) * F16_REBIAS;
}

/** the value of f16 bits `h` */
// @ts-ignore: decorator
@inline export function f16(h: u32): f32 {
  return load<f32>(f16Table + (<usize>h << 2));
}

/** f16 bits of `x`: ties to even, >= 65520 -> inf, NaN -> quiet NaN with the input's sign */
export function f32ToF16Bits(x: f32): u32 {
  const w = reinterpret<u32>(x);
  const sign = (w >> 16) & 0x8000;
  const abs = w & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00;
  if (abs >= 0x477ff000) return sign | 0x7c00;
  if (abs >= 0x38800000) {
    // rebias the exponent and drop 13 mantissa bits; a rounding carry bumps the exponent
    let h = (abs - 0x38000000) >> 13;
    const rest = abs & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1) != 0)) h++;
    return sign | h;
  }
  // subnormal f16: count units of 2^-24 (the scaling is exact), round ties to even
  return sign | <u32>nearest<f32>(reinterpret<f32>(abs) * 16777216.0);
}

/** x rounded to the nearest bf16, as an f32 (NaN keeps its top bits, quiet bit forced) */
// @ts-ignore: decorator
@inline export function roundBF16(x: f32): f32 {
  const u = reinterpret<u32>(x);
  const h: u32 = (u & 0x7fffffff) > 0x7f800000 ? (u >> 16) | 64 : (u + 0x7fff + ((u >> 16) & 1)) >> 16;
  return reinterpret<f32>(h << 16);
}
