import { totalMemoryBytes } from "../platform/host.js";
import { DEFAULT_BLOCK_SIZE, KVBlockPool, KVCache, kvArrayBytesPerToken, kvBlocksPerBuffer, kvBytesForContext, kvBytesPerToken, type KVPoolStats, type KVStorage } from "../cache/index.js";
import { DisposedError, formatBytes, onAbort, OptionError, shownValue } from "../units/index.js";
import { createStopMatcher, Sequence, tokenLogprobs, type DraftPass, validateBeamOptions, validateLogprobs, validateMaxTokens, validateSpeculative, validateStopStrings, validateTokenBans, type StopRules, type TokenBans } from "../generation/index.js";
import type { LanguageModel } from "../models/index.js";
import { createSampler, infillVocabulary, Mt19937, resolveSamplingOptions, type InfillVocabulary } from "../sampling/index.js";
import { ConstraintVocabulary, TokenConstraint, type ConstraintSpec, type Grammar } from "../sampling/constraints/index.js";
import type { Tokenizer } from "../tokenizer/index.js";
import { completionDecoder, completionText } from "./completion-text.js";
import { RequestError } from "./errors.js";
import { checkBannedTokens, checkLogitBiasIds, checkPromptTokens, checkStopTokens, checkWidth, compileRequestConstraint, defaultDraftTokens, draftPoolPositions, type RequestLimits } from "./request-checks.js";
import { EngineRequest, type RequestParams } from "./request.js";
import { exclusive, executeStep, queuedPasses, TimeSlicer } from "./runner.js";
import { Scheduler, type Admission, type ScheduledChunk, type StepPlan } from "./scheduler.js";
import { cachedPrefixBlocks, SlotTable, type KVLayout, type SlotCache, type SlotState, type SlotTaskAccess } from "./slots.js";
import type { DraftRound, SequenceLogits, Strategy } from "./strategy.js";
import { BeamStrategy } from "./strategies/beam.js";
import { SamplingStrategy } from "./strategies/sampling.js";
import { SpeculativeStrategy } from "./strategies/speculative.js";

/** the sequences an engine runs at once when its options do not say (one request's beams or choices count each) */
export const DEFAULT_MAX_SEQUENCES = 16;

export interface EngineOptions {
  /** positions one sequence may hold (prompt + completion) */
  readonly contextSize: number;
  /**
   * bytes of K/V for all sequences together, allocated once (default: room for maxSequences
   * full contexts, capped at 1/8 of the machine's RAM and 2 GiB, but at least one full context)
   */
  readonly kvCacheBytes?: number;
  /** sequences decoded together at most (default 16; a request with n choices counts n) */
  readonly maxSequences?: number;
  /**
   * tokens one step computes at most: decodes plus prompt chunks (default 64: a stage of a
   * 64-token chunk of the SmolLM-135M shape takes ~5-10 ms here, while prefill throughput is the
   * same as one 512-token pass). Running sequences' decodes are never held back for it, and a
   * prompt chunk may exceed it by up to two tokens: a prompt token is never computed alone while
   * others remain (scheduler.ts, promptChunk)
   */
  readonly maxBatchTokens?: number;
  /** compute time after which a pass gives the event loop a turn (default 5 ms) */
  readonly sliceMs?: number;
  /**
   * cache generated tokens' rows as prefixes too (default true), so a chat's next turn reuses the
   * previous reply's K/V as llama.cpp's server and vLLM do. Those rows were computed one at a time
   * (attention's one-query order), so a prompt through them gets logits that may differ in the last
   * bits from the same prompt computed afresh. false: only rows computed in chunks (prompts,
   * speculative verifications) are cached, and every answer is bit-identical to the request run
   * alone on a fresh engine, at the cost of recomputing each reply in the next turn's prefill
   */
  readonly cacheReplies?: boolean;
  /**
   * how requests get KV room (default "preempt", see docs/engine.md "KV pool and admission"):
   * "reserve" admits a request once its worst case (prompt + maxTokens) fits, so nothing is ever
   * preempted but a request without maxTokens holds a whole context; "preempt" admits a sampled
   * request (one choice or n), a beam search or a speculative one once its prompt fits and, when the pool runs out, preempts the most recently admitted such request, all its
   * choices or beams together, which is recomputed later (its streams go on where they were); a
   * request drafting with a draft model gives its draft cache back too and computes it again
   */
  readonly admission?: Admission;
  /**
   * how much of a request's prompt an idle slot's last tokens must share (their common prefix over
   * the prompt's length, more than this) for the request to take that slot, as llama-server's
   * --slot-prompt-similarity (default 0.1, its default; 0: the least recently used idle slot
   * always). A number in [0, 1]. It picks only the slot number (SlotTable): the prefix cache is
   * shared by every slot
   */
  readonly slotPromptSimilarity?: number;
  /** where the KV pool's rows live (the backend, so attention reads them in place; default host memory) */
  readonly storage?: KVStorage;
  /** the model's file or folder, named when the model computes something impossible (NaN logits) */
  readonly source?: string;
}

export interface EngineStats {
  readonly waiting: number;
  readonly running: number;
  /** steps run (one forward pass each) */
  readonly steps: number;
  /** token rows the forward passes computed (prompt chunks and decodes) */
  readonly rowsComputed: number;
  /** the most sequences one step has run together */
  readonly peakStepSequences: number;
  /** prompt tokens taken from the prefix cache instead of being computed */
  readonly cachedPromptTokens: number;
  /** prompt tokens of the requests whose prefill ended (cached ones included; a request aborted before its prefill ended adds none) */
  readonly prefilledPromptTokens: number;
  /**
   * prompt rows computed, counted by the step that computed them (a request's recomputed after a
   * preemption, and an aborted one's, included), and the milliseconds of those steps: each step
   * that computed any prompt row once, its decodes beside them included, as llama-server's
   * server_metrics.add_prompt times its prompt batches (the batch's decode to its sync)
   */
  readonly promptStepTokens: number;
  readonly promptStepMs: number;
  /** requests preempted (their blocks freed, to be recomputed; admission "preempt"), each time counted */
  readonly preemptions: number;
  /**
   * passes of draft models run for speculative requests: one per draft position for all the
   * requests of a step drafting with the same model (batched), or one per request where a batched
   * pass failed and each request's pass was run again alone; a pass that failed counted too
   */
  readonly draftPasses: number;
  /** token rows the draft passes were given, all requests together (a failed pass's included) */
  readonly draftRowsComputed: number;
  /**
   * tokens proposed to speculative requests' verifications (by a draft model or prompt lookup),
   * counted when each request ends, finished or cancelled, as llama-server counts a slot's drafts
   * when it is released (a request that failed adds none)
   */
  readonly draftTokensProposed: number;
  /** of draftTokensProposed, those the target accepted */
  readonly draftTokensAccepted: number;
  /** speculative rounds, each one verification of a proposal by the target (llama-server's draft verification steps; a prompt lookup's empty proposal's round included), counted as draftTokensProposed */
  readonly draftRounds: number;
  /** the KV pool; undefined until the first request allocates it */
  readonly kv: KVPoolStats | undefined;
  /** tokens the KV pool holds */
  readonly kvCapacityTokens: number;
  /**
   * bytes the draft models' KV pools hold, beside the pool: each its planned size (a context and a
   * round's proposal, planDraftCache; kvCacheBytes where less), allocated by the first request
   * drafting with the model, or without a plan at most kvCacheBytes; kept for the next speculative
   * requests (see draftCache)
   */
  readonly draftKvBytes: number;
  /** of those pools' blocks, the bytes that requests' draft caches hold now */
  readonly draftKvUsedBytes: number;
  /** of those pools' blocks, the most that requests' draft caches held at once (each pool's peak, summed) */
  readonly draftKvPeakBytes: number;
  /**
   * times a speculative request went on without drafting (plain decoding, the same tokens when
   * greedy) because the draft model's pool had no room for a round: concurrent requests held it.
   * Each round tries again; a request counts once per stretch of rounds without room
   */
  readonly draftFallbacks: number;
  /** times such a request found room again and drafted on (its draft caught up on the tokens accepted meanwhile) */
  readonly draftResumes: number;
}

