import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { lookupDraft, speculativeGreedy } from "../src/generation/speculative.js";
import { loadModel, type Model } from "../src/index.js";
import type { KVCache } from "../src/cache/index.js";
import { Engine } from "../src/engine/index.js";
import { createSampler } from "../src/sampling/index.js";
import { ensureRandomModel, tinyLlama } from "../src/testing/index.js";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

const MODEL = "models/stories260K.gguf";
const EXPECTED = "models/stories260K.expected.json";
const skip = skipWithoutShared(MODEL) || skipWithoutShared(EXPECTED);
interface GoldenCase { prompt: string; promptTokens: number[]; completionTokens: number[] }
const cases = (): GoldenCase[] => JSON.parse(readFileSync(sharedFile(EXPECTED)!, "utf8")).cases;

test("prompt lookup proposes what followed the latest earlier match of the longest tail n-gram", () => {
  assert.deepEqual(lookupDraft([1, 2, 3, 4, 5, 1, 2, 3], 3, 2), [4, 5]);
  assert.deepEqual(lookupDraft([7, 2, 3, 9, 2, 3, 8, 1, 2, 3], 2, 5), [8, 1, 2, 3]); // the latest "2 3" wins
  assert.deepEqual(lookupDraft([5, 6, 7, 6], 3, 4), [7, 6]); // falls back to a 1-gram
  assert.deepEqual(lookupDraft([1, 2, 3], 3, 4), []);
});

/** greedy speculative decoding with the target's own greedy sampler as the chooser */
function speculative(target: Model, prompt: number[], maxTokens: number, draft?: Model, draftTokens?: number) {
  const sampler = createSampler({ temperature: 0 });
  return speculativeGreedy(target.languageModel, prompt, {
    maxTokens, draft: draft?.languageModel, draftTokens,
    choose: (logits, history) => sampler.sample(logits, history),
    endIds: target.tokenizer.endOfGenerationIds,
  });
}

test("stories260K: greedy speculative (Q4_0 draft, prompt lookup) = llama.cpp's greedy tokens for every golden case", { skip }, async (t) => {
  const target = await loadModel(sharedFile(MODEL)!, { backend: "reference" });
  const draft = await loadModel(sharedFile(MODEL)!, { backend: "reference", quantize: "q4_0" });
  try {
    for (const c of cases()) {
      for (const [name, d, k] of [["q4_0 draft k=4", draft, 4], ["q4_0 draft k=8", draft, 8], ["prompt lookup", undefined, undefined]] as const) {
        const r = await speculative(target, c.promptTokens, c.completionTokens.length, d, k);
        assert.deepEqual(r.tokens, c.completionTokens, `${name}: ${c.prompt}`);
        t.diagnostic(`${name}: acceptance ${(100 * r.stats.acceptanceRate).toFixed(1)}%, ${r.stats.tokensPerTargetPass.toFixed(2)} tokens per target pass`);
      }
    }
  } finally {
    target.dispose();
    draft.dispose();
  }
});

test("random-weight model: greedy speculative = plain greedy generate", async () => {
  const path = await ensureRandomModel(tinyLlama);
  const target = await loadModel(path, { backend: "reference" });
  const draft = await loadModel(path, { backend: "reference", quantize: "q4_0" });
  try {
    for (const prompt of [[1, 5, 9], [1, 300, 301, 302, 300, 301]]) {
      const plain = await target.generate(prompt, { temperature: 0, maxTokens: 40, ignoreEos: false });
      const expected = plain.completionTokens;
      assert.deepEqual((await speculative(target, prompt, 40, draft, 5)).tokens, expected);
      assert.deepEqual((await speculative(target, prompt, 40)).tokens, expected);
    }
  } finally {
    target.dispose();
    draft.dispose();
  }
});

test("stories260K through generate(): draftModel / promptLookup give llama.cpp's greedy completion and report acceptance", { skip }, async () => {
  const target = await loadModel(sharedFile(MODEL)!, { backend: "reference" });
  const draft = await loadModel(sharedFile(MODEL)!, { backend: "reference", quantize: "q4_0" });
  try {
    const c = cases()[0]!;
    const n = c.completionTokens.length;
    const viaDraft = await target.generate(c.prompt, { temperature: 0, maxTokens: n, draftModel: draft, draftTokens: 4 });
    assert.deepEqual(viaDraft.completionTokens, c.completionTokens);
    assert.equal(viaDraft.finishReason, "length");
    assert.ok(viaDraft.speculative!.drafted > 0 && viaDraft.speculative!.accepted <= viaDraft.speculative!.drafted);
    const viaLookup = await target.generate(c.prompt, { temperature: 0, maxTokens: n, promptLookup: true });
    assert.deepEqual(viaLookup.completionTokens, c.completionTokens);
  } finally {
    target.dispose();
    draft.dispose();
  }
});

