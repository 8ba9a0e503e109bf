import assert from "node:assert/strict";
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { loadEmbeddingModel, pipeline } from "../src/index.js";
import { SHARED, skipWithoutShared } from "./helpers/shared.js";

/*
 * sentence-transformers' Pooling modes beyond the oracle's mean: weightedmean (SGPT's
 * position-weighted mean: token t from 0 weighs t + 1, over the tokens the attention mask keeps),
 * computed here by hand from the feature-extraction pipeline's last_hidden_state (transformers'
 * semantics, checked against the oracle elsewhere) of the same folder.
 */
const skip = skipWithoutShared("hf-oracle/minilm-embed/model.safetensors");
const dir = mkdtempSync(join(tmpdir(), "tsllm-embed-pooling-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const TEXTS = ["a short one", "the quick brown fox jumps over the lazy dog"];

function folderWith(name: string, pooling: Record<string, unknown>, more: Record<string, unknown> = {}): string {
  const folder = join(dir, name);
  cpSync(`${SHARED}/hf-oracle/minilm-embed`, folder, { recursive: true });
  writeFileSync(join(folder, "1_Pooling", "config.json"), JSON.stringify({ word_embedding_dimension: 48, pooling_mode_cls_token: false, pooling_mode_mean_tokens: false, pooling_mode_max_tokens: false, pooling_mode_mean_sqrt_len_tokens: false, ...pooling }));
  for (const [file, json] of Object.entries(more)) writeFileSync(join(folder, file), JSON.stringify(json));
  return folder;
}

test("weightedmean pooling (pooling_mode_weightedmean_tokens) is sentence-transformers' position-weighted mean", { skip }, async () => {
  const folder = folderWith("weighted", { pooling_mode_weightedmean_tokens: true });
  const m = await loadEmbeddingModel(folder, { threads: 1 });
  const fx = await pipeline("feature-extraction", folder, { threads: 1 });
  try {
    const ours = await m.embed(TEXTS);
    for (const [i, text] of TEXTS.entries()) {
      const h = ((await fx(text)) as number[][][])[0]!;
      const w = h.map((_, t) => t + 1), total = w.reduce((a, b) => a + b, 0);
      const expected = h[0]!.map((_, j) => h.reduce((s, row, t) => s + w[t]! * row[j]!, 0) / total);
      ours[i]!.forEach((x, j) => assert.ok(Math.abs(x - expected[j]!) < 1e-6, `text ${i}, component ${j}: ${x} vs ${expected[j]}`));
    }
    // and the option on any folder
    const plain = await loadEmbeddingModel(`${SHARED}/hf-oracle/minilm-embed`, { threads: 1 });
    try {
      assert.deepEqual(await plain.embed(TEXTS, { pooling: "weightedmean" }), ours);
    } finally {
      plain.dispose();
    }
  } finally {
    m.dispose();
    fx.dispose();
  }
});
