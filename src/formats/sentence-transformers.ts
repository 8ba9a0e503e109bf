import { existsSync } from "node:fs";
import { isAbsolute, join, relative, resolve, sep } from "node:path";
import { HFConfigError, readJsonObject } from "./hf-config.js";
import { readWholeFile } from "./read-file.js";

/**
 * A sentence-transformers folder: modules.json lists Transformer -> Pooling (-> Normalize), the
 * pooling folder's config.json says how token vectors become one, sentence_bert_config.json
 * caps the tokens (max_seq_length). What SentenceTransformer(folder).encode() does, as data.
 */

export type Pooling = "mean" | "cls" | "max" | "mean_sqrt_len" | "weightedmean" | "lasttoken";

export interface SentenceTransformerConfig {
  readonly pooling: Pooling;
  /** a Normalize module follows the pooling */
  readonly normalize: boolean;
  /** sentence_bert_config.json's max_seq_length (truncation), if set */
  readonly maxSeqLength?: number;
  /** sentence_bert_config.json's do_lower_case: lowercase the text before tokenizing */
  readonly doLowerCase: boolean;
  /** config_sentence_transformers.json's prompts: name -> text put before a text (encode(prompt_name=...)) */
  readonly prompts?: Readonly<Record<string, string>>;
  /** config_sentence_transformers.json's default_prompt_name: the prompt encode() uses when given none */
  readonly defaultPromptName?: string;
  /** the Pooling config's include_prompt (default true); false leaves the prompt's tokens out of the pooling */
  readonly includePrompt?: boolean;
}

const MODULE = "sentence_transformers.models.";

/**
 * sentence_bert_config.json, or a name older releases saved the Transformer module's settings
 * under: sentence-transformers' Transformer.load takes the first of these its folder has
 */
const TRANSFORMER_CONFIG_NAMES = [
  "sentence_bert_config.json", "sentence_roberta_config.json", "sentence_distilbert_config.json", "sentence_camembert_config.json",
  "sentence_albert_config.json", "sentence_xlm-roberta_config.json", "sentence_xlnet_config.json",
];

interface Module {
  readonly name: string;
  /** the module's folder, inside the model folder */
  readonly folder: string;
}

/** modules.json's modules, their types and folders checked; undefined when the folder has none */
function readModules(folder: string): { modulesPath: string; modules: Module[] } | undefined {
  const modulesPath = join(folder, "modules.json");
  if (!existsSync(modulesPath)) return undefined;
  let list: unknown;
  try {
    list = readSmallJson(modulesPath);
  } catch (e) {
    throw new HFConfigError(modulesPath, "file", `invalid JSON: ${(e as Error).message}`);
  }
  if (!Array.isArray(list)) throw new HFConfigError(modulesPath, "file", "expected a list of modules");
  const modules = list.map((m, i): Module => {
    const type = typeof m === "object" && m !== null ? (m as Record<string, unknown>).type : undefined;
    const path = typeof m === "object" && m !== null ? (m as Record<string, unknown>).path : undefined;
    if (typeof type !== "string") throw new HFConfigError(modulesPath, `[${i}].type`, "expected a module type string");
    const name = type.startsWith(MODULE) ? type.slice(MODULE.length) : type;
    if (!["Transformer", "Pooling", "Normalize"].includes(name)) throw new HFConfigError(modulesPath, `[${i}].type`, `unsupported module ${JSON.stringify(type)} (supported: Transformer, Pooling, Normalize)`);
    // a Pooling without a path: the folder every release saves it in; a Transformer's "" (today's layout) is the model folder itself
    return { name, folder: moduleFolder(folder, modulesPath, i, type, path, name === "Pooling" ? "1_Pooling" : "") };
  });
  // a second one would be left out without a word: its model and tokenizer are not those tsllm reads
  if (modules.filter((m) => m.name === "Transformer").length > 1) throw new HFConfigError(modulesPath, "file", "more than one Transformer module (supported: one)");
  return { modulesPath, modules };
}

/**
 * The folder holding the encoder itself (its config.json, weights and tokenizer): the
 * sentence-transformers Transformer module's path, as SentenceTransformer loads each module from
 * its own folder: `0_Transformer/` in the layout older releases saved, the model folder itself in
 * today's (path "") and for a folder without modules.json.
 */
export function transformerFolder(folder: string): string {
  return readModules(folder)?.modules.find((m) => m.name === "Transformer")?.folder ?? folder;
}

