import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Model } from "../src/index.js";
import { llamaCppSamplerNames, samplerStepsFromLlamaCpp, type SamplerStep } from "../src/sampling/index.js";
import { disposeSharedLlama, llamaCppRun, llamaToken, sharedLlama, type LlamaCppRunResult } from "./helpers/llama-cpp-oracle.js";
import { post, serveStories, skipStories as skip, STORIES } from "./helpers/serve.js";
import { sharedFile } from "./helpers/shared.js";

/*
 * What llama-server's POST /completion says of its tokens (tools/server/server-task.cpp,
 * server-context.cpp): with n_probs, completion_probabilities [{id, token, bytes, logprob,
 * top_logprobs: [{id, token, bytes, logprob}]}], unstreamed for the whole completion and streamed
 * one entry in each token's event (its partial result's prob_output); with post_sampling_probs
 * the probabilities after the sampler chain instead, {id, token, bytes, prob, top_probs: [{id,
 * token, bytes, prob}]} over the candidates that survive it; the completion's token ids in
 * `tokens` only with return_tokens (each streamed event lists its token either way); GET /props
 * lists the default chain's `samplers` by name. The numbers are judged by llama.cpp itself
 * (node-llama-cpp): its model distribution, its greedy tokens, and its own sampler chain's
 * probabilities for top-k and temperature.
 */

/** the `data:` events of an SSE body, parsed */
function events(body: string): Record<string, any>[] {
  return body.split("\n\n").map((e) => e.trim()).filter((e) => e.startsWith("data: ")).map((e) => JSON.parse(e.slice("data: ".length)));
}

/** llama.cpp's probabilities for the token after `prompt`, after its sampler chain (top-k, then temperature), by id */
async function llamaCppSampled(prompt: number[], options: { temperature: number; topK: number }): Promise<Map<number, number>> {
  const llama = await sharedLlama();
  const model = await llama.loadModel({ modelPath: sharedFile(STORIES)!, gpuLayers: 0 });
  try {
    const context = await model.createContext({ contextSize: prompt.length + 1, batchSize: prompt.length, sequences: 1, threads: 1 });
    try {
      const next = { probabilities: true, options: { ...options, topP: 1, minP: 0 } } as const;
      const input = prompt.map((t, i) => (i === prompt.length - 1 ? ([llamaToken(t), { generateNext: next }] as const) : llamaToken(t)));
      const res = await context.getSequence().controlledEvaluate(input as never);
      const probs = (res as { next?: { probabilities?: Map<number, number> } }[])[prompt.length - 1]?.next?.probabilities;
      if (!probs) throw new Error("llama.cpp returned no probabilities");
      return new Map([...probs].filter(([, p]) => p > 0));
    } finally {
      await context.dispose();
    }
  } finally {
    await model.dispose();
  }
}

const near = (ours: number, theirs: number, what: string, tol = 1e-4) => assert.ok(Math.abs(ours - theirs) < tol, `${what}: ${ours} vs llama.cpp ${theirs}`);

