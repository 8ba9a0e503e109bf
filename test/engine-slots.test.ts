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

test("a pinned request preempted in a step that runs nothing else is started again first, in its slot: the request behind it does not take the slot meanwhile", { skip }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 128, warmup: false });
  // a pool of 9 blocks of 16 positions, two sequences at once
  const engine = new Engine(model.engine.model, model.tokenizer, { contextSize: 128, maxSequences: 2, sliceMs: 0, admission: "preempt", kvCacheBytes: 9 * 16 * model.engine.bytesPerToken });
  try {
    // A (pinned to slot 0) streams until its reader, who read one event, is 64 behind: it pauses holding 6 blocks
    const a = engine.submit(params(Array.from({ length: 20 }, (_, i) => 300 + i), 100, 0));
    const reader = a[Symbol.asyncIterator]();
    await reader.next();
    while (a.backlog <= 64) await new Promise((r) => setTimeout(r, 5));
    // B, pinned to slot 1, is admitted on its prompt (2 blocks) and grows until it finds no block and
    // preempts itself, in a step that plans nothing else (A is paused); U waits behind it (two sequences run)
    const b = engine.submit(params(Array.from({ length: 17 }, (_, i) => 350 + i), 100, 1));
    const u = engine.submit(params([1, 400, 401], 2));
    const bRun = drain(b), uRun = drain(u);
    while (b.preemptions === 0) await new Promise((r) => setTimeout(r, 5));
    // A read on: it ends, and B and U run
    const aRun = (async () => {
      while (!(await reader.next()).done);
      await a.outcome;
    })();
    await Promise.all([aRun, bRun, uRun]);
    assert.equal(b.slots[0], 1, "the pinned request ran in its slot");
    // (before, the step that preempted B admitted U, B's slot still counted as B's: U took slot 1 and B waited for U)
    assert.equal(u.slots[0], 0, "the request behind the pinned one did not take its slot");
  } finally {
    engine.close();
    model.dispose();
  }
});
