import { KVBlockPool, type KVCache } from "../cache/index.js";
import { checkKvWorstCase, defaultDraftTokens, type KvRequest, worstKvBlocks } from "./request-checks.js";
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
  /** how requests get KV room (EngineOptions.admission) */
  readonly admission: Admission;
}

/**
 * "reserve": a request is admitted once its worst case (prompt + maxTokens, plus its strategy's)
 * fits beside what the running ones may still take; nothing is ever preempted. "preempt": a
 * request whose strategy can be recomputed (sampling, one choice or n; beam search; speculative
 * decoding) is admitted once its prompt fits (plus a watermark), and when a step finds no free
 * block for it the most recently admitted such request is preempted (its blocks freed, recomputed
 * later from prompt + tokens so far, all its sequences together; a draft model's cache, which lives
 * in the draft's own pool, with them, and where that pool has no plan it counts against the same room)
 */
export type Admission = "reserve" | "preempt";

/**
 * Each step: every running sequence with chosen tokens decodes them (one row each; a
 * speculative round's proposal as one chunk); the token budget they leave goes to prompts still
 * being prefilled, oldest first, in chunks; then waiting requests are admitted in arrival order
 * while sequences, budget and KV blocks allow.
 *
 * KV admission (limits.admission): a reserved request is admitted only when the blocks it may
 * hold at once (its prompt and maxTokens, plus what its strategy adds: other choices, beams, a
 * proposal) fit beside what the running reserved requests may still take, cached prefix blocks
 * counting as room, so it never finds the pool empty. A preemptible request (admission "preempt",
 * a strategy that can be recomputed) is admitted when its tokens fit beside the prompts already
 * admitted, plus a watermark; when a step finds no room for its next rows (and for the blocks its
 * strategy takes after the pass: beams' forks), the most recently
 * admitted preemptible request is preempted: its blocks go back (registered ones stay cached, idle)
 * and it waits at the front of the queue, to be recomputed from its tokens so far. A request that
 * does not fit waits for others to finish. It is also the StrategyHost: strategies fork and retire
 * their sequences through it.
 */
export class Scheduler implements StrategyHost {
  readonly waiting: EngineRequest[] = [];
  readonly running: EngineRequest[] = [];
  /** how many of each sequence's leading blocks are registered as cached prefixes, and the last one's id */
  private readonly registered = new Map<RunningSequence, { blocks: number; id: number }>();
  /** blocks this step's planned chunks of preemptible requests will take (the pass takes them), by sequence */
  private readonly planned = new Map<RunningSequence, number>();
  /** blocks the strategies of this step's preemptible requests may take after the pass (Strategy.stepBlocks), by request */
  private readonly plannedSteps = new Map<EngineRequest, number>();
  /** preemptions so far (EngineStats.preemptions) */
  preemptions = 0;
  /**
   * whether a waiting request may start beside those `admitted` in this step (the engine's: a
   * request pinned to a slot waits until the slot is free); one that may not is passed over, the
   * requests behind it go on
   */
  startable: (request: EngineRequest, admitted: readonly EngineRequest[]) => boolean = () => true;
  /**
   * a running request is preempted (the engine's: it leaves its slots at once, so a request pinned
   * to one, itself included, may start again in the same step: startable reads them)
   */
  onPreempt: (request: EngineRequest) => void = () => undefined;
  /** the running request holding the slot a waiting request is pinned to (the engine's; none: not pinned, or the slot is idle) */
  slotHolder: (request: EngineRequest) => EngineRequest | undefined = () => undefined;

  constructor(
    readonly pool: KVBlockPool,
    readonly limits: SchedulerLimits,
    /** an empty KV cache of one sequence in the pool */
    private readonly newCache: () => KVCache,
  ) {}

  /** throws when the request's worst case exceeds the whole pool (it could never run): request-checks.ts, with its strategy's extra blocks */
  admissible(request: EngineRequest): void {
    const pool = this.pool;
    checkKvWorstCase(kvRequestOf(request), { contextSize: this.limits.contextSize, kv: { blocks: pool.blockCount, blockSize: pool.blockSize, bytes: pool.byteLength } }, request.strategy.extraBlocks(pool.blockSize));
  }

