import assert from "node:assert/strict";
import { before, test } from "node:test";
import { KVBlockPool } from "../src/cache/block-pool.js";
import { KVCache } from "../src/cache/kv-cache.js";
import { beamSearch } from "../src/generation/beam.js";
import { loadModel } from "../src/index.js";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { createWasmBackend } from "../src/kernels/wasm/index.js";
import { device, filled, hostArray, onHost, type HostArray } from "./helpers/host-array.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";
// @ts-expect-error: plain JS build script
import { ensureWasm } from "../scripts/build-wasm.mjs";

before(() => ensureWasm());

const MODEL = "models/stories260K.gguf";
const BS = 16;

/** K and V rows whose every float names its position, layer and kind, so a misplaced row shows */
function rowsFor(pos: number, n: number, rowSize: number, layer: number, kind: 0 | 1): HostArray {
  return device(Float32Array.from({ length: n * rowSize }, (_, i) => (pos + Math.floor(i / rowSize)) * 1000 + layer * 10 + kind + (i % rowSize) / 100));
}

/** appends n positions to a cache the way a forward pass does: reserve, store every layer, advance */
function append(c: KVCache, n: number): void {
  c.ensureRoom(n);
  for (let l = 0; l < c.nLayers; l++) c.store(l, c.length, rowsFor(c.length, n, c.rowSize, l, 0), rowsFor(c.length, n, c.rowSize, l, 1), n);
  c.length += n;
}

/** every position of the cache reads back the row written for it (through the row index) */
function assertReadsBack(c: KVCache, what: string): void {
  for (let l = 0; l < c.nLayers; l++) {
    for (let p = 0; p < c.length; p++) {
      const r = c.rows[p]! * c.rowSize;
      assert.deepEqual(onHost(c.keys[l]!).subarray(r, r + c.rowSize), rowsFor(p, 1, c.rowSize, l, 0), `${what}: K of position ${p}, layer ${l}`);
      assert.deepEqual(onHost(c.values[l]!).subarray(r, r + c.rowSize), rowsFor(p, 1, c.rowSize, l, 1), `${what}: V of position ${p}, layer ${l}`);
    }
  }
}

test("a lone sequence gets rows 0, 1, 2, ... (contiguous, as before paging) and never grows its pool", () => {
  const c = new KVCache(2, 2, 4, 100);
  append(c, 37);
  for (let i = 0; i < 20; i++) append(c, 1);
  assert.deepEqual(Array.from(c.rows.subarray(0, c.length)), Array.from({ length: 57 }, (_, i) => i));
  assert.equal(c.pool.blockCount, Math.ceil(100 / BS));
  assert.equal(c.pool.stats.grows, 0);
  assertReadsBack(c, "lone");
});

test("fork shares every row (blocks referenced twice, nothing written); each side then appends into its own rows", () => {
  const parent = new KVCache(3, 1, 8, 64);
  append(parent, 40); // 2.5 blocks: the third is partially filled
  const before = parent.pool.stats;
  const child = parent.fork();
  assert.equal(child.length, 40);
  assert.deepEqual(child.rows.subarray(0, 40), parent.rows.subarray(0, 40));
  for (let b = 0; b < 3; b++) assert.equal(parent.pool.references(b), 2, `block ${b}`);
  assert.equal(parent.pool.stats.blocksInUse, before.blocksInUse);
  assert.equal(parent.pool.stats.rowsWritten, 40);

  // the parent extends in place into the shared partial block; the child cannot take the
  // same slot and starts a fresh block; the 40 shared rows stay where they are
  append(parent, 1);
  append(child, 1);
  assert.equal(parent.rows[40], 40);
  assert.equal(child.rows[40], 3 * BS);
  assert.deepEqual(child.rows.subarray(0, 40), parent.rows.subarray(0, 40));
  // different tokens: overwrite position 40 of the child with its own values
  for (let l = 0; l < 3; l++) child.store(l, 40, hostArray(8).fill(-l - 1), hostArray(8).fill(l + 1), 1);
  assert.equal(onHost(parent.keys[0]!)[40 * 8], 40000, "the parent's row 40 is untouched by the child's write");
  assert.equal(onHost(child.keys[0]!)[3 * BS * 8], -1);
  // one row per appended position, for either side: no row was copied
  assert.equal(parent.pool.stats.rowsWritten, 40 + 1 + 1 + 1);
  assert.equal(parent.pool.stats.rowsAssigned, 42);
  assertReadsBack(parent, "parent");
});

