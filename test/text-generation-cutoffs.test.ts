import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { OptionError, pipeline } from "../src/index.js";
import { createCandidates, createSampler, epsilonCutoff, etaCutoff, loadCandidates } from "../src/sampling/index.js";
import { gpt2TinyCopy, gpt2TinyGeneration } from "./helpers/gpt2-tiny-generation.js";
import { skipWithoutShared } from "./helpers/shared.js";

/*
 * transformers' epsilon_cutoff and eta_cutoff (EpsilonLogitsWarper, EtaLogitsWarper), which the
 * text-generation pipeline refused when a call sampled. The judge: logits_process.py and
 * _get_logits_processor, transcribed here: both drop the tokens whose softmax probability is below
 * the cutoff unless their score is not below the min_tokens_to_keep-th best (1 when sampling);
 * epsilon's cutoff is epsilon, eta's min(eta, sqrt(eta) * exp(-entropy)) (the code's formula: the
 * docstring's sqrt(eta * exp(-entropy)) cuts otherwise); they run after temperature, top-k, top-p,
 * min-p and typical-p, epsilon before eta, and only for 0 < x < 1.
 */

/** p = (1/2, 1/4, 1/8, 1/16, 1/16): entropy H = (1/2 + 2/4 + 3/8 + 2 * 4/16) ln 2 = 1.875 ln 2, exp(-H) = 2^-1.875 = 0.272627 */
const P = [0.5, 0.25, 0.125, 0.0625, 0.0625];
const LOGITS = new Float32Array(P.map(Math.log));

function kept(filter: typeof epsilonCutoff, x: number, logits = LOGITS, minKeep?: number): number[] {
  const c = loadCandidates(createCandidates(0), logits);
  filter(c, x, minKeep);
  return [...c.ids.subarray(0, c.size)];
}

test("epsilonCutoff keeps the tokens at least that likely, the best (and its ties) and the minKeep best always; outside (0, 1) it is off", () => {
  assert.deepEqual(kept(epsilonCutoff, 0.1), [0, 1, 2]);
  assert.deepEqual(kept(epsilonCutoff, 0.13), [0, 1]); // 0.125 < 0.13
  assert.deepEqual(kept(epsilonCutoff, 0.124), [0, 1, 2]);
  assert.deepEqual(kept(epsilonCutoff, 0.9), [0]);
  assert.deepEqual(kept(epsilonCutoff, 0.9, LOGITS, 3), [0, 1, 2]);
  assert.deepEqual(kept(epsilonCutoff, 0.9, new Float32Array([1, 3, 3, 0])), [1, 2]); // both maxima (0.44 each) stay: their scores are not below the top one
  for (const off of [0, 1, -0.5, 1.5]) assert.deepEqual(kept(epsilonCutoff, off), [0, 1, 2, 3, 4], String(off));
});

test("etaCutoff's cutoff is min(eta, sqrt(eta) * exp(-entropy))", () => {
  // eta 0.13: sqrt(0.13) * 0.272627 = 0.098298 < 0.13, so 1/8 stays (epsilon 0.13 drops it)
  assert.deepEqual(kept(etaCutoff, 0.13), [0, 1, 2]);
  // eta 0.6: sqrt(0.6) * 0.272627 = 0.211176: 1/4 stays (sqrt(0.6 * 0.272627) = 0.404 would drop it)
  assert.deepEqual(kept(etaCutoff, 0.6), [0, 1]);
  // eta 0.05: min(0.05, 0.06096) = 0.05: the 1/16 tokens stay
  assert.deepEqual(kept(etaCutoff, 0.05), [0, 1, 2, 3, 4]);
  // eta 0.07: min(0.07, 0.0721) = 0.07: they go
  assert.deepEqual(kept(etaCutoff, 0.07), [0, 1, 2]);
  assert.deepEqual(kept(etaCutoff, 0.99, LOGITS, 2), [0, 1]);
  for (const off of [0, 1, -1]) assert.deepEqual(kept(etaCutoff, off), [0, 1, 2, 3, 4], String(off));
});

test("the sampler runs them in the \"transformers\" order only, after its typical-p; other orders refuse them naming the option", () => {
  const d = createSampler({ samplerOrder: "transformers", temperature: 1, topK: 0, topP: 1, minP: 0, epsilonCutoff: 0.13, seed: 1 }).distribution(LOGITS, []);
  assert.deepEqual([...d.ids].sort(), [0, 1]);
  assert.deepEqual([...d.probs].map((p) => +p.toFixed(6)), [2 / 3, 1 / 3].map((p) => +p.toFixed(6)));
  // eta after epsilon: on (2/3, 1/3) the entropy is 0.636514, sqrt(0.6) * exp(-0.636514) = 0.408, so 1/3 goes too
  const both = createSampler({ samplerOrder: "transformers", temperature: 1, topK: 0, topP: 1, minP: 0, epsilonCutoff: 0.13, etaCutoff: 0.6, seed: 1 }).distribution(LOGITS, []);
  assert.deepEqual([...both.ids], [0]);
  // a number outside (0, 1) is off in any order, as generate() adds no warper for it
  assert.doesNotThrow(() => createSampler({ epsilonCutoff: 1.5, etaCutoff: 0 }));
  for (const k of ["epsilonCutoff", "etaCutoff"] as const) {
    for (const samplerOrder of [undefined, "llama.cpp", ["topK", "temperature"]] as const) {
      assert.throws(() => createSampler({ [k]: 0.1, ...(samplerOrder === undefined ? {} : { samplerOrder }) }), (e: unknown) => e instanceof OptionError && e.option === k && e.message.startsWith(`sampling option ${k} = 0.1: runs only with samplerOrder "transformers"`));
    }
    assert.throws(() => createSampler({ [k]: Number.NaN }), (e: unknown) => e instanceof OptionError && e.option === k);
  }
});

