import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { Engine } from "../src/engine/index.js";
import { loadModel, type GenerateOptions, type GenerationResult, type Model } from "../src/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";
import { countPasses } from "./helpers/draft-passes.js";
import { soloResults } from "./helpers/solo.js";

const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL) || skipWithoutShared("models/stories260K.expected.json");
const golden = () => JSON.parse(readFileSync(sharedFile("models/stories260K.expected.json")!, "utf8")).cases as { prompt: string; completionTokens: number[] }[];

/** resolves once the stream has produced `k` tokens (the stream is consumed to its end in the background) */
function consume(model: Model, prompt: string | number[], options: GenerateOptions, onToken?: (count: number) => void): Promise<GenerationResult> {
  return (async () => {
    const it = model.stream(prompt, options);
    let count = 0;
    for (;;) {
      const r = await it.next();
      if (r.done) return r.value;
      if (r.value.token !== undefined) onToken?.(++count);
    }
  })();
}

for (const backend of ["reference", "wasm"] as const) {
  test(`stories260K (${backend}): concurrent requests arriving at different times each get exactly their solo tokens`, { skip }, async () => {
    const cases = golden();
    const jobs: { prompt: string | number[]; options: GenerateOptions }[] = [
      { prompt: cases[0]!.prompt, options: { temperature: 0, maxTokens: 64 } },
      { prompt: "Lily", options: { temperature: 0.9, topK: 20, seed: 1234, maxTokens: 40 } },
      { prompt: cases[1]!.prompt, options: { temperature: 0, maxTokens: 64 } },
      { prompt: "The little dog ran to the park and saw a big", options: { temperature: 0, maxTokens: 50, stop: ["Lily"] } },
      { prompt: [1, 403, 407, 261, 378], options: { temperature: 0.7, topP: 0.9, seed: 7, maxTokens: 30, repeatPenalty: 1.2 } },
      { prompt: "Once upon a time", options: { temperature: 1.1, seed: 99, maxTokens: 60 } },
    ];
    const solo = await soloResults(sharedFile(MODEL)!, jobs, { backend });
    // the golden cases alone are llama.cpp's greedy tokens
    assert.deepEqual(solo[0]!.completionTokens, cases[0]!.completionTokens);
    assert.deepEqual(solo[2]!.completionTokens, cases[1]!.completionTokens);

    const model = await loadModel(sharedFile(MODEL)!, { backend, contextSize: 512 });
    try {
      const results: Promise<GenerationResult>[] = [];
      const aborter = new AbortController();
      let abortedAt = 0;
      // job i + 1 arrives once job i has produced 3 tokens; job 5 is aborted after 6 of its tokens
      const start = (i: number): void => {
        const j = jobs[i]!;
        const last = i === jobs.length - 1;
        results[i] = consume(model, j.prompt, last ? { ...j.options, signal: aborter.signal } : j.options, (count) => {
          if (count === 3 && i + 1 < jobs.length) start(i + 1);
          if (last && count === 6) { abortedAt = count; aborter.abort(); }
        });
      };
      start(0);
      await new Promise<void>((resolve) => { const wait = () => (results.length === jobs.length ? resolve() : setTimeout(wait, 1)); wait(); });
      const got = await Promise.all(results);
      for (let i = 0; i < jobs.length - 1; i++) {
        assert.deepEqual(got[i]!.completionTokens, solo[i]!.completionTokens, `job ${i} (${JSON.stringify(jobs[i]!.options)})`);
        assert.equal(got[i]!.completion, solo[i]!.completion, `job ${i} text`);
        assert.equal(got[i]!.finishReason, solo[i]!.finishReason, `job ${i} finish`);
      }
      const aborted = got.at(-1)!;
      assert.equal(abortedAt, 6);
      assert.equal(aborted.finishReason, "abort");
      assert.ok(aborted.completionTokens.length >= 6 && aborted.completionTokens.length < solo.at(-1)!.completionTokens.length, `${aborted.completionTokens.length} tokens`);
      assert.deepEqual(aborted.completionTokens, solo.at(-1)!.completionTokens.slice(0, aborted.completionTokens.length), "the aborted job's tokens so far are its solo prefix");
      // they really ran together: some step decoded several requests' rows in one pass
      const stats = model.engine.stats;
      assert.ok(stats.peakStepSequences >= 3, `at most ${stats.peakStepSequences} sequences in one step`);
      assert.ok(stats.steps < stats.rowsComputed, `${stats.steps} steps for ${stats.rowsComputed} rows`);
      assert.equal(stats.kv!.blocksInUse, 0, "every block is back in the pool (or idle in the prefix cache)");
    } finally {
      model.dispose();
    }
  });
}

