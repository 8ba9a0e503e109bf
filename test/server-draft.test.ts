import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { kvBytesPerToken } from "../src/cache/index.js";
import { loadModel } from "../src/index.js";
import { ensureRandomModel, tinyQwen2 } from "../src/testing/index.js";
import { runTsllm } from "./helpers/child.js";
import { CHAT_TEMPLATE, post, serveStories, skipStories as skip, spawnServe, STORIES } from "./helpers/serve.js";
import { sharedFile } from "./helpers/shared.js";
import type { ServeChild } from "../src/bench/index.js";

const dir = mkdtempSync(join(tmpdir(), "tsllm-serve-draft-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const CHAT_TEMPLATE_FILE = join(dir, "t.jinja");
writeFileSync(CHAT_TEMPLATE_FILE, CHAT_TEMPLATE);

/** a counter's value in /metrics' text */
async function counter(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  assert.ok(m, `${name} in /metrics`);
  assert.match(text, new RegExp(`^# TYPE ${name} counter$`, "m"));
  assert.match(text, new RegExp(`^# HELP ${name} \\S`, "m"));
  return Number(m[1]);
}

const DRAFTS = ["tsllm_draft_tokens_total", "tsllm_draft_tokens_accepted_total", "tsllm_draft_rounds_total"] as const;
/** tokens proposed, accepted, and rounds */
const drafts = async (url: string): Promise<[number, number, number]> => {
  const [proposed, accepted, rounds] = await Promise.all(DRAFTS.map((n) => counter(url, n)));
  return [proposed!, accepted!, rounds!];
};

/**
 * `tsllm serve --draft-model` (llama-server's --model-draft): stories260K drafting with a q4_0
 * copy of itself. The judge: the same server without a draft, whose greedy replies speculation
 * must not change by a token.
 */
describe("tsllm serve --draft-model: speculative decoding over HTTP (stories260K, a q4_0 copy drafting)", { skip }, () => {
  let plain: ServeChild, drafting: ServeChild;
  before(async () => {
    const args = ["--alias", "m", "--chat-template", CHAT_TEMPLATE_FILE, "--ctx-size", "256"];
    plain = await spawnServe(args);
    // (llama-server's spelling of the flag, and of the draft length)
    drafting = await spawnServe([...args, "--model-draft", sharedFile(STORIES)!, "--draft-quantize", "q4_0", "--draft-max", "4"]);
  });
  after(() => {
    plain?.child.kill("SIGTERM");
    drafting?.child.kill("SIGTERM");
  });

  test("greedy text and chat completions (streamed or not) are token for token those of the server without a draft; /metrics' draft counters move, proposed >= accepted > 0", async () => {
    assert.match(drafting.stderr(), /ready: .*drafting with /);
    assert.deepEqual(await drafts(drafting.url), [0, 0, 0]);
    const clients = [plain, drafting].map((s) => new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "none", maxRetries: 0 }));
    const texts = async (client: OpenAI) => {
      const out: string[] = [];
      for (const prompt of ["Once upon a time", "Lily and Ben went to the park. They"]) {
        const r = await client.completions.create({ model: "m", prompt, max_tokens: 48, temperature: 0 });
        out.push(r.choices[0]!.text, String(r.usage!.completion_tokens));
        let streamed = "";
        for await (const c of await client.completions.create({ model: "m", prompt, max_tokens: 48, temperature: 0, stream: true })) streamed += c.choices[0]?.text ?? "";
        out.push(streamed);
      }
      const chat = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "Tell me a story about a dog." }], max_tokens: 40, temperature: 0 });
      out.push(chat.choices[0]!.message.content!, String(chat.usage!.completion_tokens));
      return out;
    };
    const want = await texts(clients[0]!), got = await texts(clients[1]!);
    assert.ok(want.every((t) => t.length > 0));
    assert.deepEqual(got, want);
    const [proposed, accepted, rounds] = await drafts(drafting.url);
    assert.ok(accepted > 0, `accepted ${accepted}`);
    assert.ok(proposed >= accepted, `proposed ${proposed} < accepted ${accepted}`);
    // (at most 4 a round: --draft-max 4)
    assert.ok(rounds > 0 && proposed <= 4 * rounds, `${proposed} proposed in ${rounds} rounds`);
    assert.deepEqual(await Promise.all(["llamacpp:spec_decode_num_draft_tokens_total", "llamacpp:spec_decode_num_accepted_tokens_total", "llamacpp:spec_decode_num_drafts_total"].map((n) => counter(drafting.url, n))), [proposed, accepted, rounds]);
    assert.deepEqual(await drafts(plain.url), [0, 0, 0]);
  });

  test("a request's speculative.n_max (llama-server's field) sets its draft length, 0 none; n > 1 and logprobs answer as without a draft, drafting nothing; timings carry draft_n", async () => {
    const body = { prompt: "The little dog", max_tokens: 24, temperature: 0 };
    const alone = await post(`${plain.url}/v1/completions`, body);
    let before = await drafts(drafting.url);
    const two = await post(`${drafting.url}/v1/completions`, { ...body, "speculative.n_max": 2 });
    assert.equal(two.status, 200, JSON.stringify(two.json));
    assert.equal(two.json.choices[0].text, alone.json.choices[0].text);
    let now = await drafts(drafting.url);
    const [proposed, accepted, rounds] = [0, 1, 2].map((i) => now[i]! - before[i]!) as [number, number, number];
    assert.ok(rounds > 0 && proposed <= 2 * rounds && proposed >= accepted, `${proposed} proposed, ${accepted} accepted in ${rounds} rounds`);
    assert.deepEqual([two.json.timings.draft_n, two.json.timings.draft_n_accepted], [proposed, accepted]);
    for (const extra of [{ "speculative.n_max": 0 }, { n: 2 }, { logprobs: 2 }]) {
      before = now;
      const r = await post(`${drafting.url}/v1/completions`, { ...body, ...extra });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.equal(r.json.choices[0].text, alone.json.choices[0].text, JSON.stringify(extra));
      assert.equal(r.json.timings.draft_n, undefined);
      now = await drafts(drafting.url);
      assert.deepEqual(now, before, JSON.stringify(extra));
    }
    const bad = await post(`${drafting.url}/v1/completions`, { ...body, "speculative.n_max": -1 });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, "speculative.n_max");
  });
});

