import { existsSync } from "node:fs";
import { join } from "node:path";
import { generationConfigOf, readJsonObject } from "../formats/index.js";
import { DEFAULT_MAX_LENGTH, DEFAULT_MAX_NEW_TOKENS, type ShippedGeneration, type TextGenerationOptions } from "./text-generation.js";

/**
 * The generation settings a folder gives transformers' text-generation pipeline, as it comes by
 * them: generation_config.json; without one, the generation keys of config.json (from_pretrained's
 * GenerationConfig.from_model_config, which folders saved by old transformers versions rely on);
 * then config.json's task_specific_params["text-generation"] over them (Pipeline.__init__'s legacy
 * update: openai-community/gpt2 ships {do_sample: true, max_length: 50} there).
 */

/** the keys tsllm's pipeline honours (ShippedGeneration's) */
/** the token bans tsllm's pipeline honours: whole numbers, 0 (or none) for no ban, each with its option's name */
const BANS = { no_repeat_ngram_size: "noRepeatNgramSize", min_new_tokens: "minNewTokens", min_length: "minLength" } as const;

/** the token-list bans tsllm's pipeline honours, each with its option's name (null, [] or sequence_bias {}: none) */
const LIST_BAN_KEYS = { suppress_tokens: "suppressTokens", begin_suppress_tokens: "beginSuppressTokens", bad_words_ids: "badWordsIds", sequence_bias: "sequenceBias" } as const;

/** the forced tokens tsllm's pipeline honours, each with its option's name (null: none) */
const FORCED_KEYS = { forced_bos_token_id: "forcedBosTokenId", forced_eos_token_id: "forcedEosTokenId" } as const;

/** typical_p and the sampling cutoffs tsllm's pipeline honours, each with its option's name */
const CUTOFF_KEYS = { typical_p: "typicalP", epsilon_cutoff: "epsilonCutoff", eta_cutoff: "etaCutoff" } as const;

/*
 * Read by no one, on purpose: renormalize_logits appends LogitNormalization (a log-softmax) to the
 * processors, which changes the scores generate() returns with output_scores, not the token chosen
 * (greedy's argmax and sampling's softmax are the same after it); the pipeline returns no scores
 * and runs no beam search (num_beams is refused), so a folder's value changes nothing. The output
 * switches (output_scores, return_dict_in_generate ...) likewise.
 */

const HONOURED = ["do_sample", "temperature", "top_k", "top_p", "min_p", "repetition_penalty", "max_new_tokens", "max_length", ...Object.keys(BANS), ...Object.keys(LIST_BAN_KEYS), ...Object.keys(FORCED_KEYS), "exponential_decay_length_penalty", ...Object.keys(CUTOFF_KEYS)];

/**
 * Keys generate() acts on by default (GenerationMixin._get_logits_processor, _get_stopping_criteria,
 * the generation mode) that tsllm's pipeline does not: each with the values that do nothing (a
 * missing key or null does nothing too) and what transformers does with another. Refused, naming
 * the key, rather than silently generating another text.
 */
const NOT_DONE: readonly (readonly [key: string, noOp: readonly unknown[], what: string])[] = [
  ["encoder_no_repeat_ngram_size", [0], "an encoder-decoder setting; transformers fails with it on a decoder-only model"],
  ["encoder_repetition_penalty", [1], "penalizes or favours the prompt's tokens"],
  ["num_beams", [1], "beam search"],
  ["num_beam_groups", [1], "diverse beam search"],
  ["num_return_sequences", [1], "several sequences for each prompt"],
  ["penalty_alpha", [0], "contrastive search"],
  ["dola_layers", [], "DoLa decoding"],
  ["force_words_ids", [[]], "constrained beam search"],
  ["constraints", [[]], "constrained beam search"],
  ["forced_decoder_ids", [[]], "forces tokens at given steps"],
  ["guidance_scale", [1], "classifier-free guidance"],
  ["watermarking_config", [], "watermarks the text"],
  ["stop_strings", [[]], "stops at those strings"],
  ["max_time", [], "stops after that many seconds"],
  ["token_healing", [false], "rewrites the prompt's last tokens"],
];

const GENERATION_KEYS = [...HONOURED, ...NOT_DONE.map(([k]) => k)];

