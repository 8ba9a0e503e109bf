/**
 * Beam search with the semantics of Hugging Face `generate(num_beams=B)` (transformers'
 * BeamSearchScorer / BeamHypotheses), written down here because the scores must follow it:
 *
 * - A beam's score is the sum of the log-probabilities (log-softmax of the raw logits, in
 *   float64; banned n-grams get -Infinity) of its generated tokens.
 * - Each step extends every live beam by every token, ranks the B x vocab candidates by score
 *   (ties: lower beam, then lower token id) and walks the best max(2, 1 + end ids) x B in order
 *   (transformers' beams_to_keep: with several end ids, enough that B beams go on even where
 *   every beam's best tokens are ends): an end-of-generation token among the first B closes that
 *   hypothesis, any other token continues as a new beam, until B new beams exist. The first step
 *   extends the prompt alone.
 * - A closed hypothesis is scored sum_logprobs / generatedLength^lengthPenalty, where
 *   generatedLength counts the generated tokens including the end token; at most B are kept
 *   (a better one evicts the worst).
 * - Stopping: once B hypotheses are closed, earlyStopping=true stops at once; false (the
 *   default) stops when the best candidate score this step divided by steps^lengthPenalty
 *   cannot beat the worst kept hypothesis; "never" uses the longest possible length instead
 *   (for lengthPenalty > 0). After maxTokens steps every live beam is closed with its length.
 * - The result is the closed hypotheses by score, best first (numReturnSequences of them);
 *   the end token is not part of the returned tokens.
 *
 * KV caches: the prompt is prefilled once into one paged cache (cache/). After each step the
 * first child of a beam continues its parent's cache in place, further children fork it (they
 * share every row so far, prompt included; nothing is copied) and beams no child continues are
 * freed. All live beams then decode their next token in one batched pass.
 */
import type { KVCache, KVPoolStats } from "../cache/index.js";
import type { LanguageModel } from "../models/index.js";
import { OptionError } from "../units/index.js";

export interface BeamSearchOptions {
  numBeams: number;
  maxTokens: number;
  /** exponent of the length normalization (default 1) */
  lengthPenalty?: number;
  /** default false (see above) */
  earlyStopping?: boolean | "never";
  /** sequences returned (default 1, at most numBeams) */
  numReturnSequences?: number;
  /** ban any token that would repeat an n-gram of this size already in the sequence (prompt included); 0 = off */
  noRepeatNgramSize?: number;
  /** tokens that close a hypothesis */
  endIds: ReadonlySet<number>;
}

export interface BeamSequence {
  /** generated tokens (without the end token) */
  tokens: number[];
  /** sum of the tokens' log-probabilities (the end token's included when it closed the beam) */
  sumLogprobs: number;
  /** sumLogprobs / generatedLength^lengthPenalty */
  score: number;
  /** true when an end-of-generation token closed it */
  finished: boolean;
}

export interface BeamSearchStats {
  /** beam-tokens decoded (one K/V row each) */
  decodeSteps: number;
  /** batched forward passes after the prefill (one per step) */
  decodePasses: number;
  /** caches forked from a parent that several children continue */
  forks: number;
  /** the KV pool at the end: every row handed out is written once (prompt + decodeSteps rows), none copied */
  kv: KVPoolStats;
}

export function validateBeamOptions(o: Omit<BeamSearchOptions, "endIds" | "maxTokens">): void {
  const int = (name: string, v: unknown, min: number) => {
    if (v !== undefined && (typeof v !== "number" || !Number.isInteger(v) || v < min)) throw new OptionError(`${name} must be an integer >= ${min}, got ${String(v)}`, name);
  };
  int("numBeams", o.numBeams, 1);
  int("numReturnSequences", o.numReturnSequences, 1);
  int("noRepeatNgramSize", o.noRepeatNgramSize, 0);
  if ((o.numReturnSequences ?? 1) > o.numBeams) throw new OptionError(`numReturnSequences (${o.numReturnSequences}) must be <= numBeams (${o.numBeams})`, "numReturnSequences");
  if (o.lengthPenalty !== undefined && !Number.isFinite(o.lengthPenalty)) throw new OptionError(`lengthPenalty must be a finite number, got ${o.lengthPenalty}`, "lengthPenalty");
  if (o.earlyStopping !== undefined && typeof o.earlyStopping !== "boolean" && o.earlyStopping !== "never") throw new OptionError(`earlyStopping must be true, false or "never", got ${String(o.earlyStopping)}`, "earlyStopping");
}

