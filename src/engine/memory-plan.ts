import { DEFAULT_BLOCK_SIZE, kvArrayBytesPerToken, kvBlocksPerBuffer, kvBytesPerToken } from "../cache/index.js";
import type { SourceTensorInfo } from "../formats/index.js";
import { byteLengthAs, loadedType } from "../models/index.js";
import { envVar, freeMemoryBytes } from "../platform/host.js";
import { quantizationType, typeName, type Quantization } from "../tensor/index.js";
import { formatBytes } from "../units/index.js";
import type { KVCacheTypes } from "../kernels/index.js";
import { DEFAULT_MAX_SEQUENCES, defaultKvBlocks } from "./engine.js";
import { draftPoolPositions } from "./request-checks.js";

/**
 * Memory planning before a model is loaded: its weights as they will be kept (after the load
 * quantization), the KV pool the engine will allocate at the context size, and a scratch
 * estimate, against the memory free now. A plan that does not fit is refused in one line that
 * says what it needs, what is free, and what would fit.
 */

/** the sizes of a decoder that decide its KV cache and activations */
export interface PlanShape {
  readonly blockCount: number;
  readonly headCountKv: number;
  readonly headDim: number;
  readonly headCount: number;
  readonly embeddingLength: number;
  readonly feedForwardLength: number;
  /** the trained context */
  readonly contextLength: number;
  readonly vocabSize: number;
}

export interface PlanRequest {
  readonly tensors: readonly SourceTensorInfo[];
  readonly shape: PlanShape;
  readonly quantize?: Quantization;
  readonly contextSize: number;
  /** how the KV cache stores K and V (default f32 both) */
  readonly kvCacheTypes?: KVCacheTypes;
  readonly kvCacheBytes?: number;
  readonly maxSequences?: number;
  readonly maxBatchTokens?: number;
  /** one wasm32 memory holds at most 4 GiB: no single tensor may be larger (the wasm backend) */
  readonly wasm?: boolean;
  /** the wasm backend's threads, the calling one included: each other one is a worker (WORKER_BYTES) */
  readonly threads?: number;
  /**
   * the most bytes the backend allocates in one buffer (Backend.maxBufferBytes: a GPU adapter's
   * largest storage binding), which one layer's K or V array of the KV pool must fit in; with the
   * backend's name for the refusal
   */
  readonly maxBuffer?: { readonly bytes: number; readonly backend: string };
  /**
   * a model loaded beside this one in the same memory (a draft model for speculative decoding):
   * what it is called in a refusal, what makes it smaller, and the bytes it takes at a context size
   * (its weights, scratch and KV cache), counted in this plan's total so that both fit in one account
   */
  readonly beside?: { readonly what: string; readonly smaller: string; readonly bytesAt: (contextSize: number) => number };
}

export interface MemoryPlan {
  readonly contextSize: number;
  readonly weightBytes: number;
  /** the main weight type after quantization (the most bytes) */
  readonly weightType: string;
  readonly kvCacheBytes: number;
  /**
   * on wasm with an explicit kvCacheBytes: the K/V arrays that pool outgrows as it fills, which a
   * wasm memory keeps (outgrownKvBlocks; the default pool is sized with them by kvPoolBytes)
   */
  readonly outgrownKvBytes: number;
  /** tokens the KV pool holds (all sequences together) */
  readonly kvTokens: number;
  /** bytes of one layer's K or V array (the larger) of that pool: one buffer of the backend's */
  readonly kvArrayBytes: number;
  readonly scratchBytes: number;
  /** the model loaded beside this one (PlanRequest.beside) at this context; 0 without one */
  readonly besideBytes: number;
  readonly totalBytes: number;
  /** the largest single tensor, which one wasm memory must hold */
  readonly largestTensor: { readonly name: string; readonly bytes: number };
}