describe("tsllm serve --draft-model refusals", { skip }, () => {
  test("a --draft-model not found is refused in one line naming the flag, before the model loads", async () => {
    const missing = "/nonexistent/draft.gguf";
    const r = await runTsllm(["serve", "--model", sharedFile(STORIES)!, "--port", "0", "-md", missing]);
    assert.equal(r.code, 1, r.stderr);
    // (after the line saying where it listens while loading, as a --model not found)
    const lines = r.stderr.trim().split("\n").filter((l) => !l.startsWith("tsllm serve: listening on"));
    assert.equal(lines.length, 1, r.stderr);
    assert.ok(lines[0]!.startsWith(`tsllm: error: --draft-model: model not found: ${missing}`), r.stderr);
    const usage = await runTsllm(["serve", "--model", sharedFile(STORIES)!, "--draft-tokens", "4"]);
    assert.equal(usage.code, 2, usage.stderr);
    assert.match(usage.stderr, /^tsllm: error: --draft-quantize and --draft-tokens need --draft-model\n/);
  });

  test("a draft whose vocabulary is not the model's is refused at start in one line naming both files", async () => {
    const other = await ensureRandomModel(tinyQwen2);
    const r = await runTsllm(["serve", "--model", sharedFile(STORIES)!, "--port", "0", "--draft-model", other]);
    assert.equal(r.code, 2, r.stderr);
    // (the draft's own load warnings aside)
    const lines = r.stderr.trim().split("\n").filter((l) => l.startsWith("tsllm: error"));
    assert.equal(lines.length, 1, r.stderr);
    assert.equal(lines[0], `tsllm: error: --draft-model ${other}: its vocabulary has 49152 tokens, --model ${sharedFile(STORIES)!}'s 512: a draft model must share the model's vocabulary`);
  });
});

test("EngineStats counts each ended speculative request's proposals, acceptances and rounds, as its result reports them (a draft model and prompt lookup)", { skip }, async () => {
  const model = await loadModel(sharedFile(STORIES)!, { threads: 1, contextSize: 256 });
  const draft = await loadModel(sharedFile(STORIES)!, { threads: 1, contextSize: 256, quantize: "q4_0" });
  try {
    const results = await Promise.all([
      model.generate("Once upon a time", { temperature: 0, maxTokens: 30, draftModel: draft, draftTokens: 3 }),
      model.generate("Lily and Ben", { temperature: 0.8, seed: 4, maxTokens: 30, draftModel: draft }),
      model.generate("The dog ran and the dog ran and the dog", { temperature: 0, maxTokens: 30, promptLookup: true }),
      model.generate("One day", { temperature: 0, maxTokens: 10 }),
    ]);
    const sum = (k: "drafted" | "accepted" | "rounds") => results.reduce((n, r) => n + (r.speculative?.[k] ?? 0), 0);
    const s = model.engine.stats;
    assert.ok(sum("accepted") > 0);
    assert.deepEqual([s.draftTokensProposed, s.draftTokensAccepted, s.draftRounds], [sum("drafted"), sum("accepted"), sum("rounds")]);
  } finally {
    model.dispose();
    draft.dispose();
  }
});

test("a server with a draft model takes a request whose KV room fits only without the draft's cache, answering it without drafting, as the server without a draft answers it", { skip }, async () => {
  const draftModel = await loadModel(sharedFile(STORIES)!, { threads: 1, contextSize: 256, quantize: "q4_0" });
  // a pool of 224 tokens: prompt 5 + max_tokens 100 fit; with the draft's cache beside them they do not
  const { model, url, close } = await serveStories({ kvCacheBytes: 224 * kvBytesPerToken(draftModel.info) }, { draftModel });
  try {
    const body = { prompt: "Once upon a time", max_tokens: 100, temperature: 0 };
    const r = await post(`${url}/v1/completions`, body);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.choices[0].text, (await model.generate("Once upon a time", { temperature: 0, maxTokens: 100 })).completion);
    assert.equal(r.json.timings.draft_n, undefined);
    // one that drafts within the room still drafts
    const short = await post(`${url}/v1/completions`, { ...body, max_tokens: 20 });
    assert.ok(short.json.timings.draft_n > 0, JSON.stringify(short.json.timings));
  } finally {
    await close();
    draftModel.dispose();
  }
});
