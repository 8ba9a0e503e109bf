// `tsllm serve`'s lifecycle as a process manager and a load balancer see it: a stop asked for while
// the model loads, a shutdown with generations running and queued, the signals a terminal or a
// supervisor sends; and llama-server's /metrics counters checked against what the client saw.
// Real `tsllm serve` child processes, real HTTP on loopback.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { Agent, createServer, request, type IncomingMessage } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { parsePrometheusText, sampleValue } from "../scripts/prometheus-text.js";
import { exclusive } from "../src/engine/index.js";
import type { Model } from "../src/index.js";
import { post, serveStories, skipStories as skip, spawnServe, until } from "./helpers/serve.js";

const dir = mkdtempSync(join(tmpdir(), "tsllm-shutdown-"));
after(() => rmSync(dir, { recursive: true, force: true }));

for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
  test(`${signal} while the model is still loading: one line saying so, exit 0`, async () => {
    // a Hub that takes the download request and never answers: the model loads for as long as the test wants
    const asked: IncomingMessage[] = [];
    const hub = createServer((req) => void asked.push(req));
    await new Promise<void>((r) => hub.listen(0, "127.0.0.1", r));
    const endpoint = `http://127.0.0.1:${(hub.address() as AddressInfo).port}`;
    try {
      const env = { ...process.env, HF_ENDPOINT: endpoint, HF_HOME: join(dir, `hf-${signal}`), HF_HUB_OFFLINE: "", TRANSFORMERS_OFFLINE: "" };
      const s = await spawnServe(["--model", "tsllm-test/never-arrives"], { until: "listening", env });
      await until(() => asked.length > 0, "the download request");
      const health = await fetch(`${s.url}/health`);
      assert.equal(health.status, 503);
      // as the API routes' loading 503: a client or probe that honours Retry-After waits before it asks again
      assert.equal(health.headers.get("retry-after"), "1");
      assert.deepEqual(await health.json(), { status: "loading" });
      s.child.kill(signal);
      assert.equal(await s.exited, 0, s.stderr());
      const lines = s.stderr().trim().split("\n");
      assert.match(lines.at(-1)!, new RegExp(`^tsllm serve: ${signal} while loading the model: stopped before serving$`), s.stderr());
      assert.ok(lines.every((l) => l.startsWith("tsllm serve: ")), s.stderr());
    } finally {
      hub.closeAllConnections();
      hub.close();
    }
  });
}

const healthOf = async (url: string) => (await (await fetch(`${url}/health`)).json()) as { status: string; requests_running: number; requests_waiting: number };
const completion = (url: string, body: object, signal?: AbortSignal) => post(`${url}/v1/completions`, { temperature: 0, ...body }, {}, signal);

test("SIGTERM with one generation running and two queued: the queued are refused at once (503 with Retry-After, a stream too: it had sent nothing), the running one finishes, exit 0", { skip }, async () => {
  const s = await spawnServe(["--parallel", "1", "--ctx-size", "512", "--grace-ms", "60000"]);
  // (ignore_eos: it runs its whole max_tokens, long after the queued ones are answered)
  const running = completion(s.url, { prompt: "Once upon a time", max_tokens: 480, ignore_eos: true });
  let runningDone = false;
  void running.then(() => (runningDone = true));
  await until(async () => (await healthOf(s.url)).requests_running === 1, "the first generation to run");
  const queued = completion(s.url, { prompt: "Lily and Ben", max_tokens: 8 });
  // a stream's 200 and headers wait for its first event (or keep-alive comment, 15 s): refused before
  // it, the stream is answered as the request above, which clients retry and nginx hands to another replica
  const queuedStream = post(`${s.url}/v1/completions`, { prompt: "The cat sat", max_tokens: 8, stream: true });
  await until(async () => (await healthOf(s.url)).requests_waiting === 2, "two generations to wait for room");
  s.child.kill("SIGTERM");
  const q = await queued;
  assert.equal(runningDone, false, "the queued request was answered only after the running one finished");
  assert.equal(q.status, 503, JSON.stringify(q.json));
  assert.equal(q.json.error.code, "shutting_down");
  assert.equal(q.headers.get("retry-after"), "1");
  assert.equal(q.headers.get("connection"), "close");
  const qs = await queuedStream;
  assert.equal(runningDone, false, "the queued stream was answered only after the running request finished");
  assert.equal(qs.status, 503, JSON.stringify(qs.json));
  assert.equal(qs.json.error.code, "shutting_down");
  assert.equal(qs.headers.get("retry-after"), "1");
  const r = await running;
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assert.equal(r.json.choices[0].finish_reason, "length");
  assert.equal(r.json.usage.completion_tokens, 480);
  assert.equal(await s.exited, 0, s.stderr());
});

