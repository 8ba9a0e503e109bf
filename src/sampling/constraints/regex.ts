import { GrammarError, repetitionProblem } from "./grammar.js";

/**
 * A regular expression (the ECMAScript syntax most patterns use) as a GBNF expression: literals
 * and escapes, `.`, classes `[a-z]` / `[^...]` with `\d \w \s` (and their negations) and Unicode
 * property escapes `\p{...}` / `\P{...}` (as this engine's RegExp reads them), groups
 * `( )` / `(?: )` / `(?<name> )`, `|`, and the quantifiers `* + ? {m} {m,} {m,n}` (lazy ones match the same
 * strings). The whole text must match, so `^` and `$` are accepted only at the ends. Back
 * references and lookarounds describe no regular language a grammar can hold: refused.
 * `json`: the expression describes the inside of a JSON string, so `"`, `\` and control
 * characters appear escaped as JSON writes them.
 */
export function regexToGbnf(pattern: string, json = false): string {
  return gbnfOf(new RegexParser(pattern, json).parse());
}

/**
 * A regular expression's strings of `min` to `max` characters (max undefined: no upper bound), as
 * GBNF rules named `${prefix}-N` (the first the start): JSON Schema's pattern beside minLength /
 * maxLength. The expression becomes an automaton whose edges each read one character (one atom:
 * a literal or a class, inside a JSON string an escape too), and a rule is one of its states paired
 * with the characters read so far (up to max, or up to min where there is no max: past it every
 * count is the same). Pairs that can no longer end within the bounds are left out, so the model
 * cannot be led into a string it cannot finish. At most `maxRules` rules.
 */
export function regexLengthGbnf(pattern: string, json: boolean, min: number, max: number | undefined, prefix: string, maxRules: number): [string, string][] {
  return lengthBounded(new RegexParser(pattern, json), min, max, prefix, maxRules);
}

/** a regular expression's alternatives at its top level (outside groups and classes), as written */
export function topAlternatives(pattern: string): string[] {
  const alts: string[] = [];
  let depth = 0, inClass = false, from = 0;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\") i++;
    else if (inClass) inClass = c !== "]";
    else if (c === "[") inClass = true;
    else if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (c === "|" && depth === 0) {
      alts.push(pattern.slice(from, i));
      from = i + 1;
    }
  }
  return [...alts, pattern.slice(from)];
}

/**
 * Throws where a JSON Schema pattern is not read here (a lookaround, a back reference, ...),
 * naming the pattern and the position in it: each top-level alternative may have its own ^ and $
 */
export function checkPattern(pattern: string): void {
  let offset = 0, never: string | undefined, matches = false;
  for (const alt of topAlternatives(pattern)) {
    const parser = new RegexParser(alt, true, { src: pattern, offset });
    // an alternative that matches no text (a lone surrogate in it) is left out, as the whole
    // expression leaves it: refused only where no alternative matches any
    if (parser.parse(true).kind === "none") never ??= parser.neverFault;
    else matches = true;
    offset += alt.length + 1;
  }
  if (!matches) throw new GrammarError(never!);
}

export type Ranges = [number, number][];

const DIGIT: Ranges = [[0x30, 0x39]];
const WORD: Ranges = [[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]];
/** ECMAScript's \s: WhiteSpace (tab, VT, FF, BOM and every Zs space) and LineTerminator (LF, CR, U+2028, U+2029) */
const SPACE: Ranges = [[0x09, 0x0d], [0x20, 0x20], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a], [0x2028, 0x2029], [0x202f, 0x202f], [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff]];
/** UTF-16's surrogates: half a character each, which no Unicode text (UTF-8 output) holds alone */
const SURROGATES: [number, number] = [0xd800, 0xdfff];
const LONE_SURROGATE = "only a lone surrogate (\\uD800 to \\uDFFF, half of a UTF-16 pair) matches here: a validator takes a string holding one, but it is not Unicode text, which a model writes (as UTF-8), so no string written can match";
/** what a JSON string holds unescaped: not `"`, `\` or a control character */
const JSON_FORBIDDEN: Ranges = [[0x00, 0x1f], [0x22, 0x22], [0x5c, 0x5c]];

