/**
 * Greedy speculative decoding. A proposer guesses the next `draftTokens` tokens; the target
 * model checks them all in one batched forward pass (logits for every position) and keeps the
 * longest prefix that its own greedy choice agrees with, plus its own choice at the first
 * disagreement (or after the last accepted token). The chooser is the same greedy sampler
 * plain generation uses (logit bias and penalties included, given the exact history), so the
 * output is token for token what plain greedy decoding of the target produces: every emitted
 * token is the target's choice given the tokens before it.
 *
 * Proposers: a draft model (same vocabulary; e.g. a Q4_0 copy of the target) decoding greedily
 * with its own KV cache, or prompt lookup: the last n tokens (n = promptLookup down to 1) are
 * searched for earlier in prompt + output and the tokens that followed that occurrence are
 * proposed.
 *
 * Speculative sampling (Leviathan et al. 2023, Chen et al. 2023) when `sampling` is given: the
 * draft samples each proposed token x from its distribution q (after the sampler's processors),
 * the target accepts it with probability min(1, p(x) / q(x)), p being the target's processed
 * distribution at that position; at the first rejection the token is drawn from
 * norm(max(0, p - q)) and the round ends; when all are accepted one more token is drawn from
 * the target's next distribution. Every emitted token is then distributed exactly as the
 * target's sampler would draw it. Prompt lookup proposes deterministically: q is one-hot.
 * One seeded random source drives all draws, so a seed repeats a run exactly.
 *
 * Cache bookkeeping: `seq` is prompt + accepted output; `cur` is the newest token, chosen but
 * not yet run through the target. The target cache always holds seq minus cur; rejected draft
 * rows are dropped with truncate(). The draft cache holds some prefix of seq and catches up
 * before drafting; a round reserves the draft rows it may write first, and where the draft's pool
 * has no room for them (its size is planned, and concurrent requests share it) the run gives its
 * draft rows back and proposes nothing that round: plain decoding, one token a target pass. Each
 * round tries again (drafting is per round, as in vLLM and llama-server): once the pool has room
 * (another request ended) the draft catches up on every token accepted meanwhile, in one chunk
 * (from the start: its rows were given back), and proposes again.
 */
import type { KVCache } from "../cache/index.js";
import type { LanguageModel } from "../models/index.js";
import type { TokenProbabilities, UniformSource } from "../sampling/index.js";
import { OptionError } from "../units/index.js";

/** the processed next-token distribution of a sampler for a logits row and history */
export type DistributionFn = (logits: Float32Array, history: readonly number[]) => TokenProbabilities;

export interface SpeculativeSampling {
  /** the target sampler's distribution (what it would draw from) */
  target: DistributionFn;
  /** the draft model's distribution, with the same processors; unused with prompt lookup */
  draft: DistributionFn;
  /** drives every draw: draft proposals, acceptance tests, residual and bonus tokens */
  rng: UniformSource;
}

/**
 * A grammar every chosen token must keep (the engine's TokenConstraint): it masks a logits row
 * to the tokens that may come next (false: none may), follows chosen tokens, and forks, so a
 * proposal and its verification can walk ahead of the accepted output.
 */
export interface TokenMask {
  mask(logits: Float32Array): boolean;
  allows(token: number): boolean;
  accept(token: number): void;
  fork(): TokenMask;
}

/** one pass of a draft model a proposal needs: `tokens` through `cache`, the last one's logits wanted */
export interface DraftPass {
  readonly tokens: number[];
  readonly cache: KVCache;
}

