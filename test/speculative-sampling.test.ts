import assert from "node:assert/strict";
import { test } from "node:test";
import {
  acceptanceProbability, drawIndex, rejectionStep, residualDistribution, speculativeGreedy,
} from "../src/generation/speculative.js";
import { loadModel } from "../src/index.js";
import { createSampler, Mt19937 } from "../src/sampling/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL);

// hand-made target p and draft q over 5 tokens (q puts mass where p has none, and misses token 4)
const p = [0.1, 0.4, 0.2, 0, 0.3];
const q = [0.3, 0.2, 0.2, 0.3, 0];

test("rejection step pieces on hand-made p, q", () => {
  // min(1, p/q) for the tokens q can propose
  assert.ok(Math.abs(acceptanceProbability(p, q, 0) - 1 / 3) < 1e-15);
  assert.equal(acceptanceProbability(p, q, 1), 1);
  assert.equal(acceptanceProbability(p, q, 2), 1);
  assert.equal(acceptanceProbability(p, q, 3), 0);
  assert.throws(() => acceptanceProbability(p, q, 4), /draft token 4 has probability 0/);
  // max(0, p - q) = (0, 0.2, 0, 0, 0.3), sum 0.5
  const r = residualDistribution(p, q);
  const expected = [0, 0.4, 0, 0, 0.6];
  for (let i = 0; i < 5; i++) assert.ok(Math.abs(r[i]! - expected[i]!) < 1e-15, `residual[${i}] = ${r[i]}`);
  assert.deepEqual([...residualDistribution([0.5, 0.5], [0.5, 0.5])], [0.5, 0.5]); // p = q: p itself
  assert.equal(drawIndex([0, 0.25, 0, 0.75], 0), 1);
  assert.equal(drawIndex([0, 0.25, 0, 0.75], 0.2499), 1);
  assert.equal(drawIndex([0, 0.25, 0, 0.75], 0.25), 3);
});

test("the rejection rule's output distribution is p: analytically and over 20000 seeded draws", () => {
  // P(out = y) = q(y) min(1, p(y)/q(y)) + (1 - sum_x q(x) min(1, p(x)/q(x))) residual(y)
  // by hand: accepted mass = 0.3*(1/3) + 0.2 + 0.2 + 0.3*0 = 0.5, residual = (0, 0.4, 0, 0, 0.6):
  // P = (0.1 + 0, 0.2 + 0.2, 0.2 + 0, 0 + 0, 0 + 0.3) = p
  const accepted = [0.1, 0.2, 0.2, 0, 0];
  const residual = [0, 0.4, 0, 0, 0.6];
  const rejectMass = 1 - accepted.reduce((a, b) => a + b, 0);
  for (let y = 0; y < 5; y++) {
    const qy = q[y]! > 0 ? q[y]! * acceptanceProbability(p, q, y) : 0;
    assert.ok(Math.abs(qy - accepted[y]!) < 1e-15);
    assert.ok(Math.abs(accepted[y]! + rejectMass * residual[y]! - p[y]!) < 1e-15, `P(out = ${y})`);
  }
  const rng = new Mt19937(1234);
  const N = 20000;
  const counts = new Array<number>(5).fill(0);
  let acc = 0;
  for (let i = 0; i < N; i++) {
    const x = drawIndex(q, rng.nextDouble());
    const s = rejectionStep(p, q, x, rng);
    counts[s.token]!++;
    if (s.accepted) acc++;
  }
  for (let y = 0; y < 5; y++) {
    const se = Math.sqrt((p[y]! * (1 - p[y]!)) / N);
    const f = counts[y]! / N;
    assert.ok(Math.abs(f - p[y]!) <= 4 * se + 1e-12, `token ${y}: frequency ${f}, p ${p[y]}, se ${se}`);
  }
  // acceptance rate = sum_x min(p, q) = 0.5
  assert.ok(Math.abs(acc / N - 0.5) < 4 * Math.sqrt(0.25 / N), `acceptance ${acc / N}`);
});