/** log-softmax of a logits row in float64 */
function logSoftmax(row: Float32Array): Float64Array {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i]! > max) max = row[i]!;
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i]! - max);
  const lse = max + Math.log(sum);
  const out = new Float64Array(row.length);
  for (let i = 0; i < row.length; i++) out[i] = row[i]! - lse;
  return out;
}

/** tokens that would complete an n-gram already present in `seq` (Hugging Face's NoRepeatNGramLogitsProcessor) */
export function bannedNgramTokens(seq: readonly number[], n: number): Set<number> {
  const banned = new Set<number>();
  if (n <= 0 || seq.length + 1 < n) return banned;
  const prefixStart = seq.length - (n - 1);
  for (let i = 0; i + n <= seq.length; i++) {
    let match = true;
    for (let k = 0; k < n - 1 && match; k++) match = seq[i + k] === seq[prefixStart + k];
    if (match) banned.add(seq[i + n - 1]!);
  }
  return banned;
}

interface Hypotheses {
  items: BeamSequence[];
  worst: number;
}

function addHypothesis(h: Hypotheses, seq: BeamSequence, numBeams: number): void {
  if (h.items.length < numBeams || seq.score > h.worst) {
    h.items.push(seq);
    if (h.items.length > numBeams) {
      let wi = 0;
      for (let i = 1; i < h.items.length; i++) if (h.items[i]!.score < h.items[wi]!.score) wi = i;
      h.items.splice(wi, 1);
      h.worst = Math.min(...h.items.map((x) => x.score));
    } else {
      h.worst = Math.min(seq.score, h.worst);
    }
  }
}

/** one beam of the next step: the live beam it extends (its index) and the token it appends */
export interface BeamExtension {
  readonly parent: number;
  readonly token: number;
}

/**
 * The search itself, one step at a time, apart from where the logits come from: `step` takes
 * the live beams' next-token logits (the prompt's alone at first) and returns the next live beams
 * as extensions of the current ones, or undefined once the search has ended; `result` then gives
 * the hypotheses. beamSearch() below drives it over caches of its own, the engine over its pool.
 */
export class BeamSearch {
  /** live beams: generated tokens and their score */
  private beams: { tokens: number[]; score: number }[] = [{ tokens: [], score: 0 }];
  private readonly hyps: Hypotheses = { items: [], worst: 1e9 };
  private steps = 0;
  private ended: boolean;
  private readonly lengthPenalty: number;

  constructor(private readonly promptTokens: readonly number[], private readonly options: BeamSearchOptions, private readonly vocabSize: number) {
    validateBeamOptions(options);
    this.lengthPenalty = options.lengthPenalty ?? 1;
    this.ended = options.maxTokens === 0;
  }

  get done(): boolean {
    return this.ended;
  }

  /** live beams (the next step wants their logits in this order) */
  get width(): number {
    return this.beams.length;
  }

