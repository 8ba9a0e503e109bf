import assert from "node:assert/strict";
import { test } from "node:test";
import { loadModel, type Model } from "../src/index.js";
import { startServer } from "../src/server/index.js";
import { CHAT_TEMPLATE, skipStories, STORIES } from "./helpers/serve.js";
import { sharedFile } from "./helpers/shared.js";

// llama-server routes GET /v1/health to its /health handler, both open without the API key
// (tools/server/server.cpp: "public endpoint (no API key check)"): a client or probe given the
// OpenAI base URL, http://host:8080/v1, checks the server at {base}/health.
test("GET /v1/health is /health: open without the API key, 503 with Retry-After while the model loads, then 200 ok", { skip: skipStories }, async () => {
  let loaded: (m: Model) => void = () => {};
  const loading = new Promise<Model>((resolve) => { loaded = resolve; });
  const server = await startServer(loading, { port: 0, chatTemplate: CHAT_TEMPLATE, apiKey: "sesame" });
  let model: Model | undefined;
  try {
    const probe = async (path: string) => {
      const r = await fetch(`${server.url}${path}`);
      return { status: r.status, retryAfter: r.headers.get("retry-after"), body: await r.json() as { status: string } };
    };
    const early = await probe("/v1/health");
    assert.equal(early.status, 503);
    assert.equal(early.retryAfter, "1");
    assert.deepEqual(early, await probe("/health"));

    model = await loadModel(sharedFile(STORIES)!, { threads: 1, contextSize: 256 });
    loaded(model);
    let ready = await probe("/v1/health");
    for (let i = 0; i < 200 && ready.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 10));
      ready = await probe("/v1/health");
    }
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
    assert.deepEqual(ready.body, (await probe("/health")).body);
    assert.equal(ready.body.status, "ok");
    // the rest of /v1/ still asks for the key
    assert.equal((await fetch(`${server.url}/v1/models`)).status, 401);
    // HEAD, as a load balancer's probe may send it
    assert.equal((await fetch(`${server.url}/v1/health`, { method: "HEAD" })).status, 200);
  } finally {
    await server.close(1000);
    model?.dispose();
  }
});
