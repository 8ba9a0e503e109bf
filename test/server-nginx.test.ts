import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { freePort, metric, skipNginx, startNginx } from "./helpers/nginx.js";
import { post, serveStories, skipStories, spawnServe, until } from "./helpers/serve.js";

const skip = skipStories || skipNginx;

/** how many completions a replica has answered 200 (its /metrics) */
const served = (url: string): Promise<number> => metric(url, "tsllm_http_requests_total", '{endpoint="/v1/completions",status="200"}');

test("deploy/nginx.conf: two tsllm serve replicas behind Debian's nginx; 32 concurrent requests use both; stopping one mid-run loses no request", { skip }, async () => {
  const a = await spawnServe(["--port", String(await freePort()), "--grace-ms", "20000"]);
  const b = await spawnServe(["--port", String(await freePort()), "--grace-ms", "20000"]);
  const nginx = await startNginx([a.url, b.url]);
  const lb = nginx.url;
  try {
    const prompts = ["Once upon a time", "Lily and Ben", "The cat", "One day"];
    const ask = (i: number) => post(`${lb}/v1/completions`, { prompt: prompts[i % 4], max_tokens: 24, temperature: 0 });
    const solo = await Promise.all(prompts.map((_, i) => ask(i)));
    const first = await Promise.all(Array.from({ length: 32 }, (_, i) => ask(i)));
    for (const [i, r] of first.entries()) {
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.equal(r.json.choices[0].text, solo[i % 4]!.json.choices[0].text);
    }
    assert.ok((await served(a.url)) > 0 && (await served(b.url)) > 0, "both replicas served");

    // a second wave; replica a gets SIGTERM while it runs: it drains, nginx sends new requests to b
    const wave: Promise<Awaited<ReturnType<typeof post>>>[] = [];
    for (let i = 0; i < 32; i++) {
      wave.push(ask(i));
      if (i === 8) a.child.kill("SIGTERM");
      await new Promise((r) => setTimeout(r, 15));
    }
    const second = await Promise.all(wave);
    for (const [i, r] of second.entries()) {
      assert.equal(r.status, 200, `request ${i}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.choices[0].text, solo[i % 4]!.json.choices[0].text);
    }
    assert.equal(await a.exited, 0);
    const after = await Promise.all(Array.from({ length: 8 }, (_, i) => ask(i)));
    for (const r of after) assert.equal(r.status, 200);
  } finally {
    await nginx.stop();
    a.child.kill("SIGKILL");
    b.child.kill("SIGKILL");
  }
});

test("deploy/nginx.conf: a conversation's turns (X-Session-Id) stay on one replica and hit its prefix cache; a replica killed mid-stream ends the stream with an error, its sessions move and come back when it restarts; none up: a JSON 502", { skip }, async () => {
  const ports = [await freePort(), await freePort()];
  const replicas = [await spawnServe(["--port", String(ports[0])]), await spawnServe(["--port", String(ports[1])])];
  const urls = replicas.map((r) => r.url) as [string, string];
  const nginx = await startNginx(urls);
  /** POSTs a completion of `prompt` through nginx in session `id`; which replica answered it (their /metrics, one request at a time) */
  const ask = async (id: string, prompt: string): Promise<{ replica: number; text: string }> => {
    // (a replica that is down answered none)
    const count = () => Promise.all(replicas.map((r) => served(r.url).catch(() => Number.NaN)));
    const before = await count();
    const r = await post(`${nginx.url}/v1/completions`, { prompt, max_tokens: 40, temperature: 0 }, { "X-Session-Id": id });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const after = await count();
    const replica = after.findIndex((n, i) => n === before[i]! + 1);
    assert.notEqual(replica, -1, "one replica answered");
    return { replica, text: r.json.choices[0].text };
  };
  try {
    const home = new Map<string, number>();
    // (the hash ring depends on the replicas' ports, which are free ports: six sessions may all
    // land on one replica, so more are started, up to 24, until both replicas have some)
    for (let i = 1; i <= 24 && (i <= 6 || new Set(home.values()).size < 2); i++) {
      const id = `conversation-${i}`;
      const first = await ask(id, "Once upon a time");
      const hits = await metric(urls[first.replica]!, "tsllm_prefix_cache_hit_tokens_total");
      // the second turn: the first one's prompt and reply, and more
      const second = await ask(id, `Once upon a time${first.text} Then`);
      assert.equal(second.replica, first.replica, `${id}'s second turn on the replica of its first`);
      assert.ok((await metric(urls[first.replica]!, "tsllm_prefix_cache_hit_tokens_total")) > hits, `${id}'s second turn hit the prefix cache`);
      home.set(id, first.replica);
    }
    assert.deepEqual(new Set(home.values()), new Set([0, 1]), "the sessions spread over both replicas");

    // a stream on replica 0, which is killed while it streams: the client's read fails (no hang, no stream that looks complete)
    const id = [...home].find(([, r]) => r === 0)![0];
    const res = await fetch(`${nginx.url}/v1/completions`, { method: "POST", headers: { "Content-Type": "application/json", "X-Session-Id": id }, body: JSON.stringify({ prompt: "Once", max_tokens: 400, ignore_eos: true, stream: true }) });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    await reader.read();
    replicas[0]!.child.kill("SIGKILL");
    let text = "";
    const decoder = new TextDecoder();
    await assert.rejects(async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        text += decoder.decode(value, { stream: true });
      }
    }, /terminated/);
    assert.doesNotMatch(text, /\[DONE\]/);
    await replicas[0]!.exited;

    // its sessions go to replica 1 while it is down (nginx retries a refused connection there)
    assert.equal((await ask(id, "Lily and Ben")).replica, 1);
    // restarted on its port: once nginx's fail_timeout (5 s) has passed, its sessions come back to it
    replicas[0] = await spawnServe(["--port", String(ports[0])]);
    await until(async () => (await ask(id, "Lily and Ben")).replica === 0, `${id} back on the restarted replica`);

    // no replica up: one JSON error a client can show, not nginx's HTML page
    for (const r of replicas) r.child.kill("SIGKILL");
    await Promise.all(replicas.map((r) => r.exited));
    const down = await post(`${nginx.url}/v1/chat/completions`, { messages: [{ role: "user", content: "hi" }] });
    assert.equal(down.status, 502);
    assert.match(down.headers.get("content-type")!, /^application\/json/);
    assert.equal(down.json.error.code, "no_replica");
    assert.match(down.json.error.message, /no tsllm replica answered/);
  } finally {
    await nginx.stop();
    for (const r of replicas) r.child.kill("SIGKILL");
  }
});