/** one wasm32 memory: 65536 pages of 64 KiB */
export const WASM_MEMORY_BYTES = 4 * 2 ** 30;
/** the wasm module and its stacks, the tokenizer, the JS heap: a fixed allowance */
const RUNTIME_BYTES = 32 * 2 ** 20;
/**
 * Each worker thread of the wasm backend (its own isolate, heap and compiled module): rss after
 * loading the same model grew by 32.5-36.6 MB a worker, whatever the model (scripts/measure-memory-
 * plan.ts --sequences 0 --threads 1/2/3/4/8: 44 MB and 230 MB F32 llamas, docs/hardening.md)
 */
export const WORKER_BYTES = 34 * 2 ** 20;

/**
 * Free memory the automatic sizes (contextSize "auto", the default KV pool) leave unused: llama.cpp's
 * `--fit` keeps 1024 MiB free per device by default (`--fit-target`), since what a process
 * allocates drifts above any estimate and the rest of the machine needs room too. Explicit sizes
 * (a context, kvCacheBytes) are the user's and are checked against all of the free memory.
 */
export const DEFAULT_MEMORY_MARGIN = 2 ** 30;
/** the margin as bytes from the environment (TSLLM_MEMORY_MARGIN), as --fit-target sets llama.cpp's */
export const MEMORY_MARGIN_ENV = "TSLLM_MEMORY_MARGIN";
/**
 * The context "auto" keeps even where that eats into the margin (as llama.cpp's fit lowers an unset
 * context to keep its margin, but not below `--fit-ctx`, 4096), or the trained one where smaller.
 */
export const AUTO_CONTEXT_FLOOR = 4096;

/**
 * The environment variable that overrides the free memory the planner sees, in bytes (for tests
 * and for experiments: "what would it propose on a machine with 6 GB free").
 */
export const AVAILABLE_MEMORY_ENV = "TSLLM_AVAILABLE_MEMORY";

/** the free memory the planner compares against: TSLLM_AVAILABLE_MEMORY when set, else the host's free memory */
export function availableMemoryBytes(): number {
  return availableMemoryOverride() ?? freeMemoryBytes();
}

/** TSLLM_AVAILABLE_MEMORY's bytes, or undefined where it is not set */
function availableMemoryOverride(): number | undefined {
  const v = envVar(AVAILABLE_MEMORY_ENV);
  if (v === undefined || v === "") return undefined;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${AVAILABLE_MEMORY_ENV} must be a number of bytes, got "${v}"`);
  return n;
}

/** what a loaded model holds or may still take of the memory: its planned weights and scratch, its KV pool's budget and the bytes that pool holds now */
export interface LoadedMemory {
  readonly residentBytes: number;
  readonly budgetBytes: number;
  readonly storedBytes: number;
}

/**
 * The memory left to a model loaded beside `loaded` (a draft beside its target), and the free
 * memory it is taken from. The host's free memory, measured now, no longer holds what `loaded`
 * took: only what its KV pool may still grow into (the budget less what it holds) is taken off.
 * A given figure (`given`: availableMemory; TSLLM_AVAILABLE_MEMORY) is what was free before any
 * load and no load changes it: all of `loaded`'s plan is taken off, its weights, scratch and
 * whole budget (taking off the pool's growth alone let a draft and the pools over-commit it).
 */
export function memoryBeside(loaded: LoadedMemory, given?: number): { free: number; room: number; taken: number; measured: boolean } {
  const fixed = given ?? availableMemoryOverride();
  const free = fixed ?? freeMemoryBytes();
  const taken = fixed === undefined ? loaded.budgetBytes - loaded.storedBytes : loaded.residentBytes + loaded.budgetBytes;
  return { free, room: Math.max(0, free - taken), taken, measured: fixed === undefined };
}

/**
 * The plan of a draft model beside its target at the target's context (`r`): its weights,
 * scratch, and the KV cache its speculative requests draft in, the engine's draft pool: its
 * context and a round's proposal of `draftTokens` past its current token (draftPoolPositions:
 * context + draftTokens + 1, in whole blocks; one block past the context under-counted a
 * --draft-tokens of 16 or more). The engine holds that pool to this size, however many requests
 * draft at once (Engine.planDraftCache; a request it has no room for decodes without drafting).
 * Its own engine's pool is never used (loadDraftBeside) and counts nothing.
 */
export function planDraft(r: PlanRequest, draftTokens: number): MemoryPlan {
  const p = planMemory({ ...r, kvCacheBytes: undefined });
  const tokens = draftPoolPositions(r.contextSize, draftTokens, DEFAULT_BLOCK_SIZE);
  const bytes = tokens * kvBytesPerToken(r.shape, r.kvCacheTypes);
  return { ...p, kvCacheBytes: bytes, kvTokens: tokens, totalBytes: p.totalBytes - p.kvCacheBytes + bytes };
}

/** the margin automatic sizes leave free: TSLLM_MEMORY_MARGIN when set, else DEFAULT_MEMORY_MARGIN */
export function memoryMarginBytes(): number {
  const v = envVar(MEMORY_MARGIN_ENV);
  if (v === undefined || v === "") return DEFAULT_MEMORY_MARGIN;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${MEMORY_MARGIN_ENV} must be a number of bytes, got "${v}"`);
  return n;
}

