import assert from "node:assert/strict";
import { test } from "node:test";
import { KVBlockPool, KVCache } from "../src/cache/index.js";
import { Engine } from "../src/engine/index.js";
import { EngineRequest, type RequestParams } from "../src/engine/request.js";
import type { RunningSequence } from "../src/engine/running-sequence.js";
import { Scheduler } from "../src/engine/scheduler.js";
import type { Strategy } from "../src/engine/strategy.js";
import { loadModel, type GenerateOptions, type GenerationResult, type GenerationStep, type Model } from "../src/index.js";
import { Rng } from "../src/testing/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";
import { soloResults } from "./helpers/solo.js";

const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL);
const PROMPTS = ["The little dog ran to the park and saw a big", "Once upon a time, there was a", "Lily and Ben went to the", "One day, a girl named Sue", "Tom had a big red ball", "The sun was hot and"];

/** a model whose KV pool holds `blocks` blocks of 16 positions */
async function smallPool(blocks: number, admission: "reserve" | "preempt", contextSize = 512, maxBatchTokens = 128): Promise<Model> {
  const probe = await loadModel(sharedFile(MODEL)!, { contextSize, warmup: false });
  const perToken = probe.engine.bytesPerToken;
  probe.dispose();
  // a step's budget (by default) takes 6 short prompts at once
  return loadModel(sharedFile(MODEL)!, { contextSize, kvCacheBytes: blocks * 16 * perToken, admission, maxBatchTokens });
}

/** streams the request to its end, keeping every step as the reader saw it */
async function streamed(model: Model, prompt: string, options: GenerateOptions, onToken?: (count: number) => void): Promise<{ steps: GenerationStep[]; result: GenerationResult }> {
  const steps: GenerationStep[] = [];
  const it = model.stream(prompt, options);
  for (;;) {
    const r = await it.next();
    if (r.done) return { steps, result: r.value };
    steps.push(r.value);
    if (r.value.token !== undefined) onToken?.(steps.filter((s) => s.token !== undefined).length);
  }
}

test("engine admission: a bad admission option is refused naming it", { skip }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 64, warmup: false });
  try {
    assert.throws(() => new Engine(model.engine.model, model.tokenizer, { contextSize: 64, admission: "lazy" as never }), /admission must be "reserve" or "preempt", got "lazy"/);
  } finally {
    model.dispose();
  }
});

test("stories260K: with a pool of 2 contexts, 6 requests whose maxTokens is the whole context all run at once under admission preempt (2 at a time under reserve), each with its solo tokens", { skip }, async () => {
  // replies end at their first "." (1 to 11 tokens), which the engine cannot foresee: it sees maxTokens 256
  const options: GenerateOptions = { temperature: 0, maxTokens: 256, stop: ["."] };
  const jobs = PROMPTS.map((prompt) => ({ prompt, options }));
  const alone = await soloResults(sharedFile(MODEL)!, jobs);
  for (const admission of ["reserve", "preempt"] as const) {
    const model = await smallPool(2 * 256 / 16, admission, 256);
    try {
      const got = await Promise.all(jobs.map((j) => streamed(model, j.prompt, j.options)));
      got.forEach((g, i) => {
        assert.deepEqual(g.result.completionTokens, alone[i]!.completionTokens, `${admission}: request ${i}`);
        assert.equal(g.result.finishReason, "stop");
      });
      // (the most sequences one step computed together)
      const together = model.engine.stats.peakStepSequences;
      if (admission === "reserve") assert.equal(together, 2, "each request reserves a whole context: two fit");
      else assert.equal(together, 6, "every request runs at once");
      assert.equal(model.engine.stats.kv!.blocksInUse, 0);
    } finally {
      model.dispose();
    }
  }
});

test("stories260K: a request preempted mid-decode streams on without a gap or a duplicate; greedy tokens are its solo tokens, seeded sampling keeps its stream; finish, logprobs, counts right", { skip }, async () => {
  // 10 blocks of 16 positions; each request grows to 5 (12 prompt + 60 new): three cannot all hold
  // theirs, and the first preempted is the newest, the seeded sampled one
  const jobs: { prompt: string; options: GenerateOptions }[] = [
    { prompt: PROMPTS[0]!, options: { temperature: 0, maxTokens: 60, ignoreEos: true, logprobs: 2 } },
    { prompt: PROMPTS[2]!, options: { temperature: 0, maxTokens: 60, ignoreEos: true, logprobs: 2 } },
    { prompt: PROMPTS[1]!, options: { temperature: 0.9, topK: 20, seed: 4321, maxTokens: 60, ignoreEos: true, logprobs: 2 } },
  ];
  const alone = await soloResults(sharedFile(MODEL)!, jobs);
  const model = await smallPool(10, "preempt");
  try {
    const got = await Promise.all(jobs.map((j) => streamed(model, j.prompt, j.options)));
    assert.ok(model.engine.stats.preemptions > 0, "the pool forced a preemption");
    got.forEach(({ steps, result }, i) => {
      const tokens = steps.flatMap((s) => (s.token === undefined ? [] : [s.token]));
      // the stream is the reply, once: no token repeated after the recompute, none missing
      assert.deepEqual(tokens, result.completionTokens, `request ${i}: streamed tokens`);
      assert.equal(steps.map((s) => s.text).join(""), result.completion, `request ${i}: streamed text`);
      assert.deepEqual(result.completionTokens, alone[i]!.completionTokens, `request ${i}: tokens`);
      assert.equal(result.finishReason, "length");
      assert.equal(result.completionTokens.length, 60);
      assert.equal(result.logprobs!.length, 60);
      // rows recomputed by a prefill differ in the last bits from rows decoded one at a time (docs/engine.md)
      result.logprobs!.forEach((lp, t) => {
        assert.equal(lp.token, alone[i]!.logprobs![t]!.token);
        assert.ok(Math.abs(lp.logprob - alone[i]!.logprobs![t]!.logprob) < 1e-3, `request ${i} token ${t}: logprob ${lp.logprob} vs ${alone[i]!.logprobs![t]!.logprob}`);
      });
    });
    const kv = model.engine.stats.kv!;
    assert.ok(kv.peakBlocksInUse <= 10, `peak ${kv.peakBlocksInUse} blocks`);
    assert.equal(kv.blocksInUse, 0);
    assert.equal(kv.grows, 0, "the pool is never resized");
  } finally {
    model.dispose();
  }
});

