import type { Sequence } from "../../generation/index.js";
import { choicesExtraBlocks } from "../request-checks.js";
import type { RunningSequence } from "../running-sequence.js";
import type { ChoiceOutcome, SequenceLogits, Strategy, StrategyHost, StrategyRequest } from "../strategy.js";

/** a choice's outcome from its sequence (or an empty, aborted one when it never started) */
export function choiceOutcome(out: Sequence | undefined, now: number, withLogprobs: boolean): ChoiceOutcome {
  if (!out) return { completion: "", completionTokens: [], finishReason: "abort", ...(withLogprobs ? { logprobs: [] } : {}), firstTokenAt: 0, endedAt: now };
  return {
    completion: out.completion, completionTokens: out.completionTokens, finishReason: out.finishReason ?? "abort", ...(out.finishDetail ? { finishDetail: out.finishDetail } : {}),
    ...(out.logprobs ? { logprobs: out.logprobs } : {}), ...(out.endToken ? { endToken: out.endToken } : {}), firstTokenAt: out.firstTokenAt, endedAt: out.endedAt || now,
  };
}

/**
 * Sampling, one or `n` choices: the prompt is computed once; choices 1..n-1 then fork its cache
 * (sharing its rows, nothing copied), every choice samples its first token from the prompt's
 * last logits with its own sampler (seed + i) and from then on decodes as a sequence of its own.
 */
export class SamplingStrategy implements Strategy {
  private readonly outputs: Sequence[] = [];
  private readonly choiceOf = new Map<RunningSequence, number>();

  constructor(
    readonly width: number,
    /** tokens each choice may generate: maxTokens within the context */
    private readonly room: number,
    private readonly makeSequence: (choice: number) => Sequence,
    private readonly withLogprobs: boolean,
  ) {}

  /**
   * each choice is a sequence whose tokens say everything its KV holds (its sampler, stops and
   * what it emitted are kept here): n choices are recomputed together, the prompt once and each
   * choice's tokens on a fork of it (Scheduler.preempt)
   */
  readonly recomputable = true;

  extraBlocks(blockSize: number): number {
    return choicesExtraBlocks(this.width, this.room, blockSize);
  }

  get done(): boolean {
    return this.outputs.length === this.width && this.outputs.every((o) => o.done);
  }

  start(request: StrategyRequest, first: RunningSequence, logits: Float32Array, host: StrategyHost): void {
    for (let choice = 0; choice < this.width; choice++) {
      const out = this.makeSequence(choice);
      this.outputs.push(out);
      if (choice === 0) {
        first.tokens = out.tokens;
        this.choiceOf.set(first, 0);
      } else {
        this.choiceOf.set(host.fork(request, first, out.tokens, "share"), choice);
      }
    }
    for (const [seq, choice] of [...this.choiceOf]) this.advance(request, seq, choice, logits, host);
  }

  step(request: StrategyRequest, results: readonly SequenceLogits[], host: StrategyHost): void {
    for (const { seq, logits } of results) this.advance(request, seq, this.choiceOf.get(seq)!, logits, host);
  }

  abort(request: StrategyRequest): void {
    this.outputs.forEach((out, choice) => {
      if (!out.done) request.emit(choice, out.finish("abort"), out.finishReason);
    });
  }

  outcome(now: number): ReturnType<Strategy["outcome"]> {
    return { choices: Array.from({ length: this.width }, (_, i) => choiceOutcome(this.outputs[i], now, this.withLogprobs)), extra: {} };
  }

  private advance(request: StrategyRequest, seq: RunningSequence, choice: number, logits: Float32Array, host: StrategyHost): void {
    const out = this.outputs[choice]!;
    request.emit(choice, out.advance(logits), out.finishReason);
    if (out.done) {
      seq.finished = true;
      this.choiceOf.delete(seq);
      host.retire(request, seq);
    }
  }
}
