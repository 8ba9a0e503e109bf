import { fma64 } from "./fma64.js";

/**
 * e^x in f32 as glibc's expf computes it (ARM's optimized-routines algorithm, the one glibc has
 * shipped since 2.27): x * 32 / ln2 = k + r with k an integer, e^x = 2^(k/32) * 2^(r/32), the
 * first factor from a table of 32 doubles, the second from a degree-3 polynomial, all in double
 * precision, rounded to f32 once at the end. glibc's result is not always the correctly rounded
 * one (its error bound is 0.502 ulp), so reproducing llama.cpp's flash-attention softmax — which
 * calls libm's expf — to the last bit needs this very sequence of double operations. On x86-64
 * with FMA (what llama.cpp runs on here) glibc picks its FMA build, whose polynomial steps are
 * fused multiply-adds.
 */

const N = 32;
// glibc's constants (hex floats there): 0x1.71547652b82fep+0 * N, 0x1.8p+52, and the polynomial
// 0x1.c6af84b912394p-5 / N^3, 0x1.ebfce50fac4f3p-3 / N^2, 0x1.62e42ff0c52d6p-1 / N
const INV_LN2_N = 46.16624130844683;
const SHIFT = 6755399441055744;
const C0 = 0.0000016938359250920212;
const C1 = 0.00023459809789509004;
const C2 = 0.021660849396613134;

/**
 * 2^(j/32) for j < 32, correctly rounded to double: the integer 32nd root of 2^(j + 32 * 60)
 * (exact, BigInt Newton iteration) is floor(2^(j/32) * 2^60); its top 53 bits, rounded (the value
 * is irrational for j > 0, so a remainder of exactly half cannot occur), are the mantissa.
 */
export const EXP2_TABLE: Float64Array = (() => {
  const t = new Float64Array(N);
  for (let j = 0; j < N; j++) {
    const n = 1n << BigInt(j + 32 * 60);
    let r = 1n << 61n;
    for (;;) {
      const next = (31n * r + n / r ** 31n) / 32n;
      if (next >= r) break;
      r = next;
    }
    while ((r + 1n) ** 32n <= n) r++;
    while (r ** 32n > n) r--;
    const mantissa = (r >> 8n) + ((r & 0xffn) >= 0x80n ? 1n : 0n);
    t[j] = Number(mantissa) * 2 ** -52;
  }
  return t;
})();

/** f32 bits of |x| >= 88 (or NaN) take the special-case path */
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function expfLibm(x: number): number {
  f32[0] = x;
  const xf = f32[0]!;
  if ((u32[0]! & 0x7fffffff) >= 0x42b00000) {
    if (xf === -Infinity) return 0;
    if (!Number.isFinite(xf)) return xf + xf;
    if (xf > 88.72283172607422) return Infinity; // log(2^128)
    if (xf < -103.97207641601562) return 0; // log(2^-150)
  }
  const z = INV_LN2_N * xf;
  const kd = z + SHIFT - SHIFT;
  const r = z - kd;
  const j = ((kd % N) + N) % N;
  const s = EXP2_TABLE[j]! * 2 ** ((kd - j) / N);
  const p = fma64(C0, r, C1);
  const r2 = r * r;
  const y = fma64(p, r2, fma64(C2, r, 1));
  return Math.fround(y * s);
}
