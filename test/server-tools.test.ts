import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Ajv } from "ajv";
import OpenAI from "openai";
import { messagesOf } from "../src/server/requests.js";
import { parseToolCalls, ToolCallStream, toolCallGrammar, toolFormatOf, toolsOf, type ToolFormat } from "../src/server/tools.js";
import { gbnfAlternatives, GrammarMatcher, parseGbnf } from "../src/sampling/constraints/index.js";
import { post, serveStories, skipStories as skip } from "./helpers/serve.js";

/*
 * Tool calling through the OpenAI API: a Hermes-style template (Qwen2.5's <tool_call> blocks) on
 * stories260K, whose random-ish output can only be a call because tool_choice requires one
 * (one: parallel_tool_calls false, else this model goes on to write more calls until max_tokens).
 */
const HERMES = `{%- if tools %}<|system|>Functions:
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
Reply with <tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call>
{% endif %}
{%- for m in messages %}
{%- if m.role == "assistant" and m.tool_calls %}assistant:{% for tc in m.tool_calls %}<tool_call>
{{ {"name": tc.function.name, "arguments": tc.function.arguments} | tojson }}
</tool_call>{% endfor %}
{% elif m.role == "tool" %}tool: <tool_response>{{ m.content }}</tool_response>
{% else %}{{ m.role }}: {{ m.content }}
{% endif %}
{%- endfor %}{% if add_generation_prompt %}assistant:{% endif %}`;

const WEATHER = {
  type: "function", function: {
    name: "get_weather", description: "the weather in a city",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 }, unit: { enum: ["c", "f"] } }, required: ["city", "unit"] },
  },
} as const;
const TIME = { type: "function", function: { name: "get_time", parameters: { type: "object", properties: { zone: { type: "string", maxLength: 8 } }, required: ["zone"] } } } as const;

