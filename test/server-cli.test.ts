import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { request, type IncomingMessage } from "node:http";
import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import { Readable } from "node:stream";
import { CHAT_TEMPLATE, post, skipStories as skip, spawnServe, STORIES, until } from "./helpers/serve.js";
import { PROJECT_ROOT, sharedFile } from "./helpers/shared.js";

const CLI = resolve(PROJECT_ROOT, "src/cli/main.ts");
const dir = mkdtempSync(join(tmpdir(), "tsllm-serve-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const template = join(dir, "t.jinja");
writeFileSync(template, CHAT_TEMPLATE);
const serve = (args: string[]) => spawnServe([...args, "--chat-template", template]);

/** reads an SSE response to its end: the texts, whether [DONE] came, and an error event's code */
async function readStream(res: Response, onFirst?: () => void): Promise<{ text: string; finish: string | undefined; done: boolean; error?: string }> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "", text = "", finish: string | undefined, done = false, first = true, error: string | undefined;
  for (;;) {
    const r = await reader.read();
    if (r.done) break;
    buf += r.value;
    let at;
    while ((at = buf.indexOf("\n\n")) >= 0) {
      const line = buf.slice(0, at).replace(/^data: /, "");
      buf = buf.slice(at + 2);
      if (line === "[DONE]") { done = true; continue; }
      const c = JSON.parse(line);
      if (c.error) { error = c.error.code; continue; }
      text += c.choices[0]?.text ?? "";
      finish = c.choices[0]?.finish_reason ?? finish;
      if (first) { first = false; onFirst?.(); }
    }
  }
  return { text, finish, done, ...(error ? { error } : {}) };
}

test("tsllm serve: greedy text equals tsllm generate's; SIGTERM drains the request in flight, refuses new ones and exits 0", { skip }, async () => {
  const s = await serve(["--grace-ms", "30000"]);
  try {
    const gen = spawnSync(process.execPath, ["--import", "tsx", CLI, "generate", "--model", sharedFile(STORIES)!, "--prompt", "Once upon a time", "--temperature", "0", "--max-tokens", "40", "--threads", "1", "--json"], { cwd: PROJECT_ROOT, encoding: "utf8" });
    assert.equal(gen.status, 0, gen.stderr);
    const r = await post(`${s.url}/v1/completions`, { prompt: "Once upon a time", temperature: 0, max_tokens: 40 });
    assert.equal(r.json.choices[0].text, JSON.parse(gen.stdout).completion);
    const chatGen = spawnSync(process.execPath, ["--import", "tsx", CLI, "generate", "--model", sharedFile(STORIES)!, "--chat", "--chat-template", template, "--system", "Be kind.", "--prompt", "Lily and Ben", "--temperature", "0", "--max-tokens", "30", "--threads", "1", "--json"], { cwd: PROJECT_ROOT, encoding: "utf8" });
    assert.equal(chatGen.status, 0, chatGen.stderr);
    const c = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "system", content: "Be kind." }, { role: "user", content: "Lily and Ben" }], temperature: 0, max_tokens: 30 });
    assert.equal(c.json.choices[0].message.content, JSON.parse(chatGen.stdout).completion);

    // the request is in flight when SIGTERM comes, whatever the speed of the machine: its headers
    // have been taken (the server's 100 Continue says so), its body is sent once the drain began
    // (a stream cut at its first event instead may end before the signal is handled)
    const body = JSON.stringify({ prompt: "Once upon a time", max_tokens: 1500, ignore_eos: true, temperature: 0, stream: true });
    const url = new URL(`${s.url}/v1/completions`);
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", agent: false, headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body), Expect: "100-continue" } });
    const answered = new Promise<IncomingMessage>((resolve, reject) => { req.on("response", resolve); req.on("error", reject); });
    const continued = new Promise<void>((resolve) => req.on("continue", resolve));
    req.flushHeaders();
    await continued;
    s.child.kill("SIGTERM");
    await until(() => s.stderr().includes("SIGTERM: draining"), "the drain to begin");
    await assert.rejects(fetch(`${s.url}/health`), "no new connections after SIGTERM");
    req.end(body);
    const res = await answered;
    assert.equal(res.headers.connection, "close", "an answer begun during the drain closes its connection");
    const out = await readStream(new Response(Readable.toWeb(res) as ReadableStream<Uint8Array>));
    assert.equal(out.done, true, "the stream in flight ran to its end");
    assert.equal(out.finish, "length");
    assert.equal(await s.exited, 0, s.stderr());
    assert.match(s.stderr(), /SIGTERM: draining/);
  } finally {
    s.child.kill("SIGKILL");
  }
});

