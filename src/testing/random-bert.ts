import { copyFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeSafetensors, type SafetensorsTensorSpec } from "../formats/index.js";
import { deriveSeed, Rng } from "./rng.js";

/** the shape of a random BERT (BertModel) */
export interface RandomBertSpec {
  readonly hidden: number;
  readonly layers: number;
  readonly heads: number;
  readonly ffn: number;
  readonly vocab: number;
  readonly maxPositions?: number;
  /** weight std (biases and LayerNorms random too, around 0 and 1) */
  readonly std?: number;
  readonly seed: number;
}

/** MiniLM-L6 (all-MiniLM-L6-v2) and BERT-base shapes */
export const MINILM_L6: Omit<RandomBertSpec, "seed"> = { hidden: 384, layers: 6, heads: 12, ffn: 1536, vocab: 30522 };
export const BERT_BASE: Omit<RandomBertSpec, "seed"> = { hidden: 768, layers: 12, heads: 12, ffn: 3072, vocab: 30522 };

/**
 * Writes a random-weight BertModel folder with the project's own safetensors writer: config.json,
 * model.safetensors (F32, transformers' names and shapes), the tokenizer files copied from
 * `tokenizerFolder` (a folder with a WordPiece vocabulary of `spec.vocab` tokens), and a
 * sentence-transformers Pooling module (mean, unless `pooling` says otherwise). With
 * legacyLayerNormNames the LayerNorms are stored as gamma / beta, as old BERT checkpoints are.
 */
export async function writeRandomBertFolder(folder: string, spec: RandomBertSpec, tokenizerFolder: string, pooling: "mean" | "cls" = "mean", options: { legacyLayerNormNames?: boolean } = {}): Promise<void> {
  mkdirSync(join(folder, "1_Pooling"), { recursive: true });
  const { hidden: d, ffn, vocab } = spec;
  const maxPos = spec.maxPositions ?? 512, std = spec.std ?? 0.05;
  const tensors: SafetensorsTensorSpec[] = [];
  const add = (name: string, shape: number[], kind: "w" | "bias" | "gain" = "w") => {
    const n = shape.reduce((a, b) => a * b, 1);
    const rng = new Rng(deriveSeed(spec.seed, name));
    const v = rng.fillNormal(new Float32Array(n), kind === "w" ? std : 0.02, kind === "gain" ? 1 : 0);
    // the same values under the old gamma / beta names when asked
    const stored = options.legacyLayerNormNames ? name.replace(/LayerNorm\.weight$/, "LayerNorm.gamma").replace(/LayerNorm\.bias$/, "LayerNorm.beta") : name;
    tensors.push({ name: stored, dtype: "F32", shape, data: new Uint8Array(v.buffer) });
  };
  const norm = (p: string) => { add(`${p}.weight`, [d], "gain"); add(`${p}.bias`, [d], "bias"); };
  const linear = (p: string, out: number, inp: number) => { add(`${p}.weight`, [out, inp]); add(`${p}.bias`, [out], "bias"); };
  add("embeddings.word_embeddings.weight", [vocab, d]);
  add("embeddings.position_embeddings.weight", [maxPos, d]);
  add("embeddings.token_type_embeddings.weight", [2, d]);
  norm("embeddings.LayerNorm");
  for (let l = 0; l < spec.layers; l++) {
    const p = `encoder.layer.${l}.`;
    for (const x of ["query", "key", "value"]) linear(`${p}attention.self.${x}`, d, d);
    linear(`${p}attention.output.dense`, d, d);
    norm(`${p}attention.output.LayerNorm`);
    linear(`${p}intermediate.dense`, ffn, d);
    linear(`${p}output.dense`, d, ffn);
    norm(`${p}output.LayerNorm`);
  }
  linear("pooler.dense", d, d);
  await writeSafetensors(join(folder, "model.safetensors"), tensors);
  const config = {
    architectures: ["BertModel"], model_type: "bert", hidden_size: d, num_hidden_layers: spec.layers, num_attention_heads: spec.heads,
    intermediate_size: ffn, vocab_size: vocab, max_position_embeddings: maxPos, type_vocab_size: 2, layer_norm_eps: 1e-12, hidden_act: "gelu", pad_token_id: 0,
  };
  writeFileSync(join(folder, "config.json"), JSON.stringify(config, null, 2));
  for (const f of ["tokenizer.json", "tokenizer_config.json", "vocab.txt"]) if (existsSync(join(tokenizerFolder, f))) copyFileSync(join(tokenizerFolder, f), join(folder, f));
  writeFileSync(join(folder, "modules.json"), JSON.stringify([
    { idx: 0, name: "0", path: "", type: "sentence_transformers.models.Transformer" },
    { idx: 1, name: "1", path: "1_Pooling", type: "sentence_transformers.models.Pooling" },
  ]));
  writeFileSync(join(folder, "1_Pooling", "config.json"), JSON.stringify({ word_embedding_dimension: d, pooling_mode_cls_token: pooling === "cls", pooling_mode_mean_tokens: pooling === "mean", pooling_mode_max_tokens: false, pooling_mode_mean_sqrt_len_tokens: false }));
}
