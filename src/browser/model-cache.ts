/**
 * Models fetched from a URL, kept in the Cache API of the page's origin so that a reload does
 * not download them again. One entry per URL; its response carries the validators the server
 * sent (ETag, Last-Modified, the size), which `cache: "revalidate"` compares with a one-byte
 * Range probe before it trusts the entry. A cached model is read back as a Blob (disk-backed
 * in Chromium), by position, with FileReaderSync: no copy of the whole file in memory.
 *
 * The file itself is stored in parts of 16 MiB, each an entry of its own (`URL?tsllm-part=N`),
 * and read back as one Blob made of them: Chromium's Cache API refuses (an "Unexpected internal
 * error") a single response over 256 MiB, which most models are. The model's own entry, holding
 * the headers and no body, is written last, so a download cut short leaves no entry that looks
 * whole. Beside it, a second one holds the SHA-256 of every part as it arrived from the network; a load from the cache first checks the stored file against them, so
 * that a copy damaged on disk (same size, a few bytes changed: the loader would read garbage
 * weights and generate wrong text without a word) is found, taken out and downloaded again.
 */
import { parseGGUFHeader } from "../formats/gguf-reader.js";
import type { RandomAccessFile } from "../platform/host.js";
import { abortError, blobFile, brokenDownload, fetchNamed, HttpStatusError, memoryFile, openUrl, rangeProbe } from "./files.js";
import { web, type WebCache } from "../platform/web.js";

const CACHE_NAME = "tsllm-models-v1";
const H_URL = "x-tsllm-url", H_SIZE = "x-tsllm-size", H_ETAG = "x-tsllm-etag", H_MODIFIED = "x-tsllm-last-modified", H_AT = "x-tsllm-cached-at";
/** a random id of one stored copy: its digests name it, so that digests of another copy (two tabs downloading at once) are not taken for its own */
const H_ID = "x-tsllm-copy";
/** the bytes each stored digest covers: SubtleCrypto digests a whole buffer, so a file is digested block by block */
const DIGEST_BLOCK = 16 << 20;
/** blocks a cached copy's check reads and digests at once */
const VERIFY_AT_ONCE = 4;
/** how many parts the file is stored in (an entry of an older version has none: its body is the file) */
const H_PARTS = "x-tsllm-parts";
/** cache keys beside a model's own (queries, not fragments: the Cache API ignores fragments when it matches) */
const DIGESTS = "tsllm-digests";
const keyFor = (url: string, what: string): string => `${url}${url.includes("?") ? "&" : "?"}${what}`;
const partKey = (url: string, i: number): string => keyFor(url, `tsllm-part=${i}`);
/** a model's own key, not one of the entries beside it (its parts, its digests, an older version's staged download) */
const isModelKey = (key: string): boolean => !/[?&]tsllm-(downloading|digests|part=\d+)$/.test(key);

/** a model kept in the cache */
export interface CachedModel {
  url: string;
  /** bytes */
  size: number;
  etag?: string;
  lastModified?: string;
  /** when it was stored (ISO 8601) */
  cachedAt: string;
}

/**
 * how far a load is: `download` while a URL's file goes into the cache, `verify` while a cached
 * copy is checked against the digests taken when it was downloaded, `read` while the weights are
 * read from wherever the file is
 */
export interface LoadProgress {
  phase: "download" | "verify" | "read";
  /** bytes so far */
  loaded: number;
  /** bytes in all (the file's size) */
  total: number;
  /** the file comes from the cache (no download) */
  fromCache: boolean;
}

/** a URL opened for the loader: the file, and where it came from */
export interface OpenedUrl {
  file: RandomAccessFile;
  size: number;
  /** read from the cache: nothing was downloaded */
  fromCache: boolean;
  /** the file is in the cache now (fromCache, or stored by this load) */
  cached: boolean;
  /** why a file meant for the cache is not in it (storing failed: the storage quota, say) */
  notCached?: string;
  /** the cached copy was damaged (it differed from what was downloaded): why, and that it was downloaded again */
  refetched?: string;
  /** the load failed: the file is taken out of the cache again (a URL that was no model, a damaged cached copy) */
  discard(): Promise<void>;
}

