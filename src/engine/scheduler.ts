import { KVBlockPool, type KVCache } from "../cache/index.js";
import { RequestError } from "./errors.js";
import type { EngineRequest } from "./request.js";
import { RunningSequence } from "./running-sequence.js";
import type { StrategyHost, StrategyRequest } from "./strategy.js";

/** events a request's reader may fall behind before the request stops decoding until it catches up */
const MAX_BACKLOG = 64;

/** One sequence's share of a step: the tokens the pass computes for it. */
export interface ScheduledChunk {
  readonly request: EngineRequest;
  readonly sequence: RunningSequence;
  /** position of its first token: tokens [start, start + tokens.length) of the sequence */
  readonly start: number;
  readonly tokens: readonly number[];
  /** which logits the pass computes: none (more prompt chunks follow), the last token's, or every token's (a prompt being scored, speculative verification) */
  readonly logits: boolean | "all";
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
  /** sequences running at once (a request counts its strategy's width) */
  readonly maxSequences: number;
  /** positions one sequence may hold */
  readonly contextSize: number;
  /** generated tokens' rows are cached as prefixes too, not only rows computed in chunks (EngineOptions.cacheReplies) */
  readonly cacheReplies: boolean;
}

/**
 * Each step: every running sequence with chosen tokens decodes them (one row each; a
 * speculative round's proposal as one chunk); the token budget they leave goes to prompts still
 * being prefilled, oldest first, in chunks; then waiting requests are admitted in arrival order
 * while sequences, budget and KV blocks allow.
 *
 * KV admission is worst-case: a request is admitted only when the blocks it may hold at once
 * (its prompt and maxTokens, plus what its strategy adds: other choices, beams, a proposal) fit
 * beside what the running requests may still take, cached prefix blocks counting as room. So a
 * running request never finds the pool empty and nothing is ever preempted; a request that does
 * not fit waits for others to finish. It is also the StrategyHost: strategies fork and retire
 * their sequences through it.
 */
export class Scheduler implements StrategyHost {
  readonly waiting: EngineRequest[] = [];
  readonly running: EngineRequest[] = [];
  /** how many of each sequence's leading blocks are registered as cached prefixes, and the last one's id */
  private readonly registered = new Map<RunningSequence, { blocks: number; id: number }>();

  constructor(
    readonly pool: KVBlockPool,
    readonly limits: SchedulerLimits,
    /** an empty KV cache of one sequence in the pool */
    private readonly newCache: () => KVCache,
  ) {}

  /** throws when the request's worst case exceeds the whole pool (it could never run) */
  admissible(request: EngineRequest): void {
    const need = this.worstBlocks(request, 0);
    if (need > this.pool.blockCount) {
      const { promptTokens, maxTokens } = request.params;
      const bs = this.pool.blockSize, width = request.strategy.width;
      const what = request.params.decoding.kind === "beam" ? `, ${width} beams` : width > 1 ? `, ${width} choices` : speculativeExtra(request.params.decoding);
      throw new RequestError(
        `the request needs room for up to ${need * bs} tokens of KV cache (prompt ${promptTokens.length} + maxTokens ${maxTokens}${what}) ` +
          `but the KV cache holds ${this.pool.blockCount * bs} tokens (${this.pool.byteLength} bytes); lower maxTokens or raise kvCacheBytes`,
        "maxTokens", "context_length_exceeded",
      );
    }
  }

  get runningSequences(): number {
    let n = 0;
    for (const r of this.running) n += r.strategy.width;
    return n;
  }

