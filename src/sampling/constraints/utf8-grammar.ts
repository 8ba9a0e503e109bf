import type { Alternative, CharClass, Element, Grammar } from "./grammar.js";

/**
 * A grammar over code points rewritten as the same language over UTF-8 bytes: each character
 * class becomes a rule whose alternatives are byte sequences (one range per byte), the way a
 * regex engine compiles Unicode classes to a byte automaton. Tokens are bytes, not characters:
 * a byte-fallback vocabulary spells a character it has no piece for in two to four byte tokens,
 * and a byte-level piece may end inside a character. Run over bytes, the grammar takes those
 * pieces wherever some character beginning with their bytes may come, as llama.cpp's grammar
 * sampler does with its partial UTF-8 state. Surrogates and overlong forms are never produced.
 * Classes within ASCII stay single byte classes, so ASCII-only grammars keep their shape.
 */
export function utf8Grammar(grammar: Grammar): Grammar {
  const names = [...grammar.names];
  const rules: Alternative[][] = grammar.rules.map(() => []);
  const byClass = new Map<string, number>();
  const ruleFor = (e: CharClass, owner: number): number => {
    const ranges = codePointRanges(e);
    const key = ranges.join(";");
    let id = byClass.get(key);
    if (id === undefined) {
      id = rules.length;
      byClass.set(key, id);
      names.push(`${grammar.names[owner]}-utf8-${id}`);
      rules.push(byteAlternatives(ranges));
    }
    return id;
  };
  grammar.rules.forEach((alts, rule) => {
    rules[rule] = alts.map((alt) =>
      alt.map((e): Element => {
        if (e.kind !== "char") return e;
        const ranges = codePointRanges(e);
        if (ranges.every(([, hi]) => hi < 0x80)) return { kind: "char", ranges, negated: false };
        return { kind: "rule", rule: ruleFor(e, rule) };
      }),
    );
  });
  return { names, rules, root: grammar.root };
}

/** the largest code point, and the surrogates, which UTF-8 never encodes */
const MAX_CODE_POINT = 0x10ffff;
const SURROGATES: readonly [number, number] = [0xd800, 0xdfff];
/** the last code point of each UTF-8 length (1 to 4 bytes) */
const LENGTH_ENDS = [0x7f, 0x7ff, 0xffff, MAX_CODE_POINT];

/** the code points a class matches: sorted, disjoint, merged inclusive ranges, surrogates left out */
function codePointRanges(e: CharClass): [number, number][] {
  const sorted = e.ranges.map(([lo, hi]) => [Math.max(0, lo), Math.min(MAX_CODE_POINT, hi)] as [number, number]).filter(([lo, hi]) => lo <= hi).sort((a, b) => a[0] - b[0]);
  const merged: [number, number][] = [];
  for (const [lo, hi] of sorted) {
    const last = merged[merged.length - 1];
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else merged.push([lo, hi]);
  }
  let ranges = merged;
  if (e.negated) {
    ranges = [];
    let next = 0;
    for (const [lo, hi] of merged) {
      if (lo > next) ranges.push([next, lo - 1]);
      next = hi + 1;
    }
    if (next <= MAX_CODE_POINT) ranges.push([next, MAX_CODE_POINT]);
  }
  return ranges.flatMap(([lo, hi]): [number, number][] => {
    if (hi < SURROGATES[0] || lo > SURROGATES[1]) return [[lo, hi]];
    const out: [number, number][] = [];
    if (lo < SURROGATES[0]) out.push([lo, SURROGATES[0] - 1]);
    if (hi > SURROGATES[1]) out.push([SURROGATES[1] + 1, hi]);
    return out;
  });
}

/** the byte sequences of ranges of code points: one alternative per run of equal structure; ASCII as one class */
function byteAlternatives(ranges: readonly [number, number][]): Alternative[] {
  const ascii: [number, number][] = [];
  const alternatives: Alternative[] = [];
  for (const [lo, hi] of ranges) {
    for (const [a, b] of splitByLength(lo, hi)) {
      if (b < 0x80) ascii.push([a, b]);
      else for (const seq of sequences(a, b)) alternatives.push(seq.map((r) => ({ kind: "char", ranges: [r], negated: false })));
    }
  }
  return ascii.length > 0 ? [[{ kind: "char", ranges: ascii, negated: false }], ...alternatives] : alternatives;
}

/** [lo, hi] cut where the encoded length changes */
function splitByLength(lo: number, hi: number): [number, number][] {
  const out: [number, number][] = [];
  let start = lo;
  for (const end of LENGTH_ENDS) {
    if (start > hi) break;
    if (start <= end) {
      out.push([start, Math.min(hi, end)]);
      start = end + 1;
    }
  }
  return out;
}

/**
 * Byte-range sequences for code points [lo, hi] of one encoded length: cut until every byte
 * position past the first differing one spans its whole continuation range, so that the
 * cross product of the per-byte ranges is exactly [lo, hi]
 */
function sequences(lo: number, hi: number): [number, number][][] {
  const n = encode(lo).length;
  for (let i = 1; i < n; i++) {
    const m = (1 << (6 * i)) - 1;
    if ((lo & ~m) === (hi & ~m)) continue;
    if ((lo & m) !== 0) return [...sequences(lo, lo | m), ...sequences((lo | m) + 1, hi)];
    if ((hi & m) !== m) return [...sequences(lo, (hi & ~m) - 1), ...sequences(hi & ~m, hi)];
  }
  const a = encode(lo), b = encode(hi);
  return [a.map((byte, k) => [byte, b[k]!] as [number, number])];
}

/** the UTF-8 bytes of one code point */
function encode(c: number): number[] {
  if (c < 0x80) return [c];
  if (c < 0x800) return [0xc0 | (c >> 6), 0x80 | (c & 0x3f)];
  if (c < 0x10000) return [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)];
  return [0xf0 | (c >> 18), 0x80 | ((c >> 12) & 0x3f), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)];
}
