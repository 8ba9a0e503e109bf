// A streamed request that waits (in the queue, in a long prefill) sends nothing until its first
// token; proxies and clients with an idle read timeout (nginx's proxy_read_timeout, load
// balancers) cut a response silent for longer. The server sends SSE comment lines meanwhile,
// which SSE clients skip. Real HTTP on loopback, the real `openai` client.
import assert from "node:assert/strict";
import { request } from "node:http";
import { test } from "node:test";
import OpenAI from "openai";
import type { GenerationRun } from "../src/llm.js";
import { post, serveStories, skipStories as skip, spawnServe, until } from "./helpers/serve.js";

type Served = Awaited<ReturnType<typeof serveStories>>;

/**
 * A run that takes the server's one sequence and keeps it: its events are read once and then no
 * more, so the engine pauses it (a reader far behind) and every request behind it waits in the
 * queue until `release` (the servers run admission "reserve", which never preempts: under
 * "preempt" a request paused on its reader is preempted for a waiting one).
 */
async function holdTheSequence(s: Served): Promise<{ run: GenerationRun; release(): Promise<void> }> {
  const controller = new AbortController();
  const run = s.model.submit(s.model.tokenizer.encode("Once upon a time", { addSpecialTokens: true }), { maxTokens: 400, ignoreEos: true, signal: controller.signal });
  const events = run.events();
  await events.next();
  return {
    run,
    release: async () => {
      controller.abort();
      for await (const _ of events);
    },
  };
}

const waiting = async (url: string): Promise<number> => ((await (await fetch(`${url}/health`)).json()) as { requests_waiting: number }).requests_waiting;

test("a queued stream gets ': keep-alive' comments while it waits, then its tokens: raw HTTP reads only comments before the first token, and the same text as unstreamed", { skip }, async () => {
  const s = await serveStories({ maxSequences: 1, admission: "reserve" }, { ssePingMs: 50 });
  try {
    const body = { prompt: "Lily and Ben", max_tokens: 24, temperature: 0 };
    const expected = await post(`${s.url}/v1/completions`, body);
    assert.equal(expected.status, 200, JSON.stringify(expected.json));
    const held = await holdTheSequence(s);
    let raw = "";
    const ended = new Promise<number>((resolve, reject) => {
      const req = request(`${s.url}/v1/completions`, { method: "POST", headers: { "Content-Type": "application/json" } }, (res) => {
        res.setEncoding("utf8");
        res.on("data", (d: string) => (raw += d));
        res.on("end", () => resolve(res.statusCode!));
      });
      req.on("error", reject);
      req.end(JSON.stringify({ ...body, stream: true }));
    });
    await until(() => raw.split(": keep-alive\n\n").length > 3, "three keep-alive comments while the request waits");
    assert.equal(await waiting(s.url), 1, "the stream still waits for the sequence");
    assert.match(raw, /^(: keep-alive\n\n)+$/, "nothing but comments before the first token");
    await held.release();
    assert.equal(await ended, 200);
    const events = raw.split("\n\n").filter((e) => e !== "" && !e.startsWith(":"));
    assert.equal(events.at(-1), "data: [DONE]");
    const text = events.slice(0, -1).map((e) => JSON.parse(e.slice("data: ".length)).choices[0].text as string).join("");
    assert.equal(text, expected.json.choices[0].text);
  } finally {
    await s.close();
  }
});

test("the openai client streams a chat reply that waited in the queue through keep-alive comments as if there were none", { skip }, async () => {
  const s = await serveStories({ maxSequences: 1, admission: "reserve" }, { ssePingMs: 50 });
  try {
    const body = { model: "stories260K", messages: [{ role: "user" as const, content: "Tell me a story" }], max_tokens: 24, temperature: 0 };
    const expected = await post(`${s.url}/v1/chat/completions`, body);
    assert.equal(expected.status, 200, JSON.stringify(expected.json));
    // the bytes the client received, seen beside it
    let raw = "";
    const client = new OpenAI({
      baseURL: `${s.url}/v1`, apiKey: "none", maxRetries: 0,
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        // one copy read as it comes (the client reads its own only when iterated)
        const [seen, theirs] = res.body!.tee();
        void (async () => {
          const decoder = new TextDecoder();
          for await (const chunk of seen) raw += decoder.decode(chunk, { stream: true });
        })();
        return new Response(theirs, { status: res.status, headers: res.headers });
      },
    });
    const held = await holdTheSequence(s);
    const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    await until(() => raw.split(": keep-alive\n\n").length > 3, "three keep-alive comments while the request waits");
    assert.equal(await waiting(s.url), 1);
    await held.release();
    let text = "";
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(text, expected.json.choices[0].message.content);
    // (the second run's prompt is partly a prefix-cache hit: only the counts are compared)
    assert.equal(usage?.prompt_tokens, expected.json.usage.prompt_tokens);
    assert.equal(usage?.completion_tokens, expected.json.usage.completion_tokens);
  } finally {
    await s.close();
  }
});

test("tsllm serve --sse-ping-interval: a bad value exits 2 naming the flag; llama-server's -1 (never) is taken", { skip }, async () => {
  for (const bad of ["soon", "-2", "100000"]) {
    const e = await spawnServe(["--sse-ping-interval", bad]).then(() => undefined, (err: Error) => err);
    assert.match(String(e?.message), /exited with 2: [\s\S]*--sse-ping-interval/, bad);
  }
  const s = await spawnServe(["--sse-ping-interval", "-1"]);
  try {
    assert.equal((await fetch(`${s.url}/health`)).status, 200);
  } finally {
    s.child.kill("SIGTERM");
    await s.exited;
  }
});