export interface UrlLoadOptions {
  /**
   * keep the file in the Cache API and read it from there next time (default true: a cached
   * URL makes no request at all); "revalidate": first ask the server (one Range request for
   * byte 0) and download again when its ETag, Last-Modified or size differ; false: no cache,
   * HTTP Range reads
   */
  cache?: boolean | "revalidate";
  /** fetch the whole file in one request when not caching */
  wholeFile?: boolean;
  onProgress?: (p: LoadProgress) => void;
  /** ends the download early (an AbortError) */
  signal?: AbortSignal;
}

/** the Cache API could not keep a download (not the network's fault): the load goes on without the cache */
class CacheStoreError extends Error {}

/** why storing `url` failed, in words a user can act on */
function storeFailure(url: string, e: unknown): CacheStoreError {
  const name = (e as Error)?.name, message = (e as Error)?.message ?? String(e);
  return new CacheStoreError(name === "QuotaExceededError"
    ? `the model cache could not keep ${url}: this site's storage quota is used up (QuotaExceededError); free space with clearModelCache() or in the browser's site settings`
    : `the model cache could not keep ${url} (${name ? `${name}: ` : ""}${message})`);
}

/** the model cache, or undefined where the context has no Cache API (not a secure context) */
/** the model cache, or why there is none (said in notCached: a load that silently never cached left a page's author guessing) */
async function openCache(): Promise<WebCache | string> {
  if (!web.caches) {
    return web.isSecureContext === false
      ? "the Cache API exists only in secure contexts (https:, or http://localhost) and this page is not one"
      : "this browser has no Cache API here";
  }
  try {
    return await web.caches.open(CACHE_NAME);
  } catch (e) {
    return `the Cache API is unavailable (${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}; storage disabled, as in some private modes)`;
  }
}

function describe(url: string, r: Response): CachedModel {
  const h = r.headers;
  const etag = h.get(H_ETAG) ?? undefined, lastModified = h.get(H_MODIFIED) ?? undefined;
  return { url: h.get(H_URL) ?? url, size: Number(h.get(H_SIZE)), ...(etag ? { etag } : {}), ...(lastModified ? { lastModified } : {}), cachedAt: h.get(H_AT) ?? "" };
}

/** the models in the cache */
export async function listCachedModels(): Promise<CachedModel[]> {
  const cache = await openCache();
  if (typeof cache === "string") return [];
  const out: CachedModel[] = [];
  for (const key of await cache.keys()) {
    if (!isModelKey(key.url)) continue;
    const r = await cache.match(key.url);
    if (r) out.push(describe(key.url, r));
  }
  return out;
}

/** removes one URL's model (true when it was there), or every cached model (url undefined: how many) */
export async function deleteCachedModels(url?: string): Promise<number> {
  const cache = await openCache();
  if (typeof cache === "string") return 0;
  if (url !== undefined) return (await forget(cache, url)) ? 1 : 0;
  let n = 0;
  for (const key of await cache.keys()) if ((await cache.delete(key.url)) && isModelKey(key.url)) n++;
  return n;
}

/** takes a URL's model, its parts and its digests out of the cache (true when the model was there) */
async function forget(cache: WebCache, url: string): Promise<boolean> {
  const had = await cache.delete(url);
  // the parts a download cut short left (no model entry names them) go too
  const beside = keyFor(url, "tsllm-");
  await Promise.all((await cache.keys()).filter((k) => k.url.startsWith(beside)).map((k) => cache.delete(k.url)));
  return had;
}

/** a cached model's file: its parts as one Blob (disk-backed, not copied), or an older version's body */
async function fileOf(cache: WebCache, url: string, entry: Response): Promise<Blob | undefined> {
  const parts = entry.headers.get(H_PARTS);
  if (parts === null) return entry.blob();
  const blobs: Blob[] = [];
  for (let i = 0; i < Number(parts); i++) {
    const part = await cache.match(partKey(url, i));
    if (!part) return undefined;
    blobs.push(await part.blob());
  }
  return new Blob(blobs);
}

const hex = (digest: ArrayBuffer): string => Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");

/**
 * a download cut into DIGEST_BLOCK parts, pushed in pieces of any size (one part buffered): each
 * full part is stored (awaited: the download waits for the disk) and its SHA-256 taken
 */
class PartWriter {
  readonly digests: Promise<string>[] = [];
  /** bytes pushed */
  size = 0;
  private block = new Uint8Array(DIGEST_BLOCK);
  private filled = 0;

