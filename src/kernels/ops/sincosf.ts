/**
 * sinf / cosf exactly as glibc (2.28 and later) computes them on x86-64 CPUs with FMA, which is
 * what llama.cpp's RoPE calls. They are not correctly rounded (worst case 0.56 ulp), so
 * fround(Math.sin(x)) differs from them by one ulp for a few angles — and in a deep quantized
 * model one flipped rounding of a RoPE factor moves the logits by 1e-2. Algorithm (from the
 * published glibc/ARM optimized-routines design): reduce x to r in [-pi/4, pi/4] and a
 * quadrant n — one fused multiply-subtract of n * pi/2 below 120, a 4/pi table with 192 bits
 * and 64-bit integer arithmetic above — then evaluate a sine (odd, degree 7) or cosine (even,
 * degree 8) polynomial in double precision with the FMA contractions the FMA build uses, and
 * round once to float.
 */
import { fma64 } from "./fma64.js";

/** the double 0x1.<fraction>p<exponent> (JS has no hexadecimal float literals) */
const hex = (fraction: string, exponent: number): number => (1 + parseInt(fraction, 16) / 16 ** fraction.length) * 2 ** exponent;

interface Poly {
  readonly c0: number; readonly c1: number; readonly c2: number; readonly c3: number; readonly c4: number;
  readonly s1: number; readonly s2: number; readonly s3: number;
}
const SINE_POLY = { s1: -hex("555545995a603", -3), s2: hex("1107605230bc4", -7), s3: -hex("994eb3774cf24", -13) };
const COS_POLY = { c0: 1, c1: -hex("ffffffd0c621c", -2), c2: hex("55553e1068f19", -5), c3: -hex("6c087e89a359d", -10), c4: hex("99343027bf8c3", -16) };
/** quadrants 0, 1 use the cosine polynomial as is; 2, 3 its negation (a sign flip for free) */
const POLYS: readonly Poly[] = [
  { ...SINE_POLY, ...COS_POLY },
  { ...SINE_POLY, c0: -COS_POLY.c0, c1: -COS_POLY.c1, c2: -COS_POLY.c2, c3: -COS_POLY.c3, c4: -COS_POLY.c4 },
];
const QUADRANT_SIGN = [1, -1, -1, 1];
const HALF_PI = hex("921fb54442d18", 0);
/** 2/pi scaled by 2^24, so the quadrant lands in bits 24..31 of an int32 */
const HALF_PI_INV_2P24 = hex("45f306dc9c883", 23);
const PI_2P_MINUS_62 = hex("921fb54442d18", -62);
/** 4/pi to 192 bits; entry i holds 8 new bits on top of entry i-1, so any 32-bit window is aligned */
const INV_PIO4 = [
  0xa2, 0xa2f9, 0xa2f983, 0xa2f9836e, 0xf9836e4e, 0x836e4e44, 0x6e4e4415, 0x4e441529,
  0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1, 0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0,
  0x34ddc0db, 0xddc0db62, 0xc0db6295, 0xdb629599, 0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041,
].map(BigInt);

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const floatBits = (x: number): number => { f32[0] = x; return u32[0]!; };
/** the top 12 bits of a float without its sign: compares magnitudes the way glibc does */
const absTop12 = (x: number): number => (floatBits(x) >>> 20) & 0x7ff;
const TOP12_PIO4 = absTop12(hex("921fb54442d18", -1));
const TOP12_TINY = absTop12(2 ** -12);
const TOP12_120 = absTop12(120);
const TOP12_INF = absTop12(Infinity);

/** x - n * pi/2 for |x| < 120 (one fused multiply-subtract), quadrant n */
function reduceFast(x: number): [number, number] {
  const n = ((Math.trunc(x * HALF_PI_INV_2P24) | 0) + 0x800000) >> 24;
  return [fma64(-n, HALF_PI, x), n];
}

/** exact fixed-point modulo pi/2 for large |x| (float bits xi), quadrant n */
function reduceLarge(xi: number): [number, number] {
  const table = (xi >>> 26) & 15;
  const shift = BigInt((xi >>> 23) & 7);
  const m = BigInt((xi & 0xffffff) | 0x800000) << shift;
  const mask64 = (1n << 64n) - 1n;
  let r0 = (m * INV_PIO4[table]!) & 0xffffffffn;
  const r1 = m * INV_PIO4[table + 4]!;
  const r2 = m * INV_PIO4[table + 8]!;
  r0 = ((r2 >> 32n) | (r0 << 32n)) & mask64;
  r0 = (r0 + r1) & mask64;
  const n = ((r0 + (1n << 61n)) & mask64) >> 62n;
  r0 = (r0 - (n << 62n)) & mask64;
  return [Number(BigInt.asIntN(64, r0)) * PI_2P_MINUS_62, Number(n)];
}

/** the polynomial of the quadrant's parity, rounded once to float */
function poly(x: number, x2: number, p: Poly, n: number): number {
  if ((n & 1) === 0) {
    const x3 = x * x2;
    const s1 = fma64(x2, p.s3, p.s2);
    const x7 = x3 * x2;
    const s = fma64(x3, p.s1, x);
    return Math.fround(fma64(x7, s1, s));
  }
  const x4 = x2 * x2;
  const c2 = fma64(x2, p.c4, p.c3);
  const c1 = fma64(x2, p.c1, p.c0);
  const x6 = x4 * x2;
  const c = fma64(x4, p.c2, c1);
  return Math.fround(fma64(x6, c2, c));
}

/** sin (cosine = 0) or cos (cosine = 1) of the float y */
function sinOrCos(y: number, cosine: 0 | 1): number {
  const top = absTop12(y);
  if (top < TOP12_PIO4) {
    if (top < TOP12_TINY) return cosine ? 1 : y;
    return poly(y, y * y, POLYS[0]!, cosine);
  }
  if (top >= TOP12_INF) return NaN;
  let r: number, n: number, quadrant: number;
  if (top < TOP12_120) {
    [r, n] = reduceFast(y);
    quadrant = n;
  } else {
    const xi = floatBits(y);
    [r, n] = reduceLarge(xi);
    quadrant = n + (xi >>> 31);
  }
  const p = POLYS[(quadrant & 2) >> 1]!;
  return poly(r * QUADRANT_SIGN[quadrant & 3]!, r * r, p, n ^ cosine);
}

/** glibc's sinf(y) for a float32 value y */
export const sinfGlibc = (y: number): number => sinOrCos(Math.fround(y), 0);
/** glibc's cosf(y) for a float32 value y */
export const cosfGlibc = (y: number): number => sinOrCos(Math.fround(y), 1);
