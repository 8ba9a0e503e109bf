import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { ChatMessage } from "../src/chat/index.js";
import { renderWithJinja2, skipWithoutJinja2 } from "../scripts/jinja2-oracle.js";
import { skipWithoutLlamaCppTemplates } from "./helpers/llama-cpp-templates.js";
import { post, serveStories, serveStoriesWithTemplate, skipStories, sseEvents as events } from "./helpers/serve.js";

/*
 * llama-server's own routes: POST /completion (and /completions) answer in its native shape
 * (tools/server's to_json_non_oaicompat: {content, tokens, stop, tokens_predicted,
 * tokens_evaluated, stop_type, ...}; streamed, {content, stop: false} events and a last one with
 * stop true and the summary, no [DONE]), with the same text /v1/completions gives for the same
 * greedy request; POST /apply-template answers {prompt}: the chat template's text, judged by
 * Python's jinja2 and by the token count the chat route reports for the same messages.
 */

const REQUEST = { prompt: "Once upon a time", n_predict: 12, temperature: 0 };

describe("POST /completion and /completions on stories260K", { skip: skipStories }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  before(async () => (s = await serveStories()));
  after(() => s?.close());

  test("unstreamed: llama-server's object, its content /v1/completions' text", async () => {
    const oai = await post(`${s.url}/v1/completions`, REQUEST);
    assert.equal(oai.status, 200, JSON.stringify(oai.json));
    const text = oai.json.choices[0].text as string;
    assert.ok(text.length > 0);
    for (const path of ["/completion", "/completions"]) {
      const r = await post(`${s.url}${path}`, REQUEST);
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.equal(r.json.object, undefined, "not OpenAI's shape");
      assert.equal(r.json.content, text, path);
      assert.equal(r.json.stop, true);
      assert.equal(r.json.stop_type, "limit");
      assert.equal(r.json.stopping_word, "");
      assert.equal(r.json.tokens_predicted, 12);
      // (llama-server keeps the generated ids for its reply only with return_tokens)
      assert.deepEqual(r.json.tokens, []);
      assert.equal(r.json.tokens_evaluated, oai.json.usage.prompt_tokens);
      assert.equal(r.json.model, oai.json.model);
      assert.equal(r.json.generation_settings.n_predict, 12);
      assert.equal(typeof r.json.timings.predicted_n, "number");
    }
  });

  test("a stop string: stop_type word, stopping_word the string", async () => {
    const free = await post(`${s.url}/completion`, REQUEST);
    const content = free.json.content as string;
    // a stop string the greedy reply reaches: the word it writes after its first few characters
    const at = content.indexOf(" ", 3);
    assert.ok(at > 0, content);
    const word = content.slice(at, at + 3);
    const r = await post(`${s.url}/completion`, { ...REQUEST, stop: ["zzz", word] });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.content, content.slice(0, at));
    assert.equal(r.json.stop_type, "word");
    assert.equal(r.json.stopping_word, word);
  });

  // (llama-server's find_stopping_strings sets stopping_word to the string found. tsllm decoded the
  // reply's tokens alone, which drops a SentencePiece reply's leading space: the offsets one off, no
  // stop string found, stopping_word "")
  test("a reply that starts with a space (stories260K's SentencePiece) names its stop string too", async () => {
    const r = await post(`${s.url}/completion`, { prompt: "Once", n_predict: 40, temperature: 0, stop: ["zzz", "."] });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.ok((r.json.content as string).startsWith(" "), JSON.stringify(r.json.content));
    assert.equal(r.json.stop_type, "word");
    assert.equal(r.json.stopping_word, ".");
  });

  test("streamed: {content, stop: false} events whose text is /v1/completions', then the summary with stop true, no [DONE]", async () => {
    const oai = await post(`${s.url}/v1/completions`, REQUEST);
    const res = await fetch(`${s.url}/completion`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...REQUEST, stream: true }) });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
    const all = events(await res.text()) as Record<string, any>[];
    assert.ok(!all.includes("[DONE]" as never), "llama-server's native stream ends without [DONE]");
    const last = all.at(-1)!;
    const partial = all.slice(0, -1);
    assert.ok(partial.length > 0 && partial.every((e) => e.stop === false && typeof e.content === "string"), JSON.stringify(all));
    assert.equal(partial.map((e) => e.content).join(""), oai.json.choices[0].text);
    assert.equal(last.stop, true);
    assert.equal(last.content, "");
    assert.equal(last.stop_type, "limit");
    assert.equal(last.tokens_predicted, 12);
    assert.equal(last.tokens_evaluated, oai.json.usage.prompt_tokens);
  });

  test("several prompts: an array of replies, each its prompt's /v1/completions text", async () => {
    const prompts = ["Once upon a time", "Lily went"];
    const oai = await post(`${s.url}/v1/completions`, { ...REQUEST, prompt: prompts });
    const r = await post(`${s.url}/completion`, { ...REQUEST, prompt: prompts });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.ok(Array.isArray(r.json), JSON.stringify(r.json));
    assert.deepEqual(r.json.map((x: any) => [x.index, x.content]), oai.json.choices.map((c: any) => [c.index, c.text]));
  });

  test("n_probs: completion_probabilities, each token's id, logprob and alternatives as /v1/completions scores them", async () => {
    const oai = await post(`${s.url}/v1/completions`, { ...REQUEST, logprobs: 2 });
    const r = await post(`${s.url}/completion`, { ...REQUEST, n_probs: 2, return_tokens: true });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const probs = r.json.completion_probabilities as { id: number; token: string; logprob: number; top_logprobs: { id: number; logprob: number }[] }[];
    assert.ok(Array.isArray(probs), JSON.stringify(r.json));
    assert.deepEqual(probs.map((p) => p.id), r.json.tokens);
    assert.deepEqual(probs.map((p) => p.token), oai.json.choices[0].logprobs.tokens);
    assert.deepEqual(probs.map((p) => p.logprob), oai.json.choices[0].logprobs.token_logprobs);
    assert.ok(probs.every((p) => p.top_logprobs.length === 2 && p.top_logprobs.every((t) => Number.isInteger(t.id))));
    // greedy: the token taken is its best alternative
    assert.ok(probs.every((p) => p.top_logprobs[0]!.id === p.id));
    assert.equal((await post(`${s.url}/completion`, REQUEST)).json.completion_probabilities, undefined);
  });

  test("POST /props: llama-server's 501 (its properties cannot be changed), naming the route", async () => {
    const r = await post(`${s.url}/props`, { n_ctx: 1 });
    assert.equal(r.status, 501, JSON.stringify(r.json));
    assert.match(r.json.error.message, /POST \/props is not supported/);
    assert.equal((await fetch(`${s.url}/props`)).status, 200);
  });

  test("behind --api-key, as every POST route", async () => {
    const keyed = await serveStories({}, { apiKey: "k" });
    try {
      for (const path of ["/completion", "/completions", "/apply-template"]) {
        assert.equal((await post(`${keyed.url}${path}`, REQUEST)).status, 401, path);
      }
      const ok = await post(`${keyed.url}/completion`, REQUEST, { Authorization: "Bearer k" });
      assert.equal(ok.status, 200, JSON.stringify(ok.json));
      assert.equal(typeof ok.json.content, "string");
    } finally {
      await keyed.close();
    }
  });

  test("a bad n_predict is the 400 naming it, as on /v1/completions", async () => {
    const r = await post(`${s.url}/completion`, { ...REQUEST, n_predict: "many" });
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /n_predict/);
  });
});

