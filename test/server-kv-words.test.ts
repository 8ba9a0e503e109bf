import assert from "node:assert/strict";
import { test } from "node:test";
import { DEFAULT_BLOCK_SIZE, KVBlockPool } from "../src/cache/index.js";
import { SETTING_FLAGS } from "../src/cli/serve.js";
import { createWasmBackend } from "../src/kernels/wasm/index.js";
import { internal } from "../src/server/errors.js";
import { LIBRARY_SETTING_NAMES } from "../src/server/setting-names.js";

test("the KV pool's allocation refusal reaching a request (a 500) proposes tsllm serve's flags, not the library's options; a library server keeps the options' names", async () => {
  // the real refusal: one layer's K array of 2^23 positions of 128 f32 (4 GiB) is more than the
  // wasm backend's one memory holds, as a pool grown to a large --kv-memory meets it mid-serve
  const backend = await createWasmBackend({ threads: 1 });
  let refusal: unknown;
  try {
    new KVBlockPool(1, 1, 128, 2 ** 23 / DEFAULT_BLOCK_SIZE, backend, DEFAULT_BLOCK_SIZE, 2 ** 40);
  } catch (e) {
    refusal = e;
  } finally {
    backend.dispose();
  }
  assert.ok(refusal instanceof Error && refusal.message.startsWith("KV cache: 8388608 positions"), String(refusal));
  const served = internal(refusal, SETTING_FLAGS);
  assert.equal(served.status, 500);
  assert.match(served.message, /; lower --ctx-size, --kv-memory or --parallel, or store the cache smaller \(--cache-type-k \/ --cache-type-v f16 or q8_0\)$/);
  for (const word of ["contextSize", "kvCacheBytes", "maxSequences", "cacheTypeK"]) assert.ok(!served.message.includes(word), served.message);
  assert.match(internal(refusal, LIBRARY_SETTING_NAMES).message, /; lower contextSize, kvCacheBytes or maxSequences, or store the cache smaller \(cacheTypeK \/ cacheTypeV f16 or q8_0\)$/);
});

test("the KV pool's refusal of a block past its limit reaching a request (a 500) proposes tsllm serve's --parallel and --ctx-size, not the library's contextSize", () => {
  // the real refusal: a pool limited to two blocks asked for a third, as a request's sequences
  // growing past the pool's budget mid-generation meet it
  const pool = new KVBlockPool(1, 1, 4, 1, undefined, DEFAULT_BLOCK_SIZE, 2 * 2 * DEFAULT_BLOCK_SIZE * 4 * 4);
  pool.take();
  pool.take();
  let refusal: unknown;
  try {
    pool.take();
  } catch (e) {
    refusal = e;
  }
  assert.ok(refusal instanceof Error && refusal.message.startsWith("KV cache pool is full: 2 blocks"), String(refusal));
  const served = internal(refusal, SETTING_FLAGS);
  assert.match(served.message, /; use fewer sequences \(--parallel\) or beams, or a smaller --ctx-size$/);
  assert.ok(!served.message.includes("contextSize"), served.message);
  assert.match(internal(refusal, LIBRARY_SETTING_NAMES).message, /; use fewer sequences \(maxSequences\) or beams, or a smaller contextSize$/);
});
