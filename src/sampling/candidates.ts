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
 * a 150k vocabulary never sorts the whole vocabulary. Does not change `size` or `sorted`.
 */
export function selectBest(c: Candidates, k: number): void {
  const n = c.size;
  k = Math.min(k, n);
  if (k <= 0) return;
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
