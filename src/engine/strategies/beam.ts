import { BeamSearch, type BeamSearchOptions, type GenerationResult, type Sequence } from "../../generation/index.js";
import type { TokenConstraint } from "../../sampling/constraints/index.js";
import { beamExtraBlocks } from "../request-checks.js";
import type { RunningSequence } from "../running-sequence.js";
import type { SequenceLogits, Strategy, StrategyHost, StrategyRequest } from "../strategy.js";
import { choiceOutcome } from "./sampling.js";

/**
 * Beam search on the engine: every live beam is a sequence of the request, all decoded in the
 * same step (with every other request's rows). After each step the search ranks the extensions
 * (generation/beam.ts); the first child of a beam continues its sequence, further children fork
 * it with forkCopy (every block shared but a partial last one, which is copied), so the beams
 * never hold more than one partial block each and the request's blocks are bounded in advance.
 * The best hypothesis is emitted once the search ends; TTFT is when the first step ranked the
 * prompt's extensions, TPOT the time per step after it. Under admission "preempt" the request is
 * preempted as a unit (every beam's blocks freed) and recomputed (see `recomputable`).
 */
export class BeamStrategy implements Strategy {
  private readonly search: BeamSearch;
  private live: RunningSequence[] = [];
  private output: Sequence | undefined;
  private firstStepAt = 0;
  private beams: GenerationResult["beams"];
  readonly width: number;

  constructor(
    promptTokens: readonly number[],
    private readonly options: BeamSearchOptions,
    vocabSize: number,
    private readonly makeSequence: (choice: number) => Sequence,
    private readonly decode: (tokens: readonly number[]) => string,
    /** a grammar every beam follows: each beam keeps its own parse (forked with the beam) */
    constraint?: TokenConstraint,
  ) {
    this.search = new BeamSearch(promptTokens, options, vocabSize);
    this.width = options.numBeams;
    this.constraints = constraint ? [constraint] : undefined;
  }

  /** each live beam's parse, in the order of `live` */
  private constraints: TokenConstraint[] | undefined;

  /**
   * each beam is a sequence whose tokens say everything its KV holds (the search's scores and
   * hypotheses are kept here): the beams are recomputed together, the prompt once and each beam's
   * tokens past what it has in common with an earlier beam on a "share" fork of that beam's rows
   * (Scheduler.preempt, recomputeFork); later forks copy from there
   */
  readonly recomputable = true;

  extraBlocks(blockSize: number): number {
    return beamExtraBlocks(this.options.numBeams, this.options.maxTokens, blockSize);
  }

  /** a step forks at most numBeams - 1 beams (the others continue their parents), each copying a partial block */
  stepBlocks(): number {
    return this.options.numBeams - 1;
  }

  get done(): boolean {
    return this.output?.done ?? false;
  }

  start(request: StrategyRequest, first: RunningSequence, logits: Float32Array, host: StrategyHost): void {
    this.firstStepAt = performance.now();
    this.live = [first];
    this.advance(request, [logits], host);
  }

  step(request: StrategyRequest, results: readonly SequenceLogits[], host: StrategyHost): void {
    // the search ranks every live beam's extensions at once; after a preemption the beams'
    // recomputes may end in different steps: the logits of those done first wait for the others
    // (copied: a pass's outputs are only promised for its own step)
    const held = this.held;
    for (const r of results) held.set(r.seq, results.length === this.live.length ? r.logits : r.logits.slice());
    if (!this.live.every((b) => held.has(b))) return;
    const logits = this.live.map((b) => held.get(b)!);
    held.clear();
    this.advance(request, logits, host);
  }

  /** each live beam's logits this step, until every one has them */
  private readonly held = new Map<RunningSequence, Float32Array>();

  abort(request: StrategyRequest): void {
    if (this.done) return;
    this.output ??= this.makeSequence(0);
    request.emit(0, this.output.finish("abort"), this.output.finishReason);
  }

  outcome(now: number): ReturnType<Strategy["outcome"]> {
    return { choices: [choiceOutcome(this.output, now, false)], extra: this.beams ? { beams: this.beams } : {} };
  }

  private advance(request: StrategyRequest, logits: readonly Float32Array[], host: StrategyHost): void {
    const parses = this.constraints;
    const next = this.search.step(logits, parses && ((beam, lp) => void parses[beam]!.mask(lp)));
    if (!next) {
      for (const b of this.live) host.retire(request, b);
      this.live = [];
      this.finish(request);
      return;
    }
    const before = this.live.map((b) => b.tokens.slice());
    const continued = new Set<number>();
    const children = next.map((ext) => {
      const parent = this.live[ext.parent]!;
      if (continued.has(ext.parent)) return host.fork(request, parent, [...before[ext.parent]!, ext.token], "copy");
      continued.add(ext.parent);
      parent.tokens.push(ext.token);
      return parent;
    });
    this.live.forEach((b, i) => { if (!continued.has(i)) host.retire(request, b); });
    this.live = children;
    if (parses) {
      this.constraints = next.map((ext) => {
        const c = parses[ext.parent]!.fork();
        c.accept(ext.token);
        return c;
      });
    }
  }

  /** the best hypothesis goes out through a Sequence: stop strings, streaming text, maxTokens */
  private finish(request: StrategyRequest): void {
    const sequences = this.search.result();
    this.beams = sequences.map((b) => ({ ...b, text: this.decode(b.tokens) }));
    const best = sequences[0];
    const out = (this.output = this.makeSequence(0));
    const steps = [];
    for (const token of best?.tokens ?? []) {
      steps.push(...out.accept(token));
      if (out.done) break;
    }
    if (!out.done) steps.push(...out.finish(best?.finished ? "stop" : "length"));
    if (out.completionTokens.length > 0) out.firstTokenAt = this.firstStepAt;
    request.emit(0, steps, out.finishReason);
  }
}