export function planMemory(r: PlanRequest): MemoryPlan {
  const want = r.quantize === undefined ? undefined : quantizationType(r.quantize);
  let weightBytes = 0;
  const byType = new Map<string, number>();
  let largestTensor = { name: "", bytes: 0 };
  for (const t of r.tensors) {
    const type = loadedType(t, want);
    const bytes = byteLengthAs(t, type);
    weightBytes += bytes;
    byType.set(typeName(type), (byType.get(typeName(type)) ?? 0) + bytes);
    if (bytes > largestTensor.bytes) largestTensor = { name: t.name, bytes };
  }
  const weightType = [...byType].sort((a, b) => b[1] - a[1])[0]?.[0] ?? "-";
  const s = r.shape;
  const perToken = kvBytesPerToken(s, r.kvCacheTypes);
  // without a budget the engine's pool is room for maxSequences contexts but shrinks to what is free
  // (kvPoolBytes), down to one context: the plan needs one
  const kvBlocks = r.kvCacheBytes !== undefined ? Math.floor(r.kvCacheBytes / (DEFAULT_BLOCK_SIZE * perToken)) : Math.ceil(r.contextSize / DEFAULT_BLOCK_SIZE);
  const kvCacheBytes = kvBlocks * DEFAULT_BLOCK_SIZE * perToken;
  const outgrownKvBytes = r.kvCacheBytes !== undefined && r.wasm ? outgrownKvBlocks(kvBlocks) * DEFAULT_BLOCK_SIZE * perToken : 0;
  // per batch token: residual, norm, Q/K/V, attention out (~6 x embedding), gate/up/act (3 x ffn),
  // logits (vocab), attention scores over the context (heads x context); f32
  const batch = Math.min(r.maxBatchTokens ?? 64, r.contextSize);
  const workers = r.wasm ? Math.max(0, (r.threads ?? 1) - 1) : 0;
  const scratchBytes = RUNTIME_BYTES + workers * WORKER_BYTES + 4 * batch * (6 * s.embeddingLength + 3 * s.feedForwardLength + s.vocabSize + s.headCount * r.contextSize);
  const besideBytes = r.beside?.bytesAt(r.contextSize) ?? 0;
  return {
    contextSize: r.contextSize, weightBytes, weightType, kvCacheBytes, outgrownKvBytes, kvTokens: kvBlocks * DEFAULT_BLOCK_SIZE, kvArrayBytes: kvBlocks * DEFAULT_BLOCK_SIZE * kvArrayBytesPerToken(s, r.kvCacheTypes), scratchBytes, besideBytes,
    totalBytes: weightBytes + kvCacheBytes + outgrownKvBytes + scratchBytes + besideBytes, largestTensor,
  };
}

