import { type Dirent, existsSync, lstatSync, readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { rm, rmdir } from "node:fs/promises";
import { basename, dirname, join, sep } from "node:path";
import { LOCK_SUFFIX, RepoCache, repoFolderName, snapshotOfLock, writable } from "./cache.js";
import { describeIoError, HubError, isIoError } from "./errors.js";
import { liveHolder, withFileLock } from "./lock.js";
import { checkRevision, isCacheName, parseHubReference } from "./reference.js";

/**
 * Listing and removing cached models, as huggingface_hub's scan_cache_dir / delete_revisions
 * see the cache: a repo's size is the size of the blobs its snapshots point at, each blob
 * counted once however many snapshots share it.
 */

export interface CachedRevision {
  readonly commit: string;
  /** refs (branches, tags) pointing at this commit */
  readonly refs: string[];
  /** repo-relative files of the snapshot */
  readonly files: string[];
  /** bytes of the distinct blobs this snapshot points at */
  readonly sizeOnDisk: number;
}

export interface CachedRepo {
  /** `org/name` */
  readonly repo: string;
  /** <root>/models--org--name */
  readonly dir: string;
  readonly revisions: CachedRevision[];
  /** ref name -> commit, for every refs/ file (a ref whose snapshot is gone is kept here) */
  readonly refs: Record<string, string>;
  /** bytes of the distinct blobs all snapshots point at */
  readonly sizeOnDisk: number;
  /** files in blobs/ that no snapshot points at (e.g. `.incomplete` downloads), and their bytes */
  readonly unreferencedBlobs: number;
  readonly unreferencedBytes: number;
  /**
   * what is damaged, each "path (in the repo folder): what is wrong": a snapshot file whose blob is
   * gone, a ref naming a commit with no snapshot, a folder that is a file or cannot be read. As
   * huggingface_hub's scan_cache_dir collects its warnings, the rest of the repo is still listed.
   */
  readonly problems: string[];
}

export interface RemoveResult {
  readonly repo: string;
  /** the commit removed, or undefined when the whole repo was */
  readonly commit?: string;
  /** paths deleted (repo folder, or snapshot folder, refs and blobs) */
  readonly removed: string[];
  readonly freedBytes: number;
}

export interface RemoveOptions {
  /**
   * hears once of each lock a live process holds that the removal waits for (another rm of the
   * repo, a download taking its snapshot lock): `holder` is `process <pid>[ on <host>]`; the wait goes on
   */
  readonly onWait?: (holder: string, lock: string, repo: string) => void;
}

const REPO_PREFIX = "models--";

/**
 * `models--org--name` -> `org/name`, and `models--gpt2` -> `gpt2` (the Hub's legacy repos without
 * an org, which huggingface_hub caches under that name); undefined for other folders: datasets,
 * spaces, .locks
 */
function repoFromFolder(name: string): string | undefined {
  if (!name.startsWith(REPO_PREFIX)) return undefined;
  const parts = name.slice(REPO_PREFIX.length).split("--");
  return (parts.length === 1 || parts.length === 2) && parts.every((p) => p !== "") ? parts.join("/") : undefined;
}

const LEGACY_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** `org/name[@rev]` as any reference, or a legacy single name `gpt2[@rev]` (only the cache can hold those) */
function parseCachedReference(reference: string): { repo: string; revision?: string; selector?: string } {
  const at = reference.indexOf("@");
  const name = at >= 0 ? reference.slice(0, at) : reference;
  if (name.includes("/") || name.includes(":") || !LEGACY_NAME.test(name) || name.includes("..")) return parseHubReference(reference);
  const revision = at >= 0 ? reference.slice(at + 1) : undefined;
  if (revision !== undefined) checkRevision(revision, reference);
  return { repo: name, revision };
}

/** the entries of a folder of the repo, or none with a problem said when it is not a readable folder */
function entries(dir: string, rel: string, problems: string[]): Dirent[] {
  try {
    return readdirSync(dir, { withFileTypes: true });
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code !== "ENOENT") problems.push(`${rel}: ${err.code === "ENOTDIR" ? "is a file, not a folder" : `cannot be read: ${describeIoError(e)}`}`);
    return [];
  }
}

