import assert from "node:assert/strict";
import { test } from "node:test";
import { loadModel, type Model } from "../src/index.js";
import { ensureRandomModel, tinyLlama } from "../src/testing/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL);
const SAMPLING = { temperature: 0.9, topK: 0, topP: 1, minP: 0, maxTokens: 24, ignoreEos: true };

/** choice i of an n-run against solo runs with seed + i on a separate, fresh model (its own full prefill) */
async function checkChoices(path: string, prompt: string | number[], seed: number, n: number): Promise<void> {
  const shared = await loadModel(path, { backend: "reference" });
  const solo = await loadModel(path, { backend: "reference" });
  try {
    // count the token rows the engine's passes compute: the prompt once, then one per generated token but the last
    const before = shared.engine.stats.rowsComputed;
    const r = await shared.generate(prompt, { ...SAMPLING, seed, n, logprobs: 2 });
    const forwarded = shared.engine.stats.rowsComputed - before;
    assert.equal(forwarded, r.promptTokens.length + r.choices!.reduce((s, c) => s + Math.max(0, c.completionTokens.length - 1), 0), "one prefill");
    assert.equal(r.choices!.length, n);
    assert.deepEqual(r.completionTokens, r.choices![0]!.completionTokens);
    assert.equal(r.timings.completionTokens, r.choices!.reduce((s, c) => s + c.completionTokens.length, 0));
    for (let i = 0; i < n; i++) {
      const s = await solo.generate(prompt, { ...SAMPLING, seed: seed + i, logprobs: 2 });
      const c = r.choices![i]!;
      assert.deepEqual(c.completionTokens, s.completionTokens, `choice ${i} = solo with seed ${seed + i}`);
      assert.equal(c.completion, s.completion);
      assert.equal(c.finishReason, s.finishReason);
      assert.deepEqual(c.logprobs, s.logprobs, `choice ${i}: logprobs`);
    }
    // the seeds differ, so the completions should not all coincide
    assert.ok(new Set(r.choices!.map((c) => c.completionTokens.join())).size > 1, "all choices identical");
    // n = 1 is the plain result, with no choices field
    const one = await shared.generate(prompt, { ...SAMPLING, seed, n: 1 });
    const plain = await solo.generate(prompt, { ...SAMPLING, seed });
    assert.deepEqual(one.completionTokens, plain.completionTokens);
    assert.equal(one.choices, undefined);
  } finally {
    shared.dispose();
    solo.dispose();
  }
}

test("random-weight model: n = 4 choices share one prefill and each equals the solo run with seed + i", async () => {
  await checkChoices(await ensureRandomModel(tinyLlama), [1, 5, 9, 300, 301], 7, 4);
});

test("stories260K: n = 3 choices equal solo generations with seeds 42, 43, 44", { skip }, async () => {
  await checkChoices(sharedFile(MODEL)!, "Once upon a time", 42, 3);
});

test("stream tags steps with their choice; bad n and incompatible options are rejected", async () => {
  const model: Model = await loadModel(await ensureRandomModel(tinyLlama), { backend: "reference" });
  try {
    const it = model.stream([1, 5, 9], { ...SAMPLING, maxTokens: 3, seed: 1, n: 2 });
    const seen: number[] = [];
    let r;
    while (!(r = await it.next()).done) if (r.value.token !== undefined) seen.push(r.value.choice!);
    assert.deepEqual(seen, [0, 0, 0, 1, 1, 1]);
    await assert.rejects(model.generate([1, 2], { n: 0 }), /n must be an integer >= 1/);
    await assert.rejects(model.generate([1, 2], { n: 2.5 }), /n must be an integer >= 1/);
    await assert.rejects(model.generate([1, 2], { n: 2, numBeams: 2 }), /cannot be combined with beam search/);
  } finally {
    model.dispose();
  }
});