  constructor(private readonly store: (i: number, part: Uint8Array) => Promise<void>) {}

  async push(bytes: Uint8Array): Promise<void> {
    this.size += bytes.length;
    for (let at = 0; at < bytes.length;) {
      const n = Math.min(bytes.length - at, DIGEST_BLOCK - this.filled);
      this.block.set(bytes.subarray(at, at + n), this.filled);
      this.filled += n;
      at += n;
      if (this.filled === DIGEST_BLOCK) await this.flush();
    }
  }

  /** the parts stored and every part's digest, in order, once the stream has ended */
  async finish(): Promise<{ parts: number; sha256: string[] }> {
    if (this.filled > 0 || this.digests.length === 0) await this.flush();
    return { parts: this.digests.length, sha256: await Promise.all(this.digests) };
  }

  private async flush(): Promise<void> {
    // SubtleCrypto and the Cache API may read the buffer after this returns: they keep this one, the next part gets a new one
    const full = this.block.subarray(0, this.filled);
    this.digests.push(crypto.subtle.digest("SHA-256", full).then(hex));
    this.block = new Uint8Array(DIGEST_BLOCK);
    this.filled = 0;
    await this.store(this.digests.length - 1, full);
  }
}

/** what the digests entry beside a model holds */
interface StoredDigests {
  copy: string;
  size: number;
  blockSize: number;
  sha256: string[];
}

/** which stored copy `entry` is: its id (an older version's entry has none: the time it was stored then) */
const copyOf = (entry: { headers: Headers }): string => entry.headers.get(H_ID) ?? `cached at ${entry.headers.get(H_AT) ?? ""}`;

/** stores the digests of the copy `entry` (or its headers) of `url` */
async function storeDigests(cache: WebCache, url: string, entry: { headers: Headers }, sha256: string[]): Promise<void> {
  const stored: StoredDigests = { copy: copyOf(entry), size: Number(entry.headers.get(H_SIZE)), blockSize: DIGEST_BLOCK, sha256 };
  await cache.put(keyFor(url, DIGESTS), new Response(JSON.stringify(stored), { headers: { "content-type": "application/json" } }));
}

/** the digests stored for the copy `entry` of `url`, or undefined (none, unreadable, or another copy's) */
async function digestsOf(cache: WebCache, url: string, entry: Response): Promise<string[] | undefined> {
  try {
    const stored = (await (await cache.match(keyFor(url, DIGESTS)))?.json()) as StoredDigests | undefined;
    const fits = stored && stored.copy === copyOf(entry) && stored.size === Number(entry.headers.get(H_SIZE)) && stored.blockSize === DIGEST_BLOCK
      && Array.isArray(stored.sha256) && stored.sha256.length === Math.ceil(stored.size / DIGEST_BLOCK);
    return fits ? stored.sha256 : undefined;
  } catch {
    return undefined; // damaged digests: as if none
  }
}

/**
 * the digest of each block of a cached copy, read back (asynchronously, a block at a time), with
 * `verify` progress; stops at the first block that differs from `expected`, when given, and at an abort
 */
async function digestBlob(url: string, blob: Blob, expected: string[] | undefined, onProgress?: (p: LoadProgress) => void, signal?: AbortSignal): Promise<{ sha256: string[]; differs?: number }> {
  const blocks = Math.max(1, Math.ceil(blob.size / DIGEST_BLOCK));
  const digestOf = async (i: number): Promise<string> =>
    hex(await crypto.subtle.digest("SHA-256", await blob.slice(i * DIGEST_BLOCK, Math.min(blob.size, (i + 1) * DIGEST_BLOCK)).arrayBuffer()));
  const sha256: string[] = [];
  // a few blocks read and digested at once (the browser digests off the worker's thread): 4 x 16 MiB held at most
  for (let first = 0; first < blocks; first += VERIFY_AT_ONCE) {
    // a big file's check takes seconds: a Stop ends it (the copy stays cached)
    if (signal?.aborted) throw abortError(url);
    const batch = await Promise.all(Array.from({ length: Math.min(VERIFY_AT_ONCE, blocks - first) }, (_, k) => digestOf(first + k)));
    onProgress?.({ phase: "verify", loaded: Math.min(blob.size, (first + batch.length) * DIGEST_BLOCK), total: blob.size, fromCache: true });
    for (const [k, digest] of batch.entries()) {
      sha256.push(digest);
      if (expected && expected[first + k] !== digest) return { sha256, differs: first + k };
    }
  }
  return { sha256 };
}

