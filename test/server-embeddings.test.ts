import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { loadEmbeddingModel, startServer, type EmbeddingModel } from "../src/index.js";
import type { OpenAIServer } from "../src/server/index.js";
import { post, serveStories, skipStories, spawnServe } from "./helpers/serve.js";
import { SHARED, skipWithoutShared } from "./helpers/shared.js";

/* POST /v1/embeddings on a sentence-transformers model, through the openai client and raw HTTP. */

const skip = skipWithoutShared("hf-oracle/minilm-embed.expected.json");
const folder = `${SHARED}/hf-oracle/minilm-embed`;

const close = (a: number[], b: number[]) => a.length === b.length && a.every((x, i) => Math.abs(x - b[i]!) <= 1e-4);
/** an answer's vector, float or base64 (little-endian float32) */
const vector = (d: { embedding: number[] | string }) => {
  if (typeof d.embedding !== "string") return d.embedding;
  const b = Buffer.from(d.embedding, "base64");
  return Array.from(new Float32Array(b.buffer, b.byteOffset, b.length / 4));
};
const unit = (v: number[]) => { const n = Math.hypot(...v); return v.map((x) => x / n); };

describe("the server on an embedding model", { skip }, () => {
  const exp = skip ? undefined : JSON.parse(readFileSync(`${folder}.expected.json`, "utf8"));
  let server: OpenAIServer;
  let dispose: () => void;
  let client: OpenAI;
  let model: EmbeddingModel;
  before(async () => {
    const m = await loadEmbeddingModel(folder, { threads: 1 });
    model = m;
    dispose = () => m.dispose();
    server = await startServer(m, { port: 0 });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0 });
  });
  after(async () => { await server?.close(1000); dispose?.(); });


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
      [{}, 400, "input"], [{ input: [] }, 400, "input"], [{ input: "x", encoding_format: "int8" }, 400, "encoding_format"],
      [{ input: "x", model: "gpt-4o" }, 404, "model"], [{ input: "x", dimensions: 49 }, 400, "dimensions"], [{ input: "x", dimensions: 0 }, 400, "dimensions"],
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

  test("input as token ids, one list or lists of them (OpenAI's four forms): the text's vectors, with or without the special tokens", async () => {
    const c = exp.cases.slice(0, 3) as { text: string; input_ids: number[]; n_tokens: number; embedding_unnormalized: number[] }[];
    // transformers' tokenizer(text).input_ids carry [CLS] ... [SEP]; POST /tokenize's (add_special false, as llama-server's) do not
    const plain = await Promise.all(c.map(async (x) => (await post(`${server.url}/tokenize`, { content: x.text })).json.tokens as number[]));
    plain.forEach((ids, i) => assert.deepEqual(ids, c[i]!.input_ids.slice(1, -1)));
    const one = await client.embeddings.create({ model: "minilm-embed", input: c[0]!.input_ids });
    assert.ok(close(one.data[0]!.embedding, c[0]!.embedding_unnormalized));
    assert.equal(one.usage.prompt_tokens, c[0]!.n_tokens);
    const lists = await client.embeddings.create({ model: "minilm-embed", input: [plain[2]!, c[1]!.input_ids, plain[0]!], encoding_format: "float" });
    assert.deepEqual(lists.data.map((d) => d.index), [0, 1, 2]);
    [2, 1, 0].forEach((k, i) => assert.ok(close(lists.data[i]!.embedding, c[k]!.embedding_unnormalized), `list ${i}`));
    assert.equal(lists.usage.prompt_tokens, c[0]!.n_tokens + c[1]!.n_tokens + c[2]!.n_tokens);
    const padded = [...c[0]!.input_ids, 0, 0]; // transformers' tokenizer(texts, padding=True): its attention mask cannot be sent
    for (const [input, param, message] of [[[[1, 99999]], "input[0]", /input\[0\]\[1\] is 99999: token ids are integers in \[0, 30522\)/], [[1, 2.5], "input", /input\[1\] is 2\.5/], [[[]], "input[0]", /input\[0\] is an empty array/],
      [[c[1]!.input_ids, padded], "input[1]", /^input\[1\]\[7\] is the padding token \(id 0\): send each input's ids without padding$/]] as const) {
      const e = await post(`${server.url}/v1/embeddings`, { input });
      assert.equal(e.status, 400, JSON.stringify(input));
      assert.equal(e.json.error.param, param);
      assert.match(e.json.error.message, message);
    }
  });

  test("llama-server's prompt forms in input, read and checked as a completion's prompt: {prompt_string} objects, ids and strings mixed; multimodal_data and bad elements a 400 naming the field", async () => {
    // the judge: llama-server's /v1/embeddings tokenizes `input` (or `content`) with the
    // completions' tokenize_input_prompts: an object's prompt_string is its prompt, a list holding
    // an id is one prompt of ids and texts (tokenize_mixed: a text after an id without special
    // tokens), and a multimodal_data key is refused on a model without multimodal support. Each
    // vector must equal transformers' for the same tokens (the recorded outputs)
    const c = exp.cases.slice(0, 3) as { text: string; input_ids: number[]; embedding_unnormalized: number[] }[];
    const mixed = (k: number) => [c[k]!.input_ids[0]!, c[k]!.text, c[k]!.input_ids.at(-1)!];
    const one = await post(`${server.url}/v1/embeddings`, { input: { prompt_string: c[0]!.text }, encoding_format: "float" });
    assert.equal(one.status, 200, JSON.stringify(one.json));
    assert.ok(close(one.json.data[0].embedding, c[0]!.embedding_unnormalized));
    const bare = await client.embeddings.create({ model: "minilm-embed", input: mixed(1) as unknown as number[], encoding_format: "float" });
    assert.equal(bare.data.length, 1);
    assert.ok(close(bare.data[0]!.embedding, c[1]!.embedding_unnormalized));
    const several = await client.embeddings.create({ model: "minilm-embed", input: [{ prompt_string: mixed(2) }, mixed(0), c[1]!.text] as unknown as string[], encoding_format: "float" });
    [2, 0, 1].forEach((k, i) => assert.ok(close(several.data[i]!.embedding, c[k]!.embedding_unnormalized), `input ${i}`));
    const llama = await post(`${server.url}/embedding`, { content: { prompt_string: c[0]!.text } });
    assert.equal(llama.status, 200, JSON.stringify(llama.json));
    assert.ok(close(llama.json[0].embedding[0], c[0]!.embedding_unnormalized));
    const cls = c[0]!.input_ids[0]!;
    for (const [route, body, param, message] of [
      ["/v1/embeddings", { input: { prompt_string: "a", multimodal_data: [] } }, "input.multimodal_data", /^'input\.multimodal_data' cannot be read: this server reads text only, and this model has no multimodal support/],
      ["/v1/embeddings", { input: ["a", { prompt_string: "b", multimodal_data: ["aGVsbG8="] }] }, "input[1].multimodal_data", /'input\[1\]\.multimodal_data' cannot be read/],
      ["/embedding", { content: { prompt_string: "a", multimodal_data: [] } }, "content.multimodal_data", /'content\.multimodal_data' cannot be read/],
      ["/v1/embeddings", { input: [{ prompt_string: 5 }] }, "input[0].prompt_string", /^'input\[0\]\.prompt_string' must be a string or a non-empty array of token ids and strings, got number$/],
      ["/v1/embeddings", { input: ["a", {}] }, "input[1].prompt_string", /got none$/],
      ["/v1/embeddings", { input: ["a", [cls, "x", 99999]] }, "input[1]", /^input\[1\]\[2\] is 99999: token ids are integers in \[0, 30522\)$/],
      ["/v1/embeddings", { input: [[cls, "x", 0]] }, "input[0]", /^input\[0\]\[2\] is the padding token \(id 0\)/],
      ["/v1/embeddings", { input: [{ prompt_string: [cls, "x", 0] }] }, "input[0].prompt_string", /^input\[0\]\.prompt_string\[2\] is the padding token/],
      ["/v1/embeddings", { input: [true] }, "input[0]", /^'input\[0\]' must be a string, an array of token ids .* got boolean$/],
    ] as const) {
      const e = await post(`${server.url}${route}`, body);
      assert.equal(e.status, 400, JSON.stringify(body));
      assert.equal(e.json.error.param, param, JSON.stringify(e.json));
      assert.equal(e.json.error.type, "invalid_request_error");
      assert.match(e.json.error.message, message);
    }
  });

  test("an empty string is refused, as OpenAI documents; an input past max_seq_length is refused unless truncate: true", async () => {
    for (const [input, param] of [["", "input"], [[""], "input[0]"], [["a", ""], "input[1]"], [{ prompt_string: "" }, "input.prompt_string"]] as const) {
      const e = await post(`${server.url}/v1/embeddings`, { input });
      assert.equal(e.status, 400, JSON.stringify(input));
      assert.equal(e.json.error.param, param);
      assert.match(e.json.error.message, /empty string/);
    }
    const long = exp.cases.find((x: { n_tokens: number }) => x.n_tokens === exp.config.max_seq_length);
    const e = await post(`${server.url}/v1/embeddings`, { input: ["a", long.text] });
    assert.equal(e.status, 400);
    assert.equal(e.json.error.code, "context_length_exceeded");
    const m = /^input\[1\] has (\d+) tokens .* more than the (\d+) this model takes .* "truncate": true/.exec(e.json.error.message);
    assert.ok(m, e.json.error.message);
    assert.ok(Number(m[1]) > exp.config.max_seq_length);
    assert.equal(Number(m[2]), exp.config.max_seq_length);
    const t = await post(`${server.url}/v1/embeddings`, { input: long.text, truncate: true, encoding_format: "float" });
    assert.equal(t.status, 200);
    assert.ok(close(t.json.data[0].embedding, long.embedding_unnormalized));
    assert.equal(t.json.usage.prompt_tokens, exp.config.max_seq_length);
  });

  test("dimensions keeps the first components (sentence-transformers' truncate_dim); unnormalized vectors stay so", async () => {
    const r = await client.embeddings.create({ model: "minilm-embed", input: [exp.cases[0].text, exp.cases[1].text], dimensions: 16 });
    r.data.forEach((d, i) => {
      assert.equal(d.embedding.length, 16);
      assert.ok(close(d.embedding, exp.cases[i].embedding_unnormalized.slice(0, 16)), `input ${i}`);
    });
  });

  test("llama-server's POST /embedding {content} -> [{index, embedding: [vector]}], embd_normalize as llama-server's", async () => {
    const c = exp.cases.slice(0, 2);
    const r = await post(`${server.url}/embedding`, { content: [c[0].text, c[1].text] });
    assert.equal(r.status, 200);
    assert.deepEqual(r.json.map((x: { index: number }) => x.index), [0, 1]);
    r.json.forEach((x: { embedding: number[][] }, i: number) => assert.ok(close(x.embedding[0]!, c[i].embedding_unnormalized)));
    // 2: Euclidean (sentence-transformers' normalize_embeddings=True); 0: largest magnitude to 32760
    const two = await post(`${server.url}/embeddings`, { content: c[0].text, embd_normalize: 2 });
    assert.ok(close(two.json[0].embedding[0], c[0].embedding));
    const zero = await post(`${server.url}/v1/embeddings`, { input: c[0].text, embd_normalize: 0 });
    const top = Math.max(...c[0].embedding_unnormalized.map(Math.abs));
    assert.ok(zero.json.data[0].embedding.every((x: number, j: number) => Math.abs(x - (c[0].embedding_unnormalized[j] * 32760) / top) <= 1e-4 * 32760 / top));
    const e = await post(`${server.url}/embedding`, {});
    assert.equal(e.status, 400);
    assert.equal(e.json.error.param, "content");
  });

  test("with an API key, llama-server's routes need it too", async () => {
    const keyed = await startServer(model, { port: 0, apiKey: "sesame" });
    try {
      for (const [path, body] of [["/embedding", { content: "hi" }], ["/embeddings", { content: "hi" }], ["/rerank", { query: "a", documents: ["b"] }], ["/v1/embeddings", { input: "hi" }], ["/tokenize", { content: "hi" }]] as const) {
        const r = await post(`${keyed.url}${path}`, body);
        assert.equal(r.status, 401, path);
        assert.equal(r.json.error.code, "invalid_api_key");
        assert.notEqual((await post(`${keyed.url}${path}`, body, { Authorization: "Bearer sesame" })).status, 401, path);
      }
      assert.equal((await fetch(`${keyed.url}/health`)).status, 200);
    } finally {
      await keyed.close(1000);
    }
  });

  test("reranking routes answer 501 naming what this server serves", async () => {
    for (const path of ["/rerank", "/v1/rerank", "/reranking"]) {
      const r = await post(`${server.url}${path}`, { query: "a", documents: ["b", "c"] });
      assert.equal(r.status, 501, path);
      assert.match(r.json.error.message, /cross-encoder .* POST \/v1\/embeddings/);
    }
  });

  test("concurrent requests in every input form each get their solo answer", async () => {
    const texts: string[] = exp.cases.slice(0, 5).map((c: { text: string }) => c.text);
    const ids: number[][] = exp.cases.slice(0, 5).map((c: { input_ids: number[] }) => c.input_ids);
    const bodies = Array.from({ length: 24 }, (_, i) => {
      const k = i % 5, forms = [texts[k]!, [texts[k]!, texts[(k + 1) % 5]!], ids[k]!, [ids[k]!, texts[(k + 2) % 5]!]];
      return { input: forms[i % 4]!, encoding_format: i % 2 ? "float" : "base64" };
    });
    const solo: (number[] | string)[][] = [];
    for (const b of bodies) solo.push((await post(`${server.url}/v1/embeddings`, b)).json.data.map(vector));
    const together = await Promise.all(bodies.map((b) => post(`${server.url}/v1/embeddings`, b)));
    together.forEach((r, i) => assert.deepEqual(r.json.data.map(vector), solo[i], `request ${i}`));
  });
});