/**
 * The KV pool to allocate when no budget was given: the engine's default (room for maxSequences
 * contexts, at most 1/8 of RAM and 2 GiB), but no more than what is free beside the weights and
 * scratch less `margin`, nor than one buffer of the backend's holds per layer's K or V array
 * (r.maxBuffer), and at least one context. `width`: the sequences of the one request the engine
 * is loaded for (generate's --n / --num-beams): room for that many contexts (within the default)
 * where all of the free memory holds them, the margin given up for them (as llama.cpp's fit keeps
 * --fit-ctx per sequence, n_ctx_min x n_seq_max, and loads with a warning when its target cannot be
 * met; bytesWithPool says what is then left free). `extraBlocks`: the blocks that request holds
 * past its contexts, the margin given up for them the same way (a speculative request's proposal
 * past the context, speculativeExtraBlocks; a draft model's own pool is not in this pool but beside
 * it, `p.besideBytes` from planDraft, as the engine keeps it apart).
 */
export function kvPoolBytes(r: PlanRequest, p: MemoryPlan, available: number, margin = 0, width = 1, extraBlocks = 0): number {
  const perBlock = DEFAULT_BLOCK_SIZE * kvBytesPerToken(r.shape, r.kvCacheTypes);
  const oneContext = Math.ceil(r.contextSize / DEFAULT_BLOCK_SIZE);
  const cap = Math.min(defaultKvBlocks(r.contextSize, kvBytesPerToken(r.shape, r.kvCacheTypes), r.maxSequences ?? DEFAULT_MAX_SEQUENCES), maxBufferBlocks(r));
  const free = (keep: number) => Math.floor((available - keep - p.weightBytes - p.scratchBytes - p.besideBytes) / perBlock);
  const request = Math.ceil(width * oneContext) + extraBlocks;
  const wide = request > oneContext ? largestPool(r, Math.min(cap, request), free(0)) : 0;
  return Math.max(oneContext, largestPool(r, cap, free(margin)), wide) * perBlock;
}

/** the bytes a load of plan `p` with a default KV pool of `poolBytes` (kvPoolBytes) takes: weights, scratch, the pool and, on wasm, the arrays it outgrows; and the model beside it */
export function bytesWithPool(r: PlanRequest, p: MemoryPlan, poolBytes: number): number {
  const perBlock = DEFAULT_BLOCK_SIZE * kvBytesPerToken(r.shape, r.kvCacheTypes);
  return p.weightBytes + p.scratchBytes + p.besideBytes + poolBytes + (r.wasm ? outgrownKvBlocks(Math.round(poolBytes / perBlock)) * perBlock : 0);
}

/** the most blocks, at most `cap`, whose pool (and on wasm the arrays it outgrows on the way) fits in `free` blocks */
function largestPool(r: PlanRequest, cap: number, free: number): number {
  const cost = (n: number) => n + (r.wasm ? outgrownKvBlocks(n) : 0);
  if (free <= 0) return 0;
  if (cost(cap) <= free) return cap;
  let lo = 0, hi = Math.min(cap, free); // lo fits; hi may not (cost grows with n)
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (cost(mid) <= free) lo = mid;
    else hi = mid;
  }
  return cost(hi) <= free ? hi : lo;
}

/**
 * Blocks of K/V arrays a pool of `blocks` blocks leaves behind as it fills, on the wasm backend:
 * the engine's pool starts its arrays at one block, doubles them (2, 4, ... blocks) while that
 * stays within a sixteenth of the pool, then makes them hold all of it (KVBlockPool's
 * storedAfter), and a wasm memory never gives the outgrown ones back: 2p - 1 blocks, p the
 * largest power of two within blocks / 16, at least 1 (at most an eighth of the pool past 16 blocks).
 */