test("the child's later appends fill its fresh block in place; the grandchild of a fork shares both generations", () => {
  const a = new KVCache(1, 1, 4, 200);
  append(a, 20);
  const b = a.fork();
  append(a, 5);
  append(b, 5);
  const c = b.fork();
  append(b, 30);
  append(c, 3);
  for (const [s, name] of [[a, "a"], [b, "b"], [c, "c"]] as const) assertReadsBack(s, name);
  assert.deepEqual(c.rows.subarray(0, 25), b.rows.subarray(0, 25));
  assert.deepEqual(b.rows.subarray(0, 20), a.rows.subarray(0, 20));
  // b's 5 + 30 new positions run on in consecutive rows across its own blocks' slots
  assert.equal(b.rows[21]! - b.rows[20]!, 1);
  assert.equal(a.pool.stats.rowsWritten, 20 + 5 + 5 + 30 + 3);
});

test("blocksToExtend is the blocks ensureRoom takes for a sole holder, and at most one more where a fork shares the last block; share makes an emptied sequence a fork again", () => {
  const pool = new KVBlockPool(1, 1, 4, 32, undefined, BS);
  const a = new KVCache(1, 1, 4, 400, pool);
  const taken = (c: KVCache, n: number) => {
    const before = pool.stats.blocksInUse;
    append(c, n);
    return pool.stats.blocksInUse - before;
  };
  // a lone sequence: exact, across its partial last block's free slots and past them
  for (const n of [1, 20, 11, 1, 16, 33]) {
    const predicted = a.blocksToExtend(n);
    assert.equal(taken(a, n), predicted, `append ${n} at ${a.length - n}`);
  }
  assert.equal(a.length, 82);
  // a fork shares the partial last block (82 = 5 blocks + 2 rows): the first of the two to extend
  // claims its free slots, the other starts a fresh block; each is counted as starting one
  const b = a.fork();
  assert.equal(a.blocksToExtend(3), 1);
  assert.equal(b.blocksToExtend(3), 1);
  assert.equal(taken(a, 3), 0);
  assert.equal(taken(b, 3), 1);
  // (a still shares the block with b's prefix: its free slots stay uncounted; b's fresh block is its own)
  assert.equal(a.blocksToExtend(11), 1);
  assert.equal(b.blocksToExtend(13), 0);
  assert.equal(taken(b, 13), 0);
  // preempted: both emptied; a's rows recomputed, b shares them again as a fork of a
  b.free();
  a.free();
  assert.equal(pool.stats.blocksInUse, 0);
  append(a, 82);
  b.share(a);
  assert.equal(b.length, 82);
  assert.deepEqual(b.rows.subarray(0, 82), a.rows.subarray(0, 82));
  for (let i = 0; i < 6; i++) assert.equal(pool.references(a.blockIds[i]!), 2, `block ${i}`);
  assert.throws(() => b.share(a), /share: the sequence is not empty/);
  append(b, 2);
  assertReadsBack(b, "shared again");
  a.free();
  b.free();
  assert.equal(pool.stats.blocksInUse, 0);
});

