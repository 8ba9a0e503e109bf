import { NF4_CODE, readF16, readF32 } from "../../tensor/quant/index.js";

/**
 * Dot products for the in-memory-only weight formats (NF4, INT8; see tensor/quant/nf4.ts and
 * int8-row.ts) with an f32 activation row: no llama.cpp kernel to match, so the activations stay
 * f32 (as bitsandbytes dequantizes NF4 to the compute dtype) and the sum is float64.
 */

export function dotNF4(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  const xv = new DataView(x.buffer, x.byteOffset + xOffset, 4 * n);
  let sum = 0;
  for (let b = 0, o = wOffset; b < n; b += 64, o += 34) {
    let s = 0;
    for (let j = 0; j < 32; j++) {
      const q = w[o + 2 + j]!;
      s += NF4_CODE[q & 0x0f]! * xv.getFloat32(4 * (b + j), true) + NF4_CODE[q >>> 4]! * xv.getFloat32(4 * (b + j + 32), true);
    }
    sum += readF16(w, o) * s;
  }
  return sum;
}

export function dotINT8(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  const xv = new DataView(x.buffer, x.byteOffset + xOffset, 4 * n);
  let s = 0;
  for (let i = 0; i < n; i++) s += ((w[wOffset + 4 + i]! << 24) >> 24) * xv.getFloat32(4 * i, true);
  return readF32(w, wOffset) * s;
}
