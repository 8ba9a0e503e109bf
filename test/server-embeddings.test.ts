import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { loadEmbeddingModel, startServer } from "../src/index.js";
import type { OpenAIServer } from "../src/server/index.js";
import { post, spawnServe } from "./helpers/serve.js";
import { SHARED, skipWithoutShared } from "./helpers/shared.js";

/* POST /v1/embeddings on a sentence-transformers model, through the openai client and raw HTTP. */

const skip = skipWithoutShared("hf-oracle/minilm-embed.expected.json");
const folder = `${SHARED}/hf-oracle/minilm-embed`;

describe("the server on an embedding model", { skip }, () => {
  const exp = skip ? undefined : JSON.parse(readFileSync(`${folder}.expected.json`, "utf8"));
  let server: OpenAIServer;
  let dispose: () => void;
  let client: OpenAI;
  before(async () => {
    const m = await loadEmbeddingModel(folder, { threads: 1 });
    dispose = () => m.dispose();
    server = await startServer(m, { port: 0 });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0 });
  });
  after(async () => { await server?.close(1000); dispose?.(); });

  const close = (a: number[], b: number[]) => a.length === b.length && a.every((x, i) => Math.abs(x - b[i]!) <= 1e-4);

  test("openai client (base64 by default, and float): the model's encode() vectors, usage", async () => {
    const texts: string[] = exp.cases.slice(0, 3).map((c: { text: string }) => c.text);
    const r = await client.embeddings.create({ model: "minilm-embed", input: texts });
    assert.equal(r.object, "list");
    assert.equal(r.data.length, 3);
    r.data.forEach((d, i) => {
      assert.equal(d.index, i);
      assert.ok(close(d.embedding, exp.cases[i].embedding_unnormalized), `input ${i}`);
    });
    assert.equal(r.usage.prompt_tokens, exp.cases.slice(0, 3).reduce((s: number, c: { n_tokens: number }) => s + c.n_tokens, 0));
    const f = await client.embeddings.create({ model: "minilm-embed", input: texts[0]!, encoding_format: "float" });
    assert.ok(close(f.data[0]!.embedding, exp.cases[0].embedding_unnormalized));
  });

  test("raw HTTP: base64 is little-endian float32; errors in OpenAI's shape", async () => {
    const r = await post(`${server.url}/v1/embeddings`, { input: "This is an example sentence", encoding_format: "base64" });
    assert.equal(r.status, 200);
    const b = Buffer.from(r.json.data[0].embedding, "base64");
    const v = Array.from(new Float32Array(b.buffer, b.byteOffset, b.length / 4));
    assert.ok(close(v, exp.cases[0].embedding_unnormalized));
    for (const [body, status, param] of [
      [{}, 400, "input"], [{ input: [] }, 400, "input"], [{ input: [1, 2] }, 400, "input"], [{ input: "x", encoding_format: "int8" }, 400, "encoding_format"],
      [{ input: "x", model: "gpt-4o" }, 404, "model"], [{ input: "x", dimensions: 7 }, 400, "dimensions"],
    ] as const) {
      const e = await post(`${server.url}/v1/embeddings`, body);
      assert.equal(e.status, status, JSON.stringify(body));
      assert.equal(e.json.error.param, param, JSON.stringify(e.json));
    }
    const c = await post(`${server.url}/v1/chat/completions`, { messages: [{ role: "user", content: "hi" }] });
    assert.equal(c.status, 404);
    assert.match(c.json.error.message, /embedding model 'minilm-embed': use POST \/v1\/embeddings/);
    const models = await (await fetch(`${server.url}/v1/models`)).json() as { data: { id: string; meta: { n_embd: number } }[] };
    assert.equal(models.data[0]!.id, "minilm-embed");
    assert.equal(models.data[0]!.meta.n_embd, 48);
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
  });
});

test("tsllm serve --model on an embedding folder answers /v1/embeddings", { skip }, async () => {
  const s = await spawnServe(["--model", folder]);
  try {
    const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "none", maxRetries: 0 });
    const r = await client.embeddings.create({ model: "minilm-embed", input: "This is an example sentence" });
    assert.equal(r.data[0]!.embedding.length, 48);
    assert.match(s.stderr(), /ready: embeddings from BertModel, 48 dimensions, up to 256 tokens/);
  } finally {
    s.child.kill("SIGTERM");
    assert.equal(await s.exited, 0);
  }
});