const isNoOp = (v: unknown, noOp: readonly unknown[]) => v === undefined || v === null || noOp.some((x) => JSON.stringify(x) === JSON.stringify(v));

/** the first setting among `keys` that does something, told as an error about `source` */
function refusal(o: Record<string, unknown>, sources: Readonly<Record<string, string>>, keys: typeof NOT_DONE): string | undefined {
  for (const [key, noOp, what] of keys) {
    if (isNoOp(o[key], noOp)) continue;
    return `${sources[key]} sets ${key} ${JSON.stringify(o[key])?.slice(0, 60)}, which transformers' text-generation pipeline applies (${what}); tsllm's pipeline does not, so it refuses the folder rather than generate another text (remove ${key} from it)`;
  }
  return undefined;
}

function picked(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(GENERATION_KEYS.filter((k) => k in o).map((k) => [k, o[k]]));
}

/** config.json's task_specific_params["text-generation"], checked to be an object */
function taskParams(path: string, config: Record<string, unknown>): Record<string, unknown> {
  const all = config["task_specific_params"];
  if (all === undefined || all === null) return {};
  const own = typeof all === "object" && !Array.isArray(all) ? (all as Record<string, unknown>)["text-generation"] : all;
  if (own === undefined || own === null) return {};
  if (typeof own !== "object" || Array.isArray(own)) throw new Error(`${path}: task_specific_params["text-generation"]: expected an object of generation settings, got ${JSON.stringify(own)?.slice(0, 60)}`);
  const params = own as Record<string, unknown>;
  // transformers prepends the prefix to each prompt (the TransfoXL / XLNet padding text)
  if (params["prefix"] !== undefined && params["prefix"] !== "") throw new Error(`${path}: task_specific_params["text-generation"] sets prefix, which transformers' text-generation pipeline puts before each prompt; tsllm's pipeline does not, so it refuses the folder rather than generate another text`);
  return params;
}

/**
 * task_specific_params come after Pipeline.__init__ has settled max_new_tokens (its own 256, unless
 * the file's max_new_tokens, and dropped beside a file's max_length other than 20): where one is
 * left, generate() lets it win over their max_length, which then does nothing (gpt2's max_length 50)
 */
function withoutUnusedLength(base: Record<string, unknown>, task: Record<string, unknown>): Record<string, unknown> {
  const fileLength = base["max_length"] ?? DEFAULT_MAX_LENGTH;
  const newTokens = base["max_new_tokens"] ?? DEFAULT_MAX_NEW_TOKENS;
  const kept = newTokens !== DEFAULT_MAX_NEW_TOKENS || fileLength === DEFAULT_MAX_LENGTH;
  if (!kept || task["max_length"] === undefined) return task;
  const { max_length: _unused, ...rest } = task;
  return rest;
}

/** no_repeat_ngram_size, min_new_tokens and min_length as the pipeline's options, each checked to be a whole number >= 0 (null: unset, as transformers reads it) */
function bansOf(o: Record<string, unknown>, sources: Readonly<Record<string, string>>): Pick<ShippedGeneration, "noRepeatNgramSize" | "minNewTokens" | "minLength"> {
  const bans: { -readonly [K in "noRepeatNgramSize" | "minNewTokens" | "minLength"]?: number } = {};
  for (const [key, option] of Object.entries(BANS)) {
    const v = o[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) throw new Error(`${sources[key]}: ${key}: expected an integer >= 0 (0 for none), found ${JSON.stringify(v)?.slice(0, 60)}`);
    bans[option] = v;
  }
  return bans;
}

type ListBans = Pick<ShippedGeneration, (typeof LIST_BAN_KEYS)[keyof typeof LIST_BAN_KEYS]>;

/**
 * suppress_tokens, begin_suppress_tokens (token ids), bad_words_ids (non-empty token sequences)
 * and sequence_bias ([token sequence, bias] pairs, the list form GenerationConfig writes) as the
 * pipeline's options, each checked as transformers' processors check theirs (null, [] or {}: none)
 */
