/**
 * Two multipleOfs as one: the least common multiple of the decimals they are written as, where
 * that is an integer a validator reads as a grammar of integers writes it. A validator divides in
 * doubles (ajv: `d / k` must be an integer, as is Python's jsonschema's test), so a fraction that
 * is no double, or whose quotients run past 2^53, can misjudge a multiple or a non-multiple; such
 * a fraction is not merged, and the fault says why (with a multiple ajv refuses where one is found).
 */

/** the largest magnitude an integer multipleOf grammar writes (15 digits, json-schema.ts' multiple()) */
const LARGEST = 999_999_999_999_999;

/** a positive finite number as the decimal it prints as: [digits, e] with value digits / 10^e (0.25: [25n, 2]) */
function decimalOf(v: number): [bigint, bigint] {
  const [mantissa, exponent] = v.toExponential().split("e") as [string, string];
  const digits = BigInt(mantissa.replace(".", ""));
  const e = (mantissa.split(".")[1] ?? "").length - Number(exponent);
  return e >= 0 ? [digits, BigInt(e)] : [digits * 10n ** BigInt(-e), 0n];
}

function gcd(a: bigint, b: bigint): bigint {
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
}

/** a double's exact value: [numerator, power of two it is divided by] (x * 2^p is an integer, exact: doubling is) */
function exactDouble(x: number): [bigint, bigint] {
  let p = 0n;
  while (!Number.isInteger(x)) {
    x *= 2;
    p++;
  }
  return [BigInt(x), p];
}

/**
 * Why ajv's `d / k`, for the fraction k (the decimal m / q in lowest terms), misjudges some
 * integer d of up to 15 digits, or undefined where it never does: each quotient t = d / k is
 * computed from the double nearest k, off by t * |double - k| / double, and rounded, off by
 * half a unit in the last place. Where both together stay under 1/m (the least distance of a
 * non-multiple's quotient from an integer) and every quotient is below 2^53 (an integer quotient
 * then reads as one), multiples and non-multiples are told apart. For m = 1 every integer is a
 * multiple, and only the first error counts.
 */
function divisionFault(k: number, m: bigint, q: bigint, lcm: number): string | undefined {
  const [n, p] = exactDouble(k);
  // |double - k| / double, which is |n q - m 2^p| / (n q), at most 2^-54
  const off = n * q > m * 2n ** p ? n * q - m * 2n ** p : m * 2n ** p - n * q;
  const close = off * 2n ** 54n <= n * q;
  const top = LARGEST / k;
  // (bounds on doubles, a hair wide: the test only needs to be safe)
  const halfUlp = 2 ** (Math.floor(Math.log2(top * (1 + 2 ** -50))) - 53);
  const slack = m === 1n ? Infinity : 1 / Number(m);
  // (m = 1: every integer is a multiple, and a quotient past 2^53 is an integer double, read as one below 1e21)
  if (m === 1n ? close && top < 1e21 : top < 2 ** 53 && close && top * 2 ** -54 + halfUlp < slack * 0.99) return undefined;
  // a multiple of both that ajv refuses, where one is near (else the reason alone)
  for (let i = 1; i <= 100_000; i++) {
    const d = lcm * i;
    const t = d / k;
    if (t !== Math.trunc(t)) return `${d} is a multiple of them, but a validator divides in doubles and reads ${d} / ${k} as ${t}`;
  }
  if (top >= 1e21) return `an integer of up to 15 digits divided by ${k} passes 1e21, which a validator prints with an exponent and reads as no integer`;
  return top >= 2 ** 53 ? `an integer of up to 15 digits divided by ${k} passes 2^53, where a validator's doubles read every quotient as an integer` : `a validator divides by the double nearest ${k}, and for integers of up to 15 digits its error may read a non-multiple as a multiple or the reverse`;
}

/**
 * The least common multiple of positive multipleOfs (one a fraction, or several): `value`, an
 * integer every multiple of them all is a multiple of, or `fault`, why no integer multipleOf
 * stands for them (their least common multiple is a fraction, or a validator's division by one
 * misjudges integers)
 */
export function commonMultiple(ks: readonly number[]): { value: number } | { fault: string } {
  const decimals = ks.map(decimalOf);
  const e = decimals.reduce((m, [, x]) => (x > m ? x : m), 0n);
  const l = decimals.reduce((acc, [p, x]) => {
    const scaled = p * 10n ** (e - x);
    return (acc / gcd(acc, scaled)) * scaled;
  }, 1n);
  const scale = 10n ** e;
  const all = ks.length === 2 ? `both ${ks[0]} and ${ks[1]}` : `all of ${ks.join(", ")}`;
  if (l % scale !== 0n) {
    const g = gcd(l, scale);
    return { fault: `every multiple of ${all} is a multiple of ${l / g}/${scale / g}, a fraction, and only integer multiples are written in a grammar` };
  }
  const value = Number(l / scale);
  for (const [i, k] of ks.entries()) {
    if (Number.isInteger(k)) continue;
    const [p, ek] = decimals[i]!;
    const g = gcd(p, 10n ** ek);
    const fault = divisionFault(k, p / g, 10n ** ek / g, value);
    if (fault !== undefined) return { fault };
  }
  return { value };
}
