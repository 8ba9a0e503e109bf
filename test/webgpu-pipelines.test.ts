import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { embed, embeddingsOf, loadEmbeddingModel, loadModel, pipeline, startServer } from "../src/index.js";
import { ggufEntry } from "../src/formats/index.js";
import { tinyGpt2, tinyLlama, writeRandomModel } from "../src/testing/index.js";
import { beamSearch } from "../src/generation/index.js";
import { createWebGPUBackend } from "../src/kernels/webgpu/index.js";
import { PROJECT_ROOT, SHARED, sharedFile, skipWithoutShared } from "./helpers/shared.js";

// The paths that used to call the synchronous forward / encode, on the WebGPU backend (whose
// reads are asynchronous): perplexity (CLI), beam search outside the engine, and the encoder
// pipelines / embeddings (library and CLI) against transformers' outputs (../shared/hf-oracle,
// the tolerances of test/hf-oracle-encoders.test.ts). Skipped without an adapter (SwiftShader here).

let noAdapter: string | false = false;
try {
  (await createWebGPUBackend()).dispose();
} catch (e) {
  const message = (e as Error).message;
  if (!message.includes("no WebGPU adapter found")) throw e;
  noAdapter = `no WebGPU adapter: ${message}`;
}

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const TOL = 1e-4;
const MODEL = "models/stories260K.gguf";
const TEXT = "text/tinystories-valid-30k.txt";
const oracle = (name: string) => `${SHARED}/hf-oracle/${name}`;
const expected = (name: string): Json => JSON.parse(readFileSync(`${oracle(name)}.expected.json`, "utf8"));
const skipOracle = (name: string) => noAdapter || skipWithoutShared(`hf-oracle/${name}.expected.json`);
const cli = (args: string[]) => promisify(execFile)(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, maxBuffer: 1 << 24 });

/**
 * `got` has `want`'s shape, keys and non-number values; returns the largest |got - want| over
 * the numbers (each within tol)
 */
function closeTo(got: unknown, want: unknown, tol: number, path = "$"): number {
  if (typeof want === "number") {
    assert.equal(typeof got, "number", `${path}: expected a number`);
    const d = Math.abs((got as number) - want);
    assert.ok(d <= tol, `${path}: ${got} vs ${want} (tolerance ${tol})`);
    return d;
  }
  if (Array.isArray(want) || ArrayBuffer.isView(want)) {
    const w = Array.from(want as ArrayLike<unknown>), g = Array.from(got as ArrayLike<unknown>);
    assert.equal(g.length, w.length, `${path}: length`);
    return w.reduce<number>((m, x, i) => Math.max(m, closeTo(g[i], x, tol, `${path}[${i}]`)), 0);
  }
  if (want && typeof want === "object") {
    assert.ok(got && typeof got === "object", `${path}: expected an object`);
    assert.deepEqual(Object.keys(got as object).sort(), Object.keys(want).sort(), `${path}: keys`);
    return Object.entries(want).reduce<number>((m, [k, w]) => Math.max(m, closeTo((got as Record<string, unknown>)[k], w, tol, `${path}.${k}`)), 0);
  }
  assert.deepEqual(got, want, path);
  return 0;
}

// SwiftShader runs a prefill pass at about 0.1 s a token on this project's (busy, 2-core) machines,
// so the windows are short and the inputs go through in batches
test("tsllm perplexity --backend webgpu: stories260K within 1e-3 relative of the wasm backend's", { skip: noAdapter || skipWithoutShared(MODEL) || skipWithoutShared(TEXT), timeout: 300_000 }, async (t) => {
  const run = async (backend: string) => JSON.parse((await cli(["perplexity", "--model", sharedFile(MODEL)!, "--file", sharedFile(TEXT)!, "--ctx", "64", "--chunks", "3", "--backend", backend, "--json"])).stdout);
  const gpu = await run("webgpu");
  const cpu = await run("wasm");
  assert.equal(gpu.tokens, cpu.tokens);
  assert.equal(gpu.tokens, 3 * 31);
  const rel = Math.abs(gpu.perplexity - cpu.perplexity) / cpu.perplexity;
  t.diagnostic(`perplexity: webgpu ${gpu.perplexity}, wasm ${cpu.perplexity} (${cpu.tokens} tokens, ${cpu.chunks} windows of 64): relative difference ${rel.toExponential(2)}`);
  assert.ok(rel < 1e-3, `webgpu ${gpu.perplexity} vs wasm ${cpu.perplexity}`);
});

