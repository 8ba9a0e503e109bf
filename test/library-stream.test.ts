// Stream steps and submit events carry a `type` that tells their kinds apart (as the AI SDK's
// stream parts and OpenAI's stream events do), so a TypeScript user's `switch` narrows them:
// before, a step's token was `number | undefined` everywhere and an event was told from an end by
// which of `step` / `finishReason` was undefined.
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { test } from "node:test";
import { DisposedError, loadModel, OptionError, type GenerationStep, type RequestEvent } from "../src/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

const MODEL = "models/stories260K.gguf";

test("stories260K: every stream step is a token step or the end step, every submit event a step or a finish", { skip: skipWithoutShared(MODEL) }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 128, threads: 1 });
  try {
    const alone = await model.generate("Once upon a time", { temperature: 0, maxTokens: 8 });
    // a stop token ends it at the 4th token: the last step is the end step carrying that token
    const stopAt = alone.completionTokens[3]!;
    const steps: GenerationStep[] = [];
    const it = model.stream("Once upon a time", { temperature: 0, maxTokens: 8, stopTokens: [stopAt], logprobs: 1 });
    let r = await it.next();
    for (; !r.done; r = await it.next()) steps.push(r.value);
    const tokens = steps.filter((s) => s.type === "token");
    assert.deepEqual(tokens.map((s) => s.token), r.value.completionTokens);
    assert.ok(tokens.every((s) => s.logprob !== undefined && s.endToken === undefined));
    const last = steps.at(-1)!;
    assert.equal(last.type, "end");
    assert.equal(last.token, undefined);
    assert.equal(last.endToken?.token, r.value.endToken?.token);
    assert.equal(steps.filter((s) => s.type === "end").length, 1);
    assert.equal(steps.map((s) => s.text).join(""), r.value.completion);

    const events: RequestEvent[] = [];
    for await (const e of model.submit("Lily", { maxTokens: 3, n: 2, temperature: 0.7, seed: 3 }).events()) events.push(e);
    for (const e of events) assert.equal(e.type, e.step ? "step" : "finish");
    assert.deepEqual(events.filter((e) => e.type === "finish").map((e) => e.choice).sort(), [0, 1]);
    assert.ok(events.every((e) => e.type === "finish" ? e.finishReason === "length" : e.step.type === "token" ? Number.isInteger(e.step.token) : true));
  } finally {
    model.dispose();
  }
});

test("stories260K: every call after dispose, and a stream running at dispose, fail with a DisposedError; dispose twice is a no-op", { skip: skipWithoutShared(MODEL) }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 128, threads: 1 });
  const running = model.stream("Once upon a time", { temperature: 0, maxTokens: 50 });
  assert.equal((await running.next()).done, false);
  model.dispose();
  model.dispose();
  const isDisposed = (what: string) => (e: unknown) => {
    assert.ok(e instanceof DisposedError, `${what}: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
    assert.match(e.message, /disposed/);
    return true;
  };
  await assert.rejects(running.next(), isDisposed("the running stream"));
  await assert.rejects(model.generate("Once"), isDisposed("generate"));
  assert.throws(() => model.stream("Once"), isDisposed("stream"));
  await assert.rejects(model.chat([{ role: "user", content: "Hi" }], { chatTemplate: "{{ messages[0].content }}" }), isDisposed("chat"));
  assert.throws(() => model.submit("Once"), isDisposed("submit"));
  assert.throws(() => model.engine.submit({ promptTokens: [1], decoding: { kind: "sample", n: 1 }, sampling: { seed: 1 }, maxTokens: 1, stop: [], stopTokens: [], ignoreEos: false, topLogprobs: undefined }), isDisposed("the engine"));
});

test("stories260K: stream() refuses a bad option at the call, nothing queued; a stream left before its first step cancels its request", { skip: skipWithoutShared(MODEL) }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 256, threads: 1 });
  try {
    // before, the generator's body (and its checks) ran at the first next(): a for-await loop's setup passed
    assert.throws(() => model.stream("Once", { temperature: -1 }), (e: unknown) => e instanceof OptionError && e.option === "temperature");
    assert.throws(() => model.stream("Once", { stopTokens: [1e9] }), (e: unknown) => e instanceof OptionError && e.option === "stopTokens");
    assert.throws(() => model.streamChat([{ role: "user", content: "Hi" }], { chatTemplate: "{{ messages[0].content }}", topP: 2 }), (e: unknown) => e instanceof OptionError && e.option === "topP");
    assert.deepEqual([model.engine.stats.waiting, model.engine.stats.running, model.engine.stats.steps], [0, 0, 0], "nothing queued");
    // the request is queued by the call now: leaving before reading a step cancels it, and lets go of the caller's signal
    const signal = new AbortController().signal;
    const unread = model.stream("Once upon a time", { temperature: 0, maxTokens: 200, ignoreEos: true, signal });
    await unread.return(undefined as never);
    assert.equal((await unread.next()).done, true);
    while (model.engine.stats.running + model.engine.stats.waiting > 0) await new Promise((r) => setTimeout(r, 5));
    assert.ok(model.engine.stats.steps < 200, `cancelled, not run to its 200 tokens (${model.engine.stats.steps} steps)`);
    assert.equal(getEventListeners(signal, "abort").length, 0);
    // a stream read to its end is what generate answers
    const it = model.stream("Lily", { temperature: 0, maxTokens: 5 });
    let r = await it.next();
    while (!r.done) r = await it.next();
    assert.deepEqual(r.value.completionTokens, (await model.generate("Lily", { temperature: 0, maxTokens: 5 })).completionTokens);
  } finally {
    model.dispose();
  }
});

test("stories260K: leaving submit()'s events() or steps() early cancels the request, freeing its slot, as leaving stream() does", { skip: skipWithoutShared(MODEL) }, async () => {
  // before, a reader gone left its events piling up: past the backlog limit the request waited for
  // it for good, holding its slot and KV blocks; result() never settled, the next request on a
  // one-sequence engine never ran, and the engine's loop polled for the reader, so the process never exited
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 256, threads: 1, maxSequences: 1 });
  // (a bound on a wait that, broken, is forever: the failure names it instead of hanging the run)
  const settled = async <T>(p: Promise<T>, what: string): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    const never = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} never settled`)), 30_000)));
    try {
      return await Promise.race([p, never]);
    } finally {
      clearTimeout(timer);
    }
  };
  try {
    for (const read of ["events", "steps"] as const) {
      const run = model.submit("Once upon a time", { temperature: 0, maxTokens: 200, ignoreEos: true });
      let seen = 0;
      for await (const _ of run[read]()) if (++seen === 3) break;
      const r = await settled(run.result(), `${read}(): the result after a break`);
      assert.equal(r.finishReason, "abort", read);
      assert.ok(r.completionTokens.length < 200, `${read}: cancelled, not run to its 200 tokens`);
      assert.deepEqual([model.engine.stats.running, model.engine.stats.kv?.blocksInUse], [0, 0], `${read}: its slot and blocks are free`);
    }
    // left before its first event: cancelled too, and the one slot serves the next request
    const unread = model.submit("Once upon a time", { temperature: 0, maxTokens: 200, ignoreEos: true });
    await unread.events().return();
    assert.equal((await settled(unread.result(), "an unread run's result")).finishReason, "abort");
    const next = await settled(model.generate("Lily", { temperature: 0, maxTokens: 4 }), "the next request");
    assert.equal(next.finishReason, "length");
    // read to its end, a run is not cancelled
    const whole = model.submit("Lily", { temperature: 0, maxTokens: 4 });
    for await (const _ of whole.steps());
    assert.deepEqual((await whole.result()).completionTokens, next.completionTokens);
  } finally {
    model.dispose();
  }
});

