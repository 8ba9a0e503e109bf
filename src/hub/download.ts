import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { defaultCacheDir, ensureDir, hubOfflineFromEnv, RepoCache, writable } from "./cache.js";
import { describeIoError, HubError, isIoError } from "./errors.js";
import { fetchBlob, matchesChecksum } from "./fetch-blob.js";
import { sleep, timeoutFromEnv } from "./http.js";
import { huggingFaceSource } from "./hf.js";
import { acquireFileLock, withFileLock } from "./lock.js";
import { modelScopeSource } from "./modelscope.js";
import type { DownloadProgress, ProgressListener } from "./progress.js";
import { checkRelativePath, checkRevision, formatReference, parseHubReference, type HubReference, type HubSourceName } from "./reference.js";
import { matchesAny, selectFiles, SPLIT_PART, type FileSelection } from "./select.js";
import type { HubSource, RepoListing } from "./source.js";

export interface DownloadOptions {
  /** the hub for references without a `hf:`/`modelscope:` prefix (default "hf") */
  source?: HubSourceName;
  /** overrides the reference's @revision */
  revision?: string;
  /** base URL of the hub (default HF_ENDPOINT / MODELSCOPE_ENDPOINT, then the public hub) */
  endpoint?: string;
  /** default HF_TOKEN (or the login token file) / MODELSCOPE_API_TOKEN; sent to the endpoint's origin only */
  token?: string;
  include?: readonly string[];
  exclude?: readonly string[];
  /** cache root (default HF_HUB_CACHE / HF_HOME/hub / ~/.cache/huggingface/hub; MODELSCOPE_CACHE) */
  cacheDir?: string;
  /** cache only, no request (default HF_HUB_OFFLINE) */
  offline?: boolean;
  /**
   * undefined (default), as huggingface_hub does: a branch or tag is asked of the hub (one
   * metadata request), so a moved branch gets its new commit; when the hub cannot answer, a
   * complete cached snapshot serves. A full commit id's cached file (a GGUF chosen by name or
   * quantization) makes no request, as hf_hub_download; its snapshot, or `include` globs, one
   * listing, as snapshot_download (only the hub knows every file; none cached is transferred again).
   * true: also re-checks every file of the snapshot against the hub (HEAD each).
   * false: a complete cached snapshot is used without any request.
   */
  refresh?: boolean;
  /** files transferred at once (default 4) */
  concurrency?: number;
  /** retries per file on network failures / 5xx (default 5), first backoff (default 500 ms, doubling) */
  retries?: number;
  retryDelayMs?: number;
  /**
   * a request the server stops answering (no headers, or no bytes of a file) is abandoned after
   * this long and retried / resumed; default as huggingface_hub: HF_HUB_ETAG_TIMEOUT seconds for
   * metadata, HF_HUB_DOWNLOAD_TIMEOUT for files, else 10 s
   */
  timeoutMs?: number;
  onProgress?: ProgressListener;
  signal?: AbortSignal;
  env?: NodeJS.ProcessEnv;
}

export interface DownloadResult {
  readonly source: HubSourceName;
  readonly repo: string;
  readonly revision: string;
  readonly commit: string;
  /** <cache>/models--org--name/snapshots/<commit> */
  readonly snapshotDir: string;
  /** repo-relative files of the selection */
  readonly files: readonly string[];
  /** what a loader opens: the selected GGUF (first part of a split set), else the snapshot folder */
  readonly path: string;
  /** true when the cache served it as it was: no request (a cached commit id, offline, refresh: false), or a hub that could not answer */
  readonly fromCache: boolean;
  /** set when the hub could not answer and the cached snapshot served instead: what failed */
  readonly hubFailure?: string;
}

export function createSource(name: HubSourceName, options: Pick<DownloadOptions, "endpoint" | "token" | "env" | "timeoutMs"> = {}): HubSource {
  return name === "modelscope" ? modelScopeSource(options) : huggingFaceSource(options);
}

