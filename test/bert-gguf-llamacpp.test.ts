import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { convertHFToGGUF, embed, loadEmbeddingModel, startServer } from "../src/index.js";
import { readGGUFHeader } from "../src/formats/gguf-reader.js";
import { GGMLType } from "../src/tensor/dtypes.js";
import { writeRandomBertFolder } from "../src/testing/random-bert.js";
import { disposeSharedLlama, sharedLlama } from "./helpers/llama-cpp-oracle.js";
import { post } from "./helpers/serve.js";
import { PROJECT_ROOT, SHARED, skipWithoutShared } from "./helpers/shared.js";

/*
 * GGUF BERT: a random BertModel folder written with our own writers, `tsllm convert`ed to
 * llama.cpp's `bert` architecture; tsllm's embeddings of the folder and of the GGUF agree, and
 * llama.cpp's own (node-llama-cpp createEmbeddingContext, mean pooling) agree with them to a
 * cosine >= 0.99999.
 */
const skip = skipWithoutShared("hf-oracle/bert-uncased-sst/tokenizer.json");
const dir = mkdtempSync(join(tmpdir(), "tsllm-bert-gguf-"));
after(async () => { await disposeSharedLlama(); rmSync(dir, { recursive: true, force: true }); });

const cosine = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) { ab += a[i]! * b[i]!; aa += a[i]! * a[i]!; bb += b[i]! * b[i]!; }
  return ab / Math.sqrt(aa * bb);
};

const TEXTS = ["hello world", "the quick brown fox jumps over the lazy dog.", "embeddings from a random bert model, checked against llama.cpp"];

test("convert a BERT folder to GGUF: tsllm (folder, GGUF) and llama.cpp embeddings agree", { skip }, async (t) => {
  const folder = join(dir, "bert");
  await writeRandomBertFolder(folder, { hidden: 64, layers: 2, heads: 4, ffn: 128, vocab: 30522, seed: 16, std: 0.08 }, `${SHARED}/hf-oracle/bert-uncased-sst`);
  const gguf = join(dir, "bert.gguf");
  const r = await convertHFToGGUF(folder, gguf, { type: "f32" });
  assert.equal(r.architecture, "bert");
  assert.equal(r.tensors, 5 + 2 * 16);
  // the position and token-type tables stay F32 at any type, as llama.cpp's converter writes them
  const f16 = join(dir, "bert-f16.gguf");
  await convertHFToGGUF(folder, f16, { type: "f16" });
  const f16Types = new Map(readGGUFHeader(f16).tensors.map((x) => [x.name, x.type]));
  assert.deepEqual([f16Types.get("position_embd.weight"), f16Types.get("token_types.weight"), f16Types.get("token_embd.weight")], [GGMLType.F32, GGMLType.F32, GGMLType.F16]);

  const fromFolder = await embed(folder, TEXTS, { threads: 1 });
  const m = await loadEmbeddingModel(gguf, { threads: 1 });
  try {
    const folderModel = await loadEmbeddingModel(folder, { threads: 1 });
    try {
      assert.deepEqual(TEXTS.map((t) => m.tokenizer.encode(t)), TEXTS.map((t) => folderModel.tokenizer.encode(t)), "GGUF vocabulary tokenizes as tokenizer.json");
    } finally {
      folderModel.dispose();
    }
    // a folder's vectors as sentence-transformers' (no Normalize module: raw); the GGUF's raw ones the same
    const fromGGUF = await m.embed(TEXTS, { normalize: false });
    fromGGUF.forEach((v, i) => v.forEach((x, j) => assert.ok(Math.abs(x - fromFolder[i]![j]!) <= 1e-5)));
    // by default a GGUF's are L2-normalized, as llama.cpp's llama-embedding and llama-server (embd_normalize 2)
    const unitFolder = fromFolder.map((v) => { const n = Math.hypot(...v); return v.map((x) => x / n); });
    (await m.embed(TEXTS)).forEach((v, i) => v.forEach((x, j) => assert.ok(Math.abs(x - unitFolder[i]![j]!) <= 1e-6, `input ${i}`)));

    const llama = await sharedLlama();
    const lm = await llama.loadModel({ modelPath: gguf });
    const ctx = await lm.createEmbeddingContext({ contextSize: 512, threads: 1 });
    try {
      const cosines: number[] = [];
      for (const [i, text] of TEXTS.entries()) {
        // node-llama-cpp's tokenize adds no [CLS]/[SEP]: compare the text's tokens, and embed our full sequence
        const ids = m.tokenizer.encode(text);
        assert.deepEqual([...lm.tokenize(text)], m.tokenizer.encode(text, { addSpecialTokens: false }), `llama.cpp's tokens of ${JSON.stringify(text)}`);
        const e = await ctx.getEmbeddingFor(ids as never);
        const cos = cosine(e.vector, fromGGUF[i]!);
        assert.ok(cos >= 0.99999, `${JSON.stringify(text)}: cosine ${cos}`);
        cosines.push(cos);
      }
      t.diagnostic(`cosine with llama.cpp: ${cosines.map((c) => c.toFixed(9)).join(", ")}`);
    } finally {
      await ctx.dispose();
      await lm.dispose();
    }
  } finally {
    m.dispose();
  }
});

