import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ggufEntry, writeGGUF } from "../src/formats/index.js";
import { GGUFMetadata } from "../src/formats/gguf-reader.js";
import { GGUFValueType, type GGUFEntry } from "../src/formats/gguf-types.js";
import {
  BPE, SpecialMatcher, TokenType, bertNormalize, bertSplit, byteLevelDecode, byteLevelEncode,
  loadGGUFTokenizer, preTokenizerPatterns, regexSplit, spmEncode, tokenizerFromGGUF, wordPieceEncode,
} from "../src/tokenizer/index.js";

const vocabOf = (tokens: string[]) => new Map(tokens.map((t, i) => [t, i]));

test("byte-level alphabet: GPT-2's mapping of space, newline and non-printable bytes", () => {
  assert.equal(byteLevelEncode(" \n"), "\u0120\u010a"); // "ĠĊ"
  // U+00AD is C2 AD: 0xC2 is printable (maps to itself), 0xAD is the 35th non-printable byte -> U+0143
  assert.equal(byteLevelEncode("\u00ad"), "\u00c2\u0143");
  assert.deepEqual([...byteLevelDecode("\u00c2\u0143")], [0xc2, 0xad]);
  assert.deepEqual([...byteLevelDecode("\u0120hi")], [0x20, 0x68, 0x69]);
});

test("BPE merges by rank, leftmost first on ties, over a linked list", () => {
  const vocab = vocabOf(["a", "b", "c", "ab", "bc", "abc", "ba"]);
  const bpe = new BPE(vocab, [["a", "b"], ["ab", "c"], ["b", "c"]], { cacheSize: 0 });
  const enc = (w: string) => { const out: number[] = []; bpe.encodeWord(w, out); return out; };
  assert.deepEqual(enc("abc"), [5]); // a+b (rank 0), then ab+c (rank 1)
  assert.deepEqual(enc("bcab"), [4, 3]); // a+b first (rank 0), then b+c (rank 2)
  assert.deepEqual(enc(""), []);
  const tie = new BPE(vocab, [["b", "a"], ["a", "b"]]);
  const out: number[] = [];
  tie.encodeWord("aba", out);
  assert.deepEqual(out, [0, 6]); // b+a has the better rank even though a+b is further left
  const same = new BPE(vocab, [["a", "b"]]);
  const out2: number[] = [];
  same.encodeWord("abab", out2);
  assert.deepEqual(out2, [3, 3]);
});

test("BPE: ignoreMerges takes a whole-word token; unknown characters go to the fallback", () => {
  const vocab = vocabOf(["a", "b", "c", "abc"]);
  const out: number[] = [];
  new BPE(vocab, []).encodeWord("abc", out);
  assert.deepEqual(out, [0, 1, 2]);
  const out2: number[] = [];
  new BPE(vocab, [], { ignoreMerges: true }).encodeWord("abc", out2);
  assert.deepEqual(out2, [3]);
  const out3: number[] = [];
  new BPE(vocab, [], { fallback: (s, o) => o.push(-s.length) }).encodeWord("a😀b", out3);
  assert.deepEqual(out3, [0, -2, 1]);
});

test("BPE and SPM over one 200,000-character word finish (linear-logarithmic merging)", () => {
  // a merge loop that rescans all pairs after each merge would need ~10^10 steps here
  const vocab = vocabOf(["a", "b", "ab", "\u2581"]);
  const word = "ab".repeat(100_000);
  const out: number[] = [];
  new BPE(vocab, [["a", "b"]], { cacheSize: 0 }).encodeWord(word, out);
  assert.equal(out.length, 100_000);
  assert.ok(out.every((id) => id === 2));
  const spm: number[] = [];
  spmEncode(word, vocab, Float32Array.from([0, 0, -1, 0]), () => assert.fail("no byte fallback expected"), spm);
  assert.equal(spm.length, 100_000);
  assert.ok(spm.every((id) => id === 2));
});

