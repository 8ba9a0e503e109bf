import assert from "node:assert/strict";
import { test } from "node:test";
import { loadModel } from "../src/index.js";
import { startServer } from "../src/server/index.js";
import { ensureRandomModel, tinyLlama } from "../src/testing/index.js";
import { skipWithoutShared } from "./helpers/shared.js";

// (the random models take stories260K's vocabulary from the shared folder)
const skip = skipWithoutShared("models/stories260K.gguf");

/** a random 1-layer draft of tinyLlama's vocabulary (2 KV heads of 64): its own weights, so the target rejects much of what it proposes */
const DRAFT = { ...tinyLlama, blockCount: 1, seed: 7 };

test("concurrent speculative requests never grow the draft model's KV pool past its planned size (a context + draftTokens + 1, whole blocks); those it has no room for decode without drafting, token for token as greedy", { skip }, async () => {
  const contextSize = 128;
  // room for every request's own rows (64 blocks of the target's), so only the draft's pool runs short
  const target = await loadModel(await ensureRandomModel(tinyLlama), { contextSize, maxSequences: 8, kvCacheBytes: 64 * 16 * 2 * 2 * 64 * 2 * 4, threads: 1 });
  const draft = await loadModel(await ensureRandomModel(DRAFT), { contextSize, threads: 1 });
  try {
    const draftTokens = 4;
    target.engine.planDraftCache(draft.languageModel, draftTokens);
    // the plan's draft cache, by hand: 128 + 4 + 1 = 133 positions -> 9 blocks of 16, each position
    // 1 layer x 2 KV heads x 64 x (K and V) x 4 bytes (f32)
    const planned = 9 * 16 * (1 * 2 * 64 * 2 * 4);
    // 6 at once, each a draft cache of up to 8 + 40 + 3 positions (4 blocks): 24 blocks wanted of 9
    const prompts = Array.from({ length: 6 }, (_, i) => [1, 20 + i, 30 + i, 40 + i, 50 + i, 60 + i, 70 + i, 80 + i]);
    const options = { temperature: 0, maxTokens: 40, ignoreEos: true };
    const seen: number[] = [];
    const runs = prompts.map(async (p) => {
      const tokens: number[] = [];
      for await (const step of target.stream(p, { ...options, draftModel: draft, draftTokens })) {
        if (step.type === "token") tokens.push(step.token);
        seen.push(target.engine.stats.draftKvBytes);
      }
      return tokens;
    });
    const drafted = await Promise.all(runs);
    const stats = target.engine.stats;
    assert.ok(stats.draftTokensProposed > 0, "requests drafted");
    assert.ok(stats.draftFallbacks >= 1, `the pool ran short and requests went on without drafting (fallbacks ${stats.draftFallbacks})`);
    assert.equal(stats.draftKvBytes, planned, "the draft pool is its planned size");
    assert.ok(Math.max(...seen) <= planned, `the draft pool held ${Math.max(...seen)} bytes, over its planned ${planned}`);
    assert.ok(stats.draftKvPeakBytes > 0 && stats.draftKvPeakBytes <= planned, `draft rows in use at once: ${stats.draftKvPeakBytes} bytes of ${planned}`);
    // the judge: plain greedy decoding of the target, one request at a time, no draft
    for (const [i, p] of prompts.entries()) {
      assert.deepEqual(drafted[i], (await target.generate(p, options)).completionTokens, `request ${i}: speculative tokens differ from greedy`);
    }
  } finally {
    target.dispose();
    draft.dispose();
  }
});

test("the server holds a request's speculative.n_max to its draftTokens (what the draft's pool is planned for): a round proposes at most that many", { skip }, async () => {
  const model = await loadModel(await ensureRandomModel(tinyLlama), { contextSize: 128, threads: 1 });
  // the model drafting for itself: every round proposes as many tokens as it may
  const draft = await loadModel(await ensureRandomModel(tinyLlama), { contextSize: 128, threads: 1 });
  const server = await startServer(model, { port: 0, draftModel: draft, draftTokens: 2 });
  try {
    const body = { prompt: [1, 5, 6, 7], n_predict: 12, temperature: 0, "speculative.n_max": 50 };
    const r = await fetch(`${server.url}/completion`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: AbortSignal.timeout(60_000) });
    assert.equal(r.status, 200, await r.clone().text());
    const reply = (await r.json()) as { tokens_predicted: number; content: string };
    assert.equal(reply.tokens_predicted, 12);
    const s = model.engine.stats;
    assert.ok(s.draftRounds > 0 && s.draftTokensProposed > 0, `it drafted (${s.draftTokensProposed} tokens in ${s.draftRounds} rounds)`);
    // unclamped, the first round alone proposed 11 (n_max 50, at most the 12 tokens to generate less the first)
    assert.ok(s.draftTokensProposed <= 2 * s.draftRounds, `${s.draftTokensProposed} tokens proposed in ${s.draftRounds} rounds: more than 2 a round`);
    // the same request without n_max greedy-decodes to the same text (speculation changes no token)
    const plain = await fetch(`${server.url}/completion`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ...body, "speculative.n_max": 0 }), signal: AbortSignal.timeout(60_000) });
    assert.equal(((await plain.json()) as { content: string }).content, reply.content);
  } finally {
    await server.close(1000);
    model.dispose();
    draft.dispose();
  }
});