test("deploy/nginx.conf: a request with no answer after proxy_read_timeout (replicas hung by SIGSTOP; a long non-streamed request) gets a JSON 504 from the one replica it was sent to, not a second run on the other; woken up they answer again", { skip }, async () => {
  const replicas = await Promise.all([0, 1].map(() => spawnServe([])));
  const dir = mkdtempSync(join(tmpdir(), "tsllm-nginx-log-"));
  const log = join(dir, "upstreams.log");
  // both timeouts shortened by the same factor for the test (600 s -> 1 s; 10 s -> 1/60 s), and
  // each request's replica attempts logged ($upstream_addr lists every replica it was sent to)
  const shipped = readFileSync(new URL("../deploy/nginx.conf", import.meta.url), "utf8");
  const read = Number(/proxy_read_timeout (\d+)s;/.exec(shipped)![1]), next = Number(/proxy_next_upstream_timeout (\d+)s;/.exec(shipped)?.[1] ?? Infinity);
  assert.ok(next < read, "proxy_next_upstream_timeout is shorter than proxy_read_timeout");
  const nginx = await startNginx([replicas[0]!.url, replicas[1]!.url], (conf) => conf
    .replace("proxy_read_timeout 600s", "proxy_read_timeout 1s").replace(`proxy_next_upstream_timeout ${next}s`, `proxy_next_upstream_timeout ${Math.ceil((next * 1000) / read)}ms`)
    .replace("access_log off;", `log_format upstreams '$request_method $upstream_addr $status'; access_log ${log} upstreams;`));
  try {
    for (const r of replicas) r.child.kill("SIGSTOP");
    const hung = await post(`${nginx.url}/v1/completions`, { prompt: "Once", max_tokens: 4 });
    assert.equal(hung.status, 504);
    assert.match(hung.headers.get("content-type")!, /^application\/json/);
    assert.equal(hung.json.error.code, "replica_timeout");
    const line = readFileSync(log, "utf8").trim().split("\n").find((l) => l.startsWith("POST "));
    assert.match(line!, /^POST 127\.0\.0\.1:\d+ 504$/, "sent to one replica only");
    // woken up, they answer again
    for (const r of replicas) r.child.kill("SIGCONT");
    await until(async () => (await post(`${nginx.url}/v1/completions`, { prompt: "Once", max_tokens: 4 })).status === 200, "a replica to answer again");
  } finally {
    await nginx.stop();
    for (const r of replicas) r.child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
});

test("deploy/nginx.conf: a stream that waits in the queue longer than proxy_read_timeout is kept open by the server's keep-alive comments and ends whole", { skip }, async () => {
  // one in-process replica (listed twice) with one sequence, which a run holds (its reader stops
  // after one event, so the engine pauses it; under admission "reserve", which never preempts, it
  // keeps its sequence, where "preempt" would preempt it for the stream); pings every 100 ms,
  // nginx's read timeout 1 s
  const s = await serveStories({ maxSequences: 1, admission: "reserve" }, { ssePingMs: 100 });
  const nginx = await startNginx([s.url, s.url], (conf) => conf.replace("proxy_read_timeout 600s", "proxy_read_timeout 1s"));
  const controller = new AbortController();
  const held = s.model.submit(s.model.tokenizer.encode("Once upon a time", { addSpecialTokens: true }), { maxTokens: 400, ignoreEos: true, signal: controller.signal }).events();
  await held.next();
  try {
    const body = { prompt: "Lily and Ben", max_tokens: 24, temperature: 0 };
    const res = await fetch(`${nginx.url}/v1/completions`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...body, stream: true }) });
    assert.equal(res.status, 200);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let raw = "";
    // 30 comments through nginx: three times its read timeout in the queue
    while (raw.split(": keep-alive\n\n").length <= 30) {
      const { value, done } = await reader.read();
      assert.ok(!done, `the stream ended while it waited: ${raw}`);
      raw += value;
    }
    assert.match(raw, /^(: keep-alive\n\n)+$/);
    controller.abort();
    for await (const _ of held);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      raw += value;
    }
    const events = raw.split("\n\n").filter((e) => e.startsWith("data: "));
    assert.equal(events.at(-1), "data: [DONE]");
    const text = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)).choices[0].text as string).join("");
    assert.equal(text, (await post(`${s.url}/v1/completions`, body)).json.choices[0].text);
  } finally {
    controller.abort();
    await nginx.stop();
    await s.close();
  }
});

