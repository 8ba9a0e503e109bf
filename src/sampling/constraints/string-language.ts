import { GrammarError } from "./grammar.js";
import { jsonClassAlternatives, patternNfa, type Nfa, type Ranges } from "./regex.js";

/**
 * a JSON Schema pattern (matched anywhere unless anchored, as a validator reads it), one string
 * exactly, or a length (characters; max undefined: no upper bound)
 */
export type StringTest = { readonly pattern: string } | { readonly literal: string } | { readonly length: readonly [number, number | undefined] };

/**
 * Strings (as a validator sees them: JSON-decoded, a character per code point) that every test of
 * `all` takes, that no group of `none` takes whole (a group: tests that all take the string; `not`
 * of a pattern is a group of one, a name ruled out a group of one literal), of `min` to `max`
 * characters (max undefined: no upper bound)
 */
export interface StringLanguage {
  readonly all: readonly StringTest[];
  readonly none: readonly (readonly StringTest[])[];
  readonly min: number;
  readonly max: number | undefined;
}

/** the automaton of one string: a state per character read */
function literalNfa(text: string): Nfa {
  const cps = [...text].map((c) => c.codePointAt(0)!);
  return {
    empty: cps.map(() => []).concat([[]]),
    reads: cps.map((c, i) => [[{ text: "", ranges: [[c, c]] as Ranges }, i + 1] as const]).concat([[]]),
    start: 0,
    accept: cps.length,
  };
}

/** the automaton of a length: a state per character read up to max (or min, then a loop), each from min on to the end */
function lengthNfa(min: number, max: number | undefined): Nfa {
  const top = max ?? min, end = top + 1;
  const any = { text: "", ranges: [[0, 0x10ffff]] as Ranges };
  const empty = Array.from({ length: end + 1 }, (_, i) => (i >= min && i <= top ? [end] : []));
  const reads = Array.from({ length: end + 1 }, (_, i) => (i < top ? [[any, i + 1] as const] : i === top && max === undefined ? [[any, i] as const] : []));
  return { empty, reads, start: 0, accept: end };
}

const nfaOf = (t: StringTest): Nfa => ("pattern" in t ? patternNfa(t.pattern) : "literal" in t ? literalNfa(t.literal) : lengthNfa(t.length[0], t.length[1]));

/**
 * The code points cut where any automaton's character ranges begin or end, surrogates left out (no
 * UTF-8 text holds one): each piece is taken whole or not at all by every edge
 */
function pieces(nfas: readonly Nfa[]): Ranges {
  const cuts = new Set([0, 0xd800, 0xe000, 0x110000]);
  for (const nfa of nfas) {
    for (const edges of nfa.reads) {
      for (const [char] of edges) {
        for (const [a, b] of char.ranges) {
          cuts.add(a);
          cuts.add(b + 1);
        }
      }
    }
  }
  const points = [...cuts].sort((x, y) => x - y);
  const out: Ranges = [];
  for (let i = 0; i + 1 < points.length; i++) if (points[i] !== 0xd800) out.push([points[i]!, points[i + 1]! - 1]);
  return out;
}

/** an automaton made deterministic as far as it is run: its sets of states, numbered, and each set's move per piece */
class Subsets {
  private readonly ids = new Map<string, number>();
  private readonly sets: number[][] = [];
  readonly accepting: boolean[] = [];
  private readonly moves: Int32Array[] = [];
  readonly start: number;

  constructor(private readonly nfa: Nfa, private readonly cut: Ranges) {
    this.start = this.idOf([nfa.start]);
  }

  /** the set the states and their empty moves reach, numbered; -1 where it is empty */
  private idOf(states: readonly number[]): number {
    if (states.length === 0) return -1;
    const seen = new Set(states), todo = [...states];
    while (todo.length > 0) {
      for (const t of this.nfa.empty[todo.pop()!]!) {
        if (seen.has(t)) continue;
        seen.add(t);
        todo.push(t);
      }
    }
    const set = [...seen].sort((a, b) => a - b);
    const key = set.join(",");
    let id = this.ids.get(key);
    if (id === undefined) {
      id = this.sets.length;
      this.ids.set(key, id);
      this.sets.push(set);
      this.accepting.push(seen.has(this.nfa.accept));
    }
    return id;
  }