/** a file whose reads report progress (at most ~100 reports, and the last byte) */
function counted(file: RandomAccessFile, fromCache: boolean, onProgress?: (p: LoadProgress) => void): RandomAccessFile {
  if (!onProgress) return file;
  const total = file.size, step = Math.max(1, Math.floor(total / 100));
  let loaded = 0, reported = 0;
  return {
    size: total,
    read(into, offset, length, position) {
      const n = file.read(into, offset, length, position);
      loaded = Math.min(total, loaded + n);
      if (loaded - reported >= step || (loaded === total && reported < total)) {
        reported = loaded;
        onProgress({ phase: "read", loaded, total, fromCache });
      }
      return n;
    },
    close: () => file.close(),
  };
}

/**
 * throws the GGUF reader's own error when a download does not start with GGUF's magic, so that
 * a wrong URL (an HTML page, a safetensors file of gigabytes) fails at its first bytes, not once
 * it has all arrived; `first` is the first piece of the body (undefined: not checked)
 */
function notGGUF(url: string, first: Uint8Array | undefined): void {
  if (!first || (first[0] === 0x47 && first[1] === 0x47 && first[2] === 0x55 && first[3] === 0x46)) return;
  parseGGUFHeader(memoryFile(first.subarray(0, 4)), url);
}

/**
 * the response's body into the cache under `url` (its parts, their digests, then the entry that
 * names them), reporting the bytes as they arrive; a body that breaks off is the URL's error, a
 * Cache API that cannot store it a CacheStoreError (what was stored is taken out again)
 */
