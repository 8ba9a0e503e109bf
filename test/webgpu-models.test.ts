import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { Engine } from "../src/engine/index.js";
import { loadModel } from "../src/index.js";
import type { Backend, DeviceArray, MatmulEpilogue } from "../src/kernels/backend.js";
import type { KVCacheTypes } from "../src/kernels/reference/index.js";
import type { Tensor } from "../src/tensor/tensor.js";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { createWebGPUBackend } from "../src/kernels/webgpu/index.js";
import { openModel, runPass } from "../src/models/index.js";
import { GGMLType, typeName } from "../src/tensor/dtypes.js";
import { ensureRandomModel, tinyGpt2, tinyLlama, tinyQwen3 } from "../src/testing/index.js";
import { device, hostArray } from "./helpers/host-array.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";
import { skipWithoutWebGPUAdapter } from "./helpers/webgpu-adapter.js";

// Whole models on the WebGPU backend, through the same model code and engine as the CPU
// backends: llama.cpp's golden stories260K tokens, random models' logits against the reference
// backend for every weight type the backend multiplies, batched and concurrent requests.
// Without an adapter (no GPU, no software Vulkan) every test here is skipped.

const noAdapter = await skipWithoutWebGPUAdapter();

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

const maxRelative = (got: Float32Array, expected: Float32Array): number => {
  let worst = 0, scale = 0;
  for (let i = 0; i < got.length; i++) {
    worst = Math.max(worst, Math.abs(got[i]! - expected[i]!));
    scale = Math.max(scale, Math.abs(expected[i]!));
  }
  return worst / Math.max(scale, 1);
};

test("stories260K with an f16 KV cache: greedy tokens on webgpu equal the wasm backend's with the same cache", { skip: skipGolden }, async () => {
  const options = { cacheTypeK: "f16", cacheTypeV: "f16", contextSize: 128 } as const;
  const gpu = await loadModel(sharedFile(MODEL)!, { ...options, backend: "webgpu" });
  const cpu = await loadModel(sharedFile(MODEL)!, { ...options, backend: "wasm", threads: 1 });
  try {
    for (const c of golden()) {
      const want = await cpu.generate(c.prompt, { temperature: 0, maxTokens: c.completionTokens.length });
      const got = await gpu.generate(c.prompt, { temperature: 0, maxTokens: c.completionTokens.length });
      assert.deepEqual(got.completionTokens, want.completionTokens, `completion tokens for ${JSON.stringify(c.prompt)}`);
    }
  } finally {
    gpu.dispose();
    cpu.dispose();
  }
});

