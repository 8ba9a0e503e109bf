/**
 * Beam search with the semantics of Hugging Face `generate(num_beams=B)` (transformers'
 * BeamSearchScorer / BeamHypotheses), written down here because the scores must follow it:
 *
 * - A beam's score is the sum of the log-probabilities (log-softmax of the raw logits, in
 *   float64; banned n-grams get -Infinity) of its generated tokens.
 * - Each step extends every live beam by every token, ranks the B x vocab candidates by score
 *   (ties: lower beam, then lower token id) and walks the best 2B in order: an end-of-generation
 *   token among the first B closes that hypothesis, any other token continues as a new beam,
 *   until B new beams exist. The first step extends the prompt alone.
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
 * KV caches: the prompt is prefilled once and its rows copied into each beam's cache; after
 * each step a beam that keeps its parent's cache reuses it in place, and only beams that fork
 * a parent already taken copy the parent's generated rows (never the prompt's) into a free cache.
 */
import { KVCache } from "../cache/kv-cache.js";
import type { LanguageModel } from "../models/model.js";

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
  /** forward passes of one token */
  decodeSteps: number;
  /** KV rows copied between beam caches (per layer, K and V counted once) */
  copiedRows: number;
}

export function validateBeamOptions(o: Omit<BeamSearchOptions, "endIds" | "maxTokens">): void {
  const int = (name: string, v: unknown, min: number) => {
    if (v !== undefined && (typeof v !== "number" || !Number.isInteger(v) || v < min)) throw new RangeError(`${name} must be an integer >= ${min}, got ${String(v)}`);
  };
  int("numBeams", o.numBeams, 1);
  int("numReturnSequences", o.numReturnSequences, 1);
  int("noRepeatNgramSize", o.noRepeatNgramSize, 0);
  if ((o.numReturnSequences ?? 1) > o.numBeams) throw new RangeError(`numReturnSequences (${o.numReturnSequences}) must be <= numBeams (${o.numBeams})`);
  if (o.lengthPenalty !== undefined && !Number.isFinite(o.lengthPenalty)) throw new RangeError(`lengthPenalty must be a finite number, got ${o.lengthPenalty}`);
  if (o.earlyStopping !== undefined && typeof o.earlyStopping !== "boolean" && o.earlyStopping !== "never") throw new RangeError(`earlyStopping must be true, false or "never", got ${String(o.earlyStopping)}`);
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

/** copies K/V rows [from, to) of every layer */
function copyRows(dst: KVCache, src: KVCache, from: number, to: number): void {
  const a = from * src.rowSize;
  const b = to * src.rowSize;
  for (let l = 0; l < src.nLayers; l++) {
    dst.keys[l]!.set(src.keys[l]!.subarray(a, b), a);
    dst.values[l]!.set(src.values[l]!.subarray(a, b), a);
  }
  dst.length = src.length;
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

/**
 * Runs beam search after `promptTokens` (which must not be empty); the model gets fresh caches
 * of promptTokens.length + maxTokens rows. Returns the sequences best first and the work done.
 */
export function beamSearch(model: LanguageModel, promptTokens: readonly number[], options: BeamSearchOptions): { sequences: BeamSequence[]; stats: BeamSearchStats } {
  validateBeamOptions(options);
  const B = options.numBeams;
  const lengthPenalty = options.lengthPenalty ?? 1;
  const early = options.earlyStopping ?? false;
  const ngram = options.noRepeatNgramSize ?? 0;
  const P = promptTokens.length;
  const maxTokens = options.maxTokens;
  const V = model.info.vocabSize;
  const stats: BeamSearchStats = { decodeSteps: 0, copiedRows: 0 };
  const hyps: Hypotheses = { items: [], worst: 1e9 };
  const norm = (sum: number, len: number) => sum / Math.pow(len, lengthPenalty);
  if (maxTokens === 0) return { sequences: [], stats };

  const caches = [model.createCache(P + maxTokens)];
  let logits = [model.forward(promptTokens, caches[0]!)];
  for (let b = 1; b < B; b++) {
    const c = model.createCache(P + maxTokens);
    copyRows(c, caches[0]!, 0, P);
    caches.push(c);
  }
  // live beams: generated tokens, score, and which cache holds their K/V
  let beams: { tokens: number[]; score: number; cache: number }[] = [{ tokens: [], score: 0, cache: 0 }];
  let done = false;

  for (let step = 0; step < maxTokens && !done; step++) {
    // rank every (beam, token) extension; keep the best 2B
    const candidates: { beam: number; token: number; score: number }[] = [];
    const keep = 2 * B;
    beams.forEach((beam, bi) => {
      const lp = logSoftmax(logits[bi]!);
      if (ngram > 0) for (const t of bannedNgramTokens([...promptTokens, ...beam.tokens], ngram)) lp[t] = -Infinity;
      for (let v = 0; v < V; v++) {
        const s = beam.score + lp[v]!;
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
      const parent = beams[c.beam]!;
      if (options.endIds.has(c.token)) {
        if (rank >= B) continue;
        addHypothesis(hyps, { tokens: [...parent.tokens], sumLogprobs: c.score, score: norm(c.score, step + 1), finished: true }, B);
      } else {
        next.push({ tokens: [...parent.tokens, c.token], score: c.score, parent: c.beam, token: c.token });
      }
    }
    // are we done? (transformers' BeamHypotheses.is_done with the best candidate score)
    if (hyps.items.length >= B) {
      if (early === true) done = true;
      else {
        const best = candidates[0]!.score;
        const len = early === "never" && lengthPenalty > 0 ? maxTokens : step + 1;
        done = hyps.worst >= norm(best, len);
      }
    }
    if (done || step === maxTokens - 1 || next.length === 0) {
      if (!done) for (const n of next) addHypothesis(hyps, { tokens: n.tokens, sumLogprobs: n.score, score: norm(n.score, n.tokens.length), finished: false }, B);
      break;
    }
    // hand out caches: the first child of a parent takes its cache in place, other children copy it
    const taken = new Set<number>();
    const owner = next.map((n) => {
      const c = beams[n.parent]!.cache;
      if (taken.has(c)) return -1;
      taken.add(c);
      return c;
    });
    const free = caches.map((_, i) => i).filter((i) => !taken.has(i));
    owner.forEach((c, i) => {
      if (c >= 0) return;
      const dst = free.shift()!;
      const src = caches[beams[next[i]!.parent]!.cache]!;
      copyRows(caches[dst]!, src, P, src.length);
      stats.copiedRows += src.length - P;
      owner[i] = dst;
    });
    logits = next.map((n, i) => {
      stats.decodeSteps++;
      // forward returns a view into scratch buffers shared between calls: copy it
      return model.forward([n.token], caches[owner[i]!]!).slice(0, V);
    });
    beams = next.map((n, i) => ({ tokens: n.tokens, score: n.score, cache: owner[i]! }));
  }
  const sorted = [...hyps.items].sort((a, b) => b.score - a.score);
  return { sequences: sorted.slice(0, options.numReturnSequences ?? 1), stats };
}