test("stories260K: a request aborted while preempted ends at once with what it streamed (a prefix of its solo tokens); the others go on", { skip }, async () => {
  const options: GenerateOptions = { temperature: 0, maxTokens: 60, ignoreEos: true };
  const jobs = PROMPTS.slice(0, 3).map((prompt) => ({ prompt, options }));
  const alone = await soloResults(sharedFile(MODEL)!, jobs);
  const model = await smallPool(10, "preempt");
  try {
    const aborter = new AbortController();
    let abortedWaiting = -1;
    const runs = jobs.map((j, i) => streamed(model, j.prompt, { ...j.options, ...(i === 2 ? { signal: aborter.signal } : {}) }, () => {
      // the newest request is the one preempted: abort it while it waits to be recomputed
      const s = model.engine.stats;
      if (i === 0 && abortedWaiting < 0 && s.preemptions > 0 && s.waiting === 1) {
        abortedWaiting = s.waiting;
        aborter.abort();
      }
    }));
    const got = await Promise.all(runs);
    assert.equal(abortedWaiting, 1, "aborted while preempted");
    const cut = got[2]!.result;
    assert.equal(cut.finishReason, "abort");
    assert.ok(cut.completionTokens.length < 60);
    assert.deepEqual(cut.completionTokens, alone[2]!.completionTokens.slice(0, cut.completionTokens.length));
    assert.deepEqual(got[2]!.steps.flatMap((s) => (s.token === undefined ? [] : [s.token])), cut.completionTokens);
    for (const i of [0, 1]) assert.deepEqual(got[i]!.result.completionTokens, alone[i]!.completionTokens);
    assert.equal(model.engine.stats.kv!.blocksInUse, 0);
    assert.equal(model.engine.stats.waiting + model.engine.stats.running, 0);
  } finally {
    model.dispose();
  }
});

/** a request's events as it emitted them: each choice's tokens and its end events, in order */
async function events(model: Model, prompt: string, options: GenerateOptions, onEvent?: () => void): Promise<{ tokens: number[][]; texts: string[]; ends: string[][]; result: GenerationResult }> {
  const run = model.submit(prompt, options);
  const n = options.n ?? 1;
  const tokens: number[][] = Array.from({ length: n }, () => []), texts = Array.from({ length: n }, () => ""), ends: string[][] = Array.from({ length: n }, () => []);
  for await (const e of run.events()) {
    if (e.finishReason !== undefined) ends[e.choice]!.push(e.finishReason);
    else {
      if (e.step.token !== undefined) tokens[e.choice]!.push(e.step.token);
      texts[e.choice] += e.step.text;
    }
    onEvent?.();
  }
  return { tokens, texts, ends, result: await run.result() };
}

/** the result's choices (one: the result itself) */
const choicesOf = (r: GenerationResult) => r.choices ?? [r];

test("stories260K: under admission preempt, n choices are admitted on their prompt and preempted and recomputed together: every choice streams on without a gap or a duplicate, greedy choices give their solo tokens, seeded ones keep their streams; finish, logprobs, usage right", { skip }, async () => {
  // 14 blocks of 16 positions. Reserved, the n = 3 request (4 + 1 + 2 x 4 blocks) could not start
  // beside the others (5 and 3 + 1 + 4); admitted on their prompts, all six sequences start at
  // once, and the choices' 40 tokens each outgrow the pool
  const jobs: { prompt: string; options: GenerateOptions }[] = [
    { prompt: PROMPTS[0]!, options: { temperature: 0, maxTokens: 60, ignoreEos: true } },
    { prompt: PROMPTS[2]!, options: { temperature: 0, n: 2, maxTokens: 40, ignoreEos: true, logprobs: 2 } },
    { prompt: PROMPTS[1]!, options: { temperature: 0.9, topK: 20, seed: 4321, n: 3, maxTokens: 40, ignoreEos: true, logprobs: 2 } },
  ];
  const alone = await soloResults(sharedFile(MODEL)!, jobs);
  const model = await smallPool(14, "preempt");
  try {
    const got = await Promise.all(jobs.map((j) => events(model, j.prompt, j.options)));
    assert.ok(model.engine.stats.preemptions > 0, "the pool forced a preemption (of the newest, an n-choice request)");
    assert.equal(model.engine.stats.peakStepSequences, 6, "every choice of every request ran in one step");
    got.forEach(({ tokens, texts, ends, result }, i) => {
      const mine = choicesOf(result), solo = choicesOf(alone[i]!);
      assert.equal(mine.length, solo.length);
      mine.forEach((c, k) => {
        const what = `request ${i} choice ${k}`;
        // the stream is the reply, once: no token repeated after a recompute, none missing
        assert.deepEqual(tokens[k], c.completionTokens, `${what}: streamed tokens`);
        assert.equal(texts[k], c.completion, `${what}: streamed text`);
        assert.deepEqual(ends[k], ["length"], `${what}: one end`);
        assert.deepEqual(c.completionTokens, solo[k]!.completionTokens, `${what}: tokens`);
        assert.equal(c.completion, solo[k]!.completion, `${what}: text`);
        assert.equal(c.finishReason, "length");
        assert.equal(c.completionTokens.length, jobs[i]!.options.maxTokens);
        if (jobs[i]!.options.logprobs === undefined) return;
        assert.equal(c.logprobs!.length, c.completionTokens.length);
        // rows recomputed by a prefill differ in the last bits from rows decoded one at a time (docs/engine.md)
        c.logprobs!.forEach((lp, t) => {
          assert.equal(lp.token, solo[k]!.logprobs![t]!.token);
          assert.ok(Math.abs(lp.logprob - solo[k]!.logprobs![t]!.logprob) < 1e-3, `${what} token ${t}: logprob ${lp.logprob} vs ${solo[k]!.logprobs![t]!.logprob}`);
        });
      });
      // usage counts every choice's tokens once
      assert.equal(result.timings.completionTokens, alone[i]!.timings.completionTokens, `request ${i}: completion tokens`);
      assert.equal(result.timings.promptTokens, alone[i]!.timings.promptTokens);
    });
    // the seeded choices are three different streams (seed, seed + 1, seed + 2), not one repeated
    assert.equal(new Set(choicesOf(got[2]!.result).map((c) => c.completion)).size, 3);
    const kv = model.engine.stats.kv!;
    assert.ok(kv.peakBlocksInUse <= 14, `peak ${kv.peakBlocksInUse} blocks`);
    assert.equal(kv.blocksInUse, 0);
  } finally {
    model.dispose();
  }
});

