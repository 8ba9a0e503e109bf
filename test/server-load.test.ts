// `tsllm serve` under load and faults, the small committed part of scripts/soak-serve.ts: clients
// that leave at awkward points, a queue that overflows, a stream cut by a shutdown, answers that
// must not depend on what ran before or beside them, and /metrics read by a strict parser of
// Prometheus' text format (scripts/prometheus-text.ts). Real HTTP on loopback.
import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, describe, test } from "node:test";
import { parsePrometheusText, sampleSum, sampleValue, type Family } from "../scripts/prometheus-text.js";
import { post, serveStories, skipStories as skip, until } from "./helpers/serve.js";
import type { Metrics } from "../src/server/metrics.js";

async function metricsOf(url: string): Promise<Family[]> {
  return parsePrometheusText(await (await fetch(`${url}/metrics`)).text());
}

describe("tsllm serve under load and faults", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  before(async () => {
    s = await serveStories({ maxSequences: 2 }, { maxQueue: 1 });
  });
  after(() => s?.close());

  test("a greedy request with a grammar and logprobs gives the same logprobs on a fresh server, again, and beside other requests of that grammar", async () => {
    // greedy decoding under a grammar tries the best token before making the parse state's mask;
    // a logprob must not depend on whether an earlier request made that mask already
    const grammar = 'root ::= [a-z ]+ "." | "The " [a-z]+';
    const body = { messages: [{ role: "user", content: "The sun was 596" }], max_tokens: 15, temperature: 0, logprobs: true, top_logprobs: 2, grammar };
    const logprobsOf = async (b: object) => {
      const r = await post(`${s.url}/v1/chat/completions`, b);
      assert.equal(r.status, 200, JSON.stringify(r.json));
      return (r.json.choices[0].logprobs.content as { token: string; logprob: number; top_logprobs: unknown[] }[]).map((t) => JSON.stringify(t));
    };
    const first = await logprobsOf(body);
    assert.deepEqual(await logprobsOf(body), first, "the same request again");
    const other = { ...body, messages: [{ role: "user", content: "Lily and Ben 12" }] };
    const [beside] = await Promise.all([logprobsOf(body), logprobsOf(other)]);
    assert.deepEqual(beside, first, "beside another request of the grammar");
    assert.deepEqual(await logprobsOf(body), first, "after it");
  });

  test("a client that leaves while its body is still arriving is counted 499 (it left), not 400 (malformed HTTP)", async () => {
    const before = await metricsOf(s.url);
    const port = Number(new URL(s.url).port);
    const head = `POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"prompt": "Once`;
    // one closes its side (FIN), one resets the connection (RST)
    for (const leave of ["end", "reset"] as const) {
      await new Promise<void>((done) => {
        const socket = connect(port, "127.0.0.1", () => {
          socket.write(head, () => setImmediate(() => (leave === "end" ? socket.end() : socket.resetAndDestroy())));
        });
        socket.on("error", () => {});
        // (an answer, if any, is read: an unread one would keep the socket from closing)
        socket.resume();
        socket.on("close", () => done());
      });
    }
    const counted = (m: Family[], status?: string) => sampleSum(m, "tsllm_http_requests_total", { endpoint: "/v1/completions", ...(status ? { status } : {}) });
    await until(async () => counted(await metricsOf(s.url)) - counted(before) === 2, "both to be counted");
    const now = await metricsOf(s.url);
    assert.equal(counted(now, "499") - counted(before, "499"), 2);
    assert.equal(counted(now, "400"), counted(before, "400"));
  });

  test("a client that leaves while its prompt is tokenized gets nothing run for it", async () => {
    const tokenizer = s.model.tokenizer;
    const encodeAsync = tokenizer.encodeAsync;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let tokenized!: () => void;
    const done = new Promise<void>((r) => (tokenized = r));
    let entered!: () => void;
    const waiting = new Promise<void>((r) => (entered = r));
    // the tokenizer waits, while the server tokenizes this prompt, until the client is gone
    tokenizer.encodeAsync = async (text, options) => {
      entered();
      await gate;
      try {
        return await encodeAsync.call(tokenizer, text, options);
      } finally {
        setImmediate(tokenized);
      }
    };
    try {
      const before = await metricsOf(s.url);
      const controller = new AbortController();
      const asked = post(`${s.url}/v1/completions`, { prompt: "Once upon a time", max_tokens: 200, ignore_eos: true, temperature: 0 }, {}, controller.signal).catch(() => "left");
      await waiting;
      controller.abort();
      assert.equal(await asked, "left");
      await until(async () => sampleValue(await metricsOf(s.url), "tsllm_http_requests_total", { endpoint: "/v1/completions", status: "499" }) > sampleValue(before, "tsllm_http_requests_total", { endpoint: "/v1/completions", status: "499" }), "the server to see the client leave");
      release();
      await done;
      const stats = s.model.engine.stats;
      assert.equal(stats.running + stats.waiting, 0, "the request of a client that left was queued");
    } finally {
      tokenizer.encodeAsync = encodeAsync;
      release();
    }
  });

  test("a queued request whose client left frees its place in the queue at once, not a forward pass later (no 429 meanwhile)", async () => {
    // what the server's 429 is decided by: the requests waiting for room, were one more queued
    const engine = s.model.engine;
    const controllers = Array.from({ length: 3 }, () => new AbortController());
    const runs = controllers.map((c, i) => s.model.submit(`Once upon a time ${i}`, { maxTokens: 50, ignoreEos: true, temperature: 0, signal: c.signal }));
    assert.equal(engine.waitingForRoom([1]), 2, "two run, the third and a new one would wait");
    // (synchronously: the engine has not stepped since, its aborted requests are still in its lists)
    controllers[2]!.abort();
    assert.equal(engine.waitingForRoom([1]), 1, "only the new one would wait");
    for (const c of controllers) c.abort();
    await Promise.all(runs.map((r) => r.result()));
  });

  test("a request cancelled while it waits in the queue adds no prompt tokens to tsllm_prompt_tokens_total (none were computed)", async () => {
    const engine = s.model.engine;
    const controller = new AbortController();
    const running = [0, 1].map((i) => s.model.submit(`Once upon a time ${i}`, { maxTokens: 400, ignoreEos: true, temperature: 0, signal: controller.signal }));
    try {
      // both prefilled: each has a first event (read without leaving the reader: leaving cancels, 617d381)
      for (const r of running) await r.events()[Symbol.asyncIterator]().next();
      const before = await metricsOf(s.url);
      const leaving = new AbortController();
      const queued = post(`${s.url}/v1/completions`, { prompt: "Lily and Ben went to the park to play with the big red ball", max_tokens: 4 }, {}, leaving.signal).catch(() => "left");
      await until(() => engine.stats.waiting === 1, "the request to wait");
      leaving.abort();
      await queued;
      const observed = (m: Family[]) => sampleValue(m, "tsllm_e2e_request_latency_seconds_count");
      await until(async () => observed(await metricsOf(s.url)) > observed(before), "the cancelled request to be observed");
      assert.equal(sampleValue(await metricsOf(s.url), "tsllm_prompt_tokens_total"), sampleValue(before, "tsllm_prompt_tokens_total"));
    } finally {
      controller.abort();
      await Promise.all(running.map((r) => r.result()));
    }
  });

  test("/metrics is valid Prometheus text and adds up after a burst with 429s and clients that leave", async () => {
    const before = await metricsOf(s.url);
    const body = (i: number) => ({ prompt: `Once upon a time ${i}`, max_tokens: 24, temperature: 0 });
    const controller = new AbortController();
    // 2 run, 1 waits, the rest are refused at once; two clients leave mid-way
    const asked = Array.from({ length: 8 }, (_, i) => post(`${s.url}/v1/completions`, body(i), {}, i < 2 ? controller.signal : undefined).then((r) => r.status, () => 499));
    await until(() => s.model.engine.stats.running > 0, "a request to run");
    controller.abort();
    const statuses = await Promise.all(asked);
    const after = await metricsOf(s.url);
    const delta = (labels: Record<string, string>) => sampleSum(after, "tsllm_http_requests_total", labels) - sampleSum(before, "tsllm_http_requests_total", labels);
    assert.equal(delta({ endpoint: "/v1/completions" }), 8);
    for (const status of [200, 429, 499]) assert.equal(delta({ endpoint: "/v1/completions", status: String(status) }), statuses.filter((x) => x === status).length, `status ${status}`);
    assert.ok(statuses.includes(429));
    // a client that left sees its end before the server does: its sequences are dropped at the
    // engine's next step, so only then is nothing referenced
    await until(() => s.model.engine.stats.running + s.model.engine.stats.waiting === 0, "the engine to be idle");
    const idle = await metricsOf(s.url);
    assert.equal(sampleValue(idle, "tsllm_kv_blocks_used"), 0, `blocks referenced with no request in the engine: ${JSON.stringify(s.model.engine.stats)}`);
    assert.ok(sampleValue(idle, "tsllm_kv_blocks_cached") <= sampleValue(idle, "tsllm_kv_blocks_total"));
  });

  test("a finished request's KV blocks are back before its answer ends: /metrics read right after it counts none used, its prefixes cached", async () => {
    const blocks = async () => {
      const m = await metricsOf(s.url);
      return { used: sampleValue(m, "tsllm_kv_blocks_used"), cached: sampleValue(m, "tsllm_kv_blocks_cached") };
    };
    // 100 tokens: 7 blocks, past the prefix cache's idle blocks of earlier tests
    const r = await post(`${s.url}/v1/completions`, { prompt: "Lily and Ben found a dog", max_tokens: 100, ignore_eos: true, temperature: 0 });
    assert.equal(r.status, 200);
    const afterAnswer = await blocks();
    assert.equal(afterAnswer.used, 0, "used right after a non-streamed answer");
    assert.ok(afterAnswer.cached >= 6, `its full blocks are cached prefixes: ${afterAnswer.cached}`);
    const res = await fetch(`${s.url}/v1/completions`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ prompt: "The sun was hot", max_tokens: 100, ignore_eos: true, stream: true }) });
    assert.match(await res.text(), /data: \[DONE\]\n\n$/);
    assert.equal((await blocks()).used, 0, "used right after a stream's [DONE]");
  });
});

