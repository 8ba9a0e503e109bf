import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { hfFolders, hfVariantFolders } from "../scripts/tokenizer-diff.js";
import { normalizeChunk } from "../src/tokenizer/hf/fast-encoder.js";
import { tokenizerFromFolder, type HFTokenizer } from "../src/tokenizer/hf/index.js";
import { SHARED, sharedFile, skipWithoutShared } from "./helpers/shared.js";

/*
 * encodeAsync normalizes a long tokenizer.json section a chunk per slice, cut before a character
 * each normalizer step allows a cut before (fast-encoder.ts, CutBefore: a space, a newline, an
 * ideograph, a digit, a letter where no step lowercases...), where the normalizer is one whose
 * chunks' results join into the whole's. Judge: encode(), which normalizes each section whole (and
 * is judged against @huggingface/tokenizers in tokenizer-hf-fast.test.ts), and the library itself
 * on long unbroken text. The chunk size is set to a few characters here so that nearly every place
 * allowed is a cut.
 */
const work = mkdtempSync(join(tmpdir(), "tsllm-normalize-chunks-"));
after(() => rmSync(work, { recursive: true, force: true }));
const VECTORS = ["llama-spm", "phi-3", "gpt-2", "starcoder", "deepseek-llm", "bert-bge"].map((v) => `tokenizer-tests/ggml-vocab-${v}.gguf.inp`);
const skipVectors = VECTORS.map((v) => skipWithoutShared(v)).find((s) => s !== false) ?? false;
const folders = hfFolders(SHARED);

/** a real folder's tokenizer.json with another normalizer */
function withNormalizer(name: string, base: string | undefined, normalizer: unknown): [string, string] | undefined {
  if (base === undefined) return undefined;
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  const tj = JSON.parse(readFileSync(join(base, "tokenizer.json"), "utf8")) as Record<string, unknown>;
  tj.normalizer = normalizer;
  writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tj));
  writeFileSync(join(dir, "tokenizer_config.json"), readFileSync(join(base, "tokenizer_config.json")));
  return [name, dir];
}
const gpt2 = folders.get("gpt2-tiny");
const extra = [
  withNormalizer("gpt2-nfd-lowercase", gpt2, { type: "Sequence", normalizers: [{ type: "NFD" }, { type: "Lowercase" }] }),
  withNormalizer("gpt2-nfkc-lowercase-replace", gpt2, { type: "Sequence", normalizers: [{ type: "NFKC" }, { type: "Lowercase" }, { type: "Replace", pattern: { String: "x" }, content: "\u0301" }] }),
  withNormalizer("gpt2-prepend-nfc", gpt2, { type: "Sequence", normalizers: [{ type: "Prepend", prepend: "\u0301" }, { type: "NFC" }] }),
  withNormalizer("gpt2-bert-all", gpt2, { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: true, lowercase: true }),
  withNormalizer("gpt2-nfkc", gpt2, { type: "NFKC" }),
  withNormalizer("gpt2-nfd-replace-pair", gpt2, { type: "Sequence", normalizers: [{ type: "NFD" }, { type: "Replace", pattern: { String: "ab" }, content: "\u0301" }, { type: "NFC" }] }),
].filter((e) => e !== undefined);
const tokenizers = [...folders, ...hfVariantFolders(work, folders), ...extra];

/** texts whose normalization reaches across a space or newline if anything does */
const ADVERSARIAL = [
  // combining marks after a cut, a decomposable character before and after one
  "e \u0301x \u0301\u0327 a\u0301 \u00e9 \u00e9\u0301 \n\u0301\u0308 A\u030a \u212b \u1e9b\u0323 \u0071\u0307\u0323",
  // Hangul: syllables, conjoining jamo split by a cut, an LV syllable and a trailing jamo
  "\u1100 \u1161 \u1100\u1161 \u11a8 \uac00 \u11a8 \uac00\u11a8 \u1100\n\u1161\u11a8 \ud55c\uad6d\uc5b4",
  // compatibility forms: NFKC of U+00A8 and U+037A start with a space; ligatures, full width
  "x\u00a8 \u00a8y \u037a \ufc5e \ufb01 \ufb02 \uff21\uff22\uff23 \uff11\uff12 \u2460 \u3000\u3000 \u2126",
  // CRLF and other line ends, runs of spaces and tabs
  "a\r\nb\r\n\r\n c \r \n\n\t\t  d\u2028e\u0085f  \r\n",
  // final sigma: before and after a space, newline, apostrophe, period, a combining mark
  "\u0391\u03a3'\u0391 \u0391\u03a3.\u0391 \u03a3 \u0391\u03a3 \u0391\u03a3\n\u03a3\u0391 \u0391\u03a3' \u03a3 \u0391\u03a3. \u0391\u03a3\u0301 x \u0130 \u0130\u0307 \u1e9e",
  // BERT: accents to strip, CJK to space, controls to drop, white space to turn into spaces
  "Caf\u00e9 NA\u00cfVE \u00c9cole \u4e2d\u6587 \u5b57\n\u6f22\u5b57\u3400 \uf900 \u0001 \u0000x\u00ad\u200b \ufffd\u000b\u000c 😀 \ud83d\ude00\u0301 \ud800 \udc00",
  // no space or newline at all: half-width kana and its voiced mark (NFKC: one kana), compatibility
  // jamo (NFKC: conjoining, which compose), the lunate sigma (NFKC: Σ), Indic vowel signs that
  // compose with the letter before, Σ between letters, digits and ideographs
  "\uff76\uff9e\uff8a\uff9f\u3131\u314f\u3131\u314f\u11a8\u0b47\u0b3e\u09c7\u09be\u0dd9\u0dcf\u1025\u102e\u0391\u03f9\u0391\u03a3\u0031\u03a3\u4e2d\u03a3'\u0301\u0391\u03a3\u0301\u4e2dab\u0301aab\u00e9\u0301\u1100\u1161\u11a8",
];

