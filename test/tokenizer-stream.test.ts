import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { loadGGUFTokenizer, TokenType, VocabTokenizer, type Tokenizer } from "../src/tokenizer/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function streamChunks(tok: Tokenizer, ids: number[], skipSpecialTokens = false): string[] {
  const d = tok.createStreamDecoder({ skipSpecialTokens });
  const chunks = ids.map((id) => d.push(id));
  chunks.push(d.flush());
  return chunks;
}

/** A SentencePiece vocabulary with only byte tokens and "▁": every non-ASCII character streams as raw bytes. */
function byteOnlyTokenizer(): VocabTokenizer {
  const tokens = ["<unk>", "<s>", "</s>"];
  const types = [TokenType.Unknown, TokenType.Control, TokenType.Control];
  for (let b = 0; b < 256; b++) { tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`); types.push(TokenType.Byte); }
  tokens.push("\u2581"); types.push(TokenType.Normal);
  return new VocabTokenizer({
    model: "llama", tokens, types, scores: new Float32Array(tokens.length),
    bosId: 1, eosId: 2, unkId: 0, eogIds: new Set([2]), addBos: true, addEos: false, addSpacePrefix: true,
  });
}

test("stream decoder holds back partial UTF-8 sequences (hand-derived byte tokens)", () => {
  const tok = byteOnlyTokenizer();
  // "😀" is F0 9F 98 80: byte token id = 3 + byte; 259 is "▁" (the prefix space, dropped at the start)
  const ids = tok.encode("😀");
  assert.deepEqual(ids, [1, 259, 3 + 0xf0, 3 + 0x9f, 3 + 0x98, 3 + 0x80]);
  assert.deepEqual(streamChunks(tok, ids, true), ["", "", "", "", "", "😀", ""]);
  assert.deepEqual(streamChunks(tok, ids), ["<s>", " ", "", "", "", "😀", ""]);
  // an unfinished sequence comes out of flush() as U+FFFD, as a whole decode would
  const d = tok.createStreamDecoder();
  assert.equal(d.push(3 + 0xe4), "");
  assert.equal(d.flush(), "\uFFFD");
});

const TEXT_REL = "text/hongloumeng-300k.txt";
for (const [name, rel] of [
  ["llama-spm (byte fallback)", "tokenizer-tests/ggml-vocab-llama-spm.gguf"],
  ["stories260K (byte fallback, 512 pieces)", "models/stories260K.gguf"],
  ["gpt-2 (byte-level)", "tokenizer-tests/ggml-vocab-gpt-2.gguf"],
  ["deepseek-llm (byte-level, user-defined pieces)", "tokenizer-tests/ggml-vocab-deepseek-llm.gguf"],
] as const) {
  test(`${name}: streaming Chinese and emoji never emits half a character`, { skip: skipWithoutShared(rel) || skipWithoutShared(TEXT_REL) }, () => {
    const tok = loadGGUFTokenizer(sharedFile(rel)!);
    const text = readFileSync(sharedFile(TEXT_REL)!, "utf8").slice(0, 3000) + " 😀👍🏽 mixed ascii, 中文 and 🦙 llamas\n";
    const ids = tok.encode(text);
    for (const skipSpecial of [false, true]) {
      const chunks = streamChunks(tok, ids, skipSpecial);
      assert.equal(chunks.join(""), tok.decode(ids, { skipSpecialTokens: skipSpecial }), "concatenated chunks equal decode()");
      chunks.forEach((c, i) => {
        assert.ok(!c.includes("\uFFFD"), `chunk ${i} ${JSON.stringify(c)} has no U+FFFD`);
        assert.ok(!LONE_SURROGATE.test(c), `chunk ${i} ${JSON.stringify(c)} has no lone surrogate`);
      });
      // multi-byte characters really were split across tokens, so the hold-back path ran
      assert.ok(chunks.slice(0, -1).some((c, i) => c === "" && ids[i] !== tok.bosId), "some token completed no character");
    }
    assert.equal(tok.decode(ids, { skipSpecialTokens: true }), text);
  });
}