const GiB = 2 ** 30;
/**
 * KV blocks a slot's save reads at once: each read holds its rows in a staging buffer until it is
 * mapped (4 MiB a block of a 32-layer model with 8 KV heads of 128 in f32), so a few keep the
 * device busy without the slot's whole cache staged twice
 */
const SAVE_BLOCKS_IN_FLIGHT = 4;

/**
 * The engine: requests in, steps out. Every step the scheduler picks the rows to compute (the
 * sampled token of every running sequence, chunks of prompts), the runner computes them in ONE
 * forward pass over all of them, and the update samples, applies stops and emits each request's
 * steps (schedule -> execute -> update, plain data between them). All sequences live in one
 * paged KV pool with prefix caching; a request that does not fit waits; an aborted one leaves at
 * the next step. Passes pause between layers once a time slice is used, so the thread that owns
 * the model keeps serving its event loop.
 */
export class Engine {
  private pool: KVBlockPool | undefined;
  private scheduler: Scheduler | undefined;
  private readonly slicer: TimeSlicer;
  private looping = false;
  private closed = false;
  private nextId = 1;
  private steps = 0;
  /** per draft model, the KV pool its speculative requests' draft caches share (it goes with the model) */
  private readonly draftPools = new WeakMap<LanguageModel, KVBlockPool>();
  /** the draft pools, for stats (weakly: a pool lives as long as its draft model) */
  private readonly draftPoolRefs: WeakRef<KVBlockPool>[] = [];
  /** per draft model, the tokens a round proposes and the context that its pool is planned for (planDraftCache) */
  private readonly draftPlans = new WeakMap<LanguageModel, { draftTokens: number; contextSize: number }>();
  /** the draft pools made at their planned size (their requests' draft rows are not charged to this engine's pool) */
  private readonly plannedDraftPools = new WeakSet<KVBlockPool>();
  private draftFallbacks = 0;
  private draftResumes = 0;
  /** compiled constraint grammars by spec (a few, most recent last) */
  private readonly grammars = new Map<string, Grammar>();
  private rowsComputed = 0;
  private draftPasses = 0;
  private draftRowsComputed = 0;
  private draftTokensProposed = 0;
  private draftTokensAccepted = 0;
  private draftRounds = 0;
  private peakStepSequences = 0;
  private cachedPromptTokens = 0;
  private prefilledPromptTokens = 0;
  private promptStepTokens = 0;
  private promptStepMs = 0;
  /** resolves the loop's wait for work (a new request, an abort) */
  private wakeLoop: (() => void) | undefined;
  readonly maxSequences: number;
  readonly maxBatchTokens: number;
  /** which running request holds each of the maxSequences places (llama-server's slots) */
  private readonly slotTable: SlotTable;
  /** tasks waiting for the step in flight to end (betweenSteps) */
  private readonly pendingBetween: (() => void)[] = [];
  /** each slot's last slot task (slotTask): the next one asked of the slot runs after it */
  private readonly slotTasks: Promise<unknown>[] = [];
  /** references slot saves hold on blocks they read (a block may be held by several saves) */
  private readonly saveHolds = new Map<number, number>();
  /** blocks an erase found held by a save alone: dropped from the prefix cache once the last such save lets go of them */
  private readonly dropOnRelease = new Set<number>();
  /** callers waiting for KV room to change (a step's end, a request's end, a save's release): a save waiting for room to hold its blocks */
  private roomWaiters: (() => void)[] = [];
  /** whether a step is computing or handing out its logits (from its pass to its update's end) */
  private stepping = false;

  constructor(
    readonly model: LanguageModel,
    readonly tokenizer: Tokenizer,
    private readonly options: EngineOptions,
  ) {
    const int = (name: string, v: number | undefined, fallback: number, min: number) => {
      if (v === undefined) return fallback;
      if (!Number.isInteger(v) || v < min) throw new OptionError(`${name} must be an integer >= ${min}, got ${shownValue(v)}`, name);
      return v;
    };
    this.maxSequences = int("maxSequences", options.maxSequences, DEFAULT_MAX_SEQUENCES, 1);
    this.maxBatchTokens = int("maxBatchTokens", options.maxBatchTokens, 64, 1);
    const similarity = options.slotPromptSimilarity;
    if (similarity !== undefined && !(typeof similarity === "number" && similarity >= 0 && similarity <= 1)) {
      throw new OptionError(`slotPromptSimilarity must be a number in [0, 1] (0: slots picked by recency alone), got ${shownValue(similarity)}`, "slotPromptSimilarity");
    }
    this.slotTable = new SlotTable(this.maxSequences, similarity);
    if (options.kvCacheBytes !== undefined && !(Number.isSafeInteger(options.kvCacheBytes) && options.kvCacheBytes > 0)) {
      throw new OptionError(`kvCacheBytes must be a positive integer, got ${shownValue(options.kvCacheBytes)}`, "kvCacheBytes");
    }
    if (options.admission !== undefined && options.admission !== "reserve" && options.admission !== "preempt") {
      throw new OptionError(`admission must be "reserve" or "preempt", got ${shownValue(options.admission)}`, "admission");
    }
    this.slicer = new TimeSlicer(options.sliceMs ?? 5);
    // validates the budget now, so a bad kvCacheBytes (or a pool past the backend's largest
    // buffer) fails at load, not at the first request
    this.checkBufferLimit(this.capacityBlocks());
  }

  /**
   * A pool of `blocks` whose one layer's K or V array (one buffer of the backend's) is past
   * storage.maxBufferBytes (a GPU adapter's largest storage binding) is refused in one line with
   * what fits, as the load plan refuses it, for engines built without that plan (the browser's,
   * a caller's own); the first request would otherwise meet the backend's own refusal.
   */
  private checkBufferLimit(blocks: number): void {
    const limit = this.options.storage?.maxBufferBytes;
    const fitting = kvBlocksPerBuffer(this.model.info, this.model.kvCacheTypes, limit);
    if (blocks <= fitting) return;
    const positions = blocks * DEFAULT_BLOCK_SIZE, bytes = positions * kvArrayBytesPerToken(this.model.info, this.model.kvCacheTypes);
    const budget = this.options.kvCacheBytes !== undefined ? `kvCacheBytes ${this.options.kvCacheBytes}` : `contextSize ${this.contextSize}`;
    const proposal = this.options.kvCacheBytes !== undefined ? `kvCacheBytes ${fitting * DEFAULT_BLOCK_SIZE * this.bytesPerToken}` : `contextSize ${fitting * DEFAULT_BLOCK_SIZE}`;
    const tries: string[] = fitting < 1 ? [] : [proposal];
    const types = this.model.kvCacheTypes;
    if (types.k === "f32" || types.v === "f32") tries.push("a smaller cache type (cacheTypeK / cacheTypeV f16 or q8_0)");
    throw new OptionError(
      `${this.options.source ? `${this.options.source}: ` : ""}KV cache of ${positions} positions (${budget}): one layer's K or V array is ${formatBytes(bytes)} (${bytes} bytes), more than the ${limit} bytes (${formatBytes(limit!)}) the backend can allocate in one buffer${tries.length > 0 ? `: try ${tries.join(" or ")}` : ""}`,
      this.options.kvCacheBytes !== undefined ? "kvCacheBytes" : "contextSize",
    );
  }

