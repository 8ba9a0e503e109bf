import { GrammarError, repetitionProblem } from "./grammar.js";

/**
 * A regular expression (the ECMAScript syntax most patterns use) as a GBNF expression: literals
 * and escapes, `.`, classes `[a-z]` / `[^...]` with `\d \w \s` (and their negations), groups
 * `( )` / `(?: )`, `|`, and the quantifiers `* + ? {m} {m,} {m,n}` (lazy ones match the same
 * strings). The whole text must match, so `^` and `$` are accepted only at the ends. Back
 * references and lookarounds describe no regular language a grammar can hold: refused.
 * `json`: the expression describes the inside of a JSON string, so `"`, `\` and control
 * characters appear escaped as JSON writes them.
 */
export function regexToGbnf(pattern: string, json = false): string {
  return new RegexParser(pattern, json).parse();
}

type Ranges = [number, number][];

const DIGIT: Ranges = [[0x30, 0x39]];
const WORD: Ranges = [[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]];
const SPACE: Ranges = [[0x09, 0x0d], [0x20, 0x20], [0xa0, 0xa0], [0x2028, 0x2029], [0xfeff, 0xfeff]];
/** what a JSON string holds unescaped: not `"`, `\` or a control character */
const JSON_FORBIDDEN: Ranges = [[0x00, 0x1f], [0x22, 0x22], [0x5c, 0x5c]];

const hex = (c: number): string => (c <= 0xffff ? `\\u${c.toString(16).padStart(4, "0")}` : `\\U${c.toString(16).padStart(8, "0")}`);

/** ranges minus other ranges */
function subtract(ranges: Ranges, minus: Ranges): Ranges {
  let out: Ranges = ranges.map(([a, b]) => [a, b]);
  for (const [lo, hi] of minus) {
    out = out.flatMap(([a, b]): Ranges => (hi < a || lo > b ? [[a, b]] : [...(a < lo ? [[a, lo - 1] as [number, number]] : []), ...(b > hi ? [[hi + 1, b] as [number, number]] : [])]));
  }
  return out;
}

class RegexParser {
  private pos = 0;
  constructor(private readonly src: string, private readonly json: boolean) {}

  parse(): string {
    if (this.src.startsWith("^")) this.pos++;
    const body = this.alternation();
    if (this.src[this.pos] === "$" && this.pos === this.src.length - 1) this.pos++;
    if (this.pos < this.src.length) this.fail(this.src[this.pos] === ")" ? "an unmatched )" : `unexpected ${JSON.stringify(this.src[this.pos])}`);
    return body;
  }

  private fail(message: string): never {
    throw new GrammarError(`regex ${JSON.stringify(this.src.length > 60 ? `${this.src.slice(0, 60)}...` : this.src)}, at ${this.pos}: ${message}`);
  }

  private alternation(): string {
    const alts = [this.sequence()];
    while (this.src[this.pos] === "|") {
      this.pos++;
      alts.push(this.sequence());
    }
    return alts.length === 1 ? alts[0]! : `(${alts.map((a) => a || '""').join(" | ")})`;
  }

  private sequence(): string {
    const parts: string[] = [];
    for (;;) {
      const c = this.src[this.pos];
      if (c === undefined || c === "|" || c === ")") break;
      if (c === "$" && this.pos === this.src.length - 1) break;
      let atom = this.atom();
      const q = this.quantifier();
      if (q) atom = `${atom.startsWith("(") || atom.startsWith("[") || atom.length <= 3 ? atom : `(${atom})`}${q}`;
      parts.push(atom);
    }
    return parts.join(" ");
  }

