import assert from "node:assert/strict";
import { test } from "node:test";
import {
  applyLogitBias,
  applyPenalties,
  applyTemperature,
  argmax,
  createCandidates,
  createSampler,
  drawCandidate,
  loadCandidates,
  minP,
  resolveSamplingOptions,
  selectBest,
  topK,
  topP,
  type Candidates,
  type SamplingOptions,
} from "../src/sampling/index.js";

// Every expected value below is worked out by hand from the definitions in llama.cpp's
// src/llama-sampling.cpp (logit-bias, penalties, top-k, top-p, min-p, temp, dist).

/** plain sampling: every filter off, so only the named option acts */
const PLAIN: SamplingOptions = { temperature: 1, topK: 0, topP: 1, minP: 0 };

const f32 = (xs: number[]) => Float32Array.from(xs);
const logs = (ps: number[]) => f32(ps.map(Math.log));

function candidatesOf(logits: Float32Array): Candidates {
  return loadCandidates(createCandidates(logits.length), logits);
}
const alive = (c: Candidates) => [...c.ids.subarray(0, c.size)];
const aliveLogits = (c: Candidates) => [...c.logits.subarray(0, c.size)];

/** a UniformSource that returns the given numbers in turn */
const fixed = (...us: number[]) => ({ nextDouble: () => {
  const u = us.shift();
  if (u === undefined) throw new Error("no random number expected here");
  return u;
} });

function assertClose(actual: ArrayLike<number>, expected: number[], tol = 1e-6): void {
  assert.equal(actual.length, expected.length, `length of [${[...Array.from(actual)]}]`);
  for (let i = 0; i < expected.length; i++) {
    assert.ok(Math.abs(actual[i]! - expected[i]!) <= tol, `[${i}]: ${actual[i]} vs ${expected[i]}`);
  }
}

test("top-k keeps the k highest logits, best first; 0 disables", () => {
  const c = candidatesOf(f32([1, 2, 3, 4]));
  topK(c, 2);
  assert.deepEqual(alive(c), [3, 2]);
  assert.equal(c.sorted, true);
  const d = candidatesOf(f32([1, 2, 3, 4]));
  topK(d, 0);
  assert.deepEqual(alive(d), [0, 1, 2, 3]);
  const e = candidatesOf(f32([1, 2, 3, 4]));
  topK(e, 10); // k > vocab keeps all, sorted
  assert.deepEqual(alive(e), [3, 2, 1, 0]);
});

test("top-k breaks ties by the lower token id", () => {
  const c = candidatesOf(f32([5, 1, 5, 5, 2]));
  topK(c, 2);
  assert.deepEqual(alive(c), [0, 2]);
});

test("sampler with topK=2 on [1,2,3,4] draws only ids 2 and 3, with softmax([4,3])", () => {
  const s = createSampler({ ...PLAIN, topK: 2, seed: 1 });
  const seen = new Set<number>();
  for (let i = 0; i < 200; i++) seen.add(s.sample(f32([1, 2, 3, 4]), []));
  assert.deepEqual([...seen].sort(), [2, 3]);
  const { ids, probs } = s.lastProbabilities();
  assert.deepEqual([...ids], [3, 2]);
  // softmax([4, 3]) = [1, e^-1] / (1 + e^-1)
  assertClose(probs, [1 / (1 + Math.exp(-1)), Math.exp(-1) / (1 + Math.exp(-1))]);
});

test("selectBest over a large vocabulary equals a full sort's prefix", () => {
  // a test-local LCG, so the data does not depend on the code under test
  let x = 12345;
  const n = 150_000;
  const logits = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    logits[i] = ((x >>> 8) % 20000) / 1000 - 10; // many ties on purpose
  }
  // values whose bit patterns are special: -0 must tie with +0, -Infinity sorts last
  for (let i = 0; i < n; i += 997) logits[i] = [-0, 0, -Infinity, 3.4e38, -1e-45][i % 5]!;
  const order = [...Array(n).keys()].sort((a, b) => {
    const d = logits[b]! - logits[a]!;
    return d > 0 ? 1 : d < 0 ? -1 : a - b; // -Infinity - -Infinity is NaN: a tie
  });
  // k <= 2048 takes the heap, larger k the native key sort
  for (const k of [1, 40, 1000, 5000, n]) {
    const c = candidatesOf(logits);
    selectBest(c, k);
    assert.deepEqual(alive(c).slice(0, k), order.slice(0, k), `k = ${k}`);
  }
});

