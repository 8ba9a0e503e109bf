import type { Sampler } from "../sampling/index.js";
import type { TokenConstraint } from "../sampling/constraints/index.js";
import type { StreamDecoder } from "../tokenizer/index.js";
import { bannedNgramTokens } from "./beam.js";
import { sampledLogprobs, tokenLogprobs, type TokenLogprob } from "./logprobs.js";
import { LineWatch, type LineLimitHit, type LineLimits } from "./line-limits.js";
import type { StopMatcher } from "./stop-strings.js";
import type { EndToken, FinishDetail, FinishReason, GenerationStep, TokenStep } from "./generate.js";

/** What ends a sequence, shared by every sequence of a request. */
export interface StopRules {
  readonly maxTokens: number;
  /** positions the sequence may hold, prompt included (the context size) */
  readonly contextSize: number;
  /** token ids that end the generation (end of generation, a chat template's end of turn); ignored with ignoreEos */
  readonly endIds: ReadonlySet<number>;
  readonly ignoreEos: boolean;
  /** report the top `topLogprobs` alternatives of each token (undefined: no logprobs) */
  readonly topLogprobs: number | undefined;
  /** llama-server's n_indent and t_max_predict_ms (none: no limit on the lines) */
  readonly lineLimits?: LineLimits;
  /** the logprobs are those of the distribution the sampler drew from (llama-server's post_sampling_probs), not the model's */
  readonly logprobsAfterSampling?: boolean;
}

/**
 * Tokens a sampled sequence may not take at a step, as transformers' logits processors ban them
 * (their logits -Infinity before the sampler's penalties, temperature and filters, as
 * GenerationMixin._get_logits_processor puts them before its warpers)
 */
export interface TokenBans {
  /** a token completing an n-gram of this size already in the sequence, the prompt's included (NoRepeatNGramLogitsProcessor); 0: none */
  readonly noRepeatNgramSize?: number;
  /** the end-of-generation tokens while fewer tokens than this are generated (MinNewTokensLengthLogitsProcessor); 0: none */
  readonly minNewTokens?: number;
  /** banned at every step (SuppressTokensLogitsProcessor) */
  readonly suppressTokens?: readonly number[];
  /** banned at the first generated step (SuppressTokensAtBeginLogitsProcessor, its begin_index the prompt's length) */
  readonly beginSuppressTokens?: readonly number[];
  /** token sequences whose last token is banned where the sequence's other tokens end the history (NoBadWordsLogitsProcessor) */
  readonly badWordsIds?: readonly (readonly number[])[];
  /** [token sequence, bias]: the bias is added to the last token where the others end the history (SequenceBiasLogitsProcessor) */
  readonly sequenceBias?: readonly (readonly [readonly number[], number])[];
  /** the only token allowed at the first step of a one-token prompt (ForcedBOSTokenLogitsProcessor: input_ids of length 1) */
  readonly forcedBosTokenId?: number;
  /** the only tokens allowed at the last step maxTokens leaves (ForcedEOSTokenLogitsProcessor: at max_length - 1) */
  readonly forcedEosTokenId?: number | readonly number[];
  /**
   * [start index, decay factor]: once more than `start` tokens are generated, the end-of-generation
   * tokens' logits gain |logit| * (factor^(generated - start) - 1) after the repetition penalty
   * (ExponentialDecayLengthPenalty, its regulation start the prompt's length + start)
   */
  readonly exponentialDecayLengthPenalty?: readonly [startIndex: number, decayFactor: number];
}

/** whether `history` ends with `seq`'s tokens but its last (a one-token `seq`: always) */
function completes(history: readonly number[], seq: readonly number[]): boolean {
  const prefix = seq.length - 1;
  // SequenceBiasLogitsProcessor: a sequence longer than the history is ignored
  if (seq.length > history.length) return prefix === 0;
  for (let i = 0; i < prefix; i++) if (history[history.length - prefix + i] !== seq[i]) return false;
  return true;
}

