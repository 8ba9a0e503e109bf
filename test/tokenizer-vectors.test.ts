import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { loadGGUFTokenizer } from "../src/tokenizer/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

/**
 * llama.cpp's tokenizer test suite: .inp holds strings separated by "\n__ggml_vocab_test__\n",
 * .out one line of ids per string as the Hugging Face reference tokenizers produced them (no BOS).
 */
function loadVectors(vocab: string): { text: string; ids: number[] }[] {
  const base = sharedFile(`tokenizer-tests/ggml-vocab-${vocab}.gguf`)!;
  const texts = readFileSync(`${base}.inp`, "utf8").split("\n__ggml_vocab_test__\n");
  const lines = readFileSync(`${base}.out`, "utf8").split("\n");
  return texts.map((text, i) => {
    const line = (lines[i] ?? "").trim();
    return { text, ids: line ? line.split(/\s+/).map(Number) : [] };
  });
}

const VOCABS = ["llama-spm", "phi-3", "gpt-2", "starcoder", "deepseek-llm", "bert-bge"];

for (const vocab of VOCABS) {
  const rel = `tokenizer-tests/ggml-vocab-${vocab}.gguf`;
  test(`${vocab}: encode matches every line of the HF reference .out`, { skip: skipWithoutShared(rel) }, () => {
    const tok = loadGGUFTokenizer(sharedFile(rel)!);
    const cases = loadVectors(vocab);
    assert.ok(cases.length > 40, "the .inp file holds the full suite");
    for (const c of cases) {
      assert.deepEqual(tok.encode(c.text, { addSpecialTokens: false }), c.ids, `encoding ${JSON.stringify(c.text)}`);
    }
  });
}

// SentencePiece with byte fallback and byte-level BPE represent any text, so decoding gives it back
for (const vocab of ["llama-spm", "phi-3", "gpt-2", "starcoder", "deepseek-llm"]) {
  const rel = `tokenizer-tests/ggml-vocab-${vocab}.gguf`;
  test(`${vocab}: decode(encode(s)) === s for every test string`, { skip: skipWithoutShared(rel) }, () => {
    const tok = loadGGUFTokenizer(sharedFile(rel)!);
    for (const { text, ids } of loadVectors(vocab)) {
      assert.equal(tok.decode(ids), text, `decode of the reference ids of ${JSON.stringify(text)}`);
      assert.equal(tok.decode(tok.encode(text), { skipSpecialTokens: true }), text, `round trip with BOS of ${JSON.stringify(text)}`);
    }
  });
}

test("bert-bge: decoding is lossy exactly where WordPiece normalizes", { skip: skipWithoutShared("tokenizer-tests/ggml-vocab-bert-bge.gguf") }, () => {
  const tok = loadGGUFTokenizer(sharedFile("tokenizer-tests/ggml-vocab-bert-bge.gguf")!);
  const rt = (s: string) => tok.decode(tok.encode(s), { skipSpecialTokens: true });
  // exact where the text is already lowercase, unaccented, single-spaced, punctuation attached to the left
  assert.equal(rt("hello world"), "hello world");
  assert.equal(rt("hello, world!"), "hello, world!");
  // documented exceptions: lowercasing, accent stripping, whitespace collapsing, unknown words
  assert.equal(rt("Hello World!"), "hello world!");
  assert.equal(rt("Führer"), "fuhrer");
  assert.equal(rt("Cửa Việt"), "cua viet");
  assert.equal(rt("    Hello\n    Hello"), "hello hello");
  assert.equal(rt(" \t\n"), "");
  // 🦙 has no piece: [UNK], dropped when skipping special tokens, kept otherwise
  assert.equal(rt(" this is 🦙.cpp"), "this is. cpp");
  assert.equal(tok.decode(tok.encode("🦙", { addSpecialTokens: false })), "[UNK]");
  // CJK ideographs are split into single-character words (想 has no piece in this vocabulary)
  assert.equal(rt("我天apple"), "我 天 apple");
  assert.equal(tok.decode(tok.encode("我想", { addSpecialTokens: false })), "我[UNK]");
  // CLS/SEP around the text when adding special tokens
  const ids = tok.encode("Hello");
  assert.deepEqual([ids[0], ids[ids.length - 1]], [101, 102]);
  assert.equal(tok.decode(ids), "[CLS] hello[SEP]");
});
