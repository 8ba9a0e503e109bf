/**
 * Paged storage for the K/V rows of any number of sequences (vLLM-style blocks). Per layer one
 * array of `blocks x blockSize` rows of nKvHeads * headDim elements — f32, or encoded as
 * `types` says (f16, q8_0, q4_0: kernels' kv-encoding) — allocated where the backend's attention
 * reads it in place. A row is named by its index in that array: row r of layer l is
 * keys[l][r * rowSize ...] — or, where the backend's attention reads them so (`planar`), the
 * array is one plane per KV head and head h of row r is the headDim elements at head row
 * h * (blocks x blockSize) + r, so that a head's rows are one stream (decode at depth read a
 * third of every row otherwise). Blocks are the unit of allocation and sharing: each sequence holds
 * one reference to every block its rows sit in, and a block returns to the free list when its
 * last reference is dropped.
 *
 * Sharing needs no copy-on-write of rows: a K/V row never changes once written, so the only
 * thing two sequences sharing a block could fight over is its free tail. `filled` marks how far
 * a block has been handed out; a sequence extends in place only when its last row is the last
 * handed out (nobody else took the next slot), and otherwise starts a fresh block. A forked
 * sequence therefore reads its parent's rows where they are, the prompt's partially filled last
 * block included, and the pool copies no rows at all.
 *
 * Prefix caching (vLLM's automatic prefix caching): a block whose rows are all written and that
 * holds positions [i * blockSize, (i + 1) * blockSize) of its sequence can be registered under a
 * key naming its tokens and all tokens before them (the id of the block registered before it,
 * plus its own tokens: exact, no hash collisions). A registered block whose last reference is
 * dropped keeps its rows and waits, least recently released first, until a sequence whose tokens
 * start the same way takes it up again (`lookup`, `revive`) or `take` needs room and evicts it.
 * Registration ids are never reused, so a key built on an evicted block matches nothing.
 */
import { F32_CACHE, headRowIndex, hostMemory, kvCacheEncoding, kvRowFloats, type Backend, type DeviceArray, type KVCacheEncoding, type KVCacheTypes } from "../kernels/index.js";
import { formatBytes } from "../units/index.js";

export const DEFAULT_BLOCK_SIZE = 16;
/** the most bytes of K and V a pool may hold by default, all layers together */
const MAX_BYTES = 8 * 2 ** 30;

/** what the pool's refusal of one block more than its limit proposes, in the library's words (a server words it in its own) */
export const KV_POOL_FULL_REMEDY = "use fewer sequences or beams, or a smaller contextSize";

/** what the pool's allocation refusal proposes, in the library's option names (a caller words it in its own: refusalInTerms' kvAllocation) */
export const KV_ALLOCATION_REMEDY = "lower contextSize (--ctx-size), kvCacheBytes or maxSequences, or store the cache smaller (cacheTypeK / cacheTypeV f16 or q8_0)";

/**
 * Where a pool's rows live and how rows get there: the backend's memory (so attention reads
 * them in place) and its row copies. The default is host memory (a pool of plain arrays).
 */
export type KVStorage = Pick<Backend, "allocActivations" | "scatterRows" | "copy2d" | "kvHeadPlanes" | "clear" | "maxBufferBytes" | "view" | "read" | "readParts" | "write">;

/** the sizes K/V storage depends on */
export interface KVShape {
  readonly blockCount: number;
  readonly headCountKv: number;
  readonly headDim: number;
}

/** bytes of K and V one token takes, all layers together: a K row and a V row of headCountKv x headDim per layer, stored as `types` (default f32) */
export function kvBytesPerToken(shape: KVShape, types: KVCacheTypes = F32_CACHE): number {
  const width = shape.headCountKv * shape.headDim;
  return shape.blockCount * (kvRowFloats(types.k, width) + kvRowFloats(types.v, width)) * 4;
}

/**
 * bytes one token takes in one layer's K or V array, the larger of the two: a pool of n tokens
 * allocates per layer one K array and one V array of n times this (at most), each one buffer
 */
