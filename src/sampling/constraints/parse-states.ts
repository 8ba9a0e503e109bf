import { CharPartition } from "./char-partition.js";
import { matchesChar, type Grammar } from "./grammar.js";
import { GrammarMatcher, type StackSet } from "./matcher.js";
import type { ConstraintVocabulary } from "./vocabulary.js";

/** parse states one table holds before the grammar's masks start over in a new one (sequences under way keep theirs) */
const MAX_STATES = 100_000;
/** and bytes of transitions: a grammar that tells thousands of characters apart has rows that long */
const TABLE_BUDGET_BYTES = 64 << 20;
/** in the transition table: not asked yet (REFUSED: the class is refused there; otherwise the next state's number) */
export const UNKNOWN = -2;
export const REFUSED = -1;

/**
 * A grammar's parse states (interned sets of stacks), numbered, over one vocabulary, with the
 * transitions between them by the vocabulary's character classes (char-partition.ts) in one
 * table, filled as they are first asked for. The matcher is asked once per (state, subset of
 * its stacks that take the character), never per character: a mask walk over the vocabulary's
 * trie then costs a table look-up per node. The masks give it the grammar compiled to UTF-8
 * (utf8-grammar.ts): its characters are then bytes, and a state may lie inside a character.
 */
export class ParseStates {
  readonly matcher: GrammarMatcher;
  readonly partition: CharPartition;
  /** transitions: state s, class k at s * classes + k */
  transitions = new Int32Array(0);
  private readonly classes: number;
  private readonly sets: StackSet[] = [];
  private readonly bySubset: Map<string, number>[] = [];
  private readonly numbers = new Map<StackSet, number>();
  private start = -1;
  /** per state, the preserved special tokens asked for: the state after each (REFUSED: not taken there) */
  private readonly markerSteps = new Map<number, Map<number, number>>();

  constructor(grammar: Grammar, readonly vocab: ConstraintVocabulary) {
    this.matcher = new GrammarMatcher(grammar);
    this.partition = new CharPartition(grammar, vocab);
    this.classes = this.partition.size;
  }

  /** whether the table is as large as one may grow: new sequences should start on a new one */
  get full(): boolean {
    return this.sets.length >= Math.min(MAX_STATES, TABLE_BUDGET_BYTES / (4 * this.classes));
  }

  get size(): number {
    return this.sets.length;
  }

  /** the state before any character */
  initial(): number {
    if (this.start < 0) this.start = this.of(this.matcher.initialSet());
    return this.start;
  }

  /** whether the text up to `state` is a whole sentence of the grammar */
  complete(state: number): boolean {
    return this.sets[state]!.complete;
  }

  /** the state after a character of class `k` from `from` (REFUSED: not allowed), computed the first time */
  step(from: number, k: number): number {
    const at = from * this.classes + k;
    let to = this.transitions[at]!;
    if (to === UNKNOWN) {
      const c = this.partition.representative[k]!;
      const set = this.sets[from]!;
      // the next state depends only on which stacks' top classes take c: one matcher step per such subset
      let subset = "";
      set.stacks.forEach((s, i) => {
        const top = this.matcher.top(s);
        if (top && matchesChar(top, c)) subset += `${i},`;
      });
      const known = this.bySubset[from]!;
      to = known.get(subset) ?? UNKNOWN;
      if (to === UNKNOWN) {
        const next = subset === "" ? undefined : this.matcher.next(set, c);
        to = next === undefined ? REFUSED : this.of(next);
        known.set(subset, to);
      }
      // this.transitions read after of(), which may have grown it
      this.transitions[at] = to;
    }
    return to;
  }

  /** the state after token `id`'s text from `from` (REFUSED: refused somewhere in it, or a token never allowed) */
  afterToken(from: number, id: number): number {
    const v = this.vocab;
    const marker = v.markers.get(id);
    if (marker) return this.afterMarker(from, id, marker);
    if (!v.usable(id)) return REFUSED;
    const classOf = this.partition.classOf;
    let s = from;
    for (let i = v.charStart[id]!, end = v.charStart[id + 1]!; i < end && s !== REFUSED; i++) s = this.step(s, classOf[v.chars[i]!]!);
    return s;
  }

  /**
   * The state after preserved special token `id` (its text's bytes `chars`): REFUSED unless some
   * stack at `from` spells the text out, each byte matched by a class of that byte alone (a
   * literal of the grammar, as a call format's marker is written), so a JSON string or free text
   * that merely may hold the same characters never takes the one token. Known once per state.
   */
  private afterMarker(from: number, id: number, chars: Int32Array): number {
    let known = this.markerSteps.get(from);
    if (!known) this.markerSteps.set(from, (known = new Map()));
    let to = known.get(id);
    if (to === undefined) {
      const alphabet = this.vocab.alphabet;
      let stacks = this.sets[from]!.stacks;
      for (let i = 0; i < chars.length && stacks.length > 0; i++) {
        const b = alphabet[chars[i]!]!;
        const literal = stacks.filter((s) => {
          const top = this.matcher.top(s);
          return top !== undefined && !top.negated && top.ranges.length > 0 && top.ranges.every(([lo, hi]) => lo === b && hi === b);
        });
        stacks = literal.length === 0 ? literal : this.matcher.advance(literal, b);
      }
      to = REFUSED;
      if (stacks.length > 0) {
        const classOf = this.partition.classOf;
        to = from;
        for (let i = 0; i < chars.length && to !== REFUSED; i++) to = this.step(to, classOf[chars[i]!]!);
      }
      known.set(id, to);
    }
    return to;
  }

  private of(set: StackSet): number {
    let n = this.numbers.get(set);
    if (n === undefined) {
      n = this.sets.length;
      this.sets.push(set);
      this.bySubset.push(new Map());
      this.numbers.set(set, n);
      if ((n + 1) * this.classes > this.transitions.length) {
        const grown = new Int32Array(Math.max(64, 2 * (n + 1)) * this.classes).fill(UNKNOWN);
        grown.set(this.transitions);
        this.transitions = grown;
      }
    }
    return n;
  }
}