/**
 * One sequence's life: its tokens (prompt, then generated), its sampler, stop strings and
 * streaming detokenizer. Whoever computes it (the engine, over a KV cache) calls `advance` with
 * the logits after its last token: it samples the next token and applies the stops. A strategy
 * that chooses tokens itself (beam search, speculative decoding) hands them to `accept`. Every
 * way of generating runs its sequences through these same steps, so a token's fate does not
 * depend on which path asked for it.
 */
export class Sequence {
  /** prompt and generated tokens: the history the penalties see, and what the cache must hold */
  readonly tokens: number[];
  readonly completionTokens: number[] = [];
  readonly logprobs: TokenLogprob[] | undefined;
  completion = "";
  finishReason: FinishReason | undefined;
  /** with finishReason "length": the limit it hit */
  finishDetail: FinishDetail | undefined;
  /** the end-of-generation token that ended it (not in completionTokens) */
  endToken: EndToken | undefined;
  /** when the first token was sampled and when the sequence ended (performance.now()) */
  firstTokenAt = 0;
  endedAt = 0;
  private readonly lineWatch: LineWatch | undefined;

  constructor(
    promptTokens: readonly number[],
    readonly sampler: Sampler,
    private readonly stopMatcher: StopMatcher,
    private readonly decoder: StreamDecoder,
    private readonly rules: StopRules,
    /** a grammar the completion must follow: only tokens it allows are sampled */
    private readonly constraint?: TokenConstraint,
    /** tokens banned at a sampled step (a strategy's own choices, given to `accept`, are its to check) */
    private readonly bans: TokenBans = {},
  ) {
    this.tokens = [...promptTokens];
    this.logprobs = rules.topLogprobs === undefined ? undefined : [];
    this.lineWatch = rules.lineLimits && new LineWatch(rules.lineLimits);
  }

  get done(): boolean {
    return this.finishReason !== undefined;
  }

  /**
   * With the logits after the last token (the cache holds every token): samples the next one
   * and applies the stops. Returns the steps to emit (a token's step, and the held-back text once
   * the sequence ends); after it, either the new token is pending or the sequence is done.
   */
  advance(given: Float32Array): GenerationStep[] {
    if (this.full) return this.finish("length");
    const logits = this.banned(given);
    const decay = this.decay();
    if (!this.constraint) return this.accept(this.sampler.sample(logits, this.tokens, decay), logits);
    // the constraint masks `logits` (logprobs then describe the constrained distribution): in full
    // where logprobs are read from them, else greedy's lazy try leaves the row unmasked while the
    // grammar state's mask is not made yet, and a token's logprob depends on what other requests
    // with the grammar made before
    const token = this.constraint.choose(logits, this.sampler, this.tokens, this.logprobs !== undefined, decay);
    if (token < 0) {
      // nothing may follow: the grammar is complete and generation cannot end with a token (ignoreEos), or no token spells what it needs
      this.finishDetail = this.constraint.complete ? "grammar complete" : "no token continues the grammar";
      return this.finish("stop");
    }
    this.constraint.accept(token);
    return this.accept(token, logits);
  }

