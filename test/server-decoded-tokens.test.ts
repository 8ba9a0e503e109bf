import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { parsePrometheusText, sampleValue } from "../scripts/prometheus-text.js";
import { disposeSharedLlama, llamaCppRun } from "./helpers/llama-cpp-oracle.js";
import { post, serveStories, skipStories as skip, STORIES } from "./helpers/serve.js";
import { sharedFile } from "./helpers/shared.js";

/*
 * How many tokens a reply ended by its end-of-generation token says it generated. llama-server
 * (tools/server/server-context.cpp) adds one to its slot's stats.n_gen for every token it samples,
 * the end token too (process_token sees it is one afterwards), and reads that one count, n_decoded,
 * for tokens_predicted, usage.completion_tokens and timings.predicted_n alike (server-task.cpp,
 * server_slot_stats::to_json), its per-token time over n_gen - 1 steps (n_gen_steps: the first
 * token comes from the prompt's logits). tsllm counted the end token in tokens_predicted only, so
 * its reply disagreed with itself by one. The count is judged by llama.cpp (node-llama-cpp): a
 * logit_bias on EOS between two of llama.cpp's greedy margins makes EOS the greedy token at a
 * known step, after that many of llama.cpp's own greedy tokens.
 */

/** the `data:` events of an SSE body, parsed */
function events(body: string): Record<string, any>[] {
  return body.split("\n\n").map((e) => e.trim()).filter((e) => e.startsWith("data: ") && e !== "data: [DONE]").map((e) => JSON.parse(e.slice("data: ".length)));
}

describe("tokens a reply ended by EOS counts, as llama-server's n_decoded (stories260K)", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  let prompt: number[];
  let bias: Record<number, number>;
  /** the tokens llama-server samples: llama.cpp's greedy ones before EOS, then EOS */
  let sampled: number;
  before(async () => {
    s = await serveStories();
    prompt = s.model.tokenizer.encode("Once upon a time, there was a little girl named Lily. She");
    const eos = s.model.tokenizer.eosId!;
    const ref = await llamaCppRun(sharedFile(STORIES)!, prompt, { decodeSteps: 12 });
    // (how far EOS is below the best other token at each greedy step, by llama.cpp)
    const gaps = [ref.promptLogprobs, ...ref.stepLogprobs].map((lp) => Math.max(...lp.filter((_, i) => i !== eos)) - lp[eos]!);
    // the first step from the fourth on whose gap is clearly under every earlier one: a bias between them makes EOS greedy there first
    const k = gaps.findIndex((g, i) => i >= 3 && g < Math.min(...gaps.slice(0, i)) - 0.5);
    assert.ok(k > 0, `no step for EOS among llama.cpp's gaps ${gaps.join(", ")}`);
    bias = { [eos]: (gaps[k]! + Math.min(...gaps.slice(0, k))) / 2 };
    sampled = k + 1;
  });
  after(async () => {
    await s?.close();
    await disposeSharedLlama();
  });

  /** predicted_per_token_ms is predicted_ms over predicted_n - 1 steps, as llama-server's t_gen_per_token_ms */
  const perStep = (t: Record<string, number>, what: string) => {
    const steps = t.predicted_n! - 1;
    assert.ok(Math.abs(t.predicted_per_token_ms! * steps - t.predicted_ms!) <= 0.001 * (steps + 1), `${what}: ${JSON.stringify(t)}`);
  };

  test("POST /completion: tokens_predicted, timings.predicted_n and the listed tokens all count the EOS, streamed or not", async () => {
    const body = { prompt, n_predict: 40, temperature: 0, return_tokens: true, logit_bias: bias };
    const r = await post(`${s.url}/completion`, body);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.stop_type, "eos");
    assert.equal(r.json.tokens.length, sampled);
    assert.equal(r.json.tokens_predicted, sampled);
    assert.equal(r.json.timings.predicted_n, sampled);
    perStep(r.json.timings, "/completion");

    const res = await fetch(`${s.url}/completion`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...body, stream: true, timings_per_token: true }) });
    const all = events(await res.text());
    const partial = all.filter((e) => e.stop === false);
    assert.equal(partial.length, sampled, JSON.stringify(all));
    // (each token's event, the end token's too, counts it in both: send_partial_response reads the slot's n_gen and stats)
    for (const e of partial) assert.equal(e.timings.predicted_n, e.tokens_predicted, JSON.stringify(e));
    assert.equal(partial.at(-1)!.tokens_predicted, sampled);
    const last = all.at(-1)!;
    assert.deepEqual([last.stop, last.tokens_predicted, last.timings.predicted_n], [true, sampled, sampled]);
  });

  test("/v1/completions: usage.completion_tokens and timings.predicted_n count the EOS, streamed or not", async () => {
    const body = { model: "stories260K", prompt, max_tokens: 40, temperature: 0, logit_bias: bias };
    const r = await post(`${s.url}/v1/completions`, body);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.choices[0].finish_reason, "stop");
    assert.equal(r.json.usage.completion_tokens, sampled);
    assert.equal(r.json.usage.total_tokens, prompt.length + sampled);
    assert.equal(r.json.timings.predicted_n, sampled);
    perStep(r.json.timings, "/v1/completions");

    const res = await fetch(`${s.url}/v1/completions`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }) });
    const all = events(await res.text());
    assert.equal(all.at(-1)!.usage.completion_tokens, sampled, JSON.stringify(all.at(-1)));
    assert.equal(all.find((e) => e.timings)!.timings.predicted_n, sampled);
  });

  test("/metrics: llamacpp:tokens_predicted_total counts the EOS too, as llama-server's metrics add each slot's n_gen; tsllm_generation_tokens_total the text's tokens", async () => {
    const metrics = async () => parsePrometheusText(await (await fetch(`${s.url}/metrics`)).text());
    const before = await metrics();
    const r = await post(`${s.url}/v1/completions`, { prompt, max_tokens: 40, temperature: 0, logit_bias: bias });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const now = await metrics();
    const grew = (name: string) => (sampleValue(now, name) ?? 0) - (sampleValue(before, name) ?? 0);
    assert.equal(grew("llamacpp:tokens_predicted_total"), sampled);
    assert.equal(grew("tsllm_generation_tokens_total"), sampled - 1);
  });
});
