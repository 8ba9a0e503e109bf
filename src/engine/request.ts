import type { ConstraintSpec } from "../sampling/constraints/index.js";
import type { FinishReason, GenerationResult, GenerationStep, LineLimits, PromptLogprobs, TokenBans, TokenLogprob } from "../generation/index.js";
import type { LanguageModel } from "../models/index.js";
import type { SamplingOptions } from "../sampling/index.js";
import type { RunningSequence } from "./running-sequence.js";
import type { ChoiceOutcome, Strategy, StrategyRequest } from "./strategy.js";

/** how a request chooses its tokens */
export type Decoding =
  | ({
      readonly kind: "sample"; readonly n: number;
    } & TokenBans)
  | {
      readonly kind: "beam"; readonly numBeams: number; readonly lengthPenalty?: number; readonly earlyStopping?: boolean | "never";
      readonly numReturnSequences?: number; readonly noRepeatNgramSize?: number;
    }
  | { readonly kind: "speculative"; readonly draft?: LanguageModel; readonly draftTokens?: number; readonly promptLookup?: number };

/** What a caller asks the engine for: token ids in, completions out. */
export interface RequestParams {
  readonly promptTokens: readonly number[];
  readonly decoding: Decoding;
  /** sampling options with the seed resolved (choice 0's; choice i of n samples with seed + i) */
  readonly sampling: SamplingOptions & { seed: number };
  readonly maxTokens: number;
  readonly stop: readonly string[];
  /** token ids that end a completion besides the tokenizer's end-of-generation tokens */
  readonly stopTokens: readonly number[];
  readonly ignoreEos: boolean;
  readonly topLogprobs: number | undefined;
  /** the logprobs are the sampled-from distribution's (after the sampling chain), not the model's */
  readonly logprobsAfterSampling?: boolean;
  /**
   * score the prompt: every prompt token's logprob given the tokens before it, with the top
   * `promptLogprobs` alternatives (undefined: none). The prompt is then computed whole (no cached
   * prefix: its positions' logits are needed), each chunk's rows in the same pass as ever
   */
  readonly promptLogprobs?: number;
  readonly signal?: AbortSignal;
  /** what the output must be (a grammar, a JSON Schema, JSON, a choice): only tokens that keep it so are sampled */
  readonly constraint?: ConstraintSpec;
  /**
   * special tokens, by text, that the constraint may take where its grammar writes that text as a
   * literal (a tool format's call markers), and whose text the completion keeps (llama.cpp's
   * preserved tokens); other special tokens stay out of constrained output and its text
   */
  readonly preservedTokens?: readonly string[];
  /** llama-server's n_indent and t_max_predict_ms: a completion's lines that end it */
  readonly lineLimits?: LineLimits;
  /** the slot (0..maxSequences-1) its first sequence runs in: it waits until that slot is free (llama-server's id_slot) */
  readonly slot?: number;
}

/** what happened to one choice, told apart by `type`: a step (a token and its text, or its end step), or its end */
export type RequestEvent =
  | { readonly type: "step"; readonly choice: number; readonly step: GenerationStep; readonly finishReason?: undefined }
  | { readonly type: "finish"; readonly choice: number; readonly step?: undefined; readonly finishReason: FinishReason };

/** A finished request: every choice and when things happened (performance.now() times). */
export interface RequestOutcome {
  readonly promptTokens: number[];
  /** with promptLogprobs: one entry per prompt token, null for the first (nothing before it predicts it) */
  readonly promptLogprobs?: PromptLogprobs;
  readonly choices: ChoiceOutcome[];
  /** what a strategy reports besides its choices (beam search's beams, speculative decoding's acceptance) */
  readonly extra: Pick<GenerationResult, "beams" | "speculative">;
  readonly submittedAt: number;
  /** when the scheduler first gave it room (its queue time ends) */
  readonly scheduledAt: number;
  /** when the last prompt token's pass ended (0: never prefilled, e.g. aborted while waiting) */
  readonly prefilledAt: number;
  readonly endedAt: number;
  /** prompt tokens whose K/V came from the prefix cache instead of being computed */
  readonly cachedPromptTokens: number;
}

type Phase = "waiting" | "running" | "finished";

/**
 * A request inside the engine: its parameters, where it is in its life (waiting for room,
 * running, finished), the sequences its strategy runs and the stream of events it emits.
 * Events and the outcome are buffered, so a consumer may start reading late and still sees
 * every step.
 */
