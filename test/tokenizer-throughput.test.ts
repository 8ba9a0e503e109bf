import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { loadGGUFTokenizer } from "../src/tokenizer/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

/**
 * 100 KB of Chinese (long runs with no spaces: one huge word for SentencePiece and for the
 * byte-level regex) and 100 KB of English wiki text through each tokenizer core. No timing is
 * asserted; a merge loop that rescans every pair would not finish in any reasonable time here.
 */
const TEXTS = { hongloumeng: "text/hongloumeng-300k.txt", wikitext: "text/wiki.test.raw" } as const;

for (const [vocab, lossless] of [["llama-spm", true], ["gpt-2", true], ["bert-bge", false]] as const) {
  const rel = `tokenizer-tests/ggml-vocab-${vocab}.gguf`;
  for (const [name, textRel] of Object.entries(TEXTS)) {
    test(`${vocab}: encodes 100 KB of ${name}`, { skip: skipWithoutShared(rel) || skipWithoutShared(textRel) }, () => {
      const tok = loadGGUFTokenizer(sharedFile(rel)!);
      const text = readFileSync(sharedFile(textRel)!, "utf8").slice(0, 100_000);
      const ids = tok.encode(text, { addSpecialTokens: false });
      assert.ok(ids.length > 10_000, `${ids.length} tokens`);
      assert.ok(ids.every((id) => Number.isInteger(id) && id >= 0 && id < tok.vocabSize));
      if (lossless) assert.equal(tok.decode(ids), text);
    });
  }
}
