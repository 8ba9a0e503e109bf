import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { post, serveStories, skipStories } from "./helpers/serve.js";

/*
 * llama-server's n_keep and n_discard (tools/server: server-schema.cpp's hard limits, -1..INT32_MAX
 * and 0..INT32_MAX; server-context.cpp's pre_decode uses them only to shift a full context, which
 * it does only with --context-shift, off by default in common.h): this server never shifts the
 * context, so they are taken where the completion ends before its context is full (or are 0,
 * their default), and refused, naming the field, where it could fill it.
 */

const CONTEXT = 64;

describe("n_keep and n_discard on stories260K", { skip: skipStories }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  before(async () => (s = await serveStories({ contextSize: CONTEXT })));
  after(() => s?.close());

  test("a completion that ends before its context is full takes them (the same reply); 0 asks nothing, whatever the limit", async () => {
    const request = { prompt: "Once upon a time", n_predict: 8, temperature: 0 };
    const plain = await post(`${s.url}/completion`, request);
    assert.equal(plain.status, 200, JSON.stringify(plain.json));
    for (const extra of [{ n_keep: 4 }, { n_keep: -1 }, { n_discard: 2 }, { n_keep: 4, n_discard: 2 }]) {
      const r = await post(`${s.url}/completion`, { ...request, ...extra });
      assert.equal(r.status, 200, `${JSON.stringify(extra)}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.content, plain.json.content, JSON.stringify(extra));
    }
    // no limit: the reply runs to the end of the context, and n_keep 0 (llama-server's default, which clients send) is no request for a shift
    const unlimited = await post(`${s.url}/completion`, { prompt: "Once upon a time", temperature: 0, n_keep: 0, n_discard: 0 });
    assert.equal(unlimited.status, 200, JSON.stringify(unlimited.json));
  });

  test("one that could fill its context is refused naming the field, with the limit that would take it", async () => {
    const prompt = (await post(`${s.url}/tokenize`, { content: "Once upon a time", add_special: true })).json.tokens.length as number;
    const room = CONTEXT - prompt - 1;
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ n_keep: 4 }, "n_keep", /^'n_keep' 4 asks that the context be shifted .*keeping 4 of the prompt's tokens.*never shifts the context.*--context-shift.*Leave n_keep out \(or 0\), or set max_tokens to at most (\d+) so/],
      [{ n_keep: -1, n_predict: CONTEXT - prompt }, "n_keep", /keeping all of the prompt's tokens.*set n_predict to at most (\d+) so/],
      [{ n_discard: 3, max_tokens: -1 }, "n_discard", /^'n_discard' 3 asks .*dropping 3 tokens.*set max_tokens to at most (\d+) so/],
    ];
    for (const [extra, param, message] of cases) {
      for (const path of ["/completion", "/v1/completions"]) {
        const r = await post(`${s.url}${path}`, { prompt: "Once upon a time", temperature: 0, ...extra });
        assert.equal(r.status, 400, `${path} ${JSON.stringify(extra)}: ${JSON.stringify(r.json)}`);
        assert.equal(r.json.error.param, param);
        const m = message.exec(r.json.error.message);
        assert.ok(m, r.json.error.message);
        assert.equal(Number(m[1]), room);
      }
    }
    // the limit it names is taken
    assert.equal((await post(`${s.url}/completion`, { prompt: "Once upon a time", n_keep: 4, n_predict: room })).status, 200);
    // and the chat route reads them too (llama-server's params_from_json_cmpl serves every completion route)
    const chat = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "Once upon a time" }], n_keep: -1 });
    assert.equal(chat.status, 400, JSON.stringify(chat.json));
    assert.equal(chat.json.error.param, "n_keep");
  });

  test("outside llama-server's hard limits, or not an integer: a 400 naming the field", async () => {
    for (const [extra, param] of [[{ n_keep: -2 }, "n_keep"], [{ n_keep: 1.5 }, "n_keep"], [{ n_keep: "4" }, "n_keep"], [{ n_keep: 2 ** 31 }, "n_keep"], [{ n_discard: -1 }, "n_discard"]] as const) {
      const r = await post(`${s.url}/completion`, { prompt: "Once upon a time", n_predict: 4, ...extra });
      assert.equal(r.status, 400, JSON.stringify(extra));
      assert.equal(r.json.error.param, param, JSON.stringify(extra));
    }
  });
});