test("stories260K: a second request sharing a 256-token prefix computes only its new tokens, with the same output as without the cache", { skip }, async () => {
  const prefix = [1, ...Array.from({ length: 255 }, (_, i) => 260 + ((i * 37) % 240))];
  const first = [...prefix, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309];
  const second = [...prefix, 410, 411, 412, 413, 414, 415, 416, 417, 418, 419, 420, 421];
  const options = { temperature: 0, maxTokens: 12, ignoreEos: true };
  const [uncached] = await soloResults(sharedFile(MODEL)!, [{ prompt: second, options }], { backend: "wasm" });
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 512 });
  try {
    await model.generate(first, options);
    const before = model.engine.stats.rowsComputed;
    const r = await model.generate(second, options);
    const computed = model.engine.stats.rowsComputed - before;
    assert.equal(r.timings.cachedPromptTokens, 256);
    assert.equal(computed, second.length - 256 + r.completionTokens.length - 1, "the 12 new prompt tokens, then one row per decoded token");
    assert.deepEqual(r.completionTokens, uncached!.completionTokens);
    assert.equal(r.completion, uncached!.completion);
    // the same prompt again: everything but its last, partial block comes from the cache
    const again = await model.generate(second, options);
    assert.equal(again.timings.cachedPromptTokens, 256 + 0);
    assert.deepEqual(again.completionTokens, uncached!.completionTokens);
    assert.ok(model.engine.stats.kv!.prefixHits >= 32, `${model.engine.stats.kv!.prefixHits} cached blocks reused`);
  } finally {
    model.dispose();
  }
});

test("stories260K: a prompt's tokens and logprobs do not depend on how the steps chunk it or on the prefix cache (no lone prompt row)", { skip }, async () => {
  // a lone row of a sequence takes attention's one-query arithmetic (llama.cpp's decode order):
  // a prompt computed around one (maxBatchTokens 1, a step's last token of budget, a cached prefix
  // leaving one token) gave logits other than the same prompt computed whole, in the last bits
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 256 });
  try {
    const text = "Once upon a time, there was a little girl named Lily. She liked to play with her toys and her dog";
    const run = async (engine: Engine, promptTokens: number[]) => {
      const o = await engine.submit({
        promptTokens, decoding: { kind: "sample", n: 1 }, sampling: { temperature: 0, seed: 0 }, maxTokens: 6, stop: [], stopTokens: [], ignoreEos: true, topLogprobs: 2, promptLogprobs: undefined,
      }).outcome;
      return { tokens: o.choices[0]!.completionTokens, logprobs: o.choices[0]!.logprobs, cached: o.cachedPromptTokens };
    };
    const fresh = (maxBatchTokens?: number) => new Engine(model.languageModel, model.tokenizer, { contextSize: 256, maxBatchTokens });
    for (const length of [17, 18, 21]) {
      const prompt = model.tokenizer.encode(text).slice(0, length);
      assert.equal(prompt.length, length);
      const whole = await run(fresh(), prompt);
      for (const maxBatchTokens of [1, 2, 3, 4]) assert.deepEqual(await run(fresh(maxBatchTokens), prompt), whole, `${length} tokens, maxBatchTokens ${maxBatchTokens}`);
      // the same prompt again on one engine: its first block from the cache where two or more tokens remain to compute
      const engine = fresh();
      await run(engine, prompt);
      const again = await run(engine, prompt);
      assert.equal(again.cached, length >= 18 ? 16 : 0, `${length} tokens: cached`);
      assert.deepEqual(again, { ...whole, cached: again.cached }, `${length} tokens, again from the cache`);
      engine.close();
    }
  } finally {
    model.dispose();
  }
});

