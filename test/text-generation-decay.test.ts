import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { OptionError, pipeline, type TextGenerationPipeline } from "../src/index.js";
import { GPT2_EOS as EOS, gpt2TinyCopy, gpt2TinyGeneration, greedyFromLogits } from "./helpers/gpt2-tiny-generation.js";
import { skipWithoutShared } from "./helpers/shared.js";

/*
 * transformers' exponential_decay_length_penalty (ExponentialDecayLengthPenalty), which the
 * text-generation pipeline refused before. The judge: the model's own logits (LanguageModel.forward,
 * no sampler), processed here step by step as logits_process.py and _get_logits_processor write it,
 * in float32 as torch computes it: RepetitionPenaltyLogitsProcessor first (score < 0 ? score *
 * penalty : score / penalty, for each token in input_ids), then, once cur_len > start + the prompt's
 * length, EOS += |EOS| * (factor^(cur_len - regulation_start) - 1); MinNewTokensLength's -inf before
 * both. Their argmax, the lowest id winning ties as torch.argmax. The prompts hold EOS, so the
 * repetition penalty changes EOS's logit, and the two orders give other replies.
 */

const skip = skipWithoutShared("hf-oracle/gpt2-tiny.expected.json");

interface Processors {
  repetitionPenalty?: number;
  decay?: readonly [number, number];
  minNewTokens?: number;
  /** the decay before the penalty: the order tsllm's sampler would give a ban-like processor (not transformers') */
  swapped?: boolean;
}

