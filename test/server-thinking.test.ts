import assert from "node:assert/strict";
import { resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { chatFormatterFor, type ChatMessage } from "../src/chat/index.js";
import type { Model } from "../src/index.js";
import { GrammarMatcher, parseGbnf } from "../src/sampling/constraints/index.js";
import { messagesOf } from "../src/server/requests.js";
import { fencesJson, messagesForTemplate, readReply, replyGrammar, ReplyStream, replySyntaxOf, templateVariablesOf, thinkingOf, toolsOf } from "../src/server/tools.js";
import { openTokenizer } from "../src/tokenizer/index.js";
import { renderWithJinja2, skipWithoutJinja2 } from "../scripts/jinja2-oracle.js";
import { llamaCppTemplate, skipWithoutLlamaCppTemplates } from "./helpers/llama-cpp-templates.js";
import { post, serveStories, serveStoriesWithTemplate, skipStories } from "./helpers/serve.js";
import { PROJECT_ROOT } from "./helpers/shared.js";

/*
 * A chat request to a template that thinks, as llama-server builds it: the template gets
 * enable_thinking true unless the server's --chat-template-kwargs or the request set it (llama.cpp's
 * server-common.cpp: inputs.enable_thinking = opt.enable_thinking, true where the template supports
 * reasoning; chat_template_kwargs.enable_thinking overrides it). llama.cpp's copies of DeepSeek R1's
 * and QwQ's templates read it: not true, the generation prompt closes the reasoning it opened.
 * Judged by Python's jinja2 rendering the template with llama-server's variables.
 */
const skip = skipStories || skipWithoutJinja2 || skipWithoutLlamaCppTemplates();
const MESSAGES: ChatMessage[] = [{ role: "user", content: "Lily went to the park" }];
const TEMPLATES = ["Qwen-QwQ-32B.jinja", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"];

describe("enable_thinking: true by default for a template that thinks, as llama-server passes it", { skip }, () => {
  for (const name of TEMPLATES) {
    describe(name, () => {
      let s: Awaited<ReturnType<typeof serveStories>>;
      let off: Awaited<ReturnType<typeof serveStories>>;
      let model: Model;
      let source: string;
      before(async () => {
        source = llamaCppTemplate(name);
        s = await serveStories({}, { chatTemplate: { source, where: name } });
        off = await serveStories({}, { chatTemplate: { source, where: name }, chatTemplateKwargs: { enable_thinking: false } });
        model = s.model;
      });
      after(async () => {
        await s?.close();
        await off?.close();
      });

      /** the prompt jinja2 renders with these variables (after checking the library renders the same), and its token count */
      const prompt = (variables: Record<string, unknown>) => {
        const [jinja2] = renderWithJinja2(source, [{ messages: MESSAGES, add_generation_prompt: true, bos_token: "<s>", eos_token: "</s>", ...variables }]);
        const formatter = model.chatFormatter(source);
        assert.deepEqual({ out: formatter.render(MESSAGES, true, variables) }, jinja2);
        return { text: (jinja2 as { out: string }).out, tokens: formatter.encode(MESSAGES, variables).length };
      };
      const ask = async (url: string, extra: Record<string, unknown> = {}) => {
        const r = await post(`${url}/v1/chat/completions`, { messages: MESSAGES, max_tokens: 8, temperature: 0, ...extra });
        assert.equal(r.status, 200, JSON.stringify(r.json));
        return { tokens: r.json.usage.prompt_tokens as number, message: r.json.choices[0].message as { content: string; reasoning_content?: string } };
      };

      test("without chat_template_kwargs: the prompt leaves the reply in the reasoning, answered as reasoning_content", async () => {
        const thinking = prompt({ enable_thinking: true });
        assert.ok(thinking.text.endsWith("<think>\n"), JSON.stringify(thinking.text.slice(-40)));
        const got = await ask(s.url);
        assert.equal(got.tokens, thinking.tokens);
        // (stories260K never closes the reasoning within 8 tokens: all of the reply is reasoning)
        assert.ok(got.message.reasoning_content, JSON.stringify(got.message));
        assert.equal(got.message.content, "");
      });

      test("enable_thinking false, from the request or from the server's --chat-template-kwargs: the prompt closes the reasoning, the reply is content", async () => {
        const closed = prompt({ enable_thinking: false });
        assert.ok(closed.text.endsWith("<think>\n</think>"), JSON.stringify(closed.text.slice(-40)));
        for (const [url, extra] of [[s.url, { chat_template_kwargs: { enable_thinking: false } }], [s.url, { enable_thinking: false }], [off.url, {}]] as const) {
          const got = await ask(url, extra);
          assert.equal(got.tokens, closed.tokens, JSON.stringify(extra));
          assert.equal(got.message.reasoning_content, undefined);
          assert.ok(got.message.content, JSON.stringify(got.message));
        }
        // the request's true overrides the server's false
        assert.equal((await ask(off.url, { chat_template_kwargs: { enable_thinking: true } })).tokens, prompt({ enable_thinking: true }).tokens);
      });

      test("reasoning_effort \"none\" turns the thinking off as llama-server does (enable_thinking false); another effort leaves it on", async () => {
        const closed = prompt({ enable_thinking: false });
        const none = await ask(s.url, { reasoning_effort: "none" });
        assert.equal(none.tokens, closed.tokens);
        assert.equal(none.message.reasoning_content, undefined);
        assert.equal((await ask(s.url, { reasoning_effort: "high" })).tokens, prompt({ enable_thinking: true, reasoning_effort: "high" }).tokens);
      });
    });
  }
});

/** whether the grammar admits the whole text */
function admits(grammar: string, text: string): boolean {
  const m = new GrammarMatcher(parseGbnf(grammar));
  let st = m.initial();
  for (const ch of text) st = m.advance(st, ch.codePointAt(0)!);
  return GrammarMatcher.complete(st);
}

test("a response_format on a template that thinks admits the reasoning first, with tools under tool_choice \"auto\" or without, as llama.cpp's grammars do", { skip: skipWithoutLlamaCppTemplates() }, () => {
  const tokenizer = openTokenizer(resolve(PROJECT_ROOT, "node_modules", "@lenml", "tokenizer-llama3", "models"));
  const format = { jsonSchema: { type: "object", properties: { a: { type: "integer" } }, required: ["a"] } };
  const json = '{"a": 1}';
  const call = '<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>';
  const tools = toolsOf({ tools: [{ type: "function", function: { name: "get_time", parameters: { type: "object", properties: { zone: { type: "string" } }, required: ["zone"] } } }] })!;
  // QwQ's prompt opens the reasoning (with llama-server's enable_thinking true); Qwen3's leaves it to the reply
  for (const [name, forced] of [["Qwen-QwQ-32B.jinja", true], ["Qwen-Qwen3-0.6B.jinja", false]] as const) {
    const source = llamaCppTemplate(name);
    const prompt = chatFormatterFor(tokenizer, { source, where: name }).render(MESSAGES, true, templateVariablesOf(source, undefined));
    const thinking = thinkingOf(source, prompt);
    assert.equal(thinking?.forcedOpen, forced, name);
    const reasoning = forced ? "I am asked for a.\n</think>\n\n" : "<think>I am asked for a.</think>\n";
    for (const withTools of [undefined, tools]) {
      const shaped = replyGrammar(format, withTools, source, thinking);
      assert.equal(shaped?.param, "response_format.json_schema.schema");
      const grammar = shaped!.grammar;
      assert.ok(admits(grammar, `${reasoning}${json}`), `${name}, tools ${!!withTools}: reasoning, then the format`);
      // after a prompt that opened the reasoning, the format alone would be written inside it
      assert.equal(admits(grammar, json), !forced, `${name}, tools ${!!withTools}: the format alone`);
      assert.ok(!admits(grammar, `${reasoning}not json`), name);
      if (withTools) assert.ok(admits(grammar, `${reasoning}${call}`), `${name}: reasoning, then a call`);
    }
  }
  // a template that does not think: the format stays the request's own without tools
  assert.equal(replyGrammar(format, undefined, llamaCppTemplate("meta-llama-Llama-3.1-8B-Instruct.jinja"), undefined), undefined);
});

test("Ministral 3 answers a response_format's JSON inside a ```json fence: its grammar wants the fence, its reply is read without it (llama.cpp's test-chat.cpp case)", { skip: skipWithoutLlamaCppTemplates() }, () => {
  const name = "mistralai-Ministral-3-14B-Reasoning-2512.jinja";
  const source = llamaCppTemplate(name);
  assert.ok(fencesJson(source));
  // Mistral Small 3.2 (its [CALL_ID]) writes plain JSON, as llama.cpp tells them apart
  assert.ok(!fencesJson(llamaCppTemplate("Mistral-Small-3.2-24B-Instruct-2506.jinja")));
  const thinking = thinkingOf(source, "");
  // (tests/test-chat.cpp, Ministral-3-14B-Reasoning-2512 with invoice_schema)
  const format = { jsonSchema: { type: "object", properties: { amount: { type: "number" }, date: { type: "string" } } } };
  const json = '{"amount": 123.45, "date": "2025-12-03"}';
  const text = `[THINK]I need to output the invoice details in JSON[/THINK]\`\`\`json\n${json}\n\`\`\``;
  const tools = toolsOf({ tools: [{ type: "function", function: { name: "get_time", parameters: { type: "object", properties: { zone: { type: "string" } }, required: ["zone"] } } }] })!;
  for (const withTools of [undefined, tools]) {
    const shaped = replyGrammar(format, withTools, source, thinking);
    assert.equal(shaped?.param, "response_format.json_schema.schema");
    const grammar = shaped!.grammar;
    assert.ok(admits(grammar, text), `tools ${!!withTools}`);
    assert.ok(admits(grammar, `\`\`\`json${json}\`\`\``));
    assert.ok(!admits(grammar, json), "the JSON without its fence");
    if (withTools) assert.ok(admits(grammar, '[TOOL_CALLS]get_time[ARGS]{"zone": "UTC"}'));
    const syntax = replySyntaxOf(source, withTools, thinking, "deepseek", true)!;
    const read = readReply(text, syntax);
    assert.deepEqual({ reasoning: read.reasoning, content: read.content }, { reasoning: "I need to output the invoice details in JSON", content: json });
    // streamed a character at a time, the same, and no piece of the fence is ever sent
    const stream = new ReplyStream(syntax);
    const deltas = [...[...text].flatMap((c) => stream.push(c)), ...stream.end()];
    assert.equal(deltas.map((d) => ("content" in d ? d.content : "")).join(""), json);
  }
  // without a response_format the text is as the model wrote it
  assert.equal(readReply(text, replySyntaxOf(source, undefined, thinking, "deepseek")!).content, `\`\`\`json\n${json}\n\`\`\``);
});

describe("reasoning_effort reaches the template as its variable (gpt-oss's), as llama-server passes it", { skip }, () => {
  const name = "openai-gpt-oss-120b.jinja";
  let s: Awaited<ReturnType<typeof serveStories>>;
  let source: string;
  before(async () => ({ s, source } = await serveStoriesWithTemplate(name)));
  after(() => s?.close());

  test("\"high\" is in the prompt as jinja2 renders it; bad values are 400s naming the parameter", async () => {
    const tokens = (variables: Record<string, unknown>) => {
      const [jinja2] = renderWithJinja2(source, [{ messages: MESSAGES, add_generation_prompt: true, bos_token: "<s>", eos_token: "</s>", ...variables }]);
      const formatter = s.model.chatFormatter(source);
      assert.deepEqual({ out: formatter.render(MESSAGES, true, variables) }, jinja2);
      return { text: (jinja2 as { out: string }).out, count: formatter.encode(MESSAGES, variables).length };
    };
    const high = tokens({ reasoning_effort: "high" });
    assert.match(high.text, /Reasoning: high/);
    assert.notEqual(high.count, tokens({}).count);
    const r = await post(`${s.url}/v1/chat/completions`, { messages: MESSAGES, max_tokens: 2, reasoning_effort: "high" });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.usage.prompt_tokens, high.count);
    for (const [extra, re] of [
      [{ reasoning_effort: 3 }, /'reasoning_effort' must be a string such as "low", "medium", "high" or "none", got 3/],
      [{ reasoning_effort: "none", enable_thinking: true }, /'reasoning_effort' "none" turns the thinking off: it contradicts 'enable_thinking' true/],
      [{ reasoning_effort: "none", chat_template_kwargs: { enable_thinking: true } }, /contradicts 'chat_template_kwargs.enable_thinking' true/],
    ] as const) {
      const bad = await post(`${s.url}/v1/chat/completions`, { messages: MESSAGES, max_tokens: 2, ...extra });
      assert.equal(bad.status, 400, JSON.stringify(extra));
      assert.equal(bad.json.error.param, "reasoning_effort");
      assert.match(bad.json.error.message, re);
    }
  });
});

describe("llama.cpp's Qwen3 template on stories260K: reasoning_content in the messages, reasoning_format none", { skip }, () => {
  const name = "Qwen-Qwen3-0.6B.jinja";
  let s: Awaited<ReturnType<typeof serveStories>>;
  let source: string;
  before(async () => ({ s, source } = await serveStoriesWithTemplate(name)));
  after(() => s?.close());
  // a tool loop as the AI SDK sends it back: the call's turn with its reasoning, the tool's answer
  const messages = [
    { role: "user", content: "Weather in Oslo?" },
    { role: "assistant", content: null, reasoning_content: "Lily wants the weather.", tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } }] },
    { role: "tool", tool_call_id: "c1", content: "-3" },
  ];

  test("reasoning_format none: the response_format's grammar admits no reasoning, as llama.cpp's made from its parser (the JSON from the first token); by default it may reason first", async () => {
    // the tokens that are "<": pushed up, a reply that may open <think> opens it
    const lt = Array.from({ length: s.model.info.vocabSize }, (_, i) => i).filter((i) => s.model.tokenizer.decode([i]) === "<");
    assert.ok(lt.length > 0);
    const request = {
      messages: [{ role: "user", content: "Lily went to the park" }], response_format: { type: "json_object" }, max_tokens: 12, temperature: 0,
      logit_bias: Object.fromEntries(lt.map((i) => [String(i), 100])),
    };
    const thinks = await post(`${s.url}/v1/chat/completions`, request);
    assert.equal(thinks.status, 200, JSON.stringify(thinks.json));
    assert.ok(thinks.json.choices[0].message.reasoning_content, JSON.stringify(thinks.json.choices[0].message));
    for (const stream of [false, true]) {
      const none = await post(`${s.url}/v1/chat/completions`, { ...request, reasoning_format: "none", stream });
      assert.equal(none.status, 200, JSON.stringify(none.json));
      const content = stream
        ? (none.json as string).split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)).choices[0]?.delta?.content ?? "").join("")
        : none.json.choices[0].message.content as string;
      assert.match(content, /^\s*\{/, `stream ${stream}: ${JSON.stringify(none.json)}`);
    }
    // a required call too: the call from the first token
    const tools = toolsOf({ tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }], tool_choice: "required" });
    const thinking = thinkingOf(source, "");
    const call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
    for (const [format, reasons] of [["deepseek", true], ["none", false]] as const) {
      const { grammar } = replyGrammar({}, tools, source, thinking, format)!;
      assert.ok(admits(grammar, call), format);
      assert.equal(admits(grammar, `<think>\nx\n</think>\n\n${call}`), reasons, format);
    }
  });

  test("a last assistant message of reasoning only is continued inside its reasoning, as llama.cpp's reasoning continuation: the prompt ends with it, the reply goes on as reasoning_content", async () => {
    const user = { role: "user", content: "Lily went to the park" };
    // llama.cpp's prompt: the conversation before it with the generation prompt, then the reasoning opened and the message's reasoning
    const [jinja2] = renderWithJinja2(source, [{ messages: [user], add_generation_prompt: true, bos_token: "<s>", eos_token: "</s>", enable_thinking: true }]);
    const text = `${(jinja2 as { out: string }).out}<think>\nShe saw a big`;
    const tokenizer = s.model.tokenizer;
    const want = tokenizer.encode(text, { addSpecialTokens: true });
    for (const content of [null, ""]) {
      const r = await post(`${s.url}/v1/chat/completions`, { messages: [user, { role: "assistant", content, reasoning_content: "She saw a big" }], max_tokens: 6, temperature: 0 });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.equal(r.json.usage.prompt_tokens, want.length);
      const reply = await s.model.generate(want, { maxTokens: 6, temperature: 0 });
      assert.deepEqual(r.json.choices[0].message, { role: "assistant", content: "", reasoning_content: reply.completion.trim(), refusal: null });
    }
    // with content, the content is continued after the reasoning the template closes
    const r = await post(`${s.url}/v1/chat/completions`, { messages: [user, { role: "assistant", content: "Lily", reasoning_content: "She saw a big" }], max_tokens: 6, temperature: 0 });
    assert.equal(r.json.usage.prompt_tokens, tokenizer.encode(`${(jinja2 as { out: string }).out}<think>\nShe saw a big\n</think>\n\nLily`, { addSpecialTokens: true }).length);
    assert.equal(r.json.choices[0].message.reasoning_content, undefined);
  });

  test("the server's prompt is jinja2's rendering of the messages with their reasoning_content; a reasoning_content not a string is a 400 naming it", async () => {
    // (null content as "", as llama.cpp hands it to a template that writes calls: Qwen3's cannot take null)
    const [jinja2] = renderWithJinja2(source, [{ messages: messages.map((m) => ({ ...m, content: m.content ?? "" })), add_generation_prompt: true, bos_token: "<s>", eos_token: "</s>", enable_thinking: true }]);
    const text = (jinja2 as { out: string }).out;
    assert.ok(text.includes("<think>\nLily wants the weather.\n</think>"), text);
    const formatter = s.model.chatFormatter(source);
    const read = messagesOf({ messages });
    assert.equal(formatter.render(read, true, { enable_thinking: true }), text);
    const r = await post(`${s.url}/v1/chat/completions`, { messages, max_tokens: 2 });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.usage.prompt_tokens, formatter.encode(read, { enable_thinking: true }).length);
    const bad = await post(`${s.url}/v1/chat/completions`, { messages: [messages[0], { ...messages[1], reasoning_content: ["x"] }, messages[2]], max_tokens: 2 });
    assert.equal(bad.status, 400, JSON.stringify(bad.json));
    assert.equal(bad.json.error.param, "messages[1].reasoning_content");
  });
});

