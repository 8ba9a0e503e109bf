import { KVBlockPool, type KVCache } from "../cache/index.js";
import type { Sequence } from "../generation/index.js";
import { RunningSequence, type EngineRequest } from "./request.js";

/** One sequence's share of a step: the tokens the pass computes for it. */
export interface ScheduledChunk {
  readonly request: EngineRequest;
  readonly sequence: RunningSequence;
  /** tokens [cache.length, cache.length + tokens.length) of the sequence */
  readonly tokens: readonly number[];
  /** the chunk ends the sequence's pending tokens, so its last logits choose the next token */
  readonly wantsLogits: boolean;
}

/** What one step runs: plain data from the scheduler to the runner and the update. */
export interface StepPlan {
  readonly chunks: readonly ScheduledChunk[];
  /** requests that got room in this step (their queue time ends) */
  readonly admitted: readonly EngineRequest[];
}

export interface SchedulerLimits {
  /** tokens one step computes at most, decodes included (chunked prefill fills what the decodes leave) */
  readonly maxBatchTokens: number;
  /** sequences running at once (a request with n choices counts n) */
  readonly maxSequences: number;
  /** positions one sequence may hold */
  readonly contextSize: number;
}

/**
 * Each step: every running sequence that has sampled a token decodes it (one row each); the
 * token budget they leave goes to prompts still being prefilled, oldest first, in chunks; then
 * waiting requests are admitted in arrival order while sequences, budget and KV blocks allow.
 *
 * KV admission is worst-case: a request is admitted only when the blocks it may still need
 * (its prompt, maxTokens for every choice, a spare block for a fork's unaligned start) fit
 * beside what the running requests may still need, counting cached prefix blocks as room. So
 * a running request never finds the pool empty and nothing is ever preempted; a request that
 * does not fit waits for others to finish.
 */
export class Scheduler {
  readonly waiting: EngineRequest[] = [];
  readonly running: EngineRequest[] = [];
  /** blocks each sequence may still take: its worst case and its block count when it started */
  private readonly budgets = new Map<RunningSequence, { worst: number; base: number }>();
  /** how many of each sequence's leading blocks are registered as cached prefixes, and the last one's id */
  private readonly registered = new Map<RunningSequence, { blocks: number; id: number }>();

  constructor(
    readonly pool: KVBlockPool,
    readonly limits: SchedulerLimits,
    /** an empty KV cache of one sequence in the pool */
    private readonly newCache: () => KVCache,
    private readonly newSequence: (request: EngineRequest, choice: number) => Sequence,
  ) {}

  /** the most blocks a request can ever need (no prefix cached); throws when that exceeds the whole pool */
  admissible(request: EngineRequest): void {
    const need = this.worstBlocks(request, 0) + this.forkBlocks(request);
    if (need > this.pool.blockCount) {
      const { promptTokens, maxTokens, n } = request.params;
      const bs = this.pool.blockSize;
      throw new RangeError(
        `the request needs room for up to ${need * bs} tokens of KV cache (prompt ${promptTokens.length} + maxTokens ${maxTokens}${n > 1 ? `, ${n} choices` : ""}) ` +
          `but the KV cache holds ${this.pool.blockCount * bs} tokens (${this.pool.byteLength} bytes); lower maxTokens or raise kvCacheBytes`,
      );
    }
  }

  get runningSequences(): number {
    let n = 0;
    for (const r of this.running) n += r.prefilled ? r.sequences.filter((s) => !s.done).length : r.params.n;
    return n;
  }

  schedule(): StepPlan {
    const chunks: ScheduledChunk[] = [];
    let budget = this.limits.maxBatchTokens;
    // decodes first: each running sequence's sampled token
    for (const request of this.running) {
      if (!request.prefilled) continue;
      for (const sequence of request.sequences) {
        if (sequence.done || sequence.pending === 0) continue;
        chunks.push(chunkOf(request, sequence, sequence.pending));
        budget -= sequence.pending;
      }
    }
    // then prompts already admitted, oldest first
    for (const request of this.running) {
      if (budget <= 0) break;
      if (request.prefilled) continue;
      const sequence = request.sequences[0]!;
      const k = Math.min(sequence.pending, budget);
      chunks.push(chunkOf(request, sequence, k));
      budget -= k;
    }
    // then new requests, in arrival order (the first that does not fit holds the others back)
    const admitted: EngineRequest[] = [];
    while (this.waiting.length > 0 && budget > 0) {
      const request = this.waiting[0]!;
      if (this.runningSequences + request.params.n > this.limits.maxSequences) break;
      const sequence = this.admit(request);
      if (!sequence) break;
      this.waiting.shift();
      admitted.push(request);
      const k = Math.min(sequence.pending, budget);
      chunks.push(chunkOf(request, sequence, k));
      budget -= k;
    }
    return { chunks, admitted };
  }