export function kvArrayBytesPerToken(shape: KVShape, types: KVCacheTypes = F32_CACHE): number {
  const width = shape.headCountKv * shape.headDim;
  return Math.max(kvRowFloats(types.k, width), kvRowFloats(types.v, width)) * 4;
}

/** blocks of `blockSize` positions whose one layer's K or V array fits in one buffer of `maxBufferBytes` (Infinity without a cap) */
export function kvBlocksPerBuffer(shape: KVShape, types: KVCacheTypes | undefined, maxBufferBytes: number | undefined, blockSize = DEFAULT_BLOCK_SIZE): number {
  if (maxBufferBytes === undefined) return Infinity;
  return Math.floor(maxBufferBytes / (blockSize * kvArrayBytesPerToken(shape, types)));
}

/** bytes of K and V a sequence of `contextSize` positions holds at most: whole blocks of DEFAULT_BLOCK_SIZE positions */
export function kvBytesForContext(shape: KVShape, contextSize: number, types: KVCacheTypes = F32_CACHE): number {
  return Math.ceil(contextSize / DEFAULT_BLOCK_SIZE) * DEFAULT_BLOCK_SIZE * kvBytesPerToken(shape, types);
}

export interface KVPoolStats {
  /** blocks the pool has room for */
  readonly capacityBlocks: number;
  /** blocks referenced by at least one sequence */
  readonly blocksInUse: number;
  /** the most blocks in use at once */
  readonly peakBlocksInUse: number;
  /** rows handed out to sequences */
  readonly rowsAssigned: number;
  /** rows written (layer 0 counted; every layer writes the same rows): the only way K/V gets into the pool */
  readonly rowsWritten: number;
  /** times the storage was reallocated to hold more blocks */
  readonly grows: number;
  /** rows copied when a sequence forked mid-block with forkCopy */
  readonly rowsCopied: number;
  /** blocks holding registered prefixes that no sequence references (reusable, evicted when room is needed) */
  readonly cachedBlocks: number;
  /** blocks taken up again by a sequence through a prefix lookup */
  readonly prefixHits: number;
  /** registered blocks evicted to make room */
  readonly evictions: number;
}

/** the registration of a cached prefix block: `id` names it in the keys of the blocks after it */
interface Registration {
  readonly key: string;
  readonly id: number;
}

export class KVBlockPool {
  /** per layer: blocks x blockSize rows of K (values: of V) */
  readonly keys: DeviceArray[] = [];
  readonly values: DeviceArray[] = [];
  /** elements of one K (or V) row: every KV head of a position, as the model writes it */
  readonly rowSize: number;
  /** floats one stored K row occupies (rowSize for f32; less for an encoded cache) */
  readonly keyRowFloats: number;
  readonly valueRowFloats: number;
  /**
   * how rows are written and read: the types, the rotation block formats get (kernels'
   * kv-encoding), and, where the storage's attention reads them so, the planes per KV head
   * (headPlane: the pool's rows, so it changes when the pool grows)
   */
  encoding: KVCacheEncoding;
  /** whether each layer's arrays hold one plane per KV head (row r's head h at head row h * rows + r) */
  readonly planar: boolean;
  private readonly nKvHeads: number;
  private readonly headDim: number;
  private readonly refs: number[] = [];
  /** slots of each block handed out (rows [0, filled) hold some sequence's positions) */
  private readonly filled: number[] = [];
  /** free block ids, lowest on top, so a lone sequence gets rows 0, 1, 2, ... (row = position) */
  private free: number[] = [];
  private inUse = 0;
  private peak = 0;
  private assigned = 0;
  private grows = 0;
  /** blocks the K and V arrays hold (the ids below it); refs.length or fewer */
  private stored = 0;
  /** updated by KVCache.store */
  rowsWritten = 0;
  /** rows copied by KVCache.forkCopy (a partial block's rows, once per fork) */
  rowsCopied = 0;
  /** key -> the block registered under it */
  private readonly byKey = new Map<string, number>();
  private readonly registrations = new Map<number, Registration>();
  /** registered blocks nobody references, least recently released first (Map keeps insertion order) */
  private readonly idle = new Map<number, true>();
  private nextRegistration = 1;
  private hits = 0;
  private evictions = 0;