test("a random Llama (F32, head dim 64) on every KV cache type: webgpu's logits within 1e-3 of the reference backend's with the same cache", { skip: noAdapter || skipWithoutShared(MODEL) }, async () => {
  const path = await ensureRandomModel({ ...tinyLlama, seed: 8 }, dir);
  const tokens = [1, 17, 250, 3, 99, 400, 12, 5, 77, 300, 2, 64];
  const reference = createReferenceBackend(), gpu = await createWebGPUBackend();
  try {
    for (const types of [{ k: "f16", v: "f16" }, { k: "q8_0", v: "q8_0" }, { k: "q4_0", v: "q4_0" }, { k: "q8_0", v: "f16" }, { k: "f32", v: "q4_0" }] as const) {
      const err = maxRelative(await logitsOn(path, gpu, tokens, types), await logitsOn(path, reference, tokens, types));
      assert.ok(err <= 1e-3, `cache ${types.k}/${types.v}: max |logit difference| ${err}`);
    }
  } finally {
    reference.dispose();
    gpu.dispose();
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

// The engine promises a request the same answer in a batch as alone. On webgpu a matmul of 16 or
// more rows takes the tiled kernel, of fewer the one-row kernel: both must add a row's products in
// the same order (32-column chunks folded in column order), or a prompt prefilled beside others,
// or a token decoded beside 15 others, gets logits other than alone in the last bits. And a
// prompt's chunks (cut by the batch's share of maxBatchTokens) must all take one attention kernel:
// the tiled one from 2 queries, not the scores-buffer one for chunks of 2-7. A quantized type
// tiles only when tiledMatmulTypes names it: Q4_K so, on a backend of its own.
for (const { weightType, tiledMatmulTypes } of [{ weightType: GGMLType.F32 }, { weightType: GGMLType.F16 }, { weightType: GGMLType.Q4_K, tiledMatmulTypes: ["F32", "Q4_K"] }]) {
  test(`random llama ${typeName(weightType)} on webgpu${tiledMatmulTypes ? ` (tiledMatmulTypes ${tiledMatmulTypes.join(", ")})` : ""}: 18 requests batched get the logprobs of each one alone, bit for bit (prefill and decode of 16+ rows through the tiled matmul)`, { skip: noAdapter || skipWithoutShared(MODEL) }, async () => {
    const path = await ensureRandomModel({ ...tinyLlama, weightType, seed: 21 }, dir);
    const model = await loadModel(path, { backend: "webgpu", contextSize: 128, warmup: false });
    const own = tiledMatmulTypes ? await createWebGPUBackend({ tiledMatmulTypes }) : null;
    const languageModel = own ? openModel(path).build(own) : model.languageModel;
    const storage = own ?? model.backend;
    const main = own ? new Engine(languageModel, model.tokenizer, { contextSize: 128, storage }) : model.engine;
    try {
      const params = (promptTokens: number[]) => ({
        promptTokens, decoding: { kind: "sample", n: 1 } as const, sampling: { temperature: 0, seed: 0 }, maxTokens: 3, stop: [], stopTokens: [], ignoreEos: true, topLogprobs: 3, promptLogprobs: undefined,
      });
      // prompts of 3 to 9 tokens (alone each one stays on the one-row matmul) and of 19 to 51 (cut
      // into other chunks in a batch than alone)
      const prompts = Array.from({ length: 18 }, (_, i) => Array.from({ length: i % 2 === 0 ? 3 + (i % 7) : 12 + ((i * 7) % 40) }, (_, j) => 1 + ((i * 37 + j * 101) % 500)));
      const alone = [];
      const answer = (o: Awaited<ReturnType<typeof model.engine.submit>["outcome"]>) => ({ tokens: o.choices[0]!.completionTokens, logprobs: o.choices[0]!.logprobs });
      for (const p of prompts) alone.push(answer(await main.submit(params(p)).outcome));
      const rows = main.stats.rowsComputed;
      const batched = await Promise.all(prompts.map((p) => main.submit(params(p)).outcome));
      assert.ok(main.stats.peakStepSequences >= 16, `${main.stats.peakStepSequences} sequences in a step`);
      assert.ok(main.stats.rowsComputed > rows);
      for (const [i, o] of batched.entries()) assert.deepEqual(answer(o), alone[i], `request ${i} (${prompts[i]!.length} prompt tokens): batched differs from alone`);
      // request 1 alone (19 prompt tokens in one chunk), and in chunks of at most 16, 7, 4, 2 tokens
      const whole = alone[1]!;
      assert.equal(prompts[1]!.length, 19);
      for (const maxBatchTokens of [16, 7, 4, 2]) {
        const engine = new Engine(languageModel, model.tokenizer, { contextSize: 128, maxBatchTokens, storage });
        try {
          assert.deepEqual(answer(await engine.submit(params(prompts[1]!)).outcome), whole, `maxBatchTokens ${maxBatchTokens}: chunked differs from whole`);
        } finally {
          engine.close();
        }
      }
    } finally {
      if (own) {
        main.close();
        own.dispose();
      }
      model.dispose();
    }
  });
}

/** the logits of every prompt token, computed by the model on `backend` */
async function logitsOn(path: string, backend: Backend, tokens: number[], kvCacheTypes?: KVCacheTypes): Promise<Float32Array> {
  const lm = openModel(path).build(backend, { kvCacheTypes });
  const [logits] = await runPass(lm.passBatch([{ tokens, cache: lm.createCache(64), logits: "all" }]));
  return logits!;
}

/** the logits of every prompt token on the webgpu backend, and every matmul of the pass: its weight, and snapshots of its input and output */
async function tracedLogitsOn(path: string, gpu: Backend, tokens: number[]): Promise<{ logits: Float32Array; matmuls: { w: Tensor; x: Float32Array; out: Float32Array; nTokens: number; epilogue?: MatmulEpilogue }[] }> {
  const snapshot = (a: DeviceArray): DeviceArray => {
    const c = gpu.allocActivations(a.length);
    gpu.copy2d(c, 0, a.length, a, 0, a.length, 1, a.length);
    return c;
  };
  const recorded: { w: Tensor; x: DeviceArray; out: DeviceArray; nTokens: number; epilogue?: MatmulEpilogue }[] = [];
  const matmul = gpu.matmul.bind(gpu);
  // the real kernel runs; the wrapper only copies its operands aside (copy2d is ordered with it)
  gpu.matmul = (out, w, x, nTokens, epilogue) => {
    const xs = snapshot(gpu.view(x, 0, nTokens * w.dims[0]!));
    matmul(out, w, x, nTokens, epilogue);
    recorded.push({ w, x: xs, out: snapshot(gpu.view(out, 0, nTokens * w.dims[1]!)), nTokens, epilogue });
  };
  const logits = await logitsOn(path, gpu, tokens);
  const matmuls = [];
  for (const r of recorded) matmuls.push({ ...r, x: await gpu.read(r.x), out: await gpu.read(r.out) });
  return { logits, matmuls };
}


// A random model with rounded activations (F16, BF16 and the quantized types, whose activations go
// to f16, bf16 or int8 before each matmul) turns the webgpu backend's f32 sums in another order
// (1e-7 relative) into an occasional flipped rounding, which 2 random layers amplify: traced op by
// op, the first divergence is always a jump at one matmul whose input agreed to 5e-7 (Q4_K 1.6e-3,
// Q5_K 1e-3, Q2_K 1.3e-3, logits up to 1.6e-2 off). So every matmul of the pass is checked against
// the reference kernel on the very input the GPU computed (1e-4: the per-op bound), and the logits
// against the reference run within 1e-3 where nothing rounds (F32) and within 5e-2 elsewhere.
const TYPES = [GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K, GGMLType.IQ4_NL, GGMLType.IQ4_XS,
  GGMLType.MXFP4, GGMLType.TQ2_0, GGMLType.TQ1_0, GGMLType.IQ2_XXS, GGMLType.IQ2_XS, GGMLType.IQ2_S, GGMLType.IQ3_XXS, GGMLType.IQ3_S, GGMLType.IQ1_S, GGMLType.IQ1_M];
const CASES = [
  ...TYPES.map((weightType) => ({ name: `llama ${typeName(weightType)}`, spec: { ...tinyLlama, weightType, seed: 5 }, logitsTolerance: weightType === GGMLType.F32 ? 1e-3 : 5e-2 })),
  { name: "qwen3 F32 (per-head Q/K norms, neox RoPE)", spec: { ...tinyQwen3, seed: 6 }, logitsTolerance: 1e-3 },
  { name: "gpt2 F32 (LayerNorm, GELU, learned positions)", spec: { ...tinyGpt2, seed: 7 }, logitsTolerance: 1e-3 },
];

for (const { name, spec, logitsTolerance } of CASES) {
  test(`random ${name}: each matmul of the pass on webgpu equals the reference kernel on its input; the logits within ${logitsTolerance} of the reference backend's`, { skip: noAdapter || skipWithoutShared(MODEL) }, async (t) => {
    const path = await ensureRandomModel(spec, dir);
    const tokens = [1, 17, 250, 3, 99, 400, 12, 5, 77, 300, 2, 64];
    // the reference kernel re-runs each traced matmul on the weights' host bytes: keep them
    const reference = createReferenceBackend(), gpu = await createWebGPUBackend({ keepHostWeights: true });
    try {
      const expected = await logitsOn(path, reference, tokens);
      const { logits, matmuls } = await tracedLogitsOn(path, gpu, tokens);
      assert.ok(matmuls.length >= 5, `${name}: ${matmuls.length} matmuls traced`);
      for (const [i, m] of matmuls.entries()) {
        const want = hostArray(m.out.length);
        reference.matmul(want, m.w, device(m.x), m.nTokens, m.epilogue);
        const err = maxRelative(m.out, want);
        assert.ok(err <= 1e-4, `${name}: matmul ${i} (${m.w.name}, ${typeName(m.w.type)}) ${err} from the reference kernel on the same input`);
      }
      assert.equal(logits.length, expected.length);
      const err = maxRelative(logits, expected);
      t.diagnostic(`${name}: logits ${err.toExponential(2)} from the reference backend's`);
      assert.ok(err <= logitsTolerance, `${name}: max |logit difference| ${err} (relative to max(1, max |logit|)) over ${logitsTolerance}`);
    } finally {
      reference.dispose();
      gpu.dispose();
    }
  });
}

// The types a GGUF file holds but no quantizer here makes (MXFP4 as gpt-oss ships it, the ternary
// TQ1_0 / TQ2_0, the grid i-quants): a user's --backend webgpu run gives the wasm backend's greedy
// tokens (random weights: 2 layers, the prompt prefilled through the 8-token matmul tiles, then
// decoded a token at a time)
test("random llamas of the GGUF-only types generate the wasm backend's greedy tokens on webgpu", { skip: noAdapter || skipWithoutShared(MODEL) }, async (t) => {
  for (const weightType of [GGMLType.MXFP4, GGMLType.TQ2_0, GGMLType.TQ1_0, GGMLType.IQ2_XXS, GGMLType.IQ2_XS, GGMLType.IQ2_S, GGMLType.IQ3_XXS, GGMLType.IQ3_S, GGMLType.IQ1_S, GGMLType.IQ1_M]) {
    const path = await ensureRandomModel({ ...tinyLlama, weightType, seed: 5 }, dir);
    const gpu = await loadModel(path, { backend: "webgpu", contextSize: 64, warmup: false });
    const cpu = await loadModel(path, { backend: "wasm", threads: 1, contextSize: 64, warmup: false });
    try {
      const options = { temperature: 0, maxTokens: 8, ignoreEos: true };
      const want = await cpu.generate("Once upon a time there was", options);
      const got = await gpu.generate("Once upon a time there was", options);
      t.diagnostic(`${typeName(weightType)}: ${JSON.stringify(got.completionTokens)}`);
      assert.deepEqual(got.completionTokens, want.completionTokens, `${typeName(weightType)}: webgpu's tokens`);
    } finally {
      gpu.dispose();
      cpu.dispose();
    }
  }
});