export function outgrownKvBlocks(blocks: number): number {
  if (blocks <= 1) return 0;
  let p = 1;
  while (2 * p <= blocks / 16) p *= 2;
  return 2 * p - 1;
}

/** KV blocks whose one layer's K or V array fits in one buffer of the backend's (Infinity without a cap) */
function maxBufferBlocks(r: PlanRequest): number {
  return kvBlocksPerBuffer(r.shape, r.kvCacheTypes, r.maxBuffer?.bytes);
}

/** quantizations proposed when the weights do not fit, best quality first */
const PROPOSALS: readonly Quantization[] = ["q8_0", "q6_k", "q5_k", "q4_k", "q3_k", "q2_k"];

function fits(p: MemoryPlan, available: number, wasm: boolean, maxBuffer?: PlanRequest["maxBuffer"]): boolean {
  return p.totalBytes <= available && (!wasm || p.largestTensor.bytes <= WASM_MEMORY_BYTES) && (maxBuffer === undefined || p.kvArrayBytes <= maxBuffer.bytes);
}

/** whether `r` fits in `available` bytes as loadModel checks it (checkMemoryPlan would pass) */
export function planFits(r: PlanRequest, available: number): boolean {
  return fits(planMemory(r), available, r.wasm ?? false, r.maxBuffer);
}

/** the largest context (whole KV blocks, at most `max`) for which `r` fits, or undefined */
export function largestFittingContext(r: PlanRequest, available: number, max: number): number | undefined {
  const at = (ctx: number) => fits(planMemory({ ...r, contextSize: ctx }), available, r.wasm ?? false, r.maxBuffer);
  if (!at(Math.min(max, DEFAULT_BLOCK_SIZE))) return undefined;
  if (at(max)) return max;
  let lo = 1, hi = Math.floor(max / DEFAULT_BLOCK_SIZE); // lo blocks fit, hi do not
  while (hi - lo > 1) {
    // not (lo + hi) >>> 1: a context past 2^36 tokens has more blocks than 32 bits hold, and the
    // truncated midpoint never closed the interval (loadModel with contextSize 2^52 never returned)
    const mid = Math.floor((lo + hi) / 2);
    if (at(mid * DEFAULT_BLOCK_SIZE)) lo = mid;
    else hi = mid;
  }
  return lo * DEFAULT_BLOCK_SIZE;
}

/**
 * contextSize "auto": the largest context (at most `max`) that fits leaving `margin` bytes free; where
 * that is below AUTO_CONTEXT_FLOOR (or the trained context, if smaller), the largest up to that
 * floor that fits in all of the free memory, the margin given up before the context. Undefined
 * when no context fits at all.
 */
export function autoContextSize(r: PlanRequest, available: number, max: number, margin: number): number | undefined {
  const kept = largestFittingContext(r, available - margin, max);
  const floor = Math.min(AUTO_CONTEXT_FLOOR, max);
  return kept !== undefined && kept >= floor ? kept : largestFittingContext(r, available, floor);
}

/** a friendlier number for a proposal: the largest power of two, or multiple of 1024, not above n */
function roundContext(n: number): number {
  if (n >= 4096) return Math.floor(n / 1024) * 1024;
  let p = DEFAULT_BLOCK_SIZE;
  while (p * 2 <= n) p *= 2;
  return p;
}

/**
 * Throws (one line) when plan `p` for request `r` does not fit in `available` bytes, with what
 * would: a quantization that fits at the asked context, and the context that fits as asked.
 */
