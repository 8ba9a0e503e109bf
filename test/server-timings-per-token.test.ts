import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { serveStories, skipStories } from "./helpers/serve.js";

/*
 * llama-server's `timings_per_token` (tools/server: params_from_json_cmpl reads it; with it,
 * send_partial_response puts the slot's timings on every partial result, and the OpenAI chunks
 * and /completion's partial events carry them as `timings`): each streamed chunk's timings count
 * the tokens sent so far (predicted_n) and the prompt (prompt_n, beside cache_n). Without it,
 * only the stream's last chunk has timings. It was a 400 here. Real HTTP on loopback.
 */

/** the `data:` events of an SSE body, parsed ([DONE] left out) */
function events(body: string): Record<string, any>[] {
  return body.split("\n\n").map((e) => e.trim()).filter((e) => e.startsWith("data: ") && e !== "data: [DONE]").map((e) => JSON.parse(e.slice("data: ".length)));
}

async function streamed(url: string, body: Record<string, unknown>): Promise<Record<string, any>[]> {
  const res = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...body, stream: true }), signal: AbortSignal.timeout(60_000) });
  assert.equal(res.status, 200, await res.clone().text());
  return events(await res.text());
}

const FIELDS = ["prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n", "predicted_ms", "predicted_per_token_ms", "predicted_per_second"];

/** a timings object's fields are there and none is negative */
function assertTimings(t: Record<string, unknown> | undefined, what: string): void {
  assert.ok(t, `${what}: no timings`);
  for (const f of FIELDS) assert.ok(typeof t[f] === "number" && t[f] >= 0, `${what}: timings.${f} = ${String(t[f])}`);
}

const LIMIT = 10;

describe("timings_per_token on stories260K's streams", { skip: skipStories }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  before(async () => (s = await serveStories()));
  after(() => s?.close());

  const openai = [
    ["/v1/completions", { prompt: "Once upon a time, a small cat" }],
    ["/v1/chat/completions", { messages: [{ role: "user", content: "Tell me of a small dog" }] }],
  ] as const;

  test("OpenAI routes: every content chunk's timings count the tokens sent so far and the prompt", async () => {
    for (const [path, req] of openai) {
      const chunks = await streamed(`${s.url}${path}`, { ...req, max_tokens: LIMIT, temperature: 0, ignore_eos: true, timings_per_token: true, stream_options: { include_usage: true, continuous_usage_stats: true } });
      const content = chunks.filter((c) => c.choices?.length === 1 && (c.choices[0].text || c.choices[0].delta?.content) && c.choices[0].finish_reason === null);
      assert.ok(content.length > 0, `${path}: no content chunks`);
      let last = 0;
      for (const c of content) {
        assertTimings(c.timings, path);
        // (the chunk's usage so far: vLLM's continuous usage stats)
        assert.equal(c.timings.predicted_n, c.usage.completion_tokens, `${path}: ${JSON.stringify(c)}`);
        assert.equal(c.timings.prompt_n + c.timings.cache_n, c.usage.prompt_tokens, `${path}: ${JSON.stringify(c)}`);
        assert.ok(c.timings.predicted_n > last && c.timings.predicted_n <= LIMIT, `${path}: predicted_n ${c.timings.predicted_n} after ${last}`);
        last = c.timings.predicted_n;
      }
      const usage = chunks.at(-1)!.usage;
      assert.equal(usage.completion_tokens, LIMIT);
      assert.ok(last >= content.length && last <= usage.completion_tokens, `${path}: ${last} tokens counted, ${content.length} chunks`);
    }
  });

  test("/completion: every partial event's timings count the tokens its events have sent so far", async () => {
    const chunks = await streamed(`${s.url}/completion`, { prompt: "Once upon a time, a big bird", n_predict: LIMIT, temperature: 0, ignore_eos: true, timings_per_token: true });
    const partial = chunks.filter((c) => c.stop === false);
    assert.ok(partial.length > 0, "no partial events");
    let sent = 0;
    for (const c of partial) {
      sent += c.tokens.length;
      assertTimings(c.timings, "/completion");
      assert.equal(c.timings.predicted_n, sent, JSON.stringify(c));
      assert.equal(c.timings.prompt_n + c.timings.cache_n, c.tokens_evaluated, JSON.stringify(c));
    }
    assert.equal(sent, LIMIT);
    const final = chunks.at(-1)!;
    assert.equal(final.stop, true);
    assert.equal(final.timings.predicted_n, LIMIT);
  });

  test("without it (or false), only the stream's last chunk has timings", async () => {
    for (const flag of [{}, { timings_per_token: false }]) {
      for (const [path, req] of [...openai, ["/completion", { prompt: "Once upon a time" }]] as const) {
        const chunks = await streamed(`${s.url}${path}`, { ...req, max_tokens: 4, temperature: 0, ignore_eos: true, ...flag });
        const timed = chunks.filter((c) => c.timings !== undefined);
        assert.equal(timed.length, 1, `${path} ${JSON.stringify(flag)}: ${JSON.stringify(timed)}`);
        assert.ok(timed[0] === chunks.filter((c) => c.choices === undefined || c.choices.length > 0).at(-1), `${path}: the timed chunk is not the last`);
      }
    }
  });
});
