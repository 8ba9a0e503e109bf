import { bf16BitsToF32, f16BitsToF32, f32ToBF16Bits, f32ToF16Bits, readF32, writeF32 } from "./half.js";

/** F32, F16 and BF16 rows: little-endian scalars, any byte alignment. */

export function dequantizeF32(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let i = 0; i < n; i++) dst[i] = readF32(src, 4 * i);
}

export function quantizeF32(dst: Uint8Array, src: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) writeF32(dst, 4 * i, src[i]!);
}

export function dequantizeF16(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let i = 0; i < n; i++) dst[i] = f16BitsToF32(src[2 * i]! | (src[2 * i + 1]! << 8));
}

export function quantizeF16(dst: Uint8Array, src: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) {
    const h = f32ToF16Bits(src[i]!);
    dst[2 * i] = h & 0xff;
    dst[2 * i + 1] = h >>> 8;
  }
}

export function dequantizeBF16(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let i = 0; i < n; i++) dst[i] = bf16BitsToF32(src[2 * i]! | (src[2 * i + 1]! << 8));
}

export function quantizeBF16(dst: Uint8Array, src: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) {
    const h = f32ToBF16Bits(src[i]!);
    dst[2 * i] = h & 0xff;
    dst[2 * i + 1] = h >>> 8;
  }
}