function listBansOf(o: Record<string, unknown>, sources: Readonly<Record<string, string>>): ListBans {
  const bans: { -readonly [K in keyof ListBans]?: ListBans[K] } = {};
  const isIds = (v: unknown): v is number[] => Array.isArray(v) && v.every((t) => Number.isSafeInteger(t) && t >= 0);
  const isSequence = (v: unknown): v is number[] => isIds(v) && v.length > 0;
  for (const [key, option] of Object.entries(LIST_BAN_KEYS)) {
    const v = o[key];
    if (v === undefined || v === null || (Array.isArray(v) && v.length === 0)) continue;
    if (key === "sequence_bias" && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 0) continue;
    const fail = (expected: string) => new Error(`${sources[key]}: ${key}: expected ${expected}, found ${JSON.stringify(v)?.slice(0, 60)}`);
    if (key === "suppress_tokens" || key === "begin_suppress_tokens") {
      if (!isIds(v)) throw fail("a list of token ids (integers >= 0)");
      bans[option as "suppressTokens"] = v;
    } else if (key === "bad_words_ids") {
      if (!Array.isArray(v) || !v.every(isSequence)) throw fail("a list of non-empty token id lists");
      bans.badWordsIds = v;
    } else {
      const isPair = (p: unknown) => Array.isArray(p) && p.length === 2 && isSequence(p[0]) && typeof p[1] === "number";
      if (!Array.isArray(v) || !v.every(isPair)) throw fail("a list of [token id list, bias] pairs");
      bans.sequenceBias = v as [number[], number][];
    }
  }
  return bans;
}

type Forced = Pick<ShippedGeneration, (typeof FORCED_KEYS)[keyof typeof FORCED_KEYS]>;

/** forced_bos_token_id (a token id) and forced_eos_token_id (one or a non-empty list, as ForcedEOSTokenLogitsProcessor takes it) as the pipeline's options (null: none) */
function forcedOf(o: Record<string, unknown>, sources: Readonly<Record<string, string>>): Forced {
  const forced: { -readonly [K in keyof Forced]?: Forced[K] } = {};
  const isId = (t: unknown): t is number => Number.isSafeInteger(t) && (t as number) >= 0;
  const bos = o["forced_bos_token_id"];
  if (bos !== undefined && bos !== null) {
    if (!isId(bos)) throw new Error(`${sources["forced_bos_token_id"]}: forced_bos_token_id: expected a token id (an integer >= 0), found ${JSON.stringify(bos)?.slice(0, 60)}`);
    forced.forcedBosTokenId = bos;
  }
  const eos = o["forced_eos_token_id"];
  if (eos !== undefined && eos !== null) {
    if (!(isId(eos) || (Array.isArray(eos) && eos.length > 0 && eos.every(isId)))) {
      throw new Error(`${sources["forced_eos_token_id"]}: forced_eos_token_id: expected a token id or a non-empty list of them (integers >= 0), found ${JSON.stringify(eos)?.slice(0, 60)}`);
    }
    forced.forcedEosTokenId = eos;
  }
  return forced;
}

/** exponential_decay_length_penalty ([start index, decay factor], as ExponentialDecayLengthPenalty takes it; null: none) as the pipeline's option */
function decayOf(o: Record<string, unknown>, sources: Readonly<Record<string, string>>): Pick<ShippedGeneration, "exponentialDecayLengthPenalty"> {
  const v = o["exponential_decay_length_penalty"];
  if (v === undefined || v === null) return {};
  if (!(Array.isArray(v) && v.length === 2 && Number.isSafeInteger(v[0]) && typeof v[1] === "number" && Number.isFinite(v[1]))) {
    throw new Error(`${sources["exponential_decay_length_penalty"]}: exponential_decay_length_penalty: expected [start index, decay factor] (an integer and a finite number), found ${JSON.stringify(v)?.slice(0, 60)}`);
  }
  return { exponentialDecayLengthPenalty: [v[0], v[1]] };
}

/**
 * typical_p, epsilon_cutoff and eta_cutoff as the pipeline's options (null: none). typical_p above
 * 0, as TypicalLogitsWarper takes it, 1 or more adding none (read as 1); the cutoffs any number, as
 * generate() adds EpsilonLogitsWarper / EtaLogitsWarper only for 0 < x < 1 (others: none)
 */