export interface SpeculativeOptions {
  maxTokens: number;
  /** tokens proposed per round (default 8 with a draft model, 10 with prompt lookup) */
  draftTokens?: number;
  /** the draft model; otherwise prompt lookup */
  draft?: LanguageModel;
  /**
   * where the draft's KV cache of `positions` positions comes from (default: a cache of its own
   * from the draft model). The engine gives one on a pool it shares between requests, so the
   * memory comes back when release() frees it, not when the garbage collector finds it.
   */
  draftCache?: (positions: number) => KVCache;
  /**
   * called when the draft cache's pool has no room for a round's rows (a pool of a planned size,
   * shared by concurrent requests) where the last round drafted: the run gives its draft rows back
   * and proposes nothing, as plain decoding, until a round finds room; its output is the same
   * (greedy: token for token)
   */
  onDraftFull?: () => void;
  /** called when a round finds room in the draft's pool again after onDraftFull: the draft catches up on the tokens accepted meanwhile and proposes */
  onDraftResumed?: () => void;
  /** longest n-gram prompt lookup matches (default 3) */
  promptLookup?: number;
  /** the target's greedy choice for a logits row given the history (prompt + output so far) */
  choose: (logits: Float32Array, history: readonly number[]) => number;
  /** sample instead of decoding greedily (`choose` is then unused) */
  sampling?: SpeculativeSampling;
  /** tokens that end the generation (not emitted) */
  endIds: ReadonlySet<number>;
  /** called with each accepted token as soon as it is final; return true to stop */
  onToken?: (token: number) => boolean;
  /**
   * What the output must keep to (a grammar): the target's and the draft's rows are masked
   * before every choice, so greedy output is the best allowed token at each step, as without
   * speculation, and sampling draws from the masked distributions on both sides of the
   * acceptance test. The decoder advances it with each accepted token.
   */
  constraint?: TokenMask;
}

export interface SpeculativeStats {
  /** proposal rounds (= batched target passes after the prefill) */
  rounds: number;
  /** tokens proposed */
  drafted: number;
  /** proposed tokens the target agreed with */
  accepted: number;
  /** accepted / drafted */
  acceptanceRate: number;
  /** generated tokens per target forward pass after the prefill */
  tokensPerTargetPass: number;
  /** of the rounds, those that proposed nothing because the draft model's KV pool had no room for them (concurrent requests held it): plain decoding */
  fallbackRounds: number;
}

export interface SpeculativeResult {
  tokens: number[];
  finishReason: "stop" | "length";
  stats: SpeculativeStats;
}

function argmax(row: Float32Array): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
  return best;
}

/** a sparse distribution as a dense vocabulary-sized vector */
export function denseDistribution(d: TokenProbabilities, vocabSize: number): Float64Array {
  const out = new Float64Array(vocabSize);
  for (let i = 0; i < d.ids.length; i++) out[d.ids[i]!] = d.probs[i]!;
  return out;
}

/** the probability of accepting draft token x drawn from q: min(1, p(x) / q(x)) */
export function acceptanceProbability(p: ArrayLike<number>, q: ArrayLike<number>, x: number): number {
  const qx = q[x]!;
  if (!(qx > 0)) throw new RangeError(`speculative sampling: draft token ${x} has probability ${qx} under the draft distribution`);
  return Math.min(1, p[x]! / qx);
}

/**
 * norm(max(0, p - q)): what a rejection draws from. When p <= q everywhere (p = q, up to
 * rounding) a rejection cannot happen in exact arithmetic; p itself is returned then.
 */
export function residualDistribution(p: ArrayLike<number>, q: ArrayLike<number>): Float64Array {
  const r = new Float64Array(p.length);
  let sum = 0;
  for (let i = 0; i < p.length; i++) {
    const d = p[i]! - q[i]!;
    if (d > 0) { r[i] = d; sum += d; }
  }
  if (sum === 0) return Float64Array.from(p);
  for (let i = 0; i < r.length; i++) r[i] = r[i]! / sum;
  return r;
}

/** the first index whose running sum exceeds u * total (u in [0, 1)); zero entries are never chosen */
export function drawIndex(dist: ArrayLike<number>, u: number): number {
  let total = 0;
  for (let i = 0; i < dist.length; i++) total += dist[i]!;
  const target = u * total;
  let run = 0;
  let last = -1;
  for (let i = 0; i < dist.length; i++) {
    if (!(dist[i]! > 0)) continue;
    run += dist[i]!;
    last = i;
    if (run > target) return i;
  }
  if (last < 0) throw new RangeError("speculative sampling: the distribution has no positive entry");
  return last; // only reachable through rounding
}

/**
 * One verification step of speculative sampling: draft token x (drawn from q) is kept with
 * probability min(1, p(x) / q(x)); otherwise the replacement is drawn from norm(max(0, p - q)).
 * The returned token is distributed exactly as p when x ~ q.
 */
