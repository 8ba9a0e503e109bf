import { checkLeftRecursion, GrammarError, unmatchableRules, MAX_REPETITION, repetitionProblem, type Alternative, type CharClass, type Element, type Grammar } from "./grammar.js";

/**
 * llama.cpp's GBNF (grammars/README.md in its source): `name ::= alternatives`, with "strings",
 * [character classes] ([^...] negated, a-z ranges), `.` (any character), rule references,
 * ( groups ), the repetitions `*` `+` `?` `{m}` `{m,}` `{m,n}`, and `#` comments. A rule ends at
 * the end of its line unless a group is open; the start rule is `root`. Compiled into a Grammar:
 * strings become character sequences, groups and repetitions become rules of their own
 * (as llama.cpp does), so the matcher knows only character classes and rule references.
 */
export interface GbnfLimits {
  /** longest grammar text */
  readonly maxChars?: number;
  /** most rules after compilation (repetitions and groups add rules) */
  readonly maxRules?: number;
  /** largest bound of a {m,n} repetition */
  readonly maxRepetition?: number;
}

const DEFAULTS: Required<GbnfLimits> = { maxChars: 1 << 20, maxRules: 20_000, maxRepetition: MAX_REPETITION };

const ANY: CharClass = { kind: "char", ranges: [[0, 0x10ffff]], negated: false };

export function parseGbnf(source: string, limits: GbnfLimits = {}): Grammar {
  const lim = { ...DEFAULTS, ...limits };
  if (source.length > lim.maxChars) throw new GrammarError(`the grammar has ${source.length} characters, more than the ${lim.maxChars} allowed`);
  return new Parser(source, lim).parse();
}

/**
 * The names of the rules of `source` that no string can match (each needs itself again, directly
 * or through other rules): parseGbnf refuses such a grammar naming the first; a writer of
 * grammars uses this to tell which of its own parts cannot end
 */
export function unmatchableRuleNames(source: string, limits: GbnfLimits = {}): string[] {
  const g = new Parser(source, { ...DEFAULTS, ...limits }, false).parse();
  return unmatchableRules(g).map((r) => g.names[r]!);
}

const isWordChar = (c: string | undefined): boolean => c !== undefined && /[A-Za-z0-9_-]/.test(c);

/** a GBNF expression as written, for rewriting: alternatives of sequences of repeated atoms */
type Atom = { readonly text: string } | { readonly ref: string } | { readonly group: Sequence[] };
interface Item { readonly atom: Atom; readonly repeat: string; readonly optional: boolean }
type Sequence = Item[];

/**
 * `source` without what no string can match: the rules every alternative of which needs itself
 * again (`dead`, by name, as unmatchableRuleNames tells them) are left out, and so is every
 * alternative that needs one of them; a repetition that may be left out (`?`, `*`, `{0,n}`) of one is
 * dropped from its sequence. The language is the same (what was left out matched nothing), but a
 * recognizer no longer enters a part it could never leave. `text` is `source` itself where nothing
 * is dead; the root among `dead` means the grammar matches nothing at all.
 */
export function withoutUnmatchable(source: string, limits: GbnfLimits = {}): { text: string; dead: string[] } {
  const unmatchable = new Set(unmatchableRuleNames(source, limits));
  if (unmatchable.size === 0) return { text: source, dead: [] };
  const rules = new ExpressionReader(source).rules();
  const dead = new Set([...rules.keys()].filter((n) => unmatchable.has(n)));
  // an expression with its dead parts left out, or undefined where it needs one
  const alternatives = (alts: readonly Sequence[]): Sequence[] | undefined => {
    const kept = alts.flatMap((seq) => sequence(seq) ?? []);
    return kept.length === 0 ? undefined : kept;
  };
  const sequence = (seq: Sequence): [Sequence] | undefined => {
    const out: Sequence = [];
    for (const item of seq) {
      const atom = "ref" in item.atom ? (dead.has(item.atom.ref) ? undefined : item.atom) : "group" in item.atom ? mapGroup(item.atom.group) : item.atom;
      if (atom !== undefined) out.push({ ...item, atom });
      else if (!item.optional) return undefined;
    }
    return [out];
  };
  const mapGroup = (alts: readonly Sequence[]): Atom | undefined => {
    const kept = alternatives(alts);
    return kept === undefined ? undefined : { group: kept };
  };
  const write = (alts: readonly Sequence[]): string => alts.map((seq) => (seq.length === 0 ? '""' : seq.map((i) => `${"text" in i.atom ? i.atom.text : "ref" in i.atom ? i.atom.ref : `(${write(i.atom.group)})`}${i.repeat}`).join(" "))).join(" | ");
  const lines: string[] = [];
  for (const [name, body] of rules) {
    if (dead.has(name)) continue;
    lines.push(`${name} ::= ${write(alternatives(body)!)}`);
  }
  return { text: `${lines.join("\n")}\n`, dead: [...dead] };
}

