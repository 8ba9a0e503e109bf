import { cpuCount, envVar } from "../../platform/host.js";
import type { Backend, DeviceArray, MatmulEpilogue } from "../backend.js";
import { checkRows, type HalfSides } from "../ops/attention.js";
import { swiglu } from "../ops/activations.js";
import { checkEpilogue, createReferenceBackend, device, halfSidesOf, headRowIndex, host, hostMemoryOps, isPlainF32, kvRowFloats, quantizeActivationsQ8_0, type KVCacheEncoding } from "../reference/index.js";
import { EXP2_TABLE } from "../ops/expf.js";
import { hadamardInPlace } from "../ops/hadamard.js";
import { ropeAngles } from "../ops/rope.js";
import { roundToF16 } from "../../tensor/quant/index.js";
import { GGMLType, rowByteLength, typeName, rowCount, type Tensor } from "../../tensor/index.js";
import * as C from "./control.js";
import { Memories, type Placement } from "./memories.js";
import { MAX_BYTES } from "./memory.js";
import { kernelsMemory, kernelsModule, relaxedSimdSupported, type KernelExports, type KernelsVariant } from "./module.js";
import { createThreadPool, type ThreadPool } from "./pool.js";

/**
 * The WebAssembly SIMD backend: AssemblyScript kernels (assembly/) on worker threads over
 * shared memories that also hold the weights. A matmul copies the activations into scratch,
 * converts them to the weight's vec_dot type on the main thread (as ggml does), then every
 * thread claims weight rows (work() in assembly/index.ts) and computes them for all tokens.
 *
 * A wasm32 memory holds at most 4 GiB, so weights that outgrow memory 0 go into further
 * memories (memories.ts); every thread has an instance of the kernels per memory, and a matmul
 * runs in the memory of its weight, its activations copied into that memory's scratch: the
 * same kernels on the same bytes, so the same results wherever a weight lies.
 *
 * Weight types without a wasm kernel (Q4_1, Q5_1) run on the
 * reference kernels, which read the same bytes in place.
 */
export interface WasmBackendOptions {
  /** threads computing each matmul, the calling thread included (default: os.availableParallelism()) */
  threads?: number;
  /**
   * Which kernels build: "relaxed" (Relaxed SIMD's int8 dot for Q8_0, Q4_0, IQ4_NL and the k-quants; an
   * error if the runtime lacks it), "plain" (SIMD128 only), or "auto" (default: relaxed where the
   * runtime has it). The environment variable TSLLM_WASM_SIMD=plain|relaxed|auto sets the
   * default. Both give the same bits, except where the relaxed build runs the exact kernels
   * (see `exact` below): Q8_0 and attention then give the reference kernels' bits.
   */
  simd?: "auto" | KernelsVariant;
  /**
   * Bytes one WebAssembly memory may hold (default and maximum: 4 GiB, what wasm32 addresses;
   * at least MIN_MEMORY_LIMIT). For tests: a small limit makes a small model span several
   * memories, as a model over 4 GiB does.
   */
  memoryLimitBytes?: number;
  /** ends the wait for the worker threads to start (a browser's load signal: a kernel worker that never answers held the load's thread pool forever); the backend's creation then rejects */
  signal?: AbortSignal;
}

/** the wasm backend's extra: how many memories hold its weights and activations */
export interface WasmBackend extends Backend {
  /** shared WebAssembly memories in use: 1, or more once the weights outgrow one */
  readonly memoryCount: number;
  /** worker claims the main thread took over because the worker had stopped mid-claim (see pool.ts) */
  readonly stolenClaims: number;
  /**
   * Whether the batches' group kernels (Q8_0 in llama.cpp's order, Q4_0, Q5_0) run on VNNI's dot
   * (the runtime lowers Relaxed SIMD's int32 dot to vpdpbusd: V8 on a CPU with AVX-VNNI); the
   * same bits either way
   */
  readonly vnniDot: boolean;
  /**
   * Test hook: the next worker to claim rows of a single-token matmul stops for `ms`
   * milliseconds in the middle of its claim, as the OS stops a thread.
   */
  stallWorkerOnce(ms: number): void;
}

/** the smallest memoryLimitBytes: memory 0's control block, f16 table and initial scratch, and room for weights */
export const MIN_MEMORY_LIMIT = 4 << 20;

function chooseVariant(option: WasmBackendOptions["simd"]): KernelsVariant {
  const choice = option ?? envVar("TSLLM_WASM_SIMD") ?? "auto";
  if (choice === "plain" || choice === "relaxed") return choice;
  if (choice !== "auto") throw new Error(`createWasmBackend: simd (or TSLLM_WASM_SIMD) must be "auto", "plain" or "relaxed", got ${JSON.stringify(choice)}`);
  return relaxedSimdSupported() ? "relaxed" : "plain";
}

/** the grid i-quants' and the ternary types' kernels (assembly/iq-grid.ts, tq.ts): Q8_K activations */
const GRID_KINDS: ReadonlySet<C.Kind> = new Set([C.Kind.IQ2_XS, C.Kind.IQ3_S, C.Kind.IQ2_XXS, C.Kind.IQ2_S, C.Kind.IQ3_XXS, C.Kind.IQ1_S, C.Kind.IQ1_M, C.Kind.TQ1_0, C.Kind.TQ2_0]);
const KIND_OF: ReadonlyMap<GGMLType, C.Kind> = new Map([
  [GGMLType.F32, C.Kind.F32],
  [GGMLType.F16, C.Kind.F16],
  [GGMLType.BF16, C.Kind.BF16],
  [GGMLType.Q8_0, C.Kind.Q8_0],
  [GGMLType.Q4_0, C.Kind.Q4_0],
  [GGMLType.Q5_0, C.Kind.Q5_0],
  [GGMLType.Q2_K, C.Kind.Q2_K],
  [GGMLType.Q3_K, C.Kind.Q3_K],
  [GGMLType.Q4_K, C.Kind.Q4_K],
  [GGMLType.Q5_K, C.Kind.Q5_K],
  [GGMLType.Q6_K, C.Kind.Q6_K],
  [GGMLType.IQ4_NL, C.Kind.IQ4_NL],
  [GGMLType.IQ4_XS, C.Kind.IQ4_XS],
  [GGMLType.IQ2_XS, C.Kind.IQ2_XS],
  [GGMLType.IQ3_S, C.Kind.IQ3_S],
  [GGMLType.IQ2_XXS, C.Kind.IQ2_XXS],
  [GGMLType.IQ2_S, C.Kind.IQ2_S],
  [GGMLType.IQ3_XXS, C.Kind.IQ3_XXS],
  [GGMLType.IQ1_S, C.Kind.IQ1_S],
  [GGMLType.IQ1_M, C.Kind.IQ1_M],
  [GGMLType.MXFP4, C.Kind.MXFP4],
  [GGMLType.TQ1_0, C.Kind.TQ1_0],
  [GGMLType.TQ2_0, C.Kind.TQ2_0],
  [GGMLType.Q4_1, C.Kind.Q4_1],
  [GGMLType.Q5_1, C.Kind.Q5_1],
  [GGMLType.NF4, C.Kind.NF4],
  [GGMLType.INT8, C.Kind.INT8],
]);

const INITIAL_SCRATCH = 8 << 20;
/** activations + outputs of one pass; longer batches are cut into passes of fewer tokens */
const MAX_SCRATCH = 64 << 20;
const align64 = (n: number): number => Math.ceil(n / 64) * 64;
/**
 * Claims per thread, in the guided schedule of work() (assembly/index.ts): a claim takes
 * 1 / (threads * CLAIM_SHARES_PER_THREAD) of the rows still unclaimed. Fixed chunks of 1/16 of
 * a thread's rows left the main thread waiting ~1.7 ms per TinyLlama Q8_0 decode token for a
 * worker's last chunk (~16 µs a job); shrinking claims end the threads rows apart, not chunks.
 */
const CLAIM_SHARES_PER_THREAD = 2;
/**
 * No claim is larger than 1 / (threads * CLAIM_CAP_PER_THREAD) of a job. A worker whose vCPU is
 * stopped mid-claim (this shared VM does, for milliseconds) leaves the main thread waiting for
 * the stall plus what is left of its claim; a smaller cap shortens the second part but adds
 * claims, each a compare-and-swap on a line the other core holds (16 gave ~48 claims a job)
 */
const CLAIM_CAP_PER_THREAD = 8;

/** the KV cache types the exact attention kernel reads from planes per KV head */
const PLANE_TYPES: ReadonlySet<string> = new Set(["f32", "f16"]);