/** every ref file under refs/, as name -> commit */
function readRefs(refsDir: string, problems: string[]): Record<string, string> {
  const refs: Record<string, string> = {};
  const walk = (dir: string, prefix: string) => {
    for (const e of entries(dir, prefix ? `refs/${prefix}` : "refs", problems)) {
      const rel = prefix ? `${prefix}/${e.name}` : e.name;
      if (e.isDirectory()) walk(join(dir, e.name), rel);
      else if (e.isFile() && !e.name.endsWith(".tmp")) {
        try {
          refs[rel] = readFileSync(join(dir, e.name), "utf8").trim();
        } catch (err) {
          problems.push(`refs/${rel}: cannot be read: ${describeIoError(err)}`);
        }
      }
    }
  };
  walk(refsDir, "");
  return refs;
}

/** the real path of each snapshot file (a blob, or the file itself when symlinks were refused) */
function snapshotTargets(cache: RepoCache, commit: string, skipped?: (file: string, why: string) => void): { files: string[]; targets: Map<string, number> } {
  const listed = cache.listSnapshot(commit, skipped);
  const files: string[] = [];
  const targets = new Map<string, number>();
  for (const f of listed) {
    // a download replacing the file's blob (or an rm taking it) between the listing and here
    const found = sizeOf(cache.snapshotPath(commit, f));
    if (!found) { skipped?.(f, "its blob is missing (a broken link)"); continue; }
    files.push(f);
    targets.set(found.real, found.size);
  }
  return { files, targets };
}

/**
 * The real path and size of a cache entry, or undefined when it vanished since it was listed: a
 * download renames its `.incomplete` file to the blob's name, replaces links, and an rm deletes
 * blobs while the cache is scanned; a scan must skip what is gone, not stop on it.
 */