test("stories260K: concurrent calls sharing one AbortSignal put one listener on it, so Node warns of no leak; aborting it ends them all", { skip: skipWithoutShared(MODEL) }, async () => {
  // before, each generate / stream / chat call added a listener of its own to the caller's signal:
  // a dozen concurrent calls under one AbortSignal.timeout printed "MaxListenersExceededWarning:
  // Possible EventTarget memory leak detected. 11 abort listeners added to [AbortSignal]"
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 128, threads: 1 });
  const warnings: Error[] = [];
  const onWarning = (w: Error) => warnings.push(w);
  process.on("warning", onWarning);
  try {
    const shared = new AbortController();
    const options = { temperature: 0, maxTokens: 4, signal: shared.signal };
    const calls = [
      ...Array.from({ length: 12 }, (_, i) => model.generate(`Lily ${i}`, options)),
      ...Array.from({ length: 4 }, () => model.chat([{ role: "user", content: "Hi" }], { ...options, chatTemplate: "{{ messages[0].content }}" })),
    ];
    const streams = Array.from({ length: 4 }, (_, i) => model.stream(`Ben ${i}`, options));
    // (the calls queued, each linked to the signal)
    await new Promise((r) => setImmediate(r));
    assert.equal(getEventListeners(shared.signal, "abort").length, 1, "one listener for all the calls");
    for (const s of streams) calls.push((async () => { let r = await s.next(); while (!r.done) r = await s.next(); return r.value; })());
    const results = await Promise.all(calls);
    assert.ok(results.every((r) => r.finishReason === "length"));
    assert.equal(getEventListeners(shared.signal, "abort").length, 0, "none once they ended");
    // the one listener still reaches every call: an abort ends them all
    const stop = new AbortController();
    const running = Array.from({ length: 12 }, (_, i) => model.generate(`Once ${i}`, { temperature: 0, maxTokens: 100, ignoreEos: true, signal: stop.signal }));
    stop.abort();
    assert.deepEqual((await Promise.all(running)).map((r) => r.finishReason), new Array(12).fill("abort"));
    assert.equal(getEventListeners(stop.signal, "abort").length, 0);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(warnings.filter((w) => w.name === "MaxListenersExceededWarning").map((w) => w.message), []);
  } finally {
    process.off("warning", onWarning);
    model.dispose();
  }
});

test("stories260K: hidden-state calls (decoder embeddings) waiting for the model's passes under one AbortSignal put one listener on it", { skip: skipWithoutShared(MODEL) }, async () => {
  // before, each call waiting its turn (exclusive) added a listener of its own: 12 calls, 11 waiting, 11 listeners
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 128, threads: 1 });
  try {
    const shared = new AbortController();
    const calls = Array.from({ length: 12 }, (_, i) => model.hiddenStates([[1, 2 + i, 3]], 512, shared.signal));
    assert.equal(getEventListeners(shared.signal, "abort").length, 1, "one listener for the waiting calls");
    const hidden = await Promise.all(calls);
    assert.ok(hidden.every((h) => h.length === 1 && h[0]!.length === 3 * model.info.embeddingLength));
    assert.equal(getEventListeners(shared.signal, "abort").length, 0, "none once they ended");
    // an abort still gives up every wait
    const stop = new AbortController();
    const waiting = Array.from({ length: 12 }, () => model.hiddenStates([[1, 2, 3]], 512, stop.signal));
    stop.abort(new Error("stopped"));
    const settled = await Promise.allSettled(waiting);
    assert.ok(settled.slice(1).every((s) => s.status === "rejected" && (s.reason as Error).message === "stopped"), JSON.stringify(settled.map((s) => s.status)));
    assert.equal(getEventListeners(stop.signal, "abort").length, 0);
  } finally {
    model.dispose();
  }
});
