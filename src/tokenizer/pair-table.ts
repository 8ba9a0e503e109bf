/**
 * A value per (left, right) pair of non-negative int32s: open addressing over typed arrays, each
 * pair held as two int32s. A Map keyed by left * N + right holds keys past V8's small-integer
 * range once N passes ~32K (a BPE vocabulary, or code points), each one a heap number allocated
 * when the key is made (at every lookup while encoding, too) and hashed as a double.
 */
export class PairTable {
  private lefts: Int32Array;
  private rights: Int32Array;
  /** value + 1; 0 marks an empty slot */
  private values: Int32Array;
  private mask: number;
  private count = 0;

  constructor(expectedPairs = 8) {
    let size = 16;
    while (size < 2 * expectedPairs) size *= 2;
    this.lefts = new Int32Array(size);
    this.rights = new Int32Array(size);
    this.values = new Int32Array(size);
    this.mask = size - 1;
  }

  get size(): number { return this.count; }

  private static slot(a: number, b: number): number {
    return (Math.imul(a, 0x9e3779b1) ^ Math.imul(b, 0x85ebca6b)) >>> 0;
  }

  /** the value of pair (a, b), or -1 when it has none */
  get(a: number, b: number): number {
    for (let i = PairTable.slot(a, b) & this.mask; ; i = (i + 1) & this.mask) {
      const v = this.values[i]!;
      if (v === 0) return -1;
      if (this.lefts[i] === a && this.rights[i] === b) return v - 1;
    }
  }

  /** gives (a, b) the value `value` (>= 0) unless it has one (the first wins); whether it was set */
  add(a: number, b: number, value: number): boolean {
    if (2 * (this.count + 1) > this.values.length) this.grow();
    for (let i = PairTable.slot(a, b) & this.mask; ; i = (i + 1) & this.mask) {
      if (this.values[i] === 0) {
        this.lefts[i] = a;
        this.rights[i] = b;
        this.values[i] = value + 1;
        this.count++;
        return true;
      }
      if (this.lefts[i] === a && this.rights[i] === b) return false;
    }
  }

  private grow(): void {
    const { lefts, rights, values } = this;
    const size = values.length * 2;
    this.lefts = new Int32Array(size);
    this.rights = new Int32Array(size);
    this.values = new Int32Array(size);
    this.mask = size - 1;
    this.count = 0;
    for (let i = 0; i < values.length; i++) if (values[i] !== 0) this.add(lefts[i]!, rights[i]!, values[i]! - 1);
  }
}