test("a request whose body arrives after the shutdown began, and which would have to wait for room, is refused at once (503, Retry-After)", { skip }, async () => {
  const s = await serveStories({ maxSequences: 1 });
  const port = Number(new URL(s.url).port);
  const running = completion(s.url, { prompt: "Once upon a time", max_tokens: 480, ignore_eos: true });
  let runningDone = false;
  void running.then(() => (runningDone = true));
  await until(() => s.model.engine.stats.running === 1, "the first generation to run");
  const body = JSON.stringify({ prompt: "Lily and Ben", max_tokens: 8, temperature: 0 });
  const socket = connect(port, "127.0.0.1");
  let answer = "";
  socket.setEncoding("utf8");
  // the 100 Continue says the server is handling the request: its body is sent once the shutdown has begun
  const continued = new Promise<void>((resolve) => socket.on("data", (d: string) => { answer += d; if (answer.includes("100 Continue")) resolve(); }));
  const answered = new Promise<void>((resolve) => socket.on("data", () => { if (/\r\n\r\n[\s\S]*\}$/.test(answer.slice(answer.indexOf("100 Continue") + 16))) resolve(); }));
  socket.write(`POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nExpect: 100-continue\r\n\r\n`);
  await continued;
  const closed = s.server.close(20_000);
  socket.write(body);
  await answered;
  assert.equal(runningDone, false, "the late request was answered only after the running one finished");
  assert.match(answer, /HTTP\/1\.1 503 /, answer);
  assert.match(answer, /Retry-After: 1/i);
  assert.match(answer, /"code":"shutting_down"/);
  socket.destroy();
  assert.equal((await running).status, 200);
  await closed;
  s.model.dispose();
});

test("an answer given during the drain closes its keep-alive connection, so the client's next request does not land on a connection being closed", { skip }, async () => {
  const s = await spawnServe(["--parallel", "1", "--ctx-size", "512", "--grace-ms", "60000"]);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const port = Number(new URL(s.url).port);
    const call = (path: string, body?: object) => new Promise<{ status: number; connection: string | undefined; reused: boolean }>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port, path, method: body ? "POST" : "GET", agent, headers: { "Content-Type": "application/json" } }, (res) => {
        res.resume();
        res.on("end", () => resolve({ status: res.statusCode!, connection: res.headers.connection, reused: req.reusedSocket }));
      });
      req.on("error", reject);
      req.end(body ? JSON.stringify(body) : undefined);
    });
    assert.equal((await call("/health")).connection, "keep-alive");
    const running = call("/v1/completions", { prompt: "Once upon a time", max_tokens: 480, ignore_eos: true, temperature: 0 });
    await until(async () => (await healthOf(s.url)).requests_running === 1, "the generation to run");
    s.child.kill("SIGTERM");
    await until(() => s.stderr().includes("SIGTERM: draining"), "the drain to begin");
    const r = await running;
    assert.equal(r.status, 200);
    assert.equal(r.reused, true, "the answer came on the connection kept alive");
    assert.equal(r.connection, "close");
    assert.equal(await s.exited, 0, s.stderr());
  } finally {
    agent.destroy();
    s.child.kill("SIGKILL");
  }
});

test("SIGINT after the reader of its stderr is gone (a `| tee` the same Ctrl-C ended) still drains: the request finishes, exit 0", { skip }, async () => {
  const s = await spawnServe(["--parallel", "1", "--ctx-size", "512", "--grace-ms", "60000"]);
  const running = completion(s.url, { prompt: "Once upon a time", max_tokens: 480, ignore_eos: true });
  await until(async () => (await healthOf(s.url)).requests_running === 1, "the generation to run");
  s.child.stderr!.destroy();
  s.child.kill("SIGINT");
  const r = await running;
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assert.equal(r.json.usage.completion_tokens, 480);
  assert.equal(await s.exited, 0);
});

