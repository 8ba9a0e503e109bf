import assert from "node:assert/strict";
import { after, test } from "node:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadModel, loadTokenizer, type Model } from "../src/index.js";
import { startServer } from "../src/server/index.js";
import { replyGrammar, thinkingOf, toolsOf } from "../src/server/tools.js";
import { ConstraintVocabulary, compileConstraint, TokenConstraint } from "../src/sampling/constraints/index.js";
import { ensureLlama3Vocab, ensureRandomModel, tinyLlama } from "../src/testing/index.js";
import { llamaCppTemplate, skipWithoutLlamaCppTemplates } from "./helpers/llama-cpp-templates.js";
import { post } from "./helpers/serve.js";
import { sharedFile } from "./helpers/shared.js";

// A tool format's call: its marker, then JSON arguments whose string may hold any character
// (the marker's text among them). The marker is written as a literal, as tools.ts writes it.
const CALL = (marker: string) => compileConstraint({ grammar: `root ::= ${JSON.stringify(marker)} "{\\"a\\": " str "}"\nstr ::= "\\"" [^"\\\\]* "\\""` });

/** the tokens a mask leaves (logits all 0 before it) */
function allowedBy(c: TokenConstraint, size: number): Set<number> {
  const logits = new Float32Array(size);
  c.mask(logits);
  return new Set([...logits.keys()].filter((id) => logits[id] !== -Infinity));
}

test("a preserved special token is taken where the grammar writes its text as a literal, and nowhere a JSON string merely may hold it", () => {
  const utf8 = new TextEncoder();
  // ids 0..: one token per character the call needs; MARKER and OTHER are special (no piece of their own)
  const chars = [..."<|python_tag>{}\"a: x"];
  const pieces: (Uint8Array | undefined)[] = [...new Set(chars)].map((ch) => utf8.encode(ch));
  const MARKER = pieces.length, OTHER = pieces.length + 1, END = pieces.length + 2;
  pieces.push(undefined, undefined, undefined);
  const id = (ch: string) => pieces.findIndex((p) => p !== undefined && new TextDecoder().decode(p) === ch);
  const base = ConstraintVocabulary.fromBytes(pieces);
  // OTHER (<|eot_id|>'s like) is not named: only the marker joins
  const vocab = base.withMarkers(new Map([[MARKER, utf8.encode("<|python_tag|>")]]));
  const grammar = CALL("<|python_tag|>");

  const c = new TokenConstraint(grammar, vocab, new Set([END]));
  assert.ok(c.allows(MARKER), "the marker token at the marker's place");
  assert.ok(allowedBy(c, pieces.length).has(MARKER));
  assert.ok(c.allows(id("<")), "spelled out in ordinary pieces too");
  assert.ok(!c.allows(OTHER), "a special token not named preserved");
  c.accept(MARKER);
  for (const ch of '{"a": "') c.accept(id(ch));
  // inside the string "<" is allowed, so the marker's text is: the marker token is not
  assert.ok(c.allows(id("<")));
  assert.ok(!c.allows(MARKER), "the marker token inside a JSON string");
  assert.ok(!allowedBy(c, pieces.length).has(MARKER));
  for (const ch of 'x"}') c.accept(id(ch));
  assert.ok(c.complete);

  // without preserved tokens, as before: only the spelling in ordinary pieces
  const plain = new TokenConstraint(grammar, base, new Set([END]));
  assert.ok(!plain.allows(MARKER));
  assert.ok(!allowedBy(plain, pieces.length).has(MARKER));
});

