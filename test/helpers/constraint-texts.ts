import { GrammarMatcher, parseGbnf, type Grammar } from "../../src/sampling/constraints/index.js";
import type { CharClass } from "../../src/sampling/constraints/grammar.js";
import type { Tokenizer } from "../../src/tokenizer/index.js";

/** whether a grammar (GBNF text or a matcher) takes the whole of `text`, and may end there */
export function grammarAdmits(grammar: string | GrammarMatcher, text: string): boolean {
  const m = typeof grammar === "string" ? new GrammarMatcher(parseGbnf(grammar)) : grammar;
  let st = m.initial();
  for (const ch of text) st = m.advance(st, ch.codePointAt(0)!);
  return GrammarMatcher.complete(st);
}

/**
 * Each token's text as a constraint sees it, decoded independently of ConstraintVocabulary: the
 * token after a plain one (so a SentencePiece word start keeps its space), undefined for special
 * tokens and for text that is empty or not whole UTF-8.
 */
export function constraintTexts(tok: Tokenizer): (string | undefined)[] {
  const context = tok.encode("a", { addSpecialTokens: false }).slice(0, 1);
  return Array.from({ length: tok.vocabSize }, (_, id) => {
    if (tok.isSpecial(id)) return undefined;
    const d = tok.createStreamDecoder({ context });
    const t = d.push(id);
    return t === "" || d.flush() !== "" || t.includes("\uFFFD") ? undefined : t;
  });
}

/**
 * Each token's bytes as a constraint sees them: the UTF-8 of constraintTexts' text where the
 * token is whole text, else the tokenizer's bytes (a piece of a character); undefined for special
 * tokens and tokens that add nothing.
 */
export function constraintPieces(tok: Tokenizer): (Uint8Array | undefined)[] {
  const utf8 = new TextEncoder();
  return constraintTexts(tok).map((t, id) => {
    if (t !== undefined) return utf8.encode(t);
    if (tok.isSpecial(id)) return undefined;
    const b = tok.tokenBytes(id);
    return b.length > 0 ? b : undefined;
  });
}

/** UTF-8's lengths: the smallest and largest code point of each (index: bytes) */
const SMALLEST = [0, 0, 0x80, 0x800, 0x10000];
const LARGEST = [0, 0x7f, 0x7ff, 0xffff, 0x10ffff];

function lengthOf(lead: number): number {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

/** the value of a lead byte and continuation bytes (no checks) */
function codePointOf(bytes: readonly number[]): number {
  const n = bytes.length;
  let c = n === 1 ? bytes[0]! : bytes[0]! & (0x7f >> n);
  for (let i = 1; i < n; i++) c = (c << 6) | (bytes[i]! & 0x3f);
  return c;
}

/**
 * Bytes read as UTF-8 by the book: the code points of the whole characters and the bytes of an
 * unfinished last one; undefined where no UTF-8 text has these bytes (a stray continuation byte,
 * an overlong form, a surrogate, past U+10FFFF)
 */
export function readUtf8(bytes: ArrayLike<number>): { chars: number[]; tail: number[] } | undefined {
  const chars: number[] = [];
  for (let i = 0; i < bytes.length; ) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      chars.push(lead);
      i++;
      continue;
    }
    const n = lengthOf(lead);
    if (n === 0) return undefined;
    const end = Math.min(i + n, bytes.length);
    for (let k = i + 1; k < end; k++) if (bytes[k]! < 0x80 || bytes[k]! > 0xbf) return undefined;
    const seq = Array.from({ length: end - i }, (_, k) => bytes[i + k]!);
    if (end - i < n) return codePointsStartingWith(seq).length > 0 ? { chars, tail: seq } : undefined;
    const c = codePointOf(seq);
    if (c < SMALLEST[n]! || c > LARGEST[n]! || (c >= 0xd800 && c <= 0xdfff)) return undefined;
    chars.push(c);
    i = end;
  }
  return { chars, tail: [] };
}

/** the code points whose UTF-8 begins with the unfinished sequence `tail`, as inclusive ranges */
function codePointsStartingWith(tail: readonly number[]): [number, number][] {
  const n = lengthOf(tail[0]!);
  const pad = (b: number) => [...tail, ...Array<number>(n - tail.length).fill(b)];
  const lo = Math.max(codePointOf(pad(0x80)), SMALLEST[n]!), hi = Math.min(codePointOf(pad(0xbf)), LARGEST[n]!);
  const out: [number, number][] = [];
  if (lo <= Math.min(hi, 0xd7ff)) out.push([lo, Math.min(hi, 0xd7ff)]);
  if (Math.max(lo, 0xe000) <= hi) out.push([Math.max(lo, 0xe000), hi]);
  return out;
}

/** whether class `e` matches some code point in [a, b] */
function meets(e: CharClass, a: number, b: number): boolean {
  if (!e.negated) return e.ranges.some(([lo, hi]) => lo <= b && hi >= a);
  // negated: some point of [a, b] lies outside every listed range
  let next = a;
  for (const [lo, hi] of [...e.ranges].sort((x, y) => x[0] - y[0])) {
    if (lo > next) break;
    next = Math.max(next, hi + 1);
  }
  return next <= b;
}

/** where a parse over bytes stands: the stacks after the whole characters, and the bytes of an unfinished one */
export interface BytePrefix {
  readonly stacks: ReturnType<GrammarMatcher["initial"]>;
  readonly tail: readonly number[];
}

/**
 * The grammar (over code points) asked about bytes, the way llama.cpp's sampler keeps a partial
 * UTF-8 state: the parse after the whole characters, and whether some character that begins with
 * the unfinished last one may come next.
 */
export class BytePrefixOracle {
  private readonly m: GrammarMatcher;
  constructor(grammar: Grammar) {
    this.m = new GrammarMatcher(grammar);
  }

  /** the parse of `bytes` from the start; undefined when refused */
  parse(bytes: ArrayLike<number>): BytePrefix | undefined {
    return this.extend({ stacks: this.m.initial(), tail: [] }, bytes);
  }

  /** the parse of `from` followed by `bytes`; undefined when refused */
  extend(from: BytePrefix, bytes: ArrayLike<number>): BytePrefix | undefined {
    const read = readUtf8(from.tail.length === 0 ? bytes : [...from.tail, ...Array.from(bytes)]);
    if (!read) return undefined;
    let stacks = from.stacks;
    for (const c of read.chars) if ((stacks = this.m.advance(stacks, c)).length === 0) return undefined;
    if (read.tail.length > 0) {
      const ranges = codePointsStartingWith(read.tail);
      const tops = stacks.map((s) => this.m.top(s)).filter((t) => t !== undefined);
      if (!tops.some((t) => ranges.some(([a, b]) => meets(t, a, b)))) return undefined;
    }
    return { stacks, tail: read.tail };
  }

  /** whether the parse is a whole sentence of the grammar */
  static complete(p: BytePrefix): boolean {
    return p.tail.length === 0 && GrammarMatcher.complete(p.stacks);
  }
}
