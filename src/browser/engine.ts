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
import { whileBackendStarts } from "../kernels/backend.js";
import { defaultContextSize, Model } from "../llm.js";
import { buildModelFrom } from "../models/index.js";
import type { RandomAccessFile } from "../platform/host.js";
import { tokenizerFromGGUF } from "../tokenizer/gguf.js";
import { createBrowserBackend, type BrowserBackendName, type BrowserBackendOptions } from "./backends.js";
import { blobFile } from "./files.js";
import { openModelUrl, type LoadProgress } from "./model-cache.js";

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
}

/** a loaded model and where its file came from */
export interface BrowserLoad {
  model: Model;
  /** bytes of the GGUF file */
  size: number;
  /** read from the model cache: nothing was downloaded */
  fromCache: boolean;
  /** the file is in the model cache now */
  cached: boolean;
}

/** the name a model source goes by in errors and Model.path */
export function sourceName(source: string | Blob): string {
  if (typeof source === "string") return source;
  const name = (source as { name?: unknown }).name;
  return typeof name === "string" && name !== "" ? name : `a Blob of ${source.size} bytes`;
}

/** Loads a GGUF model from a URL (kept in the model cache, see `cache`) or a Blob (a File the user picked) onto a browser backend. */
export async function loadBrowserModel(source: string | Blob, options: BrowserLoadOptions = {}): Promise<Model> {
  return (await loadBrowserModelFrom(source, options)).model;
}

/** loadBrowserModel, saying where the file came from */
export async function loadBrowserModelFrom(source: string | Blob, options: BrowserLoadOptions = {}): Promise<BrowserLoad> {
  const t0 = performance.now();
  const name = sourceName(source);
  const opened = typeof source === "string"
    ? await openModelUrl(source, { cache: options.cache, wholeFile: options.wholeFile, onProgress: options.onProgress })
    : { file: blobFile(source), size: source.size, fromCache: false, cached: false, discard: async () => undefined };
  try {
    const model = await buildFrom(name, opened.file, options, t0);
    options.onProgress?.({ phase: "read", loaded: opened.size, total: opened.size, fromCache: opened.fromCache });
    return { model, size: opened.size, fromCache: opened.fromCache, cached: opened.cached };
  } catch (e) {
    // a file this load put into the cache that is no model (or not one this build loads) leaves it again
    await opened.discard();
    throw e;
  }
}

async function buildFrom(name: string, file: RandomAccessFile, options: BrowserLoadOptions, t0: number): Promise<Model> {
  let closeFile = true;
  try {
    // the backend starts first (its workers boot, its kernels compile) while the header is parsed
    const [{ header, metadata, tokenizer }, backend] = await whileBackendStarts(createBrowserBackend(options.backend ?? "wasm", options), () => {
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
