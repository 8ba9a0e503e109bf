import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { chatFormatterFor, NoChatTemplateError } from "../src/chat/index.js";
import { convertHFToGGUF } from "../src/convert/convert.js";
import { GGUFMetadata, readGGUFHeader } from "../src/formats/gguf-reader.js";
import { ggufEntry, writeGGUF } from "../src/formats/gguf-writer.js";
import { readTokenizerEntries } from "../src/testing/index.js";
import { openTokenizer } from "../src/tokenizer/index.js";
import { runTsllm } from "./helpers/child.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

/*
 * `tsllm convert` writes tokenizer.chat_template from the folder's chat template as the tokenizer
 * loader reads it, with --vocab (whose GGUF's own template it replaces) and without: a GGUF
 * chats as the folder does, and a chat_template the loader refuses is refused in its words.
 * Judged by transformers' reading of tokenizer_config.json (a string; a list of {name, template}
 * made a name -> template map at load, failing there on an entry without both keys; the "default"
 * one used when no name is given) and the newer chat_template.jinja beside it, which llama.cpp's
 * convert_hf_to_gguf.py also reads; the loader is the same reading (chatTemplateOf). Where the
 * folder has both, the two judges part: transformers chats with the file's, gguf-py writes the
 * config's (tested below).
 */
