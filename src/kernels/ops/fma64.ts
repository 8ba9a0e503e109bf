/**
 * Correctly rounded double-precision fused multiply-add, round(a * b + c), in plain JS.
 *
 * C libraries compiled for FMA hardware (glibc's x86-64 libm picks such variants at run time)
 * contract `a * b + c` into one rounding; reproducing their results to the last bit needs the
 * same single rounding. Method (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums:
 * proved algorithms using rounding to odd", IEEE TC 2008): the exact product as hi + lo
 * (Dekker), an exact sum with c, the two low parts added with rounding to odd, then one final
 * round-to-nearest. Valid away from overflow and underflow, which is where callers use it.
 */

const SPLITTER = 134217729; // 2^27 + 1: Veltkamp split of a double into two 26-bit halves

const bits = new DataView(new ArrayBuffer(8));

/** the neighbour of x (finite, non-zero) one ulp away towards `direction`'s sign */
function nextToward(x: number, direction: number): number {
  bits.setFloat64(0, x);
  const awayFromZero = (x > 0) === (direction > 0);
  bits.setBigInt64(0, bits.getBigInt64(0) + (awayFromZero ? 1n : -1n));
  return bits.getFloat64(0);
}

/** round-to-odd of x + y: exact when representable, else the neighbour with an odd last bit */
function addRoundToOdd(x: number, y: number): number {
  const s = x + y;
  const yVirtual = s - x;
  const err = (x - (s - yVirtual)) + (y - yVirtual);
  if (err === 0 || s === 0) return s;
  bits.setFloat64(0, s);
  const odd = (bits.getUint32(4) & 1) === 1;
  return odd ? s : nextToward(s, err);
}

export function fma64(a: number, b: number, c: number): number {
  const p = a * b;
  if (!Number.isFinite(p) || !Number.isFinite(c) || p === 0) return p + c;
  // exact error of the product (Dekker's two-product with Veltkamp splits)
  let t = SPLITTER * a;
  const aHi = t - (t - a), aLo = a - aHi;
  t = SPLITTER * b;
  const bHi = t - (t - b), bLo = b - bHi;
  const pErr = ((aHi * bHi - p) + aHi * bLo + aLo * bHi) + aLo * bLo;
  // exact sum c + p = sHi + sLo (Knuth's two-sum)
  const sHi = c + p;
  const v = sHi - c;
  const sLo = (c - (sHi - v)) + (p - v);
  return sHi + addRoundToOdd(sLo, pErr);
}
