import assert from "node:assert/strict";
import { test } from "node:test";
import { loadModel } from "../src/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

const MODEL = "models/stories260K.gguf";

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

test("cached decode gives the logits of recomputing the whole sequence", { skip: skipWithoutShared(MODEL) }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { backend: "reference" });
  try {
    const lm = model.languageModel;
    const tokens = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421];
    const prompt = 5;
    // incremental: prefill the prompt, then one token per step through the cache
    const cache = lm.createCache(64);
    const stepLogits = [lm.forward(tokens.slice(0, prompt), cache)];
    for (let i = prompt; i < tokens.length; i++) stepLogits.push(lm.forward([tokens[i]!], cache));
    assert.equal(cache.length, tokens.length);
    // from scratch: the full sequence in one pass, logits for every position
    const full = lm.forward(tokens, lm.createCache(64), { allLogits: true });
    const V = lm.info.vocabSize;
    for (let s = 0; s < stepLogits.length; s++) {
      const pos = prompt - 1 + s;
      const diff = maxAbsDiff(stepLogits[s]!, full.subarray(pos * V, (pos + 1) * V));
      assert.ok(diff < 1e-4, `position ${pos}: cached decode differs from full recompute by ${diff}`);
    }
    // and recomputing each prefix from an empty cache agrees with the cached step
    for (let s = 1; s < stepLogits.length; s += 3) {
      const fresh = lm.forward(tokens.slice(0, prompt + s), lm.createCache(64));
      assert.ok(maxAbsDiff(stepLogits[s]!, fresh) < 1e-4);
    }
  } finally {
    model.dispose();
  }
});

test("a full context is reported before any work, and the cache can be truncated and reused", { skip: skipWithoutShared(MODEL) }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { backend: "reference", contextSize: 8 });
  try {
    const lm = model.languageModel;
    const cache = lm.createCache(8);
    const a = lm.forward([1, 403, 407, 261], cache);
    assert.throws(() => lm.forward([1, 2, 3, 4, 5], cache), /context is full: 4 tokens cached \+ 5 new > contextSize 8/);
    assert.equal(cache.length, 4);
    cache.truncate(2);
    const b = lm.forward([407, 261], cache);
    assert.ok(maxAbsDiff(a, b) < 1e-6);
    const r = await model.generate("Once upon a time", { temperature: 0, maxTokens: 50 });
    assert.equal(r.finishReason, "length");
    assert.equal(r.promptTokens.length + r.completionTokens.length, 8);
  } finally {
    model.dispose();
  }
});
