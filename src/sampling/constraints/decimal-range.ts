/**
 * JSON numbers within bounds (JSON Schema's minimum / maximum / exclusive forms on "number") as a
 * regular expression, in the syntax regex.ts reads. Numbers are written without an exponent —
 * every number of a bounded range has such a form, and a constraint only needs to admit valid
 * output, not every spelling of it. The value is cut at its integer part: integer parts strictly
 * between the bounds' take any fraction (int-range.ts writes those), the bounds' own integer
 * parts take the fractions on the right side of the bound's, compared digit by digit. Negative
 * values are "-" and a magnitude range with the bounds swapped. Fractions run to at most
 * FREE_DIGITS digits past the bound's own (16: as many as llama.cpp's decimal-part takes).
 */
import { integerRangeRegex } from "./int-range.js";

const FREE_DIGITS = 16;
const ANY = `[0-9]{0,${FREE_DIGITS}}`;

/** a bound: its value and whether it is included */
export interface DecimalBound {
  readonly value: number;
  readonly inclusive: boolean;
}

/** nonempty-digit-string regex (null: none) and whether the empty fraction (value 0) is in */
interface Fraction {
  readonly re: string | null;
  readonly empty: boolean;
}

const alt = (parts: (string | null | false)[]): string | null => {
  const p = parts.filter((x): x is string => typeof x === "string");
  return p.length === 0 ? null : p.length === 1 ? p[0]! : `(${p.join("|")})`;
};
/** digit d then what may follow it */
const then = (d: string, f: Fraction): string | null => (f.re === null ? (f.empty ? d : null) : f.empty ? `${d}(${f.re})?` : `${d}${f.re}`);
const digitClass = (lo: number, hi: number): string | false => lo <= hi && (lo === hi ? String(lo) : `[${lo}-${hi}]`);

/** fractions 0.g >= 0.s (> when not inclusive) */
function atLeast(s: string, inclusive: boolean): Fraction {
  if (s === "") return inclusive ? { re: `[0-9]{1,${FREE_DIGITS}}`, empty: true } : { re: `0{0,${FREE_DIGITS}}[1-9]${ANY}`, empty: false };
  const d = Number(s[0]);
  return { re: alt([d < 9 && `${digitClass(d + 1, 9)}${ANY}`, then(s[0]!, atLeast(s.slice(1), inclusive))]), empty: false };
}

/** fractions 0.g <= 0.s (< when not inclusive) */
function atMost(s: string, inclusive: boolean): Fraction {
  if (s === "") return inclusive ? { re: `0{1,${FREE_DIGITS}}`, empty: true } : { re: null, empty: false };
  const d = Number(s[0]);
  return { re: alt([d > 0 && `${digitClass(0, d - 1)}${ANY}`, then(s[0]!, atMost(s.slice(1), inclusive))]), empty: true };
}

/** fractions between 0.a and 0.b (a < b as decimals) */
function between(a: string, b: string, lo: boolean, hi: boolean): Fraction {
  if (a === "") {
    if (lo) return atMost(b, hi);
    if (b === "") return { re: null, empty: false };
    // above zero and at most 0.b: a nonzero digit somewhere
    const d = Number(b[0]);
    const rest = atMost(b.slice(1), hi);
    // a first digit below b's leaves the rest free (0 then needs a nonzero digit later)
    const afterZero = d > 0 ? atLeast("", false) : between("", b.slice(1), false, hi);
    return { re: alt([d > 1 && `${digitClass(1, d - 1)}${ANY}`, d > 0 && then(b[0]!, rest), then("0", afterZero)]), empty: false };
  }
  const a0 = Number(a[0]), b0 = Number(b[0]);
  if (a0 === b0) {
    const f = between(a.slice(1), b.slice(1), lo, hi);
    return { re: then(a[0]!, f), empty: false };
  }
  return { re: alt([then(a[0]!, atLeast(a.slice(1), lo)), a0 + 1 <= b0 - 1 && `${digitClass(a0 + 1, b0 - 1)}${ANY}`, then(b[0]!, atMost(b.slice(1), hi))]), empty: false };
}

/**
 * a number's integer digits and fraction digits (trailing zeros dropped), exactly as JavaScript
 * prints it (its shortest decimal that reads back as it); below 1e-6 it prints an exponent, which
 * is written out (toFixed would round 1e-25 to 0)
 */
