/**
 * Model files in a browser, as the synchronous positioned-read files the GGUF reader and
 * tensor source take (src/platform/host.ts RandomAccessFile). Both run in a dedicated Worker,
 * where synchronous reads are allowed: a Blob (a user-picked File) through FileReaderSync, a
 * URL through synchronous XMLHttpRequest Range requests, or, when the server ignores Range,
 * the whole body fetched once into memory.
 */
import type { RandomAccessFile } from "../platform/host.js";
import { baseHref, need } from "../platform/web.js";

/** a Blob (or File) read by position */
export function blobFile(blob: Blob): RandomAccessFile {
  const FileReaderSync = need("FileReaderSync", "reading a File");
  const reader = new FileReaderSync();
  return {
    size: blob.size,
    read(into, offset, length, position) {
      const end = Math.min(position + length, blob.size);
      if (end <= position) return 0;
      const bytes = new Uint8Array(reader.readAsArrayBuffer(blob.slice(position, end)));
      into.set(bytes, offset);
      return bytes.length;
    },
    close: () => undefined,
  };
}

/** bytes in memory read by position */
export function memoryFile(bytes: Uint8Array): RandomAccessFile {
  return {
    size: bytes.length,
    read(into, offset, length, position) {
      const part = bytes.subarray(position, Math.min(position + length, bytes.length));
      into.set(part, offset);
      return part.length;
    },
    close: () => undefined,
  };
}

/** the total size in a Content-Range header ("bytes 0-0/1185376"), or undefined */
function totalOf(contentRange: string | null): number | undefined {
  const m = /^bytes\s+\d+-\d+\/(\d+)$/i.exec(contentRange?.trim() ?? "");
  return m ? Number(m[1]) : undefined;
}

/** an AbortError (its name is what callers check) saying what was aborted */
export function abortError(what: string): Error {
  const e = new Error(`${what}: aborted`);
  e.name = "AbortError";
  return e;
}

/**
 * fetch(url), its failure one error naming the URL and the likely cause: a browser says only
 * "Failed to fetch" both when the server is down and when another origin's answer lacks CORS
 * (or, on a cross-origin isolated page, CORP) headers
 */
export async function fetchNamed(url: string, init: RequestInit = {}): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (e) {
    if (init.signal?.aborted) throw abortError(url);
    const origin = new URL(url, baseHref()).origin;
    const hint = origin !== new URL(baseHref()).origin
      ? `; ${origin} is another origin: it must answer with Access-Control-Allow-Origin (and, for a cross-origin isolated page, Cross-Origin-Resource-Policy: cross-origin)`
      : "; is the server running?";
    throw new Error(`${url}: cannot fetch: ${(e as Error).message}${hint}`);
  }
}

/** a download's body failed: the URL's error, saying how far it got */
export function brokenDownload(url: string, loaded: number | undefined, total: number | undefined, cause: unknown, signal?: AbortSignal): Error {
  if (signal?.aborted) return abortError(url);
  const where = loaded !== undefined ? ` after ${loaded}${total ? ` of ${total}` : ""} bytes` : total ? ` before its ${total} bytes arrived` : "";
  return new Error(`${url}: the download broke off${where} (${(cause as Error)?.message ?? String(cause)})`);
}

/** a URL answered with an HTTP error status */
export class HttpStatusError extends Error {
  constructor(url: string, readonly status: number, statusText: string) {
    super(`${url}: HTTP ${status} ${statusText}`.trimEnd());
  }
}

/** what a one-byte Range request tells about a URL's file: its size (undefined: the server ignores Range) and validators */
export async function rangeProbe(url: string, signal?: AbortSignal): Promise<{ size?: number; etag?: string; lastModified?: string }> {
  const response = await fetchNamed(url, { headers: { Range: "bytes=0-0" }, cache: "no-store", signal } as RequestInit);
  if (!response.ok) throw new HttpStatusError(url, response.status, response.statusText);
  await response.body?.cancel();
  const size = response.status === 206 ? totalOf(response.headers.get("content-range")) : Number(response.headers.get("content-length") ?? NaN);
  const etag = response.headers.get("etag") ?? undefined, lastModified = response.headers.get("last-modified") ?? undefined;
  return { ...(Number.isFinite(size) ? { size } : {}), ...(etag ? { etag } : {}), ...(lastModified ? { lastModified } : {}) };
}

