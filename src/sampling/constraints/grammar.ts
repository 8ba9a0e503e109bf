/**
 * A context-free grammar over Unicode code points, in the shape llama.cpp's grammar sampler
 * works on: rules of alternatives, each a sequence of elements that are either a character class
 * or a reference to a rule. GBNF's sugar (strings, groups, repetition) is compiled into this form
 * by gbnf.ts; the matcher (matcher.ts) runs it.
 */

/** inclusive code point ranges, and whether the class matches what is outside them */
export interface CharClass {
  readonly kind: "char";
  readonly ranges: readonly (readonly [number, number])[];
  readonly negated: boolean;
}

export interface RuleRef {
  readonly kind: "rule";
  readonly rule: number;
}

export type Element = CharClass | RuleRef;

/** one alternative: the elements in order (empty: matches nothing, i.e. the empty string) */
export type Alternative = readonly Element[];

export interface Grammar {
  /** rule names (for errors and for printing), index = rule id */
  readonly names: readonly string[];
  readonly rules: readonly (readonly Alternative[])[];
  /** the start rule's id */
  readonly root: number;
}

/** the largest repetition count a grammar, regex or JSON schema may ask for ({m,n}, minItems, maxLength, ...) */
export const MAX_REPETITION = 10_000;

/** what is wrong with a repetition {min,max} (max Infinity: unbounded), or undefined when nothing is */
export function repetitionProblem(min: number, max: number, limit = MAX_REPETITION): string | undefined {
  if (max < min) return `the maximum is below the minimum`;
  if (Math.max(min, Number.isFinite(max) ? max : 0) > limit) return `repetition bounds above ${limit}`;
  return undefined;
}

export class GrammarError extends Error {
  override name = "GrammarError";
}

/** whether a character class matches code point c */
export function matchesChar(e: CharClass, c: number): boolean {
  let inside = false;
  for (const [lo, hi] of e.ranges) {
    if (c >= lo && c <= hi) {
      inside = true;
      break;
    }
  }
  return inside !== e.negated;
}

/**
 * Throws a GrammarError when a rule can reach itself without consuming a character (left
 * recursion, e.g. `expr ::= expr "+" term`), which the recognizer could never expand; llama.cpp
 * refuses such grammars at load for the same reason. Rules that match the empty string are
 * followed through, so `a ::= b a` with `b ::= "" | "x"` is caught too. Linear in the grammar's
 * size, without recursion (grammars may hold tens of thousands of rules).
 */
export function checkLeftRecursion(g: Grammar): void {
  const n = g.rules.length;
  // which rules match the empty string: a worklist over the alternatives' unresolved references
  const nullable = new Uint8Array(n);
  const pending: number[][] = g.rules.map((alts) => alts.map(() => 0));
  const users: [number, number][][] = Array.from({ length: n }, () => []);
  const queue: number[] = [];
  g.rules.forEach((alts, r) => alts.forEach((alt, a) => {
    if (alt.some((e) => e.kind === "char")) {
      pending[r]![a] = -1;
      return;
    }
    for (const e of alt) users[(e as RuleRef).rule]!.push([r, a]);
    pending[r]![a] = alt.length;
    if (alt.length === 0 && !nullable[r]) {
      nullable[r] = 1;
      queue.push(r);
    }
  }));
  while (queue.length > 0) {
    const r = queue.pop()!;
    for (const [u, a] of users[r]!) {
      if (--pending[u]![a]! === 0 && !nullable[u]) {
        nullable[u] = 1;
        queue.push(u);
      }
    }
  }
  // the rules each rule may begin with: its alternatives' references up to the first that must consume a character
  const firsts: number[][] = g.rules.map((alts) => {
    const out: number[] = [];
    for (const alt of alts) {
      for (const e of alt) {
        if (e.kind === "char") break;
        out.push(e.rule);
        if (!nullable[e.rule]) break;
      }
    }
    return out;
  });
  // a cycle in that graph: iterative depth-first search (0 unseen, 1 on the path, 2 done)
  const state = new Uint8Array(n);
  for (let start = 0; start < n; start++) {
    if (state[start]) continue;
    const path: [number, number][] = [[start, 0]];
    state[start] = 1;
    while (path.length > 0) {
      const top = path[path.length - 1]!;
      const [r, i] = top;
      if (i >= firsts[r]!.length) {
        state[r] = 2;
        path.pop();
        continue;
      }
      top[1]++;
      const next = firsts[r]![i]!;
      if (state[next] === 1) {
        const cycle = [...path.slice(path.findIndex(([q]) => q === next)).map(([q]) => g.names[q]), g.names[next]];
        throw new GrammarError(`left recursion: rule ${g.names[next]} reaches itself without a character in between (${cycle.join(" -> ")}), so it could never be matched`);
      }
      if (state[next] === 0) {
        state[next] = 1;
        path.push([next, 0]);
      }
    }
  }
}
