import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Ajv } from "ajv";
import OpenAI from "openai";
import { ChatCompletionStream } from "openai/lib/ChatCompletionStream";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { chatFormatterFor, type ChatMessage } from "../src/chat/index.js";
import { messagesOf } from "../src/server/requests.js";
import type { ApiError } from "../src/server/errors.js";
import { finishReasonOf } from "../src/server/openai.js";
import { CALL_MARKERS, parseReply } from "../src/server/reply-parser.js";
import {
  messagesForTemplate, readReply, reasoningFormatOf, replyGrammar, replySyntaxOf, ReplyStream, templateVariablesOf, thinkingOf, toolCallGrammar, toolCallsOf, toolFormatOf, toolsOf,
  type ReplyDelta, type ReplySyntax, type ToolFormat,
} from "../src/server/tools.js";
import { gbnfAlternatives, GrammarMatcher, parseGbnf } from "../src/sampling/constraints/index.js";
import { openTokenizer } from "../src/tokenizer/index.js";
import { renderWithJinja2, skipWithoutJinja2 } from "../scripts/jinja2-oracle.js";
import { grammarAdmits } from "./helpers/constraint-texts.js";
import { llamaCppTemplate, skipWithoutLlamaCppTemplates } from "./helpers/llama-cpp-templates.js";
import { rng } from "./helpers/rng.js";
import { post, serveStories, skipStories as skip } from "./helpers/serve.js";
import { PROJECT_ROOT } from "./helpers/shared.js";

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
/** WEATHER as OpenAI's strict mode wants it: closed, every property required, the city's length a pattern (strict mode has no maxLength) */
const STRICT_WEATHER = { type: "function", function: { ...WEATHER.function, strict: true, parameters: { ...WEATHER.function.parameters, properties: { ...WEATHER.function.parameters.properties, city: { type: "string", pattern: "^.{0,12}$" } }, additionalProperties: false } } } as const;

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

  test("a strict function whose parameters use $defs and $ref (as pydantic writes a nested model) is enforced: its call's arguments validate", async () => {
    // the parameters' $refs point into their own $defs: inside the call object's grammar they once
    // pointed at the call object's root, and every such request was a 400 ("does not point at a schema")
    const parameters = {
      type: "object", properties: { place: { $ref: "#/$defs/Place" }, unit: { $ref: "#/$defs/Unit" } }, required: ["place", "unit"], additionalProperties: false,
      $defs: { Place: { type: "object", properties: { city: { type: "string", pattern: "^.{0,8}$" } }, required: ["city"], additionalProperties: false }, Unit: { enum: ["c", "f"] } },
    };
    const tool = { type: "function" as const, function: { name: "get_weather", strict: true, parameters } };
    const valid = new Ajv().compile(parameters);
    for (const tool_choice of ["required", { type: "function" as const, function: { name: "get_weather" } }] as const) {
      const r = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Weather?" }], tools: [tool, TIME], tool_choice, parallel_tool_calls: false, max_tokens: 150, temperature: 0.8, seed: 5 });
      const c = r.choices[0]!;
      assert.equal(c.finish_reason, "tool_calls", JSON.stringify(c.message));
      const call = c.message.tool_calls![0]! as { function: { name: string; arguments: string } };
      if (call.function.name === "get_weather") assert.ok(valid(JSON.parse(call.function.arguments)), call.function.arguments);
    }
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

  test("max_tokens cutting the call's closing </tool_call> short leaves no piece of it as content, streamed or not, as llama-server reads a reply the model did not end", async () => {
    const request = {
      model: "stories260K", messages: [{ role: "user" as const, content: "Weather?" }], tools: [WEATHER, TIME], tool_choice: { type: "function" as const, function: { name: "get_weather" } }, parallel_tool_calls: false, temperature: 0,
    };
    const whole = await client.chat.completions.create({ ...request, max_tokens: 150, logprobs: true });
    const args = (whole.choices[0]!.message.tool_calls![0]! as { function: { arguments: string } }).function.arguments;
    // the reply's tokens as written (markers included): the first count that ends inside the closing marker
    const tokens = whole.choices[0]!.logprobs!.content!.map((e) => e.token);
    const raw = tokens.join("");
    const from = raw.lastIndexOf("</tool_call>"), to = from + "</tool_call>".length;
    let written = 0;
    const max_tokens = tokens.findIndex((t) => (written += t.length) > from && written < to) + 1;
    assert.ok(from > 0 && max_tokens > 0, `a token ends inside the closing marker: ${JSON.stringify(tokens.slice(-8))}`);
    const cut = await client.chat.completions.create({ ...request, max_tokens });
    assert.equal(cut.choices[0]!.finish_reason, "length");
    assert.equal(cut.choices[0]!.message.content, null, "no text beside the call");
    assert.equal((cut.choices[0]!.message.tool_calls![0]! as { function: { arguments: string } }).function.arguments, args);
    const stream = await client.chat.completions.create({ ...request, max_tokens, stream: true });
    const streamed = await ChatCompletionStream.fromReadableStream(stream.toReadableStream()).finalChatCompletion();
    assert.equal(streamed.choices[0]!.message.content ?? "", "", "no text streamed beside the call");
    assert.equal((streamed.choices[0]!.message.tool_calls![0]! as { function: { arguments: string } }).function.arguments, args);
  });

  test("a function without parameters is one with an empty parameter list, as OpenAI defines it: its arguments are {}", async () => {
    const ping = { type: "function" as const, function: { name: "ping" } };
    const r = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Ping?" }], tools: [ping], tool_choice: "required", parallel_tool_calls: false, max_tokens: 200, temperature: 0.8, seed: 1 });
    const c = r.choices[0]!;
    assert.equal(c.finish_reason, "tool_calls", JSON.stringify(c.message));
    assert.deepEqual(JSON.parse((c.message.tool_calls![0]! as { function: { arguments: string } }).function.arguments), {});
  });

  test("a named function is called exactly once, as OpenAI's forced function, even where parallel_tool_calls is left true; streamed the same", async () => {
    const request = {
      model: "stories260K", messages: [{ role: "user" as const, content: "Weather?" }], tools: [WEATHER, TIME], tool_choice: { type: "function" as const, function: { name: "get_time" } },
      max_tokens: 300, temperature: 0,
    };
    for (const parallel of [undefined, true]) {
      const r = await client.chat.completions.create({ ...request, ...(parallel === undefined ? {} : { parallel_tool_calls: parallel }) });
      const c = r.choices[0]!;
      assert.equal(c.finish_reason, "tool_calls", JSON.stringify(c.message));
      assert.deepEqual(c.message.tool_calls!.map((t) => (t as { function: { name: string } }).function.name), ["get_time"]);
      const stream = await client.chat.completions.create({ ...request, stream: true });
      const streamed = await ChatCompletionStream.fromReadableStream(stream.toReadableStream()).finalChatCompletion();
      assert.equal(streamed.choices[0]!.finish_reason, "tool_calls");
      assert.equal(streamed.choices[0]!.message.tool_calls!.length, 1);
    }
  });

  test("a stop string met inside a call: the cut call as read with finish_reason stop, not tool_calls, streamed or not; met after the call's JSON: tool_calls", async () => {
    const request = {
      model: "stories260K", messages: [{ role: "user" as const, content: "Weather?" }], tools: [WEATHER, TIME], tool_choice: { type: "function" as const, function: { name: "get_weather" } }, parallel_tool_calls: false,
      max_tokens: 150, temperature: 0,
    };
    for (const [stop, finish] of [[["}"], "stop"], [["</tool_call>"], "tool_calls"]] as const) {
      const whole = await client.chat.completions.create({ ...request, stop: [...stop] });
      const c = whole.choices[0]!;
      const args = (c.message.tool_calls![0]! as { function: { arguments: string } }).function.arguments;
      assert.equal(c.finish_reason, finish, `${stop}: ${JSON.stringify(c.message)}`);
      if (finish === "stop") assert.throws(() => JSON.parse(args), SyntaxError, `cut by ${stop}: ${args}`);
      else assert.ok(validate(JSON.parse(args)), args);
      const stream = await client.chat.completions.create({ ...request, stop: [...stop], stream: true });
      const runner = ChatCompletionStream.fromReadableStream(stream.toReadableStream());
      const streamed = await runner.finalChatCompletion();
      assert.equal(streamed.choices[0]!.finish_reason, finish, `${stop}, streamed`);
      assert.equal((streamed.choices[0]!.message.tool_calls![0]! as { function: { arguments: string } }).function.arguments, args);
    }
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
    const schema = { type: "object", properties: { answer: { type: "string", pattern: "^.{0,10}$" } }, required: ["answer"], additionalProperties: false };
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

  test("response_format with tools auto: a schema the grammar cannot express is a 400 naming response_format.json_schema.schema", async () => {
    const r = await post(`${s.url}/v1/chat/completions`, {
      messages: [{ role: "user", content: "x" }], tools: [WEATHER], response_format: { type: "json_schema", json_schema: { name: "r", schema: { type: "array", uniqueItems: true } } },
    });
    assert.equal(r.status, 400, JSON.stringify(r.json));
    assert.equal(r.json.error.param, "response_format.json_schema.schema.uniqueItems");
  });

  test("function.strict over HTTP: parameters that break OpenAI's strict rules are a 400 naming the field, as OpenAI's; a strict function under auto is answered", async () => {
    const open = { type: "function", function: { ...WEATHER.function, strict: true } };
    const r = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "x" }], tools: [TIME, open], max_tokens: 4 });
    assert.equal(r.status, 400, JSON.stringify(r.json));
    assert.equal(r.json.error.param, "tools[1].function.parameters");
    assert.equal(r.json.error.code, "invalid_function_parameters");
    assert.match(r.json.error.message, /Invalid schema for function 'get_weather' .*#: 'additionalProperties' is required to be supplied and to be false/);
    const ok = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Weather in Paris?" }], tools: [STRICT_WEATHER, TIME], max_tokens: 40, temperature: 0.8, seed: 1 });
    for (const call of ok.choices[0]!.message.tool_calls ?? []) {
      const f = (call as { function: { name: string; arguments: string } }).function;
      if (f.name === "get_weather" && ok.choices[0]!.finish_reason === "tool_calls") assert.ok(validate(JSON.parse(f.arguments)), f.arguments);
    }
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

  test("the call and the tool's answer go back through the template; tool_choice none makes no call", async () => {
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

  test("tools and tool_choice null, as clients that write every field send them unset: answered as without them (llama-server reads null as unset)", async () => {
    for (const body of [{ tools: null, tool_choice: null }, { tool_choice: null }, { tools: [], tool_choice: null, parallel_tool_calls: null }]) {
      const r = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "x" }], max_tokens: 2, ...body });
      assert.equal(r.status, 200, `${JSON.stringify(body)}: ${JSON.stringify(r.json)}`);
    }
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

test("gbnfAlternatives: two grammars with the same rule names, renamed apart; strings, classes, bounds and comments kept", () => {
  const a = 'root ::= "root " item{2} # a comment: root\nitem ::= [a-c] | "\\"item\\""';
  const b = 'root ::= item+\nitem ::= "[x]"';
  const g = parseGbnf(gbnfAlternatives([a, b]));
  const m = new GrammarMatcher(g);
  const admits = (text: string) => grammarAdmits(m, text);
  assert.ok(admits("root ab"));
  assert.ok(admits('root "item"c'));
  assert.ok(admits("[x][x]"));
  assert.ok(!admits("root [x]"));
  assert.ok(!admits("ab"));
});



function chunksOf(deltas: readonly ReplyDelta[], finish: string): unknown[] {
  const head = { id: "chatcmpl-x", object: "chat.completion.chunk", created: 0, model: "m" };
  const chunk = (delta: unknown, finish_reason: string | null = null) => ({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason }] });
  return [chunk({ role: "assistant", content: "" }), ...deltas.map((d) => chunk("call" in d ? { tool_calls: [d.call] } : d)), chunk({}, finish)];
}

/** the deltas of a reply streamed in the given pieces */
function streamed(text: string, syntax: ReplySyntax, cuts: readonly number[]): ReplyDelta[] {
  const s = new ReplyStream(syntax);
  const out: ReplyDelta[] = [];
  let at = 0;
  for (const c of [...cuts, text.length]) { out.push(...s.push(text.slice(at, c))); at = c; }
  out.push(...s.end());
  return out;
}

/** what the deltas add up to, as openai's ChatCompletionStream adds content and tool calls (reasoning_content, which it does not know, joined as clients of llama-server join it) */
function accumulated(deltas: readonly ReplyDelta[]): { reasoning: string; content: string; calls: [string, string][] } {
  const calls: [string, string][] = [];
  let content = "", reasoning = "";
  for (const d of deltas) {
    if ("content" in d) content += d.content;
    else if ("reasoning_content" in d) reasoning += d.reasoning_content;
    else {
      if (d.call.function.name !== undefined) calls[d.call.index] = [d.call.function.name, ""];
      calls[d.call.index]![1] += d.call.function.arguments;
    }
  }
  return { reasoning, content, calls };
}

const NAMES = new Set(["get_weather", "get_time", "python", "brave_search"]);
/** the string parameters of these tools (Qwen3-Coder writes their values as raw text; get_weather's days is an integer) */
const STRING_PARAMETERS = new Map([["get_weather", new Set(["city", "unit"])], ["get_time", new Set(["zone"])], ["python", new Set(["code"])], ["brave_search", new Set(["query"])]]);
const syntaxFor = (format: ToolFormat, thinking?: ReplySyntax["thinking"], parallel = true): ReplySyntax => ({
  calls: { format, names: NAMES, parallel, builtins: new Set(["brave_search"]), stringParameters: STRING_PARAMETERS }, ...(thinking ? { thinking } : {}),
});
const THINK = { open: "<think>", close: "</think>", forcedOpen: false };

/**
 * Replies as each family's models write them, well-formed and not: the brief's disagreements
 * (an object not closed before </tool_call>, a Llama call followed by text, arguments as a JSON
 * string, a lone [TOOL_CALLS]) among them, and what the message must be, by the format's rules.
 */
const REPLIES: { format: ToolFormat; text: string; thinking?: ReplySyntax["thinking"]; want: { reasoning?: string; content: string; calls: [string, unknown][] } }[] = [
  { format: "hermes", text: 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Ro}me", "unit": "c"}}\n</tool_call>\n<tool_call>\n{"arguments": {"zone": "UTC"}, "name": "get_time"}\n</tool_call>', want: { content: "Let me check.", calls: [["get_weather", { city: "Ro}me", unit: "c" }], ["get_time", { zone: "UTC" }]] } },
  { format: "hermes", text: "No calls here, just < and <tool and text.", want: { content: "No calls here, just < and <tool and text.", calls: [] } },
  { format: "hermes", text: '<tool_call>{"name": "unknown", "arguments": {}}</tool_call> then text', want: { content: '<tool_call>{"name": "unknown", "arguments": {}}</tool_call> then text', calls: [] } },
  { format: "hermes", text: "<tool_call>{not json}</tool_call>", want: { content: "<tool_call>{not json}</tool_call>", calls: [] } },
  // the object not closed before </tool_call>: the call stands (its arguments are whole), as it streamed
  { format: "hermes", text: '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome", "unit": "c"}\n</tool_call>', want: { content: "", calls: [["get_weather", { city: "Rome", unit: "c" }]] } },
  // arguments as a JSON string (llama.cpp takes them): the string's text
  { format: "hermes", text: '<tool_call>\n{"name": "get_time", "arguments": "{\\"zone\\": \\"UTC\\"}"}\n</tool_call>', want: { content: "", calls: [["get_time", { zone: "UTC" }]] } },
  { format: "hermes", text: '<function=get_time>{"zone": "CET"}</function>', want: { content: "", calls: [["get_time", { zone: "CET" }]] } },
  { format: "hermes", text: "<think>\nThe user wants the time.\n</think>\n\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>", thinking: THINK, want: { reasoning: "The user wants the time.", content: "", calls: [["get_time", { zone: "UTC" }]] } },
  { format: "hermes", text: "<think>\nJust chat.\n</think>\n\nHello!", thinking: THINK, want: { reasoning: "Just chat.", content: "Hello!", calls: [] } },
  { format: "mistral", text: '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Lyon \\"x\\"", "unit": "c"}}, {"name": "get_time", "arguments": {"zone": "CET"}, "id": "a1b2c3d4e"}]', want: { content: "", calls: [["get_weather", { city: 'Lyon "x"', unit: "c" }], ["get_time", { zone: "CET" }]] } },
  // a reply over after [TOOL_CALLS] is a call cut before its name: dropped, as llama.cpp's lenient parse drops it
  { format: "mistral", text: "[TOOL_CALLS]", want: { content: "", calls: [] } },
  { format: "mistral", text: "[TOOL_CALLS] [oops", want: { content: "[TOOL_CALLS] [oops", calls: [] } },
  // Qwen3-Coder's XML: string parameters as raw text (several lines, "<" and "</p" in them), others JSON (a value that is not JSON a string)
  { format: "qwen3-coder", text: 'I will check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n<parameter=zone>\nUTC\n</parameter>\n</function>\n</tool_call>', want: { content: "I will check.", calls: [["get_weather", { city: "New York", days: 3 }], ["get_time", { zone: "UTC" }]] } },
  { format: "qwen3-coder", text: '<tool_call>\n<function=python>\n<parameter=code>\nif a < b:\n    print("</p>")\n\n</parameter>\n</function>\n</tool_call>', want: { content: "", calls: [["python", { code: 'if a < b:\n    print("</p>")\n' }]] } },
  { format: "qwen3-coder", text: "<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\nthree\n</parameter>\n</function>", want: { content: "", calls: [["get_weather", { city: "Oslo", days: "three" }]] } },
  { format: "qwen3-coder", text: "<tool_call>\n<function=nope>\n</function>\n</tool_call> and <function text", want: { content: "<tool_call>\n<function=nope>\n</function>\n</tool_call> and <function text", calls: [] } },
  { format: "qwen3-coder", text: "<think>\nTime, then.\n</think>\n\n<tool_call>\n<function=get_time>\n<parameter=zone>\nCET\n</parameter>\n</function>\n</tool_call>", thinking: THINK, want: { reasoning: "Time, then.", content: "", calls: [["get_time", { zone: "CET" }]] } },
  // the Mistral form of Devstral and Ministral 3 (NAME[ARGS]{...}), and Mistral Small 3.2's with [CALL_ID]
  { format: "mistral-args", text: 'Checking.[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo", "unit": "c"}[TOOL_CALLS]get_time[ARGS]{"zone": "CET"}', want: { content: "Checking.", calls: [["get_weather", { city: "Oslo", unit: "c" }], ["get_time", { zone: "CET" }]] } },
  { format: "mistral-args", text: '[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]{"zone": "UTC"}', want: { content: "", calls: [["get_time", { zone: "UTC" }]] } },
  { format: "mistral-args", thinking: { open: "[THINK]", close: "[/THINK]", forcedOpen: false }, text: '[THINK]Time [TOOL_CALLS]get_time[ARGS]{} first.[/THINK]Checking.[TOOL_CALLS]get_time[ARGS]{"zone": "CET"}', want: { reasoning: "Time [TOOL_CALLS]get_time[ARGS]{} first.", content: "Checking.", calls: [["get_time", { zone: "CET" }]] } },
  // (a name no tool has is text; the [TOOL_CALLS] ending the reply, a call cut before its name, goes)
  { format: "mistral-args", text: "[TOOL_CALLS]nope[ARGS]{} [TOOL_CALLS]", want: { content: "[TOOL_CALLS]nope[ARGS]{}", calls: [] } },
  { format: "llama3", text: '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "f"}}', want: { content: "", calls: [["get_weather", { city: "Oslo", unit: "f" }]] } },
  // a call, then text: a call and text (as llama.cpp reads Llama 3.x replies), streamed or not
  { format: "llama3", text: '{"type": "function", "name": "get_weather", "parameters": {"city": "Oslo", "unit": "f"}}\nI asked for the weather.', want: { content: "I asked for the weather.", calls: [["get_weather", { city: "Oslo", unit: "f" }]] } },
  { format: "llama3", text: '{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "c"}}; {"name": "get_time", "parameters": {"zone": "CET"}}', want: { content: "", calls: [["get_weather", { city: "Oslo", unit: "c" }], ["get_time", { zone: "CET" }]] } },
  { format: "llama3", text: '<|python_tag|>brave_search.call(query="weather in Oslo")', want: { content: "", calls: [["brave_search", { query: "weather in Oslo" }]] } },
  { format: "llama3", text: "It is sunny.", want: { content: "It is sunny.", calls: [] } },
  { format: "llama3", text: '{"answer": 42}', want: { content: '{"answer": 42}', calls: [] } },
  // llama.cpp's Llama 3.1 parser (common_chat_parse_llama_3_1): with built-in tools it finds <|python_tag|> anywhere
  // (try_find_regex: the text before it is content; whitespace next to a call goes here), then wants `name.call(`;
  // when that fails the whole reply is content; a JSON call it reads only at the reply's start (function_regex_start_only)
  { format: "llama3", text: 'Let me search.\n<|python_tag|>brave_search.call(query="weather in Oslo")', want: { content: "Let me search.", calls: [["brave_search", { query: "weather in Oslo" }]] } },
  { format: "llama3", text: 'Sure {x} <|python_tag|> brave_search.call(query="a;b", count=3)', want: { content: "Sure {x}", calls: [["brave_search", { query: "a;b", count: 3 }]] } },
  { format: "llama3", text: 'I will look. <|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "c"}}', want: { content: 'I will look. <|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "c"}}', calls: [] } },
  { format: "llama3", text: 'It says {"name": "get_weather", "parameters": {"city": "Oslo", "unit": "c"}}', want: { content: 'It says {"name": "get_weather", "parameters": {"city": "Oslo", "unit": "c"}}', calls: [] } },
  { format: "llama3", text: "Searching <|python_tag|>web.call(x=1)", want: { content: "Searching <|python_tag|>web.call(x=1)", calls: [] } },
  { format: "llama3", text: "Hi <|python_tag|>brave_se", want: { content: "Hi <|python_tag|>brave_se", calls: [] } },
  { format: "functionary-v3.1", text: 'Sure.<function=get_weather>{"city": "Oslo", "unit": "c"}</function><function=get_time>{"zone": "CET"}</function>', want: { content: "Sure.", calls: [["get_weather", { city: "Oslo", unit: "c" }], ["get_time", { zone: "CET" }]] } },
  { format: "functionary-v3.1", text: '<|python_tag|>print("hi")', want: { content: "", calls: [["python", { code: 'print("hi")' }]] } },
  { format: "functionary-v3.2", text: "all\nHello! How can I help?", want: { content: "Hello! How can I help?", calls: [] } },
  { format: "functionary-v3.2", text: 'all\nLet me look.>>>get_weather\n{"city": "Oslo", "unit": "c"}>>>get_time\n{"zone": "CET"}', want: { content: "Let me look.", calls: [["get_weather", { city: "Oslo", unit: "c" }], ["get_time", { zone: "CET" }]] } },
  { format: "functionary-v3.2", text: 'get_weather\n{"city": "Oslo", "unit": "c"}', want: { content: "", calls: [["get_weather", { city: "Oslo", unit: "c" }]] } },
  { format: "deepseek-r1", thinking: { ...THINK, forcedOpen: true }, text: 'I need the weather.\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Oslo", "unit": "c"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{"zone": "CET"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>', want: { reasoning: "I need the weather.", content: "", calls: [["get_weather", { city: "Oslo", unit: "c" }], ["get_time", { zone: "CET" }]] } },
  { format: "deepseek-r1", thinking: { ...THINK, forcedOpen: true }, text: "Simple.\n</think>\n\nIt is 3 pm.", want: { reasoning: "Simple.", content: "It is 3 pm.", calls: [] } },
  { format: "command-r7b", thinking: { open: "<|START_THINKING|>", close: "<|END_THINKING|>", forcedOpen: false }, text: '<|START_THINKING|>I will look it up.<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Oslo", "unit": "c"}}\n]<|END_ACTION|>', want: { reasoning: "I will look it up.", content: "", calls: [["get_weather", { city: "Oslo", unit: "c" }]] } },
  { format: "command-r7b", thinking: { open: "<|START_THINKING|>", close: "<|END_THINKING|>", forcedOpen: false }, text: "<|START_RESPONSE|>Hello!<|END_RESPONSE|>", want: { content: "Hello!", calls: [] } },
  { format: "firefunction-v2", text: 'Checking. functools[{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}]', want: { content: "Checking.", calls: [["get_weather", { city: "Oslo", unit: "c" }]] } },
  { format: "generic", text: '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}]}', want: { content: "", calls: [["get_weather", { city: "Oslo", unit: "c" }]] } },
  { format: "generic", text: '{"tool_call": {"name": "get_time", "arguments": {"zone": "CET"}}}', want: { content: "", calls: [["get_time", { zone: "CET" }]] } },
  { format: "generic", text: '{"response": "Hello \\"you\\"\\n"}', want: { content: 'Hello "you"\n', calls: [] } },
  { format: "generic", text: "plain text", want: { content: "plain text", calls: [] } },
  // a JSON parameter whose string holds "</parameter>": the value ends where its JSON does (the grammar admits it)
  { format: "qwen3-coder", text: '<tool_call>\n<function=get_time>\n<parameter=opts>\n{"note": "a </parameter> b", "n": [1]}\n</parameter>\n<parameter=zone>\nUTC\n</parameter>\n</function>\n</tool_call>', want: { content: "", calls: [["get_time", { opts: { note: "a </parameter> b", n: [1] }, zone: "UTC" }]] } },
  // Qwen3.5 opening its call without closing its reasoning: the call ends the reasoning (llama.cpp's qwen3_coder format)
  { format: "qwen3-coder", thinking: { ...THINK, forcedOpen: true, endsBefore: ["<tool_call>"] }, text: "The time.\n<tool_call>\n<function=get_time>\n<parameter=zone>\nUTC\n</parameter>\n</function>\n</tool_call>", want: { reasoning: "The time.", content: "", calls: [["get_time", { zone: "UTC" }]] } },
  // characters outside the BMP (surrogate pairs in JavaScript's strings) in every part of a reply
  { format: "qwen3-coder", text: "<think>\n😀 first\n</think>\n\n😀 text\n<tool_call>\n<function=python>\n<parameter=code>\nprint('😀😀')\n</parameter>\n</function>\n</tool_call>", thinking: THINK, want: { reasoning: "😀 first", content: "😀 text", calls: [["python", { code: "print('😀😀')" }]] } },
  { format: "functionary-v3.1", text: '<|python_tag|>print("😀")', want: { content: "", calls: [["python", { code: 'print("😀")' }]] } },
  // calls cut before their names (a stop string, max_tokens): dropped with their markers, as llama.cpp drops a call it cannot name; a name no tool's begins with stays text
  { format: "hermes", text: "Let me check.\n<tool_call>\n{ ", want: { content: "Let me check.", calls: [] } },
  { format: "hermes", text: 'Hi <tool_call>\n{"name": "get_w', want: { content: "Hi", calls: [] } },
  { format: "hermes", text: '<tool_call>\n{"name": "nope', want: { content: '<tool_call>\n{"name": "nope', calls: [] } },
  { format: "hermes", text: "Hi <function=get_", want: { content: "Hi", calls: [] } },
  { format: "mistral", text: 'Hi [TOOL_CALLS] [{"name": "get_weather", "arguments": {}}, {"na', want: { content: "Hi", calls: [["get_weather", {}]] } },
  { format: "qwen3-coder", text: "Hi\n<tool_call>\n<func", want: { content: "Hi", calls: [] } },
  { format: "qwen3-coder", text: "<tool_call>\n<function=get_ti", want: { content: "", calls: [] } },
  { format: "mistral-args", text: "Checking.[TOOL_CALLS]get_ti", want: { content: "Checking.", calls: [] } },
  { format: "firefunction-v2", text: 'Checking. functools[{"name": "get_', want: { content: "Checking.", calls: [] } },
  { format: "command-r7b", text: '<|START_ACTION|>[{"tool_call_id": "0", "tool_na', want: { content: "", calls: [] } },
  { format: "deepseek-r1", text: '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_ti', want: { content: "", calls: [] } },
  { format: "deepseek-r1", text: "Hi <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>func", want: { content: "Hi", calls: [] } },
  { format: "deepseek-r1", text: "Hi <｜tool▁calls▁begin｜><｜tool▁call▁be", want: { content: "Hi", calls: [] } },
  { format: "hermes", text: '😀<tool_call>\n{"name": "get_time", "arguments": "{\\"zone\\": \\"😀\\ud83d\\ude00\\"}"}\n</tool_call>', want: { content: "😀", calls: [["get_time", { zone: "😀😀" }]] } },
];

