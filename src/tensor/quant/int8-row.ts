import { readF32, writeF32 } from "./half.js";
import { fround as f, roundAway } from "./round.js";

/**
 * INT8 (LLM.int8's vector-wise quantization without its outlier columns, bitsandbytes'
 * load_in_8bit): one f32 scale per row (absmax / 127) in front of the row's n int8 values
 * (4 + n bytes). Weight = scale * q, q = round(x / scale) in -127..127. An in-memory format
 * only (GGMLType.INT8 has a negative id no GGUF file can hold).
 */
export function dequantizeINT8(dst: Float32Array, src: Uint8Array, n: number): void {
  const s = readF32(src, 0);
  for (let i = 0; i < n; i++) dst[i] = f(s * ((src[4 + i]! << 24) >> 24));
}

export function quantizeINT8(dst: Uint8Array, src: Float32Array, n: number): void {
  let amax = 0;
  for (let i = 0; i < n; i++) amax = Math.max(amax, Math.abs(src[i]!));
  const s = f(amax / 127);
  writeF32(dst, 0, s);
  const is = s > 0 ? f(1 / s) : 0;
  for (let i = 0; i < n; i++) dst[4 + i] = Math.max(-127, Math.min(127, roundAway(f(src[i]! * is)))) & 0xff;
}
