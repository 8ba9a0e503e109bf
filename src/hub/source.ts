import type { HubAuth } from "./http.js";
import type { HubSourceName } from "./reference.js";

/** A file the repo listing names, with what the listing already tells about it. */
export interface RemoteFile {
  readonly path: string;
  readonly size?: number;
  readonly sha256?: string;
}

export interface RepoListing {
  /** the commit the revision resolved to; names the snapshot folder */
  readonly commit: string;
  readonly files: readonly RemoteFile[];
}

/** Where and what one file is: its blob name in the cache, its size, how to fetch it. */
export interface FileLocation {
  readonly etag: string;
  readonly size: number;
  /** what the bytes must hash to; absent when the server says nothing usable */
  readonly checksum?: Checksum;
  readonly url: string;
}

/**
 * An LFS file's sha256, or a git file's blob id: sha1 of `blob <size>\0` and the bytes, the
 * ETag the Hub gives files stored in git (config.json, tokenizer.json, ...)
 */
export interface Checksum {
  readonly algorithm: "sha256" | "git-sha1";
  readonly hex: string;
}

/** A model hub: Hugging Face (or a mirror of it) or ModelScope. */
export interface HubSource {
  readonly name: HubSourceName;
  readonly endpoint: string;
  readonly auth: HubAuth;
  readonly defaultRevision: string;
  list(repo: string, revision: string, signal?: AbortSignal): Promise<RepoListing>;
  locate(repo: string, commit: string, file: RemoteFile, signal?: AbortSignal): Promise<FileLocation>;
}

export interface SourceOptions {
  /** base URL; default from the environment (HF_ENDPOINT, MODELSCOPE_ENDPOINT / MODELSCOPE_DOMAIN) */
  endpoint?: string;
  /** default from the environment (HF_TOKEN / the token file; MODELSCOPE_API_TOKEN) */
  token?: string;
  env?: NodeJS.ProcessEnv;
  /** a metadata request is abandoned (and retried) after this long without an answer; default HF_HUB_ETAG_TIMEOUT seconds, else 10 s */
  timeoutMs?: number;
}

export function trimEndpoint(url: string, what: string): string {
  let u: URL;
  try { u = new URL(url); } catch { throw new Error(`${what}: "${url}" is not a URL (expected e.g. https://huggingface.co)`); }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error(`${what}: "${url}" must be http(s)`);
  return url.replace(/\/+$/, "");
}
