import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { ggufEntry, type GGUFWriteEntry } from "../src/formats/index.js";
import { embeddingsOf, loadModel, startServer } from "../src/index.js";
import { tinyGpt2, tinyLlama, tinyQwen3, writeRandomModel, type RandomModelSpec } from "../src/testing/index.js";
import { LlamaEmbeddingContext } from "node-llama-cpp";
import { disposeSharedLlama, sharedLlama } from "./helpers/llama-cpp-oracle.js";
import { PROJECT_ROOT, SHARED, skipWithoutShared } from "./helpers/shared.js";
import { post, serveStories } from "./helpers/serve.js";

/*
 * Embeddings of a decoder against llama.cpp's own (node-llama-cpp 3.21.1,
 * createEmbeddingContext / getEmbeddingFor on the same GGUF): node-llama-cpp returns the pooled
 * vector (llama_get_embeddings_seq) for a model with a pooling_type, the last token's hidden
 * state for one without, and never normalizes it; tsllm's normalize: false is compared with it
 * element by element, its default (normalized) with it divided by its L2 norm.
 */
/* of the reference vector's L2 norm: llama and qwen3 agree to ~1e-7 of it, gpt2 to ~1e-5 (ggml's GELU reads an f16 table) */
const TOLERANCE = 3e-5;
const skip = skipWithoutShared("models/stories260K.gguf");
const dir = mkdtempSync(join(tmpdir(), "tsllm-decoder-embed-"));
after(async () => { await disposeSharedLlama(); rmSync(dir, { recursive: true, force: true }); });

const TEXTS = ["Once upon a time", "The little dog ran to the park and played with a red ball all day.", "hi"];

const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
};
const unit = (v: readonly number[]) => { const n = Math.hypot(...v); return v.map((x) => x / n); };
const cosine = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) { ab += a[i]! * b[i]!; aa += a[i]! * a[i]!; bb += b[i]! * b[i]!; }
  return ab / Math.sqrt(aa * bb);
};

type LlamaModelOf = Awaited<ReturnType<Awaited<ReturnType<typeof sharedLlama>>["loadModel"]>>;
/**
 * createEmbeddingContext's own context, with llama.cpp's F32 KV cache and its matrix-product
 * attention (tsllm's defaults) instead of F16 and flash attention: node-llama-cpp's public call
 * takes neither option, so its (private) constructor is given a context made with them
 */
