import { iq4xsScale, KVALUES_IQ4NL, readF16, readF32 } from "../../tensor/quant/index.js";
import { i8 } from "./int8.js";

const f = Math.fround;

const bits = new Float32Array(1);
const ints = new Int32Array(bits.buffer);
/** the f32 next to r (an f32, finite, non-zero) away from zero (up = true) or toward it */
function nextF32(r: number, up: boolean): number {
  bits[0] = r;
  ints[0]! += up ? 1 : -1;
  return bits[0]!;
}

/**
 * f32 fma(a, b, c) rounded once, as the hardware instruction: a * b is exact in f64 (a, b f32
 * with a 24-bit and at most a 26-bit significand here); a + c in f64 can round, and then the f32
 * rounding of it could round a second time the wrong way at an f32 midpoint; TwoSum gives the
 * f64 rounding error, whose sign decides such a tie.
 */
export function fma32(a: number, b: number, c: number): number {
  const p = a * b;
  const s = p + c;
  const bb = s - p;
  const err = (p - (s - bb)) + (c - bb);
  const r = f(s);
  if (err === 0 || r === s || !Number.isFinite(r) || r === 0) return r;
  // the other f32 neighbour of s
  const o = nextF32(r, (r < s) === (r > 0));
  if (Math.abs(r - s) !== Math.abs(o - s)) return r;
  // s is an f32 midpoint; the exact value lies on the side of err
  return (err > 0) === (o > r) ? o : r;
}

/**
 * IQ4_NL weights x Q8_0 activations, in the order of what llama.cpp's x86 (AVX2) build runs:
 * it repacks every IQ4_NL matrix whose row count is a multiple of 8 (ggml-cpu repack.cpp,
 * iq4_nl_8x8_q8_0), and its gemv / gemm (gemv_q4_b32_8x8_q8_0_lut_avx) keep one f32 accumulator
 * per output, adding block after block with a fused multiply-add:
 * acc = fma(f32(integer dot of the block), d_w * d_x, acc). (The unrepacked
 * ggml_vec_dot_iq4_nl_q8_0, for other row counts, spreads the blocks over 2 x 8 lanes; its
 * result differs from this one in the last bits only.) d * s + acc is computed in f64 and
 * rounded once, as the hardware FMA (as in dot-q8_0.ts).
 */
export function dotIQ4_NL(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  const kv = KVALUES_IQ4NL;
  let acc = 0;
  for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 32, wo += 18, xo += 34) {
    let sumi = 0;
    for (let j = 0; j < 16; j++) {
      const q = w[wo + 2 + j]!;
      sumi += kv[q & 0x0f]! * i8(x[xo + 2 + j]!) + kv[q >>> 4]! * i8(x[xo + 18 + j]!);
    }
    acc = fma32(sumi, f(readF16(w, wo) * readF16(x, xo)), acc);
  }
  return acc;
}

/**
 * IQ4_XS weights x Q8_K activations, in the order of llama.cpp's x86 (AVX2) IQ panel gemm
 * (ggml-cpu iqp.cpp, which runs every IQ4_XS matmul of at least 8 tokens over rows % 8 == 0, i.e.
 * every prompt here): per super-block the exact integer sum of (scale - 32) * the products of
 * its 8 sub-blocks, added with one fused multiply-add per super-block:
 * acc = fma(f32(sum), d_w * d_x, acc). Decode (fewer than 8 tokens) runs
 * ggml_vec_dot_iq4_xs_q8_K's AVX2 path instead, which spreads the products over 8 f32 lanes and
 * differs from this in the last bits only. A first version that followed the lanes
 * (bit-identical to that function compiled here) left the prompt of the seed-15 tiny Llama one
 * flipped activation rounding away from llama.cpp (1.4e-2 in every log-probability); this
 * order agrees to 1e-6.
 */
export function dotIQ4_XS(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  const kv = KVALUES_IQ4NL;
  let acc = 0;
  for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 256, wo += 136, xo += 292) {
    let sumi = 0;
    for (let ib = 0; ib < 8; ib++) {
      const qs = wo + 8 + 16 * ib;
      const q8 = xo + 4 + 32 * ib;
      let s = 0;
      for (let j = 0; j < 16; j++) {
        const q = w[qs + j]!;
        s += kv[q & 0x0f]! * i8(x[q8 + j]!) + kv[q >>> 4]! * i8(x[q8 + 16 + j]!);
      }
      sumi += (iq4xsScale(w, wo, ib) - 32) * s;
    }
    acc = fma32(f(sumi), f(readF16(w, wo) * readF32(x, xo)), acc);
  }
  return acc;
}