/** encodeAsync's ids with a chunk size of `chars` */
async function chunked(tok: HFTokenizer, text: string, chars: number, options: { parseSpecial?: boolean; addSpecialTokens?: boolean } = {}): Promise<number[]> {
  const before = normalizeChunk.chars;
  normalizeChunk.chars = chars;
  try {
    return await tok.encodeAsync(text, options);
  } finally {
    normalizeChunk.chars = before;
  }
}

test("encodeAsync normalizing in chunks gives encode()'s ids on the HF tokenizer vectors and texts built around the cuts", { skip: skipVectors }, async () => {
  const vectors = VECTORS.flatMap((v) => readFileSync(sharedFile(v)!, "utf8").split("\n__ggml_vocab_test__\n"));
  // every adversarial piece with each amount of padding, so that a cut lands at every spot of it
  const shifted = ADVERSARIAL.flatMap((t) => [0, 1, 2, 3].map((pad) => "\u00e9 ".repeat(pad) + t + t.toUpperCase()));
  // and with every space and newline taken out: cuts only where no space is near
  shifted.push(...shifted.map((t) => t.replace(/[ \n]/g, "")));
  const whole = [vectors.join("\n"), ADVERSARIAL.join(" "), shifted.join("\n")];
  let compared = 0;
  for (const [name, dir] of tokenizers) {
    const tok = await tokenizerFromFolder(dir);
    for (const text of [...vectors, ...shifted, ...whole]) {
      for (const chars of [1, 5]) {
        for (const options of [{}, { parseSpecial: false }]) {
          const want = tok.encode(text, options);
          const got = await chunked(tok, text, chars, options);
          assert.deepEqual(got, want, `${name}, chunks of ${chars}, ${JSON.stringify(options)}: ${JSON.stringify(text.slice(0, 80))}`);
          compared++;
        }
      }
    }
  }
  assert.ok(tokenizers.length >= 15 && compared > 10_000, `${compared} texts compared over ${tokenizers.length} tokenizers`);
});

test("a long section that normalizes to an added token is that token, normalized in chunks too", { skip: skipWithoutShared("hf-oracle/gpt2-tiny") }, async () => {
  // the library's rule: a whole section whose normalized text is an added token's is that token
  const dir = join(work, "gpt2-lowercase-added");
  mkdirSync(dir, { recursive: true });
  const tj = JSON.parse(readFileSync(join(gpt2!, "tokenizer.json"), "utf8")) as { normalizer: unknown; added_tokens: object[]; model: { vocab: object } };
  tj.normalizer = { type: "Lowercase" };
  const id = Object.keys(tj.model.vocab).length + tj.added_tokens.length;
  tj.added_tokens.push({ id, content: "hello big world", single_word: false, lstrip: false, rstrip: false, normalized: false, special: false });
  writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tj));
  writeFileSync(join(dir, "tokenizer_config.json"), readFileSync(join(gpt2!, "tokenizer_config.json")));
  const tok = await tokenizerFromFolder(dir);
  for (const text of ["HELLO BIG WORLD", "Hello Big World", "HELLO BIG WORLDS"]) {
    const want = tok.encode(text, { addSpecialTokens: false });
    assert.deepEqual(await chunked(tok, text, 2, { addSpecialTokens: false }), want, text);
    assert.equal(want.length === 1 && want[0] === id, !text.endsWith("S"), `${text}: ${JSON.stringify(want)}`);
  }
});

/** the ids of `text` encoded `chars` characters at a time, and how often the event loop turned meanwhile */
async function idsAndTurns(tok: HFTokenizer, text: string, chars: number): Promise<[number[], number]> {
  let turns = 0, done = false;
  const turn = () => { turns++; if (!done) setImmediate(turn); };
  setImmediate(turn);
  const ids = await chunked(tok, text, chars);
  done = true;
  return [ids, turns];
}

