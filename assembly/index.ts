// Entry point of the kernels module. Every thread (the main thread and each worker) holds its
// own instance of this module over one shared memory; the host writes a job into the control
// block and every instance calls work(), which claims rows off a shared counter until
// none are left. Layout of the control block (byte offsets) is mirrored in
// src/kernels/wasm/control.ts.
export { useF16Table, fillF16Table, f16sFinite } from "./half";
export { roundRowsF16, roundRowsBF16, quantizeRowQ8_0, quantizeRowQ8_K } from "./activations";
import { quantizeRowQ8_0, quantizeRowQ8_K } from "./activations";
import { matF32, matF16, matBF16 } from "./float";
import { matQ8_0, matQ4_0, matQ5_0, matQ5_0Groups, matQ5_0Relaxed, matQ8_0Relaxed, matQ4_0Relaxed, matQ4_0RelaxedFinite, matIQ4_NL, matIQ4_NLRelaxed } from "./q8";
import { matMXFP4 } from "./mxfp4";
import { matTQ1_0, matTQ2_0 } from "./tq";
import { matIQ1_M, matIQ1_S, matIQ2_S, matIQ2_XS, matIQ2_XXS, matIQ3_S, matIQ3_XXS } from "./iq-grid";
export { packQ8_0, packQ4_0 } from "./relaxed";
export { packQ4_0Groups } from "./q8";
export { packQ8_K } from "./kquant";
export { packQ8_KSlots } from "./kquant-slots";
import { K4, K5, K6, matKSlots } from "./kquant-slots";
import { matQ2_K, matQ3_K, matQ4_K, matQ5_K, matQ6_K, matQ2_KRelaxed, matQ3_KRelaxed, matQ4_KRelaxed, matQ5_KRelaxed, matQ6_KRelaxed, matIQ4_XS, matIQ4_XSRelaxed } from "./kquant";
import { attend } from "./attention";
import { attendGgml } from "./attention-ggml";
import { attendEncoded } from "./attention-kv";
export { attendEncodedScratchBytes } from "./attention-kv";
import { matINT8, matNF4 } from "./memory-only";
import { matQ4_1, matQ5_1 } from "./q1";
import { attendFull } from "./attention-full";
export { attendFullScratchBytes } from "./attention-full";
export { attendGgmlScratchBytes, probeMadd } from "./attention-ggml";
import { matQ8_0Exact, matQ8_0ExactFinite } from "./q8-ggml";
export { packQ8_0Exact, packQ8_0Groups, probeBlend, probeDot, q8_0Regular } from "./q8-ggml";
export { swigluGgml } from "./swiglu-ggml";
import { geluErfRange } from "./gelu";
import { addRange, copyRows, halfRows, rmsNormRows, ropeRows } from "./rows";
import { swigluGgml } from "./swiglu-ggml";

// NEXT is 64 bits: the first unclaimed row (low word) and the job's tag (high word), so that
// a thread still busy with an old job can never claim rows of a newer one
const NEXT: usize = 128;
const MAIN_WAITING: usize = 68;
/** rows (items) of the job finished, published or recomputed by the main thread */
const COMPLETED: usize = 72;
/** matmul jobs: the batch's group streams (packQ8_0Groups / packQ4_0Groups / packQ8_KSlots), 0 for none */
const GROUPS: usize = 76;
// row-op jobs: RMSNorm's epsilon (f64)
const EPS: usize = 80;
const KV_PLANE: usize = 88;
/** matmul jobs: 1 where the runtime lowers the relaxed int32 dot to VNNI (see control.ts) */
const VNNI_DOT: usize = 92;
const KIND: usize = 192;
const W: usize = 196;
const ROW_BYTES: usize = 200;
const ROWS: usize = 204;
const COLS: usize = 208;
const N_TOK: usize = 212;
const XQ: usize = 216;
const XS: usize = 220;
const XB: usize = 224;
const OUT: usize = 228;
const GRANULE: usize = 232;
const SHARES: usize = 236;
// attention jobs only
const START_POS: usize = 240;
const N_HEADS: usize = 244;
const N_KV_HEADS: usize = 248;
const SCALE: usize = 252;
// per-thread scratch for jobs that need their own (exact attention): slot = the thread's index
const SLOT_BASE: usize = 136;
const SLOT_BYTES: usize = 140;
const MAX_CLAIM: usize = 144;
/** 1: the workers compute into their private output and publish each claim (see work()) */
const STEALABLE: usize = 148;
/** per-thread records (64 bytes each): claim state, first row, end row */
const RECORDS: usize = 152;
/** per-thread private output: base and bytes per thread */
const PRIVATE_BASE: usize = 156;
const PRIVATE_BYTES: usize = 160;
/** test hook: a worker that claims rows of a stealable job while this is > 0 stops this many ms once */
const STALL_MS: usize = 164;
const STALL_WORD: usize = 168;
/** matmul jobs: f32 bias per row added to every token's output (0: none) */
const BIAS: usize = 172;
/** matmul jobs: 1 applies GELU (erf form) after the bias */
const ACTIVATION: usize = 176;
// encoded-KV attention (kind 40): value row bytes, key | value type << 8, expf's table; the exact
// attention (kind 15): its f16 sides, and the word it flags an Inf/NaN half in
const KV_VALUE_ROW_BYTES: usize = 180;
const KV_TYPES: usize = 184;
const KV_EXP_TABLE: usize = 188;

