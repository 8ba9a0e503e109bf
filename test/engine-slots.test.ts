import assert from "node:assert/strict";
import { test } from "node:test";
import { Engine, type EngineRequest, type RequestParams } from "../src/engine/index.js";
import { loadModel } from "../src/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

/*
 * A request pinned to a slot (RequestParams.slot, serve's id_slot) waits while the slot is busy and
 * lets the requests behind it go ahead (llama-server defers only that task). These check that the
 * wait ends: the pinned request runs in its slot once the slot is free, however many requests keep
 * arriving behind it.
 */
const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL);

const params = (promptTokens: number[], maxTokens: number, slot?: number): RequestParams => ({
  promptTokens, maxTokens, decoding: { kind: "sample", n: 1 }, sampling: { temperature: 0, seed: 0 }, stop: [], stopTokens: [], ignoreEos: true, topLogprobs: undefined,
  ...(slot === undefined ? {} : { slot }),
});

/** reads the request to its end */
async function drain(r: EngineRequest): Promise<void> {
  for await (const _ of r) void _;
  await r.outcome;
}

test("a request pinned to a busy slot runs in it once it is free, behind a steady stream of unpinned requests that pass it meanwhile", { skip }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 128, warmup: false });
  const engine = new Engine(model.engine.model, model.tokenizer, { contextSize: 128, maxSequences: 2, sliceMs: 0 });
  try {
    // the long one takes slot 1 (llama-server's least recently used idle slot: all unused, the highest); the pinned one waits for it
    const long = engine.submit(params([1, 400, 401], 24));
    const pinned = engine.submit(params([1, 402, 403], 3, 1));
    let pinnedDone = false;
    const pinnedRun = drain(pinned).then(() => (pinnedDone = true));
    // a stream of short unpinned requests, one always waiting behind the pinned one, until it has run (or 60 of them)
    let passed = 0;
    const stream = (async () => {
      while (!pinnedDone && passed < 60) {
        const a = engine.submit(params([1, 404 + (passed % 50)], 2));
        const b = engine.submit(params([1, 460 + (passed % 50)], 2));
        await Promise.all([drain(a), drain(b)]);
        passed += 2;
      }
    })();
    await Promise.all([drain(long), pinnedRun, stream]);
    assert.equal(pinned.slots[0], 1, "the pinned request ran in its slot");
    assert.equal(long.slots[0], 1);
    assert.ok(passed < 60, `the pinned request ran only after the stream of ${passed} requests ended`);
    assert.ok(passed > 0, "requests passed the pinned one while its slot was busy");
  } finally {
    engine.close();
    model.dispose();
  }
});

test("a pinned request growing beside a request paused on its reader is not preempted itself: the paused one gives up its room and slot, and the request behind takes that slot, not the pinned one's", { skip, timeout: 120_000 }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 128, warmup: false });
  // a pool of 9 blocks of 16 positions, two sequences at once
  const engine = new Engine(model.engine.model, model.tokenizer, { contextSize: 128, maxSequences: 2, sliceMs: 0, admission: "preempt", kvCacheBytes: 9 * 16 * model.engine.bytesPerToken });
  try {
    // A (pinned to slot 0) streams until its reader, who read one event, is 64 behind: it pauses holding 6 blocks
    const a = engine.submit(params(Array.from({ length: 20 }, (_, i) => 300 + i), 100, 0));
    const reader = a[Symbol.asyncIterator]();
    await reader.next();
    while (a.backlog <= 64) await new Promise((r) => setTimeout(r, 5));
    // B, pinned to slot 1, is admitted on its prompt (2 blocks) and grows past the room A leaves;
    // U, submitted with it, waits for a sequence (two run) and then for room
    const b = engine.submit(params(Array.from({ length: 17 }, (_, i) => 350 + i), 100, 1));
    const u = engine.submit(params([1, 400, 401], 2));
    await Promise.all([drain(b), drain(u)]);
    // (before ef55d14, B preempted itself in a step that planned nothing else, the room held by A
    // until its reader read; in between, that step admitted U into B's slot, which B then waited for)
    assert.equal(b.preemptions, 0, "the request that grew was not the one preempted");
    assert.ok(a.preemptions > 0, "the paused request gave up its room");
    assert.equal(b.slots[0], 1, "the pinned request ran in its slot");
    assert.equal(u.slots[0], 0, "the request behind the pinned one did not take its slot");
    // A's reader reads on: A ends
    while (!(await reader.next()).done);
    await a.outcome;
    assert.equal(engine.stats.kv!.blocksInUse, 0);
  } finally {
    engine.close();
    model.dispose();
  }
});
