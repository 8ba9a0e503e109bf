import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { loadModel } from "../src/index.js";
import { DEFAULT_BLOCK_SIZE, kvBytesPerToken } from "../src/cache/index.js";
import { exclusive } from "../src/engine/index.js";
import { startServer } from "../src/server/index.js";
import { ensureRandomModel, tinyLlama } from "../src/testing/index.js";
import { post, serveStories, skipStories, spawnServe } from "./helpers/serve.js";
import { PROJECT_ROOT, sharedFile } from "./helpers/shared.js";

/*
 * llama-server's POST /slots/{id}?action=save|restore (tools/server: server-context.cpp's
 * handle_slots_save / handle_slots_restore and the SLOT_SAVE / SLOT_RESTORE tasks, common.cpp's
 * fs_validate_filename, common/arg.cpp's --slot-save-path): the file is tsllm's own, the answers
 * and refusals llama-server's.
 */

const PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends and her dog.";
const dir = mkdtempSync(join(tmpdir(), "tsllm-slots-"));
after(() => rmSync(dir, { recursive: true, force: true }));

describe("slot save and restore on stories260K", { skip: skipStories }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  const folder = join(dir, "stories");
  before(async () => {
    rmSync(folder, { recursive: true, force: true });
    mkdirSync(folder);
    s = await serveStories({ maxSequences: 2 }, { slotSavePath: folder });
  });
  after(() => s?.close());

  const action = (id: number, act: string, body: unknown = {}) => post(`${s.url}/slots/${id}?action=${act}`, body);
  /** the greedy completion of PROMPT in slot 0: its tokens, and the prompt tokens it found cached */
  const complete = async () => {
    const r = await post(`${s.url}/completion`, { prompt: PROMPT, n_predict: 12, temperature: 0, return_tokens: true, id_slot: 0 });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    return { tokens: r.json.tokens as number[], cached: r.json.timings.cache_n as number, processed: r.json.timings.prompt_n as number };
  };

  test("save writes the slot's cached tokens and rows; after an erase, restore puts them back: the same request reuses them and answers the fresh run's tokens", async () => {
    await action(0, "erase");
    const fresh = await complete();
    assert.equal(fresh.cached, 0, "a cold cache");
    const warm = await complete();
    assert.ok(warm.cached > 0, "the repeated prompt is found in the prefix cache");

    const saved = await action(0, "save", { filename: "lily.slot" });
    assert.equal(saved.status, 200, JSON.stringify(saved.json));
    assert.deepEqual(Object.keys(saved.json).sort(), ["filename", "id_slot", "n_saved", "n_written", "timings"]);
    assert.equal(saved.json.id_slot, 0);
    assert.equal(saved.json.filename, "lily.slot");
    assert.ok(saved.json.n_saved >= warm.cached && saved.json.n_saved % 16 === 0, JSON.stringify(saved.json));
    assert.equal(saved.json.n_written, statSync(join(folder, "lily.slot")).size);
    assert.equal(typeof saved.json.timings.save_ms, "number");
    // (written through a temporary file renamed over it: none is left)
    assert.deepEqual(readdirSync(folder), ["lily.slot"]);

    const erased = await action(0, "erase");
    assert.ok(erased.json.n_erased >= warm.cached, JSON.stringify(erased.json));
    // another prompt's rows then fill the blocks the erase freed (so what the restore reads must be the file's), and are erased in turn
    // (in slot 0: unpinned, a request takes the least recently used idle slot, as llama-server's)
    const other = await post(`${s.url}/completion`, { prompt: `The dog ran to the park. ${PROMPT}`, n_predict: 12, temperature: 0, id_slot: 0 });
    assert.equal(other.status, 200);
    assert.ok((await action(0, "erase")).json.n_erased > 0);
    const hitsBefore = s.model.engine.stats.kv!.prefixHits;
    const restored = await action(0, "restore", { filename: "lily.slot" });
    assert.equal(restored.status, 200, JSON.stringify(restored.json));
    assert.deepEqual(Object.keys(restored.json).sort(), ["filename", "id_slot", "n_read", "n_restored", "timings"]);
    assert.equal(restored.json.n_restored, saved.json.n_saved);
    assert.equal(restored.json.n_read, saved.json.n_written);
    assert.equal(typeof restored.json.timings.restore_ms, "number");

    const again = await complete();
    assert.equal(again.cached, warm.cached, "the restored rows are found as the warm cache's were");
    assert.equal(again.processed, fresh.processed - warm.cached);
    assert.ok(s.model.engine.stats.kv!.prefixHits > hitsBefore);
    assert.deepEqual(again.tokens, fresh.tokens, "the reply on the restored rows is the fresh run's");

    // an erase drops what the restore put back
    assert.ok((await action(0, "erase")).json.n_erased >= warm.cached);
    assert.equal((await complete()).cached, 0);
  });

  test("a busy slot is saved once its request ends; a save and a restore asked while a step is in flight run once it ends, and the restored rows are reused", async () => {
    await action(0, "erase");
    await action(1, "erase");
    const fresh = await complete();
    const warm = await complete();
    assert.equal((await action(0, "save", { filename: "run.slot" })).status, 200);
    await action(0, "erase");

    /** a request that runs until `controller` aborts it, in slot 0 */
    const held = async (controller: AbortController) => {
      const run = s.model.submit("Lily and Ben", { maxTokens: 400, temperature: 0.7, seed: 5, signal: controller.signal, slot: 0 });
      await run.events().next();
      return run;
    };
    const a = new AbortController();
    await held(a);
    let answered = false;
    const pending = action(0, "save", { filename: "busy.slot" }).then((r) => {
      answered = true;
      return r;
    });
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(answered, false, "the save waits while the slot's request runs");
    a.abort();
    assert.equal((await pending).status, 200);

    // a step in flight: the model's passes are held (exclusive), so the request submitted now has
    // begun its step and waits in it; a save and a restore then wait for that step to end
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const holding = exclusive(s.model.languageModel, () => gate);
    const run = s.model.submit("Lily and Ben", { maxTokens: 4, temperature: 0 });
    const done: string[] = [];
    const saving = s.model.engine.saveSlot(1).then(() => done.push("save"));
    const restoring = action(1, "restore", { filename: "run.slot" }).then((r) => {
      done.push("restore");
      return r;
    });
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(done, [], "neither ran while the step was in flight");
    open();
    await holding;
    await saving;
    const restored = await restoring;
    assert.equal(restored.status, 200, JSON.stringify(restored.json));
    await run.result();
    const again = await complete();
    assert.equal(again.cached, warm.cached);
    assert.deepEqual(again.tokens, fresh.tokens);
  });

  test("filenames llama-server's fs_validate_filename refuses are a 400 naming filename; nothing is written", async () => {
    for (const filename of ["../escape", "a/b", "a\\b", "..", ".", "", " lead", "trail ", "dot.", "x:y", "q?", "nul\u0000", "x".repeat(256), 7, null]) {
      for (const act of ["save", "restore"]) {
        const r = await action(0, act, { filename });
        assert.equal(r.status, 400, `${act} ${JSON.stringify(filename)}: ${JSON.stringify(r.json)}`);
        assert.equal(r.json.error.param, "filename");
        assert.match(r.json.error.message, /^Invalid filename: /);
      }
    }
    const none = await action(0, "save", {});
    assert.equal(none.status, 400);
    assert.match(none.json.error.message, /^Invalid filename: none given; expected a file name/);
    assert.equal((await action(0, "save", "not an object")).status, 400);
    assert.ok(!readdirSync(dir).includes("escape"));
    // a name of UTF-8 and inner dots is a name
    assert.equal((await action(1, "save", { filename: "élan.v2.bin" })).status, 200);
  });

  test("a missing, truncated, lengthened or changed file is refused in one line, and the slot and cache are left as they were", async () => {
    await action(0, "erase");
    await complete();
    const saved = await action(0, "save", { filename: "good.slot" });
    assert.equal(saved.status, 200, JSON.stringify(saved.json));
    const bytes = readFileSync(join(folder, "good.slot"));
    writeFileSync(join(folder, "short.slot"), bytes.subarray(0, bytes.length - 10));
    writeFileSync(join(folder, "stub.slot"), bytes.subarray(0, 10));
    writeFileSync(join(folder, "long.slot"), Buffer.concat([bytes, Buffer.from([0])]));
    const flipped = Buffer.from(bytes);
    flipped[flipped.length - 100]! ^= 0x40;
    writeFileSync(join(folder, "flipped.slot"), flipped);
    writeFileSync(join(folder, "other.slot"), "GGUF and then some");
    await action(0, "erase");
    for (const [filename, why] of [["absent.slot", /no slot file named "absent.slot"/], ["short.slot", /is truncated: \d+ bytes, its header says \d+/], ["stub.slot", /is truncated or no slot file/],
      ["long.slot", /has 1 bytes more than/], ["flipped.slot", /does not match its checksum: it is corrupt/], ["other.slot", /is not a tsllm slot file/]] as const) {
      const r = await action(0, "restore", { filename });
      assert.equal(r.status, 400, `${filename}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error.type, "invalid_request_error");
      assert.match(r.json.error.message, /^Unable to restore slot: /);
      assert.match(r.json.error.message, why);
      assert.doesNotMatch(r.json.error.message, /\n/);
    }
    // nothing of them reached the cache; the good file still restores
    assert.equal((await action(0, "erase")).json.n_erased, 0);
    assert.equal((await action(0, "restore", { filename: "good.slot" })).json.n_restored, saved.json.n_saved);
  });
});

describe("slot files and models", { skip: skipStories }, () => {
  test("a file saved by another model (the same shape and metadata, other weights) is refused naming both; the KV layout is checked too", async () => {
    const folder = mkdtempSync(join(dir, "models-"));
    const one = await loadModel(await ensureRandomModel(tinyLlama), { contextSize: 128, threads: 1 });
    const two = await loadModel(await ensureRandomModel({ ...tinyLlama, seed: 2 }), { contextSize: 128, threads: 1 });
    const f16 = await loadModel(await ensureRandomModel(tinyLlama), { contextSize: 128, threads: 1, cacheTypeK: "f16" });
    const servers = await Promise.all([one, two, f16].map((m) => startServer(m, { port: 0, slotSavePath: folder })));
    try {
      const [a, b, c] = servers.map((x) => x.url);
      const prompt = Array.from({ length: 40 }, (_, i) => 5 + i);
      assert.equal((await post(`${a}/completion`, { prompt, n_predict: 4, temperature: 0, id_slot: 0 })).status, 200);
      const saved = await post(`${a}/slots/0?action=save`, { filename: "one.slot" });
      assert.equal(saved.status, 200, JSON.stringify(saved.json));
      assert.ok(saved.json.n_saved > 0);
      const other = await post(`${b}/slots/0?action=restore`, { filename: "one.slot" });
      assert.equal(other.status, 400, JSON.stringify(other.json));
      assert.match(other.json.error.message, /^Unable to restore slot: slot file "one.slot" was saved by model "[^"]+" \(\d+ bytes, sha256 [0-9a-f]{12}\.\.\.\), not this server's "[^"]+" .*its KV rows mean nothing to this model$/);
      assert.equal(two.engine.stats.kv?.cachedBlocks ?? 0, 0, "nothing restored");
      const layout = await post(`${c}/slots/0?action=restore`, { filename: "one.slot" });
      assert.equal(layout.status, 400, JSON.stringify(layout.json));
      assert.match(layout.json.error.message, /was saved with another KV cache layout \(cacheTypeK f32, here f16; blockFloats \d+, here \d+\)/);
      // the model that saved it takes it
      assert.equal((await post(`${a}/slots/1?action=restore`, { filename: "one.slot" })).status, 200);
    } finally {
      await Promise.all(servers.map((x) => x.close(1000)));
      for (const m of [one, two, f16]) (await m).dispose();
    }
  });

  test("a file saved by the same model file loaded with its weights quantized (serve --quantize) is refused where they are not, and the reverse", async () => {
    // Before: the file named the model file alone, so each took the other's rows, computed by other weights.
    const folder = mkdtempSync(join(dir, "quantized-"));
    const path = await ensureRandomModel(tinyLlama);
    const models = await Promise.all([{}, { quantize: "q8_0" as const }].map((o) => loadModel(path, { contextSize: 128, threads: 1, ...o })));
    const servers = await Promise.all(models.map((m) => startServer(m, { port: 0, slotSavePath: folder })));
    try {
      const [plain, quantized] = servers.map((x) => x.url);
      const prompt = Array.from({ length: 40 }, (_, i) => 5 + i);
      for (const [url, name] of [[plain, "plain.slot"], [quantized, "q8.slot"]] as const) {
        assert.equal((await post(`${url}/completion`, { prompt, n_predict: 4, temperature: 0, id_slot: 0 })).status, 200);
        assert.equal((await post(`${url}/slots/0?action=save`, { filename: name })).status, 200);
      }
      const intoPlain = await post(`${plain}/slots/1?action=restore`, { filename: "q8.slot" });
      assert.equal(intoPlain.status, 400, JSON.stringify(intoPlain.json));
      assert.equal(intoPlain.json.error.message, `Unable to restore slot: slot file "q8.slot" was saved by this model file loaded with its weights quantized to q8_0 while loading, this server has its weights as the file stores them: its KV rows come from other weights; restore it where the model is loaded the same way`);
      const intoQuantized = await post(`${quantized}/slots/1?action=restore`, { filename: "plain.slot" });
      assert.equal(intoQuantized.status, 400, JSON.stringify(intoQuantized.json));
      assert.match(intoQuantized.json.error.message, /saved by this model file loaded with its weights as the file stores them, this server has its weights quantized to q8_0 while loading/);
      // each takes its own
      assert.equal((await post(`${plain}/slots/1?action=restore`, { filename: "plain.slot" })).status, 200);
      assert.equal((await post(`${quantized}/slots/1?action=restore`, { filename: "q8.slot" })).status, 200);
    } finally {
      await Promise.all(servers.map((x) => x.close(1000)));
      for (const m of models) m.dispose();
    }
  });

  test("the round trip keeps encoded rows of several KV heads: tinyLlama (2 KV heads) with q8_0 K and V answers the fresh run's tokens on restored rows", async () => {
    const folder = mkdtempSync(join(dir, "q8-"));
    const m = await loadModel(await ensureRandomModel(tinyLlama), { contextSize: 128, threads: 1, cacheTypeK: "q8_0", cacheTypeV: "q8_0" });
    const server = await startServer(m, { port: 0, slotSavePath: folder });
    try {
      const run = async (prompt: number[]) => {
        const r = await post(`${server.url}/completion`, { prompt, n_predict: 10, temperature: 0, return_tokens: true });
        assert.equal(r.status, 200, JSON.stringify(r.json));
        return { tokens: r.json.tokens as number[], cached: r.json.timings.cache_n as number };
      };
      const prompt = Array.from({ length: 50 }, (_, i) => 7 + ((i * 13) % 200));
      const fresh = await run(prompt);
      const warm = await run(prompt);
      assert.ok(warm.cached > 0);
      assert.equal((await post(`${server.url}/slots/0?action=save`, { filename: "q8.slot" })).status, 200);
      await post(`${server.url}/slots/0?action=erase`, {});
      // other rows in the freed blocks, erased in turn
      await run(prompt.map((t) => t + 1));
      await post(`${server.url}/slots/0?action=erase`, {});
      const restored = await post(`${server.url}/slots/0?action=restore`, { filename: "q8.slot" });
      assert.equal(restored.status, 200, JSON.stringify(restored.json));
      const again = await run(prompt);
      assert.equal(again.cached, warm.cached);
      assert.deepEqual(again.tokens, fresh.tokens);
    } finally {
      await server.close(1000);
      m.dispose();
    }
  });

  test("without slotSavePath save and restore are llama-server's 501 naming the setting; a folder that is none is refused at start", async () => {
    const s = await serveStories();
    try {
      for (const act of ["save", "restore"]) {
        const r = await post(`${s.url}/slots/0?action=${act}`, { filename: "x.slot" });
        assert.equal(r.status, 501, JSON.stringify(r.json));
        assert.equal(r.json.error.type, "not_supported_error");
        assert.equal(r.json.error.message, `This server does not support slots action "${act}". Start it with slotSavePath (a folder for the slot files)`);
      }
      assert.throws(() => startServer(s.model, { port: 0, slotSavePath: join(dir, "nowhere") }), /^RangeError: slotSavePath: not a directory: ".*nowhere" \(the slot files' folder must exist\)$/);
    } finally {
      await s.close();
    }
  });
});

test("tsllm serve --slot-save-path DIR: save and restore over HTTP; without it the 501 names the flag; a missing folder is a usage error (exit 2)", { skip: skipStories }, async () => {
  const folder = mkdtempSync(join(dir, "cli-"));
  const s = await spawnServe(["--slot-save-path", folder]);
  const plain = await spawnServe([]);
  try {
    assert.equal((await post(`${s.url}/completion`, { prompt: PROMPT, n_predict: 4, temperature: 0, id_slot: 0 })).status, 200);
    const saved = await post(`${s.url}/slots/0?action=save`, { filename: "cli.slot" });
    assert.equal(saved.status, 200, JSON.stringify(saved.json));
    assert.ok(saved.json.n_saved > 0);
    assert.equal((await post(`${s.url}/slots/0?action=erase`, {})).status, 200);
    const restored = await post(`${s.url}/slots/0?action=restore`, { filename: "cli.slot" });
    assert.equal(restored.json.n_restored, saved.json.n_saved);
    const r = await post(`${plain.url}/slots/0?action=save`, { filename: "cli.slot" });
    assert.equal(r.status, 501);
    assert.equal(r.json.error.message, 'This server does not support slots action "save". Start it with --slot-save-path DIR');
  } finally {
    for (const c of [s, plain]) {
      c.child.kill("SIGTERM");
      assert.equal(await c.exited, 0, c.stderr());
    }
  }
  const bad = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "serve", "--model", sharedFile("models/stories260K.gguf")!, "--slot-save-path", join(dir, "nowhere")], { cwd: PROJECT_ROOT, encoding: "utf8" });
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, /--slot-save-path: not a directory: ".*nowhere"/);
});

test("a restore into a full pool keeps its tokens' blocks cached already: the chain of keys is whole, and a request reuses every restored row", async () => {
  // A pool of exactly 6 blocks. The saved prompt's first 2 blocks are still cached, idle and the
  // oldest there, its last 2 evicted; restoring the 4 takes a free block, then must evict an idle
  // one. Unheld, that was the chain's second block: the restore said 64 tokens, but the restored
  // blocks after it were keyed on a block gone, and the prompt found 16 cached instead of 48.
  const path = await ensureRandomModel(tinyLlama);
  const probe = await loadModel(path, { threads: 1 });
  const perToken = kvBytesPerToken(probe.languageModel.info, probe.languageModel.kvCacheTypes);
  probe.dispose();
  const m = await loadModel(path, { threads: 1, contextSize: 96, maxSequences: 1, kvCacheBytes: 6 * DEFAULT_BLOCK_SIZE * perToken });
  try {
    const ids = (n: number, first: number) => Array.from({ length: n }, (_, i) => first + i);
    // (2 new tokens: a prompt's blocks are cached once a step after its own computed them)
    const cached = async (prompt: number[]) => (await m.generate(prompt, { maxTokens: 2, temperature: 0 })).timings.cachedPromptTokens;
    const prompt = ids(65, 300);
    assert.equal(await cached(prompt), 0);
    const warm = await cached(prompt);
    assert.equal(warm, 48, "the prompt's 4 blocks, less the last 2 tokens computed");
    const saved = await m.engine.saveSlot(0);
    assert.equal(saved.tokens.length, 64);
    // the first 2 blocks revived (then the newest idle), the last 2 evicted; then another prompt's
    // 4 blocks evict the first request's others, leaving the 2 the oldest idle and 1 block free
    assert.equal(await cached([...prompt.slice(0, 32), ...ids(49, 100)]), 32);
    assert.equal(await cached(ids(49, 200)), 0);
    assert.equal(m.engine.stats.kv!.blocksInUse, 0);
    assert.equal(await m.engine.restoreSlot(0, saved), 64);
    assert.equal(await cached(prompt), warm, "every restored block is found, as the warm run's were");
  } finally {
    m.dispose();
  }
});

test("an erase sent while the slot's save still reads its blocks drops the rows once the save is done: a later request finds none of them", async () => {
  // A save holds the blocks it reads (KVBlockPool.hold) until its reads are done; an erase that
  // dropped the slot's rows meanwhile found them held, dropped none, and on the save's release they
  // went back to the prefix cache: n_erased 0, the next request found the erased prompt cached.
  // llama-server runs a slot's tasks one after another: the erase drops what the save read.
  const path = await ensureRandomModel(tinyLlama);
  const m = await loadModel(path, { threads: 1, contextSize: 96, maxSequences: 1 });
  try {
    const prompt = Array.from({ length: 65 }, (_, i) => 300 + i);
    const cached = async () => (await m.generate(prompt, { maxTokens: 2, temperature: 0 })).timings.cachedPromptTokens;
    assert.equal(await cached(), 0);
    assert.ok((await cached()) > 0, "the repeated prompt is found in the prefix cache");
    const saving = m.engine.saveSlot(0);
    const erased = await m.engine.eraseSlot(0);
    const saved = await saving;
    assert.equal(saved.tokens.length, 64, "the save read the slot's 4 cached blocks");
    assert.equal(erased, 64, "the erase dropped the rows the save read");
    assert.equal(await cached(), 0, "the erased prompt is found nowhere");
  } finally {
    m.dispose();
  }
});