describe("text-generation: epsilon_cutoff and eta_cutoff as transformers' warpers (gpt2-tiny)", { skip: skipWithoutShared("hf-oracle/gpt2-tiny.expected.json") }, () => {
  const fixture = gpt2TinyGeneration("tsllm-textgen-cutoffs-");
  const { dir, openFolder, reply } = fixture;
  const f = Math.fround;

  /** transformers' warpers on one row, in _get_logits_processor's order: the ids left (ascending) and the count after each warper */
  function reference(row: Float32Array, temperature: number, k: number, epsilon: number, eta: number): { ids: number[]; counts: number[] } {
    let scores = Array.from(row, (x) => f(x / temperature));
    const kth = [...scores].sort((a, b) => b - a)[k - 1]!;
    scores = scores.map((s) => (s < kth ? -Infinity : s));
    const alive = () => scores.filter((s) => s > -Infinity).length;
    const softmax = () => {
      const max = Math.max(...scores);
      const e = scores.map((s) => Math.exp(s - max));
      const sum = e.reduce((a, b) => a + b, 0);
      return e.map((x) => x / sum);
    };
    const counts = [alive()];
    const cut = (cutoff: number) => {
      const p = softmax();
      const max = Math.max(...scores);
      scores = scores.map((s, i) => (p[i]! < cutoff && s < max ? -Infinity : s));
    };
    cut(epsilon);
    counts.push(alive());
    const p = softmax();
    const entropy = -p.reduce((a, q) => a + (q > 0 ? q * Math.log(q) : 0), 0);
    cut(Math.min(eta, Math.sqrt(eta) * Math.exp(-entropy)));
    counts.push(alive());
    return { ids: scores.flatMap((s, i) => (s > -Infinity ? [i] : [])), counts };
  }

  test("the sampler's distribution on the model's own logits: the tokens transformers' warpers leave", () => {
    const gen = fixture.gen();
    const lm = gen.model.languageModel;
    const prompt = gen.model.tokenizer.encode("In the beginning");
    const row = lm.forward(prompt, lm.createCache(prompt.length + 1));
    for (const [temperature, epsilon, eta] of [[0.8, 0.012, 0.8], [0.3, 0.003, 0.5]] as const) {
      const want = reference(row, temperature, 50, epsilon, eta);
      // each warper cuts this row, so the test sees both
      assert.ok(want.counts[0]! > want.counts[1]! && want.counts[1]! > want.counts[2]!, `counts ${want.counts}`);
      const d = createSampler({ samplerOrder: "transformers", temperature, topK: 50, topP: 1, minP: 0, epsilonCutoff: epsilon, etaCutoff: eta, seed: 3 }).distribution(row, []);
      assert.deepEqual([...d.ids].sort((a, b) => a - b), want.ids, `temperature ${temperature}`);
    }
  });

  test("the pipeline's options, a folder's generation_config.json and task_specific_params reach the sampler (before: refused when sampling); greedy ignores them; outside (0, 1) is none", async () => {
    const gen = fixture.gen();
    const prompt = "In the beginning";
    const sampled = (g: typeof gen, o: object) => reply(g, prompt, { maxNewTokens: 12, doSample: true, seed: 7, temperature: 1.3, ...o });
    // the library's sampler in the pipeline's order (the filters themselves: the tests above)
    const library = async (o: object) => (await gen.model.generate(gen.model.tokenizer.encode(prompt), { maxTokens: 12, temperature: 1.3, topK: 50, topP: 1, minP: 0, seed: 7, samplerOrder: "transformers", repeatPenalty: 1, repeatLastN: -1, ...o })).completion;
    const plain = await sampled(gen, {});
    const epsilon = await sampled(gen, { epsilonCutoff: 0.02 });
    assert.equal(epsilon, await library({ epsilonCutoff: 0.02 }));
    assert.notEqual(epsilon, plain, "epsilon 0.02 cuts this reply's distributions");
    const eta = await sampled(gen, { etaCutoff: 0.9 });
    assert.equal(eta, await library({ etaCutoff: 0.9 }));
    assert.notEqual(eta, plain, "eta 0.9 cuts this reply's distributions");
    assert.equal(await sampled(gen, { epsilonCutoff: 1.5, etaCutoff: -1 }), plain);
    const folder = await openFolder(gpt2TinyCopy(dir, "cutoffs", { epsilon_cutoff: 0.02 }, { task_specific_params: { "text-generation": { eta_cutoff: 0.9 } } }));
    const both = await library({ epsilonCutoff: 0.02, etaCutoff: 0.9 });
    assert.notEqual(both, epsilon, "the task's eta changes the reply");
    assert.equal(await sampled(folder, {}), both);
    assert.equal(await sampled(folder, { epsilonCutoff: 0, etaCutoff: 0 }), plain, "a call's 0 turns the folder's off");
    assert.equal(await reply(folder, prompt, { maxNewTokens: 8 }), await reply(gen, prompt, { maxNewTokens: 8 }), "greedy: no warper");
    await assert.rejects(gen(prompt, { maxNewTokens: 2, doSample: true, etaCutoff: "0.1" } as never), (e: unknown) => e instanceof OptionError && e.option === "etaCutoff" && e.message === `etaCutoff must be a number (0 < x < 1 cuts; others: none), got "0.1"`);
    const bad = gpt2TinyCopy(dir, "cutoff-bad", { epsilon_cutoff: "3e-4" });
    await assert.rejects(pipeline("text-generation", bad, { threads: 1 }), new Error(`${bad}/generation_config.json: epsilon_cutoff: expected a number (0 < x < 1 cuts; others: none), found "3e-4"`));
  });
});
