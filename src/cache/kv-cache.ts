import { F32_CACHE, type DeviceArray, type KVCacheEncoding, type KVCacheTypes } from "../kernels/index.js";
import { DEFAULT_BLOCK_SIZE, KVBlockPool, kvBytesForContext, type KVStorage } from "./block-pool.js";

/**
 * The KV cache of one sequence: its positions' rows in a paged block pool (block-pool.ts).
 * `rows[p]` is the pool row that holds position p — the one place row addresses come from:
 * models store through it and attention kernels read K/V through it, in position order, so
 * the arithmetic is the same wherever the rows lie. A lone sequence on a fresh pool gets rows
 * 0, 1, 2, ... (row = position, contiguous as before). `fork()` makes a sequence that shares
 * every row written so far, or those before a position (a prompt prefilled once for several
 * beams or completions): blocks are reference-counted and nothing is copied.
 */
export class KVCache {
  readonly pool: KVBlockPool;
  /** rows[p]: the pool row holding position p, for p < the positions reserved */
  readonly rows: Int32Array;
  /** blocks this sequence holds a reference to, in position order, and the first position in each */
  private readonly blocks: number[] = [];
  private readonly blockStarts: number[] = [];
  private len = 0;
  /** positions that have rows (>= length; ensureRoom reserves them before a pass writes them) */
  private reserved = 0;

