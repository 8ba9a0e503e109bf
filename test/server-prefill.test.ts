import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { ChatMessage } from "../src/chat/index.js";
import { renderWithJinja2, skipWithoutJinja2 } from "../scripts/jinja2-oracle.js";
import { llamaCppTemplate, skipWithoutLlamaCppTemplates } from "./helpers/llama-cpp-templates.js";
import { post, serveStories, serveStoriesWithTemplate, skipStories } from "./helpers/serve.js";

/*
 * How a chat prompt ends, as llama-server ends it: a last message of the assistant's is continued
 * (its assistant prefill: the reply goes on from that text), add_generation_prompt false leaves the
 * assistant's header out, continue_final_message says which explicitly. The judge of the prompt's
 * text: Python's jinja2 renders the template without the generation prompt, and the test cuts it
 * after the last message's content (transformers' continue_final_message).
 */
const skip = skipStories || skipWithoutJinja2 || skipWithoutLlamaCppTemplates();
const NAME = "Qwen-Qwen2.5-7B-Instruct.jinja";
const USER: ChatMessage = { role: "user", content: "Lily went to the park" };
const PREFILL: ChatMessage = { role: "assistant", content: "She saw a big" };

describe("assistant prefill, add_generation_prompt and continue_final_message on stories260K", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  let source: string;
  before(async () => ({ s, source } = await serveStoriesWithTemplate(NAME)));
  after(() => s?.close());

  /** jinja2's rendering of the messages */
  const jinja2 = (messages: readonly ChatMessage[], addGenerationPrompt: boolean) => {
    const [out] = renderWithJinja2(source, [{ messages, add_generation_prompt: addGenerationPrompt, bos_token: "<s>", eos_token: "</s>" }]);
    assert.ok(out && "out" in out, JSON.stringify(out));
    return out.out;
  };
  /** the server's answer, and the library's greedy reply to the prompt given as its text (after checking the formatter renders that text) */
  const check = async (messages: readonly ChatMessage[], extra: Record<string, unknown>, text: string, ending: { addGenerationPrompt?: boolean; continueFinalMessage?: boolean }) => {
    const formatter = s.model.chatFormatter(source);
    assert.equal(formatter.prompt(messages, {}, ending), text);
    const tokens = formatter.encode(messages, {}, ending);
    const want = await s.model.generate(tokens, { maxTokens: 6, temperature: 0, stopTokens: [...formatter.endOfTurnIds] });
    const r = await post(`${s.url}/v1/chat/completions`, { messages, max_tokens: 6, temperature: 0, ...extra });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.usage.prompt_tokens, tokens.length, JSON.stringify(extra));
    assert.equal(r.json.choices[0].message.content, want.completion);
  };

  test("a last assistant message is continued: the prompt ends with its text, and the reply goes on from it", async () => {
    const messages = [USER, PREFILL];
    const whole = jinja2(messages, false);
    const text = whole.slice(0, whole.lastIndexOf(PREFILL.content) + PREFILL.content.length);
    assert.ok(text.endsWith("<|im_start|>assistant\nShe saw a big"), JSON.stringify(text));
    await check(messages, {}, text, { continueFinalMessage: true });
    await check(messages, { continue_final_message: true, add_generation_prompt: false }, text, { continueFinalMessage: true });
    // continue_final_message false: the message is history, a new reply follows it
    await check(messages, { continue_final_message: false }, jinja2(messages, true), {});
  });

  test("add_generation_prompt false: the conversation without the assistant's header", async () => {
    await check([USER], { add_generation_prompt: false }, jinja2([USER], false), { addGenerationPrompt: false });
  });

  test("what llama-server refuses is a 400 naming the parameter", async () => {
    for (const [messages, extra, param, re] of [
      [[USER, PREFILL, PREFILL], {}, "messages", /ends with two assistant messages/],
      [[USER, PREFILL], { add_generation_prompt: true }, "add_generation_prompt", /a last message of the assistant's: that message is continued/],
      [[USER], { continue_final_message: true, add_generation_prompt: true }, "add_generation_prompt", /cannot both be true/],
      [[USER, { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }] }], {}, "continue_final_message", /holds tool calls, which cannot be continued/],
      [[USER], { continue_final_message: "yes" }, "continue_final_message", /must be a boolean/],
    ] as const) {
      const r = await post(`${s.url}/v1/chat/completions`, { messages, max_tokens: 2, ...extra });
      assert.equal(r.status, 400, JSON.stringify(extra));
      assert.equal(r.json.error.param, param);
      assert.match(r.json.error.message, re);
    }
  });
});

test("a prefill that opens the reasoning and leaves it open: the reply goes on inside it, answered as reasoning_content", { skip }, async () => {
  const name = "Qwen-Qwen3-0.6B.jinja";
  const s = await serveStories({}, { chatTemplate: { source: llamaCppTemplate(name), where: name } });
  try {
    const ask = async (content: string) => {
      const r = await post(`${s.url}/v1/chat/completions`, { messages: [USER, { role: "assistant", content }], max_tokens: 6, temperature: 0 });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      return r.json.choices[0].message as { content: string; reasoning_content?: string };
    };
    // (stories260K does not close the reasoning within 6 tokens)
    const open = await ask("<think>\nLily");
    assert.ok(open.reasoning_content, JSON.stringify(open));
    assert.equal(open.content, "");
    const closed = await ask("<think>\nLily</think>\n\nShe");
    assert.equal(closed.reasoning_content, undefined);
    assert.ok(closed.content, JSON.stringify(closed));
  } finally {
    await s.close();
  }
});