async function embeddingContext(lm: LlamaModelOf, contextSize: number, batchSize?: number): Promise<LlamaEmbeddingContext> {
  const context = await lm.createContext({ contextSize, ...(batchSize === undefined ? {} : { batchSize }), threads: 1, flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32", _embeddings: true } as never);
  const Construct = LlamaEmbeddingContext as unknown as new (options: { _llamaContext: unknown }) => LlamaEmbeddingContext;
  return new Construct({ _llamaContext: context });
}

async function againstLlamaCpp(name: string, spec: RandomModelSpec, poolingType: number | undefined, expected: string, t: { diagnostic(m: string): void }): Promise<void> {
  const path = join(dir, `${name}.gguf`);
  await writeRandomModel(path, { ...spec, std: 0.08, extraMetadata: [...(spec.extraMetadata ?? []), ...(poolingType === undefined ? [] : [[`${spec.arch}.pooling_type`, ggufEntry.u32(poolingType)] as [string, GGUFWriteEntry]])] });
  await compare(name, path, expected, t);
}

async function compare(name: string, path: string, expected: string, t: { diagnostic(m: string): void }): Promise<void> {
  const e = embeddingsOf(await loadModel(path, { backend: "reference", contextSize: 64, warmup: false }));
  try {
    assert.equal(e.pooling, expected);
    const llama = await sharedLlama();
    const lm = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
    const ctx = await embeddingContext(lm, 64);
    try {
      const raw = await e.embed(TEXTS, { normalize: false });
      const normalized = await e.embed(TEXTS);
      const diffs: number[] = [];
      for (const [i, text] of TEXTS.entries()) {
        const ref = [...(await ctx.getEmbeddingFor(text)).vector];
        diffs.push(maxDiff(raw[i]!, ref) / Math.hypot(...ref), maxDiff(normalized[i]!, unit(ref)));
      }
      t.diagnostic(`${name}: max |Δ| / ||v|| raw, normalized per text: ${diffs.map((d) => d.toExponential(1)).join(", ")}`);
      assert.ok(Math.max(...diffs) < TOLERANCE, `${name}: ${diffs.join(", ")}`);
      // a batch equals one by one
      for (const [i, text] of TEXTS.entries()) assert.deepEqual((await e.embed([text]))[0], normalized[i], `${name}: input ${i} of the batch`);
    } finally {
      await ctx.dispose();
      await lm.dispose();
    }
  } finally {
    e.dispose();
  }
}

test("llama, pooling_type mean: tsllm's decoder embeddings equal llama.cpp's", { skip }, (t) => againstLlamaCpp("llama-mean", tinyLlama, 1, "mean", t));
test("qwen3, pooling_type last: tsllm's decoder embeddings equal llama.cpp's", { skip }, (t) => againstLlamaCpp("qwen3-last", tinyQwen3, 3, "lasttoken", t));
test("qwen3, pooling_type last and add_eos_token (Qwen3-Embedding's GGUF setup): the EOS is embedded last, as llama.cpp", { skip }, async (t) => {
  await againstLlamaCpp("qwen3-last-eos", { ...tinyQwen3, extraMetadata: [["tokenizer.ggml.add_eos_token", ggufEntry.bool(true)]] }, 3, "lasttoken", t);
  const e = embeddingsOf(await loadModel(join(dir, "qwen3-last-eos.gguf"), { contextSize: 64 }));
  try {
    for (const ids of e.tokenize(TEXTS)) assert.equal(ids.at(-1), e.tokenizer.eosId, "a text ends with EOS");
  } finally {
    e.dispose();
  }
});
test("llama, pooling_type cls: tsllm's decoder embeddings equal llama.cpp's", { skip }, (t) => againstLlamaCpp("llama-cls", tinyLlama, 2, "cls", t));
test("gpt2 without pooling_type: the last token's hidden state, as llama.cpp's", { skip }, (t) => againstLlamaCpp("gpt2-none", tinyGpt2, undefined, "lasttoken", t));

test("stories260K (a trained llama, no pooling_type): the last token's hidden state, as llama.cpp's", { skip }, (t) => compare("stories260K", `${SHARED}/models/stories260K.gguf`, "lasttoken", t));

test("node-llama-cpp's default embedding context (F16 KV cache, flash attention auto) agrees to a cosine >= 0.9999", { skip }, async (t) => {
  const path = join(dir, "qwen3-default.gguf");
  await writeRandomModel(path, { ...tinyQwen3, std: 0.08, extraMetadata: [["qwen3.pooling_type", ggufEntry.u32(3)]] });
  const e = embeddingsOf(await loadModel(path, { contextSize: 64 }));
  try {
    const lm = await (await sharedLlama()).loadModel({ modelPath: path, gpuLayers: 0 });
    const ctx = await lm.createEmbeddingContext({ contextSize: 64, threads: 1 });
    try {
      const ours = await e.embed(TEXTS);
      const cosines: number[] = [];
      for (const [i, text] of TEXTS.entries()) cosines.push(cosine(ours[i]!, (await ctx.getEmbeddingFor(text)).vector));
      t.diagnostic(`cosines: ${cosines.map((c) => c.toFixed(9)).join(", ")}`);
      for (const c of cosines) assert.ok(c >= 0.9999, `cosine ${c}`);
    } finally {
      await ctx.dispose();
      await lm.dispose();
    }
  } finally {
    e.dispose();
  }
});

test("decoder embeddings on the wasm backend: a batch equals one by one, token ids equal their text, bad options are refused", { skip }, async () => {
  const path = join(dir, "llama-wasm.gguf");
  await writeRandomModel(path, { ...tinyLlama, std: 0.08 });
  const e = embeddingsOf(await loadModel(path, { contextSize: 64 }));
  try {
    const batch = await e.embed(TEXTS, { pooling: "mean" });
    for (const [i, text] of TEXTS.entries()) assert.deepEqual((await e.embed([text], { pooling: "mean" }))[0], batch[i], `input ${i}`);
    const ids = e.tokenize([TEXTS[0]!])[0]!;
    assert.equal(ids[0], e.tokenizer.bosId, "a text gets BOS as llama.cpp tokenizes it");
    assert.deepEqual((await e.embed([ids.slice(1)], { pooling: "mean" }))[0], batch[0], "ids without BOS get it");
    assert.deepEqual((await e.embed([ids], { pooling: "mean" }))[0], batch[0], "ids with BOS keep one");
    const cut = await e.embed([TEXTS[1]!], { pooling: "mean", dimensions: 8 });
    assert.equal(cut[0]!.length, 8);
    assert.ok(Math.abs(Math.hypot(...cut[0]!) - 1) < 1e-6, "normalized after the cut");
    await assert.rejects(e.embed(TEXTS, { pooling: "none" as never }), /^OptionError: pooling: expected one of mean, cls, max, mean_sqrt_len, weightedmean, lasttoken, got "none"$/);
    await assert.rejects(e.embed([[e.info.vocabSize]]), /embed: the input: token 0 is 512: token ids are integers in \[0, 512\)/);
  } finally {
    e.dispose();
  }
  const rank = join(dir, "llama-rank.gguf");
  await writeRandomModel(rank, { ...tinyLlama, extraMetadata: [["llama.pooling_type", ggufEntry.u32(4)]] });
  const m = await loadModel(rank, { contextSize: 16 });
  try {
    assert.throws(() => embeddingsOf(m), /llama\.pooling_type is 4 \(rank\): this is a reranker/);
  } finally {
    m.dispose();
  }
});

test("tsllm serve on a generative model answers /v1/embeddings and /embedding with llama.cpp's vectors, beside running generations", { skip }, async (t) => {
  const s = await serveStories({ contextSize: 128 });
  try {
    const lm = await (await sharedLlama()).loadModel({ modelPath: `${SHARED}/models/stories260K.gguf`, gpuLayers: 0 });
    const ctx = await embeddingContext(lm, 64);
    const refs: number[][] = [];
    try {
      for (const text of TEXTS) refs.push([...(await ctx.getEmbeddingFor(text)).vector]);
    } finally {
      await ctx.dispose();
      await lm.dispose();
    }
    // a generation runs while the embeddings are asked for: both answer, the passes queued one after the other
    const generation = post(`${s.url}/v1/completions`, { prompt: "Once upon a time", max_tokens: 24, temperature: 0 });
    const r = await post(`${s.url}/v1/embeddings`, { input: TEXTS, model: "stories260K" });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.object, "list");
    assert.equal(r.json.model, "stories260K");
    const diffs = r.json.data.map((d: { index: number; embedding: number[] }, i: number) => {
      assert.equal(d.index, i);
      return maxDiff(d.embedding, unit(refs[i]!));
    });
    t.diagnostic(`/v1/embeddings against llama.cpp's normalized vectors: max |Δ| ${diffs.map((d: number) => d.toExponential(1)).join(", ")}`);
    for (const d of diffs) assert.ok(d < TOLERANCE, String(d));
    assert.equal(r.json.usage.prompt_tokens, TEXTS.reduce((n, text) => n + s.model.tokenizer.encode(text).length, 0));
    // llama-server's /embedding on a model whose pooling is none: every token's raw vector, the last one llama.cpp's getEmbeddingFor
    const raw = await post(`${s.url}/embedding`, { content: TEXTS[1] });
    assert.equal(raw.status, 200, JSON.stringify(raw.json));
    const rows = raw.json[0].embedding as number[][];
    assert.equal(rows.length, s.model.tokenizer.encode(TEXTS[1]!).length, "one vector per token");
    assert.ok(maxDiff(rows.at(-1)!, refs[1]!) / Math.hypot(...refs[1]!) < TOLERANCE, "the last token's vector is llama.cpp's, not normalized");
    const first = (await s.model.hiddenStates([s.model.tokenizer.encode(TEXTS[1]!)]))[0]!.subarray(0, rows[0]!.length);
    assert.deepEqual(rows[0], Array.from(first), "the first token's hidden state");
    const g = await generation;
    assert.equal(g.status, 200, JSON.stringify(g.json));
    assert.equal(g.json.usage.completion_tokens, 24);
    const tooLong = await post(`${s.url}/v1/embeddings`, { input: "the ".repeat(200) });
    assert.equal(tooLong.status, 400);
    assert.equal(tooLong.json.error.code, "context_length_exceeded");
  } finally {
    await s.close();
  }
});

test("tsllm embed on a decoder GGUF: llama.cpp's vectors, normalized unless --no-normalize", { skip }, async () => {
  const model = `${SHARED}/models/stories260K.gguf`;
  const e = embeddingsOf(await loadModel(model, { contextSize: 64 }));
  let ours: Float32Array[], raw: Float32Array[];
  try {
    ours = await e.embed(TEXTS.slice(0, 2));
    raw = await e.embed(TEXTS.slice(0, 2), { normalize: false, pooling: "mean" });
  } finally {
    e.dispose();
  }
  const cli = (...args: string[]) => {
    const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "embed", "--model", model, ...TEXTS.slice(0, 2).flatMap((x) => ["--input", x]), "--json", "--threads", "1", ...args], { cwd: PROJECT_ROOT, encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout) as number[][];
  };
  // the library's vectors are llama.cpp's (the tests above); the command prints them
  cli().forEach((v, i) => assert.ok(maxDiff(v, ours[i]!) < 1e-6, `input ${i}`));
  cli("--no-normalize", "--pooling", "mean").forEach((v, i) => assert.ok(maxDiff(v, raw[i]!) < 1e-6, `input ${i} raw`));
});