test("SPM merges the highest-scoring pair first, leftmost on ties, and falls back per byte", () => {
  const tokens = ["<unk>", "<s>", "</s>", "\u2581", "a", "b", "ab", "\u2581a", "\u2581ab", "aa"];
  const scores = Float32Array.from([0, 0, 0, 0, 0, 0, -1, -2, -0.5, -1]);
  const vocab = vocabOf(tokens);
  const enc = (text: string) => {
    const out: number[] = [];
    spmEncode(text, vocab, scores, (b, o) => o.push(1000 + b), out);
    return out;
  };
  assert.deepEqual(enc("\u2581ab"), [8]); // a+b (-1) beats ▁+a (-2); then ▁+ab (-0.5)
  assert.deepEqual(enc("\u2581aaa"), [3, 9, 4]); // the two a+a pairs tie: the left one merges
  assert.deepEqual(enc("\u2581abc"), [8, 1000 + 0x63]); // "c" is no token: its byte
  assert.deepEqual(enc("é"), [1000 + 0xc3, 1000 + 0xa9]);
});

test("WordPiece: greedy longest match, ## continuations, whole word unknown on failure", () => {
  const vocab = vocabOf(["[UNK]", "un", "##aff", "##able", "aff", "##a"]);
  const o = { wordPrefix: "", continuingPrefix: "##", unkId: 0, maxInputChars: 100, maxTokenLength: 6 };
  const enc = (w: string, opts = o) => { const out: number[] = []; wordPieceEncode(w, vocab, opts, out); return out; };
  assert.deepEqual(enc("unaffable"), [1, 2, 3]);
  assert.deepEqual(enc("affa"), [4, 5]);
  assert.deepEqual(enc("affx"), [0]);
  assert.deepEqual(enc("unaffable", { ...o, maxInputChars: 5 }), [0]);
});

test("BERT normalization and splitting (clean text, CJK, accents, lowercase, punctuation)", () => {
  const o = { lowercase: true, stripAccents: true, chineseChars: true };
  assert.equal(bertNormalize("Héllo\u200dWorld\tX\u0000", o), "helloworld x");
  assert.equal(bertNormalize("中a", o), " 中 a");
  assert.equal(bertNormalize("ΣΑΣ", o), "σασ"); // per character: no final-sigma form
  assert.deepEqual(bertSplit("a,b  c!$"), ["a", ",", "b", "c", "!", "$"]);
  assert.deepEqual(bertSplit("x\u3000y"), ["x", "y"]);
});

test("pre-tokenizer patterns split like the published regexes", () => {
  const gpt2 = preTokenizerPatterns("gpt-2")!;
  assert.deepEqual(regexSplit("Hello world  foo's 123", gpt2), ["Hello", " world", " ", " foo", "'s", " 123"]);
  assert.deepEqual(regexSplit("12345", preTokenizerPatterns("llama-bpe")!), ["123", "45"]);
  assert.deepEqual(regexSplit("12345", preTokenizerPatterns("qwen2")!), ["1", "2", "3", "4", "5"]);
  assert.deepEqual(regexSplit("x 12", preTokenizerPatterns("starcoder")!), ["x", " ", "1", "2"]);
  assert.deepEqual(regexSplit("I'M here", preTokenizerPatterns("llama3")!), ["I", "'M", " here"]);
  // U+FEFF is no whitespace in the HF engines (it is in JS's \s)
  assert.deepEqual(regexSplit("a\ufeffb", gpt2), ["a", "\ufeff", "b"]);
  assert.equal(preTokenizerPatterns("no-such-pre"), undefined);
  assert.deepEqual(regexSplit("", gpt2), []);
});

test("special tokens: leftmost-longest matching, lstrip/rstrip", () => {
  const m = new SpecialMatcher([{ text: "<a>", id: 1 }, { text: "<ab>", id: 2 }, { text: "<m>", id: 5, lstrip: true, rstrip: true }]);
  assert.deepEqual(m.split("x<ab>y<a>"), ["x", 2, "y", 1]);
  assert.deepEqual(m.split("<a><a"), [1, "<a"]);
  assert.deepEqual(m.split("a \t<m>\n b"), ["a", 5, "b"]);
  assert.deepEqual(new SpecialMatcher([]).split(""), []);
});