// claim states in a worker's record: (tag << 2) | state
const COMPUTING = 1;
const PUBLISHING = 2;
const STOLEN = 3;

/** first byte the host may use: everything below belongs to this module's static data */
export function heapBase(): usize {
  return __heap_base;
}

/**
 * Claims the next rows of job `tag` off the shared counter NEXT: ceil(remaining / SHARES) rows
 * rounded up to whole granules, at most MAX_CLAIM (guided scheduling: claims shrink as the
 * rows run out, down to one granule, so the threads finish within a few rows of each other;
 * the cap bounds what a thread holds when the OS stops it in the middle of a claim). Returns
 * the first row (the end is in claimEnd), or -1 when no rows are left or NEXT belongs to
 * another job. Claims start on granule boundaries, so a row's arithmetic is the same whichever
 * thread takes it.
 */
let claimEnd: i32 = 0;
function claim(ctrl: usize, tag: u32, rows: i32, granule: i32, shares: i32, maxClaim: i32): i32 {
  const high = (<u64>tag) << 32;
  let seen = atomic.load<u64>(ctrl + NEXT);
  while ((seen & 0xffffffff00000000) == high && <i32>seen < rows) {
    const r0 = <i32>seen;
    const want = min<i32>(maxClaim, (rows - r0 + shares - 1) / shares);
    const r1 = min<i32>(rows, r0 + (want + granule - 1) / granule * granule);
    const before = atomic.cmpxchg<u64>(ctrl + NEXT, seen, high | <u64><u32>r1);
    if (before == seen) {
      claimEnd = r1;
      return r0;
    }
    seen = before;
  }
  return -1;
}

/** counts n rows of the job finished; the thread that finishes the last one wakes a sleeping main thread */
function complete(ctrl: usize, rows: i32, n: i32): void {
  if (atomic.add<i32>(ctrl + COMPLETED, n) + n == rows && atomic.load<i32>(ctrl + MAIN_WAITING) != 0) {
    atomic.notify(ctrl + COMPLETED, 1);
  }
}

/**
 * Runs job `tag` on thread `thread` (0 = the main thread): claims rows until none are left.
 * Rows go straight to OUT, except a worker's rows of a stealable job (decode): those are
 * computed into the thread's private output and copied to OUT only if the claim is still the
 * worker's (its record moves COMPUTING -> PUBLISHING by compare-and-swap). A main thread that
 * finds a claim still COMPUTING long after the other rows were done takes it (-> STOLEN,
 * workRows) and moves on: a worker the OS stopped mid-claim then holds nothing up, and what it
 * computes on resuming (maybe from inputs the next job has overwritten) stays in its private
 * output.
 */
