import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { post, serveStories, skipStories as skip, sseEvents, until } from "./helpers/serve.js";

/*
 * llama-server's `id_slot` in a completion request (tools/server/server-context.cpp:
 * handle_completions_impl reads json_value(data, "id_slot", -1); get_available_slot and
 * get_slot_by_id, "allow id_slot to be out of bounds (wrap around)"; README: "If is -1 the task
 * will be assigned to a Idle slot"): -1 is any slot, any other integer is taken (modulo the slot
 * count), none refused. tsllm read it nowhere: an id of the wrong type ran as if unsent. Now every
 * integer is taken (on an idle server the reply the same as without it; where it waits and runs:
 * below), and another value is a 400 naming id_slot.
 */
describe("id_slot on the completion routes (stories260K)", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  before(async () => {
    s = await serveStories();
  });
  after(async () => {
    await s?.close();
  });

  test("-1, a slot's id, one past the slots and a negative one: taken, the reply the same as without id_slot", async () => {
    const body = { prompt: "Once upon a time", n_predict: 6, temperature: 0 };
    const plain = await post(`${s.url}/completion`, body);
    assert.equal(plain.status, 200, JSON.stringify(plain.json));
    const slots = s.model.engine.maxSequences;
    for (const id_slot of [-1, 0, slots - 1, slots + 1, -3, null]) {
      const r = await post(`${s.url}/completion`, { ...body, id_slot });
      assert.equal(r.status, 200, `${id_slot}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.content, plain.json.content, String(id_slot));
      const chat = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "Hi" }], max_tokens: 2, id_slot });
      assert.equal(chat.status, 200, `${id_slot}: ${JSON.stringify(chat.json)}`);
    }
  });

  test("an id_slot that is no integer: a 400 naming id_slot on every completion route (/infill's too: it answers through /completion's)", async () => {
    const slots = s.model.engine.maxSequences;
    for (const id_slot of ["1", 1.5, true, [0]]) {
      for (const [path, body] of [
        ["/completion", { prompt: "Once", n_predict: 2 }], ["/v1/completions", { prompt: "Once", max_tokens: 2 }],
        ["/v1/chat/completions", { messages: [{ role: "user", content: "Hi" }], max_tokens: 2 }],
      ] as const) {
        const r = await post(`${s.url}${path}`, { ...body, id_slot });
        assert.equal(r.status, 400, `${path} ${JSON.stringify(id_slot)}: ${JSON.stringify(r.json)}`);
        assert.equal(r.json.error.param, "id_slot", path);
        assert.equal(r.json.error.message, `'id_slot' must be an integer: -1 (any slot, the default) or a slot's id (0..${slots - 1}; a larger one wraps around, as llama-server's), got ${Array.isArray(id_slot) ? "an array" : typeof id_slot === "string" ? JSON.stringify(id_slot) : String(id_slot)}`);
      }
    }
  });
});

/*
 * The slot a native reply ran in: llama-server's to_json_non_oaicompat (server-task.cpp) puts the
 * slot's id_slot in every /completion reply, the streamed token events (the partial results) and
 * the last event alike. tsllm said -1 in all of them. Judged by GET /slots: a request the library
 * holds (its reader stopped after its first token, so the engine pauses it, with no timing) is
 * listed in one slot, and a completion sent while it runs can only run in the other one.
 */
describe("id_slot in a native reply: the slot it ran in (stories260K, two slots)", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  before(async () => {
    s = await serveStories({ maxSequences: 2 });
  });
  after(async () => {
    await s?.close();
  });

  /** a library request that holds a slot until `controller` aborts it, and the slot GET /slots lists it in */
  const held = async (controller: AbortController): Promise<number> => {
    const run = s.model.submit("Lily and Ben", { maxTokens: 400, temperature: 0.7, seed: 5, signal: controller.signal });
    await run.events().next();
    const busy = ((await (await fetch(`${s.url}/slots`)).json()) as { id: number; is_processing: boolean }[]).filter((slot) => slot.is_processing);
    assert.equal(busy.length, 1, JSON.stringify(busy));
    return busy[0]!.id;
  };

  test("idle: the last slot; beside a request GET /slots lists in one slot, the other, unstreamed and in every streamed event", async () => {
    const body = { prompt: "Once upon a time", n_predict: 6, temperature: 0 };
    const alone = await post(`${s.url}/completion`, body);
    assert.equal(alone.status, 200, JSON.stringify(alone.json));
    // (llama-server's least recently used idle slot: none used yet, the highest of them, as its get_available_slot's `<=` scan)
    assert.equal(alone.json.id_slot, 1);
    const controller = new AbortController();
    try {
      const taken = await held(controller);
      const other = 1 - taken;
      const r = await post(`${s.url}/completion`, body);
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.equal(r.json.id_slot, other);
      const res = await fetch(`${s.url}/completion`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...body, stream: true }) });
      assert.equal(res.status, 200);
      const events = sseEvents(await res.text()) as Record<string, unknown>[];
      assert.ok(events.length > 1 && events.at(-1)!["stop"] === true, JSON.stringify(events));
      assert.deepEqual(events.map((e) => e["id_slot"]), events.map(() => other));
    } finally {
      controller.abort();
    }
  });

  test("n choices run in slots of their own: each reply names its own", async () => {
    const r = await post(`${s.url}/completion`, { prompt: "Once upon a time", n_predict: 4, temperature: 0.8, seed: 3, n: 2 });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.ok(Array.isArray(r.json), JSON.stringify(r.json));
    assert.deepEqual(r.json.map((c: { id_slot: number }) => c.id_slot).sort(), [0, 1]);
  });

  /*
   * A request's id_slot pins it, as llama-server's get_slot_by_id and its deferred tasks: it waits
   * until that slot is free, with another slot idle, and then runs there. Before, it ran at once in
   * the free slot.
   */
  test("id_slot naming a busy slot: the request waits, the other slot idle, and runs in the named one once it is free", async () => {
    const controller = new AbortController();
    let pinned: ReturnType<typeof post> | undefined;
    try {
      const taken = await held(controller);
      pinned = post(`${s.url}/completion`, { prompt: "Once upon a time", n_predict: 4, temperature: 0, id_slot: taken });
      await until(async () => ((await (await fetch(`${s.url}/health`)).json()) as { requests_waiting: number }).requests_waiting === 1, "the pinned request to wait");
      const listed = (await (await fetch(`${s.url}/slots`)).json()) as { id: number; is_processing: boolean }[];
      assert.deepEqual(listed.map((slot) => [slot.id, slot.is_processing]), [[0, taken === 0], [1, taken === 1]]);
      // one naming the free slot (one past the slots wraps around to it) runs at once, beside the waiting one
      const wrapped = await post(`${s.url}/completion`, { prompt: "Once upon a time", n_predict: 4, temperature: 0, id_slot: 1 - taken + 2 });
      assert.equal(wrapped.status, 200, JSON.stringify(wrapped.json));
      assert.equal(wrapped.json.id_slot, 1 - taken);
      controller.abort();
      const r = await pinned;
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.equal(r.json.id_slot, taken);
    } finally {
      controller.abort();
      await pinned;
    }
  });

  test("id_slot with n choices: choice 0 in the named slot, the next in the free one", async () => {
    const r = await post(`${s.url}/completion`, { prompt: "Once upon a time", n_predict: 4, temperature: 0.8, seed: 3, n: 2, id_slot: 1 });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.deepEqual(r.json.map((c: { index: number; id_slot: number }) => [c.index, c.id_slot]), [[0, 1], [1, 0]]);
  });

  test("the library's slot option: one outside the engine's slots is refused, naming it", () => {
    assert.throws(() => s.model.submit("Once", { maxTokens: 1, slot: 2 }), /^.*slot: expected an engine slot's id, 0\.\.1 \(maxSequences 2\), got 2/);
    assert.throws(() => s.model.submit("Once", { maxTokens: 1, slot: -1 }), /slot: expected an engine slot's id \(an integer >= 0, below maxSequences\), got -1/);
  });
});
