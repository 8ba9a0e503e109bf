import type { Sampler } from "../sampler.js";
import type { Grammar } from "./grammar.js";
import { GrammarMatcher, type StackSet } from "./matcher.js";
import type { ConstraintVocabulary, TrieNode } from "./vocabulary.js";

/** greedy requests try this many of the best tokens one by one before applying the whole mask */
const LAZY_TRIES = 4;
/** bytes of masks kept per grammar and vocabulary (bitsets: 6 KB each at a 49k vocabulary, 19 KB at 152k) */
const MASK_BUDGET_BYTES = 16 << 20;

/**
 * What is shared by every sequence under one grammar with one vocabulary: the matcher (its
 * caches of stack steps) and the vocabulary masks by parse state. A JSON output passes through
 * the same few hundred parse states again and again (inside a string, after a comma, ...), so
 * after the first requests a step's mask is a cache hit.
 */
class SharedGrammar {
  readonly matcher: GrammarMatcher;
  private readonly masks = new Map<number, Uint32Array>();
  private readonly maxMasks: number;

  constructor(grammar: Grammar, private readonly vocab: ConstraintVocabulary) {
    this.matcher = new GrammarMatcher(grammar);
    this.maxMasks = Math.max(64, Math.floor(MASK_BUDGET_BYTES / (4 * ((vocab.size + 31) >>> 5))));
  }

  private static cache = new WeakMap<Grammar, Map<ConstraintVocabulary, SharedGrammar>>();

  static of(grammar: Grammar, vocab: ConstraintVocabulary): SharedGrammar {
    let byVocab = SharedGrammar.cache.get(grammar);
    if (!byVocab) SharedGrammar.cache.set(grammar, (byVocab = new Map()));
    let shared = byVocab.get(vocab);
    if (!shared) byVocab.set(vocab, (shared = new SharedGrammar(grammar, vocab)));
    return shared;
  }

  /** the tokens allowed from `set` (bit i of the bitset: token i), end-of-generation tokens not included */
  mask(set: StackSet): Uint32Array {
    let bits = this.masks.get(set.id);
    if (bits) return bits;
    bits = new Uint32Array((this.vocab.size + 31) >>> 5);
    const b = bits;
    const m = this.matcher;
    const walk = (node: TrieNode, from: StackSet): void => {
      const chars = node.chars, children = node.children;
      for (let k = 0; k < chars.length; k++) {
        const next = m.step(from, chars[k]!);
        if (next === undefined) continue;
        const child = children[k]!;
        for (const t of child.tokens) b[t >>> 5]! |= 1 << (t & 31);
        if (child.chars.length > 0) walk(child, next);
      }
    };
    walk(this.vocab.root, set);
    if (this.masks.size >= this.maxMasks) this.masks.delete(this.masks.keys().next().value!);
    this.masks.set(set.id, bits);
    return bits;
  }
}

/**
 * A grammar applied to one sequence's tokens: which tokens may come next, and the parse
 * advanced by each token taken. End-of-generation tokens are allowed exactly where the grammar
 * may end.
 */
export class TokenConstraint {
  private readonly shared: SharedGrammar;
  private state: StackSet;

  constructor(grammar: Grammar, private readonly vocab: ConstraintVocabulary, private readonly endIds: ReadonlySet<number>) {
    this.shared = SharedGrammar.of(grammar, vocab);
    this.state = this.shared.matcher.initialSet();
  }

  /** a constraint at the same point of the parse that goes on by itself (a beam's child) */
  fork(): TokenConstraint {
    const f = Object.create(TokenConstraint.prototype) as TokenConstraint;
    Object.assign(f, this);
    return f;
  }

    /** whether the text so far is a whole sentence of the grammar */
  get complete(): boolean {
    return this.state.complete;
  }

  /** the parse state after token `id` from the current one (undefined: not allowed) */
  private after(id: number): StackSet | undefined {
    const text = this.vocab.text[id];
    if (!text) return undefined;
    let s: StackSet | undefined = this.state;
    for (let i = 0; i < text.length && s; i++) s = this.shared.matcher.step(s, text[i]!);
    return s;
  }

  /** whether token `id` may come next */
  allows(id: number): boolean {
    if (this.endIds.has(id)) return this.complete;
    return this.after(id) !== undefined;
  }

  /** -Infinity for every token that may not come next; false when none may */
  mask(logits: Float32Array | Float64Array): boolean {
    const bits = this.shared.mask(this.state);
    let any = false;
    for (let i = 0; i < logits.length; i++) {
      if ((bits[i >>> 5]! >>> (i & 31)) & 1) any = true;
      else if (!(this.complete && this.endIds.has(i))) logits[i] = -Infinity;
      else any = true;
    }
    return any;
  }

  /**
   * The next token: the sampler's choice among the allowed tokens (-1 when no token may come).
   * Greedy sampling tries its best tokens first and masks only if none of a few is allowed (the
   * best allowed token is the same either way); sampling with a temperature masks first, so the
   * chain's filters see the constrained distribution. `logits` is modified.
   */
  choose(logits: Float32Array, sampler: Sampler, history: ArrayLike<number>): number {
    if (sampler.options.temperature <= 0) {
      for (let k = 0; k < LAZY_TRIES; k++) {
        const t = sampler.sample(logits, history);
        if (logits[t] === -Infinity) return -1;
        if (this.allows(t)) return t;
        logits[t] = -Infinity;
      }
    }
    if (!this.mask(logits)) return -1;
    return sampler.sample(logits, history);
  }

  /** advances the parse by token `id` (which allows() must accept) */
  accept(id: number): void {
    if (this.endIds.has(id)) return;
    const next = this.after(id);
    if (!next) throw new Error(`token ${id} is not allowed by the grammar here`);
    this.state = next;
  }
}