  get contextSize(): number {
    return this.options.contextSize;
  }

  /**
   * ids that are tokens: those of both the tokenizer and the embedding. An embedding padded past
   * the tokenizer (Hugging Face checkpoints round it up) has rows no text decodes to; those ids are
   * never sampled and refused in prompts.
   */
  get tokenIds(): number {
    return Math.min(this.model.info.vocabSize, this.tokenizer.vocabSize);
  }

  /** what a request is checked against (request-checks.ts; the browser build's page gets them at load) */
  get limits(): RequestLimits {
    const blocks = this.capacityBlocks();
    const kv = { blocks, blockSize: DEFAULT_BLOCK_SIZE, bytes: blocks * DEFAULT_BLOCK_SIZE * this.bytesPerToken };
    return { contextSize: this.contextSize, tokenIds: this.tokenIds, rows: this.model.info.vocabSize, maxSequences: this.maxSequences, kv };
  }

  /**
   * The KV pool's memory: the bytes it may grow to (its budget: kvCacheBytes or the default, whole
   * blocks; an unplanned draft model's rows count in it, see draftCache) and the bytes its K and V arrays hold
   * now. The pool grows as requests need it, so a load beside this engine (a draft model) must
   * leave it budgetBytes - storedBytes of the memory free now.
   */
  get kvMemory(): { readonly budgetBytes: number; readonly storedBytes: number } {
    return { budgetBytes: this.capacityBlocks() * DEFAULT_BLOCK_SIZE * this.bytesPerToken, storedBytes: this.pool?.storedBytes ?? 0 };
  }

  /** bytes of K and V one token takes, all layers together */
  get bytesPerToken(): number {
    return kvBytesPerToken(this.model.info, this.model.kvCacheTypes);
  }

  get stats(): EngineStats {
    return {
      waiting: this.scheduler?.waiting.length ?? 0, running: this.scheduler?.running.length ?? 0, steps: this.steps, rowsComputed: this.rowsComputed, peakStepSequences: this.peakStepSequences,
      cachedPromptTokens: this.cachedPromptTokens, prefilledPromptTokens: this.prefilledPromptTokens,
      promptStepTokens: this.promptStepTokens, promptStepMs: this.promptStepMs, preemptions: this.scheduler?.preemptions ?? 0,
      draftPasses: this.draftPasses, draftRowsComputed: this.draftRowsComputed,
      draftTokensProposed: this.draftTokensProposed, draftTokensAccepted: this.draftTokensAccepted, draftRounds: this.draftRounds, kv: this.pool?.stats, kvCapacityTokens: this.capacityBlocks() * DEFAULT_BLOCK_SIZE,
      draftKvBytes: this.draftPoolRefs.reduce((sum, p) => sum + (p.deref()?.byteLength ?? 0), 0),
      draftKvUsedBytes: this.draftPoolRefs.reduce((sum, r) => {
        const p = r.deref();
        return sum + (p ? p.stats.blocksInUse * (p.byteLength / p.blockCount) : 0);
      }, 0),
      draftKvPeakBytes: this.draftPoolRefs.reduce((sum, r) => {
        const p = r.deref();
        return sum + (p ? p.stats.peakBlocksInUse * (p.byteLength / p.blockCount) : 0);
      }, 0),
      draftFallbacks: this.draftFallbacks, draftResumes: this.draftResumes,
    };
  }

  /**
   * The size of `draft`'s KV pool, as the memory plan reserved it beside this engine's (planDraft):
   * one context and a round of `draftTokens` proposed tokens, in whole blocks (draftPoolPositions),
   * or kvCacheBytes where less. Concurrent speculative requests share that pool and never grow it:
   * one it has no room for decodes without drafting. Without a plan (a library caller's draft
   * model) the pool grows with the requests up to kvCacheBytes, which admission keeps their draft
   * rows within; a pool already made keeps its size. `contextSize`: the context the plan counts
   * (default the engine's; a smaller one makes a smaller pool, whose requests find no room sooner).
   */
  planDraftCache(draft: LanguageModel, draftTokens: number, contextSize = this.contextSize): void {
    if (!Number.isInteger(draftTokens) || draftTokens < 1) throw new OptionError(`draftTokens must be an integer >= 1, got ${shownValue(draftTokens)}`, "draftTokens");
    if (!Number.isInteger(contextSize) || contextSize < 1) throw new OptionError(`contextSize must be an integer >= 1, got ${shownValue(contextSize)}`, "contextSize");
    this.draftPlans.set(draft, { draftTokens, contextSize });
  }

  /**
   * The size of `draft`'s KV pool as planned (planDraftCache), in positions and bytes, allocated
   * or not yet (its first request allocates it); undefined without a plan. What `tsllm serve`'s
   * ready line states.
   */
  draftPoolPlan(draft: LanguageModel): { tokens: number; bytes: number } | undefined {
    const planned = this.draftPlans.get(draft);
    if (planned === undefined) return undefined;
    const budget = this.capacityBlocks() * DEFAULT_BLOCK_SIZE * this.bytesPerToken;
    const blockBytes = kvBytesForContext(draft.info, DEFAULT_BLOCK_SIZE, draft.kvCacheTypes);
    const blocks = Math.max(1, Math.min(draftPoolPositions(planned.contextSize, planned.draftTokens, DEFAULT_BLOCK_SIZE) / DEFAULT_BLOCK_SIZE, Math.floor(budget / blockBytes)));
    return { tokens: blocks * DEFAULT_BLOCK_SIZE, bytes: blocks * blockBytes };
  }

  /**
   * Requests queued that must wait for a sequence to free up, were requests of the given
   * widths (n choices count n) queued behind them: the scheduler starts queued requests in
   * arrival order while free sequences last, so those that fit the free sequences do not wait,
   * even before the next step starts them. (The KV pool may hold one back longer.) Aborted
   * requests do not count: they leave at the next step, which may be a forward pass away.
   */
  waitingForRoom(widths: readonly number[] = []): number {
    const s = this.scheduler;
    const queue = [...(s?.waiting ?? []).filter((r) => !r.aborted).map((r) => r.strategy.width), ...widths];
    let free = this.maxSequences - (s?.runningSequences ?? 0);
    for (let i = 0; i < queue.length; i++) {
      free -= queue[i]!;
      // the first that does not fit waits, and every one behind it
      if (free < 0) return queue.length - i;
    }
    return 0;
  }

  /**
   * llama-server's slots: the maxSequences places of sequences run at once, each with the request
   * running there, if any (slots.ts)
   */
  slots(): SlotState[] {
    if (this.scheduler) this.slotTable.sync(this.scheduler.running);
    return this.slotTable.states();
  }

