import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import type { Model } from "../src/index.js";
import { disposeSharedLlama, llamaCppRun } from "./helpers/llama-cpp-oracle.js";
import { post, serveStories, skipStories as skip, STORIES } from "./helpers/serve.js";
import { sharedFile } from "./helpers/shared.js";

/**
 * The token that ends a generation (EOS) has a logprob like any other: OpenAI's legacy
 * completions, vLLM and llama-server list it after the completion's tokens. lm-evaluation-harness
 * scores a continuation with `echo`, `max_tokens: 1`, `logprobs: 1` and reads
 * `token_logprobs[ctxlen:-1]`: where the model's greedy token after the prompt is EOS, a missing
 * entry drops the continuation's last logprob. EOS is made the greedy choice with `logit_bias`;
 * its logprob is judged against llama.cpp's unbiased distribution after the prompt (logprobs
 * describe the model's distribution, before the bias).
 */
describe("the end-of-generation token's logprob (stories260K)", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  let model: Model;
  let client: OpenAI;
  let prompt: number[];
  let eos: number;
  /** llama.cpp's log-probabilities after the prompt */
  let ref: Float64Array;
  before(async () => {
    s = await serveStories();
    model = s.model;
    client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "none", maxRetries: 0 });
    prompt = model.tokenizer.encode("Once upon a time, there was a little girl named Lily. She");
    eos = model.tokenizer.eosId!;
    ref = (await llamaCppRun(sharedFile(STORIES)!, prompt, { decodeSteps: 0 })).promptLogprobs;
  });
  after(async () => {
    await s?.close();
    await disposeSharedLlama();
  });

  const forced = () => ({ [eos]: 100 });
  /** ids by llama.cpp's log-prob, best first (lower id on ties) */
  const ranking = () => [...ref.keys()].sort((a, b) => ref[b]! - ref[a]! || a - b);
  const near = (ours: number, theirs: number, what: string) => assert.ok(Math.abs(ours - theirs) < 1e-4, `${what}: ${ours} vs llama.cpp ${theirs}`);

  test("library: endToken holds the end token and its logprob; completionTokens and logprobs keep one entry per completion token; a stream's last step carries it", async () => {
    assert.ok(ranking()[0] !== eos, "EOS is not already the greedy token: the bias decides it");
    const r = await model.generate(prompt, { temperature: 0, maxTokens: 4, logprobs: 2, logitBias: forced() });
    assert.equal(r.finishReason, "stop");
    assert.deepEqual(r.completionTokens, []);
    assert.deepEqual(r.logprobs, []);
    assert.equal(r.endToken?.token, eos);
    near(r.endToken!.logprob!.logprob, ref[eos]!, "EOS");
    assert.deepEqual(r.endToken!.logprob!.top.map((t) => t.token), ranking().slice(0, 2));
    for (const t of r.endToken!.logprob!.top) near(t.logprob, ref[t.token]!, `top token ${t.token}`);
    // without logprobs: the token alone
    assert.deepEqual((await model.generate(prompt, { temperature: 0, maxTokens: 4, logitBias: forced() })).endToken, { token: eos });
    const steps = [];
    for await (const step of model.stream(prompt, { temperature: 0, maxTokens: 4, logprobs: 2, logitBias: forced() })) steps.push(step);
    assert.deepEqual(steps.at(-1), { type: "end", token: undefined, text: "", endToken: r.endToken });
    // a completion cut by maxTokens has none
    assert.equal((await model.generate(prompt, { temperature: 0, maxTokens: 2, logprobs: 0 })).endToken, undefined);
  });

  test("/v1/completions as lm-evaluation-harness scores: echo, max_tokens 1, logprobs 1; the EOS entry comes last, so [ctxlen:-1] is the prompt's", async () => {
    const body = { model: "stories260K", prompt: [prompt], temperature: 0, max_tokens: 1, logprobs: 1, echo: true, logit_bias: forced() };
    const r = await post(`${s.url}/v1/completions`, body);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const choice = r.json.choices[0];
    const lp = choice.logprobs;
    const text = model.tokenizer.decode(prompt, { skipSpecialTokens: true });
    assert.equal(choice.text, text);
    assert.equal(choice.finish_reason, "stop");
    assert.equal(lp.tokens.length, prompt.length + 1);
    // the end token by its own text (as OpenAI's "<|endoftext|>"), at the text's end; the text does not hold it
    assert.equal(lp.tokens.at(-1), "</s>");
    assert.equal(lp.text_offset.at(-1), text.length);
    near(lp.token_logprobs.at(-1), ref[eos]!, "EOS");
    // (the most likely token, then the end token itself, which the bias chose: OpenAI's and vLLM's completions list the chosen token too)
    assert.deepEqual(Object.keys(lp.top_logprobs.at(-1)), [new TextDecoder().decode(model.tokenizer.tokenBytes(ranking()[0]!)), "</s>"]);
    // lm-eval's reading: the continuation's sum is the prompt's scored tokens
    const scored = await model.generate(prompt, { maxTokens: 0, promptLogprobs: 0 });
    const ctxlen = 4;
    const sum = lp.token_logprobs.slice(ctxlen, -1).reduce((a: number, b: number) => a + b, 0);
    assert.ok(Math.abs(sum - scored.promptLogprobs!.slice(ctxlen).reduce((a, p) => a + p!.logprob, 0)) < 1e-9);
    // usage counts every token sampled, the end token too, as llama-server's n_decoded (server-task.cpp's usage reads it)
    assert.equal(r.json.usage.completion_tokens, 1);

    // streamed: the same entries
    const streamed = await client.completions.create({ ...body, stream: true } as never) as unknown as AsyncIterable<{ choices: { logprobs: { tokens: string[]; token_logprobs: number[]; text_offset: number[] } | null }[] }>;
    const tokens: string[] = [], logprobs: number[] = [], offsets: number[] = [];
    for await (const chunk of streamed) {
      for (const c of chunk.choices) {
        tokens.push(...(c.logprobs?.tokens ?? []));
        logprobs.push(...(c.logprobs?.token_logprobs ?? []));
        offsets.push(...(c.logprobs?.text_offset ?? []));
      }
    }
    assert.deepEqual(tokens, lp.tokens);
    assert.deepEqual(logprobs, lp.token_logprobs);
    assert.deepEqual(offsets, lp.text_offset);

    // without echo: the EOS entry alone, streamed or not
    const plain = await client.completions.create({ model: "stories260K", prompt: [prompt], temperature: 0, max_tokens: 3, logprobs: 0, logit_bias: forced() });
    assert.deepEqual(plain.choices[0]!.logprobs!.tokens, ["</s>"]);
    assert.deepEqual(plain.choices[0]!.logprobs!.text_offset, [0]);
    near(plain.choices[0]!.logprobs!.token_logprobs![0]!, ref[eos]!, "EOS without echo");
  });

  test("a completion ending at EOS after some tokens lists it after them; one cut by max_tokens has none", async () => {
    // the bias that makes EOS win only after a few tokens: found by the library, checked on the wire
    let bias = 0, want;
    for (bias = 2; bias <= 30; bias += 1) {
      want = await model.generate(prompt, { temperature: 0, maxTokens: 12, logprobs: 1, logitBias: { [eos]: bias } });
      if (want.endToken && want.completionTokens.length >= 2) break;
    }
    assert.ok(want?.endToken && want.completionTokens.length >= 2, "a bias ends the completion at EOS after two tokens or more");
    const r = await client.completions.create({ model: "stories260K", prompt: [prompt], temperature: 0, max_tokens: 12, logprobs: 1, logit_bias: { [eos]: bias } });
    const lp = r.choices[0]!.logprobs!;
    assert.equal(r.choices[0]!.text, want.completion);
    assert.deepEqual(lp.token_logprobs, [...want.logprobs!.map((p) => p.logprob), want.endToken.logprob!.logprob]);
    assert.equal(lp.tokens!.slice(0, -1).join(""), want.completion);
    assert.equal(lp.text_offset!.at(-1), want.completion.length);
    const streamed = await client.completions.create({ model: "stories260K", prompt: [prompt], temperature: 0, max_tokens: 12, logprobs: 1, logit_bias: { [eos]: bias }, stream: true });
    const all: number[] = [];
    for await (const chunk of streamed) for (const c of chunk.choices) all.push(...(c.logprobs?.token_logprobs ?? []));
    assert.deepEqual(all, lp.token_logprobs);

    const cut = await client.completions.create({ model: "stories260K", prompt: [prompt], temperature: 0, max_tokens: 1, logprobs: 1 });
    assert.equal(cut.choices[0]!.finish_reason, "length");
    assert.equal(cut.choices[0]!.logprobs!.tokens!.length, 1);
  });

  test("chat: logprobs.content stops at the reply's content, as OpenAI's (the end of turn is not listed)", async () => {
    const request = { model: "stories260K", messages: [{ role: "user" as const, content: "Lily" }], temperature: 0, max_tokens: 4, logprobs: true, logit_bias: forced() };
    const r = await client.chat.completions.create(request);
    assert.equal(r.choices[0]!.finish_reason, "stop");
    assert.equal(r.choices[0]!.message.content, "");
    assert.deepEqual(r.choices[0]!.logprobs!.content, []);
    const streamed = await client.chat.completions.create({ ...request, stream: true });
    const entries = [];
    for await (const chunk of streamed) for (const c of chunk.choices) entries.push(...(c.logprobs?.content ?? []));
    assert.deepEqual(entries, []);
  });
});