const phi3 = sharedFile("tokenizer-tests/ggml-vocab-phi-3.gguf");
test("on Phi-3's real vocabulary, a preserved control token is the call's marker, other control tokens and the end token stay where they were", { skip: phi3 ? false : "../shared/tokenizer-tests/ggml-vocab-phi-3.gguf not found" }, async () => {
  const tok = await loadTokenizer(phi3!);
  const d = new TextDecoder();
  const specialId = (text: string) => [...Array(tok.vocabSize).keys()].find((i) => tok.isSpecial(i) && d.decode(tok.tokenBytes(i)) === text)!;
  // a placeholder control token stands for a format's marker (Llama 3.1's <|python_tag|> is one too)
  const MARKER = "<|placeholder1|>";
  const marker = specialId(MARKER), assistant = specialId("<|assistant|>"), end = specialId("<|end|>");
  assert.ok(tok.endOfGenerationIds.has(end));
  // one ordinary token per character, found by its bytes
  const ordinary = new Map<string, number>();
  for (let i = 0; i < tok.vocabSize; i++) if (!tok.isSpecial(i)) ordinary.set(d.decode(tok.tokenBytes(i)), ordinary.get(d.decode(tok.tokenBytes(i))) ?? i);
  const vocab = ConstraintVocabulary.of(tok, [MARKER]);
  assert.equal(ConstraintVocabulary.of(tok, [MARKER, MARKER]), vocab, "one variant per preserved set");
  assert.equal(ConstraintVocabulary.of(tok, [MARKER, "<|end|>"]).markers.has(end), false, "an end token never becomes a marker");

  const c = new TokenConstraint(CALL(MARKER), vocab, tok.endOfGenerationIds);
  let allowed = allowedBy(c, tok.vocabSize);
  assert.ok(allowed.has(marker), "the marker token at the marker's place");
  for (const other of [assistant, end]) assert.ok(!allowed.has(other));
  const ids = [marker];
  c.accept(marker);
  for (const ch of '{"a": "') c.accept(ids[ids.push(ordinary.get(ch)!) - 1]!);
  allowed = allowedBy(c, tok.vocabSize);
  assert.ok(allowed.has(ordinary.get("<")!) && !allowed.has(marker) && !allowed.has(assistant) && !allowed.has(end), "inside the string: its characters, no special token");
  for (const ch of 'x"}') c.accept(ids[ids.push(ordinary.get(ch)!) - 1]!);
  assert.ok(c.complete && c.allows(end));
  // the call reads back with its marker's text: the special token decodes to it
  const text = tok.decode(ids);
  assert.ok(text.startsWith(MARKER), text);
  assert.deepEqual(JSON.parse(text.slice(MARKER.length)), { a: "x" });

  // without preserved tokens the control token is never allowed (the marker only spelled out)
  assert.ok(!new TokenConstraint(CALL(MARKER), ConstraintVocabulary.of(tok), tok.endOfGenerationIds).allows(marker));
});