/** every code point but the surrogates, in order: BMP ones one unit each, the others two */
let allCodePoints: string | undefined;
const BMP_UNITS = 0x10000 - 0x800;
/** the code point at a unit index of allCodePoints */
const codePointAt = (i: number): number => (i < 0xd800 ? i : i < BMP_UNITS ? i + 0x800 : 0x10000 + (i - BMP_UNITS) / 2);
const propertyCache = new Map<string, Ranges>();
/** how many Unicode properties' ranges are kept (for tests: a request's unknown names are not) */
export const cachedUnicodeProperties = (): number => propertyCache.size;

/**
 * The code points of a Unicode property escape's
 * body (`L`, `Script=Greek`), as this JavaScript engine's RegExp reads \p{...} with the u flag,
 * which is how ajv compiles a pattern, so both take the same characters; undefined where the
 * engine knows no such property
 */
function propertyRanges(body: string): Ranges | undefined {
  if (propertyCache.has(body)) return propertyCache.get(body);
  let re: RegExp | undefined;
  try {
    re = new RegExp(`\\p{${body}}+`, "gu");
  } catch {
    re = undefined;
  }
  let ranges: Ranges | undefined;
  if (re !== undefined) {
    if (allCodePoints === undefined) {
      const parts: string[] = [];
      for (let lo = 0; lo <= 0x10ffff; lo += 0x1000) {
        const chunk: number[] = [];
        for (let c = lo; c < lo + 0x1000; c++) if (c < 0xd800 || c > 0xdfff) chunk.push(c);
        parts.push(String.fromCodePoint(...chunk));
      }
      allCodePoints = parts.join("");
    }
    ranges = [];
    // each run of matching code points is one range (the string holds them in order)
    for (const m of allCodePoints.matchAll(re)) {
      const end = m.index + m[0].length;
      ranges.push([codePointAt(m.index), codePointAt(end - (end > BMP_UNITS ? 2 : 1))]);
    }
    // the surrogates, each alone (\p{Cs} holds them): a string of them in order would pair them up
    const one = new RegExp(`^\\p{${body}}$`, "u");
    for (let c = SURROGATES[0]; c <= SURROGATES[1]; c++) if (one.test(String.fromCharCode(c))) ranges.push([c, c]);
  }
  // (only properties the engine knows, a finite set: a request's made-up names are not kept)
  if (ranges !== undefined) propertyCache.set(body, ranges);
  return ranges;
}

const hex = (c: number): string => (c <= 0xffff ? `\\u${c.toString(16).padStart(4, "0")}` : `\\U${c.toString(16).padStart(8, "0")}`);