/** weights present for every file an index names (a half-fetched snapshot is not complete) */
function snapshotComplete(snapshotDir: string, selection: FileSelection, explicit: boolean): boolean {
  if (selection.primary || explicit) return true;
  const files = new Set(selection.files);
  const weights = selection.files.filter((f) => /\.(safetensors|bin)$/.test(f));
  if (weights.length === 0 || !files.has("config.json")) return false;
  for (const index of ["model.safetensors.index.json", "pytorch_model.bin.index.json"]) {
    if (!files.has(index)) continue;
    try {
      const map = (JSON.parse(readFileSync(join(snapshotDir, index), "utf8")) as { weight_map?: Record<string, string> }).weight_map ?? {};
      if (!Object.values(map).every((f) => files.has(f))) return false;
    } catch {
      return false;
    }
  }
  return true;
}

/**
 * What offline `include` globs ask for that a cached snapshot lacks, as far as the snapshot can
 * tell without the hub's listing: names (no glob) it lacks; files its selection implies (every part
 * of a split set one part of which is held, the shards a held weight index names) that the globs
 * select and it lacks; and globs it holds no file for.
 */
function offlineGaps(snapshotDir: string, present: readonly string[], include: readonly string[], exclude: readonly string[]): { files: string[]; globs: string[] } {
  const held = new Set(present);
  const wanted = (f: string) => matchesAny(f, include) && !matchesAny(f, exclude);
  // a name written with backslashes is the repo's file with slashes, as the globs read it
  const files = new Set(include.map((p) => p.replaceAll("\\", "/")).filter((p) => !/[*?[\]]/.test(p) && !p.endsWith("/") && !held.has(p)));
  for (const f of present) {
    const part = SPLIT_PART.exec(f);
    if (part && wanted(f)) {
      const [, stem, , of, ext] = part;
      for (let i = 1; i <= Number(of); i++) {
        const sibling = `${stem}-${String(i).padStart(5, "0")}-of-${of}${ext}`;
        if (!held.has(sibling) && wanted(sibling)) files.add(sibling);
      }
    }
    if (/(^|\/)[^/]*\.index\.json$/.test(f)) {
      const dir = f.includes("/") ? f.slice(0, f.lastIndexOf("/") + 1) : "";
      let map: Record<string, unknown> = {};
      try {
        map = (JSON.parse(readFileSync(join(snapshotDir, f), "utf8")) as { weight_map?: Record<string, unknown> }).weight_map ?? {};
      } catch {
        // not a weight index (or unreadable): it names nothing
      }
      for (const shard of new Set(Object.values(map))) {
        if (typeof shard === "string" && !held.has(dir + shard) && wanted(dir + shard)) files.add(dir + shard);
      }
    }
  }
  const globs = include.filter((g) => /[*?[\]]/.test(g) || g.endsWith("/")).filter((g) => !present.some((f) => matchesAny(f, [g])));
  return { files: [...files].sort(), globs };
}

function fromCache(cache: RepoCache, ref: HubReference, revision: string, options: DownloadOptions): DownloadResult | undefined {
  if (!existsSync(cache.dir)) return undefined;
  const commit = cache.cachedCommit(revision);
  if (!commit) return undefined;
  const snapshotDir = cache.snapshotDir(commit);
  let selection: FileSelection;
  try {
    selection = selectFiles(cache.listSnapshot(commit), { selector: ref.selector, include: options.include, exclude: options.exclude }, `${formatReference(ref, revision)} (cached)`);
  } catch (e) {
    if (e instanceof HubError && e.code === "no-match") return undefined;
    throw e;
  }
  if (!snapshotComplete(snapshotDir, selection, (options.include?.length ?? 0) > 0)) return undefined;
  return {
    source: ref.source, repo: ref.repo, revision, commit, snapshotDir, files: selection.files,
    path: selection.primary ? cache.snapshotPath(commit, selection.primary) : snapshotDir,
    fromCache: true,
  };
}

