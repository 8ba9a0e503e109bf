import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { renderWithJinja2, skipWithoutJinja2 } from "../scripts/jinja2-oracle.js";
import { chatFormatterFor, NoChatTemplateError, type ChatMessage } from "../src/chat/index.js";
import { SETTING_FLAGS } from "../src/cli/serve.js";
import { convertHFToGGUF } from "../src/convert/convert.js";
import { loadModel } from "../src/index.js";
import { startServer } from "../src/server/index.js";
import { openTokenizer, type Tokenizer } from "../src/tokenizer/index.js";
import { runTsllm } from "./helpers/child.js";
import { post } from "./helpers/serve.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

/*
 * A model's named chat templates (a GGUF's tokenizer.chat_template.<name>, tokenizer_config.json's
 * list or map, additional_chat_templates/<name>.jinja) are read with its tokenizer and chosen as
 * transformers' apply_chat_template chooses them (get_chat_template: the name given; else
 * "tool_use" when tools are passed and the model has it; else "default"; else an error naming the
 * templates) and as llama.cpp's common_chat_templates (tokenizer.chat_template.tool_use for a
 * request with tools). The renders are judged by Python's jinja2 set up as transformers sets it up.
 * The GGUFs are written by `convert` from gpt2-tiny with the templates in its tokenizer_config.json.
 */
const FOLDER = "hf-oracle/gpt2-tiny";
const skip = skipWithoutShared(FOLDER) || skipWithoutJinja2;
const dir = mkdtempSync(join(tmpdir(), "tsllm-named-templates-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const DEFAULT = "D{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}";
const TOOL_USE = "T{% for t in tools %}<tool_call>{{ t.function.name }}</tool_call>{% endfor %}{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}{% if add_generation_prompt %}A:{% endif %}";
const RAG = "R{% if documents %}{% for d in documents %}<{{ d.text }}>{% endfor %}{% endif %}{% for m in messages %}{{ m.content }}|{% endfor %}";
const MESSAGES: ChatMessage[] = [{ role: "user", content: "weather?" }];
const TOOLS = [{ type: "function", function: { name: "get_weather", description: "weather", parameters: { type: "object", properties: {} } } }];

/** gpt2-tiny with `chatTemplate` as tokenizer_config.json's chat_template and `files` beside it */
function folderWith(name: string, chatTemplate: unknown, files: Record<string, string> = {}): string {
  const folder = join(dir, name);
  mkdirSync(folder);
  for (const f of ["config.json", "model.safetensors", "tokenizer.json"]) copyFileSync(join(sharedFile(FOLDER)!, f), join(folder, f));
  writeFileSync(join(folder, "tokenizer_config.json"), JSON.stringify({ eos_token: "<|endoftext|>", ...(chatTemplate === undefined ? {} : { chat_template: chatTemplate }) }));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(folder, path, ".."), { recursive: true });
    writeFileSync(join(folder, path), text);
  }
  return folder;
}

/** the folder converted to a GGUF, as `tsllm convert` writes named templates (tokenizer.chat_template.<name>) */
async function ggufOf(folder: string, name: string): Promise<string> {
  const out = join(dir, `${name}.gguf`);
  await convertHFToGGUF(folder, out, { type: "f32", onWarning: () => {} });
  return out;
}

/** what jinja2 renders of `template` for the conversation with these variables */
function jinja2(template: string, variables: Record<string, unknown> = {}, addGenerationPrompt = true): string {
  const [r] = renderWithJinja2(template, [{ messages: MESSAGES, add_generation_prompt: addGenerationPrompt, bos_token: "<|endoftext|>", eos_token: "<|endoftext|>", ...variables }]);
  assert.ok(r && "out" in r, JSON.stringify(r));
  return r.out;
}

/** the conversation as the model's template chosen for `choice` renders it */
function rendered(tokenizer: Tokenizer, choice: { name?: string; tools?: boolean }, variables: Record<string, unknown> = {}): string {
  return chatFormatterFor(tokenizer, undefined, choice).render(MESSAGES, true, variables);
}

