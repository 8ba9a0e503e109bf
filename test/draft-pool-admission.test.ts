import assert from "node:assert/strict";
import { test } from "node:test";
import { loadModel, type Model } from "../src/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

const skip = skipWithoutShared("models/stories260K.gguf");
const MODEL = sharedFile("models/stories260K.gguf") ?? "";

/*
 * A draft model whose KV pool is planned (Engine.planDraftCache, what `tsllm serve --draft-model`
 * and `tsllm generate` do) has its own room beside the target's pool, the memory plan counting it
 * apart (planDraft); a round it has no room for decodes plainly. Its rows must not be charged to
 * the target's pool too. stories260K drafting for itself: 5 layers x 4 KV heads x 8 x (K and V) x
 * 4 bytes = 1,280 bytes a token, 20,480 a block of 16, for both models (by hand from its shape).
 */
const BLOCK_BYTES = 16 * 5 * 4 * 8 * 2 * 4;

/** four greedy requests of 8 prompt tokens and 40 generated, drafting 4 tokens a round; each request's tokens alongside */
async function runFour(target: Model, draft: Model): Promise<{ drafted: number[][]; alone: number[][] }> {
  const prompts = Array.from({ length: 4 }, (_, i) => [1, 20 + i, 30 + i, 40 + i, 50 + i, 60 + i, 70 + i, 80 + i]);
  const options = { temperature: 0, maxTokens: 40, ignoreEos: true };
  const drafted = await Promise.all(prompts.map(async (p) => {
    const tokens: number[] = [];
    for await (const step of target.stream(p, { ...options, draftModel: draft, draftTokens: 4 })) if (step.type === "token") tokens.push(step.token);
    return tokens;
  }));
  // the judge: plain greedy decoding of the target, each request alone, no draft
  const alone: number[][] = [];
  for (const p of prompts) alone.push((await target.generate(p, options)).completionTokens);
  return { drafted, alone };
}

for (const admission of ["reserve", "preempt"] as const) {
  test(`admission "${admission}": speculative requests whose own rows fit the target's pool all run at once when the draft's pool is planned (its rows are not charged to the target's pool too); greedy tokens as alone`, { skip, timeout: 240_000 }, async () => {
    // each request's own worst case, by hand: 8 + 40 positions = 3 blocks, plus a proposal of 4 + 1
    // past them (1 block) and the one it may start mid-block (1): 5 blocks; 4 requests, 20 blocks.
    // Its draft cache (8 + 40 + 4 + 1 = 53 positions, 4 blocks of the same bytes) was charged too:
    // 9 blocks a request, 2 at a time in reserve mode, and preemptions in preempt mode
    const target = await loadModel(MODEL, { contextSize: 128, maxSequences: 8, kvCacheBytes: 20 * BLOCK_BYTES, admission, threads: 1 });
    const draft = await loadModel(MODEL, { contextSize: 128, threads: 1 });
    try {
      // as serve plans it: 128 + 4 + 1 = 133 positions -> 9 blocks (fewer than the 20 of kvCacheBytes)
      target.engine.planDraftCache(draft.languageModel, 4);
      assert.deepEqual(target.engine.draftPoolPlan(draft.languageModel), { tokens: 144, bytes: 9 * BLOCK_BYTES });
      const { drafted, alone } = await runFour(target, draft);
      const s = target.engine.stats;
      assert.ok(s.draftTokensProposed > 0, "requests drafted");
      assert.equal(s.peakStepSequences, 4, `all four requests ran in one step (at most ${s.peakStepSequences} did)`);
      assert.equal(s.preemptions, 0, `no request was preempted (${s.preemptions} preemptions)`);
      assert.ok(s.draftKvPeakBytes <= 9 * BLOCK_BYTES, `the draft's rows stayed in its planned pool (${s.draftKvPeakBytes} bytes)`);
      for (const [i, t] of drafted.entries()) assert.deepEqual(t, alone[i], `request ${i}: speculative tokens differ from greedy alone`);
    } finally {
      target.dispose();
      draft.dispose();
    }
  });
}

test("a library caller's draft model without a plan (its pool grows within kvCacheBytes) still has its rows charged to the target's pool: two at a time in reserve mode", { skip, timeout: 240_000 }, async () => {
  const target = await loadModel(MODEL, { contextSize: 128, maxSequences: 8, kvCacheBytes: 20 * BLOCK_BYTES, admission: "reserve", threads: 1 });
  const draft = await loadModel(MODEL, { contextSize: 128, threads: 1 });
  try {
    const { drafted, alone } = await runFour(target, draft);
    const s = target.engine.stats;
    // 9 blocks a request with its draft cache (above): 2 of 20 at a time
    assert.equal(s.peakStepSequences, 2, `two requests at a time (at most ${s.peakStepSequences} ran together)`);
    // the draft's rows in use and the target's within kvCacheBytes together
    assert.ok(s.draftKvPeakBytes <= 2 * 4 * BLOCK_BYTES, `draft rows in use at once: ${s.draftKvPeakBytes} bytes`);
    for (const [i, t] of drafted.entries()) assert.deepEqual(t, alone[i], `request ${i}: speculative tokens differ from greedy alone`);
  } finally {
    target.dispose();
    draft.dispose();
  }
});

test("a speculative request whose own rows fit the target's pool is not refused for its draft's cache when the draft's pool is planned; unplanned, it is, naming the draft's cache", { skip, timeout: 240_000 }, async () => {
  // own worst case: 8 + 112 = 120 positions (8 blocks) + 2 for the proposal = 10 of 12 blocks;
  // with the draft's cache (8 + 112 + 4 + 1 = 125 positions, 8 blocks) 18: past the pool
  const prompt = [1, 20, 30, 40, 50, 60, 70, 80];
  const options = { temperature: 0, maxTokens: 112, ignoreEos: true };
  for (const planned of [true, false]) {
    const target = await loadModel(MODEL, { contextSize: 128, kvCacheBytes: 12 * BLOCK_BYTES, threads: 1 });
    const draft = await loadModel(MODEL, { contextSize: 128, threads: 1 });
    try {
      if (planned) {
        target.engine.planDraftCache(draft.languageModel, 4);
        const r = await target.generate(prompt, { ...options, draftModel: draft, draftTokens: 4 });
        assert.deepEqual(r.completionTokens, (await target.generate(prompt, options)).completionTokens, "speculative tokens differ from greedy");
        // in a pool of 9 blocks its own 10 do not fit: refused for them alone, naming no draft cache
        const small = await loadModel(MODEL, { contextSize: 128, kvCacheBytes: 9 * BLOCK_BYTES, threads: 1 });
        try {
          small.engine.planDraftCache(draft.languageModel, 4);
          await assert.rejects(small.generate(prompt, { ...options, draftModel: draft, draftTokens: 4 }), /needs room for up to 160 tokens of KV cache \(prompt 8 \+ maxTokens 112, a speculative proposal\) but the KV cache holds 144 tokens/);
        } finally {
          small.dispose();
        }
      } else {
        await assert.rejects(target.generate(prompt, { ...options, draftModel: draft, draftTokens: 4 }), /needs room for up to 288 tokens of KV cache \(prompt 8 \+ maxTokens 112, a speculative proposal and the draft model's KV cache\) but the KV cache holds 192 tokens/);
      }
    } finally {
      target.dispose();
      draft.dispose();
    }
  }
});
