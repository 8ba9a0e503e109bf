import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { parsePrometheusText, sampleValue } from "../scripts/prometheus-text.js";
import { post, serveStories, skipStories as skip } from "./helpers/serve.js";

/*
 * llama-server's llamacpp:prompt_seconds_total and prompt_tokens_seconds (tools/server of the
 * llama.cpp node-llama-cpp 3.21.1 bundles: server_metrics.add_prompt, called by
 * metrics_flush_prompt with the time from a batch's decode to its sync) time the batches that
 * hold prompt tokens, each batch once, however many prompts it holds. tsllm summed each request's
 * time from its start in the engine to its first token: eight prompts computed in one step counted
 * that step eight times, the seconds total more than the wall time and the throughput gauge an
 * eighth of the engine's. Now both are the engine's steps that computed prompt rows.
 */
describe("prompt seconds are the prompt steps' time (stories260K, eight slots)", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  before(async () => (s = await serveStories({ maxSequences: 8 })));
  after(() => s?.close());

  test("eight prompts prefilled together count each step once: prompt seconds within the wall time, the gauge their tokens over those seconds", async () => {
    // distinct 300-token prompts (no prefix cache hit), computed in chunks side by side: each request's own
    // time to its first token spans most of the others' steps, their sum several times the steps' own time
    const prompts = Array.from({ length: 8 }, (_, i) => [1, ...Array.from({ length: 299 }, (_, j) => 3 + ((i * 61 + j * 7 + j * j) % 500))]);
    const t0 = performance.now();
    const replies = await Promise.all(prompts.map((prompt) => post(`${s.url}/completion`, { prompt, n_predict: 2, temperature: 0, ignore_eos: true })));
    const wall = (performance.now() - t0) / 1000;
    for (const r of replies) assert.equal(r.status, 200, JSON.stringify(r.json));
    const text = await (await fetch(`${s.url}/metrics`)).text();
    const m = parsePrometheusText(text);
    const tokens = sampleValue(m, "llamacpp:prompt_tokens_total"), seconds = sampleValue(m, "llamacpp:prompt_seconds_total");
    assert.equal(tokens, 8 * 300, text);
    assert.ok(seconds > 0 && seconds <= wall, `prompt seconds ${seconds} > the wall time ${wall} of the requests`);
    // (the first read: the rate bucket holds all of it)
    const rate = sampleValue(m, "llamacpp:prompt_tokens_seconds");
    assert.ok(Math.abs(rate - tokens / seconds) < 1e-6 * rate, `${rate} vs ${tokens / seconds}`);
  });
});
