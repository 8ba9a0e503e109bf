// Q2_K and Q3_K weights against Q8_K activations (ggml's vec_dot_q2_K_q8_K / q3_K_q8_K): 16 groups
// of 16 weights per super-block of 256, each group's exact integer dot times its integer scale,
// then one float multiply-add per super-block. The weights enter the dots unsigned (the relaxed
// build's int8 dot takes them as its 7-bit operand, the SIMD128 build widens them): Q2_K's are
// 0..3 with a per-group min taken off through the activations' group sums; Q3_K's are -4..3,
// stored as 2 low bits plus a high bit that means "no -4", so they enter as low | (high << 2)
// (0..7) and 4 x the group's activation sum comes off after. The integer sums are exact, so both
// builds give the same bits. The row loop is kquant.ts's matK.
import { f16 } from "./half";
import { dot16u, dotI8I7, hsumI32, scaled } from "./simd";

/** 16 unsigned weights u against the 16 activations of a group at x: int16 pairs (relaxed, int8 activations) or int32 lanes (SIMD128, int16 activations) */
// @ts-ignore: decorator
@inline function dotGroup(relaxed: bool, u: v128, x: usize): v128 {
  return relaxed ? dotI8I7(v128.load(x), u) : dot16u(u, x);
}

/** the 2-bit field at bit `shift` of every byte of v (16-bit shifts and a mask: nothing crossing a byte survives) */
// @ts-ignore: decorator
@inline function twoBits(v: v128, shift: i32): v128 {
  return v128.and(i16x8.shr_u(v, shift), i8x16.splat(3));
}

/** bit b of every byte of h as 4 or 0 (Q3_K's high bit in the place of value 4) */
// @ts-ignore: decorator
@inline function highBit(h: v128, b: i32): v128 {
  return v128.and(b <= 2 ? i16x8.shl(h, 2 - b) : i16x8.shr_u(h, b - 2), i8x16.splat(4));
}

/** Q3_K's 6-bit signed scale of group j (ggml's unpacking of its 12 scale bytes at sc) */
// @ts-ignore: decorator
@inline function scaleQ3_K(sc: usize, j: i32): i32 {
  const low: i32 = j < 8 ? <i32>load<u8>(sc + <usize>j) & 0x0f : <i32>load<u8>(sc + <usize>(j - 8)) >> 4;
  const high: i32 = (<i32>load<u8>(sc + 8 + <usize>(j & 3)) >> (2 * (j >> 2))) & 3;
  return (low | (high << 4)) - 32;
}

/**
 * one Q2_K super-block (84 bytes: 16 scale bytes, low nibble scale and high nibble min of each
 * group; 64 bytes of 2-bit weights; f16 d, f16 dmin) against one Q8_K super-block: qx its
 * activations, dx its scale, bs its 16 group sums (int32)
 */
// @ts-ignore: decorator
@inline export function superQ2_K(relaxed: bool, p: usize, qx: usize, dx: f32, bs: usize): f32 {
  const e: usize = relaxed ? 0 : 1; // log2 of an activation's bytes
  let isum = i32x4.splat(0);
  for (let h = 0; h < 2; h++) {
    const v0 = v128.load(p + 16 + (<usize>h << 5));
    const v1 = v128.load(p + 16 + (<usize>h << 5), 16);
    for (let s = 0; s < 4; s++) {
      // groups 8h + 2s (bytes 0..15 at this shift) and 8h + 2s + 1 (bytes 16..31)
      const g = 8 * h + 2 * s;
      const x = qx + ((<usize>(16 * g)) << e);
      isum = i32x4.add(isum, scaled(relaxed, dotGroup(relaxed, twoBits(v0, 2 * s), x), <i32>load<u8>(p + <usize>g) & 0x0f));
      isum = i32x4.add(isum, scaled(relaxed, dotGroup(relaxed, twoBits(v1, 2 * s), x + (16 << e)), <i32>load<u8>(p + <usize>g + 1) & 0x0f));
    }
  }
  let mins = 0;
  for (let g = 0; g < 16; g++) mins += load<i32>(bs + (<usize>g << 2)) * (<i32>load<u8>(p + <usize>g) >> 4);
  return dx * f16(load<u16>(p, 80)) * <f32>hsumI32(isum) - dx * f16(load<u16>(p, 82)) * <f32>mins;
}

/**
 * one Q3_K super-block (110 bytes: 32 bytes of high bits, 64 bytes of 2-bit low parts, 12 bytes of
 * 6-bit scales, f16 d) against one Q8_K super-block
 */
// @ts-ignore: decorator
@inline export function superQ3_K(relaxed: bool, p: usize, qx: usize, dx: f32, bs: usize): f32 {
  const e: usize = relaxed ? 0 : 1;
  const sc = p + 96;
  const h0 = v128.load(p), h1 = v128.load(p, 16);
  let isum = i32x4.splat(0);
  for (let h = 0; h < 2; h++) {
    const v0 = v128.load(p + 32 + (<usize>h << 5));
    const v1 = v128.load(p + 32 + (<usize>h << 5), 16);
    for (let s = 0; s < 4; s++) {
      const g = 8 * h + 2 * s;
      const bit = 4 * h + s;
      const x = qx + ((<usize>(16 * g)) << e);
      isum = i32x4.add(isum, scaled(relaxed, dotGroup(relaxed, v128.or(twoBits(v0, 2 * s), highBit(h0, bit)), x), scaleQ3_K(sc, g)));
      isum = i32x4.add(isum, scaled(relaxed, dotGroup(relaxed, v128.or(twoBits(v1, 2 * s), highBit(h1, bit)), x + (16 << e)), scaleQ3_K(sc, g + 1)));
    }
  }
  // the weights went in as q + 4: 4 x each group's activation sum x its scale comes off
  let offset = 0;
  for (let g = 0; g < 16; g++) offset += scaleQ3_K(sc, g) * load<i32>(bs + (<usize>g << 2));
  return f16(load<u16>(p, 108)) * dx * <f32>(hsumI32(isum) - (offset << 2));
}
