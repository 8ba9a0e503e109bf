import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import type { ChatMessage } from "../src/chat/index.js";
import type { Model } from "../src/index.js";
import { startServer } from "../src/server/index.js";
import { renderWithJinja2, skipWithoutJinja2 } from "../scripts/jinja2-oracle.js";
import { llamaCppTemplate, skipWithoutLlamaCppTemplates } from "./helpers/llama-cpp-templates.js";
import { post, serveStories, skipStories, STORIES } from "./helpers/serve.js";
import { PROJECT_ROOT, sharedFile } from "./helpers/shared.js";

/*
 * chat_template_kwargs (llama-server's and vLLM's request field) and enable_thinking reach the chat
 * template as variables: Qwen3's template reads enable_thinking (false: an empty <think></think>
 * closes the reasoning before the reply), others read variables of their own. Judged by Python's
 * jinja2 rendering the same template with the same variables; the server's prompt is the
 * library's encoding of it (its token count, and the greedy reply it leads to).
 */
const QWEN3 = "Qwen-Qwen3-0.6B.jinja";
const skip = skipStories || skipWithoutJinja2 || skipWithoutLlamaCppTemplates();
const MESSAGES: ChatMessage[] = [{ role: "system", content: "Be brief." }, { role: "user", content: "Lily went to the park" }];
/** a template of its own variables: persona, and a list it loops over */
const CUSTOM = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if persona is defined %}[{{ persona }}{% for t in traits %} +{{ t }}{% endfor %}]\n{% endif %}assistant:";

