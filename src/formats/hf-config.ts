import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { FileFieldError } from "./errors.js";
import { readWholeFile } from "./read-file.js";

/**
 * Hugging Face `config.json` (and `generation_config.json`) read into the few numbers the
 * supported architectures need. Every size is checked before anything is allocated from it:
 * positive integers under generous limits, heads dividing the hidden size, KV heads dividing
 * the heads — a hostile or broken config fails here with the field named.
 */

export type HFArch = "llama" | "qwen2" | "qwen3" | "gpt2";

/** config.json "architectures"[0] -> llama.cpp architecture name */
export const HF_ARCHITECTURES: Readonly<Record<string, HFArch>> = {
  LlamaForCausalLM: "llama",
  MistralForCausalLM: "llama",
  Qwen2ForCausalLM: "qwen2",
  Qwen3ForCausalLM: "qwen3",
  GPT2LMHeadModel: "gpt2",
};

export type HFRopeScaling =
  | { readonly type: "linear"; readonly factor: number }
  | { readonly type: "llama3"; readonly factor: number; readonly lowFreqFactor: number; readonly highFreqFactor: number; readonly originalContextLength: number };

export interface HFModelConfig {
  /** the config.json file */
  readonly path: string;
  readonly hfArchitecture: string;
  readonly arch: HFArch;
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly blockCount: number;
  readonly headCount: number;
  readonly headCountKv: number;
  readonly headDim: number;
  readonly feedForwardLength: number;
  readonly contextLength: number;
  /** RMSNorm (Llama family) or LayerNorm (GPT-2) epsilon */
  readonly normEps: number;
  /** not used by gpt2 */
  readonly ropeTheta: number;
  readonly ropeScaling?: HFRopeScaling;
  readonly tieWordEmbeddings: boolean;
  /** Llama's attention_bias: q/k/v/o biases (Qwen2 always has q/k/v biases) */
  readonly attentionBias: boolean;
  readonly bosTokenId?: number;
  readonly eosTokenIds: readonly number[];
}

export class HFConfigError extends FileFieldError {
  constructor(path: string, field: string, message: string) {
    super(path, field, message);
    this.name = "HFConfigError";
  }
}

const MAX_JSON_BYTES = 16 << 20;
/** generous upper bounds: far above any released model, far below an allocation that could hurt */
export const LIMITS = {
  vocab: 1 << 22,
  hidden: 1 << 17,
  layers: 1 << 12,
  heads: 1 << 12,
  ffn: 1 << 20,
  context: 1 << 24,
};

/** reads a JSON object file, bounded in size; errors name the file */
export function readJsonObject(path: string): Record<string, unknown> {
  const stat = statSync(path);
  if (stat.isDirectory()) throw new HFConfigError(path, "file", "is a folder, not a JSON file");
  const tooLarge = (size: number) => new HFConfigError(path, "file", `${size} bytes is larger than the ${MAX_JSON_BYTES}-byte limit for a JSON config`);
  const text = readWholeFile(path, MAX_JSON_BYTES, tooLarge).toString("utf8");
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new HFConfigError(path, "file", `invalid JSON: ${(e as Error).message}`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new HFConfigError(path, "file", "expected a JSON object");
  return v as Record<string, unknown>;
}

/** typed, bounded access to a config.json object's fields; errors name the file and field */
export class Fields {
  /** `prefix`: how errors name the object these fields are in ("rope_scaling.") */
  constructor(readonly path: string, readonly o: Record<string, unknown>, private readonly prefix = "") {}
  private err(k: string, msg: string): HFConfigError {
    return new HFConfigError(this.path, this.prefix + k, msg);
  }
  has(k: string): boolean {
    return this.o[k] !== undefined && this.o[k] !== null;
  }
  int(k: string, max: number, fallback?: number): number {
    const v = this.has(k) ? this.o[k] : fallback;
    if (v === undefined) throw this.err(k, "required field is missing");
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1 || v > max) throw this.err(k, `expected an integer in [1, ${max}], found ${JSON.stringify(v)}`);
    return v;
  }
  num(k: string, fallback: number, min = 0, max = Infinity): number {
    const v = this.has(k) ? this.o[k] : fallback;
    if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max) throw this.err(k, `expected a number in [${min}, ${max}], found ${JSON.stringify(v)}`);
    return v;
  }
  bool(k: string, fallback: boolean): boolean {
    const v = this.has(k) ? this.o[k] : fallback;
    if (typeof v !== "boolean") throw this.err(k, `expected true or false, found ${JSON.stringify(v)}`);
    return v;
  }
  /** a token id or a list of them */
  ids(k: string): number[] {
    if (!this.has(k)) return [];
    const v = this.o[k];
    const list = Array.isArray(v) ? v : [v];
    for (const id of list) if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 0) throw this.err(k, `expected a token id or a list of them, found ${JSON.stringify(v)?.slice(0, 60)}`);
    return list as number[];
  }
}