test("top-p keeps the smallest best-first set with cumulative probability >= p", () => {
  // probabilities 0.5, 0.25, 0.15, 0.1 (cumulative 0.5, 0.75, 0.9, 1.0), ids shuffled
  const l = logs([0.15, 0.5, 0.1, 0.25]);
  const kept = (p: number) => {
    const c = candidatesOf(l);
    topP(c, p);
    return alive(c);
  };
  assert.deepEqual(kept(0), [1]); // always at least one token
  assert.deepEqual(kept(0.4999), [1]);
  assert.deepEqual(kept(0.5001), [1, 3]);
  assert.deepEqual(kept(0.7499), [1, 3]);
  assert.deepEqual(kept(0.7501), [1, 3, 0]);
  assert.deepEqual(kept(0.8999), [1, 3, 0]);
  assert.deepEqual(kept(0.9001), [1, 3, 0, 2]);
  assert.deepEqual(kept(1), [0, 1, 2, 3]); // disabled: untouched, id order
});

test("top-p after top-k uses probabilities renormalized over the top-k survivors", () => {
  const l = logs([0.5, 0.25, 0.15, 0.1]);
  // alone: 0.5 < 0.6, so two tokens are needed
  const c = candidatesOf(l);
  topP(c, 0.6);
  assert.deepEqual(alive(c), [0, 1]);
  // after top-k 2 the survivors have 2/3 and 1/3: 2/3 >= 0.6 already
  const d = candidatesOf(l);
  topK(d, 2);
  topP(d, 0.6);
  assert.deepEqual(alive(d), [0]);
});

test("top-p over > 1024 candidates: a big nucleus beyond the first 256 guess", () => {
  // 2000 equal logits: each has probability 1/2000, so p = 0.4997 needs 1000 tokens
  // (999 give 0.4995); ties go to the lower ids
  const c = candidatesOf(new Float32Array(2000));
  topP(c, 0.4997);
  assert.deepEqual(alive(c), [...Array(1000).keys()]);
  // one dominant token: p = e^10 / (e^10 + 1999) = 0.9168 >= 0.9 on its own
  const l = new Float32Array(2000);
  l[1500] = 10;
  const d = candidatesOf(l);
  topP(d, 0.9);
  assert.deepEqual(alive(d), [1500]);
});

test("min-p keeps tokens with p >= minP * p_max, in their current order", () => {
  // p = 0.1, 0.5, 0.25, 0.15 -> relative to p_max 0.5: 0.2, 1, 0.5, 0.3
  const l = logs([0.1, 0.5, 0.25, 0.15]);
  const kept = (p: number, sortFirst = false) => {
    const c = candidatesOf(l);
    if (sortFirst) topK(c, 4);
    minP(c, p);
    return alive(c);
  };
  assert.deepEqual(kept(0), [0, 1, 2, 3]);
  assert.deepEqual(kept(0.19), [0, 1, 2, 3]);
  assert.deepEqual(kept(0.21), [1, 2, 3]);
  assert.deepEqual(kept(0.31), [1, 2]);
  assert.deepEqual(kept(0.51), [1]);
  assert.deepEqual(kept(1), [1]);
  assert.deepEqual(kept(0.21, true), [1, 2, 3]); // sorted input: best first
  // minP = 1 keeps every token tied for the maximum
  const c = candidatesOf(f32([2, 7, 7, 1]));
  minP(c, 1);
  assert.deepEqual(alive(c), [1, 2]);
});

test("temperature divides logits; 0 keeps only the best (lowest id on ties)", () => {
  const c = candidatesOf(f32([2, 4, -1]));
  applyTemperature(c, 0.5);
  assert.deepEqual(aliveLogits(c), [4, 8, -2]);
  const d = candidatesOf(f32([1, 3, 3, 2]));
  applyTemperature(d, 0);
  assert.deepEqual(alive(d), [1]);
});

test("a tiny temperature keeps the softmax finite: ties share the mass", () => {
  // 2 / 1e-40 overflows float32; the limit of softmax([1, 2, 2] / T) as T -> 0 is [0, 1/2, 1/2]
  const s = createSampler({ ...PLAIN, temperature: 1e-40, seed: 4 });
  const seen = new Set<number>();
  for (let i = 0; i < 50; i++) seen.add(s.sample(f32([1, 2, 2]), []));
  assert.deepEqual([...seen].sort(), [1, 2]);
  const { ids, probs } = s.lastProbabilities();
  assert.deepEqual([...ids], [1, 2, 0]); // no filter ran, so token 0 is still listed, at p = 0
  assert.deepEqual([...probs], [0.5, 0.5, 0]);
});