export function rejectionStep(p: ArrayLike<number>, q: ArrayLike<number>, x: number, rng: UniformSource): { accepted: boolean; token: number } {
  if (rng.nextDouble() < acceptanceProbability(p, q, x)) return { accepted: true, token: x };
  return { accepted: false, token: drawIndex(residualDistribution(p, q), rng.nextDouble()) };
}

function oneHot(x: number, n: number): Float64Array {
  const v = new Float64Array(n);
  v[x] = 1;
  return v;
}

/** prompt lookup: the tokens that followed the latest earlier occurrence of seq's last n tokens */
export function lookupDraft(seq: readonly number[], maxNgram: number, k: number): number[] {
  for (let n = Math.min(maxNgram, seq.length - 1); n >= 1; n--) {
    const tail = seq.length - n;
    for (let i = tail - 1; i >= 0; i--) {
      let j = 0;
      while (j < n && seq[i + j] === seq[tail + j]) j++;
      if (j === n) return seq.slice(i + n, Math.min(i + n + k, seq.length));
    }
  }
  return [];
}

/** positions a speculative run's caches may hold: the prompt, maxTokens of output and one round's proposal past its current token */
export function speculativePositions(promptLength: number, maxTokens: number, draftTokens: number): number {
  return promptLength + maxTokens + draftTokens + 1;
}

export function validateSpeculative(o: { draftTokens?: number; promptLookup?: number }): void {
  for (const [name, v] of [["draftTokens", o.draftTokens], ["promptLookup", o.promptLookup]] as const) {
    if (v !== undefined && (!Number.isInteger(v) || v < 1)) throw new OptionError(`${name} must be an integer >= 1, got ${v}`, name);
  }
}

/**
 * The decoder's rounds, apart from who runs the target: `first` takes the prompt's last logits;
 * each round `propose` drafts (running the draft model on its own cache), the caller computes
 * the target's logits for `verifyTokens()` (cur + proposal, every position) in one pass, and
 * `verify` keeps the accepted prefix and the target's own next token. After `verify` the
 * target cache must hold `keptPositions()` positions (truncate it to that). speculativeGreedy()
 * below drives it over a cache of its own, the engine over its pool.
 */
export class SpeculativeDecoder {
  /** prompt + accepted output; its last token (`cur`) is chosen but not yet run through the target */
  readonly seq: number[];
  readonly out: number[] = [];
  finishReason: "stop" | "length" = "length";
  ended = false;
  private readonly k: number;
  private readonly ngram: number;
  private readonly stats = { rounds: 0, drafted: 0, accepted: 0, fallbackRounds: 0 };
  private readonly dCache: KVCache | undefined;
  private proposal: number[] = [];
  /** with sampling, qs[i] is the draft distribution proposal[i] was drawn from (undefined: one-hot) */
  private qs: (Float64Array | undefined)[] = [];
  private kept = 0;
  /** the draft's pool had no room for the last round: it proposed nothing (its draft rows given back), and the next round tries again */
  private draftWaiting = false;

  constructor(private readonly vocabSize: number, promptTokens: readonly number[], private readonly o: SpeculativeOptions) {
    validateSpeculative(o);
    this.k = o.draftTokens ?? (o.draft ? 8 : 10);
    this.ngram = o.promptLookup ?? 3;
    if (o.draft && o.draft.info.vocabSize !== vocabSize) {
      throw new OptionError(`draft model: its vocabulary has ${o.draft.info.vocabSize} tokens, the target's ${vocabSize}`, "draftModel");
    }
    this.seq = [...promptTokens];
    this.dCache = o.draft && (o.draftCache ?? ((positions) => o.draft!.createCache(positions)))(this.capacity);
    this.ended = o.maxTokens === 0;
  }

  /** positions the target (and draft) cache may need: prompt, output and one round's proposal */
  get capacity(): number {
    return speculativePositions(this.seq.length - this.out.length, this.o.maxTokens, this.k);
  }

  /**
   * gives the draft cache's rows back to its pool: when the decoder drafts no more, or when its
   * request is preempted (the cache stays usable, and the next propose() computes the draft's rows
   * again from the accepted tokens, in one chunk)
   */
  release(): void {
    this.dCache?.free();
  }