/**
 * RoPE settings as transformers reads them. transformers 4 keeps `rope_theta` and `rope_scaling`
 * at the top level; transformers 5 saves one `rope_parameters` object holding `rope_type`,
 * `rope_theta` and the scaling fields (configuration_utils' convert_rope_params_to_dict: a
 * non-empty `rope_scaling` takes its place, a `rope_theta` inside wins over the top-level one,
 * 10000 when neither is there; `type` is the old name of `rope_type`).
 */
function ropeSettings(f: Fields, contextLength: number): { theta: number; scaling?: HFRopeScaling } {
  const pick = (k: string) => {
    const v = f.o[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "object" || Array.isArray(v)) throw new HFConfigError(f.path, k, `expected an object, found ${JSON.stringify(v)?.slice(0, 60)}`);
    return Object.keys(v).length > 0 ? { key: k, o: v as Record<string, unknown> } : undefined;
  };
  const params = pick("rope_scaling") ?? pick("rope_parameters");
  // these models rotate the whole head (transformers' Llama, Mistral and Qwen attention cannot rotate
  // a part): a factor other than 1 was ignored, a silently different model
  const partial = (o: Record<string, unknown>, field: string) => {
    const v = o["partial_rotary_factor"];
    if (v !== undefined && v !== null && v !== 1) throw new HFConfigError(f.path, field, `expected 1 (the whole head rotated; partial rotation is not supported), found ${JSON.stringify(v)?.slice(0, 60)}`);
  };
  partial(f.o, "partial_rotary_factor");
  if (params) partial(params.o, `${params.key}.partial_rotary_factor`);
  if (!params) return { theta: f.num("rope_theta", 10000, Number.MIN_VALUE) };
  const s = new Fields(f.path, params.o, `${params.key}.`);
  const theta = s.has("rope_theta") ? s.num("rope_theta", 10000, Number.MIN_VALUE) : f.num("rope_theta", 10000, Number.MIN_VALUE);
  const type = s.o["rope_type"] ?? s.o["type"] ?? "default";
  if (type === "default") return { theta };
  const factor = s.num("factor", NaN, Number.MIN_VALUE, 1e6);
  if (type === "linear") return { theta, scaling: { type, factor } };
  if (type === "llama3") {
    const lowFreqFactor = s.num("low_freq_factor", NaN, Number.MIN_VALUE, 1e6);
    const highFreqFactor = s.num("high_freq_factor", NaN, Number.MIN_VALUE, 1e6);
    if (!(highFreqFactor > lowFreqFactor)) throw new HFConfigError(f.path, `${params.key}.high_freq_factor`, `must be greater than low_freq_factor (${lowFreqFactor}), found ${highFreqFactor}`);
    const originalContextLength = s.int("original_max_position_embeddings", LIMITS.context, contextLength);
    return { theta, scaling: { type, factor, lowFreqFactor, highFreqFactor, originalContextLength } };
  }
  throw new HFConfigError(f.path, `${params.key}.rope_type`, `unsupported RoPE scaling ${JSON.stringify(type)} (supported: linear, llama3)`);
}

/**
 * Refuses a setting transformers honours but this model code does not implement (it would run,
 * silently computing another model): `key` must be absent (transformers' default `fallback`) or one of `allowed`.
 */
function unsupported(f: Fields, key: string, fallback: unknown, allowed: readonly unknown[], runs: string): void {
  const v = f.has(key) ? f.o[key] : fallback;
  if (!allowed.includes(v)) throw new HFConfigError(f.path, key, `${JSON.stringify(v)?.slice(0, 60)} is not supported: tsllm runs ${runs} (${allowed.map((a) => JSON.stringify(a)).join(" or ")})`);
}

/** `folder/config.json` opened: its fields and its "architectures"[0], if any */
export function openConfigJson(folder: string): { path: string; f: Fields; hfArchitecture?: string } {
  const path = join(folder, "config.json");
  if (!existsSync(path)) throw new HFConfigError(path, "file", "not found (a Hugging Face model folder needs config.json)");
  const f = new Fields(path, readJsonObject(path));
  const archs = f.o["architectures"];
  return { path, f, hfArchitecture: Array.isArray(archs) && typeof archs[0] === "string" ? archs[0] : undefined };
}