export function work(ctrl: usize, tag: u32, thread: i32): void {
  loadJob(ctrl, thread);
  const granule = load<i32>(ctrl + GRANULE);
  const shares = load<i32>(ctrl + SHARES);
  const maxClaim = load<i32>(ctrl + MAX_CLAIM);
  const privately = thread != 0 && load<i32>(ctrl + STEALABLE) != 0;
  const record = load<usize>(ctrl + RECORDS) + (<usize>thread << 6);
  const priv = load<usize>(ctrl + PRIVATE_BASE) + <usize>thread * load<usize>(ctrl + PRIVATE_BYTES);
  const computing = (tag << 2) | COMPUTING;
  while (true) {
    const r0 = claim(ctrl, tag, rows, granule, shares, maxClaim);
    if (r0 < 0) break;
    const r1 = claimEnd;
    if (!privately) {
      computeRows(out, r0, r1);
      complete(ctrl, rows, r1 - r0);
      continue;
    }
    store<i32>(record, r0, 4);
    store<i32>(record, r1, 8);
    atomic.store<u32>(record, computing);
    stallForTest(ctrl);
    // a stealable job has one token: row r's result is the f32 at 4 r
    computeRows(priv, r0, r1);
    if (atomic.cmpxchg<u32>(record, computing, (tag << 2) | PUBLISHING) == computing) {
      memory.copy(out + (<usize>r0 << 2), priv + (<usize>r0 << 2), <usize>(r1 - r0) << 2);
      atomic.store<u32>(record, tag << 2);
      complete(ctrl, rows, r1 - r0);
    }
  }
}

/**
 * The main thread's takeover of a worker's claim: rows [r0, r1) of the current job straight
 * to OUT (the same kernel on the same rows, so the same bits as the worker's), counted done.
 */
export function workRows(ctrl: usize, r0: i32, r1: i32): void {
  loadJob(ctrl, 0);
  computeRows(out, r0, r1);
  complete(ctrl, rows, r1 - r0);
}

/** the test hook STALL_MS: stops this worker once, as the OS stops a thread mid-claim */
function stallForTest(ctrl: usize): void {
  const ms = atomic.load<i32>(ctrl + STALL_MS);
  if (ms > 0 && atomic.cmpxchg<i32>(ctrl + STALL_MS, ms, 0) == ms) atomic.wait<i32>(ctrl + STALL_WORD, 0, <i64>ms * 1000000);
}

// the job's words, read once by loadJob at the start of work(): a thread's claims succeed only
// while NEXT carries the job's tag with rows left, and the main thread marks NEXT exhausted
// under that tag (pool.ts run()) before it writes the next job's words, so words read before
// a successful claim are this job's (module globals are per thread: every thread has its own
// instance)
let kind: i32 = 0, w: usize = 0, rowBytes: usize = 0, rows: i32 = 0, cols: i32 = 0, nTok: i32 = 0;
let xq: usize = 0, xs: usize = 0, xb: usize = 0, out: usize = 0, scratch: usize = 0, groups: usize = 0;
let nHeads: i32 = 0, nKvHeads: i32 = 0, startPos: i32 = 0, scale: f32 = 0, bias: usize = 0, activation: i32 = 0;
let kvValueRowBytes: usize = 0, kvTypes: i32 = 0, kvExpTable: usize = 0, kvPlane: i32 = 0;
let eps: f64 = 0;
let vnni: bool = false;

/** the job kinds that are matrix products (out[t * rows + r]): the ones a bias applies to */
// @ts-ignore: decorator
@inline function isMatmul(kind: i32): bool {
  return kind <= 6 || (kind >= 10 && kind <= 14) || (kind >= 16 && kind <= 18) || (kind >= 21 && kind <= 39) || (kind >= 41 && kind <= 44) || kind == 50 || kind == 51 || kind == 53;
}