/** writes how a job's rows (or items) are claimed: whole granules, guided, capped */
function setClaims(control: Int32Array, rows: number, granule: number, threads: number): void {
  control[C.GRANULE] = granule;
  control[C.SHARES] = threads * CLAIM_SHARES_PER_THREAD;
  control[C.MAX_CLAIM] = Math.max(1, Math.ceil(rows / (threads * CLAIM_CAP_PER_THREAD) / granule)) * granule;
}
/**
 * Claims of an attention job whose kernel takes consecutive items of one KV group together (the
 * exact and the encoded-cache kernels): whole groups where there are enough to go round (two
 * claims a thread at least), so a thread reads each of its KV heads' rows once (TinyLlama decode:
 * 0.35 ms less attention a token); else, with groups of several heads (SmolLM's decode: 3 groups
 * on 2 threads), one run of consecutive items per thread, whose heads of a group still share each
 * row read (decode after 1536 keys: ~0.9x the attention time on the f32 cache)
 */
function setAttentionClaims(control: Int32Array, items: number, group: number, threads: number): void {
  const wholeGroups = items / group >= 2 * threads;
  setClaims(control, items, wholeGroups ? group : 1, threads);
  if (!wholeGroups && group > 1) {
    control[C.SHARES] = 1;
    control[C.MAX_CLAIM] = Math.ceil(items / threads);
  }
}

/**
 * The words of an attention job: queries, keys, values, row index and output (pointers in the
 * job's memory), nTok * nHeads (token, head) items of headDim floats
 */
function writeAttentionJob(control: Int32Array, kind: C.Kind, at: { q: number; k: number; v: number; rows: number; out: number }, nTok: number, startPos: number, nHeads: number, nKvHeads: number, headDim: number, scale: number): void {
  control[C.KIND] = kind;
  control[C.W] = at.k;
  control[C.XS] = at.v;
  control[C.XB] = at.rows;
  control[C.XQ] = at.q;
  control[C.OUT] = at.out;
  control[C.ROWS] = nTok * nHeads;
  control[C.COLS] = headDim;
  control[C.N_TOK] = nTok;
  control[C.START_POS] = startPos;
  control[C.N_HEADS] = nHeads;
  control[C.N_KV_HEADS] = nKvHeads;
  new Float32Array(control.buffer, control.byteOffset, control.length)[C.SCALE] = scale;
}

/**
 * Q8_1's s = d * sum(q) per block of 32 (f16-rounded, as the block carries it), with d the f32
 * amax / 127 before its own f16 rounding (quantize_row_q8_1): from the f32 activations x and the
 * Q8_0 kernel's int16 quants q (the same q as Q8_1's)
 */
function q8_1Sums(x: Float32Array, q: Int16Array, out: Float32Array): void {
  for (let b = 0; b < out.length; b++) {
    let amax = 0, sum = 0;
    for (let j = 32 * b; j < 32 * b + 32; j++) {
      amax = Math.max(amax, Math.abs(x[j]!));
      sum += q[j]!;
    }
    out[b] = roundToF16(Math.fround(Math.fround(amax / 127) * sum));
  }
}

/** the encoded kernel's type codes (attention-kv.ts); f32 sides there are cast to f16, as llama.cpp's flash attention casts them */
const KV_KERNEL_TYPES = { f16: 1, q8_0: 2, q4_0: 3, f32: 4 } as const;

/** an f32 cache: neither side holds f16 */
const NO_HALVES: HalfSides = { keys: false, values: false };
/** 2^112: an f16-rounded query or weight times this meets halves the kernel takes times 2^-112 (exact: powers of two) */
const F16_UNSCALE = 2 ** 112;

/** F16/BF16 batches at least this long give the kernels per-thread panels (float.ts matFloat), F16 ones with unscaled activations */
const PANEL_TOKENS = 4;
/**
 * Row and element-wise ops (RMSNorm, RoPE, residual additions, SwiGLU, row copies) over at least
 * this many floats run as jobs on every thread (assembly/rows.ts); a decode step's few thousand
 * cost less in TS than a job's sync
 */
const ROW_JOB_FLOATS = 16384;
/** floats of one item of an element-wise job (addition, SwiGLU, GELU) */
const ELEMENT_ITEM = 4096;
/** batches at least this long quantize their activations on all threads (below, a job's sync costs more than it saves) */
const PARALLEL_QUANTIZE_TOKENS = 8;

/** scratch bytes of one token of a matmul: f32 x, int16 q, scales, group sums, f32 out */
function bytesPerToken(cols: number, rows: number): number {
  return align64(cols * 4) + align64(cols * 2) + align64((cols / 32) * 4) + align64((cols / 16) * 4) + align64(rows * 4) + 5 * 64;
}

/** a thread's slot for batches by slots: four rows unpacked (`unpacked` bytes a block of `blockWeights`) and `sums` bytes of running sums */
function unpackedRowsSlot(unpacked: number, blockWeights: number, sums: number): (cols: number) => number {
  return (cols) => align64((4 * unpacked * cols) / blockWeights + sums);
}

/**
 * The kernels that take batches eight tokens at a time over group streams (assembly/groups.ts for
 * Q8_0, Q4_0 and Q5_0, kquant-slots.ts for the k-quants): bytes of a stream per weight block of
 * each (Q8_0: 8 scales, 8 x 32 int8; Q4_0: the same and 8 * each token's sum; k-quants: 8 scales,
 * 8 tokens' sums of 16 and of 32, 8 x 256 int8), the weights per block, and each thread's slot
 * for a row cols wide (Q8_0: a half pass's eight accumulators, twice; the others: four rows
 * unpacked, and for the k-quants two rows' running sums). Each also takes a group of four after the eights:
 * quadBytes a block.
 */
const GROUP_KERNELS = new Map<C.Kind, { blockBytes: number; blockWeights: number; slotBytes: (cols: number) => number; quadBytes: number }>([
  [C.Kind.Q8_0_EXACT, { blockBytes: 288, blockWeights: 32, slotBytes: () => 256, quadBytes: 144 }],
  [C.Kind.Q8_0_EXACT_FINITE, { blockBytes: 288, blockWeights: 32, slotBytes: () => 256, quadBytes: 144 }],
  // a byte a weight, an f32 scale a block (q8.ts unpackRows); the running sums stay in registers
  [C.Kind.Q4_0_RELAXED, { blockBytes: 320, blockWeights: 32, slotBytes: unpackedRowsSlot(36, 32, 0), quadBytes: 160 }],
  [C.Kind.Q4_0_RELAXED_FINITE, { blockBytes: 320, blockWeights: 32, slotBytes: unpackedRowsSlot(36, 32, 0), quadBytes: 160 }],
  [C.Kind.Q5_0_GROUPS, { blockBytes: 320, blockWeights: 32, slotBytes: unpackedRowsSlot(36, 32, 0), quadBytes: 160 }],
  // slot streams (kquant-slots.ts: 308 bytes a token a super-block), rows unpacked 312 / 356
  // bytes a super-block (unpackedBytes), and two rows' running sums for eight tokens
  [C.Kind.Q4_K_RELAXED, { blockBytes: 2464, blockWeights: 256, slotBytes: unpackedRowsSlot(312, 256, 64), quadBytes: 1232 }],
  [C.Kind.Q5_K_RELAXED, { blockBytes: 2464, blockWeights: 256, slotBytes: unpackedRowsSlot(312, 256, 64), quadBytes: 1232 }],
  [C.Kind.Q6_K_RELAXED, { blockBytes: 2464, blockWeights: 256, slotBytes: unpackedRowsSlot(356, 256, 64), quadBytes: 1232 }],
]);

/** bytes of the group streams (every eight tokens, then a group of four where four are left) for a batch on a group kernel, else 0 */
function groupStreamBytes(kernel: { blockBytes: number; blockWeights: number; quadBytes: number } | undefined, cols: number, nTok: number): number {
  if (!kernel) return 0;
  const blocks = cols / kernel.blockWeights;
  return align64(Math.floor(nTok / 8) * blocks * kernel.blockBytes + (nTok % 8 >= 4 ? blocks * kernel.quadBytes : 0));
}

/** the tokens a group kernel takes from its streams (eights, then a four); the rest go one at a time */
function groupedTokens(nTok: number): number {
  return Math.floor(nTok / 8) * 8 + (nTok % 8 >= 4 ? 4 : 0);
}

function memoryLimit(option: number | undefined): number {
  const limit = option ?? MAX_BYTES;
  if (!Number.isSafeInteger(limit) || limit < MIN_MEMORY_LIMIT || limit > MAX_BYTES) {
    throw new RangeError(`createWasmBackend: memoryLimitBytes must be an integer from ${MIN_MEMORY_LIMIT} to ${MAX_BYTES} (4 GiB, the wasm32 limit), got ${option}`);
  }
  return limit;
}