test("a stream cut by a shutdown counts once among the requests (a 200), its error event apart", { skip }, async () => {
  const s = await serveStories({ maxSequences: 2 });
  const res = await fetch(`${s.url}/v1/completions`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 400, ignore_eos: true, stream: true }) });
  const reader = res.body!.getReader();
  await reader.read();
  await s.server.close(0);
  let text = "";
  for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
  assert.match(text, /"code":"shutting_down"/);
  // the server is closed, its /metrics unreachable: its counters are read as /metrics renders them
  const metrics = (s.server as unknown as { metrics: Metrics }).metrics.render(s.model.engine.stats, { draining: true, bodyBytesHeld: 0 });
  s.model.dispose();
  const families = parsePrometheusText(metrics);
  assert.equal(sampleSum(families, "tsllm_http_requests_total"), 1, metrics);
  assert.equal(sampleValue(families, "tsllm_http_requests_total", { endpoint: "/v1/completions", status: "200" }), 1);
  assert.equal(sampleValue(families, "tsllm_stream_errors_total", { status: "503" }), 1);
});

test("a request of 12 prompts (one abort signal for all their runs) warns of no listener leak", { skip }, async () => {
  const s = await serveStories({ maxSequences: 4 });
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
  process.on("warning", onWarning);
  try {
    const r = await post(`${s.url}/v1/completions`, { prompt: Array.from({ length: 12 }, (_, i) => `Once upon a time ${i}`), max_tokens: 2 });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.choices.length, 12);
    // (warnings are emitted on the next turns)
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(warnings, []);
  } finally {
    process.off("warning", onWarning);
    await s.close();
  }
});