/**
 * beams as alone: the same hypotheses in the same order, each with its tokens, text and end; scores
 * within 1e-4 where the request was preempted (recomputed rows are prefill rows: docs/engine.md)
 */
function sameBeams(got: GenerationResult["beams"], solo: GenerationResult["beams"], what: string): void {
  assert.ok(got && solo, `${what}: beams`);
  assert.deepEqual(got.map((b) => b.tokens), solo.map((b) => b.tokens), `${what}: beams' tokens, in order`);
  got.forEach((b, k) => {
    assert.equal(b.text, solo[k]!.text, `${what} beam ${k}: text`);
    assert.equal(b.finished, solo[k]!.finished, `${what} beam ${k}: finished`);
    assert.ok(Math.abs(b.score - solo[k]!.score) < 1e-4, `${what} beam ${k}: score ${b.score} vs ${solo[k]!.score}`);
    assert.ok(Math.abs(b.sumLogprobs - solo[k]!.sumLogprobs) < 1e-3, `${what} beam ${k}: sumLogprobs ${b.sumLogprobs} vs ${solo[k]!.sumLogprobs}`);
  });
}

test("stories260K: under admission preempt, beam searches are admitted on their prompt and preempted and recomputed as a unit: best tokens and every beam in its solo order, scores as alone", { skip }, async () => {
  // 20 blocks of 16 positions. Reserved, each request (4 + 3 x 4, 4 + 2 x 4, 4 + 4 x 4 blocks)
  // would run alone; admitted on their prompts, all nine beams start at once, and the beams' 48
  // tokens each outgrow the pool: only beam searches run, so every preemption is of one
  const jobs: { prompt: string; options: GenerateOptions }[] = [
    { prompt: PROMPTS[1]!, options: { numBeams: 3, maxTokens: 48, ignoreEos: true, numReturnSequences: 3 } },
    { prompt: PROMPTS[0]!, options: { numBeams: 2, maxTokens: 48, ignoreEos: true, numReturnSequences: 2 } },
    { prompt: PROMPTS[4]!, options: { numBeams: 4, maxTokens: 48, ignoreEos: true, numReturnSequences: 4, noRepeatNgramSize: 3 } },
  ];
  const alone = await soloResults(sharedFile(MODEL)!, jobs);
  // a step of 8 tokens recomputes a preempted search's beams one after another: the first ones' logits wait for the last's
  for (const maxBatchTokens of [128, 8]) {
    const model = await smallPool(20, "preempt", 512, maxBatchTokens);
    try {
      const got = await Promise.all(jobs.map((j) => streamed(model, j.prompt, j.options)));
      assert.ok(model.engine.stats.preemptions > 0, "the pool forced a beam search's preemption");
      assert.equal(model.engine.stats.peakStepSequences, 9, "every beam of every request ran in one step");
      got.forEach(({ steps, result }, i) => {
        const what = `maxBatchTokens ${maxBatchTokens}, request ${i}`;
        assert.deepEqual(result.completionTokens, alone[i]!.completionTokens, `${what}: tokens`);
        assert.equal(result.completion, alone[i]!.completion, `${what}: text`);
        assert.equal(result.finishReason, alone[i]!.finishReason);
        // the best hypothesis streams once
        assert.deepEqual(steps.flatMap((s) => (s.token === undefined ? [] : [s.token])), result.completionTokens, `${what}: streamed`);
        sameBeams(result.beams, alone[i]!.beams, what);
        assert.equal(result.timings.completionTokens, alone[i]!.timings.completionTokens, `${what}: completion tokens`);
      });
      const kv = model.engine.stats.kv!;
      assert.ok(kv.peakBlocksInUse <= 20, `peak ${kv.peakBlocksInUse} blocks`);
      assert.equal(kv.blocksInUse, 0);
    } finally {
      model.dispose();
    }
  }
});

/** Runs the three speculative jobs at once on `model` and checks each against its solo run: the pool
 * forced a preemption, the three shared steps, and tokens, text, stream and speculative stats
 * (the same rounds, proposals and acceptances: each proposal verified once) are the solo ones. */
