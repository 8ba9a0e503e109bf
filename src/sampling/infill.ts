import { type Candidates, softmaxCandidates, sortCandidates } from "./candidates.js";

/** what the infill step reads of the model's vocabulary */
export interface InfillVocabulary {
  /** the tokens that end generation (llama_vocab::is_eog) */
  isEndOfGeneration(id: number): boolean;
  /**
   * a token's bytes as llama.cpp's token_to_piece gives them without special tokens: empty for
   * control and unknown tokens, a byte token's one byte, a piece's bytes (its "▁" a space); the
   * same for an id every time (the step keeps the vocabulary's pieces between steps)
   */
  pieceBytes(id: number): Uint8Array;
  /**
   * the token an infill step settles on when no text token is left (llama.cpp's token_eot());
   * undefined where the vocabulary names none
   */
  readonly endOfTurn: number | undefined;
}

/** the tokenizer surface the infill vocabulary is made of */
export interface InfillTokenizer {
  readonly endOfGenerationIds: ReadonlySet<number>;
  readonly endOfTurnId?: number;
  readonly eosId?: number;
  tokenBytes(id: number): Uint8Array;
  decode(ids: ArrayLike<number>, options?: { skipSpecialTokens?: boolean }): string;
}

const NONE = new Uint8Array(0);

/**
 * A tokenizer as the infill step reads it. A token that decoding with special tokens skipped
 * drops (control and unknown tokens, which token_to_piece renders empty without `special`)
 * has no bytes; pieces are looked up once per id. Without an end-of-turn token the
 * end-of-sequence token stands in (llama.cpp's token_eot() would be the null token there).
 */
export function infillVocabulary(tokenizer: InfillTokenizer): InfillVocabulary {
  const pieces = new Map<number, Uint8Array>();
  return {
    isEndOfGeneration: (id) => tokenizer.endOfGenerationIds.has(id),
    pieceBytes(id) {
      let bytes = pieces.get(id);
      if (bytes === undefined) {
        const skipped = tokenizer.decode([id], { skipSpecialTokens: true }) !== tokenizer.decode([id]);
        bytes = skipped ? NONE : tokenizer.tokenBytes(id);
        pieces.set(id, bytes);
      }
      return bytes;
    },
    endOfTurn: tokenizer.endOfTurnId ?? tokenizer.eosId,
  };
}

/**
 * A vocabulary's pieces in a trie, grown as its ids come up (a token's piece never changes, so it
 * is built once per vocabulary, not per step), and each id's prefix tokens: the ids whose
 * non-empty piece begins its own (its own piece too, itself left out), found at the nodes on its
 * way up to the root. A step reads the pairs llama.cpp's double loop merges from those lists,
 * without sorting the pieces (the whole vocabulary's, with no top_k before the step) or making an
 * array per candidate; a list is made again only after ids were added since it was made.
 */
class PieceTrie {
  /** each node's parent (the root, 0, has none) */
  private readonly parents: number[] = [-1];
  /** the first id whose piece ends at each node (-1: none) */
  private readonly firstAt: number[] = [-1];
  /** node * 256 + byte: the child node */
  private readonly child = new Map<number, number>();
  /** each id's node + 1 (0: not added yet) */
  private nodeOf = new Int32Array(0);
  /** the next id whose piece ends at the same node (-1: none) */
  private nextAt = new Int32Array(0);
  /** ids added so far: a prefix list made before the last was added may lack it */
  private added = 0;
  /** each id's prefix list: `store` from its start, its length, and `added` when made (-1: never) */
  private store = new Int32Array(1024);
  private stored = 0;
  private listStart = new Int32Array(0);
  private listLength = new Int32Array(0);
  private madeAt = new Int32Array(0);
  /** each id's place among a step's candidates (-1: not one), set for the step and cleared after */
  private placeOf = new Int32Array(0);

  constructor(private readonly vocab: InfillVocabulary) {}

