import { copyFileSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeSafetensors } from "../../src/formats/index.js";
import { SHARED } from "./shared.js";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * A RobertaForTokenClassification folder made from the hf-oracle's roberta-sst: its encoder and
 * byte-level BPE tokenizer (no continuing-subword prefix: transformers finds its words by the
 * space guess), its out_proj as a per-token classifier (labels B-X, I-X, O). Its scores judge
 * nothing; it is a token classifier whose tokenizer is not WordPiece. The caller removes it.
 */
export async function robertaTokenClassifier(): Promise<string> {
  const from = join(SHARED, "hf-oracle/roberta-sst");
  const to = mkdtempSync(join(tmpdir(), "tsllm-roberta-ner-"));
  for (const f of readdirSync(from)) if (f !== "model.safetensors" && f !== "config.json") copyFileSync(join(from, f), join(to, f));
  const config = JSON.parse(readFileSync(join(from, "config.json"), "utf8"));
  Object.assign(config, { architectures: ["RobertaForTokenClassification"], id2label: { 0: "B-X", 1: "I-X", 2: "O" }, label2id: { "B-X": 0, "I-X": 1, O: 2 } });
  writeFileSync(join(to, "config.json"), JSON.stringify(config));
  const bytes = readFileSync(join(from, "model.safetensors"));
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8"));
  const base = 8 + headerLength;
  const tensors = Object.entries(header)
    .filter(([name]) => name !== "__metadata__" && !name.startsWith("classifier.dense."))
    .map(([name, t]: [string, Json]) => ({ name: name.replace("classifier.out_proj.", "classifier."), dtype: t.dtype, shape: t.shape, data: new Uint8Array(bytes.subarray(base + t.data_offsets[0], base + t.data_offsets[1])) }));
  await writeSafetensors(join(to, "model.safetensors"), tensors);
  return to;
}
