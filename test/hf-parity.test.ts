import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { openModel } from "../src/models/open.js";
import { GGMLType } from "../src/tensor/dtypes.js";
import { Rng, tinyGpt2, tinyLlama, tinyQwen2, tinyQwen3, writeRandomModel, type RandomModelSpec } from "../src/testing/index.js";
import { writeRandomHFModel, type RandomHFOptions } from "../src/testing/random-hf-model.js";
import { skipWithoutShared } from "./helpers/shared.js";
import { logSoftmax } from "./helpers/logprobs.js";

/*
 * A Hugging Face folder and a GGUF holding the same random weights must be the same model:
 * next-token log-probabilities over the whole vocabulary agree within 1e-4 after a prompt and
 * after each decode step. The GGUF side is written by writeRandomModel, whose files
 * llama-cpp-parity.test.ts checks against llama.cpp, so this ties the folder path (safetensors
 * reader, name mapping, Llama Q/K permutation, GPT-2 Conv1D transposition, config.json) to
 * llama.cpp's numbers.
 */
const TOLERANCE = 1e-4;
const dir = mkdtempSync(join(tmpdir(), "tsllm-hf-parity-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  const la = logSoftmax(a), lb = logSoftmax(b);
  let m = 0;
  for (let i = 0; i < la.length; i++) m = Math.max(m, Math.abs(la[i]! - lb[i]!));
  return m;
}

async function compare(name: string, spec: RandomModelSpec, hf: RandomHFOptions): Promise<void> {
  const gguf = join(dir, `${name}.gguf`);
  const folder = join(dir, name);
  await writeRandomModel(gguf, spec);
  await writeRandomHFModel(folder, spec, hf);
  const a = openModel(gguf);
  const b = openModel(folder, { tokenizer: a.tokenizer });
  assert.equal(b.format, "hf");
  const be = createReferenceBackend();
  try {
    const ma = a.build(be), mb = b.build(be);
    assert.deepEqual({ ...mb.info, parameterCount: 0 }, { ...ma.info, parameterCount: 0 });
    const rng = new Rng(3);
    const prompt = Array.from({ length: 8 }, () => rng.u32() % ma.info.vocabSize);
    const ca = ma.createCache(16), cb = mb.createCache(16);
    let la = ma.forward(prompt, ca), lb = mb.forward(prompt, cb);
    const diffs = [maxAbsDiff(la, lb)];
    for (let step = 0; step < 4; step++) {
      const tok = rng.u32() % ma.info.vocabSize;
      la = ma.forward([tok], ca);
      lb = mb.forward([tok], cb);
      diffs.push(maxAbsDiff(la, lb));
    }
    assert.ok(Math.max(...diffs) < TOLERANCE, `${name}: max |Δ logprob| per step ${diffs.map((d) => d.toExponential(1)).join(", ")}`);
  } finally {
    be.dispose();
  }
}

const STD = 0.05;
const skipStories = skipWithoutShared("models/stories260K.gguf");
const skipStarcoder = skipWithoutShared("tokenizer-tests/ggml-vocab-starcoder.gguf");
const skipGpt2 = skipWithoutShared("tokenizer-tests/ggml-vocab-gpt-2.gguf");

for (const dtype of ["F32", "BF16"] as const) {
  const weightType = dtype === "F32" ? GGMLType.F32 : GGMLType.BF16;
  // GGUF keeps 1-D tensors in F32, so the folder does too for an exact comparison
  const hf: RandomHFOptions = { dtype, vectorDtype: "F32" };
  test(`HF Llama folder (GQA 4/2, untied, Q/K permuted on load) ${dtype} = GGUF`, { skip: skipStories }, async () => {
    await compare(`llama-${dtype}`, { ...tinyLlama, weightType, std: STD, seed: 21 }, hf);
  });
  test(`HF Qwen2 folder (QKV bias, tied) ${dtype} = GGUF`, { skip: skipStarcoder }, async () => {
    await compare(`qwen2-${dtype}`, { ...tinyQwen2, weightType, std: STD, seed: 22 }, hf);
  });
  test(`HF GPT-2 folder (Conv1D transposed) ${dtype} = GGUF`, { skip: skipGpt2 }, async () => {
    await compare(`gpt2-${dtype}`, { ...tinyGpt2, weightType, std: STD, seed: 23 }, hf);
  });
}

test("HF Qwen3 folder (q/k norm, head_dim 128), sharded, = GGUF", { skip: skipStories }, async () => {
  await compare("qwen3-sharded", { ...tinyQwen3, weightType: GGMLType.F32, std: STD, seed: 24 }, { shardBytes: 1 << 20 });
});
