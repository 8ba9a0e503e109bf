// DNS rebinding against `tsllm serve` on loopback: a page on an attacker's domain re-points the
// domain at 127.0.0.1, so to the browser the server is of the page's own origin and its answers
// (the prompts in /slots, /props, generations) are the page's to read. What still tells it apart is
// the Host header, which names the attacker's domain: requests are sent here over real HTTP with a
// forged Host, and by real chromium resolving a name to 127.0.0.1 as a rebound domain resolves.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { request } from "node:http";
import { hostname } from "node:os";
import { resolve } from "node:path";
import { test } from "node:test";
import { chromium } from "playwright-core";
import { hostGuard } from "../src/server/allowed-hosts.js";
import { startServer } from "../src/server/index.js";
import { CHROMIUM, skipWithoutChromium } from "./helpers/chromium.js";
import { skipNginx, startNginx } from "./helpers/nginx.js";
import { serveStories, skipStories as skip, spawnServe } from "./helpers/serve.js";
import { PROJECT_ROOT } from "./helpers/shared.js";

/** `method path` sent to the server at `url` with `host` as its Host header: the status and parsed body */
function sendWithHost(url: string, path: string, host: string, method = "GET", body?: unknown): Promise<{ status: number; json: any }> {
  const { hostname, port } = new URL(url);
  const text = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((done, fail) => {
    const req = request({ hostname, port, path, method, headers: { Host: host, ...(text ? { "Content-Type": "application/json" } : {}) } }, (res) => {
      let data = "";
      res.setEncoding("utf8").on("data", (c: string) => (data += c)).on("end", () => {
        let json: unknown;
        try { json = JSON.parse(data); } catch { json = data; }
        done({ status: res.statusCode!, json });
      });
    });
    req.on("error", fail).end(text);
  });
}

