import { join } from "node:path";
import { HFConfigError, readJsonObject } from "../formats/hf-config.js";

/**
 * The nn.Module tree transformers builds for a Hugging Face folder's config.json
 * (architectures[0]), and the text `print(model)` shows for it: PyTorch's Module.__repr__ (a
 * module's extra_repr, then one `(name): Child(...)` line per submodule, nested by two spaces)
 * and ModuleList's repr (a run of identical reprs written once as `(i-j): n x Child(`).
 *
 * The class and attribute names follow transformers 5.18.0 (the version the project's oracle
 * folders in shared/hf-oracle were saved with). The facts were read from that release's own files
 * (the transformers-5.18.0 wheel as pip fetches it; the search corpus held 4.x copies only):
 * modeling_{bert,roberta,distilbert,gpt2,llama,mistral,qwen2,qwen3}.py, activations.py (ACT2CLS)
 * and pytorch_utils.py (Conv1D's repr), i.e. which submodules each class's __init__ registers and
 * in which order, their RMSNorm extra_repr, and torch's extra_repr of Linear / Embedding /
 * LayerNorm / Dropout and ModuleList's repr (pytorch/pytorch torch/nn/modules/container.py). What
 * differs from the 4.x prints found on the web:
 *  - BERT / RoBERTa: one attention class per kind, BertSelfAttention (or BertCrossAttention when
 *    cross-attention is added) under BertAttention's `self` (some 4.x releases printed
 *    BertSdpaSelfAttention, SDPA being their default).
 *  - RoBERTa / XLM-RoBERTa: the embeddings register position_embeddings (with padding_idx) last,
 *    after dropout (4.x had it second, as BERT does); XLM-RoBERTa's heads register their own
 *    modules before `roberta`.
 *  - DistilBERT: DistilBertSelfAttention (4.x: MultiHeadSelfAttention / DistilBertSdpaAttention),
 *    q_lin, k_lin, v_lin, out_lin, then dropout.
 *  - GPT-2: Conv1D prints `Conv1D(nf=out, nx=in)` (older releases printed `Conv1D()`).
 *  - Llama family: ACT2FN["silu"] is transformers' SiLUActivation in 5.18.0 (other releases mapped it to
 *    torch's SiLU).
 * A folder saved by another version gets the same names (`namesFollow` says which).
 *
 * Parameters are the module's own tensors (name and shape, derived from config.json); a parameter
 * tied to another (the MLM decoder to the word embeddings, GPT-2's lm_head to wte) is counted once,
 * as model.parameters() does.
 */

/** the transformers version whose class names the tree follows */
export const MODULE_TREE_TRANSFORMERS = "5.18.0";

export interface ModuleParameter {
  readonly name: string;
  readonly shape: readonly number[];
  /** the full name of the parameter this one shares storage with (not counted again) */
  readonly tiedTo?: string;
}

export interface ModuleNode {
  /** the class name print(model) shows */
  readonly type: string;
  /** extra_repr: what stands in the parentheses of a leaf (`in_features=768, ...`) */
  readonly args?: string;
  /** the module's own parameters (not its submodules') */
  readonly parameters?: readonly ModuleParameter[];
  /** submodules in registration order, by attribute name (a ModuleList's are "0", "1", ...) */
  readonly children?: readonly (readonly [string, ModuleNode])[];
}

export interface ModuleTree {
  /** config.json architectures[0] (the root's class) */
  readonly architecture: string;
  /** config.json transformers_version (the version that saved the folder), if any */
  readonly savedWith?: string;
  /** the transformers version whose class names the tree follows */
  readonly namesFollow: string;
  readonly root: ModuleNode;
  /** parameters, tied ones counted once (sum(p.numel() for p in model.parameters())) */
  readonly parameters: number;
  /** all of them require grad in a loaded model */
  readonly trainableParameters: number;
}

// ---- Python's reprs of the values extra_repr formats ----