  /**
   * Runs `task` as slot `id`'s next slot task, as llama-server runs its SLOT_SAVE, SLOT_RESTORE and
   * SLOT_ERASE tasks: once every slot task asked of the slot before it has ended, and no request
   * runs in the slot (llama-server defers a busy slot's task, and takes its deferred tasks back
   * first come, first served: server_queue::pop_deferred_task). So a slot's tasks run one at a time
   * in the order they came, each waiting only for those before it; `slot` does the slot's save,
   * restore and erase within the task (what a caller does between them, such as writing the save's
   * file, is part of it). Rejects with a RangeError for an id that is no slot.
   */
  slotTask<T>(id: number, task: (slot: SlotTaskAccess) => Promise<T> | T): Promise<T> {
    if (!Number.isInteger(id) || id < 0 || id >= this.maxSequences) return Promise.reject(new RangeError(`slot id must be an integer in [0, ${this.maxSequences}), got ${shownValue(id)}`));
    const access: SlotTaskAccess = { read: () => this.readSlot(id), restore: (cache) => this.putSlot(id, cache), erase: () => this.dropSlot(id) };
    const run = (this.slotTasks[id] ?? Promise.resolve()).then(async () => {
      await this.idleSlot(id);
      return task(access);
    });
    this.slotTasks[id] = run.then(() => undefined, () => undefined);
    return run;
  }

  /**
   * llama-server's slot erase, as slot `id`'s next slot task (slotTask): the prefix-cache rows of
   * the tokens the slot ran last that no running sequence holds are dropped, so no later request
   * reuses them; resolves with the tokens whose rows were dropped
   */
  eraseSlot(id: number): Promise<number> {
    return this.slotTask(id, (slot) => slot.erase());
  }

  private dropSlot(id: number): number {
    const tokens = this.slotTable.takeLast(id);
    const pool = this.pool;
    if (!tokens || !pool) return 0;
    // (a block another slot's save still reads is dropped once the save lets go of it: dropped
    // now, it was held and went back to the prefix cache on release, where the next request
    // found the erased rows; one a running sequence holds stays, as before)
    let dropped = 0;
    for (const block of cachedPrefixBlocks(pool, tokens)) {
      if (pool.forget(block)) dropped += pool.blockSize;
      else if (pool.references(block) === (this.saveHolds.get(block) ?? 0)) {
        this.dropOnRelease.add(block);
        dropped += pool.blockSize;
      }
    }
    return dropped;
  }

  /**
   * How the KV pool stores a block's rows (what a saved slot's rows fit only where it is the
   * same: the model's shape, the cache types, the planes the backend reads); makes the pool
   */
  kvLayout(): KVLayout {
    this.ensureScheduler();
    const p = this.pool!, i = this.model.info;
    return { layers: p.nLayers, headCountKv: i.headCountKv, headDim: i.headDim, blockSize: p.blockSize, cacheTypeK: p.types.k, cacheTypeV: p.types.v, planar: p.planar, blockFloats: p.blockFloats };
  }

  /**
   * llama-server's slot save, in the engine's terms, as slot `id`'s next slot task (slotTask): the
   * tokens the slot ran last whose rows the prefix cache holds (its leading whole blocks; a partial
   * last block is never cached) and those rows, one array per block as KVBlockPool.readBlock
   * stores them (kvLayout).
   */
  saveSlot(id: number): Promise<SlotCache> {
    return this.slotTask(id, (slot) => slot.read());
  }

  /**
   * saveSlot's reads. The blocks are found and held between two steps, so that no step evicts or
   * reuses them (a K/V row never changes once written), then read SAVE_BLOCKS_IN_FLIGHT at a time
   * and released between two steps. A hold takes the blocks that were idle out of the room, so it
   * takes them only out of the room nobody running was promised (Scheduler.spareBlocks): held out
   * of a reserved request's room, that request found the pool full mid-way and failed ("KV cache
   * pool is full"); out of a preemptible one's, it was preempted. Until then the save waits for
   * room to change (a step or a request ending).
   */
  private async readSlot(id: number): Promise<SlotCache> {
    let taken: { tokens: readonly number[]; blocks: number[] } | undefined;
    while (!(taken = await this.betweenSteps(() => this.holdSlotBlocks(id)))) await new Promise<void>((resolve) => this.roomWaiters.push(resolve));
    const held = taken;
    const rows: Float32Array[] = [];
    try {
      // (a few blocks' reads at a time: all at once, a 4096-token slot's were 256 blocks' staging
      // memory held on a GPU and as many maps pending, or 131k on WebGPU before readParts)
      for (let i = 0; i < held.blocks.length; i += SAVE_BLOCKS_IN_FLIGHT) {
        rows.push(...(await Promise.all(held.blocks.slice(i, i + SAVE_BLOCKS_IN_FLIGHT).map((b) => this.pool!.readBlock(b)))));
      }
    } finally {
      await this.betweenSteps(() => this.releaseSaved(held.blocks));
    }
    return { tokens: held.tokens, blocks: rows };
  }

  /** the slot's cached blocks, held for a save, and their tokens; undefined where holding the idle ones takes room promised to a running request */
  private holdSlotBlocks(id: number): { tokens: readonly number[]; blocks: number[] } | undefined {
    const pool = this.pool, tokens = this.slotTable.lastTokens(id) ?? [];
    const blocks = pool ? cachedPrefixBlocks(pool, tokens) : [];
    if (blocks.length === 0) return { tokens: [], blocks };
    // (a block in use already takes no more room held; an idle one leaves the room)
    if (blocks.filter((b) => pool!.isIdle(b)).length > this.scheduler!.spareBlocks()) return undefined;
    for (const b of blocks) {
      pool!.hold(b);
      this.saveHolds.set(b, (this.saveHolds.get(b) ?? 0) + 1);
    }
    return { tokens: tokens.slice(0, blocks.length * DEFAULT_BLOCK_SIZE), blocks };
  }

  /** a save lets go of its blocks: those an erase asked for meanwhile leave the prefix cache, and the room is back (a request waiting for it, the loop asleep, starts) */
  private releaseSaved(blocks: readonly number[]): void {
    const pool = this.pool!;
    // (the last first, as a sequence's blocks go: the chain's head is evicted last)
    for (const b of [...blocks].reverse()) {
      pool.release(b);
      const left = this.saveHolds.get(b)! - 1;
      if (left > 0) this.saveHolds.set(b, left);
      else this.saveHolds.delete(b);
      if (left === 0 && this.dropOnRelease.delete(b)) pool.forget(b);
    }
    this.roomChanged();
  }

  /** wakes the loop and the saves waiting for room */
  private roomChanged(): void {
    this.wake();
    this.tellRoomWaiters();
  }

  /** the saves waiting for room look again (after a step, a request's end, a save's release) */
  private tellRoomWaiters(): void {
    for (const resolve of this.roomWaiters.splice(0)) resolve();
  }

  /**
   * llama-server's slot restore, as slot `id`'s next slot task (slotTask): `cache`'s rows
   * (saveSlot's, from a model and pool of this kvLayout) go into the prefix cache under its tokens,
   * so the next request starting with them computes none of their rows, and the slot remembers the
   * tokens (an erase drops them). Blocks already cached stay as they are. Refused, nothing changed,
   * where the cache does not fit the context or the pool has no room for it; resolves with the tokens.
   */
  restoreSlot(id: number, cache: SlotCache): Promise<number> {
    return this.slotTask(id, (slot) => slot.restore(cache));
  }

