import { GGUFError, GGUFMetadata, GGUFTensorSource, type GGUFHeader, type TensorSource } from "../formats/index.js";
import type { Backend } from "../kernels/index.js";
import { Gpt2Model, readGpt2Config, readGpt2Shape } from "./gpt2.js";
import type { DecoderShape } from "./hyperparameters.js";
import { LlamaModel, readLlamaConfig, readLlamaShape } from "./llama.js";
import type { LanguageModel } from "./model.js";
import { WeightStore, type WeightStoreOptions } from "./weights.js";

type Builder = (arch: string, meta: GGUFMetadata, store: WeightStore, backend: Backend) => LanguageModel;

interface Architecture {
  readonly build: Builder;
  /** the shape from the metadata alone, checked as the build checks it */
  readonly shape: (arch: string, meta: GGUFMetadata) => DecoderShape;
}

const llamaFamily: Architecture = {
  build: (arch, meta, store, backend) => new LlamaModel(readLlamaConfig(arch, meta, store), backend, store),
  shape: readLlamaShape,
};

/** general.architecture -> model. Mistral, SmolLM and TinyLlama GGUFs use "llama". */
const ARCHITECTURES: Record<string, Architecture> = {
  llama: llamaFamily,
  qwen2: llamaFamily,
  qwen3: llamaFamily,
  gpt2: { build: (_arch, meta, store, backend) => new Gpt2Model(readGpt2Config(meta, store), backend, store), shape: (_arch, meta) => readGpt2Shape(meta) },
};

/** the table's own entry for a name from a file ("__proto__" is not an architecture) */
function architectureOf(arch: string): Architecture | undefined {
  return Object.hasOwn(ARCHITECTURES, arch) ? ARCHITECTURES[arch] : undefined;
}

export const SUPPORTED_ARCHITECTURES = Object.keys(ARCHITECTURES);

/** Builds the model a GGUF header describes, reading its weights into the backend's memory. */
export function buildModel(header: GGUFHeader, backend: Backend, options: WeightStoreOptions = {}): LanguageModel {
  return buildModelFrom(new GGUFMetadata(header.path, header.metadata), new GGUFTensorSource(header), backend, options);
}

/**
 * Builds the model that llama.cpp-style metadata describes from any tensor source (a GGUF
 * file, or a Hugging Face folder mapped to GGUF names and metadata). Takes ownership of
 * `source` and closes it.
 */
export function buildModelFrom(meta: GGUFMetadata, source: TensorSource, backend: Backend, options: WeightStoreOptions = {}): LanguageModel {
  const fail = (msg: string) => {
    source.close();
    return new GGUFError(meta.path, "general.architecture", msg);
  };
  const arch = meta.string("general.architecture");
  if (arch === undefined) throw fail("missing: cannot tell which model this is");
  const build = architectureOf(arch)?.build;
  if (arch === "bert") throw fail(`"bert" is an encoder, not a text generator: use embed() / pipeline("feature-extraction") (tsllm embed)`);
  if (!build) throw fail(`unsupported architecture "${arch}" (supported: ${SUPPORTED_ARCHITECTURES.join(", ")})`);
  const store = new WeightStore(source, backend, options);
  try {
    const model = build(arch, meta, store, backend);
    store.finish();
    return model;
  } finally {
    store.close();
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