test("a second SIGTERM during the drain exits 1 at once, saying so", { skip }, async () => {
  const s = await spawnServe(["--parallel", "1", "--ctx-size", "512", "--grace-ms", "60000"]);
  const running = completion(s.url, { prompt: "Once upon a time", max_tokens: 480, ignore_eos: true }).catch(() => undefined);
  await until(async () => (await healthOf(s.url)).requests_running === 1, "the generation to run");
  s.child.kill("SIGTERM");
  await until(() => s.stderr().includes("SIGTERM: draining"), "the drain to begin");
  s.child.kill("SIGTERM");
  assert.equal(await s.exited, 1, s.stderr());
  assert.match(s.stderr().trim().split("\n").at(-1)!, /^tsllm serve: SIGTERM again: exiting now$/);
  await running;
});

test("/metrics: llama-server's counters and the latency histograms agree with what the client sent and saw", { skip }, async () => {
  const s = await spawnServe(["--parallel", "1", "--ctx-size", "256"]);
  try {
    // prompts as token ids (their count known to the client) whose first tokens differ (no prefix-cache hit);
    // ignore_eos: each generates exactly max_tokens
    const requests = [{ prompt: [1, 400, 401, 402, 403], max_tokens: 7 }, { prompt: [1, 300, 301], max_tokens: 12, stream: true }, { prompt: [1, 200, 201, 202, 203, 204, 205], max_tokens: 3 }];
    let wallSeconds = 0;
    for (const body of requests) {
      const t0 = performance.now();
      const r = await completion(s.url, { ...body, ignore_eos: true });
      wallSeconds += (performance.now() - t0) / 1000;
      assert.equal(r.status, 200, JSON.stringify(r.json));
    }
    // a request its client leaves while it waits for room adds no prompt token: none was computed
    const t0 = performance.now();
    const running = completion(s.url, { prompt: [1, 100, 101, 102], max_tokens: 200, ignore_eos: true });
    await until(async () => (await healthOf(s.url)).requests_running === 1, "the long generation to run");
    const leaving = new AbortController();
    const leftAt = performance.now();
    const left = completion(s.url, { prompt: [1, 50, 51, 52, 53, 54, 55, 56], max_tokens: 5 }, leaving.signal).catch(() => "left");
    await until(async () => (await healthOf(s.url)).requests_waiting === 1, "the second generation to wait");
    leaving.abort();
    assert.equal(await left, "left");
    const leftSeconds = (performance.now() - leftAt) / 1000;
    assert.equal((await running).status, 200);
    wallSeconds += (performance.now() - t0) / 1000;
    requests.push({ prompt: [1, 100, 101, 102], max_tokens: 200 });
    await until(async () => (await healthOf(s.url)).requests_waiting === 0, "the engine to drop the one that left");
    const text = await (await fetch(`${s.url}/metrics`)).text();
    const m = parsePrometheusText(text);
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    assert.equal(sampleValue(m, "llamacpp:prompt_tokens_total"), sum(requests.map((r) => r.prompt.length)), text);
    assert.equal(sampleValue(m, "llamacpp:tokens_predicted_total"), sum(requests.map((r) => r.max_tokens)));
    const promptSeconds = sampleValue(m, "llamacpp:prompt_seconds_total"), decodeSeconds = sampleValue(m, "llamacpp:tokens_predicted_seconds_total");
    assert.ok(promptSeconds > 0 && decodeSeconds > 0, text);
    // one request at a time: the engine's time for them all is within the client's wall time
    assert.ok(promptSeconds + decodeSeconds <= wallSeconds, `${promptSeconds} + ${decodeSeconds} s > ${wallSeconds} s`);
    assert.ok(sampleValue(m, "llamacpp:n_decode_total") >= sum(requests.map((r) => r.max_tokens)), "one step or more per generated token");
    assert.equal(sampleValue(m, "llamacpp:requests_processing"), 0);
    assert.equal(sampleValue(m, "llamacpp:requests_deferred"), 0);
    // llama-server's rates (server_metrics' buckets, emptied by each read; this is the first): decode steps, a
    // request's first token not one (it comes with the prompt), over the decode seconds; prompt tokens over their seconds
    const close = (got: number, expected: number, what: string) => assert.ok(Math.abs(got - expected) < 1e-6 * Math.max(1, expected), `${what}: ${got}, expected ${expected}`);
    close(sampleValue(m, "llamacpp:predicted_tokens_seconds"), sum(requests.map((r) => r.max_tokens - 1)) / decodeSeconds, "predicted_tokens_seconds");
    close(sampleValue(m, "llamacpp:prompt_tokens_seconds"), sum(requests.map((r) => r.prompt.length)) / promptSeconds, "prompt_tokens_seconds");
    // the one that left is observed with what it did (nothing generated): in the end-to-end time, not in TTFT / TPOT;
    // and, as in vLLM's queue-time histogram, not in the queue time (it never left the queue to run): counted apart
    for (const [h, count, within] of [["tsllm_time_to_first_token_seconds", requests.length, wallSeconds], ["tsllm_time_per_output_token_seconds", requests.length, wallSeconds],
      ["tsllm_e2e_request_latency_seconds", requests.length + 1, wallSeconds + leftSeconds], ["tsllm_request_queue_time_seconds", requests.length, wallSeconds]] as const) {
      assert.equal(sampleValue(m, `${h}_count`), count, h);
      assert.equal(sampleValue(m, `${h}_bucket`, { le: "+Inf" }), count, h);
      assert.ok(sampleValue(m, `${h}_sum`) <= within, h);
    }
    assert.equal(sampleValue(m, "tsllm_requests_abandoned_in_queue_total"), 1, text);

    // the next read's rates are over the work since this one: one more request's
    const more = { prompt: [1, 150, 151, 152, 153, 154], max_tokens: 9 };
    assert.equal((await completion(s.url, { ...more, ignore_eos: true })).status, 200);
    const m2 = parsePrometheusText(await (await fetch(`${s.url}/metrics`)).text());
    const promptSeconds2 = sampleValue(m2, "llamacpp:prompt_seconds_total") - promptSeconds, decodeSeconds2 = sampleValue(m2, "llamacpp:tokens_predicted_seconds_total") - decodeSeconds;
    assert.ok(promptSeconds2 > 0 && decodeSeconds2 > 0, `${promptSeconds2} ${decodeSeconds2}`);
    close(sampleValue(m2, "llamacpp:predicted_tokens_seconds"), (more.max_tokens - 1) / decodeSeconds2, "predicted_tokens_seconds since the last read");
    close(sampleValue(m2, "llamacpp:prompt_tokens_seconds"), more.prompt.length / promptSeconds2, "prompt_tokens_seconds since the last read");
    // and with nothing done since, none (n_per_second of an empty bucket); the counters stay
    const m3 = parsePrometheusText(await (await fetch(`${s.url}/metrics`)).text());
    assert.equal(sampleValue(m3, "llamacpp:predicted_tokens_seconds"), 0);
    assert.equal(sampleValue(m3, "llamacpp:prompt_tokens_seconds"), 0);
    assert.equal(sampleValue(m3, "llamacpp:tokens_predicted_total"), sum(requests.map((r) => r.max_tokens)) + more.max_tokens);
  } finally {
    s.child.kill("SIGTERM");
    await s.exited;
  }
});