  constructor(
    readonly nLayers: number,
    nKvHeads: number,
    headDim: number,
    initialBlocks: number,
    /** the backend whose memory holds the rows */
    readonly storage: KVStorage = hostMemory(),
    readonly blockSize: number = DEFAULT_BLOCK_SIZE,
    /** the most bytes of K and V the pool may grow to, all layers together (limitBytes lowers it) */
    private limit: number = MAX_BYTES,
    /** how K and V rows are stored (the backend must take them: Backend.kvCacheTypes) */
    readonly types: KVCacheTypes = F32_CACHE,
    /**
     * blocks the K and V arrays hold at first (default: all of initialBlocks). Fewer makes the
     * pool's size a promise kept lazily: the arrays grow (doubling) when a block past them is
     * first handed out, so an engine's pool of maxSequences contexts costs what its requests use
     */
    storedBlocks: number = initialBlocks,
  ) {
    if (!Number.isInteger(blockSize) || blockSize < 1) throw new RangeError(`KV block size must be a positive integer, got ${blockSize}`);
    if (!Number.isInteger(initialBlocks) || initialBlocks < 1) throw new RangeError(`KV block pool needs at least one block, got ${initialBlocks}`);
    this.rowSize = nKvHeads * headDim;
    this.nKvHeads = nKvHeads;
    this.headDim = headDim;
    this.encoding = kvCacheEncoding(types, headDim);
    // one plane per KV head: a head's rows are one stream for attention (decode at depth read a
    // third of every row of three heads at ~0.7x the rate: docs/kernels.md)
    this.planar = nKvHeads > 1 && storage.kvHeadPlanes?.(this.encoding, headDim) === true;
    this.keyRowFloats = kvRowFloats(types.k, this.rowSize);
    this.valueRowFloats = kvRowFloats(types.v, this.rowSize);
    for (let l = 0; l < nLayers; l++) {
      this.keys.push(this.storage.allocActivations(0));
      this.values.push(this.storage.allocActivations(0));
    }
    if (initialBlocks > this.maxBlocks) throw new RangeError(`KV block pool: ${initialBlocks} blocks need ${formatBytes(this.bytesFor(initialBlocks))}, over the ${formatBytes(limit)} limit`);
    this.resize(initialBlocks);
    this.store(Math.min(initialBlocks, Math.max(1, Math.floor(storedBlocks))));
  }

  get blockCount(): number {
    return this.refs.length;
  }

  get byteLength(): number {
    return this.bytesFor(this.refs.length);
  }

  /** bytes the K and V arrays hold now (byteLength or less: see storedBlocks) */
  get storedBytes(): number {
    return this.bytesFor(this.stored);
  }

  get stats(): KVPoolStats {
    return {
      capacityBlocks: this.refs.length, blocksInUse: this.inUse, peakBlocksInUse: this.peak, rowsAssigned: this.assigned, rowsWritten: this.rowsWritten, grows: this.grows, rowsCopied: this.rowsCopied,
      cachedBlocks: this.idle.size, prefixHits: this.hits, evictions: this.evictions,
    };
  }

  /**
   * Zeros every layer's K and V, backing their memory now where the backend can (Backend.clear):
   * for a pool sized to one sequence's context before its prompt, so that the prompt's KV writes
   * do not pay the pages' first touch. Only while no block is in use.
   */
  clear(): void {
    if (this.inUse > 0) throw new Error(`KV block pool: clear() with ${this.inUse} blocks in use`);
    for (let l = 0; l < this.nLayers; l++) {
      this.storage.clear?.(this.keys[l]!);
      this.storage.clear?.(this.values[l]!);
    }
  }