describe("text-generation: exponential_decay_length_penalty as transformers' ExponentialDecayLengthPenalty, after the repetition penalty (gpt2-tiny)", { skip }, () => {
  const fixture = gpt2TinyGeneration("tsllm-textgen-decay-");
  const { dir, openFolder } = fixture;
  let gen: TextGenerationPipeline;
  before(() => {
    gen = fixture.gen();
  });

  const f = Math.fround;
  const reference = (prompt: readonly number[], max: number, p: Processors): number[] =>
    greedyFromLogits(gen, prompt, max, (scores, seq, generated) => {
      const s = scores.slice();
      if (generated < (p.minNewTokens ?? 0)) s[EOS] = -Infinity;
      const k = p.decay === undefined ? 0 : generated - p.decay[0];
      const decay = () => {
        const x = s[EOS]!;
        // (transformers' |-inf| * (factor^k - 1) is NaN there: tsllm keeps the ban, see Sequence.decay)
        if (k > 0 && x !== -Infinity) s[EOS] = f(x + f(Math.abs(x) * f(p.decay![1] ** k - 1)));
      };
      if (p.swapped) decay();
      const penalty = p.repetitionPenalty ?? 1;
      if (penalty !== 1) for (const id of new Set(seq)) s[id] = s[id]! < 0 ? f(s[id]! * penalty) : f(s[id]! / penalty);
      if (!p.swapped) decay();
      return s;
    });
  const text = (ids: number[]) => gen.model.tokenizer.decode(ids, { skipSpecialTokens: true });
  const reply = (g: TextGenerationPipeline, prompt: string, o: object) => fixture.reply(g, prompt, o);

  test("the pipeline's option: greedy equals transformers' order (repetition penalty, then the decay on EOS), not the other order nor no decay", async () => {
    const cases: [string, number, readonly [number, number]][] = [
      ["<|endoftext|>In the beginning", 1.3, [0, 2]],
      ["<|endoftext|>In the beginning", 2, [2, 2]],
      ["Hello<|endoftext|> world", 1.3, [2, 1.5]],
      ["Hello<|endoftext|> world", 2, [0, 1.5]],
    ];
    for (const [prompt, repetitionPenalty, decay] of cases) {
      const ids = gen.model.tokenizer.encode(prompt);
      assert.ok(ids.includes(EOS), "the prompt holds EOS, which the penalty then changes");
      const want = reference(ids, 12, { repetitionPenalty, decay });
      assert.notDeepEqual(reference(ids, 12, { repetitionPenalty, decay, swapped: true }), want, "the two orders part here");
      assert.notDeepEqual(reference(ids, 12, { repetitionPenalty }), want, "the decay ends the reply earlier here");
      // before: refused ("text-generation: unknown option exponentialDecayLengthPenalty")
      assert.equal(await reply(gen, prompt, { maxNewTokens: 12, repetitionPenalty, exponentialDecayLengthPenalty: decay }), text(want), `${prompt} ${repetitionPenalty} ${decay}`);
    }
  });

  test("sampling runs it too, after the penalty (top-k 1 takes the argmax of the processed scores)", async () => {
    const prompt = "Hello<|endoftext|> world";
    const want = reference(gen.model.tokenizer.encode(prompt), 12, { repetitionPenalty: 2, decay: [2, 1.5] });
    assert.equal(await reply(gen, prompt, { maxNewTokens: 12, doSample: true, topK: 1, seed: 3, repetitionPenalty: 2, exponentialDecayLengthPenalty: [2, 1.5] }), text(want));
  });

  test("an EOS held back by min_new_tokens stays held back where the decay has started (transformers' |-inf| * (factor^k - 1) is NaN there)", async () => {
    const prompt = "In the beginning";
    const ids = gen.model.tokenizer.encode(prompt);
    const want = reference(ids, 12, { decay: [0, 3], minNewTokens: 4 });
    assert.equal(want.length, 4, "EOS comes as soon as the hold ends");
    assert.equal(await reply(gen, prompt, { maxNewTokens: 12, minNewTokens: 4, exponentialDecayLengthPenalty: [0, 3] }), text(want));
  });

  test("generation_config.json and task_specific_params: exponential_decay_length_penalty is read (before: the folder was refused); a bad one names the file and key", async () => {
    const prompt = "<|endoftext|>In the beginning";
    const want = text(reference(gen.model.tokenizer.encode(prompt), 12, { repetitionPenalty: 1.3, decay: [0, 2] }));
    const file = await openFolder(gpt2TinyCopy(dir, "decay-file", { exponential_decay_length_penalty: [0, 2], repetition_penalty: 1.3 }));
    assert.equal(await reply(file, prompt, { maxNewTokens: 12 }), want);
    const task = await openFolder(gpt2TinyCopy(dir, "decay-task", {}, { task_specific_params: { "text-generation": { exponential_decay_length_penalty: [0, 2] } } }));
    assert.equal(await reply(task, prompt, { maxNewTokens: 12, repetitionPenalty: 1.3 }), want);
    // a call's own pair wins over the folder's; null in the file is none
    assert.equal(await reply(file, prompt, { maxNewTokens: 12, exponentialDecayLengthPenalty: [2, 2] }), text(reference(gen.model.tokenizer.encode(prompt), 12, { repetitionPenalty: 1.3, decay: [2, 2] })));
    const none = await openFolder(gpt2TinyCopy(dir, "decay-null", { exponential_decay_length_penalty: null }));
    assert.equal(await reply(none, prompt, { maxNewTokens: 12 }), text(reference(gen.model.tokenizer.encode(prompt), 12, {})));
    for (const [name, bad] of [["one", [3]], ["string", "3,1.5"], ["fraction", [1.5, 2]], ["nan", [1, "x"]]] as const) {
      const folder = gpt2TinyCopy(dir, `decay-bad-${name}`, { exponential_decay_length_penalty: bad });
      await assert.rejects(pipeline("text-generation", folder, { threads: 1 }), new Error(`${folder}/generation_config.json: exponential_decay_length_penalty: expected [start index, decay factor] (an integer and a finite number), found ${JSON.stringify(bad)}`), name);
    }
  });

  test("typical_p (before: refused when sampling) reaches the sampler as transformers' TypicalLogitsWarper, after min-p; 1 or more is none; 0 is refused", async () => {
    const prompt = "In the beginning";
    const sampled = (o: object) => reply(gen, prompt, { maxNewTokens: 12, doSample: true, seed: 11, ...o });
    // the library's sampler in the pipeline's order (the rule itself: test/sampling-typical.test.ts)
    const library = async (typicalP: number) => (await gen.model.generate(gen.model.tokenizer.encode(prompt), { maxTokens: 12, temperature: 1, topK: 50, topP: 1, minP: 0, typicalP, seed: 11, samplerOrder: "transformers", repeatPenalty: 1, repeatLastN: -1 })).completion;
    const typical = await sampled({ typicalP: 0.3 });
    assert.equal(typical, await library(0.3));
    assert.notEqual(typical, await sampled({}), "typical-p 0.3 cuts this distribution");
    assert.equal(await sampled({ typicalP: 1.5 }), await sampled({}));
    const folder = await openFolder(gpt2TinyCopy(dir, "typical", { typical_p: 0.3 }));
    assert.equal(await reply(folder, prompt, { maxNewTokens: 12, doSample: true, seed: 11 }), typical);
    await assert.rejects(gen(prompt, { maxNewTokens: 2, doSample: true, typicalP: 0 }), (e: unknown) => e instanceof OptionError && e.option === "typicalP");
    const zero = gpt2TinyCopy(dir, "typical-zero", { typical_p: 0 });
    await assert.rejects(pipeline("text-generation", zero, { threads: 1 }), new Error(`${zero}/generation_config.json: typical_p: expected a number above 0 (1 or more for none), found 0`));
  });

  test("a bad pair at a call is an OptionError naming exponentialDecayLengthPenalty; beam search and speculative decoding refuse it as the other processors", async () => {
    for (const bad of [[1], [1, Infinity], [0.5, 2], "1,2"]) {
      await assert.rejects(gen("In the beginning", { maxNewTokens: 4, exponentialDecayLengthPenalty: bad } as never), (e: unknown) => e instanceof OptionError && e.option === "exponentialDecayLengthPenalty", JSON.stringify(bad));
    }
    await assert.rejects(gen.model.generate("In the beginning", { maxTokens: 4, numBeams: 2, exponentialDecayLengthPenalty: [0, 2] }), (e: unknown) => e instanceof OptionError && /exponentialDecayLengthPenalty cannot be combined with beam search/.test(e.message));
    await assert.rejects(gen.model.generate("In the beginning", { maxTokens: 4, promptLookup: true, exponentialDecayLengthPenalty: [0, 2] }), (e: unknown) => e instanceof OptionError && /exponentialDecayLengthPenalty cannot be combined with speculative decoding/.test(e.message));
  });
});
