import { GGUFError, GGUFMetadata, GGUFTensorSource, type GGUFHeader, type TensorSource } from "../formats/index.js";
import type { Backend } from "../kernels/index.js";
import { Gpt2Model, readGpt2Config } from "./gpt2.js";
import { LlamaModel, readLlamaConfig } from "./llama.js";
import type { LanguageModel } from "./model.js";
import { WeightStore, type WeightStoreOptions } from "./weights.js";

type Builder = (arch: string, meta: GGUFMetadata, store: WeightStore, backend: Backend) => LanguageModel;

const llamaFamily: Builder = (arch, meta, store, backend) => new LlamaModel(readLlamaConfig(arch, meta, store), backend, store);

/** general.architecture -> model. Mistral, SmolLM and TinyLlama GGUFs use "llama". */
const ARCHITECTURES: Record<string, Builder> = {
  llama: llamaFamily,
  qwen2: llamaFamily,
  qwen3: llamaFamily,
  gpt2: (_arch, meta, store, backend) => new Gpt2Model(readGpt2Config(meta, store), backend, store),
};

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
  // a name from the file: only the table's own entries count ("__proto__" is not an architecture)
  const build = Object.hasOwn(ARCHITECTURES, arch) ? ARCHITECTURES[arch] : undefined;
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