test("stories260K, Q4_0 draft: seeded speculative sampling repeats exactly; prompt lookup too; acceptance reported", { skip }, async (t) => {
  const target = await loadModel(sharedFile(MODEL)!, { backend: "reference" });
  const draft = await loadModel(sharedFile(MODEL)!, { backend: "reference", quantize: "q4_0" });
  try {
    const opts = { temperature: 0.8, maxTokens: 48, ignoreEos: true };
    for (const [name, extra] of [["q4_0 draft k=4", { draftModel: draft, draftTokens: 4 }], ["prompt lookup", { promptLookup: true }]] as const) {
      const a = await target.generate("Once upon a time", { ...opts, ...extra, seed: 11 });
      const b = await target.generate("Once upon a time", { ...opts, ...extra, seed: 11 });
      assert.deepEqual(a.completionTokens, b.completionTokens, name);
      assert.equal(a.completionTokens.length, 48);
      const s = a.speculative!;
      assert.ok(s.drafted > 0 || name === "prompt lookup");
      assert.ok(s.accepted <= s.drafted);
      t.diagnostic(`${name}: accepted ${s.accepted}/${s.drafted} (${(100 * s.acceptanceRate).toFixed(1)}%), ${s.tokensPerTargetPass.toFixed(2)} tokens per target pass`);
      const c = await target.generate("Once upon a time", { ...opts, ...extra, seed: 12 });
      t.diagnostic(`${name}: seed 12 ${c.completionTokens.join() === a.completionTokens.join() ? "same as" : "differs from"} seed 11`);
    }
  } finally {
    target.dispose();
    draft.dispose();
  }
});

test("stories260K: first-token distribution of speculative sampling matches the target sampler's", { skip }, async () => {
  // the first emitted token comes from the target alone; the second from the rejection rule.
  // Over many seeds, the second token's frequencies under speculative sampling (Q4_0 draft, k=2)
  // match those of plain sampling from the target given the same first token.
  const target = await loadModel(sharedFile(MODEL)!, { backend: "reference" });
  const draft = await loadModel(sharedFile(MODEL)!, { backend: "reference", quantize: "q4_0" });
  try {
    const prompt = [1, 403, 407, 261, 378]; // "Once upon a time" as the golden file tokenizes it
    const lm = target.languageModel;
    const so = { temperature: 1.2, topK: 0, topP: 1, minP: 0 };
    // exact target distribution of token 2 given token 1 = the target's greedy first token
    const s0 = createSampler({ ...so, seed: 0 });
    const cache = lm.createCache(16);
    const l0 = lm.forward(prompt, cache);
    const firstGreedy = l0.indexOf(Math.max(...l0));
    const l1 = lm.forward([firstGreedy], cache);
    const d = s0.distribution(l1, [...prompt, firstGreedy]);
    const exact = new Map<number, number>();
    for (let i = 0; i < d.ids.length; i++) exact.set(d.ids[i]!, d.probs[i]!);
    const counts = new Map<number, number>();
    let n = 0;
    for (let seed = 0; n < 1500 && seed < 20000; seed++) {
      const target0 = createSampler({ ...so, seed });
      const r = await speculativeGreedy(lm, prompt, {
        maxTokens: 2, draft: draft.languageModel, draftTokens: 2, choose: () => { throw new Error("unused"); }, endIds: new Set(),
        sampling: { target: target0.distribution, draft: createSampler({ ...so, seed }).distribution, rng: new Mt19937(seed) },
      });
      if (r.tokens[0] !== firstGreedy) continue;
      n++;
      counts.set(r.tokens[1]!, (counts.get(r.tokens[1]!) ?? 0) + 1);
    }
    assert.ok(n >= 300, `only ${n} runs started with the greedy token`);
    for (const [tok, pr] of exact) {
      if (pr < 0.05) continue;
      const f = (counts.get(tok) ?? 0) / n;
      const se = Math.sqrt((pr * (1 - pr)) / n);
      assert.ok(Math.abs(f - pr) <= 4.5 * se, `token ${tok}: frequency ${f.toFixed(4)} vs p ${pr.toFixed(4)} (n=${n})`);
    }
  } finally {
    target.dispose();
    draft.dispose();
  }
});