function digits(v: number): { int: number; frac: string } {
  const [mantissa, exp] = String(Math.abs(v)).split("e");
  let [i, f = ""] = mantissa!.split(".");
  if (exp !== undefined) {
    // (only negative exponents: the bounds are below 1e15)
    const shift = -Number(exp);
    f = `${"0".repeat(shift - i!.length)}${i}${f}`;
    i = "0";
  }
  return { int: Number(i), frac: f.replace(/0+$/, "") };
}

/** the double next to v, up or down */
function adjacent(v: number, up: boolean): number {
  if (v === 0) return up ? Number.MIN_VALUE : -Number.MIN_VALUE;
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, v);
  const bits = view.getBigUint64(0);
  // the bits order the magnitude: +1 moves away from zero
  view.setBigUint64(0, (v > 0) === up ? bits + 1n : bits - 1n);
  return view.getFloat64(0);
}

/** an integer part followed by a fraction that keeps to `f` */
function piece(int: string, f: Fraction): string | null {
  if (f.re === null) return f.empty ? int : null;
  return f.empty ? `${int}(\\.${f.re})?` : `${int}\\.${f.re}`;
}

/** nonnegative numbers from lo to hi (hi undefined: unbounded), written without sign */
function magnitudes(lo: DecimalBound, hi: DecimalBound | undefined): string | null {
  const l = digits(lo.value);
  const anyFraction: Fraction = { re: `[0-9]{1,${FREE_DIGITS}}`, empty: true };
  if (hi === undefined) {
    return alt([piece(String(l.int), atLeast(l.frac, lo.inclusive)), piece(integerRangeRegex(l.int + 1, undefined), anyFraction)]);
  }
  const h = digits(hi.value);
  if (l.int === h.int) return piece(String(l.int), between(l.frac, h.frac, lo.inclusive, hi.inclusive));
  return alt([
    piece(String(l.int), atLeast(l.frac, lo.inclusive)),
    l.int + 1 <= h.int - 1 && piece(integerRangeRegex(l.int + 1, h.int - 1), anyFraction),
    piece(String(h.int), atMost(h.frac, hi.inclusive)),
  ]);
}

/**
 * The regex of the JSON numbers x with lo <= x <= hi (< where a bound is exclusive); either
 * bound may be absent. Throws a RangeError when no number lies between them.
 */
export function decimalRangeRegex(lo: DecimalBound | undefined, hi: DecimalBound | undefined): string {
  for (const b of [lo, hi]) if (b && (!Number.isFinite(b.value) || Math.abs(b.value) >= 1e15)) throw new RangeError(`bound ${b.value} must be a finite number below 1e15 in size`);
  // The text is read as a double (a validator sees JSON.parse's number): a text just past an
  // exclusive bound in decimal (0.10000000000000001 > 0.1) may read as the bound itself. Past it
  // means at or past the next double, whose shortest decimal reads back as it: an inclusive bound
  // there. (Inclusive bounds are safe as they are: reading rounds monotonically. An exclusive 0 too:
  // at most 16 fraction digits never read as 0.)
  if (lo && !lo.inclusive && lo.value !== 0) lo = { value: adjacent(lo.value, true), inclusive: true };
  if (hi && !hi.inclusive && hi.value !== 0) hi = { value: adjacent(hi.value, false), inclusive: true };
  if (lo && hi && (lo.value > hi.value || (lo.value === hi.value && !(lo.inclusive && hi.inclusive)))) throw new RangeError(`no number lies between the bounds (${lo.value} and ${hi.value})`);
  const parts: (string | null)[] = [];
  const loV = lo?.value ?? -Infinity;
  // negative values: "-" and magnitudes from |hi| (or just above 0) up to |lo| (or unbounded)
  if (loV < 0) {
    const top = hi && hi.value < 0 ? { value: -hi.value, inclusive: hi.inclusive } : { value: 0, inclusive: false };
    const bottom = lo ? { value: -lo.value, inclusive: lo.inclusive } : undefined;
    const m = magnitudes(top, bottom);
    if (m !== null) parts.push(`-${m}`);
  }
  if (!hi || hi.value >= 0) {
    const from = lo && lo.value >= 0 ? lo : { value: 0, inclusive: true };
    parts.push(magnitudes(from, hi));
  }
  const re = alt(parts);
  if (re === null) throw new RangeError("no number lies between the bounds");
  return re;
}