  /** adds `id` (once) */
  add(id: number): void {
    if (id >= this.nodeOf.length) {
      const size = Math.max(id + 1, 2 * this.nodeOf.length);
      this.nodeOf = grown(this.nodeOf, size, 0);
      this.nextAt = grown(this.nextAt, size, -1);
      this.placeOf = grown(this.placeOf, size, -1);
      this.listStart = grown(this.listStart, size, 0);
      this.listLength = grown(this.listLength, size, 0);
      this.madeAt = grown(this.madeAt, size, -1);
    }
    if (this.nodeOf[id]! > 0) return;
    let node = 0;
    for (const byte of this.vocab.pieceBytes(id)) {
      const key = node * 256 + byte;
      let next = this.child.get(key);
      if (next === undefined) {
        next = this.parents.length;
        this.parents.push(node);
        this.firstAt.push(-1);
        this.child.set(key, next);
      }
      node = next;
    }
    this.nodeOf[id] = node + 1;
    this.nextAt[id] = this.firstAt[node]!;
    this.firstAt[node] = id;
    this.added++;
  }

  /** makes `id`'s prefix list (an added id's): the ids whose non-empty piece begins its own, itself left out */
  private makePrefixes(id: number): void {
    if (this.madeAt[id] === this.added) return;
    let at = this.stored;
    for (let node = this.nodeOf[id]! - 1; node !== 0; node = this.parents[node]!) {
      for (let j = this.firstAt[node]!; j >= 0; j = this.nextAt[j]!) {
        if (j === id) continue;
        if (at === this.store.length) this.store = grown(this.store, 2 * at, 0);
        this.store[at++] = j;
      }
    }
    this.listStart[id] = this.stored;
    this.listLength[id] = at - this.stored;
    this.stored = at;
    this.madeAt[id] = this.added;
  }

  /**
   * For each of the `n` candidates `ids` (added ids), the candidates (by index, ascending) whose
   * piece its own non-empty piece begins, itself left out: each candidate, in index order, is the
   * partner of its prefix tokens among the candidates, so each one's partners come ascending
   */
  partners(ids: Int32Array, n: number): Partners {
    // lists made again (ids added since) leave their old ones in the store: past a bound it starts
    // afresh, between steps (a step reads the lists it made), so a long run over small candidate
    // sets, each adding ids, keeps no more than that
    if (this.stored > Math.max(1 << 20, 8 * this.nodeOf.length)) {
      this.madeAt.fill(-1);
      this.stored = 0;
    }
    const place = this.placeOf;
    for (let i = 0; i < n; i++) place[ids[i]!] = i;
    try {
      for (let i = 0; i < n; i++) this.makePrefixes(ids[i]!);
      const { store, listStart, listLength } = this;
      // counted, then placed
      const start = new Int32Array(n + 1);
      for (let i1 = 0; i1 < n; i1++) {
        const from = listStart[ids[i1]!]!, to = from + listLength[ids[i1]!]!;
        for (let k = from; k < to; k++) if (place[store[k]!]! >= 0) start[place[store[k]!]! + 1]!++;
      }
      for (let i = 0; i < n; i++) start[i + 1]! += start[i]!;
      const list = new Int32Array(start[n]!);
      const next = start.slice(0, n);
      for (let i1 = 0; i1 < n; i1++) {
        const from = listStart[ids[i1]!]!, to = from + listLength[ids[i1]!]!;
        for (let k = from; k < to; k++) if (place[store[k]!]! >= 0) list[next[place[store[k]!]!]!++] = i1;
      }
      return { start, list };
    } finally {
      for (let i = 0; i < n; i++) place[ids[i]!] = -1;
    }
  }
}

/** `a` in a larger array of `size`, the rest `fill` */
function grown(a: Int32Array, size: number, fill: number): Int32Array<ArrayBuffer> {
  const b = new Int32Array(size).fill(fill);
  b.set(a);
  return b;
}

const tries = new WeakMap<InfillVocabulary, PieceTrie>();

/** each candidate's partners, by index ascending: `list` from `start[i]` to `start[i + 1]` */
interface Partners {
  readonly start: Int32Array;
  readonly list: Int32Array;
}

/** the pairs llama.cpp's double loop merges, by the vocabulary's trie (made once per vocabulary) */
function prefixPartners(ids: Int32Array, n: number, vocab: InfillVocabulary): Partners {
  let trie = tries.get(vocab);
  if (!trie) tries.set(vocab, (trie = new PieceTrie(vocab)));
  for (let i = 0; i < n; i++) trie.add(ids[i]!);
  return trie.partners(ids, n);
}

