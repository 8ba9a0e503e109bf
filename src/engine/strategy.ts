import type { DraftPass, EndToken, FinishDetail, FinishReason, GenerationResult, GenerationStep, TokenLogprob } from "../generation/index.js";
import type { LanguageModel } from "../models/index.js";
import type { RunningSequence } from "./running-sequence.js";

export interface ChoiceOutcome {
  readonly completion: string;
  readonly completionTokens: number[];
  readonly finishReason: FinishReason;
  readonly finishDetail?: FinishDetail;
  readonly logprobs?: TokenLogprob[];
  readonly endToken?: EndToken;
  /** performance.now() of its first token (0: none) and of its end */
  readonly firstTokenAt: number;
  readonly endedAt: number;
}

/** What a strategy sees of its request: the sequences it runs and where its events go. */
export interface StrategyRequest {
  /** the prompt's sequence first; forks join, retired ones leave */
  readonly sequences: RunningSequence[];
  /** queues a choice's steps, and its end when `finished` says it ended */
  emit(choice: number, steps: readonly GenerationStep[], finished?: FinishReason): void;
}

/** What a strategy may ask of the scheduler that runs its request's sequences. */
export interface StrategyHost {
  /**
   * A new sequence of the request holding `parent`'s computed positions and then `tokens`
   * (parent's computed ones first): "share" references the parent's blocks, its partial last
   * one included (nothing copied); "copy" copies a partial last block (see KVCache.forkCopy).
   */
  fork(request: StrategyRequest, parent: RunningSequence, tokens: number[], how: "share" | "copy"): RunningSequence;
  /** the sequence leaves the request; its blocks go back to the pool */
  retire(request: StrategyRequest, seq: RunningSequence): void;
}

/** one sequence's logits from a step: its last token's row, or every computed token's rows (allLogits) back to back */
export interface SequenceLogits {
  readonly seq: RunningSequence;
  readonly logits: Float32Array;
}

/**
 * How a request turns logits into tokens: sampling (one or `n` choices), beam search,
 * speculative decoding. The engine computes the request's pending tokens; the strategy
 * chooses what comes next, emits the request's events as they happen and says when it is done.
 */
export interface Strategy {
  /** sequences it runs at once at most (for the scheduler's limit) */
  readonly width: number;
  /**
   * its request may be preempted (admission "preempt"): its sequences' blocks freed and
   * recomputed later from their tokens (the prompt once, the other sequences forking off the first
   * at the prompt's end, "share"), the strategy's state (samplers, stops, beams' scores, what it
   * emitted) kept. A sequence that wants every row's logits (a speculative proposal) recomputes
   * only the rows before its pending tokens, which are then computed as before. Its sequences'
   * last recompute chunks may end in different steps: `step` then gets some of them at a time. Rows
   * it holds outside the pool (a draft model's cache) are given back at the preemption (`preempted`)
   * and computed again from its tokens; while it runs they count against the pool's room
   * (`outsideBlocks`, and `stepBlocks` for their growth)
   */
  readonly recomputable?: boolean;
  /** KV blocks it may hold at once beyond its first sequence's own prompt + maxTokens positions */
  extraBlocks(blockSize: number): number;
  /**
   * KV blocks its next start / step may take outside the pass, at most (beams forking with forkCopy
   * copy a partial block each; a draft model's cache grows); a preemptible request's step is planned
   * with them
   */
  stepBlocks?(): number;
  /** the pool's blocks' worth of rows it holds outside the pool now (a draft model's cache, in the draft's pool) */
  outsideBlocks?(): number;
  /** whether rows it holds outside the pool count in its worst case (extraBlocks), which a refusal then names */
  readonly chargesOutside?: boolean;
  /** its request was preempted: give back the rows it holds outside the pool (they are computed again from its tokens) */
  preempted?(): void;
  /** the prompt is computed (`first` holds it): its last logits */
  start(request: StrategyRequest, first: RunningSequence, logits: Float32Array, host: StrategyHost): void;
  /** this step's logits for every sequence of the request that had pending tokens */
  step(request: StrategyRequest, results: readonly SequenceLogits[], host: StrategyHost): void;
  /**
   * the draft-model passes its last start or step left to run (speculative decoding's proposal),
   * once: the engine runs them before it schedules the next step
   */
  drafting?(): DraftRound | undefined;
  /** the request was aborted: end every choice, emitting what is held back */
  abort(request: StrategyRequest): void;
  /** the request has left the engine, however it ended: give back what the strategy holds outside the pool (a draft model's cache) */
  release?(): void;
  /** every choice has ended */
  readonly done: boolean;
  /** the choices (choice 0 first) and the strategy's extras, for the outcome */
  outcome(now: number): { choices: ChoiceOutcome[]; extra: Pick<GenerationResult, "beams" | "speculative"> };
}

/**
 * The passes of a draft model a request's start or step needs before its next step (a speculative
 * proposal). The engine runs them in lockstep with the other requests' rounds of the step: the
 * passes of every request drafting with the same model as one batched pass (each sequence's rows
 * computed as alone), then `finish`.
 */
export interface DraftRound {
  /** the model the passes run on: requests drafting with the same one batch their passes */
  readonly model: LanguageModel;
  /** yields each pass and takes its last logits; returns once the proposal is drafted */
  readonly passes: Generator<DraftPass, void, Float32Array>;
  /** the proposal is drafted: the request's sequence takes the tokens to verify next */
  finish(): void;
}