function cutoffsOf(o: Record<string, unknown>, sources: Readonly<Record<string, string>>): Pick<ShippedGeneration, (typeof CUTOFF_KEYS)[keyof typeof CUTOFF_KEYS]> {
  const out: { -readonly [K in (typeof CUTOFF_KEYS)[keyof typeof CUTOFF_KEYS]]?: number } = {};
  for (const [key, option] of Object.entries(CUTOFF_KEYS)) {
    const v = o[key];
    if (v === undefined || v === null) continue;
    const typical = key === "typical_p";
    if (typeof v !== "number" || !Number.isFinite(v) || (typical && !(v > 0))) {
      throw new Error(`${sources[key]}: ${key}: expected ${typical ? "a number above 0 (1 or more for none)" : "a number (0 < x < 1 cuts; others: none)"}, found ${JSON.stringify(v)?.slice(0, 60)}`);
    }
    out[option] = typical ? Math.min(v, 1) : v;
  }
  return out;
}

/** task_specific_params["text-generation"] as the pipeline's options (their values as written; checked by generationConfigOf) */
function taskOptions(taskPath: string, task: Record<string, unknown>): TextGenerationOptions {
  const { defaults, doSample, maxLength, sampling } = generationConfigOf(taskPath, task);
  const options: { -readonly [K in keyof TextGenerationOptions]: TextGenerationOptions[K] } = {
    doSample, temperature: sampling.temperature, topK: sampling.topK, topP: sampling.topP, repetitionPenalty: defaults.repeatPenalty,
    maxNewTokens: defaults.maxTokens, maxLength, ...bansOf(task, Object.fromEntries(Object.keys(BANS).map((k) => [k, taskPath]))),
    ...listBansOf(task, Object.fromEntries(Object.keys(LIST_BAN_KEYS).map((k) => [k, taskPath]))),
    ...forcedOf(task, Object.fromEntries(Object.keys(FORCED_KEYS).map((k) => [k, taskPath]))),
    ...decayOf(task, { exponential_decay_length_penalty: taskPath }), ...cutoffsOf(task, Object.fromEntries(Object.keys(CUTOFF_KEYS).map((k) => [k, taskPath]))),
  };
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
}

/** The folder's generation settings for the text-generation pipeline */
export function folderGeneration(folder: string): ShippedGeneration {
  const configPath = join(folder, "config.json");
  const config = existsSync(configPath) ? readJsonObject(configPath) : {};
  const filePath = join(folder, "generation_config.json");
  const hasFile = existsSync(filePath);
  const basePath = hasFile ? filePath : configPath;
  const taskPath = `${configPath} task_specific_params["text-generation"]`;
  const base = hasFile ? picked(readJsonObject(filePath)) : picked(config);
  const ownTask = picked(taskParams(configPath, config));
  const task = withoutUnusedLength(base, ownTask);
  const merged = { ...base, ...task };
  const baseName = hasFile ? filePath : `${configPath} (no generation_config.json: transformers takes config.json's generation settings)`;
  const sources = Object.fromEntries(Object.keys(merged).map((k) => [k, k in task ? taskPath : baseName]));
  const refused = refusal(merged, sources, NOT_DONE);
  if (refused !== undefined) throw new Error(refused);
  // each part checked on its own, so that an error names where the value is written
  generationConfigOf(basePath, base);
  generationConfigOf(taskPath, task);
  const { defaults, doSample, maxLength, sampling } = generationConfigOf(basePath, merged);
  const ids = { ...listBansOf(merged, sources), ...forcedOf(merged, sources) };
  // where each is written, as the refusals above name it: the pipeline checks the ids against the vocabulary once the model is open
  const idKeys: Readonly<Record<string, string>> = { ...LIST_BAN_KEYS, ...FORCED_KEYS };
  const idSources = Object.fromEntries(Object.entries(idKeys).filter(([, option]) => option in ids).map(([key, option]) => [option, `${sources[key]}: ${key}`]));
  return {
    ...bansOf(merged, sources), ...ids, ...decayOf(merged, sources), ...cutoffsOf(merged, sources), ...(Object.keys(idSources).length === 0 ? {} : { idSources }),
    ...(Object.keys(ownTask).length === 0 ? {} : { task: { options: taskOptions(taskPath, ownTask), source: taskPath } }),
    ...defaults, ...(doSample === undefined ? {} : { doSample }), ...(maxLength === undefined ? {} : { maxLength }), sampling,
  };
}
