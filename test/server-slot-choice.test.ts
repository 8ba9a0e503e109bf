import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { post, serveStories, skipStories as skip } from "./helpers/serve.js";

/*
 * Which slot a request without id_slot runs in, as llama-server's get_available_slot picks it
 * (tools/server/server-context.cpp of the llama.cpp node-llama-cpp 3.21.1 bundles): the idle slot
 * whose cached tokens share the longest prefix with the prompt, as a fraction of the prompt's
 * tokens, where that is more than --slot-prompt-similarity (common.h: 0.1 by default; 0 turns it
 * off); else the idle slot used least recently, its scan's `<=` giving ties (every slot never used)
 * to the highest id. tsllm gave the lowest free slot, so a reply's id_slot and GET /slots named
 * another slot than llama-server's. Four slots, requests one at a time: the first takes slot 3
 * (all unused), the second, unlike it, slot 2 (3 is the most recently used), the third, like the
 * first, slot 3 again; with the similarity off the third takes slot 1 (least recently used).
 */
const first = "Once upon a time there was a little girl named Lily. She loved to play in the park with her friends";
const second = "The big brown dog ran to the river and jumped into the water. He swam and swam until he was tired and sleepy";
const third = "Once upon a time there was a little girl named Lily. She loved to sing";

async function slotsOf(url: string): Promise<number[]> {
  const ids: number[] = [];
  for (const prompt of [first, second, third]) {
    const r = await post(`${url}/completion`, { prompt, n_predict: 3, temperature: 0 });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    ids.push(r.json.id_slot);
  }
  return ids;
}

describe("a request without id_slot: llama-server's slot choice (stories260K, four slots)", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  after(async () => {
    await s?.close();
  });

  test("by prompt similarity, else least recently used", async () => {
    s = await serveStories({ maxSequences: 4 });
    assert.deepEqual(await slotsOf(s.url), [3, 2, 3]);
    // the third, like the first, finds the first's tokens in the prefix cache (whatever slot it ran in)
    const slots = (await (await fetch(`${s.url}/slots`)).json()) as { id: number; is_processing: boolean }[];
    assert.deepEqual(slots.map((x) => [x.id, x.is_processing]), [[0, false], [1, false], [2, false], [3, false]]);
    await s.close();
  });

  test("slotPromptSimilarity 0 (llama-server's -sps 0): least recently used alone", async () => {
    s = await serveStories({ maxSequences: 4, slotPromptSimilarity: 0 });
    assert.deepEqual(await slotsOf(s.url), [3, 2, 1]);
  });
});

describe("slotPromptSimilarity out of range (stories260K)", { skip }, () => {
  test("refused naming it, before any request", async () => {
    for (const v of [1.5, -0.1, Number.NaN]) {
      await assert.rejects(serveStories({ slotPromptSimilarity: v }), new RegExp(`^OptionError: slotPromptSimilarity must be a number in \\[0, 1\\] \\(0: slots picked by recency alone\\), got ${String(v)}$`));
    }
  });
});
