/**
 * Contiguous per-layer KV cache. Layer l keeps K and V as `capacity` rows of
 * nKvHeads * headDim floats (row = position), so attention for any head reads its slice of
 * every row in place. Decode appends one row per layer and never recomputes the past.
 */
export class KVCache {
  readonly keys: Float32Array[] = [];
  readonly values: Float32Array[] = [];
  readonly rowSize: number;
  /** number of positions filled (the next token's position) */
  length = 0;

  constructor(
    readonly nLayers: number,
    readonly nKvHeads: number,
    readonly headDim: number,
    readonly capacity: number,
    /** where the rows live: the backend's memory, so attention kernels read them in place */
    alloc: (length: number) => Float32Array = (n) => new Float32Array(n),
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`contextSize must be a positive integer, got ${capacity}`);
    this.rowSize = nKvHeads * headDim;
    const bytes = nLayers * 2 * capacity * this.rowSize * 4;
    if (bytes > 8 * 2 ** 30) throw new Error(`KV cache for contextSize ${capacity} needs ${(bytes / 2 ** 30).toFixed(1)} GiB; choose a smaller contextSize`);
    for (let l = 0; l < nLayers; l++) {
      this.keys.push(alloc(capacity * this.rowSize));
      this.values.push(alloc(capacity * this.rowSize));
    }
  }

  get byteLength(): number {
    return this.nLayers * 2 * this.capacity * this.rowSize * 4;
  }

  /** throws before any work is done when `n` more tokens would not fit */
  ensureRoom(n: number): void {
    if (this.length + n > this.capacity) {
      throw new Error(`context is full: ${this.length} tokens cached + ${n} new > contextSize ${this.capacity}`);
    }
  }

  /** writes rows for positions [pos, pos + nTokens) of layer `layer` */
  store(layer: number, pos: number, k: Float32Array, v: Float32Array, nTokens: number): void {
    const n = nTokens * this.rowSize;
    this.keys[layer]!.set(k.subarray(0, n), pos * this.rowSize);
    this.values[layer]!.set(v.subarray(0, n), pos * this.rowSize);
  }

  /** forget everything from position `pos` on (e.g. to reuse a shared prompt prefix) */
  truncate(pos: number): void {
    if (pos < 0 || pos > this.length) throw new Error(`cannot truncate the KV cache to ${pos}: it holds ${this.length} positions`);
    this.length = pos;
  }
}
