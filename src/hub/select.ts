import { HubError } from "./errors.js";

/**
 * Which files of a repo to fetch. The Hub listing has everything (READMEs, ONNX exports, every
 * quantization); a model needs its config, tokenizer and one set of weights.
 */

/**
 * fnmatch-style glob as huggingface_hub applies allow/ignore patterns: `*` also crosses '/', a
 * trailing '/' means the folder's contents, and a backslash is a folder separator on every system
 * (its filter_repo_objects turns each into '/' first, so that `sub\*.json`, as Windows writes
 * paths, selects sub/a.json; repo paths never hold one, and fnmatch has no escape character)
 */
export function globToRegExp(glob: string): RegExp {
  const slashed = glob.replaceAll("\\", "/");
  const g = slashed.endsWith("/") ? `${slashed}*` : slashed;
  let re = "";
  for (let i = 0; i < g.length; i++) {
    const c = g[i]!;
    if (c === "*") re += ".*";
    else if (c === "?") re += ".";
    else if (c === "[") {
      const end = g.indexOf("]", i + 2);
      if (end < 0) { re += "\\["; continue; }
      let body = g.slice(i + 1, end);
      if (body.startsWith("!")) body = `^${body.slice(1)}`;
      re += `[${body}]`;
      i = end;
    } else re += c.replace(/[.+^${}()|\\\]]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}

export function matchesAny(path: string, globs: readonly string[]): boolean {
  const slashed = path.replaceAll("\\", "/");
  return globs.some((g) => globToRegExp(g).test(slashed));
}

/** a part of a split set: `name-00001-of-00003.gguf` (llama.cpp's gguf-split), `model-00001-of-00003.safetensors` / `.bin` (transformers' shards) */
export const SPLIT_PART = /^(.*)-(\d{5})-of-(\d{5})(\.(?:gguf|safetensors|bin))$/i;

/** One loadable GGUF: a single file or a complete split set, parts in order (the first is what loaders open). */
export interface GgufGroup {
  readonly key: string;
  readonly parts: string[];
  readonly expectedParts: number;
}

function ggufGroups(paths: readonly string[]): GgufGroup[] {
  const groups = new Map<string, { parts: string[]; expectedParts: number }>();
  for (const p of paths) {
    if (!p.toLowerCase().endsWith(".gguf")) continue;
    if (/(^|\/)[^/]*mmproj[^/]*$/i.test(p)) continue; // vision projectors are not language models
    const m = SPLIT_PART.exec(p);
    const key = m ? `${m[1]}.gguf` : p;
    const g = groups.get(key) ?? { parts: [], expectedParts: m ? Number(m[3]) : 1 };
    g.parts.push(p);
    groups.set(key, g);
  }
  return [...groups].map(([key, g]) => ({ key, parts: g.parts.sort(), expectedParts: g.expectedParts }));
}

function quantPattern(q: string): RegExp {
  return new RegExp(`(^|[-._/])${q.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}([-./]|$)`, "i");
}

/** llama.cpp's -hf default is Q4_K_M; Q8_0 is the usual other single choice */
const DEFAULT_QUANTS = ["Q4_K_M", "Q8_0"];

/**
 * Picks the GGUF a selector names: an exact file path (or file name), else a quantization that
 * appears as a whole token in the name (`:Q4_K_M` matches `model.Q4_K_M.gguf`, `Q4_K_M/x-00001-of-00002.gguf`,
 * not `model.Q4_K_S.gguf`). Without a selector: the only GGUF, else Q4_K_M, else Q8_0.
 * Returns undefined when the repo has no GGUF and no selector was given.
 */
export function selectGguf(paths: readonly string[], selector: string | undefined, context: string): GgufGroup | undefined {
  const groups = ggufGroups(paths);
  const describe = (gs: GgufGroup[]) => gs.map((g) => g.key).join(", ");
  let chosen: GgufGroup[];
  if (selector) {
    const exact = groups.filter((g) => g.parts.some((p) => p === selector || p.split("/").pop() === selector));
    chosen = exact.length > 0 ? exact : groups.filter((g) => quantPattern(selector).test(g.key.replace(/\.gguf$/i, "")));
    if (chosen.length === 0) {
      throw new HubError("no-match", `${context}: no GGUF file matches "${selector}"${groups.length ? ` (available: ${describe(groups)})` : " (the repo has no .gguf files)"}`);
    }
  } else {
    if (groups.length === 0) return undefined;
    chosen = groups.length === 1 ? groups : [];
    for (const q of DEFAULT_QUANTS) {
      if (chosen.length === 0) chosen = groups.filter((g) => quantPattern(q).test(g.key.replace(/\.gguf$/i, "")));
    }
    if (chosen.length === 0) throw new HubError("no-match", `${context}: the repo has several GGUF files; pick one with org/name:QUANT (available: ${describe(groups)})`);
  }
  if (chosen.length > 1) throw new HubError("no-match", `${context}: "${selector ?? DEFAULT_QUANTS.join("/")}" matches several GGUF files (${describe(chosen)}); name the file`);
  const g = chosen[0]!;
  if (g.parts.length !== g.expectedParts) {
    throw new HubError("no-match", `${context}: split GGUF ${g.key} has ${g.parts.length} of its ${g.expectedParts} parts`);
  }
  return g;
}

const CONFIG_FILES = new Set([
  "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "tokenizer.model",
  "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt", "vocab.txt", "spiece.model",
  "chat_template.json", "chat_template.jinja",
  // sentence-transformers: the module list and its settings
  "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json",
]);

/** sentence-transformers modules' own configs, one folder down (1_Pooling/config.json, 2_Dense/config.json) */
const MODULE_CONFIG = /^\d+_[A-Za-z]+\/config\.json$/;

/**
 * the encoder's own folder in the layout older sentence-transformers releases saved (0_Transformer/
 * holds config.json, the weights and the tokenizer; modules.json points at it)
 */
const TRANSFORMER_FOLDER = /^\d+_Transformer\//;

/** a Transformer module's settings under the names older releases gave them (sentence_distilbert_config.json ...) */
const OLD_TRANSFORMER_CONFIG = /^sentence_[a-z-]+_config\.json$/;

/**
 * config + tokenizer files (and sentence-transformers' module configs) and one weight format
 * (safetensors, else PyTorch .bin): at the top, and in an older sentence-transformers layout's
 * encoder folder (0_Transformer/), the model's own files there
 */
function defaultNonGgufFiles(paths: readonly string[]): string[] {
  const folders = ["", ...new Set(paths.filter((p) => TRANSFORMER_FOLDER.test(p)).map((p) => p.slice(0, p.indexOf("/") + 1)))];
  return [...folders.flatMap((folder) => modelFilesIn(paths, folder)), ...paths.filter((p) => MODULE_CONFIG.test(p))];
}

/** the config, tokenizer and weight files directly in `folder` ("" or "0_Transformer/") */
function modelFilesIn(paths: readonly string[], folder: string): string[] {
  const here = paths.filter((p) => p.startsWith(folder) && !p.slice(folder.length).includes("/")).map((p) => p.slice(folder.length));
  const safetensors = here.filter((p) => p.endsWith(".safetensors") || p === "model.safetensors.index.json");
  const bins = here.filter((p) => /^pytorch_model.*\.bin$/.test(p) || p === "pytorch_model.bin.index.json");
  const configs = here.filter((p) => CONFIG_FILES.has(p) || (folder !== "" && OLD_TRANSFORMER_CONFIG.test(p)));
  return [...configs, ...(safetensors.some((p) => p.endsWith(".safetensors")) ? safetensors : bins)].map((p) => folder + p);
}

export interface FileSelection {
  readonly files: string[];
  /** the GGUF a loader opens (first part of a split set); undefined for non-GGUF repos */
  readonly primary?: string;
}

export interface SelectOptions {
  selector?: string;
  include?: readonly string[];
  exclude?: readonly string[];
}

/**
 * The files to fetch. A selector picks one GGUF (plus anything `include` adds); otherwise
 * `include` globs replace the default choice (the one GGUF a GGUF repo holds, or config +
 * tokenizer + one weight format). `exclude` globs then drop files.
 */
export function selectFiles(paths: readonly string[], options: SelectOptions, context: string): FileSelection {
  const include = options.include ?? [];
  const exclude = options.exclude ?? [];
  let files: string[];
  let primary: string | undefined;
  if (options.selector) {
    const g = selectGguf(paths, options.selector, context)!;
    files = [...g.parts, ...paths.filter((p) => include.length > 0 && matchesAny(p, include))];
    primary = g.parts[0];
  } else if (include.length > 0) {
    files = paths.filter((p) => matchesAny(p, include));
    const ggufs = ggufGroups(files);
    primary = ggufs.length === 1 && ggufs[0]!.parts.length === ggufs[0]!.expectedParts ? ggufs[0]!.parts[0] : undefined;
  } else {
    const g = selectGguf(paths, undefined, context);
    files = g ? [...g.parts] : defaultNonGgufFiles(paths);
    primary = g?.parts[0];
  }
  files = [...new Set(files)].filter((p) => !matchesAny(p, exclude));
  if (primary && !files.includes(primary)) primary = undefined;
  if (files.length === 0) throw new HubError("no-match", `${context}: no files selected${include.length || exclude.length ? ` by --include ${include.join(",") || "-"} / --exclude ${exclude.join(",") || "-"}` : ""} (the repo has ${paths.length} files)`);
  return { files, primary };
}
