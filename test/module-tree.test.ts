import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { countParameters, hfModuleTree, moduleRepr, pyFloat, type ModuleNode } from "../src/models/module-tree.js";

/*
 * The module tree of src/models/module-tree.ts on full-size configs (only config.json is read),
 * against published print(model) outputs: only lines that are facts of the architecture (a
 * module's attribute name, class and sizes, its depth, the collapsed run of layers) are asserted,
 * each written here from the configuration; and the well-known parameter totals of the two
 * checkpoints.
 */
const dir = mkdtempSync(join(tmpdir(), "tsllm-module-tree-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function folder(name: string, config: Record<string, unknown>): string {
  const f = join(dir, name);
  mkdirSync(f);
  writeFileSync(join(f, "config.json"), JSON.stringify(config));
  return f;
}

/** google-bert/bert-base-uncased's config.json (the fields the tree reads) */
const BERT_BASE = {
  architectures: ["BertModel"], model_type: "bert", vocab_size: 30522, hidden_size: 768, num_hidden_layers: 12, num_attention_heads: 12,
  intermediate_size: 3072, hidden_act: "gelu", hidden_dropout_prob: 0.1, attention_probs_dropout_prob: 0.1, max_position_embeddings: 512,
  type_vocab_size: 2, layer_norm_eps: 1e-12, pad_token_id: 0, position_embedding_type: "absolute",
};

/** openai-community/gpt2's config.json */
const GPT2 = {
  architectures: ["GPT2LMHeadModel"], model_type: "gpt2", vocab_size: 50257, n_positions: 1024, n_embd: 768, n_layer: 12, n_head: 12,
  activation_function: "gelu_new", resid_pdrop: 0.1, embd_pdrop: 0.1, attn_pdrop: 0.1, layer_norm_epsilon: 1e-5,
};

/** `line` at `depth` levels of two-space indentation is a line of `repr` */
function hasLine(repr: string, depth: number, line: string) {
  assert.ok(repr.split("\n").includes(" ".repeat(2 * depth) + line), `no ${JSON.stringify(" ".repeat(2 * depth) + line)} in\n${repr}`);
}

test("BertModel of bert-base-uncased: the lines of a published print(model), 109482240 parameters", () => {
  // Published: https://github.com/ZonePG/cs-notes (a notebook printing
  // BertModel.from_pretrained('bert-base-uncased') with transformers 4.x; BERT's names are the same in 5.x)
  const tree = hfModuleTree(folder("bert-base", BERT_BASE));
  const repr = moduleRepr(tree.root);
  hasLine(repr, 0, "BertModel(");
  hasLine(repr, 1, "(embeddings): BertEmbeddings(");
  hasLine(repr, 2, "(word_embeddings): Embedding(30522, 768, padding_idx=0)");
  hasLine(repr, 2, "(position_embeddings): Embedding(512, 768)");
  hasLine(repr, 2, "(token_type_embeddings): Embedding(2, 768)");
  hasLine(repr, 2, "(LayerNorm): LayerNorm((768,), eps=1e-12, elementwise_affine=True)");
  hasLine(repr, 2, "(dropout): Dropout(p=0.1, inplace=False)");
  hasLine(repr, 1, "(encoder): BertEncoder(");
  hasLine(repr, 2, "(layer): ModuleList(");
  hasLine(repr, 3, "(0-11): 12 x BertLayer(");
  hasLine(repr, 4, "(attention): BertAttention(");
  hasLine(repr, 5, "(self): BertSelfAttention(");
  for (const n of ["query", "key", "value"]) hasLine(repr, 6, `(${n}): Linear(in_features=768, out_features=768, bias=True)`);
  hasLine(repr, 5, "(output): BertSelfOutput(");
  hasLine(repr, 5, "(dense): Linear(in_features=768, out_features=3072, bias=True)");
  hasLine(repr, 5, "(intermediate_act_fn): GELUActivation()");
  hasLine(repr, 5, "(dense): Linear(in_features=3072, out_features=768, bias=True)");
  hasLine(repr, 1, "(pooler): BertPooler(");
  hasLine(repr, 2, "(activation): Tanh()");
  assert.equal(repr.split("\n").at(-1), ")");
  // the embeddings alone (word + position + token type + LayerNorm): 23837184, as
  // https://khoatr35.github.io/learning-so-deep/assignment-1/text/model-backbone.html counts them frozen
  assert.equal(countParameters(tree.root.children![0]![1]), 23_837_184);
  assert.equal(tree.parameters, 109_482_240);
  assert.equal(tree.trainableParameters, 109_482_240);
});

test("GPT2LMHeadModel of gpt2: the lines of a published print(model), Conv1D as 5.x prints it, 124439808 parameters", () => {
  // Published: https://bsbarkur.github.io/2024/03/20/llm-model-architecture.html (transformers 4.x,
  // whose Conv1D printed "Conv1D()"; 5.18.0's Conv1D.__repr__ prints nf / nx)
  const tree = hfModuleTree(folder("gpt2", GPT2));
  const repr = moduleRepr(tree.root);
  hasLine(repr, 0, "GPT2LMHeadModel(");
  hasLine(repr, 1, "(transformer): GPT2Model(");
  hasLine(repr, 2, "(wte): Embedding(50257, 768)");
  hasLine(repr, 2, "(wpe): Embedding(1024, 768)");
  hasLine(repr, 2, "(drop): Dropout(p=0.1, inplace=False)");
  hasLine(repr, 2, "(h): ModuleList(");
  hasLine(repr, 3, "(0-11): 12 x GPT2Block(");
  hasLine(repr, 4, "(ln_1): LayerNorm((768,), eps=1e-05, elementwise_affine=True)");
  hasLine(repr, 4, "(attn): GPT2Attention(");
  hasLine(repr, 5, "(c_attn): Conv1D(nf=2304, nx=768)");
  hasLine(repr, 5, "(attn_dropout): Dropout(p=0.1, inplace=False)");
  hasLine(repr, 5, "(resid_dropout): Dropout(p=0.1, inplace=False)");
  hasLine(repr, 4, "(mlp): GPT2MLP(");
  hasLine(repr, 5, "(c_fc): Conv1D(nf=3072, nx=768)");
  hasLine(repr, 5, "(c_proj): Conv1D(nf=768, nx=3072)");
  hasLine(repr, 5, "(act): NewGELUActivation()");
  hasLine(repr, 2, "(ln_f): LayerNorm((768,), eps=1e-05, elementwise_affine=True)");
  hasLine(repr, 1, "(lm_head): Linear(in_features=768, out_features=50257, bias=False)");
  // lm_head shares wte's weight: model.parameters() yields it once
  assert.equal(tree.parameters, 124_439_808);
});

test("decoders: Llama-2-7b and Qwen2.5-0.5B configs give their known parameter totals (untied and tied lm_head, GQA, q/k/v biases)", () => {
  const llama = hfModuleTree(folder("llama-2-7b", {
    architectures: ["LlamaForCausalLM"], model_type: "llama", vocab_size: 32000, hidden_size: 4096, intermediate_size: 11008, num_hidden_layers: 32,
    num_attention_heads: 32, num_key_value_heads: 32, rms_norm_eps: 1e-5, hidden_act: "silu", tie_word_embeddings: false, pad_token_id: 0,
  }));
  assert.equal(llama.parameters, 6_738_415_616);
  const repr = moduleRepr(llama.root);
  hasLine(repr, 2, "(embed_tokens): Embedding(32000, 4096, padding_idx=0)");
  hasLine(repr, 3, "(0-31): 32 x LlamaDecoderLayer(");
  hasLine(repr, 4, "(input_layernorm): LlamaRMSNorm((4096,), eps=1e-05)");
  const qwen = hfModuleTree(folder("qwen2.5-0.5b", {
    architectures: ["Qwen2ForCausalLM"], model_type: "qwen2", vocab_size: 151936, hidden_size: 896, intermediate_size: 4864, num_hidden_layers: 24,
    num_attention_heads: 14, num_key_value_heads: 2, rms_norm_eps: 1e-6, hidden_act: "silu", tie_word_embeddings: true,
  }));
  assert.equal(qwen.parameters, 494_032_768);
  const q = moduleRepr(qwen.root);
  hasLine(q, 5, "(k_proj): Linear(in_features=896, out_features=128, bias=True)");
  hasLine(q, 5, "(o_proj): Linear(in_features=896, out_features=896, bias=False)");
  hasLine(q, 4, "(post_attention_layernorm): Qwen2RMSNorm((896,), eps=1e-06)");
});

test("torch's repr: a leaf with one extra_repr line inline, an empty module as Class(), runs of equal ModuleList items collapsed, others listed", () => {
  const leaf = (args: string): ModuleNode => ({ type: "Linear", args });
  const block = (n: number): ModuleNode => ({ type: "Block", children: [["fc", leaf(`n=${n}`)], ["act", { type: "ReLU" }]] });
  const list: ModuleNode = { type: "ModuleList", children: [block(1), block(1), block(1), block(2), block(1)].map((b, i) => [String(i), b] as const) };
  const repr = moduleRepr({ type: "Net", children: [["layers", list]] });
  assert.equal(repr, [
    "Net(",
    "  (layers): ModuleList(",
    "    (0-2): 3 x Block(",
    "      (fc): Linear(n=1)",
    "      (act): ReLU()",
    "    )",
    "    (3): Block(",
    "      (fc): Linear(n=2)",
    "      (act): ReLU()",
    "    )",
    "    (4): Block(",
    "      (fc): Linear(n=1)",
    "      (act): ReLU()",
    "    )",
    "  )",
    ")",
  ].join("\n"));
  assert.equal(moduleRepr({ type: "ModuleList", children: [] }), "ModuleList()");
});

test("XLM-RoBERTa heads come before the encoder, RoBERTa's after it; RoBERTa's position table after dropout", () => {
  const cfg = { ...BERT_BASE, model_type: "xlm-roberta", vocab_size: 250002, max_position_embeddings: 514, type_vocab_size: 1, pad_token_id: 1, layer_norm_eps: 1e-5, num_labels: 3 };
  const top = (arch: string) => hfModuleTree(folder(arch, { ...cfg, architectures: [arch] })).root.children!.map(([n]) => n);
  assert.deepEqual(top("XLMRobertaForSequenceClassification"), ["classifier", "roberta"]);
  assert.deepEqual(top("XLMRobertaForTokenClassification"), ["dropout", "classifier", "roberta"]);
  assert.deepEqual(top("XLMRobertaForMaskedLM"), ["lm_head", "roberta"]);
  assert.deepEqual(top("RobertaForSequenceClassification"), ["roberta", "classifier"]);
  assert.deepEqual(top("RobertaForMaskedLM"), ["roberta", "lm_head"]);
  const embeddings = hfModuleTree(folder("RobertaModel", { ...cfg, architectures: ["RobertaModel"] })).root.children![0]![1];
  assert.deepEqual(embeddings.children!.map(([n]) => n), ["word_embeddings", "token_type_embeddings", "LayerNorm", "dropout", "position_embeddings"]);
  assert.equal(embeddings.children![4]![1].args, "514, 768, padding_idx=1");
});

test("floats as Python's repr writes them in extra_repr", () => {
  for (const [x, s] of [[1e-12, "1e-12"], [1e-5, "1e-05"], [1e-4, "0.0001"], [0.1, "0.1"], [0.2, "0.2"], [0, "0.0"], [1, "1.0"], [2.5e-7, "2.5e-07"], [1e16, "1e+16"], [123.5, "123.5"]] as const) {
    assert.equal(pyFloat(x), s, String(x));
  }
});

test("config.json the tree cannot follow: the field is named", () => {
  assert.throws(() => hfModuleTree(folder("phi", { architectures: ["PhiForCausalLM"] })), /config\.json: architectures: no module tree for "PhiForCausalLM"/);
  assert.throws(() => hfModuleTree(folder("act", { ...BERT_BASE, hidden_act: "gelu_10" })), /config\.json: hidden_act: activation "gelu_10" has no known module/);
  assert.throws(() => hfModuleTree(folder("rel", { ...BERT_BASE, position_embedding_type: "relative_key" })), /position_embedding_type/);
  // no architectures: model_type's base model
  assert.equal(hfModuleTree(folder("bare", { ...BERT_BASE, architectures: undefined })).architecture, "BertModel");
});