test("tsllm generate --draft-model --draft-quantize q4_0 / --prompt-lookup / --num-beams 1 --json equal llama.cpp's greedy tokens", { skip }, async () => {
  const c = cases()[0]!;
  const base = ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "generate", "--model", sharedFile(MODEL)!, "--prompt", c.prompt, "--max-tokens", "32", "--json"];
  for (const extra of [["--temperature", "0", "--draft-model", sharedFile(MODEL)!, "--draft-quantize", "q4_0", "--draft-tokens", "4"], ["--temperature", "0", "--prompt-lookup"], ["--num-beams", "1"]]) {
    const { stdout } = await promisify(execFile)(process.execPath, [...base, ...extra], { cwd: PROJECT_ROOT });
    const out = JSON.parse(stdout);
    assert.deepEqual(out.completionTokens, c.completionTokens.slice(0, 32), extra.join(" "));
    if (extra.includes("--num-beams")) assert.equal(out.beams.length, 1);
    else assert.ok(out.speculative.drafted >= out.speculative.accepted);
  }
});

test("stories260K: a draft model whose own engine is mid-pass is waited for, not failed; both sides give what they give alone", { skip }, async () => {
  const target = await loadModel(sharedFile(MODEL)!, { contextSize: 512 });
  const draft = await loadModel(sharedFile(MODEL)!, { contextSize: 512, quantize: "q4_0" });
  // a second engine on the draft's weights that gives the event loop a turn at every stage of its
  // passes (as a larger model's engine does every few ms): its passes are paused mid-way most of the time
  const busy = new Engine(draft.languageModel, draft.tokenizer, { contextSize: 512, sliceMs: 0 });
  try {
    const c = cases()[0]!;
    const n = c.completionTokens.length;
    const params = { decoding: { kind: "sample", n: 1 } as const, sampling: { temperature: 0, seed: 1 }, maxTokens: 120, stop: [], stopTokens: [], ignoreEos: true, topLogprobs: undefined };
    const alone = await draft.generate("Lily and Ben", { temperature: 0, maxTokens: 120, ignoreEos: true });
    const own = busy.submit({ ...params, promptTokens: draft.tokenizer.encode("Lily and Ben") });
    const speculative = target.generate(c.prompt, { temperature: 0, maxTokens: n, draftModel: draft, draftTokens: 4 });
    // and the draft's own engine, while the target's speculative rounds run on it
    const plain = draft.generate("Once upon a time", { temperature: 0, maxTokens: 60, ignoreEos: true });
    assert.deepEqual((await speculative).completionTokens, c.completionTokens);
    assert.deepEqual((await own.outcome).choices[0]!.completionTokens, alone.completionTokens);
    const plainAlone = await draft.generate("Once upon a time", { temperature: 0, maxTokens: 60, ignoreEos: true });
    assert.deepEqual((await plain).completionTokens, plainAlone.completionTokens);
  } finally {
    busy.close();
    target.dispose();
    draft.dispose();
  }
});

test("stories260K: a draft model's KV cache counts against kvCacheBytes, and its rows go back to one pool the engine's requests share", { skip }, async () => {
  // admission "reserve": each request's worst case (target and draft) is held from its admission
  // (under "preempt" both start on their prompts: test/engine-preempt.test.ts)
  const target = await loadModel(sharedFile(MODEL)!, { contextSize: 512, kvCacheBytes: 20 * 16 * 1280, admission: "reserve" });
  const draft = await loadModel(sharedFile(MODEL)!, { contextSize: 512, quantize: "q4_0" });
  // the draft as generate() takes it, noting the caches the engine asks it for
  const made: KVCache[] = [];
  const languageModel = new Proxy(draft.languageModel, {
    get(model, key) {
      if (key === "createCache") return (positions: number) => made[made.push(model.createCache(positions)) - 1];
      const v = Reflect.get(model, key, model);
      return typeof v === "function" ? v.bind(model) : v;
    },
  });
  try {
    assert.equal(target.engine.bytesPerToken, 1280);
    assert.equal(target.engine.stats.kvCapacityTokens, 20 * 16);
    const [a, b] = cases();
    const options = { temperature: 0, maxTokens: 60, draftModel: { languageModel }, draftTokens: 4 };
    // each needs 5 blocks (prompt + 60) + 2 (a proposal) + 5 of draft cache (prompt + 60 + 5):
    // alone it fits in 20, two at once do not, so the second waits (without the draft's share: 14)
    const runs = await Promise.all([target.generate(a!.prompt, options), target.generate(b!.prompt, options)]);
    assert.deepEqual(runs[0]!.completionTokens, a!.completionTokens.slice(0, 60));
    assert.deepEqual(runs[1]!.completionTokens, b!.completionTokens.slice(0, 60));
    assert.equal(target.engine.stats.peakStepSequences, 1, "the second speculative request waited for the first one's room");
    // 250 new tokens: 16 blocks + 2 fit in 20 without the draft's 17
    await assert.rejects(target.generate(a!.prompt, { ...options, maxTokens: 250 }), /\(prompt \d+ \+ maxTokens 250, a speculative proposal and the draft model's KV cache\) but the KV cache holds 320 tokens/);
    // one more finished and one aborted mid-way: every draft cache came from the first one's pool, all of it back
    await target.generate(a!.prompt, options);
    const stop = new AbortController();
    let steps = 0;
    for await (const _ of target.stream(b!.prompt, { ...options, signal: stop.signal })) if (++steps === 3) stop.abort();
    assert.equal(made.length, 1, "one draft cache made by the draft model; later ones share its pool");
    assert.equal(made[0]!.pool.stats.blocksInUse, 0, "every request gave its draft rows back");
  } finally {
    target.dispose();
    draft.dispose();
  }
});