export class EngineRequest implements AsyncIterable<RequestEvent>, StrategyRequest {
  phase: Phase = "waiting";
  /** the prompt's sequence first; the strategy adds and retires others */
  readonly sequences: RunningSequence[] = [];
  readonly submittedAt = performance.now();
  scheduledAt = 0;
  prefilledAt = 0;
  cachedPromptTokens = 0;
  /** KV blocks it may hold at once beyond its cached prefix (its worst case, reserved at admission) */
  reservedBlocks = 0;
  /** times it was preempted (its blocks freed, recomputed later) */
  preemptions = 0;
  /**
   * the slot each of its places ran in last (SlotTable.sync; place i is choice i's sequence, as the
   * strategies fork them in choice order): llama-server's id_slot in a reply. Empty until it runs.
   */
  readonly slots: number[] = [];
  /** with params.promptLogprobs: the prompt tokens scored so far (the engine adds each chunk's) */
  readonly promptLogprobs: (TokenLogprob | null)[] | undefined;
  private readonly events: RequestEvent[] = [];
  /** events the reader has taken; undefined while nobody reads them (a caller awaiting only the outcome) */
  private read: number | undefined;
  private waiter: (() => void) | undefined;
  private outcomeValue: RequestOutcome | undefined;
  private failure: unknown;
  private settled = false;
  private cancelled = false;
  /** set by the engine: wakes its loop to sweep the request out when it is cancelled */
  onCancel: (() => void) | undefined;
  /** resolves with the outcome (or rejects with the engine's error) when the request ends */
  readonly outcome: Promise<RequestOutcome>;
  /** resolves with promptLogprobs once the prompt is computed (or the request has ended before) */
  readonly prompt: Promise<PromptLogprobs | undefined>;
  private resolvePrompt!: () => void;
  private resolveOutcome!: (o: RequestOutcome) => void;
  private rejectOutcome!: (e: unknown) => void;

  constructor(readonly id: number, readonly params: RequestParams, readonly strategy: Strategy) {
    this.promptLogprobs = params.promptLogprobs === undefined ? undefined : [null];
    this.outcome = new Promise((resolve, reject) => {
      this.resolveOutcome = resolve;
      this.rejectOutcome = reject;
    });
    // a caller that only iterates the events must not see an unhandled rejection
    this.outcome.catch(() => undefined);
    this.prompt = new Promise<void>((resolve) => (this.resolvePrompt = resolve)).then(() => this.promptLogprobs);
  }

  get aborted(): boolean {
    return this.cancelled || this.params.signal?.aborted === true;
  }

  /**
   * Ends the request as its signal's abort would (finish reason "abort"): for a caller that left
   * its events (Model.submit's events() or steps() left early), whose request would otherwise wait
   * for a reader forever past the backlog limit, holding its slot and KV blocks. No-op once ended.
   */
  cancel(): void {
    if (this.settled || this.cancelled) return;
    this.cancelled = true;
    this.onCancel?.();
  }

  /** preempted after its prefill: some of its sequences' tokens so far are still to be recomputed (RunningSequence.recomputing) */
  get recomputing(): boolean {
    return this.sequences.some((s) => s.recomputing);
  }

  /** whether the prompt has been computed (the strategy has started) */
  get prefilled(): boolean {
    return this.prefilledAt > 0;
  }

  /** the prompt's last chunk has been computed (and scored, with promptLogprobs) */
  markPrefilled(): void {
    this.prefilledAt = performance.now();
    this.resolvePrompt();
  }

  /** queues a choice's steps, and its end when `finished` says it ended */
  emit(choice: number, steps: readonly GenerationStep[], finished?: FinishReason): void {
    for (const step of steps) this.events.push({ type: "step", choice, step });
    if (finished !== undefined) this.events.push({ type: "finish", choice, finishReason: finished });
    this.wake();
  }

  /** ends the request with its strategy's results */
  complete(): void {
    if (this.settled) return;
    this.settled = true;
    this.phase = "finished";
    const now = performance.now();
    const { choices, extra } = this.strategy.outcome(now);
    this.outcomeValue = {
      promptTokens: [...this.params.promptTokens], ...(this.promptLogprobs ? { promptLogprobs: this.promptLogprobs } : {}), choices, extra, submittedAt: this.submittedAt, scheduledAt: this.scheduledAt || now,
      prefilledAt: this.prefilledAt, endedAt: now, cachedPromptTokens: this.cachedPromptTokens,
    };
    this.resolveOutcome(this.outcomeValue);
    this.resolvePrompt();
    this.wake();
  }

  /** ends the request with an error (its events so far stay readable) */
  fail(error: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.phase = "finished";
    this.failure = error;
    this.rejectOutcome(error);
    this.resolvePrompt();
    this.wake();
  }

  /**
   * The reader is this many events behind: the scheduler pauses the request past a limit, so a
   * slow consumer (a client reading its stream slowly) holds the request back instead of making
   * its events pile up without bound.
   */
  get backlog(): number {
    return this.read === undefined ? 0 : this.events.length - this.read;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<RequestEvent, void> {
    this.read = 0;
    for (;;) {
      while (this.read < this.events.length) yield this.events[this.read++]!;
      if (this.settled) {
        if (this.outcomeValue === undefined) throw this.failure;
        return;
      }
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }
}
