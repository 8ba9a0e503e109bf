/**
 * Models fetched from a URL, kept in the Cache API of the page's origin so that a reload does
 * not download them again. One entry per URL; its response carries the validators the server
 * sent (ETag, Last-Modified, the size), which `cache: "revalidate"` compares with a one-byte
 * Range probe before it trusts the entry. A cached model is read back as a Blob (disk-backed
 * in Chromium), by position, with FileReaderSync: no copy of the whole file in memory.
 */
import type { RandomAccessFile } from "../platform/host.js";
import { abortError, blobFile, brokenDownload, fetchNamed, HttpStatusError, openUrl, rangeProbe } from "./files.js";
import { web, type WebCache } from "../platform/web.js";

const CACHE_NAME = "tsllm-models-v1";
const H_URL = "x-tsllm-url", H_SIZE = "x-tsllm-size", H_ETAG = "x-tsllm-etag", H_MODIFIED = "x-tsllm-last-modified", H_AT = "x-tsllm-cached-at";

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

/** how far a load is: `download` while a URL's file goes into the cache, `read` while the weights are read from wherever the file is */
export interface LoadProgress {
  phase: "download" | "read";
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
async function openCache(): Promise<WebCache | undefined> {
  if (!web.caches) return undefined;
  try {
    return await web.caches.open(CACHE_NAME);
  } catch {
    return undefined; // storage disabled (some private modes)
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
  if (!cache) return [];
  const out: CachedModel[] = [];
  for (const key of await cache.keys()) {
    if (key.url.endsWith("tsllm-downloading")) continue;
    const r = await cache.match(key.url);
    if (r) out.push(describe(key.url, r));
  }
  return out;
}

/** removes one URL's model (true when it was there), or every cached model (url undefined: how many) */
export async function deleteCachedModels(url?: string): Promise<number> {
  const cache = await openCache();
  if (!cache) return 0;
  if (url !== undefined) return (await cache.delete(url)) ? 1 : 0;
  let n = 0;
  for (const key of await cache.keys()) if (await cache.delete(key.url)) n++;
  return n;
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
 * the response's body into the cache under `url`, reporting the bytes as they arrive; a body
 * that breaks off is the URL's error, a Cache API that cannot store it a CacheStoreError
 */
async function download(cache: WebCache, url: string, onProgress?: (p: LoadProgress) => void, signal?: AbortSignal): Promise<Response> {
  // no-store: the file goes into the model cache, not also into the HTTP cache
  const response = await fetchNamed(url, { cache: "no-store", signal } as RequestInit);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status} ${response.statusText}`.trimEnd());
  const length = Number(response.headers.get("content-length") ?? NaN);
  const headers: Record<string, string> = { "content-type": "application/octet-stream", [H_URL]: url, [H_AT]: new Date().toISOString() };
  const etag = response.headers.get("etag"), modified = response.headers.get("last-modified");
  if (etag) headers[H_ETAG] = etag;
  if (modified) headers[H_MODIFIED] = modified;
  let loaded = 0, reported = 0;
  const total = Number.isFinite(length) ? length : 0, step = Math.max(1, Math.floor(total / 100));
  // the network's failure, told apart from the Cache API's: both reject cache.put
  let networkError: unknown;
  const source = response.body!.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let r: Awaited<ReturnType<typeof source.read>>;
      try {
        r = await source.read();
      } catch (e) {
        networkError = e;
        throw e;
      }
      if (r.done) return controller.close();
      loaded += r.value.byteLength;
      if (onProgress && (loaded - reported >= step || loaded === total)) {
        reported = loaded;
        onProgress({ phase: "download", loaded, total: Math.max(total, loaded), fromCache: false });
      }
      controller.enqueue(r.value);
    },
    cancel: (reason) => source.cancel(reason),
  });
  const store = async (key: string, r: Response): Promise<void> => {
    try {
      await cache.put(key, r);
    } catch (e) {
      if (networkError !== undefined || signal?.aborted) throw brokenDownload(url, loaded, total || undefined, networkError ?? e, signal);
      throw storeFailure(url, e);
    }
  };
  if (total > 0 && !response.headers.get("content-encoding")) {
    await store(url, new Response(body, { headers: { ...headers, [H_SIZE]: String(total) } }));
  } else {
    // the size is known only once the body has arrived: stage the body, then store it with its size
    // (a query, not a fragment: the Cache API ignores fragments when it matches)
    const staged = `${url}${url.includes("?") ? "&" : "?"}tsllm-downloading`;
    await store(staged, new Response(body, { headers }));
    const blob = await (await cache.match(staged))?.blob();
    await cache.delete(staged);
    if (!blob) throw new CacheStoreError(`${url}: the download was not kept by the Cache API`);
    await store(url, new Response(blob, { headers: { ...headers, [H_SIZE]: String(blob.size) } }));
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
  const mode = options.cache ?? true;
  const cache = mode === false ? undefined : await openCache();
  const signal = options.signal;
  const uncached = async (notCached?: string): Promise<OpenedUrl> => {
    const file = await openUrl(url, { wholeFile: options.wholeFile, signal });
    return { file: counted(file, false, options.onProgress), size: file.size, fromCache: false, cached: false, ...(notCached ? { notCached } : {}), discard: async () => undefined };
  };
  if (!cache) return uncached();
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
      await cache.delete(url);
      entry = undefined;
    }
  }
  let fromCache = entry !== undefined;
  if (entry) {
    const blob = await entry.blob();
    if (blob.size !== describe(url, entry).size) {
      // a damaged entry: download it again
      await cache.delete(url);
      entry = undefined;
      fromCache = false;
    } else {
      // a cached copy that fails to load is damaged (it loaded when it was stored): discard takes it out
      return { file: counted(blobFile(blob), true, options.onProgress), size: blob.size, fromCache: true, cached: true, discard: async () => void (await cache.delete(url)) };
    }
  }
  let stored: Response;
  try {
    stored = await download(cache, url, options.onProgress, signal);
  } catch (e) {
    // an HTTP or network error is the URL's error; a storage failure (quota) falls back to Range reads, saying why
    if (!(e instanceof CacheStoreError)) throw e;
    if (signal?.aborted) throw abortError(url);
    return uncached(e.message);
  }
  const blob = await stored.blob();
  if (blob.size !== describe(url, stored).size) {
    await cache.delete(url);
    throw new Error(`${url}: downloaded ${blob.size} bytes, the server announced ${describe(url, stored).size}`);
  }
  return {
    file: counted(blobFile(blob), fromCache, options.onProgress), size: blob.size, fromCache, cached: true,
    discard: async () => void (await cache.delete(url)),
  };
}