  /** positions the draft cache holds now (0: prompt lookup, or its rows were given back) */
  get draftLength(): number {
    return this.dCache?.length ?? 0;
  }

  /**
   * positions the draft cache may hold after the next verify and propose, at most: verify adds up
   * to k + 1 tokens to seq, propose catches the draft up on seq and runs k - 1 proposed tokens
   * (a run whose last round found no room in the draft's pool too: the next may find it)
   */
  get draftLengthAfterRound(): number {
    return Math.min(this.seq.length + 2 * this.k, this.capacity);
  }

  /** tokens proposed per round at most */
  get draftTokens(): number {
    return this.k;
  }

  /** the first token, from the prompt's last logits */
  first(logits: Float32Array): void {
    if (this.ended) return;
    const sp = this.o.sampling;
    if (this.o.constraint && !this.o.constraint.mask(logits)) return this.endHere();
    this.accept(sp ? drawIndex(denseDistribution(sp.target(logits, this.seq), this.vocabSize), sp.rng.nextDouble()) : this.o.choose(logits, this.seq));
  }

  /** drafts this round's proposal (a draft model's passes are awaited: any backend) */
  async propose(): Promise<void> {
    const drafting = this.drafting();
    for (let r = drafting.next(); !r.done; ) r = drafting.next(await this.o.draft!.forwardAsync(r.value.tokens, r.value.cache));
  }

  /**
   * drafts this round's proposal, yielding each pass of the draft model it needs (tokens through
   * the draft's cache) and taking that pass's last logits back: whoever runs it may run the passes
   * of several decoders as one batch (the engine does). Prompt lookup yields none
   */
  *drafting(): Generator<DraftPass, void, Float32Array> {
    const sp = this.o.sampling, V = this.vocabSize, seq = this.seq;
    const room = Math.min(this.k, this.o.maxTokens - this.out.length);
    this.qs = [];
    // the proposal keeps to the constraint too: a fork of the parse walks ahead with it
    const parse = this.o.constraint?.fork();
    // the round's draft rows, reserved before any pass: the draft catches up on seq and runs
    // room - 1 proposed tokens (the last proposed one is never run through it). Where the pool has
    // no room the rows it holds go back (for the requests that hold the rest) and the round
    // proposes nothing; a later round reserves them again and catches up from the start
    const fits = !this.dCache || this.dCache.tryReserve(seq.length + room - 1 - this.dCache.length);
    if (this.dCache && fits && this.draftWaiting) {
      this.draftWaiting = false;
      this.o.onDraftResumed?.();
    }
    if (this.o.draft && this.dCache && !fits) {
      this.dCache.free();
      if (!this.draftWaiting) this.o.onDraftFull?.();
      this.draftWaiting = true;
      this.stats.fallbackRounds++;
      this.proposal = [];
    } else if (this.o.draft && this.dCache) {
      const proposal: number[] = [];
      let dl = yield { tokens: seq.slice(this.dCache.length), cache: this.dCache };
      for (let i = 0; i < room; i++) {
        if (parse && !parse.mask(dl)) break;
        let t: number;
        if (sp) {
          const q = denseDistribution(sp.draft(dl, [...seq, ...proposal]), V);
          t = drawIndex(q, sp.rng.nextDouble());
          this.qs.push(q);
        } else {
          t = argmax(dl);
        }
        proposal.push(t);
        // past an end token nothing more is worth proposing
        if (this.o.endIds.has(t)) break;
        parse?.accept(t);
        if (i + 1 < room) dl = yield { tokens: [t], cache: this.dCache };
      }
      // rows reserved for a proposal cut short (an end token, the constraint) go back
      this.dCache.truncate(this.dCache.length);
      this.proposal = proposal;
    } else {
      const looked = lookupDraft(seq, this.ngram, room);
      let n = 0;
      // (the index moves outside the optional call: parse?.accept(...) skips its arguments without a parse)
      while (n < looked.length && (!parse || parse.allows(looked[n]!)) && !this.o.endIds.has(looked[n]!)) {
        parse?.accept(looked[n]!);
        n++;
      }
      this.proposal = looked.slice(0, n);
    }
  }

  /** what the target computes this round, every position's logits wanted: cur and the proposal */
  verifyTokens(): number[] {
    return [this.seq[this.seq.length - 1]!, ...this.proposal];
  }

