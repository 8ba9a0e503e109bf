import assert from "node:assert/strict";
import { test } from "node:test";
import { createCandidates, createSampler, infillFilter, loadCandidates, type InfillVocabulary } from "../src/sampling/index.js";

/*
 * llama.cpp's infill sampler (src/llama-sampling.cpp, llama_sampler_infill_apply, read for
 * this): softmax over the candidates sorted by logit; if 3 * p_eog_sum * n > p_txt_sum keep only
 * the end-of-generation tokens; else for i0, i1 in candidate order, where token_to_piece(i0) (not
 * empty) begins token_to_piece(i1), the one with the higher p takes the other's p and the other
 * gets logit -inf and p 0; then keep text tokens with p >= 0.2 (EOG always), renormalize, keep
 * text tokens with p >= 1 / (n_non_eog + 1); with no text token after the first cut, the single
 * token_eot() with logit 1. The expected survivors below are worked out from those rules by hand.
 */

const EOT = 9;

/** a vocabulary of pieces by id; "" is a control token (token_to_piece renders it empty) */
function vocabOf(pieces: readonly string[], eog: readonly number[]): InfillVocabulary {
  const bytes = pieces.map((p) => new TextEncoder().encode(p));
  return { isEndOfGeneration: (id) => eog.includes(id), pieceBytes: (id) => bytes[id]!, endOfTurn: EOT };
}

/** the surviving ids (in order) and their logits after the infill step on these logits */
function survivors(logits: readonly number[], vocab: InfillVocabulary): { ids: number[]; logits: number[] } {
  const c = loadCandidates(createCandidates(0), Float32Array.from(logits));
  infillFilter(c, vocab);
  return { ids: [...c.ids.subarray(0, c.size)], logits: [...c.logits.subarray(0, c.size)] };
}

const NONE = -Infinity;

test("infill: end-of-generation tokens alone where 3 * p(eog) * candidates beats p(text)", () => {
  // p = e^2, e^1, e^1 over 12.825: .576 .212 .212; 3 * .212 * 3 = 1.9 > .788
  const vocab = vocabOf(["a", "b", ""], [2]);
  assert.deepEqual(survivors([2, 1, 1], vocab).ids, [2]);
  // the EOG token at logit 0: p .090, 3 * .090 * 3 = .81 < .91: text goes on (a .665 and b .245 pass 0.2, then 1/3: b dropped)
  assert.deepEqual(survivors([2, 1, 0], vocab).ids, [0, 2]);
});

test("infill: a token whose piece begins another's merges into the likelier of the two", () => {
  // ids 0 "def" 2.0, 1 "de" 1.9, 2 "xyz" 2.2, 3 "q" 1.0, 4 EOG -10: p .286 .259 .350 .105 ~0;
  // "de" begins "def": def (.286 > .259) takes it (.545), de dropped; q < 0.2 dropped; EOG kept;
  // renormalized xyz .391 def .609, both >= 1/3
  const vocab = vocabOf(["def", "de", "xyz", "q", ""], [4]);
  const r = survivors([2.0, 1.9, 2.2, 1.0, -10], vocab);
  assert.deepEqual(r.ids, [2, 0, 4]);
  // survivors keep their own logits (the draw that follows is over their softmax again)
  assert.deepEqual(r.logits, [Math.fround(2.2), 2, -10]);
  // "de" likelier than "def": "de" takes def's probability and def is dropped
  assert.deepEqual(survivors([1.9, 2.0, 2.2, 1.0, -10], vocab).ids, [2, 1, 4]);
  // without a shared prefix both pass 0.2 on their own, and the second cut (1/4 = .25) drops none of them
  const plain = vocabOf(["def", "ab", "xyz", "q", ""], [4]);
  assert.deepEqual(survivors([2.0, 1.9, 2.2, 1.0, -10], plain).ids, [2, 0, 1, 4]);
});

test("infill: the second cut drops text tokens below 1 / (text tokens + 1)", () => {
  // p .5 .28 .22: all >= 0.2, three text tokens: threshold .25 drops the third
  const vocab = vocabOf(["a", "b", "c"], []);
  assert.deepEqual(survivors([Math.log(0.5), Math.log(0.28), Math.log(0.22)], vocab).ids, [0, 1]);
});

test("infill: no text token of p 0.2 or more leaves the end-of-turn token alone, logit 1", () => {
  // six equal text tokens (p 1/6 each), no shared prefixes, no EOG among the candidates
  const vocab = vocabOf(["a", "b", "c", "d", "e", "f"], []);
  assert.deepEqual(survivors([0, 0, 0, 0, 0, 0], vocab), { ids: [EOT], logits: [1] });
  // through the sampler, after top-k and top-p as llama.vim's chain ["top_k", "top_p", "infill"] puts them
  const sampler = createSampler({ samplerOrder: ["topK", "topP", "infill"], topK: 40, topP: 0.99, seed: 1 }, vocab);
  assert.equal(sampler.sample(new Float32Array([0, 0, 0, 0, 0, 0]), []), EOT);
});

test("infill: logits already -Infinity take no part in merging", () => {
  // "a" banned (-inf): it begins "ab" but merges nothing; ab .5, c .5 pass both cuts (1/3)
  const vocab = vocabOf(["a", "ab", "c"], []);
  assert.deepEqual(survivors([NONE, 0, 0], vocab).ids, [1, 2]);
});