test("sampler temperature: probabilities are softmax(logits / T)", () => {
  // logits [0, ln 4] at T = 2 -> softmax([0, ln 2]) = [1/3, 2/3]
  const s = createSampler({ ...PLAIN, temperature: 2, seed: 3 });
  s.sample(f32([0, Math.log(4)]), []);
  const { ids, probs } = s.lastProbabilities();
  assert.deepEqual([...ids], [1, 0]);
  assertClose(probs, [2 / 3, 1 / 3]);
});

test("greedy (temperature 0): argmax, lowest id wins ties, no randomness", () => {
  assert.equal(argmax(f32([1, 3, 3, 2])), 1);
  assert.equal(argmax(f32([-Infinity, -5, -5])), 1);
  for (const seed of [1, 2, 3]) {
    const s = createSampler({ temperature: 0, seed });
    assert.equal(s.sample(f32([1, 3, 3, 2]), []), 1);
    const { ids, probs } = s.lastProbabilities();
    assert.deepEqual([...ids], [1]);
    assert.deepEqual([...probs], [1]);
  }
  // greedy still sees the penalties: token 1 (logit 3) repeated with penalty 2 -> 1.5 < 2
  const s = createSampler({ temperature: 0, repeatPenalty: 2 });
  assert.equal(s.sample(f32([1, 3, 2.5, 2]), [1]), 2);
});

test("logit bias adds to logits; -Infinity bans; Map and Record forms agree", () => {
  const l = f32([1, 2, 3]);
  applyLogitBias(l, new Map([[0, 5], [2, -Infinity]]));
  assert.deepEqual([...l], [6, 2, -Infinity]);
  assert.equal(createSampler({ temperature: 0, logitBias: { 0: 5 } }).sample(f32([1, 2, 3]), []), 0);
  assert.equal(createSampler({ temperature: 0, logitBias: new Map([[2, -Infinity]]) }).sample(f32([1, 2, 3]), []), 1);
  const banned = createSampler({ ...PLAIN, logitBias: { 1: -Infinity, 2: -Infinity }, seed: 9 });
  for (let i = 0; i < 50; i++) assert.equal(banned.sample(f32([0, 0, 0]), []), 0);
  assert.throws(() => applyLogitBias(f32([1, 2]), new Map([[2, 1]])), /logitBias: token id 2 is outside the vocabulary/);
});

test("penalties: repeat divides positive and multiplies non-positive logits", () => {
  const l = f32([2, -1, 0.5, -3, 1, 0]);
  // counts in the window: id0 x3, id1 x2, id3 x1, id5 x1
  applyPenalties(l, [0, 1, 1, 3, 0, 0, 5], { repeatPenalty: 2, repeatLastN: 64, frequencyPenalty: 0, presencePenalty: 0 });
  assert.deepEqual([...l], [1, -2, 0.5, -6, 1, 0]);
});

test("penalties: frequency subtracts count * f, presence subtracts p once, after repeat", () => {
  const l = f32([2, -1, 0.5, -3, 1]);
  applyPenalties(l, [0, 1, 1, 3, 0, 0], { repeatPenalty: 2, repeatLastN: 64, frequencyPenalty: 0.5, presencePenalty: 0.25 });
  // id0: 2/2 - (3*0.5 + 0.25) = -0.75; id1: -1*2 - (2*0.5 + 0.25) = -3.25; id3: -3*2 - 0.75 = -6.75
  assert.deepEqual([...l], [-0.75, -3.25, 0.5, -6.75, 1]);
  const m = f32([2, -1, 0.5, -3, 1]);
  applyPenalties(m, [0, 1, 1, 3, 0, 0], { repeatPenalty: 1, repeatLastN: 64, frequencyPenalty: 0, presencePenalty: 1 });
  assert.deepEqual([...m], [1, -2, 0.5, -4, 1]);
});

test("penalties: repeatLastN limits the window; -1 = whole history; 0 = off", () => {
  const opts = { repeatPenalty: 1, frequencyPenalty: 1, presencePenalty: 0 };
  const run = (lastN: number) => {
    const l = f32([10, 10, 10]);
    applyPenalties(l, [1, 1, 2, 0, 0], { ...opts, repeatLastN: lastN });
    return [...l];
  };
  assert.deepEqual(run(2), [8, 10, 10]); // window [0, 0]
  assert.deepEqual(run(3), [8, 10, 9]); // window [2, 0, 0]
  assert.deepEqual(run(-1), [8, 8, 9]);
  assert.deepEqual(run(100), [8, 8, 9]);
  assert.deepEqual(run(0), [10, 10, 10]);
});

