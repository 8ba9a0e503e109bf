import { iqGrid, readF16, readF32 } from "../../tensor/quant/index.js";
import { fma32 } from "./dot-iq4.js";
import { i8 } from "./int8.js";
import type { DotKernel } from "./dot-kernel.js";

const f = Math.fround;

const vals = new Int8Array(256);
const iscales = new Int8Array(16);

/**
 * A grid i-quant (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) x Q8_K activations, in
 * the order of llama.cpp's x86 (AVX2) IQ panel gemm (ggml-cpu/iqp.cpp), which runs every matmul
 * of these types with at least 8 tokens over rows % 8 == 0 (every prompt here): each super-block
 * decoded to int8 values, integer sub-block scales and an f32 factor dfac (iqp_decode_*), the
 * exact integer sum of iscale * (16-wide dot) over its 16 sub-blocks, then one fused multiply-add
 * per super-block: acc = fma(f32(sum), dfac * d_x, acc). Fewer tokens (decode) run the type's
 * ggml_vec_dot_*_q8_K AVX2 path instead, which spreads the products over f32 lanes and differs
 * from this in the last bits only (as for IQ4_XS, see dot-iq4.ts).
 */
function panelDot(decode: iqGrid.SuperBlockDecoder, typeSize: number): DotKernel {
  return (w, wOffset, x, xOffset, n) => {
    let acc = 0;
    for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 256, wo += typeSize, xo += 292) {
      const dfac = decode(w, wo, vals, iscales);
      let sumi = 0;
      for (let sb = 0; sb < 16; sb++) {
        let s = 0;
        for (let j = 0; j < 16; j++) s += vals[16 * sb + j]! * i8(x[xo + 4 + 16 * sb + j]!);
        sumi += iscales[sb]! * s;
      }
      // sumi is an exact int32 (|sumi| < 2^29); f32(sumi) rounds as cvtdq2ps
      acc = fma32(f(sumi), f(dfac * readF32(x, xo)), acc);
    }
    return acc;
  };
}

export const dotIQ2_XXS = panelDot(iqGrid.decodeIQ2_XXS, iqGrid.IQ2_XXS_BYTES);
export const dotIQ2_XS = panelDot(iqGrid.decodeIQ2_XS, iqGrid.IQ2_XS_BYTES);
export const dotIQ2_S = panelDot(iqGrid.decodeIQ2_S, iqGrid.IQ2_S_BYTES);
export const dotIQ3_XXS = panelDot(iqGrid.decodeIQ3_XXS, iqGrid.IQ3_XXS_BYTES);
export const dotIQ3_S = panelDot(iqGrid.decodeIQ3_S, iqGrid.IQ3_S_BYTES);
export const dotIQ1_S = panelDot(iqGrid.decodeIQ1_S, iqGrid.IQ1_S_BYTES);
export const dotIQ1_M = panelDot(iqGrid.decodeIQ1_M, iqGrid.IQ1_M_BYTES);

const q = new Uint8Array(256);
const lanes = new Float64Array(8);

/**
 * TQ1_0 / TQ2_0 x Q8_K in the order of ggml_vec_dot_tq1_0_q8_K / _tq2_0_q8_K's AVX2 path (llama.cpp
 * has no repacked or panel kernel for them, so prompts and decode both run it): per super-block
 * 8 int32 lanes, lane L holding sum(q * x) over the weights j with (j % 32) / 4 == L (q in 0..2,
 * as maddubs reads the unsigned values) minus the Q8_K group sums bsums[2L] + bsums[2L + 1] (the
 * "- 1"); each lane accumulates f32(lane) * (d_x * d_w) (mul + add, which GCC contracts to one
 * FMA), and the 8 lanes are added as hsum_float_8: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
 */
function ternaryDot(values: (src: Uint8Array, o: number, t: Uint8Array) => void, typeSize: number): DotKernel {
  return (w, wOffset, x, xOffset, n) => {
    lanes.fill(0);
    const li = [0, 0, 0, 0, 0, 0, 0, 0];
    for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 256, wo += typeSize, xo += 292) {
      values(w, wo, q);
      li.fill(0);
      for (let j = 0; j < 256; j++) li[(j & 31) >> 2]! += q[j]! * i8(x[xo + 4 + j]!);
      for (let L = 0; L < 8; L++) {
        const g = xo + 260 + 4 * L;
        li[L]! -= ((x[g]! | (x[g + 1]! << 8)) << 16 >> 16) + ((x[g + 2]! | (x[g + 3]! << 8)) << 16 >> 16);
      }
      const d = f(readF32(x, xo) * readF16(w, wo + typeSize - 2));
      for (let L = 0; L < 8; L++) lanes[L] = fma32(f(li[L]!), d, lanes[L]!);
    }
    const r = (i: number) => f(lanes[i]! + lanes[i + 4]!);
    return f(f(r(0) + r(2)) + f(r(1) + r(3)));
  };
}

export const dotTQ1_0 = ternaryDot(iqGrid.tritsTQ1_0, iqGrid.TQ1_0_BYTES);
export const dotTQ2_0 = ternaryDot(iqGrid.valuesTQ2_0, iqGrid.TQ2_0_BYTES);

/**
 * MXFP4 weights x Q8_0 activations (type_traits_cpu: vec_dot_type Q8_0), in the order of what
 * llama.cpp's x86 (AVX2) build runs: it repacks every MXFP4 matrix with rows % 8 == 0 (repack.cpp,
 * mxfp4_8x8_q8_0) and its gemv / gemm (gemv_q4_b32_8x8_q8_0_lut_avx, shared with IQ4_NL) keep one
 * f32 accumulator per output: acc = fma(f32(block integer dot), d_w * d_x, acc), block after
 * block, with d_w = 2^(e - 128) (ggml_e8m0_to_fp32_half) and the values kvalues_mxfp4 (doubled E2M1).
 */
export const dotMXFP4: DotKernel = (w, wOffset, x, xOffset, n) => {
  const kv = iqGrid.KVALUES_MXFP4;
  let acc = 0;
  for (let b = 0, wo = wOffset, xo = xOffset; b < n; b += 32, wo += 17, xo += 34) {
    let sumi = 0;
    for (let j = 0; j < 16; j++) {
      const v = w[wo + 1 + j]!;
      sumi += kv[v & 0x0f]! * i8(x[xo + 2 + j]!) + kv[v >>> 4]! * i8(x[xo + 18 + j]!);
    }
    acc = fma32(sumi, f(iqGrid.e8m0Half(w[wo]!) * readF16(x, xo)), acc);
  }
  return acc;
};
