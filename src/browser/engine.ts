/**
 * Loading a model in a browser: a GGUF from a URL (HTTP Range reads) or a Blob/File, on a
 * browser backend, as the same `Model` the Node library returns (tokenizer, generate, stream,
 * chat, timings). Runs where synchronous reads and Atomics.wait are allowed: a dedicated Worker
 * (engine-worker.ts); a page talks to it through client.ts.
 */
import { Engine } from "../engine/index.js";
import { GGUFMetadata, parseGGUFHeader } from "../formats/gguf-reader.js";
import { GGUFTensorSource } from "../formats/tensor-source.js";
import { defaultContextSize, Model } from "../llm.js";
import { buildModelFrom } from "../models/index.js";
import type { RandomAccessFile } from "../platform/host.js";
import { tokenizerFromGGUF } from "../tokenizer/gguf.js";
import { createBrowserBackend, type BrowserBackendName, type BrowserBackendOptions } from "./backends.js";
import { blobFile, openUrl } from "./files.js";

export interface BrowserLoadOptions extends BrowserBackendOptions {
  /** compute backend (default "wasm") */
  backend?: BrowserBackendName;
  /** tokens the KV cache holds (default: the trained context, at most 4096) */
  contextSize?: number;
  /** bytes of KV cache for all generations (default: as the library's, from navigator.deviceMemory) */
  kvCacheBytes?: number;
  /** generations decoded together at most (default 4) */
  maxSequences?: number;
  /** fetch a URL's whole file instead of reading it with Range requests */
  wholeFile?: boolean;
}

/** the name a model source goes by in errors and Model.path */
export function sourceName(source: string | Blob): string {
  if (typeof source === "string") return source;
  const name = (source as { name?: unknown }).name;
  return typeof name === "string" && name !== "" ? name : `a Blob of ${source.size} bytes`;
}

/** Loads a GGUF model from a URL or a Blob (a File the user picked) onto a browser backend. */
export async function loadBrowserModel(source: string | Blob, options: BrowserLoadOptions = {}): Promise<Model> {
  const t0 = performance.now();
  const name = sourceName(source);
  const file: RandomAccessFile = typeof source === "string" ? await openUrl(source, { wholeFile: options.wholeFile }) : blobFile(source);
  let closeFile = true;
  try {
    const header = parseGGUFHeader(file, name);
    const metadata = new GGUFMetadata(name, header.metadata);
    const parts = metadata.number("split.count");
    if (parts !== undefined && parts > 1) throw new Error(`${name}: part of a ${parts}-file split GGUF; the browser build loads single-file GGUFs (merge it with llama-gguf-split --merge)`);
    const tokenizer = tokenizerFromGGUF(metadata);
    const backend = await createBrowserBackend(options.backend ?? "wasm", options);
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
      return new Model(name, model.info, tokenizer, metadata, backend, model, engine, performance.now() - t0);
    } catch (e) {
      backend.dispose();
      throw e;
    }
  } finally {
    if (closeFile) file.close();
  }
}
