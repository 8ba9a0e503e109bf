import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { after, test } from "node:test";
import { promisify } from "node:util";
import { tokenLogprobs } from "../src/generation/logprobs.js";
import { loadModel } from "../src/index.js";
import type { LlamaContextSequence } from "node-llama-cpp";
import { disposeSharedLlama, llamaCppRun, llamaToken, sharedLlama } from "./helpers/llama-cpp-oracle.js";
import { post, serveStories } from "./helpers/serve.js";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

test("tokenLogprobs: hand-computed log-softmax, top k best first with the lower id on ties", () => {
  // softmax([0, ln 3, 0, 0]) = [1/6, 1/2, 1/6, 1/6]
  const row = new Float32Array([0, Math.log(3), 0, 0]);
  const r = tokenLogprobs(row, 2, 3);
  assert.equal(r.token, 2);
  assert.ok(Math.abs(r.logprob - Math.log(1 / 6)) < 1e-6);
  assert.deepEqual(r.top.map((t) => t.token), [1, 0, 2]);
  assert.ok(Math.abs(r.top[0]!.logprob - Math.log(1 / 2)) < 1e-6);
  assert.deepEqual(tokenLogprobs(row, 1, 0).top, []);
  assert.deepEqual(tokenLogprobs(row, 1, 10).top.map((t) => t.token), [1, 0, 2, 3]);
  assert.deepEqual(tokenLogprobs(new Float32Array([5, -1, 7, 7, 6]), 0, 4).top.map((t) => t.token), [2, 3, 4, 0]);
});

const MODEL = "models/stories260K.gguf";
const EXPECTED = "models/stories260K.expected.json";
const skip = skipWithoutShared(MODEL) || skipWithoutShared(EXPECTED);
after(disposeSharedLlama);

/** ids sorted by llama.cpp's log-prob, best first (lower id on ties) */
const ranking = (lp: Float64Array) => [...lp.keys()].sort((a, b) => lp[b]! - lp[a]! || a - b);

test("stories260K: greedy logprobs (top 5) equal llama.cpp's next-token distributions", { skip }, async () => {
  const c = JSON.parse(readFileSync(sharedFile(EXPECTED)!, "utf8")).cases[0];
  const steps = 16;
  const ref = await llamaCppRun(sharedFile(MODEL)!, c.promptTokens, { decodeSteps: steps - 1 });
  const dists = [ref.promptLogprobs, ...ref.stepLogprobs];
  const model = await loadModel(sharedFile(MODEL)!, { backend: "reference" });
  try {
    const r = await model.generate(c.prompt, { temperature: 0, maxTokens: steps, logprobs: 5 });
    assert.equal(r.logprobs!.length, steps);
    const streamed: number[] = [];
    for await (const s of model.stream(c.prompt, { temperature: 0, maxTokens: 3, logprobs: 1 })) if (s.logprob) streamed.push(s.logprob.token);
    assert.deepEqual(streamed, r.completionTokens.slice(0, 3));
    r.logprobs!.forEach((lp, i) => {
      const dist = dists[i]!;
      assert.equal(lp.token, r.completionTokens[i]);
      assert.ok(Math.abs(lp.logprob - dist[lp.token]!) < 1e-4, `step ${i}: ${lp.logprob} vs llama.cpp ${dist[lp.token]}`);
      assert.deepEqual(lp.top.map((t) => t.token), ranking(dist).slice(0, 5), `step ${i} top 5`);
      for (const t of lp.top) assert.ok(Math.abs(t.logprob - dist[t.token]!) < 1e-4, `step ${i} token ${t.token}`);
    });
  } finally {
    model.dispose();
  }
});

test("tsllm generate --logit-bias ID=-inf bans llama.cpp's top token; --logprobs K in --json", { skip }, async () => {
  const c = JSON.parse(readFileSync(sharedFile(EXPECTED)!, "utf8")).cases[0];
  const ref = await llamaCppRun(sharedFile(MODEL)!, c.promptTokens, { decodeSteps: 0 });
  const [best, second] = ranking(ref.promptLogprobs);
  const { stdout } = await promisify(execFile)(process.execPath, [
    "--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "generate", "--model", sharedFile(MODEL)!,
    "--prompt", c.prompt, "--temperature", "0", "--max-tokens", "1", "--logit-bias", `${best}=-inf`, "--logprobs", "2", "--json",
  ], { cwd: PROJECT_ROOT });
  const out = JSON.parse(stdout);
  assert.deepEqual(out.completionTokens, [second]);
  // logprobs are the model's own distribution, before the bias
  assert.deepEqual(out.logprobs[0].top.map((t: { token: number }) => t.token), [best, second]);
  const run = (bias: string) => promisify(execFile)(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "generate", "--model", sharedFile(MODEL)!, "--prompt", "x", "--logit-bias", bias], { cwd: PROJECT_ROOT });
  await assert.rejects(run("12:3"), (e: { stderr: string; code: number }) => /--logit-bias expects ID=BIAS/.test(e.stderr) && e.code === 2);
});

