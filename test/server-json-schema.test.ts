// response_format json_schema's strict flag against `tsllm serve`: real HTTP on loopback. OpenAI's
// strict mode refuses oneOf ("'oneOf' is not permitted"); tsllm reads oneOf as anyOf (as llama.cpp
// does), which admits a value two alternatives both take, so strict: true refuses it too.
import assert from "node:assert/strict";
import { Ajv2020 } from "ajv/dist/2020.js";
import { after, before, describe, test } from "node:test";
import { post, serveStories, skipStories as skip } from "./helpers/serve.js";

describe("response_format json_schema: strict", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  before(async () => {
    s = await serveStories({ maxSequences: 1 });
  });
  after(() => s?.close());

  const overlapping = { type: "object", properties: { v: { oneOf: [{ type: "integer" }, { type: "number", minimum: 0 }] } }, required: ["v"], additionalProperties: false };
  const ask = (schema: object, strict: unknown) =>
    post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "a" }], max_tokens: 24, temperature: 0, response_format: { type: "json_schema", json_schema: { name: "x", schema, ...(strict === undefined ? {} : { strict }) } } });

  test("strict: true refuses oneOf, naming its schema path; a property named oneOf is no keyword", async () => {
    const r = await ask(overlapping, true);
    assert.equal(r.status, 400, JSON.stringify(r.json));
    assert.equal(r.json.error.param, "response_format");
    assert.match(r.json.error.message, /#\/properties\/v\/oneOf: oneOf is not supported with strict: true/);
    const nested = await ask({ type: "array", items: { $defs: { a: { oneOf: [{ type: "null" }] } }, $ref: "#/$defs/a" } }, true);
    assert.equal(nested.status, 400);
    assert.match(nested.json.error.message, /#\/items\/\$defs\/a\/oneOf:/);
    const named = { type: "object", properties: { oneOf: { type: "boolean" } }, required: ["oneOf"], additionalProperties: false };
    const ok = await ask(named, true);
    assert.equal(ok.status, 200, JSON.stringify(ok.json));
    assert.ok(new Ajv2020().validate(named, JSON.parse(ok.json.choices[0].message.content)) || ok.json.choices[0].finish_reason === "length");
  });

  test("without strict (or strict: false) oneOf is read as anyOf and answered; a strict that is no boolean is a 400", async () => {
    for (const strict of [undefined, false, null]) {
      const r = await ask(overlapping, strict);
      assert.equal(r.status, 200, `${strict}: ${JSON.stringify(r.json)}`);
    }
    const bad = await ask(overlapping, "yes");
    assert.equal(bad.status, 400);
    assert.match(bad.json.error.message, /'response_format\.json_schema\.strict' must be a boolean, got/);
  });
});
