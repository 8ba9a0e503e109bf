import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { OptionError, pipeline, type TextGenerationPipeline } from "../src/index.js";
import { GPT2_EOS as EOS, GPT2_TINY, gpt2TinyCopy, gpt2TinyGeneration, greedyFromLogits } from "./helpers/gpt2-tiny-generation.js";
import { skipWithoutShared } from "./helpers/shared.js";

/*
 * transformers' forced_bos_token_id and forced_eos_token_id (ForcedBOSTokenLogitsProcessor,
 * ForcedEOSTokenLogitsProcessor), which the text-generation pipeline refused before. The judge:
 * the model's own logits (LanguageModel.forward, no sampler), processed here step by step as
 * logits_process.py writes those processors (ForcedBOS where input_ids are one token long,
 * ForcedEOS where they are max_length - 1 long: every score -inf but the forced ones' 0; the
 * suppressions after them, SuppressTokensAtBegin's begin_index one on where a forced BOS fills a
 * one-token prompt's first step, as _get_logits_processor sets it), and their argmax, the lowest
 * id winning ties as torch.argmax.
 */

const skip = skipWithoutShared("hf-oracle/gpt2-tiny.expected.json");
const PROMPT = "In the beginning"; // greedy: 35577 11119 35169 7675 16492 26309 35169 35169 ...

interface Processors {
  forcedBos?: number;
  forcedEos?: number[];
  beginSuppress?: number[];
}

