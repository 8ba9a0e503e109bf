import type { HFEncoderConfig } from "../formats/index.js";
import type { HFTensorLayout } from "./hf-tensors.js";

/**
 * Encoder checkpoints (BERT, RoBERTa / XLM-RoBERTa, DistilBERT) under llama.cpp's `bert` tensor
 * names, so the encoder models read one naming whatever the source:
 *   token_embd, token_types, position_embd, token_embd_norm;
 *   blk.N.attn_q / attn_k / attn_v / attn_output, attn_output_norm, ffn_up, ffn_down, layer_output_norm.
 * The heads (llama.cpp has names only for the classifier): `pooler` (BERT / RoBERTa pooler dense,
 * tanh), `cls` (RoBERTa's classifier.dense, tanh; DistilBERT's pre_classifier, ReLU), `cls.output`
 * (the classifier), `mlm.dense` / `mlm.norm` / `mlm.output` (the masked-LM transform and decoder).
 * Weights of heads the architecture does not use (a pretraining checkpoint's NSP head, a pooler
 * under a token classifier) are ignorable, as transformers ignores them.
 */

type Map_ = Map<string, { hf: string }>;

/** the checkpoint's trunk prefix: "bert." under a head class, "" for a bare model */
function trunkPrefix(cfg: HFEncoderConfig, hfNames: ReadonlySet<string>): string {
  const base = { bert: "bert.", roberta: "roberta.", distilbert: "distilbert." }[cfg.family];
  if (hfNames.has(`${base}embeddings.word_embeddings.weight`)) return base;
  // XLM-RoBERTa checkpoints use "roberta." too; a bare save has no prefix
  return "";
}


export function encoderLayout(cfg: HFEncoderConfig, hfNames: ReadonlySet<string>): HFTensorLayout {
  const m: Map_ = new Map();
  // older checkpoints (bert-base-uncased's own) name LayerNorm parameters gamma / beta; transformers renames them on load
  const pair = (gguf: string, hf: string) => {
    const old = !hfNames.has(`${hf}.weight`) && hfNames.has(`${hf}.gamma`);
    m.set(`${gguf}.weight`, { hf: `${hf}.${old ? "gamma" : "weight"}` });
    m.set(`${gguf}.bias`, { hf: `${hf}.${old ? "beta" : "bias"}` });
  };
  const p = trunkPrefix(cfg, hfNames);
  const required: string[] = ["token_embd.weight", "position_embd.weight", "token_embd_norm.weight", "token_embd_norm.bias"];
  const distil = cfg.family === "distilbert";
  m.set("token_embd.weight", { hf: `${p}embeddings.word_embeddings.weight` });
  m.set("position_embd.weight", { hf: `${p}embeddings.position_embeddings.weight` });
  pair("token_embd_norm", `${p}embeddings.LayerNorm`);
  if (!distil) {
    m.set("token_types.weight", { hf: `${p}embeddings.token_type_embeddings.weight` });
    required.push("token_types.weight");
  }
  for (let l = 0; l < cfg.blockCount; l++) {
    const b = `blk.${l}.`;
    const names: [string, string][] = distil
      ? [["attn_q", "attention.q_lin"], ["attn_k", "attention.k_lin"], ["attn_v", "attention.v_lin"], ["attn_output", "attention.out_lin"],
        ["attn_output_norm", "sa_layer_norm"], ["ffn_up", "ffn.lin1"], ["ffn_down", "ffn.lin2"], ["layer_output_norm", "output_layer_norm"]]
      : [["attn_q", "attention.self.query"], ["attn_k", "attention.self.key"], ["attn_v", "attention.self.value"], ["attn_output", "attention.output.dense"],
        ["attn_output_norm", "attention.output.LayerNorm"], ["ffn_up", "intermediate.dense"], ["ffn_down", "output.dense"], ["layer_output_norm", "output.LayerNorm"]];
    const h = distil ? `${p}transformer.layer.${l}.` : `${p}encoder.layer.${l}.`;
    for (const [g, hf] of names) {
      pair(b + g, h + hf);
      required.push(`${b}${g}.weight`, `${b}${g}.bias`);
    }
  }
  const head = (gguf: string, hf: string, need = true) => {
    pair(gguf, hf);
    if (need) required.push(`${gguf}.weight`, `${gguf}.bias`);
  };
  let tiedDecoder: string | undefined;
  if (cfg.head === "base") {
    if (!distil) head("pooler", `${p}pooler.dense`, false);
  } else if (cfg.head === "sequence-classification") {
    if (cfg.family === "bert") { head("pooler", `${p}pooler.dense`); head("cls.output", "classifier"); }
    if (cfg.family === "roberta") { head("cls", "classifier.dense"); head("cls.output", "classifier.out_proj"); }
    if (distil) { head("cls", "pre_classifier"); head("cls.output", "classifier"); }
  } else if (cfg.head === "token-classification") {
    head("cls.output", "classifier");
  } else {
    const [dense, norm, decoder, bias] = {
      bert: ["cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm", "cls.predictions.decoder.weight", "cls.predictions.bias"],
      roberta: ["lm_head.dense", "lm_head.layer_norm", "lm_head.decoder.weight", "lm_head.bias"],
      distilbert: ["vocab_transform", "vocab_layer_norm", "vocab_projector.weight", "vocab_projector.bias"],
    }[cfg.family];
    head("mlm.dense", dense!);
    head("mlm.norm", norm!);
    const hasBias = hfNames.has(bias!);
    m.set("mlm.output.bias", { hf: hasBias ? bias! : decoder!.replace(/weight$/, "bias") });
    required.push("mlm.output.bias");
    if (cfg.tieWordEmbeddings) tiedDecoder = decoder;
    else { m.set("mlm.output.weight", { hf: decoder! }); required.push("mlm.output.weight"); }
  }
  const used = new Set([...m.values()].map((v) => v.hf));
  const isIgnorable = (n: string) =>
    /(^|\.)embeddings\.(position_ids|token_type_ids)$/.test(n) || n === tiedDecoder || /decoder\.bias$/.test(n) ||
    // weights of heads this architecture does not have
    (!used.has(n) && (/^(cls|lm_head|classifier|pre_classifier|vocab_transform|vocab_layer_norm|vocab_projector|qa_outputs)\./.test(n) || /(^|\.)pooler\./.test(n)));
  return { hfArchitecture: cfg.hfArchitecture, map: m, required, isIgnorable };
}