export function checkMemoryPlan(path: string, r: PlanRequest, p: MemoryPlan, available: number): void {
  const wasm = r.wasm ?? false;
  if (fits(p, available, wasm, r.maxBuffer)) return;
  if (fits(p, available, wasm)) throw new Error(kvArrayRefusal(path, r, p, available));
  const smaller = PROPOSALS.filter((q) => planMemory({ ...r, quantize: q }).weightBytes < p.weightBytes);
  const byQuant = smaller.map((q) => [q, planMemory({ ...r, quantize: q })] as const).find(([, qp]) => fits(qp, available, wasm, r.maxBuffer));
  // a kvCacheBytes budget decides the pool whatever the context: a smaller context frees only
  // scratch, so the proposal is the largest budget that fits beside the weights and scratch
  const budget = r.kvCacheBytes === undefined ? undefined : fittingKvBudget(r, p, available);
  const ctx = r.kvCacheBytes === undefined ? largestFittingContext(r, available, p.contextSize) : undefined;
  const tries: string[] = [];
  if (budget !== undefined) tries.push(`kvCacheBytes ${budget} (--kv-memory; ${formatBytes(budget)})`);
  // a budget with no room at this context (its scratch, over the context, leaves none): a smaller context and the budget that then fits
  const narrower = r.kvCacheBytes !== undefined && budget === undefined ? budgetAtSmallerContext(r, available) : undefined;
  if (narrower) tries.push(`kvCacheBytes ${narrower.bytes} (--kv-memory; ${formatBytes(narrower.bytes)}) with --ctx-size ${narrower.contextSize}`);
  if (byQuant) tries.push(`--quantize ${byQuant[0]} (${formatBytes(byQuant[1].totalBytes)})`);
  // a q8_0 KV cache (3.8x smaller than f32) where K/V are what does not fit
  const q8Cache = { k: "q8_0", v: "q8_0" } as const;
  const byCache = r.shape.headDim % 32 === 0 && (r.kvCacheTypes?.k ?? "f32") !== "q8_0" ? planMemory({ ...r, kvCacheTypes: q8Cache }) : undefined;
  if (byCache && r.kvCacheTypes?.k !== "q4_0" && fits(byCache, available, wasm, r.maxBuffer)) tries.push(`--cache-type-k q8_0 --cache-type-v q8_0 (${formatBytes(byCache.totalBytes)})`);
  if (ctx !== undefined && ctx < p.contextSize) tries.push(`--ctx-size ${roundContext(ctx)}`);
  if (tries.length === 0) {
    // neither alone: the smallest quantization with the context that then fits
    for (const q of [...smaller].reverse().slice(0, 1)) {
      const c = largestFittingContext({ ...r, quantize: q }, available, p.contextSize);
      if (c !== undefined) tries.push(`--quantize ${q} --ctx-size ${roundContext(c)}`);
    }
  }
  const kv = r.kvCacheBytes === undefined ? `KV ${formatBytes(p.kvCacheBytes)} at ${p.contextSize} tokens` : `KV ${formatBytes(p.kvCacheBytes)} for ${p.kvTokens} tokens (kvCacheBytes ${r.kvCacheBytes}, --kv-memory)${p.outgrownKvBytes > 0 ? ` + ${formatBytes(p.outgrownKvBytes)} of K/V arrays it outgrows` : ""}`;
  if (r.beside) tries.push(r.beside.smaller);
  const beside = r.beside ? ` + ${r.beside.what} ${formatBytes(p.besideBytes)} (its weights, scratch and KV cache at ${p.contextSize} tokens)` : "";
  const needs = `needs ${formatBytes(p.totalBytes)} (weights ${formatBytes(p.weightBytes)} ${p.weightType} + ${kv} + scratch ${formatBytes(p.scratchBytes)}${beside})`;
  const tooBig = wasm && p.largestTensor.bytes > WASM_MEMORY_BYTES ? `; tensor ${p.largestTensor.name} is ${formatBytes(p.largestTensor.bytes)}, more than the 4 GiB one wasm memory holds` : "";
  const advice = tries.length > 0 ? `: try ${tries.join(" or ")}` : ": no quantization or context size tsllm offers fits";
  throw new Error(`${path}: ${needs}, ${formatBytes(available)} free${tooBig}${advice}`);
}