async function download(cache: WebCache, url: string, onProgress?: (p: LoadProgress) => void, signal?: AbortSignal): Promise<Response> {
  // no-store: the file goes into the model cache, not also into the HTTP cache
  const response = await fetchNamed(url, { cache: "no-store", signal } as RequestInit);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status} ${response.statusText}`.trimEnd());
  // (a compressed body's Content-Length is not the file's size)
  const length = response.headers.get("content-encoding") ? NaN : Number(response.headers.get("content-length") ?? NaN);
  const headers: Record<string, string> = { "content-type": "application/octet-stream", [H_URL]: url, [H_AT]: new Date().toISOString(), [H_ID]: crypto.randomUUID() };
  const etag = response.headers.get("etag"), modified = response.headers.get("last-modified");
  if (etag) headers[H_ETAG] = etag;
  if (modified) headers[H_MODIFIED] = modified;
  const total = Number.isFinite(length) ? length : 0, step = Math.max(1, Math.floor(total / 100));
  let reported = 0;
  const writer = new PartWriter(async (i, part) => {
    try {
      await cache.put(partKey(url, i), new Response(part, { headers: { "content-type": "application/octet-stream" } }));
    } catch (e) {
      throw storeFailure(url, e);
    }
  });
  const source = response.body!.getReader();
  try {
    for (;;) {
      let r: Awaited<ReturnType<typeof source.read>>;
      try {
        r = await source.read();
      } catch (e) {
        throw brokenDownload(url, writer.size, total || undefined, e, signal);
      }
      if (r.done) break;
      if (writer.size < 4 && writer.size + r.value.length >= 4) notGGUF(url, writer.size === 0 ? r.value : undefined);
      await writer.push(r.value);
      if (onProgress && (writer.size - reported >= step || writer.size === total)) {
        reported = writer.size;
        onProgress({ phase: "download", loaded: writer.size, total: Math.max(total, writer.size), fromCache: false });
      }
    }
    if (total > 0 && writer.size !== total) throw new Error(`${url}: downloaded ${writer.size} bytes, the server announced ${total}`);
    const { parts, sha256 } = await writer.finish();
    const done = new Headers({ ...headers, [H_SIZE]: String(writer.size), [H_PARTS]: String(parts) });
    try {
      await storeDigests(cache, url, { headers: done }, sha256);
      // last: the entry that makes the parts a cached model
      await cache.put(url, new Response(null, { headers: done }));
    } catch (e) {
      throw storeFailure(url, e);
    }
  } catch (e) {
    await source.cancel().catch(() => undefined);
    await forget(cache, url);
    throw e;
  }
  const entry = await cache.match(url);
  if (!entry) throw new CacheStoreError(`${url}: the download was not kept by the Cache API`);
  return entry;
}

/**
 * Opens a model URL for the loader: from the cache when it is there (no request), else
 * downloaded into the cache and read from there; with `cache: false`, or without a Cache API
 * (or when storing fails, e.g. over quota), by HTTP Range reads as before.
 */
export async function openModelUrl(url: string, options: UrlLoadOptions = {}): Promise<OpenedUrl> {
  // a blob: or data: URL is already in memory (and the Cache API refuses its scheme)
  const mode = /^https?:/i.test(url) ? (options.cache ?? true) : false;
  const opened = mode === false ? undefined : await openCache();
  const cache = typeof opened === "string" ? undefined : opened;
  const signal = options.signal;
  const uncached = async (notCached?: string): Promise<OpenedUrl> => {
    const file = await openUrl(url, { wholeFile: options.wholeFile, signal });
    return { file: counted(file, false, options.onProgress), size: file.size, fromCache: false, cached: false, ...(notCached ? { notCached } : {}), discard: async () => undefined };
  };
  if (!cache) return uncached(typeof opened === "string" ? `the model cache could not keep ${url}: ${opened}` : undefined);
  let entry = await cache.match(url);
  if (entry && mode === "revalidate") {
    const known = describe(url, entry);
    let now: Awaited<ReturnType<typeof rangeProbe>> | undefined;
    try {
      now = await rangeProbe(url, signal);
    } catch (e) {
      // the server cannot tell (offline, down, a 5xx): the cached copy is used, as HTTP's stale-if-error would
      const unanswered = (e as Error).name !== "AbortError" && (!(e instanceof HttpStatusError) || e.status >= 500);
      if (!unanswered) throw e;
    }
    const same = !now || (now.size === known.size && (now.etag ?? "") === (known.etag ?? "") && (now.lastModified ?? "") === (known.lastModified ?? ""));
    if (!same) {
      await forget(cache, url);
      entry = undefined;
    }
  }
  let fromCache = entry !== undefined;
  let refetched: string | undefined;
  if (entry) {
    const blob = await fileOf(cache, url, entry);
    const size = describe(url, entry).size;
    if (!blob) {
      refetched = `${url}: the cached copy was damaged (a part of it is missing): downloaded again`;
    } else if (blob.size !== size) {
      refetched = `${url}: the cached copy was damaged (${blob.size} bytes where ${size} were stored): downloaded again`;
    } else {
      const expected = await digestsOf(cache, url, entry);
      const { sha256, differs } = await digestBlob(url, blob, expected, options.onProgress, signal);
      if (differs === undefined) {
        // a copy cached before digests were kept (or whose digests were lost) is digested now, trusted as it is, and checked from then on
        if (!expected) await storeDigests(cache, url, entry, sha256).catch(() => undefined);
        // a cached copy that fails to load is damaged (it loaded when it was stored): discard takes it out
        return { file: counted(blobFile(blob), true, options.onProgress), size: blob.size, fromCache: true, cached: true, discard: async () => void (await forget(cache, url)) };
      }
      const from = differs * DIGEST_BLOCK, to = Math.min(blob.size, from + DIGEST_BLOCK) - 1;
      refetched = `${url}: the cached copy was damaged (bytes ${from}-${to} differ from what was downloaded): downloaded again`;
    }
    // a damaged entry: download it again
    await forget(cache, url);
    entry = undefined;
    fromCache = false;
  }
  let stored: Response;
  try {
    stored = await download(cache, url, options.onProgress, signal);
  } catch (e) {
    // an HTTP or network error is the URL's error; a storage failure (quota) falls back to Range reads, saying why
    if (!(e instanceof CacheStoreError)) throw e;
    if (signal?.aborted) throw abortError(url);
    return { ...(await uncached(e.message)), ...(refetched ? { refetched } : {}) };
  }
  const blob = await fileOf(cache, url, stored);
  if (!blob || blob.size !== describe(url, stored).size) {
    await forget(cache, url);
    throw new Error(`${url}: the Cache API did not give back what it stored`);
  }
  return {
    file: counted(blobFile(blob), fromCache, options.onProgress), size: blob.size, fromCache, cached: true, ...(refetched ? { refetched } : {}),
    discard: async () => void (await forget(cache, url)),
  };
}
