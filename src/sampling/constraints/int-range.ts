/**
 * The decimal integers of a range as a regular expression (for JSON Schema's minimum / maximum on
 * integers): the range is cut where a digit position stops running through 0-9, so each piece is
 * a fixed prefix, one class and free digits (the classic construction), e.g. 7..123 ->
 * [7-9] | [1-9][0-9] | 1[01][0-9] | 12[0-3]. Either bound may be absent (then up to 15 digits,
 * the most a double holds exactly, or up to the safe integers beside a bound of more digits).
 * Leading zeros are never produced.
 */
const MAX_DIGITS = 15;

export function integerRangeRegex(min: number | undefined, max: number | undefined): string {
  // an open side reaches 15 digits, or the safe integers where the other bound is already past them
  const open = 10 ** MAX_DIGITS - 1;
  const lo = min ?? -(max !== undefined && max < -open ? Number.MAX_SAFE_INTEGER : open), hi = max ?? (min !== undefined && min > open ? Number.MAX_SAFE_INTEGER : open);
  if (!Number.isSafeInteger(lo) || !Number.isSafeInteger(hi)) throw new RangeError("integer bounds must be safe integers");
  if (lo > hi) throw new RangeError(`minimum ${lo} is above maximum ${hi}`);
  const parts: string[] = [];
  // negative numbers: "-" and the range of their magnitudes (-0 is not written)
  if (lo < 0) parts.push(...nonNegative(Math.max(1, hi < 0 ? -hi : 1), -lo).map((p) => `-${p}`));
  if (hi >= 0) parts.push(...nonNegative(Math.max(0, lo), hi));
  return parts.length === 1 ? parts[0]! : `(${parts.join("|")})`;
}

/** patterns for lo..hi, 0 <= lo <= hi */
function nonNegative(lo: number, hi: number): string[] {
  return splitPoints(lo, hi).map(([a, b]) => pattern(a, b));
}

/** lo..hi cut into pieces whose two ends differ only in a run of digit positions that go 0..9 */
function splitPoints(lo: number, hi: number): [number, number][] {
  const stops = new Set<number>([hi]);
  for (let nines = 1; ; nines++) {
    const stop = fillNines(lo, nines);
    if (!(lo <= stop && stop < hi)) break;
    stops.add(stop);
  }
  for (let zeros = 1; ; zeros++) {
    const stop = hi + 1 - ((hi + 1) % 10 ** zeros) - 1;
    if (!(lo < stop && stop <= hi)) break;
    stops.add(stop);
  }
  const sorted = [...stops].sort((a, b) => a - b);
  const out: [number, number][] = [];
  let start = lo;
  for (const stop of sorted) {
    out.push([start, stop]);
    start = stop + 1;
  }
  return out;
}

/** n with its last `count` digits set to 9 */
function fillNines(n: number, count: number): number {
  const s = String(n);
  return count >= s.length ? 10 ** count - 1 : Number(s.slice(0, s.length - count) + "9".repeat(count));
}

/** a piece a..b (same number of digits): equal digits as they are, differing ones as a class */
function pattern(a: number, b: number): string {
  const sa = String(a), sb = String(b);
  if (sa.length !== sb.length) throw new Error(`internal: range piece ${a}..${b} spans digit counts`);
  let out = "";
  let free = 0;
  for (let i = 0; i < sa.length; i++) {
    if (sa[i] === sb[i]) out += sa[i];
    else if (sa[i] === "0" && sb[i] === "9") free++;
    else out += `[${sa[i]}-${sb[i]}]`;
  }
  return free > 0 ? `${out}[0-9]${free > 1 ? `{${free}}` : ""}` : out;
}