const f = Math.fround;

/**
 * llama.cpp's infill sampler (src/llama-sampling.cpp, llama_sampler_infill_apply), for
 * fill-in-the-middle: over the softmax of the candidates (sorted best first),
 * 1. where 3 * p(end-of-generation tokens) * candidates > p(text tokens), only the
 *    end-of-generation candidates are kept;
 * 2. else each text token whose piece begins another candidate's piece is merged with it, in
 *    candidate order: the likelier of the two takes the other's probability, the other is
 *    dropped; then text tokens below p 0.2 are dropped, the rest renormalized, and text tokens
 *    below 1 / (text tokens left + 1) dropped; end-of-generation tokens are always kept;
 * 3. with no text token left, the end-of-turn token alone remains (logit 1).
 * Survivors keep their logits (llama.cpp's dist sampler draws from their softmax again), in
 * their order; the probabilities here decide only who survives. They are float32 sums, as
 * llama.cpp's floats.
 */
export function infillFilter(c: Candidates, vocab: InfillVocabulary): void {
  sortCandidates(c);
  softmaxCandidates(c);
  const n = c.size;
  const { ids, logits } = c;
  const p = c.probs.slice(0, n);
  // (flags in typed arrays, filled by loops: the candidates may be the whole vocabulary)
  const eog = new Uint8Array(n);
  for (let i = 0; i < n; i++) eog[i] = vocab.isEndOfGeneration(ids[i]!) ? 1 : 0;
  let txtSum = 0;
  let eogSum = 0;
  for (let i = 0; i < n; i++) {
    if (eog[i]) eogSum = f(eogSum + p[i]!);
    else txtSum = f(txtSum + p[i]!);
  }
  if (f(f(3 * eogSum) * n) > txtSum) {
    keep(c, (i) => eog[i] === 1);
    return;
  }
  const dead = new Uint8Array(n);
  for (let i = 0; i < n; i++) dead[i] = logits[i] === -Infinity ? 1 : 0;
  const { start, list } = prefixPartners(ids, n, vocab);
  for (let i0 = 0; i0 < n; i0++) {
    for (let k = start[i0]!; k < start[i0 + 1]!; k++) {
      const i1 = list[k]!;
      if (dead[i0]) break;
      if (dead[i1]) continue;
      const dst = p[i1]! > p[i0]! ? i1 : i0;
      const src = dst === i1 ? i0 : i1;
      p[dst] = f(p[dst]! + p[src]!);
      p[src] = 0;
      dead[src] = 1;
    }
  }
  // first threshold: text tokens of p >= 0.2
  let alive: number[] = [];
  let nonEog = 0;
  let sum = 0;
  for (let i = 0; i < n; i++) {
    if (p[i]! < f(0.2) && !eog[i]) continue;
    if (!eog[i]) nonEog++;
    sum = f(sum + p[i]!);
    alive.push(i);
  }
  if (nonEog === 0) {
    const end = vocab.endOfTurn;
    // (no end-of-turn token: the best candidate stays, where llama.cpp would hand on the null token)
    if (end !== undefined) {
      ids[0] = end;
      logits[0] = 1;
    }
    c.size = 1;
    c.sorted = true;
    return;
  }
  for (const i of alive) p[i] = f(p[i]! / sum);
  // second threshold: text tokens of p >= 1 / (text tokens + 1)
  const threshold = f(1 / (nonEog + 1));
  alive = alive.filter((i) => p[i]! >= threshold || eog[i] === 1);
  const kept = new Set(alive);
  keep(c, (i) => kept.has(i));
}

/** keeps the candidates at the indices `wanted` accepts, in their order */
function keep(c: Candidates, wanted: (i: number) => boolean): void {
  const { ids, logits } = c;
  let size = 0;
  for (let i = 0; i < c.size; i++) {
    if (!wanted(i)) continue;
    ids[size] = ids[i]!;
    logits[size] = logits[i]!;
    size++;
  }
  c.size = size;
}