test("stories260K: a chat's next turn reuses the reply's K/V by default; with cacheReplies false it gets the logprobs it gets alone", { skip }, async () => {
  // a decoded token's row is computed alone (attention's one-query order), a prompt's in a chunk:
  // a next turn through the cached reply may get logits that differ in the last bits from
  // computing the turn afresh; cacheReplies false caches prompt rows only
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 256 });
  try {
    const params = (promptTokens: number[], maxTokens: number) => ({
      promptTokens, decoding: { kind: "sample", n: 1 } as const, sampling: { temperature: 0, seed: 0 }, maxTokens, stop: [], stopTokens: [], ignoreEos: true, topLogprobs: 2,
    });
    const prompt = model.tokenizer.encode("Once upon a time, there was a little girl named Lily.");
    const alone = async (tokens: number[]) => {
      const e = new Engine(model.languageModel, model.tokenizer, { contextSize: 256 });
      const outcome = await e.submit(params(tokens, 8)).outcome;
      e.close();
      return outcome;
    };
    for (const cacheReplies of [true, false]) {
      const engine = new Engine(model.languageModel, model.tokenizer, { contextSize: 256, cacheReplies });
      const first = await engine.submit(params(prompt, 40)).outcome;
      const next = [...prompt, ...first.choices[0]!.completionTokens, ...model.tokenizer.encode("Then", { addSpecialTokens: false })];
      const again = await engine.submit(params(next, 8)).outcome;
      const solo = await alone(next);
      // the first request's rows: its prompt and its decoded tokens but the last (never computed)
      const reused = cacheReplies ? Math.floor((prompt.length + 39) / 16) * 16 : Math.floor(prompt.length / 16) * 16;
      assert.equal(again.cachedPromptTokens, reused, `cacheReplies ${cacheReplies}: cached prompt tokens`);
      if (!cacheReplies) {
        assert.deepEqual(again.choices[0]!.completionTokens, solo.choices[0]!.completionTokens);
        assert.deepEqual(again.choices[0]!.logprobs, solo.choices[0]!.logprobs);
      }
      engine.close();
    }
  } finally {
    model.dispose();
  }
});

test("stories260K: a full KV pool queues requests instead of failing them; one that can never fit fails at once naming both numbers", { skip }, async () => {
  const probe = await loadModel(sharedFile(MODEL)!, { contextSize: 512 });
  const perToken = probe.engine.bytesPerToken;
  probe.dispose();
  // 10 blocks of 16 tokens; each request below may need 5 (12 prompt + 60 new = 72 tokens)
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 512, kvCacheBytes: 10 * 16 * perToken });
  try {
    assert.equal(model.engine.stats.kvCapacityTokens, 160);
    const prompts = ["The little dog ran to the park and saw a big", "Once upon a time, there was a", "Lily and Ben went to the"];
    const options = { temperature: 0, maxTokens: 60, ignoreEos: true };
    const solo = await soloResults(sharedFile(MODEL)!, prompts.map((prompt) => ({ prompt, options })), { backend: "wasm" });
    const waitingSeen: number[] = [];
    const runs = prompts.map((p) => consume(model, p, options, () => waitingSeen.push(model.engine.stats.waiting)));
    const got = await Promise.all(runs);
    got.forEach((r, i) => assert.deepEqual(r.completionTokens, solo[i]!.completionTokens, `request ${i}`));
    assert.ok(waitingSeen.some((w) => w === 1), "the third request waited while the first two ran");
    assert.ok(got[2]!.timings.queueMs > 0);
    const kv = model.engine.stats.kv!;
    assert.ok(kv.peakBlocksInUse <= 10, `peak ${kv.peakBlocksInUse} blocks`);
    assert.equal(kv.grows, 0, "the pool is never resized");
    await assert.rejects(model.generate("Once upon a time", { maxTokens: 200 }), /needs room for up to 208 tokens of KV cache \(prompt 5 \+ maxTokens 200\) but the KV cache holds 160 tokens/);
    // a prompt larger than the whole pool (but within the context): refused at submit too, nothing left queued
    const long = [1, ...Array.from({ length: 199 }, (_, i) => 10 + (i % 400))];
    await assert.rejects(model.generate(long, { maxTokens: 1 }), /needs room for up to 208 tokens of KV cache \(prompt 200 \+ maxTokens 1\) but the KV cache holds 160 tokens/);
    assert.equal(model.engine.stats.waiting, 0);
  } finally {
    model.dispose();
  }
});