async function speculativeAsAlone(
  model: Model,
  jobs: { prompt: string; options: GenerateOptions }[],
  alone: Awaited<ReturnType<typeof soloResults>>,
  what: string,
): Promise<void> {
  const got = await Promise.all(jobs.map((j) => streamed(model, j.prompt, j.options)));
  assert.ok(model.engine.stats.preemptions > 0, `the pool forced ${what}'s preemption`);
  assert.equal(model.engine.stats.peakStepSequences, 3, "the three ran in one step");
  got.forEach(({ steps, result }, i) => {
    const request = `request ${i}`;
    assert.deepEqual(result.completionTokens, alone[i]!.completionTokens, `${request}: tokens`);
    assert.equal(result.completion, alone[i]!.completion, `${request}: text`);
    assert.equal(result.finishReason, "length");
    assert.deepEqual(steps.flatMap((s) => (s.token === undefined ? [] : [s.token])), result.completionTokens, `${request}: streamed once`);
    assert.deepEqual(result.speculative, alone[i]!.speculative, `${request}: speculative stats`);
  });
}

test("stories260K: under admission preempt, speculative requests (prompt lookup) are admitted on their prompt and preempted and recomputed, their proposals verified as alone: tokens, stream, acceptance as alone", { skip }, async () => {
  // 24 blocks: each request's worst case (14 + 2 blocks) leaves no room for a second one reserved;
  // admitted on their prompts, all three start at once and their 200 tokens outgrow the pool
  const jobs: { prompt: string; options: GenerateOptions }[] = [
    { prompt: PROMPTS[0]!, options: { temperature: 0, maxTokens: 200, ignoreEos: true, promptLookup: 2 } },
    { prompt: PROMPTS[1]!, options: { temperature: 0.8, topK: 20, seed: 11, maxTokens: 200, ignoreEos: true, promptLookup: true } },
    { prompt: PROMPTS[2]!, options: { temperature: 0, maxTokens: 200, ignoreEos: true, promptLookup: true, draftTokens: 4 } },
  ];
  const alone = await soloResults(sharedFile(MODEL)!, jobs);
  const model = await smallPool(24, "preempt", 256);
  try {
    await speculativeAsAlone(model, jobs, alone, "a speculative request");
    assert.ok(alone.some((r) => r.speculative!.accepted > 0), "some proposals were accepted");
    assert.equal(model.engine.stats.kv!.blocksInUse, 0);
  } finally {
    model.dispose();
  }
});

test("stories260K: under admission preempt, speculative requests drafting with a draft model are admitted on their prompt and preempted with their draft caches and recomputed: tokens, stream, acceptance as alone", { skip }, async () => {
  const draft = await loadModel(sharedFile(MODEL)!, { contextSize: 256, quantize: "q4_0", warmup: false });
  // a draft of the target's shape: each of its blocks takes one of the pool's. 36 blocks: each
  // request's worst case (14 + 2 blocks of its own, 14 of draft cache) leaves no room for a second
  // one reserved; admitted on their prompts, all three start at once, their 200 tokens (and their
  // drafts' rows) outgrow the pool
  const jobs: { prompt: string; options: GenerateOptions }[] = [
    { prompt: PROMPTS[0]!, options: { temperature: 0, maxTokens: 200, ignoreEos: true, draftModel: draft, draftTokens: 4 } },
    { prompt: PROMPTS[1]!, options: { temperature: 0.8, topK: 20, seed: 11, maxTokens: 200, ignoreEos: true, draftModel: draft, draftTokens: 3 } },
    { prompt: PROMPTS[2]!, options: { temperature: 0, maxTokens: 200, ignoreEos: true, draftModel: draft } },
  ];
  const alone = await soloResults(sharedFile(MODEL)!, jobs);
  const model = await smallPool(36, "preempt", 256);
  try {
    // the draft caught up from the accepted tokens and proposed as alone
    await speculativeAsAlone(model, jobs, alone, "a draft-model speculative request");
    assert.ok(alone.every((r) => r.speculative!.accepted > 0), "the draft's proposals were accepted");
    const kv = model.engine.stats.kv!;
    assert.equal(kv.blocksInUse, 0);
    // the target's rows stayed within the pool
    assert.ok(kv.peakBlocksInUse <= 36, `peak ${kv.peakBlocksInUse} blocks`);
  } finally {
    model.dispose();
    draft.dispose();
  }
});

test("stories260K: an n-choice request aborted while preempted ends at once, every choice with what it streamed (a prefix of its solo tokens) and one abort; the others go on", { skip }, async () => {
  const jobs: { prompt: string; options: GenerateOptions }[] = [
    { prompt: PROMPTS[0]!, options: { temperature: 0, maxTokens: 60, ignoreEos: true } },
    { prompt: PROMPTS[1]!, options: { temperature: 0, maxTokens: 60, ignoreEos: true } },
    { prompt: PROMPTS[2]!, options: { temperature: 0.7, seed: 77, n: 3, maxTokens: 60, ignoreEos: true } },
  ];
  const alone = await soloResults(sharedFile(MODEL)!, jobs);
  // 16 blocks: the n = 3 request's worst case (5 + 1 + 2 x 5) is the whole pool
  const model = await smallPool(16, "preempt");
  try {
    const aborter = new AbortController();
    let abortedWaiting = false;
    const runs = jobs.map((j, i) => events(model, j.prompt, { ...j.options, ...(i === 2 ? { signal: aborter.signal } : {}) }, () => {
      // the newest request is the one preempted: abort it while it waits to be recomputed
      const s = model.engine.stats;
      if (i === 0 && !abortedWaiting && s.preemptions > 0 && s.waiting === 1) {
        abortedWaiting = true;
        aborter.abort();
      }
    }));
    const got = await Promise.all(runs);
    assert.ok(abortedWaiting, "aborted while preempted");
    const cut = got[2]!;
    choicesOf(cut.result).forEach((c, k) => {
      assert.equal(c.finishReason, "abort", `choice ${k}`);
      assert.ok(c.completionTokens.length < 60);
      assert.deepEqual(c.completionTokens, choicesOf(alone[2]!)[k]!.completionTokens.slice(0, c.completionTokens.length), `choice ${k}: a prefix of its solo tokens`);
      assert.deepEqual(cut.tokens[k], c.completionTokens, `choice ${k}: streamed`);
      assert.deepEqual(cut.ends[k], ["abort"], `choice ${k}: one end`);
    });
    for (const i of [0, 1]) assert.deepEqual(got[i]!.result.completionTokens, alone[i]!.completionTokens);
    assert.equal(model.engine.stats.kv!.blocksInUse, 0);
    assert.equal(model.engine.stats.waiting + model.engine.stats.running, 0);
  } finally {
    model.dispose();
  }
});

