import assert from "node:assert/strict";
import { test } from "node:test";
import {
  applyPenalties,
  applyTemperature,
  createCandidates,
  drawCandidate,
  loadCandidates,
  minP,
  topK,
  topP,
  type Candidates,
} from "../src/sampling/index.js";

// Input and expected values from llama.cpp's own unit test, tests/test-sampling.cpp (MIT),
// as bundled with node-llama-cpp 3.21.1. Its harness: logits = logf(probs) in id order, the
// sampler under test, then the dist sampler, which leaves each survivor's probability in
// the survivors' order; expected values are compared to 1e-5.

const half = { nextDouble: () => 0.5 };

function run(probs: number[], apply: (c: Candidates) => void): number[] {
  const logits = Float32Array.from(probs, Math.log);
  const c = loadCandidates(createCandidates(logits.length), logits);
  apply(c);
  drawCandidate(c, half);
  return [...c.probs.subarray(0, c.size)];
}

function assertProbs(actual: number[], expected: number[], what: string): void {
  assert.equal(actual.length, expected.length, `${what}: [${actual}] vs [${expected}]`);
  expected.forEach((e, i) => assert.ok(Math.abs(actual[i]! - e) < 1e-5, `${what}[${i}]: ${actual[i]} vs ${e}`));
}

const P = [0.1, 0.2, 0.3, 0.4];

test("llama.cpp vectors: temperature", () => {
  assertProbs(run(P, (c) => applyTemperature(c, 1)), [0.1, 0.2, 0.3, 0.4], "temp 1");
  // llama.cpp leaves the losers at -inf (p = 0) where this sampler drops them: compare the survivor
  assertProbs(run(P, (c) => applyTemperature(c, 0)), [1], "temp 0");
});

test("llama.cpp vectors: top-k", () => {
  assertProbs(run(P, (c) => topK(c, 1)), [1], "k 1");
  assertProbs(run(P, (c) => topK(c, 3)), [0.44444, 0.33333, 0.22222], "k 3");
  assertProbs(run(P, (c) => topK(c, 4)), [0.4, 0.3, 0.2, 0.1], "k 4");
  assertProbs(run(P, (c) => topK(c, 0)), [0.1, 0.2, 0.3, 0.4], "k 0");
});

test("llama.cpp vectors: top-p", () => {
  assertProbs(run(P, (c) => topP(c, 0)), [1], "p 0");
  assertProbs(run(P, (c) => topP(c, 0.7)), [0.571429, 0.428571], "p 0.7");
  assertProbs(run(P, (c) => topP(c, 0.8)), [0.44444, 0.33333, 0.22222], "p 0.8");
  assertProbs(run(P, (c) => topP(c, 1)), [0.1, 0.2, 0.3, 0.4], "p 1");
});

test("llama.cpp vectors: min-p", () => {
  const cases: Array<[number, number[]]> = [
    [0.0, [0.1, 0.2, 0.3, 0.4]],
    [0.24, [0.1, 0.2, 0.3, 0.4]],
    [0.26, [0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9]],
    [0.49, [0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9]],
    [0.51, [0.3 / 0.7, 0.4 / 0.7]],
    [0.74, [0.3 / 0.7, 0.4 / 0.7]],
    [0.76, [1]],
    [1.0, [1]],
    [1.05, [1]],
  ];
  for (const [p, expected] of cases) assertProbs(run(P, (c) => minP(c, Math.fround(p))), expected, `min-p ${p}`);
});

test("llama.cpp vectors: repeat, frequency and presence penalties", () => {
  const flat = [0.2, 0.2, 0.2, 0.2, 0.2];
  const cases: Array<[number[], number[], number, number, number]> = [
    [[0], [0, 0.25, 0.25, 0.25, 0.25], 50, 0, 0],
    [[0, 1, 2], [0, 0, 0, 0.5, 0.5], 50, 0, 0],
    [[0, 1, 2, 0, 0], [0, 0, 0, 0.5, 0.5], 50, 0, 0],
    [[0], [0.000011, 0.249997, 0.249997, 0.249997, 0.249997], 1, 5, 5],
    [[0, 1, 2], [0.000023, 0.000023, 0.000023, 0.499966, 0.499966], 1, 5, 5],
    [[0, 1, 2, 0, 0], [0.0, 0.000023, 0.000023, 0.499977, 0.499977], 1, 5, 5],
  ];
  for (const [history, expected, repeatPenalty, frequencyPenalty, presencePenalty] of cases) {
    const got = run(flat, (c) =>
      // llama.cpp's test sizes the window to the history: every listed token counts
      applyPenalties(c.logits, history, { repeatPenalty, repeatLastN: history.length, frequencyPenalty, presencePenalty }),
    );
    assertProbs(got, expected, `penalties ${repeatPenalty}/${frequencyPenalty}/${presencePenalty} on [${history}]`);
  }
});

