import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import llama3Tokenizer from "llama3-tokenizer-js";
import { loadTokenizer } from "../src/index.js";
import { ensureLlama3Vocab } from "../src/testing/index.js";

/*
 * The 128k Llama 3 vocabulary tsllm's measurements use (src/testing/llama3-vocab.ts, from the
 * llama3-tokenizer-js package): loaded as a GGUF vocabulary with llama.cpp's "llama-bpe"
 * pre-tokenizer, tsllm's BPE gives the ids that package's own Llama 3 encoder gives.
 */
const dir = mkdtempSync(join(tmpdir(), "tsllm-llama3-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("Llama 3's 128k vocabulary: tsllm's byte-level BPE encodes as llama3-tokenizer-js does", async () => {
  const tok = await loadTokenizer(await ensureLlama3Vocab(dir));
  assert.equal(tok.vocabSize, 128256);
  for (const text of [
    "Hello world", "  multiple   spaces\tand\ttabs\n\nnewlines", "Numbers 1234567 and 3.14159",
    "café naïve 日本語のテキスト 🙂 emoji", "don't I'll we're THEY'RE", "code: function(x) { return x*2; }", "ÀÉÎÕÜ ñ ß ø",
  ]) {
    assert.deepEqual(tok.encode(text, { addSpecialTokens: false }), llama3Tokenizer.encode(text, { bos: false, eos: false }), JSON.stringify(text));
  }
});
