import assert from "node:assert/strict";
import { readFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { after, before, test } from "node:test";
import { Ajv } from "ajv";
import { Ajv2020 } from "ajv/dist/2020.js";
import { checkSchema, makeAjv, randomRootSchema } from "../scripts/json-schema-diff.js";
import { Rng } from "../src/testing/rng.js";
import { loadModel, type Model } from "../src/index.js";
import { anyJsonGbnf, GrammarMatcher, jsonSchemaToGbnf, parseGbnf, regexToGbnf, type Grammar, type JsonSchema } from "../src/sampling/constraints/index.js";
import { matchesChar } from "../src/sampling/constraints/grammar.js";
import { cachedUnicodeProperties } from "../src/sampling/constraints/regex.js";
import { utf8Grammar } from "../src/sampling/constraints/utf8-grammar.js";
import { tinyQwen2, writeRandomModel } from "../src/testing/index.js";
import { constraintTexts } from "./helpers/constraint-texts.js";
import { llamaCppGrammarCases, llamaCppSchemaConversions } from "./helpers/llama-cpp-grammar-cases.js";
import { skipWithoutLlamaCppTemplates } from "./helpers/llama-cpp-templates.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

/*
 * Constrained decoding: the GBNF engine on llama.cpp's own example grammars, JSON Schema outputs
 * checked by an independent validator (ajv), and greedy decoding under a grammar against a
 * brute-force reference that tries every token of the vocabulary at every step.
 */

const GRAMMARS = new URL("../node_modules/node-llama-cpp/llama/grammars/", import.meta.url);
const grammarFile = (name: string) => readFileSync(new URL(name, GRAMMARS), "utf8");

/** the grammar's stacks after `text`, or undefined once a character is refused */
function parseState(grammar: Grammar, text: string): ReturnType<GrammarMatcher["initial"]> | undefined {
  const m = new GrammarMatcher(grammar);
  let stacks = m.initial();
  for (const ch of text) {
    stacks = m.advance(stacks, ch.codePointAt(0)!);
    if (stacks.length === 0) return undefined;
  }
  return stacks;
}

/** whether `text` is a whole sentence of the grammar */
function accepts(grammar: Grammar, text: string): boolean {
  const stacks = parseState(grammar, text);
  return stacks !== undefined && GrammarMatcher.complete(stacks);
}

/** whether `text` can still be continued into a sentence of the grammar */
const isPrefix = (grammar: Grammar, text: string): boolean => parseState(grammar, text) !== undefined;

test("llama.cpp's example grammars parse, and accept and reject what their rules say", () => {
  for (const f of ["arithmetic.gbnf", "c.gbnf", "chess.gbnf", "english.gbnf", "japanese.gbnf", "json.gbnf", "json_arr.gbnf", "list.gbnf"]) {
    const g = parseGbnf(grammarFile(f));
    assert.ok(g.rules.length > 1, f);
  }
  const cases: [string, string, boolean][] = [
    ["json.gbnf", '{"a": [1, 2.5, "x\\n"], "b": {"c": null}}', true],
    ["json.gbnf", "{}", true],
    ["json.gbnf", '{"a": 1,}', false],
    ["json.gbnf", "[1]", false], // its root is an object
    ["json.gbnf", '{"a": tru}', false],
    ["json_arr.gbnf", '[\n{"a": 1},\n{"b": [true]}]', true],
    ["json_arr.gbnf", '[{"a": 1}]', false], // its root array opens with "[\n"

    ["arithmetic.gbnf", "1+2=3\n", true],
    ["arithmetic.gbnf", "(a+b)*c = x1\n", true],
    ["arithmetic.gbnf", "1+=2\n", false],
    ["chess.gbnf", "1. e4 e5\n2. Nf3 Nc6\n", true],
    ["chess.gbnf", "1. e9 e5\n", false],
    ["list.gbnf", "- milk\n- eggs\n", true],
    ["list.gbnf", "-milk\n", false],
  ];
  for (const [f, text, want] of cases) assert.equal(accepts(parseGbnf(grammarFile(f)), text), want, `${f}: ${JSON.stringify(text)}`);
});

test("GBNF sugar: strings, classes, groups, . and every repetition form; errors name the line and column", () => {
  const g = parseGbnf('root ::= "ab"{2} [x-z]+ ( "-" | "+" )? .{1,3} tail\ntail ::= [^a-c]*  # a comment\n');
  for (const [text, want] of [["ababx-!", true], ["ababxyz+!!!", true], ["abx!", false], ["ababxx!!!!", true], ["ababx", false], ["ababxQ", true]] as const) {
    assert.equal(accepts(g, text), want, text);
  }
  const bad: [string, RegExp][] = [
    ["root ::= foo", /line 1, column 10: rule foo is used but never defined/],
    ['root ::= "abc', /unterminated string/],
    ["root ::= [a-", /unterminated character class|line 1/],
    ["root ::= * a", /"\*" has nothing to repeat/],
    ['root ::= "a"{3,1}', /the maximum is below the minimum/],
    ['x ::= "a"', /no root rule/],
    ['root ::= "a"\nroot ::= "b"', /line 2, column 1: rule root is defined twice/],
    ['root ::= "\\q"', /unknown escape \\q/],
  ];
  for (const [src, re] of bad) assert.throws(() => parseGbnf(src), re, src);
  assert.throws(() => new GrammarMatcher(parseGbnf('root ::= root "a" | "b"')).initial(), /left recursion/);
});

/** ajv with the one format the schemas use (ajv itself knows none) */
const newAjv = () => new Ajv({ formats: { date: /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/ } });

test("JSON Schema to GBNF: what validates is accepted and what does not is refused", () => {
  const ajv = newAjv();
  const schema = {
    type: "object",
    properties: { name: { type: "string", maxLength: 5 }, age: { type: "integer" }, tags: { type: "array", items: { enum: ["a", "b"] }, minItems: 1, maxItems: 2 }, day: { type: "string", format: "date" } },
    required: ["name", "tags"],
    additionalProperties: false,
  };
  const g = parseGbnf(jsonSchemaToGbnf(schema));
  const validate = ajv.compile(schema);
  for (const text of ['{"name": "bob", "tags": ["a"]}', '{"name": "bob", "age": -3, "tags": ["a", "b"]}', '{"name": "bob", "tags": ["a"], "day": "2026-12-01"}',
    '{"name": "bobby!", "tags": ["a"]}', '{"name": "bob"}', '{"tags": ["a"]}', '{"name": "bob", "tags": []}', '{"name": "bob", "tags": ["a", "b", "a"]}', '{"name": "bob", "tags": ["c"]}',
    '{"name": "bob", "tags": ["a"], "extra": 1}', '{"name": "bob", "age": 1.5, "tags": ["a"]}']) {
    // the grammar fixes the property order to the schema's: every text here is in that order
    assert.equal(accepts(g, text), validate(JSON.parse(text)) as boolean, text);
  }
  const defs = { $defs: { node: { type: "object", properties: { v: { type: "integer" }, next: { anyOf: [{ $ref: "#/$defs/node" }, { type: "null" }] } }, required: ["v", "next"] } }, $ref: "#/$defs/node" };
  const rg = parseGbnf(jsonSchemaToGbnf(defs));
  assert.ok(accepts(rg, '{"v": 1, "next": {"v": 2, "next": null}}'));
  assert.ok(!accepts(rg, '{"v": 1, "next": {"v": 2}}'));
  for (const [s, re] of [[{ type: "array", uniqueItems: true }, /#\/uniqueItems: true is supported only for items of a finite set of values/], [{ type: "string", pattern: "(?=a)" }, /#\/pattern: regex "\(\?=a\)", at 0: a lookahead \(\?=\.\.\.\) is not supported/], [{ type: "number", minimum: 3, exclusiveMaximum: 3 }, /#\/exclusiveMaximum: no number lies between the bounds/], [{ type: "integer", minimum: 5, maximum: 4 }, /#\/maximum: no integer lies between minimum 5 and maximum 4/],
    [{ $ref: "#/$defs/missing" }, /#\/\$ref: "#\/\$defs\/missing" does not point at a schema in this document/], [{ type: "thing" }, /#\/type: expected one of object/], [{ enum: [] }, /#\/enum: an empty enum/]] as const) {
    assert.throws(() => jsonSchemaToGbnf(s as JsonSchema), re);
  }
});

test("a regular expression as a grammar accepts exactly what JavaScript's RegExp matches (whole strings), also inside JSON strings", () => {
  const cases: [string, string[]][] = [
    ["^\\d{3}-\\d{4}$", ["555-1234", "55-1234", "555-12345", "abc-defg"]],
    ["(ab|cd)+x?", ["ab", "abcdx", "abc", "", "cdcdcd"]],
    ["[A-Z][a-z]*( [A-Z][a-z]*)*", ["John Smith", "john", "John  Smith", "A B C"]],
    ["[^aeiou]{2,3}", ["xyz", "xa", "x", "wxyz"]],
    ["a.c", ["abc", "a\nc", "a c"]],
    ["\\w+@\\w+\\.(com|org)", ["me@x.com", "me@x.org", "me@x.net", "@x.com"]],
    ["[\\dA-F]{2}(:[\\dA-F]{2}){0,2}", ["0A", "0A:FF:10", "0A:FF:10:11", "0g"]],
    ["x*?y+?", ["y", "xxyy", "x"]],
  ];
  for (const [re, texts] of cases) {
    const g = parseGbnf(`root ::= ${regexToGbnf(re)}`);
    const js = new RegExp(re.startsWith("^") ? re : `^(?:${re})$`);
    for (const t of texts) assert.equal(accepts(g, t), js.test(t), `${re} on ${JSON.stringify(t)}`);
  }
  // a JSON Schema pattern: the string's characters as JSON writes them, the match anywhere unless anchored
  const ajv = newAjv();
  for (const schema of [{ type: "string", pattern: "^[a-z]+\"?$" }, { type: "string", pattern: "ab" }]) {
    const g = parseGbnf(jsonSchemaToGbnf(schema));
    const validate = ajv.compile(schema);
    for (const v of ["abc", 'abc"', "xaby", "ba", 'ab"', "a\\b"]) assert.equal(accepts(g, JSON.stringify(v)), validate(v) as boolean, `${schema.pattern} on ${JSON.stringify(v)}`);
  }
  for (const [re, msg] of [["a(b", /an unterminated group/], ["(?=a)b", /lookarounds/], ["(a)\\1", /back references/], ["*a", /nothing to repeat/], ["a^b", /only supported at the start/],
    // bounds checked at the regex's own position, not a column of the GBNF it becomes
    ["ab{99999999}", /regex "ab\{99999999\}", at 2: \{99999999\}: repetition bounds above 10000$/], ["(ab){5,2}", /regex "\(ab\)\{5,2\}", at 4: \{5,2\}: the maximum is below the minimum$/]] as const) {
    assert.throws(() => regexToGbnf(re), msg, re);
  }
});

test("number ranges (minimum, maximum, exclusive bounds, fractions, negatives) accept exactly the numbers inside them, in every spelling without an exponent", () => {
  for (const schema of [{ type: "number", minimum: 0, maximum: 1 }, { type: "number", minimum: 0.25, exclusiveMaximum: 3.5 }, { type: "number", exclusiveMinimum: -2.5, maximum: 1.75 },
    { type: "number", minimum: -10, maximum: -0.125 }, { type: "number", exclusiveMinimum: 0.5 }, { type: "number", maximum: 2.05 }, { type: "number", minimum: 1.2, maximum: 1.25 },
    { type: "number", exclusiveMinimum: 0, maximum: 0.3 }, { type: "number", minimum: 3, maximum: 3 }, { type: "number", minimum: -0.5, exclusiveMaximum: 0 },
    { type: "number", minimum: 7, exclusiveMinimum: 7, maximum: 12.5, exclusiveMaximum: 12 }]) {
    const g = parseGbnf(jsonSchemaToGbnf(schema));
    const validate = newAjv().compile(schema);
    // every decimal with up to 2 fraction digits in [-15, 15], as JavaScript prints it and with trailing zeros
    for (let k = -1500; k <= 1500; k++) {
      const x = k / 100;
      const spellings = new Set([String(x), x.toFixed(2), x.toFixed(3)]);
      for (const text of spellings) if (text !== "-0" && !text.startsWith("-0.00")) assert.equal(accepts(g, text), validate(x) as boolean, `${JSON.stringify(schema)} on ${text}`);
    }
    assert.ok(!accepts(g, "1.") && !accepts(g, "01.5") && !accepts(g, ".5") && !accepts(g, "1e0"), JSON.stringify(schema));
  }
});

test("bounded numbers take fractions of 16 digits, as llama.cpp's decimal-part; an integer bound past 15 digits with the other side open compiles (found by scripts/fuzz-json-schema.ts)", () => {
  // llama.cpp's number: decimal-part [0-9]{1,16}; each text here validates under its schema (ajv)
  // (not 5.0000000000000001 under maximum 5: above 5 as a decimal, which the grammar reads, though the double it parses to is 5)
  agreesWithAjv({ type: "number", minimum: 3, maximum: 5 }, ["3.1234567890123456", "4.9999999999999991", "5.0000000000000000", "5.1", "2.9999999999999991"]);
  agreesWithAjv({ type: "number", exclusiveMinimum: -1, maximum: 0.5 }, ["-0.9999999999999991", "0.4999999999999999", "0.5000000000000011"]);
  // the open side was cut at 15 digits, below the given bound: a RangeError was thrown (no GrammarError naming the path), not a grammar
  agreesWithAjv({ type: "integer", exclusiveMaximum: -3485500259171777 }, ["-3485500259171778", "-9007199254740991", "-3485500259171777", "-5"]);
  agreesWithAjv({ type: "integer", minimum: 2000000000000000 }, ["2000000000000000", "9007199254740991", "1999999999999999", "7"]);
});

/** the double next to v, up or down (its bits, which order a double's magnitude) */
function nextDouble(v: number, up: boolean): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, v);
  if (v === 0) return up ? Number.MIN_VALUE : -Number.MIN_VALUE;
  view.setBigUint64(0, view.getBigUint64(0) + ((v > 0) === up ? 1n : -1n));
  return view.getFloat64(0);
}

test("bounded numbers are read as a validator reads them, as doubles: no text just past an exclusive bound that reads as the bound, no 0 under a tiny minimum; the doubles next to a bound as JavaScript prints them agree with ajv", () => {
  const ajv = makeAjv();
  const bounds = [0.1, 2.5, 7, -3, 1e-25, -1.5e-7, 123456789.123, 0.3];
  for (const b of bounds) {
    for (const schema of [{ type: "number", exclusiveMinimum: b }, { type: "number", exclusiveMaximum: b }, { type: "number", minimum: b }, { type: "number", maximum: b }]) {
      const g = parseGbnf(jsonSchemaToGbnf(schema));
      const validate = ajv.compile(schema);
      // the doubles around the bound, printed shortest: admitted exactly when valid (those below 1e-6 print an exponent, which bounded numbers are not written with)
      const near = [b];
      for (let k = 0, up = b, down = b; k < 3; k++) near.push((up = nextDouble(up, true)), (down = nextDouble(down, false)));
      for (const d of near) if (!String(d).includes("e")) assert.equal(accepts(g, String(d)), validate(d), `${JSON.stringify(schema)} on ${String(d)}`);
      // decimals a hair from the bound (past a double's precision): whatever is admitted validates
      const text = b.toFixed(Math.max(0, 20 - Math.max(0, Math.floor(Math.log10(Math.abs(b))) + 1)));
      const hair = [text, `${text}1`, text.replace(/0*$/, "").replace(/\.$/, "") + (text.includes(".") ? "000000000000000001" : ".000000000000000001"), "0", "-0", "0.0"];
      for (const t of hair) if (accepts(g, t)) assert.ok(validate(JSON.parse(t)), `${JSON.stringify(schema)} admits ${t}`);
    }
  }
  // the case that was admitted: 0.10000000000000001 is above 0.1 as a decimal, and reads as 0.1
  assert.equal(accepts(parseGbnf(jsonSchemaToGbnf({ type: "number", exclusiveMinimum: 0.1 })), "0.10000000000000001"), false);
  assert.equal(accepts(parseGbnf(jsonSchemaToGbnf({ type: "number", minimum: 1e-25 })), "0"), false);
});

test("multipleOf (an integer, as OpenAI's strict mode takes it) writes exactly the multiples of up to 15 digits; as a fraction it is refused naming the path", () => {
  for (const [type, k] of [["integer", 7], ["integer", 25], ["number", 3], ["integer", 250], ["integer", 1]] as const) {
    const schema = { type, multipleOf: k };
    const texts = Array.from({ length: 801 }, (_, i) => String(i - 400));
    agreesWithAjv(schema, [...texts, "-0", String(k * 123456789012), String(Math.floor(999999999999999 / k) * k)]);
    // past 15 digits a double is not exact (9007199254740993 reads as ...992): not written
    const g = parseGbnf(jsonSchemaToGbnf(schema));
    if (k > 1) assert.ok(!accepts(g, "9007199254740993") && !accepts(g, String(k) + "0".repeat(15)), JSON.stringify(schema));
    // random walks validate
    assert.deepEqual(checkSchema(schema, new Rng(k), makeAjv(), 40, 0).findings.map((f) => f.text), [], JSON.stringify(schema));
  }
  for (const [s, re] of [[{ type: "number", multipleOf: 0.5 }, /#\/multipleOf: expected an integer from 1 to 250, got 0.5/],
    [{ type: "integer", multipleOf: 1000 }, /#\/multipleOf: expected an integer from 1 to 250/]] as const) {
    assert.throws(() => jsonSchemaToGbnf(s as JsonSchema), re, JSON.stringify(s));
  }
});

test("multipleOf beside bounds (OpenAI's strict mode takes both) writes exactly the multiples within them, never -0 or a leading zero (it was refused: not supported together with minimum)", () => {
  const texts = [...Array.from({ length: 1201 }, (_, i) => String(i - 600)), "999999999999990", "-999999999999990", "999999999999750"];
  const schemas: object[] = [
    { type: "integer", multipleOf: 5, minimum: 0 },
    { type: "integer", multipleOf: 5, minimum: 0, maximum: 100 },
    { type: "integer", multipleOf: 7, exclusiveMinimum: -50, exclusiveMaximum: 500 },
    { type: "integer", multipleOf: 25, minimum: -575, maximum: -30 },
    { type: "integer", multipleOf: 3, maximum: 10 },
    { type: "number", multipleOf: 10, minimum: 9.5, maximum: 101 },
    { type: "integer", multipleOf: 250, minimum: 9 },
    { type: "integer", multipleOf: 1, minimum: -3, maximum: 3 },
    { type: "object", properties: { q: { type: "integer", multipleOf: 12, minimum: 1, maximum: 400 } }, required: ["q"], additionalProperties: false },
  ];
  for (const schema of schemas) {
    const inner = (schema as { properties?: { q: object } }).properties?.q;
    agreesWithAjv(schema as JsonSchema, inner ? texts.map((t) => `{"q":${t}}`) : texts);
  }
  const g = parseGbnf(jsonSchemaToGbnf({ type: "integer", multipleOf: 5, minimum: -10, maximum: 10 }));
  for (const t of ["-0", "00", "05", "-05"]) assert.ok(!accepts(g, t), t);
  assert.throws(() => jsonSchemaToGbnf({ type: "integer", multipleOf: 50, minimum: 1, maximum: 49 }), /^GrammarError: #\/multipleOf: no multiple of 50 lies within the bounds \(from 1 to 49, up to 15 digits\)$/);
});

test("integer ranges (minimum, maximum, exclusive bounds) accept exactly the integers inside them, written as JSON writes them", () => {
  for (const schema of [{ type: "integer", minimum: 7, maximum: 123 }, { type: "integer", minimum: -50, exclusiveMaximum: 51 }, { type: "integer", exclusiveMinimum: 99.5 },
    { type: "integer", maximum: -3 }, { type: "integer", minimum: 0, maximum: 0 }]) {
    const g = parseGbnf(jsonSchemaToGbnf(schema));
    const validate = newAjv().compile(schema);
    for (let n = -200; n <= 300; n++) assert.equal(accepts(g, String(n)), validate(n) as boolean, `${JSON.stringify(schema)} on ${n}`);
    assert.ok(!accepts(g, "007") && !accepts(g, "-0") && !accepts(g, "1.0"), JSON.stringify(schema));
  }
});

const dir = mkdtempSync(join(tmpdir(), "tsllm-constraints-"));
let model: Model;
const skip = skipWithoutShared("tokenizer-tests/ggml-vocab-starcoder.gguf");
before(async () => {
  if (skip) return;
  const path = join(dir, "qwen2.gguf");
  // a random-weight model with a real 49k byte-level BPE vocabulary: unconstrained, it writes garbage
  await writeRandomModel(path, { ...tinyQwen2, seed: 21, contextLength: 2048 });
  model = await loadModel(path, { contextSize: 1100 });
});
after(() => {
  model?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

test("outputs under JSON Schemas parse and validate (ajv), greedy and sampled, on a random-weight model", { skip }, async () => {
  const ajv = newAjv();
  const schemas: JsonSchema[] = [
    { type: "object", properties: { name: { type: "string", maxLength: 8 }, age: { type: "integer", minimum: 18, maximum: 99 }, ok: { type: "boolean" } }, required: ["name", "age", "ok"] },
    { type: "array", items: { type: "object", properties: { id: { type: "integer" }, kind: { enum: ["x", "y", null] } }, required: ["id", "kind"] }, minItems: 1, maxItems: 3 },
    { anyOf: [{ type: "null" }, { type: "object", properties: { when: { type: "string", format: "date" } }, required: ["when"] }] },
    { type: "object", properties: { tags: { type: "array", items: { type: "string", maxLength: 4 }, maxItems: 2 }, score: { type: "number" } }, required: ["tags"] },
    { type: "object", properties: { p: { type: "number", minimum: 0, maximum: 1 }, t: { type: "number", exclusiveMinimum: -40.5, maximum: 60 } }, required: ["p", "t"] },
  ];
  for (const [i, schema] of schemas.entries()) {
    const validate = ajv.compile(schema as object);
    for (const temperature of [0, 1]) {
      // a random model takes every whitespace the grammar allows (a newline and 20 spaces at each token boundary): room for it
      const r = await model.generate("Answer in JSON:", { jsonSchema: schema, maxTokens: 1000, temperature, seed: 40 + i });
      assert.equal(r.finishReason, "stop", `schema ${i}, T=${temperature}: ${JSON.stringify(r.completion)}`);
      const value = JSON.parse(r.completion);
      assert.ok(validate(value), `schema ${i}, T=${temperature}: ${r.completion} ${JSON.stringify(validate.errors)}`);
    }
  }
  const obj = await model.generate("x", { json: "object", maxTokens: 120, temperature: 0 });
  if (obj.finishReason === "stop") assert.equal(typeof JSON.parse(obj.completion), "object");
  else assert.ok(isPrefix(parseGbnf(jsonSchemaToGbnf({ type: "object" })), obj.completion), obj.completion);
  const rx = await model.generate("x", { regex: "[A-Z][a-z]{2,8} [0-9]{1,3}", maxTokens: 40, temperature: 1, seed: 9 });
  assert.match(rx.completion, /^[A-Z][a-z]{2,8} [0-9]{1,3}$/);
  const patterned = { type: "object", properties: { code: { type: "string", pattern: "^[A-Z]{3}-\\d{2}$" } }, required: ["code"] };
  const p = await model.generate("x", { jsonSchema: patterned, maxTokens: 300, temperature: 1, seed: 9 });
  assert.ok(ajv.compile(patterned)(JSON.parse(p.completion)), p.completion);
  const choice = await model.generate("x", { choice: ["red", "green", "blue"], maxTokens: 10, temperature: 1, seed: 2 });
  assert.ok(["red", "green", "blue"].includes(choice.completion), choice.completion);
});

test("greedy decoding under a grammar equals a brute-force reference that tries every token at every step", { skip }, async () => {
  const grammarText = 'root ::= "{\\"n\\": " [0-9]{1,3} ", \\"s\\": \\"" [a-z ]{0,12} "\\"}"';
  const grammar = parseGbnf(grammarText);
  const r = await model.generate("Data:", { grammar: grammarText, maxTokens: 40, temperature: 0 });
  const tok = model.tokenizer;
  const lm = model.languageModel;
  const prompt = tok.encode("Data:");
  const cache = lm.createCache(256);
  let logits = lm.forward(prompt, cache);
  const pieces = constraintTexts(tok);
  const expected: number[] = [];
  let text = "";
  for (let step = 0; step < 40; step++) {
    let best = -1;
    for (let id = 0; id < logits.length; id++) {
      const ok = tok.endOfGenerationIds.has(id) ? accepts(grammar, text) : pieces[id] !== undefined && isPrefix(grammar, text + pieces[id]);
      if (ok && (best < 0 || logits[id]! > logits[best]!)) best = id;
    }
    if (best < 0 || tok.endOfGenerationIds.has(best)) break;
    expected.push(best);
    text += pieces[best]!;
    logits = lm.forward([best], cache);
  }
  assert.deepEqual(r.completionTokens, expected);
  assert.ok(accepts(grammar, r.completion), r.completion);
});

test("speculative decoding under a JSON Schema: greedy gives the tokens of plain greedy under it (prompt lookup and a draft model); sampled output validates", { skip }, async () => {
  const schema = { type: "object", properties: { id: { type: "integer", minimum: 1, maximum: 999 }, tags: { type: "array", items: { enum: ["ab", "cd"] }, maxItems: 3 } }, required: ["id", "tags"] };
  const validate = newAjv().compile(schema);
  const plain = await model.generate("Record:", { jsonSchema: schema, maxTokens: 400, temperature: 0 });
  assert.equal(plain.finishReason, "stop", plain.completion);
  // the same model as its own draft: every proposal token is the target's own choice, so the masks must agree on both sides
  for (const spec of [{ promptLookup: true }, { draftModel: model, draftTokens: 4 }] as const) {
    const r = await model.generate("Record:", { jsonSchema: schema, maxTokens: 400, temperature: 0, ...spec });
    const what = "promptLookup" in spec ? "prompt lookup" : "draft model";
    assert.deepEqual(r.completionTokens, plain.completionTokens, what);
    assert.equal(r.finishReason, "stop", what);
    assert.ok(validate(JSON.parse(r.completion)), `${what}: ${r.completion}`);
    if (!("promptLookup" in spec)) assert.ok(r.speculative!.accepted > 0, `${what}: ${JSON.stringify(r.speculative)}`);
  }
  for (const seed of [1, 2, 3]) {
    const r = await model.generate("Record:", { jsonSchema: schema, maxTokens: 400, temperature: 1, seed, draftModel: model, draftTokens: 4 });
    assert.equal(r.finishReason, "stop", r.completion);
    assert.ok(validate(JSON.parse(r.completion)), `seed ${seed}: ${r.completion}`);
  }
});

test("beam search under a JSON Schema: every returned beam is valid JSON under it (each beam keeps its own parse)", { skip }, async () => {
  const schema = { type: "object", properties: { id: { type: "integer", minimum: 1, maximum: 999 }, tag: { enum: ["a", "b", "c"] } }, required: ["id", "tag"] };
  const validate = newAjv().compile(schema);
  const r = await model.generate("Record:", { jsonSchema: schema, numBeams: 3, numReturnSequences: 3, maxTokens: 200 });
  assert.equal(r.finishReason, "stop", r.completion);
  assert.ok(validate(JSON.parse(r.completion)), r.completion);
  assert.equal(r.beams!.length, 3);
  for (const b of r.beams!) {
    assert.ok(b.finished, b.text);
    assert.ok(validate(JSON.parse(b.text)), b.text);
  }
});

test("a bad constraint fails the request naming the option and the position; two constraints at once are refused", { skip }, async () => {
  await assert.rejects(model.generate("x", { grammar: "root ::= [a-" }), /grammar: line 1, column \d+: unterminated character class/);
  await assert.rejects(model.generate("x", { jsonSchema: { type: "object", properties: { a: { type: "object", not: { minProperties: 1 } } } } }), /jsonSchema: #\/properties\/a\/not: only a type, a const or an enum can be ruled out in a grammar/);
  await assert.rejects(model.generate("x", { regex: "a(b" }), /regex: regex "a\(b", at 3: an unterminated group/);
  await assert.rejects(model.generate("x", { grammar: 'root ::= "a"', choice: ["a"] }), /give one of grammar, jsonSchema, json, choice and regex, not grammar and choice/);
  // with speculative decoding a grammar holds as without it
  assert.equal((await model.generate("x", { grammar: 'root ::= "ab" "c"', promptLookup: true, maxTokens: 20 })).completion, "abc");
});

test("characters the vocabulary has no piece for are spelled with pieces of characters (byte-level BPE and SentencePiece byte fallback), and the output is whole", { skip }, async () => {
  // 龘 and 𝄞 are no token's text in either vocabulary: only byte pieces can write them
  const rare = "龘𝄞";
  const storiesPath = sharedFile("models/stories260K.gguf");
  const stories = storiesPath ? await loadModel(storiesPath, { contextSize: 256, threads: 1 }) : undefined;
  try {
    for (const m of [model, ...(stories ? [stories] : [])]) {
      const name = m === model ? "byte-level (starcoder vocabulary)" : "byte fallback (stories260K)";
      assert.ok(constraintTexts(m.tokenizer).every((t) => t === undefined || ![...rare].some((ch) => t.includes(ch))), `${name}: no whole piece holds ${rare}`);
      for (const temperature of [0, 1]) {
        const g = await m.generate("x", { grammar: `root ::= "a ${rare} b"`, maxTokens: 40, temperature, seed: 3 });
        assert.equal(g.completion, `a ${rare} b`, `${name}, T=${temperature}`);
        assert.equal(g.finishReason, "stop", name);
        const schema = { type: "object", properties: { city: { enum: [`${rare}市`, "東京"] }, note: { type: "string", pattern: `^[${rare}]{2,3}$` } }, required: ["city", "note"] };
        const r = await m.generate("x", { jsonSchema: schema, maxTokens: 400, temperature, seed: 5 });
        assert.equal(r.finishReason, "stop", `${name}, T=${temperature}: ${r.completion}`);
        assert.ok(newAjv().compile(schema)(JSON.parse(r.completion)), `${name}, T=${temperature}: ${r.completion}`);
      }
    }
  } finally {
    stories?.dispose();
  }
});

test("a grammar compiled to UTF-8 bytes takes exactly the encodings of the characters its classes match", () => {
  const grammars = ["root ::= [a-zé中-龥😀]", "root ::= [^\"\\\\\\x00-\\x1F]", "root ::= .", "root ::= [\\u0080-\\u07FF\\u0800-\\uFFFF]", "root ::= [^a]", "root ::= [\\U00010000-\\U0010FFFF]", "root ::= [^\\x00-\\U0010FFFF]"];
  // every boundary of UTF-8's lengths and of the classes, and a spread of others
  const points = new Set([0, 0x1f, 0x20, 0x21, 0x22, 0x5c, 0x61, 0x62, 0x7a, 0x7f, 0x80, 0xe9, 0x7ff, 0x800, 0xfff, 0x1000, 0x4e2d, 0x9fa5, 0x9fa6, 0xd7ff, 0xe000, 0xfffd, 0xffff, 0x10000, 0x1f600, 0x1f601, 0x3ffff, 0x40000, 0xfffff, 0x100000, 0x10ffff]);
  for (let c = 0; c < 0x110000; c += 4099) points.add(c);
  const utf8 = new TextEncoder();
  for (const text of grammars) {
    const g = parseGbnf(text);
    const cls = g.rules[g.root]![0]![0] as Parameters<typeof matchesChar>[0];
    const bytes = new GrammarMatcher(utf8Grammar(g));
    for (const c of points) {
      if (c >= 0xd800 && c <= 0xdfff) continue;
      let stacks = bytes.initial();
      for (const b of utf8.encode(String.fromCodePoint(c))) stacks = bytes.advance(stacks, b);
      assert.equal(GrammarMatcher.complete(stacks), matchesChar(cls, c), `${text} on U+${c.toString(16)}`);
    }
    // no byte string that is not UTF-8 gets through: stray continuation bytes, overlong forms, surrogates, past U+10FFFF
    for (const bad of [[0x80], [0xc0, 0x80], [0xc1, 0xbf], [0xe0, 0x80, 0x80], [0xed, 0xa0, 0x80], [0xf0, 0x80, 0x80, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xf5, 0x80, 0x80, 0x80], [0xff]]) {
      let stacks = bytes.initial();
      for (const b of bad) stacks = bytes.advance(stacks, b);
      assert.ok(!GrammarMatcher.complete(stacks), `${text} on ${bad.map((b) => b.toString(16))}`);
    }
  }
});

test("schemas as zod 4 writes them (draft 7) and 2020-12 tuples compile, and their grammars accept exactly what ajv validates", async () => {
  const { Ajv2020 } = await import("ajv/dist/2020.js");
  const SAFE = 9007199254740991;
  // z.toJSONSchema(..., { target: "draft-7" }) of zod 4.6: z.number().int(), .int().positive(), z.uuid(), z.iso.date(), z.iso.datetime(), z.email(), z.record(z.string(), z.number()), z.tuple([z.string(), z.number()])
  const leap = "(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))";
  const cases: [object, string[], "draft-7" | "2020-12"][] = [
    [{ type: "integer", minimum: -SAFE, maximum: SAFE }, [String(-SAFE), String(SAFE), "0", "12", "1.5", String(SAFE + 1)], "draft-7"],
    [{ type: "integer", exclusiveMinimum: 0, maximum: SAFE }, ["1", "0", "-1", String(SAFE)], "draft-7"],
    [{ type: "string", format: "uuid", pattern: "^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$" },
      ['"123e4567-e89b-12d3-a456-426614174000"', '"123e4567-e89b-92d3-a456-426614174000"', '"00000000-0000-0000-0000-000000000000"', '"123e4567"'], "draft-7"],
    [{ type: "string", format: "date", pattern: `^${leap}$` }, ['"2024-02-29"', '"2023-02-29"', '"2023-13-01"', '"2023-04-30"', '"2023-04-31"'], "draft-7"],
    [{ type: "string", format: "date-time", pattern: `^${leap}T(?:(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d+)?(?:Z))$` }, ['"2024-02-29T12:30:00Z"', '"2024-02-29T12:30:00.123Z"', '"2024-02-29T24:00:00Z"', '"2024-02-29"'], "draft-7"],
    [{ type: "string", format: "email", pattern: "^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$" }, ['"a.b@ex.com"', '"ab@ex"', '"@ex.com"'], "draft-7"],
    [{ type: "object", propertyNames: { type: "string" }, additionalProperties: { type: "number" } }, ['{"a": 1, "b": 2.5}', '{"a": "x"}', "{}"], "draft-7"],
    [{ type: "array", items: [{ type: "string" }, { type: "number" }], additionalItems: false, minItems: 2, maxItems: 2 }, ['["a", 1]', '["a"]', '["a", 1, 2]', '[1, "a"]', "[]"], "draft-7"],
    [{ type: "array", items: [{ type: "string" }, { type: "integer" }] }, ['["a", 1]', '["a"]', "[]", '["a", 1, {"x": null}]', '[1]'], "draft-7"],
    [{ type: "array", prefixItems: [{ type: "string" }, { type: "integer" }], items: { type: "boolean" }, minItems: 1, maxItems: 4 }, ['["a"]', '["a", 1, true, false]', '["a", 1, true, false, true]', "[]", '["a", true]', '["a", 1, 2]'], "2020-12"],
    [{ type: "array", prefixItems: [{ type: "string" }], items: { type: "integer" }, maxItems: 0 }, ["[]", "[\"a\"]"], "2020-12"],
  ];
  for (const [schema, texts, draft] of cases) {
    const validate = (draft === "2020-12" ? new Ajv2020({ validateFormats: false }) : new Ajv({ validateFormats: false })).compile(schema);
    const g = parseGbnf(jsonSchemaToGbnf(schema as JsonSchema));
    for (const t of texts) assert.equal(accepts(g, t), validate(JSON.parse(t)) as boolean, `${JSON.stringify(schema).slice(0, 80)} on ${t}`);
  }
  // what a grammar cannot say is still refused, naming the path
  for (const [s, re] of [[{ type: "object", properties: { ab: {} }, propertyNames: { pattern: "^a" }, additionalProperties: true }, /#\/propertyNames: admits the property name "ab"/], [{ type: "string", pattern: "^ab$", minLength: 3 }, /#\/pattern: no string of at least 3 characters matches it/],
    [{ type: "integer", maximum: SAFE + 2 }, /#\/maximum: expected a number of at most/], [{ type: "array", items: [{ type: "string" }], additionalItems: false, minItems: 2 }, /#\/minItems: 2 items, but additionalItems is false after 1/]] as const) {
    assert.throws(() => jsonSchemaToGbnf(s as JsonSchema), re);
  }
});

test("llama.cpp's grammar integration cases: every GBNF grammar and JSON Schema accepts and refuses the strings llama.cpp's own test says", { skip: skipWithoutLlamaCppTemplates() }, () => {
  // where this library differs on purpose: {} is any JSON value (JSON Schema's and ajv's reading;
  // llama.cpp takes an object), uniqueItems over strings is refused (no grammar can hold it; llama.cpp drops it),
  // and a one-sided integer bound writes at most 15 digits (llama.cpp 16)
  const differs: Record<string, RegExp> = { "empty schema (object)": /^("|\[|null|true)/, "min 2": /^"?1234567890000000$/ };
  const cases = llamaCppGrammarCases();
  assert.ok(cases.length >= 40, `${cases.length} cases read`);
  let checked = 0;
  for (const c of cases) {
    if (c.kind === "schema" && /uniqueItems/.test(c.source)) {
      assert.throws(() => jsonSchemaToGbnf(JSON.parse(c.source) as JsonSchema), /uniqueItems: true is supported only for items of a finite set of values/, c.description);
      continue;
    }
    const g = parseGbnf(c.kind === "grammar" ? c.source : jsonSchemaToGbnf(JSON.parse(c.source) as JsonSchema));
    for (const [texts, want] of [[c.passing, true], [c.failing, false]] as const) {
      for (const t of texts) {
        if (differs[c.description]?.test(t)) continue;
        assert.equal(accepts(g, t), want, `${c.description}: ${JSON.stringify(t)}`);
        checked++;
      }
    }
  }
  assert.ok(checked > 300, `${checked} strings checked`);
  // and every schema llama.cpp's converter takes, this one takes too (but allOf mixing anyOf into objects, which llama.cpp approximates)
  for (const c of llamaCppSchemaConversions()) {
    if (c.grammar === undefined || /mix of allOf, anyOf/.test(c.name)) continue;
    parseGbnf(jsonSchemaToGbnf(JSON.parse(c.schema) as JsonSchema));
  }
});

test("schema keywords without a type shape the output; additionalProperties beside properties, allOf of $refs and enums, JSON pointers, nullable and unknown formats compile, and match what ajv validates", () => {
  const ajv = new Ajv({ strict: false, validateFormats: false });
  // [schema, texts the grammar must accept, texts it must refuse]; every accepted text must validate
  const cases: [object, string[], string[]][] = [
    // a keyword of one type only: that type (ajv would take other types too; the grammar keeps to the one the keyword speaks of)
    [{ pattern: "^[a-z]+$" }, ['"abc"'], ['"ABC"', '"a1"', '""']],
    [{ minLength: 2, maxLength: 3 }, ['"ab"', '"abc"'], ['"a"', '"abcd"']],
    [{ format: "date" }, ['"2024-02-03"'], ['"yesterday"']],
    [{ minimum: 3, maximum: 5 }, ["3", "4.5", "5"], ["2", "6"]],
    [{ maxItems: 1 }, ["[]", "[1]"], ['[1, 2]']],
    [{ required: ["a"], properties: { a: { type: "integer" } } }, ['{"a": 1}'], ["{}", '{"a": "x"}']],
    // additionalProperties beside properties: other keys after the named ones, never a named one again
    [{ type: "object", properties: { a: { type: "integer" }, ab: { type: "string" } }, required: ["a"], additionalProperties: true },
      ['{"a": 1}', '{"a": 1, "b": [true]}', '{"a": 1, "ab": "x", "abc": null, "": 2}', '{"a": 1, "aa": 1}'], ['{"a": 1, "a": "x"}', '{"a": 1, "ab": 2}', '{"a": 1, "b": 2, "ab": 3}', '{"b": 1}']],
    [{ type: "object", properties: { a: { type: "integer" } }, additionalProperties: { type: "boolean" } },
      ["{}", '{"a": 1}', '{"a": 1, "b": true}', '{"b": false, "c": true}', '{"\\u0062": true}'], ['{"a": 1, "b": 1}', '{"b": true, "a": 1}', '{"a": true}']],
    // pydantic's field with a description beside its $ref, and allOf of $refs to objects
    [{ $defs: { Color: { enum: ["red", "green"] } }, type: "object", properties: { c: { allOf: [{ $ref: "#/$defs/Color" }], description: "the color" } }, required: ["c"] },
      ['{"c": "red"}'], ['{"c": "blue"}', "{}"]],
    [{ definitions: { A: { type: "object", properties: { a: { type: "integer" } }, required: ["a"] }, B: { properties: { b: { type: "string" } } } }, allOf: [{ $ref: "#/definitions/A" }, { $ref: "#/definitions/B" }] },
      ['{"a": 1}', '{"a": 1, "b": "x"}'], ["{}", '{"b": "x"}']],
    [{ allOf: [{ enum: ["a", "b", "c"] }, { enum: ["b", "c", "d"] }, { type: "string" }] }, ['"b"', '"c"'], ['"a"', '"d"']],
    // $ref to the root and to any JSON pointer
    [{ type: "object", properties: { v: { type: "integer" }, kids: { type: "array", items: { $ref: "#" }, maxItems: 2 } }, required: ["v"] },
      ['{"v": 1}', '{"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]}'], ['{"v": 1, "kids": [{}]}']],
    [{ type: "object", properties: { a: { type: "string", maxLength: 2 }, b: { $ref: "#/properties/a" } }, required: ["a", "b"] }, ['{"a": "x", "b": "yz"}'], ['{"a": "x", "b": "xyz"}']],
    // OpenAPI's nullable, as ajv honours it
    [{ type: "string", nullable: true }, ['"x"', "null"], ["1"]],
    // a format that is only an annotation, and annotation keywords
    [{ type: "string", format: "uri", $comment: "c", readOnly: true, deprecated: false }, ['"https://a.b/c"', '"not a uri"'], ["1"]],
  ];
  for (const [schema, good, bad] of cases) {
    const g = parseGbnf(jsonSchemaToGbnf(schema as JsonSchema));
    const validate = ajv.compile(schema);
    for (const t of good) {
      assert.ok(accepts(g, t), `${JSON.stringify(schema)} should take ${t}`);
      assert.ok(validate(JSON.parse(t)), `ajv: ${JSON.stringify(schema)} on ${t}`);
    }
    for (const t of bad) assert.ok(!accepts(g, t), `${JSON.stringify(schema)} should refuse ${t}`);
  }
  for (const [s, re] of [[{ type: "string", format: 5 }, /#\/format: expected a string/], [{ type: "object", properties: { 'a"': {} }, additionalProperties: true }, /#\/additionalProperties: not supported beside a property whose name JSON escapes/],
    [{ allOf: [{ enum: ["a"] }, { enum: ["b"] }] }, /#\/allOf: no value is in every enum/], [{ allOf: [{ type: "string" }, { type: "object", properties: {} }] }, /#\/allOf\/1\/type: no value is of type "object" and of type "string"/], [{ $ref: "#/nope/x" }, /does not point at a schema/]] as const) {
    assert.throws(() => jsonSchemaToGbnf(s as JsonSchema), re, JSON.stringify(s));
  }
});

test("a repetition of something that may match nothing is a grammar (as llama.cpp's ( [x]* )*); left recursion that grows is still refused", () => {
  const g = parseGbnf('root ::= ( [x]* )* "!" ("a"? "b"?)+\nws ::= [ ]*');
  for (const [t, want] of [["!", true], ["xx!", true], ["x!ab", true], ["!bab", true], ["y!", false], ["!c", false]] as const) assert.equal(accepts(g, t), want, t);
  const h = parseGbnf('root ::= item*\nitem ::= ws [a-z]? ws\nws ::= " "*');
  for (const [t, want] of [["", true], ["a b  c", true], ["ab", true], ["A", false]] as const) assert.equal(accepts(h, t), want, t);
  for (const src of ['root ::= "a" | root "a"', 'root ::= e\ne ::= "x" | n e "y"\nn ::= "" | "z"', 'root ::= a\na ::= b "x" | "y"\nb ::= a | "z"']) {
    assert.throws(() => parseGbnf(src), /left recursion: rule \S+ reaches itself without a character in between/, src);
  }
  // a cycle with nothing after it is not the repetition above when no alternative ever leaves it:
  // nothing can be matched (a JSON Schema's $ref cycle compiles to this)
  for (const src of ["root ::= a\na ::= b\nb ::= a", 'root ::= "x" a\na ::= a | b\nb ::= "y" b']) {
    assert.throws(() => parseGbnf(src), /^GrammarError: rule \S+ can never be matched: each of its alternatives needs itself again \(directly or through other rules\), so no string ends it$/, src);
  }
});

/** ajv for draft 2020-12 schemas ($defs, prefixItems, nullable), the judge of the cases below */
const newAjv2020 = () => new Ajv2020({ strict: false });

/** each text accepted by the schema's grammar exactly when ajv validates it */
function agreesWithAjv(schema: JsonSchema, texts: readonly string[]): void {
  const g = parseGbnf(jsonSchemaToGbnf(schema));
  const validate = newAjv2020().compile(schema as object);
  for (const t of texts) assert.equal(accepts(g, t), validate(JSON.parse(t)), `${JSON.stringify(schema)} ${t}`);
}

test("a $ref cycle with no way to end is refused naming the $ref's schema path, which ajv compiles but validates no value of", () => {
  const cases: [JsonSchema, string, string, unknown[]][] = [
    [{ type: "object", properties: { a: { $ref: "#" } }, required: ["a"] }, "#/properties/a", "#", [{}, { a: {} }, { a: { a: {} } }, { a: null }, null, { b: 1 }]],
    [{ $defs: { n: { type: "object", properties: { x: { type: "integer" }, next: { $ref: "#/$defs/n" } }, required: ["x", "next"] } }, $ref: "#/$defs/n" }, "#/$defs/n/properties/next", "#/$defs/n", [{ x: 1 }, { x: 1, next: { x: 2 } }, { x: 1, next: null }]],
    [{ type: "array", items: { $ref: "#" }, minItems: 1 }, "#/items", "#", [[], [[]], [[[]]], [1]]],
  ];
  for (const [schema, at, ref, candidates] of cases) {
    const validate = newAjv2020().compile(schema as object);
    for (const v of candidates) assert.equal(validate(v), false, `${JSON.stringify(schema)} ${JSON.stringify(v)}`);
    const escaped = (x: string) => x.replace(/[$/]/g, "\\$&");
    assert.throws(() => jsonSchemaToGbnf(schema), new RegExp(`^GrammarError: ${escaped(at)}: \\$ref ${escaped(JSON.stringify(ref))} recurs without end \\(each value of ${escaped(JSON.stringify(ref))} needs another one here\\), so no finite JSON value satisfies it \\(a validator compiles such a schema, but no instance is valid\\)$`), JSON.stringify(schema));
  }
  // with a way to end (the recursion optional, or behind an anyOf with null) it compiles
  agreesWithAjv({ type: "object", properties: { a: { $ref: "#" } } }, ["{}", '{"a":{}}', '{"a":{"a":{}}}', '{"a":1}']);
  // the judge's random instances follow "#" to the root (they threw a TypeError, reading "" as a key)
  const root = checkSchema({ type: ["object", "null"], properties: { next: { $ref: "#" } }, additionalProperties: false }, new Rng(3), makeAjv(), 20, 20);
  assert.deepEqual(root.findings, []);
  assert.ok(root.instances > 0 && root.walks > 0);
  agreesWithAjv({ $defs: { n: { type: "object", properties: { next: { anyOf: [{ type: "null" }, { $ref: "#/$defs/n" }] } }, required: ["next"] } }, $ref: "#/$defs/n" }, ['{"next":null}', '{"next":{"next":null}}', "{}"]);
});

test("a $ref cycle with no way to end reached only where the value may do without it (an optional property, an array that may be empty, another anyOf alternative) is left out there, as ajv validates only values without it; random walks of the grammar all validate", () => {
  const endless = { type: "object", properties: { x: { type: "integer" }, next: { $ref: "#/$defs/n" } }, required: ["x", "next"] };
  const cases: [JsonSchema, string[]][] = [
    [{ $defs: { n: endless }, type: "object", properties: { head: { $ref: "#/$defs/n" }, k: { type: "boolean" } } }, ["{}", '{"k":true}', '{"head":{"x":1}}', '{"head":{"x":1,"next":{"x":2}}}', '{"head":null}']],
    [{ $defs: { n: endless }, type: "array", items: { $ref: "#/$defs/n" } }, ["[]", '[{"x":1}]', "[null]"]],
    [{ $defs: { n: endless }, anyOf: [{ $ref: "#/$defs/n" }, { type: "string", maxLength: 2 }] }, ['"ab"', '"abc"', '{"x":1}', "null"]],
    // the cycle beside other recursion that can end: a tree whose nodes may have children
    [{ $defs: { n: endless }, type: "object", properties: { kids: { type: "array", items: { $ref: "#" } }, bad: { $ref: "#/$defs/n" } }, required: ["kids"] }, ['{"kids":[]}', '{"kids":[{"kids":[]}]}', '{"kids":[{"kids":[],"bad":{"x":1}}]}', '{"kids":[{}]}']],
  ];
  const ajv = makeAjv();
  for (const [schema, texts] of cases) {
    agreesWithAjv(schema, texts);
    const r = checkSchema(schema as Record<string, unknown>, new Rng(7), ajv, 60, 0);
    assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], JSON.stringify(schema));
    assert.ok(r.walks >= 30, `${r.walks} walks ended: ${JSON.stringify(schema)}`);
  }
  // a tree whose child is optional: deep values are taken and written
  agreesWithAjv({ type: "object", properties: { child: { $ref: "#" }, v: { type: "integer" } }, required: ["v"] }, ['{"child":{"child":{"v":3},"v":2},"v":1}', '{"child":{},"v":1}', '{"child":{"v":1}}']);
});

test("keywords beside enum, const, $ref, anyOf and nullable apply, as a validator reads them together (found by scripts/fuzz-json-schema.ts)", () => {
  agreesWithAjv({ type: "string", enum: ["a", 1, "abc", null], maxLength: 2 }, ['"a"', "1", '"abc"', "null"]);
  agreesWithAjv({ const: 7, type: "integer", maximum: 9 }, ["7"]);
  assert.throws(() => jsonSchemaToGbnf({ const: 7, type: "string" }), /#\/const: no value of it satisfies the keywords beside it/);
  agreesWithAjv({ $ref: "#/$defs/n", maximum: 5, $defs: { n: { type: "integer", minimum: 0 } } }, ["3", "5", "7", "-1"]);
  agreesWithAjv({ type: "integer", maximum: 5, anyOf: [{ minimum: 3 }, { maximum: -3 }] }, ["4", "-10", "6", "0"]);
  // OpenAPI's nullable beside an enum adds nothing: null must be among the values
  agreesWithAjv({ type: "string", enum: ["a"], nullable: true }, ['"a"', "null"]);
  agreesWithAjv({ type: "string", nullable: true }, ['"a"', "null"]);
});

test("allOf of an object with properties and an additionalProperties schema (or true) beside a part without properties takes other keys by that schema, as ajv (found by scripts/fuzz-json-schema.ts)", () => {
  const o = { type: "object", properties: { name: { type: "null" } }, additionalProperties: { type: "integer" } };
  const texts = ["{}", '{"é":1}', '{"name":null,"é":1}', '{"é":"x"}', '{"name":1}', '{"name":null}'];
  agreesWithAjv({ allOf: [o, { type: "object" }] }, texts);
  // a type beside an anyOf is an allOf of the two
  agreesWithAjv({ anyOf: [o], type: "object" }, texts);
  agreesWithAjv({ allOf: [{ ...o, additionalProperties: true }, { type: "object" }] }, ['{"é":"x"}', '{"name":null,"z":[1]}', '{"name":1}']);
});

test("allOf of an enum with a keyword beside it (maxLength) and another part keeps only the values that keyword admits, as ajv (found by scripts/fuzz-json-schema.ts)", () => {
  const texts = ['"x\\ny"', '"a"', "0", '"b"', "null"];
  agreesWithAjv({ allOf: [{ type: "string" }, { enum: [0, "a", "x\ny"], maxLength: 1 }] }, texts);
  agreesWithAjv({ allOf: [{ type: ["string", "number"] }, { enum: [0, "a", "x\ny"], maxLength: 1 }] }, texts);
  agreesWithAjv({ allOf: [{ type: "object", properties: { a: { type: ["string", "number"] } } }, { type: "object", properties: { a: { enum: [0, "a", "x\ny"], maxLength: 1 } } }] }, ['{"a":"x\\ny"}', '{"a":"a"}', '{"a":0}', "{}"]);
  // a part of no enum with keywords other than a type (a bound, a not) keeps the values it takes (it was refused:
  // "only enums (and their types) can be combined with an enum in allOf"; items beside contains are such an allOf)
  agreesWithAjv({ allOf: [{ enum: [0, 5, "a", 7, null] }, { type: ["integer", "string"], minimum: 5 }] }, [...texts, "5", "7", "6"]);
  agreesWithAjv({ allOf: [{ enum: [0, "a", "b", null] }, { not: { enum: ["a", null] } }] }, texts);
  agreesWithAjv({ type: "array", items: { type: "integer", minimum: 2 }, contains: { enum: [1, 5] } }, ["[]", "[5]", "[1]", "[2,5]", "[5,1]", "[2]"]);
});

test("a part of allOf with propertyNames other than a string type is refused naming it, as an object's own is; it took keys the pattern refuses (found by scripts/fuzz-json-schema.ts)", () => {
  const schema = { allOf: [{ type: "object", properties: { "é": { type: "null" } } }, { type: "object", properties: { b: { type: "null" } }, propertyNames: { pattern: "^[a-z]+$" } }] };
  // ajv: the key é breaks the second part's propertyNames, so the object the grammar wrote was invalid
  assert.equal(newAjv2020().validate(schema, { "é": null }), false);
  assert.throws(() => jsonSchemaToGbnf(schema), /^GrammarError: #\/allOf\/1\/propertyNames: only \{"type": "string"\} is supported in a part of allOf beside other object parts$/);
  agreesWithAjv({ allOf: [schema.allOf[0]!, { ...schema.allOf[1]!, propertyNames: { type: "string" } }] }, ['{"é":null}', '{"b":null}', '{"é":null,"b":null}', '{"é":1}']);
});

test("allOf of objects: a part's additionalProperties holds for the others' properties, a property in two parts takes both schemas (found by scripts/fuzz-json-schema.ts)", () => {
  agreesWithAjv({ allOf: [{ type: "object", properties: { a: { type: "integer" } }, additionalProperties: false }, { type: "object", properties: { b: { type: "integer" } } }] }, ['{"a":1}', '{"b":1}', '{"a":1,"b":2}', "{}"]);
  agreesWithAjv({ allOf: [{ type: "object", properties: { a: { type: "integer" } } }, { type: "object", properties: { a: { minimum: 5 } } }] }, ['{"a":6}', '{"a":5.5}', '{"a":4}']);
  // both closed, nothing in common: only the empty object (it was any object)
  agreesWithAjv({ allOf: [{ type: "object", properties: { a: { type: "null" } }, additionalProperties: false }, { type: "object", properties: { b: { type: "null" } }, additionalProperties: false }] }, ["{}", '{"a":null}', '{"x":1}']);
  agreesWithAjv({ allOf: [{ type: "integer", minimum: 2 }, { type: "integer", maximum: 4 }] }, ["1", "2", "4", "5"]);
  assert.throws(() => jsonSchemaToGbnf({ allOf: [{ type: "object", properties: { a: {} }, required: ["a"] }, { type: "object", properties: { b: {} }, additionalProperties: false }] }), /#\/allOf\/1\/additionalProperties: false, but another part requires "a"/);
});

test("allOf of array parts: a fault of a part's keyword (uniqueItems, prefixItems, items) names that part's path; agreeing or tighter parts merge as ajv reads them", () => {
  // a keyword's fault names the part that wrote it (it named the allOf's holder: #/properties/x/uniqueItems, no such spot)
  const inX = (x: object) => ({ type: "object", properties: { x } });
  const faults: [object, RegExp][] = [
    [inX({ allOf: [{ type: "array", items: { type: "string" } }, { uniqueItems: true }] }), /^#\/properties\/x\/allOf\/1\/uniqueItems: true is supported only for items of a finite set/],
    [inX({ allOf: [{ type: "array", items: { type: "string" } }, { uniqueItems: "yes" }] }), /^#\/properties\/x\/allOf\/1\/uniqueItems: expected a boolean, got "yes"$/],
    [inX({ allOf: [{ type: "array" }, { prefixItems: [{ type: "string", pattern: "(" }] }] }), /^#\/properties\/x\/allOf\/1\/prefixItems\/0\/pattern: /],
    // one part alone is that part, named as itself
    [inX({ allOf: [{ type: "string", minLength: -1 }] }), /^#\/properties\/x\/allOf\/0\/minLength: /],
    [inX({ allOf: [{ type: "object", properties: { a: { type: "integer" } } }, { type: "object", properties: { b: { type: "string", format: "date", maxLength: 3 } } }] }), /^#\/properties\/x\/allOf\/1\/properties\/b\/maxLength: not supported together with format date$/],
    // items in one part say every element, beside another part's tuple they cannot be merged: both named
    [inX({ allOf: [{ type: "array", items: { type: "string" } }, { prefixItems: [{ type: "integer" }] }] }), /^#\/properties\/x\/allOf\/0\/items: items without the tuple prefixItems \(at #\/properties\/x\/allOf\/1\/prefixItems\) in another part of allOf cannot be one grammar/],
    [{ allOf: [{ type: "array", minItems: 1, maxItems: 2 }, { type: "array", prefixItems: [{ type: "integer" }], maxItems: 1 }, { prefixItems: [{ type: "string" }] }] }, /^#\/allOf\/2\/prefixItems: prefixItems is in two parts of allOf with different values \(also at #\/allOf\/1\/prefixItems\)/],
    [{ allOf: [{ type: "string" }, { type: "object", properties: {} }] }, /^#\/allOf\/1\/type: no value is of type "object" and of type "string" \(at #\/allOf\/0\/type\), which both apply$/],
  ];
  for (const [schema, re] of faults) assert.throws(() => jsonSchemaToGbnf(schema as JsonSchema), (e: Error) => e.name === "GrammarError" && re.test(e.message), JSON.stringify(schema));
  // parts that agree (uniqueItems twice, or false and true: true holds), a tuple beside another part's
  // bounds (it was refused: "items and prefixItems in different parts"), items in two parts (each element takes both)
  agreesWithAjv({ allOf: [{ type: "array", items: { enum: [1, 2] }, uniqueItems: true }, { uniqueItems: true }] }, ["[]", "[1,2]", "[1,1]", "[2,1]"]);
  agreesWithAjv({ allOf: [{ type: "array", items: { enum: [1, 2] }, uniqueItems: false }, { uniqueItems: true }] }, ["[1,2]", "[1,1]", "[2,2]"]);
  agreesWithAjv({ allOf: [{ type: "array", prefixItems: [{ type: "integer" }, { type: "string" }], items: false }, { minItems: 1 }] }, ["[]", "[1]", '[1,"a"]', '[1,"a",2]', '["a"]']);
  agreesWithAjv({ allOf: [{ type: "array", items: { type: "integer" } }, { items: { minimum: 0 } }, { maxItems: 2 }] }, ["[]", "[1,2]", "[-1]", "[1.5]", "[1,2,3]"]);
  agreesWithAjv({ allOf: [{ type: "array", prefixItems: [{ type: "integer" }] }, { type: "array", prefixItems: [{ type: "integer" }], maxItems: 1 }] }, ["[]", "[1]", "[1,2]", '["a"]']);
});

test("a const or enum value that JSON cannot write (a function, symbol, bigint, NaN, a Date, a cycle) is refused naming its path, not written as null, {} or a crash", () => {
  // a library caller's schema can hold any JavaScript value; each of these was a TypeError from the
  // literal writer, or a different constraint (NaN and Infinity as null, a Date or Map as {})
  const cycle: Record<string, unknown> = { a: 1 };
  cycle["self"] = cycle;
  // [the value JSON cannot carry, the schema that holds it, its path, what the refusal calls it]
  const bad: [unknown, (v: unknown) => object, string, string][] = [
    [() => "x", (v) => ({ enum: ["x", v] }), "#/enum/1", "a function"],
    [Symbol("s"), (v) => ({ const: v }), "#/const", "a symbol"],
    [1n, (v) => ({ enum: [v] }), "#/enum/0", "a bigint"],
    [undefined, (v) => ({ enum: [v] }), "#/enum/0", "undefined"],
    [Number.NaN, (v) => ({ enum: [v] }), "#/enum/0", "NaN"],
    [Number.POSITIVE_INFINITY, (v) => ({ type: "object", properties: { x: { const: v } } }), "#/properties/x/const", "Infinity"],
    [new Date(0), (v) => ({ enum: [{ when: v }] }), "#/enum/0/when", "a Date object"],
    [new Map(), (v) => ({ const: [1, v] }), "#/const/1", "a Map object"],
    [cycle, (v) => ({ const: v }), "#/const/self", "an object that contains itself"],
  ];
  for (const [value, schema, path, what] of bad) {
    // the judge: JSON (RFC 8259) cannot carry the value: JSON.stringify refuses it or gives back something else
    assert.ok(!isDeepStrictEqual(safeRoundTrip(value), value), `${path}: JSON carries it`);
    assert.throws(() => jsonSchemaToGbnf(schema(value) as JsonSchema), (e: Error) => e.name === "GrammarError" && e.message === `${path}: expected a JSON value, got ${what}`, path);
  }
  // JSON values themselves still pass, nested
  const g = parseGbnf(jsonSchemaToGbnf({ enum: [{ a: [1, null, "x", true] }, -0.5] } as JsonSchema));
  assert.ok(accepts(g, '{"a": [1, null, "x", true]}') && accepts(g, "-0.5"));
});

/** JSON.stringify then parse; a fresh symbol (equal to nothing) where JSON.stringify throws or writes nothing */
function safeRoundTrip(v: unknown): unknown {
  try {
    const text = JSON.stringify(v);
    return text === undefined ? Symbol("no JSON text") : JSON.parse(text);
  } catch {
    return Symbol("no JSON text");
  }
}

test("a keyword of the wrong shape (anyOf, enum or type not a list, required a string, $ref a number) is refused naming its path, where ajv refuses to compile the schema; prefixItems as one schema is every element's, as llama.cpp reads it", () => {
  // each was taken silently: the keyword passed over (required: "a" made a optional), or an empty grammar that admits no JSON at all
  const bad: [object, string][] = [
    [{ type: "object", properties: { a: { type: "integer" } }, required: "a" }, "#/required: expected a list of property names"],
    [{ type: "object", properties: { x: { enum: "a" } } }, "#/properties/x/enum: expected a list of values"],
    [{ anyOf: { type: "string" } }, "#/anyOf: expected a list of schemas"],
    [{ oneOf: "x" }, "#/oneOf: expected a list of schemas"],
    [{ allOf: {} }, "#/allOf: expected a list of schemas"],
    [{ type: [] }, "#/type: expected a type name or a non-empty list of them"],
    [{ $ref: 3 }, "#/$ref: expected a URI reference string"],
    [{ type: "string", $defs: 3 }, "#/$defs: expected an object of names to schemas"],
    [{ type: "string", nullable: "yes" }, "#/nullable: expected a boolean"],
    [{ allOf: [{ type: "object", properties: { a: {} } }, { required: "a" }] }, "#/allOf/1/required: expected a list of property names"],
  ];
  for (const [schema, message] of bad) {
    assert.throws(() => newAjv2020().compile(schema), /schema is invalid|must be/, `ajv compiles ${JSON.stringify(schema)}`);
    assert.throws(() => jsonSchemaToGbnf(schema as JsonSchema), (e: Error) => e.name === "GrammarError" && e.message.startsWith(`${message}, got `), `${JSON.stringify(schema)}: ${message}`);
  }
  // prefixItems given one schema, not a list (ajv refuses it; llama.cpp's converter, and its own test
  // "string array", read it as items): every element of that schema, as ajv validates items of it; beside items both
  const same = (schema: Record<string, unknown>, asItems: Record<string, unknown>, texts: readonly string[]) => {
    const g = parseGbnf(jsonSchemaToGbnf(schema as JsonSchema));
    const validate = newAjv2020().compile(asItems);
    for (const t of texts) assert.equal(accepts(g, t), validate(JSON.parse(t)), `${JSON.stringify(schema)} ${t}`);
  };
  const texts = ['["a", "b"]', "[]", "[1]", '["a", 1]', '["abc"]', '[["a"]]'];
  same({ type: "array", prefixItems: { type: "string" } }, { type: "array", items: { type: "string" } }, texts);
  same({ type: ["array", "null"], prefixItems: { type: "string" } }, { type: ["array", "null"], items: { type: "string" } }, [...texts, "null"]);
  same({ type: "array", items: { maxLength: 2 }, prefixItems: { type: "string" } }, { type: "array", items: { type: "string", maxLength: 2 } }, texts);
  assert.throws(() => jsonSchemaToGbnf({ type: "array", prefixItems: 3 }), /^GrammarError: #\/prefixItems: expected a schema object, got 3$/);
  assert.throws(() => jsonSchemaToGbnf({ type: "array", items: { type: "integer" }, prefixItems: { type: "string" } }), /^GrammarError: #\/prefixItems\/type: no value is of type "string" and of type "integer" \(at #\/items\/type\)/);
  assert.throws(() => jsonSchemaToGbnf({ type: "array", items: [{}], prefixItems: { type: "string" } }), /^GrammarError: #\/prefixItems: expected a list of schemas \(one schema is read as every element's, but not beside items as a list\)$/);
});

test("a property whose schema is false may not be present, and an anyOf / oneOf alternative false is left out, as ajv reads them (each was refused: the schema false admits no value)", () => {
  const texts = ["{}", '{"a":1}', '{"b":1}', '{"a":1,"b":1}', '{"b":1,"c":2}', '{"b":"x"}', '{"c":1}', '"s"', "1", "null"];
  for (const schema of [
    { type: "object", properties: { a: false, b: { type: "integer" } }, additionalProperties: false },
    { type: "object", properties: { a: false, b: { type: "integer" } }, additionalProperties: true },
    { type: "object", properties: { a: false }, additionalProperties: { type: "integer" } },
    { type: "object", properties: { a: false }, additionalProperties: false },
    { type: "object", properties: { b: { type: "integer" }, a: false }, required: ["b"], additionalProperties: { type: "integer" } },
    { anyOf: [false, { type: "string" }, false, { type: "integer" }] },
    { oneOf: [{ type: "string" }, false] },
    { type: "object", properties: { b: { anyOf: [false, { type: "integer" }] } }, required: ["b"], additionalProperties: false },
  ]) agreesWithAjv(schema, texts);
  assert.throws(() => jsonSchemaToGbnf({ type: "object", properties: { a: false }, required: ["a"] }), /^GrammarError: #\/properties\/a: false admits no value, but "a" is required$/);
  assert.throws(() => jsonSchemaToGbnf({ anyOf: [false, false] }), /^GrammarError: #\/anyOf: every alternative is false, which admits no value$/);
  // a kept alternative's fault names its own index
  assert.throws(() => jsonSchemaToGbnf({ anyOf: [false, { type: "string", minLength: -1 }] }), /^GrammarError: #\/anyOf\/1\/minLength: /);
});

test("items false and false at a tuple's position end the array there, as ajv reads them (each was refused: the schema false admits no value); nullable without a type, a name twice in required and a lookaround are refused as ajv refuses them, naming the keyword", () => {
  const texts = ["[]", "[1]", '["a"]', "[1,2]", '[1,"a"]', '[1,"a","b"]', '[1,"a",2]', "{}"];
  for (const schema of [
    { type: "array", items: false },
    { type: "array", prefixItems: [{ type: "integer" }, false] },
    { type: "array", prefixItems: [{ type: "integer" }, false, { type: "string" }], items: { type: "string" } },
    { type: "array", prefixItems: [false], items: { type: "integer" } },
    { type: "array", prefixItems: [{ enum: [1, 2] }, { enum: [1, 2] }, false], uniqueItems: true },
    { type: "array", prefixItems: [{ type: "integer" }, false], minItems: 1 },
    { allOf: [{ type: "array", items: { type: "integer" } }, { items: false }] },
  ]) agreesWithAjv(schema, texts);
  // draft 7's tuple (items as a list, then additionalItems), as ajv's draft 7 reads it
  const d7 = { type: "array", items: [{ type: "integer" }, false], additionalItems: { type: "string" } };
  const g = parseGbnf(jsonSchemaToGbnf(d7));
  const validate = new Ajv({ strict: false }).compile(d7);
  for (const t of texts) assert.equal(accepts(g, t), validate(JSON.parse(t)), `${JSON.stringify(d7)} ${t}`);
  // no array fits: refused naming the bound
  assert.throws(() => jsonSchemaToGbnf({ type: "array", items: false, minItems: 1 }), /^GrammarError: #\/minItems: 1 items, but items is false: no element may stand in the array$/);
  assert.throws(() => jsonSchemaToGbnf({ type: "array", prefixItems: [{ type: "integer" }, false], minItems: 2 }), /^GrammarError: #\/minItems: 2 items, but prefixItems\/1 is false: no element may stand there$/);
  assert.throws(() => jsonSchemaToGbnf({ allOf: [{ type: "string" }, false] }), /^GrammarError: #\/allOf\/1: the schema false admits no value, so the allOf it is part of admits none$/);
  // schemas ajv refuses to compile (nullable was read as "or null", a required name twice passed over, a lookaround named the expression the converter wraps the pattern in)
  const refused: [object, RegExp, RegExp][] = [
    [{ nullable: true }, /"nullable" cannot be used without "type"/, /^GrammarError: #\/nullable: only taken beside a type /],
    [{ type: "object", properties: { a: { nullable: true, enum: ["x", null] } } }, /"nullable" cannot be used without "type"/, /^GrammarError: #\/properties\/a\/nullable: only taken beside a type /],
    [{ nullable: false, minimum: 3 }, /"nullable" cannot be used without "type"/, /^GrammarError: #\/nullable: only taken beside a type /],
    [{ type: ["string", "null"], nullable: false }, /type: null contradicts nullable: false/, /^GrammarError: #\/nullable: false, but type \["string","null"\] admits null$/],
    [{ type: "object", properties: { a: { type: "string" }, b: {} }, required: ["a", "b", "a"] }, /required must NOT have duplicate items/, /^GrammarError: #\/required: "a" is listed twice \(the names in required must be unique\)$/],
    [{ allOf: [{ type: "object", properties: { a: {} } }, { required: ["a", "a"] }] }, /required must NOT have duplicate items/, /^GrammarError: #\/allOf\/1\/required: "a" is listed twice/],
  ];
  for (const [schema, ajvSays, message] of refused) {
    assert.throws(() => newAjv2020().compile(schema), ajvSays, JSON.stringify(schema));
    assert.throws(() => jsonSchemaToGbnf(schema as JsonSchema), message, JSON.stringify(schema));
  }
  // nullable is its own part's: in allOf it added null beside another part's type too (found by scripts/fuzz-json-schema.ts)
  agreesWithAjv({ allOf: [{ type: "object", properties: { b: { type: ["string", "number", "null"], nullable: true } } }, { type: "object", properties: { b: { type: "integer", multipleOf: 7 } } }] }, ['{"b":null}', '{"b":7}', '{"b":8}']);
  agreesWithAjv({ allOf: [{ type: "integer", nullable: true }, { type: "number", minimum: 1 }] }, ["null", "1", "0"]);
  agreesWithAjv({ allOf: [{ type: "string", nullable: true }, { maxLength: 2 }] }, ["null", '"ab"', '"abc"', "1"]);
  // a name two allOf parts both require is required once
  agreesWithAjv({ allOf: [{ type: "object", properties: { a: { type: "string" } }, required: ["a"] }, { required: ["a"] }] }, ['{"a":"x"}', "{}", '{"a":1}']);
  // lookarounds: llama.cpp's converter drops them with a warning ("Unsupported pattern syntax"), admitting strings ajv refuses; refused here naming the user's pattern at the group
  for (const [pattern, at, what] of [["^(?=a)\\w+$", 1, "a lookahead \\(\\?="], ["(?<=a)b", 0, "a lookbehind \\(\\?<="], ["^[a-z]+(?!x)$", 7, "a negative lookahead \\(\\?!"], ["a(?<!b)c", 1, "a negative lookbehind \\(\\?<!"]] as const) {
    newAjv2020().compile({ type: "string", pattern });
    assert.throws(() => jsonSchemaToGbnf({ type: "string", pattern }), new RegExp(`^GrammarError: #/pattern: regex ${JSON.stringify(pattern).replace(/[\\^$()?[\]+]/g, "\\$&")}, at ${at}: ${what}`), pattern);
  }
  // a named group matches what a plain group does
  agreesWithAjv({ type: "string", pattern: "^(?<y>\\d{2})-(?<m>[a-z]+)$" }, ['"12-ab"', '"1-ab"', '"12-"', '"12-AB"', '"x12-ab"']);
});

test("patterns are read as ajv compiles them (the u flag): \\s is ECMAScript's (every Zs space), each top-level alternative has its own anchors, \\cJ, \\u{...}, surrogate pairs, [^] and [\\b]; a control character is also taken as JSON's short escape", () => {
  // each string once raw (as JSON.stringify writes it) and each control character also as \u00XX in either case
  const strings = ["", "a", "b", "ab", "axx", "xxb", "xx", "\n", "\t", "\b", "cJ", "😀", "x😀", "]", "$", "a$", "^a", "\n\n", "a\u3000b", "\u00a0", "\u2003", "\u202f", "\u205f", "\u1680", "\u3000", " ", "x y"];
  for (const pattern of ["^\\s+$", "^\\S+$", "^[^\\s]+$", "^\\S\\s\\S$", "^a|b$", "^a$|^b$", "a$|b", "^(a|b)$", "\\$$", "^\\n$", "^[\\t\\n]+$", "^\\cJ$", "^\\u{1F600}$", "^\\uD83D\\uDE00$", "^x[^]$", "^[\\b]$"]) {
    for (const lengths of [{}, { minLength: 1, maxLength: 3 }]) {
      const schema = { type: "string", pattern, ...lengths };
      const g = parseGbnf(jsonSchemaToGbnf(schema));
      const validate = newAjv2020().compile(schema);
      for (const v of strings) {
        const texts = [JSON.stringify(v), JSON.stringify(v).replace(/\\([nt])/g, (_, c: string) => (c === "n" ? "\\u000A" : "\\u0009"))];
        for (const t of texts) assert.equal(accepts(g, t), validate(v) as boolean, `${JSON.stringify(schema)} on ${t}`);
      }
    }
  }
});

test("pattern: Unicode property escapes \\p{...} / \\P{...} (General_Category, Script=, binary properties) take the characters ajv's u-flag RegExp takes, in and out of classes; one RegExp does not know is refused naming the pattern, as ajv refuses to compile it", () => {
  // letters of several cases and scripts, digits of other scripts, a letter number, punctuation, symbols, spaces, a combining mark, astral letters and symbols
  const chars = ["a", "Z", "é", "É", "ǅ", "日", "α", "Ω", "Ж", "ж", "0", "٣", "Ⅻ", "½", "!", "«", "_", "-", "€", "+", "©", " ", "\u00a0", "\u2028", "\u0301", "😀", "𝔸", "𐐷", "\u0007", '"', "\\", "\uE000"];
  const strings = [...chars, "ab", "Ab", "aB", "Αβγ", "Жж", "12", "٣٣", "a1_", "é!"];
  const patterns = ["^\\p{L}$", "^\\p{Lu}\\p{Ll}*$", "^\\p{Ll}+$", "^\\p{Lt}$", "^\\p{N}+$", "^\\p{Nd}{1,2}$", "^\\p{Nl}$", "^\\p{P}$", "^\\p{S}$", "^\\p{Sc}$", "^\\p{Z}$", "^\\p{Zs}$", "^\\p{M}$", "^\\p{Cc}$", "^\\p{Co}$",
    "^\\P{L}$", "^[\\p{L}\\d_]+$", "^[^\\p{P}\\p{Z}]+$", "^[\\P{L}a]$", "^\\p{Script=Greek}+$", "^\\p{sc=Cyrl}+$", "^\\p{Script_Extensions=Latin}$", "^\\p{General_Category=Decimal_Number}$", "^\\p{Alphabetic}+$", "^\\p{Uppercase}$", "\\p{Emoji_Presentation}"];
  for (const pattern of patterns) {
    for (const lengths of [{}, { maxLength: 2 }]) {
      const schema = { type: "string", pattern, ...lengths };
      const g = parseGbnf(jsonSchemaToGbnf(schema));
      const validate = newAjv2020().compile(schema);
      let taken = 0;
      for (const v of strings) {
        const ok = validate(v) as boolean;
        taken += ok ? 1 : 0;
        assert.equal(accepts(g, JSON.stringify(v)), ok, `${JSON.stringify(schema)} on ${JSON.stringify(v)}`);
      }
      assert.ok(taken > 0, `${pattern}: no string of the test is valid`);
    }
  }
  // random walks of the grammar (each character from a class's ranges) all validate
  const ajv = makeAjv();
  for (const pattern of ["^\\p{Lu}\\p{Ll}+$", "^[^\\p{L}\\p{N}]{1,3}$", "^\\p{Script=Han}+$"]) {
    const r = checkSchema({ type: "string", pattern }, new Rng(3), ajv, 40, 0);
    assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], pattern);
    assert.ok(r.walks >= 20, pattern);
  }
  // what RegExp does not know (ajv compiles the pattern with the u flag and refuses the schema): one line naming the pattern
  for (const [pattern, at, what] of [["^\\p{Foo}$", 1, "\\p{Foo}: not a Unicode property JavaScript's RegExp knows"], ["\\P{Script=Nope}", 0, "\\P{Script=Nope}: not a Unicode property"], ["^\\p{RGI_Emoji}$", 1, "\\p{RGI_Emoji}: not a Unicode property"], ["^\\pL$", 1, "\\p needs a Unicode property in braces"]] as const) {
    assert.throws(() => newAjv2020().compile({ type: "string", pattern }), /pattern|Invalid/, pattern);
    assert.throws(() => jsonSchemaToGbnf({ type: "string", pattern }), (e: Error) => e.message.startsWith(`#/pattern: regex ${JSON.stringify(pattern)}, at ${at}: ${what}`) && !e.message.includes("\n"), pattern);
  }
  // made-up property names (a server's requests can send any) leave nothing behind: only known properties' ranges are kept
  const kept = cachedUnicodeProperties();
  for (let i = 0; i < 50; i++) assert.throws(() => jsonSchemaToGbnf({ type: "string", pattern: `\\p{Made_Up_${i}}` }), /not a Unicode property/);
  assert.equal(cachedUnicodeProperties(), kept);
  // a class escape that starts a range is no class with the u flag (ajv refuses the schema); it was read as the escape, "-" and the end
  for (const pattern of ["^[\\p{L}-z]$", "^[\\d-z]$", "^[a\\s-\\d]$"]) {
    assert.throws(() => newAjv2020().compile({ type: "string", pattern }), /Invalid/, pattern);
    assert.throws(() => jsonSchemaToGbnf({ type: "string", pattern }), /^GrammarError: #\/pattern: regex .*: a class escape cannot start a range/, pattern);
  }
  agreesWithAjv({ type: "string", pattern: "^[\\p{Lu}-]+$" }, ['"A-B"', '"-"', '"a"']);
});

test("lone surrogates: a pattern only a lone surrogate matches is refused naming it (ajv takes such a string, but no UTF-8 output holds one); an enum or const string with one is written as JSON's \\u escape and counted as one character beside maxLength or a pattern, as ajv counts it", () => {
  const lone = ["\uD800", "\uDC00x", "a\uDBFF"];
  for (const [pattern, at] of [["^\\uD800$", 1], ["^a[\\uD800-\\uDFFF]$", 2], ["^\\p{Cs}$", 1], ["^\\uD800$|^\\u{DC00}", 1], ["^(?:\\uDC00|a\\uD800)+$", 4], [`^${"\uD800"}$`, 1]] as const) {
    const validate = newAjv2020().compile({ type: "string", pattern });
    assert.ok(lone.some((v) => validate(v)) || validate("a\uD800") || validate("\uDC00"), pattern);
    assert.throws(() => jsonSchemaToGbnf({ type: "string", pattern }), (e: Error) => e.message === `#/pattern: regex ${JSON.stringify(pattern)}, at ${at}: only a lone surrogate (\\uD800 to \\uDFFF, half of a UTF-16 pair) matches here: a validator takes a string holding one, but it is not Unicode text, which a model writes (as UTF-8), so no string written can match`, pattern);
  }
  // a class that holds surrogates among other characters: the others
  agreesWithAjv({ type: "string", pattern: "^[a\\uD800-\\uDFFF]$" }, ['"a"', '"b"']);
  // enum and const values: their JSON (JSON.stringify escapes a lone surrogate) is valid JSON text whose value ajv validates
  const texts = ['"\\ud800"', '"\\udc00x"', '"a\\udbff"', '"ab"', '"\\\\ud800"', '"a"'];
  agreesWithAjv({ enum: [...lone, "ab", "\\ud800"] }, texts);
  agreesWithAjv({ enum: [...lone, "ab", "a"], maxLength: 1 }, texts);
  agreesWithAjv({ type: "string", enum: [...lone, "ab"], pattern: "^.$" }, texts);
  agreesWithAjv({ const: "\uDC00x", minLength: 2 }, texts);
  const ajv = makeAjv();
  for (const schema of [{ enum: [...lone, "ab"], maxLength: 1 }, { type: "array", items: { const: "a\uDBFF" }, maxItems: 2 }]) {
    const r = checkSchema(schema, new Rng(5), ajv, 30, 30);
    assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], JSON.stringify(schema));
    assert.ok(r.walks > 0 && r.instances > 0, JSON.stringify(schema));
  }
});

test("lone surrogates: an alternative of a pattern that only a lone surrogate matches is left out and the others kept (was the whole pattern refused); an optional such part is left empty, as llama.cpp's grammar keeps a pattern's other branches", () => {
  // texts of Unicode strings: the grammar agrees with ajv on each (a lone surrogate, which ajv takes where such a branch matches it, no model writes)
  const texts = ['"a"', '"b"', '"ab"', '"x"', '"xa"', '"ax"', '"c"', '""', '"aab"', '"abab"'];
  const loneTexts = ['"\\ud800"', '"\\udc00"', '"a\\ud800b"', '"a\\udc00"'];
  for (const schema of [
    { type: "string", pattern: "^(?:a|\\uD800)$" },
    { type: "string", pattern: "^x|\\u{DC00}" },
    { type: "string", pattern: "^a(\\uD800)?b$" },
    { type: "string", pattern: "^a(?:[\\uD800-\\uDBFF]|b)+$" },
    { type: "string", pattern: "^a(\\uD800)+b$|^c$" },
    { type: "string", pattern: "^\\p{Cs}$|^(?:ab)+$" },
    // the length-bounded path (the pattern's automaton paired with a count)
    { type: "string", pattern: "^(?:ab|\\uD800|a)+$", maxLength: 3 },
    { type: "string", pattern: "^c$|^a\\uDC00$", minLength: 1 },
  ] as const) {
    agreesWithAjv(schema, texts);
    const validate = newAjv2020().compile(schema);
    assert.ok(loneTexts.some((t) => validate(JSON.parse(t))) || validate("\uD800"), `${schema.pattern}: ajv takes some lone surrogate`);
    const g = parseGbnf(jsonSchemaToGbnf(schema));
    for (const t of loneTexts) assert.equal(accepts(g, t), false, `${schema.pattern} ${t}`);
  }
  // the regex constraint reads the same way
  const g = parseGbnf(`root ::= ${regexToGbnf("a|\\uD800", true)}`);
  assert.equal(accepts(g, "a"), true);
});

test("minProperties / maxProperties: the grammar admits exactly the objects ajv validates, written in its key order (properties, then other keys), judged over every object of up to two properties and two other keys; was refused as an unknown keyword", () => {
  // every object the grammar's order allows: some of a, b (in order), then 0-2 other keys (x, y, or x twice)
  const texts: string[] = [];
  for (const named of [[], ["a"], ["b"], ["a", "b"]]) {
    for (const others of [[], ["x"], ["y"], ["x", "y"]]) {
      for (const v of ["1", '"s"']) texts.push(`{${[...named, ...others].map((k) => `"${k}":${v}`).join(",")}}`);
    }
  }
  const schemas: JsonSchema[] = [];
  for (const [min, max] of [[1, undefined], [2, undefined], [3, undefined], [undefined, 0], [undefined, 1], [1, 2], [2, 2], [2, 3], [0, 4], [3, 3]] as const) {
    const counts = { ...(min === undefined ? {} : { minProperties: min }), ...(max === undefined ? {} : { maxProperties: max }) };
    schemas.push(
      { type: "object", ...counts },
      { type: "object", properties: { a: { type: "integer" }, b: {} }, ...counts },
      { type: "object", properties: { a: { type: "integer" }, b: {} }, required: ["b"], additionalProperties: { type: "string" }, ...counts },
      { type: "object", properties: { a: {}, b: { type: "string" } }, additionalProperties: true, ...counts },
      { type: "object", additionalProperties: { type: "integer" }, ...counts },
    );
  }
  const ajv = makeAjv();
  let compiled = 0;
  for (const schema of schemas) {
    let gbnf: string;
    try {
      gbnf = jsonSchemaToGbnf(schema);
    } catch (e) {
      // refused only where the count needs two or more other keys (which no grammar keeps apart), or no object fits
      assert.match((e as Error).message, /^#\/(minProperties|maxProperties): no object of .* keys can be written with /, JSON.stringify(schema));
      const o = schema as Record<string, unknown>, validate = newAjv2020().compile(schema as object);
      assert.ok((o["minProperties"] as number) - Object.keys((o["properties"] ?? {}) as object).length >= 2 || texts.every((t) => !validate(JSON.parse(t))) || (o["additionalProperties"] === undefined && o["properties"] !== undefined), JSON.stringify(schema));
      continue;
    }
    compiled++;
    const g = parseGbnf(gbnf);
    const validate = newAjv2020().compile(schema as object);
    // (an other key where the minimum needs two of them is led to the named properties instead: no text is taken that ajv refuses)
    const needsTwoOthers = (t: string) => {
      const o = JSON.parse(t) as Record<string, unknown>;
      const s = schema as Record<string, unknown>;
      const own = Object.keys(o).filter((k) => Object.hasOwn((s["properties"] ?? {}) as object, k)).length;
      // (and the documented difference: an object with properties and additionalProperties unset takes no other key)
      const closedHere = s["additionalProperties"] === undefined && s["properties"] !== undefined && own < Object.keys(o).length;
      return ((s["minProperties"] as number | undefined) ?? 0) - own >= 2 || closedHere;
    };
    for (const t of texts) {
      if (accepts(g, t)) assert.ok(validate(JSON.parse(t)), `${JSON.stringify(schema)} ${t}: taken, but ajv refuses it`);
      else if (!needsTwoOthers(t)) assert.equal(validate(JSON.parse(t)), false, `${JSON.stringify(schema)} ${t}: refused, but ajv validates it`);
    }
    // a key written twice is one to a validator: never what meets the minimum
    for (const t of ['{"x":1,"x":2}', '{"x":"s","x":"t"}', '{"a":1,"x":"s","x":"t"}']) if (accepts(g, t)) assert.ok(validate(JSON.parse(t)), `${JSON.stringify(schema)} ${t}`);
    // random walks of the grammar and random instances (those that need two other keys left aside, as above)
    const r = checkSchema(schema as Record<string, unknown>, new Rng(7), ajv, 20, 20);
    assert.deepEqual(r.findings.filter((f) => f.kind !== "incomplete" || !needsTwoOthers(f.text)).map((f) => `${f.text} ${f.detail}`), [], JSON.stringify(schema));
    assert.ok(r.walks > 0, JSON.stringify(schema));
  }
  assert.ok(compiled >= 35, `${compiled} compiled`);
  // in allOf the tightest bound of each; a bound of no integer is refused naming it
  agreesWithAjv({ allOf: [{ type: "object", properties: { a: {}, b: {} }, minProperties: 1 }, { maxProperties: 1 }] }, ["{}", '{"a":1}', '{"b":1}', '{"a":1,"b":2}']);
  agreesWithAjv({ type: "object", properties: { a: {}, b: {} }, required: ["a", "b"], maxProperties: 2 }, ['{"a":1,"b":2}']);
  assert.throws(() => jsonSchemaToGbnf({ type: "object", minProperties: 1.5 }), /^GrammarError: #\/minProperties: expected a non-negative integer, got 1.5$/);
  assert.throws(() => jsonSchemaToGbnf({ type: "object", minProperties: 2, maxProperties: 1 }), /^GrammarError: #\/maxProperties: 1 is below minProperties 2$/);
  assert.throws(() => jsonSchemaToGbnf({ type: "object", properties: { a: {}, b: {} }, required: ["a", "b"], maxProperties: 1 }), /^GrammarError: #\/maxProperties: no object of at most 1 keys can be written with these properties and no other key \(additionalProperties unset, which beside properties takes none here\)$/);
  assert.throws(() => jsonSchemaToGbnf({ type: "object", additionalProperties: { type: "integer" }, minProperties: 2 }), /^GrammarError: #\/minProperties: no object of at least 2 keys can be written with the 0 named properties and one other key: two other keys must differ \(a key written twice is one property to a validator\), and no grammar keeps keys of any string apart; name the keys in properties, give propertyNames an enum of them or a pattern of at most 64 strings, or lower minProperties to 1$/);
  // minProperties 0 and no maximum: a key after one written takes its comma, the first none (the
  // count of keys written was capped at 0, and a first optional key took a comma: found by
  // scripts/fuzz-json-schema.ts)
  const zero = { type: "object", properties: { a: {}, b: {} }, required: ["b"], additionalProperties: false, minProperties: 0 } as const;
  agreesWithAjv(zero, ['{"a":1,"b":2}', '{"b":2}', "{}"]);
  assert.equal(accepts(parseGbnf(jsonSchemaToGbnf(zero)), '{,"a":1,"b":2}'), false);
  // a keyword of objects only: a schema without type that has one is an object schema
  agreesWithAjv({ properties: { a: {} }, minProperties: 1 }, ["{}", '{"a":1}']);
});

/**
 * Every object of up to `most` different keys of `names` (values from `values`), in every order:
 * each one the schema's grammar takes ajv validates, and each one ajv validates whose keys are in
 * `order` (the grammar's: named properties, then the keys of a finite pattern, sorted; keys not in
 * it after those) and that needs no two keys outside `order` the grammar takes. The count ajv validates.
 */
function holdKeysToAjv(schema: JsonSchema, names: readonly string[], values: readonly string[], order: readonly string[], most = 3): number {
  const g = parseGbnf(jsonSchemaToGbnf(schema));
  const validate = newAjv2020().compile(schema as object);
  const rank = (k: string) => (order.includes(k) ? order.indexOf(k) : order.length);
  let valid = 0;
  const visit = (keys: string[]) => {
    const texts = keys.reduce<string[]>((acc, k) => acc.flatMap((t) => values.map((v) => `${t}${t === "" ? "" : ","}${JSON.stringify(k)}:${v}`)), [""]);
    for (const body of texts) {
      const t = `{${body}}`;
      const ok = validate(JSON.parse(t));
      if (ok) valid++;
      if (accepts(g, t)) assert.ok(ok, `${JSON.stringify(schema)} ${t}: taken, but ajv refuses it`);
      else if (ok && keys.every((k, i) => i === 0 || rank(keys[i - 1]!) < rank(k)) && keys.filter((k) => !order.includes(k)).length <= 1) assert.fail(`${JSON.stringify(schema)} ${t}: refused, but ajv validates it`);
    }
    if (keys.length < most) for (const k of names) if (!keys.includes(k)) visit([...keys, k]);
  };
  visit([]);
  return valid;
}

test("propertyNames or patternProperties of a pattern with finitely many strings (at most 64): its keys written out as optional properties, each once, so minProperties / maxProperties count them exactly; was refused (the count needed two other keys, or propertyNames admitted a property's name), judged both ways against ajv over every object of up to three keys", () => {
  const cases: [JsonSchema, string[], string[], string[]][] = [
    // (refused before: two keys of any string could be one key written twice)
    [{ type: "object", propertyNames: { pattern: "^(a|b|c)$" }, additionalProperties: { type: "integer" }, minProperties: 2 }, ["a", "b", "c", "d", "ab"], ["1", '"s"'], ["a", "b", "c"]],
    [{ type: "object", propertyNames: { pattern: "^[xy][0-9]$" }, minProperties: 2, maxProperties: 3 }, ["x1", "y0", "x", "z1", "y9"], ["1", "null"], ["x1", "y0", "y9"]],
    // (refused before: another key could repeat "ab", its value escaping the property's schema)
    [{ type: "object", properties: { ab: { type: "string" } }, propertyNames: { pattern: "^a[bc]$" }, additionalProperties: { type: "integer" } }, ["ab", "ac", "ad", "a"], ["1", '"s"'], ["ab", "ac"]],
    // a finite pattern beside an open one; two patterns on one key take both schemas
    [{ type: "object", patternProperties: { "^(a|b)$": { type: "integer" }, "^x-": { type: "string" } }, additionalProperties: false, minProperties: 2 }, ["a", "b", "x-1", "c"], ["1", '"s"'], ["a", "b"]],
    [{ type: "object", patternProperties: { "^[ab]$": { type: "integer" }, "^a$": { minimum: 3 } }, additionalProperties: { type: "string" }, minProperties: 2 }, ["a", "b", "c"], ["1", "5", '"s"'], ["a", "b"]],
    [{ type: "object", required: ["b"], patternProperties: { "^[abc]$": { type: "integer" } }, additionalProperties: false, maxProperties: 2 }, ["a", "b", "c", "d"], ["1", '"s"'], ["a", "b", "c"]],
    // keywords beside the pattern in propertyNames filter its strings
    [{ type: "object", propertyNames: { pattern: "^(a|bb|ccc)$", maxLength: 2 }, additionalProperties: { type: "integer" }, minProperties: 2 }, ["a", "bb", "ccc"], ["1", "2", '"s"'], ["a", "bb"]],
  ];
  const ajv = makeAjv();
  for (const [schema, names, values, order] of cases) {
    const valid = holdKeysToAjv(schema, names, values, order);
    assert.ok(valid >= 3, `${JSON.stringify(schema)}: ${valid} valid texts`);
    const r = checkSchema(schema as Record<string, unknown>, new Rng(5), ajv, 30, 0);
    assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], JSON.stringify(schema));
    assert.ok(r.walks > 0, JSON.stringify(schema));
  }
  // a key of a finite pattern is written once: a second "a" (one key to a validator, the value the last) is not taken
  const once = parseGbnf(jsonSchemaToGbnf({ type: "object", patternProperties: { "^(a|b)$": { type: "integer" } }, additionalProperties: false }));
  assert.equal(accepts(once, '{"a":1,"b":2}'), true);
  assert.equal(accepts(once, '{"a":1,"a":2}'), false);
  // infinitely many strings, or more than 64: as before, refused where the count or a property needs them apart
  assert.throws(() => jsonSchemaToGbnf({ type: "object", propertyNames: { pattern: "^[a-z]{2}$" }, additionalProperties: true, minProperties: 2 }), /^GrammarError: #\/minProperties: no object of at least 2 keys can be written with the 0 named properties and one other key: .* give propertyNames an enum of them or a pattern of at most 64 strings, or lower minProperties to 1$/);
  assert.throws(() => jsonSchemaToGbnf({ type: "object", properties: { ab: {} }, propertyNames: { pattern: "^a[a-z]+$" }, additionalProperties: true }), /^GrammarError: #\/propertyNames: admits the property name "ab", which another key of its strings could repeat \(its value escaping the property's schema\): not supported beside properties it admits, unless it is a finite set of names \(enum, const, or a pattern of at most 64 strings\)$/);
});

/**
 * Every object of up to two keys from `names` with values from `values`: each one the schema's
 * grammar takes ajv validates, and each one in the grammar's key order (named properties first in
 * the schema's order, the others after) it refuses ajv refuses. The count ajv validates.
 */
function holdObjectsToAjv(schema: JsonSchema, names: readonly string[], values: readonly string[]): number {
  const inOrder = (keys: string[]) => {
    const s = schema as Record<string, unknown>;
    const own = Object.keys((s["properties"] ?? {}) as object);
    const props = [...own, ...((s["required"] ?? []) as string[]).filter((k) => !own.includes(k))];
    const rank = (k: string) => (props.includes(k) ? props.indexOf(k) : props.length);
    return keys.every((k, i) => i === 0 || rank(keys[i - 1]!) < rank(k) || (rank(k) === props.length && rank(keys[i - 1]!) === props.length));
  };
  const g = parseGbnf(jsonSchemaToGbnf(schema));
  const validate = newAjv2020().compile(schema as object);
  let valid = 0;
  for (const a of ["", ...names]) {
    for (const b of ["", ...names]) {
      if ((a === "" && b !== "") || (a !== "" && a === b)) continue;
      const keys = [a, b].filter((k) => k !== "");
      for (const va of values) {
        for (const vb of keys.length === 2 ? values : [""]) {
          const t = `{${keys.map((k, i) => `${JSON.stringify(k)}:${i === 0 ? va : vb}`).join(",")}}`;
          const ok = validate(JSON.parse(t));
          if (accepts(g, t)) assert.ok(ok, `${JSON.stringify(schema)} ${t}: taken, but ajv refuses it`);
          else if (inOrder(keys)) assert.equal(ok, false, `${JSON.stringify(schema)} ${t}: refused, but ajv validates it`);
          if (ok) valid++;
        }
      }
    }
  }
  return valid;
}

test("patternProperties: keys of the patterns with values of their schema, a property a pattern matches held to both schemas, as ajv reads them; judged over every object of up to two keys; was refused as an unknown keyword (llama.cpp's converter passes it over)", () => {
  const names = ["id", "x-a", "x-", "x-ab", "y", "a1", "1b", "ab", "s_", "s_q", "n", "X-a", "x-1"];
  const values = ["1", '"s"', '"abc"', "-2"];
  const schemas: JsonSchema[] = [
    { type: "object", patternProperties: { "^x-": { type: "integer" } }, additionalProperties: false },
    { type: "object", properties: { id: { type: "string" } }, required: ["id"], patternProperties: { "^x-[a-z]+$": { type: "integer" } }, additionalProperties: false },
    { type: "object", patternProperties: { "^a": { type: "integer" }, "b$": { type: "integer" } }, additionalProperties: false },
    { type: "object", properties: { n: { type: "integer" }, id: {} }, patternProperties: { "^s_": { type: "string", maxLength: 2 } }, additionalProperties: false, minProperties: 1, maxProperties: 2 },
    // a required name that is no property takes the schema of the pattern that matches it
    { type: "object", required: ["x-1"], patternProperties: { "^x-": { type: "integer" } }, additionalProperties: false },
    // unanchored, a Unicode-flag class, a length beside: the pattern read as a schema's pattern is
    { type: "object", patternProperties: { "\\p{Ll}_": { type: "string" }, "-": { type: "string" } }, additionalProperties: false, maxProperties: 1 },
    // a pattern that matches a property (refused before the forty-third session): both schemas, the name written once
    { type: "object", properties: { ab: {} }, patternProperties: { "^a": { type: "integer" } }, additionalProperties: false },
    { type: "object", required: ["ab"], patternProperties: { "^a": { type: "integer" } }, additionalProperties: false, minProperties: 1 },
  ];
  const ajv = makeAjv();
  for (const schema of schemas) {
    const valid = holdObjectsToAjv(schema, names, values);
    assert.ok(valid > 3, `${JSON.stringify(schema)}: ${valid} valid texts`);
    const r = checkSchema(schema as Record<string, unknown>, new Rng(11), ajv, 30, 0);
    assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], JSON.stringify(schema));
    assert.ok(r.walks > 0, JSON.stringify(schema));
  }
  // a property name is matched by the pattern's grammar, not by a RegExp: this one backtracks 2^40
  // steps on the name (without the change the compile never returned)
  const name = `${"a".repeat(40)}!`;
  const slow = parseGbnf(jsonSchemaToGbnf({ type: "object", properties: { [name]: {} }, patternProperties: { "^(a+)+$": { type: "integer" } }, additionalProperties: false }));
  assert.equal(accepts(slow, `{${JSON.stringify(name)}:"x","aaa":1}`), true);
  assert.equal(accepts(slow, '{"aab":1}'), false);
  // additionalProperties unset beside patterns: other keys are not written (as beside properties; ajv would take them)
  const open = { type: "object", patternProperties: { "^x-": { type: "integer" } } } as const;
  const g = parseGbnf(jsonSchemaToGbnf(open));
  assert.equal(accepts(g, '{"x-a":1}'), true);
  assert.equal(accepts(g, '{"y":1}'), false);
  // what a grammar here does not write is refused naming it
  const faults: [JsonSchema, RegExp][] = [
    [{ type: "object", patternProperties: { "(": {} } }, /^GrammarError: #\/patternProperties\/\(: not a regular expression JavaScript's RegExp reads with the u flag/],
    [{ type: "object", patternProperties: { "^a(?=b)": {} } }, /^GrammarError: #\/patternProperties\/\^a\(\?=b\): regex "\^a\(\?=b\)", at 2: a lookahead/],
    [{ allOf: [{ type: "object", patternProperties: { "^a": {} } }, { type: "object", properties: { b: {} } }] }, /^GrammarError: #\/allOf\/0\/patternProperties: not supported in a part of allOf/],
  ];
  for (const [schema, message] of faults) assert.throws(() => jsonSchemaToGbnf(schema), message, JSON.stringify(schema));
});

test("propertyNames: the names it refuses are not written, its finite names are optional properties of additionalProperties' schema, else other keys are its strings; exactly the objects ajv validates over every object of up to two keys (was refused unless {type: \"string\"})", () => {
  const names = ["a", "b", "c", "ab", "abc", "A", "zz", "a1", ""];
  const values = ["1", '"s"'];
  // each schema with the order its grammar writes keys in (named ones first, in this order; the rest after)
  const cases: [JsonSchema, string[]][] = [
    // zod's z.record(z.string().regex(...), z.number())
    [{ type: "object", propertyNames: { type: "string", pattern: "^[a-z]+$" }, additionalProperties: { type: "integer" } }, []],
    [{ type: "object", propertyNames: { maxLength: 2 } }, []],
    [{ type: "object", propertyNames: { enum: ["a", "b", "c"] }, additionalProperties: { type: "integer" } }, ["a", "b", "c"]],
    [{ type: "object", properties: { a: { type: "string" }, zz: {} }, propertyNames: { enum: ["a", "b"] }, additionalProperties: { type: "integer" } }, ["a", "zz", "b"]],
    [{ type: "object", properties: { A: {} }, propertyNames: { pattern: "^[a-z]" }, additionalProperties: true }, ["A"]],
    [{ type: "object", propertyNames: false }, []],
    [{ type: "object", propertyNames: { pattern: "^[a-z]+$" }, additionalProperties: { type: "integer" }, minProperties: 1, maxProperties: 2 }, []],
    [{ type: "object", propertyNames: { const: "a" } }, ["a"]],
    [{ type: "object", properties: { a: {}, b: { type: "integer" } }, required: ["a"], propertyNames: { minLength: 1 }, additionalProperties: false }, ["a", "b"]],
  ];
  const ajv = makeAjv();
  for (const [schema, order] of cases) {
    const g = parseGbnf(jsonSchemaToGbnf(schema));
    const validate = newAjv2020().compile(schema as object);
    const rank = (k: string) => (order.includes(k) ? order.indexOf(k) : order.length);
    let valid = 0;
    for (const a of ["-", ...names]) {
      for (const b of ["-", ...names]) {
        if ((a === "-" && b !== "-") || (a !== "-" && a === b)) continue;
        const keys = [a, b].filter((k) => k !== "-");
        for (const va of values) {
          for (const vb of keys.length === 2 ? values : [""]) {
            const t = `{${keys.map((k, i) => `${JSON.stringify(k)}:${i === 0 ? va : vb}`).join(",")}}`;
            const ok = validate(JSON.parse(t));
            if (ok) valid++;
            const written = keys.length < 2 || rank(keys[0]!) < rank(keys[1]!) || rank(keys[1]!) === order.length;
            if (written) assert.equal(accepts(g, t), ok, `${JSON.stringify(schema)} ${t}`);
            else assert.equal(accepts(g, t), false, `${JSON.stringify(schema)} ${t}: out of the grammar's order`);
          }
        }
      }
    }
    assert.ok(valid > 0, JSON.stringify(schema));
    const r = checkSchema(schema as Record<string, unknown>, new Rng(13), ajv, 30, 0);
    assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], JSON.stringify(schema));
  }
  const faults: [JsonSchema, RegExp][] = [
    [{ type: "object", properties: { a: {} }, required: ["a"], propertyNames: { pattern: "^b" } }, /^GrammarError: #\/propertyNames: the required name "a" is not one it admits: no object has it$/],
    [{ type: "object", properties: { ab: {} }, propertyNames: { pattern: "^a" }, additionalProperties: true }, /^GrammarError: #\/propertyNames: admits the property name "ab", which another key of its strings could repeat/],
    [{ type: "object", patternProperties: { "^a": {} }, propertyNames: { maxLength: 3 } }, /^GrammarError: #\/propertyNames: not supported beside patternProperties$/],
    [{ type: "object", propertyNames: 3 }, /^GrammarError: #\/propertyNames: expected a schema, got 3$/],
  ];
  for (const [schema, message] of faults) assert.throws(() => jsonSchemaToGbnf(schema), message, JSON.stringify(schema));
});

test("contains / minContains / maxContains: from minContains to maxContains elements match, anywhere, exactly as ajv validates every array of up to 4 elements from 5 values; a maxContains below maxItems where contains is more than a type, const or enum, contains beside a tuple, and contains beside items false are refused naming them (a maxContains below maxItems was refused; items false wrote [])", () => {
  const values = ["1", "5", '"a"', "7", '"b"'];
  const arrays: string[] = ["[]"];
  for (let n = 1, layer = [[] as string[]]; n <= 4; n++) {
    layer = layer.flatMap((a) => values.map((v) => [...a, v]));
    arrays.push(...layer.map((a) => `[${a.join(",")}]`));
  }
  const schemas: JsonSchema[] = [
    { type: "array", items: { type: "integer" }, contains: { minimum: 5 } },
    { type: "array", contains: { const: "a" }, minContains: 2, maxItems: 3 },
    { type: "array", contains: { type: "string" }, minItems: 2 },
    { type: "array", items: { type: ["integer", "string"] }, contains: { const: 5 }, minContains: 2 },
    { type: "array", contains: { type: "integer" }, maxContains: 4, maxItems: 4 },
    { type: "array", contains: { const: 1 }, minContains: 0 },
    { contains: { const: "b" }, maxItems: 2 },
    { type: "array", contains: { const: "a" }, minContains: 3, minItems: 4, maxItems: 4 },
    { type: "array", items: { enum: [1, 5, 7, "a"] }, contains: { type: "string" }, minItems: 1 },
    // a maxContains below maxItems: the other elements are those contains rules out (a type, const or enum)
    { type: "array", contains: { const: "a" }, maxContains: 1 },
    { type: "array", items: { type: "integer", minimum: -3 }, contains: { enum: [1, 7] }, maxContains: 2, maxItems: 4 },
    { type: "array", items: { type: ["integer", "string"] }, contains: { type: "string" }, minContains: 1, maxContains: 1 },
    { type: "array", contains: { type: "string" }, minContains: 0, maxContains: 1, minItems: 2 },
    { type: "array", items: { type: "integer", maximum: 9 }, contains: { const: 5 }, minContains: 0, maxContains: 0 },
    { type: "array", items: false, contains: { const: 5 }, minContains: 0 },
    // a number ruled out of numbers (refused before the forty-third session)
    { type: "array", items: { type: "number", maximum: 9 }, contains: { const: 1 }, maxContains: 1 },
  ];
  const ajv = makeAjv();
  for (const schema of schemas) {
    const g = parseGbnf(jsonSchemaToGbnf(schema));
    const validate = newAjv2020().compile(schema as object);
    let valid = 0;
    for (const t of arrays) {
      const ok = validate(JSON.parse(t));
      if (ok) valid++;
      assert.equal(accepts(g, t), ok, `${JSON.stringify(schema)} ${t}`);
    }
    assert.ok(valid > 0, JSON.stringify(schema));
    const r = checkSchema(schema as Record<string, unknown>, new Rng(17), ajv, 30, 30);
    assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], JSON.stringify(schema));
  }
  // a long array: the loop past minItems is a repetition, not a rule per element
  const long = parseGbnf(jsonSchemaToGbnf({ type: "array", items: { type: "integer" }, contains: { minimum: 5 } }));
  assert.equal(accepts(long, `[${"1,".repeat(3000)}5]`), true);
  assert.equal(accepts(long, `[${"1,".repeat(3000)}1]`), false);
  const faults: [JsonSchema, RegExp][] = [
    [{ type: "array", contains: { minimum: 5 }, maxContains: 1 }, /^GrammarError: #\/maxContains: not supported where contains is more than a type, a const or an enum \(below maxItems it needs elements the contains schema does not match/],
    [{ type: "array", items: false, contains: { const: 1 } }, /^GrammarError: #\/contains: 1 matching elements, but items is false: no element may stand in the array$/],
    [{ type: "array", prefixItems: [{ type: "string" }], contains: { const: "a" } }, /^GrammarError: #\/contains: not supported beside a tuple \(prefixItems, or items as a list\) or uniqueItems$/],
    [{ type: "array", contains: { const: "a" }, minContains: 3, maxItems: 2 }, /^GrammarError: #\/minContains: 3 matching elements, but maxItems is 2: no array has them$/],
    [{ type: "array", contains: { const: "a" }, minContains: 2, maxContains: 1 }, /^GrammarError: #\/maxContains: 1 is below minContains 2$/],
    [{ type: "array", contains: { const: "a" }, minContains: -1 }, /^GrammarError: #\/minContains: expected an integer from 0 to 10000, got -1$/],
  ];
  for (const [schema, message] of faults) assert.throws(() => jsonSchemaToGbnf(schema), message, JSON.stringify(schema));
});

test("unevaluatedProperties: as additionalProperties where nothing is beside it, false beside allOf / $ref / anyOf closes the merged object to the parts' properties, as ajv validates every object of up to four keys (was refused as an unknown keyword)", () => {
  const texts: string[] = [];
  for (let mask = 0; mask < 16; mask++) {
    const keys = ["a", "b", "c", "d"].filter((_, i) => mask & (1 << i));
    for (const v of ["1", '"s"']) texts.push(`{${keys.map((k) => `"${k}":${v}`).join(",")}}`);
  }
  const exact: JsonSchema[] = [
    { type: "object", properties: { a: { type: "integer" } }, unevaluatedProperties: false },
    { type: "object", properties: { a: {} }, unevaluatedProperties: { type: "string" } },
    { type: "object", properties: { a: {} }, additionalProperties: true, unevaluatedProperties: false },
    { allOf: [{ type: "object", properties: { a: { type: "integer" } } }, { properties: { b: { type: "string" } } }], unevaluatedProperties: false },
    { $defs: { base: { type: "object", properties: { a: {} }, required: ["a"] } }, $ref: "#/$defs/base", properties: { b: {} }, unevaluatedProperties: false },
  ];
  for (const schema of exact) agreesWithAjv(schema, texts);
  // anyOf: each alternative closed to its own keys and those beside (an object both alternatives take, ajv takes with the keys of both: not written)
  const either = { type: "object", properties: { a: {} }, anyOf: [{ properties: { b: { type: "integer" } }, required: ["b"] }, { properties: { c: {} }, required: ["c"] }], unevaluatedProperties: false } as const;
  const g = parseGbnf(jsonSchemaToGbnf(either));
  const validate = newAjv2020().compile(either);
  for (const t of texts) {
    const ok = validate(JSON.parse(t));
    if (accepts(g, t)) assert.ok(ok, t);
    else if (!(t.includes('"b":1') && t.includes('"c"'))) assert.equal(ok, false, t);
  }
  const faults: [JsonSchema, RegExp][] = [
    [{ allOf: [{ type: "object", properties: { a: {} }, unevaluatedProperties: false }, { properties: { b: {} } }] }, /^GrammarError: #\/allOf\/0\/unevaluatedProperties: only false beside allOf \(or anyOf, \$ref\) is supported, not in one of its parts or as a schema$/],
    [{ allOf: [{ type: "object", properties: { a: {} } }], unevaluatedProperties: { type: "string" } }, /^GrammarError: #\/unevaluatedProperties: only false beside allOf/],
    // an alternative's own sees only its own keys evaluated (the property beside would be unevaluated there)
    [{ type: "object", properties: { a: {} }, anyOf: [{ properties: { b: {} }, unevaluatedProperties: false }] }, /^GrammarError: #\/anyOf\/0\/unevaluatedProperties: only false beside allOf/],
    [{ allOf: [{ type: "object", properties: { a: {} }, additionalProperties: { type: "integer" } }], unevaluatedProperties: false }, /^GrammarError: #\/unevaluatedProperties: not supported beside #\/allOf\/0\/additionalProperties/],
    [{ allOf: [{ type: "object", properties: { a: {} } }, { required: ["z"] }], unevaluatedProperties: false }, /^GrammarError: #\/unevaluatedProperties: false, but "z" is required and no part has it as a property: no object has it$/],
  ];
  for (const [schema, message] of faults) assert.throws(() => jsonSchemaToGbnf(schema), message, JSON.stringify(schema));
});

test("dependentRequired: where a key is present so are the keys it names (before or after it in the grammar's order), exactly as ajv validates every object of up to four properties (was refused as an unknown keyword)", () => {
  const texts: string[] = [];
  for (let mask = 0; mask < 32; mask++) {
    const keys = ["a", "b", "c", "d", "x"].filter((_, i) => mask & (1 << i));
    texts.push(`{${keys.map((k) => `"${k}":1`).join(",")}}`);
  }
  const props = { a: {}, b: {}, c: {}, d: {} };
  for (const schema of [
    { type: "object", properties: props, dependentRequired: { a: ["c"] }, additionalProperties: false },
    { type: "object", properties: props, dependentRequired: { c: ["a"] }, additionalProperties: false },
    { type: "object", properties: props, dependentRequired: { a: ["b", "d"], d: ["c"] }, additionalProperties: false },
    { type: "object", properties: props, required: ["b"], dependentRequired: { b: ["d"], c: ["a"] }, additionalProperties: false },
    { type: "object", properties: props, dependentRequired: { a: ["b"], b: ["a"] }, additionalProperties: false },
    { type: "object", properties: props, dependentRequired: { a: ["z"] }, additionalProperties: false },
    { type: "object", properties: props, dependentRequired: { c: ["a"] }, additionalProperties: { type: "integer" } },
  ] as JsonSchema[]) agreesWithAjv(schema, texts);
  const faults: [JsonSchema, RegExp][] = [
    [{ type: "object", properties: { a: {} }, dependentRequired: { a: ["z"] }, additionalProperties: true }, /^GrammarError: #\/dependentRequired\/a: "z" is no property here, and other keys may be written \(it could be one\): not supported$/],
    [{ type: "object", properties: { a: {} }, required: ["a"], dependentRequired: { a: ["z"] } }, /^GrammarError: #\/dependentRequired\/a: "a" is required, but needs "z", which no object here has$/],
    [{ type: "object", properties: { a: {} }, dependentRequired: { a: "b" } }, /^GrammarError: #\/dependentRequired\/a: expected a list of property names, got "b"$/],
  ];
  for (const [schema, message] of faults) assert.throws(() => jsonSchemaToGbnf(schema), message, JSON.stringify(schema));
});

test("dependentRequired beside minProperties / maxProperties: the keys it makes present counted with the others, exactly as ajv validates every object of up to four properties and one other key (was refused as not supported beside them)", () => {
  const texts: string[] = [];
  for (let mask = 0; mask < 32; mask++) {
    const keys = ["a", "b", "c", "d", "x"].filter((_, i) => mask & (1 << i));
    for (const v of ["1", '"s"']) texts.push(`{${keys.map((k) => `"${k}":${v}`).join(",")}}`);
  }
  const props = { a: {}, b: {}, c: {}, d: {} };
  const ajv = makeAjv();
  for (const schema of [
    { type: "object", properties: props, dependentRequired: { a: [] }, additionalProperties: false, minProperties: 1 },
    { type: "object", properties: props, dependentRequired: { a: ["c"] }, additionalProperties: false, minProperties: 2 },
    { type: "object", properties: props, dependentRequired: { a: ["b", "d"] }, additionalProperties: false, maxProperties: 2 },
    { type: "object", properties: props, dependentRequired: { d: ["a"] }, additionalProperties: false, minProperties: 2, maxProperties: 3 },
    { type: "object", properties: props, required: ["b"], dependentRequired: { c: ["a"] }, additionalProperties: { type: "integer" }, minProperties: 2, maxProperties: 3 },
    { type: "object", properties: props, dependentRequired: { c: ["a"] }, additionalProperties: true, maxProperties: 1 },
  ] as JsonSchema[]) {
    agreesWithAjv(schema, texts);
    const r = checkSchema(schema as Record<string, unknown>, new Rng(9), ajv, 30, 0);
    assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], JSON.stringify(schema));
  }
  assert.throws(() => jsonSchemaToGbnf({ type: "object", properties: { a: {}, b: {} }, required: ["a"], dependentRequired: { a: ["b"] }, additionalProperties: false, maxProperties: 1 }), /^GrammarError: #\/dependentRequired: no object satisfies it beside required and maxProperties 1$/);
});

test("not: {} (zod's z.never() / z.undefined()) leaves a property out, closes other keys and elements; not of a type, const or enum leaves those out, exactly as ajv validates (was refused as an unknown keyword)", () => {
  const texts = ["null", "true", "false", "0", "1", "-1", "2", "-2", "-3", "7", "1.5", '""', '"a"', '"b"', '"ab"', '"x"', '"\\u0061"', '"\\ud83d\\ude00"', "[]", "[1]", '[1,"a"]', '["a",1]', "[1,2]", '[1,"a",2]', "{}", '{"a":1}', '{"b":"x"}', '{"a":1,"b":"x"}', '{"z":1}', '{"a":1,"z":2}'];
  for (const schema of [
    { type: "object", properties: { a: { type: "integer" }, b: { not: {} } }, additionalProperties: { type: "integer" } },
    { type: "object", properties: { a: { type: "integer" } }, additionalProperties: { not: {} } },
    { type: "object", properties: { a: { type: "integer" }, b: { not: true, description: "never" } }, additionalProperties: true },
    { type: "array", items: { not: {} } },
    { type: "array", prefixItems: [{ type: "integer" }, { not: {} }] },
    { anyOf: [{ not: {} }, { type: "integer" }] },
    { not: { type: "string" } },
    { not: { type: ["object", "array", "number"] } },
    { type: ["string", "integer"], not: { type: "integer" } },
    { type: "string", not: { const: "a" } },
    { type: "string", not: { enum: ["a", "ab", "x"] } },
    { type: ["string", "boolean", "null"], not: { enum: ["b", true, null] } },
    { enum: ["a", "b", 1, true], not: { enum: ["b", 1] } },
    { const: "a", not: { type: "integer" } },
    { anyOf: [{ type: "string" }, { type: "integer", minimum: 0 }], not: { const: "a" } },
    { type: "string", not: false },
    { type: "integer", not: { const: 1 } },
    { type: ["string", "boolean"], nullable: true, not: { enum: [null, "a"] } },
    { type: "integer", minimum: -2, maximum: 1, not: { enum: [-2, 0, 7] } },
    { type: "integer", exclusiveMinimum: -3, not: { enum: [-2, -1, 1] } },
    { type: ["integer", "string"], maximum: 0, not: { enum: [0, -2, "a"] } },
    { allOf: [{ type: "object", properties: { a: { type: "integer" } }, additionalProperties: { type: "integer" } }, { not: { type: "string" } }] },
    // (an enum's values are written as JSON.stringify writes them, not escaped: "\u0061" is left to the strings)
  ] as JsonSchema[]) agreesWithAjv(schema, typeof schema === "object" && ("enum" in schema || "const" in schema) ? texts.filter((t) => !t.includes("\\u")) : texts);
  const faults: [JsonSchema, RegExp][] = [
    [{ type: "string", not: {} }, /^GrammarError: #\/not: \{\} admits every value, so the schema admits none$/],
    [{ type: "object", properties: { a: { not: {} } }, required: ["a"] }, /^GrammarError: #\/properties\/a: false admits no value, but "a" is required$/],
    [{ type: "number", not: { type: "integer" } }, /^GrammarError: #\/not: ruling the integers out of numbers is not supported in a grammar$/],
    [{ type: "string", not: { type: "string" } }, /^GrammarError: #\/not: rules out every type the schema beside it admits$/],
    [{ enum: ["a"], not: { const: "a" } }, /^GrammarError: #\/not: rules out every value of the enum beside it$/],
    [{ allOf: [{ type: "object", properties: { a: {} } }, { not: { type: "object" } }] }, /^GrammarError: #\/allOf\/1\/not: rules out objects, which the other parts of allOf are$/],
  ];
  for (const [schema, message] of faults) assert.throws(() => jsonSchemaToGbnf(schema), message, JSON.stringify(schema));
  // a key that is no property's name may begin with an escaped surrogate pair too (it was refused there)
  agreesWithAjv({ type: "object", properties: { a: {} }, additionalProperties: true }, ['{"\\ud83d\\ude00":1}', '{"\\u0062":1}', '{"a":1,"\\ud83d\\ude00b":2}']);
});

/** every JSON number text of up to `n` characters over digits 0, 1, 5 and "-", "." (JSON.parse takes it) */
function numberTexts(n: number): string[] {
  return allStrings(["0", "1", "5", "-", "."], n).filter((t) => {
    try {
      return typeof JSON.parse(t) === "number";
    } catch {
      return false;
    }
  });
}

test("not of a number's const or enum (the ranges between the values), of a string's pattern or length, of a const beside a pattern (the pattern's automaton run with the complement's), exactly as ajv validates every number and string enumerated; random walks of the grammar all validate (all were refused)", () => {
  // (-0 and an integer written with a fraction, which ajv takes, are not written: bounded numbers' known restrictions)
  const numbers = numberTexts(4).filter((t) => !Object.is(JSON.parse(t), -0));
  const integers = numbers.filter((t) => !t.includes("."));
  const strings = allStrings(["a", "b", '"', "é"], 3).map((t) => JSON.stringify(t));
  const others = ["null", "true", "[]", "{}", "1", '"a"'];
  const ajv = makeAjv();
  const cases: [JsonSchema, string[]][] = [
    [{ type: "integer", not: { const: 0 } }, integers],
    [{ type: "integer", minimum: -5, maximum: 10, not: { enum: [-5, 0, 1, 11] } }, integers],
    [{ type: "integer", multipleOf: 5, not: { const: 10 } }, integers],
    [{ type: "number", not: { const: 0 } }, numbers],
    [{ type: "number", not: { enum: [1.5, 5, -0.5] } }, numbers],
    [{ type: "number", exclusiveMinimum: -1, maximum: 5, not: { enum: [5, 0.5, -1, 7] } }, numbers],
    [{ type: ["number", "string"], not: { enum: [1, "a"] } }, [...numbers, ...strings]],
    [{ type: "string", not: { pattern: "^a" } }, [...strings, ...others]],
    [{ not: { pattern: "a$" } }, [...strings, ...others]],
    [{ not: { type: "string", pattern: "a$" } }, [...strings, ...others]],
    [{ type: "string", not: { maxLength: 1 } }, strings],
    [{ type: "string", not: { pattern: "b", minLength: 2 } }, strings],
    [{ type: "string", pattern: "^[ab\"]+$", not: { pattern: "aa|b\"" } }, strings],
    [{ type: "string", maxLength: 2, not: { enum: ["a", "ab", 'a"'] } }, strings],
    [{ type: "string", not: { const: 'a"b' } }, strings],
    [{ type: "string", format: "uuid", pattern: "^[ab]", not: { const: "a" } }, strings],
    [{ enum: ["a", "b", "ab", 1], not: { pattern: "^a" } }, [...strings, ...others]],
    [{ type: "object", properties: { s: { type: "string", not: { pattern: "\"" } } }, required: ["s"], additionalProperties: false }, strings.map((t) => `{"s":${t}}`)],
    // if of a string's pattern or length: else where it fails is not of it (refused before)
    [{ type: "string", if: { pattern: "^a" }, [THEN]: { maxLength: 2 }, else: { minLength: 2 } }, strings],
    [{ if: { pattern: "b$" }, [THEN]: { type: "string", minLength: 2 } }, [...strings, ...others]],
    [{ type: ["string", "integer"], if: { type: "string", maxLength: 1 }, [THEN]: { pattern: "a" }, else: { not: { const: 5 } } }, [...strings, ...others, "5", "15"]],
  ];
  for (const [schema, texts] of cases) {
    agreesWithAjv(schema, texts);
    const r = checkSchema(schema as Record<string, unknown>, new Rng(11), ajv, 60, 0);
    assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], JSON.stringify(schema));
    assert.ok(r.walks >= 30, `${r.walks} walks ended: ${JSON.stringify(schema)}`);
  }
  const faults: [JsonSchema, RegExp][] = [
    [{ type: "string", pattern: "^a$", not: { pattern: "a" } }, /^GrammarError: #\/not: no string satisfies all of them beside the pattern and lengths it applies to$/],
    [{ type: "number", not: { const: 1e20 } }, /^GrammarError: #\/not: ruling out 100000000000000000000 is not supported \(a bound of at most 999999999999999 in size\)$/],
    [{ type: "integer", minimum: 2, maximum: 3, not: { enum: [2, 3] } }, /^GrammarError: #\/not: rules out every integer the schema beside it admits$/],
    [{ type: "string", not: { pattern: "(?=a)" } }, /^GrammarError: #\/not\/pattern: regex "\(\?=a\)", at 0: a lookahead/],
    [{ type: "string", format: "date", not: { const: "2020-01-01" } }, /^GrammarError: #\/format: "date" beside #\/not is not supported \(write the format as a pattern\)$/],
    [{ type: "object", not: { minProperties: 1 } }, /^GrammarError: #\/not: only a type, a const or an enum can be ruled out in a grammar \(not of minProperties would need the complement of its grammar\)$/],
  ];
  for (const [schema, message] of faults) assert.throws(() => jsonSchemaToGbnf(schema), message, JSON.stringify(schema));
});

test("patternProperties whose pattern matches a named property (the property takes both schemas, the pattern's keys leave its name out: no key is written twice), patterns of different schemas (a key takes every schema of the patterns it matches), additionalProperties beside them (the keys no pattern matches): exactly as ajv validates every object of up to two keys in the grammar's order (all were refused)", () => {
  const names = ["ab", "ac", "a", "b", "x", "ba", "a\"", "zb", "q"];
  const values = ["1", "-2", "7", '"s"', '"st"', "1.5", "null"];
  const schemas: JsonSchema[] = [
    { type: "object", properties: { ab: { type: "integer" } }, patternProperties: { "^a": { type: "number", minimum: 0 } }, additionalProperties: false },
    { type: "object", properties: { ab: { type: "integer" }, x: {} }, required: ["x"], patternProperties: { "^a": { type: "number", maximum: 5 }, "b$": { type: "number", maximum: 5 } }, additionalProperties: false },
    { type: "object", properties: { a: { type: "string" } }, patternProperties: { a: { type: "string", maxLength: 1 } }, additionalProperties: false, minProperties: 1 },
    { type: "object", properties: { 'a"': { type: "integer" }, ab: { type: "integer", minimum: 0 } }, patternProperties: { "^a.$": { type: "integer", maximum: 1 } }, additionalProperties: false },
    // patterns of different schemas (a key both match takes both), and other keys beside them (the keys no pattern matches)
    { type: "object", patternProperties: { "^a": { type: "integer" }, "b$": { type: "number", minimum: 0 } }, additionalProperties: false },
    { type: "object", properties: { ab: { type: "number" } }, patternProperties: { "^a": { type: "integer" }, "b$": { type: "number", minimum: 0 } }, additionalProperties: { type: "string" } },
    { type: "object", patternProperties: { "^a": { type: "integer" } }, additionalProperties: true },
    { type: "object", properties: { x: {} }, patternProperties: { "^a": { type: "integer" }, "^b": { type: "integer" } }, additionalProperties: { type: "string", maxLength: 1 } },
  ];
  const ajv = makeAjv();
  for (const schema of schemas) {
    assert.ok(holdObjectsToAjv(schema, names, values) > 3, JSON.stringify(schema));
    const r = checkSchema(schema as Record<string, unknown>, new Rng(5), ajv, 80, 0);
    assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], JSON.stringify(schema));
    assert.ok(r.walks >= 20, `${r.walks} walks ended: ${JSON.stringify(schema)}`);
  }
  // the property's name written as the pattern's key a second time is refused (ajv would read the last value only)
  const g = parseGbnf(jsonSchemaToGbnf(schemas[0]!));
  assert.equal(accepts(g, '{"ab":1,"ac":2}'), true);
  assert.equal(accepts(g, '{"ab":1,"ab":2}'), false);
  assert.equal(accepts(g, '{"ab":1,"a\\u0062":2}'), false);
  // more than four different schemas of patterns are refused naming the fifth
  const five = Object.fromEntries(["a", "b", "c", "d", "e"].map((p, i) => [`^${p}`, { type: "integer", minimum: i }]));
  assert.throws(() => jsonSchemaToGbnf({ type: "object", patternProperties: five, additionalProperties: false }), /^GrammarError: #\/patternProperties\/\^e: patterns of more than 4 different schemas are not supported/);
});

test("allOf beyond objects and enums: two lists of alternatives (each pair written, pairs that meet in no value left out), two nots, two patterns (run together), two integer multipleOfs (their least common multiple), exactly as ajv validates; random walks all validate (all were refused)", () => {
  const texts = ["0", "1", "2", "3", "4", "6", "12", "-6", "1.5", '""', '"a"', '"b"', '"ab"', '"ba"', '"abc"', '"bab"', "true", "false", "null", "[]", "{}", '{"a":1}', '{"b":"x"}', '{"a":1,"b":"x"}', '{"a":"x"}', '{"c":true}', '{"a":1,"c":true}'];
  const ajv = makeAjv();
  const schemas: JsonSchema[] = [
    { allOf: [{ anyOf: [{ type: "integer" }, { type: "string" }] }, { anyOf: [{ type: "string", maxLength: 1 }, { type: "boolean" }, { minimum: 2 }] }] },
    { allOf: [{ oneOf: [{ type: "integer" }, { type: "string" }] }, { type: "string" }] },
    { allOf: [{ anyOf: [{ type: "object", properties: { a: { type: "integer" } }, required: ["a"] }, { type: "object", properties: { b: { type: "string" } }, required: ["b"] }] }, { anyOf: [{ type: "object", properties: { a: {}, b: {} }, additionalProperties: false }, { type: "object", properties: { a: {}, c: { type: "boolean" } }, additionalProperties: false }] }] },
    { allOf: [{ type: "string" }, { not: { pattern: "^a" } }, { not: { pattern: "b$" } }] },
    { allOf: [{ type: ["string", "integer"], not: { const: "a" } }, { not: { enum: ["b", 2] } }, { not: { const: 3 } }] },
    { allOf: [{ type: "string", pattern: "a" }, { pattern: "b$" }, { maxLength: 3 }] },
    { allOf: [{ type: "integer" }, { multipleOf: 2 }, { multipleOf: 3 }] },
  ];
  for (const schema of schemas) {
    agreesWithAjv(schema, texts);
    const r = checkSchema(schema as Record<string, unknown>, new Rng(3), ajv, 60, 0);
    assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], JSON.stringify(schema));
    assert.ok(r.walks >= 30, `${r.walks} walks ended: ${JSON.stringify(schema)}`);
  }
  const faults: [JsonSchema, RegExp][] = [
    [{ allOf: [{ anyOf: [{ type: "integer" }] }, { anyOf: [{ type: "string" }, { type: "null" }] }] }, /^GrammarError: #\/allOf\/0\/anyOf: every alternative admits no value with the keywords beside it/],
    [{ allOf: [{ type: "number" }, { multipleOf: 0.5 }, { multipleOf: 0.3 }] }, /^GrammarError: #\/allOf\/2\/multipleOf: 0.3 here and 0.5 at #\/allOf\/1\/multipleOf cannot be one multipleOf: every multiple of both 0.5 and 0.3 is a multiple of 3\/2, a fraction/],
    [{ allOf: [{ type: "object", properties: { a: { type: "integer" } } }, { not: { minProperties: 1 } }] }, /^GrammarError: #\/allOf\/1\/not: only a type, a const or an enum can be ruled out in a grammar/],
  ];
  for (const [schema, message] of faults) assert.throws(() => jsonSchemaToGbnf(schema), message, JSON.stringify(schema));
});

test("not of an object's required / properties (the objects that fail it: a required name absent, or a property present with a value its schema refuses), also in parts of allOf (parts of only nots no longer read as objects); multipleOfs of fractions whose least common multiple is an integer a validator's division tells apart (0.5 and 3: 3; 1.5 of an integer: 3); exactly as ajv validates every object of up to three keys and every integer enumerated; random walks all validate (all were refused)", () => {
  // every object of keys a, b, x in that order (the grammar's: properties, the names a not tests, then other keys), and other values
  const values = ["1", '"s"', "null"];
  const objects = (keys: readonly string[]): string[] => (keys.length === 0 ? [""] : objects(keys.slice(1)).flatMap((rest) => ["", ...values.map((v) => `"${keys[0]}":${v}`)].map((kv) => [kv, rest].filter(Boolean).join(","))));
  const texts = ["1", '"a"', "null", "[]", "true", ...new Set(objects(["a", "b", "x"]).map((b) => `{${b}}`))];
  const ajv = makeAjv();
  const schemas: JsonSchema[] = [
    { type: "object", not: { required: ["a"] } },
    { not: { required: ["a", "b"] } },
    { type: "object", properties: { a: { type: "integer" }, b: {} }, additionalProperties: true, not: { required: ["a", "b"] } },
    { type: "object", properties: { a: {}, b: {} }, additionalProperties: false, not: { type: "object", properties: { a: { type: "string" } } } },
    { not: { type: "object", required: ["a"], properties: { a: { type: "string" } } } },
    { type: "object", additionalProperties: { type: "integer" }, not: { anyOf: [{ required: ["a"] }, { properties: { b: { const: 1 } }, required: ["b"] }] } },
    { type: "object", properties: { a: { type: ["integer", "null"] } }, additionalProperties: { type: "string" }, not: { properties: { b: { const: "s" }, a: { type: "null" } } } },
    { type: "object", minProperties: 2, maxProperties: 2, additionalProperties: false, properties: { a: {}, b: {}, x: {} }, not: { properties: { x: false } } },
    { allOf: [{ type: "object", properties: { a: { type: "integer" }, b: {}, x: {} }, additionalProperties: false }, { not: { required: ["a"] } }, { not: { required: ["b", "x"] } }] },
    { enum: [{ a: 1 }, { b: 1 }, 1, null], not: { required: ["a"] } },
    // parts of only nots are no object parts (they were merged as objects: every other value was refused)
    { allOf: [{ not: { const: 1 } }, { not: { type: "null" } }] },
    { allOf: [{ not: { required: ["a"] } }, { not: { type: "string" } }] },
  ];
  for (const schema of schemas) {
    agreesWithAjv(schema, texts);
    const r = checkSchema(schema as Record<string, unknown>, new Rng(17), ajv, 60, 0);
    assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], JSON.stringify(schema));
    assert.ok(r.walks >= 30, `${r.walks} walks ended: ${JSON.stringify(schema)}`);
  }
  // a not no object of the schema beside fails, or one of another test, stays a one-line refusal
  const faults: [JsonSchema, RegExp][] = [
    [{ type: "object", properties: { a: {} }, required: ["a"], additionalProperties: false, not: { required: ["a"] } }, /^GrammarError: #\/not: rules out every type the schema beside it admits$/],
    [{ type: "object", not: { required: ["a"], minProperties: 1 } }, /^GrammarError: #\/not: only a type, a const or an enum can be ruled out in a grammar \(not of required, minProperties would need the complement of its grammar\)$/],
    [{ type: "object", not: { properties: { a: { type: "object", additionalProperties: false } } } }, /^GrammarError: #\/not\/properties\/a\/not: only a type, a const or an enum can be ruled out in a grammar/],
  ];
  for (const [schema, message] of faults) assert.throws(() => jsonSchemaToGbnf(schema), message, JSON.stringify(schema));

  // multipleOf: every integer from -400 to 400 and multiples and neighbours near 15 digits, both ways
  const big = (k: number) => [-1, 0, 1].flatMap((d) => [Math.floor(999999999999999 / k) * k + d, -(Math.floor(123456789012345 / k) * k) + d]).filter((v) => Math.abs(v) <= 999999999999999).map(String);
  const integers = Array.from({ length: 801 }, (_, i) => String(i - 400));
  for (const [schema, lcm] of [
    [{ allOf: [{ type: "number" }, { multipleOf: 0.5 }, { multipleOf: 3 }] }, 3],
    [{ allOf: [{ type: "integer", multipleOf: 1.5 }, { multipleOf: 2 }] }, 6],
    [{ allOf: [{ multipleOf: 0.1 }, { type: "integer", multipleOf: 7 }] }, 7],
    [{ allOf: [{ multipleOf: 0.25 }, { type: "number", multipleOf: 0.75 }, { multipleOf: 2 }] }, 6],
    [{ type: "integer", multipleOf: 1.5 }, 3],
    [{ type: "integer", multipleOf: 0.5 }, 1],
    [{ allOf: [{ type: "integer", multipleOf: 0.5 }, { multipleOf: 0.75 }] }, 3],
  ] as [JsonSchema, number][]) {
    agreesWithAjv(schema, [...integers, ...big(lcm)]);
    const r = checkSchema(schema as Record<string, unknown>, new Rng(lcm), ajv, 40, 0);
    assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], JSON.stringify(schema));
  }
  for (const [schema, message] of [
    // (a validator reads 21 / 0.7 as 30.000000000000004: 21 is no multiple of 0.7 to it)
    [{ allOf: [{ multipleOf: 0.7 }, { type: "integer", multipleOf: 7 }] }, /^GrammarError: #\/allOf\/1\/multipleOf: 7 here and 0.7 at #\/allOf\/0\/multipleOf cannot be one multipleOf: 21 is a multiple of them, but a validator divides in doubles and reads 21 \/ 0.7 as 30.000000000000004$/],
    [{ type: "integer", multipleOf: 1e-7 }, /^GrammarError: #\/multipleOf: 1e-7 of an integer: an integer of up to 15 digits divided by 1e-7 passes 1e21/],
    [{ type: "number", multipleOf: 0.5 }, /^GrammarError: #\/multipleOf: expected an integer from 1 to 250, got 0.5$/],
  ] as [JsonSchema, RegExp][]) assert.throws(() => jsonSchemaToGbnf(schema), message, JSON.stringify(schema));
  assert.equal(21 / 0.7 === 30, false);
  assert.equal(newAjv2020().compile({ multipleOf: 0.7 })(21), false);
});

/** the key "then" (a literal one reads to the linter as a thenable object) */
const THEN = "then";

test("if / then / else and dependentSchemas: the alternatives they are (if a type, const, enum or an object's property test), exactly as ajv validates every object of up to three keys in the grammar's key order; an if whose complement is no grammar is refused naming it (all were refused as unknown keywords)", () => {
  const values = ['"a"', '"b"', "1", '"x"'];
  const texts = ["1", '"a"', '""', "null", "[]", "-3", "{}"];
  const keyed = (keys: readonly string[]): string[] => (keys.length === 0 ? [""] : keyed(keys.slice(1)).flatMap((rest) => ["", ...values.map((v) => `"${keys[0]}":${v}`)].map((kv) => [kv, rest].filter(Boolean).join(","))));
  for (const body of new Set(keyed(["kind", "n", "z"]))) texts.push(`{${body}}`);
  const props = { kind: { type: "string" }, n: {} };
  for (const schema of [
    { type: "object", properties: { kind: { enum: ["a", "b"] }, n: {} }, required: ["kind"], additionalProperties: false, if: { properties: { kind: { const: "a" } } }, [THEN]: { required: ["n"] }, else: { properties: { n: { type: "string" } } } },
    { type: "object", properties: props, additionalProperties: true, if: { properties: { kind: { const: "a" } }, required: ["kind"] }, [THEN]: { properties: { n: { type: "integer" } } }, else: { properties: { n: { type: "string" } } } },
    { type: "object", properties: props, additionalProperties: { type: "integer" }, if: { required: ["n"] }, [THEN]: { properties: { kind: { const: "b" } } } },
    { type: "object", properties: { kind: { enum: ["a", "b"] } }, required: ["kind"], additionalProperties: true, if: { properties: { kind: { const: "a" } } }, [THEN]: false },
    { type: ["object", "integer"], properties: props, additionalProperties: false, if: { type: "object", properties: { kind: { enum: ["a", "x"] } } }, else: { maximum: 0 } },
    { if: { type: "string" }, [THEN]: { enum: ["a"] }, else: { type: "integer" } },
    { if: { type: "integer" }, [THEN]: { minimum: 1 }, else: { type: "string", maxLength: 0 } },
    { if: { properties: { kind: { const: "a" } } }, [THEN]: { type: "object", additionalProperties: true }, else: false },
    { type: "object", additionalProperties: true, [THEN]: { type: "string" }, else: false },
    { type: "object", properties: { kind: {}, n: {} }, additionalProperties: false, dependentSchemas: { kind: { required: ["n"] } } },
    { type: "object", properties: { kind: {}, n: { type: "integer" } }, additionalProperties: { type: "string" }, dependentSchemas: { n: { properties: { kind: { const: "a" } } }, kind: { required: ["z"] } } },
    { type: ["object", "integer"], properties: { kind: {}, n: {} }, additionalProperties: false, dependentSchemas: { kind: { required: ["n"] } } },
    { type: "object", properties: { kind: {} }, additionalProperties: true, dependentSchemas: { kind: false } },
    // in a part of allOf (or items beside contains): that part's alternatives, each with the other parts
    { allOf: [{ type: "object", properties: props, additionalProperties: false }, { if: { properties: { kind: { const: "a" } } }, [THEN]: { required: ["n"] } }] },
    { type: "array", items: { type: "object", properties: props, additionalProperties: false, dependentSchemas: { n: { required: ["kind"] } } }, contains: { required: ["n"] } },
    // an optional property whose schema then leaves no value may not be present (it was refused: "no value is in every enum")
    { type: "object", properties: { kind: { enum: ["a", "b"] }, n: { enum: ["a", 1] } }, additionalProperties: false, if: { required: ["kind"] }, [THEN]: { properties: { n: { type: "null" } } } },
  ] as Record<string, unknown>[]) agreesWithAjv(schema, schema["type"] === "array" ? [...texts.filter((t) => t.startsWith("{")).map((t) => `[${t}]`), "[]", '[{"n":1},{"kind":"a"}]', '[{"kind":"a","n":1},{}]'] : texts);
  const faults: [JsonSchema, RegExp][] = [
    [{ type: "integer", if: { minimum: 2 }, [THEN]: { maximum: 5 } }, /^GrammarError: #\/if: only a type, a const or an enum, a string's pattern and lengths, or an object's properties \(each a type, const or enum\) and required names, can be tested in a grammar/],
    [{ type: "object", if: { properties: { a: { minimum: 2 } } }, [THEN]: { required: ["a"] } }, /^GrammarError: #\/if\/properties\/a: a property tested by if can be a type, a const or an enum only/],
    [{ type: "object", properties: { a: {} }, unevaluatedProperties: false, dependentSchemas: { a: {} } }, /^GrammarError: #\/unevaluatedProperties: not supported beside dependentSchemas/],
    [{ type: "object", dependentSchemas: { a: {}, b: {}, c: {}, d: {}, e: {} } }, /^GrammarError: #\/dependentSchemas: more than 4 keys are not supported/],
    [{ allOf: [{ type: "object" }, { $ref: "#/$defs/c" }], $defs: { c: { if: { type: "object" }, [THEN]: {} } } }, /^GrammarError: #\/\$defs\/c\/if: not supported in a part of allOf/],
    [{ type: "object", if: { type: "object" }, [THEN]: false }, /^GrammarError: #\/then: the schema false admits no value/],
  ];
  for (const [schema, message] of faults) assert.throws(() => jsonSchemaToGbnf(schema), message, JSON.stringify(schema));
  // each alternative writes the schemas inside it again: nested ones multiply, and past 256 are refused
  // (dependentSchemas of 4 keys nested ten deep took 16 seconds to reach the rule cap)
  const nested = (levels: number): JsonSchema => {
    let s: JsonSchema = { type: "integer" };
    for (let i = 0; i < levels; i++) s = { type: "object", properties: { x: s, y: {} }, additionalProperties: false, if: { required: ["x"] }, [THEN]: { required: ["y"] } };
    return s;
  };
  agreesWithAjv(nested(8), ['{"x":{"x":{"x":{"x":{"x":{"x":{"x":{"x":1,"y":2},"y":2},"y":2},"y":2},"y":2},"y":2},"y":2},"y":2}', '{"x":{}}', "{}", '{"y":1}']);
  assert.throws(() => jsonSchemaToGbnf(nested(9)), /^GrammarError: #(\/properties\/x){8}: if \/ then \/ else and dependentSchemas nested in those of the schemas around it make more than 256 alternatives/);
});

test("unevaluatedItems: the elements past prefixItems (a tuple), or every element where nothing else applies, exactly as ajv validates; in a part of allOf or beside contains refused (was refused as an unknown keyword)", () => {
  const texts = ["[]", "[1]", '["a"]', "[1,2]", '[1,"a"]', '["a",1]', "[1,2,3]", '[1,"a","b"]', '[1,"a",2]', "[true]", "{}", "1"];
  for (const schema of [
    { type: "array", prefixItems: [{ type: "integer" }, { type: "string" }], unevaluatedItems: false },
    { type: "array", prefixItems: [{ type: "integer" }], unevaluatedItems: { type: "string" } },
    { type: "array", prefixItems: [{ type: "integer" }], items: { type: "integer" }, unevaluatedItems: false },
    { type: "array", unevaluatedItems: { type: "integer" } },
    { type: "array", unevaluatedItems: false },
    { type: "array", items: { type: "integer" }, unevaluatedItems: false },
    { allOf: [{ type: "array", prefixItems: [{ type: "integer" }] }], unevaluatedItems: false },
    { anyOf: [{ type: "array", prefixItems: [{ type: "integer" }] }, { type: "array", prefixItems: [{ type: "string" }, {}] }], unevaluatedItems: false },
    { type: "array", prefixItems: [{ type: "integer" }], unevaluatedItems: { not: {} } },
  ] as JsonSchema[]) agreesWithAjv(schema, texts);
  const faults: [JsonSchema, RegExp][] = [
    [{ type: "array", contains: { type: "integer" }, unevaluatedItems: false }, /^GrammarError: #\/unevaluatedItems: not supported beside contains/],
    [{ allOf: [{ type: "array", unevaluatedItems: false }, { prefixItems: [{ type: "integer" }] }] }, /^GrammarError: #\/allOf\/0\/unevaluatedItems: only beside allOf \(or anyOf, \$ref\) is supported, not in one of its parts$/],
    [{ type: "array", unevaluatedItems: 1 }, /^GrammarError: #\/unevaluatedItems: expected a schema, got 1$/],
  ];
  for (const [schema, message] of faults) assert.throws(() => jsonSchemaToGbnf(schema), message, JSON.stringify(schema));
});

test("minProperties, dependentRequired and contains over thousands of keys or elements are refused in one line naming the keyword (the rule cap, or one raised past what the stack builds), never a RangeError", () => {
  const many = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: "integer" }]));
  const cases: [JsonSchema, number | undefined, RegExp][] = [
    [{ type: "object", properties: many(4000), maxProperties: 1 }, undefined, /^the schema needs more than 5000 grammar rules$/],
    [{ type: "array", contains: { const: 1 }, minContains: 3000 }, undefined, /^#\/contains: too many grammar states to build/],
    [{ type: "array", contains: { const: 1 }, minContains: 9000 }, 1e6, /^#\/contains: too many grammar states to build/],
    [{ type: "object", properties: many(9000), maxProperties: 1 }, 1e6, /^#\/maxProperties: too many grammar states to build/],
    [{ type: "object", properties: many(9000), dependentRequired: { p0: ["p8999"] } }, 1e6, /^#\/dependentRequired: too many grammar states to build/],
  ];
  for (const [schema, maxRules, message] of cases) {
    // (which limit comes first depends on the stack's size: either is the one line)
    assert.throws(() => jsonSchemaToGbnf(schema, maxRules === undefined ? {} : { maxRules }), (e: Error) => e.name === "GrammarError" && (message.test(e.message) || /^the schema needs more than \d+ grammar rules$/.test(e.message)), String(message));
  }
});

test("a required name that is no property is a key of additionalProperties' schema (any value where it says nothing), as ajv reads it (it was refused as not among the properties); allOf of objects keeps each part's additionalProperties for other keys", () => {
  const texts = ["{}", '{"a":1}', '{"a":"x"}', '{"b":1}', '{"a":{"x":[1]}}', '{"a":1,"b":2}', '{"b":1,"a":"x"}', '{"b":"s","a":1}', '{"b":1,"a":1}', '{"b":1,"a":"x","c":"y"}', '{"b":1,"a":"x","c":1}'];
  // (the grammar writes the properties in the schema's order, then a required other key, then any others: texts in that order)
  // (and an object with properties no others unless additionalProperties says so: closed)
  const aFirst = texts.filter((t) => !t.startsWith('{"b"')), bFirst = texts.filter((t) => !(t.startsWith('{"a"') && t.includes('"b"'))), closed = bFirst.filter((t) => !t.includes('"c"'));
  for (const [schema, inOrder] of [
    [{ type: "object", required: ["a"] }, aFirst],
    [{ type: "object", properties: { b: { type: "integer" } }, required: ["a"] }, closed],
    [{ type: "object", properties: { b: { type: "integer" } }, required: ["a", "b"], additionalProperties: { type: "string" } }, bFirst],
    [{ type: "object", required: ["a"], additionalProperties: { type: "integer" } }, aFirst],
    // required in an anyOf alternative beside the properties (either key present)
    [{ type: "object", properties: { b: { type: "integer" } }, anyOf: [{ required: ["a"] }, { required: ["b"] }] }, closed],
    [{ allOf: [{ type: "object" }, { required: ["a"] }] }, aFirst],
  ] as const) agreesWithAjv(schema, inOrder);
  // allOf of objects without properties: other keys' values take every part's additionalProperties (they took any value)
  agreesWithAjv({ allOf: [{ type: "object", additionalProperties: { type: "integer" } }, { type: "object" }] }, ['{"a":"x"}', '{"a":1}', "{}", '{"a":1,"b":"y"}', '{"a":1,"b":2}']);
  agreesWithAjv({ allOf: [{ type: "object", additionalProperties: { type: "integer" } }, { additionalProperties: { maximum: 3 } }] }, ['{"a":2}', '{"a":5}', '{"a":"x"}', '{"a":2.5}']);
  assert.throws(() => jsonSchemaToGbnf({ allOf: [{ type: "object", additionalProperties: { type: "integer", minimum: 5 } }, { type: "object", additionalProperties: { maximum: 2 } }] }), /^GrammarError: #\/allOf\/1\/additionalProperties\/maximum: no integer lies between minimum 5 and maximum 2$/);
  assert.throws(() => jsonSchemaToGbnf({ type: "object", properties: { b: {} }, required: ["a"], additionalProperties: false }), /^GrammarError: #\/required: "a" is not among the properties, and additionalProperties is false: no object has it$/);
  assert.throws(() => jsonSchemaToGbnf({ allOf: [{ type: "object", properties: { b: {} }, additionalProperties: false }, { required: ["a"] }] }), /^GrammarError: #\/allOf\/0\/additionalProperties: false, but another part requires "a"$/);
});

test("bounds that leave no number name the upper bound's keyword where it was written, also merged from a part of allOf (the merged items' fault named #/items, no spot of the schema)", () => {
  const faults: [object, string][] = [
    [{ allOf: [{ type: "array", items: { type: "integer", minimum: 5 } }, { items: { type: "integer", maximum: 2 } }] }, "#/allOf/1/items/maximum: no integer lies between minimum 5 and maximum 2"],
    [{ type: "object", properties: { x: { allOf: [{ type: "array", items: { type: "integer", minimum: 5 } }, { type: "array", items: { exclusiveMaximum: 3 } }] } } }, "#/properties/x/allOf/1/items/exclusiveMaximum: no integer lies between minimum 5 and exclusiveMaximum 3"],
    [{ allOf: [{ type: "integer", minimum: 2.5 }, { maximum: 2.75 }] }, "#/allOf/1/maximum: no integer lies between minimum 2.5 and maximum 2.75"],
    [{ allOf: [{ type: "array", items: { type: "number", minimum: 5 } }, { items: { maximum: 2 } }] }, "#/allOf/1/items/maximum: no number lies between the bounds"],
    [{ type: "object", properties: { x: { $ref: "#/$defs/A", maximum: 1 } }, $defs: { A: { type: "number", exclusiveMinimum: 1 } } }, "#/properties/x/maximum: no number lies between the bounds"],
  ];
  for (const [schema, message] of faults) {
    // ajv compiles each: no value validates
    assert.equal(newAjv2020().compile(schema)([7]) || newAjv2020().compile(schema)(7) || newAjv2020().compile(schema)({ x: 1 }), false);
    assert.throws(() => jsonSchemaToGbnf(schema as JsonSchema), (e: Error) => e.name === "GrammarError" && e.message.startsWith(message), `${JSON.stringify(schema)}: ${message}`);
  }
});

test("allOf with a type in two parts takes the types both admit (integer within number), as ajv reads them; a $ref or anyOf with keywords beside it names each keyword where it was written", () => {
  // each was refused: "type is in two parts"
  agreesWithAjv({ allOf: [{ type: "integer" }, { type: "number", minimum: 0 }] }, ["1", "-1", "1.5", "0", '"a"']);
  agreesWithAjv({ allOf: [{ type: ["string", "null"] }, { type: "string", maxLength: 2 }] }, ['"a"', "null", '"abc"', "1"]);
  agreesWithAjv({ allOf: [{ type: ["number", "string"] }, { type: ["integer", "string", "boolean"] }] }, ['"a"', "1", "1.5", "true"]);
  // a nullable type beside a $ref to a non-null schema: null is not valid (both apply)
  agreesWithAjv({ type: "object", $defs: { A: { type: "integer" } }, properties: { x: { type: ["integer", "null"], $ref: "#/$defs/A" } }, required: ["x"] }, ['{"x":1}', '{"x":null}', '{"x":"a"}']);
  assert.throws(() => jsonSchemaToGbnf({ allOf: [{ type: "string" }, { type: ["integer", "null"] }] }), /^GrammarError: #\/allOf\/1\/type: no value is of type \["integer","null"\] and of type "string" \(at #\/allOf\/0\/type\), which both apply$/);
  // (the allOf these are read as is the converter's own: its paths named no spot of the schema)
  const faults: [object, string][] = [
    [{ type: "object", properties: { x: { $ref: "#/$defs/A", type: "string" } }, $defs: { A: { type: "string", minLength: -1 } } }, "#/$defs/A/minLength"],
    [{ type: "object", properties: { x: { $ref: "#/$defs/A", minLength: -1 } }, $defs: { A: { type: "string" } } }, "#/properties/x/minLength"],
    [{ type: "object", properties: { x: { maxLength: -2, anyOf: [{ type: "string" }, { type: "null" }] } } }, "#/properties/x/maxLength"],
    [{ type: "object", properties: { x: { type: "string", anyOf: [{ maxLength: 5 }, { minLength: -3 }] } } }, "#/properties/x/anyOf/1/minLength"],
    [{ allOf: [{ type: "object", properties: { a: { type: "string" } } }, { type: "object", properties: { a: { type: "string" } } }, { type: "object", properties: { a: { maxLength: -1 } } }] }, "#/allOf/2/properties/a/maxLength"],
    [{ allOf: [{ type: "object", properties: { a: { type: "string" } } }, { type: "object", additionalProperties: { maxLength: -1 } }] }, "#/allOf/1/additionalProperties/maxLength"],
    // (a part before it that constrains nothing, and the keywords beside allOf, once shifted the index)
    [{ type: "object", allOf: [{ properties: { a: {} }, required: ["a"] }, { properties: { b: {} }, additionalProperties: false }] }, "#/allOf/1/additionalProperties"],
  ];
  for (const [schema, at] of faults) assert.throws(() => jsonSchemaToGbnf(schema as JsonSchema), (e: Error) => e.name === "GrammarError" && e.message.startsWith(`${at}: `), `${JSON.stringify(schema)} -> ${at}`);
});

test("a string's length counts an escaped surrogate pair once, as ajv counts code points; DEL is taken raw, as JSON.stringify writes it (found by scripts/fuzz-json-schema.ts)", () => {
  agreesWithAjv({ type: "string", minLength: 2 }, ['"\\ud83d\\ude00"', '"\\uD83D\\uDE00x"', '"😀"', '"ab"']);
  agreesWithAjv({ type: "string", maxLength: 1 }, ['"\\ud83d\\ude00"', '"😀"', '"\\ud83d\\ude00\\ud83d\\ude00"', JSON.stringify("\u007f"), '"\\u00e9"']);
  agreesWithAjv({ type: "object", properties: { a: { type: "integer" } }, additionalProperties: { type: "string", maxLength: 1 } }, [JSON.stringify({ a: 1, "\u007f": "\u007f" }), '{"a":1,"b":"\\ud83d\\ude00"}']);
  // a lone surrogate is no Unicode text: refused (ajv would count it as a character)
  const g = parseGbnf(jsonSchemaToGbnf({ type: "string" }));
  for (const t of ['"\\ud800"', '"\\udc00x"', '"\\ud83dx"']) assert.equal(accepts(g, t), false, t);
});

test("format date: each month's days, February 29 in leap years only, as RFC 3339 (ajv-formats' full mode) says (found by scripts/fuzz-json-schema.ts)", () => {
  const ajv = makeAjv();
  for (const format of ["date", "date-time"]) {
    const schema = { type: "string", format };
    const g = parseGbnf(jsonSchemaToGbnf(schema));
    const validate = ajv.compile(schema);
    for (const d of ["2023-02-28", "2023-02-29", "2024-02-29", "1900-02-29", "2000-02-29", "0000-02-29", "2023-04-30", "2023-04-31", "2023-11-31", "2023-12-31", "2023-06-31", "2023-01-00", "2023-13-01"]) {
      const t = JSON.stringify(format === "date" ? d : `${d}T12:00:00Z`);
      assert.equal(accepts(g, t), validate(JSON.parse(t)), `${format} ${t}`);
    }
  }
  // a length beside a format the grammar writes would be passed over (the date is 10 characters): refused
  assert.throws(() => jsonSchemaToGbnf({ type: "string", format: "date", maxLength: 5 }), /#\/maxLength: not supported together with format date/);
});

test("formats email, hostname, ipv4 and duration (OpenAI strict mode's) are written as ajv-formats' full mode checks them; random walks of each validate", () => {
  const ajv = makeAjv();
  const texts: Record<string, string[]> = {
    email: ["a@b.co", "x.y@example.com", "o'hara+t@mail-1.x.org", "a@b", "a..b@c.d", ".a@b.c", "a@-b.c", "a@b-.c", "a@b.c-", "a b@c.d", "@b.c", "a@b..c", "A/B=c@x--y.Z9", "é@b.c"],
    hostname: ["localhost", "example.com.", "a-b.c-d.e", "-a.b", "a-.b", "a..b", ".a", "a_b", "a.b.c.d.e.f.g.h", "x".repeat(30), "x".repeat(64), ""],
    ipv4: ["0.0.0.0", "255.255.255.255", "256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4.5", "249.250.199.100", "1.2.3.-4"],
    duration: ["P1Y", "PT0S", "P3Y6M4DT12H30M5S", "P2W", "P", "PT", "P1YT", "P1D2Y", "P1W2D", "PT1H2S", "P1M", "PT1M", "P1.5Y", "1Y"],
  };
  for (const [format, list] of Object.entries(texts)) {
    const schema = { type: "string", format };
    const g = parseGbnf(jsonSchemaToGbnf(schema));
    const validate = ajv.compile(schema);
    for (const t of list) assert.equal(accepts(g, JSON.stringify(t)), validate(t), `${format} ${JSON.stringify(t)}`);
    // a sentence the grammar writes validates (these formats were annotations: any string was written)
    const r = checkSchema(schema, new Rng(format.length), ajv, 60, 0);
    assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], format);
  }
});

/** every string of up to `n` characters over `alphabet` */
function allStrings(alphabet: readonly string[], n: number): string[] {
  const out = [""];
  for (let len = 1, last = [""]; len <= n; len++) {
    last = last.flatMap((p) => alphabet.map((c) => p + c));
    out.push(...last);
  }
  return out;
}

test("pattern with minLength / maxLength: the grammar admits exactly the strings ajv validates, of every length up to 5 over a small alphabet", () => {
  const ajv = makeAjv();
  const strings = allStrings(["a", "b", "1", '"', "é", "😀"], 5);
  const schemas = [
    { type: "string", pattern: "^[a-z]+$", minLength: 2, maxLength: 4 },
    { type: "string", pattern: "b", maxLength: 3 },
    { type: "string", pattern: "b", minLength: 4 },
    { type: "string", pattern: "^(ab)*$", minLength: 3 },
    { type: "string", pattern: "^(a|b1?)+$", minLength: 1, maxLength: 3 },
    { type: "string", pattern: "^[^a]*$", minLength: 2, maxLength: 2 },
    { type: "string", pattern: '^.{1,}"$', maxLength: 4 },
    { type: "string", pattern: "^\\S+$", minLength: 3 },
    { type: "string", pattern: "a{2,3}", minLength: 0, maxLength: 5 },
  ];
  for (const schema of schemas) {
    const g = parseGbnf(jsonSchemaToGbnf(schema));
    const validate = ajv.compile(schema);
    for (const t of strings) assert.equal(accepts(g, JSON.stringify(t)), validate(t), `${JSON.stringify(schema)} on ${JSON.stringify(t)}`);
    // and what a random walk of the grammar writes validates
    const r = checkSchema(schema, new Rng(schema.pattern.length), ajv, 40, 0);
    assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], JSON.stringify(schema));
  }
  // a pattern no string of the lengths matches, or whose lengths need too many rules, is refused naming the pattern
  assert.throws(() => jsonSchemaToGbnf({ type: "string", pattern: "^a{2}$", maxLength: 1 }), /#\/pattern: no string of 0 to 1 characters matches it/);
  assert.throws(() => jsonSchemaToGbnf({ type: "string", pattern: "^[a-z]+$", maxLength: 9000 }), /#\/pattern: with minLength \/ maxLength the pattern needs more than \d+ grammar rules/);
  assert.throws(() => jsonSchemaToGbnf({ type: "string", minLength: 3, maxLength: 2 }), /#\/maxLength: 2 is below minLength 3/);
});

test("uniqueItems over a finite set of values (enum, const, boolean, null, anyOf / oneOf of those) or at most one item: the grammar admits exactly the arrays ajv validates, every array of up to 4 elements from the values and others", () => {
  const ajv = newAjv2020();
  // (an enum's number is written as JSON.stringify writes it: 1.0 for 1 is refused, with or without uniqueItems)
  const pool = ['"cat"', '"dog"', "1", "true", "false", "null", '{"a":1,"b":2}', '{"b":2,"a":1}', '"x"', "[1]"];
  const arrays = ["[]"];
  for (let len = 1, last: string[][] = [[]]; len <= 4; len++) {
    last = last.flatMap((p) => pool.map((v) => [...p, v]));
    arrays.push(...last.map((a) => `[${a.join(",")}]`));
  }
  const schemas: JsonSchema[] = [
    { type: "array", items: { enum: ["cat", "dog", 1] }, uniqueItems: true },
    { type: "array", items: { enum: ["cat", "dog", 1, { a: 1, b: 2 }, { b: 2, a: 1 }, null] }, uniqueItems: true, minItems: 2, maxItems: 3 },
    { type: "array", items: { type: "boolean" }, uniqueItems: true },
    { type: "array", items: { type: ["boolean", "null"] }, uniqueItems: true, minItems: 3 },
    { type: "array", items: { const: "x" }, uniqueItems: true },
    { type: "array", items: { enum: ["cat", 1, "dog", [1]], type: "string" }, uniqueItems: true, maxItems: 1 },
    { type: "array", items: { $ref: "#/$defs/pet" }, uniqueItems: true, $defs: { pet: { enum: ["cat", "dog"] } } },
    { type: "array", items: { enum: ["cat", "dog"] }, uniqueItems: false, maxItems: 3 },
    // an anyOf / oneOf of finite sets (zod's union of literals), a oneOf whose alternatives overlap (a value in two is in none), type beside them
    { type: "array", items: { anyOf: [{ type: "string", const: "cat" }, { type: "string", const: "dog" }, { type: "null" }] }, uniqueItems: true },
    { type: "array", items: { oneOf: [{ enum: ["cat", "dog"] }, { enum: ["dog", 1] }, { type: "boolean" }] }, uniqueItems: true },
    { type: "array", items: { type: "string", anyOf: [{ enum: ["cat", 1] }, { $ref: "#/$defs/pet" }] }, uniqueItems: true, $defs: { pet: { enum: ["dog", null] } } },
    // at most one element is always distinct: any items
    { type: "array", items: { type: "string", maxLength: 3 }, uniqueItems: true, maxItems: 1 },
    { type: "array", items: {}, uniqueItems: true, maxItems: 0 },
  ];
  for (const schema of schemas) {
    const g = parseGbnf(jsonSchemaToGbnf(schema));
    const validate = ajv.compile(schema as object);
    for (const t of arrays) assert.equal(accepts(g, t), validate(JSON.parse(t)), `${JSON.stringify(schema)} on ${t}`);
  }
  // elsewhere no grammar can say that no two elements are equal: refused naming the keyword, saying why
  assert.throws(() => jsonSchemaToGbnf({ type: "array", items: { type: "string" }, uniqueItems: true }), /#\/uniqueItems: true is supported only for items of a finite set of values .* or with maxItems at most 1, not beside these items: a grammar keeps elements distinct by a rule per set of values written so far, and items of unboundedly many values .* would need infinitely many/);
  assert.throws(() => jsonSchemaToGbnf({ type: "array", items: { anyOf: [{ enum: ["a"] }, { type: "string" }] }, uniqueItems: true, maxItems: 2 }), /#\/uniqueItems: true is supported only for items of a finite set of values/);
  assert.throws(() => jsonSchemaToGbnf({ type: "array", prefixItems: [{ const: 1 }], uniqueItems: true }), /#\/uniqueItems: true is supported only .* not beside tuple items/);
  assert.throws(() => jsonSchemaToGbnf({ type: "array", items: { enum: [1, 2] }, uniqueItems: true, minItems: 3 }), /#\/minItems: 3 distinct items, but the items take only 2 values/);
  assert.throws(() => jsonSchemaToGbnf({ type: "array", items: { enum: Array.from({ length: 20 }, (_, i) => i) }, uniqueItems: true }), /#\/uniqueItems: 20 distinct values need 1048576 grammar rules/);
  assert.throws(() => jsonSchemaToGbnf({ type: "array", items: { enum: [1] }, uniqueItems: "yes" }), /#\/uniqueItems: expected a boolean, got "yes"/);
});

test("format ipv6 is written as ajv-formats' full mode checks it (RFC 3986's forms, \"::\" anywhere, an IPv4 tail): every text of an enumerated set agrees, and random walks validate", () => {
  const ajv = makeAjv();
  const schema = { type: "string", format: "ipv6" };
  const g = parseGbnf(jsonSchemaToGbnf(schema));
  const validate = ajv.compile(schema);
  // n pieces (good, too long, not hex), "::" at each place or none, an IPv4 tail or not; and each with a stray colon
  const pieces = ["0", "ffff", "A1b"];
  const texts = new Set<string>();
  for (let n = 0; n <= 9; n++) {
    for (let at = -1; at <= n; at++) {
      for (const tail of ["", "1.2.3.4", "256.1.1.1", "01.2.3.4"]) {
        for (const bad of [undefined, "12345", "g"]) {
          const parts = Array.from({ length: n }, (_, i) => (i === 1 && bad) || pieces[(i * 7 + n + at) % 3]!);
          if (tail) parts.push(tail);
          const list = at < 0 ? parts.join(":") : `${parts.slice(0, at).join(":")}::${parts.slice(at).join(":")}`;
          for (const t of [list, `${list}:`, `:${list}`, list.replace("::", ":::"), ` ${list}`]) texts.add(t);
        }
      }
    }
  }
  let valid = 0;
  for (const t of texts) {
    const ok = validate(t);
    if (ok) valid++;
    assert.equal(accepts(g, JSON.stringify(t)), ok, JSON.stringify(t));
  }
  assert.ok(valid > 50 && valid < texts.size - 300, `${valid} of ${texts.size} valid`);
  const r = checkSchema(schema, new Rng(6), ajv, 80, 0);
  assert.deepEqual(r.findings.map((f) => `${f.text} ${f.detail}`), [], "ipv6");
});

test("additionalProperties: an escaped key that spells a named property is refused (it would write the property twice, its value escaping the property's schema)", () => {
  const schema = { type: "object", properties: { a: { type: "integer" }, "a/b": { type: "null" } }, additionalProperties: { type: "string" } };
  agreesWithAjv(schema, ['{"a":1,"\\u0061":"x"}', '{"a":1,"a\\/b":"x"}', '{"a":1,"\\u0061\\/b":"x"}', '{"a":1,"b":"x"}', '{"a":1,"\\n":"x"}', '{"a":1,"ab":"x"}', '{"a":1,"a\\u002fc":"x"}']);
});

test("enum and const: objects and arrays take whitespace between their tokens; a keyword of one type beside them leaves the other types' values (found by scripts/fuzz-json-schema.ts)", () => {
  agreesWithAjv({ const: { a: [1, 2], b: {} } }, ['{ "a" : [1, 2], "b": {\n  } }', '{"a":[1,2],"b":{}}', '{"a":[2,1],"b":{}}']);
  agreesWithAjv({ enum: [[], ["x"], 3] }, ["[ ]", '[ "x" ]', "3"]);
  agreesWithAjv({ enum: [0, "a", "bc", null], maxLength: 1 }, ["0", '"a"', '"bc"', "null"]);
});

test("scripts/fuzz-json-schema.ts: a short seeded run finds no sentence ajv refuses and no valid instance the grammar refuses", () => {
  const ajv = makeAjv();
  let walks = 0, instances = 0;
  for (let k = 0; k < 150; k++) {
    const rng = new Rng(20261206 + k);
    const r = checkSchema(randomRootSchema(rng), rng, ajv, 8, 8);
    walks += r.walks;
    instances += r.instances;
    assert.deepEqual(r.findings.map((f) => `${f.kind} ${JSON.stringify(f.schema)} ${JSON.stringify(f.text)} ${f.detail}`), [], `case ${k}`);
  }
  assert.ok(walks > 500 && instances > 400, `${walks} walks, ${instances} instances`);
});

test("scripts/fuzz-json-schema.ts: the documented differences (a bounded number written with an exponent, a key beyond the properties where additionalProperties is unset) are counted as known, not as findings", () => {
  const ajv = makeAjv();
  // ajv validates what the grammar refuses on purpose: the judge's side of each known difference
  assert.equal(ajv.validate({ type: "number", minimum: 0, maximum: 1 }, JSON.parse("1e-7")), true);
  const allOf = { allOf: [{ type: "object", properties: { a: { type: "integer" } } }, { type: "object", properties: { b: { type: "boolean" } } }] };
  assert.equal(ajv.validate(allOf, { a: 1, b: true, zx: 1 }), true);
  assert.equal(accepts(parseGbnf(jsonSchemaToGbnf({ type: "number", minimum: 0, maximum: 1 })), "1e-7"), false);
  assert.equal(accepts(parseGbnf(jsonSchemaToGbnf({ type: "number", minimum: 0, maximum: 1 })), "0.0000001"), true);
  assert.equal(accepts(parseGbnf(jsonSchemaToGbnf(allOf)), '{"a":1,"b":true,"zx":1}'), false);
  const known = { exponent: 0, "extra key": 0 };
  for (const [schema, seed] of [[{ type: "number", exclusiveMinimum: 0, maximum: 0.25 }, 1], [allOf, 2], [{ type: "object", properties: { a: { type: "null" } } }, 3]] as const) {
    const rng = new Rng(seed);
    const r = checkSchema(schema, rng, ajv, 4, 80);
    assert.deepEqual(r.findings, [], JSON.stringify(schema));
    known.exponent += r.known.exponent;
    known["extra key"] += r.known["extra key"];
  }
  assert.ok(known.exponent > 0 && known["extra key"] > 0, JSON.stringify(known));
});

test("JSON whitespace: between any two tokens one or two newlines then up to 20 spaces or tabs, as llama.cpp's SPACE_RULE; never \\f, \\v or other Unicode spaces (RFC 8259 allows only space, \\t, \\n, \\r)", () => {
  const cases: [JsonSchema | "object", string][] = [
    [{ type: "object", properties: { a: { type: "integer" }, b: { type: "array", items: { type: "string" } } }, required: ["a"] }, '{"a":1,"b":["x","y"]}'],
    [{}, '{"k":[1,true,null,{"n":"s"}]}'],
    ["object", '{"k":[1.5,{}],"m":"v"}'],
    [{ enum: [{ p: [1, 2] }] }, '{"p":[1,2]}'],
    [{ type: "array", uniqueItems: true, items: { enum: ["a", "b", "c"] } }, '["b","a"]'],
    [{ type: "array", prefixItems: [{ type: "boolean" }, { type: "number" }], items: false }, "[false,2e3]"],
  ];
  const sp = (n: number) => " \t".repeat(n).slice(0, n);
  for (const [schema, text] of cases) {
    const g = parseGbnf(schema === "object" ? anyJsonGbnf("object") : jsonSchemaToGbnf(schema));
    // the positions inside strings (the texts hold no escapes)
    const inString: boolean[] = [];
    let open = false;
    for (const c of text) { if (c === '"') open = !open; inString.push(open); }
    let gaps = 0;
    for (let i = 1; i <= text.length; i++) {
      const at = (w: string) => text.slice(0, i) + w + text.slice(i);
      // where JSON and the grammar take one space outside a string: a token boundary
      if (inString[i - 1] || !accepts(g, at(" "))) continue;
      assert.doesNotThrow(() => JSON.parse(at(" ")));
      gaps++;
      for (const w of ["\n", "\n\n", `\n${sp(20)}`, `\n\n${sp(20)}`, "\n\t \t"]) {
        JSON.parse(at(w));
        assert.ok(accepts(g, at(w)), `${JSON.stringify(at(w))} refused`);
      }
      // past llama.cpp's bound: three newlines, 21 spaces after the newline, two spaces
      for (const w of ["\n\n\n", `\n${sp(21)}`, "  ", "\r"]) assert.ok(!accepts(g, at(w)), `${JSON.stringify(at(w))} admitted`);
      // not JSON whitespace at all: JSON.parse refuses these, and so must the grammar
      for (const w of ["\f", "\v", "\u00a0", "\u2028", "\ufeff", " \f", "\n\v"]) {
        assert.throws(() => JSON.parse(at(w)), SyntaxError);
        assert.ok(!accepts(g, at(w)), `${JSON.stringify(at(w))} admitted`);
      }
    }
    assert.ok(gaps >= 4, `${text}: ${gaps} token boundaries`);
  }
});

test("uniqueItems beside a closed tuple (prefixItems / items as a list, nothing past it): the grammar admits exactly the arrays the spec's rules validate, judged by hand over every array of up to 3 elements", () => {
  // JSON Schema 2020-12: prefixItems[i] validates element i; items: false admits no element past them;
  // minItems / maxItems bound the length; uniqueItems: no two elements equal (objects by their members, numbers by value)
  const same = (a: unknown, b: unknown): boolean => {
    if (typeof a === "number" && typeof b === "number") return a === b;
    if (Array.isArray(a) || Array.isArray(b)) return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]));
    if (a !== null && b !== null && typeof a === "object" && typeof b === "object") {
      const ka = Object.keys(a), kb = Object.keys(b);
      return ka.length === kb.length && ka.every((k) => k in b && same((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
    }
    return a === b;
  };
  type Position = { values?: unknown[]; type?: string };
  const fits = (p: Position, v: unknown) => p.values ? p.values.some((x) => same(x, v)) : p.type === "string" ? typeof v === "string" : p.type === "integer" ? Number.isInteger(v) : p.type === "boolean" ? typeof v === "boolean" : v === null;
  const cases: { positions: Position[]; min?: number; max?: number; listForm?: boolean }[] = [
    { positions: [{ values: [1, 2] }, { values: [1, 2] }] },
    { positions: [{ values: ["a", "b", "c"] }, { values: ["a", "b"] }, { values: ["b", "c"] }], min: 2 },
    { positions: [{ values: [{ x: 1, y: 2 }, [1]] }, { values: [{ y: 2, x: 1 }, 1] }, { values: [1, 1.0, true] }] },
    { positions: [{ values: [1, 2] }, { values: [2, 3] }, { values: [3, 1] }], max: 2, listForm: true },
    { positions: [{ type: "string" }, { type: "integer" }, { type: "boolean" }], min: 1 },
    { positions: [{ values: [true] }, { type: "boolean" }], max: 1 },
  ];
  const pool: unknown[] = [1, 2, 3, 1.5, "a", "b", "c", true, false, null, { x: 1, y: 2 }, [1]];
  for (const c of cases) {
    const schemas = c.positions.map((p) => (p.values ? { enum: p.values } : { type: p.type }));
    const schema: JsonSchema = c.listForm
      ? { type: "array", uniqueItems: true, items: schemas, additionalItems: false, ...(c.min !== undefined ? { minItems: c.min } : {}), ...(c.max !== undefined ? { maxItems: c.max } : {}) }
      : { type: "array", uniqueItems: true, prefixItems: schemas, items: false, ...(c.min !== undefined ? { minItems: c.min } : {}), ...(c.max !== undefined ? { maxItems: c.max } : {}) };
    const g = parseGbnf(jsonSchemaToGbnf(schema));
    const valid = (arr: unknown[]) => arr.length >= (c.min ?? 0) && arr.length <= Math.min(c.max ?? Infinity, c.positions.length)
      && arr.every((v, i) => fits(c.positions[i]!, v)) && arr.every((v, i) => arr.every((w, j) => j <= i || !same(v, w)));
    let arrays: unknown[][] = [[]], admitted = 0;
    for (let n = 0; n <= 3; n++) {
      for (const arr of arrays) {
        const text = JSON.stringify(arr);
        assert.equal(accepts(g, text), valid(arr), `${JSON.stringify(schema)}: ${text}`);
        if (valid(arr)) admitted++;
      }
      arrays = arrays.flatMap((a) => pool.map((v) => [...a, v]));
    }
    assert.ok(admitted > 0, JSON.stringify(schema));
  }
  // a tuple open past its positions (items a schema) keeps the refusal, naming the keyword
  assert.throws(() => jsonSchemaToGbnf({ type: "array", uniqueItems: true, prefixItems: [{ enum: [1, 2] }], items: { enum: [1, 2] } }), /#\/uniqueItems: true is supported only for/);
  assert.throws(() => jsonSchemaToGbnf({ type: "array", uniqueItems: true, prefixItems: [{ type: "string" }, { type: "string" }], items: false }), /#\/uniqueItems: .*closed tuple/);
  assert.throws(() => jsonSchemaToGbnf({ type: "array", uniqueItems: true, prefixItems: [{ const: 1 }, { const: 1 }], items: false, minItems: 2 }), /#\/uniqueItems: no array of 2 or more distinct elements/);
});