const NAME = "Qwen-Qwen2.5-7B-Instruct.jinja";
describe("POST /apply-template on stories260K", { skip: skipStories || skipWithoutJinja2 || skipWithoutLlamaCppTemplates() }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  let source: string;
  before(async () => ({ s, source } = await serveStoriesWithTemplate(NAME)));
  after(() => s?.close());

  const MESSAGES: ChatMessage[] = [{ role: "system", content: "Be brief." }, { role: "user", content: "Lily went to the park" }];

  test("{messages} -> {prompt}: jinja2's rendering with the generation prompt, the text the chat route tokenizes", async () => {
    const r = await post(`${s.url}/apply-template`, { messages: MESSAGES });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const [want] = renderWithJinja2(source, [{ messages: MESSAGES, add_generation_prompt: true, bos_token: "<s>", eos_token: "</s>" }]);
    assert.deepEqual({ out: r.json.prompt }, want);
    assert.ok((r.json.prompt as string).endsWith("<|im_start|>assistant\n"), r.json.prompt);
    // the chat route's prompt is this text's tokens (special tokens read as such, as the chat route reads its template's)
    const chat = await post(`${s.url}/v1/chat/completions`, { messages: MESSAGES, max_tokens: 1 });
    const tokens = await post(`${s.url}/tokenize`, { content: r.json.prompt, add_special: true, parse_special: true });
    assert.equal(tokens.status, 200, JSON.stringify(tokens.json));
    assert.equal(chat.json.usage.prompt_tokens, tokens.json.tokens.length);
  });

  test("the request's own ending: add_generation_prompt false leaves the assistant's header out", async () => {
    const r = await post(`${s.url}/apply-template`, { messages: MESSAGES, add_generation_prompt: false });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const [want] = renderWithJinja2(source, [{ messages: MESSAGES, add_generation_prompt: false, bos_token: "<s>", eos_token: "</s>" }]);
    assert.deepEqual({ out: r.json.prompt }, want);
  });

  test("bad messages: the 400 naming them", async () => {
    const r = await post(`${s.url}/apply-template`, { messages: "hi" });
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /messages/);
  });
});
