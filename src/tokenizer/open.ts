import { statSync } from "node:fs";
import { basename, dirname } from "node:path";
import { FileFieldError, GGUFMetadata, readFailure, readGGUFHeader } from "../formats/index.js";
import { tokenizerFromGGUF } from "./gguf.js";
import { tokenizerFromFolder } from "./hf/folder.js";
import type { Tokenizer } from "./types.js";

/** Files that stand for the folder they are in. */
const HF_FILES = new Set(["tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "vocab.txt"]);

/**
 * Opens the tokenizer of a local model: a .gguf file (vocab-only files too), or a Hugging Face
 * folder (or one of its tokenizer files) with tokenizer.json, vocab.json + merges.txt, or vocab.txt.
 */
export function openTokenizer(path: string): Tokenizer {
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(path, { throwIfNoEntry: false });
  } catch (e) {
    throw readFailure(path, e);
  }
  // a FileFieldError naming the path, as for a folder without tokenizer files (Node's ENOENT was "stat '...'" and no class of ours)
  if (st === undefined) throw new FileFieldError(path, "file", "not found (expected a .gguf file or a Hugging Face model folder)");
  if (st.isDirectory()) return tokenizerFromFolder(path);
  if (!st.isFile()) throw new FileFieldError(path, "file", "is neither a file nor a folder (expected a .gguf file or a Hugging Face model folder)");
  if (HF_FILES.has(basename(path))) return tokenizerFromFolder(dirname(path));
  return tokenizerFromGGUF(new GGUFMetadata(path, readGGUFHeader(path).metadata));
}
