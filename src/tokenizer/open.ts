import { statSync } from "node:fs";
import { GGUFMetadata, readGGUFHeader } from "../formats/gguf-reader.js";
import { tokenizerFromGGUF } from "./gguf.js";
import type { Tokenizer } from "./types.js";

/** Opens the tokenizer of a local model: a .gguf file (vocab-only files too). */
export function openTokenizer(path: string): Tokenizer {
  const st = statSync(path);
  if (!st.isFile()) throw new Error(`${path} is not a file (expected a .gguf file)`);
  return tokenizerFromGGUF(new GGUFMetadata(path, readGGUFHeader(path).metadata));
}
