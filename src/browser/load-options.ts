/**
 * The browser load's options, checked before anything is fetched, as loadModel's are in Node:
 * an unknown key (a misspelt `threds` was dropped without a word), a flag or `cache` of the wrong
 * kind (`cache: "yes"` cached), a `contextSize` or `threads` that is no positive integer
 * (`contextSize: -5` loaded, and every request then failed). The page's load() runs it at its
 * call, with nothing sent; loadBrowserModel runs it too, for a worker of the page's own.
 * `backend`, `kvCacheBytes` and `maxSequences` are refused where they are used, as in Node.
 */
import { checkFlags, checkOptionKeys, OptionError, shownValue } from "../units/index.js";
import type { BrowserLoadOptions } from "./engine.js";

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
