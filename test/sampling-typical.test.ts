import assert from "node:assert/strict";
import { test } from "node:test";
import { createCandidates, createSampler, loadCandidates, typicalP, type Candidates } from "../src/sampling/index.js";

/**
 * Hand-made distribution p = (1/2, 1/4, 1/8, 1/8) over tokens 0..3 (logits = ln p).
 * Entropy H = 1/2 ln2 + 1/4 (2 ln2) + 2 * 1/8 (3 ln2) = 1.75 ln2.
 * Surprise -ln p = (1, 2, 3, 3) ln2, so |-ln p - H| = (0.75, 0.25, 1.25, 1.25) ln2:
 * typicality order 1, 0, 2, 3 with running mass 0.25, 0.75, 0.875, 1.
 */
const P = [0.5, 0.25, 0.125, 0.125];
const LOGITS = new Float32Array(P.map(Math.log));

function run(p: number, minKeep?: number): number[] {
  const c: Candidates = loadCandidates(createCandidates(0), LOGITS);
  typicalP(c, p, minKeep);
  return [...c.ids.subarray(0, c.size)];
}

test("typical-p keeps the shortest typicality-ordered prefix whose mass exceeds p", () => {
  const table: [p: number, minKeep: number | undefined, kept: number[]][] = [
    [0.2, undefined, [1]], // 0.25 > 0.2
    [0.25 - 1e-6, undefined, [1]],
    [0.3, undefined, [1, 0]], // 0.75 > 0.3
    [0.74, undefined, [1, 0]],
    [0.76, undefined, [1, 0, 2]], // 0.875
    [0.9, undefined, [1, 0, 2, 3]],
    [0.2, 3, [1, 0, 2]], // min_keep forces three
    [0.2, 0, [1]], // min_keep 0 and 1 both mean "at least one" here
    [1, undefined, [0, 1, 2, 3]], // disabled: untouched, id order
  ];
  for (const [p, minKeep, kept] of table) assert.deepEqual(run(p, minKeep), kept, `p=${p} minKeep=${minKeep}`);
});

test("typical-p: a uniform distribution has every |-ln p - H| = 0, so ties keep the best-first (lowest id) order", () => {
  const c = loadCandidates(createCandidates(0), new Float32Array([2, 2, 2, 2, 2]));
  typicalP(c, 0.5); // running mass 0.2, 0.4, 0.6 > 0.5
  assert.deepEqual([...c.ids.subarray(0, c.size)], [0, 1, 2]);
});

test("typical-p: a peaked distribution drops the argmax when it is atypically likely", () => {
  // p = (0.9, 0.05, 0.05): H = -(0.9 ln0.9 + 0.1 ln0.05) = 0.39440, -ln p = (0.10536, 2.99573, 2.99573),
  // scores (0.28904, 2.60133, 2.60133): here the argmax is the most typical and alone exceeds 0.5
  const c = loadCandidates(createCandidates(0), new Float32Array([Math.log(0.9), Math.log(0.05), Math.log(0.05)]));
  typicalP(c, 0.5);
  assert.deepEqual([...c.ids.subarray(0, c.size)], [0]);
  // p = (0.4, 0.3, 0.3): H = 1.08889, -ln p = (0.91629, 1.20397, 1.20397), scores (0.17260, 0.11508, 0.11508):
  // the two less likely tokens are the typical ones
  const d = loadCandidates(createCandidates(0), new Float32Array([Math.log(0.4), Math.log(0.3), Math.log(0.3)]));
  typicalP(d, 0.5); // 0.3, 0.6 > 0.5
  assert.deepEqual([...d.ids.subarray(0, d.size)], [1, 2]);
});

test("sampler with typicalP draws only the kept tokens, with renormalized probabilities, and repeats per seed", () => {
  const opts = { temperature: 1, topK: 0, topP: 1, minP: 0, typicalP: 0.5 };
  const counts = new Map<number, number>();
  const N = 3000;
  for (let seed = 0; seed < N; seed++) {
    const s = createSampler({ ...opts, seed });
    const t = s.sample(LOGITS, []);
    counts.set(t, (counts.get(t) ?? 0) + 1);
    if (seed < 20) assert.equal(createSampler({ ...opts, seed }).sample(LOGITS, []), t, "same seed, same token");
  }
  assert.deepEqual([...counts.keys()].sort(), [0, 1]);
  // kept {1: 0.25, 0: 0.5} renormalize to (1/3, 2/3); binomial sd of the share of token 0 ~ 0.0086
  const share0 = counts.get(0)! / N;
  assert.ok(Math.abs(share0 - 2 / 3) < 5 * Math.sqrt((2 / 9) / N), `token 0 share ${share0}`);
  const probs = createSampler({ ...opts, seed: 1 });
  probs.sample(LOGITS, []);
  const lp = probs.lastProbabilities();
  assert.deepEqual([...lp.ids], [0, 1]);
  assert.ok(Math.abs(lp.probs[0]! - 2 / 3) < 1e-6 && Math.abs(lp.probs[1]! - 1 / 3) < 1e-6);
});

test("typicalP option is validated", () => {
  assert.throws(() => createSampler({ typicalP: 1.5 }), /typicalP = 1.5: expected a number in \[0, 1\]/);
  assert.equal(createSampler({}).options.typicalP, 1);
});

/*
 * samplerOrder "transformers" runs transformers' TypicalLogitsWarper (logits_process.py): sorted by
 * |-log p - H|, last_ind = the count of running masses below p, and every token whose score is not
 * above last_ind's stays (the ties of the boundary with it). llama.cpp's prefix whose mass exceeds p
 * cut the ties: a uniform row kept 3 of 5 at p = 0.5 where transformers keeps all 5.
 */
test("typical-p in the transformers order keeps the mass reaching p and the ties of its last score, as TypicalLogitsWarper", () => {
  const kept = (logits: number[], p: number) => {
    const s = createSampler({ temperature: 1, topK: 0, topP: 1, minP: 0, typicalP: p, samplerOrder: "transformers", seed: 1 });
    return [...s.distribution(new Float32Array(logits), []).ids].sort((a, b) => a - b);
  };
  // uniform: every score 0, one tie (before: [0, 1, 2])
  assert.deepEqual(kept([2, 2, 2, 2, 2], 0.5), [0, 1, 2, 3, 4]);
  // p = (0.4, 0.3, 0.3): the two 0.3 tokens are the most typical and tie; 0.3 reaches 0.2 at the first (before: [1])
  assert.deepEqual(kept([Math.log(0.4), Math.log(0.3), Math.log(0.3)], 0.2), [1, 2]);
  // without ties both rules agree: (1/2, 1/4, 1/8, 1/8) in typicality order 1, 0, then the tied 2 and 3
  assert.deepEqual(kept([...LOGITS], 0.5), [0, 1]);
  assert.deepEqual(kept([...LOGITS], 0.8), [0, 1, 2, 3]);
  // the llama.cpp order keeps its own rule
  const llama = createSampler({ temperature: 1, topK: 0, topP: 1, minP: 0, typicalP: 0.5, seed: 1 });
  assert.equal(llama.distribution(new Float32Array([2, 2, 2, 2, 2]), []).ids.length, 3);
});
