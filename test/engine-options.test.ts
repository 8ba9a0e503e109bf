import assert from "node:assert/strict";
import { test } from "node:test";
import { loadModel, type GenerateOptions } from "../src/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL);

test("stories260K: a generation option of the wrong kind is one error naming it, before anything is queued", { skip }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 128 });
  try {
    const bad: [string, unknown, RegExp][] = [
      ["a misspelled option", { maxToken: 5 }, /^OptionError: unknown option "maxToken" \(did you mean maxTokens\?\); the options are maxTokens, /],
      ["a Python-style name", { top_k: 5 }, /unknown option "top_k" \(did you mean topK\?\)/],
      // the CLI's ranking (src/units/closest.ts), as for --temp: the nearest name, where the first within two edits was topP
      ["llama.cpp's shortened name", { temp: 0.5 }, /unknown option "temp" \(did you mean temperature\?\)/],
      ["a stray character", { stop_: "x" }, /unknown option "stop_" \(did you mean stop\?\)/],
      ["options that are null", null, /^OptionError: generation options: expected an object, got null$/],
      ["a flag given as a string", { ignoreEos: "no" }, /^OptionError: ignoreEos: expected true or false, got "no"$/],
      ["addSpecialTokens as a string", { addSpecialTokens: "false" }, /^OptionError: addSpecialTokens: expected true or false, got "false"$/],
      ["stop as a number", { stop: 5 }, /^OptionError: stop: expected a string or an array of strings, got 5$/],
      ["stopTokens as a string", { stopTokens: "x" }, /^OptionError: stopTokens: expected an array of token ids, got "x"$/],
      ["a negative stop token", { stopTokens: [-1] }, /^OptionError: stopTokens\[0\]: expected a token id \(an integer >= 0\), got -1$/],
      ["a stop token past the vocabulary", { stopTokens: [13, 512] }, /^RequestError: stopTokens\[1\]: token id 512 is outside the vocabulary \[0, 512\)$/],
      ["a signal that is not one", { signal: "x" }, /^OptionError: signal: expected an AbortSignal, got "x"$/],
      ["promptLookup as a string", { promptLookup: "yes" }, /^OptionError: promptLookup: expected true, false or the longest n-gram to match/],
      ["draftModel that is not a model", { draftModel: "small.gguf" }, /^OptionError: draftModel: expected a loaded model \(what loadModel returns\), got "small.gguf"$/],
      ["maxTokens as a string", { maxTokens: "8" }, /^RequestError: maxTokens must be a non-negative integer, got "8"$/],
      // shown as the string it is: "got 2" read as a valid count
      ["logprobs as a string", { logprobs: "2" }, /^RequestError: logprobs must be an integer >= 0 \(the number of top tokens to report\), got "2"$/],
    ];
    for (const [what, options, expected] of bad) {
      const asOptions = options as GenerateOptions;
      await assert.rejects(model.generate("Once upon a time", asOptions), (e: Error) => expected.test(`${e.name}: ${e.message}`), `generate: ${what}`);
      assert.throws(() => model.submit("Once upon a time", asOptions), (e: Error) => expected.test(`${e.name}: ${e.message}`), `submit: ${what}`);
      await assert.rejects(model.generate(["Once", "Lily"], asOptions), (e: Error) => expected.test(`${e.name}: ${e.message}`), `a batch: ${what}`);
    }
    for (const prompt of [5, null, { text: "Once" }]) {
      await assert.rejects(model.generate(prompt as unknown as string, { maxTokens: 2 }), /^OptionError: prompt: expected a string or an array of token ids, got /);
    }
    assert.equal(model.engine.stats.steps, 0, "nothing was computed");
    assert.equal(model.engine.stats.waiting + model.engine.stats.running, 0);
    // what the checks let through still generates: a stop token ends the completion, an AbortSignal of another make is taken by its shape
    const alone = await model.generate("Once upon a time", { temperature: 0, maxTokens: 8 });
    const stopAt = alone.completionTokens[3]!;
    const stopped = await model.generate("Once upon a time", { temperature: 0, maxTokens: 8, stopTokens: [stopAt] });
    assert.deepEqual(stopped.completionTokens, alone.completionTokens.slice(0, alone.completionTokens.indexOf(stopAt)));
    const polyfilled = { aborted: false, addEventListener() {}, removeEventListener() {} } as unknown as AbortSignal;
    assert.deepEqual((await model.generate("Once upon a time", { temperature: 0, maxTokens: 8, signal: polyfilled })).completionTokens, alone.completionTokens);
  } finally {
    model.dispose();
  }
});

test("stories260K: a disposed model says so, for chat and as another model's draft", { skip }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 128 });
  const draft = await loadModel(sharedFile(MODEL)!, { contextSize: 128 });
  draft.dispose();
  try {
    assert.equal(draft.disposed, true);
    await assert.rejects(model.generate("Once", { temperature: 0, maxTokens: 4, draftModel: draft }), /^DisposedError: draftModel: the draft model .*stories260K\.gguf has been disposed$/);
    // (stories260K has no chat template: before, that was the error a disposed model gave)
    await assert.rejects(draft.chat([{ role: "user", content: "Hi" }]), /stories260K\.gguf has been disposed$/);
    assert.equal(model.engine.stats.steps, 0);
  } finally {
    model.dispose();
  }
});

test("stories260K: a misspelled or unknown loadModel option is one error naming it, not a silent default", { skip }, async () => {
  const path = sharedFile(MODEL)!;
  await assert.rejects(loadModel(path, { contextsize: 5 } as never), /^OptionError: loadModel: unknown option "contextsize" \(did you mean contextSize\?\); the options are backend, threads, contextSize, /);
  await assert.rejects(loadModel(path, { n_ctx: 64 } as never), /^OptionError: loadModel: unknown option "n_ctx"; the options are /);
  await assert.rejects(loadModel(path, null as never), /^OptionError: loadModel: options must be an object, got null$/);
  await assert.rejects(loadModel(path, { threads: "2" } as never), /^OptionError: threads must be a positive integer, got "2"$/);
  // every documented option, even left undefined, is taken
  const model = await loadModel(path, { contextSize: 64, threads: undefined, warmup: false, onWarning: () => {} });
  try {
    assert.equal(model.contextSize, 64);
  } finally {
    model.dispose();
  }
});
