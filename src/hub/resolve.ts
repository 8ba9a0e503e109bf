import { existsSync } from "node:fs";
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
  if (existsSync(ref)) return ref;
  if (!looksLikeHubReference(ref)) {
    throw new ModelNotFoundError(ref);
  }
  const { quiet, onServedWithoutHub, ...download } = options;
  const onProgress = download.onProgress ?? (quiet ? undefined : progressReporter(process.stderr));
  const result = await downloadModel(ref, { ...download, onProgress });
  if (result.hubFailure !== undefined) onServedWithoutHub?.(result.hubFailure, result.snapshotDir);
  return result.path;
}