test("a long input runs in chunks through its cache: its vector is llama.cpp's, and any chunking gives the same hidden states", { skip }, async (t) => {
  const path = join(dir, "llama-long.gguf");
  await writeRandomModel(path, { ...tinyLlama, std: 0.08, contextLength: 1024, extraMetadata: [["llama.pooling_type", ggufEntry.u32(1)]] });
  const e = embeddingsOf(await loadModel(path, { contextSize: 1024 }));
  try {
    const long = "Once upon a time there was a little dog who liked to run in the park. ".repeat(40);
    const ids = e.tokenize([long])[0]!;
    assert.ok(ids.length > 600, `${ids.length} tokens: more than one 512-row pass`);
    const whole = await e.model.hiddenStates([ids, ids.slice(0, 9)], 2048);
    for (const passTokens of [512, 100, 7]) assert.deepEqual(await e.model.hiddenStates([ids, ids.slice(0, 9)], passTokens), whole, `passes of ${passTokens} rows`);
    const lm = await (await sharedLlama()).loadModel({ modelPath: path, gpuLayers: 0 });
    const ctx = await embeddingContext(lm, 1024, 1024);
    try {
      const ref = [...(await ctx.getEmbeddingFor(long)).vector];
      const d = maxDiff((await e.embed([long]))[0]!, unit(ref));
      t.diagnostic(`${ids.length} tokens: max |Δ| ${d.toExponential(1)} of the normalized vector`);
      assert.ok(d < TOLERANCE, String(d));
    } finally {
      await ctx.dispose();
      await lm.dispose();
    }
  } finally {
    e.dispose();
  }
});

