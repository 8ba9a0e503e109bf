import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { join } from "node:path";
import { after, test } from "node:test";
import { Rng } from "../src/testing/rng.js";
import { tokenizerFromFolder } from "../src/tokenizer/hf/index.js";
import { loadGGUFTokenizer, type Tokenizer } from "../src/tokenizer/index.js";
import { disposeSharedLlama, sharedLlama } from "./helpers/llama-cpp-oracle.js";
import { SHARED, sharedFile, skipWithoutShared } from "./helpers/shared.js";

/*
 * One word of ~100K characters (no space, one pre-tokenizer piece): byte-level BPE encodes it a
 * piece at a time, cut where no token spans (byte-level.ts LongByteLevelWords), so encodeAsync
 * hands the event loop back inside it; the ids stay the judges' — @huggingface/tokenizers alone
 * for tokenizer.json, llama.cpp for GGUF — letters only, and letters mixed with accented, CJK and
 * emoji characters (cuts between multi-byte characters), and runs of one letter or digit (no cut:
 * the merges pause between slices).
 */
const require = createRequire(import.meta.url);
let oracleMissing: string | false = false;
try { require.resolve("node-llama-cpp"); } catch { oracleMissing = "node-llama-cpp is not installed"; }
after(disposeSharedLlama);

function longWords(): string[] {
  const rng = new Rng(20261206);
  const letters = "abcdefghijklmnopqrstuvwxyz", mixed = `${letters}éßüΩж中文`;
  const word = (alphabet: string, n: number) => Array.from({ length: n }, () => alphabet[Math.floor(rng.uniform() * alphabet.length)]).join("");
  // one letter repeated: every point between two letters sits in some token ("aa"), so no cut
  // exists; the merges themselves stop between slices (BPE.mergeInSteps)
  return [word(letters, 100_000), word([...mixed].join(""), 70_000), "a".repeat(100_000), "7".repeat(60_001)];
}

async function asyncWithTurns(tok: Tokenizer, text: string): Promise<[number[], number]> {
  let turns = 0, done = false;
  const turn = () => { turns++; if (!done) setImmediate(turn); };
  setImmediate(turn);
  const ids = await tok.encodeAsync(text, { addSpecialTokens: false });
  done = true;
  return [ids, turns];
}

test("gpt2-tiny (tokenizer.json): a 100K-character word encodes as the library encodes it, the event loop turning inside it", { skip: skipWithoutShared("hf-oracle/gpt2-tiny") }, async () => {
  const dir = join(SHARED, "hf-oracle", "gpt2-tiny");
  const tok = tokenizerFromFolder(dir), library = tokenizerFromFolder(dir, { libraryOnly: true });
  for (const w of longWords()) {
    const [ids, turns] = await asyncWithTurns(tok, w);
    assert.deepEqual(ids, library.encode(w, { addSpecialTokens: false }));
    assert.deepEqual(tok.encode(w, { addSpecialTokens: false }), ids);
    assert.ok(turns >= 2, `the event loop turned ${turns} times in a ${w.length}-character word`);
  }
});

test("gpt-2 (GGUF): a 100K-character word encodes as llama.cpp encodes it, the event loop turning inside it", { skip: oracleMissing || skipWithoutShared("tokenizer-tests/ggml-vocab-gpt-2.gguf") }, async () => {
  const path = sharedFile("tokenizer-tests/ggml-vocab-gpt-2.gguf")!;
  const tok = loadGGUFTokenizer(path);
  const model = await (await sharedLlama()).loadModel({ modelPath: path, vocabOnly: true });
  try {
    for (const w of longWords()) {
      const [ids, turns] = await asyncWithTurns(tok, w);
      assert.deepEqual(ids, model.tokenize(w, false).map(Number));
      assert.ok(turns >= 2, `the event loop turned ${turns} times in a ${w.length}-character word`);
    }
  } finally {
    await model.dispose();
  }
});

test("llama-spm (GGUF): 100K of one letter encodes as llama.cpp encodes it, the event loop turning inside its one segment", { skip: oracleMissing || skipWithoutShared("tokenizer-tests/ggml-vocab-llama-spm.gguf") }, async () => {
  // every point of "aaaa…" sits in a token ("▁aa", "aa"...), so SegmentCursor gives one segment: its merges pause (SpmMerger.encodeInSteps)
  const path = sharedFile("tokenizer-tests/ggml-vocab-llama-spm.gguf")!;
  const tok = loadGGUFTokenizer(path);
  const model = await (await sharedLlama()).loadModel({ modelPath: path, vocabOnly: true });
  try {
    for (const w of ["a".repeat(100_000), `${"é".repeat(3)}${"b".repeat(70_001)}`]) {
      const [ids, turns] = await asyncWithTurns(tok, w);
      assert.deepEqual(ids, model.tokenize(w, false).map(Number));
      assert.deepEqual(tok.encode(w, { addSpecialTokens: false }), ids);
      assert.ok(turns >= 2, `the event loop turned ${turns} times in a ${w.length}-character word`);
    }
  } finally {
    await model.dispose();
  }
});
