import { matchesChar, type CharClass, type Grammar } from "./grammar.js";
import type { ConstraintVocabulary } from "./vocabulary.js";

/**
 * The vocabulary's symbols split into the classes one grammar cannot tell apart: two symbols
 * that every character class of the grammar either matches or refuses alike move every parse
 * state to the same next state, so a parse state's transitions are a short table by class
 * instead of a computation per symbol. The masks run the grammar compiled to UTF-8
 * (utf8-grammar.ts), whose symbols are bytes: a JSON grammar sees a dozen or so classes among
 * the vocabulary's byte values.
 */
export class CharPartition {
  /** per symbol number of the vocabulary (its alphabet): the class */
  readonly classOf: Int32Array;
  /** per class: one code point in it, to step the matcher with */
  readonly representative: readonly number[];

  constructor(grammar: Grammar, vocab: ConstraintVocabulary) {
    const classes = distinctClasses(grammar);
    // between two consecutive bounds of any class's ranges, every class matches all or none
    const bounds = [...new Set([0, ...classes.flatMap((c) => c.ranges.flatMap(([lo, hi]) => [lo, hi + 1]))])].sort((a, b) => a - b);
    const ids = new Map<string, number>();
    const byInterval = new Map<number, number>();
    const representative: number[] = [];
    this.classOf = new Int32Array(vocab.alphabet.length);
    let j = 0;
    vocab.alphabet.forEach((c, i) => {
      // the alphabet ascends: the interval holding c only moves forward
      while (j + 1 < bounds.length && bounds[j + 1]! <= c) j++;
      let id = byInterval.get(j);
      if (id === undefined) {
        const start = bounds[j]!;
        const key = classes.map((k) => (matchesChar(k, start) ? "1" : "0")).join("");
        id = ids.get(key);
        if (id === undefined) {
          ids.set(key, (id = representative.length));
          representative.push(start);
        }
        byInterval.set(j, id);
      }
      this.classOf[i] = id;
    });
    this.representative = representative;
  }

  get size(): number {
    return this.representative.length;
  }
}

/** the grammar's character classes, each distinct one once */
function distinctClasses(grammar: Grammar): CharClass[] {
  const byKey = new Map<string, CharClass>();
  for (const alts of grammar.rules) {
    for (const alt of alts) {
      for (const e of alt) if (e.kind === "char") byKey.set(`${e.negated ? "^" : ""}${e.ranges.join(";")}`, e);
    }
  }
  return [...byKey.values()];
}
