import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { connect } from "node:net";
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import { Ajv } from "ajv";
import OpenAI from "openai";
import { generateText, streamText } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { loadModel, type GenerateOptions, type Model } from "../src/index.js";
import { startServer } from "../src/server/index.js";
import { countPasses } from "./helpers/draft-passes.js";
import { CHAT_TEMPLATE, post, serveStories, skipStories as skip, STORIES, until } from "./helpers/serve.js";
import { sharedFile } from "./helpers/shared.js";

/** the server's error body (OpenAI's shape), the part read here */
interface ErrorBody {
  error: { code: string };
}

/** GET /v1/models: OpenAI's model list, with llama.cpp's meta */
interface ModelList {
  data: { id: string; meta: { n_ctx: number } }[];
}

describe("tsllm serve on stories260K", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  let model: Model;
  let client: OpenAI;
  before(async () => {
    s = await serveStories({ maxSequences: 32 });
    model = s.model;
    client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "none", maxRetries: 0 });
  });
  after(() => s?.close());

  const chat = (content: string, options: GenerateOptions) => model.chat([{ role: "user", content }], { ...options, chatTemplate: CHAT_TEMPLATE });

  test("a message's text parts reach the template joined by line breaks, as llama-server joins them", async () => {
    const parts = [{ type: "text" as const, text: "Lily and Ben" }, { type: "text" as const, text: "went to the park." }];
    const want = await chat("Lily and Ben\nwent to the park.", { temperature: 0, maxTokens: 12 });
    const r = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: parts }], max_tokens: 12, temperature: 0 });
    assert.equal(r.usage!.prompt_tokens, want.promptTokens.length);
    assert.equal(r.choices[0]!.message.content, want.completion);
    const bad = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:," } }] }] });
    assert.equal(bad.status, 400);
    assert.match(bad.json.error.message, /messages\[0\]\.content\[0\].*text only.*image_url/);
  });

  test("openai client, completions and chat, streaming and not: greedy text equals Model.generate / Model.chat", async () => {
    const want = await model.generate("Once upon a time", { temperature: 0, maxTokens: 24 });
    const c = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 24, temperature: 0 });
    assert.equal(c.choices[0]!.text, want.completion);
    assert.equal(c.choices[0]!.finish_reason, "length");
    assert.deepEqual(c.usage, { prompt_tokens: want.promptTokens.length, completion_tokens: 24, total_tokens: want.promptTokens.length + 24, prompt_tokens_details: { cached_tokens: (c.usage as any).prompt_tokens_details.cached_tokens } });
    assert.equal(typeof (c as any).timings.predicted_per_token_ms, "number");

    const wantChat = await chat("Lily and Ben", { temperature: 0, maxTokens: 20 });
    const r = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Lily and Ben" }], max_tokens: 20, temperature: 0 });
    assert.equal(r.choices[0]!.message.content, wantChat.completion);
    assert.equal(r.choices[0]!.message.role, "assistant");

    const stream = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Lily and Ben" }], max_tokens: 20, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let text = "", roles = 0, finish: string | null = null, usage;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const ch of chunk.choices) {
        if (ch.delta.role) roles++;
        text += ch.delta.content ?? "";
        finish = ch.finish_reason ?? finish;
      }
    }
    assert.equal(text, wantChat.completion);
    assert.equal(roles, 1);
    assert.equal(finish, wantChat.finishReason === "length" ? "length" : "stop");
    assert.equal(usage?.completion_tokens, wantChat.completionTokens.length);

    const cs = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 24, temperature: 0, stream: true });
    let ctext = "";
    for await (const chunk of cs) ctext += chunk.choices[0]?.text ?? "";
    assert.equal(ctext, want.completion);
  });

  test("stream_options.continuous_usage_stats (vLLM's): every chunk carries its choice's prompt and tokens so far; without include_usage nothing", async () => {
    const want = await model.generate("Once upon a time", { temperature: 0, maxTokens: 12 });
    const chunksOf = async (streamOptions: object) => {
      const r = await post(`${s.url}/v1/completions`, { prompt: "Once upon a time", max_tokens: 12, temperature: 0, n: 2, stream: true, stream_options: streamOptions });
      assert.equal(r.status, 200, String(r.json));
      return (r.json as string).split("\n\n").filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)));
    };
    const chunks = await chunksOf({ include_usage: true, continuous_usage_stats: true });
    const final = chunks.at(-1);
    assert.deepEqual(final.choices, []);
    assert.equal(final.usage.completion_tokens, 2 * want.completionTokens.length);
    for (const index of [0, 1]) {
      const mine = chunks.filter((c) => c.choices[0]?.index === index);
      // (each token of this story is whole text: one chunk each)
      assert.deepEqual(mine.map((c) => c.usage.completion_tokens), want.completionTokens.map((_, i) => i + 1).concat(want.completionTokens.length), `choice ${index}`);
      for (const c of mine) assert.deepEqual([c.usage.prompt_tokens, c.usage.total_tokens], [want.promptTokens.length, want.promptTokens.length + c.usage.completion_tokens]);
    }
    const plain = await chunksOf({ continuous_usage_stats: true });
    assert.ok(plain.every((c) => !("usage" in c)), "no usage without include_usage");
  });

  test("the ai SDK (openai-compatible provider): generateText and streamText equal Model.chat", async () => {
    const provider = createOpenAICompatible({ name: "tsllm", baseURL: `${s.url}/v1`, includeUsage: true });
    const want = await chat("Once upon a time", { temperature: 0, maxTokens: 16 });
    const g = await generateText({ model: provider("stories260K"), prompt: "Once upon a time", temperature: 0, maxOutputTokens: 16 });
    assert.equal(g.text, want.completion);
    assert.equal(g.usage.outputTokens, want.completionTokens.length);
    const st = streamText({ model: provider("stories260K"), prompt: "Once upon a time", temperature: 0, maxOutputTokens: 16 });
    let text = "";
    for await (const part of st.textStream) text += part;
    assert.equal(text, want.completion);
    assert.equal((await st.usage).outputTokens, want.completionTokens.length);
  });

  test("32 concurrent streams of different prompts and settings each equal their solo output", async () => {
    const prompts = ["Once upon a time", "Lily and Ben", "The cat", "One day", "Tom had a big", "The sun was"];
    const jobs = Array.from({ length: 32 }, (_, i) => {
      const options: GenerateOptions = i % 3 === 0 ? { temperature: 0, maxTokens: 12 + (i % 7) }
        : i % 3 === 1 ? { temperature: 0.9, topK: 20, seed: 1000 + i, maxTokens: 16 } : { temperature: 0.7, topP: 0.9, minP: 0.1, seed: i, maxTokens: 10, stop: [" the"] };
      return { prompt: prompts[i % prompts.length]!, options, chat: i % 4 === 1 };
    });
    const solo: string[] = [];
    for (const j of jobs) solo.push((await (j.chat ? chat(j.prompt, j.options) : model.generate(j.prompt, j.options))).completion);
    const body = (j: (typeof jobs)[number]) => ({
      max_tokens: j.options.maxTokens, temperature: j.options.temperature, top_k: j.options.topK, top_p: j.options.topP, min_p: j.options.minP, seed: j.options.seed, stop: j.options.stop,
    });
    const got = await Promise.all(jobs.map(async (j) => {
      let text = "";
      if (j.chat) {
        const st = await client.chat.completions.create({ messages: [{ role: "user", content: j.prompt }], stream: true, ...body(j) } as any) as any;
        for await (const c of st) text += c.choices[0]?.delta?.content ?? "";
      } else {
        const st = await client.completions.create({ prompt: j.prompt, stream: true, ...body(j) } as any) as any;
        for await (const c of st) text += c.choices[0]?.text ?? "";
      }
      return text;
    }));
    assert.deepEqual(got, solo);
    assert.ok(model.engine.stats.peakStepSequences > 1, "the requests were batched");
  });

  test("n, logprobs, top_logprobs, logit_bias, stop and token-id prompts", async () => {
    const r = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "The cat" }], n: 3, temperature: 1, seed: 7, max_tokens: 8, logprobs: true, top_logprobs: 2 });
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    const want = await chat("The cat", { n: 3, temperature: 1, seed: 7, maxTokens: 8 });
    assert.deepEqual(r.choices.map((c) => c.message.content), want.choices!.map((c) => c.completion));
    for (const c of r.choices) {
      assert.ok(c.logprobs!.content!.length > 0);
      for (const e of c.logprobs!.content!) { assert.ok(e.logprob <= 0); assert.equal(e.top_logprobs.length, 2); }
    }
    const greedy = await model.generate("Once upon a time", { temperature: 0, maxTokens: 4 });
    const banned = await client.completions.create({ model: "stories260K", prompt: greedy.promptTokens, max_tokens: 4, temperature: 0, logit_bias: { [greedy.completionTokens[0]!]: -100 }, logprobs: 3 });
    assert.notEqual(banned.choices[0]!.text, greedy.completion);
    assert.equal(banned.choices[0]!.logprobs!.tokens!.length, 4);
    assert.equal(banned.choices[0]!.logprobs!.top_logprobs!.length, 4);
    const long = await model.generate("Once upon a time", { temperature: 0, maxTokens: 30 });
    const stopAt = long.completion.indexOf(" play");
    assert.ok(stopAt > 0);
    const stopped = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 30, temperature: 0, stop: [" play"] });
    assert.equal(stopped.choices[0]!.text, long.completion.slice(0, stopAt));
    assert.equal(stopped.choices[0]!.finish_reason, "stop");
    const batch = await client.completions.create({ model: "stories260K", prompt: ["Once upon a time", "Lily and Ben"], max_tokens: 5, temperature: 0, n: 2 });
    assert.deepEqual(batch.choices.map((c) => c.index), [0, 1, 2, 3]);
    assert.equal(batch.choices[0]!.text, batch.choices[1]!.text);
    // a repeated prompt's full blocks come from the prefix cache
    const p = "Once upon a time there was a little girl named Lily. She loved to play outside in the park with her friends and her dog.";
    await client.completions.create({ model: "stories260K", prompt: p, max_tokens: 2, temperature: 0 });
    const again = await client.completions.create({ model: "stories260K", prompt: p, max_tokens: 2, temperature: 0 });
    assert.ok((again.usage as any).prompt_tokens_details.cached_tokens > 0, JSON.stringify(again.usage));
  });

  test("best_of: the n answered are the best_of generated with the highest log probability per token, as OpenAI defines it", async () => {
    const request = { model: "stories260K", prompt: "Once upon a time", max_tokens: 12, temperature: 1.5, seed: 7 };
    // the same seed draws the same choices: all four, with their logprobs, ranked here
    const all = await client.completions.create({ ...request, n: 4, logprobs: 0 });
    const perToken = (c: (typeof all.choices)[number]) => { const lps = c.logprobs!.token_logprobs!; return lps.reduce((a, b) => a + b, 0) / lps.length; };
    const ranked = [...all.choices].sort((a, b) => perToken(b) - perToken(a)).map((c) => c.text);
    assert.ok(new Set(ranked).size > 1, "the four choices differ");
    const best = await client.completions.create({ ...request, n: 2, best_of: 4 });
    assert.deepEqual(best.choices.map((c) => c.text), ranked.slice(0, 2));
    assert.deepEqual(best.choices.map((c) => c.index), [0, 1]);
    assert.equal(best.choices[0]!.logprobs, null, "no logprobs unless asked for");
    // every generated token counts, as OpenAI bills best_of
    assert.equal(best.usage!.completion_tokens, all.usage!.completion_tokens);
    const one = await client.completions.create({ ...request, best_of: 4, logprobs: 1 });
    assert.equal(one.choices.length, 1);
    assert.equal(one.choices[0]!.text, ranked[0]);
    assert.equal(one.choices[0]!.logprobs!.top_logprobs![0]!.constructor, Object);
  });

  test("logprobs: the tokens are the text as it shows (a word's leading space kept), join into it, and stop where a stop string cuts it", async () => {
    const tok = model.tokenizer;
    const long = await model.generate("Once upon a time", { temperature: 0, maxTokens: 16 });
    // each token's text: what the tokenizer says it adds to the prompt and the tokens before it
    const added = (n: number) => tok.decode([...long.promptTokens, ...long.completionTokens.slice(0, n)], { skipSpecialTokens: true }).length;
    const base = added(0);
    const offsets = long.completionTokens.map((_, i) => added(i) - base);
    const pieces = offsets.map((o, i) => long.completion.slice(o, i + 1 < offsets.length ? offsets[i + 1] : undefined));
    assert.ok(pieces.some((p) => p.startsWith(" ") && p.length > 1), `some token starts a word: ${JSON.stringify(pieces)}`);
    const streamed = async (body: object) => {
      const st = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", temperature: 0, logprobs: 2, stream: true, ...body } as never) as unknown as AsyncIterable<{ choices: { text: string; logprobs: { tokens: string[]; text_offset: number[] } | null }[] }>;
      const out = { text: "", tokens: [] as string[], text_offset: [] as number[] };
      for await (const c of st) {
        out.text += c.choices[0]!.text;
        out.tokens.push(...(c.choices[0]!.logprobs?.tokens ?? []));
        out.text_offset.push(...(c.choices[0]!.logprobs?.text_offset ?? []));
      }
      return out;
    };
    const whole = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 16, temperature: 0, logprobs: 2 });
    assert.equal(whole.choices[0]!.text, long.completion);
    assert.deepEqual(whole.choices[0]!.logprobs!.tokens, pieces);
    assert.deepEqual(whole.choices[0]!.logprobs!.text_offset, offsets);
    assert.deepEqual(await streamed({ max_tokens: 16 }), { text: long.completion, tokens: pieces, text_offset: offsets });

    // a stop string that begins inside a token (not at its first character): the text ends inside
    // that token, which is kept (as llama-server cuts at the token holding the stop's start); the
    // tokens after it are not part of the answer
    const j = pieces.findIndex((p, i) => i > 0 && p.length > 2 && i + 1 < pieces.length && long.completion.indexOf(p.slice(1) + pieces[i + 1]!) === offsets[i]! + 1);
    assert.ok(j > 0, JSON.stringify(pieces));
    const stop = pieces[j]!.slice(1) + pieces[j + 1]!;
    const want = { text: long.completion.slice(0, offsets[j]! + 1), tokens: pieces.slice(0, j + 1), text_offset: offsets.slice(0, j + 1) };
    const cut = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 16, temperature: 0, logprobs: 2, stop: [stop] });
    assert.equal(cut.choices[0]!.text, want.text);
    assert.deepEqual(cut.choices[0]!.logprobs!.tokens, want.tokens);
    assert.deepEqual(cut.choices[0]!.logprobs!.text_offset, want.text_offset);
    assert.equal(cut.choices[0]!.logprobs!.token_logprobs!.length, j + 1);
    assert.deepEqual(await streamed({ max_tokens: 16, stop: [stop] }), want);

    // chat: the content's tokens, each with its own UTF-8 bytes
    const wantChat = await chat("Lily and Ben", { temperature: 0, maxTokens: 10 });
    const r = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Lily and Ben" }], max_tokens: 10, temperature: 0, logprobs: true, top_logprobs: 1 });
    const content = r.choices[0]!.logprobs!.content!;
    assert.equal(content.map((e) => e.token).join(""), wantChat.completion);
    for (const e of content) assert.deepEqual(e.bytes, [...Buffer.from(e.token)]);
    // /tokenize with_pieces: a word's piece with its space, as llama-server gives it
    const pieced = await post(`${s.url}/tokenize`, { content: "Once upon a time", with_pieces: true });
    assert.deepEqual(pieced.json.tokens.map((t: { piece: string }) => t.piece), tok.encode("Once upon a time", { addSpecialTokens: false }).map((id) => tok.piece(id).replaceAll("\u2581", " ")));
  });

  test("chat logprobs: bytes are each token's own, also for byte tokens that hold part of a character", async () => {
    const tok = model.tokenizer;
    // stories260K spells CJK with byte-fallback tokens <0xNN>: make those the only likely ones
    const byteIds = tok.encode("日本語", { addSpecialTokens: false }).filter((id) => /^<0x[0-9A-F]{2}>$/.test(tok.piece(id)));
    const options = { seed: 5, temperature: 1, maxTokens: 12 };
    const want = await chat("Lily", { ...options, logitBias: Object.fromEntries(byteIds.map((id) => [id, 100])) });
    const bytesOf = (id: number) => {
      const hex = /^<0x([0-9A-F]{2})>$/.exec(tok.piece(id));
      return hex ? [parseInt(hex[1]!, 16)] : [...Buffer.from(tok.piece(id).replaceAll("\u2581", " "))];
    };
    assert.ok([...want.completion].some((ch) => ch.length > 0 && ch !== "\uFFFD" && Buffer.byteLength(ch) > 1), `a character made of byte tokens in ${JSON.stringify(want.completion)}`);
    const r = await client.chat.completions.create({
      model: "stories260K", messages: [{ role: "user", content: "Lily" }], max_tokens: options.maxTokens, temperature: 1, seed: 5, logprobs: true, top_logprobs: 2,
      logit_bias: Object.fromEntries(byteIds.map((id) => [String(id), 100])),
    });
    assert.equal(r.choices[0]!.message.content, want.completion);
    const content = r.choices[0]!.logprobs!.content!;
    assert.deepEqual(content.map((e) => e.bytes), want.completionTokens.map(bytesOf));
    assert.equal(content.map((e) => e.token).join(""), want.completion);
    for (const e of content) for (const t of e.top_logprobs) assert.ok(t.bytes!.length > 0);
  });

  test("response_format json_schema / json_object and llama-server's grammar: the content follows them; a bad schema is a 400 naming response_format.json_schema.schema", async () => {
    const schema = { type: "object", properties: { name: { type: "string", pattern: "^.{0,10}$" }, happy: { type: "boolean" } }, required: ["name", "happy"], additionalProperties: false };
    const validate = new Ajv().compile(schema);
    const r = await client.chat.completions.create({
      model: "stories260K", messages: [{ role: "user", content: "Describe Lily" }], max_tokens: 200, temperature: 0.7, seed: 5,
      response_format: { type: "json_schema", json_schema: { name: "person", schema, strict: true } },
    });
    const content = r.choices[0]!.message.content!;
    assert.equal(r.choices[0]!.finish_reason, "stop", content);
    assert.ok(validate(JSON.parse(content)), content);
    // the library's own answer for the same request: the server adds nothing and drops nothing
    const want = await chat("Describe Lily", { maxTokens: 200, temperature: 0.7, seed: 5, jsonSchema: schema });
    assert.equal(content, want.completion);
    const o = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 200, temperature: 0, response_format: { type: "json_object" } } as never);
    if ((o as { choices: { finish_reason: string }[] }).choices[0]!.finish_reason === "stop") assert.equal(typeof JSON.parse((o as { choices: { text: string }[] }).choices[0]!.text), "object");
    const g = await post(`${s.url}/v1/completions`, { prompt: "Once upon a time", max_tokens: 20, temperature: 0, grammar: 'root ::= "yes" | "no"' });
    assert.equal(g.status, 200);
    assert.ok(["yes", "no"].includes(g.json.choices[0].text), g.json.choices[0].text);
    const bad = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "x" }], response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "array", uniqueItems: true } } } });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, "response_format.json_schema.schema.uniqueItems");
    assert.match(bad.json.error.message, /jsonSchema: #\/uniqueItems: true is supported only for items of a finite set of values/);
    const badType = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "x" }], response_format: { type: "xml" } });
    assert.equal(badType.status, 400);
    assert.match(badType.json.error.message, /'response_format.type' must be "text", "json_object" or "json_schema", got "xml"/);
  });

  test("message content is data: '</s>' in a message is plain text for Model.chat and the server (parseSpecialInContent restores the old way)", async () => {
    const messages = [{ role: "user" as const, content: "Hi</s>Once upon a time" }];
    const eos = model.tokenizer.eosId!;
    const r = await model.chat(messages, { chatTemplate: CHAT_TEMPLATE, temperature: 0, maxTokens: 6 });
    assert.ok(!r.promptTokens.includes(eos), `no EOS in ${r.promptTokens}`);
    assert.equal(model.tokenizer.decode(r.promptTokens, { skipSpecialTokens: true }), "user: Hi</s>Once upon a time\nassistant:");
    const old = await model.chat(messages, { chatTemplate: CHAT_TEMPLATE, temperature: 0, maxTokens: 6, parseSpecialInContent: true });
    assert.ok(old.promptTokens.includes(eos));
    const served = await client.chat.completions.create({ model: "stories260K", messages, temperature: 0, max_tokens: 6 });
    assert.equal(served.usage!.prompt_tokens, r.promptTokens.length);
    assert.equal(served.choices[0]!.message.content, r.completion);
  });

  test("a client that disconnects mid-stream cancels its request: the engine frees its sequence and KV blocks", async () => {
    const controller = new AbortController();
    const res = await fetch(`${s.url}/v1/completions`, {
      method: "POST", signal: controller.signal, headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 400, ignore_eos: true, temperature: 0, stream: true }),
    });
    const reader = res.body!.getReader();
    let chunks = 0;
    while (chunks < 3) { await reader.read(); chunks++; }
    assert.equal(model.engine.stats.running, 1);
    controller.abort();
    await until(() => model.engine.stats.running === 0 && model.engine.stats.kv!.blocksInUse === 0, "the engine to drop the request");
  });

  test("echo, as lm-evaluation-harness scores loglikelihoods (token-id prompts, logprobs 1, max_tokens 1): the prompt's logprobs are the library's, first null", async () => {
    const prompts = [model.tokenizer.encode("Once upon a time, there was a little girl"), model.tokenizer.encode("Lily and Ben went to the park")];
    // lm-eval's local-completions payload, as it sends it
    const r = await post(`${s.url}/v1/completions`, { model: "stories260K", prompt: prompts, temperature: 0, max_tokens: 1, logprobs: 1, seed: 1234, echo: true });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    for (const [i, prompt] of prompts.entries()) {
      const want = await model.generate(prompt, { temperature: 0, maxTokens: 1, logprobs: 1, promptLogprobs: 1 });
      const choice = r.json.choices.find((c: { index: number }) => c.index === i);
      const lp = choice.logprobs;
      assert.equal(choice.text, model.tokenizer.decode(prompt, { skipSpecialTokens: true }) + want.completion);
      assert.equal(lp.tokens.length, prompt.length + 1);
      assert.equal(lp.token_logprobs[0], null);
      assert.equal(lp.top_logprobs[0], null);
      assert.deepEqual(lp.token_logprobs.slice(1), [...want.promptLogprobs!.slice(1).map((p) => p!.logprob), want.logprobs![0]!.logprob]);
      // the tokens join into the text, each at its offset from the text's start
      assert.equal(lp.tokens.join(""), choice.text);
      lp.tokens.forEach((_: string, j: number) => assert.equal(lp.text_offset[j], lp.tokens.slice(0, j).join("").length));
      // lm-eval's reading: the continuation's sum and whether each token was the greedy one
      const ctxlen = 3;
      const sum = lp.token_logprobs.slice(ctxlen, -1).reduce((a: number, b: number) => a + b, 0);
      const wantSum = want.promptLogprobs!.slice(ctxlen).reduce((a, p) => a + p!.logprob, 0);
      assert.ok(Math.abs(sum - wantSum) < 1e-9);
      // (the top one, and the prompt's own token where it is not that one, as OpenAI's and vLLM's completions list it)
      lp.top_logprobs.slice(1).forEach((top: Record<string, number>, j: number) => assert.ok(Object.values(top).includes(lp.token_logprobs[j + 1]) && Object.keys(top).length <= 2, `position ${j + 1}`));
    }

    // max_tokens 0: the prompt alone, scored; a string prompt comes back as given
    const text = "Once upon a time, there was a cat";
    const zero = await client.completions.create({ model: "stories260K", prompt: text, max_tokens: 0, echo: true, logprobs: 2 });
    const scored = await model.generate(text, { maxTokens: 0, promptLogprobs: 2 });
    assert.equal(zero.choices[0]!.text, text);
    assert.equal(zero.choices[0]!.finish_reason, "length");
    assert.deepEqual(zero.choices[0]!.logprobs!.token_logprobs, scored.promptLogprobs!.map((p) => p?.logprob ?? null));
    assert.equal(zero.usage!.completion_tokens, 0);
    // echo without logprobs: the text only
    const plain = await client.completions.create({ model: "stories260K", prompt: text, max_tokens: 4, temperature: 0, echo: true });
    assert.equal(plain.choices[0]!.text, text + (await model.generate(text, { maxTokens: 4, temperature: 0 })).completion);
    assert.equal(plain.choices[0]!.logprobs, null);

    // streamed: each choice's first chunk is the prompt and its logprobs; n choices and token-id prompts
    const streamed = await client.completions.create({ model: "stories260K", prompt: prompts, max_tokens: 5, temperature: 0.8, seed: 9, n: 2, echo: true, logprobs: 1, stream: true });
    const texts = new Map<number, string>(), firsts = new Map<number, { text: string; tokens: number }>(), lps = new Map<number, (number | null)[]>();
    for await (const chunk of streamed) {
      for (const c of chunk.choices) {
        if (!firsts.has(c.index)) firsts.set(c.index, { text: c.text, tokens: c.logprobs?.tokens?.length ?? 0 });
        texts.set(c.index, (texts.get(c.index) ?? "") + c.text);
        lps.set(c.index, [...(lps.get(c.index) ?? []), ...(c.logprobs?.token_logprobs ?? [])]);
      }
    }
    assert.equal(texts.size, 4);
    for (const [index, t] of texts) {
      const prompt = prompts[Math.floor(index / 2)]!;
      const want = await model.generate(prompt, { maxTokens: 5, temperature: 0.8, seed: 9, n: 2, logprobs: 1, promptLogprobs: 1 });
      const choice = (want.choices ?? [want])[index % 2]!;
      const promptText = model.tokenizer.decode(prompt, { skipSpecialTokens: true });
      assert.deepEqual(firsts.get(index), { text: promptText, tokens: prompt.length });
      assert.equal(t, promptText + choice.completion);
      assert.deepEqual(lps.get(index), [...want.promptLogprobs!.map((p) => p?.logprob ?? null), ...choice.logprobs!.map((p) => p.logprob)]);
    }

    // best_of with echo: the answered choices are ranked by their completions, each echoing the prompt
    const best = await post(`${s.url}/v1/completions`, { prompt: text, max_tokens: 6, temperature: 1.5, seed: 3, n: 2, best_of: 4, echo: true, logprobs: 0 });
    assert.equal(best.status, 200, JSON.stringify(best.json));
    assert.equal(best.json.choices.length, 2);
    for (const c of best.json.choices) {
      assert.ok(c.text.startsWith(text));
      assert.equal(c.logprobs.token_logprobs[0], null);
      assert.deepEqual(c.logprobs.token_logprobs.slice(0, scored.promptTokens.length), scored.promptLogprobs!.map((p) => p?.logprob ?? null));
    }
  });

  test("seed -1 is a random seed (llama.cpp's LLAMA_DEFAULT_SEED), for the server and the library; suffix \"\" and stop \"\" change nothing", async () => {
    const request = { prompt: "Once upon a time", max_tokens: 16, temperature: 1.5 };
    const fixed = (await post(`${s.url}/v1/completions`, { ...request, seed: 4294967295 })).json.choices[0].text;
    assert.equal((await post(`${s.url}/v1/completions`, { ...request, seed: 4294967295 })).json.choices[0].text, fixed);
    const random: string[] = [];
    for (let i = 0; i < 3; i++) random.push((await post(`${s.url}/v1/completions`, { ...request, seed: -1 })).json.choices[0].text);
    assert.ok(random.some((t) => t !== fixed), "seed -1 drew the same text as seed 4294967295 every time");
    const options = { maxTokens: 16, temperature: 1.5 };
    const libFixed = (await model.generate("Once upon a time", { ...options, seed: 4294967295 })).completion;
    const libRandom = await Promise.all([0, 1, 2].map(async () => (await model.generate("Once upon a time", { ...options, seed: -1 })).completion));
    assert.ok(libRandom.some((t) => t !== libFixed), "the library's seed -1 drew the same text as seed 4294967295 every time");

    const plain = { prompt: "Once upon a time", max_tokens: 12, temperature: 0 };
    const want = (await post(`${s.url}/v1/completions`, plain)).json.choices[0].text;
    for (const extra of [{ suffix: "" }, { stop: "" }, { stop: [""] }]) {
      const r = await post(`${s.url}/v1/completions`, { ...plain, ...extra });
      assert.equal(r.status, 200, `${JSON.stringify(extra)}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.choices[0].text, want, JSON.stringify(extra));
    }
    // an empty string beside others is ignored; the others still stop
    const cut = want.indexOf(" ", 2);
    const stopped = await post(`${s.url}/v1/completions`, { ...plain, stop: ["", want.slice(cut, cut + 2)] });
    assert.equal(stopped.json.choices[0].text, want.slice(0, cut));
  });

  test("400 catalogue: each names the parameter in OpenAI's error shape", async () => {
    const chatUrl = `${s.url}/v1/chat/completions`, textUrl = `${s.url}/v1/completions`;
    const msgs = [{ role: "user", content: "hi" }];
    const cases: [string, unknown, number, string | null, string | null][] = [
      [chatUrl, { messages: msgs, temperature: "hot" }, 400, "temperature", "invalid_type"],
      [chatUrl, { messages: msgs, temperature: 5 }, 400, "temperature", "invalid_value"],
      [chatUrl, { messages: msgs, top_p: 1.5 }, 400, "top_p", "invalid_value"],
      [chatUrl, { messages: msgs, top_k: 2.5 }, 400, "top_k", "invalid_type"],
      [chatUrl, { messages: msgs, min_p: -1 }, 400, "min_p", "invalid_value"],
      [chatUrl, { messages: msgs, n: 0 }, 400, "n", "invalid_value"],
      [chatUrl, { messages: msgs, n: 64 }, 400, "n", "invalid_value"],
      [chatUrl, { messages: msgs, max_tokens: 0 }, 400, "max_tokens", "invalid_value"],
      [chatUrl, { messages: msgs, max_completion_tokens: "x" }, 400, "max_completion_tokens", "invalid_type"],
      [chatUrl, { messages: msgs, presence_penalty: 3 }, 400, "presence_penalty", "invalid_value"],
      [chatUrl, { messages: msgs, frequency_penalty: -3 }, 400, "frequency_penalty", "invalid_value"],
      [chatUrl, { messages: msgs, repetition_penalty: 0 }, 400, "repetition_penalty", "invalid_value"],
      [chatUrl, { messages: msgs, seed: 1.5 }, 400, "seed", "invalid_type"],
      [chatUrl, { messages: msgs, stop: 5 }, 400, "stop", "invalid_type"],
      [chatUrl, { messages: msgs, logit_bias: { "-1": 1 } }, 400, "logit_bias", "invalid_value"],
      [chatUrl, { messages: msgs, logit_bias: { 1: 500 } }, 400, "logit_bias", "invalid_value"],
      [chatUrl, { messages: msgs, logit_bias: { 99999: 1 } }, 400, "logit_bias", "invalid_value"],
      [chatUrl, { messages: msgs, top_logprobs: 2 }, 400, "top_logprobs", "invalid_value"],
      [chatUrl, { messages: msgs, logprobs: true, top_logprobs: 50 }, 400, "top_logprobs", "invalid_value"],
      [chatUrl, { messages: msgs, stream_options: { include_usage: true } }, 400, "stream_options", "invalid_value"],
      [chatUrl, { messages: msgs, stream: "yes" }, 400, "stream", "invalid_type"],
      // a nested field is named by its full path, as OpenAI names nested parameters
      [chatUrl, { messages: msgs, stream: true, stream_options: { include_usage: "yes" } }, 400, "stream_options.include_usage", "invalid_type"],
      [textUrl, { prompt: "x", stream: true, stream_options: { include_usage: true, continuous_usage_stats: 1 } }, 400, "stream_options.continuous_usage_stats", "invalid_type"],
      [chatUrl, { messages: msgs, response_format: "json" }, 400, "response_format", "invalid_type"],
      [chatUrl, { messages: msgs, response_format: { type: "xml" } }, 400, "response_format.type", "invalid_value"],
      [chatUrl, { messages: msgs, response_format: { type: "json_schema" } }, 400, "response_format.json_schema", "missing_required_parameter"],
      [chatUrl, { messages: msgs, response_format: { type: "json_schema", json_schema: "x" } }, 400, "response_format.json_schema", "invalid_type"],
      [chatUrl, { messages: msgs, response_format: { type: "json_schema", json_schema: { name: "x", schema: 5 } } }, 400, "response_format.json_schema.schema", "invalid_value"],
      // a name is optional (as llama-server takes it); one given keeps OpenAI's rule, as a tool's function name does
      [chatUrl, { messages: msgs, response_format: { type: "json_schema", json_schema: { name: "bad name!", schema: {} } } }, 400, "response_format.json_schema.name", "invalid_value"],
      [chatUrl, { messages: msgs, response_format: { type: "json_schema", json_schema: { name: 5, schema: {} } } }, 400, "response_format.json_schema.name", "invalid_type"],
      [chatUrl, { messages: msgs, response_format: { type: "json_schema", json_schema: { name: "n".repeat(65), schema: {} } } }, 400, "response_format.json_schema.name", "invalid_value"],
      [chatUrl, { messages: msgs, response_format: { type: "json_schema", json_schema: { name: "x", schema: {}, strict: "yes" } } }, 400, "response_format.json_schema.strict", "invalid_type"],
      // a schema the grammar cannot hold (refused where the engine compiles it), strict or not
      [chatUrl, { messages: msgs, response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "array", uniqueItems: true } } } }, 400, "response_format.json_schema.schema.uniqueItems", "invalid_value"],
      [textUrl, { prompt: "x", response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", pattern: "(" } } } }, 400, "response_format.json_schema.schema.pattern", "invalid_value"],
      [chatUrl, { messages: msgs, response_format: { type: "json_schema", json_schema: { name: "x", strict: true, schema: { type: "object", properties: { a: { type: "string" } } } } } }, 400, "response_format.json_schema.schema", "invalid_value"],
      [chatUrl, { messages: msgs, functions: [{ name: "f" }] }, 400, "functions", "unsupported_parameter"],
      [chatUrl, {}, 400, "messages", "missing_required_parameter"],
      [chatUrl, { messages: [] }, 400, "messages", "invalid_type"],
      [chatUrl, { messages: [{ role: "wizard", content: "x" }] }, 400, "messages[0].role", "invalid_value"],
      [chatUrl, { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] }, 400, "messages[0].content[0]", "invalid_value"],
      [chatUrl, { messages: [{ role: "user" }] }, 400, "messages[0].content", "missing_required_parameter"],
      [chatUrl, { messages: msgs, max_tokens: 600 }, 400, "messages", "context_length_exceeded"],
      [textUrl, {}, 400, "prompt", "missing_required_parameter"],
      [textUrl, { prompt: [1.5] }, 400, "prompt", "invalid_value"],
      [textUrl, { prompt: [100000] }, 400, "prompt", "invalid_value"],
      [textUrl, { prompt: "x", logprobs: 30 }, 400, "logprobs", "invalid_value"],
      [textUrl, { prompt: "x", max_tokens: 0 }, 400, "max_tokens", "invalid_value"],
      [textUrl, { prompt: "x", echo: "yes" }, 400, "echo", "invalid_type"],
      [textUrl, { prompt: "x", suffix: "!" }, 400, "suffix", "unsupported_parameter"],
      [textUrl, { prompt: "x", stop: ["", 3] }, 400, "stop", "invalid_type"],
      [textUrl, { prompt: "x", best_of: 1, n: 2 }, 400, "best_of", "invalid_value"],
      [textUrl, { prompt: "x", best_of: 3, stream: true }, 400, "best_of", "invalid_value"],
      [textUrl, { prompt: "x", best_of: 21 }, 400, "best_of", "invalid_value"],
      [chatUrl, { messages: msgs, best_of: 2 }, 400, "best_of", "unsupported_parameter"],
      [textUrl, { prompt: "the ".repeat(600) }, 400, "prompt", "context_length_exceeded"],
      [textUrl, "{not json", 400, null, "invalid_json"],
      [textUrl, "[1, 2]", 400, null, "invalid_json"],
      [textUrl, { prompt: "x", model: "gpt-4o" }, 404, "model", "model_not_found"],
      [`${s.url}/v1/embeddings`, { input: "" }, 400, "input", "invalid_value"],
      [`${s.url}/nowhere`, {}, 404, null, "not_found"],
      // store and metadata as OpenAI's reference defines them (a boolean; up to 16 pairs, keys of up to 64 characters, string values of up to 512)
      [chatUrl, { messages: msgs, store: "yes" }, 400, "store", "invalid_type"],
      [chatUrl, { messages: msgs, metadata: "x" }, 400, "metadata", "invalid_type"],
      [chatUrl, { messages: msgs, metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) }, 400, "metadata", "invalid_value"],
      [chatUrl, { messages: msgs, metadata: { ["k".repeat(65)]: "v" } }, 400, "metadata", "invalid_value"],
      [chatUrl, { messages: msgs, metadata: { run: 3 } }, 400, "metadata.run", "invalid_type"],
      [chatUrl, { messages: msgs, metadata: { run: "v".repeat(513) } }, 400, "metadata.run", "invalid_value"],
    ];
    for (const [url, body, status, param, code] of cases) {
      const r = await post(url, body);
      const what = `${url} ${JSON.stringify(body).slice(0, 80)} -> ${r.status} ${JSON.stringify(r.json)}`;
      assert.equal(r.status, status, what);
      assert.equal(r.json.error.param, param, what);
      assert.equal(r.json.error.code, code, what);
      assert.equal(typeof r.json.error.message, "string", what);
      assert.equal(typeof r.json.error.type, "string", what);
    }
    // at the bounds: taken (nothing is stored, as with store false)
    const stored = await post(chatUrl, { messages: msgs, max_tokens: 1, store: true, metadata: { ...Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, "v"])), ["k".repeat(64)]: "v".repeat(512) } });
    assert.equal(stored.status, 200, JSON.stringify(stored.json));
    const tooLong = await post(textUrl, { prompt: "Once upon a time", max_tokens: 510 });
    assert.match(tooLong.json.error.message, /maximum context length is 512 tokens.*515 tokens \(5 in the prompt, 510 in the completion\)/);
    const wrongMethod = await fetch(chatUrl);
    assert.equal(wrongMethod.status, 405);
    assert.equal(wrongMethod.headers.get("allow"), "POST");
    assert.equal(((await wrongMethod.json()) as ErrorBody).error.code, "method_not_allowed");
    const big = await post(textUrl, { prompt: "x".repeat(5 * 2 ** 20) });
    assert.equal(big.status, 413);
    assert.equal(big.json.error.code, "request_too_large");
  });

  test("HTTP: compressed bodies (gzip, deflate, br) are read, bounded once unpacked; request ids come back; Allow names HEAD; oversized headers are a 431 in OpenAI's shape", async () => {
    const textUrl = `${s.url}/v1/completions`;
    const request = JSON.stringify({ prompt: "Once upon a time", max_tokens: 6, temperature: 0 });
    const want = (await post(textUrl, request)).json.choices[0].text;
    const sendEncoded = (encoding: string, body: Buffer) => fetch(textUrl, { method: "POST", headers: { "Content-Type": "application/json", "Content-Encoding": encoding }, body });
    for (const [encoding, pack] of [["gzip", gzipSync], ["deflate", deflateSync], ["br", brotliCompressSync]] as const) {
      const r = await sendEncoded(encoding, pack(request));
      const json = (await r.json()) as { choices: { text: string }[] };
      assert.equal(r.status, 200, `${encoding}: ${JSON.stringify(json)}`);
      assert.equal(json.choices[0]!.text, want, encoding);
    }
    // a small body that unpacks past the body limit (4 MiB) is refused once the limit is reached
    const bomb = await sendEncoded("gzip", gzipSync(Buffer.alloc(64 * 2 ** 20, 0x20)));
    assert.equal(bomb.status, 413);
    assert.equal(((await bomb.json()) as ErrorBody).error.code, "request_too_large");
    const notGzip = await sendEncoded("gzip", Buffer.from(request));
    assert.equal(notGzip.status, 400);
    assert.equal(((await notGzip.json()) as ErrorBody).error.code, "invalid_content_encoding");
    const unknown = await sendEncoded("zstd", Buffer.from(request));
    assert.equal(unknown.status, 415);
    assert.equal(((await unknown.json()) as ErrorBody).error.code, "unsupported_content_encoding");

    // the client's X-Request-Id comes back, on answers and errors alike; without one the server makes one
    const withId = await post(textUrl, request, { "X-Request-Id": "trace-42" });
    assert.equal(withId.headers.get("x-request-id"), "trace-42");
    assert.equal((await post(textUrl, { prompt: 5 }, { "X-Request-Id": "trace-43" })).headers.get("x-request-id"), "trace-43");
    const ids = new Set([(await post(textUrl, request)).headers.get("x-request-id"), (await post(textUrl, request)).headers.get("x-request-id")]);
    assert.equal(ids.size, 2);
    for (const id of ids) assert.match(id!, /^req_[0-9a-f]{32}$/);
    const created = await client.completions.create({ model: "stories260K", prompt: "Once", max_tokens: 2 });
    assert.match((created as unknown as { _request_id: string })._request_id, /^req_/);

    // a GET route takes HEAD too, and says so when asked for a method it does not take
    const wrong = await fetch(`${s.url}/v1/models`, { method: "DELETE" });
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.get("allow"), "GET, HEAD");
    const head = await fetch(`${s.url}/v1/models`, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), "");

    // headers past node's limit: the answer is OpenAI's error shape, as every other error
    // (on a socket of its own: fetch reports the connection the server closes, not the answer)
    const sock = connect(Number(new URL(s.url).port), "127.0.0.1");
    let answer = "";
    sock.on("data", (d: Buffer) => (answer += d.toString()));
    sock.on("error", () => undefined);
    sock.write(`GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: ${"x".repeat(20_000)}\r\n\r\n`);
    await new Promise((resolve) => sock.on("close", resolve));
    assert.match(answer, /^HTTP\/1\.1 431 /);
    assert.equal((JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as ErrorBody).error.code, "headers_too_large");
  });

  test("GET /props, llama-server's: the context a request has (n_ctx), the sequences run at once, the chat template, no image or audio input; guarded by an API key", async () => {
    // the judge: llama-server's handle_props fields (default_generation_settings.n_ctx, total_slots,
    // model_path, modalities, chat_template) and its API-key middleware (/props is not public); it was a 404
    const r = await fetch(`${s.url}/props`);
    assert.equal(r.status, 200);
    const props = (await r.json()) as { default_generation_settings: { n_ctx: number; params: Record<string, unknown> }; total_slots: number; model_path: string; model_alias: string; modalities: unknown; chat_template: string };
    assert.equal(props.default_generation_settings.n_ctx, model.contextSize);
    assert.equal(props.default_generation_settings.n_ctx, 512);
    assert.equal(props.default_generation_settings.params["n_predict"], -1);
    assert.equal(props.total_slots, 32);
    assert.equal(props.model_path, model.path);
    assert.equal(props.model_alias, "stories260K");
    assert.deepEqual(props.modalities, { vision: false, audio: false });
    assert.equal(props.chat_template, CHAT_TEMPLATE);
    const keyed = await serveStories({}, { apiKey: "k" });
    try {
      assert.equal((await fetch(`${keyed.url}/props`)).status, 401);
      const ok = await fetch(`${keyed.url}/props`, { headers: { Authorization: "Bearer k" } });
      assert.equal(ok.status, 200);
      assert.equal(((await ok.json()) as { total_slots: number }).total_slots, keyed.model.engine.maxSequences);
    } finally {
      await keyed.close();
    }
  });

  test("GET /v1/models, /health, /metrics; POST /tokenize, /detokenize", async () => {
    // the requests /metrics is read for below are made here (a completion answered 200, a body
    // refused 413): run alone (--test-name-pattern), the test once found no series to read
    assert.equal((await post(`${s.url}/v1/completions`, { prompt: "Once upon a time", max_tokens: 4, temperature: 0 })).status, 200);
    assert.equal((await post(`${s.url}/v1/completions`, { prompt: "x".repeat(5 * 2 ** 20) })).status, 413);
    const models = (await (await fetch(`${s.url}/v1/models`)).json()) as ModelList;
    assert.equal(models.data[0]!.id, "stories260K");
    assert.equal(models.data[0]!.meta.n_ctx, 512);
    assert.deepEqual((await client.models.list()).data.map((m) => m.id), ["stories260K"]);
    // OpenAI's models.retrieve: the list's entry, by the id or the file's name
    const listed = models.data[0]!;
    assert.deepEqual(await client.models.retrieve("stories260K"), listed);
    assert.deepEqual(await (await fetch(`${s.url}/v1/models/stories260K.gguf`)).json(), listed);
    const missing = await fetch(`${s.url}/v1/models/gpt-4o`);
    assert.equal(missing.status, 404);
    assert.equal(((await missing.json()) as ErrorBody).error.code, "model_not_found");
    await assert.rejects(client.models.retrieve("gpt-4o"), (e: { status: number }) => e.status === 404);
    assert.deepEqual(await (await fetch(`${s.url}/health`)).json(), { status: "ok", requests_running: 0, requests_waiting: 0 });
    const tok = await post(`${s.url}/tokenize`, { content: "Once upon a time", add_special: true });
    assert.deepEqual(tok.json.tokens, model.tokenizer.encode("Once upon a time"));
    const detok = await post(`${s.url}/detokenize`, { tokens: tok.json.tokens.slice(1) });
    // (llama-server's pieces joined, the first word's space kept: judged in test/server-detokenize.test.ts)
    assert.equal(detok.json.content, " Once upon a time");
    assert.equal((await post(`${s.url}/detokenize`, { tokens: [-1] })).json.error.param, "tokens");
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    for (const name of ["tsllm_http_requests_total{endpoint=\"/v1/completions\",status=\"200\"}", "tsllm_time_to_first_token_seconds_bucket", "tsllm_time_per_output_token_seconds_count",
      "tsllm_e2e_request_latency_seconds_sum", "tsllm_request_queue_time_seconds_count", "tsllm_prompt_tokens_total", "tsllm_generation_tokens_total", "tsllm_requests_running 0",
      "tsllm_requests_waiting 0", "tsllm_kv_blocks_used 0", "tsllm_kv_blocks_total", "tsllm_prefix_cache_hit_tokens_total", "tsllm_preemptions_total 0", "status=\"400\"", "status=\"413\""]) {
      assert.ok(metrics.includes(name), `/metrics has ${name}`);
    }
    assert.match(metrics, /^tsllm_generation_tokens_total [1-9]\d*$/m);
  });

  test("metrics: the draft passes of speculative requests on the served model (tsllm_draft_passes_total, tsllm_draft_rows_total) as the draft model was called", async () => {
    // (the HTTP API takes no draft model: the requests run on the served model's engine, in process)
    const draftModel = await loadModel(sharedFile(STORIES)!, { threads: 1, contextSize: 512, quantize: "q4_0" });
    const count = countPasses(draftModel.languageModel);
    const scrape = async () => {
      const text = await (await fetch(`${s.url}/metrics`)).text();
      assert.match(text, /^# TYPE tsllm_draft_passes_total counter$/m);
      assert.match(text, /^# TYPE tsllm_draft_rows_total counter$/m);
      return [Number(/^tsllm_draft_passes_total (\d+)$/m.exec(text)![1]), Number(/^tsllm_draft_rows_total (\d+)$/m.exec(text)![1])];
    };
    try {
      const before = await scrape();
      await Promise.all(["Once upon a time", "Lily and Ben", "The little dog"].map((prompt, i) => model.generate(prompt, { temperature: 0, maxTokens: 24, draftModel, draftTokens: 3 + i })));
      assert.ok(count.passes > 0);
      const after = await scrape();
      assert.deepEqual([after[0]! - before[0]!, after[1]! - before[1]!], [count.passes, count.rows]);
    } finally {
      draftModel.dispose();
    }
  });

  test("a base URL without /v1 (llama-server serves /chat/completions and /models too): the openai client's chat and model list; an API key guards them", async () => {
    const bare = new OpenAI({ baseURL: s.url, apiKey: "none", maxRetries: 0 });
    const request = { model: "stories260K", messages: [{ role: "user" as const, content: "Once upon a time" }], max_tokens: 8, temperature: 0 };
    const r = await bare.chat.completions.create(request);
    assert.equal(r.choices[0]!.message.content, (await client.chat.completions.create(request)).choices[0]!.message.content);
    assert.deepEqual((await bare.models.list()).data, (await client.models.list()).data);
    const keyed = await startServer(model, { port: 0, chatTemplate: CHAT_TEMPLATE, apiKey: "sesame" });
    try {
      for (const [method, path] of [["POST", "/chat/completions"], ["GET", "/models"]] as const) {
        const init = { method, ...(method === "POST" ? { headers: { "Content-Type": "application/json" }, body: JSON.stringify(request) } : {}) };
        assert.equal((await fetch(`${keyed.url}${path}`, init)).status, 401, path);
        assert.equal((await fetch(`${keyed.url}${path}`, { ...init, headers: { ...init.headers, Authorization: "Bearer sesame" } })).status, 200, path);
      }
    } finally {
      await keyed.close(1000);
    }
  });

  test("a request that fails inside the engine fails alone with a 500 in OpenAI's shape; the server keeps serving", async () => {
    const lm = model.languageModel as unknown as { passBatch: (...a: unknown[]) => unknown };
    const original = lm.passBatch;
    let failures = 1;
    lm.passBatch = function (this: unknown, ...a: unknown[]) {
      if (failures-- > 0) throw new Error("injected engine failure");
      return original.apply(this, a);
    };
    try {
      const r = await post(`${s.url}/v1/completions`, { prompt: "Once upon a time", max_tokens: 4 });
      assert.equal(r.status, 500);
      assert.equal(r.json.error.type, "server_error");
      assert.match(r.json.error.message, /injected engine failure/);
      failures = 1;
      // a stream that fails before its first event is answered with the 500 itself (nothing was sent)
      await assert.rejects(client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 4, stream: true }), (e: unknown) => e instanceof OpenAI.APIError && e.status === 500 && /injected engine failure/.test(e.message));
    } finally {
      lm.passBatch = original;
    }
    const ok = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 4, temperature: 0 });
    assert.equal(ok.choices[0]!.text, (await model.generate("Once upon a time", { maxTokens: 4, temperature: 0 })).completion);
  });
});

describe("tsllm serve limits", { skip }, () => {
  test("--max-queue counts only requests that wait for a free sequence: 0 still runs what fits the free sequences", async () => {
    const s = await serveStories({ maxSequences: 2 }, { maxQueue: 0 });
    try {
      // an idle server runs a request at once: nothing waits
      assert.equal((await post(`${s.url}/v1/completions`, { prompt: "x", max_tokens: 1 })).status, 200);
      // a burst as large as the free sequences all runs, even before the engine's next step schedules it
      const controller = new AbortController();
      const body = JSON.stringify({ prompt: "Once upon a time", max_tokens: 400, ignore_eos: true, stream: true });
      const open = () => fetch(`${s.url}/v1/completions`, { method: "POST", signal: controller.signal, headers: { "Content-Type": "application/json" }, body });
      const burst = await Promise.all([open(), open()]);
      assert.deepEqual(burst.map((r) => r.status), [200, 200]);
      // with every sequence taken, one more would wait: 0 may
      const full = await post(`${s.url}/v1/completions`, { prompt: "x", max_tokens: 1 });
      assert.equal(full.status, 429);
      assert.equal(full.json.error.code, "queue_full");
      controller.abort();
      await until(() => s.model.engine.stats.running === 0 && s.model.engine.stats.waiting === 0, "the engine to drop the burst");
    } finally {
      await s.close();
    }
  });

  test("a request the shutdown cancels ends in an error the client sees: a 503 in OpenAI's shape, or an error event that ends the stream", async () => {
    const s = await serveStories({ maxSequences: 2 });
    try {
      const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "none", maxRetries: 0 });
      const body = { prompt: "Once upon a time", max_tokens: 400, ignore_eos: true, temperature: 0 };
      const whole = post(`${s.url}/v1/completions`, body);
      const stream = (await client.completions.create({ model: "stories260K", ...body, stream: true }))[Symbol.asyncIterator]();
      await stream.next();
      await until(() => s.model.engine.stats.running === 2, "both requests to run");
      // no grace: both are cancelled by the server, not by their clients
      await s.server.close(0);
      const r = await whole;
      assert.equal(r.status, 503, JSON.stringify(r.json));
      assert.equal(r.json.error.type, "server_error");
      assert.equal(r.json.error.code, "shutting_down");
      assert.match(r.json.error.message, /shut down before the request finished/);
      await assert.rejects(async () => { while (!(await stream.next()).done) { /* the error arrives in the stream */ } }, /shut down before the request finished/);
    } finally {
      await s.close();
    }
  });

  test("--cors: the preflight allows every header the openai client sends from a browser (its X-Stainless-* ones included)", async () => {
    const origin = "http://app.example";
    const s = await serveStories({}, { cors: origin, apiKey: "sekret" });
    try {
      // the headers the real client puts on a request, as a browser would list them in its preflight
      let sent: Headers | undefined;
      const client = new OpenAI({
        baseURL: `${s.url}/v1`, apiKey: "sekret", organization: "org-1", project: "proj-1", maxRetries: 0,
        fetch: (url, init) => { sent = new Headers(init?.headers); return fetch(url, init); },
      });
      await client.completions.create({ model: "stories260K", prompt: "x", max_tokens: 1 });
      // CORS-safelisted headers need no permission (content-type application/json does)
      const safelisted = new Set(["accept", "accept-language", "content-language"]);
      const asked = [...sent!.keys()].filter((h) => !safelisted.has(h));
      assert.ok(asked.some((h) => h.startsWith("x-stainless-")) && asked.includes("openai-organization"), asked.join(", "));
      const pre = await fetch(`${s.url}/v1/completions`, { method: "OPTIONS", headers: { Origin: origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": asked.join(",") } });
      assert.equal(pre.status, 204);
      assert.equal(pre.headers.get("access-control-allow-origin"), origin);
      assert.match(pre.headers.get("access-control-allow-methods")!, /\bPOST\b/);
      const allowed = new Set(pre.headers.get("access-control-allow-headers")!.split(",").map((h) => h.trim().toLowerCase()));
      for (const h of asked) assert.ok(allowed.has(h), `${h} is allowed (${[...allowed].join(", ")})`);
    } finally {
      await s.close();
    }
  });

  test("metrics: a client that leaves while its request waits counts as 499 (nginx's client closed request), not 200", async () => {
    const s = await serveStories({ maxSequences: 1 });
    try {
      const controller = new AbortController();
      const running = await fetch(`${s.url}/v1/completions`, { method: "POST", signal: controller.signal, headers: { "Content-Type": "application/json" }, body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 400, ignore_eos: true, stream: true }) });
      await running.body!.getReader().read();
      const leaving = new AbortController();
      const queued = fetch(`${s.url}/v1/completions`, { method: "POST", signal: leaving.signal, headers: { "Content-Type": "application/json" }, body: JSON.stringify({ prompt: "x", max_tokens: 4 }) }).catch(() => undefined);
      await until(() => s.model.engine.stats.waiting === 1, "the second request to wait");
      leaving.abort();
      await queued;
      const counted = async () => (await (await fetch(`${s.url}/metrics`)).text()).match(/^tsllm_http_requests_total\{endpoint="\/v1\/completions",status="\d+"\} \d+$/gm) ?? [];
      await until(async () => (await counted()).length > 0, "the request that left to be counted", 5000).catch(() => undefined);
      assert.deepEqual(await counted(), ['tsllm_http_requests_total{endpoint="/v1/completions",status="499"} 1']);
      controller.abort();
      await until(() => s.model.engine.stats.running === 0, "the engine to drop the stream");
    } finally {
      await s.close();
    }
  });

  test("metrics: a streamed request its client leaves mid-stream counts as 499, with its tokens, TTFT and latency, as a non-streamed one does", async () => {
    const s = await serveStories();
    try {
      const scrape = async () => {
        const text = await (await fetch(`${s.url}/metrics`)).text();
        const value = (re: RegExp) => Number(re.exec(text)?.[1] ?? 0);
        return {
          left: value(/^tsllm_http_requests_total\{endpoint="\/v1\/completions",status="499"\} (\d+)$/m),
          ok: value(/^tsllm_http_requests_total\{endpoint="\/v1\/completions",status="200"\} (\d+)$/m),
          generated: value(/^tsllm_generation_tokens_total (\d+)$/m),
          prompt: value(/^tsllm_prompt_tokens_total (\d+)$/m),
          ttft: value(/^tsllm_time_to_first_token_seconds_count (\d+)$/m),
          e2e: value(/^tsllm_e2e_request_latency_seconds_count (\d+)$/m),
        };
      };
      const before = await scrape();
      const controller = new AbortController();
      const res = await fetch(`${s.url}/v1/completions`, { method: "POST", signal: controller.signal, headers: { "Content-Type": "application/json" }, body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 400, ignore_eos: true, stream: true, temperature: 0 }) });
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = "";
      let chunks = 0;
      while (chunks < 5) {
        const { value, done } = await reader.read();
        assert.ok(!done, "the stream ended before the client left");
        text += decoder.decode(value, { stream: true });
        chunks = (text.match(/^data: \{.*"text":/gm) ?? []).length;
      }
      controller.abort();
      await until(async () => (await scrape()).left > before.left, "the request that left to be counted", 10_000);
      await until(async () => (await scrape()).ttft > before.ttft, "its generation to be observed", 10_000);
      const after = await scrape();
      assert.deepEqual([after.left - before.left, after.ok - before.ok], [1, 0], "499, not 200");
      assert.ok(after.generated - before.generated >= chunks, `${after.generated - before.generated} tokens counted, ${chunks} received`);
      assert.ok(after.prompt > before.prompt);
      assert.deepEqual([after.ttft - before.ttft, after.e2e - before.e2e], [1, 1]);
    } finally {
      await s.close();
    }
  });

  test("Expect: 100-continue: a request its headers refuse (401 bad key, 413 declared too large) is answered before the body is asked for; one they pass gets 100 Continue", async () => {
    const s = await serveStories({}, { apiKey: "sekret", bodyLimit: 1000 });
    /** the request's headers sent alone, and what the server answers while the body is held back */
    const headersOnly = async (headers: string): Promise<string> => {
      const sock = connect(Number(new URL(s.url).port), "127.0.0.1");
      let answer = "";
      sock.on("data", (d: Buffer) => (answer += d.toString()));
      sock.on("error", () => undefined);
      sock.write(`POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n${headers}\r\n`);
      await until(() => answer.includes("\r\n\r\n"), "the server's first answer");
      sock.destroy();
      return answer;
    };
    try {
      assert.match(await headersOnly("Content-Length: 50\r\nAuthorization: Bearer wrong\r\n"), /^HTTP\/1\.1 401 /);
      assert.match(await headersOnly("Content-Length: 5000\r\nAuthorization: Bearer sekret\r\n"), /^HTTP\/1\.1 413 /);
      assert.match(await headersOnly("Content-Length: 50\r\nAuthorization: Bearer sekret\r\n"), /^HTTP\/1\.1 100 Continue/);
      // the whole exchange, as curl makes it: the body follows the 100 and the answer follows the body
      const body = JSON.stringify({ prompt: "Once", max_tokens: 2, temperature: 0 });
      const sock = connect(Number(new URL(s.url).port), "127.0.0.1");
      let answer = "";
      sock.on("data", (d: Buffer) => (answer += d.toString()));
      sock.write(`POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nAuthorization: Bearer sekret\r\nContent-Length: ${body.length}\r\n\r\n`);
      await until(() => answer.includes("100 Continue"), "100 Continue");
      sock.write(body);
      await until(() => /HTTP\/1\.1 200 [\s\S]*"choices"/.test(answer), "the answer");
      sock.destroy();
    } finally {
      await s.close();
    }
  });

  test("queue full: 429 with Retry-After at once, naming maxQueue as the library set it; --api-key: 401 without the bearer key", async () => {
    const s = await serveStories({ maxSequences: 1 }, { maxQueue: 1, apiKey: "sekret" });
    try {
      const auth = { Authorization: "Bearer sekret" };
      assert.equal((await post(`${s.url}/v1/completions`, { prompt: "x", max_tokens: 1 })).status, 401);
      const wrong = await post(`${s.url}/v1/completions`, { prompt: "x", max_tokens: 1 }, { Authorization: "Bearer sekreT" });
      assert.equal(wrong.status, 401);
      assert.equal(wrong.json.error.code, "invalid_api_key");
      assert.equal((await fetch(`${s.url}/health`)).status, 200, "/health needs no key");
      const controller = new AbortController();
      const body = JSON.stringify({ prompt: "Once upon a time", max_tokens: 400, ignore_eos: true, stream: true });
      const running = await fetch(`${s.url}/v1/completions`, { method: "POST", signal: controller.signal, headers: { ...auth, "Content-Type": "application/json" }, body });
      await running.body!.getReader().read();
      const waiting = fetch(`${s.url}/v1/completions`, { method: "POST", signal: controller.signal, headers: { ...auth, "Content-Type": "application/json" }, body }).catch(() => undefined);
      await until(() => s.model.engine.stats.waiting === 1, "the second request to wait");
      const full = await post(`${s.url}/v1/completions`, { prompt: "x", max_tokens: 1 }, auth);
      assert.equal(full.status, 429);
      assert.equal(full.headers.get("retry-after"), "1");
      assert.equal(full.json.error.code, "queue_full");
      assert.equal(full.json.error.message, "the server is busy: 1 request is waiting for a free sequence (at most 1 may wait: maxQueue); retry later");
      controller.abort();
      await waiting;
      await until(() => s.model.engine.stats.running === 0 && s.model.engine.stats.waiting === 0, "the engine to drop both");
      assert.equal((await post(`${s.url}/v1/completions`, { prompt: "x", max_tokens: 1 }, auth)).status, 200);
    } finally {
      await s.close();
    }
  });
});
