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
 * Throws a GrammarError when a rule can reach itself without consuming a character, leaving
 * something to match after it (left recursion, e.g. `expr ::= expr "+" term`), which the
 * recognizer could never expand; llama.cpp refuses such grammars at load for the same reason.
 * Rules that match the empty string are followed through, so `a ::= b a "x"` with
 * `b ::= "" | "x"` is caught too. A rule that comes back to itself as the last thing of an
 * alternative (`X*` of an `X` that may match nothing, as in llama.cpp's `( [x]* )*`) comes back to
 * the same parse state, which adds nothing: allowed, as llama.cpp allows it. Linear in the
 * grammar's size, without recursion (grammars may hold tens of thousands of rules).
 */
export function checkLeftRecursion(g: Grammar): void {
  const n = g.rules.length;
  const nullable = rulesDeriving(g, false);
  // a rule no string can match (its every alternative needs the rule itself, as `a ::= b`,
  // `b ::= a`): the recognizer would expand it forever, and nothing could be generated
  const unmatchable = unmatchableRules(g)[0] ?? -1;
  if (unmatchable >= 0) throw new GrammarError(`rule ${g.names[unmatchable]} can never be matched: each of its alternatives needs itself again (directly or through other rules), so no string ends it`);
  // the rules each rule may begin with (its alternatives' references up to the first that must
  // consume a character), and whether each such reference leaves more of its alternative to match
  const firsts: number[][] = [];
  const leavesMore: boolean[][] = [];
  g.rules.forEach((alts, r) => {
    firsts[r] = [];
    leavesMore[r] = [];
    for (const alt of alts) {
      for (const [j, e] of alt.entries()) {
        if (e.kind === "char") break;
        firsts[r]!.push(e.rule);
        leavesMore[r]!.push(j < alt.length - 1);
        if (!nullable[e.rule]) break;
      }
    }
  });
  // strongly connected components of that graph (Tarjan's, iterative): an edge that leaves more
  // to match inside a component is a cycle that grows the stack
  const index = new Int32Array(n).fill(-1), lowlink = new Int32Array(n), component = new Int32Array(n).fill(-1);
  const onStack = new Uint8Array(n);
  const sccStack: number[] = [];
  let counter = 0, components = 0;
  for (let start = 0; start < n; start++) {
    if (index[start] !== -1) continue;
    const path: [number, number][] = [[start, 0]];
    index[start] = lowlink[start] = counter++;
    sccStack.push(start);
    onStack[start] = 1;
    while (path.length > 0) {
      const top = path[path.length - 1]!;
      const [r, i] = top;
      if (i < firsts[r]!.length) {
        top[1]++;
        const next = firsts[r]![i]!;
        if (index[next] === -1) {
          index[next] = lowlink[next] = counter++;
          sccStack.push(next);
          onStack[next] = 1;
          path.push([next, 0]);
        } else if (onStack[next]) lowlink[r] = Math.min(lowlink[r]!, index[next]!);
        continue;
      }
      path.pop();
      if (path.length > 0) {
        const parent = path[path.length - 1]![0];
        lowlink[parent] = Math.min(lowlink[parent]!, lowlink[r]!);
      }
      if (lowlink[r] === index[r]) {
        let m: number;
        do {
          m = sccStack.pop()!;
          onStack[m] = 0;
          component[m] = components;
        } while (m !== r);
        components++;
      }
    }
  }
  for (let r = 0; r < n; r++) {
    for (const [i, next] of firsts[r]!.entries()) {
      if (!leavesMore[r]![i] || component[next] !== component[r]) continue;
      // a way back from next to r inside the component, for the message
      const back = new Map<number, number>([[next, -1]]);
      const todo = [next];
      while (todo.length > 0 && !back.has(r)) {
        const q = todo.shift()!;
        for (const t of firsts[q]!) if (component[t] === component[r] && !back.has(t)) { back.set(t, q); todo.push(t); }
      }
      const cycle: string[] = [];
      for (let q = r; q !== -1 && cycle.length <= n; q = back.get(q)!) cycle.unshift(g.names[q]!);
      throw new GrammarError(`left recursion: rule ${g.names[r]} reaches itself without a character in between (${[g.names[r], ...cycle].join(" -> ")}), so it could never be matched`);
    }
  }
}

/** the rules no string can match (every alternative needs the rule itself again, directly or through others), in rule order */
export function unmatchableRules(g: Grammar): number[] {
  const matchable = rulesDeriving(g, true);
  const out: number[] = [];
  matchable.forEach((m, r) => {
    if (m === 0) out.push(r);
  });
  return out;
}

/**
 * Which rules derive a string made of their alternatives' characters (`chars`: true, every rule
 * that can match anything) or the empty string (`chars`: false): a worklist over the
 * alternatives' references not yet known to derive one.
 */
function rulesDeriving(g: Grammar, chars: boolean): Uint8Array {
  const n = g.rules.length;
  const derives = new Uint8Array(n);
  const pending: number[][] = g.rules.map((alts) => alts.map(() => 0));
  const users: [number, number][][] = Array.from({ length: n }, () => []);
  const queue: number[] = [];
  g.rules.forEach((alts, r) => alts.forEach((alt, a) => {
    if (!chars && alt.some((e) => e.kind === "char")) {
      pending[r]![a] = -1;
      return;
    }
    const refs = alt.filter((e): e is RuleRef => e.kind !== "char");
    for (const e of refs) users[e.rule]!.push([r, a]);
    pending[r]![a] = refs.length;
    if (refs.length === 0 && !derives[r]) {
      derives[r] = 1;
      queue.push(r);
    }
  }));
  while (queue.length > 0) {
    const r = queue.pop()!;
    for (const [u, a] of users[r]!) {
      if (--pending[u]![a]! === 0 && !derives[u]) {
        derives[u] = 1;
        queue.push(u);
      }
    }
  }
  return derives;
}
