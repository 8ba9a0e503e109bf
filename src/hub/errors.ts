/** Why a Hub operation failed, so callers (and tests) can tell the cases apart without parsing messages. */
export type HubErrorCode =
  | "bad-reference" // the reference or a name from the server is malformed or would escape the cache
  | "repo-not-found"
  | "revision-not-found"
  | "file-not-found"
  | "unauthorized" // 401/403, gated or private repo
  | "offline-miss" // HF_HUB_OFFLINE=1 and the cache does not hold what was asked
  | "checksum" // size, sha256 or git blob sha1 of a downloaded file does not match the server's
  | "disk" // the cache cannot hold or write the file (no space, quota, read-only, permissions)
  | "no-match" // :QUANT / include globs selected nothing (or too much)
  | "busy" // another process is downloading into the repo that was to be removed
  | "network" // connection failures and 5xx after the retries
  | "protocol"; // the server answered something we cannot use

export class HubError extends Error {
  override name = "HubError";
  constructor(readonly code: HubErrorCode, message: string, /** how long the server asked us to wait (Retry-After on 429/503) */ readonly retryAfterMs?: number) {
    super(message);
  }
}

/**
 * A model reference that names nothing: no file or folder at `path`, and not a hub reference
 * either (loadModel, loadTokenizer, pipeline, the CLI's --model). A class of its own with `code`
 * and `path`, so that a caller tells "no such model" from a model that failed to load without
 * reading the message. A hub reference the hub does not know is a HubError ("repo-not-found").
 */
export class ModelNotFoundError extends Error {
  override name = "ModelNotFoundError";
  readonly code = "model_not_found";
  constructor(
    /** the reference as given */ readonly path: string,
    /** what is there instead, when something is (a folder with no model in it) */ found?: string,
  ) {
    super(found === undefined
      ? `model not found: ${path} (expected a local .gguf file or model folder, or a hub reference like org/name, org/name@revision, org/name:Q4_K_M)`
      : `model not found: ${path} ${found}`);
  }
}

const IO_REASONS: Record<string, string> = {
  ENOSPC: "no space left on device", EDQUOT: "disk quota exceeded", EROFS: "read-only file system", EACCES: "permission denied",
  EPERM: "operation not permitted", EFBIG: "file too large", ENOTDIR: "a path component is a file, not a folder",
};

/** a file-system error in words with its code ("read-only file system (EROFS)"), else its message */
export function describeIoError(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  return err.code && IO_REASONS[err.code] ? `${IO_REASONS[err.code]} (${err.code})` : String(err.message ?? e);
}

/** true for an error of the file system (it has a syscall), as opposed to ours or the network's */
export function isIoError(e: unknown): e is NodeJS.ErrnoException {
  return e instanceof Error && !(e instanceof HubError) && typeof (e as NodeJS.ErrnoException).syscall === "string";
}
