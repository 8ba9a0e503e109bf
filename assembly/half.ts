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
  return finiteF16(h);
}

/** the value of sign-extended f16 bits `h` that are not Inf/NaN (f16At's computation) */
// @ts-ignore: decorator
@inline function finiteF16(h: i32): f32 {
  return reinterpret<f32>((h << 13) & 0x8fffe000) * F16_REBIAS;
}

/**
 * The value of f16 bits `h` as f16At computes it (the same value as f16(h)), for a scale just
 * computed rather than loaded: the activation quantizer's per-block scale took a table miss
 * per block (the weight stream evicts the table), ~6 us of every decode matmul's set-up.
 */
// @ts-ignore: decorator
@inline export function f16Value(h: u32): f32 {
  if ((h & 0x7c00) == 0x7c00) return f16(h);
  return finiteF16(<i32><i16>h);
}

const F16X4_BITS = memory.data<u32>([0x8fffe000, 0x0f800000, 0x70000000, 0]);

/**
 * The values of four f16 as f32 lanes, each as f16At computes it (so the same values), Inf/NaN
 * included without the table. `h` holds the f16 bits in the top half of each i32 lane (i16
 * lanes 1, 3, 5, 7): an arithmetic shift by 3 leaves them sign-extended and shifted by 13, and
 * an exponent of all ones becomes the f32's (mantissa kept).
 */
// @ts-ignore: decorator
@inline export function f16x4(h: v128): v128 {
  const bits = v128.and(i32x4.shr_s(h, 3), v128.load32_splat(F16X4_BITS));
  const exponentAllOnes = v128.load32_splat(F16X4_BITS, 4);
  const special = i32x4.eq(v128.and(bits, exponentAllOnes), exponentAllOnes);
  return v128.bitselect(v128.or(bits, v128.load32_splat(F16X4_BITS, 8)), f32x4.mul(bits, f32x4.splat(F16_REBIAS)), special);
}

/** f16x4 for bits known to hold no Inf/NaN (the caller checks the exponents): fewer instructions */
// @ts-ignore: decorator
@inline export function f16x4Finite(h: v128): v128 {
  return f32x4.mul(v128.and(i32x4.shr_s(h, 3), v128.load32_splat(F16X4_BITS)), f32x4.splat(F16_REBIAS));
}

/** 1 if none of the `count` f16 at p, p + stride, p + 2 stride, ... is Inf or NaN, else 0 */
export function f16sFinite(p: usize, stride: usize, count: i32): i32 {
  for (let i = 0; i < count; i++, p += stride) if ((load<u16>(p) & 0x7c00) == 0x7c00) return 0;
  return 1;
}

/** the bits of the f16 at p, p + stride, p + 2 stride, p + 3 stride in the top halves of four i32 lanes (f16x4's input) */
// @ts-ignore: decorator
@inline export function f16x4BitsAt(p: usize, stride: usize): v128 {
  let h = i16x8.splat(0);
  h = v128.load16_lane(p, h, 1);
  h = v128.load16_lane(p + stride, h, 3);
  h = v128.load16_lane(p + 2 * stride, h, 5);
  return v128.load16_lane(p + 3 * stride, h, 7);
}

/** f16x4 of the f16 at p, p + stride, p + 2 stride, p + 3 stride */
// @ts-ignore: decorator
@inline export function f16x4At(p: usize, stride: usize): v128 {
  return f16x4(f16x4BitsAt(p, stride));
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

/** roundBF16 on four lanes: ties to even by the carry of 0x7fff plus the kept half's last bit; NaN lanes keep their top bits with the quiet bit set */
// @ts-ignore: decorator
@inline export function roundBF16x4(x: v128): v128 {
  const top = i32x4.splat(<i32>0xffff0000);
  const rounded = v128.and(i32x4.add(i32x4.add(x, i32x4.splat(0x7fff)), v128.and(i32x4.shr_u(x, 16), i32x4.splat(1))), top);
  const quietNaN = v128.or(v128.and(x, top), i32x4.splat(0x400000));
  return v128.bitselect(quietNaN, rounded, i32x4.gt_u(v128.and(x, i32x4.splat(0x7fffffff)), i32x4.splat(0x7f800000)));
}

/**
 * Four lanes rounded to the nearest f16 value (as f32), ties to even. Below 2^15 in magnitude by
 * adding and taking off c = sign(x) * 2^(e + 13), e the lane's exponent but at least -14: x + c
 * lies in c's binade, whose spacing 2^(e - 10) is f16's at x's exponent (2^-24 for f16's
 * subnormals), so the f32 addition rounds x as f16 does — the parity of the sum's last bit is
 * the parity of x's f16 mantissa — and the subtraction is exact (checked against roundToF16 on
 * every exponent's ties and neighbours and 3 million random lanes). Lanes of 2^15
 * and more (overflow to infinity from 65520 up, infinities, NaN) go lane by lane through the f16 bits.
 */
// @ts-ignore: decorator
@inline export function roundF16x4(x: v128): v128 {
  const e = v128.and(x, i32x4.splat(0x7f800000));
  if (!v128.any_true(i32x4.ge_u(e, i32x4.splat(0x47000000)))) {
    const sign = v128.and(x, i32x4.splat(0x80000000));
    const c = i32x4.add(v128.or(i32x4.max_u(e, i32x4.splat(0x38800000)), sign), i32x4.splat(13 << 23));
    // a negative x that rounds to zero is -0 (the subtraction gives +0)
    return v128.or(f32x4.sub(f32x4.add(x, c), c), sign);
  }
  let r = f32x4.splat(0);
  r = f32x4.replace_lane(r, 0, f16(f32ToF16Bits(f32x4.extract_lane(x, 0))));
  r = f32x4.replace_lane(r, 1, f16(f32ToF16Bits(f32x4.extract_lane(x, 1))));
  r = f32x4.replace_lane(r, 2, f16(f32ToF16Bits(f32x4.extract_lane(x, 2))));
  return f32x4.replace_lane(r, 3, f16(f32ToF16Bits(f32x4.extract_lane(x, 3))));
}

// f16 keys and values enter the arithmetic times 2^-112: an f16's bits moved into an f32's
// exponent and mantissa fields unrebiased are exactly that (normals and subnormals alike), three
// integer operations for four values where the rebias and its Inf/NaN select took seven. The
// other factor takes the 2^112: the f16-rounded query (at most 65504, so below 2^128) and the
// value weight (at most 1). Each product is then the same real number and each fused multiply-add
// rounds it the same: the bits do not change.
export const F16_UNSCALE: f32 = 5.192296858534828e33; // 2^112
export const F16_SCALE: f32 = 1.925929944387236e-34; // 2^-112

/** f16 lanes 0-3 (`high`: 4-7) of h, finite, as f32 times 2^-112: sign-extended, shifted into place, the smeared sign bits cleared */
// @ts-ignore: decorator
@inline export function scaledHalves(h: v128, high: bool): v128 {
  const wide = high ? i32x4.extend_high_i16x8_s(h) : i32x4.extend_low_i16x8_s(h);
  return v128.and(i32x4.shl(wide, 13), i32x4.splat(<i32>0x8fffe000));
}