test("bound to loopback, a request whose Host is another domain is refused 403 host_not_allowed, naming the Host and the setting; nothing runs for it", { skip }, async () => {
  const s = await serveStories();
  try {
    const port = new URL(s.url).port;
    const steps = s.model.engine.stats.steps;
    for (const [method, path, body] of [["GET", "/props"], ["GET", "/slots"], ["GET", "/v1/models"], ["GET", "/"], ["POST", "/v1/completions", { prompt: "Once upon a time", max_tokens: 5 }]] as const) {
      const r = await sendWithHost(s.url, path, `attacker.example:${port}`, method, body);
      assert.equal(r.status, 403, `${method} ${path}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error.code, "host_not_allowed");
      assert.equal(r.json.error.message, `the Host header "attacker.example:${port}" is not a name of this server, which listens on ${s.url} (a page whose domain was re-pointed at this machine sends such a name: DNS rebinding); start it with allowedHosts naming attacker.example to answer requests sent to that name`);
    }
    assert.equal(s.model.engine.stats.steps, steps, "nothing generated");
    // the names and addresses that reach this machine's loopback, which no other site can take
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, "LOCALHOST", `[::1]:${port}`, "127.8.9.10", `app.localhost:${port}`, "localhost.", "10.1.2.3", `[fe80::1]:${port}`, "0x7f.1"]) {
      const r = await sendWithHost(s.url, "/props", host);
      assert.equal(r.status, 200, `${host}: ${JSON.stringify(r.json)}`);
    }
    // (a name that merely starts like one of them is another domain)
    for (const host of ["localhost.attacker.example", "127.0.0.1.attacker.example", "attacker.example.", "a b"]) {
      assert.equal((await sendWithHost(s.url, "/props", host)).status, 403, host);
    }
  } finally {
    await s.close();
  }
});

test("allowedHosts names the reverse proxy's public names (a leading dot: every name under it) and \"*\" turns the check off; a name with a port is refused at start", { skip }, async () => {
  const s = await serveStories({}, { allowedHosts: ["llm.example.com", ".corp.example"] });
  try {
    for (const host of ["llm.example.com", "LLM.example.com:443", "corp.example", "a.b.corp.example", "localhost"]) assert.equal((await sendWithHost(s.url, "/props", host)).status, 200, host);
    for (const host of ["example.com", "xllm.example.com", "corp.example.attacker.example", "xcorp.example"]) assert.equal((await sendWithHost(s.url, "/props", host)).status, 403, host);
  } finally {
    await s.close();
  }
  const any = await serveStories({}, { allowedHosts: ["*"] });
  try {
    assert.equal((await sendWithHost(any.url, "/props", "attacker.example")).status, 200);
  } finally {
    await any.close();
  }
  assert.throws(() => startServer(new Promise(() => {}), { port: 0, allowedHosts: ["llm.example.com:8080"] }), { message: 'allowedHosts: "llm.example.com:8080" is not a host name: name the host without its port (every port is answered)' });
  assert.throws(() => startServer(new Promise(() => {}), { port: 0, allowedHosts: [] }), /allowedHosts names no host/);
});

test("bound to another address, Host is checked only where allowedHosts is given (as Ollama: such a server is reached by whatever names its network gives it)", () => {
  assert.equal(hostGuard("0.0.0.0", "0.0.0.0", undefined), undefined);
  assert.equal(hostGuard("::", "::", undefined), undefined);
  assert.equal(hostGuard("192.168.1.5", "192.168.1.5", undefined), undefined);
  const listed = hostGuard("0.0.0.0", "0.0.0.0", ["llm.example.com"])!;
  assert.deepEqual(["llm.example.com", "192.168.1.5:8080", "localhost", "attacker.example"].map(listed), [true, true, true, false]);
  // loopback in every spelling an address comes back in
  for (const address of ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"]) assert.notEqual(hostGuard("localhost", address, undefined), undefined, address);
  // the name it was bound by is its own, and so is the machine's (as Ollama's)
  assert.equal(hostGuard("myhost.lan", "127.0.0.1", undefined)!("myhost.lan:8080"), true);
  assert.equal(hostGuard("127.0.0.1", "127.0.0.1", undefined)!(hostname()), true);
});

test("a page whose domain resolves to 127.0.0.1 (what DNS rebinding does) reads nothing from the server: chromium sends its domain as Host", { skip: skip || skipWithoutChromium() }, async () => {
  const s = await serveStories();
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--host-resolver-rules=MAP rebound.test 127.0.0.1"] });
  try {
    const page = await browser.newPage();
    const origin = s.url.replace("127.0.0.1", "rebound.test");
    await page.goto(`${origin}/health`);
    // same-origin to the browser: nothing but the server itself keeps the answers from the page
    const read = await page.evaluate(async () => Promise.all(["/props", "/slots"].map(async (p) => {
      const r = await fetch(p);
      return { status: r.status, body: await r.text() };
    })));
    for (const r of read) {
      assert.equal(r.status, 403, r.body);
      assert.equal(JSON.parse(r.body).error.code, "host_not_allowed");
      assert.doesNotMatch(r.body, /stories|model_path|prompt/);
    }
  } finally {
    await browser.close();
    await s.close();
  }
});

test("tsllm serve --allowed-hosts: the listed name is answered, another refused naming --allowed-hosts; a name with a port is one usage line before the model loads", { skip }, async () => {
  const s = await spawnServe(["--allowed-hosts", "llm.example.com, .corp.example"]);
  try {
    assert.equal((await sendWithHost(s.url, "/v1/models", "llm.example.com")).status, 200);
    const refused = await sendWithHost(s.url, "/v1/models", "other.example:8080");
    assert.equal(refused.status, 403);
    assert.match(refused.json.error.message, / start it with --allowed-hosts other\.example to answer requests sent to that name$/);
  } finally {
    s.child.kill("SIGTERM");
    await s.exited;
  }
  const bad = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "serve", "--model", "nothing-here.gguf", "--allowed-hosts", "llm.example.com:8080"], { cwd: PROJECT_ROOT, encoding: "utf8" });
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, /--allowed-hosts: "llm\.example\.com:8080" is not a host name: name the host without its port \(every port is answered\)/);
  assert.equal(bad.stderr.trim().split("\n").length <= 2, true, bad.stderr);
});

test("behind deploy/nginx.conf (proxy_set_header Host $host) the replicas on loopback answer the public name they are given with --allowed-hosts, and refuse another", { skip: skip || skipNginx }, async () => {
  const a = await spawnServe(["--allowed-hosts", "llm.example.test"]);
  const b = await spawnServe(["--allowed-hosts", "llm.example.test"]);
  const nginx = await startNginx([a.url, b.url]);
  try {
    // (as a client that reached nginx by that name sends it)
    for (let i = 0; i < 4; i++) assert.equal((await sendWithHost(nginx.url, "/v1/models", "llm.example.test")).status, 200);
    const other = await sendWithHost(nginx.url, "/v1/models", "attacker.example");
    assert.equal(other.status, 403);
    assert.equal(other.json.error.code, "host_not_allowed");
    // clients that reach nginx by its address, as the nginx tests do, are answered without the flag's help
    assert.equal((await sendWithHost(nginx.url, "/v1/models", new URL(nginx.url).host)).status, 200);
  } finally {
    await nginx.stop();
    a.child.kill("SIGKILL");
    b.child.kill("SIGKILL");
  }
});