describe("text-generation forces tokens as transformers' ForcedBOS / ForcedEOS logits processors (gpt2-tiny)", { skip }, () => {
  const fixture = gpt2TinyGeneration("tsllm-textgen-forced-");
  const { dir, openFolder } = fixture;
  let gen: TextGenerationPipeline;
  before(() => {
    gen = fixture.gen();
  });

  /** greedy decoding of `prompt` (token ids) from the model's raw logits with the processors; stops at EOS (not kept) or after `max` new tokens */
  const reference = (prompt: number[], max: number, p: Processors): number[] => {
    const maxLength = prompt.length + max;
    const beginIndex = prompt.length > 1 || p.forcedBos === undefined ? prompt.length : prompt.length + 1;
    return greedyFromLogits(gen, prompt, max, (scores, seq) => {
      if (p.forcedBos !== undefined && seq.length === 1) {
        scores = scores.map(() => -Infinity);
        scores[p.forcedBos] = 0;
      }
      if (p.forcedEos !== undefined && seq.length === maxLength - 1) {
        scores = scores.map(() => -Infinity);
        for (const t of p.forcedEos) scores[t] = 0;
      }
      if (seq.length === beginIndex) for (const t of p.beginSuppress ?? []) scores[t] = -Infinity;
      return scores;
    });
  };
  const text = (ids: number[]) => gen.model.tokenizer.decode(ids, { skipSpecialTokens: true });
  const promptIds = () => gen.model.tokenizer.encode(PROMPT);
  const reply = (g: TextGenerationPipeline, o: object, prompt = PROMPT) => fixture.reply(g, prompt, o);

  test("forced_eos_token_id: the last token the budget allows is the forced one (a list: the likeliest of them, as argmax); EOS forced ends the reply a token early", async () => {
    const plain = reference(promptIds(), 12, {});
    const forced = 11119;
    assert.equal(plain.length, 12);
    assert.notEqual(plain[11], forced, "greedy alone takes another last token");
    const expected = reference(promptIds(), 12, { forcedEos: [forced] });
    assert.deepEqual(expected, [...plain.slice(0, 11), forced]);
    const r = await gen.model.generate(PROMPT, { maxTokens: 12, temperature: 0, forcedEosTokenId: forced });
    assert.deepEqual(r.completionTokens, expected);
    assert.equal(await reply(gen, { maxNewTokens: 12, forcedEosTokenId: forced }), text(expected));
    // max_length counts the prompt: the same step
    assert.equal(await reply(gen, { maxLength: promptIds().length + 12, forcedEosTokenId: forced }), text(expected));
    // EOS (the usual setting): the reply ends where the budget's last token would be
    const withEos = await gen.model.generate(PROMPT, { maxTokens: 12, temperature: 0, forcedEosTokenId: [EOS] });
    assert.deepEqual(withEos.completionTokens, reference(promptIds(), 12, { forcedEos: [EOS] }));
    assert.deepEqual(withEos.completionTokens, plain.slice(0, 11));
    assert.equal(withEos.finishReason, "stop");
    // a list: every one at 0, the lowest id wins (torch.argmax), EOS among them
    const listed = [EOS, 26309, forced];
    assert.deepEqual((await gen.model.generate(PROMPT, { maxTokens: 12, temperature: 0, forcedEosTokenId: listed })).completionTokens, reference(promptIds(), 12, { forcedEos: listed }));
    // sampling: before the warpers, so whatever is drawn before, the last token is the forced one
    const sampled = await gen.model.generate(PROMPT, { maxTokens: 12, temperature: 1.2, topK: 50, seed: 3, forcedEosTokenId: forced });
    assert.equal(sampled.completionTokens.length, 12);
    assert.equal(sampled.completionTokens[11], forced);
    // from generation_config.json (a list, as it may write it) and from task_specific_params
    const file = await openFolder(gpt2TinyCopy(dir, "eos-file", { forced_eos_token_id: [forced] }));
    assert.equal(await reply(file, { maxNewTokens: 12 }), text(expected));
    const task = await openFolder(gpt2TinyCopy(dir, "eos-task", {}, { task_specific_params: { "text-generation": { forced_eos_token_id: forced } } }));
    assert.equal(await reply(task, { maxNewTokens: 12 }), text(expected));
  });

  test("forced_bos_token_id: forced where the sequence is one token (an empty prompt's BOS) only; begin_suppress_tokens then acts a step later", async () => {
    const forced = 16492;
    const fromBos = reference([EOS], 10, {});
    assert.notEqual(fromBos[0], forced);
    const expected = reference([EOS], 10, { forcedBos: forced });
    assert.equal(expected[0], forced);
    assert.deepEqual((await gen.model.generate([EOS], { maxTokens: 10, temperature: 0, forcedBosTokenId: forced })).completionTokens, expected);
    // the pipeline's empty prompt starts from [bos], as generate() does
    assert.equal(await reply(gen, { maxNewTokens: 10, forcedBosTokenId: forced }, ""), text(expected));
    // a longer prompt: cur_len is never 1, nothing is forced
    assert.equal(await reply(gen, { maxNewTokens: 10, forcedBosTokenId: forced }), await reply(gen, { maxNewTokens: 10 }));
    // begin_suppress_tokens' begin_index moves one on: the token after the forced one is suppressed, not the forced one
    const second = expected[1]!;
    const shifted = reference([EOS], 10, { forcedBos: forced, beginSuppress: [second, forced] });
    assert.equal(shifted[0], forced);
    assert.notEqual(shifted[1], second);
    assert.deepEqual((await gen.model.generate([EOS], { maxTokens: 10, temperature: 0, forcedBosTokenId: forced, beginSuppressTokens: [second, forced] })).completionTokens, shifted);
    const file = await openFolder(gpt2TinyCopy(dir, "bos-file", { forced_bos_token_id: forced, begin_suppress_tokens: [second, forced] }));
    assert.equal(await reply(file, { maxNewTokens: 10 }, ""), text(shifted));
    // a token id 0 is a token
    assert.equal((await gen.model.generate([EOS], { maxTokens: 1, temperature: 0, forcedBosTokenId: 0 })).completionTokens[0], 0);
  });

  test("bad values are refused naming the option or the file's key; not with speculative decoding or beam search", async () => {
    const cases: [string, unknown][] = [["forcedBosTokenId", -1], ["forcedBosTokenId", [3]], ["forcedEosTokenId", []], ["forcedEosTokenId", [1.5]], ["forcedEosTokenId", "2"], ["forcedEosTokenId", 60000], ["forcedBosTokenId", 60000]];
    for (const [k, v] of cases) {
      await assert.rejects(gen.model.generate(PROMPT, { maxTokens: 2, [k]: v }), (e: unknown) => e instanceof Error && (e as OptionError).option === k && e.message.startsWith(k), `${k} ${JSON.stringify(v)}`);
    }
    await assert.rejects(gen.model.generate(PROMPT, { maxTokens: 2, forcedEosTokenId: 0, promptLookup: true }), (e: unknown) => e instanceof OptionError && e.option === "forcedEosTokenId");
    await assert.rejects(gen.model.generate(PROMPT, { maxTokens: 2, forcedBosTokenId: 0, numBeams: 2 }), (e: unknown) => e instanceof OptionError && e.option === "forcedBosTokenId");
    // a forced step whose forced tokens suppressTokens all bans (the suppression comes after the forcing) has none left:
    // refused naming both, not the sampler's "did logitBias ban the whole vocabulary?" (transformers' greedy takes id 0)
    await assert.rejects(gen.model.generate([EOS], { maxTokens: 2, temperature: 0, forcedBosTokenId: 7, suppressTokens: [3, 7] }), (e: unknown) =>
      e instanceof OptionError && e.option === "forcedBosTokenId" && e.message === "forcedBosTokenId 7 is in suppressTokens: the step it forces would have no token left");
    await assert.rejects(gen.model.generate(PROMPT, { maxTokens: 2, temperature: 0.8, seed: 1, forcedEosTokenId: [7, 8], suppressTokens: [8, 7] }), (e: unknown) =>
      e instanceof OptionError && e.option === "forcedEosTokenId" && e.message === "forcedEosTokenId [7,8] are all in suppressTokens: the last step would have no token left");
    // one of them left: the last token is that one
    assert.equal((await gen.model.generate(PROMPT, { maxTokens: 2, temperature: 0, forcedEosTokenId: [7, 8], suppressTokens: [8] })).completionTokens[1], 7);
    const bad = gpt2TinyCopy(dir, "bad", { forced_eos_token_id: [] });
    await assert.rejects(pipeline("text-generation", bad, { threads: 1 }), new Error(`${bad}/generation_config.json: forced_eos_token_id: expected a token id or a non-empty list of them (integers >= 0), found []`));
    const badBos = gpt2TinyCopy(dir, "bad-bos", {}, { task_specific_params: { "text-generation": { forced_bos_token_id: "0" } } });
    await assert.rejects(pipeline("text-generation", badBos, { threads: 1 }), new Error(`${badBos}/config.json task_specific_params["text-generation"]: forced_bos_token_id: expected a token id (an integer >= 0), found "0"`));
  });

  test("null turns a folder's forced_bos_token_id / forced_eos_token_id off, as transformers' generate(forced_..._token_id=None): at a call or the pipeline's", async () => {
    const forcedEos = 11119, forcedBos = 16492;
    // the judge: greedy over the model's own logits with no forcing processor, as generate() builds none for None
    const plain = text(reference(promptIds(), 12, {}));
    const plainFromBos = text(reference([EOS], 10, {}));
    assert.notEqual(text(reference(promptIds(), 12, { forcedEos: [forcedEos] })), plain, "the folder's forcing changes the reply");
    assert.notEqual(text(reference([EOS], 10, { forcedBos })), plainFromBos, "the folder's forcing changes the reply");
    const folder = gpt2TinyCopy(dir, "forced-off", { forced_eos_token_id: forcedEos, forced_bos_token_id: forcedBos });
    const file = await openFolder(folder);
    assert.equal(await reply(file, { maxNewTokens: 12 }), text(reference(promptIds(), 12, { forcedEos: [forcedEos] })));
    // before: null was read as left out (the folder's kept)
    assert.equal(await reply(file, { maxNewTokens: 12, forcedEosTokenId: null }), plain);
    assert.equal(await reply(file, { maxNewTokens: 10 }, ""), text(reference([EOS], 10, { forcedBos, forcedEos: [forcedEos] })));
    assert.equal(await reply(file, { maxNewTokens: 10, forcedBosTokenId: null }, ""), text(reference([EOS], 10, { forcedEos: [forcedEos] })));
    assert.equal(await reply(file, { maxNewTokens: 10, forcedBosTokenId: null, forcedEosTokenId: null }, ""), plainFromBos);
    // the pipeline's own null, and a call's id over it
    const off = await openFolder(folder, { forcedBosTokenId: null, forcedEosTokenId: null });
    assert.equal(await reply(off, { maxNewTokens: 12 }), plain);
    assert.equal(await reply(off, { maxNewTokens: 10 }, ""), plainFromBos);
    assert.equal(await reply(off, { maxNewTokens: 12, forcedEosTokenId: forcedEos }), text(reference(promptIds(), 12, { forcedEos: [forcedEos] })));
    // a call's null over the pipeline's own option (before: the pipeline's kept)
    const own = await openFolder(GPT2_TINY, { forcedEosTokenId: forcedEos });
    assert.equal(await reply(own, { maxNewTokens: 12, forcedEosTokenId: null }), plain);
  });

  test("a folder's token id past the vocabulary is refused when the pipeline opens it, naming the file and the key (not the library's option)", async () => {
    const cases: [string, object, object, string][] = [
      ["bad-words", { bad_words_ids: [[7], [35169, 60000]] }, {}, "generation_config.json: bad_words_ids: token id 60000"],
      ["bias", { sequence_bias: [[[7, 50300], 2]] }, {}, "generation_config.json: sequence_bias: token id 50300"],
      ["bos", { forced_bos_token_id: 50257 }, {}, "generation_config.json: forced_bos_token_id: token id 50257"],
      ["eos", {}, { task_specific_params: { "text-generation": { forced_eos_token_id: [50256, 70000] } } }, `config.json task_specific_params["text-generation"]: forced_eos_token_id: token id 70000`],
    ];
    for (const [name, generation, config, message] of cases) {
      const folder = gpt2TinyCopy(dir, `vocab-${name}`, generation, config);
      // before: opened, and each generation refused as "badWordsIds: token id 60000 is outside the vocabulary [0, 50257)"
      await assert.rejects(pipeline("text-generation", folder, { threads: 1 }), new Error(`${folder}/${message} is outside the vocabulary (50257 tokens)`), name);
    }
  });

  test("suppress_tokens / begin_suppress_tokens past the vocabulary ban nothing, as transformers' isin mask over arange(vocab): the folder opens and the call generates as without them", async () => {
    const plain = await reply(gen, { maxNewTokens: 12, suppressTokens: [35169], beginSuppressTokens: [11119] });
    // before: the pipeline refused the folder ("generation_config.json: suppress_tokens: token id 99999 is outside the vocabulary (50257 tokens)")
    const folder = gpt2TinyCopy(dir, "vocab-suppress", { suppress_tokens: [35169, 99999], begin_suppress_tokens: [50257, 11119] });
    assert.equal(await reply(await openFolder(folder), { maxNewTokens: 12 }), plain);
    // before: each call refused ("suppressTokens: token id 50257 is outside the vocabulary [0, 50257)")
    assert.equal(await reply(gen, { maxNewTokens: 12, suppressTokens: [50257, 35169, 1e6], beginSuppressTokens: [11119, 60000] }), plain);
    assert.notEqual(plain, await reply(gen, { maxNewTokens: 12 }), "greedy takes 35169 and 11119 here");
  });

  test("a list option equal to task_specific_params' is not told to give way (compared by value); another one is, shown as JSON", async () => {
    const folder = gpt2TinyCopy(dir, "task-equal", {}, { task_specific_params: { "text-generation": { suppress_tokens: [35169, 7675], bad_words_ids: [[35169, 35169]] } } });
    const warnings: string[] = [];
    await openFolder(folder, { suppressTokens: [35169, 7675], badWordsIds: [[35169, 35169]], onWarning: (m: string) => warnings.push(m) });
    // (not deepEqual to []: that would narrow warnings to never[] for the rest)
    assert.equal(warnings.length, 0, warnings.join("\n"));
    await openFolder(folder, { suppressTokens: [35169], onWarning: (m: string) => warnings.push(m) });
    assert.deepEqual(warnings, [
      `text-generation: the pipeline's suppressTokens [35169] gives way to [35169,7675] from ${folder}/config.json task_specific_params["text-generation"], as transformers' pipeline applies those after its own options; give suppressTokens with each call to override it`,
    ]);
  });
});