test("stories260K: n choices whose maxTokens reaches past the context are admitted as one choice is, each stopping at the context's end as it does alone; their worst case counts each choice's room within the context", { skip }, async () => {
  const probe = await loadModel(sharedFile(MODEL)!, { contextSize: 64, warmup: false });
  const perToken = probe.engine.bytesPerToken;
  probe.dispose();
  // 16 blocks of 16 tokens. "Once upon a time" is 5 tokens: a choice holds at most the context's 64
  // positions, so 3 choices take 4 blocks + 1 (the prompt's free slot) + 2 x (59 tokens' 4 blocks + 1
  // started mid-block) = 15; before, each further choice was counted maxTokens (10000) long
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 64, kvCacheBytes: 16 * 16 * perToken, warmup: false });
  try {
    const options = { temperature: 0, ignoreEos: true };
    const alone = await model.generate("Once upon a time", { ...options, maxTokens: 10000 });
    assert.equal(alone.finishReason, "length");
    assert.equal(alone.completionTokens.length, 59);
    const three = await model.generate("Once upon a time", { ...options, maxTokens: 10000, n: 3 });
    assert.equal(three.choices!.length, 3);
    for (const c of three.choices!) {
      assert.deepEqual(c.completionTokens, alone.completionTokens);
      assert.equal(c.finishReason, "length");
    }
    // 4 choices need 20 blocks: refused at once, the request's size counted within the context
    await assert.rejects(model.generate("Once upon a time", { ...options, maxTokens: 10000, n: 4 }), /needs room for up to 320 tokens of KV cache \(prompt 5 \+ maxTokens 10000, 4 choices\) but the KV cache holds 256 tokens/);
  } finally {
    model.dispose();
  }
});

test("stories260K: an aborted request leaves at the next step and frees its blocks; the others continue untouched", { skip }, async () => {
  const options = { temperature: 0, maxTokens: 200, ignoreEos: true };
  const [solo] = await soloResults(sharedFile(MODEL)!, [{ prompt: "Lily and Ben", options }], { backend: "wasm" });
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 512 });
  try {
    const aborter = new AbortController();
    let stepsAtAbort = 0;
    let blocksAtAbort = 0;
    const victim = consume(model, "Once upon a time", { ...options, signal: aborter.signal }, (count) => {
      if (count === 10) {
        stepsAtAbort = model.engine.stats.steps;
        blocksAtAbort = model.engine.stats.kv!.blocksInUse;
        aborter.abort();
      }
    });
    const survivor = model.generate("Lily and Ben", options);
    const v = await victim;
    const stepsAtEnd = model.engine.stats.steps;
    assert.equal(v.finishReason, "abort");
    assert.ok(stepsAtEnd - stepsAtAbort <= 1, `the aborted request left after ${stepsAtEnd - stepsAtAbort} steps`);
    assert.ok(model.engine.stats.kv!.blocksInUse < blocksAtAbort, "its blocks went back to the pool");
    const s = await survivor;
    assert.deepEqual(s.completionTokens, solo!.completionTokens);
    assert.equal(model.engine.stats.kv!.blocksInUse, 0);
    // a request aborted before it starts computes nothing
    const before = model.engine.stats.rowsComputed;
    const early = await model.generate("Lily", { signal: AbortSignal.abort() });
    assert.equal(early.finishReason, "abort");
    assert.equal(early.completionTokens.length, 0);
    assert.equal(model.engine.stats.rowsComputed, before);
  } finally {
    model.dispose();
  }
});

test("stories260K: a request submitted with the caller's AbortSignal leaves no listener on it once it ends", { skip }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 512 });
  try {
    // one long-lived signal (a server's shutdown, a page's) shared by many requests, one after another
    const shared = new AbortController();
    for (let i = 0; i < 12; i++) await model.submit(`Lily ${i}`, { temperature: 0, maxTokens: 2, signal: shared.signal }).result();
    assert.equal(getEventListeners(shared.signal, "abort").length, 0, "finished requests keep no abort listener");
    // nor one that was aborted, nor one that failed
    const aborted = new AbortController();
    const run = model.submit("Once upon a time", { temperature: 0, maxTokens: 100, ignoreEos: true, signal: aborted.signal });
    aborted.abort();
    assert.equal((await run.result()).finishReason, "abort");
    assert.equal(getEventListeners(aborted.signal, "abort").length, 0);
    const failing = new AbortController();
    const doomed = model.submit("Once upon a time", { temperature: 0, maxTokens: 100, ignoreEos: true, signal: failing.signal });
    model.dispose();
    await assert.rejects(doomed.result(), /disposed/);
    assert.equal(getEventListeners(failing.signal, "abort").length, 0);
  } finally {
    model.dispose();
  }
});

