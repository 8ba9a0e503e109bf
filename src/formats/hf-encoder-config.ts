import { existsSync, statSync } from "node:fs";
import { readGGUFHeader } from "./gguf-reader.js";
import { join } from "node:path";
import { HFConfigError, LIMITS, openConfigJson, readJsonObject, type Fields } from "./hf-config.js";
import { transformerFolder } from "./sentence-transformers.js";

/**
 * config.json of an encoder (BERT, RoBERTa / XLM-RoBERTa, DistilBERT) read into what the
 * encoder models need, checked like the decoders' (src/formats/hf-config.ts): sizes bounded,
 * heads dividing the hidden size, labels well-formed.
 */

/** the encoder families: which embeddings and which layer names */
export type EncoderFamily = "bert" | "roberta" | "distilbert";
/** what sits on top of the encoder */
export type EncoderHead = "base" | "sequence-classification" | "token-classification" | "masked-lm";

/** config.json "architectures"[0] -> family and head */
export const HF_ENCODER_ARCHITECTURES: Readonly<Record<string, { family: EncoderFamily; head: EncoderHead }>> = {
  BertModel: { family: "bert", head: "base" },
  BertForSequenceClassification: { family: "bert", head: "sequence-classification" },
  BertForTokenClassification: { family: "bert", head: "token-classification" },
  BertForMaskedLM: { family: "bert", head: "masked-lm" },
  RobertaModel: { family: "roberta", head: "base" },
  RobertaForSequenceClassification: { family: "roberta", head: "sequence-classification" },
  RobertaForTokenClassification: { family: "roberta", head: "token-classification" },
  RobertaForMaskedLM: { family: "roberta", head: "masked-lm" },
  XLMRobertaModel: { family: "roberta", head: "base" },
  XLMRobertaForSequenceClassification: { family: "roberta", head: "sequence-classification" },
  XLMRobertaForTokenClassification: { family: "roberta", head: "token-classification" },
  XLMRobertaForMaskedLM: { family: "roberta", head: "masked-lm" },
  DistilBertModel: { family: "distilbert", head: "base" },
  DistilBertForSequenceClassification: { family: "distilbert", head: "sequence-classification" },
  DistilBertForTokenClassification: { family: "distilbert", head: "token-classification" },
  DistilBertForMaskedLM: { family: "distilbert", head: "masked-lm" },
};

/** model_type -> family, for folders without "architectures" (sentence-transformers saves of a bare model) */
const MODEL_TYPES: Readonly<Record<string, EncoderFamily>> = { bert: "bert", roberta: "roberta", "xlm-roberta": "roberta", distilbert: "distilbert" };

export type ProblemType = "single_label_classification" | "multi_label_classification" | "regression";

export interface HFEncoderConfig {
  readonly path: string;
  readonly hfArchitecture: string;
  readonly family: EncoderFamily;
  readonly head: EncoderHead;
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly blockCount: number;
  readonly headCount: number;
  readonly feedForwardLength: number;
  /** rows of the position table */
  readonly maxPositions: number;
  /** RoBERTa numbers positions from pad_token_id + 1 (0 for BERT / DistilBERT) */
  readonly positionOffset: number;
  /** rows of the token-type table (0: none, DistilBERT) */
  readonly typeVocabSize: number;
  readonly normEps: number;
  /** the FFN activation: "gelu" (erf, as torch) or "relu" (DistilBERT allows it) */
  readonly activation: "gelu" | "relu";
  readonly padTokenId?: number;
  /** id2label in id order (LABEL_i when config.json has none) */
  readonly labels: readonly string[];
  readonly problemType?: ProblemType;
  /** the MLM decoder shares the word embedding */
  readonly tieWordEmbeddings: boolean;
}

/**
 * true for a folder whose config.json names an encoder architecture (or model_type) this module
 * reads, and for a GGUF file of llama.cpp's `bert` architecture
 */
export function isEncoderModel(folder: string): boolean {
  if (existsSync(folder) && statSync(folder).isFile()) {
    try {
      return readGGUFHeader(folder).metadata.get("general.architecture")?.value === "bert";
    } catch {
      return false;
    }
  }
  // an older sentence-transformers folder keeps the encoder in 0_Transformer/ (its own config.json at the top is {"__version__": ...})
  let own = folder;
  try {
    own = transformerFolder(folder);
  } catch {
    // a bad modules.json: the encoder loader reports it, naming the field
  }
  const path = join(own, "config.json");
  if (!existsSync(path)) return false;
  try {
    const o = readJsonObject(path);
    const a = Array.isArray(o.architectures) ? o.architectures[0] : undefined;
    if (typeof a === "string") return a in HF_ENCODER_ARCHITECTURES;
    return typeof o.model_type === "string" && o.model_type in MODEL_TYPES;
  } catch {
    return false;
  }
}

/**
 * true where a model is loaded as an encoder rather than a decoder (the library's embeddings and
 * `tsllm serve` decide so, one rule): isEncoderModel, or a sentence-transformers folder whose
 * Transformer module sits in a folder of its own (0_Transformer/, the older layout). encode() runs
 * that module, so one the encoder loader does not follow (a decoder, MPNet ...) is refused naming
 * its config.json, rather than the folder's top (another model, or sentence-transformers' version
 * file) loaded. A modules.json that cannot be read throws, naming the field.
 */
