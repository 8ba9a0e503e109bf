/**
 * Model files in a browser, as the synchronous positioned-read files the GGUF reader and
 * tensor source take (src/platform/host.ts RandomAccessFile). Both run in a dedicated Worker,
 * where synchronous reads are allowed: a Blob (a user-picked File) through FileReaderSync, a
 * URL through synchronous XMLHttpRequest Range requests, or, when the server ignores Range,
 * the whole body fetched once into memory.
 */
import type { RandomAccessFile } from "../platform/host.js";
import { need } from "./web.js";

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

export interface UrlFileOptions {
  /** fetch the whole file into memory even where the server answers Range requests */
  wholeFile?: boolean;
}

/**
 * Opens a URL for positioned reads. A first request for byte 0 tells whether the server
 * answers Range requests (206 with Content-Range: the size) or not (200: the whole body is
 * read then and kept); errors name the URL.
 */
export async function openUrl(url: string, options: UrlFileOptions = {}): Promise<RandomAccessFile> {
  let response: Response;
  try {
    response = await fetch(url, options.wholeFile ? {} : { headers: { Range: "bytes=0-0" } });
  } catch (e) {
    throw new Error(`${url}: cannot fetch: ${(e as Error).message}`);
  }
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status} ${response.statusText}`.trimEnd());
  const size = response.status === 206 ? totalOf(response.headers.get("content-range")) : undefined;
  if (size === undefined) {
    // no Range support (or asked for the whole file): this response is the whole file
    return memoryFile(new Uint8Array(await response.arrayBuffer()));
  }
  await response.body?.cancel();
  const XMLHttpRequest = need("XMLHttpRequest", `reading ${url}`);
  return {
    size,
    read(into, offset, length, position) {
      const end = Math.min(position + length, size);
      if (end <= position) return 0;
      const xhr = new XMLHttpRequest();
      xhr.open("GET", url, false);
      xhr.responseType = "arraybuffer";
      xhr.setRequestHeader("Range", `bytes=${position}-${end - 1}`);
      xhr.send();
      if (xhr.status !== 206 || !xhr.response) throw new Error(`${url}: bytes ${position}-${end - 1}: HTTP ${xhr.status} ${xhr.statusText} (expected 206 Partial Content)`);
      const bytes = new Uint8Array(xhr.response);
      if (bytes.length !== end - position) throw new Error(`${url}: bytes ${position}-${end - 1}: got ${bytes.length} bytes`);
      into.set(bytes, offset);
      return bytes.length;
    },
    close: () => undefined,
  };
}