test("stories260K: three n = 2 requests that each alone nearly fill the pool all finish with their solo choices (preempted as groups again and again, never a livelock)", { skip }, async () => {
  // 16 blocks: one request's worst case (7 + 1 + 8 blocks) is the whole pool; it holds 1 + 2 x 7
  const options: GenerateOptions = { temperature: 0.8, seed: 99, n: 2, maxTokens: 100, ignoreEos: true };
  const jobs = [PROMPTS[3]!, PROMPTS[4]!, PROMPTS[5]!].map((prompt) => ({ prompt, options }));
  const alone = await soloResults(sharedFile(MODEL)!, jobs);
  const model = await smallPool(16, "preempt", 256);
  try {
    const got = await Promise.all(jobs.map((j) => events(model, j.prompt, j.options)));
    got.forEach(({ tokens, result }, i) => {
      choicesOf(result).forEach((c, k) => {
        assert.deepEqual(c.completionTokens, choicesOf(alone[i]!)[k]!.completionTokens, `request ${i} choice ${k}`);
        assert.deepEqual(tokens[k], c.completionTokens, `request ${i} choice ${k}: streamed`);
      });
    });
    assert.ok(model.engine.stats.preemptions >= 2, `${model.engine.stats.preemptions} preemptions`);
    assert.equal(model.engine.stats.kv!.blocksInUse, 0);
  } finally {
    model.dispose();
  }
});

test("stories260K: four requests that each alone fill a one-context pool all finish with their solo tokens (preempted again and again, never a livelock)", { skip }, async () => {
  const options: GenerateOptions = { temperature: 0, maxTokens: 200, ignoreEos: true };
  const jobs = PROMPTS.slice(0, 4).map((prompt) => ({ prompt, options }));
  const alone = await soloResults(sharedFile(MODEL)!, jobs);
  // 16 blocks: one request's 212 positions take 14 of them
  const model = await smallPool(16, "preempt", 256);
  try {
    const got = await Promise.all(jobs.map((j) => streamed(model, j.prompt, j.options)));
    got.forEach(({ steps, result }, i) => {
      assert.deepEqual(result.completionTokens, alone[i]!.completionTokens, `request ${i}`);
      assert.deepEqual(steps.flatMap((s) => (s.token === undefined ? [] : [s.token])), result.completionTokens, `request ${i}: streamed`);
    });
    assert.ok(model.engine.stats.preemptions >= 3, `${model.engine.stats.preemptions} preemptions`);
    assert.equal(model.engine.stats.kv!.blocksInUse, 0);
  } finally {
    model.dispose();
  }
});

test("stories260K: a request preempted while its prompt is being scored scores it once: prompt logprobs and tokens as alone", { skip }, async () => {
  const long = [1, ...Array.from({ length: 70 }, (_, i) => 10 + ((i * 37) % 400))];
  const first: GenerateOptions = { temperature: 0, maxTokens: 100, ignoreEos: true };
  const scored: GenerateOptions = { temperature: 0, maxTokens: 20, ignoreEos: true, promptLogprobs: 2, logprobs: 1 };
  const model0 = await loadModel(sharedFile(MODEL)!, { contextSize: 512 });
  const aloneFirst = await model0.generate(PROMPTS[0]!, first);
  const aloneScored = await model0.generate(long, scored);
  const perToken = model0.engine.bytesPerToken;
  model0.dispose();
  // 10 blocks: the first request holds 4 when the 71-token prompt (5 blocks) is admitted, scored 2
  // tokens a step beside the first's decodes; the first takes its 5th and 6th blocks meanwhile, so
  // the prompt's last block finds none and the scored request (the newest) is preempted mid-prefill
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 512, kvCacheBytes: 10 * 16 * perToken, admission: "preempt", maxBatchTokens: 2 });
  try {
    let second: Promise<GenerationResult> | undefined;
    const a = streamed(model, PROMPTS[0]!, first, (n) => {
      if (n === 40) second = model.generate(long, scored);
    });
    const got = await a;
    const b = await second!;
    assert.ok(model.engine.stats.preemptions >= 1, "the scored request was preempted");
    assert.deepEqual(got.result.completionTokens, aloneFirst.completionTokens);
    assert.deepEqual(b.completionTokens, aloneScored.completionTokens);
    assert.equal(b.promptLogprobs!.length, long.length);
    assert.deepEqual(b.promptLogprobs, aloneScored.promptLogprobs);
  } finally {
    model.dispose();
  }
});

/**
 * The engine's Scheduler, pool (blocks of 16 positions) and caches, running a 3-beam search over a
 * 20-token prompt whose tokens the test chooses (it plays the search: the scheduler calls nothing of
 * the strategy but its sizes before the logits); the passes only reserve and count rows (what a
 * row holds is the model's business: the stories260K beam case above checks that).
 */
