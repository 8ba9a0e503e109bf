import type { Sampler } from "../sampler.js";
import type { Grammar } from "./grammar.js";
import { REFUSED } from "./parse-states.js";
import { TokenMasks } from "./token-masks.js";
import type { ConstraintVocabulary } from "./vocabulary.js";

/**
 * Greedy requests try this many of the best tokens one by one before applying the whole mask.
 * Each try is a sampler call over the whole row, dearer than most first masks outside a string:
 * one try settles the steps where the model keeps to the format (and a string's, whose first mask
 * is the dearest), and costs one call where it does not.
 */
const LAZY_TRIES = 1;

/**
 * A grammar applied to one sequence's tokens: which tokens may come next, and the parse
 * advanced by each token taken. End-of-generation tokens are allowed exactly where the grammar
 * may end.
 */
export class TokenConstraint {
  private readonly masks: TokenMasks;
  private state: number;

  constructor(grammar: Grammar, vocab: ConstraintVocabulary, private readonly endIds: ReadonlySet<number>) {
    this.masks = TokenMasks.of(grammar, vocab);
    this.state = this.masks.states.initial();
  }

  /** a constraint at the same point of the parse that goes on by itself (a beam's child) */
  fork(): TokenConstraint {
    const f = Object.create(TokenConstraint.prototype) as TokenConstraint;
    Object.assign(f, this);
    return f;
  }

  /** whether the text so far is a whole sentence of the grammar */
  get complete(): boolean {
    return this.masks.states.complete(this.state);
  }

  /** whether token `id` may come next */
  allows(id: number): boolean {
    if (this.endIds.has(id)) return this.complete;
    return this.masks.states.afterToken(this.state, id) !== REFUSED;
  }

  /** -Infinity for every token that may not come next; false when none may */
  mask(logits: Float32Array | Float64Array): boolean {
    const bits = this.masks.of(this.state);
    const n = logits.length;
    // end-of-generation tokens keep their logits where the grammar may end
    const ends = this.complete ? [...this.endIds].filter((id) => id < n).map((id) => [id, logits[id]!] as const) : [];
    let any = ends.length > 0;
    for (let w = 0, words = (n + 31) >>> 5; w < words; ) {
      const base = w << 5;
      // bits past the logits (a model row shorter than the vocabulary) do not count
      const valid = base + 32 > n ? (1 << (n & 31)) - 1 : -1;
      const word = (w < bits.length ? bits[w]! : 0) & valid;
      if (word === 0) {
        // runs of refused words (most of the vocabulary outside a string) in one fill
        let e = w + 1;
        while (e < words && (e < bits.length ? bits[e]! : 0) === 0) e++;
        logits.fill(-Infinity, base, Math.min(e << 5, n));
        w = e;
        continue;
      }
      any = true;
      // the refused bits of a word that has allowed ones, lowest first (none in a full word)
      for (let z = ~word & valid; z !== 0; z &= z - 1) logits[base + 31 - Math.clz32(z & -z)] = -Infinity;
      w++;
    }
    for (const [id, value] of ends) logits[id] = value;
    return any;
  }

  /**
   * The next token: the sampler's choice among the allowed tokens (-1 when no token may come).
   * Greedy sampling tries its best token first and masks only if it is refused (the best
   * allowed token is the same either way), unless the state's mask is made already, which
   * is applied at once; sampling with a temperature masks first, so the
   * chain's filters see the constrained distribution. `wholeMask` masks first in every case:
   * `logits` are then the constrained distribution whatever the masks made so far (logprobs are
   * read from them). `logits` is modified. `afterPenalties` is the sampler's (Sampler.sample).
   */
  choose(logits: Float32Array, sampler: Sampler, history: ArrayLike<number>, wholeMask = false, afterPenalties?: (row: Float32Array) => void): number {
    // a mask made already is applied at once: cheaper than a try that fails (a sampler call over the row), about even with one that succeeds
    if (!wholeMask && sampler.options.temperature <= 0 && !this.masks.has(this.state)) {
      for (let k = 0; k < LAZY_TRIES; k++) {
        const t = sampler.sample(logits, history, afterPenalties);
        if (logits[t] === -Infinity) return -1;
        if (this.allows(t)) return t;
        logits[t] = -Infinity;
      }
    }
    if (!this.mask(logits)) return -1;
    return sampler.sample(logits, history, afterPenalties);
  }

  /** advances the parse by token `id` (which allows() must accept) */
  accept(id: number): void {
    if (this.endIds.has(id)) return;
    const next = this.masks.states.afterToken(this.state, id);
    if (next === REFUSED) throw new Error(`token ${id} is not allowed by the grammar here`);
    this.state = next;
  }
}
