import assert from "node:assert/strict";
import { test } from "node:test";
import { loadModel } from "../src/index.js";
import { startServer } from "../src/server/index.js";
import { ensureRandomModel, tinyLlama } from "../src/testing/index.js";
import { skipWithoutShared } from "./helpers/shared.js";

// (the random models take stories260K's vocabulary from the shared folder)
const skip = skipWithoutShared("models/stories260K.gguf");

test("a speculative request that found no room in the draft's planned KV pool drafts again once another request ends (its draft catching up on the tokens accepted meanwhile), token for token as greedy", { skip, timeout: 240_000 }, async () => {
  const contextSize = 128;
  // room for both requests' own rows (64 blocks of the target's), so only the draft's pool runs short
  const target = await loadModel(await ensureRandomModel(tinyLlama), { contextSize, maxSequences: 4, kvCacheBytes: 64 * 16 * 2 * 2 * 64 * 2 * 4, threads: 1 });
  // the model drafting for itself: its proposals are mostly accepted, so the request that keeps
  // drafting ends well before the one that fell back
  const draft = await loadModel(await ensureRandomModel(tinyLlama), { contextSize, threads: 1 });
  try {
    const draftTokens = 4;
    target.engine.planDraftCache(draft.languageModel, draftTokens);
    // the planned pool, by hand: 128 + 4 + 1 = 133 positions -> 9 blocks of 16. Each request's draft
    // cache holds its tokens and a round's proposal less one: 40 + 60 + 3 positions at most (7 blocks),
    // and the two together pass 9 blocks once each holds some 70 tokens (5 blocks each): one falls back
    const prompts = [0, 1].map((r) => [1, ...Array.from({ length: 39 }, (_, i) => 20 + ((i * 7 + r * 13) % 200))]);
    const options = { temperature: 0, maxTokens: 60, ignoreEos: true };
    let firstEnded: { fallbacks: number; draftRows: number } | undefined;
    const runs = prompts.map(async (p) => {
      const tokens: number[] = [];
      for await (const step of target.stream(p, { ...options, draftModel: draft, draftTokens })) if (step.type === "token") tokens.push(step.token);
      const s = target.engine.stats;
      firstEnded ??= { fallbacks: s.draftFallbacks, draftRows: s.draftRowsComputed };
      return tokens;
    });
    const drafted = await Promise.all(runs);
    const stats = target.engine.stats;
    assert.ok(firstEnded && firstEnded.fallbacks >= 1, `a request fell back while both ran (fallbacks then: ${firstEnded?.fallbacks})`);
    // the other request, alone after the first ended, drafted: the draft model computed rows for it
    // (before, a request that fell back decoded the rest of its tokens without drafting)
    assert.ok(stats.draftRowsComputed > firstEnded.draftRows, `no draft rows computed after the first request ended (${stats.draftRowsComputed})`);
    assert.ok(stats.draftResumes >= 1, `the request that fell back drafted again (resumes ${stats.draftResumes})`);
    assert.ok(stats.draftKvPeakBytes <= stats.draftKvBytes, "within the planned pool");
    // the judge: plain greedy decoding of the target, one request at a time, no draft
    for (const [i, p] of prompts.entries()) {
      assert.deepEqual(drafted[i], (await target.generate(p, options)).completionTokens, `request ${i}: speculative tokens differ from greedy`);
    }
  } finally {
    target.dispose();
    draft.dispose();
  }
});

test("GET /metrics shows the draft model's KV pool (its planned size, the bytes in use) and the fallbacks and resumes of requests it had no room for", { skip, timeout: 240_000 }, async () => {
  const contextSize = 128;
  const model = await loadModel(await ensureRandomModel(tinyLlama), { contextSize, maxSequences: 4, kvCacheBytes: 64 * 16 * 2 * 2 * 64 * 2 * 4, threads: 1 });
  const draft = await loadModel(await ensureRandomModel(tinyLlama), { contextSize, threads: 1 });
  // as tsllm serve plans it (loadDraftBeside)
  model.engine.planDraftCache(draft.languageModel, 4);
  const server = await startServer(model, { port: 0, draftModel: draft, draftTokens: 4 });
  try {
    const metrics = async () => {
      const text = await (await fetch(`${server.url}/metrics`, { signal: AbortSignal.timeout(30_000) })).text();
      const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1]);
      return { bytes: value("tsllm_draft_kv_bytes"), used: value("tsllm_draft_kv_used_bytes"), fallbacks: value("tsllm_draft_fallbacks_total"), resumes: value("tsllm_draft_resumes_total") };
    };
    // no request has drafted: the pool is not allocated yet
    assert.deepEqual(await metrics(), { bytes: 0, used: 0, fallbacks: 0, resumes: 0 });
    // the two requests of the test above, over HTTP: one falls back, then drafts again
    const prompts = [0, 1].map((r) => [1, ...Array.from({ length: 39 }, (_, i) => 20 + ((i * 7 + r * 13) % 200))]);
    const replies = await Promise.all(prompts.map(async (prompt) => {
      const r = await fetch(`${server.url}/completion`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt, n_predict: 60, temperature: 0, ignore_eos: true }), signal: AbortSignal.timeout(120_000) });
      assert.equal(r.status, 200, await r.clone().text());
      return (await r.json()) as { tokens_predicted: number };
    }));
    for (const r of replies) assert.equal(r.tokens_predicted, 60);
    const m = await metrics();
    // by hand: 128 + 4 + 1 = 133 positions -> 9 blocks of 16, each position 2 layers x 2 KV heads x 64 x (K and V) x 4 bytes
    assert.equal(m.bytes, 9 * 16 * (2 * 2 * 64 * 2 * 4));
    assert.equal(m.used, 0, "the requests ended: their draft rows are back");
    assert.ok(m.fallbacks >= 1 && m.resumes >= 1, `fallbacks ${m.fallbacks}, resumes ${m.resumes}`);
    const s = model.engine.stats;
    assert.deepEqual([m.fallbacks, m.resumes], [s.draftFallbacks, s.draftResumes]);
  } finally {
    await server.close(1000);
    model.dispose();
    draft.dispose();
  }
});