  get runningSequences(): number {
    let n = 0;
    for (const r of this.running) n += r.strategy.width;
    return n;
  }

  schedule(): StepPlan {
    const chunks: ScheduledChunk[] = [];
    let budget = this.limits.maxBatchTokens;
    let preempted = false;
    this.planned.clear();
    this.plannedSteps.clear();
    /**
     * Plans `k` tokens of the sequence: a preemptible request takes room for its new blocks first,
     * preempting requests paused on their readers (they compute nothing meanwhile), then the most
     * recently admitted preemptible requests (their planned chunks leave the plan), until it fits;
     * false when it was preempted itself. The oldest one never waits on the newer, and a lone
     * request always fits (its worst case fits the pool: admissible), so every step makes progress.
     * (Before, a request growing beside a paused one preempted itself when it was the newer, and
     * was recomputed on the room the paused one then gave up at admission: a recompute for nothing.)
     */
    const plan = (request: EngineRequest, sequence: RunningSequence, k: number): boolean => {
      if (this.preemptible(request)) {
        const rows = sequence.cache.blocksToExtend(k);
        // a chunk whose logits go to the strategy: its start / step may then take blocks of its own (beams forking), once a step
        const strategy = k === sequence.pending && !this.plannedSteps.has(request) ? (request.strategy.stepBlocks?.() ?? 0) : 0;
        const need = rows + strategy;
        while (this.room() < need) {
          const victim = this.pausedPreemptible() ?? this.newestPreemptible()!;
          for (let i = chunks.length - 1; i >= 0; i--) {
            if (chunks[i]!.request === victim) budget += chunks.splice(i, 1)[0]!.tokens.length;
          }
          this.preempt(victim);
          preempted = true;
          if (victim === request) return false;
        }
        this.planned.set(sequence, (this.planned.get(sequence) ?? 0) + rows);
        if (strategy > 0) this.plannedSteps.set(request, strategy);
      }
      chunks.push(chunkOf(request, sequence, k));
      budget -= k;
      return true;
    };
    // decodes first: each running sequence's chosen tokens, whole (a request whose reader lags far behind waits)
    for (const request of [...this.running]) {
      if (request.phase !== "running" || !request.prefilled || request.backlog > MAX_BACKLOG) continue;
      for (const sequence of request.sequences) {
        // (a preempted request's sequence still being recomputed is planned with the prompts, below)
        if (sequence.finished || sequence.recomputing || sequence.pending === 0) continue;
        if (!plan(request, sequence, sequence.pending)) break;
      }
    }
    /** plans the next chunks of a prompt, or of a preempted request's recompute, within the budget */
    const prefill = (request: EngineRequest): void => {
      // a prompt: its one sequence's (computed once for all choices, which fork off it at its end)
      const root = request.sequences[0]!;
      if (!request.prefilled) return void (root.cache.length < root.tokens.length && plan(request, root, promptChunk(root.tokens.length - root.cache.length, budget)));
      // a preempted request: every sequence recomputes its tokens in the same steps, the first from
      // its cached blocks (the prompt's, or more) through its own tokens in one chunk, another on
      // the cached blocks of its own tokens it started on (admit), or else on a fork of the earlier
      // one it has most tokens in common with once that one has computed them or planned them in
      // this step (recomputeFork; the pass computes the earlier one's chunk first).
      // (Before, the first stopped at the prompt's end and the others waited for it: a step more
      // per recompute, and one more for every sequence forking off the first's generated tokens)
      for (const sequence of request.sequences) {
        if (budget <= 0) return;
        if (!sequence.recomputing) continue;
        if (sequence !== root && sequence.cache.length === 0) {
          const { parent, at } = this.recomputeFork(request, sequence);
          // (the parent's rows before `at` computed, or planned earlier in this step: shared at
          // once, the pass computing the parent's chunk before this one's; before, a sequence
          // forking off another's generated tokens waited a step for each sequence it forked off)
          const pending = parent.cache.length < at ? chunks.find((c) => c.sequence === parent) : undefined;
          if (parent.cache.length < at && !(pending && pending.start + pending.tokens.length >= at)) continue;
          this.share(parent, sequence, at, pending);
        }
        if (!plan(request, sequence, promptChunk(sequence.recomputeTo - sequence.cache.length, budget))) return;
      }
    };
    // then prompts already admitted (and preempted requests being recomputed), oldest first
    for (const request of [...this.running]) {
      if (budget <= 0) break;
      if (request.phase === "running" && (!request.prefilled || request.recomputing)) prefill(request);
    }
    // then new requests, in arrival order (the first that does not fit holds the others back); none
    // in a step that preempted (unless it plans nothing else), or the room just freed would admit
    // what the next step preempts again
    const admitted: EngineRequest[] = [];
    for (let w = 0; (!preempted || chunks.length === 0) && w < this.waiting.length && budget > 0;) {
      const request = this.waiting[w]!;
      // (one preempted while its reader lagged holds nobody back: it would only be paused again, holding room)
      if (request.backlog > MAX_BACKLOG) {
        w++;
        continue;
      }
      if (!this.startable(request, admitted)) {
        // a request pinned to a slot whose holder's reader lags past the limit: the holder is
        // preempted (queued first, in front of this one, until its reader catches up; its slot
        // free at once: onPreempt), and this one is looked at again. Before, the pinned request
        // waited for that reader for as long as it did not read, where llama-server defers a task
        // for a busy slot only until the slot's generation ends (a slow client's output buffered).
        const holder = this.slotHolder(request);
        if (holder !== undefined && this.running.includes(holder) && this.paused(holder) && this.preemptible(holder)) this.preempt(holder);
        // (else one waiting for its own slot holds nobody back: llama-server defers only that task)
        w++;
        continue;
      }
      if (this.runningSequences + request.strategy.width > this.limits.maxSequences || !this.admit(request)) {
        // a running request whose reader lags past the limit computes nothing while it holds its
        // sequences and blocks: it is preempted to make room (it waits, queued first, until its
        // reader catches up). Before, one stalled reader held every request that needed its room
        // (a waiting one, or one that had preempted itself for a block) until it read again, where
        // vLLM and llama-server buffer a slow client's output and free the room when it ends.
        const idle = this.pausedPreemptible();
        if (idle === undefined) break;
        this.preempt(idle);
        // (queued first, in front of this one)
        w++;
        continue;
      }
      this.waiting.splice(w, 1);
      admitted.push(request);
      prefill(request);
    }
    return { chunks, admitted };
  }

