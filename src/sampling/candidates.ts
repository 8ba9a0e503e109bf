/**
 * The candidate set the filters work on, the counterpart of llama.cpp's
 * `llama_token_data_array`: parallel arrays of token ids and logits, of which the first
 * `size` entries are alive. Filters shrink `size` and reorder entries in place, so one set
 * allocated per sampler serves every call with no allocation.
 *
 * "Better" is a total order: higher logit first, and on equal logits the lower token id
 * first, so every selection and sort here is deterministic.
 */
export interface Candidates {
  ids: Int32Array;
  logits: Float32Array;
  /** probabilities of the first `size` entries, filled by `softmaxCandidates` */
  probs: Float32Array;
  size: number;
  /** true when the first `size` entries are ordered best first */
  sorted: boolean;
}

export function createCandidates(capacity: number): Candidates {
  return {
    ids: new Int32Array(capacity),
    logits: new Float32Array(capacity),
    probs: new Float32Array(capacity),
    size: 0,
    sorted: false,
  };
}

/**
 * Loads a whole-vocabulary logits row into `c` in token-id order (entry i is token i), so
 * processors that index by token id (bias, penalties) can run on `c.logits` directly.
 * Reallocates only when the vocabulary size changes.
 * Rejects NaN and +Infinity: either would turn every probability into NaN.
 */
export function loadCandidates(c: Candidates, logits: Float32Array): Candidates {
  const n = logits.length;
  if (n === 0) throw new RangeError("logits: expected at least one token, got an empty array");
  if (c.ids.length !== n) {
    c.ids = new Int32Array(n);
    c.logits = new Float32Array(n);
    c.probs = new Float32Array(n);
  }
  const ids = c.ids;
  const dst = c.logits;
  for (let i = 0; i < n; i++) {
    const x = logits[i]!;
    // one comparison catches both NaN and +Infinity
    if (!(x < Infinity)) {
      throw new RangeError(`logits[${i}] = ${x}: expected a finite number or -Infinity`);
    }
    dst[i] = x;
    ids[i] = i;
  }
  c.size = n;
  c.sorted = false;
  return c;
}

function better(ids: Int32Array, logits: Float32Array, a: number, b: number): boolean {
  const la = logits[a]!;
  const lb = logits[b]!;
  return la > lb || (la === lb && ids[a]! < ids[b]!);
}

function swap(ids: Int32Array, logits: Float32Array, a: number, b: number): void {
  const id = ids[a]!;
  ids[a] = ids[b]!;
  ids[b] = id;
  const l = logits[a]!;
  logits[a] = logits[b]!;
  logits[b] = l;
}

/** restores the heap below `i` in [0, size): every parent is worse than its children */
function siftDown(ids: Int32Array, logits: Float32Array, i: number, size: number): void {
  for (;;) {
    const l = 2 * i + 1;
    if (l >= size) return;
    const r = l + 1;
    const worst = r < size && better(ids, logits, l, r) ? r : l;
    if (!better(ids, logits, i, worst)) return;
    swap(ids, logits, i, worst);
    i = worst;
  }
}

/**
 * Partial selection: moves the best `k` of the first `c.size` entries to the front, best
 * first; the order of the rest is unspecified. A k-sized heap costs O(n log k), so top-k over
 * a 150k vocabulary never sorts the whole vocabulary; large k uses a native full sort.
 * Does not change `size` or `sorted`.
 */
export function selectBest(c: Candidates, k: number): void {
  const n = c.size;
  k = Math.min(k, n);
  if (k <= 0) return;
  if (k > HEAP_LIMIT && idsFitKeys(c)) {
    sortByKeys(c);
    return;
  }
  const { ids, logits } = c;
  // a heap with the worst of the current best k at its root: most entries lose to it at once
  for (let i = (k >> 1) - 1; i >= 0; i--) siftDown(ids, logits, i, k);
  for (let i = k; i < n; i++) {
    if (better(ids, logits, i, 0)) {
      swap(ids, logits, i, 0);
      siftDown(ids, logits, 0, k);
    }
  }
  // heap sort: the worst goes to the end of the shrinking heap, leaving best first
  for (let end = k - 1; end > 0; end--) {
    swap(ids, logits, 0, end);
    siftDown(ids, logits, 0, end);
  }
}