// ---- GGUF metadata -> tokenizer ----

const str = (value: string): GGUFEntry => ({ type: GGUFValueType.STRING, value });
const strs = (value: string[]): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType: GGUFValueType.STRING, value });
const u32 = (value: number): GGUFEntry => ({ type: GGUFValueType.UINT32, value });
const i32s = (value: number[]): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType: GGUFValueType.INT32, value: Int32Array.from(value) });
const f32s = (value: number[]): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType: GGUFValueType.FLOAT32, value: Float32Array.from(value) });
const meta = (entries: Record<string, GGUFEntry>) => new GGUFMetadata("mem.gguf", new Map(Object.entries(entries)));

test("GGUF: a byte-level BPE vocabulary with chat tokens found by their text", () => {
  const tok = tokenizerFromGGUF(meta({
    "tokenizer.ggml.model": str("gpt2"),
    "tokenizer.ggml.pre": str("qwen2"),
    "tokenizer.ggml.tokens": strs(["a", "b", "ab", "\u0120", "<|im_end|>", "<|eot_id|>"]),
    "tokenizer.ggml.token_type": i32s([1, 1, 1, 1, 1, 1]),
    "tokenizer.ggml.merges": strs(["a b"]),
  }));
  assert.equal(tok.type, "gpt2");
  assert.equal(tok.pre, "qwen2");
  assert.equal(tok.addBos, false);
  // llama.cpp's default BOS/EOS id 11 lies outside this 6-token vocabulary, so there is none
  assert.equal(tok.bosId, undefined);
  assert.deepEqual([...tok.endOfGenerationIds].sort(), [4, 5]);
  assert.ok(tok.isSpecial(4) && tok.isSpecial(5) && !tok.isSpecial(2));
  // "ab", " ab" (Ġ + a+b), then the special token
  assert.deepEqual(tok.encode("ab ab<|im_end|>"), [2, 3, 2, 4]);
  assert.deepEqual(tok.encode("ab<|im_end|>", { parseSpecial: false }).slice(0, 1), [2]);
  assert.notDeepEqual(tok.encode("<|im_end|>", { parseSpecial: false }), [4]);
  assert.equal(tok.decode([2, 3, 2, 4]), "ab ab<|im_end|>");
  assert.equal(tok.decode([2, 3, 2, 4], { skipSpecialTokens: true }), "ab ab");
  assert.equal(tok.piece(3), "\u0120");
});

test("GGUF: SentencePiece defaults (BOS 1, EOS 2, add_bos, space prefix) and overrides", () => {
  const tokens = ["<unk>", "<s>", "</s>", "\u2581", "a", "\u2581a"];
  const base = {
    "tokenizer.ggml.model": str("llama"),
    "tokenizer.ggml.tokens": strs(tokens),
    "tokenizer.ggml.scores": f32s([0, 0, 0, 0, 0, -1]),
    "tokenizer.ggml.token_type": i32s([2, 3, 3, 1, 1, 1]),
  };
  const tok = tokenizerFromGGUF(meta(base));
  assert.deepEqual([tok.bosId, tok.eosId, tok.unkId, tok.addBos, tok.addEos], [1, 2, 0, true, false]);
  assert.deepEqual(tok.encode("a"), [1, 5]);
  assert.deepEqual(tok.encode("a", { addSpecialTokens: false }), [5]);
  assert.deepEqual(tok.encode("</s>a", { addSpecialTokens: false }), [2, 5]); // space prefix after a special token
  assert.equal(tok.decode([1, 5]), "<s> a");
  assert.equal(tok.decode([1, 5], { skipSpecialTokens: true }), "a");
  assert.equal(tok.decode([5, 5]), "a a");
  const noPrefix = tokenizerFromGGUF(meta({ ...base, "tokenizer.ggml.add_space_prefix": { type: GGUFValueType.BOOL, value: false },
    "tokenizer.ggml.add_eos_token": { type: GGUFValueType.BOOL, value: true }, "tokenizer.ggml.eos_token_id": u32(0xffffffff) }));
  assert.deepEqual(noPrefix.encode("a"), [1, 4, 2]); // EOS id out of range: the default 2 stays
  assert.equal(noPrefix.decode([3, 4]), " a");
});