  private quantifier(): string | undefined {
    const c = this.src[this.pos];
    let q: string | undefined;
    if (c === "*" || c === "+" || c === "?") {
      this.pos++;
      q = c;
    } else if (c === "{") {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.pos));
      if (m) {
        // checked here, where the position is the regex's own (the GBNF it becomes would name a column of its text)
        const min = Number(m[1]), max = m[2] === undefined ? min : m[3] ? Number(m[3]) : Infinity;
        const problem = repetitionProblem(min, max);
        if (problem !== undefined) this.fail(`${m[0]}: ${problem}`);
        this.pos += m[0].length;
        q = m[2] === undefined ? `{${m[1]}}` : `{${m[1]},${m[3] ?? ""}}`;
      }
    }
    // a lazy quantifier matches the same strings
    if (q && this.src[this.pos] === "?") this.pos++;
    return q;
  }

  private atom(): string {
    const c = this.src[this.pos]!;
    if (c === "(") {
      this.pos++;
      if (this.src[this.pos] === "?") {
        if (this.src[this.pos + 1] !== ":") this.fail("lookarounds and named groups are not supported");
        this.pos += 2;
      }
      const inner = this.alternation();
      if (this.src[this.pos] !== ")") this.fail("an unterminated group");
      this.pos++;
      return `(${inner || '""'})`;
    }
    if (c === "[") return this.charClass();
    if (c === ".") {
      this.pos++;
      return this.classText([[0x0a, 0x0a], [0x0d, 0x0d], [0x2028, 0x2029]], true);
    }
    if (c === "*" || c === "+" || c === "?" || c === "{") this.fail(`${c} has nothing to repeat`);
    if (c === "^" || c === "$") this.fail(`${c} is only supported at the start / end`);
    if (c === "\\") {
      const e = this.escape();
      return typeof e === "number" ? this.literal(e) : this.classText(e.ranges, e.negated);
    }
    const cp = this.src.codePointAt(this.pos)!;
    this.pos += cp > 0xffff ? 2 : 1;
    return this.literal(cp);
  }

  /** an escape at pos: a code point, or a class (\d \w \s and negations) */
  private escape(): number | { ranges: Ranges; negated: boolean } {
    const e = this.src[this.pos + 1];
    if (e === undefined) this.fail("a trailing backslash");
    this.pos += 2;
    const classes: Record<string, Ranges> = { d: DIGIT, w: WORD, s: SPACE };
    if (Object.hasOwn(classes, e.toLowerCase()) && "dwsDWS".includes(e)) return { ranges: classes[e.toLowerCase()]!, negated: e === e.toUpperCase() };
    const simple: Record<string, number> = { n: 10, r: 13, t: 9, f: 12, v: 11, "0": 0 };
    if (Object.hasOwn(simple, e)) return simple[e]!;
    if (e === "x" || e === "u") {
      const n = e === "x" ? 2 : 4;
      const h = this.src.slice(this.pos, this.pos + n);
      if (!new RegExp(`^[0-9a-fA-F]{${n}}$`).test(h)) this.fail(`\\${e} needs ${n} hex digits`);
      this.pos += n;
      return parseInt(h, 16);
    }
    if (/[1-9bBk]/.test(e)) this.fail(`\\${e} (back references, word boundaries) is not supported`);
    // any other escaped character stands for itself
    return e.codePointAt(0)!;
  }

  private charClass(): string {
    this.pos++;
    const negated = this.src[this.pos] === "^";
    if (negated) this.pos++;
    let ranges: Ranges = [];
    let negatedParts: Ranges = [];
    let first = true;
    while (this.src[this.pos] !== "]" || first) {
      if (this.pos >= this.src.length) this.fail("an unterminated character class");
      first = false;
      let lo: number;
      if (this.src[this.pos] === "\\") {
        const e = this.escape();
        if (typeof e !== "number") {
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
          const e = this.escape();
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
      ranges = [...ranges, ...subtract([[0, 0x10ffff]], negatedParts)];
    }
    return this.classText(ranges, negated);
  }

  /**
   * A GBNF class for the ranges. Inside a JSON string the characters JSON escapes are taken out
   * of the class and come back as their escapes (`\"`, `\\`, `\n` or `\u000a`, ...), so a class
   * that matches them still does, as JSON writes them.
   */
  private classText(ranges: Ranges, negated: boolean): string {
    const text = (r: Ranges, neg: boolean) => `[${neg ? "^" : ""}${r.map(([a, b]) => (a === b ? hex(a) : `${hex(a)}-${hex(b)}`)).join("")}]`;
    if (!this.json) return text(ranges, negated);
    const full = negated ? subtract([[0, 0x10ffff]], ranges) : ranges;
    const plain = subtract(full, JSON_FORBIDDEN);
    const escaped = JSON_FORBIDDEN.flatMap(([lo, hi]) => full.flatMap(([a, b]): Ranges => (b < lo || a > hi ? [] : [[Math.max(a, lo), Math.min(b, hi)]])));
    const alts: string[] = plain.length > 0 ? [text(plain, false)] : [];
    const has = (c: number) => escaped.some(([a, b]) => c >= a && c <= b);
    if (has(0x22)) alts.push(`"\\\\\\""`);
    if (has(0x5c)) alts.push(`"\\\\\\\\"`);
    const controls = escaped.reduce((n, [a, b]) => n + Math.max(0, Math.min(b, 0x1f) - a + 1), 0);
    if (controls === 0x20) alts.push(`"\\\\u00" [01] [0-9a-fA-F]`, `"\\\\" [bfnrt]`);
    else {
      const short: Record<number, string> = { 8: "b", 12: "f", 10: "n", 13: "r", 9: "t" };
      for (let c = 0; c < 0x20; c++) {
        if (!has(c)) continue;
        alts.push(`"\\\\u${c.toString(16).padStart(4, "0")}"`);
        if (short[c]) alts.push(`"\\\\${short[c]}"`);
      }
    }
    if (alts.length === 0) this.fail("the class admits no character");
    return alts.length === 1 ? alts[0]! : `(${alts.join(" | ")})`;
  }

  /** a GBNF string for one character (inside a JSON string: as JSON writes it) */
  private literal(cp: number): string {
    if (this.json && (cp === 0x22 || cp === 0x5c)) return `"\\\\${cp === 0x22 ? '\\"' : "\\\\"}"`;
    if (this.json && cp < 0x20) return `"\\\\u${cp.toString(16).padStart(4, "0")}"`;
    return `"${hex(cp)}"`;
  }
}