/** ranges sorted, overlapping and adjacent ones joined */
function merged(ranges: Ranges): Ranges {
  const out: Ranges = [];
  for (const [a, b] of [...ranges].sort((x, y) => x[0] - y[0])) {
    const last = out[out.length - 1];
    if (last !== undefined && a <= last[1] + 1) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

/** ranges minus other ranges, sorted (one sweep: a Unicode property's hundreds of ranges are cut at once) */
function subtract(ranges: Ranges, minus: Ranges): Ranges {
  const cut = merged(minus);
  const out: Ranges = [];
  let j = 0;
  for (const [a, b] of merged(ranges)) {
    let from = a;
    while (j < cut.length && cut[j]![1] < from) j++;
    for (let k = j; k < cut.length && cut[k]![0] <= b && from <= b; k++) {
      const [lo, hi] = cut[k]!;
      if (lo > from) out.push([from, lo - 1]);
      from = Math.max(from, hi + 1);
    }
    if (from <= b) out.push([from, b]);
  }
  return out;
}

/**
 * a parsed expression; `char` is one character, its GBNF text (inside a JSON string an escape may
 * be several code points); `none` matches no text a model writes (only a lone surrogate there)
 */
type Node =
  | { readonly kind: "none" }
  | { readonly kind: "char"; readonly text: string; readonly ranges: Ranges }
  | { readonly kind: "seq"; readonly items: readonly Node[] }
  | { readonly kind: "alt"; readonly alts: readonly Node[] }
  | { readonly kind: "group"; readonly node: Node }
  | { readonly kind: "repeat"; readonly node: Node; readonly text: string; readonly min: number; readonly max: number };

const NONE: Node = { kind: "none" };

/**
 * The expression without its parts that match no text: a sequence holding one matches none, an
 * alternative of none is left out (the others kept, as a validator takes their strings), a
 * repetition of none is empty where it may repeat 0 times. `none` only where nothing is left.
 */
function withoutNone(n: Node): Node {
  switch (n.kind) {
    case "none":
    case "char": return n;
    case "seq": {
      const items = n.items.map(withoutNone);
      return items.some((i) => i.kind === "none") ? NONE : { kind: "seq", items };
    }
    case "alt": {
      const alts = n.alts.map(withoutNone).filter((a) => a.kind !== "none");
      return alts.length === 0 ? NONE : alts.length === 1 ? alts[0]! : { kind: "alt", alts };
    }
    case "group": {
      const node = withoutNone(n.node);
      return node.kind === "none" ? NONE : { kind: "group", node };
    }
    case "repeat": {
      const node = withoutNone(n.node);
      if (node.kind !== "none") return { ...n, node };
      return n.min === 0 ? { kind: "seq", items: [] } : NONE;
    }
  }
}

/**
 * The characters of `full` inside a JSON string, as GBNF alternatives: those JSON writes raw as a
 * class, and those it escapes (`"`, `\`, control characters) as their escapes (`\"`, `\\`, `\n`
 * or `\u000a`, ...); none where `full` is empty
 */
export function jsonClassAlternatives(full: Ranges): string[] {
  const plain = subtract(full, JSON_FORBIDDEN);
  const escaped = JSON_FORBIDDEN.flatMap(([lo, hi]) => full.flatMap(([a, b]): Ranges => (b < lo || a > hi ? [] : [[Math.max(a, lo), Math.min(b, hi)]])));
  const alts: string[] = plain.length > 0 ? [`[${plain.map(([a, b]) => (a === b ? hex(a) : `${hex(a)}-${hex(b)}`)).join("")}]`] : [];
  const has = (c: number) => escaped.some(([a, b]) => c >= a && c <= b);
  if (has(0x22)) alts.push(`"\\\\\\""`);
  if (has(0x5c)) alts.push(`"\\\\\\\\"`);
  const controls = escaped.reduce((n, [a, b]) => n + Math.max(0, Math.min(b, 0x1f) - a + 1), 0);
  if (controls === 0x20) alts.push(`"\\\\u00" [01] [0-9a-fA-F]`, `"\\\\" [bfnrt]`);
  else {
    const short: Record<number, string> = { 8: "b", 12: "f", 10: "n", 13: "r", 9: "t" };
    for (let c = 0; c < 0x20; c++) {
      if (!has(c)) continue;
      // \u00XX in either case, as JSON takes it
      const last = (c % 16).toString(16);
      alts.push(`"\\\\u00${c >> 4}" ${/[a-f]/.test(last) ? `[${last}${last.toUpperCase()}]` : `"${last}"`}`);
      if (short[c]) alts.push(`"\\\\${short[c]}"`);
    }
  }
  return alts;
}

/** the GBNF expression of a parsed expression */
function gbnfOf(n: Node): string {
  switch (n.kind) {
    // (parse() leaves none out, or refuses the expression)
    case "none": throw new Error("regex.ts: an expression that matches nothing reached the grammar writer");
    case "char": return n.text;
    case "seq": return n.items.map(gbnfOf).join(" ");
    case "alt": return `(${n.alts.map((a) => gbnfOf(a) || '""').join(" | ")})`;
    case "group": return `(${gbnfOf(n.node) || '""'})`;
    case "repeat": {
      const atom = gbnfOf(n.node);
      return `${atom.startsWith("(") || atom.startsWith("[") || atom.length <= 3 ? atom : `(${atom})`}${n.text}`;
    }
  }
}

/** the most automaton states a length-bounded pattern unrolls to (its repetitions copied out) */
const MAX_NFA_STATES = 100_000;

/**
 * A Thompson automaton: per state its empty moves and its one-character moves (each a `char`
 * node: its GBNF text and the code points it matches), from `start` to `accept`
 */
export interface Nfa {
  readonly empty: readonly (readonly number[])[];
  readonly reads: readonly (readonly [{ readonly text: string; readonly ranges: Ranges }, number])[][];
  readonly start: number;
  readonly accept: number;
}

/** the automaton of a parsed expression (at most MAX_NFA_STATES states, its repetitions copied out) */
function thompson(tree: Node, parser: RegexParser): Nfa {
  const empty: number[][] = [], reads: [{ text: string; ranges: Ranges }, number][][] = [];
  const state = (): number => {
    if (empty.length >= MAX_NFA_STATES) parser.fail(`with a length bound the pattern unrolls to more than ${MAX_NFA_STATES} states`);
    empty.push([]);
    reads.push([]);
    return empty.length - 1;
  };
  /** `n` from state `from`: the state where it ends */
  const build = (n: Node, from: number): number => {
    switch (n.kind) {
      // (parse() leaves none out, or refuses the expression): a state nothing leaves
      case "none": return state();
      case "char": {
        const to = state();
        reads[from]!.push([n, to]);
        return to;
      }
      case "seq": return n.items.reduce((at, item) => build(item, at), from);
      case "group": return build(n.node, from);
      case "alt": {
        const to = state();
        for (const a of n.alts) {
          const start = state();
          empty[from]!.push(start);
          empty[build(a, start)]!.push(to);
        }
        return to;
      }
      case "repeat": {
        let at = from;
        for (let k = 0; k < n.min; k++) at = build(n.node, at);
        if (n.max === Infinity) {
          // a loop: from a fresh state, the node back to it, or on
          const loop = state();
          empty[at]!.push(loop);
          empty[build(n.node, loop)]!.push(loop);
          return loop;
        }
        const to = state();
        for (let k = n.min; k < n.max; k++) {
          empty[at]!.push(to);
          at = build(n.node, at);
        }
        empty[at]!.push(to);
        return to;
      }
    }
  };
  const start = state();
  const accept = build(tree, start);
  return { empty, reads, start, accept };
}

/**
 * The automaton of a JSON Schema pattern's strings (JSON-decoded: each character one edge),
 * matched anywhere unless anchored, as a validator reads it (wholeMatch)
 */
export function patternNfa(pattern: string): Nfa {
  const parser = new RegexParser(wholeMatch(pattern), true);
  return thompson(parser.parse(), parser);
}

/** the most automaton states finiteStrings walks (a pattern of a few names has a few dozen) */
const MAX_FINITE_STATES = 4096;

/**
 * Every string a JSON Schema pattern matches whole, sorted (as a validator reads it: unanchored, it
 * matches anywhere, so infinitely many), where there are at most `limit` of them; undefined where
 * there are more, infinitely many (a repetition without bound, a loop reading a character), or the
 * pattern is one the grammar does not read. For keys: finitely many can be written as named
 * properties, each once, so an object's keys can be counted.
 */
export function finiteStrings(pattern: string, limit: number): string[] | undefined {
  let nfa: Nfa;
  try {
    nfa = patternNfa(pattern);
  } catch {
    return undefined;
  }
  if (nfa.empty.length > MAX_FINITE_STATES) return undefined;
  const closure = (from: number): Set<number> => {
    const seen = new Set([from]), todo = [from];
    while (todo.length > 0) {
      for (const t of nfa.empty[todo.pop()!]!) {
        if (seen.has(t)) continue;
        seen.add(t);
        todo.push(t);
      }
    }
    return seen;
  };
  // per state (the start, or one a character leads to): the rest of each string from there; a
  // state met again on its own path is a loop that reads a character, so infinitely many
  const made = new Map<number, Set<string>>(), onPath = new Set<number>();
  const rest = (state: number): Set<string> | undefined => {
    const known = made.get(state);
    if (known !== undefined) return known;
    if (onPath.has(state)) return undefined;
    onPath.add(state);
    const out = new Set<string>();
    for (const s of closure(state)) {
      if (s === nfa.accept) out.add("");
      for (const [char, to] of nfa.reads[s]!) {
        const width = char.ranges.reduce((n, [a, b]) => n + b - a + 1, 0);
        if (width === 0) continue;
        if (width > limit) return undefined;
        const after = rest(to);
        if (after === undefined) return undefined;
        for (const [a, b] of char.ranges) {
          for (let c = a; c <= b; c++) {
            for (const tail of after) {
              out.add(String.fromCodePoint(c) + tail);
              if (out.size > limit) return undefined;
            }
          }
        }
      }
    }
    onPath.delete(state);
    made.set(state, out);
    return out;
  };
  const all = rest(nfa.start);
  // (sorted: the order the keys are written in does not hang on how the pattern is put)
  return all === undefined ? undefined : [...all].sort();
}

/**
 * A JSON Schema pattern as an expression the whole string must match: it matches anywhere unless
 * anchored, each alternative of its top level with its own anchors (^a|b$: a at the start, or b
 * at the end)
 */
export function wholeMatch(pattern: string): string {
  const alts = topAlternatives(pattern).map((alt) => {
    const start = alt.startsWith("^"), end = /(^|[^\\])(\\\\)*\$$/.test(alt);
    return { start, end, core: alt.slice(start ? 1 : 0, end ? -1 : undefined) };
  });
  const anchored = (start: boolean, end: boolean, core: string) => `${start ? "" : "[\\s\\S]*"}(?:${core})${end ? "" : "[\\s\\S]*"}`;
  const same = alts.every((a) => a.start === alts[0]!.start && a.end === alts[0]!.end);
  return same ? anchored(alts[0]!.start, alts[0]!.end, alts.map((a) => a.core).join("|")) : alts.map((a) => anchored(a.start, a.end, a.core)).join("|");
}

function lengthBounded(parser: RegexParser, min: number, max: number | undefined, prefix: string, maxRules: number): [string, string][] {
  const { empty, reads, start, accept } = thompson(parser.parse(), parser);
  // per state: the states its empty moves reach
  const closure = (s: number): number[] => {
    const seen = new Set([s]), todo = [s];
    while (todo.length > 0) {
      for (const t of empty[todo.pop()!]!) {
        if (seen.has(t)) continue;
        seen.add(t);
        todo.push(t);
      }
    }
    return [...seen];
  };
  const cap = max ?? min;
  // product states (automaton state, characters read, up to cap), numbered in the order reached
  const ids = new Map<number, number>(), pairs: [number, number][] = [];
  const idOf = (s: number, k: number): number => {
    const key = s * (cap + 1) + k;
    let id = ids.get(key);
    if (id === undefined) {
      if (pairs.length >= maxRules) throw new GrammarError(`with minLength / maxLength the pattern needs more than ${maxRules} grammar rules`);
      id = pairs.length;
      ids.set(key, id);
      pairs.push([s, k]);
    }
    return id;
  };
  idOf(start, 0);
  const moves: [string, number][][] = [], ends: boolean[] = [];
  for (let i = 0; i < pairs.length; i++) {
    const [s, k] = pairs[i]!;
    const reach = closure(s);
    ends.push(reach.includes(accept) && k >= min);
    const next = Math.min(k + 1, cap);
    moves.push(max !== undefined && k === max ? [] : reach.flatMap((r) => reads[r]!.map(([char, to]): [string, number] => [char.text, idOf(to, next)])));
  }
  // the pairs that can still end within the bounds
  const live = ends.slice();
  for (let changed = true; changed;) {
    changed = false;
    for (let i = 0; i < pairs.length; i++) {
      if (live[i] || !moves[i]!.some(([, to]) => live[to])) continue;
      live[i] = true;
      changed = true;
    }
  }
  if (!live[0]) throw new GrammarError(`no string of ${max === undefined ? `at least ${min}` : `${min} to ${max}`} characters matches it`);
  const rules: [string, string][] = [];
  for (let i = 0; i < pairs.length; i++) {
    if (!live[i]) continue;
    const alts = [...new Set(moves[i]!.filter(([, to]) => live[to]).map(([text, to]) => `${text} ${prefix}-${to}`))];
    rules.push([`${prefix}-${i}`, [...alts, ...(ends[i] ? ['""'] : [])].join(" | ")]);
  }
  return rules;
}

/** a one-character node (its text, and the code points it matches but lone surrogates), or none where no text matches it */
const charNode = (text: string | undefined, ranges: Ranges): Node => (text === undefined ? NONE : { kind: "char", text, ranges: subtract(ranges, [SURROGATES]) });

/** every code point */
const ANY: Ranges = [[0, 0x10ffff]];

class RegexParser {
  private pos = 0;
  /** where the atom being read starts (what a fault of its characters names) */
  private atomAt = 0;
  /** the fault of the first atom that matches no text (a lone surrogate), where one was read */
  neverFault: string | undefined;
  /** `whole`: the expression `src` is part of, at `offset` in it (what a fault names) */
  constructor(private readonly src: string, private readonly json: boolean, private readonly whole = { src, offset: 0 }) {}

  /**
   * The expression, without the parts that match no text; where nothing is left, refused naming
   * the first such atom (`noneTaken`: returned as none)
   */
  parse(noneTaken = false): Node {
    if (this.src.startsWith("^")) this.pos++;
    const body = withoutNone(this.alternation());
    if (this.src[this.pos] === "$" && this.pos === this.src.length - 1) this.pos++;
    if (this.pos < this.src.length) this.fail(this.src[this.pos] === ")" ? "an unmatched )" : `unexpected ${JSON.stringify(this.src[this.pos])}`);
    if (body.kind === "none" && !noneTaken) throw new GrammarError(this.neverFault!);
    return body;
  }

  fail(message: string): never {
    throw new GrammarError(this.faultText(message));
  }

  private faultText(message: string): string {
    const { src, offset } = this.whole;
    return `regex ${JSON.stringify(src.length > 60 ? `${src.slice(0, 60)}...` : src)}, at ${this.pos + offset}: ${message}`;
  }

  /** an atom that matches no text: noted (the first one named if nothing else matches), none */
  private never(message: string): undefined {
    if (this.neverFault === undefined) {
      const at = this.pos;
      this.pos = this.atomAt;
      this.neverFault = this.faultText(message);
      this.pos = at;
    }
    return undefined;
  }

  private alternation(): Node {
    const alts = [this.sequence()];
    while (this.src[this.pos] === "|") {
      this.pos++;
      alts.push(this.sequence());
    }
    return alts.length === 1 ? alts[0]! : { kind: "alt", alts };
  }

  private sequence(): Node {
    const items: Node[] = [];
    for (;;) {
      const c = this.src[this.pos];
      if (c === undefined || c === "|" || c === ")") break;
      if (c === "$" && this.pos === this.src.length - 1) break;
      const atom = this.atom();
      const q = this.quantifier();
      items.push(q ? { kind: "repeat", node: atom, ...q } : atom);
    }
    return { kind: "seq", items };
  }

  private quantifier(): { text: string; min: number; max: number } | undefined {
    const c = this.src[this.pos];
    let q: { text: string; min: number; max: number } | undefined;
    if (c === "*" || c === "+" || c === "?") {
      this.pos++;
      q = { text: c, min: c === "+" ? 1 : 0, max: c === "?" ? 1 : Infinity };
    } else if (c === "{") {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.pos));
      if (m) {
        // checked here, where the position is the regex's own (the GBNF it becomes would name a column of its text)
        const min = Number(m[1]), max = m[2] === undefined ? min : m[3] ? Number(m[3]) : Infinity;
        const problem = repetitionProblem(min, max);
        if (problem !== undefined) this.fail(`${m[0]}: ${problem}`);
        this.pos += m[0].length;
        q = { text: m[2] === undefined ? `{${m[1]}}` : `{${m[1]},${m[3] ?? ""}}`, min, max };
      }
    }
    // a lazy quantifier matches the same strings
    if (q && this.src[this.pos] === "?") this.pos++;
    return q;
  }

  private atom(): Node {
    this.atomAt = this.pos;
    const c = this.src[this.pos]!;
    if (c === "(") {
      this.pos++;
      if (this.src[this.pos] === "?") {
        const look = [["?=", "a lookahead"], ["?!", "a negative lookahead"], ["?<=", "a lookbehind"], ["?<!", "a negative lookbehind"]].find(([open]) => this.src.startsWith(open!, this.pos));
        if (look) {
          this.pos--;
          this.fail(`${look[1]} (${look[0]}...) is not supported (lookarounds): a grammar reads each character once, without looking around it`);
        }
        // a named group matches what a plain one does
        const named = /^\?<[A-Za-z_$][\w$]*>/.exec(this.src.slice(this.pos));
        if (named) this.pos += named[0].length;
        else if (this.src[this.pos + 1] === ":") this.pos += 2;
        else this.fail(`(${this.src.slice(this.pos, this.pos + 2)} is not a group this reads (groups: ( ), (?: ), (?<name> ))`);
      }
      const inner = this.alternation();
      if (this.src[this.pos] !== ")") this.fail("an unterminated group");
      this.pos++;
      return { kind: "group", node: inner };
    }
    if (c === "[") {
      const { ranges, negated } = this.charClass();
      return charNode(this.classText(ranges, negated), negated ? subtract(ANY, ranges) : ranges);
    }
    if (c === ".") {
      this.pos++;
      const lines: Ranges = [[0x0a, 0x0a], [0x0d, 0x0d], [0x2028, 0x2029]];
      return charNode(this.classText(lines, true), subtract(ANY, lines));
    }
    if (c === "*" || c === "+" || c === "?" || c === "{") this.fail(`${c} has nothing to repeat`);
    if (c === "^" || c === "$") this.fail(`${c} is only supported at the start / end`);
    if (c === "\\") {
      const e = this.escape();
      if (typeof e === "number") return charNode(this.literal(e), [[e, e]]);
      return charNode(this.classText(e.ranges, e.negated), e.negated ? subtract(ANY, e.ranges) : e.ranges);
    }
    const cp = this.src.codePointAt(this.pos)!;
    this.pos += cp > 0xffff ? 2 : 1;
    return charNode(this.literal(cp), [[cp, cp]]);
  }

  /** an escape at pos: a code point, or a class (\d \w \s and negations) */
  private escape(inClass = false): number | { ranges: Ranges; negated: boolean } {
    const e = this.src[this.pos + 1];
    if (e === undefined) this.fail("a trailing backslash");
    // (in a class \b is a backspace)
    if (inClass && e === "b") {
      this.pos += 2;
      return 8;
    }
    if (e === "p" || e === "P") {
      const m = /^\{([A-Za-z0-9_]+(?:=[A-Za-z0-9_]+)?)\}/.exec(this.src.slice(this.pos + 2));
      if (!m) this.fail(`\\${e} needs a Unicode property in braces, such as \\${e}{L}, \\${e}{Nd} or \\${e}{Script=Greek}`);
      const ranges = propertyRanges(m[1]!);
      if (ranges === undefined) this.fail(`\\${e}{${m[1]}}: not a Unicode property JavaScript's RegExp knows (with the u flag, as ajv compiles patterns): a General_Category (L, Lu, Nd, P, ...), Script= or Script_Extensions= a script, or a binary property (Alphabetic, ...)`);
      this.pos += 2 + m[0].length;
      return { ranges, negated: e === "P" };
    }
    this.pos += 2;
    const classes: Record<string, Ranges> = { d: DIGIT, w: WORD, s: SPACE };
    if (Object.hasOwn(classes, e.toLowerCase()) && "dwsDWS".includes(e)) return { ranges: classes[e.toLowerCase()]!, negated: e === e.toUpperCase() };
    const simple: Record<string, number> = { n: 10, r: 13, t: 9, f: 12, v: 11, "0": 0 };
    if (Object.hasOwn(simple, e)) return simple[e]!;
    // \cJ: the control character of a letter (its code modulo 32)
    if (e === "c") {
      const letter = this.src[this.pos];
      if (letter === undefined || !/[A-Za-z]/.test(letter)) this.fail("\\c needs a letter after it");
      this.pos++;
      return letter.charCodeAt(0) % 32;
    }
    // \u{1F600}: a code point (JSON Schema patterns are read with the u flag, as ajv compiles them)
    if (e === "u" && this.src[this.pos] === "{") {
      const m = /^\{([0-9a-fA-F]{1,6})\}/.exec(this.src.slice(this.pos));
      if (!m || parseInt(m[1]!, 16) > 0x10ffff) this.fail("\\u{...} needs a code point of 1 to 6 hex digits, at most 10FFFF");
      this.pos += m[0].length;
      return parseInt(m[1]!, 16);
    }
    if (e === "x" || e === "u") {
      const n = e === "x" ? 2 : 4;
      const h = this.src.slice(this.pos, this.pos + n);
      if (!new RegExp(`^[0-9a-fA-F]{${n}}$`).test(h)) this.fail(`\\${e} needs ${n} hex digits`);
      this.pos += n;
      const unit = parseInt(h, 16);
      // a surrogate pair written as two \u escapes is one character (the u flag)
      const low = /^\\u([dD][c-fC-F][0-9a-fA-F]{2})/.exec(this.src.slice(this.pos));
      if (e === "u" && unit >= 0xd800 && unit <= 0xdbff && low) {
        this.pos += low[0].length;
        return 0x10000 + ((unit - 0xd800) << 10) + (parseInt(low[1]!, 16) - 0xdc00);
      }
      return unit;
    }
    if (/[1-9bBk]/.test(e)) this.fail(`\\${e} (back references, word boundaries) is not supported`);
    // any other escaped character stands for itself
    return e.codePointAt(0)!;
  }

  private charClass(): { ranges: Ranges; negated: boolean } {
    this.pos++;
    const negated = this.src[this.pos] === "^";
    if (negated) this.pos++;
    let ranges: Ranges = [];
    let negatedParts: Ranges = [];
    // (as in JavaScript, a ] first closes the class: [] matches nothing, [^] any character)
    while (this.src[this.pos] !== "]") {
      if (this.pos >= this.src.length) this.fail("an unterminated character class");
      let lo: number;
      if (this.src[this.pos] === "\\") {
        const e = this.escape(true);
        if (typeof e !== "number") {
          // ([\d-z] is \d, "-" and z without the u flag; with it, as ajv compiles a pattern, no class)
          if (this.json && this.src[this.pos] === "-" && this.src[this.pos + 1] !== "]" && this.pos + 1 < this.src.length) this.fail("a class escape cannot start a range (the u flag, with which a validator compiles a pattern, refuses it)");
          if (e.negated) negatedParts = [...negatedParts, ...e.ranges];
          else ranges = [...ranges, ...e.ranges];
          continue;
        }
        lo = e;
      } else {
        lo = this.src.codePointAt(this.pos)!;
        this.pos += lo > 0xffff ? 2 : 1;
      }
      if (this.src[this.pos] === "-" && this.src[this.pos + 1] !== "]" && this.pos + 1 < this.src.length) {
        this.pos++;
        let hi: number;
        if (this.src[this.pos] === "\\") {
          const e = this.escape(true);
          if (typeof e !== "number") this.fail("a class escape cannot end a range");
          hi = e;
        } else {
          hi = this.src.codePointAt(this.pos)!;
          this.pos += hi > 0xffff ? 2 : 1;
        }
        if (hi < lo) this.fail("a range whose end is below its start");
        ranges.push([lo, hi]);
      } else ranges.push([lo, lo]);
    }
    this.pos++;
    if (negatedParts.length > 0) {
      // [\D...] etc.: everything outside the negated parts, joined with the listed ones
      ranges = [...ranges, ...subtract(ANY, negatedParts)];
    }
    return { ranges, negated };
  }

  /**
   * A GBNF class for the ranges. Inside a JSON string the characters JSON escapes are taken out
   * of the class and come back as their escapes (`\"`, `\\`, `\n` or `\u000a`, ...), so a class
   * that matches them still does, as JSON writes them. Undefined where only lone surrogates match.
   */
  private classText(ranges: Ranges, negated: boolean): string | undefined {
    const text = (r: Ranges, neg: boolean) => `[${neg ? "^" : ""}${r.map(([a, b]) => (a === b ? hex(a) : `${hex(a)}-${hex(b)}`)).join("")}]`;
    if (!this.json) return text(ranges, negated);
    const full = negated ? subtract([[0, 0x10ffff]], ranges) : ranges;
    if (full.length > 0 && subtract(full, [SURROGATES]).length === 0) return this.never(LONE_SURROGATE);
    const alts = jsonClassAlternatives(full);
    if (alts.length === 0) this.fail("the class admits no character");
    return alts.length === 1 ? alts[0]! : `(${alts.join(" | ")})`;
  }

  /** a GBNF string for one character (inside a JSON string: as JSON writes it; undefined for a lone surrogate there) */
  private literal(cp: number): string | undefined {
    if (this.json && cp >= SURROGATES[0] && cp <= SURROGATES[1]) return this.never(LONE_SURROGATE);
    if (this.json && (cp === 0x22 || cp === 0x5c)) return `"\\\\${cp === 0x22 ? '\\"' : "\\\\"}"`;
    // a control character as JSON may write it: \u00XX or its short escape (\n, \t, ...)
    if (this.json && cp < 0x20) return this.classText([[cp, cp]], false);
    return `"${hex(cp)}"`;
  }
}