test("encodeAsync lets the event loop turn while it normalizes a long section (BertNormalizer)", { skip: skipWithoutShared("hf-oracle/bert-uncased-sst") }, async () => {
  // 1M characters that clean_text turns into 1000 spaces: no words, the normalizing is the work
  const text = `${"\u0001".repeat(999)} `.repeat(1000);
  const tok = await tokenizerFromFolder(folders.get("bert-uncased-sst")!);
  const [wholeIds, wholeTurns] = await idsAndTurns(tok, text, Infinity); // the section normalized in one go: only the special-token scan turns
  const [ids, turns] = await idsAndTurns(tok, text, normalizeChunk.chars);
  assert.deepEqual(ids, tok.encode(text));
  assert.deepEqual(wholeIds, ids);
  assert.ok(turns >= wholeTurns + 10, `${turns} turns normalizing in chunks, ${wholeTurns} normalizing whole`);
});

/** a Chinese novel's paragraphs with their white space taken out, repeated to `chars` characters */
function unbrokenChinese(chars: number): string {
  const zh = readFileSync(sharedFile("text/hongloumeng-300k.txt")!, "utf8").slice(0, 40_000).replace(/\s+/g, "");
  return zh.repeat(Math.ceil(chars / zh.length)).slice(0, chars);
}

test("encodeAsync lets the event loop turn while it normalizes a long section with no space or newline (BertNormalizer: Chinese, letters)", { skip: skipWithoutShared("hf-oracle/bert-chinese-base") || skipWithoutShared("text/hongloumeng-300k.txt") }, async () => {
  // bert-base-chinese on a megabyte of a novel without white space, and a megabyte-long "word" of
  // letters and digits: before, each was normalized in one go (no " " or "\n" to cut before)
  const tok = await tokenizerFromFolder(folders.get("bert-chinese-base")!);
  for (const text of [unbrokenChinese(1_000_000), "a1b2c3d4".repeat(125_000)]) {
    const [wholeIds, wholeTurns] = await idsAndTurns(tok, text, Infinity);
    const [ids, turns] = await idsAndTurns(tok, text, normalizeChunk.chars);
    assert.deepEqual(ids, tok.encode(text));
    assert.deepEqual(wholeIds, ids);
    assert.ok(turns >= wholeTurns + 10, `${JSON.stringify(text.slice(0, 8))}: ${turns} turns normalizing in chunks, ${wholeTurns} normalizing whole`);
  }
});

test("long sections with no space or newline normalized in chunks give @huggingface/tokenizers' ids", { skip: skipWithoutShared("text/hongloumeng-300k.txt") }, async () => {
  // the library (libraryOnly) encodes each text whole; tsllm a chunk of 64 characters at a time
  const texts = [unbrokenChinese(20_000), ADVERSARIAL.map((t) => t.replace(/[ \n]/g, "")).join("").repeat(40), "Ab1\u00e9\u0301\u03a3".repeat(3000), "Ab,c\u0301\u00e9-x".repeat(3000)];
  const names = ["bert-chinese-base", "bert-uncased-sst", "gpt2-nfkc", "gpt2-bert-all", "gpt2-nfd-replace-pair", "gpt2-nfkc-lowercase-replace"];
  let compared = 0;
  for (const [name, dir] of tokenizers.filter(([n]) => names.includes(n))) {
    const tok = await tokenizerFromFolder(dir), ref = await tokenizerFromFolder(dir, { libraryOnly: true });
    assert.notEqual(tok.encoder, "library", name);
    for (const text of texts) {
      assert.deepEqual(await chunked(tok, text, 64), ref.encode(text), `${name}: ${JSON.stringify(text.slice(0, 40))}`);
      compared++;
    }
  }
  assert.equal(compared, names.length * texts.length);
});

test("encodeAsync splits and encodes a megabyte-long run between white space across slices (BertPreTokenizer + WordPiece)", { skip: skipWithoutShared("hf-oracle/bert-uncased-sst") }, async () => {
  // normalized whole (chunk size Infinity), so that the turns counted are the word's: before, the
  // run's punctuation split and WordPiece went in one step (the event loop turned once or twice)
  const tok = await tokenizerFromFolder(folders.get("bert-uncased-sst")!);
  for (const text of ["Ab,c\u0301\u00e9-x".repeat(125_000), "a1-".repeat(300_000)]) {
    let turns = 0, done = false;
    const turn = () => { turns++; if (!done) setImmediate(turn); };
    setImmediate(turn);
    const ids = await chunked(tok, text, Infinity, { parseSpecial: false });
    done = true;
    assert.deepEqual(ids, tok.encode(text, { parseSpecial: false }));
    assert.ok(turns >= 10, `${JSON.stringify(text.slice(0, 8))}: the event loop turned ${turns} times`);
  }
});