export function loadsAsEncoder(path: string): boolean {
  return isEncoderModel(path) || transformerFolder(path) !== path;
}

function labelsOf(f: Fields, count: number | undefined): string[] {
  const raw = f.o["id2label"];
  if (raw === undefined || raw === null) return Array.from({ length: count ?? 2 }, (_, i) => `LABEL_${i}`);
  if (typeof raw !== "object" || Array.isArray(raw)) throw new HFConfigError(f.path, "id2label", `expected an object {"0": "LABEL", ...}, found ${JSON.stringify(raw)?.slice(0, 60)}`);
  const entries = Object.entries(raw as Record<string, unknown>);
  const n = count ?? entries.length;
  if (n < 1 || n > LIMITS.vocab) throw new HFConfigError(f.path, "id2label", `expected 1 to ${LIMITS.vocab} labels, found ${n}`);
  const out = Array.from({ length: n }, (_, i) => `LABEL_${i}`);
  for (const [k, v] of entries) {
    const i = Number(k);
    if (!Number.isInteger(i) || i < 0 || i >= n || typeof v !== "string") throw new HFConfigError(f.path, `id2label[${JSON.stringify(k)}]`, `expected a label string for an id in [0, ${n}), found ${JSON.stringify(v)?.slice(0, 40)}`);
    out[i] = v;
  }
  return out;
}

/** Reads `folder/config.json` of an encoder. */
export function readHFEncoderConfig(folder: string): HFEncoderConfig {
  const opened = openConfigJson(folder);
  const { path, f } = opened;
  let hfArchitecture = opened.hfArchitecture;
  let known = hfArchitecture === undefined ? undefined : HF_ENCODER_ARCHITECTURES[hfArchitecture];
  if (hfArchitecture === undefined) {
    const family = typeof f.o["model_type"] === "string" ? MODEL_TYPES[f.o["model_type"]] : undefined;
    if (family) {
      known = { family, head: "base" };
      hfArchitecture = { bert: "BertModel", roberta: "RobertaModel", distilbert: "DistilBertModel" }[family];
    }
  }
  if (!known || hfArchitecture === undefined) {
    throw new HFConfigError(path, "architectures", `unsupported encoder architecture ${JSON.stringify(hfArchitecture ?? f.o["model_type"])} (supported: ${Object.keys(HF_ENCODER_ARCHITECTURES).join(", ")})`);
  }
  const { family, head } = known;
  const d = family === "distilbert";
  const hiddenSize = f.int(d ? "dim" : "hidden_size", LIMITS.hidden);
  const headCount = f.int(d ? "n_heads" : "num_attention_heads", LIMITS.heads);
  if (hiddenSize % headCount !== 0) throw new HFConfigError(path, d ? "n_heads" : "num_attention_heads", `${headCount} heads do not divide the hidden size ${hiddenSize}`);
  const act = f.o[d ? "activation" : "hidden_act"] ?? "gelu";
  if (act !== "gelu" && act !== "relu") throw new HFConfigError(path, d ? "activation" : "hidden_act", `unsupported activation ${JSON.stringify(act)} (supported: "gelu", "relu")`);
  if (d && f.bool("sinusoidal_pos_embds", false)) throw new HFConfigError(path, "sinusoidal_pos_embds", "sinusoidal position embeddings are not supported (the learned table is)");
  const pet = f.o["position_embedding_type"];
  if (pet !== undefined && pet !== null && pet !== "absolute") throw new HFConfigError(path, "position_embedding_type", `unsupported ${JSON.stringify(pet)} (supported: "absolute")`);
  const padTokenId = f.ids("pad_token_id")[0];
  const numLabels = f.has("num_labels") ? f.int("num_labels", LIMITS.vocab) : undefined;
  const pt = f.o["problem_type"];
  if (pt !== undefined && pt !== null && pt !== "single_label_classification" && pt !== "multi_label_classification" && pt !== "regression") {
    throw new HFConfigError(path, "problem_type", `expected single_label_classification, multi_label_classification or regression, found ${JSON.stringify(pt)}`);
  }
  return {
    path, hfArchitecture, family, head,
    vocabSize: f.int("vocab_size", LIMITS.vocab),
    hiddenSize,
    blockCount: f.int(d ? "n_layers" : "num_hidden_layers", LIMITS.layers),
    headCount,
    feedForwardLength: f.int(d ? "hidden_dim" : "intermediate_size", LIMITS.ffn),
    maxPositions: f.int("max_position_embeddings", LIMITS.context, 512),
    positionOffset: family === "roberta" ? (padTokenId ?? 1) + 1 : 0,
    typeVocabSize: d ? 0 : f.int("type_vocab_size", 1 << 16, 2),
    // DistilBERT's LayerNorms are nn.LayerNorm(eps=1e-12), fixed in its code
    normEps: d ? 1e-12 : f.num("layer_norm_eps", 1e-12, 0, 1),
    activation: act,
    padTokenId,
    labels: labelsOf(f, numLabels),
    problemType: (pt ?? undefined) as ProblemType | undefined,
    tieWordEmbeddings: f.bool("tie_word_embeddings", true),
  };
}