/** the cached snapshot a refresh falls back on when the hub cannot answer; none where the cache cannot tell */
function fallbackSnapshot(cache: RepoCache, ref: HubReference, revision: string, options: DownloadOptions): DownloadResult | undefined {
  try {
    return fromCache(cache, ref, revision, options);
  } catch {
    return undefined; // a selection the cache cannot make (a damaged snapshot): the hub's answer, or its error, decides
  }
}

/**
 * The cached snapshot served because the hub could not answer, with what failed (hubFailure):
 * huggingface_hub serves it silently "but we can't check if all the files are actually there".
 * One that lacks what `include` asks for is an error, not a snapshot without the files asked for.
 */
function servedWithoutHub(fallback: DownloadResult, cache: RepoCache, context: string, e: HubError, options: DownloadOptions): DownloadResult {
  if ((options.include?.length ?? 0) > 0) {
    const { files, globs } = offlineGaps(fallback.snapshotDir, cache.listSnapshot(fallback.commit), options.include ?? [], options.exclude ?? []);
    const lacks = [...files, ...globs.map((g) => `a file matching --include '${g}'`)];
    if (lacks.length > 0) throw new HubError(e.code, `${context}: the hub could not answer (${e.message}) and the cached snapshot ${fallback.snapshotDir} lacks ${lacks.join(", ")}; run again once the hub can be reached`);
  }
  return { ...fallback, hubFailure: e.message };
}

/** retries a metadata request on network failures and 5xx, with doubling backoff */
async function withRetries<T>(what: () => Promise<T>, options: DownloadOptions): Promise<T> {
  const retries = options.retries ?? 5;
  for (let attempt = 0; ; attempt++) {
    try {
      return await what();
    } catch (e) {
      if (!(e instanceof HubError) || e.code !== "network" || attempt >= retries || options.signal?.aborted) {
        if (e instanceof HubError && e.code === "network" && attempt > 0) e.message += ` (after ${attempt + 1} attempts)`;
        throw e;
      }
      // a rate-limited hub (429 + Retry-After) is given the time it asks for
      await sleep(Math.max((options.retryDelayMs ?? 500) * 2 ** attempt, e.retryAfterMs ?? 0), options.signal);
    }
  }
}

/**
 * Runs `fn` on the items, `concurrency` at once; the first failure stops new ones and is thrown
 * once the others running have ended: a caller that exits on it (Ctrl-C) must find every file's
 * lock let go, not workers still holding theirs.
 */
async function pool<T>(items: readonly T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    while (!failure && next < items.length) {
      const item = items[next++]!;
      try { await fn(item); } catch (e) { failure ??= { error: e }; }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, worker));
  if (failure) throw failure.error;
}

/**
 * Downloads (or finds in the cache) what a hub reference needs and returns where it is.
 * The cache is huggingface_hub's, so a model fetched by either tool serves the other.
 */
