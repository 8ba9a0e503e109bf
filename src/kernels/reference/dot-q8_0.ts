import { readF16 } from "../../tensor/quant/index.js";

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
  const wi = int8View(w), xi = int8View(x);
  let a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
  for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 32, wo += wBlockBytes, xo += 34) {
    const d = f(readF16(w, wo) * readF16(x, xo));
    const wq = wo + 2, xq = xo + 2;
    if (nibbles) {
      a0 = f(d * nibbleLaneSum(w, wq, xi, xq, 0) + a0); a1 = f(d * nibbleLaneSum(w, wq, xi, xq, 1) + a1);
      a2 = f(d * nibbleLaneSum(w, wq, xi, xq, 2) + a2); a3 = f(d * nibbleLaneSum(w, wq, xi, xq, 3) + a3);
      a4 = f(d * nibbleLaneSum(w, wq, xi, xq, 4) + a4); a5 = f(d * nibbleLaneSum(w, wq, xi, xq, 5) + a5);
      a6 = f(d * nibbleLaneSum(w, wq, xi, xq, 6) + a6); a7 = f(d * nibbleLaneSum(w, wq, xi, xq, 7) + a7);
    } else {
      a0 = f(d * int8LaneSum(wi, wq, xi, xq) + a0); a1 = f(d * int8LaneSum(wi, wq + 4, xi, xq + 4) + a1);
      a2 = f(d * int8LaneSum(wi, wq + 8, xi, xq + 8) + a2); a3 = f(d * int8LaneSum(wi, wq + 12, xi, xq + 12) + a3);
      a4 = f(d * int8LaneSum(wi, wq + 16, xi, xq + 16) + a4); a5 = f(d * int8LaneSum(wi, wq + 20, xi, xq + 20) + a5);
      a6 = f(d * int8LaneSum(wi, wq + 24, xi, xq + 24) + a6); a7 = f(d * int8LaneSum(wi, wq + 28, xi, xq + 28) + a7);
    }
  }
  const r0 = f(a4 + a0), r1 = f(a5 + a1), r2 = f(a6 + a2), r3 = f(a7 + a3);
  return f(f(r0 + r2) + f(r1 + r3));
}

// The lanes' integers, each a function of its own rather than a closure made per block, over
// int8 views of the bytes (the load sign-extends): the closure and a shift pair per byte made the
// SmolLM-shaped reference parity test's Q8_0 case take 2.5 minutes. The views are made once per
// array (the matmul calls this per row and token) and weakly held: they die with their arrays.
const int8Views = new WeakMap<Uint8Array, Int8Array>();

function int8View(bytes: Uint8Array): Int8Array {
  let view = int8Views.get(bytes);
  if (view === undefined) {
    view = new Int8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    int8Views.set(bytes, view);
  }
  return view;
}

/** products 4k .. 4k+3 of a block's int8 quants at w[wj] and activations at x[xj] */
function int8LaneSum(w: Int8Array, wj: number, x: Int8Array, xj: number): number {
  return w[wj]! * x[xj]! + w[wj + 1]! * x[xj + 1]! + w[wj + 2]! * x[xj + 2]! + w[wj + 3]! * x[xj + 3]!;
}

/** lane k of a Q4_0 block whose nibbles start at w[wq] (value j in byte j & 15, the low nibble for j < 16, minus 8) */
function nibbleLaneSum(w: Uint8Array, wq: number, x: Int8Array, xq: number, k: number): number {
  let s = 0;
  for (let j = 4 * k; j < 4 * k + 4; j++) s += (((w[wq + (j & 15)]! >>> (j < 16 ? 0 : 4)) & 15) - 8) * x[xq + j]!;
  return s;
}
