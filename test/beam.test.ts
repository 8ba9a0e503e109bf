import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { bannedNgramTokens, BeamSearch, beamSearch, type BeamSequence } from "../src/generation/beam.js";
import { loadModel } from "../src/index.js";
import type { LanguageModel } from "../src/models/model.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

const MODEL = "models/stories260K.gguf";
const EXPECTED = "models/stories260K.expected.json";
const skip = skipWithoutShared(MODEL) || skipWithoutShared(EXPECTED);
interface GoldenCase { prompt: string; promptTokens: number[]; completionTokens: number[] }
const cases = (): GoldenCase[] => JSON.parse(readFileSync(sharedFile(EXPECTED)!, "utf8")).cases;

test("no-repeat n-gram bans: the tokens that would complete an n-gram already present", () => {
  assert.deepEqual([...bannedNgramTokens([1, 2, 3, 1, 2], 3)], [3]);
  assert.deepEqual([...bannedNgramTokens([1, 2, 1, 4, 1], 2)].sort(), [2, 4]);
  assert.deepEqual([...bannedNgramTokens([5, 5], 1)].sort(), [5]);
  assert.deepEqual([...bannedNgramTokens([1, 2], 3)], []);
});

/**
 * The reference: the same definition (see beam.ts) written the plain way. Every beam's next
 * distribution comes from running prompt + beam tokens through the model from an empty cache,
 * and all B x vocab candidates are sorted outright.
 */
function naiveBeamSearch(model: LanguageModel, prompt: number[], B: number, maxTokens: number, endIds: Set<number>, lengthPenalty = 1): BeamSequence[] {
  const V = model.info.vocabSize;
  const logProbs = (tokens: number[]) => {
    const row = model.forward(tokens, model.createCache(tokens.length));
    const m = Math.max(...row);
    const lse = m + Math.log(row.reduce((s, x) => s + Math.exp(x - m), 0));
    return Array.from(row, (x) => x - lse);
  };
  const final: BeamSequence[] = [];
  const add = (h: BeamSequence) => {
    final.push(h);
    final.sort((a, b) => b.score - a.score);
    if (final.length > B) final.pop();
  };
  let beams = [{ tokens: [] as number[], score: 0 }];
  for (let step = 0; step < maxTokens; step++) {
    const cands: { b: number; v: number; s: number }[] = [];
    beams.forEach((beam, b) => logProbs([...prompt, ...beam.tokens]).forEach((lp, v) => cands.push({ b, v, s: beam.score + lp })));
    cands.sort((x, y) => y.s - x.s || x.b * V + x.v - (y.b * V + y.v));
    const next: { tokens: number[]; score: number }[] = [];
    // transformers' beams_to_keep: max(2, 1 + end ids) x B candidates
    for (let r = 0; r < Math.max(2, 1 + endIds.size) * B && next.length < B; r++) {
      const c = cands[r]!;
      if (endIds.has(c.v)) {
        if (r < B) add({ tokens: beams[c.b]!.tokens, sumLogprobs: c.s, score: c.s / (step + 1) ** lengthPenalty, finished: true });
      } else next.push({ tokens: [...beams[c.b]!.tokens, c.v], score: c.s });
    }
    if (final.length >= B && final[final.length - 1]!.score >= cands[0]!.s / (step + 1) ** lengthPenalty) return final;
    beams = next;
  }
  for (const b of beams) add({ tokens: b.tokens, sumLogprobs: b.score, score: b.score / b.tokens.length ** lengthPenalty, finished: false });
  return final;
}

test("stories260K: numBeams=1 equals greedy (llama.cpp's tokens) for every golden case", { skip }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { backend: "reference" });
  try {
    for (const c of cases()) {
      const r = await beamSearch(model.languageModel, c.promptTokens, { numBeams: 1, maxTokens: c.completionTokens.length, endIds: model.tokenizer.endOfGenerationIds });
      assert.deepEqual(r.sequences[0]!.tokens, c.completionTokens, c.prompt);
    }
  } finally {
    model.dispose();
  }
});