  /** per piece, the set a character of it leads to (-1: none) */
  move(id: number): Int32Array {
    if (this.moves[id] !== undefined) return this.moves[id]!;
    const targets: number[][] = this.cut.map(() => []);
    for (const s of this.sets[id]!) {
      for (const [char, to] of this.nfa.reads[s]!) {
        for (const [a, b] of char.ranges) {
          // (the first piece at or after a: pieces are cut at every range's ends)
          let lo = 0, hi = this.cut.length;
          while (lo < hi) {
            const mid = (lo + hi) >> 1;
            if (this.cut[mid]![0] < a) lo = mid + 1;
            else hi = mid;
          }
          for (let i = lo; i < this.cut.length && this.cut[i]![1] <= b; i++) targets[i]!.push(to);
        }
      }
    }
    const made = new Map<string, number>();
    const out = new Int32Array(this.cut.length);
    for (const [i, t] of targets.entries()) {
      const key = t.join(",");
      if (!made.has(key)) made.set(key, this.idOf(t));
      out[i] = made.get(key)!;
    }
    this.moves[id] = out;
    return out;
  }
}

/**
 * The language as GBNF rules for the inside of a JSON string, named `${prefix}-N` (the first the
 * start): a rule per state of the tests' automata run together (each made deterministic, so a
 * group ruled out is left exactly where all its tests take the string) paired with the characters
 * read so far (up to max, or up to min without one). States from which no string of the language
 * ends are left out, so a model is never led into a string it cannot finish. Characters JSON
 * escapes are written as their escapes. Refused (GrammarError) where no string is in it, or it
 * needs more than `maxRules` rules.
 */
export function stringLanguageGbnf(lang: StringLanguage, prefix: string, maxRules: number): [string, string][] {
  const all = lang.all.map(nfaOf), none = lang.none.map((g) => g.map(nfaOf));
  const cut = pieces([...all, ...none.flat()]);
  const pos = all.map((n) => new Subsets(n, cut)), neg = none.map((g) => g.map((n) => new Subsets(n, cut)));
  const cap = lang.max ?? lang.min;
  // a state: each positive test's set, each group's sets (null once one of them took no more: the
  // group can no longer take the string whole), the characters read (capped)
  interface State { p: number[]; g: (number[] | null)[]; k: number }
  const keyOf = (st: State) => `${st.p.join(",")}|${st.g.map((x) => (x === null ? "x" : x.join(","))).join(";")}|${st.k}`;
  const ids = new Map<string, number>(), states: State[] = [];
  const idOf = (st: State): number => {
    const key = keyOf(st);
    let id = ids.get(key);
    if (id === undefined) {
      if (states.length >= maxRules) throw new GrammarError(`the strings need more than ${maxRules} grammar rules`);
      id = states.length;
      ids.set(key, id);
      states.push(st);
    }
    return id;
  };
  idOf({ p: pos.map((d) => d.start), g: neg.map((g) => g.map((d) => d.start)), k: 0 });
  const ends: boolean[] = [], edges: Map<number, number[]>[] = [];
  for (let i = 0; i < states.length; i++) {
    const { p, g, k } = states[i]!;
    ends.push(k >= lang.min && p.every((s, j) => pos[j]!.accepting[s]!) && !g.some((sets, j) => sets?.every((s, m) => neg[j]![m]!.accepting[s]!)));
    // target state -> the pieces that lead there
    const out = new Map<number, number[]>();
    edges.push(out);
    if (lang.max !== undefined && k === lang.max) continue;
    const pm = p.map((s, j) => pos[j]!.move(s)), gm = g.map((sets, j) => sets?.map((s, m) => neg[j]![m]!.move(s)) ?? null);
    for (let c = 0; c < cut.length; c++) {
      const np = pm.map((m) => m[c]!);
      if (np.some((s) => s < 0)) continue;
      const ng = gm.map((ms) => {
        if (ms === null) return null;
        const sets = ms.map((m) => m[c]!);
        return sets.some((s) => s < 0) ? null : sets;
      });
      const to = idOf({ p: np, g: ng, k: Math.min(k + 1, cap) });
      // (appended in place: a copy per piece made this quadratic in the pieces, seconds for a class of many characters)
      const into = out.get(to);
      if (into) into.push(c);
      else out.set(to, [c]);
    }
  }
  // the states from which a string of the language can still end
  const live = ends.slice();
  for (let changed = true; changed;) {
    changed = false;
    for (let i = 0; i < states.length; i++) {
      if (live[i] || ![...edges[i]!.keys()].some((t) => live[t])) continue;
      live[i] = true;
      changed = true;
    }
  }
  if (!live[0]) throw new GrammarError("no string satisfies all of them");
  const rules: [string, string][] = [];
  for (let i = 0; i < states.length; i++) {
    if (!live[i]) continue;
    const alts: string[] = [];
    for (const [to, cs] of edges[i]!) {
      if (!live[to]) continue;
      const chars = jsonClassAlternatives(cs.map((c) => cut[c]!));
      alts.push(`${chars.length === 1 ? chars[0] : `(${chars.join(" | ")})`} ${prefix}-${to}`);
    }
    if (ends[i]) alts.push('""');
    rules.push([`${prefix}-${i}`, alts.join(" | ")]);
  }
  return rules;
}
