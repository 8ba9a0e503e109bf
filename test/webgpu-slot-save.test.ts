import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { loadModel } from "../src/index.js";
import { createWebGPUBackend, type WebGPUBackendInfo } from "../src/kernels/webgpu/index.js";
import { startServer } from "../src/server/index.js";
import { ensureRandomModel, tinyLlama } from "../src/testing/index.js";
import { post } from "./helpers/serve.js";
import { skipWithoutWebGPUAdapter } from "./helpers/webgpu-adapter.js";

/*
 * serve's slot save on the WebGPU backend (test/server-slot-save.test.ts has the round trip on
 * the CPU): a KV block's rows lie in one range per layer, K or V and KV head plane, and a read
 * each was a staging buffer and a map each, all of a slot's blocks at once (131k maps pending for
 * a 4096-token slot of a 32-layer model with 8 KV heads).
 */

const noAdapter = await skipWithoutWebGPUAdapter();
const dir = mkdtempSync(join(tmpdir(), "tsllm-webgpu-slots-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("readParts gives the parts' floats one after another, bit for bit what a read of each gives, with one map", { skip: noAdapter }, async () => {
  const gpu = await createWebGPUBackend();
  try {
    const a = gpu.allocActivations(1000), b = gpu.allocActivations(300);
    // (NaN payloads and negative zero: encoded KV rows are bits, not numbers)
    const bits = new Uint32Array(1000).map((_, i) => (i * 2654435761) >>> 0);
    gpu.write(a, new Float32Array(bits.buffer));
    gpu.write(b, Float32Array.from({ length: 300 }, (_, i) => (i % 7 === 0 ? -0 : i / 3)));
    const parts = [gpu.view(a, 16, 100), gpu.view(b, 0, 0), gpu.view(b, 250, 50), gpu.view(a, 900, 100), gpu.view(a, 3, 1)];
    const each = await Promise.all(parts.map((p) => gpu.read(p)));
    const before = gpu.readCounters().maps;
    const all = await gpu.readParts(parts);
    assert.equal(gpu.readCounters().maps - before, 1);
    const expected = new Float32Array(each.reduce((n, e) => n + e.length, 0));
    let at = 0;
    for (const e of each) {
      expected.set(e, at);
      at += e.length;
    }
    assert.deepEqual(new Uint32Array(all.buffer), new Uint32Array(expected.buffer));
  } finally {
    gpu.dispose();
  }
});

test("slot save and restore on WebGPU: tinyLlama (2 KV heads) answers the fresh run's tokens on restored rows, found as the warm cache's; the save maps one staging buffer a block, at most 4 at once", { skip: noAdapter }, async () => {
  const folder = mkdtempSync(join(dir, "slots-"));
  const m = await loadModel(await ensureRandomModel(tinyLlama), { backend: "webgpu", contextSize: 256, warmup: false });
  const server = await startServer(m, { port: 0, slotSavePath: folder });
  const gpu = m.backend as WebGPUBackendInfo;
  try {
    const run = async (prompt: number[]) => {
      const r = await post(`${server.url}/completion`, { prompt, n_predict: 10, temperature: 0, return_tokens: true, id_slot: 0 });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      return { tokens: r.json.tokens as number[], cached: r.json.timings.cache_n as number };
    };
    // 150 tokens: 9 whole blocks, more than the save reads at once
    const prompt = Array.from({ length: 150 }, (_, i) => 7 + ((i * 13) % 200));
    const fresh = await run(prompt);
    const warm = await run(prompt);
    assert.ok(warm.cached >= 128, JSON.stringify(warm));

    const before = gpu.readCounters();
    const saved = await post(`${server.url}/slots/0?action=save`, { filename: "gpu.slot" });
    assert.equal(saved.status, 200, JSON.stringify(saved.json));
    const blocks = saved.json.n_saved / 16, counted = gpu.readCounters();
    assert.ok(blocks > 4, JSON.stringify(saved.json));
    // (a map each per layer, K or V and KV head before: 2 x 2 x 2 a block here, all at once)
    assert.equal(counted.maps - before.maps, blocks, "one map a block");
    assert.ok(counted.mostInFlight <= 4, `${counted.mostInFlight} maps at once`);

    await post(`${server.url}/slots/0?action=erase`, {});
    // other rows in the freed blocks, erased in turn (what the restore puts back must be the file's)
    await run(prompt.map((t) => t + 1));
    await post(`${server.url}/slots/0?action=erase`, {});
    const restored = await post(`${server.url}/slots/0?action=restore`, { filename: "gpu.slot" });
    assert.equal(restored.status, 200, JSON.stringify(restored.json));
    assert.equal(restored.json.n_restored, saved.json.n_saved);
    const again = await run(prompt);
    assert.equal(again.cached, warm.cached, "the restored rows are found as the warm cache's were");
    assert.deepEqual(again.tokens, fresh.tokens, "the reply on the restored rows is the fresh run's");
  } finally {
    await server.close(1000);
    m.dispose();
  }
});