  /** blocks `take` can hand out without growing: free ones and idle cached prefixes */
  get availableBlocks(): number {
    return this.free.length + this.idle.size;
  }

  /** blocks `take` can hand out within the memory limit: free ones, idle cached prefixes and the growth the limit leaves */
  get roomBlocks(): number {
    return this.availableBlocks + Math.max(0, this.maxBlocks - this.refs.length);
  }

  /** the most bytes of K and V the pool may grow to */
  get maxBytes(): number {
    return this.limit;
  }

  /**
   * Lowers the memory limit to `bytes`, or to what the pool holds now where that is more (it never
   * shrinks): a pool made for one sequence that then serves many under a budget (an engine's
   * draft-model pool, which doubling would otherwise grow up to 2x past the budget that admits
   * its caches, and keep).
   */
  limitBytes(bytes: number): void {
    if (!(bytes > 0)) throw new RangeError(`KV block pool: limitBytes expects a positive number of bytes, got ${bytes}`);
    this.limit = Math.max(Math.min(this.limit, bytes), this.byteLength);
  }

  /** the most blocks whose K and V fit in the pool's memory limit */
  get maxBlocks(): number {
    return Math.floor(this.maxBytes / this.bytesFor(1));
  }

  /**
   * Grows the storage to `blocks` blocks now (capped at the memory limit) when it holds fewer:
   * a caller that knows how many sequences will share the pool avoids regrowing it mid-way.
   */
  reserve(blocks: number): void {
    const n = Math.min(Math.ceil(blocks), this.maxBlocks);
    if (n > this.refs.length) {
      this.resize(n);
      this.grows++;
    }
    if (n > this.stored) this.store(n);
  }

  /** a fresh block holding one reference; evicts the least recently used cached prefix, or grows the storage (doubling), when none is free */
  take(): number {
    if (this.free.length === 0 && this.idle.size > 0) this.evictOldest();
    if (this.free.length === 0) {
      const have = this.refs.length;
      if (have >= this.maxBlocks) {
        throw new Error(`KV cache pool is full: ${have} blocks of ${this.blockSize} positions (${formatBytes(this.byteLength)}) are in use and the limit is ${formatBytes(this.maxBytes)}; ${KV_POOL_FULL_REMEDY}`);
      }
      this.resize(Math.min(this.maxBlocks, 2 * have));
      this.grows++;
    }
    const b = this.free.pop()!;
    // ids are handed out lowest first, so the arrays need cover only the most ever in use at once
    if (b >= this.stored) this.store(this.storedAfter(b));
    this.refs[b] = 1;
    this.filled[b] = 0;
    this.peak = Math.max(this.peak, ++this.inUse);
    return b;
  }

  retain(block: number): void {
    if (!(this.refs[block]! > 0)) throw new Error(`KV block ${block} is not in use`);
    this.refs[block]!++;
  }

  release(block: number): void {
    if (!(this.refs[block]! > 0)) throw new Error(`KV block ${block} is not in use`);
    if (--this.refs[block]! === 0) {
      this.inUse--;
      if (this.registrations.has(block)) this.idle.set(block, true);
      else this.free.push(block);
    }
  }

  /** the key of the block after the one registered as `previous` (0: the first block of a sequence) holding `tokens` */
  static prefixKey(previous: number, tokens: readonly number[]): string {
    return `${previous}:${tokens.join(",")}`;
  }

  /**
   * Registers a block (in use, every row written) under `key` and returns its registration id;
   * when another block already holds that key, that block's id is returned and `block` stays
   * unregistered (the same rows are cached once).
   */
  register(block: number, key: string): number {
    if (!(this.refs[block]! > 0)) throw new Error(`KV block ${block} is not in use`);
    const holder = this.byKey.get(key);
    if (holder !== undefined) return this.registrations.get(holder)!.id;
    const known = this.registrations.get(block);
    if (known) return known.id;
    const id = this.nextRegistration++;
    this.byKey.set(key, block);
    this.registrations.set(block, { key, id });
    return id;
  }