  fork(request: StrategyRequest, parent: RunningSequence, tokens: number[], how: "share" | "copy"): RunningSequence {
    const seq = new RunningSequence(tokens, how === "share" ? parent.cache.fork() : parent.cache.forkCopy());
    this.forked(parent, seq);
    request.sequences.push(seq);
    return seq;
  }

  /**
   * a preempted request's sequence (its cache empty) shares the rows `parent` has recomputed before
   * position `at`, as a fork ("share") of it, or will have once this step's `pending` chunk of it is
   * computed: its rows are reserved now (their blocks taken, no longer planned) and shared, the
   * pass writing them before it reads them
   */
  private share(parent: RunningSequence, seq: RunningSequence, at: number, pending?: ScheduledChunk): void {
    if (pending) {
      // (the pass's own ensureRoom finds them reserved)
      parent.cache.ensureRoom(pending.tokens.length);
      this.planned.set(parent, 0);
    }
    seq.cache.share(parent.cache, at, pending !== undefined);
    this.forked(parent, seq, pending && chunkedAfter(parent, pending));
  }

  /**
   * a fork's rows that may be cached, and its registered prefix blocks, are its parent's so far
   * (up to the fork: blocks the parent registered past it hold other tokens, and the fork's own rows
   * start mid-way in what would be the next, so none of its blocks is registered then)
   */
  private forked(parent: RunningSequence, seq: RunningSequence, parentChunkedRows = parent.chunkedRows): void {
    seq.chunkedRows = Math.min(parentChunkedRows, seq.cache.length);
    const state = this.registered.get(parent);
    if (state && state.blocks * this.pool.blockSize <= seq.cache.length) this.registered.set(seq, { ...state });
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
    // a preempted sequence's recompute ends with the chunk that computes its last token (its logits go to the strategy as a decode's),
    // or the last before its pending proposal (computed next as before)
    if (seq.recomputing && chunk.start + chunk.tokens.length >= seq.recomputeTo) seq.recomputing = false;
    seq.chunkedRows = chunkedAfter(seq, chunk);
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

  /**
   * the admitted request's first sequence (on its cached prefix), or undefined when it does not fit
   * yet: a reserved request's KV worst case, a preemptible one's tokens (a preempted one resumes
   * with its sequences: prompt and tokens generated so far)
   */
  private admit(request: EngineRequest): RunningSequence | undefined {
    const resumed = request.sequences[0];
    const tokens = resumed?.tokens ?? request.params.promptTokens;
    const bs = this.pool.blockSize;
    // cached prefix blocks of the tokens it computes (a preempted request's: every sequence's tokens
    // so far); at least the last two tokens are computed: the last for its logits, and never alone
    // (a one-row segment takes attention's one-query arithmetic, so the same prompt gave other
    // logits the second time, from its cache; see promptChunk). A prompt being scored takes none:
    // every position's logits are needed
    const scored = request.promptLogprobs !== undefined && !request.prefilled;
    // (a preempted request's first sequence computes the rest of its prompt and its own tokens in
    // one chunk: the prompt's last row is never computed alone, wherever the blocks found end)
    const first = this.cachedPrefix(tokens, scored ? 0 : (resumed ? recomputeEnd(resumed) : tokens.length) - 2);
    const hits = first.blocks;
    // a preempted request's other sequences each look up their own tokens too, and start on what is
    // found where it reaches past where they would fork off an earlier one (recomputeFork), as the
    // first one does: the blocks a sequence registered (its rows computed in chunks before, or with
    // cacheReplies its replies) are not computed again
    const adopting = new Map<RunningSequence, CachedPrefix>();
    if (resumed && request.prefilled) {
      for (const seq of request.sequences) {
        if (seq === resumed || !seq.recomputing) continue;
        const own = this.cachedPrefix(seq.tokens, recomputeEnd(seq) - 2);
        if (own.blocks.length * bs > this.recomputeFork(request, seq).at) adopting.set(seq, own);
      }
    }
    const adopted = new Set(hits);
    for (const p of adopting.values()) for (const b of p.blocks) adopted.add(b);
    let revived = 0;
    for (const b of adopted) if (this.pool.isIdle(b)) revived++;
    const preemptible = this.preemptible(request);
    // (a preemptible one's first start takes its strategy's step blocks too: a draft model's cache of the prompt)
    const need = preemptible ? this.recomputeBlocks(request, hits.length, adopting) + (request.strategy.stepBlocks?.() ?? 0) : this.worstBlocks(request, hits.length);
    // a watermark of free blocks for the running requests' next tokens (vLLM's 1%); none for a lone request, which always fits
    const watermark = preemptible && this.running.length > 0 ? Math.ceil(this.pool.blockCount / 100) : 0;
    if (need + revived + watermark > this.room() - this.promised()) return undefined;

    const sequence = resumed ?? new RunningSequence([...tokens], this.newCache());
    this.startOn(sequence, first);
    for (const [seq, prefix] of adopting) this.startOn(seq, prefix);
    if (!resumed) request.sequences.push(sequence);
    if (!request.prefilled) request.cachedPromptTokens = hits.length * bs;
    request.reservedBlocks = preemptible ? 0 : need + hits.length;
    request.phase = "running";
    if (!resumed) request.scheduledAt = performance.now();
    this.running.push(request);
    return sequence;
  }

  /** the full blocks of `tokens` before position `end` that the prefix cache holds, leading ones in a row, and the last one's registration id */
  private cachedPrefix(tokens: readonly number[], end: number): CachedPrefix {
    const bs = this.pool.blockSize;
    const blocks: number[] = [];
    let id = 0;
    while ((blocks.length + 1) * bs <= end) {
      const found = this.pool.lookup(KVBlockPool.prefixKey(id, tokens.slice(blocks.length * bs, (blocks.length + 1) * bs)));
      if (!found) break;
      blocks.push(found.block);
      id = found.id;
    }
    return { blocks, id };
  }

  /** an empty sequence starts on cached prefix blocks: rows that may be cached, and registered, so far */
  private startOn(sequence: RunningSequence, prefix: CachedPrefix): void {
    sequence.cache.adoptPrefix(prefix.blocks);
    sequence.chunkedRows = prefix.blocks.length * this.pool.blockSize;
    this.registered.set(sequence, { blocks: prefix.blocks.length, id: prefix.id });
  }

  /** whether the request may be preempted (admission "preempt" and a strategy that can be recomputed from its tokens) */
  private preemptible(request: EngineRequest): boolean {
    return this.limits.admission === "preempt" && request.strategy.recomputable === true;
  }

  /** the most recently admitted preemptible request paused on its reader */
  private pausedPreemptible(): EngineRequest | undefined {
    for (let i = this.running.length - 1; i >= 0; i--) {
      const r = this.running[i]!;
      if (this.preemptible(r) && this.paused(r)) return r;
    }
    return undefined;
  }

  /** whether the running request's reader lags past the limit (it plans no chunk then: decodes skip it, and it was not admitted or recomputing while it lagged) */
  private paused(request: EngineRequest): boolean {
    return request.prefilled && !request.recomputing && request.backlog > MAX_BACKLOG;
  }

  private newestPreemptible(): EngineRequest | undefined {
    for (let i = this.running.length - 1; i >= 0; i--) if (this.preemptible(this.running[i]!)) return this.running[i];
    return undefined;
  }

  /**
   * Frees the request's blocks (registered ones stay cached, idle) and queues it first, to be
   * recomputed from its tokens; its strategy keeps its state (sampler, stop matcher, the tokens it
   * has emitted), so the reader's stream goes on where it was.
   *
   * A request with n choices is preempted and recomputed as a group, all its choices at once, not
   * each choice on its own: its choices share the prompt's rows (forks of one sequence), so freeing
   * one choice frees only the blocks past the prompt while the request keeps the prompt's; the
   * group frees them all, and its recompute computes the prompt once and forks the choices off it
   * again (forkPoint), as its first prefill did, each off the earlier choice or beam it has the most
   * tokens in common with (recomputeFork), so it never needs more blocks than its worst case
   * (which fits the pool: admissible), the bound that keeps a lone request always runnable. Choices
   * preempted one by one would each need a recompute of the prompt of their own once its cached
   * blocks were evicted (n prompts' worth, which may exceed the pool), and a request part waiting
   * and part running, which the queue's order (oldest first, preempted newest first) does not have.
   */
  private preempt(request: EngineRequest): void {
    // (a draft model's cache, outside the pool: computed again from the accepted tokens at its next proposal)
    request.strategy.preempted?.();
    this.onPreempt(request);
    for (const sequence of request.sequences) {
      // (a prompt not computed yet is computed as a prompt still; one preempted again mid-recompute keeps its end)
      if (request.prefilled && !sequence.recomputing) sequence.recomputeTo = sequence.allLogits ? sequence.cache.length : sequence.tokens.length;
      sequence.recomputing = request.prefilled;
      sequence.cache.free();
      sequence.chunkedRows = 0;
      this.registered.delete(sequence);
      this.planned.delete(sequence);
    }
    this.plannedSteps.delete(request);
    // a prompt being scored is scored again from its start
    if (!request.prefilled && request.promptLogprobs) request.promptLogprobs.length = 1;
    this.running.splice(this.running.indexOf(request), 1);
    request.phase = "waiting";
    request.preemptions++;
    this.preemptions++;
    this.waiting.unshift(request);
  }

  /**
   * blocks free for preemptible requests' rows now: available ones less what the reserved requests
   * may still take, what this step's planned chunks take, and what the preemptible ones hold outside
   * the pool (a draft model's cache in a pool without a plan: the same budget)
   */
  private room(): number {
    let planned = 0;
    for (const n of this.planned.values()) planned += n;
    for (const n of this.plannedSteps.values()) planned += n;
    for (const r of this.running) if (this.preemptible(r)) planned += r.strategy.outsideBlocks?.() ?? 0;
    return this.pool.availableBlocks - this.outstanding() - planned;
  }

  /**
   * Between two steps (the last plan's chunks computed, their blocks taken: it is spent), the
   * blocks that may leave the room without taking any promised to a running request: what an
   * admission sees (a reserved request's rest, a preemptible one's prompt or recompute, and the
   * watermark a preemptible admission leaves beside running requests). A slot save holds no more
   * idle blocks than this (Engine.saveSlot).
   */
  spareBlocks(): number {
    this.planned.clear();
    this.plannedSteps.clear();
    const watermark = this.limits.admission === "preempt" && this.running.length > 0 ? Math.ceil(this.pool.blockCount / 100) : 0;
    return this.room() - this.promised() - watermark;
  }

  /** blocks the admitted preemptible requests' prompts (or recomputes) still need beyond this step's chunks */
  private promised(): number {
    let sum = 0;
    for (const r of this.running) {
      if (!this.preemptible(r) || (r.prefilled && !r.recomputing)) continue;
      let planned = 0;
      // (the chunks of its recomputed sequences only: one whose recompute has ended decodes as any other)
      for (const s of r.sequences) if (!r.prefilled || s.recomputing) planned += this.planned.get(s) ?? 0;
      sum += Math.max(0, this.recomputeBlocks(r) - planned);
    }
    return sum;
  }

  /**
   * Where a preempted request's other sequences fork off its first one: the end of the prompt
   * when it has several (choices recomputed as a group: see preempt), else the sequence's end
   * (its prompt, before it was computed, or its tokens so far: one recompute, no fork)
   */
  private forkPoint(request: EngineRequest): number {
    const seqs = request.sequences;
    if (request.prefilled && seqs.length > 1) return request.params.promptTokens.length;
    return recomputeEnd(seqs[0]!);
  }

  /**
   * Where a preempted request's sequence other than its first forks off to recompute its tokens:
   * off the earlier sequence it has the most tokens in common with, at the end of what they have
   * in common (the tokens of beams forked from one beam, of choices that chose alike), so they
   * share those rows again as beams shared them before the preemption (vLLM's block manager shares
   * blocks by prefix); at least the prompt, off the first sequence. The fork leaves the sequence
   * one token or more of its own to compute (a beam that differs from its parent only in its last
   * token computes that one row, as a decode, as the unpreempted search's next step does; before,
   * it computed the row before it again, which its parent holds), and takes only rows its parent
   * computed in chunks of two or more (a lone row is computed as a decode: see promptChunk).
   */
  private recomputeFork(request: EngineRequest, seq: RunningSequence): { parent: RunningSequence; at: number } {
    const seqs = request.sequences, prompt = request.params.promptTokens.length;
    let parent = seqs[0]!, at = prompt;
    for (const other of seqs) {
      if (other === seq) break;
      // (a sequence forked after the preemption has recomputed nothing: recomputeTo 0)
      if (other.recomputeTo - prompt < 2) continue;
      const end = Math.min(seq.recomputeTo - 1, other.recomputeTo);
      let n = prompt;
      while (n < end && other.tokens[n] === seq.tokens[n]) n++;
      if (n > at) ({ parent, at } = { parent: other, at: n });
    }
    return { parent, at };
  }

  /**
   * Blocks a preemptible request's prompt or recompute still takes, at most: at its admission its
   * first sequence's tokens up to forkPoint past its aligned blocks (`cachedBlocks`: those a
   * prefix lookup found) and from forkPoint, and each other sequence's tokens past where it forks
   * (recomputeFork) from a fresh block (the first to extend may claim its parent's partial block
   * instead), or past the cached blocks it starts on (`adopting`: found by its own lookup).
   *
   * Once admitted, the first sequence takes only what extends its rows to its end: it is planned
   * before the request's other sequences in every step (the pass reserving its rows first) and a
   * fork shares its rows only where it has them, so no fork takes the slots after them, unless its
   * chunk ended right where a fork shared them in the same step (the block is then shared, and
   * blocksToExtend counts none of its slots). Before, its partial block at the fork point was
   * counted twice (up to the fork, and from it): a block more promised than the recompute takes,
   * which kept a request that fits from being admitted beside it.
   */
  private recomputeBlocks(request: EngineRequest, cachedBlocks?: number, adopting?: ReadonlyMap<RunningSequence, CachedPrefix>): number {
    const bs = this.pool.blockSize;
    const root = request.sequences[0];
    if (!root) return Math.ceil(request.params.promptTokens.length / bs) - (cachedBlocks ?? 0);
    const forkAt = this.forkPoint(request);
    let sum = 0;
    for (const seq of request.sequences) {
      if (seq === root && seq.cache.length < forkAt) {
        sum += cachedBlocks === undefined ? seq.cache.blocksToExtend(seq.pending) : Math.ceil(forkAt / bs) - cachedBlocks + Math.ceil((seq.tokens.length - forkAt) / bs);
      }
      else if (!seq.recomputing) continue;
      else if (seq.cache.length === 0) {
        // (on its cached blocks, from their end; else from its fork)
        const cached = adopting?.get(seq)?.blocks.length;
        sum += Math.ceil((seq.tokens.length - (cached === undefined ? this.recomputeFork(request, seq).at : cached * bs)) / bs);
      }
      else sum += seq.cache.blocksToExtend(seq.pending);
    }
    return sum;
  }

  /** blocks the running requests may still take: each one's reservation less the blocks its sequences hold now */
  private outstanding(): number {
    let sum = 0;
    for (const r of this.running) {
      // (a preemptible request reserves nothing: skipped before the set of its blocks is built, once per chunk planned)
      if (r.reservedBlocks === 0) continue;
      const held = new Set<number>();
      for (const s of r.sequences) for (const b of s.cache.blockIds) held.add(b);
      sum += Math.max(0, r.reservedBlocks - held.size);
    }
    return sum;
  }

  /** new blocks the request may hold at once: its first sequence's whole length less the cached prefix, plus its strategy's */
  private worstBlocks(request: EngineRequest, cachedBlocks: number): number {
    const bs = this.pool.blockSize;
    return worstKvBlocks(kvRequestOf(request), this.limits.contextSize, bs, request.strategy.extraBlocks(bs), cachedBlocks);
  }
}

/** cached prefix blocks found for a sequence's tokens, and the registration id of the last (0: none) */
interface CachedPrefix {
  readonly blocks: readonly number[];
  readonly id: number;
}

/** the sequence's rows that may be cached once the chunk is computed: chunks of two or more extend them (RunningSequence.chunkedRows) */
function chunkedAfter(seq: RunningSequence, chunk: ScheduledChunk): number {
  return chunk.tokens.length >= 2 && chunk.start <= seq.chunkedRows ? chunk.start + chunk.tokens.length : seq.chunkedRows;
}

/** where a sequence's rows are computed to: a preempted one's recompute end, else its tokens' (a prompt) */
function recomputeEnd(sequence: RunningSequence): number {
  return sequence.recomputing ? sequence.recomputeTo : sequence.tokens.length;
}

/** what the request's KV worst case depends on (request-checks.ts) */
function kvRequestOf(request: EngineRequest): KvRequest {
  const { promptTokens, maxTokens, decoding: d } = request.params;
  const width = request.strategy.width;
  const decoding: KvRequest["decoding"] = d.kind === "beam" ? { kind: "beam", numBeams: width } : d.kind === "speculative" ? { kind: "speculative", draftTokens: d.draftTokens ?? defaultDraftTokens(d.draft !== undefined), draft: d.draft !== undefined && request.strategy.chargesOutside === true } : { kind: "sample", n: width };
  return { promptTokens: promptTokens.length, maxTokens, decoding };
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