test("a template that reads a turn's reasoning as `thinking` (LFM2.5's) gets reasoning_content so, as llama.cpp copies it: the server's prompt is jinja2's", { skip }, async () => {
  const name = "LFM2.5-8B-A1B.jinja";
  const source = llamaCppTemplate(name);
  const s = await serveStories({ contextSize: 1024 }, { chatTemplate: { source, where: name } });
  try {
    const history = [{ role: "user", content: "Lily went to the park" }, { role: "assistant", content: "She saw a dog.", reasoning_content: "The park has dogs." }];
    for (const messages of [history, [...history, { role: "user", content: "And then?" }]]) {
      // the last turn's reasoning is written after the last user turn; earlier ones with preserve_thinking
      const kwargs = messages.length === 3 ? { preserve_thinking: true } : {};
      const [jinja2] = renderWithJinja2(source, [{ messages: messages.map((m) => ("reasoning_content" in m ? { ...m, thinking: m.reasoning_content } : m)), add_generation_prompt: true, bos_token: "<s>", eos_token: "</s>", enable_thinking: true, ...kwargs }]);
      const text = (jinja2 as { out: string }).out;
      assert.ok(text.includes("<think>The park has dogs.</think>"), text);
      const continued = messages.length === 2;
      const r = await post(`${s.url}/v1/chat/completions`, { messages, max_tokens: 2, chat_template_kwargs: kwargs, ...(continued ? { continue_final_message: false } : {}) });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      const formatter = s.model.chatFormatter(source);
      const shown = messagesForTemplate(messagesOf({ messages }), source, undefined);
      assert.equal(formatter.render(shown, true, { enable_thinking: true, ...kwargs }), text);
      assert.equal(r.json.usage.prompt_tokens, formatter.encode(shown, { enable_thinking: true, ...kwargs }).length);
    }
  } finally {
    await s.close();
  }
});