  /**
   * The prompt's prefill is done: choices 1..n-1 fork the prompt's cache (sharing its rows,
   * nothing copied) and become sequences of their own.
   */
  fork(request: EngineRequest): void {
    const first = request.sequences[0]!;
    for (let choice = 1; choice < request.params.n; choice++) {
      const cache = first.cache.fork();
      const sequence = new RunningSequence(this.newSequence(request, choice), cache, choice);
      this.budgets.set(sequence, { worst: this.childBlocks(request), base: cache.blockCount });
      this.registered.set(sequence, { ...this.registered.get(first)! });
      request.sequences.push(sequence);
    }
  }

  /** takes a request out of the scheduler and returns its sequences' blocks to the pool */
  remove(request: EngineRequest): void {
    const w = this.waiting.indexOf(request);
    if (w >= 0) this.waiting.splice(w, 1);
    const r = this.running.indexOf(request);
    if (r >= 0) this.running.splice(r, 1);
    for (const s of request.sequences) this.retire(s);
  }

  /** a finished sequence keeps no blocks while its siblings run on (its cached prefixes stay, idle, for later requests) */
  retire(sequence: RunningSequence): void {
    sequence.cache.free();
    this.budgets.delete(sequence);
    this.registered.delete(sequence);
  }

  /**
   * Registers the sequence's blocks that are now full as cached prefixes (keyed by their tokens
   * and all before them), so a later request starting with the same tokens computes none of them.
   */
  cacheFullBlocks(sequence: RunningSequence): void {
    const state = this.registered.get(sequence);
    if (!state) return;
    const bs = this.pool.blockSize;
    while ((state.blocks + 1) * bs <= sequence.cache.length) {
      const block = sequence.cache.alignedBlock(state.blocks);
      if (block === undefined) {
        // a fork's own rows start mid-block: nothing after this is block-aligned
        this.registered.delete(sequence);
        return;
      }
      state.id = this.pool.register(block, KVBlockPool.prefixKey(state.id, sequence.sequence.tokens.slice(state.blocks * bs, (state.blocks + 1) * bs)));
      state.blocks++;
    }
  }

  /** the admitted request's first sequence (on its cached prefix), or undefined when its KV worst case does not fit yet */
  private admit(request: EngineRequest): RunningSequence | undefined {
    const { promptTokens } = request.params;
    const bs = this.pool.blockSize;
    // cached prefix blocks; at least the last prompt token is computed, for its logits
    const hits: number[] = [];
    let previous = 0;
    while ((hits.length + 1) * bs <= promptTokens.length - 1) {
      const found = this.pool.lookup(KVBlockPool.prefixKey(previous, promptTokens.slice(hits.length * bs, (hits.length + 1) * bs)));
      if (!found) break;
      hits.push(found.block);
      previous = found.id;
    }
    const revived = hits.filter((b) => this.pool.isIdle(b)).length;
    const need = this.worstBlocks(request, hits.length) + this.forkBlocks(request);
    if (need + revived > this.pool.availableBlocks - this.outstanding()) return undefined;

    const cache = this.newCache();
    cache.adoptPrefix(hits);
    const sequence = new RunningSequence(this.newSequence(request, 0), cache, 0);
    this.budgets.set(sequence, { worst: this.worstBlocks(request, hits.length), base: cache.blockCount });
    this.registered.set(sequence, { blocks: hits.length, id: previous });
    request.sequences.push(sequence);
    request.cachedPromptTokens = hits.length * bs;
    request.phase = "running";
    request.scheduledAt = performance.now();
    this.running.push(request);
    return sequence;
  }

  /** blocks the running sequences may still take */
  private outstanding(): number {
    let sum = 0;
    for (const [s, { worst, base }] of this.budgets) sum += Math.max(0, worst - (s.cache.blockCount - base));
    for (const r of this.running) if (!r.prefilled) sum += this.forkBlocks(r);
    return sum;
  }

  /** new blocks the prompt's sequence may take: its whole length less the cached prefix (+1: a sibling may take its next slot) */
  private worstBlocks(request: EngineRequest, cachedBlocks: number): number {
    const { promptTokens, maxTokens, n } = request.params;
    const length = Math.min(promptTokens.length + maxTokens, this.limits.contextSize);
    return Math.ceil(length / this.pool.blockSize) - cachedBlocks + (n > 1 ? 1 : 0);
  }

  /** blocks the forked choices may take (they share the prompt's) */
  private forkBlocks(request: EngineRequest): number {
    return (request.params.n - 1) * this.childBlocks(request);
  }

  private childBlocks(request: EngineRequest): number {
    return Math.ceil(request.params.maxTokens / this.pool.blockSize) + 1;
  }
}

function chunkOf(request: EngineRequest, sequence: RunningSequence, k: number): ScheduledChunk {
  const start = sequence.cache.length;
  return { request, sequence, tokens: sequence.sequence.tokens.slice(start, start + k), wantsLogits: k === sequence.pending };
}
