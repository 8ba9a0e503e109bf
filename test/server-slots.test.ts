import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startServer } from "../src/server/index.js";
import { post, serveStories, skipStories, spawnServe, until } from "./helpers/serve.js";

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

  test("POST /completion: a completion that stops at the context's end says truncated, as llama-server's (process_token sets it when the slot's tokens reach n_ctx)", async () => {
    const full = await post(`${s.url}/completion`, { prompt: "Once upon a time", temperature: 0, ignore_eos: true });
    assert.equal(full.status, 200, JSON.stringify(full.json));
    assert.equal(full.json.tokens_evaluated + full.json.tokens_predicted, CONTEXT);
    assert.equal(full.json.stop_type, "limit");
    assert.equal(full.json.truncated, true);
    // the same length asked for by n_predict fills the context too; one token fewer does not
    const prompt = full.json.tokens_evaluated as number;
    for (const [n, want] of [[CONTEXT - prompt, true], [CONTEXT - prompt - 1, false]] as const) {
      const r = await post(`${s.url}/completion`, { prompt: "Once upon a time", temperature: 0, ignore_eos: true, n_predict: n });
      assert.equal(r.json.stop_type, "limit");
      assert.equal(r.json.truncated, want, `n_predict ${n}`);
    }
  });

  test("outside llama-server's hard limits, or not an integer: a 400 naming the field", async () => {
    for (const [extra, param] of [[{ n_keep: -2 }, "n_keep"], [{ n_keep: 1.5 }, "n_keep"], [{ n_keep: "4" }, "n_keep"], [{ n_keep: 2 ** 31 }, "n_keep"], [{ n_discard: -1 }, "n_discard"]] as const) {
      const r = await post(`${s.url}/completion`, { prompt: "Once upon a time", n_predict: 4, ...extra });
      assert.equal(r.status, 400, JSON.stringify(extra));
      assert.equal(r.json.error.param, param, JSON.stringify(extra));
    }
  });
});

/*
 * llama-server's GET /slots and POST /slots/{id_slot}?action=... (tools/server/server-context.cpp:
 * get_slots, post_slots, server_slot::to_json; README "GET /slots", "POST /slots/{id_slot}"):
 * enabled by default (common.h endpoint_slots = true), a JSON array of one object per slot
 * ({id, n_ctx, speculative, is_processing}, and for a slot with a task id_task, n_prompt_tokens,
 * params, next_token [{n_remain, n_decoded, ...}]); fail_on_no_slot with any non-empty value is a
 * 503 "no slot available" (unavailable_error) when none is idle; erase answers {id_slot, n_erased}.
 * Here the slots are the engine's --parallel places; the busy ones are held by requests whose
 * reader stopped after their first token (the engine pauses a request its reader is 64 events
 * behind), so they stay running, with no timing, until aborted.
 */

const PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends and her dog.";

