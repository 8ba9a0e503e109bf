import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { loadModel } from "../src/index.js";
import { RequestError } from "../src/engine/index.js";
import { ensureRandomModel, tinyGpt2, tinyLlama } from "../src/testing/index.js";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

/*
 * What a model's limits do at load and at the end of a generation: a tokenizer that does not
 * match the embedding, a context size above the trained one or above the positions a model can
 * compute, and a completion that stops because the context is full. The models are random-weight
 * GGUF files written by the project's writer (tinyLlama: stories260K's 512-token vocabulary,
 * trained context 256).
 */
const STORIES = "models/stories260K.gguf";
const skip = skipWithoutShared(STORIES);
const dir = mkdtempSync(join(tmpdir(), "tsllm-limits-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const load = async (path: string, options: Parameters<typeof loadModel>[1] = {}) => {
  const warnings: string[] = [];
  const model = await loadModel(path, { threads: 1, ...options, onWarning: (m) => warnings.push(m) });
  return { model, warnings };
};

test("an embedding padded past the tokenizer loads; its padding ids are never sampled, never offered as alternatives, refused in prompts", { skip }, async () => {
  const path = await ensureRandomModel({ ...tinyLlama, vocabSize: 520, seed: 3 }, dir);
  const { model, warnings } = await load(path);
  try {
    assert.equal(model.info.vocabSize, 520);
    assert.equal(model.tokenizer.vocabSize, 512);
    assert.deepEqual(warnings, [], "a little padding is normal (Hugging Face rounds embeddings up)");
    // the bias would make padding id 515 the greedy choice every step if it could be sampled
    const r = await model.generate("Once upon a time", { temperature: 0, maxTokens: 8, ignoreEos: true, logitBias: { 515: 1000 }, logprobs: 5 });
    assert.equal(r.completionTokens.length, 8);
    assert.ok(r.completionTokens.every((t) => t < 512), `sampled ${r.completionTokens}`);
    for (const lp of r.logprobs!) assert.ok(lp.top.every((alt) => alt.token < 512), JSON.stringify(lp.top));
    assert.throws(() => model.submit([1, 515]), (e: unknown) => e instanceof RequestError && /token id 515 is outside the vocabulary \[0, 512\)/.test(e.message));
    // a bias past the logits' rows is refused at submit, before any prefill (it was a failure at the first sampled token)
    assert.throws(() => model.submit("Once", { logitBias: { 520: 1 } }), (e: unknown) => e instanceof RequestError && e.option === "logitBias" && /token id 520 is outside the vocabulary \[0, 520\)/.test(e.message));
    assert.throws(() => model.submit("Once", { stop: ["", "x"] }), (e: unknown) => e instanceof RequestError && e.option === "stop" && /stop strings\[0\]: a stop string must not be empty/.test(e.message));
  } finally {
    model.dispose();
  }
});

test("a tokenizer larger than the embedding is refused at load; one far smaller than it is a warning; both name the file and both sizes", { skip }, async () => {
  const small = await ensureRandomModel({ ...tinyLlama, vocabSize: 500, seed: 3 }, dir);
  await assert.rejects(load(small), (e: Error) => {
    assert.equal(e.message, `${small}: the tokenizer has 512 tokens but the model's embedding (token_embd) has only 500 rows; every token id needs a row (wrong tokenizer for this model?)`);
    return true;
  });
  const large = await ensureRandomModel({ ...tinyLlama, vocabSize: 1024, seed: 3 }, dir);
  const { model, warnings } = await load(large);
  model.dispose();
  assert.deepEqual(warnings, [`${large}: the tokenizer has 512 tokens but the model's embedding has 1024 rows; the 512 ids past the tokenizer are never sampled (wrong tokenizer for this model?)`]);
});

test("a context size above the trained context is one warning naming both; above GPT-2's learned positions it is refused at load", { skip }, async () => {
  const path = await ensureRandomModel({ ...tinyLlama, seed: 3 }, dir);
  const above = await load(path, { contextSize: 300 });
  above.model.dispose();
  assert.deepEqual(above.warnings, [`${path}: context size 300 is more than the 256 tokens the model was trained with; text past 256 tokens may degrade`]);
  const within = await load(path, { contextSize: 256 });
  within.model.dispose();
  assert.deepEqual(within.warnings, []);
  const gpt2 = await ensureRandomModel({ ...tinyGpt2, contextLength: 64, tokenizerFrom: sharedFile(STORIES)!, seed: 3 }, dir);
  await assert.rejects(load(gpt2, { contextSize: 65 }), (e: Error) => {
    assert.equal(e.message, `${gpt2}: context size 65 is more than the 64 positions the model has embeddings for (position_embd); use at most 64`);
    return true;
  });
});

test("a completion cut by the context says so: finishReason length with finishDetail 'context full (N tokens)'; maxTokens says 'maxTokens (N) reached'", { skip }, async () => {
  const path = await ensureRandomModel({ ...tinyLlama, seed: 3 }, dir);
  const { model } = await load(path, { contextSize: 24 });
  try {
    const full = await model.generate("Once upon a time", { temperature: 0, maxTokens: 100, ignoreEos: true, n: 2 });
    assert.equal(full.finishReason, "length");
    assert.equal(full.finishDetail, "context full (24 tokens)");
    assert.equal(full.promptTokens.length + full.completionTokens.length, 24);
    assert.deepEqual(full.choices!.map((c) => c.finishDetail), ["context full (24 tokens)", "context full (24 tokens)"]);
    const capped = await model.generate("Once upon a time", { temperature: 0, maxTokens: 3, ignoreEos: true });
    assert.equal(capped.finishReason, "length");
    assert.equal(capped.finishDetail, "maxTokens (3) reached");
    const beams = await model.generate("Once upon a time", { maxTokens: 100, ignoreEos: true, numBeams: 2 });
    assert.equal(beams.finishDetail, "context full (24 tokens)");
  } finally {
    model.dispose();
  }
});

test("tsllm generate: --ctx-size above the trained context warns once; a full context is finishDetail in --json and a one-line note in text mode", { skip }, async () => {
  const path = await ensureRandomModel({ ...tinyLlama, seed: 3 }, dir);
  const tsllm = (...args: string[]) => spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "generate", "--model", path, "--prompt", "Once upon a time", "--temperature", "0", "--ignore-eos", "--threads", "1", ...args], { cwd: PROJECT_ROOT, encoding: "utf8" });
  const warned = tsllm("--ctx-size", "300", "--max-tokens", "2");
  assert.equal(warned.status, 0, warned.stderr);
  const warnings = warned.stderr.split("\n").filter((l) => l.includes("warning"));
  assert.deepEqual(warnings, [`tsllm: warning: ${path}: context size 300 is more than the 256 tokens the model was trained with; text past 256 tokens may degrade`]);
  assert.doesNotMatch(warned.stderr, /note:/, "maxTokens is not a full context");

  const json = tsllm("--ctx-size", "24", "--max-tokens", "100", "--json");
  assert.equal(json.status, 0, json.stderr);
  const out = JSON.parse(json.stdout);
  assert.equal(out.finishReason, "length");
  assert.equal(out.finishDetail, "context full (24 tokens)");
  assert.equal(out.promptTokens.length + out.completionTokens.length, 24);

  const text = tsllm("--ctx-size", "24", "--max-tokens", "100");
  assert.equal(text.status, 0, text.stderr);
  assert.deepEqual(text.stderr.split("\n").filter((l) => l.startsWith("tsllm:")), ["tsllm: note: generation stopped: context full (24 tokens); a larger --ctx-size gives the completion more room"]);
});