test("stories260K: leaving a stream early cancels its request; dispose fails the requests still running", { skip }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 512 });
  const it = model.stream("Once upon a time", { temperature: 0, maxTokens: 300, ignoreEos: true });
  for (let i = 0; i < 5; i++) await it.next();
  await it.return(undefined as never);
  const running = model.generate("Lily", { temperature: 0, maxTokens: 300, ignoreEos: true });
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(model.engine.stats.running, 1, "only the second request runs");
  model.dispose();
  await assert.rejects(running, /disposed while the request was running/);
});

test("stories260K: beam search and speculative decoding run as engine strategies beside sampled requests, each as it runs alone", { skip }, async () => {
  const draftModel = await loadModel(sharedFile(MODEL)!, { quantize: "q4_0" });
  const jobs: { prompt: string; options: GenerateOptions }[] = [
    { prompt: "Once upon a time", options: { numBeams: 4, numReturnSequences: 2, maxTokens: 24 } },
    { prompt: "Lily and Ben", options: { temperature: 0, maxTokens: 40, draftModel, draftTokens: 4 } },
    { prompt: "The little dog", options: { temperature: 0, maxTokens: 40, promptLookup: true } },
    { prompt: "One day", options: { temperature: 0.8, seed: 5, maxTokens: 40, draftModel, draftTokens: 3 } },
    { prompt: "Lily", options: { temperature: 0.9, seed: 3, maxTokens: 40 } },
  ];
  try {
    const solo = await soloResults(sharedFile(MODEL)!, jobs, { backend: "wasm" });
    const model = await loadModel(sharedFile(MODEL)!, { contextSize: 512 });
    try {
      const got = await Promise.all(jobs.map((j) => model.generate(j.prompt, j.options)));
      got.forEach((r, i) => {
        assert.deepEqual(r.completionTokens, solo[i]!.completionTokens, `job ${i} (${Object.keys(jobs[i]!.options).join(", ")})`);
        assert.equal(r.completion, solo[i]!.completion);
      });
      assert.deepEqual(got[0]!.beams!.map((b) => b.tokens), solo[0]!.beams!.map((b) => b.tokens));
      assert.deepEqual(got[1]!.speculative, solo[1]!.speculative);
      // the strategies' first token is decided after the first step, not at the end of the run
      for (const r of got.slice(0, 4)) assert.ok(r.timings.ttftMs < r.timings.totalMs && r.timings.tpotMs > 0, JSON.stringify(r.timings));
      assert.ok(model.engine.stats.peakStepSequences >= 6, `${model.engine.stats.peakStepSequences} sequences in one step (4 beams and the others)`);
      assert.equal(model.engine.stats.kv!.blocksInUse, 0);
    } finally {
      model.dispose();
    }
  } finally {
    draftModel.dispose();
  }
});

/** four speculative requests drafting with `draftModel`, greedy and sampled, of different draft lengths */
function draftingJobs(draftModel: Model): { prompt: string; options: GenerateOptions }[] {
  return [
    { prompt: "Once upon a time", options: { temperature: 0, maxTokens: 40, draftModel, draftTokens: 4 } },
    { prompt: "Lily and Ben", options: { temperature: 0.8, seed: 5, maxTokens: 40, draftModel, draftTokens: 3 } },
    { prompt: "The little dog", options: { temperature: 0, maxTokens: 40, draftModel, draftTokens: 5 } },
    { prompt: "One day", options: { temperature: 0.9, seed: 2, maxTokens: 40, draftModel, draftTokens: 4 } },
  ];
}