/** architectures that are encoders (src/formats/hf-encoder-config.ts reads them), for a pointing error */
const ENCODER_ARCHITECTURE = /^(Bert|Roberta|XLMRoberta|DistilBert)(Model|For)/;

/** Reads `folder/config.json`. */
export function readHFConfig(folder: string): HFModelConfig {
  const { path, f, hfArchitecture } = openConfigJson(folder);
  const archs = f.o["architectures"];
  if (hfArchitecture !== undefined && ENCODER_ARCHITECTURE.test(hfArchitecture)) {
    throw new HFConfigError(path, "architectures", `"${hfArchitecture}" is an encoder, not a text generator: use pipeline() / embed() (tsllm pipeline, tsllm embed)`);
  }
  if (hfArchitecture === undefined) throw new HFConfigError(path, "architectures", `expected a list like ["LlamaForCausalLM"], found ${JSON.stringify(archs)?.slice(0, 60)}`);
  // a name from the file: only the table's own entries count ("constructor" is not an architecture)
  const arch = Object.hasOwn(HF_ARCHITECTURES, hfArchitecture) ? HF_ARCHITECTURES[hfArchitecture] : undefined;
  if (!arch) throw new HFConfigError(path, "architectures", `unsupported architecture "${hfArchitecture}" (supported: ${Object.keys(HF_ARCHITECTURES).join(", ")})`);
  const eosTokenIds = f.ids("eos_token_id");
  const bos = f.ids("bos_token_id");
  const bosTokenId = bos[0];

  if (arch === "gpt2") {
    // settings transformers' GPT2Attention / GPT2MLP honour that change the numbers; the model here runs GPT-2's own
    unsupported(f, "activation_function", "gelu_new", ["gelu_new", "gelu_pytorch_tanh"], "GPT-2's tanh-approximated GELU");
    unsupported(f, "scale_attn_weights", true, [true], "attention scores scaled by 1/sqrt(head size)");
    unsupported(f, "scale_attn_by_inverse_layer_idx", false, [false], "attention scores scaled by 1/sqrt(head size) only");
    const hiddenSize = f.int("n_embd", LIMITS.hidden);
    const headCount = f.int("n_head", LIMITS.heads);
    if (hiddenSize % headCount !== 0) throw new HFConfigError(path, "n_head", `${headCount} heads do not divide n_embd ${hiddenSize}`);
    const headDim = hiddenSize / headCount;
    return {
      path, hfArchitecture, arch,
      vocabSize: f.int("vocab_size", LIMITS.vocab),
      hiddenSize,
      blockCount: f.int("n_layer", LIMITS.layers),
      headCount,
      headCountKv: headCount,
      headDim,
      feedForwardLength: f.int("n_inner", LIMITS.ffn, 4 * hiddenSize),
      contextLength: f.int("n_positions", LIMITS.context, f.has("n_ctx") ? (f.o["n_ctx"] as number) : 1024),
      normEps: f.num("layer_norm_epsilon", 1e-5, 0, 1),
      ropeTheta: 10000,
      tieWordEmbeddings: f.bool("tie_word_embeddings", true),
      attentionBias: true,
      bosTokenId,
      eosTokenIds,
    };
  }

  // Llama / Mistral / Qwen2 / Qwen3 build their MLP from ACT2FN[hidden_act] ("swish" is SiLU there too)
  unsupported(f, "hidden_act", "silu", ["silu", "swish"], "the SwiGLU MLP (silu)");
  const hiddenSize = f.int("hidden_size", LIMITS.hidden);
  const headCount = f.int("num_attention_heads", LIMITS.heads);
  const headCountKv = f.int("num_key_value_heads", LIMITS.heads, headCount);
  if (headCount % headCountKv !== 0) throw new HFConfigError(path, "num_key_value_heads", `${headCountKv} KV heads do not divide ${headCount} attention heads`);
  // transformers' Qwen3Config defaults head_dim to 128; Llama / Mistral / Qwen2 derive it from the hidden size
  const defaultHeadDim = arch === "qwen3" ? 128 : hiddenSize / headCount;
  if (!f.has("head_dim") && !Number.isInteger(defaultHeadDim)) throw new HFConfigError(path, "num_attention_heads", `${headCount} heads do not divide hidden_size ${hiddenSize} (and no head_dim is given)`);
  const headDim = f.int("head_dim", LIMITS.hidden, defaultHeadDim);
  if (headDim % 2 !== 0) throw new HFConfigError(path, "head_dim", `RoPE needs an even head size, found ${headDim}`);
  const contextLength = f.int("max_position_embeddings", LIMITS.context, 2048);
  const rope = ropeSettings(f, contextLength);
  return {
    path, hfArchitecture, arch,
    vocabSize: f.int("vocab_size", LIMITS.vocab),
    hiddenSize,
    blockCount: f.int("num_hidden_layers", LIMITS.layers),
    headCount,
    headCountKv,
    headDim,
    feedForwardLength: f.int("intermediate_size", LIMITS.ffn),
    contextLength,
    normEps: f.num("rms_norm_eps", 1e-6, 0, 1),
    ropeTheta: rope.theta,
    ropeScaling: rope.scaling,
    // PretrainedConfig defaults to tied, but these model classes default to untied
    tieWordEmbeddings: f.bool("tie_word_embeddings", false),
    attentionBias: arch === "qwen2" ? true : f.bool("attention_bias", false),
    bosTokenId,
    eosTokenIds,
  };
}

