import { statSync } from "node:fs";
import { HFTensorSource, hfModelMetadata } from "../convert/index.js";
import { FileFieldError, GGUFMetadata, GGUFSplitTensorSource, readGenerationConfig, readGGUFHeader, readGGUFSplit, readHFConfig, SafetensorsModel, splitCount, type GenerationDefaults, type SourceTensorInfo } from "../formats/index.js";
import type { Backend } from "../kernels/index.js";
import { openTokenizer, tokenizerFromGGUF, type Tokenizer } from "../tokenizer/index.js";
import type { LanguageModel } from "./model.js";
import { buildModel, buildModelFrom } from "./registry.js";
import type { BuildOptions } from "./registry.js";

/** A model on disk, opened: what it is, its tokenizer, and how to build it on a backend. */
export interface OpenedModel {
  readonly path: string;
  /** a GGUF file, or a Hugging Face folder (config.json + safetensors) */
  readonly format: "gguf" | "hf";
  /** GGUF metadata; for a folder, config.json as llama.cpp's keys */
  readonly metadata: GGUFMetadata;
  readonly tokenizer: Tokenizer;
  /** default generation options the model ships (generation_config.json); empty for GGUF */
  readonly generationDefaults: GenerationDefaults;
  /** the weights as the model builder sees them (llama.cpp's names, stored type and size; a folder's mapped from its safetensors), none read yet */
  readonly tensors: ReadonlyMap<string, SourceTensorInfo>;
  /** reads the weights into the backend's memory (optionally quantizing them) and returns the runnable model */
  build(backend: Backend, options?: BuildOptions): LanguageModel;
}

export interface OpenModelOptions {
  /** use this tokenizer instead of the model's own (e.g. a folder without tokenizer files) */
  readonly tokenizer?: Tokenizer;
}

/** Opens a local model: a .gguf file, or a Hugging Face model folder. */
export function openModel(path: string, options: OpenModelOptions = {}): OpenedModel {
  const st = statSync(path);
  if (st.isDirectory()) return openHFFolder(path, options);
  if (!st.isFile()) throw new Error(`${path} is neither a file nor a folder (expected a .gguf model file or a Hugging Face model folder)`);
  const header = readGGUFHeader(path);
  const metadata = new GGUFMetadata(path, header.metadata);
  // a split set (llama.cpp's gguf-split): metadata from this first part, tensors from all parts
  const split = splitCount(header) > 1 ? readGGUFSplit(header) : undefined;
  return {
    path,
    format: "gguf",
    metadata,
    tokenizer: options.tokenizer ?? tokenizerFromGGUF(metadata),
    generationDefaults: {},
    tensors: split ? split.tensors : new Map(header.tensors.map((t) => [t.name, t])),
    build: (backend, opts) => (split ? buildModelFrom(metadata, new GGUFSplitTensorSource(split), backend, opts) : buildModel(header, backend, opts)),
  };
}

/**
 * A Hugging Face folder: config.json, model.safetensors (or shards + index),
 * generation_config.json, tokenizer files. The checkpoint's tensors are checked against the
 * architecture here, before any weight is read.
 */
function openHFFolder(folder: string, options: OpenModelOptions): OpenedModel {
  const cfg = readHFConfig(folder);
  const gen = readGenerationConfig(folder);
  const weights = SafetensorsModel.open(folder);
  // validates names and shapes now; the source is rebuilt for each build (it owns open files)
  const probe = new HFTensorSource(weights, cfg);
  probe.close();
  const metadata = new GGUFMetadata(folder, new Map(hfModelMetadata(cfg)));
  const tokenizer = withEndOfGeneration(options.tokenizer ?? openFolderTokenizer(folder), [...cfg.eosTokenIds, ...gen.eosTokenIds]);
  return {
    path: folder,
    format: "hf",
    metadata,
    tokenizer,
    generationDefaults: gen.defaults,
    tensors: probe.tensors,
    build: (backend, opts) => buildModelFrom(metadata, new HFTensorSource(weights, cfg), backend, opts),
  };
}

/** the folder's tokenizer, with the reason when there is none we can read */
function openFolderTokenizer(folder: string): Tokenizer {
  try {
    return openTokenizer(folder);
  } catch (e) {
    // a file refused keeps its class (path, field, code): its line names the file in the folder
    if (e instanceof FileFieldError) throw e;
    throw new Error(`${folder}: cannot load the model's tokenizer: ${(e as Error).message}`);
  }
}

/**
 * The tokenizer with the EOS ids of config.json / generation_config.json added to its
 * end-of-generation set (instruct models list their end-of-turn tokens there).
 */
export function withEndOfGeneration(tok: Tokenizer, ids: readonly number[]): Tokenizer {
  const extra = ids.filter((id) => id < tok.vocabSize && !tok.endOfGenerationIds.has(id));
  if (extra.length === 0) return tok;
  const eog: ReadonlySet<number> = new Set([...tok.endOfGenerationIds, ...extra]);
  return new Proxy(tok, {
    get(target, prop) {
      if (prop === "endOfGenerationIds") return eog;
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