/** Python's repr of a float: shortest round-trip digits, exponent form below 1e-4 or from 1e16 */
export function pyFloat(x: number): string {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? "nan" : x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mantissa, exp] = x.toExponential().split("e") as [string, string];
  const e = Number(exp);
  if (e < -4 || e >= 16) return `${mantissa}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  const s = String(x);
  return s.includes(".") ? s : `${s}.0`;
}

const pyBool = (b: boolean) => (b ? "True" : "False");

// ---- the leaf modules (torch.nn and transformers' own) ----

function linear(inF: number, outF: number, bias = true, tied?: { weight?: string; bias?: string }): ModuleNode {
  return {
    type: "Linear", args: `in_features=${inF}, out_features=${outF}, bias=${pyBool(bias)}`,
    parameters: [{ name: "weight", shape: [outF, inF], ...(tied?.weight ? { tiedTo: tied.weight } : {}) }, ...(bias ? [{ name: "bias", shape: [outF], ...(tied?.bias ? { tiedTo: tied.bias } : {}) }] : [])],
  };
}

function embedding(n: number, d: number, paddingIdx?: number): ModuleNode {
  return { type: "Embedding", args: `${n}, ${d}${paddingIdx !== undefined ? `, padding_idx=${paddingIdx}` : ""}`, parameters: [{ name: "weight", shape: [n, d] }] };
}

function layerNorm(d: number, eps: number): ModuleNode {
  return { type: "LayerNorm", args: `(${d},), eps=${pyFloat(eps)}, elementwise_affine=True`, parameters: [{ name: "weight", shape: [d] }, { name: "bias", shape: [d] }] };
}

const dropout = (p: number): ModuleNode => ({ type: "Dropout", args: `p=${pyFloat(p)}, inplace=False` });

/** transformers' Conv1D (GPT-2): weight [nx, nf], bias [nf] */
function conv1d(nf: number, nx: number): ModuleNode {
  return { type: "Conv1D", args: `nf=${nf}, nx=${nx}`, parameters: [{ name: "weight", shape: [nx, nf] }, { name: "bias", shape: [nf] }] };
}

/** transformers' ACT2FN: the module each activation name builds (those with no extra_repr) */
const ACTIVATIONS: Readonly<Record<string, string>> = {
  gelu: "GELUActivation", gelu_python: "GELUActivation", gelu_new: "NewGELUActivation", gelu_fast: "FastGELUActivation",
  gelu_pytorch_tanh: "GELUTanh", gelu_python_tanh: "GELUTanh", gelu_accurate: "AccurateGELUActivation", quick_gelu: "QuickGELUActivation",
  relu: "ReLU", relu6: "ReLU6", silu: "SiLUActivation", swish: "SiLU", mish: "MishActivation", tanh: "Tanh", sigmoid: "Sigmoid", linear: "LinearActivation",
};

const node = (type: string, children: (readonly [string, ModuleNode])[], parameters?: ModuleParameter[]): ModuleNode => ({ type, children, ...(parameters ? { parameters } : {}) });
const moduleList = (items: ModuleNode[]): ModuleNode => node("ModuleList", items.map((m, i) => [String(i), m] as const));

// ---- config.json fields, with the defaults of the transformers config classes ----

class Config {
  constructor(readonly path: string, readonly o: Record<string, unknown>) {}
  int(key: string, fallback?: number): number {
    const v = this.o[key] ?? fallback;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0) throw new HFConfigError(this.path, key, `expected a non-negative integer, found ${JSON.stringify(v)}`);
    return v;
  }
  num(key: string, fallback: number): number {
    const v = this.o[key] ?? fallback;
    if (typeof v !== "number" || !Number.isFinite(v)) throw new HFConfigError(this.path, key, `expected a number, found ${JSON.stringify(v)}`);
    return v;
  }
  /** an optional id: absent or null -> undefined */
  id(key: string, fallback?: number): number | undefined {
    const v = key in this.o ? this.o[key] : fallback;
    if (v === null || v === undefined) return undefined;
    if (typeof v !== "number" || !Number.isInteger(v)) throw new HFConfigError(this.path, key, `expected an integer or null, found ${JSON.stringify(v)}`);
    return v;
  }
  bool(key: string, fallback: boolean): boolean {
    const v = this.o[key] ?? fallback;
    if (typeof v !== "boolean") throw new HFConfigError(this.path, key, `expected true or false, found ${JSON.stringify(v)}`);
    return v;
  }
  activation(key: string, fallback: string): string {
    const v = this.o[key] ?? fallback;
    const m = typeof v === "string" ? ACTIVATIONS[v] : undefined;
    if (m === undefined) throw new HFConfigError(this.path, key, `activation ${JSON.stringify(v)} has no known module (known: ${Object.keys(ACTIVATIONS).join(", ")})`);
    return m;
  }
  /** num_labels: explicit, else the size of id2label, else 2 (PretrainedConfig's default) */
  numLabels(): number {
    if (typeof this.o["num_labels"] === "number") return this.int("num_labels");
    const l = this.o["id2label"];
    return l && typeof l === "object" && !Array.isArray(l) ? Object.keys(l).length : 2;
  }
}

// ---- BERT / RoBERTa ----

interface BertLike {
  readonly p: string; // class prefix: Bert, Roberta, XLMRoberta
  readonly roberta: boolean;
  readonly vocab: number; readonly d: number; readonly layers: number; readonly ffn: number;
  readonly positions: number; readonly typeVocab: number; readonly pad?: number; readonly eps: number;
  readonly hiddenDrop: number; readonly attnDrop: number; readonly act: string;
  readonly classifierDrop: number; readonly crossAttention: boolean;
}

function bertLike(c: Config, p: string, roberta: boolean): BertLike {
  const pet = c.o["position_embedding_type"];
  if (pet !== undefined && pet !== null && pet !== "absolute") throw new HFConfigError(c.path, "position_embedding_type", `the module tree knows "absolute" positions only, found ${JSON.stringify(pet)}`);
  const hiddenDrop = c.num("hidden_dropout_prob", 0.1);
  const cd = c.o["classifier_dropout"];
  return {
    p, roberta,
    vocab: c.int("vocab_size", roberta ? 50265 : 30522), d: c.int("hidden_size", 768), layers: c.int("num_hidden_layers", 12), ffn: c.int("intermediate_size", 3072),
    positions: c.int("max_position_embeddings", 512), typeVocab: c.int("type_vocab_size", 2), pad: c.id("pad_token_id", roberta ? 1 : 0),
    eps: c.num("layer_norm_eps", 1e-12), hiddenDrop, attnDrop: c.num("attention_probs_dropout_prob", 0.1), act: c.activation("hidden_act", "gelu"),
    classifierDrop: cd === null || cd === undefined ? hiddenDrop : c.num("classifier_dropout", hiddenDrop),
    crossAttention: c.bool("add_cross_attention", false),
  };
}

function bertEmbeddings(b: BertLike): ModuleNode {
  const word = ["word_embeddings", embedding(b.vocab, b.d, b.pad)] as const;
  const types = ["token_type_embeddings", embedding(b.typeVocab, b.d)] as const;
  const norm = ["LayerNorm", layerNorm(b.d, b.eps)] as const, drop = ["dropout", dropout(b.hiddenDrop)] as const;
  if (b.roberta) return node(`${b.p}Embeddings`, [word, types, norm, drop, ["position_embeddings", embedding(b.positions, b.d, b.pad)]]);
  return node(`${b.p}Embeddings`, [word, ["position_embeddings", embedding(b.positions, b.d)], types, norm, drop]);
}

function bertAttention(b: BertLike, cross: boolean): ModuleNode {
  const self = node(`${b.p}${cross ? "Cross" : "Self"}Attention`, [["query", linear(b.d, b.d)], ["key", linear(b.d, b.d)], ["value", linear(b.d, b.d)], ["dropout", dropout(b.attnDrop)]]);
  const output = node(`${b.p}SelfOutput`, [["dense", linear(b.d, b.d)], ["LayerNorm", layerNorm(b.d, b.eps)], ["dropout", dropout(b.hiddenDrop)]]);
  return node(`${b.p}Attention`, [["self", self], ["output", output]]);
}

function bertLayer(b: BertLike): ModuleNode {
  return node(`${b.p}Layer`, [
    ["attention", bertAttention(b, false)],
    ...(b.crossAttention ? [["crossattention", bertAttention(b, true)] as const] : []),
    ["intermediate", node(`${b.p}Intermediate`, [["dense", linear(b.d, b.ffn)], ["intermediate_act_fn", node(b.act, [])]])],
    ["output", node(`${b.p}Output`, [["dense", linear(b.ffn, b.d)], ["LayerNorm", layerNorm(b.d, b.eps)], ["dropout", dropout(b.hiddenDrop)]])],
  ]);
}

function bertModel(b: BertLike, pooler: boolean): ModuleNode {
  return node(`${b.p}Model`, [
    ["embeddings", bertEmbeddings(b)],
    ["encoder", node(`${b.p}Encoder`, [["layer", moduleList(Array.from({ length: b.layers }, () => bertLayer(b)))]])],
    ...(pooler ? [["pooler", node(`${b.p}Pooler`, [["dense", linear(b.d, b.d)], ["activation", node("Tanh", [])]])] as const] : []),
  ]);
}

function bertTree(arch: string, head: string, c: Config, p: string, roberta: boolean): ModuleNode {
  const b = bertLike(c, p, roberta);
  const base = roberta ? "roberta" : "bert";
  const wordEmbeddings = `${base}.embeddings.word_embeddings.weight`;
  // the heads of 5.18.0's XLM-RoBERTa register their own modules first, then `roberta`
  const model = (encoder: ModuleNode, ...head: (readonly [string, ModuleNode])[]) => node(arch, p === "XLMRoberta" ? [...head, [base, encoder]] : [[base, encoder], ...head]);
  switch (head) {
    case "Model": return bertModel(b, true);
    case "ForSequenceClassification": {
      const labels = c.numLabels();
      if (roberta) {
        const cls = node(`${p}ClassificationHead`, [["dense", linear(b.d, b.d)], ["dropout", dropout(b.classifierDrop)], ["out_proj", linear(b.d, labels)]]);
        return model(bertModel(b, false), ["classifier", cls]);
      }
      return model(bertModel(b, true), ["dropout", dropout(b.classifierDrop)], ["classifier", linear(b.d, labels)]);
    }
    case "ForTokenClassification":
      return model(bertModel(b, false), ["dropout", dropout(b.classifierDrop)], ["classifier", linear(b.d, c.numLabels())]);
    case "ForMaskedLM": {
      const tie = c.bool("tie_word_embeddings", true) ? wordEmbeddings : undefined;
      if (roberta) {
        const lm = node(`${p}LMHead`, [["dense", linear(b.d, b.d)], ["layer_norm", layerNorm(b.d, b.eps)], ["decoder", linear(b.d, b.vocab, true, { weight: tie, bias: "lm_head.bias" })]], [{ name: "bias", shape: [b.vocab] }]);
        return model(bertModel(b, false), ["lm_head", lm]);
      }
      const transform = node(`${p}PredictionHeadTransform`, [["dense", linear(b.d, b.d)], ["transform_act_fn", node(b.act, [])], ["LayerNorm", layerNorm(b.d, b.eps)]]);
      const predictions = node(`${p}LMPredictionHead`, [["transform", transform], ["decoder", linear(b.d, b.vocab, true, { weight: tie, bias: "cls.predictions.bias" })]], [{ name: "bias", shape: [b.vocab] }]);
      return model(bertModel(b, false), ["cls", node(`${p}OnlyMLMHead`, [["predictions", predictions]])]);
    }
  }
  throw new Error(`unreachable: ${arch}`);
}

// ---- DistilBERT ----

function distilBertTree(arch: string, head: string, c: Config): ModuleNode {
  if (c.bool("sinusoidal_pos_embds", false)) throw new HFConfigError(c.path, "sinusoidal_pos_embds", "the module tree knows the learned position table only");
  const vocab = c.int("vocab_size", 30522), d = c.int("dim", 768), layers = c.int("n_layers", 6), ffn = c.int("hidden_dim", 3072);
  const drop = c.num("dropout", 0.1), attnDrop = c.num("attention_dropout", 0.1), act = c.activation("activation", "gelu");
  // DistilBERT's LayerNorms are nn.LayerNorm(dim, eps=1e-12) in its code, whatever config.json says
  const eps = 1e-12;
  const block = () => node("TransformerBlock", [
    ["attention", node("DistilBertSelfAttention", [["q_lin", linear(d, d)], ["k_lin", linear(d, d)], ["v_lin", linear(d, d)], ["out_lin", linear(d, d)], ["dropout", dropout(attnDrop)]])],
    ["sa_layer_norm", layerNorm(d, eps)],
    ["ffn", node("FFN", [["dropout", dropout(drop)], ["lin1", linear(d, ffn)], ["lin2", linear(ffn, d)], ["activation", node(act, [])]])],
    ["output_layer_norm", layerNorm(d, eps)],
  ]);
  const model = node("DistilBertModel", [
    ["embeddings", node("Embeddings", [["word_embeddings", embedding(vocab, d, c.id("pad_token_id", 0))], ["position_embeddings", embedding(c.int("max_position_embeddings", 512), d)], ["LayerNorm", layerNorm(d, eps)], ["dropout", dropout(drop)]])],
    ["transformer", node("Transformer", [["layer", moduleList(Array.from({ length: layers }, block))]])],
  ]);
  switch (head) {
    case "Model": return model;
    case "ForSequenceClassification":
      return node(arch, [["distilbert", model], ["pre_classifier", linear(d, d)], ["classifier", linear(d, c.numLabels())], ["dropout", dropout(c.num("seq_classif_dropout", 0.2))]]);
    case "ForTokenClassification":
      return node(arch, [["distilbert", model], ["dropout", dropout(drop)], ["classifier", linear(d, c.numLabels())]]);
    case "ForMaskedLM": {
      const tie = c.bool("tie_word_embeddings", true) ? "distilbert.embeddings.word_embeddings.weight" : undefined;
      return node(arch, [
        ["activation", node(act, [])], ["distilbert", model], ["vocab_transform", linear(d, d)], ["vocab_layer_norm", layerNorm(d, eps)],
        ["vocab_projector", linear(d, vocab, true, { weight: tie })], ["mlm_loss_fct", node("CrossEntropyLoss", [])],
      ]);
    }
  }
  throw new Error(`unreachable: ${arch}`);
}

// ---- GPT-2 ----

function gpt2Tree(arch: string, c: Config): ModuleNode {
  const vocab = c.int("vocab_size", 50257), d = c.int("n_embd", 768), layers = c.int("n_layer", 12);
  const inner = c.id("n_inner") ?? 4 * d, eps = c.num("layer_norm_epsilon", 1e-5), resid = c.num("resid_pdrop", 0.1), attnDrop = c.num("attn_pdrop", 0.1);
  const act = c.activation("activation_function", "gelu_new"), cross = c.bool("add_cross_attention", false);
  const attention = (isCross: boolean) => node("GPT2Attention", [
    ...(isCross ? [["c_attn", conv1d(2 * d, d)] as const, ["q_attn", conv1d(d, d)] as const] : [["c_attn", conv1d(3 * d, d)] as const]),
    ["c_proj", conv1d(d, d)], ["attn_dropout", dropout(attnDrop)], ["resid_dropout", dropout(resid)],
  ]);
  const block = () => node("GPT2Block", [
    ["ln_1", layerNorm(d, eps)], ["attn", attention(false)], ["ln_2", layerNorm(d, eps)],
    ...(cross ? [["crossattention", attention(true)] as const, ["ln_cross_attn", layerNorm(d, eps)] as const] : []),
    ["mlp", node("GPT2MLP", [["c_fc", conv1d(inner, d)], ["c_proj", conv1d(d, inner)], ["act", node(act, [])], ["dropout", dropout(resid)]])],
  ]);
  const model = node("GPT2Model", [
    ["wte", embedding(vocab, d)], ["wpe", embedding(c.int("n_positions", 1024), d)], ["drop", dropout(c.num("embd_pdrop", 0.1))],
    ["h", moduleList(Array.from({ length: layers }, block))], ["ln_f", layerNorm(d, eps)],
  ]);
  if (arch === "GPT2Model") return model;
  if (arch === "GPT2LMHeadModel") {
    const tie = c.bool("tie_word_embeddings", true) ? "transformer.wte.weight" : undefined;
    return node(arch, [["transformer", model], ["lm_head", linear(d, vocab, false, { weight: tie })]]);
  }
  // GPT2ForSequenceClassification
  return node(arch, [["transformer", model], ["score", linear(d, c.numLabels(), false)]]);
}

// ---- Llama, Mistral, Qwen2, Qwen3 (the decoders tsllm runs from a folder) ----

/** RMSNorm's extra_repr: the weight's shape as a tuple, then eps */
function rmsNorm(type: string, d: number, eps: number): ModuleNode {
  return { type, args: `(${d},), eps=${pyFloat(eps)}`, parameters: [{ name: "weight", shape: [d] }] };
}

function llamaLikeTree(arch: string, p: "Llama" | "Mistral" | "Qwen2" | "Qwen3", c: Config): ModuleNode {
  const vocab = c.int("vocab_size", p === "Llama" || p === "Mistral" ? 32000 : 151936), d = c.int("hidden_size", 4096), layers = c.int("num_hidden_layers", 32);
  const heads = c.int("num_attention_heads", 32), kvHeads = c.id("num_key_value_heads", p === "Mistral" ? 8 : undefined) ?? heads;
  const ffn = c.int("intermediate_size", p === "Llama" ? 11008 : p === "Mistral" ? 14336 : 22016);
  const headDim = c.id("head_dim", p === "Qwen3" ? 128 : undefined) ?? Math.floor(d / heads);
  const eps = c.num("rms_norm_eps", 1e-6), act = c.activation("hidden_act", "silu");
  // q/k/v biases: Llama and Qwen3 from attention_bias, Qwen2 always, Mistral never; o_proj as Llama's attention_bias
  const attentionBias = p === "Mistral" ? false : c.bool("attention_bias", false);
  const qkvBias = p === "Qwen2" ? true : attentionBias, oBias = p === "Qwen2" ? false : attentionBias;
  const mlpBias = p === "Llama" ? c.bool("mlp_bias", false) : false;
  const layer = () => node(`${p}DecoderLayer`, [
    ["self_attn", node(`${p}Attention`, [
      ["q_proj", linear(d, heads * headDim, qkvBias)], ["k_proj", linear(d, kvHeads * headDim, qkvBias)], ["v_proj", linear(d, kvHeads * headDim, qkvBias)],
      ["o_proj", linear(heads * headDim, d, oBias)],
      ...(p === "Qwen3" ? [["q_norm", rmsNorm(`${p}RMSNorm`, headDim, eps)] as const, ["k_norm", rmsNorm(`${p}RMSNorm`, headDim, eps)] as const] : []),
    ])],
    ["mlp", node(`${p}MLP`, [["gate_proj", linear(d, ffn, mlpBias)], ["up_proj", linear(d, ffn, mlpBias)], ["down_proj", linear(ffn, d, mlpBias)], ["act_fn", node(act, [])]])],
    ["input_layernorm", rmsNorm(`${p}RMSNorm`, d, eps)], ["post_attention_layernorm", rmsNorm(`${p}RMSNorm`, d, eps)],
  ]);
  const model = node(`${p}Model`, [
    ["embed_tokens", embedding(vocab, d, c.id("pad_token_id"))], ["layers", moduleList(Array.from({ length: layers }, layer))],
    ["norm", rmsNorm(`${p}RMSNorm`, d, eps)], ["rotary_emb", node(`${p}RotaryEmbedding`, [])],
  ]);
  if (arch === `${p}Model`) return model;
  const tie = c.bool("tie_word_embeddings", false) ? "model.embed_tokens.weight" : undefined;
  return node(arch, [["model", model], ["lm_head", linear(d, vocab, false, { weight: tie })]]);
}

/** architectures[0] -> its tree */
const BUILDERS: Readonly<Record<string, (arch: string, c: Config) => ModuleNode>> = (() => {
  const out: Record<string, (arch: string, c: Config) => ModuleNode> = {};
  const heads = ["Model", "ForSequenceClassification", "ForTokenClassification", "ForMaskedLM"];
  for (const h of heads) {
    out[`Bert${h}`] = (a, c) => bertTree(a, h, c, "Bert", false);
    out[`Roberta${h}`] = (a, c) => bertTree(a, h, c, "Roberta", true);
    out[`XLMRoberta${h}`] = (a, c) => bertTree(a, h, c, "XLMRoberta", true);
    out[`DistilBert${h}`] = (a, c) => distilBertTree(a, h, c);
  }
  for (const a of ["GPT2Model", "GPT2LMHeadModel", "GPT2ForSequenceClassification"]) out[a] = gpt2Tree;
  for (const p of ["Llama", "Mistral", "Qwen2", "Qwen3"] as const) for (const a of [`${p}Model`, `${p}ForCausalLM`]) out[a] = (arch, c) => llamaLikeTree(arch, p, c);
  return out;
})();

export const MODULE_TREE_ARCHITECTURES: readonly string[] = Object.keys(BUILDERS);

/**
 * The module tree of `folder/config.json`'s architecture (or of model_type's base model when the
 * folder names none). Throws an HFConfigError naming the field for an architecture it does not know.
 */
export function hfModuleTree(folder: string): ModuleTree {
  const path = join(folder, "config.json");
  const c = new Config(path, readJsonObject(path));
  const archs = c.o["architectures"];
  const baseOf: Record<string, string> = {
    bert: "BertModel", roberta: "RobertaModel", "xlm-roberta": "XLMRobertaModel", distilbert: "DistilBertModel", gpt2: "GPT2Model",
    llama: "LlamaModel", mistral: "MistralModel", qwen2: "Qwen2Model", qwen3: "Qwen3Model",
  };
  const arch = Array.isArray(archs) && typeof archs[0] === "string" ? archs[0] : typeof c.o["model_type"] === "string" ? baseOf[c.o["model_type"]] : undefined;
  const build = arch === undefined ? undefined : BUILDERS[arch];
  if (arch === undefined || build === undefined) {
    throw new HFConfigError(path, "architectures", `no module tree for ${JSON.stringify(arch ?? c.o["model_type"])} (known: ${MODULE_TREE_ARCHITECTURES.join(", ")})`);
  }
  const root = build(arch, c);
  const parameters = countParameters(root);
  const v = c.o["transformers_version"];
  return { architecture: arch, ...(typeof v === "string" ? { savedWith: v } : {}), namesFollow: MODULE_TREE_TRANSFORMERS, root, parameters, trainableParameters: parameters };
}

/** every parameter by its full name (`bert.embeddings.word_embeddings.weight`), tied ones included */
export function* namedParameters(root: ModuleNode, prefix = ""): Generator<readonly [string, ModuleParameter]> {
  for (const p of root.parameters ?? []) yield [prefix + p.name, p];
  for (const [name, child] of root.children ?? []) yield* namedParameters(child, `${prefix}${name}.`);
}

/** elements of all parameters, each tied one counted once (where it is owned) */
export function countParameters(root: ModuleNode): number {
  let n = 0;
  for (const [, p] of namedParameters(root)) if (p.tiedTo === undefined) n += p.shape.reduce((a, x) => a * x, 1);
  return n;
}

// ---- torch's repr ----

/** torch.nn.modules.module._addindent: every line after the first indented */
function addIndent(s: string, spaces: number): string {
  const lines = s.split("\n");
  if (lines.length === 1) return s;
  const pad = " ".repeat(spaces);
  return [lines[0], ...lines.slice(1).map((l) => pad + l)].join("\n");
}

/** what print(module) shows */
export function moduleRepr(m: ModuleNode): string {
  const children = m.children ?? [];
  if (m.type === "ModuleList") {
    if (children.length === 0) return "ModuleList()";
    // a run of equal reprs is written once: "(i-j): n x Repr"
    const runs: { start: number; end: number; repr: string }[] = [];
    children.forEach(([, child], i) => {
      const r = moduleRepr(child);
      const last = runs[runs.length - 1];
      if (last && last.repr === r) last.end = i;
      else runs.push({ start: i, end: i, repr: r });
    });
    const lines = runs.map((r) => addIndent(r.start === r.end ? `(${r.start}): ${r.repr}` : `(${r.start}-${r.end}): ${r.end - r.start + 1} x ${r.repr}`, 2));
    return `ModuleList(\n  ${lines.join("\n  ")}\n)`;
  }
  const extra = m.args ? m.args.split("\n") : [];
  const childLines = children.map(([name, child]) => `(${name}): ${addIndent(moduleRepr(child), 2)}`);
  const lines = [...extra, ...childLines];
  if (lines.length === 0) return `${m.type}()`;
  if (extra.length === 1 && childLines.length === 0) return `${m.type}(${extra[0]})`;
  return `${m.type}(\n  ${lines.join("\n  ")}\n)`;
}
