import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { post, serveStories, skipStories as skip } from "./helpers/serve.js";

/*
 * llama-server's `id_slot` in a completion request (tools/server/server-context.cpp:
 * handle_completions_impl reads json_value(data, "id_slot", -1); get_available_slot and
 * get_slot_by_id, "allow id_slot to be out of bounds (wrap around)"; README: "If is -1 the task
 * will be assigned to a Idle slot"): -1 is any slot, any other integer is taken (modulo the slot
 * count), none refused. tsllm read it nowhere: an id of the wrong type ran as if unsent. Now every
 * integer is taken, the reply the same as without it, and another value is a 400 naming id_slot.
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