test("stories260K: the draft passes of concurrent speculative requests drafting with one model run batched, each request's tokens and acceptance as alone; EngineStats counts them and their rows", { skip }, async () => {
  const draftModel = await loadModel(sharedFile(MODEL)!, { contextSize: 512, quantize: "q4_0" });
  // the draft model's passes (and the token rows given them) counted as the engine calls them
  const count = countPasses(draftModel.languageModel);
  const jobs = draftingJobs(draftModel);
  try {
    const solo = await soloResults(sharedFile(MODEL)!, jobs, { backend: "wasm" });
    const alone = count.passes;
    count.passes = 0;
    count.rows = 0;
    const model = await loadModel(sharedFile(MODEL)!, { contextSize: 512 });
    try {
      assert.equal(model.engine.stats.draftPasses, 0);
      const got = await Promise.all(jobs.map((j) => model.generate(j.prompt, j.options)));
      // what the draft model was called for, as the engine's stats say (before: no such counters)
      assert.equal(model.engine.stats.draftPasses, count.passes);
      assert.equal(model.engine.stats.draftRowsComputed, count.rows);
      got.forEach((r, i) => {
        assert.deepEqual(r.completionTokens, solo[i]!.completionTokens, `job ${i}: tokens`);
        assert.deepEqual(r.speculative, solo[i]!.speculative, `job ${i}: the same rounds, proposals and acceptance`);
      });
      // each request alone made its own passes; together, a step's proposals share them (one per
      // draft position of the longest): fewer than half (before: every request's own, as alone)
      assert.ok(count.passes * 2 < alone, `${count.passes} draft passes together, ${alone} alone`);
      assert.equal(model.engine.stats.kv!.blocksInUse, 0);
    } finally {
      model.dispose();
    }
  } finally {
    draftModel.dispose();
  }
});

test("stories260K: a batched draft pass that fails after storing its rows (its logits not read back) is run again one request at a time from where each cache was: tokens and acceptance as alone; EngineStats counts the failed passes and those run again", { skip }, async () => {
  const draftModel = await loadModel(sharedFile(MODEL)!, { contextSize: 512, quantize: "q4_0" });
  // every batched pass of more than one sequence computes and stores its rows, then fails, as a
  // GPU read-back that fails does; the engine's one-at-a-time passes run untouched
  const lm = draftModel.languageModel;
  const count = countPasses(lm);
  const forwardBatchAsync = lm.forwardBatchAsync.bind(lm);
  let failedBatches = 0;
  lm.forwardBatchAsync = async (seqs) => {
    const logits = await forwardBatchAsync(seqs);
    if (seqs.length < 2) return logits;
    failedBatches++;
    throw new Error("reading the logits back failed");
  };
  const jobs = draftingJobs(draftModel);
  try {
    const solo = await soloResults(sharedFile(MODEL)!, jobs, { backend: "wasm" });
    count.passes = 0;
    count.rows = 0;
    const model = await loadModel(sharedFile(MODEL)!, { contextSize: 512 });
    try {
      const got = await Promise.all(jobs.map((j) => model.generate(j.prompt, j.options)));
      assert.ok(failedBatches > 0, "no batched draft pass ran");
      // the failed batched passes and the passes run again alone, each counted with its rows
      assert.equal(model.engine.stats.draftPasses, count.passes);
      assert.equal(model.engine.stats.draftRowsComputed, count.rows);
      got.forEach((r, i) => {
        assert.equal(r.finishReason, solo[i]!.finishReason, `job ${i}: ${r.finishReason}`);
        assert.deepEqual(r.completionTokens, solo[i]!.completionTokens, `job ${i}: tokens`);
        // the draft's cache as alone: its proposals, and so what the target accepted, unchanged
        assert.deepEqual(r.speculative, solo[i]!.speculative, `job ${i}: the same rounds, proposals and acceptance`);
      });
      assert.equal(model.engine.stats.kv!.blocksInUse, 0);
    } finally {
      model.dispose();
    }
  } finally {
    draftModel.dispose();
  }
});

test("stories260K: a reader that stops reading holds its request back (bounded backlog); reading again resumes it, tokens unchanged", { skip }, async () => {
  const options = { temperature: 0, maxTokens: 400, ignoreEos: true };
  const [solo] = await soloResults(sharedFile(MODEL)!, [{ prompt: "Once upon a time", options }], { backend: "wasm" });
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 512 });
  try {
    const run = model.submit("Once upon a time", options);
    const events = run.events();
    await events.next();
    const before = model.engine.stats.rowsComputed;
    await new Promise((r) => setTimeout(r, 400));
    const during = model.engine.stats.rowsComputed - before;
    assert.ok(during <= 70, `${during} rows computed while nobody read (the backlog limit is 64 events)`);
    const tokens: number[] = [];
    for await (const e of events) if (e.step?.token !== undefined) tokens.push(e.step.token);
    const r = await run.result();
    assert.deepEqual(r.completionTokens, solo!.completionTokens);
    assert.equal(tokens.length, r.completionTokens.length - 1, "every event after the first arrived");
  } finally {
    model.dispose();
  }
});

