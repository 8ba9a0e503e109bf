/**
 * The control block in shared memory through which the main thread hands a job to the
 * workers. Int32 word indices; the job words (from NEXT on) are read by work() in
 * assembly/index.ts at the byte offsets 4 * index, so the two files must agree. Counters
 * that different threads hammer sit on separate 64-byte cache lines.
 *
 * Every memory of a backend has a control block (space.ts), but only memory 0's synchronises
 * the threads (GEN ... MAIN_WAITING); a job's words, from NEXT on, are written into the block of
 * the memory it runs in, which SPACE names.
 */
export const CONTROL_BYTES = 256;

/** bumped by the main thread to start a job; workers wait for it to change */
export const GEN = 0;
/** workers currently blocked in Atomics.wait on GEN (the main thread notifies only if > 0) */
export const SLEEPERS = 1;
/** set once by dispose(): workers leave their loop at the next GEN change */
export const STOP = 2;
/** set by a worker whose kernel threw; the error message follows on its port */
export const FAILED = 3;
/** which memory the job runs in (index into the backend's memories): its instance runs work() on that memory's control block */
export const SPACE = 4;
/** 1 while the main thread is blocked in Atomics.wait on COMPLETED (in the job's memory) */
export const MAIN_WAITING = 17;
/** rows (items) of the job done: added by whoever finishes or publishes them (complete() in assembly/index.ts) */
export const COMPLETED = 18;
/**
 * matmul jobs: byte address of the batch's group streams (eight tokens' activations interleaved
 * per weight block: packQ8_0Groups / packQ4_0Groups / packQ8_KSlots), 0 for none. A job word read once by
 * work(), outside the job words' range only for want of room there
 */
export const GROUPS = 19;
/** RMS_NORM jobs: epsilon, an f64 in words 20 and 21 (byte 80) */
export const EPS_F64 = 10;
/**
 * exact attention jobs: the head rows between a cache's planes per KV head (KVCacheEncoding.headPlane),
 * 0 for rows of every head. A job word outside the job words' range, like GROUPS
 */
export const KV_PLANE = 22;
/**
 * matmul jobs: 1 where the runtime lowers Relaxed SIMD's int32 dot to VNNI's vpdpbusd (probed by
 * the host: probeDotAdd): the group kernels of batches (Q8_0's exact one, whose group streams are
 * then packed as unsigned bytes, Q4_0's and Q5_0's) take it; the same bits. A job word outside
 * the job words' range, like GROUPS
 */
export const VNNI_DOT = 23;
/**
 * NEXT and NEXT_TAG are one 64-bit word: the first row (or item) not yet claimed and the
 * job's tag (the GEN it runs under). claim() in assembly/index.ts moves the row on by
 * compare-and-swap only while the tag is its job's, so a thread late from an old job never
 * takes rows of a newer one.
 */
export const NEXT = 32;
export const NEXT_TAG = 33;
/** byte address of the exact attention's per-thread scratch slot 0 (slot i: thread i) */
export const SLOT_BASE = 34;
/** bytes per slot */
export const SLOT_BYTES = 35;
/** the most rows one claim takes (a multiple of GRANULE), read once per job by work() */
export const MAX_CLAIM = 36;
/**
 * 1 for a job the main thread may take claims of (single-token matmuls): workers compute into
 * their private output and publish a claim only if the main thread has not taken it
 */
export const STEALABLE = 37;
/** byte address of the per-thread claim records (RECORD_BYTES each, thread 0 = the main thread) */
export const RECORDS = 38;
/** byte address of thread 0's private output, and the bytes of each thread's */
export const PRIVATE_BASE = 39;
export const PRIVATE_BYTES = 40;
/** test hook: the next worker to claim rows of a stealable job stops this many milliseconds */
export const STALL_MS = 41;
/** the word that worker waits on (never notified) */
export const STALL_WORD = 42;
/** matmul jobs: byte address of an f32 bias per row added to every token's output, 0 for none */
export const BIAS = 43;
/** matmul jobs: the activation applied after the bias (Activation) */
export const ACTIVATION = 44;
export enum Activation {
  NONE = 0,
  /** assembly/gelu.ts */
  GELU_ERF = 1,
}

/** a thread's claim record: its state word ((tag << 2) | one of ClaimState), then first and end row */
export const RECORD_BYTES = 64;
export enum ClaimState {
  IDLE = 0,
  COMPUTING = 1,
  PUBLISHING = 2,
  STOLEN = 3,
}

/** encoded-KV attention jobs: bytes of a value row, the two types (key | value << 8: 2 = q8_0, 3 = q4_0), the address of expf's table */
export const KV_VALUE_ROW_BYTES = 45;
export const KV_TYPES = 46;
export const KV_EXP_TABLE = 47;

