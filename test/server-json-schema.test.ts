// response_format json_schema's strict flag against `tsllm serve`: real HTTP on loopback. OpenAI's
// strict mode ("Supported schemas" in its structured outputs guide) takes an object schema at the
// root, every object with additionalProperties: false and every property in required, and refuses
// oneOf ("'oneOf' is not permitted"; tsllm reads oneOf as anyOf, as llama.cpp does, which admits a
// value two alternatives both take); strict: true refuses the rest with a 400 naming the schema path.
import assert from "node:assert/strict";
import { Ajv2020 } from "ajv/dist/2020.js";
import { after, before, describe, test } from "node:test";
import type { ApiError } from "../src/server/errors.js";
import { generationOptionsOf } from "../src/server/params.js";
import { replyGrammar, toolsOf } from "../src/server/tools.js";
import { jsonSchemaToGbnf } from "../src/sampling/constraints/index.js";
import { grammarAdmits } from "./helpers/constraint-texts.js";
import { post, serveStories, skipStories as skip } from "./helpers/serve.js";

const closed = { type: "object", properties: { a: { type: "string", pattern: "^[a-z]{0,4}$" }, b: { type: ["integer", "null"] } }, required: ["a", "b"], additionalProperties: false };
const strictFormat = (schema: object, strict: unknown) => ({ response_format: { type: "json_schema", json_schema: { name: "x", schema, ...(strict === undefined ? {} : { strict }) } } });

/** `schema` refused under strict: true with a message matching `re`; without strict (false, null, left out) taken as before */
const refused = (schema: object, re: RegExp) => {
  assert.throws(() => generationOptionsOf(strictFormat(schema, true), 100), (e: ApiError) => /^response_format\.json_schema\.schema(\.|$)/.test(e.param ?? "") && /^Invalid schema for response_format 'x' \('response_format\.json_schema\.schema', strict: true\): /.test(e.message) && re.test(e.message), JSON.stringify(schema).slice(0, 200));
  for (const strict of [false, null, undefined]) assert.deepEqual(generationOptionsOf(strictFormat(schema, strict), 100).jsonSchema, schema);
};
const accepted = (schema: object) => assert.deepEqual(generationOptionsOf(strictFormat(schema, true), 100).jsonSchema, schema);

