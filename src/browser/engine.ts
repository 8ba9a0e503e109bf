/**
 * Loading a model in a browser: a GGUF from a URL (HTTP Range reads) or a Blob/File, on a
 * browser backend, as the same `Model` the Node library returns (tokenizer, generate, stream,
 * chat, timings). Runs where synchronous reads and Atomics.wait are allowed: a dedicated Worker
 * (engine-worker.ts); a page talks to it through client.ts.
 */
import { Engine } from "../engine/index.js";
import { GGUFMetadata, parseGGUFHeader } from "../formats/gguf-reader.js";
import { GGUFTensorSource } from "../formats/tensor-source.js";
import { warmUpForward } from "../generation/index.js";
import { whileBackendStarts, type Backend } from "../kernels/backend.js";
import { defaultContextSize, Model } from "../llm.js";
import { buildModelFrom } from "../models/index.js";
import type { RandomAccessFile } from "../platform/host.js";
import { tokenizerFromGGUF } from "../tokenizer/gguf.js";
import { onAbort } from "../units/index.js";
import { createBrowserBackend } from "./backends.js";
import { abortError, blobFile } from "./files.js";
import { checkBrowserLoadOptions, type BrowserLoadOptions } from "./load-options.js";
import { openModelUrl } from "./model-cache.js";

export type { BrowserLoadOptions } from "./load-options.js";

/** a loaded model and where its file came from */
export interface BrowserLoad {
  model: Model;
  /** bytes of the GGUF file */
  size: number;
  /** read from the model cache: nothing was downloaded */
  fromCache: boolean;
  /** the file is in the model cache now */
  cached: boolean;
  /** why a URL's file is not in the model cache though caching was asked for (e.g. the storage quota is used up) */
  notCached?: string;
  /** the cached copy was damaged (it differed from the download, or no longer loaded): what was wrong, and that it was downloaded again */
  refetched?: string;
}

/** errors that say nothing about the file (the backend could not start, out of memory, an abort): a cached copy stays */
const notTheFile = new WeakSet<object>();
function notTheFileFault<E>(e: E): E {
  if (typeof e === "object" && e !== null) notTheFile.add(e);
  return e;
}
const fileAtFault = (e: unknown): boolean => !(typeof e === "object" && e !== null && (notTheFile.has(e) || (e as Error).name === "AbortError"));

/** a cached copy that failed to load (it loaded when it was stored, so it is damaged): taken out and downloaded again */
class DamagedCacheEntry extends Error {}

/** what an allocation failure of the browser looks like (wasm memory growth, an ArrayBuffer) */
const OUT_OF_MEMORY = /Memory\.grow|could not allocate memory|allocation failed|out of memory/i;

/** what a model may be loaded from: a URL, a Blob (a File the user picked), or the GGUF's bytes in memory */
export type BrowserModelSource = string | Blob | ArrayBuffer | ArrayBufferView;

/** URL schemes a worker can fetch a model from (the model cache keeps http(s) ones) */
const FETCHABLE = new Set(["http:", "https:", "blob:", "data:"]);

/**
 * The source as a URL or a Blob, or one error saying what a source may be: bytes in memory (an
 * ArrayBuffer read the page's own way) were read as a Blob's fields ("Offset is outside the
 * bounds of the DataView"), and an ftp: URL failed with a cross-origin hint.
 */
export function modelSource(source: unknown): string | Blob {
  if (typeof source === "string") {
    let url: URL | undefined;
    try {
      url = new URL(source);
    } catch {
      // a relative URL: the worker resolves it against its own script
    }
    if (url && !FETCHABLE.has(url.protocol)) throw new Error(`${source}: a model URL must be http:, https:, blob: or data:, not ${url.protocol}`);
    return source;
  }
  if (source instanceof Blob) return source;
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) return new Blob([source as ArrayBuffer]);
  const what = source === null ? "null" : typeof source === "object" ? (source.constructor?.name ?? "an object") : typeof source;
  throw new Error(`load: the model source must be a URL, a Blob or File, or an ArrayBuffer or typed array of the GGUF's bytes, not ${what}`);
}

/** the name a model source goes by in errors and Model.path */
export function sourceName(source: string | Blob): string {
  if (typeof source === "string") return source;
  const name = (source as { name?: unknown }).name;
  return typeof name === "string" && name !== "" ? name : `a Blob of ${source.size} bytes`;
}

/** Loads a GGUF model from a URL (kept in the model cache, see `cache`) or a Blob (a File the user picked) onto a browser backend. */
export async function loadBrowserModel(source: BrowserModelSource, options: BrowserLoadOptions = {}): Promise<Model> {
  return (await loadBrowserModelFrom(source, options)).model;
}

/** loadBrowserModel, saying where the file came from */
export async function loadBrowserModelFrom(from: BrowserModelSource, options: BrowserLoadOptions = {}): Promise<BrowserLoad> {
  const t0 = performance.now();
  checkBrowserLoadOptions(options);
  const source = modelSource(from);
  try {
    return await loadOnce(source, options, t0);
  } catch (e) {
    if (!(e instanceof DamagedCacheEntry)) throw e;
    // the damaged copy is out of the cache now: this load downloads the file again
    const again = await loadOnce(source, options, t0);
    return { ...again, refetched: again.refetched ?? `${sourceName(source)}: the cached copy no longer loads (${e.message}): downloaded again` };
  }
}