/**
 * llama.cpp's test_sampler_queue: vocabulary 10000 with logit = logf(id) (token 0 at -inf,
 * so p(id) is proportional to id), the samplers named by the letters applied in turn (top-p
 * and min-p with min_keep 1), checking size and first/last ids after each. The expected
 * values follow that test's arithmetic, float32 where it uses floats.
 */
function samplerQueue(sequence: string, k: number, p: number, m: number): void {
  const n = 10000;
  const logits = Float32Array.from({ length: n }, (_, i) => Math.log(i));
  const c = loadCandidates(createCandidates(n), logits);
  const pf = Math.fround(p);
  const mf = Math.fround(m);
  let minId = 0;
  const maxId = n - 1;
  const what = `queue ${sequence} k=${k} p=${p} m=${m}`;
  for (const s of sequence) {
    if (s === "k") topK(c, k);
    else if (s === "p") topP(c, pf, 1);
    else minP(c, mf, 1);
    drawCandidate(c, half);
    const size = c.size;
    const first = c.ids[0];
    const last = c.ids[size - 1];
    if (s === "k") {
      const expectedSize = Math.min(size, k);
      minId = Math.max(minId, n - k);
      assert.equal(size, expectedSize, `${what}: size after k`);
      assert.equal(first, maxId, `${what}: first after k`);
      assert.equal(last, minId, `${what}: last after k`);
    } else if (s === "p") {
      const divisor = (n * (n - 1)) / 2 - (minId * (minId - 1)) / 2;
      const target = Math.ceil(Math.fround(pf * Math.fround(divisor)));
      minId = n;
      let expectedSize = 0;
      let cumsum = 0;
      do {
        minId--;
        expectedSize++;
        cumsum += minId;
      } while (cumsum < target);
      if (minId === 1) {
        minId--;
        expectedSize++;
      }
      assert.equal(size, expectedSize, `${what}: size after p`);
      if (c.sorted) {
        assert.equal(first, maxId, `${what}: first after p`);
        assert.equal(last, minId, `${what}: last after p`);
      }
    } else {
      let expectedSize = Math.ceil(Math.fround(Math.fround(1 - mf) * n));
      expectedSize = Math.min(Math.max(expectedSize, 1), size);
      minId = Math.floor(Math.fround(mf * n));
      minId = Math.min(Math.max(minId, 1, n - size), n - 1);
      assert.equal(size, expectedSize, `${what}: size after m`);
      if (c.sorted) {
        assert.equal(first, maxId, `${what}: first after m`);
        assert.equal(last, minId, `${what}: last after m`);
      }
    }
  }
}

test("llama.cpp vectors: sampler queues over a 10000-token vocabulary", () => {
  const cases: Array<[string, number, number, number]> = [
    ["k", 10000, 1, 1], ["k", 1, 1, 1], ["p", 10000, 1, 1], ["p", 10000, 0, 1],
    ["m", 10000, 1, 1], ["m", 10000, 1, 1e-12],
    ["k", 100, 1, 1], ["p", 10000, 0.0003, 1], ["p", 10000, 0.8, 1],
    ["m", 10000, 1, 9997.9 / 9999], ["m", 10000, 1, 0.1],
    ["kp", 100, 0.8, 0.1], ["km", 100, 0.8, 0.1], ["pk", 100, 0.8, 0.1], ["pm", 100, 0.8, 0.1],
    ["mk", 100, 0.8, 0.1], ["mp", 100, 0.8, 9997.9 / 9999], ["mp", 100, 0.8, 0.1],
    ["kpm", 100, 0.8, 0.1], ["kmp", 100, 0.8, 0.1], ["pkm", 100, 0.8, 0.1], ["pmk", 100, 0.8, 0.1],
    ["mkp", 100, 0.8, 0.1], ["mpk", 100, 0.8, 0.1],
  ];
  for (const [seq, k, p, m] of cases) samplerQueue(seq, k, p, m);
});