test("penalties reject history ids outside the vocabulary", () => {
  const opts = { repeatPenalty: 1.1, repeatLastN: 64, frequencyPenalty: 0, presencePenalty: 0 };
  assert.throws(() => applyPenalties(f32([1, 2]), [0, 2], opts), /history\[1\] = 2: expected a token id/);
  assert.throws(() => applyPenalties(f32([1, 2]), [0.5], opts), /history\[0\] = 0.5/);
});

test("the sampler applies penalties through its history argument", () => {
  // [ln 1, ln 1] with presence 100 on token 0 leaves token 1 practically certain
  const s = createSampler({ ...PLAIN, presencePenalty: 100, seed: 5 });
  for (let i = 0; i < 50; i++) assert.equal(s.sample(f32([0, 0]), [0]), 1);
});

test("drawCandidate picks the first candidate whose running sum reaches u * total", () => {
  // candidates in id order with probabilities 0.1, 0.2, 0.3, 0.4 (cumulative .1 .3 .6 1)
  const l = logs([0.1, 0.2, 0.3, 0.4]);
  const cases: Array<[number, number]> = [[0, 0], [0.05, 0], [0.15, 1], [0.29, 1], [0.31, 2], [0.59, 2], [0.61, 3], [0.999, 3]];
  for (const [u, id] of cases) {
    const c = candidatesOf(l);
    assert.equal(drawCandidate(c, fixed(u)), id, `u = ${u}`);
    assertClose(c.probs.subarray(0, 4), [0.1, 0.2, 0.3, 0.4]);
  }
  // after top-k the order is best first: u = 0.05 now lands on the best token
  const c = candidatesOf(l);
  topK(c, 4);
  assert.equal(drawCandidate(c, fixed(0.05)), 3);
  // a single candidate still consumes exactly one random number
  const one = candidatesOf(f32([1, 5]));
  topK(one, 1);
  const source = fixed(0.5, 0.25);
  assert.equal(drawCandidate(one, source), 1);
  assert.equal(source.nextDouble(), 0.25);
});

test("the random stream does not depend on how many candidates survived (llama.cpp's singleton test)", () => {
  // llama.cpp tests/test-sampling.cpp test_dist_singleton_rng: seed 4242, one draw over {0}
  // versus one over {0, 0}, then four draws over 256 equal logits must agree
  const singleton = createSampler({ ...PLAIN, seed: 4242 });
  const control = createSampler({ ...PLAIN, seed: 4242 });
  singleton.sample(f32([0]), []);
  control.sample(f32([0, 0]), []);
  const flat = new Float32Array(256);
  for (let i = 0; i < 4; i++) assert.equal(singleton.sample(flat, []), control.sample(flat, []));
});

test("20000 seeded draws match the softmax probabilities within 4 standard errors", () => {
  const n = 20000;
  const check = (opts: SamplingOptions, expected: number[]) => {
    const s = createSampler({ ...PLAIN, ...opts });
    const counts = [0, 0, 0, 0];
    const l = logs([0.1, 0.2, 0.3, 0.4]);
    for (let i = 0; i < n; i++) counts[s.sample(l, [])]!++;
    expected.forEach((p, i) => {
      const se = Math.sqrt((p * (1 - p)) / n);
      const f = counts[i]! / n;
      assert.ok(Math.abs(f - p) < 4 * se, `token ${i}: frequency ${f}, expected ${p} +- ${4 * se}`);
    });
  };
  check({ seed: 1234 }, [0.1, 0.2, 0.3, 0.4]);
  // T = 0.5 squares the probabilities: [1, 4, 9, 16] / 30
  check({ seed: 99, temperature: 0.5 }, [1 / 30, 4 / 30, 9 / 30, 16 / 30]);
});

test("the same seed gives the same tokens; different seeds differ", () => {
  const draw = (seed: number) => {
    const s = createSampler({ ...PLAIN, seed });
    const l = f32([0, 0, 0, 0]);
    return Array.from({ length: 64 }, () => s.sample(l, []));
  };
  assert.deepEqual(draw(42), draw(42));
  assert.notDeepEqual(draw(42), draw(43));
  // -1 asks for a random seed, as llama.cpp's LLAMA_DEFAULT_SEED does (two draws agree with odds 2^-32)
  const [a, b] = [createSampler({ seed: -1 }).options.seed, createSampler({ seed: -1 }).options.seed];
  assert.ok([a, b].every((s) => Number.isInteger(s) && s >= 0 && s < 2 ** 32) && a !== b, `${a} ${b}`);
  const r = createSampler({});
  assert.ok(Number.isInteger(r.options.seed) && r.options.seed >= 0 && r.options.seed < 2 ** 32);
});