/** the largest KV budget (whole blocks) that fits in `available` beside `p`'s weights and scratch and below the asked one, or undefined */
function fittingKvBudget(r: PlanRequest, p: MemoryPlan, available: number): number | undefined {
  const perBlock = DEFAULT_BLOCK_SIZE * kvBytesPerToken(r.shape, r.kvCacheTypes);
  // on wasm the budget's pool outgrows arrays on the way (planMemory counts them): the largest whose pool and those fit
  const free = Math.floor((available - p.weightBytes - p.scratchBytes - p.besideBytes) / perBlock);
  const blocks = largestPool(r, Math.min(maxBufferBlocks(r), Math.max(0, free)), free);
  const bytes = blocks * perBlock;
  if (blocks < 1 || bytes >= p.kvCacheBytes) return undefined;
  return fits(planMemory({ ...r, kvCacheBytes: bytes }), available, r.wasm ?? false, r.maxBuffer) ? bytes : undefined;
}

/**
 * With a kvCacheBytes budget that fits at no budget beside the asked context's scratch (attention
 * scores grow with the context): the largest context whose one-context pool fits, rounded, and the
 * largest budget below the asked one that fits with it; undefined where none does
 */
function budgetAtSmallerContext(r: PlanRequest, available: number): { contextSize: number; bytes: number } | undefined {
  const ctx = largestFittingContext({ ...r, kvCacheBytes: undefined }, available, r.contextSize);
  if (ctx === undefined || ctx >= r.contextSize) return undefined;
  const at = { ...r, contextSize: roundContext(ctx) };
  const bytes = fittingKvBudget(at, planMemory(at), available);
  return bytes === undefined ? undefined : { contextSize: at.contextSize, bytes };
}

/**
 * The refusal of a plan that fits in memory but whose KV pool has a layer's K or V array larger
 * than one buffer of the backend's (a GPU adapter's largest storage binding), with what fits:
 * the context (and, where a budget was given, the kvCacheBytes) whose arrays do.
 */
function kvArrayRefusal(path: string, r: PlanRequest, p: MemoryPlan, available: number): string {
  const limit = r.maxBuffer!;
  const blocks = maxBufferBlocks(r);
  const tries: string[] = [];
  if (r.kvCacheBytes !== undefined) {
    // the budget decides the pool: a smaller one (and the context it still holds)
    const budget = blocks * DEFAULT_BLOCK_SIZE * kvBytesPerToken(r.shape, r.kvCacheTypes);
    if (blocks >= 1) tries.push(`kvCacheBytes ${budget} (--kv-memory)${p.contextSize > blocks * DEFAULT_BLOCK_SIZE ? ` with contextSize ${roundContext(blocks * DEFAULT_BLOCK_SIZE)} (--ctx-size)` : ""}`);
  } else {
    const ctx = largestFittingContext(r, available, p.contextSize);
    if (ctx !== undefined && ctx < p.contextSize) tries.push(`contextSize ${roundContext(ctx)} (--ctx-size)`);
  }
  if ((r.kvCacheTypes?.k ?? "f32") === "f32" || (r.kvCacheTypes?.v ?? "f32") === "f32") tries.push("a smaller cache type (cacheTypeK / cacheTypeV f16 or q8_0)");
  const pool = r.kvCacheBytes !== undefined ? `${p.kvTokens} positions (kvCacheBytes ${r.kvCacheBytes}, --kv-memory)` : `${p.kvTokens} positions (contextSize ${p.contextSize})`;
  return `${path}: KV cache of ${pool}: one layer's K or V array is ${formatBytes(p.kvArrayBytes)} (${p.kvArrayBytes} bytes; ${formatBytes(p.kvCacheBytes)} for all layers), more than the ${limit.bytes} bytes (${formatBytes(limit.bytes)}) the ${limit.backend} backend can allocate in one buffer (its adapter's largest storage binding)${tries.length > 0 ? `: try ${tries.join(" or ")}` : ""}`;
}