test("beam search outside the engine (beamSearch) runs on webgpu and equals the wasm backend's beams", { skip: noAdapter || skipWithoutShared(MODEL) }, async () => {
  const gpu = await loadModel(sharedFile(MODEL)!, { backend: "webgpu", contextSize: 64 });
  const cpu = await loadModel(sharedFile(MODEL)!, { backend: "wasm", threads: 1, contextSize: 64 });
  try {
    const prompt = cpu.tokenizer.encode("Once upon a time", { addSpecialTokens: true });
    const options = { numBeams: 3, numReturnSequences: 3, maxTokens: 8, endIds: cpu.tokenizer.endOfGenerationIds };
    const a = await beamSearch(gpu.languageModel, prompt, options);
    const b = await beamSearch(cpu.languageModel, prompt, options);
    assert.deepEqual(a.sequences.map((s) => s.tokens), b.sequences.map((s) => s.tokens));
    a.sequences.forEach((s, i) => assert.ok(Math.abs(s.score - b.sequences[i]!.score) < 1e-4));
    // the synchronous forward still says why it cannot run here, and what to call instead
    assert.throws(() => gpu.languageModel.forward(prompt, gpu.languageModel.createCache(16)), /reads its results asynchronously.*forwardAsync/);
  } finally {
    gpu.dispose();
    cpu.dispose();
  }
});

test("pipeline('sentiment-analysis', ..., { backend: 'webgpu' }) = transformers (bert, distilbert, roberta; batches and pairs)", { skip: skipOracle("roberta-sst") || skipOracle("distilbert-sst") || skipOracle("bert-uncased-sst") }, async (t) => {
  for (const name of ["bert-uncased-sst", "distilbert-sst", "roberta-sst"]) {
    const exp = expected(name);
    const clf = await pipeline("sentiment-analysis", oracle(name), { backend: "webgpu" });
    try {
      let worst = closeTo(await clf(exp.cases.map((c: Json) => c.text)), exp.batched.pipeline_batch_size_8, TOL);
      const all = (await clf(exp.cases.map((c: Json) => c.text), { topK: null })) as unknown[];
      exp.cases.forEach((c: Json, i: number) => (worst = Math.max(worst, closeTo(all[i], c.pipeline_top_k_None, TOL))));
      const pairs = (await clf(exp.pairs.map((p: Json) => ({ text: p.text, text_pair: p.text_pair })))) as unknown[];
      exp.pairs.forEach((p: Json, i: number) => (worst = Math.max(worst, closeTo(pairs[i], p.pipeline, TOL))));
      t.diagnostic(`${name}: max score error ${worst.toExponential(2)}`);
    } finally {
      clf.dispose();
    }
  }
});

test("fill-mask and feature-extraction on webgpu = transformers", { skip: skipOracle("bert-uncased-mlm") || skipOracle("bert-chinese-base") }, async (t) => {
  const mlm = expected("bert-uncased-mlm");
  const fill = await pipeline("fill-mask", oracle("bert-uncased-mlm"), { backend: "webgpu" });
  try {
    const got = (await fill(mlm.cases.map((c: Json) => c.text), { topK: 5 })) as unknown[];
    const worst = mlm.cases.reduce((m: number, c: Json, i: number) => Math.max(m, closeTo(got[i], c.pipeline_fill_mask_top_k_5, TOL)), 0);
    t.diagnostic(`bert-uncased-mlm fill-mask: max score error ${worst.toExponential(2)}`);
  } finally {
    fill.dispose();
  }
  const base = expected("bert-chinese-base");
  const fe = await pipeline("feature-extraction", oracle("bert-chinese-base"), { backend: "webgpu" });
  try {
    const got = await fe(base.cases.map((c: Json) => c.text));
    const worst = base.cases.reduce((m: number, c: Json, i: number) => Math.max(m, closeTo(got[i], c.pipeline_feature_extraction, TOL)), 0);
    t.diagnostic(`bert-chinese-base feature-extraction: max hidden-state error ${worst.toExponential(2)}`);
  } finally {
    fe.dispose();
  }
});

test("embeddings on webgpu (embed(), tsllm embed --backend webgpu) = sentence-transformers, 256-token truncation included", { skip: skipOracle("minilm-embed") }, async (t) => {
  const exp = expected("minilm-embed");
  const texts: string[] = exp.cases.map((c: Json) => c.text);
  const model = await loadEmbeddingModel(oracle("minilm-embed"), { backend: "webgpu" });
  try {
    const raw = await embed(model, texts);
    const worst = exp.cases.reduce((m: number, c: Json, i: number) => Math.max(m, closeTo(raw[i], c.embedding_unnormalized, TOL)), 0);
    t.diagnostic(`minilm-embed: max embedding error ${worst.toExponential(2)}`);
  } finally {
    model.dispose();
  }
  const { stdout } = await cli(["embed", "--model", oracle("minilm-embed"), "--input", texts[0]!, "--normalize", "--backend", "webgpu", "--json"]);
  t.diagnostic(`tsllm embed --backend webgpu: max error ${closeTo(JSON.parse(stdout)[0], exp.cases[0].embedding, TOL).toExponential(2)}`);
});