test("each family's replies read as the format says, streamed or not", () => {
  for (const r of REPLIES) {
    const got = parseReply(r.text, syntaxFor(r.format, r.thinking), false);
    const what = `${r.format}: ${r.text}`;
    assert.equal(got.reasoning, r.want.reasoning ?? "", what);
    assert.equal(got.content, r.want.content, what);
    assert.deepEqual(got.calls.map((c) => [c.name, JSON.parse(c.arguments)]), r.want.calls, what);
    // whole calls finish as calls; the reply cut inside its last call's arguments (by a stop string) does not
    assert.equal(finishReasonOf("stop", got.calls), r.want.calls.length > 0 ? "tool_calls" : "stop", what);
    const last = got.calls.at(-1);
    const at = last ? r.text.lastIndexOf(last.arguments) : -1;
    if (last && at >= 0) {
      // (its closing brace cut off)
      const cut = at + last.arguments.length - 1;
      const calls = parseReply(r.text.slice(0, cut), syntaxFor(r.format, r.thinking), false).calls;
      // (a call whose name comes after its arguments is text when cut before it)
      if (calls.length === got.calls.length) assert.equal(finishReasonOf("stop", calls), "stop", `${what} cut at ${cut}`);
    }
  }
});

test("Llama 3.x without built-in tools: <|python_tag|> after text is plain text, as llama.cpp's LLAMA_3_X format (no tag search) reads it, and a stream sends it at once", () => {
  const syntax: ReplySyntax = { calls: { format: "llama3", names: NAMES, parallel: true, builtins: new Set() } };
  const text = 'Sure <|python_tag|>brave_search.call(query="x")';
  assert.deepEqual(parseReply(text, syntax, false), { reasoning: "", content: text, calls: [] });
  // nothing waits for a marker that cannot open a call: each prefix read so far is the whole prefix
  for (const end of [6, 7, 12, text.length]) assert.equal(parseReply(text.slice(0, end), syntax, true).content, text.slice(0, end).trimEnd());
});