test("a request whose body is still arriving when the server starts shutting down is answered, not cut off with its connection", { skip }, async () => {
  const s = await serveStories({ maxSequences: 2 });
  const port = Number(new URL(s.url).port);
  const body = JSON.stringify({ prompt: "Once upon a time", max_tokens: 4, temperature: 0 });
  const socket = connect(port, "127.0.0.1");
  let answer = "";
  const ended = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  socket.on("error", () => {});
  socket.setEncoding("utf8");
  // the 100 Continue says the server is handling the request: its body is sent once the shutdown has begun
  const continued = new Promise<void>((resolve) => socket.on("data", (d: string) => { answer += d; if (answer.includes("100 Continue")) resolve(); }));
  socket.write(`POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nExpect: 100-continue\r\n\r\n`);
  await continued;
  const closed = s.server.close(20_000);
  socket.write(body);
  await closed;
  await ended;
  s.model.dispose();
  assert.match(answer, /HTTP\/1\.1 200 OK/, answer);
  assert.match(answer, /"finish_reason":"length"/);
});

test("requests pipelined on one connection are cancelled, all of them, when their client leaves (not only the one answering)", { skip }, async () => {
  const s = await serveStories({ maxSequences: 1 });
  try {
    const body = JSON.stringify({ prompt: "Once upon a time", max_tokens: 200, ignore_eos: true, temperature: 0 });
    const one = `POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const sock = connect(Number(new URL(s.url).port), "127.0.0.1");
    sock.on("error", () => undefined);
    sock.write(one.repeat(6));
    // the first runs, the five behind it wait for its answer (taken one at a time, as HTTP/1.1 answers them)
    await until(() => s.model.engine.stats.running === 1, "the first generation running");
    sock.destroy();
    await until(() => s.model.engine.stats.running + s.model.engine.stats.waiting === 0, "the engine idle");
    const families = await metricsOf(s.url);
    // 6 x 200 were asked; the one running was cut at its next step, the others never began (and
    // are closed, counted as clients that left, not left waiting forever for their turn)
    const predicted = sampleValue(families, "llamacpp:tokens_predicted_total") ?? 0;
    assert.ok(predicted < 200, `${predicted} tokens predicted for a client that left`);
    assert.equal(sampleValue(families, "tsllm_http_requests_total", { endpoint: "/v1/completions", status: "499" }), 6);
  } finally {
    await s.close();
  }
});

test("one connection's pipelined requests are taken one at a time, so a pipelining client cannot fill the queue every client shares", { skip }, async () => {
  const s = await serveStories({ maxSequences: 4 });
  try {
    const body = JSON.stringify({ prompt: "Once upon a time", max_tokens: 8, ignore_eos: true, temperature: 0 });
    const one = `POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const sock = connect(Number(new URL(s.url).port), "127.0.0.1");
    sock.on("error", () => undefined);
    let answers = "";
    sock.on("data", (d: Buffer) => (answers += d.toString()));
    sock.write(one.repeat(3));
    await until(() => (answers.match(/HTTP\/1\.1 200 OK/g) ?? []).length === 3, "three answers");
    sock.destroy();
    // four sequences were free: all three would have run in one batch, had they been taken at once
    assert.equal(s.model.engine.stats.peakStepSequences, 1);
  } finally {
    await s.close();
  }
});