function loadJob(ctrl: usize, thread: i32): void {
  kind = load<i32>(ctrl + KIND);
  w = load<usize>(ctrl + W);
  rowBytes = load<usize>(ctrl + ROW_BYTES);
  rows = load<i32>(ctrl + ROWS);
  cols = load<i32>(ctrl + COLS);
  nTok = load<i32>(ctrl + N_TOK);
  xq = load<usize>(ctrl + XQ);
  xs = load<usize>(ctrl + XS);
  xb = load<usize>(ctrl + XB);
  out = load<usize>(ctrl + OUT);
  nHeads = load<i32>(ctrl + N_HEADS);
  nKvHeads = load<i32>(ctrl + N_KV_HEADS);
  startPos = load<i32>(ctrl + START_POS);
  scale = load<f32>(ctrl + SCALE);
  bias = isMatmul(kind) ? load<usize>(ctrl + BIAS) : 0;
  groups = isMatmul(kind) ? load<usize>(ctrl + GROUPS) : 0;
  vnni = isMatmul(kind) && load<i32>(ctrl + VNNI_DOT) != 0;
  activation = isMatmul(kind) ? load<i32>(ctrl + ACTIVATION) : 0;
  if (kind == 45) eps = load<f64>(ctrl + EPS);
  if (kind == 15) {
    kvPlane = load<i32>(ctrl + KV_PLANE);
    kvTypes = load<i32>(ctrl + KV_TYPES);
    kvExpTable = load<usize>(ctrl + KV_EXP_TABLE);
  }
  if (kind == 40) {
    kvValueRowBytes = load<usize>(ctrl + KV_VALUE_ROW_BYTES);
    kvTypes = load<i32>(ctrl + KV_TYPES);
    kvExpTable = load<usize>(ctrl + KV_EXP_TABLE);
  }
  // the exact attention keeps a score row and accumulators per thread, the bidirectional one its
  // head's scores and gathered rows, F16/BF16 batches a converted row group, Q8_0 batches a
  // half pass's accumulators, Q4_K/Q5_K/Q6_K batches four unpacked rows and two rows' sums: the slot of its
  // index. Every job whose kernel reads a slot writes SLOT_*; the others ignore scratch
  const slotBytes = load<usize>(ctrl + SLOT_BYTES);
  scratch = slotBytes != 0 ? load<usize>(ctrl + SLOT_BASE) + <usize>thread * slotBytes : 0;
}

/**
 * rows [r0, r1) of the loaded job into out, then its epilogue on them for every token: the bias
 * (one f32 add per output: the same bits as adding it afterwards), the activation
 */
function computeRows(out: usize, r0: i32, r1: i32): void {
  compute(out, r0, r1);
  if (bias == 0 && activation == 0) return;
  const n = nTok;
  for (let t = 0; t < n; t++) {
    const o = out + ((<usize>t * <usize>rows) << 2);
    if (bias != 0) {
      let r = r0;
      for (; r + 4 <= r1; r += 4) v128.store(o + (<usize>r << 2), f32x4.add(v128.load(o + (<usize>r << 2)), v128.load(bias + (<usize>r << 2))));
      for (; r < r1; r++) store<f32>(o + (<usize>r << 2), load<f32>(o + (<usize>r << 2)) + load<f32>(bias + (<usize>r << 2)));
    }
    if (activation == 1) geluErfRange(o, o, r0, r1);
  }
}

/**
 * Q4_K / Q5_K / Q6_K batches (kquant-slots.ts's kind k): the tokens of the job's group streams
 * (GROUPS), eight at a time, then four, into out; returns the first token left for kquant.ts's
 * tiles (0 without streams)
 */
function kSlots(k: i32, out: usize, r0: i32, r1: i32): i32 {
  return groups != 0 ? matKSlots(k, w, rowBytes, groups, scratch, out, rows, cols, nTok, r0, r1, vnni) : 0;
}