function beamScheduler(cacheReplies: boolean, promptLength = 20, blocks = 64) {
  const pool = new KVBlockPool(1, 1, 4, blocks, undefined, 16);
  const scheduler = new Scheduler(pool, { maxBatchTokens: 512, maxSequences: 8, contextSize: 256, cacheReplies, admission: "preempt" }, () => new KVCache(1, 1, 4, 256, pool));
  const strategy = { width: 3, recomputable: true, extraBlocks: () => 3 * 3, stepBlocks: () => 2 } as unknown as Strategy;
  const prompt = Array.from({ length: promptLength }, (_, i) => i + 1);
  const params = { promptTokens: prompt, decoding: { kind: "beam", numBeams: 3 }, sampling: { seed: 0 }, maxTokens: 40, stop: [], stopTokens: [], ignoreEos: true, topLogprobs: undefined } as RequestParams;
  const request = new EngineRequest(1, params, strategy);
  const counted = { rows: 0 };
  /** one step: what the scheduler plans is computed (rows reserved and counted), as the runner does */
  const step = (): void => {
    for (const chunk of scheduler.schedule().chunks) {
      chunk.sequence.cache.ensureRoom(chunk.tokens.length);
      chunk.sequence.cache.length += chunk.tokens.length;
      counted.rows += chunk.tokens.length;
      scheduler.computed(chunk);
      scheduler.cacheFullBlocks(chunk.sequence);
    }
  };
  /** the prompt computed: the search's first beam */
  const start = () => {
    scheduler.waiting.push(request);
    step();
    request.markPrefilled();
    return request.sequences[0]!;
  };
  /** preempted (every block back, registered ones cached) */
  const preempt = (): void => {
    (scheduler as unknown as { preempt(r: EngineRequest): void }).preempt(request);
    assert.equal(pool.stats.blocksInUse, 0);
  };
  /** recomputed to the end: the rows that took, and the steps */
  const recompute = (): { rows: number; steps: number } => {
    counted.rows = 0;
    let steps = 0;
    for (; steps < 10 && (steps === 0 || request.recomputing); steps++) step();
    assert.equal(request.recomputing, false, "recomputed");
    return { rows: counted.rows, steps };
  };
  /** preempted and recomputed to the end: the rows that took */
  const preemptAndRecompute = (): number => {
    preempt();
    return recompute().rows;
  };
  /** every beam retired: no block left in use */
  const end = (): void => {
    for (const b of [...request.sequences]) scheduler.retire(request, b);
    assert.equal(pool.stats.blocksInUse, 0);
  };
  return { pool, scheduler, request, step, start, preempt, recompute, preemptAndRecompute, end };
}

/**
 * The search both tests below preempt: one beam chooses 30 tokens; then it forks beam 1 (at 50
 * tokens), which forks beam 2 (at 52); each new beam copies its parent's partial block (forkCopy),
 * as BeamStrategy's forks do. Left after the search's step: each beam's last token chosen, not computed yet.
 */
function forkedSearch({ scheduler: s, request, step, start }: ReturnType<typeof beamScheduler>) {
  const root = start();
  for (let t = 0; t < 30; t++) {
    root.tokens.push(100 + t);
    step();
  }
  const common = root.tokens.slice();
  root.tokens.push(200);
  const beam1 = s.fork(request, root, [...common, 201], "copy");
  step();
  root.tokens.push(210);
  beam1.tokens.push(211);
  step();
  const before1 = beam1.tokens.slice();
  root.tokens.push(220);
  beam1.tokens.push(221);
  const beam2 = s.fork(request, beam1, [...before1, 222], "copy");
  return { root, beam1, beam2 };
}

/**
 * The judge of a recompute's least work: each row of the beams' prefix tree (a distinct prefix of
 * their tokens) past the first `cached` positions (found in the prefix cache), once.
 */
function prefixTreeRows(beams: readonly RunningSequence[], cached: number): number {
  const rows = new Set<string>();
  for (const b of beams) for (let p = cached; p < b.tokens.length; p++) rows.add(b.tokens.slice(0, p + 1).join(","));
  return rows.size;
}

test("a preempted beam search's recompute shares the beams' common generated prefix again: each row of the beams' prefix tree computed once, all in one step (a beam forking off another's generated tokens, or differing from it only in its last token, included), no more blocks held than before the preemption", () => {
  const rig = beamScheduler(false);
  const { pool, preempt, recompute, end } = rig;
  const { root, beam1, beam2 } = forkedSearch(rig);
  // preempted after the search's step: each beam's last token chosen, not computed yet
  // prompt + common prefix: 3 full blocks shared by all, one partial block each
  assert.equal(pool.stats.blocksInUse, 6);
  const held = pool.stats.blocksInUse;
  preempt();
  const { rows, steps } = recompute();
  for (const b of [root, beam1, beam2]) assert.equal(b.cache.length, 53);
  // beam 1 shares root's rows of the prompt and the 30 common tokens; beam 2 those and beam 1's two own rows
  assert.deepEqual(beam1.cache.rows.subarray(0, 50), root.cache.rows.subarray(0, 50));
  assert.deepEqual(beam2.cache.rows.subarray(0, 52), beam1.cache.rows.subarray(0, 52));
  // the prefix tree's rows once, in one step: the prompt's 4 past its cached first block, the 30
  // common tokens, root's 3 own, beam 1's 3 own, beam 2's 1 own (its last token, computed alone as
  // the unpreempted search's next step computes it: a decode); beam 1 and beam 2 sharing rows their
  // parents compute in the same pass. (Before: beam 2 recomputed beam 1's row before its last too,
  // and beam 1 waited a step for root, beam 2 a step for beam 1: 42 rows in 3 steps; each beam
  // recomputing its own tokens past the prompt: 4 + 3 x 33 = 103)
  assert.equal(prefixTreeRows([root, beam1, beam2], 16), 4 + 30 + 3 + 3 + 1);
  assert.deepEqual({ rows, steps }, { rows: prefixTreeRows([root, beam1, beam2], 16), steps: 1 });
  // prompt + common prefix: 4 blocks shared, one of each forked beam's own (each beam recomputing
  // past the prompt on its own: 10)
  assert.ok(pool.stats.blocksInUse <= held, `${pool.stats.blocksInUse} blocks held after the recompute, ${held} before the preemption`);

  // preempted again once each beam has chosen its next token: the first beam's rows that its
  // recompute computed in chunks are cached prefixes now, past the prompt (its blocks of positions
  // 16-31 and 32-47), and its lookup finds them as a lone sequence's would
  const cached = root.cache.blockIds.slice(0, 3);
  for (const [b, t] of [[root, 230], [beam1, 231], [beam2, 232]] as const) b.tokens.push(t);
  preempt();
  const again = recompute();
  for (const b of [root, beam1, beam2]) assert.equal(b.cache.length, 54);
  assert.deepEqual(root.cache.blockIds.slice(0, 3), cached, "the first beam starts on its cached blocks");
  // root's 6 past its 3 cached blocks, beam 1's 4 past the 50 it shares, beam 2's 2 past the 52 it
  // shares with beam 1, in one step (the prompt's blocks only: 4 + 34 + 4 + 2 = 44)
  assert.equal(prefixTreeRows([root, beam1, beam2], 48), 6 + 4 + 2);
  assert.deepEqual(again, { rows: prefixTreeRows([root, beam1, beam2], 48), steps: 1 });
  end();
});

