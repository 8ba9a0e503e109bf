import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { loadModel, type Model } from "../src/index.js";
import { DEFAULT_BLOCK_SIZE, kvBytesPerToken, type KVBlockPool } from "../src/cache/index.js";
import { startServer } from "../src/server/index.js";
import { ensureRandomModel, tinyLlama } from "../src/testing/index.js";
import { post, until } from "./helpers/serve.js";

/*
 * The order and the KV room of llama-server's slot tasks (POST /slots/{id}?action=save|restore|erase;
 * tools/server: server-context.cpp's SLOT_SAVE / SLOT_RESTORE / SLOT_ERASE tasks, a busy slot's
 * deferred by server_queue::defer and taken back first come, first served by pop_deferred_task):
 * a slot's tasks run in the order they came, each after those before it only; a save's hold on
 * the blocks it reads takes no room promised to a running request, and gives its room back to a
 * request waiting for it.
 */

const dir = mkdtempSync(join(tmpdir(), "tsllm-slot-tasks-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const ids = (n: number, first: number) => Array.from({ length: n }, (_, i) => first + i);

/**
 * The model's KV pool with its block reads held back until `open()` (a slow device's reads: a
 * save then holds its blocks for as long as the test needs); `reads` counts the reads asked
 */
function gateReads(m: Model): { open: () => void; reads: () => number } {
  const pool = Reflect.get(m.engine, "pool") as KVBlockPool;
  const read = pool.readBlock.bind(pool);
  let open!: () => void, asked = 0;
  const gate = new Promise<void>((resolve) => (open = resolve));
  pool.readBlock = (block) => {
    asked++;
    // (issued at once, as readBlock promises; answered once the gate opens)
    const rows = read(block);
    return gate.then(() => rows);
  };
  return { open, reads: () => asked };
}

/** tinyLlama with one slot and a pool of `blocks` blocks */
async function smallPool(blocks: number, options: Parameters<typeof loadModel>[1] = {}): Promise<Model> {
  const path = await ensureRandomModel(tinyLlama);
  const probe = await loadModel(path, { threads: 1 });
  const perToken = kvBytesPerToken(probe.languageModel.info, probe.languageModel.kvCacheTypes);
  probe.dispose();
  return loadModel(path, { threads: 1, contextSize: 96, maxSequences: 1, kvCacheBytes: blocks * DEFAULT_BLOCK_SIZE * perToken, ...options });
}

test("a slot's tasks run in the order they came: an erase waits for the save before it, not for the save after it, which saves what the erase left", async () => {
  // Before: an erase waited for every save in flight, one sent after it too, and that save ran
  // beside the first: it read the 64 tokens the erase was asked to drop before it (n_saved 64), and
  // the erase answered only after it. llama-server runs the slot's tasks one by one, in order.
  const m = await smallPool(12);
  const server = await startServer(m, { port: 0, slotSavePath: dir });
  try {
    const prompt = ids(65, 300);
    for (let i = 0; i < 2; i++) assert.equal((await post(`${server.url}/completion`, { prompt, n_predict: 2, temperature: 0 })).status, 200);
    const gate = gateReads(m);
    let erasesAsked = 0;
    const erase = m.engine.eraseSlot.bind(m.engine);
    m.engine.eraseSlot = (id) => {
      erasesAsked++;
      return erase(id);
    };
    const answered: string[] = [];
    const action = (act: string, body: unknown, name: string) => post(`${server.url}/slots/0?action=${act}`, body).then((r) => {
      answered.push(name);
      return r;
    });
    const first = action("save", { filename: "first.slot" }, "first save");
    await until(() => gate.reads() > 0, "the first save's reads");
    const erased = action("erase", {}, "erase");
    await until(() => erasesAsked === 1, "the erase to reach the engine");
    const second = action("save", { filename: "second.slot" }, "second save");
    gate.open();
    const [a, e, b] = await Promise.all([first, erased, second]);
    assert.equal(a.status, 200, JSON.stringify(a.json));
    assert.equal(a.json.n_saved, 64, "the first save read the slot's 4 cached blocks");
    assert.equal(e.json.n_erased, 64, "the erase dropped them after it");
    assert.equal(b.status, 200, JSON.stringify(b.json));
    assert.equal(b.json.n_saved, 0, "the save after the erase finds nothing of the slot's");
    assert.deepEqual(answered, ["first save", "erase", "second save"]);
    // and a restore asked after a save of the same file reads what that save wrote
    for (let i = 0; i < 2; i++) await post(`${server.url}/completion`, { prompt, n_predict: 2, temperature: 0 });
    const [saved, restored] = await Promise.all([action("save", { filename: "again.slot" }, "save"), action("restore", { filename: "again.slot" }, "restore")]);
    assert.equal(restored.status, 200, JSON.stringify(restored.json));
    assert.equal(restored.json.n_restored, saved.json.n_saved);
    assert.equal(restored.json.n_read, saved.json.n_written);
  } finally {
    await server.close(1000);
    m.dispose();
  }
});

test("an erase of another slot whose rows a save still reads drops them once the save is done, without waiting for it", async () => {
  // The prefix cache is shared: slots 0 and 1 ran the same prompt. Slot 1's erase, sent while
  // slot 0's save reads those blocks, does not wait for that save (another slot's task); the
  // blocks it held leave the prefix cache as the save lets go of them, not back into it.
  const m = await smallPool(12, { maxSequences: 2 });
  try {
    const prompt = ids(65, 300);
    for (const slot of [0, 1]) await m.generate(prompt, { maxTokens: 2, temperature: 0, slot });
    const gate = gateReads(m);
    const saving = m.engine.saveSlot(0);
    await until(() => gate.reads() > 0, "the save's reads");
    assert.equal(await m.engine.eraseSlot(1), 64, "answered while the save still reads");
    gate.open();
    assert.equal((await saving).tokens.length, 64, "the save read the rows it held");
    assert.equal((await m.generate(prompt, { maxTokens: 2, temperature: 0 })).timings.cachedPromptTokens, 0, "the erased rows are found nowhere");
  } finally {
    m.dispose();
  }
});

test("a request that waits for the blocks a save holds starts once the save lets go of them", { timeout: 60_000 }, async () => {
  // Before: the save's release woke nothing, and the engine's loop slept with the request queued
  // (nothing else running) until another request came: a lone request hung.
  const m = await smallPool(6);
  try {
    const prompt = ids(65, 300);
    for (let i = 0; i < 2; i++) await m.generate(prompt, { maxTokens: 2, temperature: 0 });
    assert.equal(m.engine.stats.kv!.cachedBlocks, 4);
    const gate = gateReads(m);
    const saving = m.engine.saveSlot(0);
    await until(() => gate.reads() > 0, "the save's reads");
    // 49 new tokens take 4 blocks: 2 are free, the save holds the 4 cached
    const waiting = m.generate(ids(49, 100), { maxTokens: 2, temperature: 0 });
    await new Promise((r) => setTimeout(r, 50));
    gate.open();
    assert.equal((await saving).tokens.length, 64);
    assert.equal((await waiting).completionTokens.length, 2);
  } finally {
    m.dispose();
  }
});

test("a save holds no block promised to a running reserved request: the request runs to its end, and the save reads the slot once room is back", { timeout: 60_000 }, async () => {
  // A pool of 6 blocks; slot 0 ran a prompt whose 2 blocks are cached, idle. A reserved request
  // (admission "reserve") of 20 + 76 tokens is admitted on all 6 (idle blocks count as room). Before:
  // a save of slot 0 held the 2 idle blocks beside it, and the request found the pool full mid-way
  // ("KV cache pool is full"): a refusal llama-server never gives. Now the save waits until no
  // running request was promised them.
  const m = await smallPool(6, { maxSequences: 2, admission: "reserve" });
  try {
    await m.generate(ids(33, 300), { maxTokens: 2, temperature: 0, slot: 0 });
    assert.equal(m.engine.stats.kv!.cachedBlocks, 2);
    const gate = gateReads(m);
    const run = m.submit(ids(20, 100), { maxTokens: 76, temperature: 0, ignoreEos: true, slot: 1 });
    const events = run.events();
    await events.next();
    const saving = m.engine.saveSlot(0);
    const result = run.result();
    // (the reads are let go once the request has ended either way)
    result.then(gate.open, gate.open);
    for await (const _ of events) {
      // (read to its end)
    }
    const done = await result;
    assert.equal(done.completionTokens.length, 76);
    // the request took the idle blocks it was promised (the save found none of the slot's left)
    assert.equal((await saving).tokens.length, 0);
  } finally {
    m.dispose();
  }
});

test("timings.save_ms and restore_ms count the task from where it starts, as llama-server's t_start after a busy slot's deferral, not the wait for the slot", async () => {
  // Before: the clock started as the request came, so a save sent while the slot's request ran
  // for seconds said it took those seconds.
  const m = await smallPool(12);
  const server = await startServer(m, { port: 0, slotSavePath: dir });
  try {
    await m.generate(ids(40, 300), { maxTokens: 2, temperature: 0 });
    const stop = new AbortController();
    const run = m.submit(ids(20, 100), { maxTokens: 80, temperature: 0.7, seed: 1, ignoreEos: true, slot: 0, signal: stop.signal });
    await run.events().next();
    const saving = post(`${server.url}/slots/0?action=save`, { filename: "timed.slot" });
    const restoring = post(`${server.url}/slots/0?action=restore`, { filename: "timed.slot" });
    await new Promise((r) => setTimeout(r, 200));
    // the slot's request ends after this instant, so its tasks start after it
    const freed = performance.now();
    stop.abort();
    const [saved, restored] = await Promise.all([saving, restoring]);
    const answered = performance.now() - freed;
    assert.equal(saved.status, 200, JSON.stringify(saved.json));
    assert.equal(restored.status, 200, JSON.stringify(restored.json));
    assert.ok(saved.json.timings.save_ms <= answered, `save_ms ${saved.json.timings.save_ms}, ${answered} ms from the slot's end to the answers`);
    assert.ok(restored.json.timings.restore_ms <= answered, `restore_ms ${restored.json.timings.restore_ms}, ${answered} ms from the slot's end to the answers`);
  } finally {
    await server.close(1000);
    m.dispose();
  }
});
