import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { loadModel } from "../src/index.js";
import type { Backend } from "../src/kernels/backend.js";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { createWebGPUBackend } from "../src/kernels/webgpu/index.js";
import { openModel, runPass } from "../src/models/index.js";
import { GGMLType, typeName } from "../src/tensor/dtypes.js";
import { ensureRandomModel, tinyGpt2, tinyLlama, tinyQwen3 } from "../src/testing/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

// Whole models on the WebGPU backend, through the same model code and engine as the CPU
// backends: llama.cpp's golden stories260K tokens, random models' logits against the reference
// backend for every weight type the backend multiplies, batched and concurrent requests.
// Without an adapter (no GPU, no software Vulkan) every test here is skipped.

let noAdapter: string | false = false;
try {
  (await createWebGPUBackend()).dispose();
} catch (e) {
  const message = (e as Error).message;
  if (!message.includes("no WebGPU adapter found")) throw e;
  noAdapter = `no WebGPU adapter: ${message}`;
}

const MODEL = "models/stories260K.gguf";
const EXPECTED = "models/stories260K.expected.json";
const skipGolden = noAdapter || skipWithoutShared(MODEL) || skipWithoutShared(EXPECTED);
const golden = () => JSON.parse(readFileSync(sharedFile(EXPECTED)!, "utf8")).cases as { prompt: string; promptTokens: number[]; completionTokens: number[] }[];

const dir = mkdtempSync(join(tmpdir(), "tsllm-webgpu-models-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("stories260K greedy tokens on webgpu equal llama.cpp's golden output", { skip: skipGolden }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { backend: "webgpu" });
  try {
    assert.equal(model.backend.name, "webgpu");
    for (const c of golden()) {
      const r = await model.generate(c.prompt, { temperature: 0, maxTokens: c.completionTokens.length });
      assert.deepEqual(r.promptTokens, c.promptTokens, `prompt tokens for ${JSON.stringify(c.prompt)}`);
      assert.deepEqual(r.completionTokens, c.completionTokens, `completion tokens for ${JSON.stringify(c.prompt)}`);
    }
  } finally {
    model.dispose();
  }
});

test("batched and concurrent requests on webgpu each equal their solo run; the synchronous forward says why it cannot run", { skip: skipGolden }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { backend: "webgpu", contextSize: 128 });
  try {
    const prompts = ["Lily", "Once upon a time", "The little dog ran to the park and saw a big"];
    for (const options of [{ temperature: 0, maxTokens: 30 }, { temperature: 0.9, topK: 20, seed: 7, maxTokens: 30 }]) {
      const solo = [];
      for (const p of prompts) solo.push(await model.generate(p, options));
      const batch = await model.generate(prompts, options);
      const concurrent = await Promise.all(prompts.map((p) => model.generate(p, options)));
      for (const [i, p] of prompts.entries()) {
        assert.deepEqual(batch[i]!.completionTokens, solo[i]!.completionTokens, `batched ${JSON.stringify(p)} ${JSON.stringify(options)}`);
        assert.deepEqual(concurrent[i]!.completionTokens, solo[i]!.completionTokens, `concurrent ${JSON.stringify(p)} ${JSON.stringify(options)}`);
      }
    }
  } finally {
    model.dispose();
  }
  const backend = await createWebGPUBackend();
  try {
    const lm = openModel(sharedFile(MODEL)!).build(backend);
    assert.throws(() => lm.forward([1, 2], lm.createCache(16)), /webgpu backend reads its results asynchronously: this call cannot wait for them/);
  } finally {
    backend.dispose();
  }
});

/** the logits of every prompt token, computed by the model on `backend` */
async function logitsOn(path: string, backend: Backend, tokens: number[]): Promise<Float32Array> {
  const lm = openModel(path).build(backend);
  const [logits] = await runPass(lm.passBatch([{ tokens, cache: lm.createCache(64), logits: "all" }]));
  return logits!;
}

const TYPES = [GGMLType.F32, GGMLType.F16, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_K, GGMLType.Q6_K];
const CASES = [
  ...TYPES.map((weightType) => ({ name: `llama ${typeName(weightType)}`, spec: { ...tinyLlama, weightType, seed: 5 } })),
  { name: "qwen3 F32 (per-head Q/K norms, neox RoPE)", spec: { ...tinyQwen3, seed: 6 } },
  { name: "gpt2 F32 (LayerNorm, GELU, learned positions)", spec: { ...tinyGpt2, seed: 7 } },
];

for (const { name, spec } of CASES) {
  test(`random ${name}: every prompt token's logits on webgpu within 1e-3 of the reference backend's`, { skip: noAdapter || skipWithoutShared(MODEL) }, async () => {
    const path = await ensureRandomModel(spec, dir);
    const tokens = [1, 17, 250, 3, 99, 400, 12, 5, 77, 300, 2, 64];
    const reference = createReferenceBackend(), gpu = await createWebGPUBackend();
    try {
      const expected = await logitsOn(path, reference, tokens), got = await logitsOn(path, gpu, tokens);
      assert.equal(got.length, expected.length);
      let worst = 0, scale = 1;
      for (let i = 0; i < got.length; i++) {
        worst = Math.max(worst, Math.abs(got[i]! - expected[i]!));
        scale = Math.max(scale, Math.abs(expected[i]!));
      }
      assert.ok(worst <= 1e-3 * scale, `${name}: max |logit difference| ${worst} over 1e-3 x ${scale}`);
    } finally {
      reference.dispose();
      gpu.dispose();
    }
  });
}