test("a GGUF with only named chat templates chats: tools choose \"tool_use\", a name chooses its template, as transformers and llama.cpp choose them; rendered as jinja2 renders them", { skip }, async () => {
  const gguf = await ggufOf(folderWith("only-named", [{ name: "tool_use", template: TOOL_USE }, { name: "rag", template: RAG }]), "only-named");
  const tokenizer = openTokenizer(gguf);
  assert.deepEqual([...(tokenizer.namedChatTemplates?.keys() ?? [])].sort(), ["rag", "tool_use"]);
  assert.equal(rendered(tokenizer, { tools: true }, { tools: TOOLS }), jinja2(TOOL_USE, { tools: TOOLS }));
  assert.equal(rendered(tokenizer, { name: "rag" }, { documents: [{ text: "sunny" }] }), jinja2(RAG, { documents: [{ text: "sunny" }] }));
  assert.equal(chatFormatterFor(tokenizer, undefined, { name: "tool_use" }).template.where, `${gguf}: chat template (tokenizer.chat_template.tool_use)`);
  // no tools, no name: transformers' "multiple chat templates with no default", naming them
  assert.throws(() => chatFormatterFor(tokenizer), (e: unknown) => {
    assert.ok(e instanceof NoChatTemplateError, String(e));
    assert.deepEqual(e.names, ["rag", "tool_use"]);
    assert.match(e.reason, /none is "default" \(names: "rag", "tool_use"\)/);
    assert.match(e.message, /name one with chatTemplateName/);
    return true;
  });
  assert.throws(() => chatFormatterFor(tokenizer, undefined, { name: "default" }), (e: Error) => e.message.startsWith(`the model has no chat template named "default" (its templates: "rag", "tool_use")`));
  // a template given replaces the model's
  assert.equal(chatFormatterFor(tokenizer, { source: "X", where: "--chat-template x" }, { tools: true }).render(MESSAGES), "X");
});

test("a GGUF with a default and a tool_use template: the default without tools, tool_use with them; a model without tool_use keeps its default for tools", { skip }, async () => {
  const gguf = await ggufOf(folderWith("default-and-tools", { default: DEFAULT, tool_use: TOOL_USE }), "default-and-tools");
  const tokenizer = openTokenizer(gguf);
  assert.equal(rendered(tokenizer, {}), jinja2(DEFAULT));
  assert.equal(rendered(tokenizer, { tools: true }, { tools: TOOLS }), jinja2(TOOL_USE, { tools: TOOLS }));
  assert.equal(rendered(tokenizer, { name: "default", tools: true }, { tools: TOOLS }), jinja2(DEFAULT, { tools: TOOLS }));
  const plain = openTokenizer(await ggufOf(folderWith("default-and-rag", { default: DEFAULT, rag: RAG }), "default-and-rag"));
  assert.equal(rendered(plain, { tools: true }, { tools: TOOLS }), jinja2(DEFAULT, { tools: TOOLS }));
});

test("a folder's additional_chat_templates/<name>.jinja are its named templates beside chat_template.jinja, as newer transformers saves them; named by their file; convert writes them", { skip }, async () => {
  const folder = folderWith("additional", undefined, { "chat_template.jinja": DEFAULT, "additional_chat_templates/tool_use.jinja": TOOL_USE, "additional_chat_templates/rag.jinja": RAG, "additional_chat_templates/notes.txt": "not a template" });
  const tokenizer = openTokenizer(folder);
  assert.deepEqual([...(tokenizer.namedChatTemplates?.keys() ?? [])].sort(), ["rag", "tool_use"]);
  assert.equal(rendered(tokenizer, {}), jinja2(DEFAULT));
  assert.equal(rendered(tokenizer, { tools: true }, { tools: TOOLS }), jinja2(TOOL_USE, { tools: TOOLS }));
  assert.equal(chatFormatterFor(tokenizer, undefined, { name: "rag" }).template.where, `${join(folder, "additional_chat_templates", "rag.jinja")}: chat template`);
  // convert writes them as llama.cpp's converter writes named templates, and the GGUF chats as the folder does
  const gguf = openTokenizer(await ggufOf(folder, "additional"));
  assert.deepEqual([...(gguf.namedChatTemplates?.keys() ?? [])].sort(), ["rag", "tool_use"]);
  assert.equal(rendered(gguf, {}), jinja2(DEFAULT));
  assert.equal(rendered(gguf, { tools: true }, { tools: TOOLS }), jinja2(TOOL_USE, { tools: TOOLS }));
  // only named ones: a chat without tools or a name says which there are
  const only = openTokenizer(folderWith("additional-only", undefined, { "additional_chat_templates/tool_use.jinja": TOOL_USE }));
  assert.equal(rendered(only, { tools: true }, { tools: TOOLS }), jinja2(TOOL_USE, { tools: TOOLS }));
  assert.throws(() => chatFormatterFor(only), (e: unknown) => e instanceof NoChatTemplateError && e.reason.includes(`additional_chat_templates: the model has several named chat templates and none is "default" (names: "tool_use")`));
});