export async function downloadModel(reference: string | HubReference, options: DownloadOptions = {}): Promise<DownloadResult> {
  const env = options.env ?? process.env;
  const ref = typeof reference === "string" ? parseHubReference(reference, options.source) : reference;
  const source = createSource(ref.source, { endpoint: options.endpoint, token: options.token, env, timeoutMs: options.timeoutMs });
  const fileTimeoutMs = options.timeoutMs ?? timeoutFromEnv(env, "HF_HUB_DOWNLOAD_TIMEOUT"); // read before anything is asked
  const revision = options.revision ?? ref.revision ?? source.defaultRevision;
  checkRevision(revision, formatReference(ref));
  const context = formatReference(ref, revision);
  const cache = new RepoCache(options.cacheDir ?? defaultCacheDir(ref.source, env), ref.repo);
  const offline = options.offline ?? hubOfflineFromEnv(env);

  // a commit's files never change: only a branch or tag can move on the hub. ModelScope's listing
  // names no commit (its snapshots are named by revision), so asking it again cannot tell a move
  const pinned = /^[0-9a-f]{40}$/.test(revision) || ref.source === "modelscope";
  // refresh cannot ask the hub offline: the cache serves as it is (tsllm download --offline, as
  // `hf download` with HF_HUB_OFFLINE=1 returns the cached snapshot)
  const cached = options.refresh === true && !offline ? undefined : fromCache(cache, ref, revision, options);
  // a pinned file (a GGUF chosen by name or quantization) that is cached is served with no request,
  // as hf_hub_download serves a commit's cached file. A whole snapshot, or --include globs, are
  // matched against what the cache holds, which may be what a narrower include fetched before:
  // only the hub's listing can tell whether more files belong, so it is asked, as snapshot_download
  // lists the repo even for a commit id (ModelScope's snapshots stay served as before: its listing
  // could not say the snapshot is the same)
  const explicit = (options.include?.length ?? 0) > 0;
  const oneFile = cached !== undefined && cached.path !== cached.snapshotDir;
  const asIs = pinned && !explicit && (oneFile || ref.source === "modelscope");
  // offline, what an include asks for that the snapshot lacks is said, not silently left out
  // (hf_hub_download offline raises for a file it cannot find in the cache; snapshot_download
  // serves the snapshot "but we can't check if all the files are actually there"): a name (no
  // glob) it lacks, a glob it holds nothing for, and the files a glob selects that the snapshot
  // itself says belong (the other parts of a split set, the shards a weight index names)
  if (cached && offline && explicit) {
    const { files: absent, globs } = offlineGaps(cached.snapshotDir, cache.listSnapshot(cached.commit), options.include ?? [], options.exclude ?? []);
    const advice = (names: string[]) => `offline mode is on (HF_HUB_OFFLINE=1): download ${names.length === 1 ? "it" : "them"} while online, e.g. tsllm download ${context} ${names.map((a) => `--include '${a}'`).join(" ")}`;
    if (absent.length > 0) throw new HubError("offline-miss", `${context}: ${absent.join(", ")} ${absent.length === 1 ? "is" : "are"} not in the cache (${cache.dir}) and ${advice(absent)}`);
    if (globs.length > 0) throw new HubError("offline-miss", `${context}: --include ${globs.map((g) => `'${g}'`).join(", ")} ${globs.length === 1 ? "matches" : "match"} no file of the cached snapshot (${cached.snapshotDir}) and ${advice(globs)}`);
  }
  if (cached && (offline || asIs || options.refresh === false)) return cached;
  if (offline) {
    const refFile = cache.refPath(revision);
    // a snapshot whose files lost their blobs (deleted by hand, a cleaner) is there but cannot serve: say which
    const commit = existsSync(cache.dir) ? cache.cachedCommit(revision) : undefined;
    const broken: string[] = [];
    if (commit) cache.listSnapshot(commit, (file, why) => broken.push(`${file}: ${why}`));
    if (commit && broken.length > 0) {
      throw new HubError("offline-miss", `${context} cannot be served from the cache: its snapshot ${cache.snapshotDir(commit)} is damaged (${broken.join("; ")}) and offline mode is on (HF_HUB_OFFLINE=1): download it again while online, e.g. tsllm download ${context}`);
    }
    const damaged = existsSync(refFile) && cache.refCommit(revision) === undefined ? ` (its ref file ${refFile} is damaged: it names no commit)` : "";
    throw new HubError("offline-miss", `${context} is not in the cache (${cache.dir})${damaged} and offline mode is on (HF_HUB_OFFLINE=1): download it first while online, e.g. tsllm download ${context}`);
  }

  // with a cached snapshot to fall back on, one try, refresh too (snapshot_download asks repo_info
  // once and serves the cache on a connection error): an unreachable hub must not hold up a load
  // for the retries' backoff
  const fallback = cached ?? fallbackSnapshot(cache, ref, revision, options);
  let listing;
  try {
    listing = await withRetries(() => source.list(ref.repo, revision, options.signal), fallback ? { ...options, retries: 0 } : options);
  } catch (e) {
    // as huggingface_hub does: when the hub cannot answer (down, unreachable, a token it now
    // refuses), a cached snapshot still serves; a revision it says is gone does not. Asked to
    // refresh, only an unreachable hub falls back: a refused token is the answer to give
    const serve = cached ? e instanceof HubError && e.code !== "revision-not-found" : e instanceof HubError && e.code === "network";
    if (serve && fallback && !options.signal?.aborted) return servedWithoutHub(fallback, cache, context, e as HubError, options);
    throw e;
  }
  const selection = selectFiles(listing.files.map((f) => f.path), { selector: ref.selector, include: options.include, exclude: options.exclude }, context);
  // the branch still points at the cached commit and the cache holds every file selected: nothing to fetch or check
  if (cached && cached.commit === listing.commit && selection.files.every((f) => cached.files.includes(f))) return result(ref, revision, cache, listing.commit, selection);
  // every name that becomes a path is checked before anything is written
  for (const f of selection.files) checkRelativePath(f, `file name listed by ${context}`);
  cache.snapshotDir(listing.commit);
  const existed = existsSync(cache.dir);

  try {
    try {
      // files the cache already holds for this very commit are not asked again (hf_hub_download
      // serves a commit's cached file with no request); refresh, which has no cached, checks all
      const held = cached?.commit === listing.commit ? new Set(cached.files) : undefined;
      await writeSnapshot(cache, source, ref, revision, listing, held ? selection.files.filter((f) => !held.has(f)) : selection.files, { ...options, timeoutMs: fileTimeoutMs });
    } catch (e) {
      if (!isIoError(e)) throw e;
      const variable = ref.source === "modelscope" ? "MODELSCOPE_CACHE" : "HF_HUB_CACHE";
      throw new HubError("disk", `cannot write the cache ${cache.root}: ${describeIoError(e)}${e.path ? ` at ${e.path}` : ""}; point ${variable} (the cacheDir option) at a writable folder`);
    }
  } catch (e) {
    // a first download that kept nothing (a refused token, a file the hub lacks) leaves no empty
    // repo folder for ls to list, as huggingface_hub makes its folders only once a file's metadata came
    if (!existed) await cache.removeIfEmpty();
    // the branch moved but its new commit could not be fetched (the connection broke, the disk is
    // full): the commit cached before still serves, as it did before the branch was asked; the
    // ref is not moved, so the next run tries again (what was fetched is kept and resumed)
    if (cached && e instanceof HubError && (e.code === "network" || e.code === "disk") && !options.signal?.aborted) return cached;
    throw e;
  }
  return result(ref, revision, cache, listing.commit, selection);
}