/**
 * llama.cpp's next-token distribution after every prompt position, from one batch over the whole
 * prompt (every position's logits asked for, as its perplexity tool does)
 */
async function llamaCppEveryPosition(modelPath: string, tokens: readonly number[], vocabSize: number): Promise<Float64Array[]> {
  const llama = await sharedLlama();
  const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
  try {
    const context = await model.createContext({ contextSize: tokens.length, batchSize: tokens.length, sequences: 1, threads: 2, flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" });
    try {
      const next = { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } as const;
      const input = tokens.map((t) => [llamaToken(t), { generateNext: next }] as const);
      const res = await context.getSequence().controlledEvaluate(input as unknown as Parameters<LlamaContextSequence["controlledEvaluate"]>[0]);
      return tokens.map((_, i) => {
        const out = new Float64Array(vocabSize).fill(-Infinity);
        for (const [tok, p] of res[i]!.next!.probabilities!) out[tok] = Math.log(p);
        return out;
      });
    } finally {
      await context.dispose();
    }
  } finally {
    await model.dispose();
  }
}

test("stories260K: promptLogprobs (top 5) of every prompt token equal llama.cpp's, the prompt computed in chunks beside another request; never from the prefix cache", { skip }, async () => {
  const text = readFileSync(sharedFile("text/tinystories-valid-30k.txt")!, "utf8").slice(0, 400);
  // chunks of 8 tokens: the prompt's rows come from many passes, some shared with the other request's decodes
  const model = await loadModel(sharedFile(MODEL)!, { backend: "reference", maxBatchTokens: 8 });
  try {
    const tokens = model.tokenizer.encode(text).slice(0, 60);
    const ref = await llamaCppEveryPosition(sharedFile(MODEL)!, tokens, model.info.vocabSize);
    const beside = model.generate("Lily and Ben", { maxTokens: 30, temperature: 0 });
    const r = await model.generate(tokens, { maxTokens: 0, promptLogprobs: 5 });
    await beside;
    assert.equal(r.completionTokens.length, 0);
    assert.equal(r.promptLogprobs!.length, tokens.length);
    assert.equal(r.promptLogprobs![0], null);
    for (let i = 1; i < tokens.length; i++) {
      const lp = r.promptLogprobs![i]!, dist = ref[i - 1]!;
      assert.equal(lp.token, tokens[i]);
      assert.ok(Math.abs(lp.logprob - dist[lp.token]!) < 1e-4, `position ${i}: ${lp.logprob} vs llama.cpp ${dist[lp.token]}`);
      assert.deepEqual(lp.top.map((t) => t.token), ranking(dist).slice(0, 5), `position ${i} top 5`);
      for (const t of lp.top) assert.ok(Math.abs(t.logprob - dist[t.token]!) < 1e-4, `position ${i} token ${t.token}`);
    }
    // the same prompt again: its blocks are in the prefix cache now, but a scored prompt is computed whole
    const again = await model.generate(tokens, { maxTokens: 2, temperature: 0, promptLogprobs: 0, logprobs: 0 });
    assert.deepEqual(again.promptLogprobs!.map((p) => p?.logprob), r.promptLogprobs!.map((p) => p?.logprob));
    // the first generated token's logprob is the distribution after the last prompt position
    assert.ok(Math.abs(again.logprobs![0]!.logprob - ref.at(-1)![again.completionTokens[0]!]!) < 1e-4);
    await assert.rejects(model.generate(tokens, { promptLogprobs: -1 }), /promptLogprobs must be an integer >= 0/);
  } finally {
    model.dispose();
  }
});

test("stories260K: promptLogprobs' sum over a window's second half is tsllm perplexity's number on the same text", { skip }, async () => {
  const file = sharedFile("text/tinystories-valid-30k.txt")!;
  const ctx = 64;
  const { stdout } = await promisify(execFile)(process.execPath, [
    "--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "perplexity", "--model", sharedFile(MODEL)!, "--file", file, "--ctx", String(ctx), "--chunks", "1", "--json",
  ], { cwd: PROJECT_ROOT });
  const ppl = JSON.parse(stdout).perplexity as number;
  // a window of ctx tokens scored in a context of ctx, as the perplexity tool (and llama.cpp's) computes it
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: ctx });
  try {
    // as the perplexity tool: the text tokenized once, the first window, its second half scored
    const window = model.tokenizer.encode(readFileSync(file, "utf8"), { addSpecialTokens: true, parseSpecial: false }).slice(0, ctx);
    const r = await model.generate(window, { maxTokens: 0, promptLogprobs: 0 });
    const scored = r.promptLogprobs!.slice(ctx / 2 + 1);
    const mean = scored.reduce((sum, p) => sum + p!.logprob, 0) / scored.length;
    assert.ok(Math.abs(Math.exp(-mean) - ppl) / ppl < 1e-4, `exp(-mean) ${Math.exp(-mean)} vs tsllm perplexity ${ppl}`);
  } finally {
    model.dispose();
  }
});