describe("a sentence-transformers folder with a Normalize module", { skip }, () => {
  const exp = skip ? undefined : JSON.parse(readFileSync(`${folder}.expected.json`, "utf8"));
  let dir: string;
  let server: OpenAIServer;
  let dispose: () => void;
  before(async () => {
    // the oracle's folder with sentence-transformers' Normalize module after the pooling: encode() then normalizes
    dir = mkdtempSync(join(tmpdir(), "tsllm-normalize-"));
    for (const f of readdirSync(folder)) if (f !== "modules.json") symlinkSync(join(folder, f), join(dir, f));
    const modules = JSON.parse(readFileSync(join(folder, "modules.json"), "utf8"));
    writeFileSync(join(dir, "modules.json"), JSON.stringify([...modules, { idx: 2, name: "2", path: "2_Normalize", type: "sentence_transformers.models.Normalize" }]));
    const m = await loadEmbeddingModel(dir, { threads: 1 });
    dispose = () => m.dispose();
    server = await startServer(m, { port: 0 });
  });
  after(async () => { await server?.close(1000); dispose?.(); rmSync(dir, { recursive: true, force: true }); });

  test("vectors are encode(normalize_embeddings=True)'s; with dimensions, cut then normalized again (OpenAI's shortened vectors are unit length)", async () => {
    const c = exp.cases.slice(0, 2);
    const full = await post(`${server.url}/v1/embeddings`, { input: [c[0].text, c[1].text] });
    full.json.data.forEach((d: { embedding: string }, i: number) => assert.ok(close(vector(d), c[i].embedding)));
    const cut = await post(`${server.url}/v1/embeddings`, { input: [c[0].text, c[1].text], dimensions: 12, encoding_format: "float" });
    cut.json.data.forEach((d: { embedding: number[] }, i: number) => assert.ok(close(d.embedding, unit(c[i].embedding_unnormalized.slice(0, 12))), `input ${i}`));
  });
});