/** what the hub's listing selected, in the commit's snapshot */
function result(ref: HubReference, revision: string, cache: RepoCache, commit: string, selection: FileSelection): DownloadResult {
  return {
    source: ref.source, repo: ref.repo, revision, commit,
    snapshotDir: cache.snapshotDir(commit), files: selection.files,
    path: selection.primary ? cache.snapshotPath(commit, selection.primary) : cache.snapshotDir(commit),
    fromCache: false,
  };
}

/** fetches what the cache lacks of `files`, links them into the commit's snapshot and records the revision's ref */
async function writeSnapshot(cache: RepoCache, source: HubSource, ref: HubReference, revision: string, listing: RepoListing, files: readonly string[], options: DownloadOptions & { timeoutMs: number }): Promise<void> {
  const byPath = new Map(listing.files.map((f) => [f.path, f]));
  // held while snapshots/<commit> is written, up to its ref: an rm of this revision meanwhile would
  // delete the folder under it (links made after that are a partial snapshot reported complete).
  // A lock folder that cannot be written (a read-only volume) takes none: a complete snapshot there
  // still serves a refresh, and no rm can remove anything from it either
  const lock = cache.snapshotLockPath(listing.commit);
  // the repo folder made once the lock is held: an rm of the whole repo before that removes it
  const write = async () => { await ensureDir(cache.dir); await writeFiles(cache, source, ref, revision, listing, files, byPath, options); };
  if (!(await writable(dirname(lock)))) return write();
  // taken holding the gate an rm holds from its look to its deletion, so an rm either saw this
  // lock or has finished before it was taken. The locks that downloads of this repo left when they
  // died are cleared here: no one takes a dead download's snapshot lock again, nor the lock of a
  // file no download fetches again. A wait on the gate (an rm at work) is said, not a silent hang
  const gate = cache.gateLockPath();
  const release = await withFileLock(gate, async () => {
    await cache.removeAbandonedLocks();
    return acquireFileLock(lock, options.signal);
  }, options.signal, (holder) => options.onProgress?.({ file: "", repo: ref.repo, phase: "wait", downloaded: 0, total: 0, holder, lock: gate }));
  try {
    await write();
  } finally {
    await release();
  }
  // a download that died while this one ran (one it waited for, then took over from) left its
  // locks after the clearing above
  await cache.removeAbandonedLocks();
}

