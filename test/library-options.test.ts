// A library user's bad option, wherever it is given (loadModel, generate / stream / submit / chat,
// the tokenizer), is one class with a machine-readable name of the option: `err instanceof
// OptionError` and `err.option`, the message one line naming the option and what was expected.
// Before, some were plain RangeErrors, some TypeErrors, some plain Errors, some crashed inside
// the chat template ("Cannot read properties of undefined") and some were taken silently
// (`warmup: "no"` warmed up, `encode(text, { addSpecialToken: false })` kept the BOS).
import assert from "node:assert/strict";
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { FileFieldError, HFConfigError, loadModel, loadTokenizer, ModelNotFoundError, OptionError, pipeline, RequestError, type ChatOptions, type GenerateOptions, type LoadModelOptions } from "../src/index.js";
import { readFailure } from "../src/formats/errors.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL);

/** the refusal `e` is: an OptionError naming `option` in its field and its one-line message */
function isOptionError(e: unknown, option: string, what: string): true {
  assert.ok(e instanceof OptionError, `${what}: expected an OptionError, got ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
  assert.ok(e instanceof RangeError, `${what}: an OptionError is a RangeError`);
  assert.equal(e.option, option, `${what}: ${e.message}`);
  assert.ok(!e.message.includes("\n"), `${what}: one line`);
  assert.ok(e.message.includes(option), `${what}: the message names ${option}: ${e.message}`);
  return true;
}

test("stories260K: a bad loadModel option is an OptionError naming it (values, kinds, typos)", { skip }, async () => {
  const path = sharedFile(MODEL)!;
  const bad: [string, unknown][] = [
    ["threads", { threads: 0 }], ["contextSize", { contextSize: -1 }], ["contextSize", { contextSize: "big" }],
    ["quantize", { quantize: "q9" }], ["backend", { backend: "gpu" }], ["cacheTypeK", { cacheTypeK: "f8" }],
    ["cacheTypeV", { cacheTypeV: "q8_0", flashAttention: false }], ["kvCacheBytes", { kvCacheBytes: -5 }], ["kvCacheBytes", { kvCacheBytes: 10 }],
    ["maxSequences", { maxSequences: 0 }], ["maxBatchTokens", { maxBatchTokens: 1.5 }], ["admission", { admission: "lazy" }],
    // these were taken without a word: a string flag is truthy, a string of bytes compared as NaN
    ["warmup", { warmup: "no" }], ["cacheReplies", { cacheReplies: "false" }], ["flashAttention", { flashAttention: "yes" }],
    ["onWarning", { onWarning: "log" }], ["availableMemory", { availableMemory: "8GB" }], ["availableMemory", { availableMemory: -1 }],
    ["contextsize", { contextsize: 64 }],
  ];
  for (const [option, options] of bad) {
    await assert.rejects(loadModel(path, { warmup: false, backend: "reference", ...(options as object) } as LoadModelOptions), (e) => isOptionError(e, option, JSON.stringify(options)));
  }
  await assert.rejects(loadModel(path, null as never), (e) => isOptionError(e, "options", "null options"));
});

test("stories260K: a bad generate / stream / submit / chat option is an OptionError naming it, nothing queued", { skip }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { contextSize: 128, threads: 1 });
  try {
    const bad: [string, unknown][] = [
      ["temperature", { temperature: -1 }], ["topP", { topP: 2 }], ["topK", { topK: 1.5 }], ["seed", { seed: 0.5 }], ["repeatLastN", { repeatLastN: -2 }],
      ["logitBias", { logitBias: { x: 1 } }], ["logitBias", { logitBias: { 5: "a" } }], ["maxTokens", { maxTokens: 1.5 }], ["temprature", { temprature: 1 }],
      ["n", { n: 0 }], ["numBeams", { numBeams: 0 }], ["numReturnSequences", { numBeams: 2, numReturnSequences: 3 }], ["draftTokens", { promptLookup: true, draftTokens: 0 }],
      ["logprobs", { logprobs: -1 }], ["normalize", { normalize: "nfd" }], ["json", { json: "array" }], ["stop", { stop: [""] }], ["stopTokens", { stopTokens: [-1] }],
      ["ignoreEos", { ignoreEos: "no" }], ["grammar", { grammar: "root ::= (" }], ["earlyStopping", { numBeams: 2, earlyStopping: "x" }], ["options", null],
    ];
    for (const [option, options] of bad) {
      const what = JSON.stringify(options);
      await assert.rejects(model.generate("Once", options as GenerateOptions), (e) => isOptionError(e, option, `generate ${what}`));
      assert.throws(() => model.submit("Once", options as GenerateOptions), (e) => isOptionError(e, option, `submit ${what}`));
      // at the call, as submit: not at the first next() (a loop's setup would pass, its first step fail)
      assert.throws(() => model.stream("Once", options as GenerateOptions), (e) => isOptionError(e, option, `stream ${what}`));
      if (options !== null) assert.throws(() => model.streamChat([{ role: "user", content: "Hi" }], { ...options, chatTemplate: "{{ messages[0].content }}" } as ChatOptions), (e) => isOptionError(e, option, `streamChat ${what}`));
      if (options !== null) await assert.rejects(model.chat([{ role: "user", content: "Hi" }], { ...options, chatTemplate: "{{ messages[0].content }}" } as ChatOptions), (e) => isOptionError(e, option, `chat ${what}`));
    }
    // a constraint's own message names the option once ("choice: choice: ..." before)
    await assert.rejects(model.generate("Once", { choice: [] }), { name: "RequestError", option: "choice", message: "choice: expected a non-empty list of strings" });
    // the engine's refusals are RequestErrors, which are OptionErrors too
    const tooLong = await model.generate("Once upon a time ".repeat(60)).catch((e: unknown) => e);
    assert.ok(tooLong instanceof RequestError && tooLong instanceof OptionError && tooLong.option === "prompt" && tooLong.code === "context_length_exceeded");
    // chat's own arguments: these crashed inside the template with "Cannot read properties of undefined"
    const template = "{% for m in messages %}{{ m.content }}{% endfor %}";
    await assert.rejects(model.chat("Hi" as never, { chatTemplate: template }), (e) => isOptionError(e, "messages", "messages as a string"));
    await assert.rejects(model.chat([{ content: "Hi" }] as never, { chatTemplate: template }), (e) => isOptionError(e, "messages", "a message without a role"));
    await assert.rejects(model.chat([{ role: "user", content: "Hi" }], { system: 5, chatTemplate: template } as never), (e) => isOptionError(e, "system", "system as a number"));
    await assert.rejects(model.chat([{ role: "user", content: "Hi" }], { chatTemplate: 5 } as never), (e) => isOptionError(e, "chatTemplate", "chatTemplate as a number"));
    await assert.rejects(model.chat([{ role: "user", content: "Hi" }], { chatTemplate: template, parseSpecialInContent: "yes" } as never), (e) => isOptionError(e, "parseSpecialInContent", "a string flag"));
    assert.equal(model.engine.stats.steps, 0, "nothing was computed");
    // what passes the checks still runs
    const r = await model.chat([{ role: "user", content: "Hi" }], { chatTemplate: template, system: "Be brief.", maxTokens: 2, temperature: 0 });
    assert.equal(r.completionTokens.length, 2);
  } finally {
    model.dispose();
  }
});

test("stories260K: a misspelled or mistyped tokenizer option is an OptionError, not a BOS kept without a word", { skip }, async () => {
  const tok = await loadTokenizer(sharedFile(MODEL)!);
  const plain = tok.encode("Hello", { addSpecialTokens: false });
  assert.notDeepEqual(tok.encode("Hello"), plain, "the model adds a BOS by default (the test's premise)");
  assert.throws(() => tok.encode("Hello", { addSpecialToken: false } as never), (e) => isOptionError(e, "addSpecialToken", "encode typo"));
  assert.throws(() => tok.encode("Hello", { addSpecialTokens: "false" } as never), (e) => isOptionError(e, "addSpecialTokens", "encode string flag"));
  await assert.rejects(tok.encodeAsync("Hello", { parseSpecial: 0 } as never), (e) => isOptionError(e, "parseSpecial", "encodeAsync number flag"));
  assert.throws(() => tok.decode(plain, { skipSpecialToken: true } as never), (e) => isOptionError(e, "skipSpecialToken", "decode typo"));
  assert.throws(() => tok.createStreamDecoder({ skipSpecialTokens: "yes" } as never), (e) => isOptionError(e, "skipSpecialTokens", "stream decoder string flag"));
  assert.throws(() => tok.encode("Hello", 5 as never), (e) => isOptionError(e, "options", "options as a number"));
  assert.deepEqual(tok.encode("Hello", { addSpecialTokens: false, parseSpecial: true }), plain);
  assert.equal(tok.decode(plain, { skipSpecialTokens: true }), "Hello");
});

// A missing model was a plain Error: "no such model" told from a model that failed to load only by
// its text. Now a ModelNotFoundError with `code` and `path`, the message the same one line.
test("a model path that names nothing is a ModelNotFoundError with code model_not_found and the path, one line", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-missing-model-"));
  try {
    const path = join(dir, "nope.gguf");
    const calls: [string, () => Promise<unknown>][] = [
      ["loadModel", () => loadModel(path)],
      ["loadTokenizer", () => loadTokenizer(path)],
      ["pipeline", () => pipeline("feature-extraction", path)],
    ];
    for (const [what, call] of calls) {
      await assert.rejects(call(), (e: unknown) => {
        assert.ok(e instanceof ModelNotFoundError, `${what}: expected a ModelNotFoundError, got ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
        assert.equal(e.name, "ModelNotFoundError");
        assert.equal(e.code, "model_not_found");
        assert.equal(e.path, path);
        assert.equal(e.message, `model not found: ${path} (expected a local .gguf file or model folder, or a hub reference like org/name, org/name@revision, org/name:Q4_K_M)`);
        return true;
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// A folder with nothing a model could be in it threw an HFConfigError ("DIR/config.json: file: not
// found ..."), a class the library did not export: the caller told it only by its text. It names
// nothing, as transformers' from_pretrained says of such a folder ("does not appear to have a file
// named config.json"): a ModelNotFoundError naming what was looked for. A malformed model's files
// are a FileFieldError (HFConfigError, GGUFError, SafetensorsError), exported, with code, path, field.
test("a folder with no model in it is a ModelNotFoundError; a malformed config an exported HFConfigError with code, path, field", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-empty-model-"));
  try {
    const empty = join(dir, "empty");
    mkdirSync(empty);
    writeFileSync(join(empty, "README.md"), "not a model");
    const calls: [string, (p: string) => Promise<unknown>][] = [
      ["loadModel", (p) => loadModel(p)],
      ["loadTokenizer", (p) => loadTokenizer(p)],
      ["pipeline", (p) => pipeline("feature-extraction", p)],
    ];
    for (const [what, call] of calls) {
      await assert.rejects(call(empty), (e: unknown) => {
        assert.ok(e instanceof ModelNotFoundError, `${what}: expected a ModelNotFoundError, got ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
        assert.equal(e.code, "model_not_found");
        assert.equal(e.path, empty);
        assert.equal(e.message, `model not found: ${empty} is a folder with no model in it (no config.json, .gguf, .safetensors or tokenizer file; expected a local .gguf file or a Hugging Face model folder)`);
        return true;
      });
    }
    // a config.json that is there but wrong stays the model's own error, now catchable by class
    const bad = join(dir, "bad");
    mkdirSync(bad);
    writeFileSync(join(bad, "config.json"), JSON.stringify({ architectures: "LlamaForCausalLM" }));
    await assert.rejects(loadModel(bad), (e: unknown) => {
      assert.ok(e instanceof HFConfigError && e instanceof FileFieldError, `expected an HFConfigError, got ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
      assert.equal(e.code, "invalid_model");
      assert.equal(e.path, join(bad, "config.json"));
      assert.equal(e.field, "architectures");
      assert.match(e.message, /^.*config\.json: architectures: expected a list like \["LlamaForCausalLM"\]/);
      return true;
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// "cannot be read" (a system call's failure, not the file's content) had no class or code of its
// own: a FileFieldError with code model_unreadable, told from a refused file (invalid_model).
test("a model file the system cannot read is a FileFieldError with code model_unreadable, naming the file", () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-unreadable-"));
  try {
    const loop = join(dir, "model.gguf");
    symlinkSync(loop, loop); // opening it fails with ELOOP, a real system error on any user
    let failure: unknown;
    try {
      closeSync(openSync(loop, "r"));
    } catch (e) {
      failure = e;
    }
    const e = readFailure(loop, failure);
    assert.ok(e instanceof FileFieldError, `expected a FileFieldError, got ${String(e)}`);
    assert.equal(e.code, "model_unreadable");
    assert.equal(e.path, loop);
    assert.equal(e.field, "file");
    assert.match(e.message, /model\.gguf: file: cannot be read: ELOOP/);
    const folder = readFailure(dir, Object.assign(new Error("EISDIR: illegal operation on a directory, read"), { code: "EISDIR" }));
    assert.ok(folder instanceof FileFieldError);
    assert.equal(folder.code, "invalid_model");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