/** rows [r0, r1) of the loaded job's kernel, results into out */
function compute(out: usize, r0: i32, r1: i32): void {
  switch (kind) {
    case 0: matF32(w, rowBytes, xq, out, rows, cols, nTok, r0, r1); break;
    // F16 / BF16: SLOT_* = per-thread panels for batches (SLOT_BYTES 0: none)
    case 1: matF16(w, rowBytes, xq, out, rows, cols, nTok, r0, r1, scratch); break;
    case 2: matBF16(w, rowBytes, xq, out, rows, cols, nTok, r0, r1, scratch); break;
    case 3: matQ8_0(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    case 4: matQ4_0(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    case 5: matQ4_K(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1); break;
    case 6: matQ6_K(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1); break;
    // attention: W = keys, XS = values, XB = row index per position (i32), XQ = queries,
    // ROWS = items (tokens x heads), COLS = head size
    case 7: attend(xq, w, xs, xb, out, nHeads, nKvHeads, cols, startPos, scale, r0, r1); break;
    // quantization of activation rows r0 .. r1 - 1: W = f32 rows of COLS floats
    case 8: for (let t = r0; t < r1; t++) quantizeRowQ8_0(w + ((<usize>t * <usize>cols) << 2), xq + ((<usize>t * <usize>cols) << 1), xs + ((<usize>t * <usize>(cols >> 5)) << 2), cols); break;
    case 9: for (let t = r0; t < r1; t++) quantizeRowQ8_K(w + ((<usize>t * <usize>cols) << 2), xq + ((<usize>t * <usize>cols) << 1), xs + ((<usize>t * <usize>(cols >> 8)) << 2), xb + ((<usize>t * <usize>(cols >> 4)) << 2), cols); break;
    // Q8_0 / Q4_0 over activations packed by packQ8_0 / packQ4_0 (relaxed-SIMD build only)
    case 10: matQ8_0Relaxed(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    case 11: matQ4_0Relaxed(w, rowBytes, xq, xs, groups, scratch, out, rows, cols, nTok, r0, r1, vnni); break;
    // Q4_K / Q6_K over activations packed by packQ8_K (relaxed-SIMD build only)
    case 12: matQ4_KRelaxed(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1, kSlots(K4, out, r0, r1)); break;
    case 13: matQ6_KRelaxed(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1, kSlots(K6, out, r0, r1)); break;
    case 14: matQ5_0(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    // attention in llama.cpp's order (relaxed build only): the words of case 7, plus N_TOK,
    // KV_TYPES = which sides are f16 (attendGgml's HALF_KEYS | HALF_VALUES), KV_EXP_TABLE = the
    // address of an i32 set to 1 where an f16 side held Inf or NaN, KV_PLANE = the head rows
    // between the cache's planes per KV head (0: rows of every head)
    case 15: attendGgml(xq, w, xs, xb, out, nHeads, nKvHeads, cols, startPos, nTok, scale, r0, r1, scratch, kvTypes, kvExpTable, kvPlane); break;
    // Q8_0 in llama.cpp's order over activations packed by packQ8_0Exact (relaxed build only);
    // GROUPS = the first tokens' group streams (packQ8_0Groups) or 0, the slot their accumulators
    case 16: matQ8_0Exact(w, rowBytes, xq, xs, groups, scratch, out, rows, cols, nTok, r0, r1, vnni); break;
    // Q4_0_RELAXED for a weight whose block scales are all finite (relaxed build only)
    case 17: matQ4_0RelaxedFinite(w, rowBytes, xq, xs, groups, scratch, out, rows, cols, nTok, r0, r1, vnni); break;
    // Q8_0_EXACT for a weight whose block scales are all finite (relaxed build only)
    case 18: matQ8_0ExactFinite(w, rowBytes, xq, xs, groups, scratch, out, rows, cols, nTok, r0, r1, vnni); break;
    // bidirectional attention (encoders), items = heads: XQ = the sequence's rows of queries, keys
    // and values (ROW_BYTES apart: Q, K, V as column blocks), N_TOK = tokens, COLS = head size
    case 19: attendFull(xq, rowBytes, out, nHeads, cols, nTok, scale, r0, r1, scratch); break;
    // GELU (erf form) of elements in chunks of COLS: W = x, OUT = out, N_TOK = element count
    case 20: geluErfRange(out, w, r0 * cols, min<i32>(nTok, r1 * cols)); break;
    // Q5_K over Q8_K activations (21), packed by packQ8_K (22: relaxed build only)
    case 21: matQ5_K(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1); break;
    case 22: matQ5_KRelaxed(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1, kSlots(K5, out, r0, r1)); break;
    // Q2_K / Q3_K over Q8_K activations (23 / 25), packed by packQ8_K (24 / 26: relaxed build only)
    case 23: matQ2_K(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1); break;
    case 24: matQ2_KRelaxed(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1); break;
    case 25: matQ3_K(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1); break;
    case 26: matQ3_KRelaxed(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1); break;
    // IQ4_NL over Q8_0 activations (27), IQ4_XS over Q8_K activations (28; the group sums unused)
    case 27: matIQ4_NL(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    case 28: matIQ4_XS(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    // IQ4_NL for single tokens over activations packed by packQ8_0 (relaxed build only)
    case 29: matIQ4_NLRelaxed(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    // the grid i-quants over Q8_K activations (the group sums unused): IQ2_XS (30), IQ3_S (31),
    // IQ2_XXS (32), IQ2_S (33), IQ3_XXS (34), IQ1_S (35), IQ1_M (36)
    case 30: matIQ2_XS(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    case 31: matIQ3_S(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    case 32: matIQ2_XXS(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    case 33: matIQ2_S(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    case 34: matIQ3_XXS(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    case 35: matIQ1_S(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    case 36: matIQ1_M(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    // MXFP4 over Q8_0 activations
    case 37: matMXFP4(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    // TQ1_0 (38) and TQ2_0 (39) over Q8_K activations with their group sums
    case 38: matTQ1_0(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1); break;
    case 39: matTQ2_0(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1); break;
    // attention over a q8_0 / q4_0 KV cache (relaxed build only): case 7's words with XQ = Q8_0
    // queries, ROW_BYTES = a key row's bytes, and the KV_* words
    // NF4 (41) and INT8 (42), tsllm's in-memory formats, over f32 activations
    case 41: matNF4(w, rowBytes, xq, out, rows, cols, nTok, r0, r1); break;
    case 42: matINT8(w, rowBytes, xq, out, rows, cols, nTok, r0, r1); break;
    // Q4_1 (43) and Q5_1 (44) over Q8_0-quantized activations with the Q8_1 block sums at XB
    case 43: matQ4_1(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1); break;
    case 44: matQ5_1(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1); break;
    // RMSNorm of rows (ROWS of COLS floats) at W into OUT, XQ = the weight (0: none), EPS
    case 45: rmsNormRows(w, xq, out, cols, eps, r0, r1); break;
    // W += XQ over N_TOK floats, in items of COLS
    case 46: addRange(w, xq, r0 * cols, min<i32>(nTok, r1 * cols)); break;
    // OUT = silu(W) * XQ over N_TOK floats in llama.cpp's arithmetic (relaxed build only), in items of COLS
    case 47: { const i0 = r0 * cols, n = min<i32>(nTok, r1 * cols) - i0; swigluGgml(out + ((<usize>i0) << 2), w + ((<usize>i0) << 2), xq + ((<usize>i0) << 2), n); break; }
    // RoPE in place on ROWS rows (N_HEADS a token) of COLS floats at W, XQ = the tokens' angles (XS floats each), XB = 1 for neox
    case 48: ropeRows(w, xq, cols, <i32>xs, nHeads, xb != 0, r0, r1); break;
    // rows of COLS bytes from W (ROW_BYTES apart) to OUT (XS apart)
    case 49: copyRows(out, xs, w, rowBytes, <usize>cols, r0, r1); break;
    // Q5_0 batches over GROUPS (packQ4_0Groups; relaxed build only)
    case 50: matQ5_0Groups(w, rowBytes, xq, xs, groups, scratch, out, rows, cols, nTok, r0, r1, vnni); break;
    // Q5_0 single tokens over activations packed by packQ4_0 (relaxed build only)
    case 51: matQ5_0Relaxed(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    // rows of f16 gathered through a row index (XB) to f32 rows: W = source, ROW_BYTES = its row
    // stride, OUT = destination, COLS = values a row, XS = the i32 set to 1 on an Inf/NaN half
    case 52: halfRows(out, w, xb, rowBytes, cols, xs, r0, r1); break;
    // IQ4_XS over Q8_K activations packed by packQ8_0 (relaxed build only)
    case 53: matIQ4_XSRelaxed(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
    case 40: attendEncoded(xq, w, xs, xb, out, nHeads, nKvHeads, cols, startPos, scale, r0, r1, rowBytes, kvValueRowBytes, kvTypes, kvExpTable, scratch); break;
    default: unreachable();
  }
}
export { probeDotAdd, rooflineDotI8, rooflineDotI16, rooflineF32 } from "./roofline";