describe("chat_template_kwargs and enable_thinking on stories260K", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  let model: Model;
  let qwen3: string;
  before(async () => {
    qwen3 = llamaCppTemplate(QWEN3);
    s = await serveStories({}, { chatTemplate: { source: qwen3, where: QWEN3 } });
    model = s.model;
  });
  after(() => s?.close());

  /** the server's greedy reply to MESSAGES with these extra body fields */
  const ask = async (url: string, extra: Record<string, unknown>) => {
    const r = await post(`${url}/v1/chat/completions`, { messages: MESSAGES, max_tokens: 8, temperature: 0, ...extra });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    return { promptTokens: r.json.usage.prompt_tokens as number, content: r.json.choices[0].message.content as string, reasoning: r.json.choices[0].message.reasoning_content as string | undefined };
  };
  /** what the library generates from the prompt rendered with these variables, after checking the rendering is jinja2's */
  const want = async (source: string, variables: Record<string, unknown>) => {
    const formatter = model.chatFormatter(source);
    const [jinja2] = renderWithJinja2(source, [{ messages: MESSAGES, add_generation_prompt: true, bos_token: "<s>", eos_token: "</s>", unk_token: "<unk>", pad_token: "", ...variables }]);
    assert.deepEqual({ out: formatter.render(MESSAGES, true, variables) }, jinja2);
    const tokens = formatter.encode(MESSAGES, variables);
    const r = await model.generate(tokens, { maxTokens: 8, temperature: 0, stopTokens: [...formatter.endOfTurnIds] });
    return { promptTokens: tokens.length, text: r.completion, prompt: (jinja2 as { out: string }).out };
  };

  test("Qwen3: chat_template_kwargs.enable_thinking false (or top-level enable_thinking) closes the reasoning in the prompt, as jinja2 renders it", async () => {
    const off = await want(qwen3, { enable_thinking: false });
    const on = await want(qwen3, {});
    assert.ok(off.prompt.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n") && !on.prompt.includes("<think>"), off.prompt);
    for (const extra of [{ chat_template_kwargs: { enable_thinking: false } }, { enable_thinking: false }, { enable_thinking: false, chat_template_kwargs: { enable_thinking: false } }]) {
      const got = await ask(s.url, extra);
      assert.equal(got.promptTokens, off.promptTokens, JSON.stringify(extra));
      assert.equal(got.content, off.text, JSON.stringify(extra));
    }
    const plain = await ask(s.url, {});
    assert.equal(plain.promptTokens, on.promptTokens);
    assert.equal((await ask(s.url, { chat_template_kwargs: { enable_thinking: true } })).promptTokens, on.promptTokens);
  });

  test("a template's own variables, any JSON value; the server's defaults (ServeOptions.chatTemplateKwargs) under the request's", async () => {
    const custom = await serveStories({}, { chatTemplate: CUSTOM, chatTemplateKwargs: { persona: "a pirate", traits: ["loud"] } });
    try {
      const byDefault = await want(CUSTOM, { persona: "a pirate", traits: ["loud"] });
      assert.equal((await ask(custom.url, {})).content, byDefault.text);
      const overridden = await want(CUSTOM, { persona: "a cat", traits: ["small", "grey"] });
      const got = await ask(custom.url, { chat_template_kwargs: { persona: "a cat", traits: ["small", "grey"] } });
      assert.deepEqual(got.promptTokens, overridden.promptTokens);
      assert.equal(got.content, overridden.text);
    } finally {
      await custom.close();
    }
    assert.throws(() => startServer(model, { chatTemplateKwargs: { tools: [] } }), /'chatTemplateKwargs.tools' cannot be set: the template's 'tools' comes from the request/);
  });

  test("bad chat_template_kwargs and enable_thinking are 400s naming them", async () => {
    for (const [extra, param, re] of [
      [{ chat_template_kwargs: ["enable_thinking"] }, "chat_template_kwargs", /'chat_template_kwargs' must be an object of template variables, got an array/],
      [{ chat_template_kwargs: "x" }, "chat_template_kwargs", /must be an object of template variables, got string/],
      [{ chat_template_kwargs: { messages: [] } }, "chat_template_kwargs.messages", /cannot be set: the template's 'messages' comes from the request \(give the conversation in 'messages'\)/],
      [{ chat_template_kwargs: { tools: [] } }, "chat_template_kwargs.tools", /give them in 'tools'/],
      [{ chat_template_kwargs: { add_generation_prompt: false } }, "chat_template_kwargs.add_generation_prompt", /cannot be set/],
      [{ chat_template_kwargs: { enable_thinking: "false" } }, "chat_template_kwargs.enable_thinking", /must be true or false, got "false"/],
      [{ enable_thinking: "no" }, "enable_thinking", /'enable_thinking' must be true or false, got "no"/],
      [{ enable_thinking: true, chat_template_kwargs: { enable_thinking: false } }, "enable_thinking", /contradicts 'chat_template_kwargs.enable_thinking' \(false\)/],
    ] as const) {
      const r = await post(`${s.url}/v1/chat/completions`, { messages: MESSAGES, max_tokens: 2, ...extra });
      assert.equal(r.status, 400, JSON.stringify(extra));
      assert.equal(r.json.error.param, param);
      assert.match(r.json.error.message, re);
    }
  });
});

test("preserve_reasoning and reasoning_effort reach the templates that spell them their own way, as llama.cpp derives them: GLM 4.7 keeps the history's reasoning, muse-glimmer reads reasoning_strength", { skip }, async () => {
  const history = [
    { role: "user", content: "Lily went to the park" }, { role: "assistant", content: "She saw a dog.", reasoning_content: "The park has dogs." }, { role: "user", content: "And then?" },
  ];
  for (const [name, extra, variables, shows] of [
    // llama.cpp: preserve_reasoning true sets preserve_thinking, clear_thinking false, truncate_history_thinking false, drop_thinking false
    ["GLM-4.7-Flash.jinja", { chat_template_kwargs: { preserve_reasoning: true } }, { preserve_reasoning: true, preserve_thinking: true, clear_thinking: false, truncate_history_thinking: false, drop_thinking: false }, "<think>The park has dogs.</think>"],
    // and reasoning_effort is also reasoning_strength
    ["muse-glimmer.jinja", { reasoning_effort: "low" }, { reasoning_effort: "low", reasoning_strength: "low" }, "low"],
  ] as const) {
    const source = llamaCppTemplate(name);
    const s = await serveStories({ contextSize: 1024 }, { chatTemplate: { source, where: name } });
    try {
      const formatter = s.model.chatFormatter(source);
      const thinking = source.includes("<think>") ? { enable_thinking: true } : {};
      const [jinja2, plain] = renderWithJinja2(source, [variables, {}].map((v) => ({ messages: history, add_generation_prompt: true, bos_token: "<s>", eos_token: "</s>", ...thinking, ...v })));
      const text = (jinja2 as { out: string }).out;
      assert.ok(text.includes(shows) && !(plain as { out: string }).out.includes(shows), `${name}: ${text}`);
      const read = history as ChatMessage[];
      assert.equal(formatter.render(read, true, { ...thinking, ...variables }), text, name);
      const r = await post(`${s.url}/v1/chat/completions`, { messages: history, max_tokens: 2, ...extra });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.equal(r.json.usage.prompt_tokens, formatter.encode(read, { ...thinking, ...variables }).length, name);
    } finally {
      await s.close();
    }
  }
  const s = await serveStories({}, { chatTemplate: CUSTOM });
  try {
    const bad = await post(`${s.url}/v1/chat/completions`, { messages: MESSAGES, max_tokens: 2, chat_template_kwargs: { preserve_reasoning: "yes" } });
    assert.equal(bad.status, 400, JSON.stringify(bad.json));
    assert.equal(bad.json.error.param, "chat_template_kwargs.preserve_reasoning");
  } finally {
    await s.close();
  }
});

test("tsllm serve --chat-template-kwargs: a JSON object of variables; anything else a usage error naming the flag", { skip: skipStories }, async () => {
  const serve = (kwargs: string) => promisify(execFile)(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "serve", "--model", sharedFile(STORIES)!, "--port", "0", "--chat-template-kwargs", kwargs], { cwd: PROJECT_ROOT });
  await assert.rejects(serve("{enable_thinking: false}"), (e: { stderr: string; code: number }) => /--chat-template-kwargs expects a JSON object such as/.test(e.stderr) && e.code === 2);
  await assert.rejects(serve("[1]"), (e: { stderr: string; code: number }) => /'--chat-template-kwargs' must be an object of template variables, got an array/.test(e.stderr) && e.code === 2);
  await assert.rejects(serve('{"messages": []}'), (e: { stderr: string; code: number }) => /'--chat-template-kwargs.messages' cannot be set/.test(e.stderr) && e.code === 2);
});