  schedule(): StepPlan {
    const chunks: ScheduledChunk[] = [];
    let budget = this.limits.maxBatchTokens;
    // decodes first: each running sequence's chosen tokens, whole (a request whose reader lags far behind waits)
    for (const request of this.running) {
      if (!request.prefilled || request.backlog > MAX_BACKLOG) continue;
      for (const sequence of request.sequences) {
        if (sequence.finished || sequence.pending === 0) continue;
        chunks.push(chunkOf(request, sequence, sequence.pending));
        budget -= sequence.pending;
      }
    }
    // then prompts already admitted, oldest first
    for (const request of this.running) {
      if (budget <= 0) break;
      if (request.prefilled) continue;
      const sequence = request.sequences[0]!;
      const k = promptChunk(sequence.pending, budget);
      chunks.push(chunkOf(request, sequence, k));
      budget -= k;
    }
    // then new requests, in arrival order (the first that does not fit holds the others back)
    const admitted: EngineRequest[] = [];
    while (this.waiting.length > 0 && budget > 0) {
      const request = this.waiting[0]!;
      if (this.runningSequences + request.strategy.width > this.limits.maxSequences) break;
      const sequence = this.admit(request);
      if (!sequence) break;
      this.waiting.shift();
      admitted.push(request);
      const k = promptChunk(sequence.pending, budget);
      chunks.push(chunkOf(request, sequence, k));
      budget -= k;
    }
    return { chunks, admitted };
  }

  fork(request: StrategyRequest, parent: RunningSequence, tokens: number[], how: "share" | "copy"): RunningSequence {
    const seq = new RunningSequence(tokens, how === "share" ? parent.cache.fork() : parent.cache.forkCopy());
    seq.chunkedRows = Math.min(parent.chunkedRows, seq.cache.length);
    const state = this.registered.get(parent);
    if (state) this.registered.set(seq, { ...state });
    request.sequences.push(seq);
    return seq;
  }

  retire(request: StrategyRequest, seq: RunningSequence): void {
    const i = request.sequences.indexOf(seq);
    if (i >= 0) request.sequences.splice(i, 1);
    // its cached prefixes stay, idle, for later requests
    seq.cache.free();
    this.registered.delete(seq);
  }

  /** takes a request out of the scheduler and returns its sequences' blocks to the pool */
  remove(request: EngineRequest): void {
    const w = this.waiting.indexOf(request);
    if (w >= 0) this.waiting.splice(w, 1);
    const r = this.running.indexOf(request);
    if (r >= 0) this.running.splice(r, 1);
    for (const s of [...request.sequences]) this.retire(request, s);
  }

  /** a step computed the chunk's rows: chunks of two or more extend the rows that may be cached (RunningSequence.chunkedRows) */
  computed(chunk: ScheduledChunk): void {
    const seq = chunk.sequence;
    if (chunk.tokens.length >= 2 && chunk.start <= seq.chunkedRows) seq.chunkedRows = chunk.start + chunk.tokens.length;
  }

  /**
   * Registers the sequence's blocks that are now full as cached prefixes (keyed by their tokens
   * and all before them), so a later request starting with the same tokens computes none of them.
   * Unless replies are cached (limits.cacheReplies), only blocks whose rows were computed as a
   * prompt's are (chunkedRows): a block holding a decoded token's row gives a later prompt through
   * it K/V that differ in the last bits from what computing them there does.
   */
  cacheFullBlocks(sequence: RunningSequence): void {
    const state = this.registered.get(sequence);
    // a speculative round truncates the rows it rejected
    sequence.chunkedRows = Math.min(sequence.chunkedRows, sequence.cache.length);
    if (!state) return;
    const bs = this.pool.blockSize;
    const cacheable = this.limits.cacheReplies ? sequence.cache.length : sequence.chunkedRows;
    while ((state.blocks + 1) * bs <= cacheable) {
      const block = sequence.cache.alignedBlock(state.blocks);
      if (block === undefined) {
        // a shared fork's own rows start mid-block: nothing after this is block-aligned
        this.registered.delete(sequence);
        return;
      }
      state.id = this.pool.register(block, KVBlockPool.prefixKey(state.id, sequence.tokens.slice(state.blocks * bs, (state.blocks + 1) * bs)));
      state.blocks++;
    }
  }

