import { SpeculativeDecoder, type GenerationStep, type Sequence, type SpeculativeOptions } from "../../generation/index.js";
import { speculativeExtraBlocks } from "../request-checks.js";
import type { RunningSequence } from "../running-sequence.js";
import type { LanguageModel } from "../../models/index.js";
import type { DraftRound, SequenceLogits, Strategy, StrategyHost, StrategyRequest } from "../strategy.js";
import { choiceOutcome } from "./sampling.js";

/**
 * Speculative decoding on the engine: each round the decoder drafts (a draft model on its own
 * cache, or prompt lookup), the engine computes cur + the proposal as one chunk of the
 * request's sequence, with every position's logits, in the step's shared pass; the decoder
 * keeps the accepted tokens (the cache is truncated to them) and the target's own next token.
 * Accepted tokens are emitted as soon as they are final.
 */
export class SpeculativeStrategy implements Strategy {
  readonly width = 1;
  private decoder: SpeculativeDecoder | undefined;
  private output: Sequence | undefined;
  private seq: RunningSequence | undefined;
  private pending: GenerationStep[] = [];
  /** the draft model's passes the last round left for the engine to run */
  private next: DraftRound | undefined;

  constructor(
    private readonly vocabSize: number,
    private readonly promptTokens: readonly number[],
    /** the decoder's options but the chooser and sampling, which come from the output sequence's sampler */
    private readonly options: (out: Sequence) => SpeculativeOptions,
    private readonly draftTokens: number,
    /** tokens it may generate (the context's room) */
    private readonly maxTokens: number,
    private readonly makeSequence: (choice: number) => Sequence,
    /**
     * blocks of the engine's pool that a draft model's cache of `positions` positions takes (its
     * bytes, in whole blocks of its own pool); undefined: prompt lookup, or a draft pool of its
     * planned size (its own room, Engine.planDraftCache). The draft's cache lives in the draft
     * model's pool, but without a plan it counts against the same budget
     */
    private readonly draftPoolBlocks?: (positions: number) => number,
    /** the draft model its proposals' passes run on (the engine batches them with other requests'); undefined: prompt lookup */
    private readonly draftModel?: LanguageModel,
  ) {}

  /**
   * the sequence's tokens (accepted ones, then the pending proposal) say everything its KV holds,
   * and the decoder's state (proposal, RNG, stops) is kept, so a preempted request recomputes the
   * accepted rows and verifies its proposal as before. A draft model's cache is given back at the
   * preemption (preempted) and computed again from the accepted tokens at the next proposal
   */
  readonly recomputable = true;

  /** a draft model's cache counts against the pool (a draft pool without a plan, see draftPoolBlocks) */
  get chargesOutside(): boolean {
    return this.draftPoolBlocks !== undefined;
  }

  extraBlocks(blockSize: number): number {
    return speculativeExtraBlocks(this.promptTokens.length, this.maxTokens, this.draftTokens, blockSize, this.draftPoolBlocks);
  }

  /** the pool's blocks the draft's cache holds now (outside the pool, charged against its room) */
  outsideBlocks(): number {
    return this.draftPoolBlocks?.(this.decoder?.draftLength ?? 0) ?? 0;
  }

  /** the draft's cache grows after the pass: the next verify's accepted tokens caught up and the next proposal drafted */
  stepBlocks(): number {
    if (!this.draftPoolBlocks) return 0;
    const after = this.decoder?.draftLengthAfterRound ?? this.promptTokens.length + 2 * this.draftTokens;
    return Math.max(0, this.draftPoolBlocks(after) - this.outsideBlocks());
  }

  preempted(): void {
    this.decoder?.release();
  }

  release(): void {
    this.decoder?.release();
  }

  get done(): boolean {
    return this.output?.done ?? false;
  }

  start(request: StrategyRequest, first: RunningSequence, logits: Float32Array, host: StrategyHost): void {
    const out = (this.output = this.makeSequence(0));
    this.seq = first;
    this.decoder = new SpeculativeDecoder(this.vocabSize, this.promptTokens, {
      ...this.options(out),
      // each accepted token goes out at once; a stop string (or maxTokens) ends the decoding
      onToken: (t) => {
        this.pending.push(...out.accept(t));
        return out.done;
      },
    });
    this.decoder.first(logits);
    this.round(request, host);
  }

  step(request: StrategyRequest, results: readonly SequenceLogits[], host: StrategyHost): void {
    const decoder = this.decoder!, seq = this.seq!;
    decoder.verify(results[0]!.logits);
    seq.cache.truncate(decoder.keptPositions());
    this.round(request, host);
  }

  drafting(): DraftRound | undefined {
    const round = this.next;
    this.next = undefined;
    return round;
  }

  abort(request: StrategyRequest): void {
    if (this.done) return;
    this.output ??= this.makeSequence(0);
    request.emit(0, this.output.finish("abort"), this.output.finishReason);
  }

  outcome(now: number): ReturnType<Strategy["outcome"]> {
    return { choices: [choiceOutcome(this.output, now, false)], extra: this.decoder ? { speculative: this.decoder.result().stats } : {} };
  }

  /**
   * emits what the last round accepted; ends, or drafts the next round for the engine to verify:
   * by prompt lookup at once, with a draft model in passes the engine runs (drafting)
   */
  private round(request: StrategyRequest, host: StrategyHost): void {
    const decoder = this.decoder!, out = this.output!, seq = this.seq!;
    if (decoder.ended && !out.done) this.pending.push(...out.finish(decoder.finishReason));
    request.emit(0, this.pending, out.finishReason);
    this.pending = [];
    if (out.done) {
      seq.finished = true;
      host.retire(request, seq);
      return;
    }
    const passes = decoder.drafting();
    const finish = () => {
      seq.tokens = [...decoder.seq.slice(0, -1), ...decoder.verifyTokens()];
      seq.allLogits = true;
    };
    if (this.draftModel) return void (this.next = { model: this.draftModel, passes, finish });
    // (prompt lookup: no pass)
    if (!passes.next().done) throw new Error("prompt lookup drafted with a model pass");
    finish();
  }
}