test("stories260K: a request whose rows fail the forward pass fails alone; the requests batched with it go on untouched", { skip }, async () => {
  const options = { temperature: 0, maxTokens: 30, ignoreEos: true };
  const [solo] = await soloResults(sharedFile(MODEL)!, [{ prompt: "Lily and Ben", options }], { backend: "wasm" });
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 512 });
  try {
    // a fault injected into the real pass: any batch holding token 499 throws
    const lm = model.languageModel;
    const passBatch = lm.passBatch.bind(lm);
    lm.passBatch = (seqs) => {
      if (seqs.some((s) => s.tokens.includes(499))) throw new Error("injected fault in the pass");
      return passBatch(seqs);
    };
    const good = model.generate("Lily and Ben", options);
    const bad = model.generate([1, 300, 499, 301], options);
    await assert.rejects(bad, /injected fault in the pass/);
    const g = await good;
    assert.deepEqual(g.completionTokens, solo!.completionTokens);
    assert.equal(model.engine.stats.kv!.blocksInUse, 0);
  } finally {
    model.dispose();
  }
});

test("stories260K: a request whose strategy fails (its draft model disposed mid-way) fails alone; the requests of its steps go on untouched", { skip }, async () => {
  const options = { temperature: 0, maxTokens: 120, ignoreEos: true };
  const [solo] = await soloResults(sharedFile(MODEL)!, [{ prompt: "Lily and Ben", options }], { backend: "wasm" });
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 512 });
  const draft = await loadModel(sharedFile(MODEL)!, { contextSize: 512, quantize: "q4_0" });
  try {
    let disposedAt = 0;
    // the draft model goes away while both requests decode, step by step together
    const good = consume(model, "Lily and Ben", options, (count) => {
      if (count === 10) {
        disposedAt = count;
        draft.dispose();
      }
    });
    const speculative = model.generate("Once upon a time", { ...options, draftModel: draft, draftTokens: 4 });
    await assert.rejects(speculative, /dispose/);
    assert.equal(disposedAt, 10);
    const g = await good;
    assert.equal(g.finishReason, "length");
    assert.deepEqual(g.completionTokens, solo!.completionTokens);
    assert.equal(model.engine.stats.kv!.blocksInUse, 0);
  } finally {
    model.dispose();
    draft.dispose();
  }
});

test("stories260K: loading warms the kernels up on a cache of its own; the engine starts untouched and generates as with warmup: false", { skip }, async () => {
  const { prompt, completionTokens } = golden()[0]!;
  const options = { temperature: 0, maxTokens: completionTokens.length, ignoreEos: true };
  for (const warmup of [true, false]) {
    const model = await loadModel(sharedFile(MODEL)!, { contextSize: 256, warmup });
    try {
      assert.equal(model.engine.stats.steps, 0, `warmup ${warmup}: no engine step before the first request`);
      assert.equal(model.engine.stats.kv, undefined, `warmup ${warmup}: the engine's KV pool is not allocated by the warm-up`);
      const r = await model.generate(prompt, options);
      assert.deepEqual(r.completionTokens, completionTokens, `warmup ${warmup}`);
      assert.equal(r.timings.cachedPromptTokens, 0, `warmup ${warmup}: nothing of the warm-up is in the prefix cache`);
    } finally {
      model.dispose();
    }
  }
});

test("text held back as a possible stop string's start is released when generation ends on an end-of-generation token or a complete grammar", { skip }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 512, threads: 1 });
  try {
    const prompt = "Once upon a time";
    const free = await model.generate(prompt, { temperature: 0, maxTokens: 30 });
    // an end-of-generation token of our choosing: the first token, past the sixth, not seen before it
    const ids = free.completionTokens;
    const k = ids.findIndex((id, i) => i > 5 && ids.indexOf(id) === i);
    const ended = await model.generate(prompt, { temperature: 0, maxTokens: 30, stopTokens: [ids[k]!] });
    assert.equal(ended.finishReason, "stop");
    assert.ok(ended.completion.length > 3 && free.completion.startsWith(ended.completion), ended.completion);
    // a stop string that starts with the completion's last characters and never completes
    for (const n of [1, 2]) {
      const r = await model.generate(prompt, { temperature: 0, maxTokens: 30, stopTokens: [ids[k]!], stop: [`${ended.completion.slice(-3)}ZZZ`], n });
      for (const c of r.choices ?? [r]) assert.equal(c.completion, ended.completion, `n=${n}`);
    }
    // a grammar's output ends with what could start a stop string: still all there
    const g = await model.generate(prompt, { temperature: 0, maxTokens: 30, grammar: 'root ::= "a" [a-z]{3,8} " b"', stop: [" bZZ"] });
    assert.match(g.completion, /^a[a-z]{3,8} b$/);
  } finally {
    model.dispose();
  }
});