/**
 * GBNF read as written (strings, classes and repetitions kept as their text), for rewriting a
 * grammar that parseGbnf has read without fault: the same reading of where rules, groups and
 * sequences end
 */
class ExpressionReader {
  private pos = 0;
  constructor(private readonly src: string) {}

  rules(): Map<string, Sequence[]> {
    const out = new Map<string, Sequence[]>();
    this.skip(true);
    while (this.pos < this.src.length) {
      const name = this.word();
      this.skip(false);
      this.pos += 3; // ::=
      this.skip(true);
      out.set(name, this.alternates(false));
      this.skip(true);
    }
    return out;
  }

  private skip(newlines: boolean): void {
    const s = this.src;
    while (this.pos < s.length) {
      const c = s[this.pos]!;
      if (c === "#") while (this.pos < s.length && s[this.pos] !== "\n") this.pos++;
      else if (c === " " || c === "\t" || (newlines && (c === "\n" || c === "\r"))) this.pos++;
      else break;
    }
  }

  private word(): string {
    const start = this.pos;
    while (isWordChar(this.src[this.pos])) this.pos++;
    return this.src.slice(start, this.pos);
  }

  private alternates(nested: boolean): Sequence[] {
    const alts = [this.sequence(nested)];
    while (this.src[this.pos] === "|") {
      this.pos++;
      this.skip(true);
      alts.push(this.sequence(nested));
    }
    return alts;
  }

  /** to the end of a string or class opened at the current position, escapes skipped */
  private quoted(close: string): string {
    const start = this.pos;
    this.pos++;
    while (this.src[this.pos] !== close) this.pos += this.src[this.pos] === "\\" ? 2 : 1;
    this.pos++;
    return this.src.slice(start, this.pos);
  }

  private sequence(nested: boolean): Sequence {
    const out: Sequence = [];
    const s = this.src;
    for (;;) {
      const c = s[this.pos];
      if (c === undefined) break;
      let atom: Atom | undefined;
      if (c === '"') atom = { text: this.quoted('"') };
      else if (c === "[") atom = { text: this.quoted("]") };
      else if (c === ".") {
        this.pos++;
        atom = { text: "." };
      } else if (isWordChar(c)) atom = { ref: this.word() };
      else if (c === "(") {
        this.pos++;
        this.skip(true);
        const group = this.alternates(true);
        this.pos++; // )
        atom = { group };
      } else if (c === "*" || c === "+" || c === "?" || c === "{") {
        const start = this.pos;
        if (c === "{") while (s[this.pos] !== "}") this.pos++;
        this.pos++;
        const repeat = s.slice(start, this.pos);
        const optional = c === "*" || c === "?" || (c === "{" && /^\{\s*0\s*[,}]/.test(repeat));
        // (parseGbnf takes one repetition of an element, never two)
        out.push({ atom: out.pop()!.atom, repeat, optional });
      } else break;
      if (atom !== undefined) out.push({ atom, repeat: "", optional: false });
      this.skip(nested);
    }
    return out;
  }
}

/**
 * A grammar that admits what any of `sources` admits (GBNF texts, each with its own root):
 * each one's rules are renamed apart (`g0-`, `g1-`, ... before every rule name, strings,
 * character classes, repetition bounds and comments left as they are) and a new root chooses
 * between their roots.
 */
export function gbnfAlternatives(sources: readonly string[]): string {
  const renamed = sources.map((src, i) => renameRules(src, `g${i}-`));
  return `root ::= ${sources.map((_, i) => `g${i}-root`).join(" | ")}\n${renamed.join("\n")}\n`;
}

/** `source` with `prefix` before every rule name (definitions and references) */
function renameRules(source: string, prefix: string): string {
  let out = "";
  let i = 0;
  /** to the end of a string or class opened at i (escapes skipped), or of a comment or {m,n} */
  const skipTo = (close: string, escapes: boolean) => {
    let j = i + 1;
    while (j < source.length && source[j] !== close) j += escapes && source[j] === "\\" ? 2 : 1;
    return Math.min(j + 1, source.length);
  };
  while (i < source.length) {
    const c = source[i]!;
    let end: number;
    if (c === '"') end = skipTo('"', true);
    else if (c === "[") end = skipTo("]", true);
    else if (c === "{") end = skipTo("}", false);
    else if (c === "#") end = skipTo("\n", false);
    else if (isWordChar(c)) {
      end = i;
      while (isWordChar(source[end])) end++;
      out += prefix;
    } else end = i + 1;
    out += source.slice(i, end);
    i = end;
  }
  return out;
}