test("stories260K: numBeams=4 equals a from-scratch reference for a 16-token horizon (sequences and scores)", { skip }, async (t) => {
  const model = await loadModel(sharedFile(MODEL)!, { backend: "reference" });
  try {
    const endIds = new Set(model.tokenizer.endOfGenerationIds);
    // a short horizon where a story can end (EOS closes hypotheses) and one where it cannot
    const prompts = cases().map((c) => c.promptTokens).slice(0, 3);
    for (const [prompt, lengthPenalty] of prompts.map((p, i) => [p, i === 1 ? 0.5 : 1] as const)) {
      const ours = await beamSearch(model.languageModel, prompt, { numBeams: 4, numReturnSequences: 4, maxTokens: 16, endIds, lengthPenalty });
      const ref = naiveBeamSearch(model.languageModel, prompt, 4, 16, endIds, lengthPenalty);
      assert.equal(ours.sequences.length, ref.length);
      ours.sequences.forEach((s, i) => {
        assert.deepEqual(s.tokens, ref[i]!.tokens, `beam ${i}`);
        // 1e-6, not bits: like llama.cpp, a single-token step and a batched pass add the
        // attention's weighted values in different orders (an ulp or so per logit)
        assert.ok(Math.abs(s.score - ref[i]!.score) < 1e-6, `beam ${i} score ${s.score} vs ${ref[i]!.score}`);
        assert.equal(s.finished, ref[i]!.finished);
      });
      t.diagnostic(`beams ${JSON.stringify(ours.sequences.map((s) => [s.tokens.length, +s.score.toFixed(4)]))}, ${ours.stats.decodeSteps} beam-tokens in ${ours.stats.decodePasses} passes, ${ours.stats.forks} forks, peak ${ours.stats.kv.peakBlocksInUse} KV blocks`);
    }
    // stories rarely end within 16 tokens: let "." end a hypothesis too, so closing, evicting
    // and the stopping rule are exercised
    const period = model.tokenizer.encode(".", { addSpecialTokens: false }).at(-1)!;
    const withPeriod = new Set([...endIds, period]);
    let closed = 0;
    for (const prompt of prompts) {
      for (const lengthPenalty of [1, 2]) {
        const ours = await beamSearch(model.languageModel, prompt, { numBeams: 4, numReturnSequences: 4, maxTokens: 16, endIds: withPeriod, lengthPenalty });
        const ref = naiveBeamSearch(model.languageModel, prompt, 4, 16, withPeriod, lengthPenalty);
        assert.deepEqual(ours.sequences.map((s) => s.tokens), ref.map((s) => s.tokens));
        ours.sequences.forEach((s, i) => assert.ok(Math.abs(s.score - ref[i]!.score) < 1e-6));
        closed += ours.sequences.filter((s) => s.finished).length;
      }
    }
    assert.ok(closed > 0, "some hypotheses were closed by the end token");
  } finally {
    model.dispose();
  }
});

test("stories260K through generate(): numBeams returns the beams, the best as the completion", { skip }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { backend: "reference" });
  try {
    const c = cases()[0]!;
    const greedy = await model.generate(c.prompt, { numBeams: 1, maxTokens: 20 });
    assert.deepEqual(greedy.completionTokens, c.completionTokens.slice(0, 20));
    const r = await model.generate(c.prompt, { numBeams: 4, numReturnSequences: 3, maxTokens: 16 });
    const ref = naiveBeamSearch(model.languageModel, c.promptTokens, 4, 16, new Set(model.tokenizer.endOfGenerationIds));
    assert.equal(r.beams!.length, 3);
    assert.deepEqual(r.beams!.map((b) => b.tokens), ref.slice(0, 3).map((b) => b.tokens));
    assert.deepEqual(r.completionTokens, ref[0]!.tokens);
    assert.equal(r.completion, r.beams![0]!.text);
  } finally {
    model.dispose();
  }
});

/*
 * transformers' _beam_search keeps the top beams_to_keep = max(2, 1 + number of EOS ids) x num_beams
 * candidates "so that we have at least num_beams sequences non-finished to continue the live beam
 * search, in case the top num_beams all select an EOS token". With two end ids and both beams
 * preferring both of them, the best 2B candidates are all ends: tsllm kept 2B and ended the search
 * there (step returned undefined); the best 3B hold the two continuations that go on.
 */
test("beam search with two end ids keeps max(2, 1 + end ids) x numBeams candidates: the beams go on where the best 2B are all ends", () => {
  const row = (values: Record<number, number>) => Float32Array.from({ length: 6 }, (_, id) => values[id] ?? -20);
  const search = new BeamSearch([1], { numBeams: 2, maxTokens: 3, endIds: new Set([4, 5]) }, 6);
  assert.deepEqual(search.step([row({ 0: 0, 1: -0.5, 4: -10, 5: -10 })]), [{ parent: 0, token: 0 }, { parent: 0, token: 1 }]);
  const ends = row({ 4: 10, 5: 9.9, 2: 0, 3: -1 });
  // before: undefined (ended, with the two ends of beam 0 as its hypotheses)
  assert.deepEqual(search.step([ends, ends]), [{ parent: 0, token: 2 }, { parent: 1, token: 2 }]);
  assert.equal(search.done, false);
});