export async function createWasmBackend(options: WasmBackendOptions = {}): Promise<WasmBackend> {
  const threads = options.threads ?? cpuCount();
  if (!Number.isInteger(threads) || threads < 1) throw new RangeError(`createWasmBackend: threads must be a positive integer, got ${threads}`);
  const limit = memoryLimit(options.memoryLimitBytes);
  const memoryKind = kernelsMemory();
  if (memoryKind === "unshared" && threads > 1) {
    // the browser entry asks for one thread there (src/browser/backends.ts); a direct caller is told why
    throw new RangeError(`createWasmBackend: threads: ${threads} needs memory shared between threads, which this page lacks (it is not cross-origin isolated: no SharedArrayBuffer); use threads: 1, or serve the page with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp`);
  }

  const variant = chooseVariant(options.simd);
  const module = kernelsModule(variant);
  // a small limit (tests) gets a smaller first scratch, leaving memory 0 room for weights
  const memories = new Memories(module, limit, Math.min(INITIAL_SCRATCH, limit / 4), memoryKind);
  const first = memories.first;
  const kernels = first.kernels;
  /*
   * Where the relaxed build's f32x4.relaxed_madd is a fused multiply-add and its int8 dot reads
   * unsigned bytes (x86 with FMA; both probed), Q8_0 matmuls, attention and SwiGLU run the
   * kernels that add in llama.cpp's exact order (q8-ggml.ts, attention-ggml.ts,
   * swiglu-ggml.ts): the same bits as the reference kernels, so quantized models
   * agree with llama.cpp to the last ulp rather than to a flipped int8 rounding. Elsewhere the
   * online-softmax attention and the SIMD128-order Q8_0 kernels run.
   */
  const maddFused = kernels.probeMadd(1 + 2 ** -12, -(1 + 2 ** -11)) === 2 ** -24;
  const dotUnsigned = kernels.probeDot(-1, -128) === -256;
  // the exact Q8_0 kernel picks a or -a by the weight byte's sign bit alone (pblendvb)
  const blendBySignBit = kernels.probeBlend(1, 2, -128) === 1 && kernels.probeBlend(1, 2, 127) === 2;
  const exact = variant === "relaxed" && maddFused && dotUnsigned && blendBySignBit;
  // VNNI's vpdpbusd behind the relaxed int32 dot (V8 on a CPU with AVX-VNNI: Chromium, Node 22+):
  // its second operand read as unsigned bytes, four products added exactly to the accumulator
  // (the pmaddubsw lowering saturates pairs to int16; Node 20's V8 doubles a zero accumulator's sum)
  const dotAddUnsigned = variant === "relaxed" && kernels.probeDotAdd(-128, 255, 0) === -130560 && kernels.probeDotAdd(-128, 255, 7) === -130553 && kernels.probeDotAdd(127, 255, 0) === 129540;

  const pool: ThreadPool | undefined = threads > 1 ? await createThreadPool(module, first, threads, options.signal) : undefined;
  // a memory opened for weights is known to every worker before anything runs in it
  memories.onOpen = (space) => pool?.addSpace(space);
  const reference = createReferenceBackend();
  /** weights that were not allocated here, copied in once (weights are immutable) */
  const copied = new WeakMap<Uint8Array, Placement>();
  let disposed = false;

  const alive = (op: string): void => {
    if (disposed) throw new Error(`wasm backend: ${op} called after dispose()`);
  };

  /** the memory and offset of a weight's bytes; bytes from elsewhere are copied into whichever memory has room */
  function weightPlace(w: Tensor): Placement {
    const inside = memories.locate(w.data);
    if (inside !== undefined) return inside;
    let p = copied.get(w.data);
    if (p === undefined) {
      p = memories.placeWeights(w.data.length, `a copy of tensor ${w.name}`);
      new Uint8Array(memories.spaces[p.space]!.arena.buffer, p.ptr, w.data.length).set(w.data);
      copied.set(w.data, p);
    }
    return p;
  }

  /**
   * The relaxed build's kernel for a weight type and batch, or undefined for the SIMD128 one.
   * Q8_0: the exact kernel (every batch size) where it runs, else the int8 dot for single tokens
   * only (its batches keep q8.ts's SIMD128 tiles, see matQ there).
   */
  function relaxedKernel(kind: C.Kind, nTok: number): C.Kind | undefined {
    if (variant !== "relaxed") return undefined;
    if (exact && kind === C.Kind.Q8_0) return C.Kind.Q8_0_EXACT;
    if (kind === C.Kind.Q2_K) return C.Kind.Q2_K_RELAXED;
    if (kind === C.Kind.Q3_K) return C.Kind.Q3_K_RELAXED;
    if (kind === C.Kind.Q4_K) return C.Kind.Q4_K_RELAXED;
    if (kind === C.Kind.Q5_K) return C.Kind.Q5_K_RELAXED;
    if (kind === C.Kind.Q6_K) return C.Kind.Q6_K_RELAXED;
    if (kind === C.Kind.Q4_0) return C.Kind.Q4_0_RELAXED;
    // Q5_0: single tokens on the int8 dot, group streams from a group of four on, SIMD128 between
    if (kind === C.Kind.Q5_0) return nTok === 1 ? C.Kind.Q5_0_RELAXED : nTok >= 4 ? C.Kind.Q5_0_GROUPS : undefined;
    if (kind === C.Kind.IQ4_NL) return nTok === 1 ? C.Kind.IQ4_NL_RELAXED : undefined;
    if (kind === C.Kind.IQ4_XS) return C.Kind.IQ4_XS_RELAXED;
    return kind === C.Kind.Q8_0 && nTok === 1 ? C.Kind.Q8_0_RELAXED : undefined;
  }

  /** Q4_0 weights whose block scales hold no Inf/NaN, Q8_0 ones also no -128 (weights are immutable: checked once) */
  const finiteScales = new WeakMap<Uint8Array, boolean>();
  /** the kernels with a variant for finite block scales (Q8_0: regular weights): that variant and the weight's block type */
  const finiteVariants = new Map<C.Kind, [C.Kind, GGMLType]>([
    [C.Kind.Q4_0_RELAXED, [C.Kind.Q4_0_RELAXED_FINITE, GGMLType.Q4_0]],
    [C.Kind.Q8_0_EXACT, [C.Kind.Q8_0_EXACT_FINITE, GGMLType.Q8_0]],
  ]);

  /**
   * The kernel's finite-scales variant where none of the weight's block scales is Inf or NaN
   * (the usual case: the single-token kernels then convert four scales in three instructions
   * instead of eight) and, for Q8_0, no weight is -128 (its single-token kernel then takes the
   * activations' signs onto the weights), else the kernel as given
   */
  function withFiniteScales(kind: C.Kind | undefined, w: Tensor, place: Placement, rows: number, cols: number): C.Kind | undefined {
    const variant = kind === undefined ? undefined : finiteVariants.get(kind);
    if (!variant) return kind;
    let finite = finiteScales.get(w.data);
    if (finite === undefined) {
      const k = memories.spaces[place.space]!.kernels, blocks = rows * (cols / 32);
      finite = (variant[1] === GGMLType.Q8_0 ? k.q8_0Regular(place.ptr, blocks) : k.f16sFinite(place.ptr, rowByteLength(variant[1], 32), blocks)) === 1;
      finiteScales.set(w.data, finite);
    }
    return finite ? variant[0] : kind;
  }

  /**
   * Runs the job written into memory `index`'s control block. `outBytes` > 0 makes it stealable
   * (single-token matmuls: an output of that many bytes): a worker stopped mid-claim does not
   * hold up the main thread, which takes the claim over (pool.ts).
   */
  function runJob(index: number, outBytes = 0): void {
    const space = memories.spaces[index]!;
    const control = space.control;
    const stealable = pool !== undefined && outBytes > 0;
    if (stealable) space.prepareStealing(threads, outBytes);
    control[C.STEALABLE] = stealable ? 1 : 0;
    if (pool) pool.run(index);
    else {
      control[C.NEXT] = 0;
      control[C.NEXT_TAG] = 0;
      space.kernels.work(space.ctrl, 0, 0);
    }
  }

  /**
   * Quantizes nTok activation rows on every thread (a batch's rows would otherwise be done by
   * the main thread alone while the workers wait); the same function per row, so the same bits.
   */
  function quantizeJob(index: number, kind: C.Kind, xf: number, xq: number, xs: number, xb: number, cols: number, nTok: number): void {
    const control = memories.spaces[index]!.control;
    control[C.KIND] = kind;
    control[C.W] = xf;
    control[C.XQ] = xq;
    control[C.XS] = xs;
    control[C.XB] = xb;
    control[C.ROWS] = nTok;
    control[C.COLS] = cols;
    setClaims(control, nTok, 1, threads);
    runJob(index);
  }

  /** one pass: nTok tokens of x through weight w, at `w` in its memory (relaxedKind: the relaxed build's kernel for it, if any) */
  function pass(kind: C.Kind, relaxedKind: C.Kind | undefined, w: Placement, rowBytes: number, rows: number, cols: number, nTok: number, out: Float32Array, x: Float32Array, epilogue: MatmulEpilogue | undefined): void {
    const space = memories.spaces[w.space]!;
    const bias = epilogue?.bias;
    const kernels = space.kernels;
    const biasBytes = bias ? align64(rows * 4) : 0;
    // per-thread slots: F16/BF16 batches' panel of four rows converted to f32 (float.ts), the
    // group kernels' accumulators (GROUP_KERNELS)
    const groupKernel = relaxedKind === undefined ? undefined : GROUP_KERNELS.get(relaxedKind);
    const groupBytes = groupStreamBytes(groupKernel, cols, nTok);
    const panelBytes = (kind === C.Kind.F16 || kind === C.Kind.BF16) && nTok >= PANEL_TOKENS ? align64(16 * cols) : groupBytes > 0 ? groupKernel!.slotBytes(cols) : 0;
    // the group kernels' slots after their streams, in the room of the f32 activations (dead once
    // quantized, see below) where it holds them: the scratch a pass asks for stays as it was
    const slotsAfterStreams = groupBytes > 0 && align64(groupBytes) + threads * panelBytes <= align64(nTok * cols * 4);
    const xf = space.scratch(nTok * bytesPerToken(cols, rows) + biasBytes + (slotsAfterStreams ? 0 : threads * panelBytes));
    const xq = xf + align64(nTok * cols * 4);
    const xs = xq + align64(nTok * cols * 2);
    const xb = xs + align64((nTok * cols / 32) * 4);
    const o = xb + align64((nTok * cols / 16) * 4);
    // the group streams (at most 1.25 bytes a weight column a token) go where the f32 activations
    // were: those are dead once quantized, and the streams are packed after that
    const groups = groupBytes > 0 ? xf : 0;
    const buffer = space.arena.buffer;
    // activations already in the weight's memory are read where they are, and results written
    // straight into `out` there (a prompt's copies in and out were ~2% of its pass), unless the
    // kernel rewrites its input (F16/BF16 round it in place) or the two overlap
    const xAt = memories.locate(x), outAt = memories.locate(out);
    const overlap = xAt !== undefined && outAt !== undefined && xAt.space === outAt.space && xAt.ptr < outAt.ptr + out.byteLength && outAt.ptr < xAt.ptr + x.byteLength;
    const readInPlace = xAt?.space === w.space && kind !== C.Kind.F16 && kind !== C.Kind.BF16 && !overlap;
    const writeInPlace = outAt?.space === w.space;
    if (!readInPlace) new Float32Array(buffer, xf, nTok * cols).set(x);
    const xIn = readInPlace ? xAt.ptr : xf;
    let xPtr = xIn;
    // F16 batches read exact weights from their panels, single tokens the weights times 2^-112
    if (kind === C.Kind.F16) kernels.roundRowsF16(xf, nTok * cols, panelBytes === 0);
    else if (kind === C.Kind.BF16) kernels.roundRowsBF16(xf, nTok * cols);
    else if (kind === C.Kind.Q8_0 || kind === C.Kind.Q4_0 || kind === C.Kind.Q5_0 || kind === C.Kind.IQ4_NL || kind === C.Kind.MXFP4 || kind === C.Kind.Q4_1 || kind === C.Kind.Q5_1) {
      if (pool && nTok >= PARALLEL_QUANTIZE_TOKENS) quantizeJob(w.space, C.Kind.QUANTIZE_Q8_0, xIn, xq, xs, xb, cols, nTok);
      else for (let t = 0; t < nTok; t++) kernels.quantizeRowQ8_0(xIn + t * cols * 4, xq + t * cols * 2, xs + (t * cols / 32) * 4, cols);
      if (kind === C.Kind.Q4_1 || kind === C.Kind.Q5_1) q8_1Sums(x, new Int16Array(buffer, xq, nTok * cols), new Float32Array(buffer, xb, (nTok * cols) / 32));
      xPtr = xq;
    } else if (kind === C.Kind.Q2_K || kind === C.Kind.Q3_K || kind === C.Kind.Q4_K || kind === C.Kind.Q5_K || kind === C.Kind.Q6_K || kind === C.Kind.IQ4_XS || GRID_KINDS.has(kind)) {
      if (pool && nTok >= PARALLEL_QUANTIZE_TOKENS) quantizeJob(w.space, C.Kind.QUANTIZE_Q8_K, xIn, xq, xs, xb, cols, nTok);
      else {
        for (let t = 0; t < nTok; t++) {
          kernels.quantizeRowQ8_K(xIn + t * cols * 4, xq + t * cols * 2, xs + (t * cols / 256) * 4, xb + (t * cols / 16) * 4, cols);
        }
      }
      xPtr = xq;
    }
    if (relaxedKind !== undefined) {
      // the relaxed build's int8 dot reads the quantized activations repacked (assembly/relaxed.ts)
      // (Q8_K's int16 activations are eight such 32-value blocks per super-block). A group
      // kernel takes its tokens from the streams in rows of four: where the rows are whole fours,
      // only the tokens after the groups (one at a time) are repacked in place (each block on
      // its own, so from token `rest` on); a last row or three goes token after token through all
      const rest = groups !== 0 && rows % 4 === 0 ? groupedTokens(nTok) : 0;
      const restXq = xq + rest * cols * 2, restBlocks = ((nTok - rest) * cols) / 32;
      if (relaxedKind === C.Kind.Q8_0_RELAXED || relaxedKind === C.Kind.IQ4_NL_RELAXED || relaxedKind === C.Kind.IQ4_XS_RELAXED) kernels.packQ8_0(xq, (nTok * cols) / 32);
      else if (relaxedKind === C.Kind.Q8_0_EXACT || relaxedKind === C.Kind.Q8_0_EXACT_FINITE) {
        // the group streams are read from the int16 activations, which packQ8_0Exact rewrites;
        // on VNNI's dot as unsigned bytes (see C.VNNI_DOT)
        if (groups !== 0) kernels.packQ8_0Groups(xq, xs, groups, cols, nTok, dotAddUnsigned ? 1 : 0);
        kernels.packQ8_0Exact(restXq, restBlocks, relaxedKind === C.Kind.Q8_0_EXACT_FINITE);
      }
      else if (relaxedKind === C.Kind.Q5_0_GROUPS) {
        // Q5_0's streams are Q4_0's (its kernel too); its leftover tokens read the int16 activations as they are
        if (groups !== 0) kernels.packQ4_0Groups(xq, xs, groups, cols, nTok);
      }
      else if (relaxedKind === C.Kind.Q5_0_RELAXED) kernels.packQ4_0(xq, (nTok * cols) / 32, cols / 32);
      else if (relaxedKind === C.Kind.Q4_0_RELAXED || relaxedKind === C.Kind.Q4_0_RELAXED_FINITE) {
        // Q4_0's streams hold the tokens' values by fours (assembly/groups.ts)
        if (groups !== 0) kernels.packQ4_0Groups(xq, xs, groups, cols, nTok);
        kernels.packQ4_0(restXq, restBlocks, cols / 32);
      }
      else {
        // as above: the group streams first, from the int16 activations packQ8_K narrows
        if (groups !== 0) kernels.packQ8_KSlots(xq, xs, xb, groups, cols, nTok);
        kernels.packQ8_K(restXq, restBlocks / 8);
      }
      kind = relaxedKind;
    }
    const control = space.control;
    control[C.KIND] = kind;
    control[C.W] = w.ptr;
    control[C.ROW_BYTES] = rowBytes;
    control[C.ROWS] = rows;
    control[C.COLS] = cols;
    control[C.N_TOK] = nTok;
    control[C.XQ] = xPtr;
    control[C.XS] = xs;
    control[C.XB] = xb;
    control[C.GROUPS] = groups;
    control[C.VNNI_DOT] = dotAddUnsigned ? 1 : 0;
    control[C.OUT] = writeInPlace ? outAt.ptr : o;
    // the bias after the outputs (the scratch was asked for its bytes too)
    const b = o + align64(nTok * rows * 4);
    if (bias) new Float32Array(buffer, b, rows).set(bias);
    control[C.BIAS] = bias ? b : 0;
    control[C.SLOT_BASE] = slotsAfterStreams ? groups + align64(groupBytes) : b + biasBytes;
    control[C.SLOT_BYTES] = panelBytes;
    control[C.ACTIVATION] = epilogue?.activation === "gelu-erf" ? C.Activation.GELU_ERF : C.Activation.NONE;
    // claims of whole 4-row groups: each row's arithmetic is then the same whatever thread
    // takes it, so results do not depend on the thread count
    setClaims(control, rows, 4, threads);
    runJob(w.space, nTok === 1 ? rows * 4 : 0);
    if (!writeInPlace) out.set(new Float32Array(buffer, o, nTok * rows));
  }

  /*
   * Activation memory (KV caches) is recycled: a block returns to its size's free list when
   * the Float32Array handed out is garbage-collected, so caches made and dropped (beam search,
   * perplexity, repeated loads of a session) do not grow the arena without bound.
   */
  const freeBlocks = new Map<number, Placement[]>();
  const recycle = new FinalizationRegistry<{ place: Placement; bytes: number }>(({ place, bytes }) => {
    if (disposed) return;
    const list = freeBlocks.get(bytes) ?? [];
    list.push(place);
    freeBlocks.set(bytes, list);
  });

  /**
   * One attention pass: every (token, head) item is one unit of work, taken whole by one
   * thread. The kernel reads K/V rows in place through the row index, copied into scratch
   * once every row is checked against the cache (a wrong row would read other memory silently).
   * It runs in the memory `index` that holds the keys and values.
   */
  function attentionPass(index: number, out: Float32Array, q: Float32Array, kPtr: number, vPtr: number, rows: Int32Array | undefined, cacheRows: number, nTokens: number, startPos: number, nHeads: number, nKvHeads: number, headDim: number, scale: number, halves: HalfSides = NO_HALVES, plane = 0): boolean {
    const items = nTokens * nHeads;
    const floats = items * headDim;
    const nAll = startPos + nTokens;
    // a prompt's f16 rows are read by every token's heads: converted to f32 rows once for the pass
    // (exact; the kernel then reads them as f32 rows in f16's order), where one token's pass
    // converts them as it reads them
    const stageK = halves.keys && nTokens >= 2, stageV = halves.values && nTokens >= 2;
    const stageBytes = align64(nAll * nKvHeads * headDim * 4);
    // staging from planes per KV head goes through an index of head rows (position-major: the staged rows' order)
    const headRowsBytes = plane !== 0 && (stageK || stageV) ? align64(nAll * nKvHeads * 4) : 0;
    // the exact kernel's score row and accumulators: one slot per thread
    const slotBytes = exact ? align64(kernels.attendGgmlScratchBytes(nAll, headDim, nHeads / nKvHeads)) : 0;
    const space = memories.spaces[index]!;
    const qPtr = space.scratch(2 * align64(floats * 4) + align64(nAll * 4) + 64 + threads * slotBytes + ((stageK ? 1 : 0) + (stageV ? 1 : 0)) * stageBytes + headRowsBytes);
    const oPtr = qPtr + align64(floats * 4);
    const rPtr = oPtr + align64(floats * 4);
    const flagPtr = rPtr + align64(nAll * 4);
    const slotBase = flagPtr + 64;
    const kStage = slotBase + threads * slotBytes, vStage = kStage + (stageK ? stageBytes : 0);
    const headRowsPtr = vStage + (stageV ? stageBytes : 0);
    const buffer = space.arena.buffer;
    const qs = new Float32Array(buffer, qPtr, floats);
    // f16 keys: the queries as ggml converts them (f16), times 2^112 against keys read in place times 2^-112
    const unscale = stageK ? 1 : F16_UNSCALE;
    if (halves.keys) for (let i = 0; i < floats; i++) qs[i] = roundToF16(q[i]!) * unscale;
    else qs.set(q.subarray(0, floats));
    checkRows(rows, nAll, cacheRows);
    const rowIndex = new Int32Array(buffer, rPtr, nAll);
    if (rows) rowIndex.set(rows.subarray(0, nAll));
    else for (let j = 0; j < nAll; j++) rowIndex[j] = j;
    const control = space.control;
    const flag = new Int32Array(buffer, flagPtr, 1);
    flag[0] = 0;
    if (headRowsBytes !== 0) headRowIndex(rowIndex, nAll, nKvHeads, plane, new Int32Array(buffer, headRowsPtr, nAll * nKvHeads));
    // rows of every head, or each position's head rows from the planes
    const [stageIndex, stageRows, stageWidth] = headRowsBytes !== 0 ? [headRowsPtr, nAll * nKvHeads, headDim] : [rPtr, nAll, nKvHeads * headDim];
    if (stageK) stageHalfRows(index, kStage, kPtr, stageIndex, stageRows, stageWidth, flagPtr);
    if (stageV) stageHalfRows(index, vStage, vPtr, stageIndex, stageRows, stageWidth, flagPtr);
    // an Inf or NaN half: the caller takes the reference's pass (which multiplies masked positions by 0)
    if (flag[0] !== 0) return false;
    writeAttentionJob(control, exact ? C.Kind.ATTENTION_EXACT : C.Kind.ATTENTION, { q: qPtr, k: stageK ? kStage : kPtr, v: stageV ? vStage : vPtr, rows: rPtr, out: oPtr }, nTokens, startPos, nHeads, nKvHeads, headDim, scale);
    control[C.SLOT_BASE] = slotBase;
    control[C.SLOT_BYTES] = slotBytes;
    control[C.KV_PLANE] = plane;
    // attendGgml's HALF_KEYS, HALF_VALUES, KEYS_STAGED, VALUES_STAGED
    control[C.KV_TYPES] = (halves.keys ? 1 : 0) | (halves.values ? 2 : 0) | (stageK ? 4 : 0) | (stageV ? 8 : 0);
    control[C.KV_EXP_TABLE] = flagPtr;
    // the online-softmax kernel takes one item at a time: claims of whole groups only help it
    // where there are enough to go round
    const group = nHeads / nKvHeads;
    if (exact) setAttentionClaims(control, items, group, threads);
    else setClaims(control, items, items / group >= 2 * threads ? group : 1, threads);
    runJob(index);
    // an Inf or NaN half was read as a finite number: the caller takes the reference's pass
    if (flag[0] !== 0) return false;
    out.set(new Float32Array(buffer, oPtr, floats));
    return true;
  }

  /** `n` rows of `width` f16 values (row j at src + rows[j] * 2 width bytes) to f32 rows at dst, as a job (assembly/rows.ts's halfRows); the i32 at flagPtr set to 1 on an Inf/NaN half */
  function stageHalfRows(space: number, dst: number, src: number, rowsPtr: number, n: number, width: number, flagPtr: number): void {
    const control = memories.spaces[space]!.control;
    control[C.KIND] = C.Kind.HALF_ROWS;
    control[C.W] = src;
    control[C.ROW_BYTES] = 2 * width;
    control[C.XB] = rowsPtr;
    control[C.OUT] = dst;
    control[C.ROWS] = n;
    control[C.COLS] = width;
    control[C.XS] = flagPtr;
    control[C.SLOT_BYTES] = 0;
    setClaims(control, n, 1, threads);
    runJob(space);
  }

  /**
   * Attention over a q8_0 / q4_0 cache (assembly/attention-kv.ts): the queries rotated with the
   * keys and quantized to Q8_0 here (once per item, as llama.cpp converts them), the rows checked
   * by the caller and copied into scratch with expf's table, the output rotated back here.
   */
  function encodedAttentionPass(index: number, out: Float32Array, q: Float32Array, kPtr: number, vPtr: number, rows: Int32Array, nTokens: number, startPos: number, nHeads: number, nKvHeads: number, headDim: number, scale: number, encoding: KVCacheEncoding, kRowBytes: number, vRowBytes: number): void {
    const items = nTokens * nHeads, floats = items * headDim, nAll = startPos + nTokens;
    const halfKeys = encoding.k.type === "f16" || encoding.k.type === "f32";
    const qBytes = halfKeys ? floats * 4 : items * (headDim / 32) * 34;
    // a slot per thread: f16 keys converted, and each head's running max and sum
    const group = nHeads / nKvHeads;
    const slotBytes = align64(kernels.attendEncodedScratchBytes(headDim, group));
    const space = memories.spaces[index]!;
    const qqPtr = space.scratch(align64(qBytes) + align64(floats * 4) + align64(nAll * 4) + align64(EXP2_TABLE.byteLength) + threads * slotBytes);
    const oPtr = qqPtr + align64(qBytes), rPtr = oPtr + align64(floats * 4), tPtr = rPtr + align64(nAll * 4);
    const buffer = space.arena.buffer;
    if (halfKeys) {
      // the queries as llama.cpp's F16 conversion leaves them, as floats
      const qf = new Float32Array(buffer, qqPtr, floats);
      for (let i = 0; i < floats; i++) qf[i] = roundToF16(q[i]!);
    } else {
      const qq = new Uint8Array(buffer, qqPtr, qBytes);
      const head = new Float32Array(headDim);
      for (let i = 0; i < items; i++) {
        head.set(q.subarray(i * headDim, (i + 1) * headDim));
        if (encoding.k.rotation > 0) hadamardInPlace(head, 0, headDim, encoding.k.rotation);
        quantizeActivationsQ8_0(qq.subarray(i * (headDim / 32) * 34), head, headDim);
      }
    }
    new Int32Array(buffer, rPtr, nAll).set(rows.subarray(0, nAll));
    new Float64Array(buffer, tPtr, EXP2_TABLE.length).set(EXP2_TABLE);
    const control = space.control;
    writeAttentionJob(control, C.Kind.ATTENTION_ENCODED, { q: qqPtr, k: kPtr, v: vPtr, rows: rPtr, out: oPtr }, nTokens, startPos, nHeads, nKvHeads, headDim, scale);
    control[C.ROW_BYTES] = kRowBytes;
    control[C.KV_VALUE_ROW_BYTES] = vRowBytes;
    control[C.KV_TYPES] = KV_KERNEL_TYPES[encoding.k.type as keyof typeof KV_KERNEL_TYPES] | (KV_KERNEL_TYPES[encoding.v.type as keyof typeof KV_KERNEL_TYPES] << 8);
    control[C.KV_EXP_TABLE] = tPtr;
    control[C.SLOT_BASE] = tPtr + align64(EXP2_TABLE.byteLength);
    control[C.SLOT_BYTES] = slotBytes;
    setAttentionClaims(control, items, group, threads);
    runJob(index);
    out.set(new Float32Array(buffer, oPtr, floats));
    if (encoding.v.rotation > 0) hadamardInPlace(out, 0, floats, encoding.v.rotation);
  }

  /**
   * Bidirectional attention of one sequence (encoders) as one job over its heads (attention-full.ts:
   * two products on the F32 tiles and a softmax between, per head, in each thread's scratch slot).
   * The sequence's rows (Q, K and V as column blocks, `stride` floats apart) go to memory 0's
   * scratch in one copy.
   */
  function bidirectionalPass(out: Float32Array, qkv: Float32Array, n: number, nHeads: number, headDim: number, scale: number, stride: number): void {
    const d = nHeads * headDim;
    const inBytes = align64(((n - 1) * stride + 3 * d) * 4);
    const slotBytes = align64(kernels.attendFullScratchBytes(n, headDim));
    const xPtr = first.scratch(inBytes + align64(n * d * 4) + threads * slotBytes);
    const oPtr = xPtr + inBytes;
    const buffer = first.arena.buffer;
    new Float32Array(buffer, xPtr, (n - 1) * stride + 3 * d).set(qkv.subarray(0, (n - 1) * stride + 3 * d));
    const control = first.control;
    control[C.KIND] = C.Kind.ATTENTION_BIDIRECTIONAL;
    control[C.XQ] = xPtr;
    control[C.ROW_BYTES] = stride * 4;
    control[C.OUT] = oPtr;
    control[C.ROWS] = nHeads;
    control[C.COLS] = headDim;
    control[C.N_TOK] = n;
    control[C.N_HEADS] = nHeads;
    control[C.SLOT_BASE] = oPtr + align64(n * d * 4);
    control[C.SLOT_BYTES] = slotBytes;
    new Float32Array(control.buffer, control.byteOffset, control.length)[C.SCALE] = scale;
    setClaims(control, nHeads, 1, threads);
    runJob(0);
    out.set(new Float32Array(buffer, oPtr, n * d));
  }

  /** GELU over n floats on every thread (an element job in memory 0's scratch) */
  function geluPass(out: Float32Array, x: Float32Array, n: number): void {
    const bytes = align64(n * 4);
    const xPtr = first.scratch(2 * bytes);
    const oPtr = xPtr + bytes;
    const buffer = first.arena.buffer;
    new Float32Array(buffer, xPtr, n).set(x.subarray(0, n));
    elementJob(0, C.Kind.GELU_ERF, xPtr, 0, oPtr, n);
    out.set(new Float32Array(buffer, oPtr, n));
  }

  /** the exact SwiGLU kernel on the main thread: a few thousand elements, less than a job's sync */
  function swigluExact(out: Float32Array, gate: Float32Array, up: Float32Array, n: number): void {
    const bytes = align64(n * 4);
    const scratch = first.scratch(3 * bytes);
    const buffer = first.arena.buffer;
    new Float32Array(buffer, scratch, n).set(gate.subarray(0, n));
    new Float32Array(buffer, scratch + bytes, n).set(up.subarray(0, n));
    kernels.swigluGgml(scratch + 2 * bytes, scratch, scratch + bytes, n);
    out.set(new Float32Array(buffer, scratch + 2 * bytes, n));
  }

  /** where arrays that all lie in one of this backend's memories start in it, else undefined */
  function colocated(...arrays: Float32Array[]): { space: number; ptrs: number[] } | undefined {
    let space = -1;
    const ptrs: number[] = [];
    for (const a of arrays) {
      const at = memories.locate(a);
      if (at === undefined || (space >= 0 && at.space !== space)) return undefined;
      space = at.space;
      ptrs.push(at.ptr);
    }
    return { space, ptrs };
  }

  /** an element-wise job (kind ADD / SWIGLU / GELU_ERF) over n floats in memory `space`, in items of ELEMENT_ITEM */
  function elementJob(space: number, kind: C.Kind, w: number, xq: number, out: number, n: number): void {
    const control = memories.spaces[space]!.control;
    const items = Math.ceil(n / ELEMENT_ITEM);
    control[C.KIND] = kind;
    control[C.W] = w;
    control[C.XQ] = xq;
    control[C.OUT] = out;
    control[C.ROWS] = items;
    control[C.COLS] = ELEMENT_ITEM;
    control[C.N_TOK] = n;
    setClaims(control, items, 1, threads);
    runJob(space);
  }

  const shared = hostMemoryOps(alive);
  const backend: WasmBackend = {
    name: "wasm",
    llamaCppOrder: exact ? "q8_0+attention" : "none",
    threads,
    vnniDot: dotAddUnsigned,
    // the exact kernel reads f32 and f16 sides in llama.cpp's matrix-product order from planes per KV head
    kvHeadPlanes: (encoding, headDim) => exact && !encoding.flash && PLANE_TYPES.has(encoding.k.type) && PLANE_TYPES.has(encoding.v.type) && headDim % 8 === 0,
    get stolenClaims(): number {
      return pool?.stolenClaims ?? 0;
    },
    get failure(): string | undefined {
      return disposed ? undefined : pool?.failure;
    },
    stallWorkerOnce(ms: number): void {
      for (const space of memories.spaces) Atomics.store(space.control, C.STALL_MS, ms);
    },
    get memoryCount(): number {
      return memories.spaces.length;
    },
    ...shared,

    allocWeights(byteLength: number, name?: string): Uint8Array {
      alive("allocWeights");
      if (!Number.isSafeInteger(byteLength) || byteLength < 0) {
        throw new Error(`allocWeights: byteLength must be a non-negative integer, got ${byteLength}`);
      }
      const p = memories.placeWeights(byteLength, name === undefined ? "a weight allocation" : `tensor ${name}`);
      return new Uint8Array(memories.spaces[p.space]!.arena.buffer, p.ptr, byteLength);
    },

    swiglu(outArray: DeviceArray, gateArray: DeviceArray, upArray: DeviceArray, n: number): void {
      alive("swiglu");
      const out = host(outArray), gate = host(gateArray), up = host(upArray);
      if (!(gate.length >= n && up.length >= n && out.length >= n)) throw new Error(`swiglu: ${n} elements asked, arrays hold ${gate.length} / ${up.length} / ${out.length}`);
      // ggml's exp needs the fused multiply-add; without it the plain-TS op gives the same bits
      if (!exact) return swiglu(out, gate, up, n);
      const at = n >= ROW_JOB_FLOATS ? colocated(gate, up, out) : undefined;
      if (at) elementJob(at.space, C.Kind.SWIGLU, at.ptrs[0]!, at.ptrs[1]!, at.ptrs[2]!, n);
      else swigluExact(out, gate, up, n);
    },

    rmsNorm(outArray, xArray, weight, width, rows, eps): void {
      const out = host(outArray), x = host(xArray);
      const at = width * rows >= ROW_JOB_FLOATS && Number.isInteger(width) && Number.isInteger(rows) && width > 0 && out.length >= width * rows && x.length >= width * rows && (weight === null || weight.length >= width) ? colocated(x, out) : undefined;
      if (!at) return shared.rmsNorm(outArray, xArray, weight, width, rows, eps);
      alive("rmsNorm");
      const space = memories.spaces[at.space]!;
      // the weight (a host vector) goes through the scratch: a few KB
      let wPtr = 0;
      if (weight) {
        wPtr = space.scratch(width * 4);
        new Float32Array(space.arena.buffer, wPtr, width).set(weight.subarray(0, width));
      }
      const control = space.control;
      control[C.KIND] = C.Kind.RMS_NORM;
      control[C.W] = at.ptrs[0]!;
      control[C.XQ] = wPtr;
      control[C.OUT] = at.ptrs[1]!;
      control[C.ROWS] = rows;
      control[C.COLS] = width;
      new Float64Array(control.buffer, control.byteOffset, C.CONTROL_BYTES / 8)[C.EPS_F64] = eps;
      setClaims(control, rows, 1, threads);
      runJob(at.space);
    },

    rope(xArray, nTokens, nHeads, positions, p): void {
      const x = host(xArray);
      const n = nTokens * nHeads * p.headDim;
      const fits = Number.isInteger(n) && n >= ROW_JOB_FLOATS && x.length >= n && positions.length >= nTokens && Number.isInteger(p.ropeDim) && p.ropeDim % 2 === 0 && p.ropeDim > 0 && p.ropeDim <= p.headDim;
      const at = fits ? colocated(x) : undefined;
      if (!at) return shared.rope(xArray, nTokens, nHeads, positions, p);
      alive("rope");
      const space = memories.spaces[at.space]!;
      // each token's angles from ops/rope.ts's table (glibc's sinf and cosf), through the scratch
      const anglesPtr = space.scratch(nTokens * p.ropeDim * 4);
      const angles = new Float32Array(space.arena.buffer, anglesPtr, nTokens * p.ropeDim);
      for (let t = 0; t < nTokens; t++) angles.set(ropeAngles(positions[t]!, p), t * p.ropeDim);
      const control = space.control;
      control[C.KIND] = C.Kind.ROPE;
      control[C.W] = at.ptrs[0]!;
      control[C.XQ] = anglesPtr;
      control[C.XS] = p.ropeDim;
      control[C.XB] = p.style === "neox" ? 1 : 0;
      control[C.ROWS] = nTokens * nHeads;
      control[C.COLS] = p.headDim;
      control[C.N_HEADS] = nHeads;
      setClaims(control, nTokens * nHeads, 1, threads);
      runJob(at.space);
    },

    copy2d(dstArray, dstOffset, dstStride, srcArray, srcOffset, srcStride, rows, width): void {
      const dst = host(dstArray), src = host(srcArray);
      const inBounds = rows > 0 && width > 0 && dstOffset >= 0 && srcOffset >= 0 && dstOffset + (rows - 1) * dstStride + width <= dst.length && srcOffset + (rows - 1) * srcStride + width <= src.length;
      const at = inBounds && rows * width >= ROW_JOB_FLOATS ? colocated(dst, src) : undefined;
      if (at) {
        const d = at.ptrs[0]! + dstOffset * 4, s = at.ptrs[1]! + srcOffset * 4;
        const dEnd = d + ((rows - 1) * dstStride + width) * 4, sEnd = s + ((rows - 1) * srcStride + width) * 4;
        // rows copied in parallel must not overlap
        if (dEnd <= s || sEnd <= d) {
          alive("copy2d");
          const control = memories.spaces[at.space]!.control;
          control[C.KIND] = C.Kind.COPY_ROWS;
          control[C.W] = s;
          control[C.ROW_BYTES] = srcStride * 4;
          control[C.OUT] = d;
          control[C.XS] = dstStride * 4;
          control[C.ROWS] = rows;
          control[C.COLS] = width * 4;
          setClaims(control, rows, 1, threads);
          return runJob(at.space);
        }
      }
      shared.copy2d(dstArray, dstOffset, dstStride, srcArray, srcOffset, srcStride, rows, width);
    },

    add(xArray, yArray): void {
      const x = host(xArray), y = host(yArray);
      const at = x.length >= ROW_JOB_FLOATS && y.length >= x.length ? colocated(x, y) : undefined;
      if (!at) return shared.add(xArray, yArray);
      alive("add");
      elementJob(at.space, C.Kind.ADD, at.ptrs[0]!, at.ptrs[1]!, 0, x.length);
    },

    unary(op, outArray, xArray, n): void {
      // a few thousand elements cost less in TS than a job's sync
      if (op !== "gelu-erf" || n < ELEMENT_ITEM * 4) return shared.unary(op, outArray, xArray, n);
      alive("unary");
      const out = host(outArray), x = host(xArray);
      if (!Number.isInteger(n) || n < 0 || x.length < n || out.length < n) throw new Error(`unary gelu-erf: ${n} elements asked, arrays hold ${x.length} / ${out.length}`);
      geluPass(out, x, n);
    },

    matmul(outArray: DeviceArray, w: Tensor, xArray: DeviceArray, nTokens: number, epilogue?: MatmulEpilogue): void {
      alive("matmul");
      const out = host(outArray), x = host(xArray);
      const kind = KIND_OF.get(w.type);
      if (kind === undefined) return reference.matmul(outArray, w, xArray, nTokens, epilogue);
      const cols = w.dims[0];
      if (cols === undefined) throw new Error(`matmul: tensor ${w.name} has no dimensions`);
      const rows = rowCount(w);
      const rowBytes = rowByteLength(w.type, cols);
      checkEpilogue(w, rows, epilogue);
      if (w.data.length < rows * rowBytes) {
        throw new Error(`matmul: tensor ${w.name} (${typeName(w.type)} [${w.dims.join(", ")}]) needs ${rows * rowBytes} bytes, has ${w.data.length}`);
      }
      if (!Number.isInteger(nTokens) || nTokens < 0) throw new Error(`matmul ${w.name}: nTokens must be a non-negative integer, got ${nTokens}`);
      if (x.length < nTokens * cols) throw new Error(`matmul ${w.name}: x holds ${x.length} floats, expected ${nTokens} x ${cols}`);
      if (out.length < nTokens * rows) throw new Error(`matmul ${w.name}: out holds ${out.length} floats, expected ${nTokens} x ${rows}`);
      if (nTokens === 0 || rows === 0) return;
      const place = weightPlace(w);
      const relaxedKind = withFiniteScales(relaxedKernel(kind, nTokens), w, place, rows, cols);
      const perToken = bytesPerToken(cols, rows);
      const step = Math.max(1, Math.min(nTokens, Math.floor(MAX_SCRATCH / perToken)));
      for (let t = 0; t < nTokens; t += step) {
        const n = Math.min(step, nTokens - t);
        pass(kind, relaxedKind, place, rowBytes, rows, cols, n, out.subarray(t * rows, (t + n) * rows), x.subarray(t * cols, (t + n) * cols), epilogue);
      }
    },

    getRows(out: DeviceArray, w: Tensor, ids: ArrayLike<number>): void {
      alive("getRows");
      // a row lookup is cheap: dequantize in TS straight from the weight bytes
      reference.getRows(out, w, ids);
    },

    allocActivations(length: number): DeviceArray {
      alive("allocActivations");
      if (!Number.isSafeInteger(length) || length < 0) throw new Error(`allocActivations: length must be a non-negative integer, got ${length}`);
      const bytes = align64(Math.max(1, length) * 4);
      const recycled = freeBlocks.get(bytes)?.pop();
      const place = recycled ?? memories.placeActivations(bytes, "activations (KV cache)");
      const view = new Float32Array(memories.spaces[place.space]!.arena.buffer, place.ptr, length);
      // zeros as the contract says: a recycled block holds its last owner's floats (memory never
      // handed out is zero, and left untouched: its pages are backed at first use, or by clear)
      if (recycled) view.fill(0);
      recycle.register(view, { place, bytes });
      return device(view);
    },

    attention(outArray, qArray, keysArray, valuesArray, nTokens, startPos, nHeads, nKvHeads, headDim, scale, rows, encoding): void {
      alive("attention");
      const out = host(outArray), q = host(qArray), keys = host(keysArray), values = host(valuesArray);
      const k = memories.locate(keys);
      const v = memories.locate(values);
      const nAll = startPos + nTokens;
      if (encoding && !encoding.flash && !isPlainF32(encoding)) {
        // f16 sides in llama.cpp's matrix-product order: the exact kernel reads the halves in place
        // (head sizes of multiples of 8); an Inf/NaN half among them, or anything it does not take, goes to the reference
        const width = nKvHeads * headDim, kRowBytes = 4 * kvRowFloats(encoding.k.type, width), vRowBytes = 4 * kvRowFloats(encoding.v.type, width);
        const cacheRows = Math.min(Math.floor(keys.byteLength / kRowBytes), Math.floor(values.byteLength / vRowBytes));
        const halves = halfSidesOf(encoding);
        const runs = exact && k !== undefined && v !== undefined && k.space === v.space && headDim % 8 === 0 && nHeads % nKvHeads === 0 && (rows !== undefined || cacheRows >= nAll);
        if (nTokens === 0) return;
        if (runs && attentionPass(k.space, out, q, k.ptr, v.ptr, rows, cacheRows, nTokens, startPos, nHeads, nKvHeads, headDim, scale, halves, encoding.headPlane ?? 0)) return;
        return reference.attention(outArray, qArray, keysArray, valuesArray, nTokens, startPos, nHeads, nKvHeads, headDim, scale, rows, encoding);
      }
      if (encoding && !isPlainF32(encoding)) {
        // flash attention: f16, f32 (cast to f16) and block-format keys and values have a kernel (where
        // the multiply-add fuses; f16 / f32 keys at head dims of 64k, where ggml_vec_dot_f16 has no
        // leftovers); the rest take the reference one
        const halfKeys = encoding.k.type === "f16" || encoding.k.type === "f32";
        const blocks = encoding.k.type in KV_KERNEL_TYPES && encoding.v.type in KV_KERNEL_TYPES && headDim % (halfKeys ? 64 : 32) === 0;
        if (!exact || !blocks || k === undefined || v === undefined || k.space !== v.space || nHeads % nKvHeads !== 0 || rows === undefined) {
          return reference.attention(outArray, qArray, keysArray, valuesArray, nTokens, startPos, nHeads, nKvHeads, headDim, scale, rows, encoding);
        }
        if (nTokens === 0) return;
        const width = nKvHeads * headDim, kRowBytes = 4 * kvRowFloats(encoding.k.type, width), vRowBytes = 4 * kvRowFloats(encoding.v.type, width);
        checkRows(rows, nAll, Math.min(Math.floor(keys.byteLength / kRowBytes), Math.floor(values.byteLength / vRowBytes)));
        return encodedAttentionPass(k.space, out, q, k.ptr, v.ptr, rows, nTokens, startPos, nHeads, nKvHeads, headDim, scale, encoding, kRowBytes, vRowBytes);
      }
      const cacheRows = Math.floor(Math.min(keys.length, values.length) / (nKvHeads * headDim));
      // keys and values in different memories (a memory filled up between the two allocations) take the reference kernel
      if (k === undefined || v === undefined || k.space !== v.space || headDim % 4 !== 0 || nHeads % nKvHeads !== 0 || (rows === undefined && cacheRows < nAll)) {
        return reference.attention(outArray, qArray, keysArray, valuesArray, nTokens, startPos, nHeads, nKvHeads, headDim, scale, rows, encoding);
      }
      if (nTokens === 0) return;
      attentionPass(k.space, out, q, k.ptr, v.ptr, rows, cacheRows, nTokens, startPos, nHeads, nKvHeads, headDim, scale, NO_HALVES, encoding?.headPlane ?? 0);
    },

    bidirectionalAttention(outArray, qArray, kArray, vArray, n, nHeads, headDim, scale, stride = nHeads * headDim): void {
      alive("bidirectionalAttention");
      const out = host(outArray), q = host(qArray), k = host(kArray), v = host(vArray);
      const d = nHeads * headDim;
      if (!Number.isInteger(n) || n < 0 || stride < d) throw new Error(`bidirectionalAttention: n must be a non-negative integer and stride at least ${d}, got n ${n}, stride ${stride}`);
      const need = n === 0 ? 0 : (n - 1) * stride + d;
      if (q.length < need || k.length < need || v.length < need || out.length < n * d) throw new Error(`bidirectionalAttention: ${n} rows of ${d} floats (stride ${stride}) asked, q/k/v/out hold ${q.length} / ${k.length} / ${v.length} / ${out.length}`);
      if (n === 0) return;
      if (headDim % 4 !== 0) return reference.bidirectionalAttention(outArray, qArray, kArray, vArray, n, nHeads, headDim, scale, stride);
      // the kernel takes Q, K and V as the column blocks of one fused projection (the encoders'
      // layout); separate arrays are interleaved so first
      const fused = k.buffer === q.buffer && v.buffer === q.buffer && k.byteOffset === q.byteOffset + d * 4 && v.byteOffset === k.byteOffset + d * 4 && stride >= 3 * d;
      if (fused) return bidirectionalPass(out, q, n, nHeads, headDim, scale, stride);
      const qkv = new Float32Array(n * 3 * d);
      for (let t = 0; t < n; t++) {
        qkv.set(q.subarray(t * stride, t * stride + d), t * 3 * d);
        qkv.set(k.subarray(t * stride, t * stride + d), t * 3 * d + d);
        qkv.set(v.subarray(t * stride, t * stride + d), t * 3 * d + 2 * d);
      }
      bidirectionalPass(out, qkv, n, nHeads, headDim, scale, 3 * d);
    },

    dispose(): void {
      if (disposed) return;
      disposed = true;
      pool?.close();
      reference.dispose();
    },
  };
  warmUp(backend, (run) => {
    // on 2 x ROW_JOB_FLOATS floats of activation memory handed back to its memory's allocator
    // afterwards: a small memoryLimitBytes has no room to keep them
    const bytes = 2 * ROW_JOB_FLOATS * 4;
    const place = memories.placeActivations(bytes, "the warm-up's rows");
    const arena = memories.spaces[place.space]!.arena;
    const floats = new Float32Array(arena.buffer, place.ptr, 2 * ROW_JOB_FLOATS);
    try {
      run(device(floats));
    } finally {
      // zeros again, as memory never handed out is
      floats.fill(0);
      arena.giveBackTop(place.ptr, bytes);
    }
  });
  return backend;
}