test("strict: true keeps OpenAI's strict rules: an object root, every object closed with every property required (a 400 naming the schema path); without strict the same schemas are taken", () => {
  refused({ ...closed, additionalProperties: undefined }, /#: 'additionalProperties' is required to be supplied and to be false$/);
  refused({ ...closed, additionalProperties: true }, /#: 'additionalProperties' is required to be supplied and to be false$/);
  refused({ ...closed, additionalProperties: { type: "string" } }, /#: 'additionalProperties' is required/);
  refused({ ...closed, required: ["a"] }, /#: 'required' is required to be supplied and to be an array including every key in properties; missing "b"$/);
  refused({ ...closed, required: undefined }, /missing "a", "b"$/);
  refused({ ...closed, properties: { ...closed.properties, c: { type: "object", properties: { d: { type: "integer" } }, required: ["d"] } }, required: ["a", "b", "c"] }, /#\/properties\/c: 'additionalProperties' is required/);
  refused({ ...closed, properties: { a: { type: "array", items: { properties: { d: {} }, additionalProperties: false } } }, required: ["a"] }, /#\/properties\/a\/items: 'required' .* missing "d"$/);
  refused({ ...closed, properties: { a: { anyOf: [{ type: "null" }, { type: ["object", "null"], properties: {} }] } }, required: ["a"] }, /#\/properties\/a\/anyOf\/1: 'additionalProperties' is required/);
  refused({ ...closed, $defs: { d: { type: "object", properties: { e: { type: "string" } }, additionalProperties: false } } }, /#\/\$defs\/d: 'required' .* missing "e"$/);
  refused({ type: "array", items: closed }, /#\/type: the root must be an object schema \(type "object"\), got "array"$/);
  refused({ anyOf: [closed] }, /#\/type: the root must be an object schema \(type "object"\), got null$/);
  refused({ ...closed, anyOf: [closed] }, /#\/anyOf: the root must be an object schema, not anyOf$/);
  refused({ ...closed, properties: { a: { oneOf: [{ type: "integer" }, { type: "number" }] } }, required: ["a"] }, /#\/properties\/a\/oneOf: oneOf is not supported with strict: true/);
  // a property named like a keyword is no keyword; a closed object with no properties is one
  for (const schema of [closed, { type: "object", properties: { oneOf: { type: "boolean" }, additionalProperties: { type: "string" } }, required: ["oneOf", "additionalProperties"], additionalProperties: false }, { type: "object", properties: {}, additionalProperties: false }]) {
    assert.deepEqual(generationOptionsOf(strictFormat(schema, true), 100).jsonSchema, schema);
  }
});

// The judge: OpenAI's structured outputs guide, "Supported schemas": "Some type-specific keywords
// are not yet supported — Composition: allOf, not, dependentRequired, dependentSchemas, if, then,
// else", and its limits: "up to 5000 object properties total, with up to 10 levels of nesting";
// "total string length of all property names, definition names, enum values, and const values
// cannot exceed 120,000 characters"; "up to 1000 enum values across all enum properties"; "For a
// single enum property with string values, the total string length of all enum values cannot
// exceed 15,000 characters when there are more than 250 enum values". A level of nesting is a
// schema inside another, the root at 0, as OpenAI's Java SDK (JsonSchemaValidator) counts it.
const obj = (properties: Record<string, object>, extra: object = {}) => ({ type: "object", properties, required: Object.keys(properties), additionalProperties: false, ...extra });

test("strict: true refuses the composition keywords OpenAI's strict mode does not support, naming the schema path; without strict they are taken", () => {
  const cases: [string, unknown][] = [
    ["allOf", [{ type: "string" }, { maxLength: 3 }]],
    ["not", { type: "null" }],
    ["dependentRequired", { a: ["b"] }],
    ["dependentSchemas", { a: obj({}) }],
    ["if", { type: "string" }],
    ["then", { maxLength: 3 }],
    ["else", { type: "integer" }],
  ];
  for (const [k, v] of cases) {
    refused(obj({ a: { type: "string" }, b: { type: ["integer", "string"], [k]: v } }), new RegExp(`#/properties/b/${k}: '${k}' is not supported with strict: true$`));
    refused(obj({ a: { type: "string" } }, { [k]: v }), new RegExp(`#/${k}: '${k}' is not supported`));
  }
  // inside anyOf, items and $defs too
  refused(obj({ a: { anyOf: [{ type: "null" }, { type: "string", not: { const: "x" } }] } }), /#\/properties\/a\/anyOf\/1\/not: 'not' is not supported/);
  refused(obj({ a: { type: "array", items: { allOf: [{ type: "string" }] } } }), /#\/properties\/a\/items\/allOf: 'allOf' is not supported/);
  refused(obj({ a: { $ref: "#/$defs/d" } }, { $defs: { d: { type: "string", if: { maxLength: 1 }, else: { pattern: "a" } } } }), /#\/\$defs\/d\/if: 'if' is not supported/);
  // the keywords "Supported properties" lists stay taken, and a property named like a keyword is none
  accepted(obj({ s: { type: "string", pattern: "^a", format: "date" }, n: { type: "number", minimum: 0, maximum: 9, multipleOf: 0.5 }, l: { type: "array", items: { type: "string" }, minItems: 1, maxItems: 2 }, allOf: { type: "string" }, not: { type: "boolean" } }));
});

test("strict: true refuses the string, object and array keywords OpenAI's strict mode lists as supported for no model (minLength, maxLength, patternProperties, propertyNames, uniqueItems, ...), naming the schema path; without strict they are taken as before", () => {
  // "Supported properties" lists pattern / format, the numbers' bounds and multipleOf, minItems /
  // maxItems; these the same page lists as unsupported (for fine-tuned models), and for no model as
  // supported (OpenAI's Java SDK's JsonSchemaValidator refuses them in a string schema too)
  for (const [k, v] of [["minLength", 1], ["maxLength", 4]] as const) {
    refused(obj({ s: { type: "string", [k]: v } }), new RegExp(`: #/properties/s/${k}: '${k}' is not supported with strict: true$`));
    refused(obj({ s: { anyOf: [{ type: "null" }, { type: "string", pattern: "^a", [k]: v }] } }), new RegExp(`: #/properties/s/anyOf/1/${k}: '${k}' is not supported`));
    refused(obj({ l: { type: "array", items: { type: "string", [k]: v } } }), new RegExp(`: #/properties/l/items/${k}: '${k}' is not supported`));
  }
  const objects: [string, unknown][] = [
    ["patternProperties", { "^x": { type: "integer" } }],
    ["unevaluatedProperties", false],
    ["propertyNames", { type: "string" }],
    ["minProperties", 1],
    ["maxProperties", 1],
  ];
  const arrays: [string, unknown][] = [
    ["unevaluatedItems", false],
    ["contains", { const: "a" }],
    ["minContains", 1],
    ["maxContains", 2],
    ["uniqueItems", true],
  ];
  for (const [k, v] of objects) {
    refused(obj({ a: { type: "string" } }, { [k]: v }), new RegExp(`: #/${k}: '${k}' is not supported with strict: true$`));
    refused(obj({ o: obj({ a: { type: "string" } }, { [k]: v }) }), new RegExp(`: #/properties/o/${k}: '${k}' is not supported with strict: true$`));
  }
  for (const [k, v] of arrays) {
    refused(obj({ l: { type: "array", items: { enum: ["a", "b"] }, [k]: v } }), new RegExp(`: #/properties/l/${k}: '${k}' is not supported with strict: true$`));
    refused(obj({ l: { anyOf: [{ type: "null" }, { type: "array", items: { enum: ["a", "b"] }, [k]: v }] } }), new RegExp(`: #/properties/l/anyOf/1/${k}: '${k}' is not supported`));
  }
  // a property named like one of them is no keyword
  accepted(obj({ minLength: { type: "integer" }, patternProperties: { type: "string" }, uniqueItems: { type: "boolean" }, contains: { type: "array", items: { type: "string" }, minItems: 1, maxItems: 3 } }));
});

test("strict: true holds OpenAI's documented size limits: a schema at each limit is taken, one past it refused naming the path and the limit", () => {
  // nesting: 10 levels below the root taken, 11 refused at the schema past the limit
  const nest = (levels: number): object => (levels === 0 ? { type: "string" } : obj({ p: nest(levels - 1) }));
  accepted(nest(10));
  accepted(obj({ l: { type: "array", items: { anyOf: [{ type: "null" }, nest(7)] } } })); // l 1, items 2, anyOf/1 3, + 7 = 10
  refused(nest(11), new RegExp(`^.*: #${"/properties/p".repeat(11)}: 11 levels of nesting exceeds limit of 10$`));
  refused(obj({ l: { type: "array", items: { anyOf: [{ type: "null" }, nest(8)] } } }), /#\/properties\/l\/items\/anyOf\/1(\/properties\/p){8}: 11 levels of nesting exceeds limit of 10$/);
  // object properties: 5000 in all (across nested objects) taken, 5001 refused
  const many = (n: number, from = 0) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${from + i}`, { type: "boolean" }]));
  accepted(obj({ ...many(4998), inner: obj(many(1, 4998)) }));
  refused(obj({ ...many(4999), inner: obj(many(1, 4999)) }), /: #: total number of object properties \(5001\) exceeds limit of 5000$/);
  // enum values: 1000 across all enums taken, 1001 refused
  const values = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);
  const enums = (last: number) => obj({ a: { enum: values(250) }, b: { enum: values(250) }, c: { type: "integer", enum: values(250) }, d: { type: ["integer", "null"], enum: values(last) } });
  accepted(enums(250));
  refused(enums(251), /: #: total number of enum values \(1001\) exceeds limit of 1000$/);
  // one string enum of more than 250 values: 15,000 characters taken, 15,001 refused; 250 values may be longer
  const strings = (n: number, width: number, last: number) => Array.from({ length: n }, (_, i) => (i === n - 1 ? String(i).padStart(last, "x") : String(i).padStart(width, "x")));
  accepted(obj({ e: { type: "string", enum: strings(251, 59, 250) } })); // 250 * 59 + 250
  refused(obj({ e: { type: "string", enum: strings(251, 59, 251) } }), /#\/properties\/e\/enum: total string length of enum values \(15001\) exceeds limit of 15000 for an enum of more than 250 values \(it has 251\)$/);
  accepted(obj({ e: { type: "string", enum: strings(250, 61, 61) } })); // 15,250 characters in 250 values: no limit of its own
  // total string length: property names + definition names + enum values + const values, 120,000 taken, 120,001 refused
  const sized = (extra: number) => obj({ ["n".repeat(100_000)]: { type: "string", const: "c".repeat(5_000) }, e: { enum: ["v".repeat(4_999 + extra)] }, r: { $ref: "#/$defs/d" } }, { $defs: { ["d".repeat(9_997)]: { type: "string" } } });
  // 100,000 + 1 ("e") + 1 ("r") + 5,000 + 4,999 + 9,997 = 119,998: two short of the limit
  accepted(sized(2));
  refused(sized(3), /: #: total string length of property names, definition names, enum values and const values \(120001\) exceeds limit of 120000$/);
});

test("strict: true output is a closed object: the grammar of a schema strict takes admits a text exactly when ajv validates it, extra and missing keys refused", () => {
  const nested = { type: "object", properties: { p: closed, q: { type: "array", items: closed, maxItems: 2 } }, required: ["p", "q"], additionalProperties: false };
  for (const schema of [closed, nested]) {
    assert.deepEqual(generationOptionsOf(strictFormat(schema, true), 100).jsonSchema, schema);
    const gbnf = jsonSchemaToGbnf(schema);
    const validate = new Ajv2020({ strict: false }).compile(schema);
    const values = [{ a: "x", b: 1 }, { a: "x", b: null }, { a: "x" }, { b: 1 }, {}, { a: "x", b: 1, c: 2 }, { a: "toolong", b: 1 }, { a: "x", b: 1.5 }];
    const texts = schema === closed ? values : values.flatMap((v) => [{ p: v, q: [] }, { p: { a: "", b: 0 }, q: [v] }, { p: { a: "", b: 0 }, q: [], r: v }, { q: [v] }]);
    let taken = 0;
    for (const v of texts) {
      const text = JSON.stringify(v);
      assert.equal(grammarAdmits(gbnf, text), validate(v), text);
      taken += validate(v) ? 1 : 0;
    }
    assert.ok(taken >= 2 && taken < texts.length, `${taken} of ${texts.length} valid`);
  }
});

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
    assert.equal(r.json.error.param, "response_format.json_schema.schema.properties.v.oneOf");
    assert.match(r.json.error.message, /#\/properties\/v\/oneOf: oneOf is not supported with strict: true/);
    const nested = await ask({ type: "object", properties: { l: { type: "array", items: { $defs: { a: { oneOf: [{ type: "null" }] } }, $ref: "#/$defs/a" } } }, required: ["l"], additionalProperties: false }, true);
    assert.equal(nested.status, 400);
    assert.match(nested.json.error.message, /#\/properties\/l\/items\/\$defs\/a\/oneOf:/);
    // an object left open: refused naming its path, as OpenAI's strict mode refuses it
    const open = await ask({ type: "object", properties: { v: { type: "object", properties: { w: { type: "integer" } }, required: ["w"] } }, required: ["v"], additionalProperties: false }, true);
    assert.equal(open.status, 400, JSON.stringify(open.json));
    assert.equal(open.json.error.param, "response_format.json_schema.schema.properties.v");
    assert.match(open.json.error.message, /#\/properties\/v: 'additionalProperties' is required to be supplied and to be false/);
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
    assert.equal(bad.json.error.param, "response_format.json_schema.strict");
  });
});

// OpenAI names a nested parameter by its full path ("response_format.json_schema.schema" for a fault
// of the schema), as this server names tools[i].function.parameters and stream_options.include_usage
test("a response_format schema the grammar cannot hold is a 400 naming response_format.json_schema.schema, with tools on a template without calls of its own too", () => {
  const tools = toolsOf({ tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }] })!;
  const plain = "{% for m in messages %}{{ m.content }}{% endfor %}";
  // (the generic format's grammar holds the calls and the response in one schema: the response's fault was the tools')
  assert.throws(() => replyGrammar({ jsonSchema: { type: "array", uniqueItems: true } }, tools, plain, undefined), (e: ApiError) => e.param === "response_format.json_schema.schema.uniqueItems" && /#\/uniqueItems: true is supported only/.test(e.message));
  assert.equal(replyGrammar({ jsonSchema: { type: "array", items: { enum: [1, 2] }, uniqueItems: true } }, tools, plain, undefined)?.param, "response_format.json_schema.schema");
  assert.equal(replyGrammar({ json: "object" }, tools, plain, undefined)?.param, "response_format");
});

test("a fault of a keyword in a part of allOf is a 400 whose param and message name that part's keyword (response_format.json_schema.schema.properties.x.allOf[1].uniqueItems), not the allOf's holder", () => {
  const tools = toolsOf({ tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }] })!;
  const plain = "{% for m in messages %}{{ m.content }}{% endfor %}";
  const cases: [object, string, RegExp][] = [
    [{ allOf: [{ type: "array", items: { type: "string" } }, { uniqueItems: true }] }, "response_format.json_schema.schema.properties.x.allOf[1].uniqueItems", /#\/properties\/x\/allOf\/1\/uniqueItems: true is supported only/],
    [{ allOf: [{ type: "array", items: { type: "string" } }, { prefixItems: [{ type: "integer" }] }] }, "response_format.json_schema.schema.properties.x.allOf[0].items", /#\/properties\/x\/allOf\/0\/items: items without the tuple prefixItems \(at #\/properties\/x\/allOf\/1\/prefixItems\)/],
    [{ allOf: [{ type: "array" }, { prefixItems: [{ type: "string", minLength: 3, maxLength: 1 }] }] }, "response_format.json_schema.schema.properties.x.allOf[1].prefixItems[0].maxLength", /#\/properties\/x\/allOf\/1\/prefixItems\/0\/maxLength: 1 is below minLength 3/],
  ];
  for (const [x, param, re] of cases) {
    const jsonSchema = { type: "object", properties: { x }, required: ["x"] };
    assert.throws(() => replyGrammar({ jsonSchema }, tools, plain, undefined), (e: ApiError) => e.param === param && re.test(e.message), JSON.stringify(x));
  }
});
