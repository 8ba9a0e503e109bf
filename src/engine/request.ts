import type { KVCache } from "../cache/index.js";
import type { FinishReason, GenerationStep, Sequence, TokenLogprob } from "../generation/index.js";
import type { SamplingOptions } from "../sampling/index.js";

/** A sequence the engine runs: its lifecycle and the KV cache (in the engine's pool) its tokens are computed into. */
export class RunningSequence {
  constructor(
    readonly sequence: Sequence,
    readonly cache: KVCache,
    /** which of the request's choices it is */
    readonly choice: number,
  ) {}

  /** its end has been queued as an event */
  reported = false;

  get done(): boolean {
    return this.sequence.done;
  }

  /** tokens whose K/V the cache does not hold yet */
  get pending(): number {
    return this.sequence.tokens.length - this.cache.length;
  }
}

/** What a caller asks the engine for: token ids in, `n` completions out. */
export interface RequestParams {
  readonly promptTokens: readonly number[];
  /** completions sharing the prompt's prefill; choice i samples with seed + i */
  readonly n: number;
  /** sampling options with the seed resolved (choice 0's) */
  readonly sampling: SamplingOptions & { seed: number };
  readonly maxTokens: number;
  readonly stop: readonly string[];
  /** token ids that end a completion besides the tokenizer's end-of-generation tokens */
  readonly stopTokens: readonly number[];
  readonly ignoreEos: boolean;
  readonly topLogprobs: number | undefined;
  readonly signal?: AbortSignal;
}

/** what happened to one choice: a step (a token and its text), or its end */
export type RequestEvent =
  | { readonly choice: number; readonly step: GenerationStep; readonly finishReason?: undefined }
  | { readonly choice: number; readonly step?: undefined; readonly finishReason: FinishReason };

export interface ChoiceOutcome {
  readonly completion: string;
  readonly completionTokens: number[];
  readonly finishReason: FinishReason;
  readonly logprobs?: TokenLogprob[];
  /** performance.now() of its first token (0: none) and of its end */
  readonly firstTokenAt: number;
  readonly endedAt: number;
}

/** A finished request: every choice and when things happened (performance.now() times). */
export interface RequestOutcome {
  readonly promptTokens: number[];
  readonly choices: ChoiceOutcome[];
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
 * running, finished), its sequences (one while the prompt is prefilled; `n` after) and the
 * stream of events it emits. Events and the outcome are buffered, so a consumer may start
 * reading late and still sees every step.
 */
export class EngineRequest implements AsyncIterable<RequestEvent> {
  phase: Phase = "waiting";
  /** the prompt's sequence first; the other choices join when the prompt is prefilled */
  readonly sequences: RunningSequence[] = [];
  readonly submittedAt = performance.now();
  scheduledAt = 0;
  prefilledAt = 0;
  cachedPromptTokens = 0;
  private readonly events: RequestEvent[] = [];
  private waiter: (() => void) | undefined;
  private outcomeValue: RequestOutcome | undefined;
  private failure: unknown;
  private settled = false;
  /** resolves with the outcome (or rejects with the engine's error) when the request ends */
  readonly outcome: Promise<RequestOutcome>;
  private resolveOutcome!: (o: RequestOutcome) => void;
  private rejectOutcome!: (e: unknown) => void;

  constructor(readonly id: number, readonly params: RequestParams) {
    this.outcome = new Promise((resolve, reject) => {
      this.resolveOutcome = resolve;
      this.rejectOutcome = reject;
    });
    // a caller that only iterates the events must not see an unhandled rejection
    this.outcome.catch(() => undefined);
  }

  get aborted(): boolean {
    return this.params.signal?.aborted === true;
  }

  /** whether the prompt has been computed and every choice has its sequence */
  get prefilled(): boolean {
    return this.prefilledAt > 0;
  }

  /** queues a sequence's steps, and its end once it is done (reported once) */
  emit(seq: RunningSequence, steps: readonly GenerationStep[]): void {
    for (const step of steps) this.events.push({ choice: seq.choice, step });
    if (seq.done && !seq.reported) {
      seq.reported = true;
      this.events.push({ choice: seq.choice, finishReason: seq.sequence.finishReason! });
    }
    this.wake();
  }

  /** ends the request with its sequences' results */
  complete(): void {
    if (this.settled) return;
    this.settled = true;
    this.phase = "finished";
    const now = performance.now();
    const choices: ChoiceOutcome[] = [];
    for (let i = 0; i < this.params.n; i++) {
      const s = this.sequences[i]?.sequence;
      choices.push(s ? {
        completion: s.completion, completionTokens: s.completionTokens, finishReason: s.finishReason ?? "abort",
        ...(s.logprobs ? { logprobs: s.logprobs } : {}), firstTokenAt: s.firstTokenAt, endedAt: s.endedAt || now,
      } : { completion: "", completionTokens: [], finishReason: "abort", ...(this.params.topLogprobs === undefined ? {} : { logprobs: [] }), firstTokenAt: 0, endedAt: now });
    }
    this.outcomeValue = {
      promptTokens: [...this.params.promptTokens], choices, submittedAt: this.submittedAt, scheduledAt: this.scheduledAt || now,
      prefilledAt: this.prefilledAt, endedAt: now, cachedPromptTokens: this.cachedPromptTokens,
    };
    this.resolveOutcome(this.outcomeValue);
    this.wake();
  }

  /** ends the request with an error (its events so far stay readable) */
  fail(error: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.phase = "finished";
    this.failure = error;
    this.rejectOutcome(error);
    this.wake();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<RequestEvent, void> {
    let read = 0;
    for (;;) {
      while (read < this.events.length) yield this.events[read++]!;
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