test("a stream adds up to the non-streamed message for every reply, every prefix of it (a reply cut off) and every way of cutting it into pieces", async () => {
  const random = rng(7);
  for (const r of REPLIES) {
    const syntax = syntaxFor(r.format, r.thinking);
    for (let end = 0; end <= r.text.length; end++) {
      const text = r.text.slice(0, end);
      const whole = parseReply(text, syntax, false);
      const want = { reasoning: whole.reasoning, content: whole.content, calls: whole.calls.map((c): [string, string] => [c.name, c.arguments]) };
      const what = `${r.format}, ${JSON.stringify(text)}`;
      // a character at a time, one cut anywhere, random pieces
      const cutsList = [[...Array(text.length).keys()].slice(1), [Math.floor(random() * text.length)]];
      let at = 0;
      const pieces: number[] = [];
      while ((at += 1 + Math.floor(random() * 6)) < text.length) pieces.push(at);
      cutsList.push(pieces);
      for (const cuts of cutsList) assert.deepEqual(accumulated(streamed(text, syntax, cuts)), want, `${what} cut at ${cuts.join(",")}`);
    }
    // the whole reply a character at a time, through openai's own accumulator
    const deltas = streamed(r.text, syntax, [...Array(r.text.length).keys()].slice(1));
    const whole = parseReply(r.text, syntax, false);
    const lines = chunksOf(deltas, whole.calls.length > 0 ? "tool_calls" : "stop").map((c) => `${JSON.stringify(c)}\n`).join("");
    const final = await ChatCompletionStream.fromReadableStream(new Response(lines).body!).finalChatCompletion();
    const m = final.choices[0]!.message;
    // (the accumulator leaves content null until some text comes)
    assert.equal(m.content ?? "", whole.content, r.text);
    assert.deepEqual((m.tool_calls ?? []).map((c) => [(c as { function: { name: string } }).function.name, (c as { function: { arguments: string } }).function.arguments]), whole.calls.map((c) => [c.name, c.arguments]), r.text);
  }
});

test("parallel_tool_calls false: only the first call, streamed or not; the others are dropped, not shown as text", () => {
  for (const r of REPLIES.filter((x) => x.want.calls.length > 1)) {
    const syntax = syntaxFor(r.format, r.thinking, false);
    const whole = parseReply(r.text, syntax, false);
    assert.deepEqual(whole.calls.map((c) => c.name), [r.want.calls[0]![0]], r.text);
    assert.equal(whole.content, r.want.content, r.text);
    const got = accumulated(streamed(r.text, syntax, [...Array(r.text.length).keys()].slice(1)));
    assert.deepEqual(got.calls.map((c) => c[0]), [r.want.calls[0]![0]], r.text);
  }
  assert.throws(() => toolsOf({ tools: [WEATHER], parallel_tool_calls: "no" }), /'parallel_tool_calls' must be a boolean/);
});

test("a call streams as OpenAI's do: its id and name once the name is read, then its arguments piece by piece", () => {
  const text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome", "unit": "c"}}\n</tool_call>';
  const deltas = streamed(text, syntaxFor("hermes"), [...Array(text.length).keys()].slice(1));
  const first = deltas[0] as { call: { index: number; id?: string; function: { name?: string; arguments: string } } };
  assert.equal(first.call.function.name, "get_weather");
  assert.match(first.call.id!, /^call_/);
  assert.equal(first.call.function.arguments, "");
  assert.ok(deltas.length > 10 && deltas.slice(1).every((d) => "call" in d && d.call.id === undefined && d.call.function.name === undefined), JSON.stringify(deltas));
});

const WEB_SEARCH = { type: "function", function: { name: "brave_search", description: "search the web", parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] } } } as const;

