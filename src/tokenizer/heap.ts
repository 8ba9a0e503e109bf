/**
 * Heaps for merge loops: pop the best candidate pair, merge it, push the two new neighbour pairs,
 * so a word of n symbols costs O(n log n) instead of the O(n^2) of rescanning every pair after
 * each merge. Entries live in typed arrays, compared without a callback or an object each.
 */

/**
 * SentencePiece's candidates: (score, left symbol, merged length), the highest score first, the
 * leftmost on ties. pop() leaves the entry's fields in poppedScore / poppedLeft / poppedSize.
 */
export class ScoreHeap {
  private scores = new Float64Array(64);
  private lefts = new Int32Array(64);
  private sizes = new Int32Array(64);
  private count = 0;
  poppedScore = 0;
  poppedLeft = 0;
  poppedSize = 0;

  get size(): number { return this.count; }

  clear(): void { this.count = 0; }

  push(score: number, left: number, size: number): void {
    if (this.count === this.scores.length) this.grow();
    const { scores, lefts, sizes } = this;
    let i = this.count++;
    while (i > 0) {
      const p = (i - 1) >> 1;
      // stop once the parent comes out first
      if (!(score > scores[p]! || (score === scores[p]! && left < lefts[p]!))) break;
      scores[i] = scores[p]!; lefts[i] = lefts[p]!; sizes[i] = sizes[p]!;
      i = p;
    }
    scores[i] = score; lefts[i] = left; sizes[i] = size;
  }

  /** takes the best entry out into the popped* fields (the heap must not be empty) */
  pop(): void {
    const { scores, lefts, sizes } = this;
    this.poppedScore = scores[0]!; this.poppedLeft = lefts[0]!; this.poppedSize = sizes[0]!;
    const n = --this.count;
    const score = scores[n]!, left = lefts[n]!, size = sizes[n]!;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && (scores[r]! > scores[l]! || (scores[r]! === scores[l]! && lefts[r]! < lefts[l]!)) ? r : l;
      if (!(scores[c]! > score || (scores[c]! === score && lefts[c]! < left))) break;
      scores[i] = scores[c]!; lefts[i] = lefts[c]!; sizes[i] = sizes[c]!;
      i = c;
    }
    if (n > 0) { scores[i] = score; lefts[i] = left; sizes[i] = size; }
  }

  private grow(): void {
    const size = this.scores.length * 2;
    const scores = new Float64Array(size), lefts = new Int32Array(size), sizes = new Int32Array(size);
    scores.set(this.scores); lefts.set(this.lefts); sizes.set(this.sizes);
    this.scores = scores; this.lefts = lefts; this.sizes = sizes;
  }
}

/** Min-heap of numbers: BPE's candidates packed into one number each (rank * n + position). */
export class NumberHeap {
  private items = new Float64Array(64);
  private count = 0;

  get size(): number { return this.count; }

  clear(): void { this.count = 0; }

  push(x: number): void {
    if (this.count === this.items.length) {
      const bigger = new Float64Array(this.items.length * 2);
      bigger.set(this.items);
      this.items = bigger;
    }
    const a = this.items;
    let i = this.count++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = a[parent]!;
      if (p <= x) break;
      a[i] = p;
      i = parent;
    }
    a[i] = x;
  }

  /** the smallest number (the heap must not be empty) */
  pop(): number {
    const a = this.items;
    const top = a[0]!;
    const last = a[--this.count]!;
    const n = this.count;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && a[r]! < a[l]! ? r : l;
      if (a[c]! >= last) break;
      a[i] = a[c]!;
      i = c;
    }
    if (n > 0) a[i] = last;
    return top;
  }
}
