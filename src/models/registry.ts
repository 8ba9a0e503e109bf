import { GGUFError, GGUFMetadata, GGUFTensorSource, type GGUFHeader, type TensorSource } from "../formats/index.js";
import { checkAttentionOrder, checkKVCacheType, F32_CACHE, type Backend, type KVCacheTypes } from "../kernels/index.js";
import { OptionError } from "../units/index.js";
import { Gpt2Model, readGpt2Config, readGpt2Shape } from "./gpt2.js";
import type { DecoderShape } from "./hyperparameters.js";
import { LlamaModel, readLlamaConfig, readLlamaShape } from "./llama.js";
import type { LanguageModel } from "./model.js";
import { WeightStore, type WeightStoreOptions } from "./weights.js";

type Builder = (arch: string, meta: GGUFMetadata, store: WeightStore, backend: Backend, kvCacheTypes: KVCacheTypes) => LanguageModel;

export interface BuildOptions extends WeightStoreOptions {
  /** how the model's KV caches store K and V (default f32 both) */
  readonly kvCacheTypes?: KVCacheTypes;
}

interface Architecture {
  readonly build: Builder;
  /** the shape from the metadata alone, checked as the build checks it */
  readonly shape: (arch: string, meta: GGUFMetadata) => DecoderShape;
}

const llamaFamily: Architecture = {
  build: (arch, meta, store, backend, types) => new LlamaModel(readLlamaConfig(arch, meta, store), backend, store, types),
  shape: readLlamaShape,
};

/** general.architecture -> model. Mistral, SmolLM and TinyLlama GGUFs use "llama". */
const ARCHITECTURES: Record<string, Architecture> = {
  llama: llamaFamily,
  qwen2: llamaFamily,
  qwen3: llamaFamily,
  gpt2: { build: (_arch, meta, store, backend, types) => new Gpt2Model(readGpt2Config(meta, store), backend, store, types), shape: (_arch, meta) => readGpt2Shape(meta) },
};

/** the table's own entry for a name from a file ("__proto__" is not an architecture) */
function architectureOf(arch: string): Architecture | undefined {
  return Object.hasOwn(ARCHITECTURES, arch) ? ARCHITECTURES[arch] : undefined;
}

export const SUPPORTED_ARCHITECTURES = Object.keys(ARCHITECTURES);

/** Builds the model a GGUF header describes, reading its weights into the backend's memory. */
export function buildModel(header: GGUFHeader, backend: Backend, options: BuildOptions = {}): LanguageModel {
  return buildModelFrom(new GGUFMetadata(header.path, header.metadata), new GGUFTensorSource(header), backend, options);
}

/**
 * Builds the model that llama.cpp-style metadata describes from any tensor source (a GGUF
 * file, or a Hugging Face folder mapped to GGUF names and metadata). Takes ownership of
 * `source` and closes it.
 */
export function buildModelFrom(meta: GGUFMetadata, source: TensorSource, backend: Backend, options: BuildOptions = {}): LanguageModel {
  const fail = (msg: string) => {
    source.close();
    return new GGUFError(meta.path, "general.architecture", msg);
  };
  const arch = meta.string("general.architecture");
  if (arch === undefined) throw fail("missing: cannot tell which model this is");
  const build = architectureOf(arch)?.build;
  if (arch === "bert") throw fail(`"bert" is an encoder, not a text generator: use embed() / pipeline("feature-extraction") (tsllm embed)`);
  if (!build) throw fail(`unsupported architecture "${arch}" (supported: ${SUPPORTED_ARCHITECTURES.join(", ")})`);
  const kvCacheTypes = options.kvCacheTypes ?? F32_CACHE;
  try {
    checkCacheTypes(kvCacheTypes, architectureOf(arch)!.shape(arch, meta).headDim, backend);
  } catch (e) {
    source.close();
    throw e;
  }
  const store = new WeightStore(source, backend, options);
  try {
    const model = build(arch, meta, store, backend, kvCacheTypes);
    store.finish();
    return model;
  } finally {
    store.close();
  }
}

/** throws unless the model's heads divide into the types' blocks and (when given) the backend stores both */
export function checkCacheTypes(types: KVCacheTypes, headDim: number, backend?: Backend): void {
  checkAttentionOrder(types);
  for (const [t, what] of [[types.k, "cacheTypeK"], [types.v, "cacheTypeV"]] as const) {
    checkKVCacheType(t, headDim, what);
    if (backend?.kvCacheTypes && !backend.kvCacheTypes.includes(t)) throw new OptionError(`${what} ${t}: the ${backend.name} backend stores a KV cache as ${backend.kvCacheTypes.join(", ")} only`, what);
  }
}

/**
 * The shape (layers, heads, KV heads, head size, trained context) of the decoder that
 * llama.cpp-style metadata describes, read and checked as buildModelFrom reads it, without any
 * weight: undefined for an architecture that is not a supported decoder.
 */
export function decoderShape(meta: GGUFMetadata): DecoderShape | undefined {
  const arch = meta.string("general.architecture");
  return arch === undefined ? undefined : architectureOf(arch)?.shape(arch, meta);
}
