import { constants, existsSync, lstatSync, readFileSync, readdirSync, readlinkSync, realpathSync } from "node:fs";
import { access, mkdir, rename, rmdir, symlink, writeFile, copyFile } from "node:fs/promises";
import { randomBytes } from "node:crypto";
import { homedir } from "node:os";
import { dirname, join, relative, sep } from "node:path";
import { isIoError } from "./errors.js";
import { removeAbandonedLocksIn } from "./lock.js";
import { checkCacheName, checkRelativePath, checkRevision, isCacheName, type HubSourceName } from "./reference.js";

/*
 * The cache layout of Python's huggingface_hub, so either tool finds what the other downloaded:
 *   <root>/models--org--name/blobs/<etag>                   file contents, named by ETag
 *   <root>/models--org--name/snapshots/<commit>/<path>      relative symlink to ../../blobs/<etag>
 *   <root>/models--org--name/refs/<revision>                the commit a branch/tag pointed to (no newline)
 *   <root>/.locks/models--org--name/<etag>.lock             (Python's lock; ours is <etag>.tsllm.lock)
 *   <root>/.locks/models--org--name/snapshot-<commit>-<nonce>.tsllm.lock  (a tsllm download writing that snapshot)
 *   <root>/.locks/models--org--name/snapshots.tsllm.gate    (held by rm, and by a download while it takes its snapshot lock)
 */

const SNAPSHOT_LOCK_PREFIX = "snapshot-";
/** what ends the name of every tsllm lock that marks a download (or removal) at work; the gate's does not */
export const LOCK_SUFFIX = ".tsllm.lock";
/** the gate's lock file in .locks/<repo>/ (gateLockPath) */
const GATE_LOCK_NAME = "snapshots.tsllm.gate";
/** snapshot-<commit>-<12 hex digits of nonce>.tsllm.lock (snapshotLockPath) */
const SNAPSHOT_LOCK_NAME = new RegExp(`^${SNAPSHOT_LOCK_PREFIX}(.+)-[0-9a-f]{12}\\.tsllm\\.lock$`);

/** the commit whose snapshot a lock file of .locks/<repo>/ is held for (see snapshotLockPath), else undefined (a blob's lock) */
export function snapshotOfLock(name: string): string | undefined {
  const m = SNAPSHOT_LOCK_NAME.exec(name);
  return m && isCacheName(m[1]!) ? m[1] : undefined;
}

const truthy = (v: string | undefined) => v !== undefined && ["1", "on", "yes", "true"].includes(v.trim().toLowerCase());

/**
 * HF_HUB_OFFLINE=1 (or ON/YES/TRUE), as huggingface_hub reads it: `HF_HUB_OFFLINE or
 * TRANSFORMERS_OFFLINE`, so TRANSFORMERS_OFFLINE=1 counts only while HF_HUB_OFFLINE is unset
 */
export function hubOfflineFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  return truthy(env.HF_HUB_OFFLINE || env.TRANSFORMERS_OFFLINE);
}

/**
 * Python's `os.path.expandvars(os.path.expanduser(p))`, which huggingface_hub applies to HF_HOME,
 * HF_HUB_CACHE and HF_TOKEN_PATH: a leading `~` is the home folder, `$NAME` / `${NAME}` the
 * variable's value when it is set (left as written when it is not). Without it a quoted
 * `HF_HOME="~/hf"` (Dockerfile ENV, systemd, .env files) meant a folder named `~` in the
 * current directory, while Python used (and filled) ~/hf.
 */
export function expandPath(p: string, env: NodeJS.ProcessEnv = process.env): string {
  const home = p === "~" || p.startsWith("~/") ? homedir() + p.slice(1) : p;
  return home.replace(/\$(\w+|\{[^}]*\})/g, (whole, name: string) => {
    const value = env[name.startsWith("{") ? name.slice(1, -1) : name];
    return value === undefined ? whole : value;
  });
}

/** $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface */
export function hfHome(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HF_HOME) return expandPath(env.HF_HOME, env);
  return expandPath(join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "huggingface"), env);
}

/** $HF_HUB_CACHE, else the legacy $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub */
export function hfHubCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const dir = env.HF_HUB_CACHE || env.HUGGINGFACE_HUB_CACHE;
  return dir ? expandPath(dir, env) : join(hfHome(env), "hub");
}

/**
 * ModelScope downloads use the same blobs/snapshots layout (so resume, locking and checks are
 * shared) under their own root, $MODELSCOPE_CACHE or ~/.cache/modelscope/hub, in a folder named
 * the huggingface_hub way. It is not the modelscope Python package's own layout.
 */
export function modelScopeCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.MODELSCOPE_CACHE ? expandPath(env.MODELSCOPE_CACHE, env) : join(homedir(), ".cache", "modelscope", "hub");
}

export function defaultCacheDir(source: HubSourceName, env: NodeJS.ProcessEnv = process.env): string {
  return source === "modelscope" ? modelScopeCacheDir(env) : hfHubCacheDir(env);
}

/** `org/name` -> `models--org--name` */
export function repoFolderName(repo: string): string {
  return `models--${repo.split("/").join("--")}`;
}