test("Ministral 3's template gets a turn's reasoning_content as a {type: \"thinking\"} content block before its text, as llama.cpp builds its messages (jinja2 judge)", { skip: skipStories || skipWithoutJinja2 || skipWithoutLlamaCppTemplates() }, async () => {
  const { s, source } = await serveStoriesWithTemplate("mistralai-Ministral-3-14B-Reasoning-2512.jinja");
  try {
    const history = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Lily went to the park" },
      { role: "assistant", content: "She played.", reasoning_content: "A story about Lily." },
      { role: "assistant", content: "", reasoning_content: "She needs a friend.", tool_calls: [{ id: "abcDEF123", type: "function", function: { name: "find", arguments: "{\"who\":\"Tom\"}" } }] },
      { role: "tool", tool_call_id: "abcDEF123", content: "Tom is here" },
      { role: "user", content: "And then?" },
    ];
    // llama.cpp's common_chat_params_init_ministral_3: system and assistant turns' content as blocks, the reasoning's first, reasoning_content dropped
    const blocks = history.map((m) => {
      if (m.role !== "system" && m.role !== "assistant") return m;
      const { reasoning_content, ...rest } = m as typeof m & { reasoning_content?: string };
      return { ...rest, content: [...(reasoning_content ? [{ type: "thinking", thinking: reasoning_content }] : []), { type: "text", text: m.content }] };
    });
    const [judged] = renderWithJinja2(source, [{ messages: blocks, add_generation_prompt: true, bos_token: "<s>", eos_token: "</s>" }]) as { out: string }[];
    assert.match(judged!.out, /\[THINK\]A story about Lily\.\[\/THINK\]She played\.<\/s>\[THINK\]She needs a friend\.\[\/THINK\]\[TOOL_CALLS\]find\[ARGS\]/);
    const r = await post(`${s.url}/v1/chat/completions`, { messages: history, max_tokens: 2, temperature: 0 });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    // (the template writes <s> itself: the text's special tokens are read as the server reads a rendered prompt's)
    assert.equal(r.json.usage.prompt_tokens, s.model.tokenizer.encode(judged!.out, { addSpecialTokens: false, parseSpecial: true }).length);
  } finally {
    await s.close();
  }
});

