import assert from "node:assert/strict";
import { test } from "node:test";
import { Engine, type EngineRequest, type RequestParams } from "../src/engine/index.js";
import { loadModel, type Model } from "../src/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

/*
 * A request whose reader stops reading pauses once it is 64 events behind (a bounded backlog), its
 * KV blocks and sequences still held. Under admission "preempt" it must not hold back the requests
 * that need that room: it is preempted for them, and recomputed once its reader reads on (vLLM and
 * llama-server buffer a slow client's output instead: the room is freed when it ends).
 */
const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL);

const params = (promptTokens: number[], maxTokens: number): RequestParams => ({
  promptTokens, maxTokens, decoding: { kind: "sample", n: 1 }, sampling: { temperature: 0, seed: 0 }, stop: [], stopTokens: [], ignoreEos: true, topLogprobs: undefined,
});

/** reads the request to its end: its tokens as the events carried them */
async function drain(r: EngineRequest | AsyncIterator<unknown>, from?: EngineRequest): Promise<number[]> {
  const it = Symbol.asyncIterator in r ? r[Symbol.asyncIterator]() : r;
  const tokens: number[] = [];
  for (let e = await it.next(); !e.done; e = await it.next()) {
    const step = (e.value as { step?: { token?: number } }).step;
    if (step?.token !== undefined) tokens.push(step.token);
  }
  await (from ?? (r as EngineRequest)).outcome;
  return tokens;
}

/** submits the request and reads its first event only, until the engine pauses it (its reader past the 64-event backlog) */
async function stalled(engine: Engine, p: RequestParams): Promise<{ request: EngineRequest; reader: AsyncIterator<unknown>; first: IteratorResult<unknown> }> {
  const request = engine.submit(p);
  const reader = request[Symbol.asyncIterator]();
  const first = await reader.next();
  while (request.backlog <= 64) await new Promise((r) => setTimeout(r, 5));
  return { request, reader, first };
}

/** the request alone on a fresh engine (the judge: a request's greedy tokens do not depend on what runs beside it) */
async function solo(model: Model, p: RequestParams): Promise<number[]> {
  const engine = new Engine(model.engine.model, model.tokenizer, { contextSize: 128, sliceMs: 0 });
  try {
    return (await engine.submit(p).outcome).choices[0]!.completionTokens;
  } finally {
    engine.close();
  }
}

test("admission preempt: a request whose reader stopped reading is preempted for one that needs its room, which runs to its end meanwhile; both give their solo tokens", { skip, timeout: 120_000 }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 128, warmup: false });
  // a pool of 9 blocks of 16 positions: A alone grows to 6 before it pauses, B needs 7 by its end
  const engine = new Engine(model.engine.model, model.tokenizer, { contextSize: 128, maxSequences: 4, sliceMs: 0, admission: "preempt", kvCacheBytes: 9 * 16 * model.engine.bytesPerToken });
  try {
    const pa = params(Array.from({ length: 20 }, (_, i) => 300 + i), 100), pb = params(Array.from({ length: 17 }, (_, i) => 350 + i), 100);
    const { request: a, reader, first } = await stalled(engine, pa);
    // B, read as it comes, outgrows what A leaves; A's reader reads nothing until B has ended
    // (at first, B preempted itself for a block, then waited for room A held until its reader read:
    // forever; then it preempted itself and was recomputed on the room A gave up at admission)
    const b = engine.submit(pb);
    const bTokens = await drain(b);
    assert.ok(a.preemptions > 0, "the paused request made room");
    assert.equal(b.preemptions, 0, "B took the paused request's room for its block, not preempting itself");
    assert.deepEqual(bTokens, await solo(model, pb));
    assert.equal(a.phase, "waiting", "A waits, its reader still behind, not recomputed only to pause again");
    // A's reader reads on: A is recomputed and ends with its solo tokens, each event once
    const aTokens = [(first.value as { step: { token: number } }).step.token, ...(await drain(reader, a))];
    assert.deepEqual(aTokens, await solo(model, pa));
    assert.deepEqual((await a.outcome).choices[0]!.completionTokens, aTokens);
    assert.equal(engine.stats.kv!.blocksInUse, 0);
  } finally {
    engine.close();
    model.dispose();
  }
});

test("admission preempt: a request arriving while a stalled reader's request holds the room it needs starts without waiting for that reader", { skip, timeout: 120_000 }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 128, warmup: false });
  const engine = new Engine(model.engine.model, model.tokenizer, { contextSize: 128, maxSequences: 4, sliceMs: 0, admission: "preempt", kvCacheBytes: 8 * 16 * model.engine.bytesPerToken });
  try {
    const pa = params(Array.from({ length: 20 }, (_, i) => 300 + i), 100), pc = params(Array.from({ length: 40 }, (_, i) => 400 + i), 20);
    const { request: a, reader } = await stalled(engine, pa);
    // A holds 6 of the 8 blocks; C's prompt needs 3, and a block spare (the watermark)
    const c = engine.submit(pc);
    assert.deepEqual(await drain(c), await solo(model, pc));
    assert.ok(a.preemptions > 0);
    const rest = drain(reader, a);
    await rest;
    assert.equal(engine.stats.kv!.blocksInUse, 0);
  } finally {
    engine.close();
    model.dispose();
  }
});

test("admission preempt: a request pinned to the slot of a request whose reader stopped reading starts without waiting for that reader; both give their solo tokens", { skip, timeout: 120_000 }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 128, warmup: false });
  // room enough for both: only the slot is held
  const engine = new Engine(model.engine.model, model.tokenizer, { contextSize: 128, maxSequences: 2, sliceMs: 0, admission: "preempt" });
  try {
    const pa = { ...params(Array.from({ length: 20 }, (_, i) => 300 + i), 100), slot: 0 }, pb = { ...params(Array.from({ length: 17 }, (_, i) => 350 + i), 30), slot: 0 };
    const { request: a, reader, first } = await stalled(engine, pa);
    assert.deepEqual(a.slots, [0]);
    // B, pinned to A's slot, read as it comes; A's reader reads nothing until B has ended
    // (before, B was passed over while A held slot 0, and A held it until its reader read: forever)
    const b = engine.submit(pb);
    const bTokens = await drain(b);
    assert.equal(a.preemptions, 1, "the paused request left its slot");
    assert.deepEqual(bTokens, await solo(model, pb));
    assert.equal(a.phase, "waiting", "A waits, its reader still behind");
    // A's reader reads on: A is recomputed in its slot and ends with its solo tokens, each event once
    const aTokens = [(first.value as { step: { token: number } }).step.token, ...(await drain(reader, a))];
    assert.deepEqual(aTokens, await solo(model, pa));
    assert.deepEqual((await a.outcome).choices[0]!.completionTokens, aTokens);
    assert.equal(engine.stats.kv!.blocksInUse, 0);
  } finally {
    engine.close();
    model.dispose();
  }
});
