import { type Candidates, softmaxCandidates, sortCandidates } from "./candidates.js";

/** what the infill step reads of the model's vocabulary */
export interface InfillVocabulary {
  /** the tokens that end generation (llama_vocab::is_eog) */
  isEndOfGeneration(id: number): boolean;
  /**
   * a token's bytes as llama.cpp's token_to_piece gives them without special tokens: empty for
   * control and unknown tokens, a byte token's one byte, a piece's bytes (its "▁" a space)
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

/** whether `a` begins `b` (byte-wise) */
function startsWith(b: Uint8Array, a: Uint8Array): boolean {
  if (a.length > b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** byte-wise order of two pieces (a prefix first) */
function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/**
 * For each candidate, the candidates (by index, ascending) whose piece its own non-empty piece
 * begins, itself left out: the pairs llama.cpp's double loop merges, found through the pieces in
 * byte order (those a piece begins lie right after it there) instead of comparing every pair.
 */
function prefixPartners(pieces: readonly Uint8Array[]): number[][] {
  const order = pieces.map((_, i) => i).sort((a, b) => compareBytes(pieces[a]!, pieces[b]!) || a - b);
  const partners: number[][] = pieces.map(() => []);
  for (let i0 = 0; i0 < pieces.length; i0++) {
    const p0 = pieces[i0]!;
    if (p0.length === 0) continue;
    // the first piece not below p0 in byte order, then every piece p0 begins
    let lo = 0;
    let hi = order.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (compareBytes(pieces[order[mid]!]!, p0) < 0) lo = mid + 1;
      else hi = mid;
    }
    const found: number[] = [];
    for (let k = lo; k < order.length && startsWith(pieces[order[k]!]!, p0); k++) if (order[k] !== i0) found.push(order[k]!);
    partners[i0] = found.sort((a, b) => a - b);
  }
  return partners;
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
  const p = Float32Array.from(c.probs.subarray(0, n));
  const eog = Array.from(ids.subarray(0, n), (id) => vocab.isEndOfGeneration(id));
  let txtSum = 0;
  let eogSum = 0;
  for (let i = 0; i < n; i++) {
    if (eog[i]) eogSum = f(eogSum + p[i]!);
    else txtSum = f(txtSum + p[i]!);
  }
  if (f(f(3 * eogSum) * n) > txtSum) {
    keep(c, (i) => eog[i]!);
    return;
  }
  const dead = Array.from(logits.subarray(0, n), (l) => l === -Infinity);
  const partners = prefixPartners(Array.from(ids.subarray(0, n), (id) => vocab.pieceBytes(id)));
  for (let i0 = 0; i0 < n; i0++) {
    for (const i1 of partners[i0]!) {
      if (dead[i0]) break;
      if (dead[i1]) continue;
      const [dst, src] = p[i1]! > p[i0]! ? [i1, i0] : [i0, i1];
      p[dst] = f(p[dst]! + p[src]!);
      p[src] = 0;
      dead[src] = true;
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
  alive = alive.filter((i) => p[i]! >= threshold || eog[i]!);
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
