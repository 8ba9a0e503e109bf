import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { promisify } from "node:util";
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

/*
 * deepseek-llm's `\s+$` piece: a backtracking engine tried it from every space of a run that does
 * not reach the end, so 200K spaces then a digit took 100 s in encode() (and llama.cpp's own
 * std::regex takes 20 s at 20K and crashes at 50K). The ids are llama.cpp's where it copes (1,000
 * spaces), and there they are the spaces' ids then the tail's, which is what a long run must give.
 */
test("deepseek-llm (GGUF): a whitespace run before a digit, CJK or emoji encodes as llama.cpp splits it", { skip: oracleMissing || skipWithoutShared("tokenizer-tests/ggml-vocab-deepseek-llm.gguf") }, async () => {
  const path = sharedFile("tokenizer-tests/ggml-vocab-deepseek-llm.gguf")!;
  const tok = loadGGUFTokenizer(path);
  const model = await (await sharedLlama()).loadModel({ modelPath: path, vocabOnly: true });
  try {
    for (const run of [" ", "\t", " \u00a0"]) {
      const spaces = run.repeat(1000);
      const spaceIds = model.tokenize(spaces, false).map(Number);
      for (const tail of DEEPSEEK_TAILS) {
        const want = model.tokenize(spaces + tail, false).map(Number);
        assert.deepEqual(tok.encode(spaces + tail, { addSpecialTokens: false }), want, `${JSON.stringify(run)} x 1000 + ${tail}`);
        assert.deepEqual(want, [...spaceIds, ...model.tokenize(tail, false).map(Number)], "llama.cpp: the run and the tail are separate pieces");
      }
    }
  } finally {
    await model.dispose();
  }
});
const DEEPSEEK_TAILS = ["1", "中", "😀", "٣"];

test("deepseek-llm (GGUF): 400K spaces before a digit, CJK or emoji are the spaces' ids then the tail's, in a process that is given a minute (it took an hour)", { skip: skipWithoutShared("tokenizer-tests/ggml-vocab-deepseek-llm.gguf") }, async () => {
  // a child process, killed if it runs past the minute: a regex holding its thread ignores a worker's terminate()
  const script = `
    import { loadGGUFTokenizer } from ${JSON.stringify(new URL("../src/tokenizer/index.ts", import.meta.url).href)};
    const tok = loadGGUFTokenizer(${JSON.stringify(sharedFile("tokenizer-tests/ggml-vocab-deepseek-llm.gguf"))}), opts = { addSpecialTokens: false };
    const spaces = " ".repeat(400000), spaceIds = tok.encode(spaces, opts);
    const same = ${JSON.stringify(DEEPSEEK_TAILS)}.map((t) => JSON.stringify(tok.encode(spaces + t, opts)) === JSON.stringify([...spaceIds, ...tok.encode(t, opts)]));
    process.stdout.write(JSON.stringify(same));`;
  const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { timeout: 60_000, killSignal: "SIGKILL" });
  assert.deepEqual(JSON.parse(stdout), DEEPSEEK_TAILS.map(() => true));
});

/*
 * The setup of a word no cut splits ran in one slice of the event loop before its merges paused:
 * the look for a cut over the whole word, its byte-level spelling (or "▁" for spaces), its symbols
 * read into the merge heap — a megabyte of digits held a server's loop for ~0.3-0.5 s, a megabyte
 * of CJK for 2 s. So did the look for special tokens over the whole prompt (20-140 ms per 4 MiB).
 * Each input here has (next to) no merges, so the turns of the loop come from those steps; before,
 * encodeAsync resolved with at most one. The ids are llama.cpp's.
 */