  /** the admitted request's first sequence (on its cached prefix), or undefined when its KV worst case does not fit yet */
  private admit(request: EngineRequest): RunningSequence | undefined {
    const { promptTokens } = request.params;
    const bs = this.pool.blockSize;
    // cached prefix blocks; at least the last two prompt tokens are computed: the last for its
    // logits, and never alone (a one-row segment takes attention's one-query arithmetic, so the
    // same prompt gave other logits the second time, from its cache; see promptChunk). A prompt
    // being scored takes none: every position's logits are needed
    const hits: number[] = [];
    let previous = 0;
    const reusable = request.params.promptLogprobs === undefined ? promptTokens.length - 2 : 0;
    while ((hits.length + 1) * bs <= reusable) {
      const found = this.pool.lookup(KVBlockPool.prefixKey(previous, promptTokens.slice(hits.length * bs, (hits.length + 1) * bs)));
      if (!found) break;
      hits.push(found.block);
      previous = found.id;
    }
    const revived = hits.filter((b) => this.pool.isIdle(b)).length;
    const need = this.worstBlocks(request, hits.length);
    if (need + revived > this.pool.availableBlocks - this.outstanding()) return undefined;

    const cache = this.newCache();
    cache.adoptPrefix(hits);
    const sequence = new RunningSequence([...promptTokens], cache);
    sequence.chunkedRows = hits.length * bs;
    this.registered.set(sequence, { blocks: hits.length, id: previous });
    request.sequences.push(sequence);
    request.cachedPromptTokens = hits.length * bs;
    request.reservedBlocks = need + hits.length;
    request.phase = "running";
    request.scheduledAt = performance.now();
    this.running.push(request);
    return sequence;
  }

  /** blocks the running requests may still take: each one's reservation less the blocks its sequences hold now */
  private outstanding(): number {
    let sum = 0;
    for (const r of this.running) {
      const held = new Set<number>();
      for (const s of r.sequences) for (const b of s.cache.blockIds) held.add(b);
      sum += Math.max(0, r.reservedBlocks - held.size);
    }
    return sum;
  }

  /** new blocks the request may hold at once: its first sequence's whole length less the cached prefix, plus its strategy's */
  private worstBlocks(request: EngineRequest, cachedBlocks: number): number {
    const { promptTokens, maxTokens } = request.params;
    const length = Math.min(promptTokens.length + maxTokens, this.limits.contextSize);
    return Math.ceil(length / this.pool.blockSize) - cachedBlocks + request.strategy.extraBlocks(this.pool.blockSize);
  }
}

/** what a speculative request's worst case holds besides its own positions */
function speculativeExtra(d: EngineRequest["params"]["decoding"]): string {
  if (d.kind !== "speculative") return "";
  return d.draft ? ", a speculative proposal and the draft model's KV cache" : ", a speculative proposal";
}

/**
 * Prompt tokens a step computes of `pending` within `budget`: as many as fit, but never one alone
 * while others remain and never leaving one alone for later (so a chunk may exceed the budget by
 * up to two tokens). The kernels compute a sequence's lone row as a decode (llama.cpp's one-query
 * attention: its dot products in another order than a chunk's), so a prompt split around a lone
 * row gave other K/V and logits than the same prompt computed alone (the last bits, enough to
 * turn a near tie), depending on what else the step ran. Rows of chunks of 2 or more do not
 * depend on the chunk's size.
 */
export function promptChunk(pending: number, budget: number): number {
  const k = Math.max(budget, 2);
  return pending - k <= 1 ? pending : k;
}

function chunkOf(request: EngineRequest, sequence: RunningSequence, k: number): ScheduledChunk {
  const start = sequence.cache.length;
  const complete = k === sequence.pending;
  const scored = !request.prefilled && request.promptLogprobs !== undefined;
  return { request, sequence, start, tokens: sequence.tokens.slice(start, start + k), logits: scored || (complete && sequence.allLogits) ? "all" : complete };
}