const FOLDER = "hf-oracle/gpt2-tiny";
const VOCAB = "tokenizer-tests/ggml-vocab-gpt-2.gguf";
const skip = skipWithoutShared(FOLDER) || skipWithoutShared(VOCAB);
const dir = mkdtempSync(join(tmpdir(), "tsllm-convert-template-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** gpt2-tiny with `tokenizer_config.json` (its own, plus `chatTemplate` when given) and `jinja` as chat_template.jinja */
function folderWith(name: string, files: { chatTemplate?: unknown; jinja?: string }): { folder: string; config: string } {
  const folder = join(dir, name);
  mkdirSync(folder);
  for (const f of ["config.json", "model.safetensors", "tokenizer.json"]) copyFileSync(join(sharedFile(FOLDER)!, f), join(folder, f));
  const config = join(folder, "tokenizer_config.json");
  writeFileSync(config, JSON.stringify({ eos_token: "<|endoftext|>", ...("chatTemplate" in files ? { chat_template: files.chatTemplate } : {}) }));
  if (files.jinja !== undefined) writeFileSync(join(folder, "chat_template.jinja"), files.jinja);
  return { folder, config };
}

/** GPT-2's vocabulary GGUF with a chat template of its own, which the folder's must replace */
async function vocabWithTemplate(): Promise<string> {
  const path = join(dir, "vocab-with-template.gguf");
  if (!existsSync(path)) {
    const { entries } = readTokenizerEntries(sharedFile(VOCAB)!);
    await writeGGUF(path, { metadata: [["general.architecture", ggufEntry.string("gpt2")], ...entries, ["tokenizer.chat_template", ggufEntry.string("VOCAB {{ messages }}")]], tensors: [] });
  }
  return path;
}

const metadataOf = (gguf: string) => new GGUFMetadata(gguf, readGGUFHeader(gguf).metadata);
const templateOf = (gguf: string) => metadataOf(gguf).string("tokenizer.chat_template");

/** the chat template keys of a GGUF as node-llama-cpp's GGUF reader reads them (the judge), key -> value */
async function templateKeysOf(gguf: string): Promise<Record<string, unknown>> {
  const { readGgufFileInfo } = await import("node-llama-cpp");
  const info = await readGgufFileInfo(gguf, { readTensorInfo: false });
  return Object.fromEntries(Object.entries(info.metadata.tokenizer as unknown as Record<string, unknown>).filter(([k]) => k.startsWith("chat_template")));
}

test("convert, with --vocab and without, writes the template the folder's tokenizer chats with: a map's or a list's \"default\", chat_template.jinja", { skip }, async () => {
  const vocab = await vocabWithTemplate();
  for (const [name, files, want] of [
    ["jinja", { jinja: "J{{ messages[0].content }}" }, "J{{ messages[0].content }}"],
    ["map", { chatTemplate: { default: "M{{ messages[0].content }}", tool_use: "T" } }, "M{{ messages[0].content }}"],
    ["list", { chatTemplate: [{ name: "tool_use", template: "T" }, { name: "default", template: "D{{ messages[0].content }}" }] }, "D{{ messages[0].content }}"],
  ] as const) {
    const { folder } = folderWith(name, files);
    assert.equal(openTokenizer(folder).chatTemplate?.source, want, `${name}: the loader`);
    for (const options of [{ vocab }, {}]) {
      const out = join(dir, `${name}-${options.vocab ? "vocab" : "own"}.gguf`);
      await convertHFToGGUF(folder, out, { type: "f32", ...options });
      assert.equal(templateOf(out), want, `${name} ${options.vocab ? "--vocab" : "own tokenizer"}`);
      // the named one beside it, as gguf-py's add_chat_template writes it
      const named = name === "jinja" ? {} : { "chat_template.tool_use": "T", chat_templates: ["tool_use"] };
      assert.deepEqual(await templateKeysOf(out), { chat_template: want, ...named }, `${name} ${options.vocab ? "--vocab" : "own tokenizer"}: node-llama-cpp's reading`);
    }
  }
});

test("tokenizer_config.json's chat_template and chat_template.jinja both there: the tokenizer chats with the file's, as transformers loads it; convert writes the config's, as llama.cpp's converter does; chat_template.json only for convert", { skip }, async () => {
  // transformers' tokenizer loader: template files "take priority over template entries in the
  // tokenizer config" (its test_chat_template_file_priority); gguf-py's SpecialVocab takes
  // tokenizer_config.get('chat_template', <chat_template.jinja, else chat_template.json>), reading
  // additional_chat_templates/*.jinja only beside chat_template.jinja
  const { folder } = folderWith("both", { chatTemplate: [{ name: "default", template: "C{{ messages[0].content }}" }, { name: "tool_use", template: "T" }], jinja: "J{{ messages[0].content }}" });
  mkdirSync(join(folder, "additional_chat_templates"));
  writeFileSync(join(folder, "additional_chat_templates", "rag.jinja"), "R");
  const tokenizer = openTokenizer(folder);
  assert.equal(tokenizer.chatTemplate?.source, "J{{ messages[0].content }}");
  assert.equal(tokenizer.chatTemplate?.where, `${join(folder, "chat_template.jinja")}: chat template`);
  assert.deepEqual([...(tokenizer.namedChatTemplates?.keys() ?? [])], ["rag"], "the config's named templates are not read beside the files");
  const out = join(dir, "both.gguf");
  await convertHFToGGUF(folder, out, { type: "f32" });
  assert.deepEqual(await templateKeysOf(out), { chat_template: "C{{ messages[0].content }}", "chat_template.tool_use": "T", chat_templates: ["tool_use"] });

  // chat_template.json (a processor's file): transformers' tokenizer has no template, llama.cpp's converter writes it
  const json = folderWith("json", {});
  writeFileSync(join(json.folder, "chat_template.json"), JSON.stringify({ chat_template: "P{{ messages[0].content }}" }));
  assert.equal(openTokenizer(json.folder).chatTemplate, undefined);
  const jsonOut = join(dir, "json.gguf");
  await convertHFToGGUF(json.folder, jsonOut, { type: "f32" });
  assert.deepEqual(await templateKeysOf(jsonOut), { chat_template: "P{{ messages[0].content }}" });

  // additional_chat_templates without chat_template.jinja: named templates to the tokenizer, none for the converter
  const additional = folderWith("additional-only", {});
  mkdirSync(join(additional.folder, "additional_chat_templates"));
  writeFileSync(join(additional.folder, "additional_chat_templates", "tool_use.jinja"), "T");
  assert.deepEqual([...(openTokenizer(additional.folder).namedChatTemplates?.keys() ?? [])], ["tool_use"]);
  const additionalOut = join(dir, "additional-only.gguf");
  await convertHFToGGUF(additional.folder, additionalOut, { type: "f32" });
  assert.deepEqual(await templateKeysOf(additionalOut), {});
});

test("named chat templates with no \"default\": convert writes each as tokenizer.chat_template.<name> and their names as tokenizer.chat_templates, no tokenizer.chat_template, as llama.cpp's converter does, with one warning line; the GGUF loads", { skip }, async () => {
  const vocab = await vocabWithTemplate();
  for (const [name, chatTemplate] of [
    ["list-no-default", [{ name: "tool_use", template: "T{{ messages }}" }, { name: "rag.v2", template: "R" }]],
    ["map-no-default", { tool_use: "T{{ messages }}", "rag.v2": "R" }],
  ] as const) {
    const { folder, config } = folderWith(name, { chatTemplate });
    let reason = "";
    assert.throws(() => chatFormatterFor(openTokenizer(folder)), (e: unknown) => e instanceof NoChatTemplateError && (reason = e.reason).startsWith(`${config}: chat_template`));
    for (const options of [{ vocab }, {}]) {
      const out = join(dir, `${name}-${options.vocab ? "vocab" : "own"}.gguf`);
      const warnings: string[] = [];
      await convertHFToGGUF(folder, out, { type: "f32", ...options, onWarning: (line) => warnings.push(line) });
      // (a name's characters outside [A-Za-z0-9] become "_", as gguf-py's add_chat_template makes them; --vocab's own template is replaced)
      assert.deepEqual(await templateKeysOf(out), { "chat_template.tool_use": "T{{ messages }}", "chat_template.rag_v2": "R", chat_templates: ["tool_use", "rag_v2"] }, `${name} ${options.vocab ? "--vocab" : "own"}`);
      assert.deepEqual(warnings, [`${reason}; no tokenizer.chat_template written, a chat with the GGUF names one of tokenizer.chat_templates`]);
      // the loader reads the GGUF; a chat without a template says there is none
      const tokenizer = openTokenizer(out);
      assert.equal(tokenizer.chatTemplate, undefined);
      assert.throws(() => chatFormatterFor(tokenizer), NoChatTemplateError);
    }
  }
});

test("convert's warning for named chat templates with no \"default\" goes to stderr by default, one line, and the conversion succeeds", { skip }, async () => {
  const { folder } = folderWith("no-default-stderr", { chatTemplate: [{ name: "tool_use", template: "T" }] });
  const out = join(dir, "no-default-stderr.gguf");
  const r = await runTsllm(["convert", "--model", folder, "--out", out, "--type", "f32"]);
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stderr.trim().split("\n");
  assert.equal(lines.filter((l) => l.includes("no tokenizer.chat_template written")).length, 1, r.stderr);
  assert.deepEqual(await templateKeysOf(out), { "chat_template.tool_use": "T", chat_templates: ["tool_use"] });
});

test("a chat_template the loader refuses or cannot chat with: convert refuses it in the loader's words, naming the file and field, with --vocab and without; nothing is written", { skip }, async () => {
  const vocab = await vocabWithTemplate();
  // an entry without both keys: transformers fails at load, and so do the loader and convert
  const bad = folderWith("bad-entry", { chatTemplate: [{ name: "default", template: "D" }, { name: "rag" }] });
  const atLoad = `${bad.config}: chat_template[1]: expected an object with "name" and "template" strings, found {"name":"rag"}`;
  assert.throws(() => openTokenizer(bad.folder), (e: Error) => e.message === atLoad);
  for (const options of [{ vocab }, {}]) {
    const out = join(dir, `bad-entry-${options.vocab ? "vocab" : "own"}.gguf`);
    await assert.rejects(convertHFToGGUF(bad.folder, out, { type: "f32", ...options }), (e: Error) => e.message === atLoad);
    assert.ok(!existsSync(out), out);
  }
  // the tokenizer loads, a chat fails: convert would write no template, or --vocab's, for the folder's
  for (const [name, chatTemplate] of [["number", 5], ["default-number", { default: 5 }]] as const) {
    const { folder, config } = folderWith(name, { chatTemplate });
    let reason = "";
    assert.throws(() => chatFormatterFor(openTokenizer(folder)), (e: unknown) => e instanceof NoChatTemplateError && (reason = e.reason).startsWith(`${config}: chat_template`));
    for (const options of [{ vocab }, {}]) {
      const out = join(dir, `${name}-${options.vocab ? "vocab" : "own"}.gguf`);
      await assert.rejects(convertHFToGGUF(folder, out, { type: "f32", ...options }), (e: Error) => e.message === `${reason}; convert writes the template a chat uses as tokenizer.chat_template`);
      assert.ok(!existsSync(out), out);
    }
  }
});

test("a map of named chat templates with one that is no string: convert refuses it, naming the field and entry; the loader still chats with the \"default\" one, as transformers does", { skip }, async () => {
  const { folder, config } = folderWith("named-number", { chatTemplate: { default: "D", tool_use: 5 } });
  assert.equal(openTokenizer(folder).chatTemplate?.source, "D");
  const out = join(dir, "named-number.gguf");
  await assert.rejects(convertHFToGGUF(folder, out, { type: "f32" }), (e: Error) => e.message === `${config}: chat_template["tool_use"]: expected a template string, found 5; convert writes the template a chat uses as tokenizer.chat_template`);
  assert.ok(!existsSync(out), out);
});

test("convert --vocab of a folder with no chat template keeps the vocabulary GGUF's", { skip }, async () => {
  const vocab = await vocabWithTemplate();
  const { folder } = folderWith("none", {});
  const out = join(dir, "none-vocab.gguf");
  await convertHFToGGUF(folder, out, { type: "f32", vocab });
  assert.equal(templateOf(out), "VOCAB {{ messages }}");
});
