// `tsllm serve`'s lifecycle as a process manager and a load balancer see it: a stop asked for while
// the model loads, a shutdown with generations running and queued, the signals a terminal or a
// supervisor sends; and llama-server's /metrics counters checked against what the client saw.
// Real `tsllm serve` child processes, real HTTP on loopback.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { spawnServe, until } from "./helpers/serve.js";

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