test("a request that fails inside the server is reported to ServeOptions.log once, with its X-Request-Id and the stack; a client's error is not", { skip }, async () => {
  const reports: string[] = [];
  const s = await serveStories({ maxSequences: 2 }, { log: (r) => reports.push(r) });
  const lm = s.model.languageModel as unknown as { passBatch: (...a: unknown[]) => unknown };
  const original = lm.passBatch;
  let failures = 0;
  lm.passBatch = function (this: unknown, ...a: unknown[]) {
    if (failures-- > 0) throw new Error("injected engine failure");
    return original.apply(this, a);
  };
  try {
    assert.equal((await post(`${s.url}/v1/completions`, { prompt: "Once upon a time", max_tokens: "4" })).status, 400);
    failures = 1;
    const r = await post(`${s.url}/v1/completions`, { prompt: "Once upon a time", max_tokens: 4 }, { "X-Request-Id": "trace-500-plain" });
    assert.equal(r.status, 500);
    failures = 1;
    const res = await fetch(`${s.url}/v1/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json", "X-Request-Id": "trace-500-stream" }, body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }], max_tokens: 4, stream: true }) });
    // (it failed before its first event: a 500 of its own, not a 200 whose stream holds the error)
    assert.equal(res.status, 500);
    assert.match(await res.text(), /^\{"error":\{"message":"[^"]*injected engine failure/);
    assert.equal(reports.length, 2, reports.join("\n"));
    assert.match(reports[0]!, /^POST \/v1\/completions \(X-Request-Id trace-500-plain\) failed with a 500: Error: injected engine failure\n\s+at /);
    assert.match(reports[1]!, /^POST \/v1\/chat\/completions \(X-Request-Id trace-500-stream\) failed with a 500: Error: injected engine failure\n\s+at /);
  } finally {
    lm.passBatch = original;
    await s.close();
  }
});

test("a body cut off (its client left, the read timeout's 408, a malformed chunk's 400) is counted as it ended, never reported to the log as a 500", { skip }, async () => {
  const reports: string[] = [];
  const s = await serveStories({ maxSequences: 1 }, { readTimeoutMs: 1000, log: (r) => reports.push(r) });
  try {
    const port = Number(new URL(s.url).port);
    const head = `POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"prompt": "Once`;
    // each writes part of a body, then leaves (FIN or RST) once the server has read it, or waits for the server to give up
    const cases: { data: string; leave?: "end" | "reset"; status: string }[] = [
      { data: head, leave: "end", status: "499" },
      { data: head, leave: "reset", status: "499" },
      { data: head, status: "408" },
      { data: "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"prom\r\n", status: "400" },
    ];
    for (const { data, leave, status } of cases) {
      const before = sampleSum(await metricsOf(s.url), "tsllm_http_requests_total", { endpoint: "/v1/completions", status });
      await new Promise<void>((done) => {
        const socket = connect(port, "127.0.0.1", () => {
          socket.write(data, () => setImmediate(() => (leave === "end" ? socket.end() : leave === "reset" ? socket.resetAndDestroy() : undefined)));
        });
        socket.on("error", () => {});
        socket.resume();
        socket.on("close", () => done());
      });
      await until(async () => sampleSum(await metricsOf(s.url), "tsllm_http_requests_total", { endpoint: "/v1/completions", status }) === before + 1, `a ${status} to be counted`);
    }
    assert.deepEqual(reports, []);
  } finally {
    await s.close();
  }
});

test("with no queue (maxQueue 0) the 429 says the request cannot start and none may wait, not that 0 requests are waiting", { skip }, async () => {
  const s = await serveStories({ maxSequences: 1 }, { maxQueue: 0 });
  const controller = new AbortController();
  try {
    const running = await fetch(`${s.url}/v1/completions`, { method: "POST", signal: controller.signal, headers: { "Content-Type": "application/json" }, body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 400, ignore_eos: true, stream: true }) });
    await running.body!.getReader().read();
    const refused = await post(`${s.url}/v1/completions`, { prompt: "x", max_tokens: 1 });
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get("retry-after"), "1");
    assert.equal(refused.json.error.message, "the server is busy: this request cannot start now (the server runs 1 sequence at once) and no request may wait for a free one (at most 0 may wait: maxQueue); retry later");
  } finally {
    controller.abort();
    await s.close();
  }
});

test("close() and the model's dispose() right after a stream's client left: the run's failure is no unhandled rejection (fatal to the process)", { skip }, async () => {
  const rejections: unknown[] = [];
  const onRejection = (e: unknown) => rejections.push(e);
  process.on("unhandledRejection", onRejection);
  try {
    // (whether the engine has dropped the cancelled run when the dispose fails it depends on where
    // its loop is: a few rounds of what a shutdown does)
    for (let round = 0; round < 3; round++) {
      const s = await serveStories({ maxSequences: 1 });
      const controller = new AbortController();
      const res = await fetch(`${s.url}/v1/chat/completions`, { method: "POST", signal: controller.signal, headers: { "Content-Type": "application/json" }, body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }], max_tokens: 400, ignore_eos: true, stream: true }) });
      await res.body!.getReader().read();
      // the client leaves, and the server is closed and its model disposed at once (close() waits
      // for the requests being handled, which this one no longer is once its client is gone)
      controller.abort();
      await s.close();
    }
    // (a rejection nobody handles is reported once the microtasks of its turn have run)
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(rejections.map(String), []);
  } finally {
    process.off("unhandledRejection", onRejection);
  }
});