/** common_embd_normalize (llama.cpp common/common.cpp), as the judge: -1 none, 0 int16 range by the largest magnitude, 2 Euclidean, other p the p-norm */
function llamaCppNormalized(v: readonly number[], p: number): number[] {
  let sum = 0;
  if (p === -1) sum = 1;
  else if (p === 0) sum = Math.max(...v.map(Math.abs)) / 32760;
  else if (p === 2) sum = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  else sum = v.reduce((s, x) => s + Math.abs(x) ** p, 0) ** (1 / p);
  return v.map((x) => x * (sum > 0 ? 1 / sum : 0));
}

test("tsllm embed on a GGUF BERT prints llama-embedding's vectors: L2-normalized by default, --embd-normalize -1 / 0 / 1 / 3 as its own; tsllm serve's as llama-server's", { skip }, async (t) => {
  const folder = join(dir, "bert-cli");
  await writeRandomBertFolder(folder, { hidden: 64, layers: 2, heads: 4, ffn: 128, vocab: 30522, seed: 17, std: 0.08 }, `${SHARED}/hf-oracle/bert-uncased-sst`);
  const gguf = join(dir, "bert-cli.gguf");
  await convertHFToGGUF(folder, gguf, { type: "f32" });
  const texts = TEXTS.slice(0, 2);
  const cli = (...args: string[]) => {
    const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "embed", "--model", gguf, ...texts.flatMap((x) => ["--input", x]), "--json", "--threads", "1", ...args], { cwd: PROJECT_ROOT, encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout) as number[][];
  };
  const m = await loadEmbeddingModel(gguf, { threads: 1 });
  const llama = await sharedLlama();
  const lm = await llama.loadModel({ modelPath: gguf });
  const ctx = await lm.createEmbeddingContext({ contextSize: 512, threads: 1 });
  const raw: number[][] = [];
  try {
    // node-llama-cpp's getEmbeddingFor: llama.cpp's pooled vector before any normalization (embd_normalize -1)
    for (const text of texts) raw.push([...(await ctx.getEmbeddingFor(m.tokenizer.encode(text) as never)).vector]);
  } finally {
    await ctx.dispose();
    await lm.dispose();
    m.dispose();
  }
  // llama.cpp's vector normalized so, and ours: apart by under 3e-4 of its length (cosine 0.99999999 apart: ggml's f16 GELU table)
  const within = (ours: number[][], p: number) => ours.forEach((v, i) => {
    const ref = llamaCppNormalized(raw[i]!, p);
    const d = Math.max(...v.map((x, j) => Math.abs(x - ref[j]!))) / Math.hypot(...ref);
    t.diagnostic(`embd_normalize ${p}, input ${i}: max |Δ| ${d.toExponential(1)} of the vector's length`);
    assert.ok(d < 3e-4, `embd_normalize ${p}, input ${i}: ${d}`);
  });
  within(cli(), 2);
  within(cli("--embd-normalize", "2"), 2);
  within(cli("--embd-normalize", "-1"), -1);
  within(cli("--no-normalize"), -1);
  within(cli("--embd-normalize", "0"), 0);
  within(cli("--embd-normalize", "1"), 1);
  within(cli("--embd-normalize", "3"), 3);
  // tsllm serve on the GGUF: /v1/embeddings and /embedding normalized as llama-server's (embd_normalize 2 unless sent)
  const served = await loadEmbeddingModel(gguf, { threads: 1 });
  const server = await startServer(served, { port: 0 });
  try {
    const v1 = await post(`${server.url}/v1/embeddings`, { input: texts });
    assert.equal(v1.status, 200, JSON.stringify(v1.json));
    within(v1.json.data.map((d: { embedding: number[] }) => d.embedding), 2);
    const llama = await post(`${server.url}/embedding`, { content: texts[0] });
    within([llama.json[0].embedding[0]], 2);
    const rawServed = await post(`${server.url}/v1/embeddings`, { input: texts, embd_normalize: -1 });
    within(rawServed.json.data.map((d: { embedding: number[] }) => d.embedding), -1);
  } finally {
    await server.close(1000);
    served.dispose();
  }
  const refused = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "embed", "--model", gguf, "--input", "x", "--no-normalize", "--embd-normalize", "2"], { cwd: PROJECT_ROOT, encoding: "utf8" });
  assert.equal(refused.status, 2, refused.stderr);
  assert.match(refused.stderr, /--embd-normalize and --no-normalize both say how to normalize: give one/);
});