// the job, read by work()
export const KIND = 48;
export const W = 49;
export const ROW_BYTES = 50;
export const ROWS = 51;
export const COLS = 52;
export const N_TOK = 53;
export const XQ = 54;
export const XS = 55;
/** Q8_K block sums; for attention jobs, the row index (i32 per position) */
export const XB = 56;
export const OUT = 57;
/** claims start on multiples of this many rows and take whole multiples (the last one excepted) */
export const GRANULE = 58;
/** a claim takes ceil(unclaimed rows / SHARES), rounded up to whole granules */
export const SHARES = 59;
// attention jobs only
export const START_POS = 60;
export const N_HEADS = 61;
export const N_KV_HEADS = 62;
/** f32 bits */
export const SCALE = 63;

/** work() kinds: which kernel runs */
export enum Kind {
  F32 = 0,
  F16 = 1,
  BF16 = 2,
  Q8_0 = 3,
  Q4_0 = 4,
  Q4_K = 5,
  Q6_K = 6,
  ATTENTION = 7,
  /** activation rows to Q8_0 (W = f32 rows, ROWS = row count), split over the threads */
  QUANTIZE_Q8_0 = 8,
  /** activation rows to Q8_K, likewise */
  QUANTIZE_Q8_K = 9,
  /** Q8_0 / Q4_0 over activations packed by packQ8_0 / packQ4_0 (relaxed build only, assembly/relaxed.ts) */
  Q8_0_RELAXED = 10,
  Q4_0_RELAXED = 11,
  /** Q4_K / Q6_K over activations packed by packQ8_K (relaxed build only) */
  Q4_K_RELAXED = 12,
  Q6_K_RELAXED = 13,
  Q5_0 = 14,
  /** attention in llama.cpp's order (relaxed build only): ATTENTION's words + N_TOK, SLOT_* */
  ATTENTION_EXACT = 15,
  /** Q8_0 in llama.cpp's order over activations packed by packQ8_0Exact (relaxed build only); GROUPS, SLOT_*: batches' group streams and accumulators */
  Q8_0_EXACT = 16,
  /** Q4_0_RELAXED for a weight without Inf/NaN block scales (f16sFinite): cheaper scale conversion */
  Q4_0_RELAXED_FINITE = 17,
  /** Q8_0_EXACT for a regular weight, no Inf/NaN block scale nor -128 (q8_0Regular): cheaper scale conversion and sign handling in decode */
  Q8_0_EXACT_FINITE = 18,
  /** ATTENTION without the causal mask (encoders): every query sees the START_POS keys */
  ATTENTION_BIDIRECTIONAL = 19,
  /** GELU in its erf form over N_TOK floats at W into OUT, in items of COLS floats */
  GELU_ERF = 20,
  /** Q5_K over Q8_K activations; Q5_K_RELAXED over activations packed by packQ8_K (relaxed build only) */
  Q5_K = 21,
  Q5_K_RELAXED = 22,
  /** Q2_K / Q3_K over Q8_K activations; the _RELAXED kinds over activations packed by packQ8_K (relaxed build only) */
  Q2_K = 23,
  Q2_K_RELAXED = 24,
  Q3_K = 25,
  Q3_K_RELAXED = 26,
  /** IQ4_NL over Q8_0 activations, IQ4_XS over Q8_K activations */
  IQ4_NL = 27,
  IQ4_XS = 28,
  /** IQ4_NL for single tokens over activations packed by packQ8_0 (relaxed build only) */
  IQ4_NL_RELAXED = 29,
  /** the grid i-quants over Q8_K activations (assembly/iq-grid.ts) */
  IQ2_XS = 30,
  IQ3_S = 31,
  IQ2_XXS = 32,
  IQ2_S = 33,
  IQ3_XXS = 34,
  IQ1_S = 35,
  IQ1_M = 36,
  /** MXFP4 over Q8_0 activations (assembly/mxfp4.ts) */
  MXFP4 = 37,
  /** TQ1_0 / TQ2_0 over Q8_K activations and their group sums (assembly/tq.ts) */
  TQ1_0 = 38,
  TQ2_0 = 39,
  /**
   * attention over a q8_0 / q4_0 KV cache in llama.cpp's flash-attention order (relaxed build
   * only, assembly/attention-kv.ts): ATTENTION's words with XQ = Q8_0 queries, ROW_BYTES = key
   * row bytes, KV_* words
   */
  ATTENTION_ENCODED = 40,
  /** tsllm's in-memory NF4 / INT8 weights over f32 activations (assembly/memory-only.ts) */
  NF4 = 41,
  INT8 = 42,
  /** Q4_1 / Q5_1 over Q8_0-quantized activations, XB = each block's s_x (Q8_1's d * sum(q), f16-rounded, as f32) */
  Q4_1 = 43,
  Q5_1 = 44,
  /** RMSNorm of ROWS rows of COLS floats at W into OUT (assembly/rows.ts), XQ = the weight (0: none), EPS_F64 */
  RMS_NORM = 45,
  /** W += XQ over N_TOK floats, in items (ROWS) of COLS floats */
  ADD = 46,
  /** OUT = silu(W) * XQ over N_TOK floats in llama.cpp's arithmetic (assembly/swiglu-ggml.ts; relaxed build only), in items of COLS floats */
  SWIGLU = 47,
  /** RoPE in place on ROWS rows (N_HEADS a token) of COLS floats at W, XQ = each token's angles (XS floats: cos, sin per pair), XB = 1 for the neox pairs */
  ROPE = 48,
  /** ROWS rows of COLS bytes from W (ROW_BYTES apart) to OUT (XS bytes apart) */
  COPY_ROWS = 49,
  /** Q5_0 batches over GROUPS (packQ4_0Groups, Q4_0's streams and kernel; the int16 activations left as they are; relaxed build only), the leftover tokens as Q5_0 */
  Q5_0_GROUPS = 50,
  /** Q5_0 single tokens over activations packed by packQ4_0 (relaxed build only) */
  Q5_0_RELAXED = 51,
  /** ROWS rows of COLS f16 values from W (row rows[r] ROW_BYTES apart, XB = the row index) to f32 rows at OUT; XS = an i32 set to 1 on an Inf/NaN half */
  HALF_ROWS = 52,
  /** IQ4_XS over Q8_K activations packed by packQ8_0 (a+ and a- per 32; relaxed build only) */
  IQ4_XS_RELAXED = 53,
}

