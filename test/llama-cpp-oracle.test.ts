import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { GGMLType, typeName } from "../src/tensor/dtypes.js";
import { readGGUFHeader } from "../src/formats/gguf-reader.js";
import { ensureRandomModel, tinyGpt2, tinyLlama, tinyQwen2, tinyQwen3, writeRandomModel, type RandomModelSpec } from "../src/testing/index.js";
import { disposeSharedLlama, llamaCppRun } from "./helpers/llama-cpp-oracle.js";

const SHARED = resolve(dirname(fileURLToPath(import.meta.url)), "..", "../shared");
const STORIES = join(SHARED, "models", "stories260K.gguf");
const EXPECTED = join(SHARED, "models", "stories260K.expected.json");
const VOCABS = ["stories260K.gguf", "../tokenizer-tests/ggml-vocab-starcoder.gguf", "../tokenizer-tests/ggml-vocab-gpt-2.gguf"].map((f) => join(SHARED, "models", f));
const missing = [STORIES, EXPECTED, ...VOCABS].filter((p) => !existsSync(p));
const skip = missing.length > 0 ? `../shared not found: ${missing.join(", ")}` : false;

const dir = mkdtempSync(join(tmpdir(), "tsllm-oracle-"));
test.after(async () => {
  await disposeSharedLlama();
  rmSync(dir, { recursive: true, force: true });
});

function assertDistribution(lp: Float64Array, vocab: number, what: string): void {
  assert.equal(lp.length, vocab, `${what}: vocabulary size`);
  let sum = 0;
  for (const v of lp) {
    assert.ok(Number.isFinite(v), `${what}: every log-prob is finite`);
    sum += Math.exp(v);
  }
  // float32 probabilities summed over the vocabulary
  assert.ok(Math.abs(sum - 1) < 1e-4, `${what}: probabilities sum to ${sum}`);
}

test("llama.cpp's greedy tokens on stories260K match the recorded expectation", { skip }, async () => {
  const expected = JSON.parse(readFileSync(EXPECTED, "utf8")) as { cases: { promptTokens: number[]; completionTokens: number[] }[] };
  const c = expected.cases[0]!;
  const r = await llamaCppRun(STORIES, c.promptTokens, { decodeSteps: 16 });
  assert.deepEqual(r.greedyTokens, c.completionTokens.slice(0, 16));
  assert.equal(r.stepLogprobs.length, 16);
  assertDistribution(r.promptLogprobs, 512, "after the prompt");
  // the greedy token is the argmax of the distribution it was chosen from
  const top = r.promptLogprobs.indexOf(Math.max(...r.promptLogprobs));
  assert.equal(top, r.greedyTokens[0]);
});

const ARCHS: [string, RandomModelSpec][] = [["llama", tinyLlama], ["qwen2", tinyQwen2], ["qwen3", tinyQwen3], ["gpt2", tinyGpt2]];

for (const [arch, spec] of ARCHS) {
  for (const weightType of [GGMLType.F32, GGMLType.Q8_0]) {
    test(`llama.cpp loads a random ${arch} ${typeName(weightType)} model from writeRandomModel`, { skip }, async () => {
      const path = await ensureRandomModel({ ...spec, weightType, seed: 7 }, dir);
      const vocab = readGGUFHeader(spec.tokenizerFrom).metadata.get("tokenizer.ggml.tokens")!.value as string[];
      const r = await llamaCppRun(path, [1, 5, 9, 2], { decodeSteps: 2 });
      assertDistribution(r.promptLogprobs, vocab.length, "after the prompt");
      for (const [i, lp] of r.stepLogprobs.entries()) assertDistribution(lp, vocab.length, `after step ${i}`);
      assert.equal(r.greedyTokens.length, 2);
    });
  }
}

/** every ggml type llama.cpp's CPU backend accepts as a weight matrix */
const WEIGHT_TYPES = [
  GGMLType.F16, GGMLType.BF16, GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q8_0,
  GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K,
];

test("llama.cpp accepts a tiny llama in every weight type (quantized or random quant bits)", { skip }, async () => {
  for (const weightType of WEIGHT_TYPES) {
    const path = join(dir, `every-type-${typeName(weightType)}.gguf`);
    await writeRandomModel(path, { ...tinyLlama, weightType, seed: 3 });
    const r = await llamaCppRun(path, [1, 5, 9], { decodeSteps: 1 });
    assertDistribution(r.promptLogprobs, 512, typeName(weightType));
  }
});

test("ensureRandomModel reuses the cached file for the same spec and keys different specs apart", { skip }, async () => {
  const { statSync } = await import("node:fs");
  const spec = { ...tinyLlama, weightType: GGMLType.Q4_0, seed: 11 };
  const a = await ensureRandomModel(spec, dir);
  const mtime = statSync(a).mtimeMs;
  assert.equal(await ensureRandomModel({ ...spec }, dir), a);
  assert.equal(statSync(a).mtimeMs, mtime);
  assert.notEqual(await ensureRandomModel({ ...spec, seed: 12 }, dir), a);
});