test("stories260K: a prompt ending inside a UTF-8 character: its U+FFFD is the prompt's, never the completion's text nor a stop string's match", { skip }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 256 });
  try {
    const tk = model.tokenizer;
    const full = tk.encode("Once upon a time 中", { addSpecialTokens: true });
    // 中 is three byte tokens (<0xE4><0xB8><0xAD>): the prompt keeps the first
    const prompt = full.slice(0, -2);
    assert.deepEqual(full.slice(-3).map((id) => tk.decode([id])), ["\uFFFD", "\uFFFD", "\uFFFD"]);
    // the judge: the text the completion's bytes add to the prompt's, both decoded by Node's TextDecoder (U+FFFD for an unfinished sequence)
    const bytes = (ids: readonly number[]) => Buffer.concat(ids.map((id) => tk.tokenBytes(id)));
    const added = (ids: readonly number[]) => {
      const before = new TextDecoder().decode(bytes(prompt)), after = new TextDecoder().decode(bytes([...prompt, ...ids]));
      return after.startsWith(before) ? after.slice(before.length) : undefined;
    };
    // no token: no text, and a stop string of U+FFFD does not match the prompt's
    const none = await model.generate(prompt, { maxTokens: 0, stop: ["\uFFFD"] });
    assert.deepEqual([none.completion, none.finishReason], ["", "length"]);
    // tokens that do not finish the character: their own text only
    const some = await model.generate(prompt, { temperature: 0, maxTokens: 3, ignoreEos: true, stop: ["\uFFFD"] });
    assert.equal(some.completionTokens.length, 3, `stopped on the prompt's U+FFFD: ${JSON.stringify(some)}`);
    assert.equal(some.completion, added(some.completionTokens));
    assert.equal(some.finishReason, "length");
    // aborted before its first token (the fuzzer's case: it then ended "stop" on the prompt's U+FFFD)
    const controller = new AbortController();
    controller.abort();
    const aborted = await model.generate(prompt, { maxTokens: 5, stop: ["\uFFFD"], signal: controller.signal });
    assert.deepEqual([aborted.completion, aborted.finishReason], ["", "abort"]);
    // and the tokens that finish it stream the character
    const d = tk.createStreamDecoder({ skipSpecialTokens: true, context: prompt });
    assert.equal(d.push(full.at(-2)!) + d.push(full.at(-1)!) + d.flush(), "中");
  } finally {
    model.dispose();
  }
});

test("stories260K: Engine.submit refuses logprobs with beam search or speculative decoding at once, naming the option (a speculative one failed at its first token)", { skip }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 64, warmup: false });
  try {
    const engine = model.engine;
    const base = { promptTokens: model.tokenizer.encode("Once upon a time"), sampling: { temperature: 0, seed: 0 }, maxTokens: 4, stop: [], stopTokens: [], ignoreEos: true, topLogprobs: 1 };
    for (const decoding of [{ kind: "beam", numBeams: 2 }, { kind: "speculative", promptLookup: 2 }] as const) {
      assert.throws(() => engine.submit({ ...base, decoding }), (e: Error & { option?: string }) => {
        assert.equal(e.name, "RequestError");
        assert.equal(e.option, "logprobs");
        assert.match(e.message, /logprobs are not available with beam search or speculative decoding/);
        return true;
      }, decoding.kind);
    }
    assert.equal(engine.stats.waiting + engine.stats.running, 0, "nothing queued");
    // sampling keeps them
    const o = await engine.submit({ ...base, decoding: { kind: "sample", n: 2 } }).outcome;
    assert.equal(o.choices[1]!.logprobs!.length, 4);
  } finally {
    model.dispose();
  }
});
