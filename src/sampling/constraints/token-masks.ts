import type { Grammar } from "./grammar.js";
import { ParseStates, type ParseState } from "./parse-states.js";
import type { ConstraintVocabulary } from "./vocabulary.js";

/** bytes of masks kept per grammar and vocabulary (bitsets: 6 KB each at a 49k vocabulary, 19 KB at 152k) */
const MASK_BUDGET_BYTES = 16 << 20;

/**
 * What is shared by every sequence under one grammar with one vocabulary: the parse states
 * (parse-states.ts) and the vocabulary mask of each state met. A JSON output passes through the
 * same few hundred parse states again and again (inside a string, after a comma, ...), so after
 * the first requests a step's mask is a cache hit; the first time, a state's mask is one walk
 * over the vocabulary's trie, a table look-up per node whose prefix the grammar still allows.
 */
export class TokenMasks {
  readonly states: ParseStates;
  private readonly words: number;
  private readonly maxMasks: number;
  /** states holding a mask, oldest first (the budget drops from the front) */
  private readonly masked: ParseState[] = [];
  private maskedFrom = 0;
  /** the walk's stack: the state and the subtree end at each depth */
  private readonly stackState: ParseState[];
  private readonly stackEnd: Int32Array;

  private constructor(grammar: Grammar, private readonly vocab: ConstraintVocabulary) {
    this.states = new ParseStates(grammar, vocab);
    this.words = (vocab.size + 31) >>> 5;
    this.maxMasks = Math.max(64, Math.floor(MASK_BUDGET_BYTES / (4 * this.words)));
    this.stackState = new Array<ParseState>(vocab.maxLength + 1);
    this.stackEnd = new Int32Array(vocab.maxLength + 1);
  }

  private static cache = new WeakMap<Grammar, Map<ConstraintVocabulary, TokenMasks>>();

  static of(grammar: Grammar, vocab: ConstraintVocabulary): TokenMasks {
    let byVocab = TokenMasks.cache.get(grammar);
    if (!byVocab) TokenMasks.cache.set(grammar, (byVocab = new Map()));
    let masks = byVocab.get(vocab);
    if (!masks) byVocab.set(vocab, (masks = new TokenMasks(grammar, vocab)));
    return masks;
  }

  /** the tokens allowed from `state` (bit i of the bitset: token i), end-of-generation tokens not included */
  of(state: ParseState): Uint32Array {
    if (state.mask) return state.mask;
    const bits = this.walk(state);
    if (this.masked.length - this.maskedFrom >= this.maxMasks) {
      this.masked[this.maskedFrom++]!.mask = undefined;
      // a queue without a shift per drop: the front is cut off now and then
      if (this.maskedFrom > 1024) {
        this.masked.splice(0, this.maskedFrom);
        this.maskedFrom = 0;
      }
    }
    this.masked.push(state);
    return (state.mask = bits);
  }

  /** every token whose text the grammar allows from `state`: the trie in preorder, refused subtrees jumped over */
  private walk(state: ParseState): Uint32Array {
    const bits = new Uint32Array(this.words);
    const { nodeChar, nodeEnd, tokenStart, tokens } = this.vocab;
    const classOf = this.states.partition.classOf;
    const stackState = this.stackState, stackEnd = this.stackEnd;
    const n = nodeChar.length;
    let depth = 0;
    stackState[0] = state;
    stackEnd[0] = n;
    for (let i = 0; i < n; ) {
      while (i >= stackEnd[depth]!) depth--;
      const from = stackState[depth]!;
      const k = classOf[nodeChar[i]!]!;
      let to = from.next[k];
      if (to === undefined) to = this.states.step(from, k);
      if (to === null) {
        i = nodeEnd[i]!;
        continue;
      }
      for (let t = tokenStart[i]!, end = tokenStart[i + 1]!; t < end; t++) {
        const id = tokens[t]!;
        bits[id >>> 5]! |= 1 << (id & 31);
      }
      const end = nodeEnd[i]!;
      i++;
      if (end > i) {
        stackState[++depth] = to;
        stackEnd[depth] = end;
      }
    }
    return bits;
  }
}