async function writeFiles(cache: RepoCache, source: HubSource, ref: HubReference, revision: string, listing: RepoListing, files: readonly string[], byPath: Map<string, RepoListing["files"][number]>, options: DownloadOptions & { timeoutMs: number }): Promise<void> {
  await pool(files, options.concurrency ?? 4, async (file) => {
    const location = await withRetries(() => source.locate(ref.repo, listing.commit, byPath.get(file)!, options.signal), options);
    const blob = cache.blobPath(location.etag);
    const what = `${file} of ${formatReference({ ...ref, selector: undefined }, revision)}`;
    // a blob of another size than the hub announces is still the file when its bytes hash to its
    // name (huggingface_hub links any blob it has by name): a proxy announcing a wrong size must not
    // cost a cached snapshot its verified file
    const have = async () => existsSync(blob) && (statSync(blob).size === location.size || (await matchesChecksum(location, blob)));
    const report = (phase: DownloadProgress["phase"], downloaded: number, waitingOn?: { holder: string; lock: string }) =>
      options.onProgress?.({ file, repo: ref.repo, phase, downloaded, total: location.size, ...waitingOn });
    // without symlinks the snapshot holds the file itself (its blob was moved there); with them,
    // a link already made to a blob that is there needs nothing written (a read-only cache serves
    // a refresh) and an rm sees this snapshot use the blob
    if (cache.holdsFile(listing.commit, file, location.size) || (cache.isLinked(listing.commit, file, location.etag) && (await have()))) {
      report("cached", location.size);
      return;
    }
    // a blob already there is linked holding its lock too: an rm of another revision takes the
    // locks of the blobs it frees and looks at the other snapshots again, so it either sees this
    // link and keeps the blob, or deletes the blob before this looks, which then fetches it again
    // (linked unlocked, an rm between the look and the link left a broken link reported as success)
    const lock = cache.lockPath(location.etag);
    await withFileLock(lock, async () => {
      // another download finished it meanwhile: its blob is there, or, without symlinks, was
      // moved into this very snapshot (then no blob is left to find, and the bytes were fetched again)
      if (cache.holdsFile(listing.commit, file, location.size)) { report("cached", location.size); return; }
      if (await have()) {
        report("cached", location.size);
        // without symlinks it is copied: under the lock, no other download moves it away meanwhile
        await cache.linkSnapshot(listing.commit, file, location.etag);
        return;
      }
      // a blob that is not the file is replaced only by a verified one (renamed over it): a fetch
      // that fails leaves the snapshot as it was
      const partial = `${blob}.incomplete`;
      report("start", existsSync(partial) ? Math.min(statSync(partial).size, location.size) : 0);
      await fetchBlob({
        location, auth: source.auth, blobPath: blob, what,
        retries: options.retries ?? 5, retryDelayMs: options.retryDelayMs ?? 500,
        timeoutMs: options.timeoutMs,
        onBytes: (n) => report("bytes", n), signal: options.signal,
      });
      report("done", location.size);
      // where symlinks are refused the new blob is moved, and another download of it must not find it half gone
      await cache.linkSnapshot(listing.commit, file, location.etag, true);
    }, options.signal, (holder) => report("wait", 0, { holder, lock }));
  });
  await cache.writeRef(revision, listing.commit);
}