test("a stream whose headers promised keep-alive before the drain closes its connection when it ends during the drain", { skip }, async () => {
  // keep-alive past the test's length: only the drain may close the stream's connection
  // (keep-alive comments every 50 ms: the queued stream's headers go out with the first)
  const s = await spawnServe(["--parallel", "1", "--ctx-size", "512", "--grace-ms", "600000", "--keep-alive-timeout-ms", "600000", "--sse-ping-interval", "0.05"]);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const port = Number(new URL(s.url).port);
  // a request whose body never comes holds the drain open (the server waits for it), so nothing but the fix closes the stream's connection
  const holder = connect(port, "127.0.0.1");
  holder.on("error", () => undefined);
  try {
    const running = completion(s.url, { prompt: "Once upon a time", max_tokens: 480, ignore_eos: true });
    await until(async () => (await healthOf(s.url)).requests_running === 1, "the first generation to run");
    let closed = false;
    const stream = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port, path: "/v1/completions", method: "POST", agent, headers: { "Content-Type": "application/json" } }, resolve);
      req.on("socket", (socket) => socket.on("close", () => (closed = true)));
      req.on("error", reject);
      req.end(JSON.stringify({ prompt: "Lily and Ben", max_tokens: 480, ignore_eos: true, stream: true }));
    });
    assert.equal(stream.headers.connection, "keep-alive", "the stream's headers went out before the drain");
    holder.write("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{");
    await until(async () => (await healthOf(s.url)).requests_waiting === 1 || closed, "the stream to wait for room");
    s.child.kill("SIGTERM");
    await until(() => s.stderr().includes("SIGTERM: draining"), "the drain to begin");
    // (refused, as it waited for room: an error event, then the end)
    stream.resume();
    await new Promise((resolve) => stream.on("end", resolve));
    await until(() => closed, "the server to close the stream's connection");
    holder.destroy();
    assert.equal((await running).status, 200);
    assert.equal(await s.exited, 0, s.stderr());
  } finally {
    holder.destroy();
    agent.destroy();
    s.child.kill("SIGKILL");
  }
});