describe("llama-server's probabilities and tokens on POST /completion (stories260K)", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  let model: Model;
  let prompt: number[];
  /** llama.cpp's greedy continuation of the prompt and its distributions */
  let ref: LlamaCppRunResult;
  const N = 6;
  before(async () => {
    s = await serveStories();
    model = s.model;
    prompt = model.tokenizer.encode("Once upon a time, there was a little girl named Lily. She");
    ref = await llamaCppRun(sharedFile(STORIES)!, prompt, { decodeSteps: N });
  });
  after(async () => {
    await s?.close();
    await disposeSharedLlama();
  });

  /** llama.cpp's log-probability of each greedy token, and its `k` best alternatives */
  const greedy = (k: number) => ref.greedyTokens.map((id, i) => {
    const row = i === 0 ? ref.promptLogprobs : ref.stepLogprobs[i - 1]!;
    const ranked = [...row.keys()].sort((a, b) => row[b]! - row[a]! || a - b).slice(0, k);
    return { id, logprob: row[id]!, top: ranked.map((t) => ({ id: t, logprob: row[t]! })) };
  });
  const GREEDY = { prompt: [] as number[], n_predict: N, temperature: 0 };

  test("streamed with n_probs: each token's event carries its own entry, llama.cpp's token, logprob and alternatives; the summary none", async () => {
    const res = await fetch(`${s.url}/completion`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...GREEDY, prompt, n_probs: 3, stream: true }) });
    assert.equal(res.status, 200);
    const all = events(await res.text());
    const partial = all.filter((e) => e.stop === false);
    assert.equal(partial.length, N, JSON.stringify(all));
    const want = greedy(3);
    partial.forEach((e, i) => {
      const probs = e.completion_probabilities as { id: number; token: string; bytes: number[]; logprob: number; top_logprobs: { id: number; logprob: number }[] }[];
      assert.equal(probs?.length, 1, JSON.stringify(e));
      const [p] = probs;
      assert.deepEqual(e.tokens, [p!.id]);
      assert.equal(p!.id, want[i]!.id, `token ${i}`);
      near(p!.logprob, want[i]!.logprob, `token ${i}'s logprob`);
      assert.deepEqual(p!.top_logprobs.map((t) => t.id), want[i]!.top.map((t) => t.id));
      p!.top_logprobs.forEach((t, k) => near(t.logprob, want[i]!.top[k]!.logprob, `token ${i}'s alternative ${k}`));
      assert.deepEqual(p!.bytes, [...model.tokenizer.tokenBytes(p!.id)]);
    });
    assert.equal(all.at(-1)!.stop, true);
    assert.equal(all.at(-1)!.completion_probabilities, undefined, "streamed, the summary lists none (llama-server's final result, unstreamed only)");
    // the same entries unstreamed
    const whole = await post(`${s.url}/completion`, { ...GREEDY, prompt, n_probs: 3 });
    assert.deepEqual(partial.map((e) => e.completion_probabilities[0]), whole.json.completion_probabilities);
  });

  test("return_tokens: the unstreamed reply lists llama.cpp's greedy tokens only when asked; a stream's events list theirs either way", async () => {
    const plain = await post(`${s.url}/completion`, { ...GREEDY, prompt });
    assert.equal(plain.status, 200, JSON.stringify(plain.json));
    assert.deepEqual(plain.json.tokens, [], "llama-server keeps the generated ids only with return_tokens");
    const asked = await post(`${s.url}/completion`, { ...GREEDY, prompt, return_tokens: true });
    assert.deepEqual(asked.json.tokens, ref.greedyTokens);
    assert.equal(asked.json.content, plain.json.content);
    for (const returnTokens of [false, true]) {
      const res = await fetch(`${s.url}/completion`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...GREEDY, prompt, stream: true, return_tokens: returnTokens }) });
      const all = events(await res.text());
      assert.deepEqual(all.filter((e) => e.stop === false).flatMap((e) => e.tokens), ref.greedyTokens, `return_tokens ${returnTokens}`);
      assert.deepEqual(all.at(-1)!.tokens, []);
    }
    const bad = await post(`${s.url}/completion`, { ...GREEDY, prompt, return_tokens: "yes" });
    assert.equal(bad.status, 400);
    assert.match(bad.json.error.message, /return_tokens/);
  });

  test("post_sampling_probs: {prob, top_probs} over top-k's survivors at the temperature, as llama.cpp's own sampler chain gives them", async () => {
    const options = { temperature: 0.7, topK: 3 };
    const want = await llamaCppSampled(prompt, options);
    assert.equal(want.size, 3);
    const ranked = [...want].sort((a, b) => b[1] - a[1] || a[0] - b[0]);
    const body = { prompt, n_predict: 1, n_probs: 5, post_sampling_probs: true, temperature: 0.7, top_k: 3, top_p: 1, min_p: 0, seed: 7 };
    for (const stream of [false, true]) {
      const res = await fetch(`${s.url}/completion`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...body, stream }) });
      assert.equal(res.status, 200);
      const text = await res.text();
      const entry = (stream ? events(text)[0]! : JSON.parse(text)).completion_probabilities[0] as Record<string, any>;
      assert.deepEqual(Object.keys(entry).sort(), ["bytes", "id", "prob", "token", "top_probs"], JSON.stringify(entry));
      // n_probs 5, but only the 3 survivors of top-k are candidates
      assert.deepEqual(entry.top_probs.map((t: any) => t.id), ranked.map(([id]) => id), `stream ${stream}`);
      entry.top_probs.forEach((t: any, k: number) => {
        assert.deepEqual(Object.keys(t).sort(), ["bytes", "id", "prob", "token"]);
        near(t.prob, ranked[k]![1], `alternative ${k}`);
      });
      assert.ok(want.has(entry.id), `the sampled token ${entry.id} is one of llama.cpp's candidates`);
      near(entry.prob, want.get(entry.id)!, "the sampled token's probability");
    }
    // greedy: one candidate, probability 1, llama.cpp's greedy token
    const g = await post(`${s.url}/completion`, { prompt, n_predict: 1, n_probs: 3, post_sampling_probs: true, temperature: 0 });
    const entry = g.json.completion_probabilities[0];
    assert.equal(entry.id, ref.greedyTokens[0]);
    assert.equal(entry.prob, 1);
    assert.deepEqual(entry.top_probs.map((t: any) => [t.id, t.prob]), [[ref.greedyTokens[0], 1]]);
    assert.equal(g.json.generation_settings.post_sampling_probs, true);
    // without it, the model's own distribution (llama.cpp's before its sampler chain)
    const raw = await post(`${s.url}/completion`, { ...body, post_sampling_probs: false });
    const first = raw.json.completion_probabilities[0];
    assert.equal(first.top_logprobs.length, 5);
    near(first.logprob, ref.promptLogprobs[first.id]!, "the model's logprob");
    // on /v1/completions, OpenAI's shape with the same probabilities' logarithms (the same seed: the same token)
    const sampled = (await post(`${s.url}/completion`, body)).json.completion_probabilities[0];
    const oai = await post(`${s.url}/v1/completions`, { ...body, logprobs: 3, n_probs: undefined });
    assert.equal(oai.status, 200, JSON.stringify(oai.json));
    near(Math.exp(oai.json.choices[0].logprobs.token_logprobs[0]), want.get(sampled.id)!, "/v1/completions' logprob");
  });

  test("library: logprobsAfterSampling gives the same distribution (logprobs of llama.cpp's top-k candidates at the temperature); a value not a boolean is refused naming it", async () => {
    const want = await llamaCppSampled(prompt, { temperature: 0.7, topK: 3 });
    const r = await model.generate(prompt, { maxTokens: 1, logprobs: 5, logprobsAfterSampling: true, temperature: 0.7, topK: 3, topP: 1, minP: 0, seed: 1 });
    const lp = r.logprobs![0]!;
    assert.equal(lp.top.length, 3);
    for (const t of lp.top) near(Math.exp(t.logprob), want.get(t.token)!, `token ${t.token}`);
    near(Math.exp(lp.logprob), want.get(lp.token)!, "the sampled token");
    await assert.rejects(model.generate(prompt, { maxTokens: 1, logprobs: 1, logprobsAfterSampling: "yes" as never }), /logprobsAfterSampling/);
  });

  test("the end-of-generation token: listed as llama-server lists it, in tokens (return_tokens), tokens_predicted and completion_probabilities, its event of its own when streamed", async () => {
    const eos = model.tokenizer.eosId!;
    // (a bias makes EOS the greedy token after the prompt; the logprob is the model's, before the bias)
    const body = { prompt, n_predict: 4, temperature: 0, n_probs: 2, return_tokens: true, logit_bias: [[eos, 100]] };
    const r = await post(`${s.url}/completion`, body);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.stop_type, "eos");
    assert.equal(r.json.content, "");
    assert.deepEqual(r.json.tokens, [eos]);
    assert.equal(r.json.tokens_predicted, 1);
    const [entry, ...rest] = r.json.completion_probabilities;
    assert.deepEqual(rest, []);
    assert.equal(entry.id, eos);
    assert.equal(entry.token, "", "the end token adds no text (llama-server's text_to_send)");
    near(entry.logprob, ref.promptLogprobs[eos]!, "EOS");
    const res = await fetch(`${s.url}/completion`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...body, stream: true }) });
    const all = events(await res.text());
    const partial = all.filter((e) => e.stop === false);
    assert.equal(partial.length, 1, JSON.stringify(all));
    assert.deepEqual([partial[0]!.content, partial[0]!.tokens, partial[0]!.tokens_predicted], ["", [eos], 1]);
    assert.deepEqual(partial[0]!.completion_probabilities, r.json.completion_probabilities);
    assert.equal(all.at(-1)!.tokens_predicted, 1);
  });

  test("GET /props: the default chain's samplers by llama-server's names, which read back as the same chain", async () => {
    const props = await (await fetch(`${s.url}/props`)).json() as any;
    // (llama.cpp's common_params_sampling samplers, named by common_sampler_type_to_str)
    assert.deepEqual(props.default_generation_settings.params.samplers, ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"]);
    const body = { prompt, n_predict: 8, temperature: 0.9, seed: 3, return_tokens: true };
    const given = await post(`${s.url}/completion`, { ...body, samplers: props.default_generation_settings.params.samplers });
    assert.equal(given.status, 200, JSON.stringify(given.json));
    assert.deepEqual(given.json.tokens, (await post(`${s.url}/completion`, body)).json.tokens);
    // a reply's generation_settings name the chain it sampled with, the request's own where it gave one (llama.cpp's letters here)
    assert.deepEqual(given.json.generation_settings.samplers, props.default_generation_settings.params.samplers);
    const letters = await post(`${s.url}/completion`, { ...body, samplers: "kt" });
    assert.deepEqual(letters.json.generation_settings.samplers, ["top_k", "temperature"]);
  });
});

test("llamaCppSamplerNames: a chain by llama.cpp's names, read back by samplerStepsFromLlamaCpp as the same steps", () => {
  const chains: SamplerStep[][] = [["penalties", "topK", "temperature"], ["temperature", "minP"], ["penalties", "typicalP", "topP", "minP", "topK", "temperature"]];
  for (const steps of chains) assert.deepEqual(samplerStepsFromLlamaCpp(llamaCppSamplerNames(steps), "samplers"), steps);
  assert.deepEqual(llamaCppSamplerNames(["penalties", "topK", "typicalP", "temperature"]), ["penalties", "top_k", "typ_p", "temperature"]);
  assert.deepEqual(samplerStepsFromLlamaCpp(llamaCppSamplerNames(), "samplers"), ["penalties", "topK", "typicalP", "topP", "minP", "temperature"]);
  assert.deepEqual(llamaCppSamplerNames("transformers"), ["penalties", "temperature", "top_k", "top_p", "min_p", "typ_p"]);
});