test("tsllm serve --model on an embedding folder answers /v1/embeddings; --auto-truncate cuts long inputs unless a request says no", { skip }, async () => {
  const exp = JSON.parse(readFileSync(`${folder}.expected.json`, "utf8"));
  const long = exp.cases.find((x: { n_tokens: number }) => x.n_tokens === exp.config.max_seq_length);
  const s = await spawnServe(["--model", folder, "--auto-truncate"]);
  try {
    const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "none", maxRetries: 0 });
    const r = await client.embeddings.create({ model: "minilm-embed", input: ["This is an example sentence", long.text] });
    assert.equal(r.data[0]!.embedding.length, 48);
    assert.ok(close(r.data[1]!.embedding, long.embedding_unnormalized));
    assert.equal(r.usage.prompt_tokens, exp.cases[0].n_tokens + exp.config.max_seq_length);
    const refused = await post(`${s.url}/v1/embeddings`, { input: long.text, truncate: false });
    assert.equal(refused.status, 400);
    assert.equal(refused.json.error.code, "context_length_exceeded");
    assert.match(s.stderr(), /ready: embeddings from BertModel, 48 dimensions, up to 256 tokens/);
  } finally {
    s.child.kill("SIGTERM");
    assert.equal(await s.exited, 0);
  }
});