class Parser {
  private pos = 0;
  private readonly names: string[] = [];
  private readonly ids = new Map<string, number>();
  private readonly rules: (Alternative[] | undefined)[] = [];
  /** where each rule was first referenced (for "undefined rule" errors) */
  private readonly referencedAt = new Map<number, number>();

  constructor(private readonly src: string, private readonly lim: Required<GbnfLimits>, private readonly check = true) {}

  parse(): Grammar {
    this.skip(true);
    while (this.pos < this.src.length) {
      const at = this.pos;
      const name = this.word();
      if (name === "") this.fail("expected a rule name", at);
      this.skip(false);
      if (!this.src.startsWith("::=", this.pos)) this.fail(`expected "::=" after the rule name ${name}`);
      this.pos += 3;
      this.skip(true);
      const id = this.id(name);
      if (this.rules[id] !== undefined) this.fail(`rule ${name} is defined twice`, at);
      this.rules[id] = this.alternates(name, false);
      this.skip(true);
    }
    const root = this.ids.get("root");
    if (root === undefined || this.rules[root] === undefined) throw new GrammarError("the grammar has no root rule (root ::= ...)");
    for (const [id, at] of this.referencedAt) {
      if (this.rules[id] === undefined) this.fail(`rule ${this.names[id]} is used but never defined`, at);
    }
    const grammar = { names: this.names, rules: this.rules as Alternative[][], root };
    if (this.check) checkLeftRecursion(grammar);
    return grammar;
  }

  private fail(message: string, at = this.pos): never {
    const line = this.src.slice(0, at).split("\n").length;
    const col = at - this.src.lastIndexOf("\n", at - 1);
    throw new GrammarError(`line ${line}, column ${col}: ${message}`);
  }

  private id(name: string): number {
    let id = this.ids.get(name);
    if (id === undefined) {
      id = this.names.length;
      if (id >= this.lim.maxRules) throw new GrammarError(`the grammar needs more than ${this.lim.maxRules} rules`);
      this.ids.set(name, id);
      this.names.push(name);
      this.rules.push(undefined);
    }
    return id;
  }

  /** a rule of its own for a group or a repetition */
  private synthetic(parent: string, alternatives: Alternative[]): number {
    let k = this.names.length;
    while (this.ids.has(`${parent}_${k}`)) k++;
    const id = this.id(`${parent}_${k}`);
    this.rules[id] = alternatives;
    return id;
  }

  /** spaces and comments; newlines too where `newlines` (inside groups, after ::= and |) */
  private skip(newlines: boolean): void {
    const s = this.src;
    while (this.pos < s.length) {
      const c = s[this.pos]!;
      if (c === "#") {
        while (this.pos < s.length && s[this.pos] !== "\n") this.pos++;
      } else if (c === " " || c === "\t" || (newlines && (c === "\n" || c === "\r"))) this.pos++;
      else break;
    }
  }

  private word(): string {
    const start = this.pos;
    while (isWordChar(this.src[this.pos])) this.pos++;
    return this.src.slice(start, this.pos);
  }

  private alternates(name: string, nested: boolean): Alternative[] {
    const alts: Alternative[] = [this.sequence(name, nested)];
    while (this.src[this.pos] === "|") {
      this.pos++;
      this.skip(true);
      alts.push(this.sequence(name, nested));
    }
    return alts;
  }

  private sequence(name: string, nested: boolean): Element[] {
    const out: Element[] = [];
    /** where the last element (the operand of a repetition: one element, or a string's characters) starts in `out` */
    let last = -1;
    const s = this.src;
    for (;;) {
      const c = s[this.pos];
      if (c === undefined) break;
      if (c === '"') {
        last = out.length;
        this.pos++;
        while (s[this.pos] !== '"') {
          if (this.pos >= s.length) this.fail("unterminated string");
          const cp = this.char();
          out.push({ kind: "char", ranges: [[cp, cp]], negated: false });
        }
        this.pos++;
        // "" is the empty string: nothing to repeat
        if (out.length === last) last = -1;
      } else if (c === "[") {
        last = out.length;
        out.push(this.charClass());
      } else if (c === ".") {
        this.pos++;
        last = out.length;
        out.push(ANY);
      } else if (isWordChar(c)) {
        const at = this.pos;
        const ref = this.word();
        const id = this.id(ref);
        if (!this.referencedAt.has(id)) this.referencedAt.set(id, at);
        last = out.length;
        out.push({ kind: "rule", rule: id });
      } else if (c === "(") {
        this.pos++;
        this.skip(true);
        const alts = this.alternates(name, true);
        if (s[this.pos] !== ")") this.fail('expected ")"');
        this.pos++;
        last = out.length;
        out.push({ kind: "rule", rule: this.synthetic(name, alts) });
      } else if (c === "*" || c === "+" || c === "?" || c === "{") {
        if (last < 0) this.fail(`"${c}" has nothing to repeat`);
        // the last element, or the last string as a whole
        const elements = out.splice(last);
        const operand: Element = elements.length === 1 ? elements[0]! : { kind: "rule", rule: this.synthetic(name, [elements]) };
        const [min, max] = this.repetition();
        out.push(...this.repeat(name, operand, min, max));
        last = -1;
      } else break;
      this.skip(nested);
    }
    return out;
  }