test("fork and share at a position before the parent's end share only the rows before it: mid-block, the fork's next rows go to a block of its own; at a block's end, the parent's later blocks stay its own", () => {
  const pool = new KVBlockPool(1, 1, 4, 32, undefined, BS);
  const a = new KVCache(1, 1, 4, 400, pool);
  append(a, 53); // blocks of positions 0-15, 16-31, 32-47, 48-52 (partial)
  // at 50, mid-way through a's last block, whose later slots a has taken: the fork shares all four
  // blocks (its positions 48 and 49 are in the fourth) and writes position 50 on to a fresh block
  const b = a.fork(50);
  assert.equal(b.length, 50);
  assert.deepEqual(b.rows.subarray(0, 50), a.rows.subarray(0, 50));
  assert.deepEqual(b.blockIds, a.blockIds);
  for (let i = 0; i < 4; i++) assert.equal(pool.references(a.blockIds[i]!), 2, `block ${i}`);
  assert.equal(b.blocksToExtend(3), 1);
  append(b, 3);
  assert.equal(pool.stats.blocksInUse, 5);
  assert.equal(b.rows[50], 4 * BS, "the fork's own rows start a fresh block");
  assert.deepEqual(b.rows.subarray(0, 50), a.rows.subarray(0, 50), "the shared rows stay where they are");
  assertReadsBack(a, "parent");
  assertReadsBack(b, "fork at 50");
  // a fork of the fork at 51: its position 50 is b's own row, in b's block
  const c = new KVCache(1, 1, 4, 400, pool);
  c.share(b, 51);
  assert.deepEqual(c.rows.subarray(0, 51), b.rows.subarray(0, 51));
  append(c, 2);
  assertReadsBack(c, "fork of the fork at 51");
  // at 32, a block's end: the fork holds the first two blocks only
  const refs = a.blockIds.map((blk) => pool.references(blk));
  const d = a.fork(32);
  assert.deepEqual(d.blockIds, a.blockIds.slice(0, 2));
  assert.deepEqual(a.blockIds.map((blk) => pool.references(blk)), refs.map((r, i) => (i < 2 ? r + 1 : r)));
  // at 0: an empty fork holding nothing
  assert.equal(a.fork(0).blockCount, 0);
  // freed in any order, every block goes back with its last reference
  for (const s of [a, c, d, b]) s.free();
  assert.equal(pool.stats.blocksInUse, 0);
  assert.throws(() => a.fork(1), /share: position 1 is outside the parent's 0 positions/);
  append(a, 5);
  assert.throws(() => a.fork(6), /share: position 6 is outside the parent's 5 positions/);
  assert.throws(() => a.fork(2.5), /share: position 2.5 is outside the parent's 5 positions/);
});

test("free and truncate drop references; a block returns to the pool with its last reference", () => {
  const a = new KVCache(1, 2, 2, 128);
  const pool = a.pool;
  append(a, 40);
  const b = a.fork();
  append(b, 10); // b: 3 shared blocks + 1 own
  assert.equal(pool.stats.blocksInUse, 4);
  assert.equal(b.blockCount, 4);
  a.free();
  assert.equal(a.length, 0);
  assert.equal(pool.stats.blocksInUse, 4, "b still holds the shared blocks");
  for (let blk = 0; blk < 3; blk++) assert.equal(pool.references(blk), 1);
  assertReadsBack(b, "b after a is freed");
  b.truncate(33); // keeps blocks 0..2 (position 32 is in block 2), drops its own
  assert.equal(pool.stats.blocksInUse, 3);
  // now the sole holder of block 2, it extends in place again
  append(b, 1);
  assert.equal(b.rows[33], 33);
  b.free();
  assert.equal(pool.stats.blocksInUse, 0);
  // the cache is usable again, and a freed block is handed out again, lowest first
  append(b, 3);
  assert.deepEqual(Array.from(b.rows.subarray(0, 3)), [0, 1, 2]);
  assertReadsBack(b, "reused");
});

test("a shared pool grows (doubling) when forks need more blocks, keeping every row", () => {
  const a = new KVCache(2, 1, 4, 16); // one block
  append(a, 10);
  const forks = [a.fork(), a.fork(), a.fork()];
  forks.forEach((f) => append(f, 6));
  append(a, 6);
  assert.ok(a.pool.stats.grows >= 2, `grew ${a.pool.stats.grows} times`);
  assert.equal(a.pool.blockCount, 4);
  for (const s of [a, ...forks]) assertReadsBack(s, "after growth");
});

test("limitBytes stops a pool's growth at the new limit (never below what it holds): an engine's draft pool under kvCacheBytes", () => {
  const blockBytes = 1 * 2 * BS * 4 * 4;
  const a = new KVCache(1, 1, 4, 32); // two blocks, 8 GiB limit
  a.pool.limitBytes(blockBytes); // below what it holds: it keeps its two blocks and grows no more
  assert.equal(a.pool.maxBytes, 2 * blockBytes);
  const pool = new KVCache(1, 1, 4, 16).pool; // one block
  pool.limitBytes(5 * blockBytes);
  const seqs = [0, 1, 2].map(() => new KVCache(1, 1, 4, 100, pool));
  append(seqs[0]!, 17);
  append(seqs[1]!, 17); // 4 blocks
  append(seqs[2]!, 16); // the fifth: the pool grows to 5, where doubling would make 8
  assert.equal(pool.blockCount, 5);
  assert.throws(() => append(seqs[2]!, 1), /KV cache pool is full: 5 blocks/);
  for (const s of seqs) assertReadsBack(s, "after growth to the limit");
  assert.throws(() => pool.limitBytes(Number.NaN), /limitBytes expects a positive number of bytes, got NaN/);
});

test("errors: full context, rows not reserved, truncating past the end, a pool at its memory limit", () => {
  const c = new KVCache(1, 1, 4, 20);
  append(c, 18);
  assert.throws(() => c.ensureRoom(3), /context is full: 18 tokens cached \+ 3 new > contextSize 20/);
  assert.throws(() => (c.length = 19), /KV cache length 19 is outside the 18 positions that have rows \(call ensureRoom first\)/);
  assert.throws(() => c.store(0, 18, hostArray(4), hostArray(4), 1), /positions \[18, 19\) have no rows/);
  assert.throws(() => c.truncate(19), /cannot truncate the KV cache to 19: it holds 18 positions/);
  assert.throws(() => new KVCache(1, 1, 4, 0), /contextSize must be a positive integer, got 0/);
  assert.throws(() => new KVCache(64, 64, 128, 2 ** 22), /KV cache for contextSize 4194304 needs 16384\.0 GiB; choose a smaller contextSize/);
  // a pool allowed two blocks: the third one is refused with the sizes involved
  const blockBytes = 1 * 2 * BS * 4 * 4;
  const pool = new KVBlockPool(1, 1, 4, 1, undefined, BS, 2 * blockBytes);
  const s = new KVCache(1, 1, 4, 100, pool);
  append(s, 32);
  assert.throws(() => append(s, 1), /KV cache pool is full: 2 blocks of 16 positions \(1\.0 kB\) are in use and the limit is 1\.0 kB; use fewer sequences or beams, or a smaller contextSize/);
  assert.equal(s.length, 32);
  assert.throws(() => new KVBlockPool(1, 1, 4, 3, undefined, BS, 2 * blockBytes), /KV block pool: 3 blocks need 1\.5 kB, over the 1\.0 kB limit/);
});

test("attention through a scattered row index gives the same bits as the contiguous rows (reference and wasm)", async () => {
  const backends = [createReferenceBackend(), await createWasmBackend({ threads: 1 }), await createWasmBackend({ threads: 2 })];
  try {
    for (const c of [{ nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 37, nTokens: 1 }, { nHeads: 4, nKvHeads: 2, headDim: 8, startPos: 11, nTokens: 6 }, { nHeads: 4, nKvHeads: 4, headDim: 32, startPos: 70, nTokens: 1 }]) {
      const nAll = c.startPos + c.nTokens, rowSize = c.nKvHeads * c.headDim, poolRows = 3 * nAll;
      const k = filled(nAll * rowSize, 2), v = filled(nAll * rowSize, 3), q = filled(c.nTokens * c.nHeads * c.headDim, 1);
      // position p goes to row (p * 7 + 5) mod poolRows: scattered, in no order (poolRows is not a multiple of 7)
      const rows = Int32Array.from({ length: nAll }, (_, p) => (p * 7 + 5) % poolRows);
      assert.equal(new Set(rows).size, nAll);
      for (const be of backends) {
        const kc = onHost(be.allocActivations(nAll * rowSize)), vc = onHost(be.allocActivations(nAll * rowSize));
        kc.set(k);
        vc.set(v);
        const ks = onHost(be.allocActivations(poolRows * rowSize)).fill(NaN), vs = onHost(be.allocActivations(poolRows * rowSize)).fill(NaN);
        rows.forEach((r, p) => {
          ks.set(k.subarray(p * rowSize, (p + 1) * rowSize), r * rowSize);
          vs.set(v.subarray(p * rowSize, (p + 1) * rowSize), r * rowSize);
        });
        const scale = 1 / Math.sqrt(c.headDim);
        const contiguous = hostArray(q.length), scattered = hostArray(q.length);
        be.attention(contiguous, q, kc, vc, c.nTokens, c.startPos, c.nHeads, c.nKvHeads, c.headDim, scale);
        be.attention(scattered, q, ks, vs, c.nTokens, c.startPos, c.nHeads, c.nKvHeads, c.headDim, scale, rows);
        assert.ok(contiguous.every(Number.isFinite));
        assert.deepEqual(scattered, contiguous, `${be.name} (${be.threads} threads) ${JSON.stringify(c)}`);
        const bad = rows.slice();
        bad[3] = poolRows;
        assert.throws(() => be.attention(scattered, q, ks, vs, c.nTokens, c.startPos, c.nHeads, c.nKvHeads, c.headDim, scale, bad), new RegExp(`position 3 maps to row ${poolRows}, outside the cache's ${poolRows} rows`));
        assert.throws(() => be.attention(scattered, q, ks, vs, c.nTokens, c.startPos, c.nHeads, c.nKvHeads, c.headDim, scale, rows.subarray(0, nAll - 1)), /the row index holds \d+ positions, \d+ are attended/);
      }
    }
  } finally {
    for (const be of backends) be.dispose();
  }
});

const skip = skipWithoutShared(MODEL);

for (const backend of ["reference", "wasm"] as const) {
  test(`stories260K (${backend}): sequences forked from one prefilled prompt decode exactly as solo sequences`, { skip }, async () => {
    const model = await loadModel(sharedFile(MODEL)!, { backend });
    try {
      const lm = model.languageModel;
      const prompt = Array.from({ length: 40 }, (_, i) => (i === 0 ? 1 : 260 + ((i * 37) % 200)));
      const continuations = [[300, 301, 302, 303], [300, 410, 411, 412], [417, 418, 300, 301]];
      const root = lm.createCache(64);
      lm.forward(prompt, root);
      const caches = continuations.map((_, i) => (i === 0 ? root : root.fork()));
      const forked: Float32Array[][] = continuations.map(() => []);
      // one token of every sequence per batched pass, as beam search decodes
      for (let s = 0; s < 4; s++) {
        const logits = lm.forwardBatch(continuations.map((toks, i) => ({ tokens: [toks[s]!], cache: caches[i]! })));
        logits.forEach((l, i) => forked[i]!.push(l));
      }
      assert.equal(root.pool.stats.rowsWritten, 40 + 3 * 4, "one row per computed token: the prompt once, nothing copied");
      continuations.forEach((toks, i) => {
        const solo = lm.createCache(64);
        lm.forward(prompt, solo);
        toks.forEach((t, s) => assert.deepEqual(Array.from(lm.forward([t], solo)), Array.from(forked[i]![s]!), `sequence ${i}, step ${s}`));
      });
    } finally {
      model.dispose();
    }
  });
}

test("stories260K: 4 beams over a 40-token prompt write the prompt's rows once and copy none", { skip }, async (t) => {
  const model = await loadModel(sharedFile(MODEL)!, { backend: "reference" });
  try {
    const lm = model.languageModel;
    const prompt = model.tokenizer.encode("Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends and her little dog. One day, they found a big red ball", { addSpecialTokens: true });
    const P = 40;
    assert.ok(prompt.length >= P, `the prompt has ${prompt.length} tokens`);
    const r = await beamSearch(lm, prompt.slice(0, P), { numBeams: 4, maxTokens: 12, endIds: new Set() });
    const { kv, decodeSteps, decodePasses, forks } = r.stats;
    // structural expectation: the prompt's 40 rows once, then one row per beam-token decoded.
    // 12 steps: each of the first 11 ends with one pass decoding the 4 new beams' tokens; the
    // last step's candidates close the search without a pass
    assert.equal(decodePasses, 11);
    assert.equal(decodeSteps, 4 * 11);
    assert.equal(kv.rowsWritten, P + decodeSteps);
    assert.equal(kv.rowsAssigned, P + decodeSteps);
    assert.ok(forks >= 3, `${forks} forks`);
    // copying each beam's prompt (as before paging) would need 4 x 4 blocks for 52 positions
    assert.ok(kv.peakBlocksInUse < 4 * Math.ceil((P + 12) / BS), `peak ${kv.peakBlocksInUse} blocks`);
    t.diagnostic(`${forks} forks, ${kv.rowsWritten} rows written, peak ${kv.peakBlocksInUse} blocks of ${BS} (copying each beam's cache: ${4 * Math.ceil((P + 12) / BS)})`);
  } finally {
    model.dispose();
  }
});

test("wasm pool of one plane per KV head: growth, a fork's copied partial block and attention give the row layout's rows and bits", async () => {
  const wasm = await createWasmBackend({ threads: 2 });
  const reference = createReferenceBackend();
  try {
    const nLayers = 2, nKvHeads = 3, headDim = 8, nHeads = 6, rowSize = nKvHeads * headDim;
    // starts with one block: the appends below grow it (every plane moves) more than once
    const pools = [new KVBlockPool(nLayers, nKvHeads, headDim, 1, wasm, BS), new KVBlockPool(nLayers, nKvHeads, headDim, 1, reference, BS)];
    // the exact kernel (relaxed build, fused multiply-add) reads planes; elsewhere the pool keeps rows
    assert.equal(pools[0]!.planar, wasm.llamaCppOrder !== "none");
    assert.equal(pools[1]!.planar, false);
    const q = filled(nHeads * headDim, 7);
    const results = pools.map((pool) => {
      const be = pool === pools[0] ? wasm : reference;
      const write = (c: KVCache, n: number) => {
        c.ensureRoom(n);
        for (let l = 0; l < nLayers; l++) {
          const k = be.allocActivations(n * rowSize), v = be.allocActivations(n * rowSize);
          be.write(k, rowsFor(c.length, n, rowSize, l, 0));
          be.write(v, rowsFor(c.length, n, rowSize, l, 1));
          c.store(l, c.length, k, v, n);
        }
        c.length += n;
      };
      const parent = new KVCache(nLayers, nKvHeads, headDim, 200, pool);
      write(parent, 20);
      // a partial block of four rows copied into the fork's own block, plane by plane
      const child = parent.forkCopy();
      write(child, 37);
      write(parent, 9);
      assert.ok(pool.stats.grows >= 2, `${pool.stats.grows} grows`);
      const reads: Float32Array[] = [];
      for (const c of [parent, child]) {
        // every position's head h reads back what was written for it
        const plane = pool.encoding.headPlane ?? 0;
        for (let l = 0; l < nLayers; l++) {
          const keys = onHost(c.keys[l]!);
          for (let p = 0; p < c.length; p++) {
            for (let h = 0; h < nKvHeads; h++) {
              const at = plane ? (h * plane + c.rows[p]!) * headDim : c.rows[p]! * rowSize + h * headDim;
              assert.deepEqual(keys.subarray(at, at + headDim), rowsFor(p, 1, rowSize, l, 0).subarray(h * headDim, (h + 1) * headDim), `K of position ${p}, head ${h}, layer ${l}`);
            }
          }
        }
        const qIn = be.allocActivations(q.length), out = be.allocActivations(q.length);
        be.write(qIn, q);
        be.attention(out, qIn, c.keys[1]!, c.values[1]!, 1, c.length - 1, nHeads, nKvHeads, headDim, 0.35, c.rows, c.encoding);
        reads.push(Float32Array.from(onHost(out)));
      }
      return reads;
    });
    assert.deepEqual(results[0], results[1]);
  } finally {
    wasm.dispose();
  }
});