  private async putSlot(id: number, cache: SlotCache): Promise<number> {
    const { tokens, blocks } = cache, layout = this.kvLayout();
    if (tokens.length !== blocks.length * layout.blockSize) throw new RangeError(`a slot's cache holds ${blocks.length} blocks of ${layout.blockSize} tokens, got ${tokens.length} tokens`);
    if (tokens.length > this.contextSize) throw new RangeError(`the restored tokens (${tokens.length}) do not fit the context of ${this.contextSize}`);
    const bad = tokens.findIndex((t) => !(Number.isInteger(t) && t >= 0 && t < this.tokenIds));
    if (bad >= 0) throw new RangeError(`token ${bad} of the restored slot (${shownValue(tokens[bad])}) is no token id of this model (0..${this.tokenIds - 1})`);
    for (const b of blocks) if (b.length !== layout.blockFloats) throw new RangeError(`a block's rows are ${layout.blockFloats} floats in this KV cache, got ${b.length}`);
    return this.betweenSteps(() => {
      const pool = this.pool!, bs = pool.blockSize;
      // (checked first, so a refusal changes nothing: each block is held until the last is in, so
      // the room is what is free or evictable less the idle blocks of its tokens cached already;
      // unheld, take() evicted the oldest idle, which could be one of those, and the chain of keys
      // broke there: the restored rows after it were never found again)
      const cached = cachedPrefixBlocks(pool, tokens);
      const needed = blocks.length - cached.length, room = pool.roomBlocks - cached.filter((b) => pool.isIdle(b)).length;
      if (needed > room) throw new RangeError(`no room in the KV cache: the slot's ${blocks.length} blocks need ${needed} more, ${room} are free or evictable`);
      const held: number[] = [];
      try {
        let previous = 0;
        blocks.forEach((rows, b) => {
          const restored = pool.restoreBlock(KVBlockPool.prefixKey(previous, tokens.slice(b * bs, (b + 1) * bs)), rows);
          held.push(restored.block);
          previous = restored.id;
        });
      } finally {
        // (the last first, as a sequence's blocks go: the chain's head is evicted last)
        for (const b of held.reverse()) pool.release(b);
      }
      this.slotTable.restored(id, tokens);
      return tokens.length;
    });
  }

  /** resolves once no request runs in slot `id` (checked again after each one ends: another may have taken it) */
  private async idleSlot(id: number): Promise<void> {
    for (;;) {
      if (this.scheduler) this.slotTable.sync(this.scheduler.running);
      const running = this.slotTable.holder(id);
      if (!running) return;
      await running.outcome.then(() => undefined, () => undefined);
    }
  }

  /**
   * Runs `task` while no step is computing (now, or as the step in flight ends): a change to the pool's blocks or arrays mid-step (a restore's take()
   * may grow them) would lose the rows the step is writing
   */
  private betweenSteps<T>(task: () => T): Promise<T> {
    // (the executor runs at once: with no step in flight the task runs before this returns)
    return new Promise<T>((resolve, reject) => {
      const run = () => {
        try {
          resolve(task());
        } catch (e) {
          reject(e);
        }
      };
      if (this.stepping) this.pendingBetween.push(run);
      else run();
    });
  }

  /** the tasks betweenSteps queued for the loop */
  private runBetween(): void {
    for (const task of this.pendingBetween.splice(0)) task();
    this.tellRoomWaiters();
  }

  /**
   * Queues a request; its events and outcome arrive on the returned request. Throws at once
   * (nothing queued) for a request that is invalid or could never fit in the KV cache.
   */
  submit(params: RequestParams): EngineRequest {
    if (this.closed) throw new DisposedError("the engine has been closed (model disposed)");
    const { promptTokens, maxTokens } = params;
    const limits = this.limits;
    // (a prompt that fills the context is taken when nothing is generated: maxTokens 0)
    checkPromptTokens(promptTokens, limits, maxTokens);
    try {
      validateMaxTokens(maxTokens);
    } catch (e) {
      throw new RequestError((e as Error).message, "maxTokens");
    }
    checkStopTokens(params.stopTokens, limits.tokenIds);
    if (params.decoding.kind === "sample") checkBannedTokens(params.decoding, limits.tokenIds);
    try {
      validateLogprobs(params.topLogprobs);
    } catch (e) {
      throw new RequestError((e as Error).message, "logprobs");
    }
    // (as Model.submit refuses them: a beam's or a speculative round's tokens are not sampled from one row of logits; a speculative request failed at its first token)
    if (params.topLogprobs !== undefined && params.decoding.kind !== "sample") throw new RequestError("logprobs are not available with beam search or speculative decoding", "logprobs");
    try {
      validateLogprobs(params.promptLogprobs, "promptLogprobs");
    } catch (e) {
      throw new RequestError((e as Error).message, "promptLogprobs");
    }
    // throws a RangeError naming a bad sampling option (no sampler buffers built just to check)
    const { logitBias } = resolveSamplingOptions(params.sampling);
    // checked here, not where the first token is sampled: a request fails before its prefill
    // (against the logits' rows, as the sampler applies it: an embedding may be padded past the tokenizer)
    checkLogitBiasIds(logitBias.keys(), limits.rows);
    try {
      validateStopStrings(params.stop);
    } catch (e) {
      throw new RequestError((e as Error).message, "stop");
    }
    const strategy = this.strategyFor(params);
    checkWidth(strategy.width, params.decoding.kind === "beam", limits.maxSequences);
    if (params.slot !== undefined && !(Number.isSafeInteger(params.slot) && params.slot >= 0 && params.slot < limits.maxSequences)) {
      throw new RequestError(`slot: expected an engine slot's id, 0..${limits.maxSequences - 1} (maxSequences ${limits.maxSequences}), got ${params.slot}`, "slot");
    }
    const scheduler = this.ensureScheduler();
    const request = new EngineRequest(this.nextId++, params, strategy);
    request.onCancel = () => this.wake();
    scheduler.admissible(request);
    scheduler.waiting.push(request);
    const signal = params.signal;
    if (signal) {
      // the caller's signal may outlive the request (one signal for many, one listener on it: onAbort): the listener leaves with it
      const off = onAbort(signal, () => this.wake());
      request.outcome.then(off, off);
    }
    // (its end's outcome holds its rounds' counts; this runs before its caller's own reading of the outcome)
    if (params.decoding.kind === "speculative") request.outcome.then((o) => this.countDrafts(o.extra.speculative), () => undefined);
    this.kick();
    return request;
  }

