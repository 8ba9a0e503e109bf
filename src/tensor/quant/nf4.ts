import { readF16, writeF16 } from "./half.js";
import { fround as f } from "./round.js";

/**
 * NF4 (QLoRA's NormalFloat-4, bitsandbytes' load_in_4bit): blocks of 64 weights in 34 bytes: an
 * f16 absmax, then 32 bytes of 4-bit indices into the 16-value code book below (the quantiles of
 * a standard normal, scaled to [-1, 1], with an exact 0). Weight = code[q] * absmax. Byte j
 * holds weight j (low nibble) and weight j + 32 (high nibble). bitsandbytes keeps its absmax in
 * f32 (or double-quantized); f16 is 0.25 bits a weight less and what tsllm's other formats use.
 * An in-memory format only (GGMLType.NF4 has a negative id no GGUF file can hold).
 */
export const NF4_BYTES = 34;

/** bitsandbytes' NF4 code book (functional.py get_4bit_type("nf4")), as f32 */
export const NF4_CODE: Float32Array = new Float32Array([
  -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
  0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
]);

/** midpoints between neighbouring code values: index = number of midpoints below the value */
const NF4_MIDS: Float32Array = new Float32Array(15).map((_, i) => f((NF4_CODE[i]! + NF4_CODE[i + 1]!) / 2));

export function dequantizeNF4(dst: Float32Array, src: Uint8Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += 64, o += NF4_BYTES) {
    const d = readF16(src, o);
    for (let j = 0; j < 32; j++) {
      const q = src[o + 2 + j]!;
      dst[b + j] = f(NF4_CODE[q & 0x0f]! * d);
      dst[b + j + 32] = f(NF4_CODE[q >>> 4]! * d);
    }
  }
}

/** the code index nearest to v (in [-1, 1]); a value on a midpoint takes the upper code */
function nf4Index(v: number): number {
  let i = 0;
  while (i < 15 && v >= NF4_MIDS[i]!) i++;
  return i;
}

/** absmax per block of 64 (stored f16), every weight / absmax to its nearest code value */
export function quantizeNF4(dst: Uint8Array, src: Float32Array, n: number): void {
  for (let b = 0, o = 0; b < n; b += 64, o += NF4_BYTES) {
    let amax = 0;
    for (let i = 0; i < 64; i++) amax = Math.max(amax, Math.abs(src[b + i]!));
    writeF16(dst, o, amax);
    const d = readF16(dst, o);
    const id = d > 0 ? f(1 / d) : 0;
    for (let j = 0; j < 32; j++) {
      const lo = nf4Index(f(src[b + j]! * id));
      const hi = nf4Index(f(src[b + j + 32]! * id));
      dst[o + 2 + j] = lo | (hi << 4);
    }
  }
}
