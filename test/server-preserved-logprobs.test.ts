import assert from "node:assert/strict";
import { after, test } from "node:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { loadModel, type Model } from "../src/index.js";
import { startServer } from "../src/server/index.js";
import { ensureLlama3Vocab, ensureRandomModel, tinyLlama } from "../src/testing/index.js";
import { llamaCppTemplate, skipWithoutLlamaCppTemplates } from "./helpers/llama-cpp-templates.js";

// A random-weight model over Llama 3's real vocabulary, where <|python_tag|> is control token
// 128010: under the Llama 3.1 format's grammar a built-in call opens with that one token, which
// the completion keeps as its text (c43d3f8). The logprobs must show the same text: llama-server's
// entry for a token is its text_to_send, the piece rendered with the specials it accepts.
const dir = mkdtempSync(join(tmpdir(), "tsllm-preserved-logprobs-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const TAG = "<|python_tag|>";

test("a preserved special token's logprobs entry carries its text and bytes, as the completion holds it, unstreamed and streamed", { skip: skipWithoutLlamaCppTemplates() }, async () => {
  const model: Model = await loadModel(await ensureRandomModel({ ...tinyLlama, embeddingLength: 64, feedForwardLength: 128, tiedEmbeddings: true, tokenizerFrom: await ensureLlama3Vocab(dir), seed: 4 }, dir), { threads: 1, contextSize: 256 });
  const name = "meta-llama-Llama-3.1-8B-Instruct.jinja";
  const server = await startServer(model, { port: 0, modelName: "llama", chatTemplate: { source: llamaCppTemplate(name), where: name } });
  try {
    const tag = [...Array(model.tokenizer.vocabSize).keys()].find((i) => model.tokenizer.isSpecial(i) && new TextDecoder().decode(model.tokenizer.tokenBytes(i)) === TAG)!;
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0 });
    const python = { type: "function" as const, function: { name: "python", parameters: { type: "object", properties: { code: { type: "string" } }, required: ["code"] } } };
    const request = {
      model: "llama", messages: [{ role: "user" as const, content: "Run some code." }], tools: [python], tool_choice: "required" as const,
      temperature: 0, max_tokens: 12, logit_bias: { [tag]: 30 }, logprobs: true, top_logprobs: 2,
    };
    const reply = await client.chat.completions.create(request);
    const choice = reply.choices[0]!;
    assert.equal(choice.message.tool_calls?.[0]?.type === "function" && choice.message.tool_calls[0].function.name, "python", JSON.stringify(choice.message));
    const content = choice.logprobs!.content!;
    // the first token is the marker: its text and its bytes, not "" (spelled out, it would be "<")
    assert.equal(content[0]!.token, TAG, JSON.stringify(content.slice(0, 2)));
    assert.deepEqual(content[0]!.bytes, [...new TextEncoder().encode(TAG)]);
    // the entries join into the call's text as the Llama 3.1 format writes a built-in call
    const joined = content.map((e) => e.token).join("");
    assert.ok(joined.startsWith(`${TAG}python.call(`), joined);
    assert.equal(new TextDecoder().decode(Uint8Array.from(content.flatMap((e) => e.bytes!))), joined, "the bytes rejoin into the tokens' text");

    // streamed: the same entries, sent with the deltas
    const streamed: typeof content = [];
    for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    assert.deepEqual(streamed.map((e) => [e.token, e.bytes]), content.map((e) => [e.token, e.bytes]));
  } finally {
    await server.close(1000);
    model.dispose();
  }
});
