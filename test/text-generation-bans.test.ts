import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { OptionError, pipeline, type TextGenerationPipeline } from "../src/index.js";
import { GPT2_EOS as EOS, GPT2_TINY, gpt2TinyCopy, gpt2TinyGeneration, greedyFromLogits } from "./helpers/gpt2-tiny-generation.js";
import { skipWithoutShared } from "./helpers/shared.js";

/*
 * transformers' no_repeat_ngram_size, min_new_tokens and min_length (NoRepeatNGramLogitsProcessor,
 * MinNewTokensLengthLogitsProcessor, MinLengthLogitsProcessor), which the text-generation pipeline
 * refused before. The judge: the model's own logits (LanguageModel.forward, no sampler), banned
 * here step by step as those processors ban them, and their argmax: a ban the library got wrong,
 * or applied after another step than transformers, gives other tokens.
 */

const skip = skipWithoutShared("hf-oracle/gpt2-tiny.expected.json");
const PROMPT = "In the beginning"; // greedy repeats itself here (35169 35169 35169 ...)

/** the tokens that would complete an n-gram already in `seq` (written here from transformers' _get_ngrams / _get_generated_ngrams) */
function ngramBans(seq: readonly number[], n: number): Set<number> {
  const out = new Set<number>();
  if (seq.length < n - 1) return out;
  const tail = seq.slice(seq.length - (n - 1)).join(",");
  for (let i = 0; i + n <= seq.length; i++) if (seq.slice(i, i + n - 1).join(",") === tail) out.add(seq[i + n - 1]!);
  return out;
}

/** whether `seq` holds some n-gram twice */
function repeatsNgram(seq: readonly number[], n: number): boolean {
  const seen = new Set<string>();
  for (let i = 0; i + n <= seq.length; i++) {
    const key = seq.slice(i, i + n).join(",");
    if (seen.has(key)) return true;
    seen.add(key);
  }
  return false;
}