describe("GET /slots, POST /slots/{id_slot} on stories260K", { skip: skipStories }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  before(async () => (s = await serveStories({ maxSequences: 2 })));
  after(() => s?.close());

  const slots = async (query = "") => {
    const r = await fetch(`${s.url}/slots${query}`);
    return { status: r.status, json: (await r.json()) as any };
  };
  /** a request that runs until `controller` aborts it: its first token read, then nothing */
  const held = async (controller: AbortController, options: Parameters<typeof s.model.submit>[1] = {}) => {
    const run = s.model.submit("Lily and Ben", { maxTokens: 400, temperature: 0.7, topK: 12, seed: 5, signal: controller.signal, ...options });
    const events = run.events();
    await events.next();
    return run;
  };

  test("idle: one object per --parallel place, llama-server's idle fields; fail_on_no_slot answers 200 while one is free", async () => {
    const idle = [0, 1].map((id) => ({ id, n_ctx: 512, speculative: false, is_processing: false }));
    assert.deepEqual(await slots(), { status: 200, json: idle });
    assert.deepEqual(await slots("?fail_on_no_slot=1"), { status: 200, json: idle });
  });

  test("busy: the running request's slot shows its task, its prompt and sampling, and its tokens so far; none free is a 503 with fail_on_no_slot", async () => {
    const a = new AbortController(), b = new AbortController();
    try {
      // (pinned to slot 0: unpinned, it would take the least recently used idle slot, as llama-server's)
      await held(a, { slot: 0 });
      const prompt = s.model.tokenizer.encode("Lily and Ben").length;
      const one = await slots("?fail_on_no_slot=1");
      assert.equal(one.status, 200);
      const [busy, free] = one.json;
      assert.deepEqual(free, { id: 1, n_ctx: 512, speculative: false, is_processing: false });
      assert.equal(busy.id, 0);
      assert.equal(busy.is_processing, true);
      assert.equal(typeof busy.id_task, "number");
      assert.equal(busy.n_prompt_tokens, prompt);
      assert.equal(busy.n_prompt_tokens_processed + busy.n_prompt_tokens_cache, prompt);
      assert.deepEqual({ seed: busy.params.seed, temperature: busy.params.temperature, top_k: busy.params.top_k, n_predict: busy.params.n_predict }, { seed: 5, temperature: 0.7, top_k: 12, n_predict: 400 });
      const next = busy.next_token[0];
      assert.ok(next.n_decoded >= 1, JSON.stringify(next));
      assert.equal(next.n_remain + next.n_decoded, 400);
      await held(b);
      const full = await slots();
      assert.deepEqual(full.json.map((x: any) => x.is_processing), [true, true]);
      assert.notEqual(full.json[0].id_task, full.json[1].id_task);
      for (const query of ["?fail_on_no_slot=1", "?fail_on_no_slot=0"]) {
        const none = await slots(query);
        assert.equal(none.status, 503, query);
        assert.equal(none.json.error.message, "no slot available");
        assert.equal(none.json.error.type, "unavailable_error");
      }
      // (given no value, it asks nothing, as llama-server's get_param(...).empty())
      assert.equal((await slots("?fail_on_no_slot")).status, 200);
    } finally {
      a.abort();
      b.abort();
    }
    await until(async () => (await slots()).json.every((x: any) => !x.is_processing), "the slots to free up", 10_000);
  });

  test("a request of n choices holds n slots", async () => {
    const c = new AbortController();
    try {
      await held(c, { n: 2 });
      const both = (await slots()).json;
      assert.deepEqual(both.map((x: any) => x.is_processing), [true, true]);
      assert.equal(both[0].id_task, both[1].id_task);
    } finally {
      c.abort();
    }
    await until(async () => (await slots()).json.every((x: any) => !x.is_processing), "the slots to free up", 10_000);
  });

  test("erase: the slot's last prompt and reply leave the prefix cache (the same request then finds nothing cached); a busy slot is erased once its request ends", async () => {
    // (run in slot 0: unpinned, a request takes the idle slot whose last prompt is most like its own, or the least recently used)
    const request = { prompt: PROMPT, max_tokens: 8, temperature: 0, id_slot: 0 };
    const cached = async () => {
      const r = await post(`${s.url}/v1/completions`, request);
      assert.equal(r.status, 200, JSON.stringify(r.json));
      return r.json.usage.prompt_tokens_details.cached_tokens as number;
    };
    const erase = (id: number | string, action = "erase") => post(`${s.url}/slots/${id}?action=${action}`, {});
    // (what an earlier test left in slot 0)
    await erase(0);
    await cached();
    const hit = await cached();
    assert.ok(hit > 0, "the repeated prompt is found in the prefix cache");
    const erased = await erase(0);
    assert.equal(erased.status, 200, JSON.stringify(erased.json));
    assert.equal(erased.json.id_slot, 0);
    assert.ok(erased.json.n_erased >= hit, JSON.stringify(erased.json));
    assert.equal(await cached(), 0, "nothing cached once the slot is erased");
    assert.deepEqual((await erase(1)).json, { id_slot: 1, n_erased: 0 });

    // a busy slot: the erase waits for its request
    const a = new AbortController();
    await held(a, { slot: 0 });
    let answered = false;
    const pending = erase(0).then((r) => {
      answered = true;
      return r;
    });
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(answered, false, "the erase waits while the slot's request runs");
    a.abort();
    const late = await pending;
    assert.equal(late.status, 200, JSON.stringify(late.json));
    assert.equal(late.json.id_slot, 0);
  });

  test("refusals: a slot id that is none, save and restore (no slotSavePath), an unknown action", async () => {
    for (const [path, status, param] of [["/slots/2?action=erase", 400, "id_slot"], ["/slots/abc?action=erase", 400, "id_slot"], ["/slots/-1?action=erase", 400, "id_slot"],
      ["/slots/0?action=save", 501, "action"], ["/slots/0?action=restore", 501, "action"], ["/slots/0?action=wipe", 400, "action"], ["/slots/0", 400, "action"]] as const) {
      const r = await post(`${s.url}${path}`, { filename: "slot0.bin" });
      assert.equal(r.status, status, `${path}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error.param, param, path);
    }
    assert.match((await post(`${s.url}/slots/0?action=save`, { filename: "a.bin" })).json.error.message, /^This server does not support slots action "save"/);
    assert.equal((await fetch(`${s.url}/slots/0?action=erase`)).status, 405);
  });

  test("slots: false answers GET /slots with llama-server's --no-slots 501; an API key guards /slots", async () => {
    const off = await startServer(s.model, { port: 0, slots: false });
    const keyed = await startServer(s.model, { port: 0, apiKey: "sesame" });
    try {
      const r = await fetch(`${off.url}/slots`);
      assert.equal(r.status, 501);
      const body = (await r.json()) as any;
      assert.equal(body.error.type, "not_supported_error");
      assert.match(body.error.message, /^This server does not support slots endpoint: it was started with slots: false$/);
      assert.equal((await fetch(`${keyed.url}/slots`)).status, 401);
      assert.equal((await fetch(`${keyed.url}/slots`, { headers: { Authorization: "Bearer sesame" } })).status, 200);
    } finally {
      await off.close(1000);
      await keyed.close(1000);
    }
  });
});

test("tsllm serve --no-slots: GET /slots is the 501 naming the flag", { skip: skipStories }, async () => {
  const s = await spawnServe(["--no-slots"]);
  try {
    const r = await fetch(`${s.url}/slots`);
    assert.equal(r.status, 501);
    assert.equal(((await r.json()) as any).error.message, "This server does not support slots endpoint: it was started with --no-slots");
  } finally {
    s.child.kill("SIGTERM");
    assert.equal(await s.exited, 0, s.stderr());
  }
});