/** llama.cpp's templates of each family, with the family llama.cpp's rules give them */
const TEMPLATES: [string, ToolFormat][] = [
  ["NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "hermes"],
  ["NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "hermes"],
  ["Qwen-Qwen2.5-7B-Instruct.jinja", "hermes"],
  ["Qwen-Qwen3-0.6B.jinja", "hermes"],
  ["mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral"],
  ["Qwen3-Coder.jinja", "qwen3-coder"],
  ["unsloth-mistral-Devstral-Small-2507.jinja", "mistral-args"],
  ["mistralai-Ministral-3-14B-Reasoning-2512.jinja", "mistral-args"],
  ["Mistral-Small-3.2-24B-Instruct-2506.jinja", "mistral-args"],
  ["meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3"],
  ["meta-llama-Llama-3.2-3B-Instruct.jinja", "llama3"],
  ["meta-llama-Llama-3.3-70B-Instruct.jinja", "llama3"],
  ["meetkai-functionary-medium-v3.1.jinja", "functionary-v3.1"],
  ["meetkai-functionary-medium-v3.2.jinja", "functionary-v3.2"],
  ["deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "deepseek-r1"],
  ["deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek-r1"],
  ["CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "command-r7b"],
  ["fireworks-ai-llama-3-firefunction-v2.jinja", "firefunction-v2"],
  ["google-gemma-2-2b-it.jinja", "generic"],
  ["microsoft-Phi-3.5-mini-instruct.jinja", "generic"],
];

/** what ends a turn in these templates: the turn's text stops there */
const END_OF_TURN = /<\|im_end\|>|<\|eot_id\|>|<\|eom_id\|>|<｜end▁of▁sentence｜>|<\|END_OF_TURN_TOKEN\|>|<\|end_of_text\|>|<\/s>/;

describe("llama.cpp's templates: calls rendered by the template read back as the same calls; the required-call grammar admits them", { skip: skipWithoutLlamaCppTemplates() }, () => {
  const tokenizer = openTokenizer(resolve(PROJECT_ROOT, "node_modules", "@lenml", "tokenizer-llama3", "models"));
  for (const [name, format] of TEMPLATES) {
    test(`${name}: ${format}`, () => {
      const source = llamaCppTemplate(name);
      assert.equal(toolFormatOf(source), format);
      if (format === "generic") return;
      const f = chatFormatterFor(tokenizer, { source, where: name });
      // (Hermes 2 Pro's template needs a description for every tool)
      const tools = toolsOf({ tools: [WEATHER, { ...TIME, function: { ...TIME.function, description: "the time in a zone" } }, WEB_SEARCH], tool_choice: "required" })!;
      const variables = templateVariablesOf(source, tools);
      const user: ChatMessage[] = [{ role: "user", content: "Weather in Oslo, and the time?" }];
      // Llama 3.x templates take one call a turn
      const single = format === "llama3";
      const sets = single
        ? [[["get_weather", { city: "Oslo", unit: "c" }]], [["brave_search", { query: "oslo weather" }]]]
        : [[["get_weather", { city: "Oslo", unit: "c" }], ["get_time", { zone: "CET" }]]];
      for (const calls of sets as [string, Record<string, string>][][]) {
        const history = [...user, { role: "assistant", content: "", tool_calls: calls.map(([n, a], i) => ({ id: `call0000${i}`, type: "function" as const, function: { name: n, arguments: a } })) }];
        const prompt = f.render(user, true, variables);
        const rendered = f.render(history, false, variables);
        // the assistant turn's text: after what it shares with the generation prompt (back to a marker's end), to the end of the turn
        let k = 0;
        while (k < prompt.length && prompt[k] === rendered[k]) k++;
        while (k > 0 && !">\n]".includes(rendered[k - 1]!)) k--;
        const turn = rendered.slice(k).split(END_OF_TURN)[0]!;
        const syntax = replySyntaxOf(source, tools, thinkingOf(source, ""), "deepseek")!;
        const read = readReply(turn, syntax);
        assert.deepEqual(read.calls.map((c) => [c.name, JSON.parse(c.arguments)]), calls, `${name}: ${JSON.stringify(turn)}`);
        assert.equal(read.content, "", JSON.stringify(turn));
        // fed back, the parsed calls render as the template wrote them
        const again = f.render([...user, { role: "assistant", content: "", tool_calls: read.calls.map((c, i) => ({ id: `call0000${i}`, type: "function" as const, function: { name: c.name, arguments: JSON.parse(c.arguments) } })) }], false, variables);
        assert.equal(again, rendered);
        // the grammar of a required call (parallel: several) admits the turn, less any reasoning before it
        const close = syntax.thinking?.close;
        const callsOnly = (close && turn.includes(close) ? turn.slice(turn.indexOf(close) + close.length) : turn).trim();
        assert.ok(grammarAdmits(toolCallGrammar(tools, format, { templateSource: source }), callsOnly), `${name}: the grammar refuses ${JSON.stringify(callsOnly)}`);
        // under auto with a strict function among the tools the same calls are admitted (Llama 3.x and Functionary v3.2 too)
        const strictAuto = toolsOf({ tools: [STRICT_WEATHER, { ...TIME, function: { ...TIME.function, description: "the time in a zone" } }, WEB_SEARCH] })!;
        assert.ok(grammarAdmits(replyGrammar({}, strictAuto, source, undefined, "none")!.grammar, callsOnly), `${name}: the strict auto grammar refuses ${JSON.stringify(callsOnly)}`);
      }
    });
  }
});

test("tool-call ids come back to the template as OpenAI clients send them: Command R7B and Mistral render the history as jinja2 renders transformers' inputs", { skip: skipWithoutJinja2 || skipWithoutLlamaCppTemplates() }, () => {
  const tokenizer = openTokenizer(resolve(PROJECT_ROOT, "node_modules", "@lenml", "tokenizer-llama3", "models"));
  // two calls answered in the other order: only the ids say which result is whose
  const openai = [
    { role: "user", content: "Weather in Oslo, and the time?" },
    {
      role: "assistant", content: null, tool_calls: [
        { id: "a1B2c3D4e", type: "function", function: { name: "get_weather", arguments: '{"city": "Oslo", "unit": "c"}' } },
        { id: "Z9y8X7w6v", type: "function", function: { name: "get_time", arguments: '{"zone": "CET"}' } },
      ],
    },
    { role: "tool", tool_call_id: "Z9y8X7w6v", name: "get_time", content: "12:00" },
    { role: "tool", tool_call_id: "a1B2c3D4e", name: "get_weather", content: "-3 degrees" },
    { role: "assistant", content: "It is -3 degrees at noon." },
    { role: "user", content: "Thanks" },
  ];
  // transformers' inputs: the same messages, arguments as objects
  const transformers = openai.map((m) => (m.tool_calls ? { ...m, tool_calls: m.tool_calls.map((c) => ({ ...c, function: { ...c.function, arguments: JSON.parse(c.function.arguments) } })) } : m));
  const specials = { bos_token: "<|begin_of_text|>", eos_token: "<|end_of_text|>", unk_token: "", pad_token: "" };
  for (const name of ["CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "mistralai-Mistral-Nemo-Instruct-2407.jinja", "Mistral-Small-3.2-24B-Instruct-2506.jinja"]) {
    const source = llamaCppTemplate(name);
    const f = chatFormatterFor(tokenizer, { source, where: name });
    const tools = toolsOf({ tools: [WEATHER, { ...TIME, function: { ...TIME.function, description: "the time in a zone" } }] })!;
    const variables = templateVariablesOf(source, tools);
    const [want] = renderWithJinja2(source, [{ messages: transformers, add_generation_prompt: true, ...specials, ...variables }]);
    assert.ok(want && "out" in want, `${name}: jinja2 ${JSON.stringify(want)}`);
    for (const id of ["a1B2c3D4e", "Z9y8X7w6v"]) assert.ok(want.out.includes(id) || name.startsWith("Cohere"), `${name} writes the id ${id}`);
    assert.equal(f.render(messagesOf({ messages: openai }), true, variables), want.out, name);
  }
  // an id that is not a string is the message's 400
  assert.throws(() => messagesOf({ messages: [{ role: "assistant", content: null, tool_calls: [{ id: 7, type: "function", function: { name: "f", arguments: "{}" } }] }] }),
    /'messages\[0\]\.tool_calls\[0\]\.id' must be a string, got number/);
  assert.throws(() => messagesOf({ messages: [{ role: "tool", tool_call_id: ["x"], content: "r" }] }), /'messages\[0\]\.tool_call_id' must be a string, got an array/);
});

test("Qwen3.5's template (its prompt opens <think>) and Nemotron Nano 3's write Qwen3-Coder's XML calls, as llama.cpp finds them", { skip: skipWithoutLlamaCppTemplates() }, () => {
  for (const name of ["Qwen3.5-4B.jinja", "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja"]) assert.equal(toolFormatOf(llamaCppTemplate(name)), "qwen3-coder", name);
  assert.equal(toolFormatOf(llamaCppTemplate("Qwen-Qwen3-0.6B.jinja")), "hermes");
});

test("reasoning: a template whose prompt ends inside <think> begins its reply in reasoning; reasoning_format none or auto/deepseek, anything else a 400", { skip: skipWithoutLlamaCppTemplates() }, () => {
  const tokenizer = openTokenizer(resolve(PROJECT_ROOT, "node_modules", "@lenml", "tokenizer-llama3", "models"));
  const render = (name: string) => chatFormatterFor(tokenizer, { source: llamaCppTemplate(name), where: name }).render([{ role: "user", content: "hi" }], true);
  const r1 = llamaCppTemplate("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja");
  assert.deepEqual(thinkingOf(r1, render("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja")), { open: "<think>", close: "</think>", forcedOpen: true });
  const qwen3 = llamaCppTemplate("Qwen-Qwen3-0.6B.jinja");
  assert.deepEqual(thinkingOf(qwen3, render("Qwen-Qwen3-0.6B.jinja")), { open: "<think>", close: "</think>", forcedOpen: false });
  assert.equal(thinkingOf(llamaCppTemplate("meta-llama-Llama-3.1-8B-Instruct.jinja"), ""), undefined);
  assert.equal(reasoningFormatOf({}), "deepseek");
  assert.equal(reasoningFormatOf({ reasoning_format: "none" }), "none");
  // (llama-server takes "deepseek-legacy" too: common_reasoning_format_from_name)
  assert.equal(reasoningFormatOf({ reasoning_format: "deepseek-legacy" }), "deepseek");
  assert.throws(() => reasoningFormatOf({ reasoning_format: "raw" }), /'reasoning_format' must be "auto", "deepseek", "deepseek-legacy" or "none", got "raw"/);
  // none: the reply is all content, <think> and all
  assert.equal(replySyntaxOf(r1, undefined, thinkingOf(r1, "<think>\n"), "none"), undefined);
});

test("parameters with $defs and $ref: every format that writes calls as JSON objects enforces them, each $ref read in the parameters' own document", () => {
  const parameters = {
    type: "object", properties: { place: { $ref: "#/$defs/Place" } }, required: ["place"], additionalProperties: false,
    $defs: { Place: { type: "object", properties: { city: { enum: ["Oslo", "Rome"] } }, required: ["city"], additionalProperties: false } },
  };
  const args = (city: string) => `{"place": {"city": "${city}"}}`;
  /** a call of f (with TIME beside it) in each format's words */
  const calls: [ToolFormat, (a: string) => string][] = [
    ["hermes", (a) => `<tool_call>\n{"name": "f", "arguments": ${a}}\n</tool_call>`],
    ["mistral", (a) => `[TOOL_CALLS][{"name": "f", "arguments": ${a}, "id": "abcDEF123"}]`],
    ["firefunction-v2", (a) => ` functools[{"name": "f", "arguments": ${a}}]`],
    ["command-r7b", (a) => `<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": ${a}}]<|END_ACTION|>`],
    ["llama3", (a) => `{"name": "f", "parameters": ${a}}`],
    ["generic", (a) => `{"tool_call": {"name": "f", "arguments": ${a}}}`],
  ];
  for (const strict of [true, false]) {
    const tools = toolsOf({ tools: [{ type: "function", function: { name: "f", strict, parameters } }, TIME], tool_choice: "required", parallel_tool_calls: false })!;
    for (const [format, call] of calls) {
      const g = toolCallGrammar(tools, format);
      assert.ok(grammarAdmits(g, call(args("Oslo"))), `${format}: refuses ${call(args("Oslo"))}`);
      assert.ok(!grammarAdmits(g, call(args("Paris"))), `${format}: admits a city outside the $ref's enum`);
      assert.ok(!grammarAdmits(g, call('{"place": "Oslo"}')), `${format}: admits a place that is no object`);
    }
  }
  // the generic format's answer in a response_format whose schema has $defs of its own: the schema's fault no longer, nor the tools'
  const tools = toolsOf({ tools: [{ type: "function", function: { name: "f", parameters } }] })!;
  const plain = "{% for m in messages %}{{ m.content }}{% endfor %}";
  const shaped = replyGrammar({ jsonSchema: parameters }, tools, plain, undefined)!;
  assert.equal(shaped.param, "response_format.json_schema.schema");
  assert.ok(grammarAdmits(shaped.grammar, `{"response": ${args("Rome")}}`));
  assert.ok(grammarAdmits(shaped.grammar, `{"tool_call": {"name": "f", "arguments": ${args("Rome")}}}`) || grammarAdmits(shaped.grammar, `{"tool_calls": [{"name": "f", "arguments": ${args("Rome")}}]}`));
  assert.ok(!grammarAdmits(shaped.grammar, `{"response": ${args("Paris")}}`));
});

test("the generic format (a template without calls of its own): told how to answer in a system message; its grammar admits calls or an answer under auto, calls only under required", () => {
  const tools = toolsOf({ tools: [WEATHER, TIME] })!;
  const plain = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}";
  assert.equal(toolFormatOf(plain), "generic");
  const shown = messagesForTemplate([{ role: "system", content: "Be brief." }, { role: "user", content: "Weather?" }], plain, tools);
  assert.equal(shown.length, 2);
  assert.match(shown[0]!.content as string, /^Be brief\.\n\n.*"tool_calls".*"response"/);
  assert.equal(messagesForTemplate([{ role: "user", content: "x" }], plain, tools)[0]!.role, "system");
  const admits = grammarAdmits;
  const call = '{"tool_calls": [{"name": "get_time", "arguments": {"zone": "CET"}}]}';
  const answer = '{"response": "It is sunny."}';
  assert.ok(admits(toolCallGrammar(tools, "generic"), call));
  assert.ok(admits(toolCallGrammar(tools, "generic"), answer));
  const required = toolsOf({ tools: [WEATHER, TIME], tool_choice: "required" })!;
  assert.ok(admits(toolCallGrammar(required, "generic"), call));
  assert.ok(!admits(toolCallGrammar(required, "generic"), answer));
  // with a response_format's schema the answer follows it
  assert.ok(admits(toolCallGrammar(tools, "generic", { response: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } }), '{"response": {"n": 3}}'));
  assert.ok(!admits(toolCallGrammar(tools, "generic", { response: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } }), answer));
  // after forced-open reasoning a required call closes it first
  assert.ok(admits(toolCallGrammar(required, "generic", { thinking: { ...THINK, forcedOpen: true } }), `</think>\n\n${call}`));
});

test("function.strict: a strict function's parameters must keep OpenAI's strict rules (400 naming the field and schema path); a strict that is no boolean is a 400", () => {
  const refused = (parameters: object, re: RegExp) => {
    const tool = { type: "function", function: { name: "f", strict: true, parameters } };
    assert.throws(() => toolsOf({ tools: [TIME, tool] }), (e: ApiError) => /^tools\[1\]\.function\.parameters(\.|$)/.test(e.param ?? "") && e.code === "invalid_function_parameters" && re.test(e.message), JSON.stringify(parameters));
  };
  const closed = { type: "object", properties: { a: { type: "string" } }, required: ["a"], additionalProperties: false };
  refused({ ...closed, additionalProperties: undefined }, /Invalid schema for function 'f' .*#: 'additionalProperties' is required to be supplied and to be false/);
  refused({ ...closed, required: [] }, /#: 'required' is required to be supplied and to be an array including every key in properties; missing "a"/);
  refused({ ...closed, properties: { a: { type: "object", properties: { b: { type: "integer" } }, required: ["b"] } } }, /#\/properties\/a: 'additionalProperties' is required/);
  refused({ ...closed, properties: { a: { type: "array", items: { type: "object", properties: { b: {} }, additionalProperties: false } } } }, /#\/properties\/a\/items: 'required' .* missing "b"/);
  refused({ ...closed, properties: { a: { oneOf: [{ type: "string" }, { type: "null" }] } } }, /#\/properties\/a\/oneOf: oneOf is not supported with strict: true/);
  refused({ type: "string" }, /#\/type: the root must be an object schema \(type "object"\), got "string"/);
  // OpenAI's "Supported schemas": composition keywords unsupported, and its size limits (test/server-json-schema.test.ts has each)
  refused({ ...closed, properties: { a: { type: "string", allOf: [{ maxLength: 3 }] } } }, /#\/properties\/a\/allOf: 'allOf' is not supported with strict: true/);
  refused({ ...closed, properties: { a: { type: "string", enum: Array.from({ length: 1001 }, (_, i) => String(i)) } } }, /#: total number of enum values \(1001\) exceeds limit of 1000/);
  // (contains: a keyword OpenAI's strict mode supports for no model, refused as such before the grammar is tried)
  refused({ ...closed, properties: { a: { type: "array", items: { enum: [1, 2] }, contains: { const: 1 } } } }, /#\/properties\/a\/contains: 'contains' is not supported with strict: true/);
  // the same schemas without strict are taken as before (their arguments are not enforced under "auto")
  assert.ok(toolsOf({ tools: [{ type: "function", function: { name: "f", parameters: { ...closed, required: [] } } }] }));
  assert.ok(toolsOf({ tools: [{ type: "function", function: { name: "f", strict: false, parameters: { ...closed, required: [] } } }] }));
  assert.ok(toolsOf({ tools: [{ type: "function", function: { name: "f", strict: null, parameters: { type: "string" } } }] }));
  assert.equal(toolsOf({ tools: [STRICT_WEATHER] })!.functions[0]!.strict, true);
  assert.throws(() => toolsOf({ tools: [{ ...TIME, function: { ...TIME.function, strict: "yes" } }] }), (e: ApiError) => e.param === "tools[0].function.strict" && /must be a boolean, got "yes"/.test(e.message));
});

test("function.strict under tool_choice auto: text, or text then calls whose arguments match the strict function's parameters (ajv judges each); without strict no grammar", () => {
  const tools = toolsOf({ tools: [STRICT_WEATHER, TIME] })!;
  assert.equal(replyGrammar({}, toolsOf({ tools: [WEATHER, TIME] })!, HERMES, undefined), undefined);
  const shaped = replyGrammar({}, tools, HERMES, undefined)!;
  assert.equal(shaped.param, "tools");
  const m = new GrammarMatcher(parseGbnf(shaped.grammar));
  const syntax = replySyntaxOf(HERMES, tools, undefined, "deepseek")!;
  const validate = new Ajv().compile(STRICT_WEATHER.function.parameters);
  // arguments in the schema's key order (the grammar writes properties in that order), valid and not
  const argumentSets = [
    { city: "Oslo", unit: "c" }, { city: "", unit: "f" }, { city: "Oslo" }, { city: "Oslo", unit: "k" }, { city: 3, unit: "c" }, { city: "Oslo", unit: "c", wind: 1 },
    { city: "Ouagadougou-Bobo", unit: "c" }, { city: null, unit: "c" }, {}, { city: "a\"b", unit: "f" },
  ];
  for (const before of ["", "Let me look that up. "]) {
    for (const args of argumentSets) {
      const reply = `${before}<tool_call>\n${JSON.stringify({ name: "get_weather", arguments: args })}\n</tool_call>`;
      // the reply reads as that call, and the grammar admits it exactly when ajv validates its arguments
      assert.deepEqual(readReply(reply, syntax).calls.map((c) => JSON.parse(c.arguments)), [args]);
      assert.equal(grammarAdmits(m, reply), validate(args), reply);
    }
  }
  // text alone; a non-strict function's call keeps its schema; a marker that opens no valid call is refused
  assert.ok(grammarAdmits(m, "It is sunny in Oslo."));
  assert.ok(grammarAdmits(m, ""));
  assert.ok(grammarAdmits(m, 'ok <tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n</tool_call>'));
  assert.ok(!grammarAdmits(m, "I wrote <tool_call> in my text."));
  assert.ok(!grammarAdmits(m, 'x <function=get_weather>{"city": 3}</function>'));
  // every format whose calls open with a marker: text is free but for the markers, each of which must open a valid call
  const sources: Record<string, string> = {
    hermes: "<tool_call>", "qwen3-coder": "<tool_call><function=<parameter=", mistral: "[TOOL_CALLS]", "mistral-args": "[TOOL_CALLS][ARGS]", "firefunction-v2": " functools[",
    "command-r7b": "<|END_THINKING|><|START_ACTION|>", "deepseek-r1": "<｜tool▁calls▁begin｜>", "functionary-v3.1": "<|start_header_id|><function=",
  };
  for (const [format, source] of Object.entries(sources)) {
    assert.equal(toolFormatOf(source), format);
    const g = new GrammarMatcher(parseGbnf(replyGrammar({}, tools, source, undefined)!.grammar));
    assert.ok(grammarAdmits(g, "Sunny, [mostly] <b>warm</b> | 20-25°C ^_^ \\ {ok}"), format);
    for (const marker of CALL_MARKERS[format as ToolFormat]!) assert.ok(!grammarAdmits(g, `a ${marker} b`), `${format} ${marker}`);
  }
  // required, a response_format and the generic format shape calls already: as before
  assert.equal(replyGrammar({}, toolsOf({ tools: [STRICT_WEATHER, TIME], tool_choice: "required" })!, HERMES, undefined)!.param, "tool_choice");
});

test("function.strict under tool_choice auto on Llama 3.x and Functionary v3.2, whose calls have no marker: calls where llama.cpp's parser reads them (ajv judges their arguments), or text that reads as none", () => {
  const tools = toolsOf({ tools: [STRICT_WEATHER, TIME, WEB_SEARCH] })!;
  const validate = new Ajv().compile(STRICT_WEATHER.function.parameters);
  const argumentSets = [{ city: "Oslo", unit: "c" }, { city: "", unit: "f" }, { city: "Oslo" }, { city: "Oslo", unit: "k" }, { city: 3, unit: "c" }, { city: "Oslo", unit: "c", wind: 1 }, { city: "Ouagadougou-Bobo", unit: "c" }, {}];
  /** every text the grammar admits reads as text alone, or as calls whose strict arguments validate */
  const sound = (g: string, syntax: ReplySyntax, text: string) => {
    if (!grammarAdmits(g, text)) return;
    const calls = readReply(text, syntax).calls;
    for (const c of calls) if (c.name === "get_weather") assert.ok(validate(JSON.parse(c.arguments)), `${JSON.stringify(text)} admitted, its arguments invalid`);
  };
  // Llama 3.x (the calls llama.cpp's lazy grammar triggers on: a reply opening with {"name": ...}; built-in tools' <|python_tag|>name.call(...))
  for (const source of ["<|start_header_id|>ipython<|end_header_id|>", "<|start_header_id|>ipython<|end_header_id|><|python_tag|>"]) {
    assert.equal(toolFormatOf(source), "llama3");
    const shaped = replyGrammar({}, tools, source, undefined)!;
    assert.equal(shaped.param, "tools");
    const g = shaped.grammar, syntax = replySyntaxOf(source, tools, undefined, "deepseek")!;
    for (const args of argumentSets) {
      const reply = JSON.stringify({ name: "get_weather", parameters: args });
      assert.deepEqual(readReply(reply, syntax).calls.map((c) => JSON.parse(c.arguments)), [args]);
      assert.equal(grammarAdmits(g, reply), validate(args), reply);
      // where the parser reads a call, the grammar holds its arguments: with whitespace before it, too
      assert.ok(!grammarAdmits(g, ` \n${JSON.stringify({ name: "get_weather", parameters: { city: 3, unit: "c" } })}`));
    }
    for (const text of ["It is sunny in Oslo.", "", "  \n It is {sunny}", "brave_search is down", "<b>hot</b>", "[1, 2]", "a <|pyth <| b"]) assert.ok(grammarAdmits(g, text), `${source}: ${JSON.stringify(text)}`);
    // a reply that opens a call as llama.cpp's trigger reads it is a call: text may not
    for (const text of [' {"name": "get_weather"} is what I would call', '{"type": "function", "name": "x"}']) assert.ok(!grammarAdmits(g, text), JSON.stringify(text));
    const builtin = source.includes("<|python_tag|>");
    // a built-in tool's call without its tag: a call where the template has built-in tools (not one the grammar writes), else text
    assert.equal(grammarAdmits(g, 'brave_search.call(query="oslo")'), !builtin);
    assert.equal(grammarAdmits(g, '<|python_tag|>brave_search.call(query="oslo")'), builtin);
    // <|python_tag|> in text: text without built-in tools (llama.cpp's LLAMA_3_X format reads no tag), else it opens a built-in call
    assert.equal(grammarAdmits(g, "Sunny <|python_tag|> {x}"), !builtin);
    for (const text of ['brave_search.call(query=3)', '<|python_tag|>{"name": "get_weather", "parameters": {"city": 3, "unit": "c"}}', '<|python_tag|>get_weather.call(city=3)', "It is sunny.", "{}", 'web.call(x=1)']) sound(g, syntax, text);
  }
  // Functionary v3.2 (its prompt ends with ">>>"): calls at once, or "all\n" text then ">>>" calls, as llama.cpp's parser reads it
  const v32 = "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n>>>' }}{{ '>>>all\n' + message['content'] }}";
  assert.equal(toolFormatOf(v32), "functionary-v3.2");
  const g = replyGrammar({}, tools, v32, undefined)!.grammar, syntax = replySyntaxOf(v32, tools, undefined, "deepseek")!;
  for (const args of argumentSets) {
    for (const reply of [`get_weather\n${JSON.stringify(args)}`, `all\nLet me look. >>>get_weather\n${JSON.stringify(args)}`, `get_time\n{"zone": "CET"}>>>get_weather\n${JSON.stringify(args)}`]) {
      assert.deepEqual(readReply(reply, syntax).calls.filter((c) => c.name === "get_weather").map((c) => JSON.parse(c.arguments)), [args], reply);
      assert.equal(grammarAdmits(g, reply), validate(args), reply);
    }
  }
  for (const text of ["all\nIt is sunny in Oslo.", "all\n", "all\n{x} >> y > z"]) assert.ok(grammarAdmits(g, text), JSON.stringify(text));
  // text not opened by "all\n" (what the model is taught), a ">>>" that opens no call, and text whose last ">" would be read with the ">>>" after it
  for (const text of ["It is sunny.", "all\nx >>> y", 'all\nx>>>>get_weather\n{"city": "Oslo", "unit": "c"}']) assert.ok(!grammarAdmits(g, text), JSON.stringify(text));
  for (const text of ["all\nx>>>get_weather\n{}", "python\nprint(1)", "all\n>>>all\nhi"]) sound(g, syntax, text);
});

test("Llama 3.1 with a strict built-in tool under tool_choice auto: its call after text is held to its schema (ajv judges), as llama.cpp's word trigger <|python_tag|> holds it anywhere", () => {
  const search = { type: "function", function: { name: "brave_search", strict: true, parameters: { type: "object", properties: { query: { type: "string", pattern: "^.{0,8}$" } }, required: ["query"], additionalProperties: false } } } as const;
  const source = "<|start_header_id|>ipython<|end_header_id|><|python_tag|>";
  const validate = new Ajv().compile(search.function.parameters);
  for (const parallel of [true, false]) {
    const tools = toolsOf({ tools: [search, TIME], parallel_tool_calls: parallel })!;
    const m = new GrammarMatcher(parseGbnf(replyGrammar({}, tools, source, undefined)!.grammar));
    const syntax = replySyntaxOf(source, tools, undefined, "deepseek")!;
    for (const before of ["", "Let me search.\n", "Sure {x} ", "<|pyth", "{", "a <| b "]) {
      for (const query of ["oslo", "", "weather in oslo", 'a"b', "12345678", "123456789"]) {
        const reply = `${before}<|python_tag|>brave_search.call(query=${JSON.stringify(query)})`;
        // the reply reads as that call after its text, and the grammar admits it exactly when ajv validates its arguments
        const read = readReply(reply, syntax);
        assert.deepEqual([read.content, read.calls.map((c) => JSON.parse(c.arguments))], [before.trim(), [{ query }]], reply);
        assert.equal(grammarAdmits(m, reply), validate({ query }), reply);
      }
    }
    // the tag in text opens a call: text that goes on otherwise, or a JSON call after it (read as text), is refused; nothing follows a call but (parallel) another
    for (const text of ["Sunny <|python_tag|> {x}", "Hi <|python_tag|>", "<|<|python_tag|>x", 'I look. <|python_tag|>{"name": "get_time", "parameters": {"zone": "CET"}}', 'a <|python_tag|>brave_search.call(query="x") then text']) {
      assert.ok(!grammarAdmits(m, text), JSON.stringify(text));
    }
    const two = 'a <|python_tag|>brave_search.call(query="x")<|python_tag|>brave_search.call(query="y")';
    if (parallel) assert.deepEqual(readReply(two, syntax).calls.map((c) => JSON.parse(c.arguments)), [{ query: "x" }, { query: "y" }]);
    assert.equal(grammarAdmits(m, two), parallel);
    for (const text of ["It is sunny.", "a <|pyth <| b", "<b>|</b>", ""]) assert.ok(grammarAdmits(m, text), JSON.stringify(text));
  }
});

/**
 * llama.cpp's Llama 3.x lazy grammar trigger (common/chat.cpp: a reply matching
 * `\{\s*(?:"type"\s*:\s*"function"\s*,\s*)?"name"\s*:\s*"` from its start; its parser's function_regex
 * takes leading whitespace too): the judge of which replies open a call
 */
const LLAMA_CPP_LLAMA3_TRIGGER = /^\s*\{\s*(?:"type"\s*:\s*"function"\s*,\s*)?"name"\s*:\s*"/;

test("Llama 3.x under strict tool_choice auto: a reply opening with { is text unless it opens a call as llama.cpp's trigger reads it; one that does is a call whose arguments ajv validates", () => {
  const tools = toolsOf({ tools: [STRICT_WEATHER, TIME] })!;
  const source = "<|start_header_id|>ipython<|end_header_id|>";
  const g = replyGrammar({}, tools, source, undefined)!.grammar, syntax = replySyntaxOf(source, tools, undefined, "deepseek")!;
  const validate = new Ajv().compile(STRICT_WEATHER.function.parameters);
  // text: admitted, and read as text alone, whole or streamed a character at a time (llama.cpp: content; a
  // call object's keys in another order than its trigger's, too, whose arguments the grammar does not hold)
  const texts = ["{not a call}", '{"a": 1}', "{}", "{{{{", '{"parameters": {"city": 3, "unit": "c"}, "name": "get_weather"}', '{"id": "1", "name": "get_weather", "parameters": {}}', ' \n{"names": 1}', '{"name" is a key}', '{"name": 3}', '{"type": "object"}', '{ "type": "function" }', '{"type": "function", "names": "x"}'];
  for (const text of texts) {
    assert.ok(!LLAMA_CPP_LLAMA3_TRIGGER.test(text), `judge: ${JSON.stringify(text)} opens a call`);
    assert.ok(grammarAdmits(g, text), `refused: ${JSON.stringify(text)}`);
    const read = readReply(text, syntax);
    assert.deepEqual([read.content, read.calls.length], [text, 0], JSON.stringify(text));
    const deltas = streamed(text, syntax, [...Array(text.length).keys()].slice(1));
    assert.deepEqual(accumulated(deltas), { reasoning: "", content: text, calls: [] }, `streamed ${JSON.stringify(text)}`);
  }
  // a reply that ends before it is known whether it opens a call: admitted, read as no call (llama.cpp's final parse drops a partial match)
  for (const text of ["{", '{"na', '{"type": "function", "na']) assert.deepEqual([grammarAdmits(g, text), readReply(text, syntax).calls.length], [true, 0], JSON.stringify(text));
  // a call's opening (llama.cpp's trigger fires, any name): only a whole call, whose arguments validate, is admitted
  const args = { city: "Oslo", unit: "c" }, bad = { city: "Oslo", unit: "k" };
  const openings = [
    [JSON.stringify({ name: "get_weather", parameters: args }), true],
    [JSON.stringify({ name: "get_weather", parameters: bad }), false],
    [` {"name": "get_weather", "parameters": ${JSON.stringify(bad)}}`, false],
    [`{ "type" : "function", "name":"get_weather", "parameters": ${JSON.stringify(bad)}}`, false],
    ['{"name": "nowhere", "parameters": {}}', false],
    ['{"name": "get_weather"} is what I would call', false],
    ['{\n  "name": "', false],
  ] as const;
  for (const [text, admitted] of openings) {
    assert.ok(LLAMA_CPP_LLAMA3_TRIGGER.test(text), `judge: ${JSON.stringify(text)} opens no call`);
    assert.equal(grammarAdmits(g, text), admitted, JSON.stringify(text));
    if (admitted) assert.ok(readReply(text, syntax).calls.every((c) => validate(JSON.parse(c.arguments))));
  }
  assert.deepEqual(readReply(openings[0][0], syntax).calls.map((c) => JSON.parse(c.arguments)), [args]);
});

for (const [name, opening] of [["meta-llama-Llama-3.1-8B-Instruct.jinja", "{"], ["meetkai-functionary-medium-v3.2.jinja", "g"]] as const) {
  describe(`function.strict under auto over HTTP with llama.cpp's ${name} on stories260K`, { skip: skip || skipWithoutLlamaCppTemplates() }, () => {
    let s: Awaited<ReturnType<typeof serveStories>>;
    // (Llama 3.1's system prompt with a tool is ~950 tokens: past the 512 serveStories gives)
    before(async () => { s = await serveStories({ contextSize: 1536, onWarning: () => {} }, { chatTemplate: { source: llamaCppTemplate(name), where: name } }); });
    after(() => s?.close());

    test("answered (no 400): text, or calls whose arguments ajv validates; pushed toward a call's first character, a call (Llama: or text that opens none)", async () => {
      const validate = new Ajv().compile(STRICT_WEATHER.function.parameters);
      // the tokens of the character a call opens with here ("{" of Llama's JSON, "g" of Functionary's get_weather)
      const first = Array.from({ length: s.model.info.vocabSize }, (_, i) => i).filter((i) => s.model.tokenizer.decode([i]) === opening);
      assert.ok(first.length > 0);
      for (const [bias, seed] of [[0, 1], [0, 2], [100, 1]] as const) {
        const r = await post(`${s.url}/v1/chat/completions`, {
          messages: [{ role: "user", content: "Weather in Paris?" }], tools: [STRICT_WEATHER], parallel_tool_calls: false, max_tokens: 200, temperature: 0.8, seed,
          logit_bias: Object.fromEntries(first.map((i) => [String(i), bias])),
        });
        assert.equal(r.status, 200, JSON.stringify(r.json));
        const choice = r.json.choices[0];
        // pushed toward Functionary's "g", a call; toward Llama's "{", a call or text that opens none as llama.cpp's trigger reads it
        if (bias > 0 && opening === "{" && choice.finish_reason !== "tool_calls") assert.ok(choice.message.content.startsWith("{") && !LLAMA_CPP_LLAMA3_TRIGGER.test(choice.message.content), JSON.stringify(choice));
        else if (bias > 0) assert.equal(choice.finish_reason, "tool_calls", JSON.stringify(choice));
        for (const call of choice.message.tool_calls ?? []) {
          assert.equal(call.function.name, "get_weather");
          if (choice.finish_reason === "tool_calls") assert.ok(validate(JSON.parse(call.function.arguments)), call.function.arguments);
        }
      }
    });
  });
}

/** HERMES with a generation prompt that opens the reasoning, as DeepSeek R1's and QwQ's do */
const THINKING = HERMES.replace('{% if add_generation_prompt %}assistant:{% endif %}', "{% if add_generation_prompt %}assistant:<think>\n{% endif %}");

describe("reasoning_content on stories260K with a template that opens <think>", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  let client: OpenAI;
  before(async () => {
    s = await serveStories({ contextSize: 1024, onWarning: () => {} }, { chatTemplate: THINKING });
    client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "none", maxRetries: 0 });
  });
  after(() => s?.close());

  test("a reply that never closes its reasoning is all reasoning_content, streamed or not; reasoning_format none leaves it in content", async () => {
    const request = { model: "stories260K", messages: [{ role: "user" as const, content: "Tell a story" }], max_tokens: 30, temperature: 0 };
    const raw = await post(`${s.url}/v1/completions`, { prompt: s.model.chatFormatter(THINKING).render([{ role: "user", content: "Tell a story" }], true), max_tokens: 30, temperature: 0 });
    const whole = await post(`${s.url}/v1/chat/completions`, request);
    assert.equal(whole.status, 200, JSON.stringify(whole.json));
    const m = whole.json.choices[0].message;
    assert.ok(m.reasoning_content.length > 10, JSON.stringify(m));
    assert.equal(m.content, "");
    // (the chat prompt is the rendered template's text: the same tokens, the same greedy reply)
    assert.equal(m.reasoning_content, raw.json.choices[0].text.trim());
    let reasoning = "", content = "";
    for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
      const d = chunk.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined;
      reasoning += d?.reasoning_content ?? "";
      content += d?.content ?? "";
    }
    assert.deepEqual([reasoning, content], [m.reasoning_content, ""]);
    const none = await post(`${s.url}/v1/chat/completions`, { ...request, reasoning_format: "none" });
    assert.equal(none.json.choices[0].message.reasoning_content, undefined);
    assert.equal(none.json.choices[0].message.content, raw.json.choices[0].text);
    const bad = await post(`${s.url}/v1/chat/completions`, { ...request, reasoning_format: 1 });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, "reasoning_format");
  });

  test("logprobs through the reasoning parser: the streamed chunks carry every token's entry, as the unstreamed answer lists them", async () => {
    const request = { model: "stories260K", messages: [{ role: "user" as const, content: "Tell a story" }], max_tokens: 20, temperature: 0, logprobs: true, top_logprobs: 2 };
    const whole = await post(`${s.url}/v1/chat/completions`, request);
    assert.equal(whole.status, 200, JSON.stringify(whole.json));
    const want = whole.json.choices[0].logprobs.content;
    assert.equal(want.length, 20);
    const streamed: unknown[] = [];
    for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    assert.deepEqual(streamed, want);
  });
});

test("Ministral / Magistral 3 reason between [THINK] and [/THINK]: reasoning_content, as llama.cpp's tests read its replies", { skip: skipWithoutLlamaCppTemplates() }, () => {
  const name = "mistralai-Ministral-3-14B-Reasoning-2512.jinja";
  const source = llamaCppTemplate(name);
  const tokenizer = openTokenizer(resolve(PROJECT_ROOT, "node_modules", "@lenml", "tokenizer-llama3", "models"));
  const prompt = chatFormatterFor(tokenizer, { source, where: name }).render([{ role: "user", content: "hi" }], true);
  const thinking = thinkingOf(source, prompt);
  assert.deepEqual(thinking, { open: "[THINK]", close: "[/THINK]", forcedOpen: false });
  const tools = toolsOf({ tools: [WEATHER, TIME] })!;
  const syntax = replySyntaxOf(source, tools, thinking, "deepseek")!;
  // (tests/test-chat.cpp, Ministral-3-14B-Reasoning-2512: message_assist_thoughts, and a call marker inside the reasoning)
  const read = (text: string) => {
    const r = readReply(text, syntax);
    return { reasoning: r.reasoning, content: r.content, calls: r.calls.map((c) => [c.name, JSON.parse(c.arguments)]) };
  };
  assert.deepEqual(read("[THINK]I'm\nthinking[/THINK]Hello, world!\nWhat's up?"), { reasoning: "I'm\nthinking", content: "Hello, world!\nWhat's up?", calls: [] });
  assert.deepEqual(read('[THINK]Let me think about [TOOL_CALLS]get_time[ARGS]{"zone":"UTC"} and more[/THINK][TOOL_CALLS]get_time[ARGS]{"zone": "CET"}'),
    { reasoning: 'Let me think about [TOOL_CALLS]get_time[ARGS]{"zone":"UTC"} and more', content: "", calls: [["get_time", { zone: "CET" }]] });
  // reasoning_format none: the markers stay in the text
  assert.equal(readReply("[THINK]I'm\nthinking[/THINK]Hello", replySyntaxOf(source, undefined, thinking, "none")).content, "[THINK]I'm\nthinking[/THINK]Hello");
});

test("the id a model writes with its call is the call's id, streamed or not (llama.cpp's message_assist_call_id); one its template would refuse is replaced", () => {
  const idsOf = (format: ToolFormat, text: string) => toolCallsOf(readReply(text, syntaxFor(format)), syntaxFor(format)).map((c) => c.id);
  const firstStreamedId = (format: ToolFormat, text: string) => {
    const d = streamed(text, syntaxFor(format), [...Array(text.length).keys()].slice(1)).find((x) => "call" in x) as { call: { id?: string } };
    return d.call.id;
  };
  // (tests/test-chat.cpp: Mistral Small 3.2's [CALL_ID], Mistral Nemo's "id", Command R7B's "tool_call_id")
  const small = '[TOOL_CALLS]get_time[CALL_ID]123456789[ARGS]{"zone": "UTC"}[TOOL_CALLS]get_weather[CALL_ID]000000002[ARGS]{"city": "Oslo", "unit": "c"}';
  assert.deepEqual(idsOf("mistral-args", small), ["123456789", "000000002"]);
  assert.equal(firstStreamedId("mistral-args", small), "123456789");
  assert.deepEqual(idsOf("mistral", '[TOOL_CALLS][{"name": "get_time", "arguments": {"zone": "UTC"}, "id": "123456789"}]'), ["123456789"]);
  const r7b = '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Oslo", "unit": "c"}}\n]<|END_ACTION|>';
  assert.deepEqual(idsOf("command-r7b", r7b), ["0"]);
  assert.equal(firstStreamedId("command-r7b", r7b), "0");
  // Mistral's templates take back only 9 letters and digits: another id is replaced by one of that form
  const [bad] = idsOf("mistral-args", '[TOOL_CALLS]get_time[CALL_ID]call_1[ARGS]{"zone": "UTC"}');
  assert.match(bad!, /^[a-zA-Z0-9]{9}$/);
  assert.notEqual(bad, "call_1");
  // an id written twice is the first call's: the second gets a new one, streamed or not (a client matches each result to its call by id)
  const twice = '[TOOL_CALLS]get_time[CALL_ID]123456789[ARGS]{"zone": "UTC"}[TOOL_CALLS]get_time[CALL_ID]123456789[ARGS]{"zone": "CET"}';
  const [one, two] = idsOf("mistral-args", twice);
  assert.equal(one, "123456789");
  assert.match(two!, /^[a-zA-Z0-9]{9}$/);
  assert.notEqual(two, one);
  const streamedIds = streamed(twice, syntaxFor("mistral-args"), [...Array(twice.length).keys()].slice(1)).flatMap((d) => ("call" in d && d.call.id ? [d.call.id] : []));
  assert.equal(new Set(streamedIds).size, 2);
  // no id written: a new one in OpenAI's form
  assert.match(idsOf("hermes", '<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>')[0]!, /^call_[0-9a-f]{24}$/);
});

test("Qwen3-Coder's required-call grammar admits what the parser reads: required parameters in any order, optional ones among them, string values holding '</' (llama.cpp's tests' calls)", () => {
  // (tests/test-chat.cpp's edit_tool and tool_2req_5opt, their replies and the arguments llama.cpp reads from them)
  const edit = { type: "function", function: { name: "edit", parameters: { type: "object", properties: { filename: { type: "string" }, oldString: { type: "string" }, newString: { type: "string" } }, required: ["filename", "oldString", "newString"] } } };
  const opt = (t: string) => ({ type: t });
  const five = {
    type: "function", function: {
      name: "tool_2req_5opt",
      parameters: { type: "object", properties: { req1: opt("string"), req2: opt("integer"), opt1: opt("string"), opt2: opt("integer"), opt3: opt("string"), opt4: opt("integer"), opt5: opt("string") }, required: ["req1", "req2"] },
    },
  };
  const tools = toolsOf({ tools: [edit, five, { type: "function", function: { name: "python", parameters: { type: "object", properties: { code: { type: "string" } }, required: ["code"] } } }], tool_choice: "required" })!;
  const grammar = new GrammarMatcher(parseGbnf(toolCallGrammar(tools, "qwen3-coder")));
  const admits = (text: string) => grammarAdmits(grammar, text);
  const syntax = replySyntaxOf("<tool_call><function=<parameter=", tools, undefined, "deepseek")!;
  const call = (name: string, params: [string, string][]) => `<tool_call>\n<function=${name}>\n${params.map(([p, v]) => `<parameter=${p}>\n${v}\n</parameter>\n`).join("")}</function>\n</tool_call>`;
  const cases: [string, string][] = [
    [call("edit", [["newString", "#include"], ["filename", "foo.c"], ["oldString", "#iclunde"]]), '{"newString": "#include", "filename": "foo.c", "oldString": "#iclunde"}'],
    [call("tool_2req_5opt", [["req2", "42"], ["req1", "hello"], ["opt2", "200"]]), '{"req2": 42, "req1": "hello", "opt2": 200}'],
    [call("tool_2req_5opt", [["req1", "test"], ["req2", "99"], ["opt3", "c"], ["opt1", "a"], ["opt5", "e"], ["opt4", "4"], ["opt2", "2"]]), '{"req1": "test", "req2": 99, "opt3": "c", "opt1": "a", "opt5": "e", "opt4": 4, "opt2": 2}'],
    // an optional parameter before the required ones, and code holding "</" and "<"
    [call("tool_2req_5opt", [["opt1", "a"], ["req2", "1"], ["opt4", "4"], ["req1", "x"]]), '{"opt1": "a", "req2": 1, "opt4": 4, "req1": "x"}'],
    [call("python", [["code", 'if a < b:\n    print("</p></parameter")']]), `{"code": ${JSON.stringify('if a < b:\n    print("</p></parameter")')}}`],
  ];
  for (const [text, args] of cases) {
    assert.ok(admits(text), `the grammar refuses ${JSON.stringify(text)}`);
    const read = readReply(text, syntax);
    assert.deepEqual(read.calls.map((c) => [c.name, c.arguments]), [[/<function=(\w+)>/.exec(text)![1], args]], text);
  }
  // still refused: a required parameter missing, one named twice in its place, a string value holding its closing tag
  assert.ok(!admits(call("edit", [["newString", "a"], ["filename", "b"]])));
  assert.ok(!admits(call("tool_2req_5opt", [["req1", "a"], ["req1", "b"]])));
  assert.ok(!admits(call("python", [["code", "x</parameter>y"]])));
});

test("a stream's pieces are well-formed text: a surrogate pair cut between two pieces waits for its second half (a lone surrogate is refused by JSON clients outside JavaScript)", () => {
  const lone = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
  for (const r of REPLIES.filter((x) => /[\uD800-\uDFFF]/.test(x.text))) {
    for (let end = 0; end <= r.text.length; end++) {
      const text = r.text.slice(0, end);
      // (a reply cut inside a pair ends in half of it: only what the end of the reply sends may)
      for (const d of streamed(text, syntaxFor(r.format, r.thinking), [...Array(text.length).keys()].slice(1)).slice(0, -1)) {
        const piece = "content" in d ? d.content : "reasoning_content" in d ? d.reasoning_content : d.call.function.arguments;
        assert.ok(!lone.test(piece), `${r.format} ${JSON.stringify(text)}: ${JSON.stringify(d)}`);
      }
    }
  }
});

test("Qwen3.5's reasoning ends at </think> or where a call begins, as llama.cpp's qwen3_coder format reads it; other templates' only at their close", { skip: skipWithoutLlamaCppTemplates() }, () => {
  const tokenizer = openTokenizer(resolve(PROJECT_ROOT, "node_modules", "@lenml", "tokenizer-llama3", "models"));
  const name = "Qwen3.5-4B.jinja";
  const source = llamaCppTemplate(name);
  const thinking = thinkingOf(source, chatFormatterFor(tokenizer, { source, where: name }).render([{ role: "user", content: "hi" }], true));
  assert.deepEqual(thinking, { open: "<think>", close: "</think>", forcedOpen: true, endsBefore: ["<tool_call>"] });
  const syntax = replySyntaxOf(source, toolsOf({ tools: [TIME] }), thinking, "deepseek")!;
  const r = readReply("I'm\nthinking\n<tool_call>\n<function=get_time>\n<parameter=zone>\nUTC\n</parameter>\n</function>\n</tool_call>", syntax);
  assert.deepEqual([r.reasoning, r.content, r.calls.map((c) => [c.name, JSON.parse(c.arguments)])], ["I'm\nthinking", "", [["get_time", { zone: "UTC" }]]]);
  assert.equal(thinkingOf(llamaCppTemplate("Qwen-Qwen3-0.6B.jinja"), "")?.endsBefore, undefined);
});

test("Qwen3-Coder: a parameter a string may satisfy (a nullable string, a date) is raw text, read and constrained as such (llama.cpp's resolves_to_string)", () => {
  // (tests/test-chat.cpp: nullable_string_tool, nullable_string_null_first_tool, nullable_int_tool)
  const fn = (name: string, param: string, schema: object) => ({ type: "function", function: { name, parameters: { type: "object", properties: { [param]: schema }, required: [param] } } });
  const tools = toolsOf({
    tools: [fn("set_nullable_str", "name", { type: ["string", "null"] }), fn("set_nullable_str_nf", "name", { type: ["null", "string"] }), fn("set_nullable_int", "count", { type: ["integer", "null"] }), fn("set_day", "day", { format: "date" })],
    tool_choice: "required",
  })!;
  const grammar = new GrammarMatcher(parseGbnf(toolCallGrammar(tools, "qwen3-coder")));
  const admits = (text: string) => grammarAdmits(grammar, text);
  const syntax = replySyntaxOf("<tool_call><function=<parameter=", tools, undefined, "deepseek")!;
  const call = (name: string, param: string, value: string) => `<tool_call>\n<function=${name}>\n<parameter=${param}>\n${value}\n</parameter>\n</function>\n</tool_call>`;
  for (const [name, param, value, args] of [
    ["set_nullable_str", "name", "hello world", '{"name": "hello world"}'],
    ["set_nullable_str_nf", "name", "hello world", '{"name": "hello world"}'],
    ["set_nullable_int", "count", "42", '{"count": 42}'],
    ["set_day", "day", "2025-12-03", '{"day": "2025-12-03"}'],
    // a string that reads as a number stays a string where a string may be meant
    ["set_nullable_str", "name", "42", '{"name": "42"}'],
  ] as const) {
    const text = call(name, param, value);
    assert.ok(admits(text), `the grammar refuses ${JSON.stringify(text)}`);
    assert.deepEqual(readReply(text, syntax).calls.map((c) => [c.name, c.arguments]), [[name, args]], text);
  }
  assert.ok(!admits(call("set_nullable_int", "count", "many")));
});

test("a required call's grammar admits reasoning before the calls, as llama.cpp's do: between its markers at the start, or up to its close after a prompt that opened it", { skip: skipWithoutLlamaCppTemplates() }, () => {
  const admits = grammarAdmits;
  const tools = toolsOf({ tools: [WEATHER, TIME], tool_choice: "required" })!;
  const ministral = llamaCppTemplate("mistralai-Ministral-3-14B-Reasoning-2512.jinja");
  const g = toolCallGrammar(tools, "mistral-args", { thinking: thinkingOf(ministral, ""), templateSource: ministral });
  const call = '[TOOL_CALLS]get_time[ARGS]{"zone": "UTC"}';
  assert.ok(admits(g, call));
  assert.ok(admits(g, `[THINK]The time, in UTC [ARGS] <think>.[/THINK]${call}`));
  assert.ok(!admits(g, "[THINK]Just chat.[/THINK]Hello"));
  assert.ok(!admits(g, `[THINK]a[/THINK]b[/THINK]${call}`));
  // a prompt that opened the reasoning (DeepSeek R1's): reasoning text, its close, the calls
  const generic = `{"tool_calls": [{"name": "get_time", "arguments": {"zone": "CET"}}]}`;
  const forced = toolCallGrammar(tools, "generic", { thinking: { ...THINK, forcedOpen: true } });
  assert.ok(admits(forced, `I need the time.\n</think>\n\n${generic}`));
  assert.ok(admits(forced, `</think>${generic}`));
  assert.ok(!admits(forced, generic));
  // Qwen3.5's reasoning ends at a <tool_call> too: the grammar keeps one out of the reasoning, as the parser would end it there
  const qwen35 = toolCallGrammar(tools, "qwen3-coder", { thinking: { ...THINK, forcedOpen: true, endsBefore: ["<tool_call>"] } });
  const xml = "<tool_call>\n<function=get_time>\n<parameter=zone>\nUTC\n</parameter>\n</function>\n</tool_call>";
  assert.ok(admits(qwen35, `I need <tool_ca the time </think \n</think>\n\n${xml}`));
  assert.ok(!admits(qwen35, `I write <tool_call> here\n</think>\n\n${xml}`));
});

test("a template that refuses the request's messages (Mistral's raise_exception on a call id not of 9 characters) is a 400 naming messages, as vLLM answers it, not a 500 the client retries", { skip: skip || skipWithoutLlamaCppTemplates() }, async () => {
  const name = "mistralai-Mistral-Nemo-Instruct-2407.jinja";
  const source = llamaCppTemplate(name);
  const s = await serveStories({ contextSize: 1024, onWarning: () => {} }, { chatTemplate: { source, where: name } });
  try {
    let requests = 0;
    const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "none", fetch: async (url, init) => { requests++; return fetch(url, init); } });
    const id = "call_4cd0f99affa843d6aa54e261";
    await assert.rejects(client.chat.completions.create({
      model: "stories260K", tools: [WEATHER], max_tokens: 2, messages: [
        { role: "user", content: "Weather in Oslo?" },
        { role: "assistant", content: null, tool_calls: [{ id, type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo","unit":"c"}' } }] },
        { role: "tool", tool_call_id: id, content: "-3" },
      ],
    }), (e: { status: number; param: string; message: string }) => e.status === 400 && e.param === "messages" && /Tool call IDs should be alphanumeric strings with length 9/.test(e.message));
    assert.equal(requests, 1, "a 400 is not sent again");
  } finally {
    await s.close();
  }
});

test("tool_choice none still shows the tools to the template, as llama.cpp renders a request's tools whatever its tool_choice (Qwen3's template, judged by jinja2); no call is read", { skip: skip || skipWithoutJinja2 }, async () => {
  const source = (JSON.parse(readFileSync(resolve(PROJECT_ROOT, "node_modules", "@lenml", "tokenizer-qwen3", "models", "tokenizer_config.json"), "utf8")) as { chat_template: string }).chat_template;
  // Qwen3's tool preamble is long in this 512-token vocabulary
  const s = await serveStories({ contextSize: 2048, onWarning: () => {} }, { chatTemplate: { source, where: "Qwen3's tokenizer_config.json" } });
  try {
    const messages = [{ role: "user", content: "Weather in Oslo?" }];
    const [withTools, without] = renderWithJinja2(source, [
      { messages, tools: [WEATHER], add_generation_prompt: true, enable_thinking: true },
      { messages, add_generation_prompt: true, enable_thinking: true },
    ]) as { out: string }[];
    assert.match(withTools!.out, /<tools>\n\{"type": "function", "function": \{"name": "get_weather"/);
    const tokens = (text: string) => s.model.tokenizer.encode(text, { addSpecialTokens: true }).length;
    assert.notEqual(tokens(withTools!.out), tokens(without!.out));
    const ask = async (extra: Record<string, unknown>) => {
      const r = await post(`${s.url}/v1/chat/completions`, { messages, max_tokens: 4, temperature: 0, ...extra });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      return r.json;
    };
    const none = await ask({ tools: [WEATHER], tool_choice: "none" });
    assert.equal(none.usage.prompt_tokens, tokens(withTools!.out), "the prompt holds the tools");
    assert.equal(none.choices[0].message.tool_calls, undefined);
    assert.equal((await ask({ tools: [WEATHER], tool_choice: "auto" })).usage.prompt_tokens, tokens(withTools!.out));
    assert.equal((await ask({})).usage.prompt_tokens, tokens(without!.out));
  } finally {
    await s.close();
  }
});

test("parallel_tool_calls left out: a template that cannot write two calls in a turn (Llama 3.1's) gets one, as llama-server defaults it to the template's supports_parallel_tool_calls; the turn goes back through the template", { skip: skip || skipWithoutLlamaCppTemplates() }, async () => {
  const name = "meta-llama-Llama-3.1-8B-Instruct.jinja";
  // Llama 3.1's tool preamble is long in this 512-token vocabulary
  const s = await serveStories({ contextSize: 2048, onWarning: () => {} }, { chatTemplate: { source: llamaCppTemplate(name), where: name } });
  try {
    // ";" pushed up: the model goes on to a second call where the grammar lets it
    const semicolon = (await post(`${s.url}/tokenize`, { content: ";", add_special: false, with_pieces: true })).json.tokens.find((t: { piece: string }) => t.piece === ";").id as number;
    const ask = async (extra: Record<string, unknown>) => {
      const r = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "Time?" }], tools: [TIME], tool_choice: "required", max_tokens: 120, temperature: 0, logit_bias: { [semicolon]: 30 }, ...extra });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      return r.json.choices[0] as { finish_reason: string; message: { content: string | null; tool_calls: { id: string; function: { name: string; arguments: string } }[] } };
    };
    const one = await ask({});
    assert.equal(one.message.tool_calls.length, 1, JSON.stringify(one.message));
    assert.equal(one.finish_reason, "tool_calls");
    const back = await post(`${s.url}/v1/chat/completions`, {
      messages: [{ role: "user", content: "Time?" }, { role: "assistant", content: null, tool_calls: one.message.tool_calls }, { role: "tool", tool_call_id: one.message.tool_calls[0]!.id, content: "noon" }],
      tools: [TIME], max_tokens: 2,
    });
    assert.equal(back.status, 200, JSON.stringify(back.json));
    // asked for, several calls are still admitted (as llama-server honours the request's own parallel_tool_calls);
    // max_tokens cuts the last one off: one cut before its name is dropped, not answered as text
    const several = await ask({ parallel_tool_calls: true });
    assert.ok(several.message.tool_calls.length > 1);
    assert.equal(several.finish_reason, "length");
    assert.equal(several.message.content, null, JSON.stringify(several.message));
  } finally {
    await s.close();
  }
});

test("whether a template writes two calls in a turn is found as llama.cpp's caps probe finds it, judged by jinja2 rendering the same history", { skip: skipWithoutJinja2 || skipWithoutLlamaCppTemplates() }, () => {
  const tokenizer = openTokenizer(resolve(PROJECT_ROOT, "node_modules", "@lenml", "tokenizer-llama3", "models"));
  const call = (id: string, name: string) => ({ id, type: "function", function: { name, arguments: { arg: "x" } } });
  const history = [
    { role: "user", content: "x" },
    { role: "assistant", content: "", tool_calls: [call("call00001", "tsllm_probe"), call("call00002", "tsllm_probe_second")] },
    { role: "tool", content: "y", tool_call_id: "call00001" },
    { role: "assistant", content: "z" },
    { role: "user", content: "x" },
  ];
  const verdicts: Record<string, boolean> = {};
  for (const name of ["meta-llama-Llama-3.1-8B-Instruct.jinja", "meta-llama-Llama-3.2-3B-Instruct.jinja", "meta-llama-Llama-3.3-70B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja", "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "mistralai-Mistral-Nemo-Instruct-2407.jinja"]) {
    const source = llamaCppTemplate(name);
    const variables = templateVariablesOf(source, toolsOf({ tools: [TIME] }));
    const [judged] = renderWithJinja2(source, [{ messages: history, add_generation_prompt: false, bos_token: "<s>", eos_token: "</s>", ...variables }]);
    const expected = "out" in judged! && judged.out.includes("tsllm_probe_second");
    verdicts[name] = chatFormatterFor(tokenizer, { source, where: name }).writesParallelCalls(variables);
    assert.equal(verdicts[name], expected, `${name}: ${JSON.stringify(judged).slice(0, 300)}`);
  }
  // (the cases the probe tells apart: Llama 3.x's raise on a second call)
  assert.equal(verdicts["meta-llama-Llama-3.1-8B-Instruct.jinja"], false);
  assert.equal(verdicts["Qwen-Qwen3-0.6B.jinja"], true);
});

test("Llama 3.x: a call cut off before its name after whole ones is dropped, streamed or not, as llama.cpp's lenient final parse drops what it cannot name", { skip: skipWithoutLlamaCppTemplates() }, () => {
  const source = llamaCppTemplate("meta-llama-Llama-3.1-8B-Instruct.jinja");
  const tools = toolsOf({ tools: [TIME], parallel_tool_calls: true })!;
  const syntax = replySyntaxOf(source, tools, thinkingOf(source, ""), "deepseek")!;
  const whole = '{"name": "get_time", "parameters": {"zone": "UTC"}}';
  for (const cut of ['; {"n', "; {", ' {"name": "get_t']) {
    const read = readReply(whole + cut, syntax);
    assert.deepEqual(read.calls.map((c) => [c.name, JSON.parse(c.arguments)]), [["get_time", { zone: "UTC" }]], cut);
    assert.equal(read.content, "", cut);
  }
  // a reply that is nothing but a call's unnamed start answers nothing either
  assert.equal(readReply('{"na', syntax).content, "");
  // text that is no call stays text
  assert.equal(readReply(`${whole}; and then`, syntax).content, "and then");
});
