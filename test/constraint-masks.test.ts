import assert from "node:assert/strict";
import { test } from "node:test";
import { loadTokenizer } from "../src/index.js";
import { createSampler } from "../src/sampling/index.js";
import { ConstraintVocabulary, compileConstraint, parseGbnf, TokenConstraint, type ConstraintSpec, type Grammar } from "../src/sampling/constraints/index.js";
import { BytePrefixOracle, constraintPieces } from "./helpers/constraint-texts.js";
import { rng as seeded } from "./helpers/rng.js";
import { sharedFile } from "./helpers/shared.js";

/*
 * The masks of constrained decoding (a walk over the vocabulary's byte trie with parse states of
 * the grammar compiled to UTF-8 bytes, stepped by byte class) against a brute force that tries
 * every token's bytes from the parse of the text so far, running the grammar over code points
 * with a partial-UTF-8 state as llama.cpp does (test/helpers/constraint-texts.ts): on a made-up
 * vocabulary with the characters grammars care about and pieces of characters, and on real ones
 * from ../shared. Every grammar is compiled anew, so the first mask of each position is computed
 * with every cache cold, as a schema's first request.
 */

const END = 0;

/** a vocabulary of JSON's awkward pieces: quotes, escapes, digits, signs, whitespace runs, words, other scripts, astral characters */
const MADE_UP: (string | undefined)[] = [
  undefined, // END
  undefined, // a token never allowed (special, or a byte piece)
  ...'{ } [ ] , : " \\ / - + . e E 0 1 2 9 a b n t u x _ é 中 😀'.split(" "),
  " ", "  ", "\n", "\n  ", "\t", " \t", "\r",
  '{"', '":', '", "', '"}', '"]', "},", "],", ": ", ", ", '\\"', "\\\\", "\\n", "\\u", "\\u00", "00e9", '\\"x', 'a\\', 'ab"', '"a', 'a"b',
  "12", "120", "007", "-1", "1.", "1.5", ".5", "1e", "e+", "E-3", "-0", "99", "0,", "1]", "2}", "3,\n",
  "name", '"name"', '"name":', "age", "pets", "cat", "dog", '"cat"', ' "dog"', "cats", "nam", "true", "false", "null", "tru", "nul",
  "ab", "abc", "hello", " world", "abcdefghijklmnopqrstuvwxyz", "Zebra", "x1", "中文", "é😀", "😀😀",
  "2026", "-12-", "01T", ":30:", "Z", "AB", "-", "4f", "c0ffee",
];

/**
 * Pieces of characters, as byte-fallback and byte-level vocabularies have them: the bytes of
 * 中 (E4 B8 AD), 😀 (F0 9F 98 80), é (C3 A9), 東 (E6 9D B1) one by one and in runs, a piece that
 * ends a character and starts the next, ASCII before a lead byte, and bytes no UTF-8 text has
 * (C0, FF, a surrogate's ED A0, F5)
 */
const BYTE_PIECES: number[][] = [
  [0xe4], [0xb8], [0xad], [0xf0], [0x9f], [0x98], [0x80], [0xc3], [0xa9], [0xe6], [0x9d], [0xb1],
  [0xe6, 0x9d], [0x9d, 0xb1], [0xb8, 0xad, 0x22], [0x61, 0xe4], [0x22, 0xf0, 0x9f], [0xad, 0xe6], [0x20, 0xc3],
  [0xc0], [0xff], [0xed, 0xa0], [0xf5], [0xf4, 0x90],
];

const utf8 = new TextEncoder();
const MADE_UP_PIECES: (Uint8Array | undefined)[] = [...MADE_UP.map((t) => (t === undefined ? undefined : utf8.encode(t))), ...BYTE_PIECES.map((b) => Uint8Array.from(b))];

const SCHEMAS: ConstraintSpec[] = [
  { jsonSchema: { type: "object", properties: { name: { type: "string", maxLength: 24 }, age: { type: "integer", minimum: 0, maximum: 120 }, pets: { type: "array", items: { enum: ["cat", "dog"] }, maxItems: 4 } }, required: ["name", "age", "pets"] } },
  { jsonSchema: { type: "object", properties: { p: { type: "number", minimum: -1.5, maximum: 20 }, n: { type: "number" }, ok: { type: "boolean" }, when: { type: "string", format: "date-time" } }, required: ["p", "n"] } },
  { jsonSchema: { type: "array", items: { anyOf: [{ type: "string", pattern: "^[a-c]+\\d?$" }, { type: "null" }, { type: "integer", exclusiveMinimum: -3 }] }, minItems: 1, maxItems: 3 } },
  { jsonSchema: { type: "object", properties: { id: { type: "string", format: "uuid" }, tags: { type: "array", items: { type: "string", minLength: 2, maxLength: 3 } } }, required: ["id"] } },
  { json: "value" },
  { grammar: 'root ::= "{\\"n\\": " [0-9]{1,3} ", \\"s\\": \\"" [a-z ]{0,12} "\\"}"' },
  { grammar: "root ::= (expr \"\\n\")+\nexpr ::= term ([-+*/] term)*\nterm ::= [0-9]+ | \"(\" expr \")\" | [a-z]+" },
  { regex: "[A-Z][a-z]{2,8} \\d{1,3}(\\.\\d+)?" },
  { choice: ["cat", "cats", "dog", "中文 😀"] },
];

