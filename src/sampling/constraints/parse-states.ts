import { CharPartition } from "./char-partition.js";
import { matchesChar, type Grammar } from "./grammar.js";
import { GrammarMatcher, type StackSet } from "./matcher.js";
import type { ConstraintVocabulary } from "./vocabulary.js";

/** distinct parse states kept reachable from the table; past this it starts over (live sequences keep theirs) */
const MAX_STATES = 100_000;

/**
 * One parse state (an interned set of stacks) with its transitions by character class, filled
 * as they are first asked for: undefined not yet known, null the class is refused here.
 */
export interface ParseState {
  readonly set: StackSet;
  readonly next: (ParseState | null | undefined)[];
  /** the state after a character, by which of the set's stacks take it (the same few subsets recur across classes) */
  readonly bySubset: Map<string, ParseState | null>;
  /** the tokens allowed here (bit i: token i), once computed; dropped when over the mask budget */
  mask: Uint32Array | undefined;
}

/**
 * A grammar's parse states over one vocabulary and the transitions between them by the
 * vocabulary's characters. The matcher is asked once per (state, character class), never per
 * character: a mask walk over the vocabulary's trie then costs a table look-up per trie node.
 */
export class ParseStates {
  readonly matcher: GrammarMatcher;
  readonly partition: CharPartition;
  private states = new Map<StackSet, ParseState>();
  private start: ParseState | undefined;

  constructor(grammar: Grammar, readonly vocab: ConstraintVocabulary) {
    this.matcher = new GrammarMatcher(grammar);
    this.partition = new CharPartition(grammar, vocab);
  }

  /** the state before any character */
  initial(): ParseState {
    return (this.start ??= this.of(this.matcher.initialSet()));
  }

  /** the state after a character of class `k` from `from` (null: refused), computed the first time */
  step(from: ParseState, k: number): ParseState | null {
    let to = from.next[k];
    if (to === undefined) {
      const c = this.partition.representative[k]!;
      // the next state depends only on which stacks' top classes take c: one matcher step per such subset
      let subset = "";
      from.set.stacks.forEach((s, i) => {
        const top = this.matcher.top(s);
        if (top && matchesChar(top, c)) subset += `${i},`;
      });
      to = from.bySubset.get(subset);
      if (to === undefined) {
        const set = subset === "" ? undefined : this.matcher.next(from.set, c);
        from.bySubset.set(subset, (to = set === undefined ? null : this.of(set)));
      }
      from.next[k] = to;
    }
    return to;
  }

  /** the state after token `id`'s text from `from` (null: refused somewhere in it, or a token never allowed) */
  afterToken(from: ParseState, id: number): ParseState | null {
    const v = this.vocab;
    if (!v.usable(id)) return null;
    const classOf = this.partition.classOf;
    let s: ParseState | null = from;
    for (let i = v.charStart[id]!, end = v.charStart[id + 1]!; i < end && s; i++) s = this.step(s, classOf[v.chars[i]!]!);
    return s;
  }

  private of(set: StackSet): ParseState {
    let s = this.states.get(set);
    if (!s) {
      if (this.states.size >= MAX_STATES) {
        // the states hold each other through their transitions: drop the way in to all of them
        this.states = new Map();
        this.start = undefined;
      }
      s = { set, next: new Array<ParseState | null | undefined>(this.partition.size).fill(undefined), bySubset: new Map(), mask: undefined };
      this.states.set(set, s);
    }
    return s;
  }
}