test("a batch of many inputs shares one KV pool: the KV memory an embed() call allocates is a pass's, not every input's", { skip }, async () => {
  const m = await loadModel(`${SHARED}/models/stories260K.gguf`, { threads: 1, contextSize: 256 });
  const e = embeddingsOf(m);
  // the real backend's allocations, counted: the scratch's and the KV pool's (each KV array is one allocation)
  const backend = (m as unknown as { backend: { allocActivations(n: number): unknown } }).backend;
  const alloc = backend.allocActivations.bind(backend);
  let floats = 0;
  backend.allocActivations = (n: number) => { floats += n; return alloc(n); };
  try {
    const inputs = Array.from({ length: 300 }, (_, i) => `${i}: the little dog ran to the park and played with a red ball all day`);
    const tokens = e.countTokens(inputs).reduce((a, b) => a + b, 0);
    // the scratch grows to a full pass's rows once
    const one = await e.embed(inputs.slice(0, 40));
    floats = 0;
    const all = await e.embed(inputs);
    assert.deepEqual(all[0], one[0], "a vector does not depend on its batch");
    const i = m.info, kvFloatsPerToken = 2 * i.blockCount * i.headCountKv * i.headDim;
    // 300 caches of their own held every input's KV at once: 300 x 16-row blocks at least
    assert.ok(floats < (tokens * kvFloatsPerToken) / 4, `${floats} floats allocated for ${tokens} tokens (${tokens * kvFloatsPerToken} floats of KV in all)`);
    // and no more than the inputs need: one short input, one 16-row block
    floats = 0;
    await e.embed(["hi"]);
    assert.ok(floats <= 16 * kvFloatsPerToken, `${floats} floats allocated for one short input`);
  } finally {
    backend.allocActivations = alloc;
    e.dispose();
  }
});

