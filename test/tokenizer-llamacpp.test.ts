import { test, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { loadGGUFTokenizer } from "../src/tokenizer/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";
import { disposeSharedLlama, llamaToken, sharedLlama } from "./helpers/llama-cpp-oracle.js";

/**
 * llama.cpp itself (node-llama-cpp's prebuilt binary, vocab-only load) as the oracle for what
 * the HF vectors do not cover: special tokens inside the text (with phi-3's whitespace
 * stripping), BOS/EOS/EOG ids, add_bos, and decoding with special tokens rendered.
 */
const require = createRequire(import.meta.url);
let oracleMissing: string | false = false;
try { if (!existsSync(require.resolve("node-llama-cpp"))) oracleMissing = "node-llama-cpp is not installed"; } catch { oracleMissing = "node-llama-cpp is not installed"; }

after(disposeSharedLlama);

const CASES: Record<string, string[]> = {
  "llama-spm": ["<s>Hi</s> there", "a <unk> b", "</s>\n\nx", "Hello\n<s>  world"],
  "phi-3": ["<|user|>\nHello<|end|>\n<|assistant|>", "<s>Hi</s> there", "a <|end|> b", "x<unk>y", "<|endoftext|>  z", "<|system|> sys<|end|><|user|>q"],
  "gpt-2": ["Hi<|endoftext|>there", " <|endoftext|> x", "<|endoftext|><|endoftext|>"],
  "starcoder": ["<fim_prefix>def f():<fim_suffix>\n<fim_middle>", "<|endoftext|>x", "<filename>a.py\n<gh_stars>10"],
  "deepseek-llm": ["<｜begin▁of▁sentence｜>Hi<｜end▁of▁sentence｜>", "Führer øø", "User: 你好<｜end▁of▁sentence｜>"],
  "bert-bge": ["[CLS] hello [SEP] world [MASK]!", "Hello [UNK] there"],
};

for (const [vocab, texts] of Object.entries(CASES)) {
  const rel = `tokenizer-tests/ggml-vocab-${vocab}.gguf`;
  test(`${vocab}: special tokens, ids and rendering agree with llama.cpp`, { skip: oracleMissing || skipWithoutShared(rel) }, async () => {
    const path = sharedFile(rel)!;
    const tok = loadGGUFTokenizer(path);
    const llama = await sharedLlama();
    const model = await llama.loadModel({ modelPath: path, vocabOnly: true });
    try {
      assert.equal(tok.bosId ?? null, model.tokens.bos, "BOS id");
      assert.equal(tok.eosId ?? null, model.tokens.eos, "EOS id");
      assert.equal(tok.addBos, model.tokens.shouldPrependBosToken, "add_bos");
      assert.equal(tok.addEos, model.tokens.shouldAppendEosToken, "add_eos");
      for (let id = 0; id < tok.vocabSize; id++) {
        if (model.isEogToken(llamaToken(id)) !== tok.endOfGenerationIds.has(id)) assert.fail(`token ${id} ${JSON.stringify(tok.piece(id))}: end-of-generation should be ${model.isEogToken(llamaToken(id))}`);
      }
      for (const text of texts) {
        const ids = model.tokenize(text, true).map(Number);
        assert.deepEqual(tok.encode(text, { addSpecialTokens: false }), ids, `encoding ${JSON.stringify(text)}`);
        const rendered = model.detokenize(ids as never, true);
        // llama.cpp keeps WordPiece's leading word-start space; we drop it as HF does
        assert.equal(tok.decode(ids), vocab === "bert-bge" ? rendered.replace(/^ /, "") : rendered, `decoding ${JSON.stringify(text)}`);
      }
    } finally {
      await model.dispose();
    }
  });
}

test("bert-bge: a chunk of more than 16K characters with no white space (normalized and split a step at a time) encodes as llama.cpp encodes it", { skip: oracleMissing || skipWithoutShared("tokenizer-tests/ggml-vocab-bert-bge.gguf") }, async () => {
  // words of up to 100 characters between punctuation (past 100, llama.cpp spells a word where
  // tsllm, as Hugging Face, writes [UNK]); accents, stacked marks and controls across the cuts
  const path = sharedFile("tokenizer-tests/ggml-vocab-bert-bge.gguf")!;
  const tok = loadGGUFTokenizer(path);
  const llama = await sharedLlama();
  const model = await llama.loadModel({ modelPath: path, vocabOnly: true });
  try {
    const texts = ["Ab,c\u0301\u00e9-x".repeat(5000), "a\u0301\u0327b\u0308!\u00c5\u212b.".repeat(3000), `${"x\u0001Y\u00ad,".repeat(4000)}${"q".repeat(99)}/${"\u00dc".repeat(100)}`,
      `${"word".repeat(25)};`.repeat(200), "\u0391\u03a3\u0391\u03a3,\ufb01\uff21\uff22?".repeat(2500)];
    for (const text of texts) {
      assert.ok(text.length > 16_384 && !/\s/.test(text));
      const want = model.tokenize(text, false).map(Number);
      assert.deepEqual(tok.encode(text, { addSpecialTokens: false, parseSpecial: false }), want, `${JSON.stringify(text.slice(0, 20))} (${text.length})`);
    }
  } finally {
    await model.dispose();
  }
});

/**
 * Whole texts, not sentences: the wiki (1.29 MB, CRLF lines), 300 KB of Chinese and TinyStories,
 * each as one string, against llama.cpp. The encoder cuts text into words it caches and into
 * slices for encodeAsync; a cut in the wrong place, or a stale cache entry, shows here.
 */
const LARGE_TEXTS = ["text/wiki.test.raw", "text/hongloumeng-300k.txt", "text/tinystories-valid-30k.txt"];
for (const vocab of Object.keys(CASES)) {
  const rel = `tokenizer-tests/ggml-vocab-${vocab}.gguf`;
  const skip = oracleMissing || skipWithoutShared(rel) || LARGE_TEXTS.map((t) => skipWithoutShared(t)).find((s) => s !== false) || false;
  test(`${vocab}: whole texts (wiki, Chinese, stories) encode as llama.cpp encodes them`, { skip }, async () => {
    const path = sharedFile(rel)!;
    const tok = loadGGUFTokenizer(path);
    const llama = await sharedLlama();
    const model = await llama.loadModel({ modelPath: path, vocabOnly: true });
    try {
      for (const t of LARGE_TEXTS) {
        const text = readFileSync(sharedFile(t)!, "utf8");
        const want = model.tokenize(text, false).map(Number);
        const got = tok.encode(text, { addSpecialTokens: false, parseSpecial: false });
        assert.equal(got.length, want.length, `${t}: token count`);
        const at = got.findIndex((id, i) => id !== want[i]);
        assert.equal(at, -1, `${t}: first difference at token ${at}: ${JSON.stringify(got.slice(at, at + 5))} where llama.cpp has ${JSON.stringify(want.slice(at, at + 5))}`);
      }
    } finally {
      await model.dispose();
    }
  });
}
