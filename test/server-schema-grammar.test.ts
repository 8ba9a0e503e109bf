// The server's grammars remembered by their text (src/server/schema-grammar.ts): a strict
// function's parameters are compiled when the tools are read and again into the call grammar, and
// an agent sends the same tools with every turn. Remembering must never change an answer.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { ApiError } from "../src/server/errors.js";
import { schemaGrammar, TextCache } from "../src/server/schema-grammar.js";
import { replyGrammar, toolsOf } from "../src/server/tools.js";
import { jsonSchemaToGbnf } from "../src/sampling/constraints/index.js";

const HERMES = "{% for m in messages %}{{ m.content }}{% endfor %}{% if false %}<tool_call>{% endif %}";
const tool = (name: string, maxLength: number) => ({ type: "function", function: { name, strict: true, parameters: { type: "object", properties: { a: { type: "string", pattern: `^.{0,${maxLength}}$` } }, required: ["a"], additionalProperties: false } } });
/** a request body as the server parses one: new objects every time */
const body = (tools: unknown[], choice = "auto") => JSON.parse(JSON.stringify({ tools, tool_choice: choice }));

test("a second request with the same tools gets the grammar made for the first; other tools, choice or template get their own", () => {
  const tools = [tool("f", 4), tool("g", 6)];
  const first = replyGrammar({}, toolsOf(body(tools))!, HERMES, undefined);
  assert.ok(first);
  // (without remembering, a new grammar is written every request)
  assert.equal(replyGrammar({}, toolsOf(body(tools))!, HERMES, undefined), first);
  const other = replyGrammar({}, toolsOf(body([tool("f", 5), tool("g", 6)]))!, HERMES, undefined);
  assert.notEqual(other?.grammar, first.grammar);
  assert.notEqual(replyGrammar({}, toolsOf(body(tools, "required"))!, HERMES, undefined)?.grammar, first.grammar);
  assert.notEqual(replyGrammar({}, toolsOf(body(tools))!, HERMES, { open: "<think>", close: "</think>", forcedOpen: true })?.grammar, first.grammar);
  // a refused request is refused again, the same way
  const bad = { jsonSchema: { type: "array", uniqueItems: true } };
  const plain = "{% for m in messages %}{{ m.content }}{% endfor %}";
  for (let i = 0; i < 2; i++) assert.throws(() => replyGrammar(bad, toolsOf(body([tool("f", 4)]))!, plain, undefined), (e: ApiError) => e.param === "response_format.json_schema.schema.uniqueItems");
});

test("schemaGrammar answers what jsonSchemaToGbnf answers, the same text again from memory; a schema it refuses is refused each time", () => {
  const schema = { type: "object", properties: { n: { type: "integer", minimum: 3, maximum: 97 } }, required: ["n"] };
  assert.equal(schemaGrammar(schema), jsonSchemaToGbnf(schema));
  assert.equal(schemaGrammar(structuredClone(schema)), jsonSchemaToGbnf(schema));
  const refused = { type: "string", pattern: "(" };
  assert.throws(() => jsonSchemaToGbnf(refused), (e: Error) => {
    for (let i = 0; i < 2; i++) assert.throws(() => schemaGrammar(refused), (again: Error) => again.name === e.name && again.message === e.message);
    return true;
  });
});

test("TextCache forgets the least recently used first, keeps at most maxEntries and maxChars, and keeps no value larger than maxChars alone", () => {
  let made = 0;
  const cache = new TextCache<string>((v) => v.length, 2, 20);
  const get = (k: string, v = k) => cache.get(k, () => {
    made++;
    return v;
  });
  get("a"); get("b"); get("a"); get("c");
  // "b" was the least recently used: forgotten when "c" came
  made = 0;
  get("a"); get("c");
  assert.equal(made, 0);
  get("b");
  assert.equal(made, 1);
  // past maxChars (a key's and its value's characters): the oldest go until the rest fit
  const chars = new TextCache<string>((v) => v.length, 10, 20);
  made = 0;
  const put = (k: string, v: string) => chars.get(k, () => {
    made++;
    return v;
  });
  put("a", "1234"); put("b", "1234"); put("c", "1234");
  // 5 + 5 + 5, then 10 more: "a" and "b" go
  put("d", "123456789");
  put("c", "?"); put("d", "?");
  assert.equal(made, 4);
  put("a", "1234");
  assert.equal(made, 5);
  // a value larger than maxChars alone: answered, never kept (it would push out everything else)
  made = 0;
  assert.equal(put("big", "y".repeat(30)), "y".repeat(30));
  assert.equal(put("big", "y".repeat(30)), "y".repeat(30));
  put("a", "?");
  assert.equal(made, 2);
  // undefined values are remembered too
  const u = new TextCache<undefined>(() => 0);
  let calls = 0;
  u.get("k", () => { calls++; return undefined; });
  u.get("k", () => { calls++; return undefined; });
  assert.equal(calls, 1);
});