test("a prefilled last assistant message on Ministral 3's template ends the prompt as llama.cpp ends it: [THINK] and the reasoning, then [/THINK] and the content; reasoning alone goes on as reasoning (jinja2 judge)", { skip: skipStories || skipWithoutJinja2 || skipWithoutLlamaCppTemplates() }, async () => {
  const { s, source } = await serveStoriesWithTemplate("mistralai-Ministral-3-14B-Reasoning-2512.jinja");
  try {
    const user = { role: "user", content: "Lily went to the park" };
    // what llama.cpp renders before its continuation: the messages before it (none of them system or assistant here), no generation prompt
    const [before] = renderWithJinja2(source, [{ messages: [user], add_generation_prompt: false, bos_token: "<s>", eos_token: "</s>" }]) as { out: string }[];
    const tokens = (text: string) => s.model.tokenizer.encode(text, { addSpecialTokens: false, parseSpecial: true }).length;
    for (const [prefill, ending, inReasoning] of [
      [{ content: "", reasoning_content: "She is happy" }, "[THINK]She is happy", true],
      [{ content: "Once", reasoning_content: "She is happy" }, "[THINK]She is happy[/THINK]Once", false],
      [{ content: "Once" }, "[THINK][/THINK]Once", false],
    ] as const) {
      const r = await post(`${s.url}/v1/chat/completions`, { messages: [user, { role: "assistant", ...prefill }], max_tokens: 3, temperature: 0 });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.equal(r.json.usage.prompt_tokens, tokens(before!.out + ending), ending);
      const m = r.json.choices[0].message;
      if (inReasoning) assert.ok(m.reasoning_content && !m.content, JSON.stringify(m));
      else assert.ok(m.content && m.reasoning_content === undefined, JSON.stringify(m));
    }
  } finally {
    await s.close();
  }
});