  /**
   * `logits`, or a copy with the sequence biases added and the banned tokens at -Infinity (the
   * caller's row is left as it is); logprobs then describe the distribution sampled from, as
   * transformers' scores do. transformers adds sequence_bias first and bans after (a bias then a
   * ban gives -Infinity either way); the repetition penalty, temperature and filters come after
   * all of them, in the sampler, as _get_logits_processor orders its processors and warpers
   */
  private banned(logits: Float32Array): Float32Array {
    const { noRepeatNgramSize: ngram = 0, minNewTokens = 0, suppressTokens = [], beginSuppressTokens = [], badWordsIds = [], sequenceBias = [], forcedBosTokenId: bos, forcedEosTokenId } = this.bans;
    const step = this.completionTokens.length;
    const promptLength = this.tokens.length - step;
    const holdEnd = step < minNewTokens;
    // _get_logits_processor moves SuppressTokensAtBegin's begin_index one on where a forced BOS fills a one-token prompt's first step
    const first = step === (bos !== undefined && promptLength === 1 ? 1 : 0);
    // ForcedEOS after ForcedBOS (one step may be both: the EOS wins), at cur_len == max_length - 1
    const eos = forcedEosTokenId === undefined || step !== this.rules.maxTokens - 1 ? undefined : typeof forcedEosTokenId === "number" ? [forcedEosTokenId] : forcedEosTokenId;
    const forced = eos ?? (bos !== undefined && this.tokens.length === 1 ? [bos] : undefined);
    if (forced) return this.forcedRow(logits.length, forced, suppressTokens, first ? beginSuppressTokens : []);
    if (ngram === 0 && !holdEnd && suppressTokens.length === 0 && !(first && beginSuppressTokens.length > 0) && badWordsIds.length === 0 && sequenceBias.length === 0) return logits;
    const ids = ngram > 0 ? bannedNgramTokens(this.tokens, ngram) : new Set<number>();
    if (holdEnd) for (const id of this.rules.endIds) ids.add(id);
    for (const id of suppressTokens) ids.add(id);
    if (first) for (const id of beginSuppressTokens) ids.add(id);
    for (const seq of badWordsIds) {
      // NoBadWordsLogitsProcessor leaves out a bad word that is an EOS token alone
      if (seq.length === 1 && this.rules.endIds.has(seq[0]!)) continue;
      if (completes(this.tokens, seq)) ids.add(seq[seq.length - 1]!);
    }
    const biases = new Map<number, number>();
    // as SequenceBiasLogitsProcessor: one-token sequences set their token's bias (a later pair for
    // the same sequence replaces an earlier), longer ones add theirs where they are completed
    const bySequence = new Map(sequenceBias.map(([seq, bias]) => [seq.join(","), [seq, bias] as const]));
    for (const [seq, bias] of bySequence.values()) if (seq.length === 1) biases.set(seq[0]!, bias);
    for (const [seq, bias] of bySequence.values()) {
      if (seq.length > 1 && completes(this.tokens, seq)) biases.set(seq[seq.length - 1]!, (biases.get(seq[seq.length - 1]!) ?? 0) + bias);
    }
    if (ids.size === 0 && biases.size === 0) return logits;
    const row = logits.slice();
    for (const [id, bias] of biases) if (id < row.length) row[id] = row[id]! + bias;
    for (const id of ids) if (id < row.length) row[id] = -Infinity;
    return row;
  }

  /**
   * ExponentialDecayLengthPenalty at this step, for the sampler to run after its penalties (where
   * _get_logits_processor puts it: after RepetitionPenaltyLogitsProcessor, which changes the EOS
   * logit it reads; after the bans and forced rows, before the suppressions, which ban either way).
   * Computed in float32 as torch does: |logit| * float32(factor^k - 1), added. An end token
   * already -Infinity (held back by minNewTokens, an n-gram, a forced row) stays so: transformers'
   * |-inf| * (factor^k - 1) makes it NaN there (greedy then takes it, sampling fails).
   */
  private decay(): ((row: Float32Array) => void) | undefined {
    const penalty = this.bans.exponentialDecayLengthPenalty;
    if (penalty === undefined) return undefined;
    const [start, factor] = penalty;
    const k = this.completionTokens.length - start;
    if (k <= 0) return undefined;
    const grow = Math.fround(factor ** k - 1);
    const ends = this.rules.endIds;
    return (row) => {
      for (const id of ends) {
        const v = row[id];
        if (v === undefined || v === -Infinity || Number.isNaN(v)) continue;
        row[id] = v + Math.fround(Math.abs(v) * grow);
      }
    };
  }

  /**
   * a forced step's row, as ForcedBOS/ForcedEOSTokenLogitsProcessor write it: -Infinity but the
   * forced tokens' 0 (what the processors before them did is overwritten); the suppressions come
   * after them in _get_logits_processor and still apply
   */
  private forcedRow(size: number, forced: readonly number[], suppressed: readonly number[], beginSuppressed: readonly number[]): Float32Array {
    const row = new Float32Array(size).fill(-Infinity);
    for (const id of forced) if (id < size) row[id] = 0;
    for (const id of [...suppressed, ...beginSuppressed]) if (id < size) row[id] = -Infinity;
    return row;
  }