test("deploy/nginx.conf: a stream queued on a replica that drains is answered by the other replica (its 503 came before the stream began)", { skip }, async () => {
  const replicas = [await spawnServe(["--port", String(await freePort()), "--parallel", "1", "--ctx-size", "512", "--grace-ms", "60000"]), await spawnServe(["--port", String(await freePort())])];
  const nginx = await startNginx([replicas[0]!.url, replicas[1]!.url]);
  const health = async (url: string) => (await (await fetch(`${url}/health`)).json()) as { requests_running: number; requests_waiting: number };
  try {
    // a session that nginx sends to replica 0 (the hash ring depends on the ports)
    let id = "";
    for (let i = 0; !id; i++) {
      assert.ok(i < 40, "a session on replica 0");
      const before = await served(replicas[0]!.url);
      assert.equal((await post(`${nginx.url}/v1/completions`, { prompt: "x", max_tokens: 1 }, { "X-Session-Id": `s-${i}` })).status, 200);
      if ((await served(replicas[0]!.url)) > before) id = `s-${i}`;
    }
    const headers = { "X-Session-Id": id };
    const running = post(`${nginx.url}/v1/completions`, { prompt: "Once upon a time", max_tokens: 480, ignore_eos: true, temperature: 0 }, headers);
    await until(async () => (await health(replicas[0]!.url)).requests_running === 1, "the long request to run on replica 0");
    const body = { prompt: "Lily and Ben", max_tokens: 16, temperature: 0 };
    const stream = fetch(`${nginx.url}/v1/completions`, { method: "POST", headers: { "Content-Type": "application/json", ...headers }, body: JSON.stringify({ ...body, stream: true }) }).then(async (r) => ({ status: r.status, text: await r.text() }));
    await until(async () => (await health(replicas[0]!.url)).requests_waiting === 1, "the stream to wait on replica 0");
    replicas[0]!.child.kill("SIGTERM");
    const answered = await stream;
    assert.equal(answered.status, 200);
    const events = answered.text.split("\n\n").filter((e) => e.startsWith("data: "));
    assert.equal(events.at(-1), "data: [DONE]", answered.text);
    const text = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)).choices[0].text as string).join("");
    assert.equal(text, (await post(`${replicas[1]!.url}/v1/completions`, body)).json.choices[0].text);
    assert.equal((await running).status, 200);
    assert.equal(await replicas[0]!.exited, 0);
  } finally {
    await nginx.stop();
    for (const r of replicas) r.child.kill("SIGKILL");
  }
});