test("GGUF: bad tokenizer metadata is rejected with the key named", () => {
  const tokens = strs(["a", "b"]);
  assert.throws(() => tokenizerFromGGUF(meta({ "tokenizer.ggml.tokens": tokens })), /mem\.gguf: tokenizer\.ggml\.model: .*missing/);
  assert.throws(() => tokenizerFromGGUF(meta({ "tokenizer.ggml.model": str("t5"), "tokenizer.ggml.tokens": tokens })), /tokenizer\.ggml\.model: expected "llama", "gpt2", "bert", "gemma4" or "whitespace", found "t5"/);
  assert.throws(() => tokenizerFromGGUF(meta({ "tokenizer.ggml.model": str("gpt2"), "tokenizer.ggml.tokens": tokens })), /tokenizer\.ggml\.merges: required/);
  assert.throws(() => tokenizerFromGGUF(meta({ "tokenizer.ggml.model": str("gpt2"), "tokenizer.ggml.pre": str("nonsense"), "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.merges": strs([]) })), /tokenizer\.ggml\.pre: unknown pre-tokenizer "nonsense"/);
  assert.throws(() => tokenizerFromGGUF(meta({ "tokenizer.ggml.model": str("llama"), "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": f32s([0]) })), /tokenizer\.ggml\.scores: expected 2 scores/);
  assert.throws(() => tokenizerFromGGUF(meta({ "tokenizer.ggml.model": str("gpt2"), "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.merges": strs(["ab"]) })), /tokenizer\.ggml\.merges\[0\]: expected "left right"/);
  const tok = tokenizerFromGGUF(meta({ "tokenizer.ggml.model": str("llama"), "tokenizer.ggml.tokens": tokens }));
  assert.throws(() => tok.decode([2]), /token id 2 is outside the vocabulary/);
  assert.throws(() => tok.piece(-1), RangeError);
  assert.equal(TokenType.Byte, 6);
});

test("SpecialMatcher: leftmost-longest like a character trie, in memory proportional to the tokens (an 8 MB control token)", async () => {
  const { SpecialMatcher } = await import("../src/tokenizer/index.js");
  // a character trie spelled out as the reference: at each position the longest token starting there
  const reference = (tokens: { text: string; id: number }[], text: string): (string | number)[] => {
    const out: (string | number)[] = [];
    let raw = "";
    for (let i = 0; i < text.length;) {
      let best: { text: string; id: number } | undefined;
      for (const t of tokens) if (text.startsWith(t.text, i) && (!best || t.text.length > best.text.length)) best = t;
      if (!best) { raw += text[i]; i++; continue; }
      if (raw) out.push(raw);
      raw = "";
      out.push(best.id);
      i += best.text.length;
    }
    if (raw) out.push(raw);
    return out;
  };
  const tokens = ["<", "<|", "<|im_start|>", "<|im_end|>", "<s>", "</s>", "ab", "abc", "a", "\u2581\u2581", "<|im"].map((text, id) => ({ text, id }));
  const m = new SpecialMatcher(tokens);
  let seed = 7;
  const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const alphabet = ["<", "|", "im_start", "im_end", ">", "/", "s", "a", "b", "c", "\u2581", " ", "x"];
  for (let k = 0; k < 300; k++) {
    const text = Array.from({ length: 1 + Math.floor(rand() * 20) }, () => alphabet[Math.floor(rand() * alphabet.length)]).join("");
    assert.deepEqual(m.split(text), reference(tokens, text), JSON.stringify(text));
  }
  const before = process.memoryUsage().heapUsed + process.memoryUsage().external;
  const huge = "<" + "x".repeat(8 * 2 ** 20) + ">";
  const big = new SpecialMatcher([{ text: huge, id: 1 }, { text: "<s>", id: 2 }]);
  const grown = process.memoryUsage().heapUsed + process.memoryUsage().external - before;
  assert.ok(grown < 100 * 2 ** 20, `the matcher grew the heap by ${(grown / 2 ** 20).toFixed(0)} MB`);
  assert.deepEqual(big.split(`a<s>b${huge}c`), ["a", 2, "b", 1, "c"]);
});