test("the full default chain on a 150k vocabulary stays inside the top 40", () => {
  let x = 777;
  const n = 150_000;
  const logits = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    logits[i] = (x / 2 ** 32) * 8;
  }
  const copy = logits.slice();
  const top40 = new Set([...Array(n).keys()].sort((a, b) => logits[b]! - logits[a]! || a - b).slice(0, 40));
  const s = createSampler({ seed: 7 }); // llama.cpp defaults: top-k 40, top-p 0.95, min-p 0.05, T 0.8
  const history: number[] = [];
  for (let i = 0; i < 20; i++) {
    const t = s.sample(logits, history);
    history.push(t);
    assert.ok(top40.has(t), `token ${t}`);
    const { ids, probs } = s.lastProbabilities();
    assert.ok(ids.length >= 1 && ids.length <= 40);
    assert.ok(Math.abs(probs.reduce((a, b) => a + b, 0) - 1) < 1e-5);
    for (let j = 1; j < probs.length; j++) assert.ok(probs[j - 1]! >= probs[j]!);
  }
  assert.deepEqual(logits, copy, "sample() must not modify the caller's logits");
});

test("lastProbabilities without filters lists the whole vocabulary, best first", () => {
  const s = createSampler({ ...PLAIN, seed: 11 });
  s.sample(logs([0.1, 0.4, 0.2, 0.3]), []);
  const { ids, probs } = s.lastProbabilities();
  assert.deepEqual([...ids], [1, 3, 2, 0]);
  assertClose(probs, [0.4, 0.3, 0.2, 0.1]);
  assert.throws(() => createSampler({}).lastProbabilities(), /sample\(\) has not completed/);
});

test("bad logits are rejected with the index", () => {
  const s = createSampler({ seed: 1 });
  assert.throws(() => s.sample(f32([0, NaN]), []), /logits\[1\] = NaN/);
  assert.throws(() => s.sample(f32([Infinity, 0]), []), /logits\[0\] = Infinity/);
  assert.throws(() => s.sample(new Float32Array(0), []), /logits: expected at least one token/);
  assert.throws(
    () => createSampler({ ...PLAIN, logitBias: { 0: -Infinity, 1: -Infinity } }).sample(f32([0, 0]), []),
    /every candidate token has logit -Infinity/,
  );
});

test("options are validated with the parameter name and the allowed range", () => {
  const bad: Array<[SamplingOptions, RegExp]> = [
    [{ temperature: -0.1 }, /temperature = -0.1: expected a finite number >= 0/],
    [{ temperature: NaN }, /temperature = NaN/],
    [{ topK: 1.5 }, /topK = 1.5: expected an integer >= 0/],
    [{ topK: -1 }, /topK = -1/],
    [{ topP: 1.01 }, /topP = 1.01: expected a number in \[0, 1\]/],
    [{ topP: -0.5 }, /topP = -0.5/],
    [{ minP: 2 }, /minP = 2: expected a number in \[0, 1\]/],
    [{ repeatPenalty: 0 }, /repeatPenalty = 0: expected a finite number > 0/],
    [{ repeatLastN: -2 }, /repeatLastN = -2: expected an integer >= -1/],
    [{ frequencyPenalty: Infinity }, /frequencyPenalty = Infinity: expected a finite number/],
    [{ presencePenalty: NaN }, /presencePenalty = NaN/],
    [{ seed: 1.5 }, /seed = 1.5: expected a safe integer/],
    [{ seed: 2 ** 53 }, /seed = 9007199254740992/],
    [{ logitBias: { 1: NaN } }, /logitBias\[1\] = NaN: expected a finite number, or -Infinity/],
    [{ logitBias: new Map([[-1, 1]]) }, /logitBias key = -1: expected a token id/],
    [{ logitBias: { abc: 1 } as unknown as Record<number, number> }, /logitBias key = "abc"/],
    [{ top_k: 3 } as unknown as SamplingOptions, /unknown sampling option "top_k"/],
    [{ temperature: "1" } as unknown as SamplingOptions, /temperature = "1"/],
  ];
  for (const [opts, re] of bad) assert.throws(() => createSampler(opts), re, JSON.stringify(opts));
  const d = resolveSamplingOptions({ seed: 5 });
  assert.deepEqual(
    { ...d, logitBias: [...d.logitBias] },
    { temperature: 0.8, topK: 40, typicalP: 1, epsilonCutoff: 0, etaCutoff: 0, topP: 0.95, minP: 0.05, repeatPenalty: 1, repeatLastN: 64, frequencyPenalty: 0, presencePenalty: 0, logitBias: [], seed: 5, minKeep: 0, samplerOrder: "llama.cpp" },
  );
});
