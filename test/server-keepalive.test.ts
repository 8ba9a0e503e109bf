// Kept-alive connections as a load balancer holds them: AWS ALB and nginx (upstream
// keepalive_timeout) keep an idle connection 60 s, so the server must keep it longer, or the
// balancer may send a request onto a connection the server is closing (a reset, not an answer).
// Real HTTP on loopback, a real `tsllm serve` for the flag.
import assert from "node:assert/strict";
import { Agent, request } from "node:http";
import { test } from "node:test";
import { serveStories, skipStories as skip, spawnServe } from "./helpers/serve.js";

/** GET on a keep-alive agent: the status, the Keep-Alive header, and whether the request went on a connection kept from before */
function get(url: string, agent: Agent): Promise<{ status: number; keepAlive: string | undefined; reused: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent }, (res) => {
      res.resume();
      const keepAlive = res.headers["keep-alive"];
      res.on("end", () => resolve({ status: res.statusCode!, keepAlive: Array.isArray(keepAlive) ? keepAlive.join(", ") : keepAlive, reused: req.reusedSocket }));
    });
    req.on("error", reject);
    req.end();
  });
}

test("an idle kept-alive connection outlives node's 5 s, and the read timeout (from a request's first byte) does not cut it", { skip }, async () => {
  const s = await serveStories({}, { readTimeoutMs: 300 });
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const first = await get(`${s.url}/health`, agent);
    assert.equal(first.status, 200);
    assert.equal(first.keepAlive, "timeout=65");
    // idle past node's default keep-alive (5 s) and many times the read timeout
    await new Promise((r) => setTimeout(r, 6000));
    const second = await get(`${s.url}/health`, agent);
    assert.equal(second.status, 200);
    assert.equal(second.reused, true, "the second request went on the connection kept from the first");
  } finally {
    agent.destroy();
    await s.close();
  }
});

test("tsllm serve --keep-alive-timeout-ms sets how long an idle connection is kept (the Keep-Alive header says so); a bad value exits 2 naming the flag", { skip }, async () => {
  const s = await spawnServe(["--keep-alive-timeout-ms", "120000"]);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    assert.equal((await get(`${s.url}/health`, agent)).keepAlive, "timeout=120");
  } finally {
    agent.destroy();
    s.child.kill("SIGTERM");
    await s.exited;
  }
  const bad = await spawnServe(["--keep-alive-timeout-ms", "0"]).then(() => undefined, (e: Error) => e);
  assert.match(String(bad?.message), /exited with 2: [\s\S]*--keep-alive-timeout-ms/);
});
