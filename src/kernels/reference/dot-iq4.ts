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
 * IQ4_XS weights x Q8_K activations, in the order of ggml_vec_dot_iq4_xs_q8_K's AVX2 path
 * (llama.cpp's x86 build runs it for prompts and decode alike: IQ4_XS is neither repacked nor in
 * llamafile's sgemm): eight i32 lanes, lane k holding sum over the 8 sub-blocks of
 * (scale - 32) * the products 4k..4k+3 of the sub-block (exact integers); per super-block
 * lane k += f32(lane) * (d_w * d_x) with a fused multiply-add; then the lanes added as
 * hsum_float_8 does (k + k+4, then 0+2 / 1+3, then the two halves).
 */
export function dotIQ4_XS(w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number): number {
  const kv = KVALUES_IQ4NL;
  const acc = [0, 0, 0, 0, 0, 0, 0, 0];
  const lanes = [0, 0, 0, 0, 0, 0, 0, 0];
  for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 256, wo += 136, xo += 292) {
    lanes.fill(0);
    for (let ib = 0; ib < 8; ib++) {
      const ls = iq4xsScale(w, wo, ib) - 32;
      const qs = wo + 8 + 16 * ib;
      const q8 = xo + 4 + 32 * ib;
      for (let k = 0; k < 8; k++) {
        let s = 0;
        for (let e = 4 * k; e < 4 * k + 4; e++) {
          const byte = w[qs + (e & 15)]!;
          s += kv[e < 16 ? byte & 0x0f : byte >>> 4]! * i8(x[q8 + e]!);
        }
        lanes[k]! += ls * s;
      }
    }
    const d = f(readF16(w, wo) * readF32(x, xo));
    for (let k = 0; k < 8; k++) acc[k] = fma32(d, f(lanes[k]!), acc[k]!);
  }
  const r0 = f(acc[4]! + acc[0]!), r1 = f(acc[5]! + acc[1]!), r2 = f(acc[6]! + acc[2]!), r3 = f(acc[7]! + acc[3]!);
  return f(f(r0 + r2) + f(r1 + r3));
}