test("in the step a preempted beam search's beams share rows their parents' chunks compute, the room it promises is what its recompute takes: a request that fits beside it is admitted in that step", () => {
  // a 12-block pool (watermark 1 block); the search of the test above, preempted after beam 2's fork
  const rig = beamScheduler(false, 20, 12);
  const { pool, scheduler: s, request, preempt } = rig;
  forkedSearch(rig);
  preempt();
  // a sampled request whose 40-token prompt takes 3 blocks waits behind it
  const sample = { width: 1, recomputable: true, extraBlocks: () => 0 } as unknown as Strategy;
  const params = { ...request.params, promptTokens: Array.from({ length: 40 }, (_, i) => 500 + i), decoding: { kind: "sample", n: 1 } } as RequestParams;
  const other = new EngineRequest(2, params, sample);
  s.waiting.push(other);
  const plan = s.schedule();
  // the search's recompute in this step: the first beam's 37 rows past its cached block (3 blocks;
  // its rows reserved for beam 1, which shares them), beam 1's 3 (a block, reserved for beam 2),
  // beam 2's 1 (a block), and 2 blocks its beams may fork into after the pass: 1 + 3 + 1 + 1 + 2 =
  // 8 of 12, and nothing more to come. The other request's 3 blocks and the watermark's 1 fit in
  // the 4 left (before: the first beam's block at the prompt's end counted again as promised, 3 left)
  assert.deepEqual(plan.chunks.map((c) => [c.request.id, c.start, c.tokens.length]), [[1, 16, 37], [1, 50, 3], [1, 52, 1], [2, 0, 40]]);
  assert.deepEqual(plan.admitted.map((r) => r.id), [1, 2]);
  for (const chunk of plan.chunks) {
    chunk.sequence.cache.ensureRoom(chunk.tokens.length);
    chunk.sequence.cache.length += chunk.tokens.length;
    s.computed(chunk);
  }
  // the pass took what was planned: the 2 blocks for the search's forks and the watermark's are left
  assert.equal(pool.availableBlocks, 3);
  assert.equal(s.preemptions, 1);
});

test("the room a recomputing beam search or n choices promises is never less than its recompute takes in later steps: random forks, budgets and evictions", () => {
  // the judge: the blocks the passes take after each step, counted on the pool; the promise is
  // what admission leaves to the others (Scheduler.promised), so it must never fall short
  let steps = 0;
  for (let seed = 0; seed < 300; seed++) {
    const rng = new Rng(seed);
    const int = (lo: number, hi: number) => lo + Math.floor(rng.uniform() * (hi - lo + 1));
    const pool = new KVBlockPool(1, 1, 4, 400, undefined, 16);
    let maxBatchTokens = 512;
    const limits = { get maxBatchTokens() { return maxBatchTokens; }, maxSequences: 8, contextSize: 512, cacheReplies: rng.uniform() < 0.5, admission: "preempt" as const };
    const s = new Scheduler(pool, limits, () => new KVCache(1, 1, 4, 512, pool));
    const width = int(1, 4);
    const strategy = { width, recomputable: true, extraBlocks: () => 0 } as unknown as Strategy;
    const prompt = Array.from({ length: int(2, 60) }, () => int(1, 5));
    const params = { promptTokens: prompt, decoding: { kind: "beam", numBeams: width }, sampling: { seed: 0 }, maxTokens: 100, stop: [], stopTokens: [], ignoreEos: true, topLogprobs: undefined } as RequestParams;
    const request = new EngineRequest(1, params, strategy);
    const promised = () => (s as unknown as { promised(): number }).promised();
    /** one step: the plan computed, as the runner does; what was promised after planning */
    const step = (): number => {
      const chunks = s.schedule().chunks;
      const left = promised();
      for (const chunk of chunks) {
        chunk.sequence.cache.ensureRoom(chunk.tokens.length);
        chunk.sequence.cache.length += chunk.tokens.length;
        s.computed(chunk);
        s.cacheFullBlocks(chunk.sequence);
      }
      return left;
    };
    s.waiting.push(request);
    step();
    request.markPrefilled();
    // the search: tokens from a small alphabet (beams and choices alike in places), forks by copy (beams) or share (choices)
    for (let t = int(1, 50); t > 0; t--) {
      for (const seq of request.sequences) seq.tokens.push(int(1, 3));
      if (request.sequences.length < width && rng.uniform() < 0.2) {
        const parent = request.sequences[int(0, request.sequences.length - 1)]!;
        s.fork(request, parent, [...parent.tokens.slice(0, -1), int(1, 3)], rng.uniform() < 0.5 ? "copy" : "share");
      }
      step();
    }
    for (let round = 0; round < 2; round++) {
      for (const seq of request.sequences) seq.tokens.push(int(1, 3));
      (s as unknown as { preempt(r: EngineRequest): void }).preempt(request);
      // other requests evicted some of its cached blocks meanwhile
      const taken: number[] = [];
      for (let n = int(0, 10); pool.stats.evictions < n && pool.availableBlocks > 0;) taken.push(pool.take());
      for (const b of taken) pool.release(b);
      const after: { left: number; available: number }[] = [];
      for (let k = 0; k === 0 || request.recomputing; k++) {
        assert.ok(k < 200, `seed ${seed}: the recompute ends`);
        maxBatchTokens = [2, 5, 16, 33, 512][int(0, 4)]!;
        after.push({ left: step(), available: pool.availableBlocks });
      }
      for (const { left, available } of after) assert.ok(available - pool.availableBlocks <= left, `seed ${seed}: ${available - pool.availableBlocks} blocks taken after a step that promised ${left}`);
      steps += after.length;
    }
  }
  assert.ok(steps > 1000, `${steps} recompute steps`);
});

