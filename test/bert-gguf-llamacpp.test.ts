import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { convertHFToGGUF, embed, loadEmbeddingModel } from "../src/index.js";
import { readGGUFHeader } from "../src/formats/gguf-reader.js";
import { GGMLType } from "../src/tensor/dtypes.js";
import { writeRandomBertFolder } from "../src/testing/random-bert.js";
import { disposeSharedLlama, sharedLlama } from "./helpers/llama-cpp-oracle.js";
import { SHARED, skipWithoutShared } from "./helpers/shared.js";

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
    const fromGGUF = await m.embed(TEXTS);
    fromGGUF.forEach((v, i) => v.forEach((x, j) => assert.ok(Math.abs(x - fromFolder[i]![j]!) <= 1e-5)));

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
