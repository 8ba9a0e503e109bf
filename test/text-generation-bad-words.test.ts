import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { OptionError, pipeline, type TextGenerationPipeline } from "../src/index.js";
import { GPT2_EOS as EOS, gpt2TinyCopy, gpt2TinyGeneration, greedyFromLogits } from "./helpers/gpt2-tiny-generation.js";
import { skipWithoutShared } from "./helpers/shared.js";

/*
 * transformers' suppress_tokens, begin_suppress_tokens, bad_words_ids and sequence_bias
 * (SuppressTokensLogitsProcessor, SuppressTokensAtBeginLogitsProcessor, NoBadWordsLogitsProcessor,
 * SequenceBiasLogitsProcessor), which the text-generation pipeline refused before. The judge: the
 * model's own logits (LanguageModel.forward, no sampler), banned or biased here step by step as
 * those processors do (sequence_bias before the repetition penalty, as _get_logits_processor
 * orders them), and their argmax.
 */

const skip = skipWithoutShared("hf-oracle/gpt2-tiny.expected.json");
const PROMPT = "In the beginning"; // greedy: 35577 11119 35169 7675 16492 26309 35169 35169 ...

/** whether `seq` ends with `prefix` (written here from SequenceBiasLogitsProcessor's matching_rows) */
const endsWith = (seq: readonly number[], prefix: readonly number[]) => prefix.length <= seq.length && prefix.every((t, i) => seq[seq.length - prefix.length + i] === t);

/** whether `seq` holds `part` anywhere */
const holds = (seq: readonly number[], part: readonly number[]) => seq.some((_, i) => part.every((t, j) => seq[i + j] === t));

interface Processors {
  suppress?: number[];
  beginSuppress?: number[];
  badWords?: number[][];
  bias?: [number[], number][];
  penalty?: number;
  /** the wrong order, to show the test tells them apart */
  biasAfterPenalty?: boolean;
}