  /** whether no further token may be generated (maxTokens reached, or the next one's position outside the context) */
  get full(): boolean {
    return this.completionTokens.length >= this.rules.maxTokens || this.tokens.length >= this.rules.contextSize;
  }

  /** takes `token` as the next one (chosen by the sampler or a strategy) and applies the stops; `logits` are needed for logprobs */
  accept(token: number, logits?: Float32Array): GenerationStep[] {
    const { endIds, ignoreEos } = this.rules;
    if (this.completionTokens.length === 0) this.firstTokenAt = performance.now();
    if (!ignoreEos && endIds.has(token)) {
      // scored like any token: a client adding up logprobs (or reading all but the last entry) needs the end token's too
      this.endToken = { token, ...(this.logprobs ? { logprob: this.scored(token, logits) } : {}) };
      return this.finish("stop");
    }
    this.completionTokens.push(token);
    this.tokens.push(token);
    const { emit, stopped } = this.stopMatcher.push(this.decoder.push(token));
    this.completion += emit;
    const step: TokenStep = { type: "token", token, text: emit };
    if (this.logprobs) {
      step.logprob = this.scored(token, logits);
      this.logprobs.push(step.logprob);
    }
    if (stopped) return [step, ...this.finish("stop")];
    const hit = this.lineWatch?.check(this.completion, emit, performance.now() - this.firstTokenAt);
    if (hit) return [step, ...this.finishAtLineLimit(hit)];
    if (this.full) return [step, ...this.finish("length")];
    return [step];
  }

  /**
   * ends the sequence at a line limit, as llama-server's STOP_TYPE_LIMIT; a cut drops the text
   * from `cutAt` on, what is held back included (a stream has had the token's text already, as
   * llama-server's partial results have)
   */
  private finishAtLineLimit(hit: LineLimitHit): GenerationStep[] {
    const steps = this.finish("length");
    if (this.finishReason === "length") this.finishDetail = hit.detail;
    if (hit.cutAt === undefined) return steps;
    this.completion = this.completion.slice(0, hit.cutAt);
    return [];
  }

  private scored(token: number, logits: Float32Array | undefined): TokenLogprob {
    if (!logits) throw new Error("logprobs need the logits the token was chosen from");
    if (this.rules.logprobsAfterSampling) return sampledLogprobs(this.sampler.lastProbabilities(), token, this.rules.topLogprobs!);
    return tokenLogprobs(logits, token, this.rules.topLogprobs!);
  }

  /**
   * ends the sequence (abort, or a sibling's decision); returns the held-back text's step, if any
   * (always one after an end-of-generation token: it carries the token to a stream's reader)
   */
  finish(reason: FinishReason): GenerationStep[] {
    if (this.done) return [];
    this.finishReason = reason;
    this.endedAt = performance.now();
    if (reason === "length") {
      const { contextSize, maxTokens } = this.rules;
      // (a request generating nothing, scoring a prompt that fills the context, was cut by its maxTokens 0, not by the context)
      this.finishDetail = this.tokens.length >= contextSize && maxTokens > 0 ? `context full (${contextSize} tokens)` : `maxTokens (${maxTokens}) reached`;
    }
    // the decoder's pending bytes and a partial stop-string match are released at the end, also
    // at an end-of-generation token or a complete grammar (after a stop string the matcher is
    // stopped and releases nothing)
    const { emit, stopped } = this.stopMatcher.push(this.decoder.flush());
    let tail = emit;
    if (stopped) { this.finishReason = "stop"; this.finishDetail = undefined; }
    else tail += this.stopMatcher.flush();
    this.completion += tail;
    if (this.endToken) return [{ type: "end", token: undefined, text: tail, endToken: this.endToken }];
    return tail ? [{ type: "end", token: undefined, text: tail }] : [];
  }
}