  /** the block registered under `key` and its id, if any (in use or idle) */
  lookup(key: string): { block: number; id: number } | undefined {
    const block = this.byKey.get(key);
    return block === undefined ? undefined : { block, id: this.registrations.get(block)!.id };
  }

  /**
   * One more reference to a block in use or cached (revive without counting a prefix hit): held,
   * its rows can be neither evicted nor handed out again until release (a slot's save reads them
   * a few blocks at a time)
   */
  hold(block: number): void {
    if (!(this.refs[block]! > 0) && !this.registrations.has(block)) throw new Error(`KV block ${block} is neither in use nor a cached prefix`);
    this.reference(block);
  }

  /** one more reference to a registered block, taking it out of the idle list when nobody held it */
  revive(block: number): void {
    if (!this.registrations.has(block)) throw new Error(`KV block ${block} holds no cached prefix`);
    this.reference(block);
    this.hits++;
  }

  /** one more reference to a registered block (idle or in use) */
  private reference(block: number): void {
    if (this.refs[block] === 0) {
      this.idle.delete(block);
      this.peak = Math.max(this.peak, ++this.inUse);
    }
    this.refs[block]!++;
  }

  /** whether a registered block is idle (reviving it uses up one available block) */
  isIdle(block: number): boolean {
    return this.idle.has(block);
  }

  private evictOldest(): void {
    this.forget(this.idle.keys().next().value!);
    this.evictions++;
  }

  /** takes an idle cached prefix block out of the prefix cache, free for any use (a slot erased); false where it is in use or holds no cached prefix */
  forget(block: number): boolean {
    if (!this.idle.has(block)) return false;
    this.idle.delete(block);
    this.byKey.delete(this.registrations.get(block)!.key);
    this.registrations.delete(block);
    this.free.push(block);
    return true;
  }

  /** floats one block's rows hold, every layer's K and V as stored (readBlock's length, writeBlock's) */
  get blockFloats(): number {
    return this.nLayers * this.blockSize * (this.keyRowFloats + this.valueRowFloats);
  }

  /**
   * A copy of a block's rows as the arrays store them (encoded as `types`, one plane per KV head
   * where `planar`): each layer's K rows, then its V rows. The reads are issued now, so what a
   * later step writes or evicts does not change what they return; the arrays are held until then
   * (a backend recycles one whose owner is collected, views or not).
   */
  readBlock(block: number): Promise<Float32Array> {
    const parts = this.blockParts(block);
    const views = parts.map(([a, offset, n]) => this.storage.view(a, offset, n));
    // (one read of every part where the backend can: on WebGPU a read each was a staging buffer and a map each)
    // (the views keep the arrays they name alive until the read is done)
    if (this.storage.readParts) return this.storage.readParts(views);
    const reads = views.map((v) => this.storage.read(v));
    return Promise.all(reads).then((got) => {
      const out = new Float32Array(this.blockFloats);
      let at = 0;
      // (a Float32Array set from another keeps every bit: encoded rows are not numbers)
      // (walking `parts` here keeps the arrays it names alive until their reads are done)
      parts.forEach(([, , n], i) => {
        out.set(got[i]!, at);
        at += n;
      });
      return out;
    });
  }

  /**
   * Puts rows read by readBlock (from a pool of the same layout) into the prefix cache as the
   * block registered under `key`, and returns the block and its registration id; where a block
   * holds that key already, its rows are the same and stay. Either way the block is referenced
   * once more, for the caller to release once the blocks keyed after it are in: held, it cannot
   * be the idle block a later take() evicts, which would leave the keys after it naming nothing.
   * Needs room for a block (roomBlocks).
   */
  restoreBlock(key: string, rows: Float32Array): { block: number; id: number } {
    if (rows.length !== this.blockFloats) throw new RangeError(`KV block pool: a block's rows are ${this.blockFloats} floats, got ${rows.length}`);
    const held = this.byKey.get(key);
    if (held !== undefined) {
      this.reference(held);
      return { block: held, id: this.registrations.get(held)!.id };
    }
    const b = this.take();
    let at = 0;
    for (const [a, offset, n] of this.blockParts(b)) {
      this.storage.write(a, rows.subarray(at, at + n), offset);
      at += n;
    }
    this.filled[b] = this.blockSize;
    this.rowsWritten += this.blockSize;
    return { block: b, id: this.register(b, key) };
  }

