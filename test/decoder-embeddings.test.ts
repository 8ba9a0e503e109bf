import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { ggufEntry } from "../src/formats/index.js";
import { embeddingsOf, loadModel } from "../src/index.js";
import { tinyGpt2, tinyLlama, tinyQwen3, writeRandomModel, type RandomModelSpec } from "../src/testing/index.js";
import { LlamaEmbeddingContext } from "node-llama-cpp";
import { disposeSharedLlama, sharedLlama } from "./helpers/llama-cpp-oracle.js";
import { SHARED, skipWithoutShared } from "./helpers/shared.js";

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

async function againstLlamaCpp(name: string, spec: RandomModelSpec, poolingType: number | undefined, expected: string, t: { diagnostic(m: string): void }): Promise<void> {
  const path = join(dir, `${name}.gguf`);
  await writeRandomModel(path, { ...spec, std: 0.08, ...(poolingType === undefined ? {} : { extraMetadata: [[`${spec.arch}.pooling_type`, ggufEntry.u32(poolingType)]] }) });
  await compare(name, path, expected, t);
}

async function compare(name: string, path: string, expected: string, t: { diagnostic(m: string): void }): Promise<void> {
  const e = embeddingsOf(await loadModel(path, { backend: "reference", contextSize: 64, warmup: false }));
  try {
    assert.equal(e.pooling, expected);
    const llama = await sharedLlama();
    const lm = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
    // createEmbeddingContext's own context, with llama.cpp's F32 KV cache and its matrix-product attention (tsllm's defaults) instead of F16 and flash attention
    const ctx = new LlamaEmbeddingContext({ _llamaContext: await lm.createContext({ contextSize: 64, threads: 1, flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32", _embeddings: true } as never) } as never);
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
    await assert.rejects(e.embed(TEXTS, { pooling: "weightedmean" as never }), /^RangeError: pooling: expected one of mean, cls, max, mean_sqrt_len, lasttoken, got "weightedmean"$/);
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