/** above this k a full native sort beats the heap (measured: 150k entries, ~2x) */
const HEAP_LIMIT = 2048;
/** ids must fit in the 21 bits below a 32-bit logit key in a float64's 53-bit mantissa */
const ID_BITS = 2 ** 21;

function idsFitKeys(c: Candidates): boolean {
  const ids = c.ids;
  for (let i = 0; i < c.size; i++) if (ids[i]! < 0 || ids[i]! >= ID_BITS) return false;
  return true;
}

let keyScratch = new Float64Array(0);
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/**
 * Sorts all alive entries best first with Float64Array.prototype.sort (native, no comparator
 * calls): each entry becomes the exact integer key (descending-order bits of its float32
 * logit) * 2^21 + id, so ascending keys mean "better" first, the same total order as
 * better(); the ids and logits are read back from the sorted keys.
 */
function sortByKeys(c: Candidates): void {
  const n = c.size;
  if (keyScratch.length < n) keyScratch = new Float64Array(n);
  const keys = keyScratch.subarray(0, n);
  const { ids, logits } = c;
  for (let i = 0; i < n; i++) {
    f32[0] = logits[i]!;
    let b = u32[0]!;
    if (b === 0x80000000) b = 0; // -0 ties with +0, as in better()
    // IEEE bits -> unsigned integers in ascending numeric order, then reversed
    const asc = b & 0x80000000 ? ~b >>> 0 : (b | 0x80000000) >>> 0;
    keys[i] = (0xffffffff - asc) * ID_BITS + ids[i]!;
  }
  keys.sort();
  for (let i = 0; i < n; i++) {
    const key = keys[i]!;
    const id = key % ID_BITS;
    const asc = 0xffffffff - (key - id) / ID_BITS;
    u32[0] = asc & 0x80000000 ? asc & 0x7fffffff : ~asc >>> 0;
    ids[i] = id;
    logits[i] = f32[0]!;
  }
}

/** sorts all alive entries best first */
export function sortCandidates(c: Candidates): void {
  if (c.sorted) return;
  selectBest(c, c.size);
  c.sorted = true;
}

/** index of the best alive entry (highest logit, lowest id on ties) */
export function bestIndex(c: Candidates): number {
  if (c.size === 0) throw new RangeError("candidates: the set is empty");
  if (c.sorted) return 0;
  const { ids, logits } = c;
  let best = 0;
  for (let i = 1; i < c.size; i++) if (better(ids, logits, i, best)) best = i;
  return best;
}

/** the largest alive logit */
export function maxLogit(c: Candidates): number {
  return c.logits[bestIndex(c)]!;
}

/**
 * probs[i] = exp(logit[i] - max), rounded to float32 as llama.cpp's `expf` results are, for
 * the alive entries; returns their sum accumulated in float64 (llama.cpp's `double sum_cum`).
 */
export function expCandidates(c: Candidates): number {
  const max = maxLogit(c);
  if (max === -Infinity) {
    throw new RangeError(
      "logits: every candidate token has logit -Infinity (did logitBias ban the whole vocabulary?)",
    );
  }
  const { logits, probs } = c;
  let sum = 0;
  for (let i = 0; i < c.size; i++) {
    probs[i] = Math.exp(logits[i]! - max);
    sum += probs[i]!;
  }
  return sum;
}

/** divides the values left by `expCandidates` by their sum */
export function normalizeCandidates(c: Candidates, sum: number): void {
  const probs = c.probs;
  for (let i = 0; i < c.size; i++) probs[i] = probs[i]! / sum;
}

/** probs[i] = softmax over the alive entries' logits */
export function softmaxCandidates(c: Candidates): void {
  normalizeCandidates(c, expCandidates(c));
}