test("embeddings past the grace period: cut before their next pass (503 shutting_down), and close() returns only once their pass has ended, so the model can be disposed", { skip }, async () => {
  const s = await serveStories({ maxSequences: 1 });
  // 2048 inputs of 400 token ids: hundreds of passes
  const input = Array.from({ length: 2048 }, (_, i) => Array.from({ length: 400 }, (_, j) => 1 + ((i * 7 + j) % 500)));
  const answer = post(`${s.url}/v1/embeddings`, { input });
  // (the server's own count: no outside signal says a request's passes have begun)
  const inFlight = () => s.server["inFlight"].size;
  try {
    await until(() => inFlight() === 1, "the embedding request to compute");
  } finally {
    await s.server.close(0);
    s.model.dispose();
  }
  const r = await answer;
  assert.equal(r.status, 503, JSON.stringify(r.json));
  assert.equal(r.json.error.code, "shutting_down");
});

/** holds `model`'s pass queue (as a long pass of its engine would) until the returned function is called */
function holdPasses(model: Model): () => void {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  void exclusive(model.languageModel, () => held);
  return release;
}

test("an embedding request waiting for its turn behind the model's passes when the drain starts is refused at once (503, Retry-After, Connection: close), and the passes queued behind it keep their order", { skip }, async () => {
  const s = await serveStories({ maxSequences: 1 });
  const release = holdPasses(s.model);
  try {
    let settled = false;
    const answer = post(`${s.url}/v1/embeddings`, { input: "Once upon a time" }).finally(() => (settled = true));
    // (the server's own count: no outside signal says the request reached its wait)
    await until(() => s.server["inFlight"].size === 1, "the embedding request to wait for its pass");
    const later: string[] = [];
    const behind = exclusive(s.model.languageModel, async () => void later.push("a pass queued behind the refused one"));
    const closing = s.server.close(60_000);
    // without the refusal the request would wait for the held pass, which ends only below
    await until(() => settled, "the waiting embedding request to be refused");
    const r = await answer;
    assert.equal(r.status, 503, JSON.stringify(r.json));
    assert.equal(r.json.error.code, "shutting_down");
    assert.equal(r.headers.get("retry-after"), "1");
    assert.equal(r.headers.get("connection"), "close");
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(later, [], "a pass queued behind the refused one ran while the pass before it was under way");
    release();
    await behind;
    await closing;
  } finally {
    release();
    s.model.dispose();
  }
});

test("close() returns only once the model's pass under way has ended, however long the engine takes to notice a cancellation, so the model can be disposed", { skip }, async () => {
  const s = await serveStories({ maxSequences: 1 });
  const release = holdPasses(s.model);
  let closed = false;
  try {
    // (a reset instead of an answer is asserted below, not left to fail the test as an unhandled rejection)
    const answer = completion(s.url, { prompt: "Once upon a time", max_tokens: 8 }).catch((e: Error) => e);
    await until(() => s.server["inFlight"].size === 1, "the generation to wait for its pass");
    const closing = s.server.close(0).then(() => (closed = true));
    // close() gives cancelled generations 5 s to leave; the held pass (a long prompt chunk) outlasts them
    await new Promise((r) => setTimeout(r, 6_000));
    assert.equal(closed, false, "close() returned while a pass of the model was under way");
    release();
    await closing;
    s.model.dispose();
    const r = await answer;
    assert.ok(!(r instanceof Error), `the generation got no answer: ${String(r)}`);
    assert.equal(r.status, 503, JSON.stringify(r.json));
    assert.equal(r.json.error.code, "shutting_down");
  } finally {
    release();
    if (!s.model.disposed) s.model.dispose();
  }
});