/** Reads the folder's sentence-transformers files; undefined when it has no modules.json. */
export function readSentenceTransformerConfig(folder: string): SentenceTransformerConfig | undefined {
  const found = readModules(folder);
  if (!found) return undefined;
  const { modulesPath, modules } = found;
  let pooling: Pooling = "mean", normalize = false, sawPooling = false, includePrompt = true;
  for (const m of modules) {
    if (m.name === "Normalize") normalize = true;
    if (m.name === "Pooling") {
      sawPooling = true;
      ({ pooling, includePrompt } = readPooling(join(m.folder, "config.json")));
    }
  }
  if (!sawPooling) throw new HFConfigError(modulesPath, "file", "no Pooling module: cannot tell how token vectors become one");
  let maxSeqLength: number | undefined, doLowerCase = false;
  // the Transformer module's settings are in its own folder (0_Transformer/sentence_bert_config.json in the older layout)
  const own = modules.find((m) => m.name === "Transformer")?.folder ?? folder;
  const sbPath = TRANSFORMER_CONFIG_NAMES.map((name) => join(own, name)).find((path) => existsSync(path));
  if (sbPath !== undefined) {
    const sb = readJsonObject(sbPath);
    const m = sb.max_seq_length;
    if (m !== undefined && m !== null) {
      if (typeof m !== "number" || !Number.isSafeInteger(m) || m < 1) throw new HFConfigError(sbPath, "max_seq_length", `expected a positive integer, found ${JSON.stringify(m)}`);
      maxSeqLength = m;
    }
    doLowerCase = sb.do_lower_case === true;
  }
  return { pooling, normalize, maxSeqLength, doLowerCase, ...readPrompts(join(folder, "config_sentence_transformers.json")), ...(includePrompt ? {} : { includePrompt }) };
}

/** config_sentence_transformers.json's prompts and default_prompt_name (checked: a default must name a prompt, as encode() would find none) */
function readPrompts(path: string): Pick<SentenceTransformerConfig, "prompts" | "defaultPromptName"> {
  if (!existsSync(path)) return {};
  const o = readJsonObject(path);
  const prompts = o.prompts ?? {};
  if (typeof prompts !== "object" || prompts === null || Array.isArray(prompts)) throw new HFConfigError(path, "prompts", `expected an object of name -> prompt text, found ${JSON.stringify(prompts)}`);
  for (const [name, text] of Object.entries(prompts)) if (typeof text !== "string") throw new HFConfigError(path, `prompts.${name}`, `expected a string, found ${JSON.stringify(text)}`);
  const def = o.default_prompt_name ?? undefined;
  // an own name only: "constructor" or "toString" is `in` every object, and became the prompt text "function ..." (sentence-transformers: not found in the prompts dictionary)
  if (def !== undefined && (typeof def !== "string" || !Object.hasOwn(prompts, def))) throw new HFConfigError(path, "default_prompt_name", `expected one of the prompts' names (${Object.keys(prompts).join(", ") || "none"}), found ${JSON.stringify(def)}`);
  return { ...(Object.keys(prompts).length > 0 ? { prompts: prompts as Record<string, string> } : {}), ...(def === undefined ? {} : { defaultPromptName: def }) };
}

/**
 * The module's folder, refused when its path leaves the model folder ("../../x", an absolute
 * path): a downloaded modules.json must not make tsllm read files elsewhere. The check is on
 * the path string, resolved lexically, not on where symlinks lead: a Hub snapshot's files are
 * symlinks into ../../blobs, and those load.
 */
function moduleFolder(folder: string, modulesPath: string, i: number, type: string, path: unknown, otherwise: string): string {
  if (path === undefined) return join(folder, otherwise);
  if (typeof path !== "string") throw new HFConfigError(modulesPath, `[${i}].path`, `expected a folder path inside the model folder, found ${JSON.stringify(path)}`);
  const rel = relative(resolve(folder), resolve(folder, path));
  if (isAbsolute(path) || isAbsolute(rel) || rel === ".." || rel.startsWith(`..${sep}`)) {
    throw new HFConfigError(modulesPath, `[${i}].path`, `module ${JSON.stringify(type)}'s path ${JSON.stringify(path)} leaves the model folder; refusing to read it`);
  }
  return join(folder, path);
}

/** a small JSON file of any shape (modules.json is a list, which readJsonObject refuses) */
function readSmallJson(path: string): unknown {
  return JSON.parse(readWholeFile(path, 1 << 20, () => new HFConfigError(path, "file", "larger than 1 MiB")).toString("utf8"));
}

function readPooling(path: string): { pooling: Pooling; includePrompt: boolean } {
  if (!existsSync(path)) throw new HFConfigError(path, "file", "not found (the Pooling module's config)");
  const o = readJsonObject(path);
  return { pooling: poolingMode(path, o), includePrompt: o.include_prompt !== false };
}

function poolingMode(path: string, o: Record<string, unknown>): Pooling {
  const modes: [string, Pooling][] = [
    ["pooling_mode_cls_token", "cls"], ["pooling_mode_mean_tokens", "mean"], ["pooling_mode_max_tokens", "max"],
    ["pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"], ["pooling_mode_weightedmean_tokens", "weightedmean"], ["pooling_mode_lasttoken", "lasttoken"],
  ];
  const on = modes.filter(([k]) => o[k] === true).map(([, v]) => v);
  if (typeof o.pooling_mode === "string") {
    const m = o.pooling_mode === "mean_sqrt_len_tokens" ? "mean_sqrt_len" : o.pooling_mode;
    if (!modes.some(([, v]) => v === m)) throw new HFConfigError(path, "pooling_mode", `unsupported ${JSON.stringify(o.pooling_mode)}`);
    return m as Pooling;
  }
  if (on.length !== 1) throw new HFConfigError(path, "pooling_mode_*", `expected exactly one pooling mode switched on, found ${on.length === 0 ? "none" : on.join(" + ")}`);
  return on[0]!;
}