  constructor(
    readonly nLayers: number,
    readonly nKvHeads: number,
    readonly headDim: number,
    /** the most positions this sequence may hold (the context size) */
    readonly capacity: number,
    /** where a new pool's rows live (the backend, so attention reads them in place; default host memory), or a pool to share */
    storage?: KVStorage | KVBlockPool,
    /** how a new pool stores K and V (a shared pool has its own) */
    types: KVCacheTypes = F32_CACHE,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`contextSize must be a positive integer, got ${capacity}`);
    if (storage instanceof KVBlockPool) this.pool = storage;
    else {
      const blocks = Math.ceil(capacity / DEFAULT_BLOCK_SIZE);
      const bytes = kvBytesForContext({ blockCount: nLayers, headCountKv: nKvHeads, headDim }, capacity, types);
      if (bytes > 8 * 2 ** 30) throw new Error(`KV cache for contextSize ${capacity} needs ${(bytes / 2 ** 30).toFixed(1)} GiB; choose a smaller contextSize`);
      // room for this sequence's whole context up front: a lone sequence never grows the pool; and
      // its memory backed now, as llama.cpp clears a new context's KV buffer (an engine's shared
      // pool, up to 2 GiB, is backed block by block as requests first use it instead)
      this.pool = new KVBlockPool(nLayers, nKvHeads, headDim, blocks, storage, DEFAULT_BLOCK_SIZE, undefined, types);
      this.pool.clear();
    }
    this.rows = new Int32Array(capacity);
  }

  /** per layer, K of every row of the pool (address position p through rows[p]) */
  get keys(): readonly DeviceArray[] {
    return this.pool.keys;
  }

  get values(): readonly DeviceArray[] {
    return this.pool.values;
  }

  get rowSize(): number {
    return this.pool.rowSize;
  }

  /** how K and V are stored */
  get types(): KVCacheTypes {
    return this.pool.types;
  }

  /** how rows are encoded (what attention needs to read them) */
  get encoding(): KVCacheEncoding {
    return this.pool.encoding;
  }

  /** bytes of the pool this sequence lives in (shared with its forks) */
  get byteLength(): number {
    return this.pool.byteLength;
  }

  /** number of positions filled (the next token's position) */
  get length(): number {
    return this.len;
  }

  /** set by a forward pass once it has stored the rows ensureRoom reserved */
  set length(n: number) {
    if (!Number.isInteger(n) || n < 0 || n > this.reserved) throw new Error(`KV cache length ${n} is outside the ${this.reserved} positions that have rows (call ensureRoom first)`);
    this.len = n;
  }

  /** blocks this sequence references (shared ones included) */
  get blockCount(): number {
    return this.blocks.length;
  }

  /**
   * Throws before any work is done when `n` more tokens would not fit; otherwise gives
   * positions [length, length + n) their rows: the next free slot of the block holding the
   * last row when nobody has taken it, else the first slot of a fresh block.
   */
  ensureRoom(n: number): void {
    if (this.len + n > this.capacity) {
      throw new Error(`context is full: ${this.len} tokens cached + ${n} new > contextSize ${this.capacity}`);
    }
    const pool = this.pool;
    for (let p = this.reserved; p < this.len + n; p++) {
      let r = p > 0 ? pool.claimAfter(this.rows[p - 1]!) : -1;
      if (r < 0) {
        const b = pool.take();
        this.blocks.push(b);
        this.blockStarts.push(p);
        r = pool.firstRow(b);
      }
      this.rows[p] = r;
      this.reserved = p + 1;
    }
  }

  /**
   * ensureRoom(n) where the context and the pool's memory limit leave room for it (a pass over
   * those positions then takes nothing more); false, and nothing taken, where they do not: for a
   * sequence that can do without the rows (a draft model's, whose request then decodes without it)
   */
  tryReserve(n: number): boolean {
    if (this.len + n > this.capacity || this.blocksToExtend(n) > this.pool.roomBlocks) return false;
    this.ensureRoom(n);
    return true;
  }

  /**
   * Blocks ensureRoom(n) takes from the pool, at most: the free slots of its last block count only
   * where it holds that block alone (a fork sharing it may claim them first)
   */
  blocksToExtend(n: number): number {
    const positions = this.len + n - this.reserved;
    if (positions <= 0) return 0;
    const slots = this.reserved > 0 ? this.pool.slotsAfter(this.rows[this.reserved - 1]!) : 0;
    return Math.ceil(Math.max(0, positions - slots) / this.pool.blockSize);
  }

  /** writes rows for positions [pos, pos + nTokens) of layer `layer` (reserved by ensureRoom) */
  store(layer: number, pos: number, k: DeviceArray, v: DeviceArray, nTokens: number): void {
    if (pos < 0 || pos + nTokens > this.reserved) throw new Error(`KV cache: positions [${pos}, ${pos + nTokens}) have no rows (${this.reserved} reserved)`);
    const pool = this.pool, rows = this.rows.subarray(pos, pos + nTokens);
    if (layer === 0) pool.rowsWritten += nTokens;
    pool.writeRows(layer, rows, k, v, nTokens);
  }

  /** forget everything from position `pos` on (e.g. to reuse a shared prompt prefix); blocks no longer used go back to the pool */
  truncate(pos: number): void {
    if (!Number.isInteger(pos) || pos < 0 || pos > this.len) throw new Error(`cannot truncate the KV cache to ${pos}: it holds ${this.len} positions`);
    while (this.blocks.length > 0 && this.blockStarts.at(-1)! >= pos) {
      this.pool.release(this.blocks.pop()!);
      this.blockStarts.pop();
    }
    if (pos > 0) this.pool.unclaimAfter(this.rows[pos - 1]!);
    this.len = this.reserved = pos;
  }

  /**
   * A new sequence holding this one's positions up to `at` (all of them by default): it shares
   * their rows (one more reference to each block, nothing copied) and from then on both extend
   * independently.
   */
  fork(at = this.len): KVCache {
    const c = new KVCache(this.nLayers, this.nKvHeads, this.headDim, this.capacity, this.pool);
    c.share(this, at);
    return c;
  }

  /**
   * Makes this empty sequence a fork of `parent` at position `at` (see fork): it shares the
   * parent's rows of positions [0, at), whatever the parent holds past them. A preempted request's
   * choices or beams share their recomputed common prefix again (the prompt, and the tokens beams
   * had in common), as they shared it before. Forked mid-block, where the parent has taken the
   * block's later slots, the fork's next rows go to a block of its own (KVBlockPool.claimAfter).
   * `reserved`: positions up to `at` may be rows the parent has reserved (ensureRoom) but not
   * written yet, which a pass writes before this sequence's rows read them: the parent's segment
   * comes first in the same pass, and every layer stores a segment's K/V before the next
   * segment's attention (models/llama.ts, gpt2.ts)
   */
  share(parent: KVCache, at = parent.len, reserved = false): void {
    if (this.len !== 0 || this.blocks.length !== 0) throw new Error("share: the sequence is not empty");
    if (parent.pool !== this.pool) throw new Error("share: the sequences live in different pools");
    const end = reserved ? parent.reserved : parent.len;
    if (!Number.isInteger(at) || at < 0 || at > end) throw new Error(`share: position ${at} is outside the parent's ${end} positions`);
    this.rows.set(parent.rows.subarray(0, at));
    for (let i = 0; i < parent.blocks.length && parent.blockStarts[i]! < at; i++) {
      this.pool.retain(parent.blocks[i]!);
      this.blocks.push(parent.blocks[i]!);
      this.blockStarts.push(parent.blockStarts[i]!);
    }
    this.len = this.reserved = at;
  }

  /**
   * The block that holds exactly this sequence's positions [index * blockSize, (index + 1) *
   * blockSize), all written, or undefined: a fork shares its parent's last block only up to the
   * fork, and its own blocks then start mid-way, so such blocks hold other positions too.
   */
  alignedBlock(index: number): number | undefined {
    const bs = this.pool.blockSize;
    const start = index * bs, end = start + bs;
    if (this.blockStarts[index] !== start || this.len < end) return undefined;
    return (this.blockStarts[index + 1] ?? end) === end ? this.blocks[index] : undefined;
  }

  /**
   * Starts an empty sequence on cached prefix blocks (block i holding positions [i * blockSize,
   * (i + 1) * blockSize), all rows written): it references them (nothing is computed or copied)
   * and its length becomes their positions.
   */
  adoptPrefix(blocks: readonly number[]): void {
    if (this.len !== 0 || this.blocks.length !== 0) throw new Error("adoptPrefix: the sequence is not empty");
    const bs = this.pool.blockSize;
    if (blocks.length * bs > this.capacity) throw new Error(`adoptPrefix: ${blocks.length} blocks of ${bs} positions exceed contextSize ${this.capacity}`);
    blocks.forEach((b, i) => {
      this.pool.revive(b);
      this.blocks.push(b);
      this.blockStarts.push(i * bs);
      for (let s = 0; s < bs; s++) this.rows[i * bs + s] = b * bs + s;
    });
    this.len = this.reserved = blocks.length * bs;
  }

  /**
   * A fork whose blocks all start where this sequence's do: it shares every block but a
   * partially filled last one, whose rows it copies into a fresh block of its own (at most
   * blockSize - 1 rows per layer). Unlike fork() the two never share a block that either still
   * extends, so a tree of such forks holds at most one partial block per sequence — what lets
   * a fixed pool bound a beam search's blocks in advance.
   */
  forkCopy(): KVCache {
    const c = new KVCache(this.nLayers, this.nKvHeads, this.headDim, this.capacity, this.pool);
    c.rows.set(this.rows.subarray(0, this.len));
    const last = this.blocks.length - 1;
    const partial = last >= 0 && this.blockStarts[last]! < this.len && this.len - this.blockStarts[last]! < this.pool.blockSize;
    for (let i = 0; i < this.blocks.length && this.blockStarts[i]! < this.len; i++) {
      if (partial && i === last) break;
      this.pool.retain(this.blocks[i]!);
      c.blocks.push(this.blocks[i]!);
      c.blockStarts.push(this.blockStarts[i]!);
    }
    if (partial) {
      const start = this.blockStarts[last]!, n = this.len - start;
      const b = this.pool.take();
      const first = this.pool.firstRow(b);
      for (let s = 1; s < n; s++) this.pool.claimAfter(first + s - 1);
      this.pool.copyRows(this.rows[start]!, first, n);
      c.blocks.push(b);
      c.blockStarts.push(start);
      for (let s = 0; s < n; s++) c.rows[start + s] = first + s;
    }
    c.len = c.reserved = this.len;
    return c;
  }

  /** the pool blocks this sequence references, in position order */
  get blockIds(): readonly number[] {
    return this.blocks;
  }

  /** drops every position and its block references (the cache stays usable, empty) */
  free(): void {
    this.truncate(0);
  }
}