describe("text-generation bans tokens as transformers' logits processors (gpt2-tiny)", { skip }, () => {
  const fixture = gpt2TinyGeneration("tsllm-textgen-bans-");
  const { dir, openFolder } = fixture;
  let gen: TextGenerationPipeline;
  before(() => {
    gen = fixture.gen();
  });
  const reply = (g: TextGenerationPipeline, o: object) => fixture.reply(g, PROMPT, o);

  /**
   * greedy decoding from the model's raw logits: `ngram` bans, and `ends` banned while fewer than
   * `minNew` tokens are generated; stops at one of `ends` (not kept) or after `max` tokens
   */
  const reference = (prompt: number[], max: number, { ngram = 0, minNew = 0, ends = [EOS] }: { ngram?: number; minNew?: number; ends?: number[] }): number[] =>
    greedyFromLogits(gen, prompt, max, (scores, seq, generated) => {
      const banned = ngram > 0 ? ngramBans(seq, ngram) : new Set<number>();
      if (generated < minNew) for (const e of ends) banned.add(e);
      for (const id of banned) scores[id] = -Infinity;
      return scores;
    }, ends);
  const text = (ids: number[]) => gen.model.tokenizer.decode(ids, { skipSpecialTokens: true });

  test("no_repeat_ngram_size 2, greedy: the argmax over the banned logits at each step, no 2-gram twice; from the options, generation_config.json and task_specific_params", async () => {
    const prompt = gen.model.tokenizer.encode(PROMPT);
    const plain = reference(prompt, 40, {});
    assert.ok(repeatsNgram([...prompt, ...plain], 2), "greedy alone repeats a 2-gram here (else the ban has nothing to do)");
    const expected = reference(prompt, 40, { ngram: 2 });
    assert.ok(!repeatsNgram([...prompt, ...expected], 2));
    assert.notDeepEqual(expected, plain);
    // the library: token for token
    const r = await gen.model.generate(PROMPT, { maxTokens: 40, temperature: 0, noRepeatNgramSize: 2 });
    assert.deepEqual(r.completionTokens, expected);
    // the pipeline: a call's option, the pipeline's, the folder's files
    assert.equal(await reply(gen, { maxNewTokens: 40, noRepeatNgramSize: 2 }), text(expected));
    const made = await openFolder(GPT2_TINY, { noRepeatNgramSize: 2 });
    assert.equal(await reply(made, { maxNewTokens: 40 }), text(expected));
    assert.equal(await reply(made, { maxNewTokens: 40, noRepeatNgramSize: 0 }), text(plain), "a call's 0 turns the pipeline's off");
    const file = await openFolder(gpt2TinyCopy(dir, "ngram-file", { no_repeat_ngram_size: 2 }));
    assert.equal(await reply(file, { maxNewTokens: 40 }), text(expected));
    const task = await openFolder(gpt2TinyCopy(dir, "ngram-task", {}, { task_specific_params: { "text-generation": { no_repeat_ngram_size: 2 } } }));
    assert.equal(await reply(task, { maxNewTokens: 40 }), text(expected));
  });

  test("no_repeat_ngram_size with sampling: the bans come before the warpers (top-k 1 samples the banned argmax); n-grams never repeat", async () => {
    const prompt = gen.model.tokenizer.encode(PROMPT);
    const expected = reference(prompt, 30, { ngram: 2 });
    // transformers' processors before its warpers: top-k 1 keeps the best token left after the bans
    assert.equal(await reply(gen, { maxNewTokens: 30, noRepeatNgramSize: 2, doSample: true, topK: 1, seed: 3 }), text(expected));
    for (const seed of [1, 2, 3]) {
      const r = await gen.model.generate(PROMPT, { maxTokens: 60, temperature: 1.5, topK: 0, topP: 1, minP: 0, seed, noRepeatNgramSize: 2 });
      assert.ok(!repeatsNgram([...prompt, ...r.completionTokens], 2), `seed ${seed}: ${r.completionTokens.join(",")}`);
    }
  });

  test("min_new_tokens and min_length: EOS cannot come before; min_new_tokens wins over min_length", async () => {
    const prompt = gen.model.tokenizer.encode(PROMPT);
    // an end token greedy takes at once: the first token of the plain reply, made an EOS of the folder (generation_config.json's eos_token_id list)
    const first = reference(prompt, 1, {})[0]!;
    const ends = [EOS, first];
    const folder = (name: string, extra: object) => gpt2TinyCopy(dir, name, { eos_token_id: ends, ...extra });
    const early = await openFolder(folder("eos", {}));
    assert.equal(await reply(early, { maxNewTokens: 30 }), "", "the plain reply ends at once");
    const expected = reference(prompt, 30, { minNew: 5, ends });
    assert.ok(expected.length >= 5);
    assert.equal(await reply(early, { maxNewTokens: 30, minNewTokens: 5 }), text(expected));
    const r = await early.model.generate(PROMPT, { maxTokens: 30, temperature: 0, minNewTokens: 5 });
    assert.deepEqual(r.completionTokens, expected);
    // the folder's min_new_tokens; its min_length counts the prompt's tokens
    assert.equal(await reply(await openFolder(folder("min-new", { min_new_tokens: 5 })), { maxNewTokens: 30 }), text(expected));
    assert.equal(await reply(await openFolder(folder("min-length", { min_length: prompt.length + 5 })), { maxNewTokens: 30 }), text(expected));
    assert.equal(await reply(early, { maxNewTokens: 30, minLength: prompt.length + 5 }), text(expected));
    // _prepare_generated_length: a min_new_tokens sets min_length to it plus the prompt's length, whoever gave min_length
    const both = await openFolder(folder("both", { min_new_tokens: 5, min_length: 100 }));
    assert.equal(await reply(both, { maxNewTokens: 30 }), text(expected));
    assert.equal(await reply(both, { maxNewTokens: 30, minLength: 100 }), text(expected));
    assert.equal(await reply(both, { maxNewTokens: 30, minNewTokens: 0 }), "", "a call's 0 holds nothing back, the file's min_length 100 included");
  });

  test("bad values are refused naming the option or the file's key", async () => {
    for (const [k, v] of [["noRepeatNgramSize", -1], ["minNewTokens", 1.5], ["minLength", "3"]] as const) {
      await assert.rejects(gen(PROMPT, { maxNewTokens: 2, [k]: v }), (e: unknown) => e instanceof OptionError && e.option === k && e.message.startsWith(`${k} must be an integer >= 0`));
    }
    const bad = gpt2TinyCopy(dir, "bad", { no_repeat_ngram_size: 2.5 });
    await assert.rejects(pipeline("text-generation", bad, { threads: 1 }), new Error(`${bad}/generation_config.json: no_repeat_ngram_size: expected an integer >= 0 (0 for none), found 2.5`));
    await assert.rejects(gen.model.generate(PROMPT, { maxTokens: 2, minNewTokens: 2, promptLookup: true }), (e: unknown) => e instanceof OptionError && e.option === "minNewTokens");
    await assert.rejects(gen.model.generate(PROMPT, { maxTokens: 2, minNewTokens: 2, numBeams: 2 }), (e: unknown) => e instanceof OptionError && e.option === "minNewTokens");
  });
});