/** Paths of one repo in a cache root. */
export class RepoCache {
  readonly dir: string;
  constructor(readonly root: string, readonly repo: string) {
    this.dir = join(root, repoFolderName(repo));
  }

  blobPath(etag: string): string {
    checkCacheName(etag, `ETag of a file in ${this.repo}`);
    return join(this.dir, "blobs", etag);
  }

  lockPath(etag: string): string {
    checkCacheName(etag, `ETag of a file in ${this.repo}`);
    return join(this.lockDir(), `${etag}${LOCK_SUFFIX}`);
  }

  /**
   * The lock a download holds while it writes snapshots/<commit> (one per download: two downloads
   * of one commit write it side by side), so an rm of that revision can tell it is in use.
   */
  snapshotLockPath(commit: string): string {
    checkCacheName(commit, `commit of ${this.repo}`);
    return join(this.lockDir(), `${SNAPSHOT_LOCK_PREFIX}${commit}-${randomBytes(6).toString("hex")}${LOCK_SUFFIX}`);
  }

  /**
   * The lock rm holds from its look at the locks to its last deletion, and a download while it
   * takes its snapshot lock: a download starting meanwhile waits, so no rm removes a snapshot (or
   * the repo) that a download began writing after rm looked. Not a `.tsllm.lock`: it marks no
   * download in progress.
   */
  gateLockPath(): string {
    return join(this.lockDir(), GATE_LOCK_NAME);
  }

  /** .locks/<repo>/: where this repo's locks are */
  lockDir(): string {
    return join(this.root, ".locks", repoFolderName(this.repo));
  }

  /**
   * Clears the locks (of files, of snapshots) and takeover claims that downloads and removals of
   * this repo left when they died; the locks of live holders stay. Python's own `.lock` files are
   * not ours to judge. The gate and the claims on it count too: a waiter killed mid-takeover of a
   * dead gate left a claim no one takes again.
   */
  removeAbandonedLocks(): Promise<void> {
    return removeAbandonedLocksIn(this.lockDir(), (name) => name.endsWith(LOCK_SUFFIX) || name === GATE_LOCK_NAME);
  }

  /**
   * Removes the repo folder and its lock folder where they hold no file (only empty folders): what
   * a download that failed before it kept anything made. A partial file kept to resume, a link, any
   * file at all, keeps its folder; a download beside this one makes what it needs again.
   */
  async removeIfEmpty(): Promise<void> {
    await removeEmptyFolders(this.dir);
    await removeEmptyFolders(this.lockDir());
    await rmdir(dirname(this.lockDir())).catch(() => undefined); // .locks, once no repo has a folder there
  }

  snapshotDir(commit: string): string {
    checkCacheName(commit, `commit of ${this.repo}`);
    return join(this.dir, "snapshots", commit);
  }

  snapshotPath(commit: string, file: string): string {
    checkRelativePath(file, `file name in ${this.repo}`);
    return join(this.snapshotDir(commit), ...file.split("/"));
  }

  refPath(revision: string): string {
    checkRevision(revision, this.repo);
    return join(this.dir, "refs", ...revision.split("/"));
  }

  /**
   * The commit a revision resolves to in the cache: refs/<revision>, else the revision itself
   * when a snapshot has that name (a commit id; ModelScope snapshots are named by revision).
   */
  cachedCommit(revision: string): string | undefined {
    const commit = this.refCommit(revision);
    if (commit !== undefined && existsSync(this.snapshotDir(commit))) return commit;
    if (!revision.includes("/") && existsSync(this.snapshotDir(revision))) return revision;
    return undefined;
  }

  /**
   * The commit refs/<revision> names; undefined when there is none, or when it is damaged (empty
   * after a crash mid-write, not a commit name), so that it is asked of the hub and rewritten
   * rather than failing every load
   */
  refCommit(revision: string): string | undefined {
    let text: string;
    try {
      text = readFileSync(this.refPath(revision), "utf8").trim();
    } catch {
      return undefined;
    }
    return isCacheName(text) ? text : undefined;
  }

  /** writes refs/<revision> = commit (no trailing newline, as Python writes it), atomically */
  async writeRef(revision: string, commit: string): Promise<void> {
    if (revision === commit) return;
    const ref = this.refPath(revision);
    if (existsSync(ref) && readFileSync(ref, "utf8") === commit) return;
    await mkdir(dirname(ref), { recursive: true });
    const tmp = uniqueTmp(ref);
    await writeFile(tmp, commit);
    await rename(tmp, ref);
  }

