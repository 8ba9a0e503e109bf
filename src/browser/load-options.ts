/**
 * The browser load's options, checked before anything is fetched, as loadModel's are in Node:
 * an unknown key (a misspelt `threds` was dropped without a word), a flag or `cache` of the wrong
 * kind (`cache: "yes"` cached), a `contextSize` or `threads` that is no positive integer
 * (`contextSize: -5` loaded, and every request then failed). The page's load() runs it at its
 * call, with nothing sent; loadBrowserModel runs it too, for a worker of the page's own.
 * `backend`, `kvCacheBytes` and `maxSequences` are refused where they are used, as in Node.
 */
import { checkFlags, checkOptionKeys, OptionError, shownValue } from "../units/index.js";
import type { BrowserBackendName, BrowserBackendOptions } from "./backends.js";
import type { LoadProgress } from "./model-cache.js";

export interface BrowserLoadOptions extends BrowserBackendOptions {
  /** compute backend (default "wasm") */
  backend?: BrowserBackendName;
  /** tokens the KV cache holds (default: the trained context, at most 4096) */
  contextSize?: number;
  /** bytes of KV cache for all generations (default: as the library's, from navigator.deviceMemory) */
  kvCacheBytes?: number;
  /** generations decoded together at most (default 4) */
  maxSequences?: number;
  /** without the cache: fetch a URL's whole file instead of reading it with Range requests */
  wholeFile?: boolean;
  /**
   * a URL's file is kept in the Cache API and read from there on the next load, with no request
   * (default true); "revalidate": ask the server first (one Range request for byte 0) and download
   * again when the ETag, Last-Modified or size changed; false: no cache, HTTP Range reads
   */
  cache?: boolean | "revalidate";
  /**
   * a throwaway two-token prompt and decode step at load, so that the kernels and the JavaScript
   * around them are compiled before the first prompt (default true; false: that prompt pays it)
   */
  warmup?: boolean;
  /** called as the file downloads (into the cache) and as the weights are read: bytes so far and in all */
  onProgress?: (progress: LoadProgress) => void;
  /** cancels the load (a download stops at once; reading the weights is synchronous, so it stops after them): an AbortError */
  signal?: AbortSignal;
}

/** every BrowserLoadOptions key (a record of them, so that a new option fails the type check until it is listed) */
const LOAD_OPTION_NAMES: readonly string[] = Object.keys({
  backend: true, threads: true, simd: true, memoryLimitBytes: true, assetsUrl: true, contextSize: true, kvCacheBytes: true, maxSequences: true,
  wholeFile: true, cache: true, warmup: true, onProgress: true, signal: true,
} satisfies Record<keyof BrowserLoadOptions, true>);

const SIMD = ["auto", "plain", "relaxed"];

export function checkBrowserLoadOptions(options: unknown): asserts options is BrowserLoadOptions {
  if (typeof options !== "object" || options === null || Array.isArray(options)) throw new OptionError(`load: options must be an object, got ${shownValue(options)}`, "options");
  checkOptionKeys(options, LOAD_OPTION_NAMES, "load");
  const o = options as Record<string, unknown>;
  checkFlags(o, ["wholeFile", "warmup"], "load");
  if (o["cache"] !== undefined && typeof o["cache"] !== "boolean" && o["cache"] !== "revalidate") throw new OptionError(`load: cache: expected true, false or "revalidate", got ${shownValue(o["cache"])}`, "cache");
  for (const name of ["contextSize", "threads"]) {
    const v = o[name];
    if (v !== undefined && !(Number.isSafeInteger(v) && (v as number) >= 1)) throw new OptionError(`load: ${name}: expected a positive integer, got ${shownValue(v)}`, name);
  }
  if (o["simd"] !== undefined && !SIMD.includes(o["simd"] as string)) throw new OptionError(`load: simd: expected "auto", "plain" or "relaxed", got ${shownValue(o["simd"])}`, "simd");
  if (o["onProgress"] !== undefined && typeof o["onProgress"] !== "function") throw new OptionError(`load: onProgress: expected a function (progress) => void, got ${shownValue(o["onProgress"])}`, "onProgress");
}
