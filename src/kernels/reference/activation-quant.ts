import { writeF16 } from "../../tensor/quant/half.js";
import { fround, nearestInt } from "../../tensor/quant/round.js";

/*
 * Activation quantizers as llama.cpp's x86 CPU backend runs them (ggml-cpu's SIMD
 * quantize_row_q8_0 / q8_1), which differ from the reference quantizers used for weights:
 * the scale's inverse is 127 / amax (not 1 / (amax / 127)) and rounding is to nearest-even
 * (not ties-away). The differences flip an occasional int8 value, and random-weight test
 * models amplify such a flip far above 1e-3 in the logits — so the activations are quantized
 * exactly the way the llama.cpp we are judged against does it.
 */

const BLOCK = 32;

function quantizeBlocks(dst: Uint8Array, src: Float32Array, n: number, blockBytes: number, withSum: boolean): void {
  if (n % BLOCK !== 0) throw new Error(`activation row length ${n} is not a multiple of ${BLOCK}`);
  const qOffset = withSum ? 4 : 2;
  for (let b = 0, o = 0; b < n; b += BLOCK, o += blockBytes) {
    let amax = 0;
    for (let j = 0; j < BLOCK; j++) amax = Math.max(amax, Math.abs(src[b + j]!));
    const d = fround(amax / 127);
    const id = amax !== 0 ? fround(127 / amax) : 0;
    writeF16(dst, o, d);
    let sum = 0;
    for (let j = 0; j < BLOCK; j++) {
      const q = nearestInt(fround(src[b + j]! * id));
      dst[o + qOffset + j] = q & 0xff;
      sum += q;
    }
    if (withSum) writeF16(dst, o + 2, fround(d * sum));
  }
}

/** Q8_0 activations (for Q4_0, Q5_0, Q8_0 weights) */
export function quantizeActivationsQ8_0(dst: Uint8Array, src: Float32Array, n: number): void {
  quantizeBlocks(dst, src, n, 34, false);
}

/** Q8_1 activations (for Q4_1, Q5_1 weights): also stores s = d * sum(q) */
export function quantizeActivationsQ8_1(dst: Uint8Array, src: Float32Array, n: number): void {
  quantizeBlocks(dst, src, n, 36, true);
}