  /** with the target's logits for verifyTokens() (rows back to back): keeps the accepted tokens and the target's next one */
  verify(rows: Float32Array): void {
    const sp = this.o.sampling, V = this.vocabSize, proposal = this.proposal;
    this.stats.rounds++;
    this.stats.drafted += proposal.length;
    let m = 0;
    const history = [...this.seq];
    // the target's rows masked by the parse after cur and the proposal's first m tokens (-1: no token may come)
    const parse = this.o.constraint?.fork();
    const row = (i: number): Float32Array | undefined => {
      const r = rows.subarray(i * V, (i + 1) * V);
      return !parse || parse.mask(r) ? r : undefined;
    };
    let next: number;
    if (sp) {
      for (;;) {
        const r = row(m);
        if (!r) { next = -1; break; }
        const p = denseDistribution(sp.target(r, history), V);
        if (m === proposal.length) { next = drawIndex(p, sp.rng.nextDouble()); break; }
        const x = proposal[m]!;
        const step = rejectionStep(p, this.qs[m] ?? oneHot(x, V), x, sp.rng);
        if (!step.accepted) { next = step.token; break; }
        m++;
        history.push(x);
        parse?.accept(x);
      }
    } else {
      const choose = (i: number): number => {
        const r = row(i);
        return r ? this.o.choose(r, history) : -1;
      };
      next = choose(0);
      while (m < proposal.length && next === proposal[m]) {
        m++;
        history.push(next);
        parse?.accept(next);
        next = choose(m);
      }
    }
    this.stats.accepted += m;
    // the target keeps cur and the accepted tokens' K/V; the rest of the proposal is forgotten
    this.kept = this.seq.length + m;
    let go = true;
    for (let i = 0; i < m && go; i++) go = this.accept(proposal[i]!);
    if (go) {
      if (next < 0) this.endHere();
      else this.accept(next);
    }
    if (this.dCache && this.dCache.length > this.seq.length - 1) this.dCache.truncate(this.seq.length - 1);
  }

  /** positions the target cache keeps after the last verify */
  keptPositions(): number {
    return this.kept;
  }

  /** ends the run early (a stop string, an abort) */
  stop(): void {
    if (!this.ended) { this.ended = true; this.finishReason = "stop"; }
  }

  result(): SpeculativeResult {
    const s = this.stats;
    return {
      tokens: this.out, finishReason: this.finishReason,
      stats: { rounds: s.rounds, drafted: s.drafted, accepted: s.accepted, acceptanceRate: s.drafted > 0 ? s.accepted / s.drafted : 0, tokensPerTargetPass: s.rounds > 0 ? this.out.length / s.rounds : 0, fallbackRounds: s.fallbackRounds },
    };
  }

  /** no token may come next under the constraint (its grammar is complete, or nothing spells what it needs): the output ends */
  private endHere(): void {
    this.finishReason = "stop";
    this.ended = true;
  }

  /** emits an accepted token; false (and ended) when generation must stop */
  private accept(t: number): boolean {
    if (this.ended) return false;
    if (this.o.endIds.has(t)) { this.finishReason = "stop"; this.ended = true; return false; }
    this.o.constraint?.accept(t);
    this.out.push(t);
    this.seq.push(t);
    if (this.o.onToken?.(t)) { this.finishReason = "stop"; this.ended = true; return false; }
    if (this.out.length >= this.o.maxTokens) { this.ended = true; return false; }
    return true;
  }
}

export async function speculativeGreedy(target: LanguageModel, promptTokens: readonly number[], o: SpeculativeOptions): Promise<SpeculativeResult> {
  const decoder = new SpeculativeDecoder(target.info.vocabSize, promptTokens, o);
  if (decoder.ended) return decoder.result();
  const tCache = target.createCache(decoder.capacity);
  decoder.first(await target.forwardAsync(promptTokens, tCache));
  while (!decoder.ended) {
    await decoder.propose();
    // verify: one pass over cur + proposal, logits at every position
    const rows = await target.forwardAsync(decoder.verifyTokens(), tCache, { allLogits: true });
    decoder.verify(rows);
    tCache.truncate(decoder.keptPositions());
  }
  return decoder.result();
}
