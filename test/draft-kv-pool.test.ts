import assert from "node:assert/strict";
import { test } from "node:test";
import type { KVCache } from "../src/cache/index.js";
import { kvBytesPerToken } from "../src/cache/index.js";
import { loadModel, type LanguageModel } from "../src/index.js";
import { ensureRandomModel, tinyLlama } from "../src/testing/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL);

/** the draft as generate() takes it, keeping the caches the engine asks it for (their pool is the engine's draft pool) */
function noting(model: LanguageModel, made: KVCache[]): LanguageModel {
  return new Proxy(model, {
    get(m, key) {
      if (key === "createCache") return (positions: number) => made[made.push(m.createCache(positions)) - 1];
      const v = Reflect.get(m, key, m);
      return typeof v === "function" ? v.bind(m) : v;
    },
  });
}

test("a draft model's KV pool never holds more than kvCacheBytes, however many speculative requests ran at once", { skip }, async () => {
  const target = await loadModel(sharedFile(MODEL)!, { contextSize: 512, kvCacheBytes: 80 * 16 * 1280, maxSequences: 16 });
  // a draft whose K/V is 12.8x the target's a token (8 layers of 4 KV heads of 64), so the drafts take most of the budget
  const draft = await loadModel(await ensureRandomModel({ ...tinyLlama, blockCount: 8, headCountKv: 4, contextLength: 512 }));
  try {
    const budget = 80 * 16 * 1280;
    const draftBlockBytes = 16 * kvBytesPerToken(draft.info);
    assert.equal(draftBlockBytes, 16 * 8 * 2 * 4 * 64 * 4);
    const made: KVCache[] = [];
    const options = { temperature: 0, maxTokens: 10, ignoreEos: true, draftModel: { languageModel: noting(draft.languageModel, made) }, draftTokens: 2 };
    // each holds 1 block of its own, 2 of a proposal and 13 of draft cache (1 draft block): 5 run at once, their drafts
    // 5 blocks of a pool that doubles from 1 (to 8 blocks, 2 MiB, past the 1.6 MB budget, before the cap)
    const prompts = Array.from({ length: 12 }, (_, i) => [1, 10 + i, 20 + i]);
    const runs = await Promise.all(prompts.map((p) => target.generate(p, options)));
    assert.equal(target.engine.stats.peakStepSequences, 5);
    // greedy speculative decoding = greedy decoding (the judge: the target alone)
    for (const [i, p] of prompts.entries()) assert.deepEqual(runs[i]!.completionTokens, (await target.generate(p, { temperature: 0, maxTokens: 10, ignoreEos: true })).completionTokens);
    assert.equal(made.length, 1, "one draft pool, shared by every request");
    const pool = made[0]!.pool;
    assert.ok(pool.stats.peakBlocksInUse > 1, "requests drafted at once");
    assert.equal(pool.stats.blocksInUse, 0, "every request gave its draft rows back");
    assert.ok(pool.byteLength <= budget, `the draft pool holds ${pool.byteLength} bytes, over kvCacheBytes ${budget} (peak in use ${pool.stats.peakBlocksInUse} blocks)`);
  } finally {
    target.dispose();
    draft.dispose();
  }
});

test("a draft model's KV pool: every block back after the requests end, kept at most kvCacheBytes for the next burst (draftKvBytes)", { skip }, async () => {
  const budget = 40 * 16 * 1280;
  const target = await loadModel(sharedFile(MODEL)!, { contextSize: 256, maxSequences: 4, kvCacheBytes: budget });
  const draft = await loadModel(sharedFile(MODEL)!, { contextSize: 256 });
  try {
    const made: KVCache[] = [];
    const options = { temperature: 0, maxTokens: 12, ignoreEos: true, draftModel: { languageModel: noting(draft.languageModel, made) }, draftTokens: 3 };
    assert.equal(target.engine.stats.draftKvBytes, 0);
    const held: number[] = [];
    for (let burst = 1; burst <= 3; burst++) {
      let during = 0;
      const runs = [1, 2, 3].map(async (i) => {
        for await (const _ of target.stream([1, 40 + i, 50 + i], options)) during = Math.max(during, target.engine.stats.draftKvBytes);
      });
      await Promise.all(runs);
      assert.ok(during > 0, "the draft pool holds memory while requests draft");
      const pool = made[0]!.pool;
      assert.equal(pool.stats.blocksInUse, 0, `burst ${burst}: every request gave its draft blocks back`);
      assert.ok(pool.stats.peakBlocksInUse >= 3, `the burst's requests drafted at once (peak ${pool.stats.peakBlocksInUse} blocks)`);
      held.push(target.engine.stats.draftKvBytes);
      assert.ok(held.at(-1)! <= budget, `the draft pool holds ${held.at(-1)} bytes, over kvCacheBytes ${budget}`);
    }
    // one pool for every burst, which a later burst of the same shape does not grow: dropping it when idle
    // would make each burst's a new one, whose memory the wasm arena gets back only when the garbage collector finalizes it
    assert.equal(made.length, 1, "one draft pool, reused by every burst");
    assert.equal(held[2], held[0], `the pool grew between bursts: ${held.join(", ")} bytes`);
  } finally {
    target.dispose();
    draft.dispose();
  }
});