  /** where a block's rows are: [array, first float, floats] per layer's K and V (per KV head's plane where planar) */
  private blockParts(block: number): [DeviceArray, number, number][] {
    if (!(block >= 0 && block < this.stored)) throw new RangeError(`KV block ${block} is not stored`);
    const heads = this.planar ? this.nKvHeads : 1, plane = this.stored * this.blockSize, first = block * this.blockSize;
    const parts: [DeviceArray, number, number][] = [];
    for (let l = 0; l < this.nLayers; l++) {
      for (const [a, rowFloats] of [[this.keys[l]!, this.keyRowFloats], [this.values[l]!, this.valueRowFloats]] as const) {
        const fs = rowFloats / heads;
        for (let h = 0; h < heads; h++) parts.push([a, (h * plane + first) * fs, this.blockSize * fs]);
      }
    }
    return parts;
  }

  references(block: number): number {
    return this.refs[block] ?? 0;
  }

  /** hands out the first slot of `block` (just taken) */
  firstRow(block: number): number {
    this.filled[block] = 1;
    this.assigned++;
    return block * this.blockSize;
  }

  /** the row after `row` when it is free in the same block (hands it out), else -1 */
  claimAfter(row: number): number {
    const b = Math.floor(row / this.blockSize), slot = row - b * this.blockSize;
    if (slot + 1 >= this.blockSize || this.filled[b] !== slot + 1) return -1;
    this.filled[b] = slot + 2;
    this.assigned++;
    return row + 1;
  }

  /**
   * Slots after `row` in its block that claimAfter would hand out to the block's sole holder; none
   * where the block is shared (a fork sharing it may claim them first)
   */
  slotsAfter(row: number): number {
    const b = Math.floor(row / this.blockSize), slot = row - b * this.blockSize;
    return this.refs[b] === 1 && this.filled[b] === slot + 1 ? this.blockSize - slot - 1 : 0;
  }

  /**
   * Gives back the slots after `row` in its block; only the sole holder of a block may (a
   * sharer may be reading them). Lets a truncated sequence extend in place again.
   */
  unclaimAfter(row: number): void {
    const b = Math.floor(row / this.blockSize);
    if (this.refs[b] === 1) this.filled[b] = row - b * this.blockSize + 1;
  }

  private bytesFor(blocks: number): number {
    return this.nLayers * blocks * this.blockSize * (this.keyRowFloats + this.valueRowFloats) * 4;
  }

  /**
   * Writes the K and V rows of n positions of one layer (n rows of every KV head at k and v) to
   * pool rows `rows`: as they are, or each head's part into its plane
   */
  writeRows(layer: number, rows: Int32Array, k: DeviceArray, v: DeviceArray, n: number): void {
    if (!this.planar) {
      this.storage.scatterRows(this.keys[layer]!, rows, k, this.rowSize, n, this.encoding.k);
      this.storage.scatterRows(this.values[layer]!, rows, v, this.rowSize, n, this.encoding.v);
      return;
    }
    // the source's n rows of all heads are n * nKvHeads head rows, token after token
    const heads = this.nKvHeads, headRows = headRowIndex(rows, n, heads, this.stored * this.blockSize);
    this.storage.scatterRows(this.keys[layer]!, headRows, k, this.headDim, n * heads, this.encoding.k);
    this.storage.scatterRows(this.values[layer]!, headRows, v, this.headDim, n * heads, this.encoding.v);
  }

