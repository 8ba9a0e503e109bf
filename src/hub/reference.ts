import { HubError } from "./errors.js";

export type HubSourceName = "hf" | "modelscope";

/** A parsed hub model reference: `[hf:|modelscope:]org/name[@revision][:FILE_OR_QUANT]`. */
export interface HubReference {
  readonly source: HubSourceName;
  /** `org/name` */
  readonly repo: string;
  /** branch, tag or commit; undefined = the source's default branch */
  readonly revision?: string;
  /** a .gguf file name, or a quantization like Q4_K_M, chosen among the repo's GGUF files */
  readonly selector?: string;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const SOURCE_PREFIX = /^(hf|huggingface|modelscope|ms):(?!\/\/)/i;

/** true for names that could be a hub reference (`org/name...`), as opposed to a local path */
export function looksLikeHubReference(ref: string): boolean {
  if (SOURCE_PREFIX.test(ref)) return true;
  if (/\.gguf$/i.test(ref) && !ref.includes(":")) return false; // a missing local file, not a repo named *.gguf
  return /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*(@[^:]+)?(:.+)?$/.test(ref);
}

/**
 * Parses a reference. Everything that later becomes a path in the cache (repo, revision) is
 * checked here, before any request or write: no `..`, no absolute paths, no backslashes.
 */
export function parseHubReference(ref: string, defaultSource: HubSourceName = "hf"): HubReference {
  let rest = ref.trim();
  let source = defaultSource;
  const prefix = SOURCE_PREFIX.exec(rest);
  if (prefix) {
    const p = prefix[1]!.toLowerCase();
    source = p === "modelscope" || p === "ms" ? "modelscope" : "hf";
    rest = rest.slice(prefix[0].length);
  }
  const bad = (why: string) => new HubError("bad-reference", `model reference "${ref}": ${why} (expected org/name, org/name@revision or org/name:QUANT)`);
  let selector: string | undefined;
  const colon = rest.indexOf(":");
  if (colon >= 0) {
    selector = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (selector === "") throw bad("empty file or quantization after ':'");
    checkRelativePath(selector, `model reference "${ref}": file`);
  }
  let revision: string | undefined;
  const at = rest.indexOf("@");
  if (at >= 0) {
    revision = rest.slice(at + 1);
    rest = rest.slice(0, at);
    checkRevision(revision, ref);
  }
  const parts = rest.split("/");
  if (parts.length !== 2 || !parts.every((p) => NAME.test(p) && !/^\.+$/.test(p) && !p.includes(".."))) {
    throw bad(`repository "${rest}" is not a valid org/name`);
  }
  return { source, repo: rest, revision, selector };
}

/** A revision becomes refs/<revision> in the cache: branch names may contain '/', nothing may escape. */
export function checkRevision(revision: string, context: string): void {
  if (revision === "") throw new HubError("bad-reference", `${context}: empty revision`);
  checkRelativePath(revision, `${context}: revision`);
}

/**
 * Refuses a repo-relative path that could leave its folder: absolute, `..` or `.` segments,
 * backslashes (a Windows separator), empty segments, control characters.
 */
export function checkRelativePath(p: string, what: string): void {
  const reason =
    p === "" ? "is empty"
    : p.startsWith("/") || /^[A-Za-z]:/.test(p) ? "is an absolute path"
    : p.includes("\\") ? "contains a backslash"
    : /[\u0000-\u001f]/.test(p) ? "contains a control character"
    : p.split("/").some((s) => s === "" || s === "." || s === "..") ? "has an empty, '.' or '..' segment"
    : undefined;
  if (reason) throw new HubError("bad-reference", `${what} "${p}" ${reason}; refusing it so nothing is written outside the cache`);
}

/** Blob names (ETags, sha256) and commit ids name single files in the cache. */
/** whether `name` is safe as one path component of the cache (an ETag, a commit) */
export function isCacheName(name: string): boolean {
  return /^[A-Za-z0-9._-]+$/.test(name) && !/^\.+$/.test(name);
}

export function checkCacheName(name: string, what: string): void {
  if (!isCacheName(name)) {
    throw new HubError("protocol", `${what} "${name}" from the server is not a safe file name`);
  }
}

export function formatReference(r: HubReference, revision = r.revision): string {
  return `${r.source === "modelscope" ? "modelscope:" : ""}${r.repo}${revision ? `@${revision}` : ""}${r.selector ? `:${r.selector}` : ""}`;
}