test("deploy/kubernetes.yaml: the pod serves through a preStop sleep before its SIGTERM, its termination grace covers the sleep, --grace-ms and the cancels after it, and its probes wait 5 s", () => {
  const manifest = readFileSync(new URL("../deploy/kubernetes.yaml", import.meta.url), "utf8");
  // SIGTERM closes the listening socket at once (the shutdown tests above): without the sleep, the
  // connections the Service's proxies route to the pod before they learn it is leaving are refused
  const sleep = /preStop:\s*\n\s*exec: \{ command: \["sleep", "(\d+)"\] \}/.exec(manifest);
  assert.ok(sleep, "a preStop sleep");
  assert.ok(Number(sleep[1]) >= 5, `the sleep outlasts the endpoints' propagation: ${sleep[1]} s`);
  const graceMs = Number(/"--grace-ms", "(\d+)"/.exec(manifest)?.[1]);
  const termination = Number(/terminationGracePeriodSeconds: (\d+)/.exec(manifest)?.[1]);
  // the countdown to SIGKILL starts with the preStop hook; after --grace-ms the server waits up to 5 s for the cancelled requests to answer
  assert.ok(termination > Number(sleep[1]) + graceMs / 1000 + 5, `terminationGracePeriodSeconds ${termination} covers ${sleep[1]} s + ${graceMs} ms + 5 s`);
  // every probe waits longer than Kubernetes' default 1 s: /health waits for the event loop, held
  // over a second by large prompts being tokenized (docs/hardening.md)
  const probes = [...manifest.matchAll(/(\w+Probe):\n((?: {12}.*\n)+)/g)];
  assert.deepEqual(probes.map((p) => p[1]), ["readinessProbe", "livenessProbe", "startupProbe"]);
  for (const [, name, body] of probes) assert.ok(Number(/timeoutSeconds: (\d+)/.exec(body!)?.[1]) >= 5, `${name}: ${body}`);
});

test("a shutdown lets a long /tokenize or /detokenize answer reach its slow client whole, as it does a completion's", { skip }, async () => {
  const s = await serveStories({}, { bodyLimit: 32 * 2 ** 20 });
  const tokenizer = s.model.tokenizer;
  // the vocabulary's longest token, so that /detokenize's answer is megabytes: more than loopback's socket buffers hold
  let longest = 0;
  for (let id = 1; id < s.model.info.vocabSize; id++) if (tokenizer.tokenBytes(id).length > tokenizer.tokenBytes(longest).length) longest = id;
  const bodies = [
    { path: "/tokenize", body: { content: "Once upon a time there was a little girl. ".repeat(40_000), with_pieces: true } },
    { path: "/detokenize", body: { tokens: new Array<number>(1_500_000).fill(longest) } },
  ];
  const port = Number(new URL(s.url).port);
  // each client takes its answer's first bytes, then reads nothing more until the shutdown has had time to cut it
  const sockets = await Promise.all(bodies.map(({ path, body }) => new Promise<{ socket: Socket; head: Buffer }>((resolve) => {
    const text = JSON.stringify(body);
    const socket = connect(port, "127.0.0.1", () => socket.write(`POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`));
    socket.once("data", (head: Buffer) => {
      socket.pause();
      resolve({ socket, head });
    });
  })));
  const closed = s.server.close(60_000);
  await Promise.race([closed, new Promise((r) => setTimeout(r, 500))]);
  const answers = await Promise.all(sockets.map(({ socket, head }) => new Promise<string>((resolve) => {
    const parts = [head];
    socket.on("data", (d: Buffer) => parts.push(d));
    socket.on("close", () => resolve(Buffer.concat(parts).toString()));
    socket.resume();
  })));
  await closed;
  s.model.dispose();
  for (const [i, answer] of answers.entries()) {
    const body = answer.slice(answer.indexOf("\r\n\r\n") + 4);
    assert.match(answer, /^HTTP\/1\.1 200 /, bodies[i]!.path);
    assert.equal(Buffer.byteLength(body), Number(/content-length: (\d+)/i.exec(answer)?.[1]), `${bodies[i]!.path}: the whole answer`);
    assert.doesNotThrow(() => JSON.parse(body), bodies[i]!.path);
  }
});