describe("tool calls (tools, tool_choice) on stories260K with a Hermes-style template", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  let client: OpenAI;
  before(async () => {
    // the tools' JSON is a few hundred tokens of this 512-token vocabulary: a context past the trained 512
    s = await serveStories({ contextSize: 1024, onWarning: () => {} }, { chatTemplate: HERMES });
    client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "none", maxRetries: 0 });
  });
  after(() => s?.close());
  const validate = new Ajv().compile(WEATHER.function.parameters);

  test("tool_choice required: the reply is a call of one of the tools whose arguments validate; finish_reason tool_calls", async () => {
    const r = await client.chat.completions.create({
      model: "stories260K", messages: [{ role: "user", content: "Weather in Paris?" }], tools: [WEATHER, TIME], tool_choice: "required", parallel_tool_calls: false, max_tokens: 150, temperature: 0.8, seed: 3,
    });
    const c = r.choices[0]!;
    assert.equal(c.finish_reason, "tool_calls", JSON.stringify(c.message));
    const call = c.message.tool_calls![0]! as { id: string; type: string; function: { name: string; arguments: string } };
    assert.ok(["get_weather", "get_time"].includes(call.function.name));
    assert.match(call.id, /^call_/);
    const args = JSON.parse(call.function.arguments);
    if (call.function.name === "get_weather") assert.ok(validate(args), call.function.arguments);
    else assert.equal(typeof args.zone, "string");
  });

  test("a named function, streamed as OpenAI streams calls: id and name first, then the arguments piece by piece; the same call as unstreamed", async () => {
    const request = {
      model: "stories260K", messages: [{ role: "user" as const, content: "Weather?" }], tools: [WEATHER, TIME], tool_choice: { type: "function" as const, function: { name: "get_weather" } }, parallel_tool_calls: false,
      max_tokens: 150, temperature: 0,
    };
    const stream = await client.chat.completions.create({ ...request, stream: true });
    const deltas: { index: number; id?: string; name?: string; arguments?: string }[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const d of chunk.choices[0]?.delta.tool_calls ?? []) deltas.push({ index: d.index, id: d.id, ...d.function });
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(finish, "tool_calls");
    assert.ok(deltas.length >= 3, `the arguments come in pieces: ${JSON.stringify(deltas)}`);
    assert.equal(deltas[0]!.name, "get_weather");
    assert.match(deltas[0]!.id!, /^call_/);
    assert.ok(deltas.slice(1).every((d) => d.index === 0 && d.id === undefined && d.name === undefined));
    const args = deltas.map((d) => d.arguments ?? "").join("");
    assert.ok(validate(JSON.parse(args)), args);
    const whole = await client.chat.completions.create(request);
    const call = whole.choices[0]!.message.tool_calls![0]! as { function: { name: string; arguments: string } };
    assert.equal(call.function.name, "get_weather");
    assert.deepEqual(JSON.parse(args), JSON.parse(call.function.arguments));
  });

  test("a call cut off by max_tokens finishes with 'length', streamed or not, as OpenAI and llama-server report the token limit", async () => {
    const request = {
      model: "stories260K", messages: [{ role: "user" as const, content: "Weather?" }], tools: [WEATHER, TIME], tool_choice: { type: "function" as const, function: { name: "get_weather" } }, parallel_tool_calls: false, temperature: 0,
    };
    const whole = await client.chat.completions.create({ ...request, max_tokens: 150 });
    assert.equal(whole.choices[0]!.finish_reason, "tool_calls");
    // one token short of the whole call
    const max_tokens = whole.usage!.completion_tokens - 1;
    const cut = await client.chat.completions.create({ ...request, max_tokens });
    assert.equal(cut.choices[0]!.finish_reason, "length");
    const stream = await client.chat.completions.create({ ...request, max_tokens, stream: true });
    const names: string[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const d of chunk.choices[0]?.delta.tool_calls ?? []) if (d.function?.name) names.push(d.function.name);
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.deepEqual(names, ["get_weather"], "the call had begun streaming");
    assert.equal(finish, "length");
  });

  test("with tools offered but no call made (auto), the text streams as it is generated", async () => {
    const stream = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Tell a story" }], tools: [WEATHER], max_tokens: 40, temperature: 0, stream: true });
    const pieces: string[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) pieces.push(chunk.choices[0].delta.content);
      assert.equal(chunk.choices[0]?.delta.tool_calls, undefined);
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(finish, "length");
    assert.ok(pieces.length > 10, `streamed in ${pieces.length} pieces`);
    const whole = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Tell a story" }], tools: [WEATHER], max_tokens: 40, temperature: 0 });
    assert.equal(pieces.join(""), whole.choices[0]!.message.content);
  });

  test("response_format with tools auto: the reply is a call (finish_reason tool_calls) or text under the schema, as OpenAI's response_format governs only the text", async () => {
    // the AI SDK's generateText({tools, output: Output.object(...)}) sends both on every step
    const schema = { type: "object", properties: { answer: { type: "string", maxLength: 10 } }, required: ["answer"], additionalProperties: false };
    const request = {
      model: "stories260K", messages: [{ role: "user" as const, content: "Weather in Paris?" }], tools: [WEATHER, TIME], tool_choice: "auto" as const, parallel_tool_calls: false,
      response_format: { type: "json_schema" as const, json_schema: { name: "reply", schema, strict: true } }, max_tokens: 150, temperature: 0,
    };
    // the tokens that are "<", the first character of a Hermes call: pushed up, the reply opens a call
    const lt = Array.from({ length: s.model.info.vocabSize }, (_, i) => i).filter((i) => s.model.tokenizer.decode([i]) === "<");
    assert.ok(lt.length > 0);
    const toward = (bias: number) => Object.fromEntries(lt.map((i) => [String(i), bias]));
    const called = await client.chat.completions.create({ ...request, logit_bias: toward(100) });
    const c = called.choices[0]!;
    assert.equal(c.finish_reason, "tool_calls", JSON.stringify(c.message));
    const call = c.message.tool_calls![0]! as { function: { name: string; arguments: string } };
    assert.ok(["get_weather", "get_time"].includes(call.function.name), call.function.name);
    const args = JSON.parse(call.function.arguments);
    if (call.function.name === "get_weather") assert.ok(validate(args), call.function.arguments);
    else assert.equal(typeof args.zone, "string");
    // streamed the same way
    const stream = await client.chat.completions.create({ ...request, logit_bias: toward(100), stream: true });
    let finish: string | null = null;
    const names: string[] = [];
    for await (const chunk of stream) {
      for (const d of chunk.choices[0]?.delta.tool_calls ?? []) if (d.function?.name) names.push(d.function.name);
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.deepEqual([names, finish], [[call.function.name], "tool_calls"]);
    // pushed away (json_object too): the reply is text in the format, no call
    const text = await client.chat.completions.create({ ...request, logit_bias: toward(-100) });
    assert.equal(text.choices[0]!.finish_reason, "stop", JSON.stringify(text.choices[0]!.message));
    assert.equal(text.choices[0]!.message.tool_calls, undefined);
    assert.ok(new Ajv().compile(schema)(JSON.parse(text.choices[0]!.message.content!)), text.choices[0]!.message.content!);
    const object = await client.chat.completions.create({ ...request, response_format: { type: "json_object" }, logit_bias: toward(-100), max_tokens: 60 });
    assert.equal(object.choices[0]!.message.tool_calls, undefined);
    if (object.choices[0]!.finish_reason === "stop") assert.equal(typeof JSON.parse(object.choices[0]!.message.content!), "object");
    else assert.match(object.choices[0]!.message.content!, /^\s*\{/);
    const objectCall = await client.chat.completions.create({ ...request, response_format: { type: "json_object" }, logit_bias: toward(100) });
    assert.equal(objectCall.choices[0]!.finish_reason, "tool_calls", JSON.stringify(objectCall.choices[0]!.message));
  });

  test("response_format with tools auto: a schema the grammar cannot express is a 400 naming response_format", async () => {
    const r = await post(`${s.url}/v1/chat/completions`, {
      messages: [{ role: "user", content: "x" }], tools: [WEATHER], response_format: { type: "json_schema", json_schema: { name: "r", schema: { type: "array", uniqueItems: true } } },
    });
    assert.equal(r.status, 400, JSON.stringify(r.json));
    assert.equal(r.json.error.param, "response_format");
  });

  test("llama-server's grammar with tools is a 400 naming grammar, as llama-server refuses it; with tool_choice none it shapes the text", async () => {
    const grammar = 'root ::= "yes" | "no"';
    for (const tool_choice of [undefined, "auto", "required", { type: "function", function: { name: "get_weather" } }]) {
      const r = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "Rain?" }], tools: [WEATHER], tool_choice, grammar, max_tokens: 8 });
      assert.equal(r.status, 400, `${JSON.stringify(tool_choice)}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error.param, "grammar");
      assert.match(r.json.error.message, /'grammar' cannot be used with 'tools'/);
    }
    const none = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "Rain?" }], tools: [WEATHER], tool_choice: "none", grammar, max_tokens: 8 });
    assert.equal(none.status, 200, JSON.stringify(none.json));
    assert.ok(["yes", "no"].includes(none.json.choices[0].message.content), JSON.stringify(none.json.choices[0].message));
  });

  test("the call and the tool's answer go back through the template; tool_choice none renders no tools", async () => {
    const messages = [
      { role: "user", content: "Weather in Oslo?" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo","unit":"c"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "-3 degrees" },
    ];
    // the messages as the server reads them (arguments parsed into an object, content null -> "")
    const text = s.model.chatFormatter(HERMES).render(messagesOf({ messages }), true, { tools: [WEATHER] });
    // (tojson writes Python's json.dumps separators)
    assert.match(text, /assistant:<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "Oslo", "unit": "c"\}\}\n<\/tool_call>/);
    assert.match(text, /tool: <tool_response>-3 degrees<\/tool_response>/);
    const r = await post(`${s.url}/v1/chat/completions`, { messages, tools: [WEATHER], max_tokens: 8, temperature: 0 });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const none = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "hi" }], tools: [WEATHER], tool_choice: "none", max_tokens: 8, temperature: 0 });
    assert.equal(none.status, 200);
    assert.equal(none.json.choices[0].message.tool_calls, undefined);
  });

  test("bad tools and tool_choice are 400s naming the parameter", async () => {
    for (const [body, param, re] of [
      [{ tools: [{ type: "function", function: { name: "has space" } }] }, "tools[0].function.name", /1-64 letters/],
      [{ tools: [WEATHER], tool_choice: { type: "function", function: { name: "nope" } } }, "tool_choice", /not among the tools/],
      [{ tool_choice: "required" }, "tool_choice", /needs 'tools'/],
      [{ tools: [WEATHER], tool_choice: "required", response_format: { type: "json_object" } }, "tool_choice", /cannot both shape the reply/],
      [{ messages: [{ role: "assistant", content: null, tool_calls: [{ type: "function", function: { name: "f", arguments: "{bad" } }] }] }, "messages[0].tool_calls[0].function.arguments", /must be a JSON object/],
    ] as const) {
      const r = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "x" }], ...body });
      assert.equal(r.status, 400, JSON.stringify(r.json));
      assert.equal(r.json.error.param, param);
      assert.match(r.json.error.message, re);
    }
  });
});

test("the streaming parser, fed a reply in pieces of any size, finds the calls and content parseToolCalls finds in the whole reply", () => {
  const tools = toolsOf({ tools: [WEATHER, TIME] })!;
  const replies: [ToolFormat, string][] = [
    ["hermes", 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Ro}me", "unit": "c"}}\n</tool_call>\n<tool_call>\n{"arguments": {"zone": "UTC"}, "name": "get_time"}\n</tool_call>'],
    ["hermes", "No calls here, just < and <tool and text."],
    ["hermes", '<tool_call>{"name": "unknown", "arguments": {}}</tool_call> then text'],
    ["mistral", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Lyon \\"x\\"", "unit": "c"}}, {"name": "get_time", "arguments": {"zone": "CET"}}]'],
    ["json", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "f"}}'],
    ["json", "It is sunny."],
  ];
  for (const [format, text] of replies) {
    const expected = parseToolCalls(text, format, tools);
    for (const size of [1, 2, 3, 7, 1000]) {
      const parser = new ToolCallStream(format, tools);
      const deltas = [];
      for (let i = 0; i < text.length; i += size) deltas.push(...parser.push(text.slice(i, i + size)));
      deltas.push(...parser.end());
      const content = deltas.flatMap((d) => ("content" in d ? [d.content] : [])).join("");
      const calls: { name: string; args: string }[] = [];
      for (const d of deltas) {
        if (!("call" in d)) continue;
        if (d.call.function.name !== undefined) calls[d.call.index] = { name: d.call.function.name, args: "" };
        calls[d.call.index]!.args += d.call.function.arguments;
      }
      const what = `${format} in pieces of ${size}: ${text}`;
      assert.equal(content.trim(), expected.content.trim(), what);
      assert.deepEqual(calls.map((c) => [c.name, JSON.parse(c.args)]), expected.calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]), what);
      assert.equal(parser.callCount, expected.calls.length, what);
    }
  }
});

test("gbnfAlternatives: two grammars with the same rule names, renamed apart; strings, classes, bounds and comments kept", () => {
  const a = 'root ::= "root " item{2} # a comment: root\nitem ::= [a-c] | "\\"item\\""';
  const b = 'root ::= item+\nitem ::= "[x]"';
  const g = parseGbnf(gbnfAlternatives([a, b]));
  const m = new GrammarMatcher(g);
  const admits = (text: string) => {
    let st = m.initial();
    for (const ch of text) st = m.advance(st, ch.codePointAt(0)!);
    return GrammarMatcher.complete(st);
  };
  assert.ok(admits("root ab"));
  assert.ok(admits('root "item"c'));
  assert.ok(admits("[x][x]"));
  assert.ok(!admits("root [x]"));
  assert.ok(!admits("ab"));
});

test("tool calls are found in Hermes blocks and Llama-style JSON replies; malformed ones stay text", () => {
  const tools = toolsOf({ tools: [WEATHER] })!;
  const hermes = parseToolCalls('Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome", "unit": "c"}}\n</tool_call>', "hermes", tools);
  assert.equal(hermes.content, "Let me check.");
  assert.deepEqual(hermes.calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]), [["get_weather", { city: "Rome", unit: "c" }]]);
  assert.deepEqual(parseToolCalls("<tool_call>{not json}</tool_call>", "hermes", tools), { content: "<tool_call>{not json}</tool_call>", calls: [] });
  assert.equal(parseToolCalls('<tool_call>{"name": "unknown", "arguments": {}}</tool_call>', "hermes", tools).calls.length, 0);
  const json = parseToolCalls('<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "f"}}', "json", tools);
  assert.equal(json.calls[0]!.function.arguments, '{"city":"Oslo","unit":"f"}');
  assert.equal(parseToolCalls("It is sunny.", "json", tools).calls.length, 0);
  const mistral = parseToolCalls('[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Lyon", "unit": "c"}}, {"name": "get_weather", "arguments": {"city": "Nice", "unit": "c"}}]', "mistral", tools);
  assert.deepEqual(mistral.calls.map((c) => JSON.parse(c.function.arguments).city), ["Lyon", "Nice"]);
  assert.equal(parseToolCalls("[TOOL_CALLS] [oops", "mistral", tools).calls.length, 0);
  assert.deepEqual([toolFormatOf("{{ '<tool_call>' }}"), toolFormatOf("[TOOL_CALLS]"), toolFormatOf("{{ tools }}")], ["hermes", "mistral", "json"]);
  // the required-call grammar of each format admits a call in it
  for (const [format, text] of [["hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome", "unit": "c"}}\n</tool_call>'],
    ["mistral", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Rome", "unit": "c"}}]'], ["json", '{"name": "get_weather", "parameters": {"city": "Rome", "unit": "c"}}']] as const) {
    const g = parseGbnf(toolCallGrammar(toolsOf({ tools: [WEATHER], tool_choice: "required" })!, format));
    const m = new GrammarMatcher(g);
    let st = m.initial();
    for (const ch of text) st = m.advance(st, ch.codePointAt(0)!);
    assert.ok(GrammarMatcher.complete(st), `${format}: ${text}`);
  }
});

test("parallel_tool_calls: the required-call grammar admits several calls by default and one without it; parsing and streaming keep only the first without it", () => {
  const twoCalls: [ToolFormat, string][] = [
    ["hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome", "unit": "c"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n</tool_call>'],
    ["mistral", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Rome", "unit": "c"}}, {"name": "get_time", "arguments": {"zone": "CET"}}]'],
  ];
  for (const [format, text] of twoCalls) {
    for (const parallel of [true, false]) {
      const tools = toolsOf({ tools: [WEATHER, TIME], tool_choice: "required", ...(parallel ? {} : { parallel_tool_calls: false }) })!;
      assert.equal(tools.parallel, parallel);
      const m = new GrammarMatcher(parseGbnf(toolCallGrammar(tools, format)));
      let st = m.initial();
      for (const ch of text) st = m.advance(st, ch.codePointAt(0)!);
      assert.equal(GrammarMatcher.complete(st), parallel, `${format}, parallel ${parallel}`);
      const parsed = parseToolCalls(text, format, tools);
      assert.deepEqual(parsed.calls.map((c) => c.function.name), parallel ? ["get_weather", "get_time"] : ["get_weather"], `${format}, parallel ${parallel}`);
      assert.equal(parsed.content, "");
      for (const size of [1, 5, 1000]) {
        const parser = new ToolCallStream(format, tools);
        const deltas = [];
        for (let i = 0; i < text.length; i += size) deltas.push(...parser.push(text.slice(i, i + size)));
        deltas.push(...parser.end());
        const names = deltas.flatMap((d) => ("call" in d && d.call.function.name !== undefined ? [d.call.function.name] : []));
        assert.deepEqual(names, parsed.calls.map((c) => c.function.name), `${format} streamed in pieces of ${size}, parallel ${parallel}`);
        assert.equal(deltas.filter((d) => "content" in d).length, 0, `${format} streamed in pieces of ${size}: no content`);
      }
    }
  }
  assert.throws(() => toolsOf({ tools: [WEATHER], parallel_tool_calls: "no" }), /'parallel_tool_calls' must be a boolean/);
});
