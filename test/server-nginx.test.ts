import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { post, skipStories, spawnServe, until } from "./helpers/serve.js";
import { PROJECT_ROOT } from "./helpers/shared.js";

const NGINX = "/usr/sbin/nginx";
const skip = skipStories || (existsSync(NGINX) ? false : `${NGINX} not found: this test needs Debian's nginx (apt-get install -y nginx; .ci/run installs it)`);

const freePort = () => new Promise<number>((r) => {
  const srv = createServer().listen(0, "127.0.0.1", () => {
    const { port } = srv.address() as { port: number };
    srv.close(() => r(port));
  });
});

/** how many completions a replica has answered 200 (its /metrics) */
async function served(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/tsllm_http_requests_total\{endpoint="\/v1\/completions",status="200"\} (\d+)/.exec(text)?.[1] ?? 0);
}

test("deploy/nginx.conf: two tsllm serve replicas behind Debian's nginx; 32 concurrent requests use both; stopping one mid-run loses no request", { skip }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-nginx-"));
  const a = await spawnServe(["--port", String(await freePort()), "--grace-ms", "20000"]).catch((e) => { throw e; });
  const b = await spawnServe(["--port", String(await freePort()), "--grace-ms", "20000"]);
  const port = await freePort();
  const conf = readFileSync(resolve(PROJECT_ROOT, "deploy/nginx.conf"), "utf8")
    .replace("127.0.0.1:8081", new URL(a.url).host).replace("127.0.0.1:8082", new URL(b.url).host).replace("listen 127.0.0.1:8080", `listen 127.0.0.1:${port}`);
  writeFileSync(join(dir, "nginx.conf"), conf);
  const nginx = spawn(NGINX, ["-p", dir, "-c", join(dir, "nginx.conf"), "-g", `daemon off; pid ${join(dir, "nginx.pid")}; error_log ${join(dir, "error.log")};`], { stdio: "ignore" });
  const lb = `http://127.0.0.1:${port}`;
  try {
    await until(async () => (await fetch(`${lb}/health`).then((r) => r.ok, () => false)), "nginx to start");
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
    nginx.kill("SIGTERM");
    a.child.kill("SIGKILL");
    b.child.kill("SIGKILL");
    await new Promise((r) => nginx.once("exit", r));
    rmSync(dir, { recursive: true, force: true });
  }
});
