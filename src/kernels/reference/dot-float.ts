import { bf16BitsToF32, f16BitsToF32 } from "../../tensor/quant/index.js";

/**
 * Dot products of float rows: F32 x F32, F16 x F16, BF16 x BF16 (ggml converts the activation
 * row to the weight's type first). Arguments: the weight bytes and offset of its row, the
 * converted activation bytes and offset, and the row length n; little-endian, any alignment.
 *
 * Accumulation is float64: every product of two f16/bf16 values is exact in float64, and
 * ggml's own sum order differs between its SIMD paths, so the order-independent float64 sum is
 * the value they all approximate (to ~1e-7 relative).
 */

export function dotF32(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  const wv = new DataView(w.buffer, w.byteOffset + wOffset, 4 * n);
  const xv = new DataView(x.buffer, x.byteOffset + xOffset, 4 * n);
  let sum = 0;
  for (let i = 0; i < 4 * n; i += 4) sum += wv.getFloat32(i, true) * xv.getFloat32(i, true);
  return sum;
}

export function dotF16(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  let sum = 0;
  for (let i = 0; i < 2 * n; i += 2) {
    const a = f16BitsToF32(w[wOffset + i]! | (w[wOffset + i + 1]! << 8));
    const b = f16BitsToF32(x[xOffset + i]! | (x[xOffset + i + 1]! << 8));
    sum += a * b;
  }
  return sum;
}

export function dotBF16(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  let sum = 0;
  for (let i = 0; i < 2 * n; i += 2) {
    const a = bf16BitsToF32(w[wOffset + i]! | (w[wOffset + i + 1]! << 8));
    const b = bf16BitsToF32(x[xOffset + i]! | (x[xOffset + i + 1]! << 8));
    sum += a * b;
  }
  return sum;
}
