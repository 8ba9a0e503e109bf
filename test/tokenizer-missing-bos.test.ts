import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { ggufEntry, writeGGUF } from "../src/formats/gguf-writer.js";
import { loadGGUFTokenizer } from "../src/tokenizer/index.js";
import { disposeSharedLlama, sharedLlama } from "./helpers/llama-cpp-oracle.js";

/*
 * A "gemma4" tokenizer model always adds a BOS (llama.cpp's loader forces add_bos for its pre type)
 * and llama.cpp gives it no default id (llama-vocab.cpp sets every special id to LLAMA_TOKEN_NULL
 * for it): such a file loads, tokenizes without special tokens, and llama.cpp asserts
 * (special_bos_id != LLAMA_TOKEN_NULL) once it is asked to add them. tsllm loads it the same and
 * refuses that one call with a line naming the file, the key and what was expected.
 */
const dir = mkdtempSync(join(tmpdir(), "tsllm-missing-bos-"));
after(async () => {
  await disposeSharedLlama();
  rmSync(dir, { recursive: true, force: true });
});

async function gemma4GGUF(name: string, bos?: number): Promise<string> {
  const path = join(dir, name);
  const tokens = ["a", "b", "\u2581", "ab", "\u2581ab", "<eos>"];
  await writeGGUF(path, {
    // (llama.cpp reads a vocab-only file's architecture and its sizes too)
    metadata: [["general.architecture", ggufEntry.string("gpt2")], ["gpt2.block_count", ggufEntry.u32(1)], ["gpt2.context_length", ggufEntry.u32(64)],
      ["gpt2.embedding_length", ggufEntry.u32(8)], ["gpt2.feed_forward_length", ggufEntry.u32(8)], ["gpt2.attention.head_count", ggufEntry.u32(1)],
      ["gpt2.attention.layer_norm_epsilon", ggufEntry.f32(1e-5)], ["tokenizer.ggml.model", ggufEntry.string("gemma4")],
      ["tokenizer.ggml.tokens", ggufEntry.strings(tokens)], ["tokenizer.ggml.merges", ggufEntry.strings(["a b", "\u2581 ab"])],
      ["tokenizer.ggml.token_type", ggufEntry.i32s([1, 1, 1, 1, 1, 3])], ["tokenizer.ggml.eos_token_id", ggufEntry.u32(5)],
      ...(bos === undefined ? [] : [["tokenizer.ggml.bos_token_id", ggufEntry.u32(bos)] as const])],
    tensors: [],
  });
  return path;
}

test("a gemma4 GGUF without a usable tokenizer.ggml.bos_token_id loads as in llama.cpp and says which key encoding with special tokens needs (node-llama-cpp, vocab-only GGUF)", async () => {
  const llama = await sharedLlama();
  for (const [name, bos, found] of [["no-bos.gguf", undefined, "missing"], ["bos-none.gguf", 0xffffffff, "4294967295 is outside the vocabulary of 6 tokens"]] as const) {
    const path = await gemma4GGUF(name, bos);
    const ours = loadGGUFTokenizer(path);
    const lm = await llama.loadModel({ modelPath: path, vocabOnly: true });
    try {
      // llama.cpp: no BOS id, yet one is always added; without special tokens the text tokenizes
      assert.equal(lm.tokens.bos, null, `${name}: llama.cpp's BOS`);
      assert.equal(ours.bosId, undefined, `${name}: BOS id`);
      // (node-llama-cpp reports no prepending where there is no BOS id; llama_vocab_get_add_bos is true, as for tsllm)
      assert.equal(ours.addBos, true, `${name}: add_bos`);
      assert.deepEqual(ours.encode(" ab ab", { addSpecialTokens: false }), Array.from(lm.tokenize(" ab ab", false)), `${name}: ids without special tokens`);
    } finally {
      await lm.dispose();
    }
    const line = `${path}: tokenizer.ggml.bos_token_id: ${found}; expected the id of the BOS token this gemma4 tokenizer puts in front of the text (always; llama.cpp has no default id for gemma4)`;
    assert.throws(() => ours.encode(" ab"), (e: Error) => e.message === line, `${name}: encode`);
    await assert.rejects(ours.encodeAsync(" ab"), (e: Error) => e.message === line, `${name}: encodeAsync`);
  }
});