/**
 * How long a waiting thread polls before it blocks in Atomics.wait, in milliseconds. Waking a
 * blocked thread is expensive here: in this VM an Atomics.notify that finds a sleeper took ~0.3 ms
 * of the main thread per job (10% of a TinyLlama decode's main-thread time when workers slept
 * between jobs after a poll of some microseconds). The gaps between the jobs of one forward pass
 * (norms, RoPE, sampling) are well under this, so during generation nobody sleeps; after it the
 * workers poll this long and then block, so an idle or loaded machine is left alone.
 */
export const SPIN_MS = 2;

/** the pool's `left` words (WorkerStart.left): a cache line of LEFT_STRIDE Int32 words per thread; its word 0 is the GEN of the thread's last finished work() */
export const LEFT_STRIDE = 16;
/**
 * Word 1 of a worker's line: 1 once its loop has stopped for good (it threw outside a kernel, its
 * JavaScript was terminated, or its Node thread exited: set by the worker itself, or by the Node
 * host's supervisor thread for a thread ended from outside), with why in its error channel. The main
 * thread cannot hear of it any other way while it waits on a job (its event loop is blocked), and
 * such a worker never completes the rows it claimed nor leaves the job: the pool's waits look at
 * this word.
 */
export const LEFT_STOPPED = 1;
/** tells the main thread's waits that a worker's loop has stopped for good (LEFT_STOPPED); whoever calls it has left why in the worker's error channel first */
export function markStopped(worker: { left: SharedArrayBuffer; thread: number }): void {
  Atomics.store(new Int32Array(worker.left), worker.thread * LEFT_STRIDE + LEFT_STOPPED, 1);
}

/**
 * Whether a kernel worker's end is expected or already told: the pool stopped its workers (STOP),
 * or the worker was marked stopped with why (LEFT_STOPPED). Whoever watches a worker's thread from
 * outside (Node's supervisor thread, the browser's watchdog worker) says nothing then.
 */
export function endTold(worker: { memory: WebAssembly.Memory; ctrl: number; left: SharedArrayBuffer; thread: number }): boolean {
  const control = new Int32Array(worker.memory.buffer, worker.ctrl, STOP + 1);
  return Atomics.load(control, STOP) !== 0 || Atomics.load(new Int32Array(worker.left), worker.thread * LEFT_STRIDE + LEFT_STOPPED) !== 0;
}

/** polls between two clock reads (a clock read costs more than a poll) */
const POLLS_PER_CLOCK_READ = 256;

/**
 * Polls control[word] for SPIN_MS: the first value `ready` accepts, or undefined when the time
 * runs out (the caller then blocks in Atomics.wait).
 */
export function pollFor(control: Int32Array, word: number, ready: (value: number) => boolean): number | undefined {
  const deadline = performance.now() + SPIN_MS;
  for (let polls = 1; ; polls++) {
    const value = Atomics.load(control, word);
    if (ready(value)) return value;
    if (polls % POLLS_PER_CLOCK_READ === 0 && performance.now() > deadline) return undefined;
  }
}