test("a decoder as a sentence-transformers folder: its Pooling, Normalize module, max_seq_length and prompts, as encode() uses them", { skip: skipWithoutShared("hf-oracle/gpt2-tiny/model.safetensors") }, async () => {
  const plain = `${SHARED}/hf-oracle/gpt2-tiny`;
  const folder = (name: string, modules: string[]) => {
    const f = join(dir, name);
    cpSync(plain, f, { recursive: true });
    writeFileSync(join(f, "modules.json"), JSON.stringify(modules.map((type, idx) => ({ idx, name: String(idx), path: type === "Pooling" ? "1_Pooling" : "", type: `sentence_transformers.models.${type}` }))));
    mkdirSync(join(f, "1_Pooling"));
    writeFileSync(join(f, "1_Pooling", "config.json"), JSON.stringify({ word_embedding_dimension: 32, pooling_mode_mean_tokens: true }));
    writeFileSync(join(f, "sentence_bert_config.json"), JSON.stringify({ max_seq_length: 6, do_lower_case: false }));
    writeFileSync(join(f, "config_sentence_transformers.json"), JSON.stringify({ prompts: { query: "query: " }, default_prompt_name: null }));
    return f;
  };
  const reference = embeddingsOf(await loadModel(plain, { contextSize: 64 }));
  const st = embeddingsOf(await loadModel(folder("gpt2-st", ["Transformer", "Pooling"]), { contextSize: 64 }));
  const normalized = embeddingsOf(await loadModel(folder("gpt2-st-norm", ["Transformer", "Pooling", "Normalize"]), { contextSize: 64 }));
  try {
    assert.equal(reference.pooling, "lasttoken");
    assert.equal(st.pooling, "mean");
    assert.equal(st.maxTokens, 6);
    const texts = ["  hello world  ", "the quick brown fox jumps over the lazy dog"];
    // encode(): stripped, cut to max_seq_length, mean-pooled, not normalized without a Normalize module
    const cut = texts.map((x) => reference.tokenize([x.trim()])[0]!.slice(0, 6));
    const expected = await reference.embed(cut, { pooling: "mean", normalize: false });
    assert.deepEqual(await st.embed(texts), expected);
    assert.deepEqual(await normalized.embed(texts), await reference.embed(cut, { pooling: "mean" }));
    assert.deepEqual(await st.embed(texts, { promptName: "query" }), await st.embed(texts.map((x) => `query: ${x}`)));
  } finally {
    reference.dispose();
    st.dispose();
    normalized.dispose();
  }
});

test("a decoder folder whose Pooling has include_prompt: false pools the text's tokens after the prompt's, as encode()", { skip: skipWithoutShared("hf-oracle/gpt2-tiny/model.safetensors") }, async () => {
  const plain = `${SHARED}/hf-oracle/gpt2-tiny`;
  const f = join(dir, "gpt2-st-exclude");
  cpSync(plain, f, { recursive: true });
  writeFileSync(join(f, "modules.json"), JSON.stringify([["Transformer", ""], ["Pooling", "1_Pooling"]].map(([type, path], idx) => ({ idx, name: String(idx), path, type: `sentence_transformers.models.${type}` }))));
  mkdirSync(join(f, "1_Pooling"));
  writeFileSync(join(f, "1_Pooling", "config.json"), JSON.stringify({ word_embedding_dimension: 32, pooling_mode_mean_tokens: true, include_prompt: false }));
  writeFileSync(join(f, "config_sentence_transformers.json"), JSON.stringify({ prompts: { query: "query: " }, default_prompt_name: null }));
  const reference = embeddingsOf(await loadModel(plain, { contextSize: 64 }));
  const st = embeddingsOf(await loadModel(f, { contextSize: 64 }));
  try {
    const text = "the quick brown fox";
    // GPT-2 adds no special tokens: prompt_length is the prompt's own tokens ("query", ":"), none dropped
    const promptLength = reference.tokenize(["query:"])[0]!.length;
    assert.equal(promptLength, 2);
    const rows = (await reference.tokenEmbeddings([`query: ${text}`]))[0]!.slice(promptLength);
    const expected = rows[0]!.map((_, j) => rows.reduce((s, r) => s + r[j]!, 0) / rows.length);
    const [got] = await st.embed([text], { promptName: "query" });
    got!.forEach((x, j) => assert.ok(Math.abs(x - expected[j]!) < 1e-6, `component ${j}: ${x} vs ${expected[j]}`));
    assert.deepEqual(await st.embed([text]), await reference.embed([text], { pooling: "mean", normalize: false }), "no prompt: every token");
  } finally {
    reference.dispose();
    st.dispose();
  }
});

test("serve: /embedding on a decoder with a pooling_type answers one normalized vector, as llama-server", { skip }, async () => {
  const path = join(dir, "llama-serve-mean.gguf");
  await writeRandomModel(path, { ...tinyLlama, std: 0.08, extraMetadata: [["llama.pooling_type", ggufEntry.u32(1)]] });
  const model = await loadModel(path, { contextSize: 64 });
  const server = await startServer(model, { port: 0 });
  try {
    const r = await post(`${server.url}/embedding`, { content: TEXTS[0] });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json[0].embedding.length, 1);
    assert.deepEqual(r.json[0].embedding[0], Array.from((await embeddingsOf(model).embed([TEXTS[0]!]))[0]!));
  } finally {
    await server.close(1000);
    model.dispose();
  }
});