/** bytes one Range request reads at least (see openUrl) */
const READ_AHEAD = 32 << 20;

export interface UrlFileOptions {
  /** fetch the whole file into memory even where the server answers Range requests */
  wholeFile?: boolean;
  /** ends the opening (and a whole-file download) early */
  signal?: AbortSignal;
}

/**
 * Opens a URL for positioned reads. A first request for byte 0 tells whether the server
 * answers Range requests (206 with Content-Range: the size) or not (200: the whole body is
 * read then and kept). Reads are synchronous Range requests of at least READ_AHEAD bytes (one
 * block kept), so that a run of small tensors costs one request; errors name the URL.
 */
export async function openUrl(url: string, options: UrlFileOptions = {}): Promise<RandomAccessFile> {
  const signal = options.signal;
  const response = await fetchNamed(url, options.wholeFile ? { signal } : { headers: { Range: "bytes=0-0" }, signal });
  // an empty file has no byte 0: its server answers 416 with "Content-Range: bytes */0" (RFC 9110 14.4, 15.5.17); read as
  // the empty file it is, so that the GGUF reader names it as for a cached copy or a Blob (it was "HTTP 416 Range Not Satisfiable")
  if (response.status === 416 && !options.wholeFile && /^(bytes\s*\*\/0)?$/i.test(response.headers.get("content-range")?.trim() ?? "")) {
    await response.body?.cancel();
    return memoryFile(new Uint8Array(0));
  }
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status} ${response.statusText}`.trimEnd());
  const size = response.status === 206 ? totalOf(response.headers.get("content-range")) : undefined;
  if (size === undefined) {
    // no Range support (or asked for the whole file): this response is the whole file
    const announced = Number(response.headers.get("content-length") ?? NaN);
    let bytes: Uint8Array;
    try {
      bytes = new Uint8Array(await response.arrayBuffer());
    } catch (e) {
      throw brokenDownload(url, undefined, Number.isFinite(announced) ? announced : undefined, e, signal);
    }
    return memoryFile(bytes);
  }
  await response.body?.cancel();
  // the file read is the one probed: a file replaced on the server mid-load would mix two files' bytes
  const validator = (get: (name: string) => string | null): string | undefined => {
    const etag = get("etag"), modified = get("last-modified");
    return etag ? `ETag ${etag}` : modified ? `Last-Modified ${modified}` : undefined;
  };
  const probed = validator((name) => response.headers.get(name));
  const XMLHttpRequest = need("XMLHttpRequest", `reading ${url}`);
  /** bytes [start, end) of the file, by one synchronous Range request */
  const fetchRange = (start: number, end: number): Uint8Array => {
    const xhr = new XMLHttpRequest();
    xhr.open("GET", url, false);
    xhr.responseType = "arraybuffer";
    xhr.setRequestHeader("Range", `bytes=${start}-${end - 1}`);
    xhr.send();
    if (xhr.status !== 206 || !xhr.response) throw new Error(`${url}: bytes ${start}-${end - 1}: HTTP ${xhr.status} ${xhr.statusText} (expected 206 Partial Content)`);
    const now = validator((name) => xhr.getResponseHeader(name));
    if (probed !== undefined && now !== probed) throw new Error(`${url}: the file changed on the server while it was read (${probed} became ${now ?? "none"}); load it again`);
    const bytes = new Uint8Array(xhr.response);
    if (bytes.length !== end - start) throw new Error(`${url}: bytes ${start}-${end - 1}: got ${bytes.length} bytes`);
    return bytes;
  };
  // reads shorter than READ_AHEAD come from one block of that size, fetched once: a GGUF's
  // small tensors (norms, biases) then cost no request each
  let block: Uint8Array = new Uint8Array(0);
  let blockStart = 0;
  return {
    size,
    read(into, offset, length, position) {
      const end = Math.min(position + length, size);
      if (end <= position) return 0;
      if (position < blockStart || end > blockStart + block.length) {
        if (end - position >= READ_AHEAD) {
          into.set(fetchRange(position, end), offset);
          return end - position;
        }
        blockStart = position;
        block = fetchRange(position, Math.min(size, position + READ_AHEAD));
      }
      into.set(block.subarray(position - blockStart, end - blockStart), offset);
      return end - position;
    },
    close: () => {
      block = new Uint8Array(0);
    },
  };
}
