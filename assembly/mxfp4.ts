// MXFP4 weights against Q8_0 activations in the order of llama.cpp's x86 repacked mxfp4_8x8 gemv /
// gemm (src/kernels/reference/dot-iq-grid.ts is the spec): per block of 32 the exact integer dot
// of the E2M1 values (doubled: kvalues_mxfp4, one swizzle per 16 nibbles) with the int8
// activations, then acc = fma(f32(dot), d_w * d_x, acc) block after block, the multiply-add in
// f64 (exact product; only a sum on an f32 midpoint could round twice), d_w = 2^(e - 128)
// (ggml_e8m0_to_fp32_half). Activations: the int16 q quantizeRowQ8_0 stores (xq), one f32 d
// per block of 32 (xs).
import { dot16, hsumI32 } from "./simd";

const KVALUES_MXFP4 = memory.data<i8>([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]);

// @ts-ignore: decorator
@inline function e8m0Half(e: u32): f32 {
  return reinterpret<f32>(e < 2 ? <u32>0x00200000 << e : (e - 1) << 23);
}

// @ts-ignore: decorator
@inline function fmaAcc(acc: f32, sumi: i32, dw: f32, dx: f32): f32 {
  return <f32>(<f64><f32>sumi * <f64>(dw * dx) + <f64>acc);
}

/** rows [r0, r1) for every token: four tokens at a time through each row (each block decoded once for the four), the rest one at a time, the same bits per token either way */
export function matMXFP4(w: usize, rowBytes: usize, xq: usize, xs: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  const nb = cols >> 5;
  const table = v128.load(KVALUES_MXFP4);
  const low = i8x16.splat(0x0f);
  const qStride = (<usize>nb) << 6, dStride = (<usize>nb) << 2;
  const os = (<usize>rows) << 2;
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * rowBytes;
    let t = 0;
    for (; t + 4 <= nTok; t += 4) {
      let a0: f32 = 0, a1: f32 = 0, a2: f32 = 0, a3: f32 = 0;
      const tb = <usize>t * <usize>nb;
      for (let b = 0; b < nb; b++) {
        const p = wr + <usize>b * 17;
        const v = v128.load(p, 1);
        const lo = i8x16.swizzle(table, v128.and(v, low)), hi = i8x16.swizzle(table, v128.and(i16x8.shr_u(v, 4), low));
        const i = tb + <usize>b;
        const x = xq + (i << 6), d = xs + (i << 2);
        const dw = e8m0Half(<u32>load<u8>(p));
        a0 = fmaAcc(a0, hsumI32(i32x4.add(dot16(lo, x), dot16(hi, x + 32))), dw, load<f32>(d));
        a1 = fmaAcc(a1, hsumI32(i32x4.add(dot16(lo, x + qStride), dot16(hi, x + qStride + 32))), dw, load<f32>(d + dStride));
        a2 = fmaAcc(a2, hsumI32(i32x4.add(dot16(lo, x + 2 * qStride), dot16(hi, x + 2 * qStride + 32))), dw, load<f32>(d + 2 * dStride));
        a3 = fmaAcc(a3, hsumI32(i32x4.add(dot16(lo, x + 3 * qStride), dot16(hi, x + 3 * qStride + 32))), dw, load<f32>(d + 3 * dStride));
      }
      const o = out + ((<usize>t * <usize>rows + <usize>r) << 2);
      store<f32>(o, a0);
      store<f32>(o + os, a1);
      store<f32>(o + 2 * os, a2);
      store<f32>(o + 3 * os, a3);
    }
    for (; t < nTok; t++) {
      const tb = <usize>t * <usize>nb;
      let acc: f32 = 0;
      for (let b = 0; b < nb; b++) {
        const p = wr + <usize>b * 17;
        const v = v128.load(p, 1);
        const lo = i8x16.swizzle(table, v128.and(v, low)), hi = i8x16.swizzle(table, v128.and(i16x8.shr_u(v, 4), low));
        const i = tb + <usize>b;
        const x = xq + (i << 6);
        acc = fmaAcc(acc, hsumI32(i32x4.add(dot16(lo, x), dot16(hi, x + 32))), e8m0Half(<u32>load<u8>(p)), load<f32>(xs + (i << 2)));
      }
      store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), acc);
    }
  }
}