test("a preempted beam search's resumed beams each start on the cached blocks of their own tokens: with cacheReplies, a beam's replies past where it forks off the first are not computed again", () => {
  const { pool, scheduler: s, request, step, start, preemptAndRecompute, end } = beamScheduler(true);
  // the first beam chooses 10 tokens, then forks beam 1 (at 30 tokens: beam 1 copies the partial
  // block of positions 16-29, as BeamStrategy's forks do); each chooses 30 tokens of its own
  const root = start();
  for (let t = 0; t < 10; t++) {
    root.tokens.push(100 + t);
    step();
  }
  const common = root.tokens.slice();
  root.tokens.push(300);
  const beam1 = s.fork(request, root, [...common, 400], "copy");
  for (let t = 1; t < 30; t++) {
    step();
    root.tokens.push(300 + t);
    beam1.tokens.push(400 + t);
  }
  step();
  root.tokens.push(330);
  beam1.tokens.push(430);
  // with cacheReplies each beam's full blocks are cached prefixes: the prompt's block (shared), and
  // of positions 16-31 and 32-47 each beam's own (beam 1's tokens differ from position 30 on)
  const own = [root, beam1].map((b) => b.cache.blockIds.slice(0, 3));
  assert.equal(own[0]![0], own[1]![0]);
  assert.notEqual(own[0]![1], own[1]![1]);
  const held = pool.stats.blocksInUse;
  const rows = preemptAndRecompute();
  for (const b of [root, beam1]) assert.equal(b.cache.length, 61);
  // each beam starts on its own 3 cached blocks (the first block, the prompt's, shared) and computes
  // its 13 rows past them (looking up the prompt's blocks only, and beam 1 forking off the first
  // beam where their tokens part: 4 + 41 + 31 = 76)
  assert.deepEqual([root, beam1].map((b) => b.cache.blockIds.slice(0, 3)), own);
  assert.equal(rows, 13 + 13);
  assert.ok(pool.stats.blocksInUse <= held, `${pool.stats.blocksInUse} blocks held after the recompute, ${held} before the preemption`);
  end();
});

test("a preempted beam search whose first beam's own cached blocks were evicted recomputes every beam in the same step: a beam on its own cached blocks does not wait for the first beam's prompt, and the first computes prompt and tokens in one chunk", () => {
  const { pool, scheduler: s, request, step, start, preempt, recompute, end } = beamScheduler(true, 17);
  // the search forks beam 1 off the first at the prompt's end (copying the prompt's partial block,
  // as BeamStrategy's start does); each chooses 40 tokens of its own
  const root = start();
  root.tokens.push(300);
  const beam1 = s.fork(request, root, [...root.tokens.slice(0, 17), 400], "copy");
  for (let t = 1; t < 40; t++) {
    step();
    root.tokens.push(300 + t);
    beam1.tokens.push(400 + t);
  }
  // with cacheReplies each beam's blocks of positions 16-31 and 32-47 are its own cached prefixes, and
  // the prompt's first block is shared
  const own1 = beam1.cache.blockIds.slice(0, 3);
  const rootOwn = root.cache.blockIds.slice(1, 3);
  preempt();
  // other requests take every free block and two more: the least recently used cached prefixes
  // are evicted, the first beam's own (it freed its blocks first; the shared one went idle last)
  const taken: number[] = [];
  while (pool.stats.evictions < 2) taken.push(pool.take());
  assert.ok(rootOwn.every((b) => taken.includes(b)), "the first beam's own blocks were evicted");
  assert.ok(own1.every((b) => pool.isIdle(b)), "beam 1's are cached still");
  for (const b of taken) pool.release(b);
  const { rows, steps } = recompute();
  for (const b of [root, beam1]) assert.equal(b.cache.length, 57);
  assert.deepEqual(beam1.cache.blockIds.slice(0, 3), own1, "beam 1 starts on its own cached blocks");
  // the first beam computes positions 16-56 past the prompt's cached block, beam 1 its 9 past its
  // cached blocks, in one step (before: the first beam computed the prompt (all 17 rows: its block
  // ended one row short of the prompt's end) while beam 1 waited, then its tokens beside beam 1's:
  // 17 + 40 + 9 rows in 2 steps)
  assert.deepEqual({ rows, steps }, { rows: 41 + 9, steps: 1 });
  end();
});