function sizeOf(path: string): { real: string; size: number } | undefined {
  try {
    const real = realpathSync(path);
    return { real, size: statSync(real).size };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}

/** the files of blobs/ (as listed in `listed`) that no snapshot points at, skipping those gone since the listing */
export function unreferenced(blobsDir: string, listed: readonly Dirent[], referenced: ReadonlyMap<string, number>): { count: number; bytes: number } {
  let count = 0, bytes = 0;
  for (const e of listed) {
    if (!e.isFile()) continue;
    const found = sizeOf(join(blobsDir, e.name));
    if (!found || referenced.has(found.real)) continue;
    count++;
    bytes += found.size;
  }
  return { count, bytes };
}

const sum = (m: Map<string, number>) => [...m.values()].reduce((s, n) => s + n, 0);

interface Scan {
  readonly repo: CachedRepo;
  /** snapshot folders that could not be read whole: the blobs they use are unknown */
  readonly unreadable: string[];
}

/**
 * the repo folder's scan; `undefined` when it is not a real folder inside the cache. Damage is
 * collected in `problems`, never thrown: one broken repo (or snapshot) must not hide the others.
 */
function scanRepo(root: string, repo: string): Scan | undefined {
  const cache = new RepoCache(root, repo);
  if (!existsSync(cache.dir) || !lstatSync(cache.dir).isDirectory()) return undefined;
  const problems: string[] = [];
  const unreadable: string[] = [];
  const refs = readRefs(join(cache.dir, "refs"), problems);
  const commits: string[] = [];
  for (const e of entries(join(cache.dir, "snapshots"), "snapshots", problems)) {
    if (!e.isDirectory()) { problems.push(`snapshots/${e.name}: is not a snapshot folder`); continue; }
    if (isCacheName(e.name)) commits.push(e.name);
    else { problems.push(`snapshots/${e.name}: is not named by a commit`); unreadable.push(e.name); }
  }
  commits.sort();
  const all = new Map<string, number>();
  const revisions: CachedRevision[] = [];
  for (const commit of commits) {
    let scanned;
    try {
      scanned = snapshotTargets(cache, commit, (file, why) => problems.push(`snapshots/${commit}/${file}: ${why}`));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") continue; // removed (tsllm rm) since it was listed: it uses nothing
      problems.push(`snapshots/${commit}: cannot be read: ${describeIoError(e)}`);
      unreadable.push(commit);
      continue;
    }
    for (const [k, v] of scanned.targets) all.set(k, v);
    revisions.push({ commit, refs: Object.keys(refs).filter((r) => refs[r] === commit).sort(), files: scanned.files, sizeOnDisk: sum(scanned.targets) });
  }
  for (const [name, commit] of Object.entries(refs)) {
    if (!commits.includes(commit)) problems.push(`refs/${name}: names ${isCacheName(commit) ? `commit ${commit}, which has no snapshot` : `no commit (${JSON.stringify(commit.slice(0, 60))})`}`);
  }
  const blobs = join(cache.dir, "blobs");
  const { count: unreferencedBlobs, bytes: unreferencedBytes } = unreferenced(blobs, entries(blobs, "blobs", problems), all);
  return { repo: { repo, dir: cache.dir, revisions, refs, sizeOnDisk: sum(all), unreferencedBlobs, unreferencedBytes, problems: problems.sort() }, unreadable };
}

/** Every model repo in a cache root (none when the root does not exist), sorted by name. */
export function listCachedRepos(root: string): CachedRepo[] {
  if (!existsSync(root)) return [];
  const out: CachedRepo[] = [];
  for (const e of readdirSync(root, { withFileTypes: true })) {
    const repo = e.isDirectory() ? repoFromFolder(e.name) : undefined;
    if (!repo) continue;
    const scanned = scanRepo(root, repo);
    if (scanned) out.push(scanned.repo);
  }
  return out.sort((a, b) => a.repo.localeCompare(b.repo));
}

/** refuses a repo folder that is a symlink or resolves outside the cache root */
function assertInside(root: string, dir: string, what: string): void {
  const link = lstatSync(dir).isSymbolicLink();
  if (link || !realpathSync(dir).startsWith(realpathSync(root) + sep)) {
    throw new HubError("bad-reference", `${what} (${dir}) ${link ? "is a symlink" : "resolves outside the cache"} ${root}; refusing to remove it`);
  }
}

/**
 * Removes a repo from the cache: its whole folder (and its lock folder), or, with `revision`
 * (a ref or a commit), that snapshot, the refs pointing at it and the blobs no other snapshot
 * uses. Removing the last snapshot removes the repo. `reference` is `org/name` or `org/name@revision`.
 */
export async function removeCachedRepo(root: string, reference: string, revision?: string, options: RemoveOptions = {}): Promise<RemoveResult> {
  try {
    return await removeFromCache(root, reference, revision, options.onWait);
  } catch (e) {
    // a cache owned by another user, or on a read-only volume: one line naming where it stopped
    if (!isIoError(e)) throw e;
    // REF@R --revision R names R once (rm refuses two different ones before this)
    const what = revision === undefined || reference.endsWith(`@${revision}`) ? reference : `${reference}@${revision}`;
    throw new HubError("disk", `cannot remove ${what} from the cache ${root}: ${describeIoError(e)}${e.path ? ` at ${e.path}` : ""}; run as the cache's owner or make it writable (tsllm ls shows what is left)`);
  }
}

async function removeFromCache(root: string, reference: string, revision: string | undefined, onWait: RemoveOptions["onWait"]): Promise<RemoveResult> {
  const ref = parseCachedReference(reference);
  if (ref.selector) throw new HubError("bad-reference", `rm "${reference}": expected org/name or org/name@revision, not a file or quantization`);
  revision ??= ref.revision;
  const repo = ref.repo;
  if (revision !== undefined) checkRevision(revision, repo); // before anything is looked at
  const dir = join(root, repoFolderName(repo));
  if (existsSync(dir)) assertInside(root, dir, `cache folder of ${repo}`);
  scanCached(root, repo); // a name not cached is refused before any lock folder is made for it
  const cache = new RepoCache(root, repo);
  // held from the look at the locks to the last deletion: a download takes its snapshot lock
  // holding it, so none starts writing what rm removes after rm looked (another rm waits too,
  // rather than finding this one's blob locks and calling it a download). A lock folder that
  // cannot be written takes none: no download can take a lock there either
  const gate = cache.gateLockPath();
  const locks = dirname(gate);
  if (!(await writable(locks))) return removeLooked(cache, revision, onWait);
  try {
    return await withFileLock(gate, () => removeLooked(cache, revision, onWait), undefined, (holder) => onWait?.(holder, gate, repo));
  } finally {
    // the repo gone (removed by the rm this one waited for), its lock folder made again to wait in goes too
    if (!existsSync(cache.dir)) await rmdir(locks).catch(() => undefined);
  }
}

/** the scan of a repo in the cache, or the error that it is not there */
function scanCached(root: string, repo: string): Scan {
  const scan = scanRepo(root, repo);
  if (scan) return scan;
  const cached = listCachedRepos(root).map((r) => r.repo);
  throw new HubError("repo-not-found", `${repo} is not in the cache ${root} (cached: ${cached.length ? cached.join(", ") : "none"})`);
}

/** removes the repo, or its `revision`, as found now (see removeCachedRepo) */
async function removeLooked(cache: RepoCache, revision: string | undefined, onWait: RemoveOptions["onWait"]): Promise<RemoveResult> {
  const { root, repo } = cache;
  const scan = scanCached(root, repo);
  const scanned = scan.repo;
  // a download in progress holds a lock per blob it writes and one for the snapshot it writes
  // (see RepoCache.snapshotLockPath): removing the repo under it loses its work and leaves it
  // failing on a folder gone; a revision is refused only where its removal takes what a download
  // writes (that snapshot, or a blob it frees), as delete_revisions frees only that revision's own
  const locks = join(root, ".locks", repoFolderName(repo));
  const busy = (held: LiveLock, what: string) => new HubError("busy", `${what} is being downloaded by ${held.holder} (it holds ${held.path}); wait for it to finish or stop it, then run rm again`);
  const refuseAnyDownload = () => {
    const held = liveLocks(locks)[0];
    if (held) throw busy(held, repo);
  };
  const removeRepo = async (): Promise<RemoveResult> => {
    const bytes = scanned.sizeOnDisk + scanned.unreferencedBytes;
    await rm(scanned.dir, { recursive: true, force: true });
    if (existsSync(locks) && !lstatSync(locks).isSymbolicLink()) await rm(locks, { recursive: true, force: true });
    return { repo, removed: [scanned.dir], freedBytes: bytes };
  };
  if (revision === undefined) { refuseAnyDownload(); return removeRepo(); }

  // a commit may be given by the short id ls prints (8 digits) or this error names (12), as git
  // takes a unique prefix: refusing the ids we print sent users to copy 40 digits by hand
  const prefixed = /^[0-9a-f]{7,39}$/.test(revision) && !existsSync(cache.refPath(revision)) ? scanned.revisions.filter((r) => r.commit.startsWith(revision)) : [];
  if (prefixed.length > 1) {
    throw new HubError("revision-not-found", `${repo}@${revision} names ${prefixed.length} cached commits (${prefixed.map((r) => r.commit).join(", ")}); give more of the commit id`);
  }
  const commit = cache.cachedCommit(revision) ?? prefixed[0]?.commit;
  const target = scanned.revisions.find((r) => r.commit === commit);
  if (!commit || !target) {
    const known = scanned.revisions.map((r) => [...r.refs, r.commit.slice(0, 12)].join("/"));
    throw new HubError("revision-not-found", `${repo}@${revision} is not in the cache ${root} (cached revisions: ${known.join(", ") || "none"})`);
  }
  // a snapshot that could not be read may use any blob: removing blobs now could take its data
  const refuseUnknown = (unreadable: readonly string[]) => {
    const unknown = unreadable.filter((c) => c !== commit);
    if (unknown.length === 0) return;
    throw new HubError("disk", `cannot remove ${repo}@${revision} alone: the snapshot${unknown.length === 1 ? "" : "s"} ${unknown.map((c) => join(cache.dir, "snapshots", c)).join(", ")} could not be read, so which blobs ${unknown.length === 1 ? "it uses" : "they use"} is unknown; repair or remove ${unknown.length === 1 ? "it" : "them"} first (tsllm ls names what is damaged), or remove the whole repo (tsllm rm ${repo})`);
  };
  // a download writing this very snapshot: removing it leaves that download linking into a folder
  // gone (or a partial snapshot) and reporting success
  const refuseWriter = () => {
    const held = liveLocks(locks).find((l) => snapshotOfLock(l.name) === commit);
    if (held) throw busy(held, `${repo}@${commit}`);
  };
  refuseWriter();
  refuseUnknown(scan.unreadable);
  // the locks downloads of the repo left when they died go (their snapshot locks, the locks of
  // files no download fetches again): a live download's stay and are judged above
  await cache.removeAbandonedLocks();
  if (scanned.revisions.length === 1) { refuseAnyDownload(); return { ...(await removeRepo()), commit }; }

  // blobs that some other snapshot still points at stay
  const blobsReal = realpathSync(join(cache.dir, "blobs"));
  const freedOf = (revisions: readonly CachedRevision[]) => {
    const kept = new Set<string>();
    for (const r of revisions) if (r.commit !== commit) for (const [p] of snapshotTargets(cache, r.commit).targets) kept.add(p);
    return [...snapshotTargets(cache, commit).targets].filter(([p]) => !kept.has(p) && p.startsWith(blobsReal + sep));
  };
  // a download links a blob already cached into its new snapshot holding that blob's lock: the
  // blobs to delete are decided again holding theirs, so a snapshot linked since the scan keeps its
  // blob, and one linked after finds the blob gone and fetches it (never a broken link)
  const lockNames = freedOf(scanned.revisions).map(([p]) => basename(p)).filter(isCacheName).sort();
  // a blob it frees that a download holds (fetching it again, linking it): refused, not waited for
  const writing = liveLocks(locks).find((l) => lockNames.some((etag) => l.name === basename(cache.lockPath(etag))));
  if (writing) throw busy(writing, `${repo}@${commit}`);
  return withLocks(lockNames.map((etag) => cache.lockPath(etag)), repo, onWait, async () => {
    const again = scanRepo(root, repo);
    if (again) refuseUnknown(again.unreadable);
    // the refs as they are now: a download may have moved one to its new commit meanwhile
    const now = again?.repo.revisions.find((r) => r.commit === commit);
    return removeRevision(cache, commit, now?.refs ?? [], again ? freedOf(again.repo.revisions) : []);
  });
}

interface LiveLock {
  readonly name: string;
  readonly path: string;
  /** `process <pid>[ on <host>]` */
  readonly holder: string;
}

/** the tsllm locks of a repo's lock folder whose holder is alive, by name */
function liveLocks(locks: string): LiveLock[] {
  if (!existsSync(locks) || !lstatSync(locks).isDirectory()) return [];
  const live: LiveLock[] = [];
  for (const name of readdirSync(locks).sort()) {
    if (!name.endsWith(LOCK_SUFFIX)) continue;
    const path = join(locks, name);
    const holder = liveHolder(path);
    if (holder) live.push({ name, path, holder });
  }
  return live;
}

/** runs `fn` holding every lock of `paths`, taken one after another in the order given (a wait on one said to `onWait`) */
function withLocks<T>(paths: readonly string[], repo: string, onWait: RemoveOptions["onWait"], fn: () => Promise<T>): Promise<T> {
  const [first, ...rest] = paths;
  return first === undefined ? fn() : withFileLock(first, () => withLocks(rest, repo, onWait, fn), undefined, (holder) => onWait?.(holder, first, repo));
}

/** removes a commit's snapshot, its refs and `freed` (blobs no other snapshot uses) */
async function removeRevision(cache: RepoCache, commit: string, refs: readonly string[], freed: [string, number][]): Promise<RemoveResult> {
  const removed: string[] = [];
  const snapshot = cache.snapshotDir(commit);
  await rm(snapshot, { recursive: true, force: true });
  removed.push(snapshot);
  // huggingface_hub's markers of files the commit does not have (.no_exist/<commit>/<path>): facts
  // about this commit only, so they go with it rather than stay behind as an empty folder tree
  const missing = join(cache.dir, ".no_exist", commit);
  if (existsSync(missing)) {
    await rm(missing, { recursive: true, force: true });
    removed.push(missing);
  }
  for (const name of refs) {
    const p = cache.refPath(name);
    await rm(p, { force: true });
    removed.push(p);
  }
  for (const [p] of freed) {
    await rm(p, { force: true });
    removed.push(p);
  }
  return { repo: cache.repo, commit, removed, freedBytes: sum(new Map(freed)) };
}
