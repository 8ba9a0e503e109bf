// Entry point of the kernels module. Every thread (the main thread and each worker) holds its
// own instance of this module over one shared memory; the host writes a job into the control
// block and every instance calls work(), which claims rows off a shared counter until
// none are left. Layout of the control block (byte offsets) is mirrored in
// src/kernels/wasm/control.ts.
export { useF16Table, fillF16Table, f16sFinite } from "./half";
export { roundRowsF16, roundRowsBF16, quantizeRowQ8_0, quantizeRowQ8_K } from "./activations";
import { quantizeRowQ8_0, quantizeRowQ8_K } from "./activations";
import { matF32, matF16, matBF16 } from "./float";
import { matQ8_0, matQ4_0, matQ5_0, matQ8_0Relaxed, matQ4_0Relaxed, matQ4_0RelaxedFinite } from "./q8";
export { packQ8_0, packQ4_0 } from "./relaxed";
export { packQ8_K } from "./kquant";
import { matQ4_K, matQ6_K, matQ4_KRelaxed, matQ6_KRelaxed } from "./kquant";
import { attend } from "./attention";
import { attendGgml } from "./attention-ggml";
export { attendGgmlScratchBytes, probeMadd } from "./attention-ggml";
import { matQ8_0Exact } from "./q8-ggml";
export { packQ8_0Exact, probeBlend, probeDot } from "./q8-ggml";
export { swigluGgml } from "./swiglu-ggml";

const NEXT: usize = 128;
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
// per-thread scratch for jobs that need their own (exact attention): a slot index taken once
// per job, the slots' base and the bytes of one slot
const SLOT: usize = 132;
const SLOT_BASE: usize = 136;
const SLOT_BYTES: usize = 140;
const MAX_CLAIM: usize = 144;

/** first byte the host may use: everything below belongs to this module's static data */
export function heapBase(): usize {
  return __heap_base;
}

/**
 * Claims the next rows of the job off the shared counter NEXT: ceil(remaining / SHARES) rows
 * rounded up to whole granules, at most MAX_CLAIM (guided scheduling: claims shrink as the
 * rows run out, down to one granule, so the threads finish within a few rows of each other;
 * the cap bounds what a thread holds when the OS stops it in the middle of a claim). Returns
 * the first row (the end is in claimEnd), or -1 when no rows are left. Claims start on granule boundaries, so a row's arithmetic is
 * the same whichever thread takes it.
 */
let claimEnd: i32 = 0;
function claim(ctrl: usize, rows: i32, granule: i32, shares: i32, maxClaim: i32): i32 {
  let r0 = atomic.load<i32>(ctrl + NEXT);
  while (r0 < rows) {
    const want = min<i32>(maxClaim, (rows - r0 + shares - 1) / shares);
    const r1 = min<i32>(rows, r0 + (want + granule - 1) / granule * granule);
    const seen = atomic.cmpxchg<i32>(ctrl + NEXT, r0, r1);
    if (seen == r0) {
      claimEnd = r1;
      return r0;
    }
    r0 = seen;
  }
  return -1;
}

/** runs the current job: claims rows until none are left */
export function work(ctrl: usize): void {
  const kind = load<i32>(ctrl + KIND);
  const w = load<usize>(ctrl + W);
  const rowBytes = load<usize>(ctrl + ROW_BYTES);
  const rows = load<i32>(ctrl + ROWS);
  const cols = load<i32>(ctrl + COLS);
  const nTok = load<i32>(ctrl + N_TOK);
  const xq = load<usize>(ctrl + XQ);
  const xs = load<usize>(ctrl + XS);
  const xb = load<usize>(ctrl + XB);
  const out = load<usize>(ctrl + OUT);
  const granule = load<i32>(ctrl + GRANULE);
  const shares = load<i32>(ctrl + SHARES);
  const maxClaim = load<i32>(ctrl + MAX_CLAIM);
  // the exact attention keeps a score row and accumulators per thread: scratch slot of its own
  const scratch = kind == 15 ? load<usize>(ctrl + SLOT_BASE) + <usize>atomic.add<i32>(ctrl + SLOT, 1) * load<usize>(ctrl + SLOT_BYTES) : 0;
  while (true) {
    const r0 = claim(ctrl, rows, granule, shares, maxClaim);
    if (r0 < 0) break;
    const r1 = claimEnd;
    switch (kind) {
      case 0: matF32(w, rowBytes, xq, out, rows, cols, nTok, r0, r1); break;
      case 1: matF16(w, rowBytes, xq, out, rows, cols, nTok, r0, r1); break;
      case 2: matBF16(w, rowBytes, xq, out, rows, cols, nTok, r0, r1); break;
      case 3: matQ8_0(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
      case 4: matQ4_0(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
      case 5: matQ4_K(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1); break;
      case 6: matQ6_K(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1); break;
      // attention: W = keys, XS = values, XB = row index per position (i32), XQ = queries,
      // ROWS = items (tokens x heads), COLS = head size
      case 7: attend(xq, w, xs, xb, out, load<i32>(ctrl + N_HEADS), load<i32>(ctrl + N_KV_HEADS), cols, load<i32>(ctrl + START_POS), load<f32>(ctrl + SCALE), r0, r1); break;
      // quantization of activation rows r0 .. r1 - 1: W = f32 rows of COLS floats
      case 8: for (let t = r0; t < r1; t++) quantizeRowQ8_0(w + ((<usize>t * <usize>cols) << 2), xq + ((<usize>t * <usize>cols) << 1), xs + ((<usize>t * <usize>(cols >> 5)) << 2), cols); break;
      case 9: for (let t = r0; t < r1; t++) quantizeRowQ8_K(w + ((<usize>t * <usize>cols) << 2), xq + ((<usize>t * <usize>cols) << 1), xs + ((<usize>t * <usize>(cols >> 8)) << 2), xb + ((<usize>t * <usize>(cols >> 4)) << 2), cols); break;
      // Q8_0 / Q4_0 over activations packed by packQ8_0 / packQ4_0 (relaxed-SIMD build only)
      case 10: matQ8_0Relaxed(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
      case 11: matQ4_0Relaxed(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
      // Q4_K / Q6_K over activations packed by packQ8_K (relaxed-SIMD build only)
      case 12: matQ4_KRelaxed(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1); break;
      case 13: matQ6_KRelaxed(w, rowBytes, xq, xs, xb, out, rows, cols, nTok, r0, r1); break;
      case 14: matQ5_0(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
      // attention in llama.cpp's order (relaxed build only): the words of case 7, plus N_TOK
      case 15: attendGgml(xq, w, xs, xb, out, load<i32>(ctrl + N_HEADS), load<i32>(ctrl + N_KV_HEADS), cols, load<i32>(ctrl + START_POS), nTok, load<f32>(ctrl + SCALE), r0, r1, scratch); break;
      // Q8_0 in llama.cpp's order over activations packed by packQ8_0Exact (relaxed build only)
      case 16: matQ8_0Exact(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
      // Q4_0_RELAXED for a weight whose block scales are all finite (relaxed build only)
      case 17: matQ4_0RelaxedFinite(w, rowBytes, xq, xs, out, rows, cols, nTok, r0, r1); break;
      default: unreachable();
    }
  }
}