test("GGUF: a BPE merge whose parts or result are not tokens is refused at load, naming the file, the merge index and the missing token", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-merges-"));
  try {
    const write = async (name: string, tokens: string[], merges: string[]) => {
      const path = join(dir, name);
      await writeGGUF(path, {
        metadata: [["tokenizer.ggml.model", ggufEntry.string("gpt2")], ["tokenizer.ggml.pre", ggufEntry.string("gpt-2")],
          ["tokenizer.ggml.tokens", ggufEntry.strings(tokens)], ["tokenizer.ggml.merges", ggufEntry.strings(merges)]],
        tensors: [],
      });
      return path;
    };
    const good = loadGGUFTokenizer(await write("good.gguf", ["a", "b", "c", "ab", "abc"], ["a b", "ab c"]));
    assert.deepEqual(good.encode("abc", { addSpecialTokens: false }), [4]);
    for (const [name, tokens, merges, message] of [
      ["result.gguf", ["a", "b", "c", "ab"], ["a b", "ab c"], /tokenizer\.ggml\.merges\[1\]: the merge "ab c" needs the merged token "abc", which is not in the vocabulary$/],
      ["left.gguf", ["a", "b", "ab"], ["a b", "x b"], /tokenizer\.ggml\.merges\[1\]: the merge "x b" needs its left part "x", which is not in the vocabulary$/],
      ["right.gguf", ["a", "b", "ab"], ["a y"], /tokenizer\.ggml\.merges\[0\]: the merge "a y" needs its right part "y", which is not in the vocabulary$/],
    ] as const) {
      const path = await write(name, [...tokens], [...merges]);
      assert.throws(() => loadGGUFTokenizer(path), (e: Error) => {
        assert.ok(e.message.startsWith(`${path}: `), e.message);
        assert.match(e.message, message);
        return true;
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("GGUF: a special token id stored as another type than u32 (f32 2.5, a string, i32) is refused naming the key, as llama.cpp refuses it", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-special-ids-"));
  try {
    const write = async (name: string, eos: GGUFEntry) => {
      const path = join(dir, name);
      await writeGGUF(path, {
        metadata: [["tokenizer.ggml.model", ggufEntry.string("llama")], ["tokenizer.ggml.tokens", ggufEntry.strings(["<unk>", "<s>", "</s>", "\u2581a", "x"])],
          ["tokenizer.ggml.scores", ggufEntry.f32s([0, 0, 0, 0, 0])], ["tokenizer.ggml.token_type", ggufEntry.i32s([2, 3, 3, 1, 1])],
          ["tokenizer.ggml.eos_token_id", eos]],
        tensors: [],
      });
      return path;
    };
    // u32 is read; one past the vocabulary keeps the default (2), as llama.cpp
    assert.equal(loadGGUFTokenizer(await write("u32.gguf", ggufEntry.u32(4))).eosId, 4);
    assert.equal(loadGGUFTokenizer(await write("none.gguf", ggufEntry.u32(0xffffffff))).eosId, 2);
    for (const [name, eos, found] of [
      ["f32.gguf", ggufEntry.f32(2.5), "f32 2.5"],
      ["str.gguf", ggufEntry.string("4"), `str "4"`],
      ["i32.gguf", ggufEntry.i32(4), "i32 4"],
      ["arr.gguf", ggufEntry.u32s([4]), "arr of 1"],
    ] as const) {
      const path = await write(name, eos);
      assert.throws(() => loadGGUFTokenizer(path), (e: Error) => {
        assert.equal(e.message, `${path}: tokenizer.ggml.eos_token_id: expected a u32, found ${found}`);
        return true;
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
