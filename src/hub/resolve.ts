import { existsSync, readdirSync, statSync } from "node:fs";
import { downloadModel, type DownloadOptions } from "./download.js";
import { ModelNotFoundError } from "./errors.js";
import { progressReporter } from "./progress.js";
import { looksLikeHubReference } from "./reference.js";

export type ResolveOptions = Omit<DownloadOptions, "refresh"> & {
  /** no progress output (default: progress on stderr) */
  quiet?: boolean;
  /** told when the hub could not answer and the cached snapshot serves instead: what failed, and that snapshot */
  onServedWithoutHub?: (failure: string, snapshotDir: string) => void;
};

/**
 * Turns what a user passed as --model into a local path: an existing file or folder as is;
 * otherwise a hub reference (`org/name`, `org/name@revision`, `org/name:Q4_K_M`,
 * `modelscope:org/name`) is fetched into the Hugging Face cache — or found there once it is
 * complete (a branch asked of the hub in one request, a commit id in none) — and the path of its
 * GGUF (or snapshot folder) returned.
 */
export async function resolveModelReference(ref: string, options: ResolveOptions = {}): Promise<string> {
  if (existsSync(ref)) {
    const missing = noModelIn(ref);
    if (missing !== undefined) throw new ModelNotFoundError(ref, missing);
    return ref;
  }
  if (!looksLikeHubReference(ref)) {
    throw new ModelNotFoundError(ref);
  }
  const { quiet, onServedWithoutHub, ...download } = options;
  const onProgress = download.onProgress ?? (quiet ? undefined : progressReporter(process.stderr));
  const result = await downloadModel(ref, { ...download, onProgress });
  if (result.hubFailure !== undefined) onServedWithoutHub?.(result.hubFailure, result.snapshotDir);
  return result.path;
}

/** names a model folder may hold: a config, a tokenizer (loadTokenizer reads a folder of one alone), a sentence-transformers index */
const MODEL_FILES = new Set(["config.json", "modules.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "vocab.txt", "merges.txt"]);
const WEIGHT_FILE = /\.(gguf|safetensors|bin)$/i;

/**
 * Why the folder `path` holds nothing a model could be (no config.json, weights, GGUF or tokenizer
 * file: an empty or wrong folder), or undefined for a file, a folder with any of them, or one that
 * cannot be listed (the loader's own error names that). transformers' from_pretrained calls such a
 * folder one that "does not appear to have a file named config.json"; the loaders here said
 * "config.json: not found" as a malformed model's HFConfigError, not as a missing model.
 */
function noModelIn(path: string): string | undefined {
  let names: string[];
  try {
    if (!statSync(path).isDirectory()) return undefined;
    names = readdirSync(path);
  } catch {
    return undefined;
  }
  if (names.some((name) => MODEL_FILES.has(name) || WEIGHT_FILE.test(name))) return undefined;
  return `is a folder with no model in it (no config.json, .gguf, .safetensors or tokenizer file; expected a local .gguf file or a Hugging Face model folder)`;
}