test("on a generative model, an input past the context names the field of GET /v1/models that shows the limit: n_ctx (it named n_ctx_train, the larger training context)", { skip: skipStories }, async () => {
  const s = await serveStories({ contextSize: 128 });
  try {
    const meta = ((await (await fetch(`${s.url}/v1/models`)).json()) as { data: { meta: { n_ctx: number; n_ctx_train: number } }[] }).data[0]!.meta;
    assert.ok(meta.n_ctx_train > meta.n_ctx);
    const e = await post(`${s.url}/v1/embeddings`, { input: ["Once", "the ".repeat(200)] });
    assert.equal(e.status, 400);
    assert.deepEqual([e.json.error.param, e.json.error.code], ["input[1]", "context_length_exceeded"]);
    assert.match(e.json.error.message, new RegExp(`^input\\[1\\] has \\d+ tokens \\(special tokens included\\), more than the ${meta.n_ctx} this model takes per input \\(n_ctx in GET /v1/models\\)`));
  } finally {
    await s.close();
  }
});

// serve decides encoder or decoder by the library's rule: a sentence-transformers folder whose Transformer
// module sits in 0_Transformer/ is read as an encoder, so a decoder there (GPT-2) is refused naming that
// config.json; before, serve loaded the GPT-2 at the folder's top and served it as a generator
test("tsllm serve on a sentence-transformers folder whose 0_Transformer/ holds a decoder: one error line naming 0_Transformer/config.json, exit 1, the top's model not served", { skip: skip || skipWithoutShared("hf-oracle/gpt2-tiny.expected.json") }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-serve-st-decoder-"));
  try {
    const gpt2 = `${SHARED}/hf-oracle/gpt2-tiny`;
    mkdirSync(join(dir, "0_Transformer"));
    mkdirSync(join(dir, "1_Pooling"));
    for (const f of readdirSync(gpt2)) {
      copyFileSync(join(gpt2, f), join(dir, "0_Transformer", f));
      copyFileSync(join(gpt2, f), join(dir, f)); // a model at the top too: not the one modules.json names
    }
    copyFileSync(join(folder, "1_Pooling", "config.json"), join(dir, "1_Pooling", "config.json"));
    writeFileSync(join(dir, "modules.json"), JSON.stringify([
      { idx: 0, name: "0", path: "0_Transformer", type: "sentence_transformers.models.Transformer" }, { idx: 1, name: "1", path: "1_Pooling", type: "sentence_transformers.models.Pooling" },
    ]));
    const outcome = await spawnServe(["--model", dir]).then(async (s) => {
      s.child.kill("SIGTERM");
      await s.exited;
      return `served: ${s.stderr()}`;
    }, (e: Error) => e.message);
    const m = /^tsllm serve exited with (\d+): (.*)$/s.exec(outcome);
    assert.ok(m, outcome);
    assert.equal(m[1], "1");
    const lines = m[2]!.trim().split("\n").filter((l) => !/^tsllm serve: listening on /.test(l));
    assert.equal(lines.length, 1, m[2]);
    assert.ok(lines[0]!.startsWith(`tsllm: error: ${join(dir, "0_Transformer", "config.json")}: architectures: unsupported encoder architecture "GPT2LMHeadModel" (supported: BertModel, `), lines[0]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