  /**
   * Ranks every extension of the live beams (logits[i] is beam i's) and returns the next beams, or
   * undefined when the search is over. `constrain(i, logprobs)` may set beam i's disallowed tokens
   * to -Infinity after the log-softmax (a grammar's mask, as transformers' prefix-constrained
   * logits processor: the allowed tokens keep their unconstrained log-probabilities).
   */
  step(logits: readonly Float32Array[], constrain?: (beam: number, logprobs: Float64Array) => void): BeamExtension[] | undefined {
    if (this.ended) return undefined;
    const { numBeams: B, endIds, maxTokens } = this.options;
    const early = this.options.earlyStopping ?? false;
    const ngram = this.options.noRepeatNgramSize ?? 0;
    const norm = (sum: number, len: number) => sum / Math.pow(len, this.lengthPenalty);
    const step = this.steps++;
    // rank every (beam, token) extension; keep the best max(2, 1 + end ids) x B (transformers' beams_to_keep)
    const candidates: { beam: number; token: number; score: number }[] = [];
    const keep = Math.max(2, 1 + endIds.size) * B;
    this.beams.forEach((beam, bi) => {
      const lp = logSoftmax(logits[bi]!);
      if (ngram > 0) for (const t of bannedNgramTokens([...this.promptTokens, ...beam.tokens], ngram)) lp[t] = -Infinity;
      constrain?.(bi, lp);
      for (let v = 0; v < this.vocabSize; v++) {
        const s = beam.score + lp[v]!;
        // a banned or masked token is no extension at all (a beam with fewer allowed tokens than 2B keeps only those)
        if (s === -Infinity) continue;
        if (candidates.length === keep && !(s > candidates[keep - 1]!.score)) continue;
        if (candidates.length === keep) candidates.pop();
        let j = candidates.length;
        while (j > 0 && s > candidates[j - 1]!.score) j--;
        candidates.splice(j, 0, { beam: bi, token: v, score: s });
      }
    });
    const next: { tokens: number[]; score: number; parent: number; token: number }[] = [];
    for (let rank = 0; rank < candidates.length && next.length < B; rank++) {
      const c = candidates[rank]!;
      const parent = this.beams[c.beam]!;
      if (endIds.has(c.token)) {
        if (rank >= B) continue;
        addHypothesis(this.hyps, { tokens: [...parent.tokens], sumLogprobs: c.score, score: norm(c.score, step + 1), finished: true }, B);
      } else {
        next.push({ tokens: [...parent.tokens, c.token], score: c.score, parent: c.beam, token: c.token });
      }
    }
    // are we done? (transformers' BeamHypotheses.is_done with the best candidate score)
    let done = false;
    if (this.hyps.items.length >= B) {
      if (early === true) done = true;
      else {
        const best = candidates[0]!.score;
        const len = early === "never" && this.lengthPenalty > 0 ? maxTokens : step + 1;
        done = this.hyps.worst >= norm(best, len);
      }
    }
    if (done || step === maxTokens - 1 || next.length === 0) {
      if (!done) for (const n of next) addHypothesis(this.hyps, { tokens: n.tokens, sumLogprobs: n.score, score: norm(n.score, n.tokens.length), finished: false }, B);
      this.ended = true;
      return undefined;
    }
    this.beams = next.map((n) => ({ tokens: n.tokens, score: n.score }));
    return next.map((n) => ({ parent: n.parent, token: n.token }));
  }

  /** the closed hypotheses by score, best first (numReturnSequences of them) */
  result(): BeamSequence[] {
    const sorted = [...this.hyps.items].sort((a, b) => b.score - a.score);
    return sorted.slice(0, this.options.numReturnSequences ?? 1);
  }
}

/**
 * Runs beam search after `promptTokens` (which must not be empty); the beams live in one fresh
 * paged cache of promptTokens.length + maxTokens positions per beam. Returns the sequences best
 * first and the work done. Runs on any backend (the passes' reads are awaited).
 */
export async function beamSearch(model: LanguageModel, promptTokens: readonly number[], options: BeamSearchOptions): Promise<{ sequences: BeamSequence[]; stats: BeamSearchStats }> {
  const search = new BeamSearch(promptTokens, options, model.info.vocabSize);
  const B = options.numBeams;
  const P = promptTokens.length;
  const maxTokens = options.maxTokens;
  const root = model.createCache(P + maxTokens);
  const stats: BeamSearchStats = { decodeSteps: 0, decodePasses: 0, forks: 0, kv: root.pool.stats };
  if (search.done) return { sequences: [], stats };

  // room for B beams that each extend the shared prompt by maxTokens positions (a fork
  // starts a fresh block, hence one more block per beam); the pool still grows if forks fragment it
  const bs = root.pool.blockSize;
  root.pool.reserve(Math.ceil(P / bs) + B * (Math.ceil(maxTokens / bs) + 1));
  let logits = [await model.forwardAsync(promptTokens, root)];
  // the cache holding each live beam's K/V
  let caches: KVCache[] = [root];
  for (let next = search.step(logits); next; next = search.step(logits)) {
    // hand out caches: the first child of a parent continues its cache, further children fork
    // it (all forks before any pass writes), and parents no child continues are freed
    const continued = new Set<KVCache>();
    const childCaches = next.map((n) => {
      const c = caches[n.parent]!;
      if (!continued.has(c)) {
        continued.add(c);
        return c;
      }
      stats.forks++;
      return c.fork();
    });
    for (const c of caches) if (!continued.has(c)) c.free();
    // every beam's next token in one pass (the same logits as one pass per beam)
    logits = await model.forwardBatchAsync(next.map((n, i) => ({ tokens: [n.token], cache: childCaches[i]! })));
    stats.decodeSteps += next.length;
    stats.decodePasses++;
    caches = childCaches;
  }
  stats.kv = root.pool.stats;
  return { sequences: search.result(), stats };
}