async function loadOnce(source: string | Blob, options: BrowserLoadOptions, t0: number): Promise<BrowserLoad> {
  const name = sourceName(source);
  const signal = options.signal;
  if (signal?.aborted) throw abortError(name);
  const opened = typeof source === "string"
    ? await openModelUrl(source, { cache: options.cache, wholeFile: options.wholeFile, onProgress: options.onProgress, signal })
    : { file: blobFile(source), size: source.size, fromCache: false, cached: false, discard: async () => undefined };
  let model: Model;
  try {
    model = await buildFrom(name, opened.file, options, t0);
  } catch (thrown) {
    const e = outOfMemory(name, opened.size, thrown);
    if (!fileAtFault(e)) throw e;
    // a file this load put into the cache that is no model (or not one this build loads) leaves it again; so does a damaged cached copy
    await opened.discard();
    if (opened.fromCache) throw new DamagedCacheEntry((e as Error).message);
    throw e;
  }
  if (signal?.aborted) {
    model.dispose();
    throw abortError(name);
  }
  options.onProgress?.({ phase: "read", loaded: opened.size, total: opened.size, fromCache: opened.fromCache });
  return {
    model, size: opened.size, fromCache: opened.fromCache, cached: opened.cached,
    ...("notCached" in opened && opened.notCached ? { notCached: opened.notCached } : {}), ...("refetched" in opened && opened.refetched ? { refetched: opened.refetched } : {}),
  };
}

async function buildFrom(name: string, file: RandomAccessFile, options: BrowserLoadOptions, t0: number): Promise<Model> {
  let closeFile = true;
  try {
    // the backend starts first (its workers boot, its kernels compile) while the header is parsed;
    // the load's signal ends the wait for it (a kernel worker that never answers its start held the load, Stop included, forever)
    const starting = untilAborted(createBrowserBackend(options.backend ?? "wasm", options).catch((e: unknown) => { throw notTheFileFault(e); }), options.signal, name);
    const [{ header, metadata, tokenizer }, backend] = await whileBackendStarts(starting, () => {
      const header = parseGGUFHeader(file, name);
      const metadata = new GGUFMetadata(name, header.metadata);
      const parts = metadata.number("split.count");
      if (parts !== undefined && parts > 1) throw new Error(`${name}: part of a ${parts}-file split GGUF; the browser build loads single-file GGUFs (merge it with llama-gguf-split --merge)`);
      return { header, metadata, tokenizer: tokenizerFromGGUF(metadata) };
    });
    try {
      // the tensor source owns the file from here (it closes it when the weights are read)
      closeFile = false;
      const model = buildModelFrom(metadata, new GGUFTensorSource(header, file), backend);
      if (tokenizer.vocabSize > model.info.vocabSize) {
        throw new Error(`${name}: the tokenizer has ${tokenizer.vocabSize} tokens but the model's embedding has only ${model.info.vocabSize} rows`);
      }
      const contextSize = options.contextSize ?? defaultContextSize(model.info.contextLength);
      const engine = new Engine(model, tokenizer, {
        contextSize, kvCacheBytes: options.kvCacheBytes, maxSequences: options.maxSequences ?? 4,
        storage: backend,
        source: name,
      });
      if (options.warmup !== false) await warmUpForward(model);
      return new Model(name, model.info, tokenizer, metadata, backend, model, engine, performance.now() - t0);
    } catch (e) {
      backend.dispose();
      throw e;
    }
  } finally {
    if (closeFile) file.close();
  }
}

/** `starting`, or an AbortError as soon as `signal` aborts; a backend that starts after that is disposed */
function untilAborted(starting: Promise<Backend>, signal: AbortSignal | undefined, name: string): Promise<Backend> {
  if (!signal) return starting;
  let release = (): void => undefined;
  const aborted = new Promise<never>((_, reject) => {
    const fail = (): void => reject(notTheFileFault(abortError(name)));
    if (signal.aborted) fail();
    else release = onAbort(signal, fail);
  });
  return Promise.race([starting, aborted]).then(
    (backend) => {
      release();
      return backend;
    },
    (e: unknown) => {
      release();
      if (signal.aborted) starting.then((late) => late.dispose(), () => undefined);
      throw e;
    },
  );
}

/** a browser's allocation failure as the model's error, saying what ran out (its own words: "Unable to grow instance memory") */
function outOfMemory(name: string, fileBytes: number, e: unknown): unknown {
  const message = (e as Error)?.message ?? "";
  if (!OUT_OF_MEMORY.test(message)) return e;
  return notTheFileFault(new Error(`${name}: out of memory: the browser gave the backend no more memory for this ${(fileBytes / 2 ** 20).toFixed(0)} MiB model (${message}); try a smaller or more quantized model, or a smaller contextSize`));
}