/**
 * The generation_config.json settings that `generate` has options for, under those options'
 * names, so a model's defaults can be passed to `generate` as they are.
 */
export interface GenerationDefaults {
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  repeatPenalty?: number;
  maxTokens?: number;
}

export interface HFGenerationConfig {
  /** only what the file sets, plus HF's defaults where do_sample implies them */
  readonly defaults: GenerationDefaults;
  /** do_sample as the file sets it (transformers' default when left out: false); the text-generation pipeline samples by it */
  readonly doSample?: boolean;
  /** max_length as the file sets it (tokens in all, the prompt's included); the text-generation pipeline's limit without max_new_tokens */
  readonly maxLength?: number;
  /**
   * temperature, top_k, top_p, min_p as the file writes them, do_sample false included: transformers'
   * pipeline keeps them in its generation config, so a call's do_sample=True samples with them
   */
  readonly sampling: Pick<GenerationDefaults, "temperature" | "topK" | "topP" | "minP">;
  readonly bosTokenId?: number;
  readonly eosTokenIds: readonly number[];
}

/** Reads `folder/generation_config.json`; an absent file gives empty defaults. */
export function readGenerationConfig(folder: string): HFGenerationConfig {
  const path = join(folder, "generation_config.json");
  if (!existsSync(path)) return { defaults: {}, sampling: {}, eosTokenIds: [] };
  return generationConfigOf(path, readJsonObject(path));
}

/**
 * A generation config's settings from its JSON object (`path` names it in errors): the file's, or
 * another object holding the same keys (the text-generation pipeline's config.json fallback and
 * task_specific_params, as transformers' GenerationConfig.from_model_config reads them)
 */
export function generationConfigOf(path: string, o: Record<string, unknown>): HFGenerationConfig {
  const f = new Fields(path, o);
  const defaults: GenerationDefaults = {};
  const doSample = f.has("do_sample") ? f.bool("do_sample", false) : undefined;
  const sampling: { temperature?: number; topK?: number; topP?: number; minP?: number } = {};
  if (f.has("temperature")) sampling.temperature = f.num("temperature", 1, 0, 100);
  if (f.has("top_k")) sampling.topK = f.o["top_k"] === 0 ? 0 : f.int("top_k", 1 << 30, 50);
  if (f.has("top_p")) sampling.topP = f.num("top_p", 1, 0, 1);
  if (f.has("min_p")) sampling.minP = f.num("min_p", 0, 0, 1);
  if (doSample === false) {
    defaults.temperature = 0;
  } else {
    // with do_sample, transformers fills in temperature 1, top_k 50, top_p 1 for keys the file leaves out
    Object.assign(defaults, doSample === true ? { temperature: 1, topK: 50, topP: 1, minP: 0, ...sampling } : sampling);
  }
  if (f.has("repetition_penalty")) defaults.repeatPenalty = f.num("repetition_penalty", 1, Number.MIN_VALUE, 100);
  if (f.has("max_new_tokens")) defaults.maxTokens = f.int("max_new_tokens", 1 << 30);
  const maxLength = f.has("max_length") ? f.int("max_length", 1 << 30) : undefined;
  return { defaults, sampling, ...(doSample === undefined ? {} : { doSample }), ...(maxLength === undefined ? {} : { maxLength }), bosTokenId: f.ids("bos_token_id")[0], eosTokenIds: f.ids("eos_token_id") };
}