  /** fails every request still queued or running; the engine takes no more */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    const s = this.scheduler;
    if (s) for (const r of [...s.running, ...s.waiting]) this.end(r, new DisposedError("the model was disposed while the request was running"));
    this.wake();
  }

  private kick(): void {
    this.wake();
    if (this.looping) return;
    this.looping = true;
    void this.loop();
  }

  private wake(): void {
    const w = this.wakeLoop;
    this.wakeLoop = undefined;
    w?.();
  }

  /**
   * Steps until no request is left. `looping` is cleared in the same synchronous stretch as the
   * check that found nothing to do, so a request submitted right after always starts a new loop.
   */
  private async loop(): Promise<void> {
    for (;;) {
      const s = this.scheduler;
      if (this.closed || !s) return void (this.looping = false);
      this.sweepAborted(s);
      if (s.running.length === 0 && s.waiting.length === 0) return void (this.looping = false);
      let plan = s.schedule();
      this.slotTable.sync(s.running);
      if (plan.chunks.length === 0) {
        // nothing can run until something changes (a new request, an abort, a reader catching up)
        await new Promise<void>((resolve) => {
          this.wakeLoop = resolve;
          // (a reader behind wakes nothing when it reads: polled, a request preempted while its reader lagged included)
          if (s.running.some((r) => r.backlog > 0) || s.waiting.some((r) => r.backlog > 0)) setTimeout(resolve, 1);
        });
        continue;
      }
      this.stepping = true;
      const started = performance.now();
      try {
        let logits: (Float32Array | undefined)[];
        try {
          logits = await executeStep(this.model, plan, this.slicer);
        } catch (e) {
          // one request's rows may be what failed the pass: run each request alone, so the one at
          // fault fails alone and the others go on (their rows are rewritten in place: a failed pass
          // never advances a cache's length)
          ({ plan, logits } = await this.isolate(plan, e));
          if (plan.chunks.length === 0) continue;
        }
        this.steps++;
        let promptRows = 0;
        for (const c of plan.chunks) {
          this.rowsComputed += c.tokens.length;
          if (!c.request.prefilled) promptRows += c.tokens.length;
        }
        if (promptRows > 0) {
          this.promptStepTokens += promptRows;
          this.promptStepMs += performance.now() - started;
        }
        this.peakStepSequences = Math.max(this.peakStepSequences, plan.chunks.length);
        if (this.closed) return void (this.looping = false);
        try {
          await this.update(s, plan, logits);
        } catch (e) {
          // (update fails a request whose strategy throws; anything else that throws fails the step's requests, not the engine)
          const error = explainStepError(e, this.options.source);
          for (const r of new Set(plan.chunks.map((c) => c.request))) this.end(r, error);
        }
      } finally {
        this.stepping = false;
        this.runBetween();
      }
      await this.slicer.turn();
    }
  }

  /** re-runs a failed step one request at a time; fails the requests whose pass fails again, returns what the others computed */
  private async isolate(plan: StepPlan, error: unknown): Promise<{ plan: StepPlan; logits: (Float32Array | undefined)[] }> {
    const requests = [...new Set(plan.chunks.map((c) => c.request))];
    const chunks: StepPlan["chunks"][number][] = [];
    const logits: (Float32Array | undefined)[] = [];
    for (const request of requests) {
      const own = plan.chunks.filter((c) => c.request === request);
      try {
        const got = requests.length === 1 ? Promise.reject(error) : executeStep(this.model, { chunks: own, admitted: [] }, this.slicer);
        logits.push(...(await got));
        chunks.push(...own);
      } catch (e) {
        this.end(request, e);
      }
    }
    return { plan: { chunks, admitted: plan.admitted.filter((r) => requests.includes(r) && r.phase !== "finished") }, logits };
  }

  /** hands each request's logits to its strategy (which samples, applies stops and emits), registers full blocks, ends finished requests */
  private async update(s: Scheduler, plan: StepPlan, logits: readonly (Float32Array | undefined)[]): Promise<void> {
    const results = new Map<EngineRequest, SequenceLogits[]>();
    plan.chunks.forEach((chunk, i) => {
      s.computed(chunk);
      let list = results.get(chunk.request);
      if (!list) results.set(chunk.request, (list = []));
      const row = logits[i];
      if (!row) return;
      const rows = this.maskPadding(row);
      if (chunk.request.promptLogprobs === undefined || chunk.request.prefilled) return void list.push({ seq: chunk.sequence, logits: rows });
      // a prompt being scored: every row of the chunk is scored here (its top k kept, the rows
      // dropped with the step); the strategy gets the last prompt token's row once it is computed
      this.scorePromptChunk(chunk, rows);
      const vocab = this.model.info.vocabSize;
      if (chunk.start + chunk.tokens.length === chunk.request.params.promptTokens.length) list.push({ seq: chunk.sequence, logits: rows.subarray(rows.length - vocab) });
    });
    const rounds = new Map<EngineRequest, DraftRound>();
    const failed = new Map<EngineRequest, unknown>();
    for (const [request, got] of results) {
      if (got.length === 0) continue;
      try {
        if (!request.prefilled) {
          request.markPrefilled();
          this.cachedPromptTokens += request.cachedPromptTokens;
          this.prefilledPromptTokens += request.params.promptTokens.length;
          request.strategy.start(request, got[0]!.seq, got[0]!.logits, s);
        } else {
          request.strategy.step(request, got, s);
        }
        // (a strategy drafting with a draft model leaves passes to run)
        const round = request.strategy.drafting?.();
        if (round) rounds.set(request, round);
      } catch (e) {
        failed.set(request, e);
      }
    }
    if (rounds.size > 0) await this.draft(rounds, failed);
    for (const request of results.keys()) {
      // a strategy that throws (a non-finite logit, a draft model that failed) fails its own request, not the others of the step
      if (failed.has(request)) {
        this.end(request, explainStepError(failed.get(request), this.options.source));
        continue;
      }
      for (const seq of request.sequences) s.cacheFullBlocks(seq);
      if (request.strategy.done) this.end(request);
    }
  }

  /**
   * Runs the step's draft rounds in lockstep: each time, the next pass of every round drafting
   * with the same model as ONE batched pass (each sequence's rows computed as in a pass of its
   * own), then the next, until every proposal is drafted. A batched pass that fails is run again
   * one round at a time, so only the rounds whose own pass fails fail (into `failed`).
   */
  private async draft(rounds: ReadonlyMap<EngineRequest, DraftRound>, failed: Map<EngineRequest, unknown>): Promise<void> {
    type Live = { request: EngineRequest; round: DraftRound; pass: DraftPass };
    let live: Live[] = [];
    /** the round's next pass, or its end (finished); false when it threw */
    const advance = (request: EngineRequest, round: DraftRound, logits?: Float32Array): void => {
      try {
        const r = logits === undefined ? round.passes.next() : round.passes.next(logits);
        if (!r.done) return void live.push({ request, round, pass: r.value });
        round.finish();
      } catch (e) {
        failed.set(request, e);
      }
    };
    for (const [request, round] of rounds) advance(request, round);
    while (live.length > 0) {
      const groups = new Map<LanguageModel, Live[]>();
      for (const l of live) {
        const group = groups.get(l.round.model);
        if (group) group.push(l);
        else groups.set(l.round.model, [l]);
      }
      live = [];
      for (const [model, group] of groups) {
        let logits: (Float32Array | undefined)[];
        const lengths = group.map((l) => l.pass.cache.length);
        this.draftPasses++;
        for (const l of group) this.draftRowsComputed += l.pass.tokens.length;
        try {
          logits = await exclusive(model, () => model.forwardBatchAsync(group.map((l) => ({ tokens: l.pass.tokens, cache: l.pass.cache }))));
        } catch (e) {
          if (group.length === 1) {
            failed.set(group[0]!.request, e);
            continue;
          }
          // a pass that failed after it stored its rows (reading the logits back) left the caches
          // longer: each is cut back, so that its pass alone writes its rows where they belong
          group.forEach((l, i) => { if (l.pass.cache.length > lengths[i]!) l.pass.cache.truncate(lengths[i]!); });
          logits = [];
          for (const l of group) {
            this.draftPasses++;
            this.draftRowsComputed += l.pass.tokens.length;
            try {
              logits.push(await exclusive(model, () => model.forwardAsync(l.pass.tokens, l.pass.cache)));
            } catch (e) {
              logits.push(undefined);
              failed.set(l.request, e);
            }
          }
        }
        group.forEach((l, i) => {
          if (logits[i]) advance(l.request, l.round, logits[i]);
        });
      }
    }
  }

  /**
   * The logprobs of the prompt tokens a chunk's rows predict: the row of position p is the
   * distribution of the token at p + 1 (the last prompt position's predicts the first generated
   * token, not scored here).
   */
  private scorePromptChunk(chunk: ScheduledChunk, rows: Float32Array): void {
    const { promptTokens, promptLogprobs: k } = chunk.request.params;
    const vocab = this.model.info.vocabSize;
    const scored = chunk.request.promptLogprobs!;
    for (let j = 0; j < chunk.tokens.length; j++) {
      const next = chunk.start + j + 1;
      if (next >= promptTokens.length) break;
      scored.push(tokenLogprobs(rows.subarray(j * vocab, (j + 1) * vocab), promptTokens[next]!, k!));
    }
  }

  /** -inf for the padding ids of every row (one or, for a strategy that asked for all, several rows back to back) */
  private maskPadding(logits: Float32Array): Float32Array {
    const rows = this.model.info.vocabSize, tokens = this.tokenIds;
    if (tokens < rows) for (let r = 0; r < logits.length; r += rows) logits.fill(-Infinity, r + tokens, r + rows);
    return logits;
  }

  private sweepAborted(s: Scheduler): void {
    for (const request of [...s.waiting, ...s.running]) {
      if (!request.aborted) continue;
      request.strategy.abort(request);
      this.end(request);
    }
  }

  /** the strategy that decodes the request (validates its options) */
  private strategyFor(params: RequestParams): Strategy {
    const d = params.decoding;
    const grammar = params.constraint === undefined ? undefined : this.grammarOf(params.constraint);
    const makeSequence = (choice: number) => this.newSequence(params, choice, grammar);
    const room = Math.min(params.maxTokens, this.contextSize - params.promptTokens.length);
    const endIds = params.ignoreEos ? new Set<number>() : this.endIds(params);
    const vocab = this.model.info.vocabSize;
    switch (d.kind) {
      case "sample":
        if (!Number.isInteger(d.n) || d.n < 1) throw new RequestError(`n must be an integer >= 1 (the number of completions), got ${d.n}`, "n");
        validateTokenBans(d, "sample");
        return new SamplingStrategy(d.n, room, makeSequence, params.topLogprobs !== undefined);
      case "beam": {
        const options = { ...d, maxTokens: room, endIds };
        validateBeamOptions(options);
        const constraint = grammar ? new TokenConstraint(grammar, ConstraintVocabulary.of(this.tokenizer, params.preservedTokens), endIds) : undefined;
        return new BeamStrategy(params.promptTokens, options, vocab, makeSequence, (t) => completionText(this.tokenizer, params.promptTokens, t, params.preservedTokens), constraint);
      }
      case "speculative": {
        validateSpeculative(d);
        const draft = d.draft;
        if (draft && draft.info.vocabSize !== vocab) throw new RequestError(`draft model: its vocabulary has ${draft.info.vocabSize} tokens, the target's ${vocab}`, "draftModel");
        const draftTokens = d.draftTokens ?? defaultDraftTokens(draft !== undefined);
        // a draft pool that grows with the requests (no plan) keeps their draft caches within
        // kvCacheBytes only if they count against it as the request's own blocks do: without it 16
        // concurrent requests with a draft held 25x the budget (see docs/engine.md) (in whole blocks
        // of the draft's pool, which is what its cache takes). A planned pool is its own room beside
        // the target's, which the memory plan counts apart and a round without room falls back in:
        // charged to the target's pool too, requests that fit it waited or were preempted
        const draftBlockBytes = draft && !this.draftPoolPlanned(draft) && kvBytesForContext(draft.info, DEFAULT_BLOCK_SIZE, draft.kvCacheTypes);
        const draftPoolBlocks = draftBlockBytes ? (positions: number) => Math.ceil((Math.ceil(positions / DEFAULT_BLOCK_SIZE) * draftBlockBytes) / (DEFAULT_BLOCK_SIZE * this.bytesPerToken)) : undefined;
        return new SpeculativeStrategy(vocab, params.promptTokens, (out) => {
          const sampler = out.sampler;
          // temperature > 0: speculative sampling (rejection rule) over the sampler's processed
          // distributions, the draft with the same processors, all draws from one stream seeded like the sampler
          const sampling = sampler.options.temperature > 0 ? {
            target: sampler.distribution, draft: createSampler(sampler.options, this.infillVocabulary).distribution, rng: new Mt19937(sampler.options.seed),
          } : undefined;
          // a constraint: the decoder keeps its own parse (the output sequence's is not used)
          const constraint = grammar ? new TokenConstraint(grammar, ConstraintVocabulary.of(this.tokenizer, params.preservedTokens), params.ignoreEos ? new Set<number>() : endIds) : undefined;
          return {
            maxTokens: room, draft: draft && queuedPasses(draft), draftCache: draft && ((positions) => this.draftCache(draft, positions)), draftTokens, promptLookup: d.promptLookup, endIds,
            onDraftFull: () => void this.draftFallbacks++, onDraftResumed: () => void this.draftResumes++,
            choose: (logits, history) => sampler.sample(logits, history), sampling, constraint,
          };
        }, draftTokens, room, makeSequence, draftPoolBlocks, draft);
      }
    }
  }

  /**
   * whether `draft`'s pool is the planned one (planDraftCache), made or to be made by its first
   * request, which holds the draft rows in their own room; a pool made without a plan keeps its size
   */
  private draftPoolPlanned(draft: LanguageModel): boolean {
    const pool = this.draftPools.get(draft);
    return pool ? this.plannedDraftPools.has(pool) : this.draftPlans.has(draft);
  }

  /**
   * A KV cache for `draft` on the one pool this engine's requests drafting with it share (made by
   * the first of them): a finished request's rows go back to that pool for the next one. A cache
   * of its own per request was freed only when the garbage collector found it: 60 requests in a
   * row held 3.8 GB of a draft's caches (docs/engine.md).
   */
  private draftCache(draft: LanguageModel, positions: number): KVCache {
    let pool = this.draftPools.get(draft);
    if (!pool) {
      // It is kept, not dropped when idle: a dropped pool's memory comes back only when the garbage
      // collector finalizes its arrays (the wasm arena's blocks), which requests one at a time outran
      const budget = this.capacityBlocks() * DEFAULT_BLOCK_SIZE * this.bytesPerToken;
      const planned = this.draftPlans.get(draft);
      if (planned === undefined) {
        // made for the first request, it grows (doubling) as requests need, up to kvCacheBytes, as
        // admission keeps the draft rows in use within kvCacheBytes too (docs/engine.md)
        pool = draft.createCache(positions).pool;
        pool.limitBytes(budget);
      } else {
        // the planned size (planDraftCache), all of it now and never more: capped only at
        // kvCacheBytes, concurrent requests grew it to the whole budget beside the target's pool,
        // past the draft cache the memory plan counts (docs/engine.md). Allocated whole, it leaves
        // no outgrown arrays behind (a wasm memory keeps them); within kvCacheBytes as before
        pool = draft.createCache(this.draftPoolPlan(draft)!.tokens).pool;
        pool.limitBytes(pool.byteLength);
        this.plannedDraftPools.add(pool);
      }
      this.draftPools.set(draft, pool);
      this.draftPoolRefs.push(new WeakRef(pool));
      for (let i = this.draftPoolRefs.length - 1; i >= 0; i--) if (!this.draftPoolRefs[i]!.deref()) this.draftPoolRefs.splice(i, 1);
    }
    const i = draft.info;
    return new KVCache(i.blockCount, i.headCountKv, i.headDim, positions, pool);
  }

  private endIds(p: RequestParams): ReadonlySet<number> {
    return p.stopTokens.length > 0 ? new Set([...this.tokenizer.endOfGenerationIds, ...p.stopTokens]) : this.tokenizer.endOfGenerationIds;
  }

  /** an ended speculative request's proposals, into the stats */
  private countDrafts(s: { drafted: number; accepted: number; rounds: number } | undefined): void {
    if (!s) return;
    this.draftTokensProposed += s.drafted;
    this.draftTokensAccepted += s.accepted;
    this.draftRounds += s.rounds;
  }

  /** the request leaves the scheduler (its blocks back to the pool) and settles */
  private end(request: EngineRequest, error?: unknown): void {
    this.slotTable.release(request);
    this.scheduler!.remove(request);
    this.tellRoomWaiters();
    request.strategy.release?.();
    if (error === undefined) request.complete();
    else request.fail(error);
  }

  private ensureScheduler(): Scheduler {
    if (this.scheduler) return this.scheduler;
    const i = this.model.info;
    const blocks = this.capacityBlocks();
    // the pool admits as if all its blocks were there, but its arrays start at one block and grow
    // (doubling) with the blocks in use: a 1 MB model at contextSize 2048 held 42 MB of K/V for
    // 16 contexts it never used (docs/engine.md)
    this.pool = new KVBlockPool(i.blockCount, i.headCountKv, i.headDim, blocks, this.options.storage, DEFAULT_BLOCK_SIZE, blocks * DEFAULT_BLOCK_SIZE * this.bytesPerToken, this.model.kvCacheTypes, 1);
    const pool = this.pool;
    this.scheduler = new Scheduler(
      pool, { maxBatchTokens: this.maxBatchTokens, maxSequences: this.maxSequences, contextSize: this.contextSize, cacheReplies: this.options.cacheReplies ?? true, admission: this.options.admission ?? "preempt" },
      () => new KVCache(i.blockCount, i.headCountKv, i.headDim, this.contextSize, pool),
    );
    // a request pinned to a slot (llama-server's id_slot) waits until the slot is free
    this.scheduler.startable = (r, admitted) => r.params.slot === undefined || this.slotTable.free(r.params.slot, admitted);
    // (before, a request preempted in a step held its slots until the step's end: one pinned to its
    // own slot was passed over, and a request behind it took the slot, when the step went on admitting)
    this.scheduler.onPreempt = (r) => this.slotTable.release(r);
    // (a pinned request preempts its slot's holder when that one is paused on a stalled reader)
    this.scheduler.slotHolder = (r) => (r.params.slot === undefined ? undefined : this.slotTable.holder(r.params.slot));
    return this.scheduler;
  }

  /** the vocabulary as llama.cpp's infill sampler reads it (its pieces looked up once, for every request) */
  private get infillVocabulary(): InfillVocabulary {
    return (this.infillPieces ??= infillVocabulary(this.tokenizer));
  }

  private infillPieces: InfillVocabulary | undefined;

  /** the output sequence of a choice: its sampler (seed + choice), stop strings, streaming decoder, constraint */
  private newSequence(p: RequestParams, choice: number, grammar: Grammar | undefined): Sequence {
    const rules: StopRules = { maxTokens: p.maxTokens, contextSize: this.contextSize, endIds: this.endIds(p), ignoreEos: p.ignoreEos, topLogprobs: p.topLogprobs, logprobsAfterSampling: p.logprobsAfterSampling ?? false, ...(p.lineLimits ? { lineLimits: p.lineLimits } : {}) };
    const sampler = createSampler({ ...p.sampling, seed: (p.sampling.seed + choice) % 2 ** 32 }, this.infillVocabulary);
    const constraint = grammar ? new TokenConstraint(grammar, ConstraintVocabulary.of(this.tokenizer, p.preservedTokens), p.ignoreEos ? new Set() : rules.endIds) : undefined;
    const bans: TokenBans = p.decoding.kind === "sample" ? p.decoding : {};
    return new Sequence(p.promptTokens, sampler, createStopMatcher(p.stop), completionDecoder(this.tokenizer, p.promptTokens, p.preservedTokens), rules, constraint, bans);
  }

  /** a constraint's grammar, compiled once per distinct spec (the last few kept); a bad one is a RequestError naming where */
  private grammarOf(spec: ConstraintSpec): Grammar {
    const key = JSON.stringify(spec);
    let g = this.grammars.get(key);
    if (!g) {
      g = compileRequestConstraint(spec);
      if (this.grammars.size >= 32) this.grammars.delete(this.grammars.keys().next().value!);
      this.grammars.set(key, g);
    }
    return g;
  }

  /** blocks of the KV pool: the budget (or the default), whole blocks */
  private capacityBlocks(): number {
    const perBlock = DEFAULT_BLOCK_SIZE * this.bytesPerToken;
    if (this.options.kvCacheBytes !== undefined) {
      const blocks = Math.floor(this.options.kvCacheBytes / perBlock);
      if (blocks < 1) throw new OptionError(`kvCacheBytes ${this.options.kvCacheBytes} holds no block of ${DEFAULT_BLOCK_SIZE} tokens (${perBlock} bytes of K/V)`, "kvCacheBytes");
      return blocks;
    }
    // the default pool no larger than the backend's largest buffer holds (as the load plan sizes it), but one context
    const fitting = kvBlocksPerBuffer(this.model.info, this.model.kvCacheTypes, this.options.storage?.maxBufferBytes);
    return Math.max(Math.ceil(this.contextSize / DEFAULT_BLOCK_SIZE), Math.min(defaultKvBlocks(this.contextSize, this.bytesPerToken, this.maxSequences), fitting));
  }
}

/** blocks of the default KV pool: room for `maxSequences` full contexts, capped at 1/8 of RAM and 2 GiB, but at least one full context */
export function defaultKvBlocks(contextSize: number, bytesPerToken: number, maxSequences: number): number {
  const perBlock = DEFAULT_BLOCK_SIZE * bytesPerToken;
  const oneContext = Math.ceil(contextSize / DEFAULT_BLOCK_SIZE);
  const cap = Math.min(totalMemoryBytes() / 8, 2 * GiB);
  return Math.max(oneContext, Math.min(maxSequences * oneContext, Math.floor(cap / perBlock)));
}

/**
 * A sampler's refusal of a non-finite logit, said as what it is: the model computed NaN or +Inf,
 * which a finite model never does (its weights hold NaN/Inf past the rows checked at load, or
 * they overflow): the model's file is to blame, not the request.
 */
function explainStepError(e: unknown, source: string | undefined): unknown {
  const m = e instanceof RangeError ? /^logits\[(\d+)\] = (NaN|Infinity)/.exec(e.message) : null;
  if (!m) return e;
  return new Error(`${source ?? "the model"}: the model computed ${m[2]} for the logit of token ${m[1]}: its weights (or what they compute) are not finite; the file is damaged or was converted badly`);
}
