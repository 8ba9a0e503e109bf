import { readF16 } from "../../tensor/quant/index.js";
import { i8 } from "./int8.js";

const f = Math.fround;

/**
 * Q8_0 weights x Q8_0 activations, summed in the order of ggml's x86 kernels
 * (ggml_vec_dot_q8_0_q8_0 with AVX2/AVX-512 and llamafile's tinyBLAS_Q0_AVX): eight f32 lanes,
 * lane k holding the integer sum of products 4k..4k+3 of each block, accumulated with a fused
 * multiply-add by the f32 product of the two scales, then the lanes added pairwise
 * (k + k+4, then 0+2 / 1+3, then the two halves). Bit-exact f32 results matter here: an ulp
 * in a layer's output can flip the rounding of the next layer's quantized activations.
 * (d * lane + acc is exact in f64 before the single f32 rounding, as a hardware FMA.)
 */
export function dotQ8_0(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  return laneDot(w, wOffset, 34, false, x, xOffset, n);
}

/**
 * Q4_0 x Q8_0 in the same lanes (ggml_vec_dot_q4_0_q8_0 on x86: the nibbles unpacked to 32
 * bytes, low nibbles first, minus 8, then the Q8_0 kernel's multiply-adds) — the dot of a Q4_0
 * KV cache row, which llama.cpp does not repack as it does Q4_0 weights (dot-q4_0.ts).
 */
export function dotQ4_0Lanes(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  return laneDot(w, wOffset, 18, true, x, xOffset, n);
}

function laneDot(w: Uint8Array, wOffset: number, wBlockBytes: number, nibbles: boolean, x: Uint8Array, xOffset: number, n: number): number {
  let a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
  for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 32, wo += wBlockBytes, xo += 34) {
    const d = f(readF16(w, wo) * readF16(x, xo));
    const lane = (k: number): number => {
      let s = 0;
      for (let j = 4 * k; j < 4 * k + 4; j++) {
        const q = nibbles ? ((w[wo + 2 + (j & 15)]! >>> (j < 16 ? 0 : 4)) & 15) - 8 : i8(w[wo + 2 + j]!);
        s += q * i8(x[xo + 2 + j]!);
      }
      return s;
    };
    a0 = f(d * lane(0) + a0); a1 = f(d * lane(1) + a1); a2 = f(d * lane(2) + a2); a3 = f(d * lane(3) + a3);
    a4 = f(d * lane(4) + a4); a5 = f(d * lane(5) + a5); a6 = f(d * lane(6) + a6); a7 = f(d * lane(7) + a7);
  }
  const r0 = f(a4 + a0), r1 = f(a5 + a1), r2 = f(a6 + a2), r3 = f(a7 + a3);
  return f(f(r0 + r2) + f(r1 + r3));
}