test("stories260K: a prompt that fills the context is scored with maxTokens 0, its promptLogprobs llama.cpp's and a larger context's; one that generates needs room for a token", { skip }, async () => {
  const ctx = 64;
  const text = readFileSync(sharedFile("text/tinystories-valid-30k.txt")!, "utf8").slice(0, 2000);
  const small = await loadModel(sharedFile(MODEL)!, { backend: "reference", contextSize: ctx });
  const large = await loadModel(sharedFile(MODEL)!, { backend: "reference", contextSize: 4 * ctx });
  try {
    const tokens = small.tokenizer.encode(text).slice(0, ctx);
    assert.equal(tokens.length, ctx);
    const r = await small.generate(tokens, { maxTokens: 0, promptLogprobs: 5 });
    assert.equal(r.completionTokens.length, 0);
    assert.equal(r.finishReason, "length");
    // nothing was cut by the context: the request asked for no token
    assert.equal(r.finishDetail, "maxTokens (0) reached");
    assert.equal(r.promptLogprobs!.length, ctx);
    assert.deepEqual(r.promptLogprobs, (await large.generate(tokens, { maxTokens: 0, promptLogprobs: 5 })).promptLogprobs);
    // every decoding ends at once with nothing generated: n choices, beam search, speculative by prompt lookup
    for (const decoding of [{ n: 3 }, { numBeams: 2 }, { promptLookup: true }]) {
      const other = await small.generate(tokens, { maxTokens: 0, promptLogprobs: 5, ...decoding });
      assert.deepEqual([other.completionTokens.length, other.finishDetail, other.promptLogprobs], [0, "maxTokens (0) reached", r.promptLogprobs], JSON.stringify(decoding));
    }
    const ref = await llamaCppEveryPosition(sharedFile(MODEL)!, tokens, small.info.vocabSize);
    for (let i = 1; i < ctx; i++) {
      const lp = r.promptLogprobs![i]!, dist = ref[i - 1]!;
      assert.ok(Math.abs(lp.logprob - dist[lp.token]!) < 1e-4, `position ${i}: ${lp.logprob} vs llama.cpp ${dist[lp.token]}`);
      assert.deepEqual(lp.top.map((t) => t.token), ranking(dist).slice(0, 5), `position ${i} top 5`);
    }
    // a generating request (maxTokens 1, or the default) has no position for its token; a longer prompt none for itself
    const full = `the prompt has ${ctx} tokens but the context holds ${ctx}, which leaves no room for a token to generate; use a larger contextSize or a shorter prompt`;
    await assert.rejects(small.generate(tokens, { maxTokens: 1, promptLogprobs: 0 }), { message: full, code: "context_length_exceeded" });
    await assert.rejects(small.generate(tokens), { message: full });
    await assert.rejects(small.generate([...tokens, tokens[1]!], { maxTokens: 0, promptLogprobs: 0 }), { message: `the prompt has ${ctx + 1} tokens but the context holds ${ctx}; use a larger contextSize or a shorter prompt` });
    // the engine still takes requests after the refusals, and the prompt one short of the context generates its one token
    const one = await small.generate(tokens.slice(0, -1), { maxTokens: 1, temperature: 0 });
    assert.equal(one.completionTokens.length, 1);
    assert.equal(one.finishDetail, `context full (${ctx} tokens)`);
  } finally {
    small.dispose();
    large.dispose();
  }
});

test("serve /v1/completions: echo with max_tokens 0 scores a prompt of the context's length (lm-eval's OpenAI windows); max_tokens 1 or none is a 400", { skip }, async () => {
  const ctx = 64;
  const s = await serveStories({ contextSize: ctx });
  const large = await loadModel(sharedFile(MODEL)!, { threads: 1, contextSize: 4 * ctx });
  try {
    const text = readFileSync(sharedFile("text/tinystories-valid-30k.txt")!, "utf8").slice(0, 2000);
    const tokens = s.model.tokenizer.encode(text).slice(0, ctx);
    const r = await post(`${s.url}/v1/completions`, { prompt: tokens, max_tokens: 0, echo: true, logprobs: 1, temperature: 0 });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const choice = r.json.choices[0];
    assert.equal(choice.finish_reason, "length");
    assert.equal(r.json.usage.prompt_tokens, ctx);
    assert.equal(r.json.usage.completion_tokens, 0);
    const want = await large.generate(tokens, { maxTokens: 0, promptLogprobs: 1 });
    assert.deepEqual(choice.logprobs.token_logprobs, want.promptLogprobs!.map((p) => p?.logprob ?? null));
    for (const body of [{ max_tokens: 1 }, {}]) {
      const refused = await post(`${s.url}/v1/completions`, { prompt: tokens, echo: true, logprobs: 1, ...body });
      assert.equal(refused.status, 400, JSON.stringify(body));
      assert.equal(refused.json.error.code, "context_length_exceeded");
      assert.equal(refused.json.error.param, "prompt");
    }
  } finally {
    large.dispose();
    await s.close();
  }
});