test("tsllm serve: past --grace-ms the requests in flight are cancelled and the process exits 0; usage errors exit 2", { skip }, async () => {
  const s = await serve(["--grace-ms", "50"]);
  try {
    const res = await fetch(`${s.url}/v1/completions`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 2000, ignore_eos: true, stream: true }) });
    const out = await readStream(res, () => s.child.kill("SIGINT"));
    assert.equal(out.done, false, "cut off");
    assert.equal(out.error, "shutting_down", "the stream says why it ended");
    assert.equal(await s.exited, 0, s.stderr());
  } finally {
    s.child.kill("SIGKILL");
  }
  const bad = spawnSync(process.execPath, ["--import", "tsx", CLI, "serve", "--model", "x.gguf", "--kv-memory", "lots"], { cwd: PROJECT_ROOT, encoding: "utf8" });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--kv-memory expects a size/);
  const help = spawnSync(process.execPath, ["--import", "tsx", CLI, "serve", "--help"], { cwd: PROJECT_ROOT, encoding: "utf8" });
  assert.equal(help.status, 0);
  assert.match(help.stdout, /^Usage: tsllm serve/);
});

test("tsllm serve: a next turn through a reply takes the reply's rows from the prefix cache; --no-cache-replies caches prompts only", { skip }, async () => {
  for (const flags of [[], ["--no-cache-replies"]]) {
    const s = await serve(flags);
    try {
      const prompt = "Once upon a time";
      const first = await post(`${s.url}/v1/completions`, { prompt, temperature: 0, max_tokens: 48, ignore_eos: true });
      const next = await post(`${s.url}/v1/completions`, { prompt: prompt + first.json.choices[0].text + " Then", temperature: 0, max_tokens: 2 });
      const cached = next.json.usage.prompt_tokens_details.cached_tokens;
      // the first prompt is shorter than a 16-token block: only the reply's rows can make a hit
      if (flags.length === 0) assert.ok(cached >= 32, `cached ${cached} tokens through the reply`);
      else assert.equal(cached, 0, "nothing of the reply cached");
    } finally {
      s.child.kill("SIGKILL");
    }
  }
});

test("tsllm serve --admission: preempt (default) runs requests past what max_tokens would reserve and pauses one when the KV memory runs out; reserve never pauses; a bad value is one usage line", { skip }, async () => {
  // stories260K's K/V is 1,280 bytes a position (5 layers x K and V x 4 heads x 8 dims x f32): 256 KiB holds
  // 204 positions, under two requests of 120 tokens each
  const preemptionsAfter = async (flags: string[]) => {
    const s = await serve(["--ctx-size", "256", "--kv-memory", "256KiB", "--parallel", "4", ...flags]);
    try {
      const answers = await Promise.all([0, 1, 2].map(() => post(`${s.url}/v1/completions`, { prompt: "Once upon a time", temperature: 0, max_tokens: 110, ignore_eos: true })));
      for (const a of answers) assert.equal(a.json.usage?.completion_tokens, 110, JSON.stringify(a.json));
      // preempted and recomputed, a greedy answer is the same text
      assert.ok(answers.every((a) => a.json.choices[0].text === answers[0]!.json.choices[0].text));
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      return Number(/^tsllm_preemptions_total (\d+)$/m.exec(metrics)?.[1]);
    } finally {
      s.child.kill("SIGKILL");
    }
  };
  assert.ok((await preemptionsAfter([])) > 0, "the default pauses a request when the memory runs out");
  assert.equal(await preemptionsAfter(["--admission", "reserve"]), 0);
  const bad = spawnSync(process.execPath, ["--import", "tsx", CLI, "serve", "--model", sharedFile(STORIES)!, "--admission", "fast"], { cwd: PROJECT_ROOT, encoding: "utf8" });
  assert.equal(bad.status, 2);
  assert.equal(bad.stderr.trim(), 'tsllm: error: --admission must be preempt or reserve, got "fast"');
});