/** every token id allowed after `text` (bytes), by trying each token's bytes from the parse of `text` */
function bruteForce(grammar: Grammar, pieces: readonly (Uint8Array | undefined)[], endIds: ReadonlySet<number>, text: readonly number[]): Set<number> {
  const oracle = new BytePrefixOracle(grammar);
  const from = oracle.parse(text);
  assert.ok(from, `the test's own text ${show(text)} is refused`);
  const allowed = new Set<number>();
  pieces.forEach((p, id) => {
    if (endIds.has(id)) {
      if (BytePrefixOracle.complete(from)) allowed.add(id);
    } else if (p !== undefined && oracle.extend(from, p)) allowed.add(id);
  });
  return allowed;
}

/** bytes shown as text, with a piece of a character in hex */
function show(bytes: ArrayLike<number> | undefined): string {
  if (bytes === undefined) return "(never allowed)";
  const text = new TextDecoder("utf-8", { fatal: false }).decode(Uint8Array.from(bytes));
  return text.includes("\uFFFD") ? `<${Array.from(bytes, (b) => b.toString(16)).join(" ")}>` : JSON.stringify(text);
}

/** the constraint's mask as a set of ids, checked against allows() for every token; the row is longer than the vocabulary, as padded model rows are */
function maskOf(c: TokenConstraint, size: number): Set<number> {
  const logits = new Float32Array(size + 7).fill(1);
  const any = c.mask(logits);
  const allowed = new Set<number>();
  logits.forEach((v, id) => {
    if (v === 1) allowed.add(id);
    else assert.equal(v, -Infinity, `token ${id}: the mask wrote ${v}`);
  });
  assert.equal(any, allowed.size > 0);
  for (let id = 0; id < size; id++) assert.equal(c.allows(id), allowed.has(id), `allows(${id}) disagrees with the mask`);
  return allowed;
}

function assertSameSet(got: Set<number>, want: Set<number>, pieces: readonly (Uint8Array | undefined)[], where: string): void {
  const extra = [...got].filter((id) => !want.has(id)), missing = [...want].filter((id) => !got.has(id));
  const list = (ids: number[]) => ids.slice(0, 8).map((id) => `#${id} ${show(pieces[id])}`).join(" ");
  assert.ok(extra.length === 0 && missing.length === 0, `${where}: allowed but refused by brute force: ${list(extra)}; refused but allowed by brute force: ${list(missing)}`);
}

/**
 * Random walks under each constraint (tokens drawn from the allowed ones, the end taken at times
 * where allowed), comparing the mask to brute force at every step, the first included; each
 * walk's grammar is new, so its masks are computed cold.
 */
function walkAndCompare(pieces: readonly (Uint8Array | undefined)[], vocab: ConstraintVocabulary, endIds: ReadonlySet<number>, specs: readonly ConstraintSpec[], walks: number, steps: number, seed: number): void {
  const rng = seeded(seed);
  for (const [i, spec] of specs.entries()) {
    for (let w = 0; w < walks; w++) {
      const grammar = compileConstraint(spec);
      const c = new TokenConstraint(grammar, vocab, endIds);
      const text: number[] = [];
      for (let step = 0; step < steps; step++) {
        const where = `constraint ${i}, walk ${w}, after ${show(text)}`;
        const got = maskOf(c, pieces.length);
        assertSameSet(got, bruteForce(grammar, pieces, endIds, text), pieces, where);
        const ids = [...got];
        if (ids.length === 0) break;
        // short tokens now and then, so the walk stops at every depth of strings and numbers (and inside characters)
        const pick = rng() < 0.3 ? ids.filter((id) => (pieces[id]?.length ?? 0) <= 1) : ids;
        const id = (pick.length > 0 ? pick : ids)[Math.floor(rng() * (pick.length > 0 ? pick : ids).length)]!;
        if (endIds.has(id)) break;
        c.accept(id);
        text.push(...pieces[id]!);
      }
    }
  }
}

test("masks equal a brute force over every token, at every step of random walks, on a vocabulary of JSON's awkward pieces", () => {
  walkAndCompare(MADE_UP_PIECES, ConstraintVocabulary.fromBytes(MADE_UP_PIECES), new Set([END]), SCHEMAS, 6, 40, 7);
});