test("the server renders a request with tools with the model's tool_use template (POST /apply-template, as jinja2 renders it); one without says which templates there are", { skip }, async () => {
  const gguf = await ggufOf(folderWith("serve-named", [{ name: "tool_use", template: TOOL_USE }, { name: "rag", template: RAG }]), "serve-named");
  const model = await loadModel(gguf, { threads: 1, contextSize: 256 });
  const server = await startServer(model, { port: 0 });
  try {
    const withTools = await post(`${server.url}/apply-template`, { messages: MESSAGES, tools: TOOLS });
    assert.equal(withTools.status, 200, JSON.stringify(withTools.json));
    assert.equal(withTools.json.prompt, jinja2(TOOL_USE, { tools: TOOLS }));
    const chat = await post(`${server.url}/v1/chat/completions`, { messages: MESSAGES, tools: TOOLS, max_tokens: 1 });
    assert.equal(chat.status, 200, JSON.stringify(chat.json));
    const without = await post(`${server.url}/v1/chat/completions`, { messages: MESSAGES, max_tokens: 1 });
    assert.equal(without.status, 400, JSON.stringify(without.json));
    assert.match(without.json.error.message, /none is "default" \(names: "rag", "tool_use"\)/);
    // the remedy names the templates and the way to choose one, in the library's words here and in serve's flags there
    assert.match(without.json.error.message, /: start the server with a chatTemplate, or with a chatTemplateName naming one of "rag", "tool_use", or use \/v1\/completions$/);
    const flagged = await startServer(model, { port: 0, settingNames: SETTING_FLAGS });
    try {
      const r = await post(`${flagged.url}/v1/chat/completions`, { messages: MESSAGES, max_tokens: 1 });
      assert.equal(r.status, 400, JSON.stringify(r.json));
      assert.match(r.json.error.message, /: start the server with --chat-template FILE, or with --chat-template-name NAME naming one of "rag", "tool_use", or use \/v1\/completions$/);
    } finally {
      await flagged.close(1000);
    }
    // a server started with a template's name (tsllm serve --chat-template-name) uses it for every request, tools or not
    const named = await startServer(model, { port: 0, chatTemplateName: "rag" });
    try {
      const r = await post(`${named.url}/apply-template`, { messages: MESSAGES });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.equal(r.json.prompt, jinja2(RAG));
      // (with tools: still rag's, which writes no tools itself, so the server adds llama.cpp's generic tool instructions as a system turn)
      const t = await post(`${named.url}/apply-template`, { messages: MESSAGES, tools: TOOLS });
      assert.equal(t.status, 200, JSON.stringify(t.json));
      assert.match(t.json.prompt, /^RAnswer with a single JSON object: .*\|weather\?\|$/);
    } finally {
      await named.close(1000);
    }
    assert.throws(() => startServer(model, { port: 0, chatTemplateName: "rag", chatTemplate: "X" }), /chatTemplateName names one of the model's own templates and chatTemplate replaces them/);
  } finally {
    await server.close(1000);
    model.dispose();
  }
});

test("tsllm generate --chat --chat-template-name NAME chats with that template; an unknown name, or none where the model has only named ones, says which there are", { skip }, async () => {
  const gguf = await ggufOf(folderWith("cli-named", [{ name: "tool_use", template: TOOL_USE }, { name: "rag", template: RAG }]), "cli-named");
  const base = ["generate", "--model", gguf, "--chat", "--prompt", "hi", "--max-tokens", "1", "--temp", "0"];
  const ok = await runTsllm([...base, "--chat-template-name", "rag"]);
  assert.equal(ok.code, 0, ok.stderr);
  const unknown = await runTsllm([...base, "--chat-template-name", "nope"]);
  assert.equal(unknown.code, 1, unknown.stderr);
  assert.match(unknown.stderr, /tsllm: error: the model has no chat template named "nope" \(its templates: "rag", "tool_use"\); give one with --chat-template FILE or name one with --chat-template-name NAME/);
  const none = await runTsllm(base);
  assert.equal(none.code, 1, none.stderr);
  assert.match(none.stderr, /none is "default" \(names: "rag", "tool_use"\).*or name one with --chat-template-name NAME/);
  const both = await runTsllm([...base, "--chat-template-name", "rag", "--chat-template", gguf]);
  assert.equal(both.code, 2, both.stderr);
  assert.match(both.stderr, /--chat-template-name names one of the model's own templates; --chat-template replaces them/);
});