/** a random-weight model over Llama 3's real vocabulary (<|python_tag|> is control token 128010), in a temporary folder */
const dir = mkdtempSync(join(tmpdir(), "tsllm-preserved-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const llama3Model = async () => loadModel(await ensureRandomModel({ ...tinyLlama, embeddingLength: 64, feedForwardLength: 128, tiedEmbeddings: true, tokenizerFrom: await ensureLlama3Vocab(dir), seed: 4 }, dir), { threads: 1, contextSize: 256 });
const specialId = (model: Model, text: string) => [...Array(model.tokenizer.vocabSize).keys()].find((i) => model.tokenizer.isSpecial(i) && new TextDecoder().decode(model.tokenizer.tokenBytes(i)) === text)!;

test("a model under a grammar takes Llama 3's <|python_tag|> as its one special token where the grammar writes it, and its text stays in the completion", async () => {
  const model = await llama3Model();
  try {
    const tag = specialId(model, "<|python_tag|>"), header = specialId(model, "<|start_header_id|>");
    // a call marker, then a JSON string the model would fill with the marker and another special token if it could
    const grammar = 'root ::= "<|python_tag|>" "{\\"code\\": \\"" [^"\\\\]{3,6} "\\"}"';
    const options = { grammar, temperature: 0, maxTokens: 16, logitBias: { [tag]: 30, [header]: 20 } };
    const r = await model.generate("Call:", { ...options, preservedTokens: ["<|python_tag|>"] });
    assert.equal(r.completionTokens[0], tag, "the marker is its special token");
    assert.equal(r.completionTokens.filter((t) => t === tag).length, 1, "nowhere else: not inside the string");
    assert.ok(!r.completionTokens.includes(header), "a special token not named stays out");
    assert.equal(r.finishReason, "stop");
    assert.ok(r.completion.startsWith("<|python_tag|>"), r.completion);
    assert.equal(typeof JSON.parse(r.completion.slice("<|python_tag|>".length)).code, "string");
    // without it, as before: the marker spelled out in ordinary tokens, no special token at all
    const plain = await model.generate("Call:", options);
    assert.ok(plain.completionTokens.every((t) => !model.tokenizer.isSpecial(t)) && plain.completion.startsWith("<|python_tag|>"), plain.completion);
    // a wrong value: one line naming the option
    await assert.rejects(model.generate("Call:", { ...options, preservedTokens: "<|python_tag|>" as never }), (e: Error & { option?: string }) => e.option === "preservedTokens" && /^preservedTokens must be a list of special tokens' texts \(non-empty strings\), got "<\|python_tag\|>"$/.test(e.message));
  } finally {
    model.dispose();
  }
});

test("beam search under a grammar with preserved tokens keeps Llama 3's <|python_tag|> text in every beam's text, as sampling keeps it in the completion", async () => {
  const model = await llama3Model();
  try {
    const tag = specialId(model, "<|python_tag|>");
    const grammar = 'root ::= "<|python_tag|>" "{\\"code\\": \\"" [^"\\\\]{3,6} "\\"}"';
    const r = await model.generate("Call:", { grammar, numBeams: 3, numReturnSequences: 3, maxTokens: 16, logitBias: { [tag]: 30 }, preservedTokens: ["<|python_tag|>"] });
    assert.equal(r.beams!.length, 3);
    for (const b of r.beams!) {
      assert.equal(b.tokens[0], tag, "each beam opens with the marker's one token");
      // the judge: the tokenizer's own decoding with special tokens kept (only the marker is special here)
      assert.equal(b.text, model.tokenizer.decode(b.tokens.filter((t) => !model.tokenizer.endOfGenerationIds.has(t))), "the beam's text");
      assert.ok(b.text.startsWith("<|python_tag|>"), b.text);
      assert.equal(typeof JSON.parse(b.text.slice("<|python_tag|>".length)).code, "string");
    }
    assert.equal(r.completion, r.beams![0]!.text, "the best beam is the completion");
  } finally {
    model.dispose();
  }
});

test("the server's Llama 3.1 format under tool_choice required: a built-in call opens with the <|python_tag|> token, and is read back as the call", { skip: skipWithoutLlamaCppTemplates() }, async () => {
  const model = await llama3Model();
  const name = "meta-llama-Llama-3.1-8B-Instruct.jinja";
  const server = await startServer(model, { port: 0, chatTemplate: { source: llamaCppTemplate(name), where: name } });
  try {
    const tag = specialId(model, "<|python_tag|>");
    const python = { type: "function", function: { name: "python", parameters: { type: "object", properties: { code: { type: "string" } }, required: ["code"] } } };
    const { status, json } = await post(`${server.url}/v1/chat/completions`, {
      messages: [{ role: "user", content: "Run some code." }], tools: [python], tool_choice: "required",
      temperature: 0, max_tokens: 12, logit_bias: { [tag]: 30 }, logprobs: true,
    });
    assert.equal(status, 200, JSON.stringify(json));
    const choice = json.choices[0];
    // the marker was one token: the logprobs list the tokens taken, the preserved one with the text
    // the completion holds (llama-server's text_to_send); spelled out, the first would be "<"
    assert.deepEqual([choice.logprobs.content[0].token, choice.logprobs.content[1].token], ["<|python_tag|>", "python"], JSON.stringify(choice.logprobs.content.slice(0, 3)));
    assert.equal(choice.message.tool_calls?.length, 1, JSON.stringify(choice.message));
    assert.equal(choice.message.tool_calls[0].function.name, "python");
  } finally {
    await server.close(1000);
    model.dispose();
  }
});

// llama.cpp's chat formats list the markers their grammars write as preserved tokens
// (common/chat.cpp: Hermes 2 Pro's "<think>", "</think>", "<tool_call>", "</tool_call>", ...;
// Llama 3.x's "<|python_tag|>" with built-in tools; Mistral Nemo's "[TOOL_CALLS]")
test("the server names its format's call markers and a thinking template's reasoning markers as preserved for the reply's grammar", { skip: skipWithoutLlamaCppTemplates() }, () => {
  const tools = toolsOf({ tools: [{ type: "function", function: { name: "python", parameters: { type: "object", properties: { code: { type: "string" } }, required: ["code"] } } }], tool_choice: "required" })!;
  const qwen3 = llamaCppTemplate("Qwen-Qwen3-0.6B.jinja");
  const hermes = replyGrammar({}, tools, qwen3, thinkingOf(qwen3, ""))!;
  for (const marker of ["<think>", "</think>", "<tool_call>", "</tool_call>"]) assert.ok(hermes.preserved?.includes(marker), `${marker} in ${hermes.preserved}`);
  // reasoning_format "none": the grammar writes no reasoning markers
  assert.ok(!replyGrammar({}, tools, qwen3, thinkingOf(qwen3, ""), "none")!.preserved?.includes("<think>"));
  assert.ok(replyGrammar({}, tools, llamaCppTemplate("meta-llama-Llama-3.1-8B-Instruct.jinja"), undefined)!.preserved?.includes("<|python_tag|>"));
  assert.ok(replyGrammar({}, tools, llamaCppTemplate("mistralai-Mistral-Nemo-Instruct-2407.jinja"), undefined)!.preserved?.includes("[TOOL_CALLS]"));
});
