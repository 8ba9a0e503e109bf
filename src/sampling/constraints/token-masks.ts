import type { Grammar } from "./grammar.js";
import { ParseStates, REFUSED, UNKNOWN } from "./parse-states.js";
import { utf8Grammar } from "./utf8-grammar.js";
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
  private readonly masks = new Map<number, Uint32Array>();
  /** the walk's state at each depth, as its row's start in the transition table */
  private readonly rows: Int32Array;

  private constructor(grammar: Grammar, private readonly vocab: ConstraintVocabulary) {
    this.states = new ParseStates(utf8Grammar(grammar), vocab);
    this.words = (vocab.size + 31) >>> 5;
    this.maxMasks = Math.max(64, Math.floor(MASK_BUDGET_BYTES / (4 * this.words)));
    this.rows = new Int32Array(vocab.maxLength + 1);
  }

  private static cache = new WeakMap<Grammar, Map<ConstraintVocabulary, TokenMasks>>();

  /** the masks of `grammar` over `vocab`, shared; a fresh set once the parse states fill up (sequences under way keep theirs) */
  static of(grammar: Grammar, vocab: ConstraintVocabulary): TokenMasks {
    let byVocab = TokenMasks.cache.get(grammar);
    if (!byVocab) TokenMasks.cache.set(grammar, (byVocab = new Map()));
    let masks = byVocab.get(vocab);
    if (!masks || masks.states.full) byVocab.set(vocab, (masks = new TokenMasks(grammar, vocab)));
    return masks;
  }

  /** whether the mask of `state` is made (of() would not walk) */
  has(state: number): boolean {
    return this.masks.has(state);
  }

  /** the tokens allowed from `state` (bit i of the bitset: token i), end-of-generation tokens not included */
  of(state: number): Uint32Array {
    let bits = this.masks.get(state);
    if (bits) return bits;
    bits = this.walk(state);
    if (this.masks.size >= this.maxMasks) this.masks.delete(this.masks.keys().next().value!);
    this.masks.set(state, bits);
    return bits;
  }

  /**
   * Every token whose text the grammar allows from `state`: the trie in preorder, refused
   * subtrees jumped over. A node's parent state is the one last written for the depth above it
   * (preorder visits the parent after any other node of that depth), so the walk keeps no stack
   * to pop: each node reads its depth's row and writes the row of the depth below.
   */
  private walk(state: number): Uint32Array {
    const bits = new Uint32Array(this.words);
    const { nodeChar, nodeEnd, nodeDepth, tokenStart, tokens } = this.vocab;
    const states = this.states, classOf = states.partition.classOf, classes = states.partition.size;
    const rows = this.rows;
    let table = states.transitions;
    const n = nodeChar.length;
    rows[0] = state * classes;
    for (let i = 0; i < n; ) {
      const d = nodeDepth[i]!, k = classOf[nodeChar[i]!]!;
      let to = table[rows[d]! + k]!;
      if (to === UNKNOWN) {
        to = states.step(rows[d]! / classes, k);
        table = states.transitions;
      }
      if (to === REFUSED) {
        i = nodeEnd[i]!;
        continue;
      }
      for (let t = tokenStart[i]!, end = tokenStart[i + 1]!; t < end; t++) {
        const id = tokens[t]!;
        bits[id >>> 5]! |= 1 << (id & 31);
      }
      rows[d + 1] = to * classes;
      i++;
    }
    // the preserved special tokens (a few call markers): each where the grammar spells its text out
    for (const id of this.vocab.markers.keys()) if (states.afterToken(state, id) !== REFUSED) bits[id >>> 5]! |= 1 << (id & 31);
    return bits;
  }
}