test("tsllm pipeline ner --backend webgpu = transformers' aggregation_strategy=simple", { skip: skipOracle("bert-ner") }, async (t) => {
  const exp = expected("bert-ner");
  const c = exp.cases[0];
  const { stdout } = await cli(["pipeline", "ner", "--model", oracle("bert-ner"), "--input", c.text, "--aggregation-strategy", "simple", "--backend", "webgpu", "--json"]);
  t.diagnostic(`bert-ner simple: max score error ${closeTo(JSON.parse(stdout)[0], c.pipeline_simple, TOL).toExponential(2)}`);
});

test("speculative decoding on the engine with a webgpu draft model (its passes awaited) gives the greedy tokens", { skip: noAdapter || skipWithoutShared(MODEL) }, async () => {
  const target = await loadModel(sharedFile(MODEL)!, { backend: "webgpu", contextSize: 64 });
  const draft = await loadModel(sharedFile(MODEL)!, { backend: "webgpu", contextSize: 64, quantize: "q4_0" });
  try {
    const plain = await target.generate("Once upon a time", { temperature: 0, maxTokens: 10 });
    const spec = await target.generate("Once upon a time", { temperature: 0, maxTokens: 10, draftModel: draft, draftTokens: 3 });
    assert.deepEqual(spec.completionTokens, plain.completionTokens);
    assert.ok(spec.speculative && spec.speculative.drafted > 0, JSON.stringify(spec.speculative));
  } finally {
    target.dispose();
    draft.dispose();
  }
});

test("POST /v1/embeddings on a webgpu embedding model = sentence-transformers", { skip: skipOracle("minilm-embed") }, async () => {
  const exp = expected("minilm-embed");
  const model = await loadEmbeddingModel(oracle("minilm-embed"), { backend: "webgpu" });
  const server = await startServer(model, { port: 0 });
  try {
    const texts: string[] = exp.cases.slice(0, 3).map((c: Json) => c.text);
    const r = await fetch(`${server.url}/v1/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: texts, encoding_format: "float" }) });
    assert.equal(r.status, 200);
    const body = (await r.json()) as { data: { index: number; embedding: number[] }[] };
    body.data.forEach((d, i) => closeTo(d.embedding, exp.cases[i].embedding_unnormalized, TOL));
  } finally {
    await server.close(1000);
    model.dispose();
  }
});

// Decoder embeddings (embeddingsOf a generative model; test/decoder-embeddings.test.ts holds them
// to llama.cpp's on the CPU) on webgpu against the wasm backend's, per text max |Δ| / ||v||:
// measured 1.4e-7 to 3.1e-7 for the F32 llama and qwen3, 3e-8 for Q8_0 and Q4_K, stories260K
// 2.2e-7, and 1.1e-5 for GPT-2 (its GELU's f16 table lookup flips an index now and then), on
// lavapipe (shader-f16) and SwiftShader (none) alike; the bound is decoder-embeddings' 3e-5.
test("decoder embeddings (embeddingsOf a llama with mean pooling, a GPT-2's last token) on webgpu = the wasm backend's within 3e-5 of ||v||", { skip: noAdapter || skipWithoutShared(MODEL) }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-webgpu-embed-"));
  const texts = ["Once upon a time", "The little dog ran to the park and played with a red ball all day.", "hi"];
  try {
    for (const [name, spec, pooling] of [["llama", tinyLlama, "mean"], ["gpt2", tinyGpt2, "lasttoken"]] as const) {
      const path = join(dir, `${name}.gguf`);
      await writeRandomModel(path, { ...spec, std: 0.08, extraMetadata: name === "llama" ? [["llama.pooling_type", ggufEntry.u32(1)]] : [] });
      const gpu = embeddingsOf(await loadModel(path, { backend: "webgpu", contextSize: 64, warmup: false }));
      const cpu = embeddingsOf(await loadModel(path, { backend: "wasm", contextSize: 64, warmup: false }));
      try {
        assert.equal(gpu.pooling, pooling);
        const want = await cpu.embed(texts, { normalize: false }), got = await gpu.embed(texts, { normalize: false });
        const errors = want.map((w, i) => {
          let m = 0;
          for (let j = 0; j < w.length; j++) m = Math.max(m, Math.abs(got[i]![j]! - w[j]!));
          return m / Math.hypot(...w);
        });
        t.diagnostic(`${name}: max |Δ| / ||v|| per text ${errors.map((e) => e.toExponential(1)).join(", ")}`);
        for (const e of errors) assert.ok(e <= 3e-5, `${name}: ${errors.join(", ")}`);
      } finally {
        gpu.dispose();
        cpu.dispose();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