test("tsllm serve's refusals name its flags (--kv-memory, --ctx-size, --parallel), where a server started from the library names its options", { skip }, async () => {
  // stories260K's K/V is 1,280 bytes a position: 64 KiB holds 51 positions, 3 blocks of 16
  const s = await serve(["--ctx-size", "256", "--kv-memory", "64KiB", "--parallel", "2"]);
  try {
    const kv = await post(`${s.url}/v1/completions`, { prompt: "Once", max_tokens: 200 });
    assert.equal(kv.status, 400, JSON.stringify(kv.json));
    assert.match(kv.json.error.message, /; lower max_tokens, or start the server with a larger --kv-memory$/);
    const long = await post(`${s.url}/v1/completions`, { prompt: "Once upon a time ".repeat(200) });
    assert.equal(long.status, 400, JSON.stringify(long.json));
    assert.match(long.json.error.message, /^This model's maximum context length is \d+ tokens \(n_ctx in GET \/v1\/models\)\. However, your prompt resulted in \d+ tokens, more than the context holds .*Please reduce the length of the prompt, or start the server with a larger --ctx-size\.$/);
    const wide = await post(`${s.url}/v1/completions`, { prompt: "Once", n: 3, max_tokens: 1 });
    assert.equal(wide.status, 400, JSON.stringify(wide.json));
    assert.match(wide.json.error.message, /sequences this server runs at once \(--parallel\)$/);
  } finally {
    s.child.kill("SIGKILL");
  }
});

test("tsllm serve --body-limit and --bodies-limit: a body over the one is 413, bodies arriving past the other 503 with Retry-After; a bad value is one usage line before the model loads", { skip }, async () => {
  const s = await serve(["--body-limit", "1MiB", "--bodies-limit", "1MiB"]);
  const port = Number(new URL(s.url).port);
  const sockets: Socket[] = [];
  try {
    // 2 MiB: under the default 4 MiB, over the flag's
    const big = await post(`${s.url}/v1/completions`, { prompt: "x".repeat(2 * 2 ** 20) });
    assert.equal(big.status, 413, JSON.stringify(big.json));
    // (naming the flag that raises it, as the 408 and 429 name theirs)
    assert.match(big.json.error.message, /larger than the 1048576 bytes this server accepts \(--body-limit\)$/);
    // a body of 1000 KiB holds 936 KiB of the budget (its first 64 KiB are free) while it arrives;
    // another's 300 KiB would take the total past 1 MiB
    const held = (port: number, bytes: number, declared: number) => {
      const socket = (sockets[sockets.length] = connect(port, "127.0.0.1"));
      let answer = "";
      socket.setEncoding("utf8");
      socket.on("data", (d: string) => (answer += d));
      socket.on("error", () => {});
      socket.write(`POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`);
      socket.write(Buffer.alloc(bytes, 0x20));
      return () => answer;
    };
    const bytesHeld = async () => Number(/^tsllm_request_body_bytes_held (\d+)$/m.exec(await (await fetch(`${s.url}/metrics`)).text())?.[1]);
    held(port, 900 * 1024, 1000 * 1024);
    await until(async () => (await bytesHeld()) === (900 - 64) * 1024, "the first body to be held");
    const second = held(port, 300 * 1024, 1000 * 1024);
    await until(() => second().includes("\r\n\r\n{"), "the second body to be answered");
    assert.match(second(), /^HTTP\/1\.1 503 /);
    assert.match(second(), /\r\nretry-after: 1\r\n/i);
    assert.match(second(), /"code":"server_busy"/);
    assert.match(second(), /as many as it holds at once \(--bodies-limit\); retry later/);
  } finally {
    for (const socket of sockets) socket.destroy();
    s.child.kill("SIGKILL");
  }
  // the model does not exist: a value checked only once it loaded would end in its load's error (exit 1)
  for (const [args, says] of [
    [["--body-limit", "lots"], "--body-limit expects a size in bytes"], [["--body-limit", "0"], "--body-limit must be positive"],
    [["--body-limit", "1T"], "--body-limit must be at most"], [["--bodies-limit", "1MiB"], "--bodies-limit must be at least --body-limit (4194304 bytes, its default)"],
    [["--body-limit", "8MiB", "--bodies-limit", "4MiB"], "--bodies-limit must be at least --body-limit (8388608 bytes)"],
  ] as const) {
    const bad = spawnSync(process.execPath, ["--import", "tsx", CLI, "serve", "--model", join(dir, "missing.gguf"), ...args], { cwd: PROJECT_ROOT, encoding: "utf8" });
    assert.equal(bad.status, 2, `${args.join(" ")}: ${bad.stderr}`);
    assert.equal(bad.stderr, `tsllm: error: ${bad.stderr.slice("tsllm: error: ".length).split("\n")[0]}\n`, "one line");
    assert.ok(bad.stderr.startsWith(`tsllm: error: ${says}`), bad.stderr);
  }
  const help = spawnSync(process.execPath, ["--import", "tsx", CLI, "serve", "--help"], { cwd: PROJECT_ROOT, encoding: "utf8" });
  assert.match(help.stdout, /--body-limit BYTES/);
  assert.match(help.stdout, /--bodies-limit BYTES/);
});

test("tsllm serve writes a line to stderr for each request when it ends (status, X-Request-Id; a client that left 499), never for probes; --no-log-requests writes none", { skip }, async () => {
  const s = await serve([]);
  try {
    const r = await post(`${s.url}/v1/completions?trace=1`, { prompt: "Once upon a time", max_tokens: 3 }, { "X-Request-Id": "trace-log-1" });
    assert.equal(r.status, 200);
    assert.equal((await post(`${s.url}/v1/completions`, { prompt: "Once", max_tokens: "3" }, { "X-Request-Id": "trace-log-2" })).status, 400);
    for (const path of ["/health", "/metrics", "/v1/models", "/"]) assert.equal((await fetch(`${s.url}${path}`)).status, 200, path);
    const controller = new AbortController();
    const left = fetch(`${s.url}/v1/completions`, { method: "POST", signal: controller.signal, headers: { "Content-Type": "application/json", "X-Request-Id": "trace-log-3" }, body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 1500, ignore_eos: true, stream: true }) });
    await (await left).body!.getReader().read();
    controller.abort();
    await until(() => s.stderr().includes("trace-log-3"), "the request that left to be written");
    // one that resets its connection mid-stream: its socket no longer knows its peer when the answer closes
    const body = JSON.stringify({ prompt: "Once upon a time", max_tokens: 1500, ignore_eos: true, stream: true });
    const socket = connect(Number(new URL(s.url).port), "127.0.0.1");
    socket.on("error", () => {});
    socket.write(`POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: trace-log-4\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    await new Promise((resolve) => socket.once("data", resolve));
    socket.resetAndDestroy();
    await until(() => s.stderr().includes("trace-log-4"), "the request that reset its connection to be written");
    // malformed HTTP, answered by the server before any handler sees a request: logged too, its answer with an id
    const raw = await new Promise<string>((resolve) => {
      const bad = connect(Number(new URL(s.url).port), "127.0.0.1", () => bad.write("NOT HTTP AT ALL\r\n\r\n"));
      let got = "";
      bad.setEncoding("utf8");
      bad.on("data", (d: string) => (got += d));
      bad.on("error", () => {});
      bad.on("close", () => resolve(got));
    });
    const rawId = /\r\nX-Request-Id: (req_[0-9a-f]{32})\r\n/.exec(raw)?.[1];
    assert.ok(rawId, raw);
    assert.match(raw, /^HTTP\/1\.1 400 /);
    await until(() => s.stderr().includes(rawId), "the malformed request to be written");
    assert.match(s.stderr(), new RegExp(`^tsllm serve: \\(no request read\\) 400 from 127\\.0\\.0\\.1 \\(X-Request-Id ${rawId}\\): the request is not valid HTTP: `, "m"));
    const lines = s.stderr().split("\n").filter((l) => / ms from /.test(l));
    assert.equal(lines.length, 4, s.stderr());
    assert.match(lines[3]!, /^tsllm serve: POST \/v1\/completions 499 \d+ ms from 127\.0\.0\.1 \(X-Request-Id trace-log-4\)$/);
    assert.match(lines[0]!, /^tsllm serve: POST \/v1\/completions 200 \d+ ms from 127\.0\.0\.1 \(X-Request-Id trace-log-1\)$/);
    assert.match(lines[1]!, /^tsllm serve: POST \/v1\/completions 400 \d+ ms from 127\.0\.0\.1 \(X-Request-Id trace-log-2\)$/);
    assert.match(lines[2]!, /^tsllm serve: POST \/v1\/completions 499 \d+ ms from 127\.0\.0\.1 \(X-Request-Id trace-log-3\)$/);
  } finally {
    s.child.kill("SIGKILL");
  }
  const quiet = await serve(["--no-log-requests"]);
  try {
    assert.equal((await post(`${quiet.url}/v1/completions`, { prompt: "Once upon a time", max_tokens: 3 })).status, 200);
    quiet.child.kill("SIGTERM");
    assert.equal(await quiet.exited, 0);
    assert.doesNotMatch(quiet.stderr(), / ms from /);
  } finally {
    quiet.child.kill("SIGKILL");
  }
});

test("tsllm serve: a port already taken, or a --host this machine has no interface for, is one line naming --port / --host, exit 1, not Node's bare \"listen EADDRINUSE\"", { skip }, async () => {
  // llama-server says "couldn't bind HTTP server socket, hostname: H, port: P"; Node's error named neither flag
  const taken = createServer();
  await new Promise<void>((done) => taken.listen(0, "127.0.0.1", done));
  const port = (taken.address() as AddressInfo).port;
  try {
    const run = (args: string[]) => {
      const r = spawnSync(process.execPath, ["--import", "tsx", CLI, "serve", "--model", sharedFile(STORIES)!, ...args], { cwd: PROJECT_ROOT, encoding: "utf8", timeout: 120_000 });
      return { code: r.status, stdout: r.stdout, stderr: r.stderr };
    };
    // spawnSync blocks this process, but the taken port's socket is bound by the kernel all the same
    assert.deepEqual(run(["--port", String(port)]), { code: 1, stdout: "", stderr: `tsllm: error: --port ${port}: 127.0.0.1:${port} is in use (another server listens there); give another --port, or --port 0 for a free one\n` });
    // 192.0.2.1: TEST-NET-1 (RFC 5737), an address no machine's interface has
    assert.deepEqual(run(["--host", "192.0.2.1", "--port", "0"]), { code: 1, stdout: "", stderr: "tsllm: error: --host 192.0.2.1: no interface of this machine has that address (127.0.0.1: this machine only; 0.0.0.0: every interface)\n" });
  } finally {
    taken.close();
  }
});