  /** the bounds of * + ? {m} {m,} {m,n} at the current position (max Infinity: unbounded) */
  private repetition(): [number, number] {
    const c = this.src[this.pos]!;
    this.pos++;
    if (c === "*") return [0, Infinity];
    if (c === "+") return [1, Infinity];
    if (c === "?") return [0, 1];
    const m = /^\s*(\d+)\s*(?:(,)\s*(\d+)?\s*)?\}/.exec(this.src.slice(this.pos, this.pos + 40));
    if (!m) this.fail("expected {m}, {m,} or {m,n}");
    this.pos += m[0].length;
    const min = Number(m[1]);
    const max = m[2] === undefined ? min : m[3] === undefined ? Infinity : Number(m[3]);
    const problem = repetitionProblem(min, max, this.lim.maxRepetition);
    if (problem !== undefined) this.fail(max < min ? `repetition {${min},${max}}: ${problem}` : problem);
    return [min, max];
  }

  /** operand{min,max} as elements: min copies, then X* as a rule, or (max - min) nested optional rules */
  private repeat(name: string, operand: Element, min: number, max: number): Element[] {
    const out: Element[] = Array.from({ length: min }, () => operand);
    if (max === Infinity) {
      const id = this.id(`${name}_star_${this.names.length}`);
      this.rules[id] = [[operand, { kind: "rule", rule: id }], []];
      out.push({ kind: "rule", rule: id });
    } else if (max > min) {
      // X? nested (max - min) times: R1 ::= X R2 | ε, ..., Rk ::= X | ε
      let next: number | undefined;
      for (let k = max - min; k > 0; k--) {
        const alt: Element[] = next === undefined ? [operand] : [operand, { kind: "rule", rule: next }];
        next = this.synthetic(name, [alt, []]);
      }
      out.push({ kind: "rule", rule: next! });
    }
    return out;
  }

  /** one character of a string or class, escapes decoded, as a code point */
  private char(): number {
    const s = this.src;
    const c = s[this.pos]!;
    if (c !== "\\") {
      const cp = s.codePointAt(this.pos)!;
      this.pos += cp > 0xffff ? 2 : 1;
      return cp;
    }
    const e = s[this.pos + 1];
    const hex = (n: number): number => {
      const h = s.slice(this.pos + 2, this.pos + 2 + n);
      if (!new RegExp(`^[0-9a-fA-F]{${n}}$`).test(h)) this.fail(`expected ${n} hex digits after \\${e}`);
      this.pos += 2 + n;
      return parseInt(h, 16);
    };
    if (e === "x") return hex(2);
    if (e === "u") return hex(4);
    if (e === "U") return hex(8);
    const simple: Record<string, number> = { t: 9, n: 10, r: 13, "\\": 92, '"': 34, "[": 91, "]": 93, "-": 45, "^": 94 };
    if (e !== undefined && Object.hasOwn(simple, e)) {
      this.pos += 2;
      return simple[e]!;
    }
    this.fail(`unknown escape \\${e ?? ""}`);
  }

  private charClass(): CharClass {
    this.pos++; // [
    const negated = this.src[this.pos] === "^";
    if (negated) this.pos++;
    const ranges: [number, number][] = [];
    while (this.src[this.pos] !== "]") {
      if (this.pos >= this.src.length) this.fail("unterminated character class");
      const lo = this.char();
      if (this.src[this.pos] === "-" && this.src[this.pos + 1] !== "]") {
        this.pos++;
        const hi = this.char();
        if (hi < lo) this.fail("a character range whose end is below its start");
        ranges.push([lo, hi]);
      } else ranges.push([lo, lo]);
    }
    this.pos++;
    return { kind: "char", ranges, negated };
  }
}