  /** copies n consecutive rows of every layer from row `from` to row `to` (a fork's partial block) */
  copyRows(from: number, to: number, n: number): void {
    const plane = this.stored * this.blockSize;
    for (let l = 0; l < this.nLayers; l++) {
      this.copyHeadRows(this.keys[l]!, plane, to, this.keys[l]!, plane, from, n, this.keyRowFloats);
      this.copyHeadRows(this.values[l]!, plane, to, this.values[l]!, plane, from, n, this.valueRowFloats);
    }
    this.rowsCopied += n;
  }

  /**
   * n consecutive rows (rowFloats each) from row `from` of src to row `to` of dst: in one piece,
   * or plane by plane where the arrays are planes per KV head (of srcPlane and dstPlane rows)
   */
  private copyHeadRows(dst: DeviceArray, dstPlane: number, to: number, src: DeviceArray, srcPlane: number, from: number, n: number, rowFloats: number): void {
    const heads = this.planar ? this.nKvHeads : 1, fs = rowFloats / heads;
    for (let h = 0; h < heads; h++) this.storage.copy2d(dst, (h * dstPlane + to) * fs, n * fs, src, (h * srcPlane + from) * fs, n * fs, 1, n * fs);
  }

  /**
   * One layer's K or V array of `floats` for a pool of `blocks` blocks. The backend's refusal
   * (a GPU adapter's largest storage binding: one layer's K of a 2^20-token context is 512 MiB
   * of f32 at 128 floats a row) named neither the KV cache nor what to lower: said here.
   */
  private alloc(floats: number, blocks: number): DeviceArray {
    try {
      return this.storage.allocActivations(floats);
    } catch (e) {
      const positions = blocks * this.blockSize;
      throw new Error(
        `KV cache: ${positions} positions (${blocks} blocks of ${this.blockSize}) need ${formatBytes(floats * 4)} in one layer's K or V array (${formatBytes(this.bytesFor(blocks))} for all layers, cache types ${this.types.k}/${this.types.v}), which the backend cannot allocate: ${(e as Error).message}; ${KV_ALLOCATION_REMEDY}`,
        { cause: e },
      );
    }
  }

  /** grows the pool to `blocks` blocks (ids), and its arrays with it where they held all of it */
  private resize(blocks: number): void {
    const have = this.refs.length;
    if (this.stored === have && have > 0) this.store(blocks);
    // the new ids go under the existing free ones (all lower), lowest on top
    const added: number[] = [];
    for (let b = have; b < blocks; b++) {
      this.refs.push(0);
      this.filled.push(0);
      added.push(b);
    }
    added.reverse();
    this.free = added.concat(this.free);
  }

  /**
   * How many blocks the arrays hold once block `b` needs room: twice as many while that stays a
   * sixteenth of the pool, then all of it at once. An outgrown array is not given back to the
   * system (a wasm memory never shrinks, and the wasm backend reuses a freed array only for one of
   * the same size), so doubling up to the whole pool would hold about twice its bytes; this way
   * the arrays left behind are at most an eighth of it.
   */
  private storedAfter(b: number): number {
    const all = this.refs.length, doubled = Math.max(b + 1, 2 * this.stored);
    return doubled <= all / 16 ? doubled : all;
  }

  /** reallocates every layer's arrays to `blocks` blocks, keeping the rows written so far (each plane moved to its new place) */
  private store(blocks: number): void {
    const have = this.stored;
    const rows = blocks * this.blockSize, oldRows = have * this.blockSize;
    for (let l = 0; l < this.nLayers; l++) {
      const k = this.alloc(rows * this.keyRowFloats, blocks), v = this.alloc(rows * this.valueRowFloats, blocks);
      if (oldRows > 0) {
        this.copyHeadRows(k, rows, 0, this.keys[l]!, oldRows, 0, oldRows, this.keyRowFloats);
        this.copyHeadRows(v, rows, 0, this.values[l]!, oldRows, 0, oldRows, this.valueRowFloats);
      }
      this.keys[l] = k;
      this.values[l] = v;
    }
    if (this.planar) this.encoding = { ...this.encoding, headPlane: rows };
    this.stored = blocks;
  }
}