  /**
   * Points snapshots/<commit>/<file> at blobs/<etag> with a relative symlink. Where the file
   * system has no symlinks, as huggingface_hub does: a blob this download just made (`newBlob`) is
   * moved there, so the disk holds it once (a copy doubled every download), one already there is
   * copied (other snapshots may link to it).
   */
  async linkSnapshot(commit: string, file: string, etag: string, newBlob = false): Promise<string> {
    const link = this.snapshotPath(commit, file);
    const blob = this.blobPath(etag);
    await mkdir(dirname(link), { recursive: true });
    const target = relative(dirname(link), blob);
    // already right: nothing is written (a complete cache may be on a read-only volume)
    if (isLinkTo(link, target)) return link;
    const tmp = uniqueTmp(link);
    try {
      await symlink(target, tmp);
    } catch (e) {
      if (!NO_SYMLINKS.has((e as NodeJS.ErrnoException).code ?? "")) throw e;
      if (newBlob) await rename(blob, tmp);
      else await copyFile(blob, tmp);
    }
    await rename(tmp, link); // replaces an older link atomically
    return link;
  }

  /** whether snapshots/<commit>/<file> already is the link to blobs/<etag>, and that blob is there */
  isLinked(commit: string, file: string, etag: string): boolean {
    const link = this.snapshotPath(commit, file);
    const blob = this.blobPath(etag);
    return isLinkTo(link, relative(dirname(link), blob)) && existsSync(blob);
  }

  /**
   * Whether snapshots/<commit>/<file> is a file of `size` bytes itself, not a link: where symlinks
   * are refused the blob was moved or copied there, and a commit's files never change, so it is
   * the file (no blob is left to find it by)
   */
  holdsFile(commit: string, file: string, size: number): boolean {
    try {
      const st = lstatSync(this.snapshotPath(commit, file));
      return st.isFile() && st.size === size;
    } catch {
      return false;
    }
  }

  /**
   * Every regular file of a cached snapshot (repo-relative, '/'-separated). A symlink whose
   * target leaves the repo folder, or dangles, is not listed: it is not ours to serve; `skipped`
   * hears of each such link, so that a scan of the cache can name it.
   */
  listSnapshot(commit: string, skipped?: (file: string, why: string) => void): string[] {
    const root = this.snapshotDir(commit);
    const repoReal = realpathSync(this.dir);
    const out: string[] = [];
    const walk = (dir: string, prefix: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        if (entry.name.endsWith(".tmp")) continue;
        const full = join(dir, entry.name);
        const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
        if (entry.isDirectory()) { walk(full, rel); continue; }
        if (entry.isSymbolicLink()) {
          let real: string;
          try { real = realpathSync(full); } catch { skipped?.(rel, "its blob is missing (a broken link)"); continue; }
          if (!real.startsWith(repoReal + sep)) { skipped?.(rel, `it links outside the repo folder (${real})`); continue; }
          // the blob may go between the two calls (an rm beside this scan): then the link is broken
          const st = lstatSync(real, { throwIfNoEntry: false });
          if (!st) { skipped?.(rel, "its blob is missing (a broken link)"); continue; }
          if (!st.isFile()) { skipped?.(rel, `it links to ${real}, which is not a file`); continue; }
        } else if (!entry.isFile()) continue;
        out.push(rel);
      }
    };
    if (existsSync(root)) walk(root, "");
    return out.sort();
  }
}

/** whether files can be created in `dir` (made when missing) */
export async function writable(dir: string): Promise<boolean> {
  try {
    await mkdir(dir, { recursive: true });
    await access(dir, constants.W_OK);
    return true;
  } catch (e) {
    if (isIoError(e)) return false;
    throw e;
  }
}

/** removes `dir` and the folders under it, bottom up, where they hold no file (symlinks are not followed) */
async function removeEmptyFolders(dir: string): Promise<void> {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return; // gone, or not a folder
  }
  for (const e of entries) if (e.isDirectory()) await removeEmptyFolders(join(dir, e.name));
  await rmdir(dir).catch(() => undefined); // not empty: something is kept there
}

/** a cache root must exist for realpath checks; callers create it before writing */
export async function ensureDir(dir: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true });
  } catch (e) {
    // Node's recursive mkdir says ENOENT for a folder it could not create on a read-only file
    // system (a plain mkdir says EROFS): the first missing folder is made alone, so that its
    // failure gives the real reason (EROFS, EACCES); should it succeed, the rest is made after it
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    let first = dir;
    while (!existsSync(dirname(first)) && dirname(first) !== first) first = dirname(first);
    await mkdir(first).catch((inner: NodeJS.ErrnoException) => { throw inner.code === "EEXIST" ? e : inner; });
    await mkdir(dir, { recursive: true });
  }
}

/**
 * symlink() errors that say the file system has none: EPERM (Windows without developer mode, FAT
 * on Linux), EOPNOTSUPP / ENOTSUP / ENOSYS (some network and FUSE mounts)
 */
const NO_SYMLINKS = new Set(["EPERM", "EOPNOTSUPP", "ENOTSUP", "ENOSYS"]);

function isLinkTo(link: string, target: string): boolean {
  try {
    return readlinkSync(link) === target;
  } catch {
    return false; // absent, or not a symlink
  }
}

let tmpCounter = 0;

/**
 * A temporary name beside `path`, unique to this process and call: two downloads in one process
 * linking the same snapshot file at once must not share one (the second symlink() met the first's
 * and failed with EEXIST)
 */
function uniqueTmp(path: string): string {
  return `${path}.${process.pid}.${++tmpCounter}.tmp`;
}