const SETUP_CASES: Array<[vocab: string, text: () => string, parseSpecial: boolean, what: string]> = [
  // \p{N}+ is one piece; no token joins two 7s, but the pair sits inside some token: no cut, no
  // merge (llama.cpp's std::regex for this vocabulary crashes past ~30K characters)
  ["deepseek-llm", () => "7".repeat(20_000), false, "20K of one digit (one byte-level word: its cut scan, spelling and symbols)"],
  ["deepseek-llm", () => { const rng = new Rng(7); return Array.from({ length: 20_000 }, () => Math.floor(rng.uniform() * 10)).join(""); }, false, "20K random digits"],
  // "11" is no token but sits in "<0x11>": one SentencePiece segment, one merge ("▁1")
  ["llama-spm", () => "1".repeat(100_000), false, "100K of one digit (one SentencePiece segment: its scan, spelling and symbols)"],
  // (llama.cpp's own split of special tokens is quadratic: 60K of them take it 70 s)
  ["gpt-2", () => "<|endoftext|>".repeat(6000), true, "6000 special tokens (the special-token scan)"],
];
for (const [vocab, text, parseSpecial, what] of SETUP_CASES) {
  const rel = `tokenizer-tests/ggml-vocab-${vocab}.gguf`;
  test(`${vocab} (GGUF): ${what} encodes as llama.cpp encodes it, the event loop turning before the encode resolves`, { skip: oracleMissing || skipWithoutShared(rel) }, async () => {
    const path = sharedFile(rel)!;
    const tok = loadGGUFTokenizer(path);
    const model = await (await sharedLlama()).loadModel({ modelPath: path, vocabOnly: true });
    try {
      const t = text();
      let turns = 0, done = false;
      const turn = () => { turns++; if (!done) setImmediate(turn); };
      setImmediate(turn);
      const ids = await tok.encodeAsync(t, { addSpecialTokens: false, parseSpecial });
      done = true;
      assert.deepEqual(ids, model.tokenize(t, parseSpecial).map(Number));
      // (before, 0 turns; 1 for llama-spm, whose long word ended a slice just before the end)
      assert.ok(turns >= 2, `the event loop turned ${turns} times while ${t.length} characters were encoded`);
    } finally {
      await model.dispose();
    }
  });
}

test("gpt2-tiny (tokenizer.json): 6000 special tokens encode as the library encodes them, the event loop turning before the encode resolves", { skip: skipWithoutShared("hf-oracle/gpt2-tiny") }, async () => {
  // the special-token scan of a tokenizer.json's own encoder is stepwise too (SpecialSplit)
  const dir = join(SHARED, "hf-oracle", "gpt2-tiny");
  const tok = tokenizerFromFolder(dir), library = tokenizerFromFolder(dir, { libraryOnly: true });
  const text = "<|endoftext|>".repeat(6000);
  const [ids, turns] = await asyncWithTurns(tok, text);
  assert.deepEqual(ids, library.encode(text, { addSpecialTokens: false }));
  assert.ok(turns >= 2, `the event loop turned ${turns} times while ${text.length} characters were encoded`);
});

test("gpt2-tiny with a Split regex of its own (tokenizer.json): a pre-tokenizer match too long for the JS regex engine is one clear line, from encode and encodeAsync", { skip: skipWithoutShared("hf-oracle/gpt2-tiny") }, async () => {
  // 10M "中" with no space is one match of `(?: ?[\u4e00-\u9fa5])+`: V8's backtracking stack runs out
  // in RegExp.exec, which threw a bare "RangeError: Maximum call stack size exceeded" (3M characters
  // pass). (llama.cpp's pre-tokenizers' patterns, and a tokenizer.json's of their shapes in any
  // spelling, ` ?[\u4e00-\u9fa5]+` among them, are searched a window at a time now; a repeated group
  // is still one search.)
  const dir = mkdtempSync(join(tmpdir(), "tsllm-long-word-"));
  try {
    const tj = JSON.parse(readFileSync(join(SHARED, "hf-oracle", "gpt2-tiny", "tokenizer.json"), "utf8")) as Record<string, unknown>;
    tj.pre_tokenizer = {
      type: "Sequence",
      pretokenizers: [
        { type: "Split", pattern: { Regex: "(?: ?[\\u4e00-\\u9fa5])+" }, behavior: "Isolated", invert: false },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    };
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tj));
    const tok = tokenizerFromFolder(dir);
    const text = "中".repeat(10_000_000);
    const clear = /^a pre-tokenizer match from character 0 of a 10000000-character piece of the text is too long for the JS regex engine \(Maximum call stack size exceeded\); put spaces or newlines in it$/;
    assert.throws(() => tok.encode(text), (e: Error) => !(e instanceof RangeError) && clear.test(e.message));
    await assert.rejects(tok.encodeAsync(text), (e: Error) => !(e instanceof RangeError) && clear.test(e.message));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