/**
 * Runs every kernel once (one token, a few, and a batch the group kernels take; the row jobs at
 * their smallest size) so none is compiled during the first request. A model's warm-up prompt of
 * two tokens reaches neither the group kernels nor the row jobs (RMSNorm, RoPE, adds, SwiGLU, row
 * copies take them from ROW_JOB_FLOATS floats): without this, Chromium's first 128-token prompt
 * of the SmolLM shape spent ~15-30 ms more in them than a second one.
 */
function warmUp(backend: Backend, rowJobs: (run: (floats: DeviceArray) => void) => void): void {
  const cols = 512;
  const rows = 16;
  // 13 tokens: a group of eight, one of four and one left over for the batches' group kernels
  const batch = 13;
  const x = device(new Float32Array(cols * batch).map((_, i) => Math.sin(i)));
  const out = device(new Float32Array(rows * batch));
  for (const type of KIND_OF.keys()) {
    const data = backend.allocWeights(rowByteLength(type, cols) * rows);
    const w: Tensor = { name: `warm-up ${typeName(type)}`, type, dims: [cols, rows], data };
    for (const n of [1, 3, batch]) backend.matmul(out, w, x, n);
  }
  rowJobs((floats) => {
    // the first half the jobs' operand, the second the copy's destination (rows copied must not overlap)
    const n = ROW_JOB_FLOATS, width = 256, headDim = 64;
    backend.write(floats, new Float32Array(2 * n).map((_, i) => Math.sin(i)));
    backend.add(floats, floats);
    backend.swiglu(floats, floats, floats, n);
    backend.rmsNorm(floats, floats, new Float32Array(width).fill(1), width, n / width, 1e-5);
    const tokens = n / (4 * headDim);
    for (const style of ["norm", "neox"] as const) {
      backend.rope(floats, tokens, 4, Array.from({ length: tokens }, (_, t) => t), { headDim, ropeDim: headDim, base: 10000, freqScale: 1, style });
    }
    backend.copy2d(floats, n, width, floats, 0, width, n / width, width);
  });
}

export type { KernelExports };
