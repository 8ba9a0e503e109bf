import { statSync } from "node:fs";
import { GGUFMetadata, readGGUFHeader } from "../formats/gguf-reader.js";
import type { Backend } from "../kernels/backend.js";
import { tokenizerFromGGUF, type Tokenizer } from "../tokenizer/index.js";
import type { LanguageModel } from "./model.js";
import { buildModel } from "./registry.js";

/** A model on disk, opened: what it is, its tokenizer, and how to build it on a backend. */
export interface OpenedModel {
  readonly path: string;
  readonly format: "gguf";
  readonly metadata: GGUFMetadata;
  readonly tokenizer: Tokenizer;
  /** reads the weights into the backend's memory and returns the runnable model */
  build(backend: Backend): LanguageModel;
}

/** Opens a local model: a .gguf file (Hugging Face folders are the next format to add here). */
export function openModel(path: string): OpenedModel {
  const st = statSync(path);
  if (!st.isFile()) throw new Error(`${path} is not a file (expected a .gguf model file)`);
  const header = readGGUFHeader(path);
  const metadata = new GGUFMetadata(path, header.metadata);
  return {
    path,
    format: "gguf",
    metadata,
    tokenizer: tokenizerFromGGUF(metadata),
    build: (backend) => buildModel(header, backend),
  };
}