test("infill: a chain with the infill step needs the vocabulary", () => {
  assert.throws(() => createSampler({ samplerOrder: ["topK", "infill"] }), /samplerOrder: the "infill" step needs the model's vocabulary/);
});

/**
 * llama_sampler_infill_apply transcribed as written (its double loop over every pair, floats as
 * Math.fround), over candidates sorted best first: the survivors' ids. The sampler finds the
 * merging pairs another way; on random vocabularies of short, much-shared pieces both must agree.
 */
function literalInfill(sorted: { id: number; logit: number }[], vocab: InfillVocabulary): number[] {
  const f = Math.fround;
  const max = sorted[0]!.logit;
  let cum = 0;
  const cur = sorted.map((t) => ({ ...t, p: Math.exp(t.logit - max) }));
  for (const t of cur) cum += t.p;
  for (const t of cur) t.p = f(t.p / cum);
  const eog = (t: { id: number }) => vocab.isEndOfGeneration(t.id);
  let txt = 0;
  let pe = 0;
  for (const t of cur) if (eog(t)) pe = f(pe + t.p); else txt = f(txt + t.p);
  if (f(f(3 * pe) * cur.length) > txt) return cur.filter(eog).map((t) => t.id);
  const piece = (t: { id: number }) => new TextDecoder().decode(vocab.pieceBytes(t.id));
  for (let i0 = 0; i0 < cur.length; i0++) {
    for (let i1 = 0; i1 < cur.length; i1++) {
      if (cur[i0]!.logit === -Infinity) break;
      if (i0 === i1 || cur[i1]!.logit === -Infinity) continue;
      const a = piece(cur[i0]!);
      const b = piece(cur[i1]!);
      if (a.length > 0 && a.length <= b.length && b.startsWith(a)) {
        let [dst, src] = [i0, i1];
        if (cur[i1]!.p > cur[i0]!.p) [dst, src] = [src, dst];
        cur[dst]!.p = f(cur[dst]!.p + cur[src]!.p);
        cur[src]!.logit = -Infinity;
        cur[src]!.p = 0;
      }
    }
  }
  let kept = cur.filter((t) => !(t.p < f(0.2) && !eog(t)));
  const nonEog = kept.filter((t) => !eog(t)).length;
  if (nonEog === 0) return [EOT];
  let sum = 0;
  for (const t of kept) sum = f(sum + t.p);
  for (const t of kept) t.p = f(t.p / sum);
  const threshold = f(1 / (nonEog + 1));
  kept = kept.filter((t) => !(t.p < threshold && !eog(t)));
  return kept.map((t) => t.id);
}

test("infill: the merges found through the vocabulary's trie of pieces are those of llama.cpp's double loop (random vocabularies)", () => {
  let seed = 12345;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let round = 0; round < 300; round++) {
    const n = 2 + Math.floor(rand() * 12);
    const pieces = Array.from({ length: n }, () => (rand() < 0.1 ? "" : Array.from({ length: 1 + Math.floor(rand() * 3) }, () => "ab"[Math.floor(rand() * 2)]).join("")));
    const eog = pieces.flatMap((p, i) => (p === "" && rand() < 0.7 ? [i] : []));
    const vocab = vocabOf(pieces, eog);
    // logits on a coarse grid: ties happen, and the lower id goes first, as the sampler orders them
    const logits = Array.from({ length: n }, () => (rand() < 0.05 ? -Infinity : Math.round(rand() * 8) / 2));
    if (logits.every((l) => l === -Infinity)) logits[0] = 0;
    const sorted = logits.map((logit, id) => ({ id, logit: Math.fround(logit) })).sort((a, b) => b.logit - a.logit || a.id - b.id);
    assert.deepEqual(survivors(logits, vocab).ids, literalInfill(sorted, vocab), JSON.stringify({ pieces, eog, logits }));
  }
});

test("infill: one vocabulary over many steps, each on a few of its tokens (as after top_k), new ones coming up late: the merges of llama.cpp's double loop", () => {
  // (the step keeps the vocabulary's pieces between steps: a token first seen at a later step
  // must still be found among the prefixes of those seen before)
  let seed = 777;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const size = 60;
  const pieces = Array.from({ length: size }, () => (rand() < 0.08 ? "" : Array.from({ length: 1 + Math.floor(rand() * 4) }, () => "abc"[Math.floor(rand() * 3)]).join("")));
  const vocab = vocabOf(pieces, pieces.flatMap((p, i) => (p === "" && rand() < 0.5 ? [i] : [])));
  for (let round = 0; round < 400; round++) {
    // the ids a step may see grow over the rounds, so ids keep coming up for the first time
    const reach = Math.min(size, 4 + Math.floor(round / 6));
    const chosen = [...new Set(Array.from({ length: 2 + Math.floor(rand() * 10) }, () => Math.floor(rand() * reach)))];
    const logits = chosen.map(() => Math.fround(Math.round(rand() * 8) / 2));
    const c = createCandidates(chosen.length);
    chosen.forEach((id, i) => { c.ids[i] = id; c.logits[i] = logits[i]!; });
    c.size = chosen.length;
    infillFilter(c, vocab);
    const sorted = chosen.map((id, i) => ({ id, logit: logits[i]! })).sort((a, b) => b.logit - a.logit || a.id - b.id);
    assert.deepEqual([...c.ids.subarray(0, c.size)], literalInfill(sorted, vocab), JSON.stringify({ round, chosen, logits }));
  }
});