test("masks at chosen positions (the first step, mid-string, mid-escape, mid-number, mid-key) equal brute force, each position's mask the first the grammar computes", () => {
  const endIds = new Set([END]);
  const cases: [ConstraintSpec, string[]][] = [
    [SCHEMAS[0]!, ["", "{", '{"na', '{"name"', '{"name": "', '{"name": "ab', '{"name": "ab\\', '{"name": "ab\\u00', '{"name": "abcdefghijklmnopqrstuvw', '{"name": "x", "age": 1', '{"name": "x", "age": 12', '{"name": "x", "age": 0', '{"name": "x", "age": 120, "pets": ["c', '{"name": "x", "age": 3, "pets": []}']],
    [SCHEMAS[1]!, ['{"p": -', '{"p": 1', '{"p": 1.', '{"p": 19.9', '{"p": 20', '{"p": 2, "n": 1e', '{"p": 2, "n": -0.5E+', '{"p": 2, "n": 3, "ok": tr', '{"p": 2, "n": 3, "when": "2026-', '{"p": 2, "n": 3, "when": "2026-01-02T10:3']],
    [SCHEMAS[2]!, ["[", '["ab', '["ab1', "[-", "[-2", "[nu", '["a", 7, ']],
    [{ grammar: 'root ::= "a"+ "b"? [0-9]{2,4}' }, ["", "a", "aab", "ab1", "a12", "a1234"]],
  ];
  // every character of the positions a token of its own too, so each position is reached exactly
  const texts = [...MADE_UP, ...new Set(cases.flatMap(([, ps]) => ps.flatMap((p) => [...p])).filter((ch) => !MADE_UP.includes(ch)))];
  const pieces = [...texts.map((t) => (t === undefined ? undefined : utf8.encode(t))), ...BYTE_PIECES.map((b) => Uint8Array.from(b))];
  const vocab = ConstraintVocabulary.fromBytes(pieces);
  for (const [spec, positions] of cases) {
    for (const text of positions) {
      // a grammar of its own per position: its mask is computed with nothing cached
      const grammar = compileConstraint(spec);
      const c = new TokenConstraint(grammar, vocab, endIds);
      for (const ch of text) c.accept(texts.indexOf(ch));
      assertSameSet(maskOf(c, pieces.length), bruteForce(grammar, pieces, endIds, [...utf8.encode(text)]), pieces, `${JSON.stringify(spec).slice(0, 60)} after ${JSON.stringify(text)}`);
    }
  }
});

test("a mask after a grammar is complete lets exactly the end-of-generation tokens through, and none before", () => {
  const vocab = ConstraintVocabulary.fromTexts(MADE_UP);
  const c = new TokenConstraint(parseGbnf('root ::= "ab" "x"?'), vocab, new Set([END]));
  assert.ok(!maskOf(c, MADE_UP.length).has(END));
  c.accept(MADE_UP.indexOf("ab"));
  const after = maskOf(c, MADE_UP.length);
  assert.ok(after.has(END) && c.complete);
  assert.deepEqual([...after].filter((id) => id !== END).map((id) => MADE_UP[id]), ["x"]);
});

test("greedy choose() takes the best token brute force allows, whether it tries tokens one by one (a state's first visit) or applies a mask made before", () => {
  const vocab = ConstraintVocabulary.fromBytes(MADE_UP_PIECES);
  const endIds = new Set([END]);
  const rng = seeded(5);
  const sampler = createSampler({ temperature: 0 });
  for (const spec of [SCHEMAS[0]!, SCHEMAS[5]!]) {
    const grammar = compileConstraint(spec);
    // the same walk twice: the second time every state's mask is made
    for (let pass = 0; pass < 2; pass++) {
      const c = new TokenConstraint(grammar, vocab, endIds);
      const walk = seeded(9);
      const text: number[] = [];
      for (let step = 0; step < 30; step++) {
        const logits = Float32Array.from(MADE_UP_PIECES, () => rng());
        const allowed = bruteForce(grammar, MADE_UP_PIECES, endIds, text);
        let best = -1;
        for (const id of allowed) if (best < 0 || logits[id]! > logits[best]!) best = id;
        assert.equal(c.choose(Float32Array.from(logits), sampler, []), best, `pass ${pass}, after ${show(text)}`);
        // go on by a token of the walk's own, so both passes meet the same states
        const ids = [...allowed].filter((id) => !endIds.has(id));
        if (ids.length === 0) break;
        const id = ids[Math.floor(walk() * ids.length)]!;
        c.accept(id);
        text.push(...MADE_UP_PIECES[id]!);
      }
    }
  }
});

for (const name of ["starcoder", "llama-spm", "deepseek-llm"]) {
  const file = sharedFile(`tokenizer-tests/ggml-vocab-${name}.gguf`);
  test(`masks equal a brute force over all tokens of ${name}'s real vocabulary, at every step of random walks under JSON Schemas and grammars`, { skip: file ? false : `../shared/tokenizer-tests/ggml-vocab-${name}.gguf not found` }, async () => {
    const tok = await loadTokenizer(file!);
    walkAndCompare(constraintPieces(tok), ConstraintVocabulary.of(tok), tok.endOfGenerationIds, [SCHEMAS[0]!, SCHEMAS[1]!, SCHEMAS[2]!, SCHEMAS[4]!, SCHEMAS[7]!], 1, name === "deepseek-llm" ? 8 : 16, 11);
  });
}