describe("text-generation bans and biases token sequences as transformers' logits processors (gpt2-tiny)", { skip }, () => {
  const fixture = gpt2TinyGeneration("tsllm-textgen-bad-words-");
  const { dir, openFolder } = fixture;
  let gen: TextGenerationPipeline;
  before(() => {
    gen = fixture.gen();
  });
  const reply = (g: TextGenerationPipeline, o: object) => fixture.reply(g, PROMPT, o);

  /** greedy decoding from the model's raw logits, processed at each step as transformers' processors would; stops at EOS (not kept) or after `max` tokens */
  const reference = (max: number, p: Processors): number[] =>
    greedyFromLogits(gen, gen.model.tokenizer.encode(PROMPT), max, (scores, seq, generated) => {
      // SequenceBiasLogitsProcessor first: one-token sequences always, longer ones where their prefix ends the sequence
      const biased = () => { for (const [s, b] of p.bias ?? []) if (endsWith(seq, s.slice(0, -1))) scores[s[s.length - 1]!]! += b; };
      // RepetitionPenaltyLogitsProcessor over the prompt and the reply
      const penalized = () => { if (p.penalty !== undefined) for (const t of new Set(seq)) scores[t] = scores[t]! < 0 ? scores[t]! * p.penalty : scores[t]! / p.penalty; };
      if (p.biasAfterPenalty) { penalized(); biased(); } else { biased(); penalized(); }
      for (const s of p.badWords ?? []) if (endsWith(seq, s.slice(0, -1))) scores[s[s.length - 1]!] = -Infinity;
      for (const t of p.suppress ?? []) scores[t] = -Infinity;
      if (generated === 0) for (const t of p.beginSuppress ?? []) scores[t] = -Infinity;
      return scores;
    });
  const text = (ids: number[]) => gen.model.tokenizer.decode(ids, { skipSpecialTokens: true });
  const plain = () => reference(30, {});

  test("suppress_tokens: never generated, the argmax over the rest at each step; from the options, generation_config.json and task_specific_params", async () => {
    const suppress = [35169, 7675];
    assert.ok(suppress.every((t) => plain().includes(t)), "greedy alone takes them (else the ban has nothing to do)");
    const expected = reference(30, { suppress });
    assert.ok(!expected.some((t) => suppress.includes(t)));
    const r = await gen.model.generate(PROMPT, { maxTokens: 30, temperature: 0, suppressTokens: suppress });
    assert.deepEqual(r.completionTokens, expected);
    assert.equal(await reply(gen, { maxNewTokens: 30, suppressTokens: suppress }), text(expected));
    const file = await openFolder(gpt2TinyCopy(dir, "suppress-file", { suppress_tokens: suppress }));
    assert.equal(await reply(file, { maxNewTokens: 30 }), text(expected));
    assert.equal(await reply(file, { maxNewTokens: 30, suppressTokens: [] }), text(plain()), "a call's [] turns the folder's off");
    const task = await openFolder(gpt2TinyCopy(dir, "suppress-task", {}, { task_specific_params: { "text-generation": { suppress_tokens: suppress } } }));
    assert.equal(await reply(task, { maxNewTokens: 30 }), text(expected));
    // processors before warpers: top-k 1 samples the best token left
    assert.equal(await reply(gen, { maxNewTokens: 30, suppressTokens: suppress, doSample: true, topK: 1, seed: 2 }), text(expected));
  });

  test("begin_suppress_tokens: banned at the first generated step only", async () => {
    const first = plain()[0]!;
    const expected = reference(30, { beginSuppress: [first] });
    assert.notEqual(expected[0], first);
    assert.ok(expected.slice(1).includes(first) || !plain().slice(1).includes(first), "the ban ends after the first step");
    const r = await gen.model.generate(PROMPT, { maxTokens: 30, temperature: 0, beginSuppressTokens: [first] });
    assert.deepEqual(r.completionTokens, expected);
    const file = await openFolder(gpt2TinyCopy(dir, "begin-file", { begin_suppress_tokens: [first] }));
    assert.equal(await reply(file, { maxNewTokens: 30 }), text(expected));
  });

  test("bad_words_ids: a sequence's last token is banned where the rest ends the sequence; one-token ones always; EOS alone is left out", async () => {
    const badWords = [[35169, 35169], [26309]];
    assert.ok(holds(plain(), [35169, 35169]) && plain().includes(26309));
    const expected = reference(30, { badWords });
    assert.ok(!holds(expected, [35169, 35169]) && !expected.includes(26309));
    assert.ok(expected.includes(35169), "35169 alone is not banned");
    const r = await gen.model.generate(PROMPT, { maxTokens: 30, temperature: 0, badWordsIds: badWords });
    assert.deepEqual(r.completionTokens, expected);
    assert.equal(await reply(gen, { maxNewTokens: 30, badWordsIds: badWords }), text(expected));
    // NoBadWordsLogitsProcessor drops [eos] (the folder's eos_token_id): generation still ends
    const file = await openFolder(gpt2TinyCopy(dir, "bad-words-file", { bad_words_ids: [...badWords, [EOS]] }));
    assert.equal(await reply(file, { maxNewTokens: 30 }), text(expected));
  });

  test("sequence_bias: added to a sequence's last token where it completes it, before the repetition penalty", async () => {
    const bias: [number[], number][] = [[[35169], -3.5], [[11119, 7675], 4.0], [[35577, 11119, 16492], 2.5]];
    const expected = reference(30, { bias });
    assert.notDeepEqual(expected, plain(), "the bias changes the reply");
    assert.equal(await reply(gen, { maxNewTokens: 30, sequenceBias: bias }), text(expected));
    // a bias the repetition penalty then divides: another reply than the penalty first would give
    const raised: [number[], number][] = [[[35169], 3], ...bias.slice(1)];
    const penalized = reference(30, { bias: raised, penalty: 1.5 });
    assert.notDeepEqual(penalized, reference(30, { bias: raised, penalty: 1.5, biasAfterPenalty: true }), "the order tells here");
    assert.equal(await reply(gen, { maxNewTokens: 30, sequenceBias: raised, repetitionPenalty: 1.5 }), text(penalized));
    const r = await gen.model.generate(PROMPT, { maxTokens: 30, temperature: 0, sequenceBias: bias });
    assert.deepEqual(r.completionTokens, reference(30, { bias }));
    const file = await openFolder(gpt2TinyCopy(dir, "bias-file", { sequence_bias: bias }));
    assert.equal(await reply(file, { maxNewTokens: 30 }), text(reference(30, { bias })));
  });

  test("bad values are refused naming the option or the file's key; not with speculative decoding or beam search", async () => {
    const cases: [string, unknown][] = [["suppressTokens", [1.5]], ["beginSuppressTokens", "3"], ["badWordsIds", [[]]], ["badWordsIds", [1, 2]], ["sequenceBias", [[[1], "x"]]], ["badWordsIds", [[7, 60000]]]];
    // (a suppressTokens id past the vocabulary bans nothing, as transformers' isin mask: test/text-generation-forced-tokens.test.ts)
    for (const [k, v] of cases) {
      await assert.rejects(gen.model.generate(PROMPT, { maxTokens: 2, [k]: v }), (e: unknown) => e instanceof Error && (e as OptionError).option === k && e.message.startsWith(k), `${k} ${JSON.stringify(v)}`);
    }
    await assert.rejects(gen(PROMPT, { maxNewTokens: 2, badWordsIds: [[]] }), (e: unknown) => e instanceof OptionError && e.option === "badWordsIds");
    await assert.rejects(gen.model.generate(PROMPT, { maxTokens: 2, suppressTokens: [5], promptLookup: true }), (e: unknown) => e instanceof OptionError && e.option === "suppressTokens");
    await assert.rejects(gen.model.generate(PROMPT, { maxTokens: 2, badWordsIds: [[5]], numBeams: 2 }), (e: unknown) => e instanceof OptionError && e.option === "badWordsIds");
    const bad = gpt2TinyCopy(dir, "bad", { bad_words_ids: [[1], []] });
    await assert.rejects(pipeline("text-generation", bad, { threads: 1 }), new Error(`${bad}/generation_config.json: bad_words_ids: expected a list of non-empty token id lists, found [[1],[]]`));
  });
});
