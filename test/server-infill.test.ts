import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ggufEntry } from "../src/formats/index.js";
import { loadModel, type Model } from "../src/index.js";
import { startServer, type OpenAIServer } from "../src/server/index.js";
import { assembleInfill } from "../src/server/infill.js";
import { GGMLType } from "../src/tensor/index.js";
import { tokenizerFromFolder } from "../src/tokenizer/hf/index.js";
import { writeRandomModel, type RandomModelSpec } from "../src/testing/random-model.js";
import { disposeSharedLlama, llamaToken, sharedLlama } from "./helpers/llama-cpp-oracle.js";
import { post, serveStories, skipStories } from "./helpers/serve.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

/*
 * llama-server's POST /infill. The judges: llama.cpp's source for the assembly
 * (tools/server/server-common.cpp format_prompt_infill: [FIM_REP]myproject\n, per chunk
 * [FIM_SEP]filename\n text or "\n\n--- snippet ---\n\n" text, [FIM_SEP]filename\n, BOS, FIM_PRE
 * prefix prompt, FIM_SUF suffix, FIM_MID; prefix keeps its last 3*(n_batch/4) tokens, suffix its
 * first n_batch/4 - 2 - prompt, the chunks their last n_ctx - n_batch - 2*n_predict) and
 * llama.cpp itself (node-llama-cpp) for the FIM token ids and every piece's tokens.
 */

const require = createRequire(import.meta.url);
let noLlama: string | false = false;
try { if (!existsSync(require.resolve("node-llama-cpp"))) noLlama = "node-llama-cpp is not installed"; } catch { noLlama = "node-llama-cpp is not installed"; }
const STARCODER = "tokenizer-tests/ggml-vocab-starcoder.gguf";
const skip = noLlama || skipWithoutShared(STARCODER);

after(disposeSharedLlama);

test("assembleInfill keeps llama-server's shares: the prefix's last 3/4 batch, the suffix's first 1/4 less the prompt and 2, the chunks' last n_ctx - n_batch - 2 n_predict", () => {
  const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
  const ids = { prefix: 1, suffix: 3, middle: 2 };
  const parts = { prefix: range(100, 100), suffix: range(200, 100), prompt: [7], extra: range(300, 80) };
  // batch 64: prefix min(100, 48), suffix min(100, 16 - 3) = 13; chunks min(80, 128 - 64 + 2) = 66
  const psm = assembleInfill(ids, 0, parts, { batch: 64, nPredict: -1, contextSize: 128 });
  assert.deepEqual(psm, [...range(314, 66), 0, 1, ...range(152, 48), 7, 3, ...range(200, 13), 2]);
  // (llama-server's own numbers overflow this context: 132 tokens in 128)
  assert.equal(psm.length, 132);
  // the room the context leaves: 127 - (1 + 1 + 48 + 1 + 1 + 13 + 1) = 61 of the chunks' last tokens
  const fitted = assembleInfill(ids, 0, parts, { batch: 64, nPredict: -1, contextSize: 128, extraRoom: 127 });
  assert.deepEqual(fitted, [...range(319, 61), 0, 1, ...range(152, 48), 7, 3, ...range(200, 13), 2]);
  // --spm-infill's order: the suffix first, BOS before it
  const spm = assembleInfill(ids, undefined, { ...parts, extra: [] }, { batch: 64, nPredict: 8, contextSize: 128 }, true);
  assert.deepEqual(spm, [3, ...range(200, 13), 1, ...range(152, 48), 7, 2]);
  // a prompt longer than the suffix's quarter leaves the suffix nothing
  assert.deepEqual(assembleInfill(ids, undefined, { ...parts, prompt: range(10, 20), extra: [] }, { batch: 64, nPredict: -1, contextSize: 128 }), [1, ...range(152, 48), ...range(10, 20), 3, 2]);
});

/** a random llama on starcoder2's vocabulary (FIM tokens by their text: <fim_prefix> 1, <fim_middle> 2, <fim_suffix> 3), with more keys */
async function writeModel(dir: string, name: string, extraMetadata: RandomModelSpec["extraMetadata"] = []): Promise<string> {
  const path = join(dir, name);
  await writeRandomModel(path, {
    arch: "llama", embeddingLength: 32, blockCount: 1, headCount: 2, headCountKv: 2, feedForwardLength: 64, contextLength: 512,
    tiedEmbeddings: true, weightType: GGMLType.F32, seed: 7, tokenizerFrom: sharedFile(STARCODER)!, extraMetadata,
  });
  return path;
}

describe("POST /infill on starcoder2's vocabulary", { skip }, () => {
  let dir: string;
  let byText: { path: string; model: Model; server: OpenAIServer };
  let byKeys: { path: string; model: Model; server: OpenAIServer };
  const serve = async (path: string) => {
    const model = await loadModel(path, { threads: 1, contextSize: 512 });
    return { path, model, server: await startServer(model, { port: 0 }) };
  };
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "tsllm-infill-"));
    byText = await serve(await writeModel(dir, "by-text.gguf"));
    // the older prefix/suffix/middle keys (llama.cpp still reads them), the repo-level pattern's tokens and BOS
    byKeys = await serve(await writeModel(dir, "by-keys.gguf", [
      ["tokenizer.ggml.prefix_token_id", ggufEntry.u32(7)], ["tokenizer.ggml.suffix_token_id", ggufEntry.u32(8)], ["tokenizer.ggml.middle_token_id", ggufEntry.u32(9)],
      ["tokenizer.ggml.fim_rep_token_id", ggufEntry.u32(5)], ["tokenizer.ggml.fim_sep_token_id", ggufEntry.u32(6)], ["tokenizer.ggml.add_bos_token", ggufEntry.bool(true)],
    ]));
  });
  after(async () => {
    for (const s of [byText, byKeys]) if (s) { await s.server.close(1000); s.model.dispose(); }
    rmSync(dir, { recursive: true, force: true });
  });

  /** llama.cpp's reading of the file: its FIM ids, BOS, and a text's tokens (no BOS; special-token text parsed or not) */
  async function llamaCpp(path: string) {
    const model = await (await sharedLlama()).loadModel({ modelPath: path, vocabOnly: true });
    return {
      model,
      fim: { prefix: model.tokens.infill.prefix, suffix: model.tokens.infill.suffix, middle: model.tokens.infill.middle },
      bos: model.tokens.shouldPrependBosToken ? model.tokens.bos : null,
      tok: (text: string, special = false) => model.tokenize(text, special).map(Number),
      text: (ids: number[]) => model.detokenize(ids.map(llamaToken), true),
    };
  }

  test("the FIM token ids are llama.cpp's: found by their text, or read from the older prefix/suffix/middle keys", async () => {
    for (const s of [byText, byKeys]) {
      const l = await llamaCpp(s.path);
      try {
        const f = s.model.tokenizer.fimIds;
        assert.deepEqual({ prefix: f.prefix, suffix: f.suffix, middle: f.middle }, l.fim, s.path);
      } finally {
        await l.model.dispose();
      }
    }
    // starcoder2's <repo_name> / <file_sep> are not among the texts llama.cpp looks for (<|repo_name|>, <reponame>, <|file_sep|>)
    assert.equal(byText.model.tokenizer.fimIds.repo, undefined);
    assert.equal(byText.model.tokenizer.fimIds.fileSeparator, undefined);
    assert.equal(byKeys.model.tokenizer.fimIds.repo, 5);
    assert.equal(byKeys.model.tokenizer.fimIds.fileSeparator, 6);
  });

  const prefix = "def add(a, b):\n    return ";
  const suffix = "\n\nprint(add(1, 2))\n";

  test("without a file separator each chunk follows llama-server's snippet line; the prefix, the prompt and the suffix go between the FIM tokens", async () => {
    const l = await llamaCpp(byText.path);
    try {
      const r = await post(`${byText.server.url}/infill`, {
        input_prefix: prefix, input_suffix: suffix, input_extra: [{ filename: "util.py", text: "import os\n" }], prompt: "a<fim_pad>", n_predict: 3, temperature: 0,
      });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      // starcoder adds no BOS; the prompt's special-token text is parsed, the other parts' is not
      const want = [...l.tok("\n\n--- snippet ---\n\n"), ...l.tok("import os\n"), l.fim.prefix!, ...l.tok(prefix), ...l.tok("a<fim_pad>", true), l.fim.suffix!, ...l.tok(suffix), l.fim.middle!];
      assert.equal(l.bos, null);
      assert.equal(r.json.tokens_evaluated, want.length);
      assert.equal(r.json.prompt, l.text(want));
      assert.equal(r.json.stop, true);
      assert.ok(r.json.tokens_predicted >= 1 && r.json.tokens_predicted <= 3, JSON.stringify(r.json));
    } finally {
      await l.model.dispose();
    }
  });

  test("a file's FIM token text stays text (llama-server tokenizes the parts with parse_special off)", async () => {
    const l = await llamaCpp(byText.path);
    try {
      const r = await post(`${byText.server.url}/infill`, { input_prefix: "x<fim_middle>", input_suffix: "", n_predict: 1 });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      const want = [l.fim.prefix!, ...l.tok("x<fim_middle>"), l.fim.suffix!, l.fim.middle!];
      assert.ok(want.length > 4);
      assert.equal(r.json.tokens_evaluated, want.length);
    } finally {
      await l.model.dispose();
    }
  });

  test("a long prefix keeps its last 3/4 of the batch (here half the 512-token context: 192 tokens), a long suffix its first quarter less 2", async () => {
    const l = await llamaCpp(byText.path);
    try {
      const longPrefix = "x = 1\n".repeat(150);
      const longSuffix = "y = 2\n".repeat(150);
      const r = await post(`${byText.server.url}/infill`, { input_prefix: longPrefix, input_suffix: longSuffix, n_predict: 1 });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      const p = l.tok(longPrefix);
      const s = l.tok(longSuffix);
      assert.ok(p.length > 192 && s.length > 62);
      const want = [l.fim.prefix!, ...p.slice(p.length - 192), l.fim.suffix!, ...s.slice(0, 62), l.fim.middle!];
      assert.equal(r.json.tokens_evaluated, want.length);
      assert.equal(r.json.prompt, l.text(want));
    } finally {
      await l.model.dispose();
    }
  });

  test("with repo and file separator tokens: llama-server's repo-level pattern (a chunk without a filename is tmp), BOS after the chunks", async () => {
    const l = await llamaCpp(byKeys.path);
    try {
      const r = await post(`${byKeys.server.url}/infill`, {
        input_prefix: prefix, input_suffix: suffix, input_extra: [{ filename: "a.py", text: "x = 1\n" }, { text: "y = 2\n" }], n_predict: 2,
      });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.notEqual(l.bos, null);
      const want = [
        5, ...l.tok("myproject\n"), 6, ...l.tok("a.py\n"), ...l.tok("x = 1\n"), 6, ...l.tok("tmp\n"), ...l.tok("y = 2\n"), 6, ...l.tok("filename\n"),
        l.bos!, l.fim.prefix!, ...l.tok(prefix), l.fim.suffix!, ...l.tok(suffix), l.fim.middle!,
      ];
      assert.deepEqual([l.fim.prefix, l.fim.suffix, l.fim.middle], [7, 8, 9]);
      assert.equal(r.json.tokens_evaluated, want.length);
      assert.equal(r.json.prompt, l.text(want));
    } finally {
      await l.model.dispose();
    }
  });

  test("the /completion fields apply: stream gives llama-server's events and a last one with stop true", async () => {
    const res = await fetch(`${byText.server.url}/infill`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ input_prefix: prefix, input_suffix: suffix, n_predict: 2, stream: true }), signal: AbortSignal.timeout(20_000) });
    assert.equal(res.status, 200);
    const events = (await res.text()).split("\n").filter((line) => line.startsWith("data: ")).map((line) => JSON.parse(line.slice(6)));
    assert.ok(events.length >= 2);
    assert.equal(events.at(-1).stop, true);
    assert.ok(events.slice(0, -1).every((e) => e.stop === false));
  });

  test("malformed fields are refused with one line naming the field", async () => {
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ input_suffix: "" }, "input_prefix", /'input_prefix' is required/],
      [{ input_prefix: "" }, "input_suffix", /'input_suffix' is required/],
      [{ input_prefix: 5, input_suffix: "" }, "input_prefix", /'input_prefix' must be a string/],
      [{ input_prefix: "", input_suffix: { a: 1 } }, "input_suffix", /'input_suffix' must be a string/],
      [{ input_prefix: [1, -2], input_suffix: "" }, "input_prefix", /input_prefix\[1\] is -2: token ids are integers/],
      [{ input_prefix: "", input_suffix: "", prompt: 3 }, "prompt", /'prompt' must be a string/],
      [{ input_prefix: "", input_suffix: "", input_extra: "x" }, "input_extra", /'input_extra' must be an array of \{"filename": string, "text": string\}/],
      [{ input_prefix: "", input_suffix: "", input_extra: ["x"] }, "input_extra[0]", /'input_extra\[0\]' must be an object/],
      [{ input_prefix: "", input_suffix: "", input_extra: [{ filename: "a" }] }, "input_extra[0].text", /'input_extra\[0\]\.text' must be a string/],
      [{ input_prefix: "", input_suffix: "", input_extra: [{ text: "", filename: 3 }] }, "input_extra[0].filename", /'input_extra\[0\]\.filename' must be a string/],
      [{ input_prefix: "", input_suffix: "", n_indent: "4" }, "n_indent", /^'n_indent' must be an integer in -inf\.\.inf, got "4"$/],
      [{ input_prefix: "", input_suffix: "", t_max_predict_ms: 1.5 }, "t_max_predict_ms", /^'t_max_predict_ms' must be an integer/],
      [{ input_prefix: "", input_suffix: "", response_fields: "content" }, "response_fields", /^'response_fields' must be a list of field paths/],
    ];
    for (const [body, param, message] of cases) {
      const r = await post(`${byText.server.url}/infill`, body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.json.error.param, param, JSON.stringify(body));
      assert.match(r.json.error.message, message);
      assert.ok(!r.json.error.message.includes("\n"), r.json.error.message);
    }
  });
});

describe("POST /infill with llama.vim's request: n_indent, t_max_predict_ms, the infill sampler, response_fields", { skip }, () => {
  let dir: string;
  let model: Model;
  let server: OpenAIServer;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "tsllm-infill-vim-"));
    model = await loadModel(await writeModel(dir, "m.gguf"), { threads: 1, contextSize: 512 });
    server = await startServer(model, { port: 0 });
  });
  after(async () => {
    await server?.close(1000);
    model?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  /** a GBNF grammar of exactly this text */
  const exactly = (text: string) => `root ::= ${JSON.stringify(text)}`;
  // the third line is indented by one space, the others by two
  const lines = "  a\n  b\n c\n" + "  d\n".repeat(12);

  test("llama.vim's own request (autoload/llama.vim's llama#fim) is answered with the fields it lists", async () => {
    const fields = ["content", "timings/prompt_n", "timings/prompt_ms", "timings/prompt_per_token_ms", "timings/prompt_per_second", "timings/predicted_n", "timings/predicted_ms", "timings/predicted_per_token_ms", "timings/predicted_per_second", "truncated", "tokens_cached"];
    const r = await post(`${server.url}/infill`, {
      input_prefix: "def add(a, b):\n", input_suffix: "\n\nprint(add(1, 2))\n", input_extra: [{ text: "import os\n", time: [1, 2], filename: "util.py" }], prompt: "    return ",
      n_predict: 256, n_indent: 4, top_k: 40, top_p: 0.99, stream: false, samplers: ["top_k", "top_p", "infill"], cache_prompt: true, t_max_prompt_ms: 500, t_max_predict_ms: 1500,
      response_fields: fields,
    });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    // llama-server's json_get_nested_values: each path found, under the path itself
    assert.deepEqual(Object.keys(r.json).sort(), [...fields].sort());
    assert.equal(typeof r.json.content, "string");
    assert.equal(typeof r.json["timings/predicted_n"], "number");
    // its ring update's fields (n_predict 0: the prompt only evaluated into the cache): no samplers,
    // a field that names nothing: an empty object
    const ring = await post(`${server.url}/infill`, { input_prefix: "", input_suffix: "", input_extra: [{ text: "x = 1\n", filename: "a.py" }], prompt: "", n_predict: 0, temperature: 0, stream: false, samplers: [], cache_prompt: true, t_max_prompt_ms: 1, t_max_predict_ms: 1, response_fields: [""] });
    assert.equal(ring.status, 200, JSON.stringify(ring.json));
    assert.deepEqual(ring.json, {});
    // without response_fields the whole summary, as before
    const whole = await post(`${server.url}/completion`, { prompt: "a", n_predict: 1, response_fields: [] });
    assert.equal(whole.json.stop, true);
    assert.equal(typeof whole.json.generation_settings, "object");
  });

  test("n_predict 0 (llama.vim's ring update) evaluates the prompt into the cache and generates nothing; the next request reuses it", async () => {
    // llama-server's n_predict: "When 0, no tokens will be generated but the prompt is evaluated into the cache"
    const chunk = Array.from({ length: 30 }, (_, i) => `ring_${i} = load(${i})\n`).join("");
    const extra = [{ text: chunk, filename: "ring.py" }];
    const ring = await post(`${server.url}/infill`, { input_prefix: "", input_suffix: "", input_extra: extra, prompt: "", n_predict: 0, samplers: [], cache_prompt: true, t_max_prompt_ms: 1, t_max_predict_ms: 1 });
    assert.equal(ring.status, 200, JSON.stringify(ring.json));
    assert.equal(ring.json.content, "");
    assert.equal(ring.json.tokens_predicted, 0);
    assert.equal(ring.json.stop, true);
    assert.equal(ring.json.stop_type, "limit");
    assert.equal(ring.json.timings.predicted_n, 0);
    // (the chunk is new to this server: its whole prompt is evaluated)
    assert.equal(ring.json.timings.prompt_n, ring.json.tokens_evaluated);
    assert.ok(ring.json.tokens_evaluated > 100, JSON.stringify(ring.json.timings));
    // the completion that follows, the same chunk before another cursor: its prompt is served from the cache up to where it differs
    const next = await post(`${server.url}/infill`, { input_prefix: "def f():\n", input_suffix: "\n", input_extra: extra, prompt: "", n_predict: 1, temperature: 0, cache_prompt: true });
    assert.equal(next.status, 200, JSON.stringify(next.json));
    assert.ok(next.json.timings.cache_n > 0, JSON.stringify(next.json.timings));
    assert.equal(next.json.timings.cache_n + next.json.timings.prompt_n, next.json.tokens_evaluated);
    assert.ok(next.json.timings.prompt_n < ring.json.timings.prompt_n, `evaluated ${next.json.timings.prompt_n} prompt tokens after the ring update's ${ring.json.timings.prompt_n}`);
    // POST /completion takes it too, streamed or not; OpenAI's route keeps OpenAI's 400 without echo
    const plain = await post(`${server.url}/completion`, { prompt: chunk, n_predict: 0 });
    assert.equal(plain.status, 200, JSON.stringify(plain.json));
    assert.equal(plain.json.content, "");
    assert.equal(plain.json.tokens_predicted, 0);
    const res = await fetch(`${server.url}/completion`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ prompt: chunk, n_predict: 0, stream: true }), signal: AbortSignal.timeout(20_000) });
    const events = (await res.text()).split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)) as { content: string; stop: boolean; tokens_predicted: number });
    assert.deepEqual(events.map((e) => [e.content, e.stop, e.tokens_predicted]), [["", true, 0]]);
    const openai = await post(`${server.url}/v1/completions`, { prompt: chunk, max_tokens: 0 });
    assert.equal(openai.status, 400);
    assert.equal(openai.json.error.param, "max_tokens");
  });

  test("n_indent: the reply ends at the first new line indented less, cut before that line's text (stop_type limit)", async () => {
    const all = await post(`${server.url}/infill`, { input_prefix: "", input_suffix: "", n_predict: 200, temperature: 0, grammar: exactly(lines) });
    assert.equal(all.status, 200, JSON.stringify(all.json));
    assert.equal(all.json.content, lines);
    // llama-server's process_token: the line " c" has 1 space before its text, under n_indent 2: the text is erased from "c" on
    const r = await post(`${server.url}/infill`, { input_prefix: "", input_suffix: "", n_predict: 200, temperature: 0, grammar: exactly(lines), n_indent: 2 });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.content, "  a\n  b\n ");
    assert.equal(r.json.stop_type, "limit");
    assert.ok(r.json.tokens_predicted < all.json.tokens_predicted, JSON.stringify([r.json.tokens_predicted, all.json.tokens_predicted]));
    // n_indent 1: every line qualifies
    const one = await post(`${server.url}/infill`, { input_prefix: "", input_suffix: "", n_predict: 200, temperature: 0, grammar: exactly(lines), n_indent: 1 });
    assert.equal(one.json.content, lines);
    // the OpenAI route: a limit is finish_reason "length"
    const oai = await post(`${server.url}/v1/completions`, { prompt: "x", max_tokens: 200, temperature: 0, grammar: exactly(lines), n_indent: 2 });
    assert.equal(oai.status, 200, JSON.stringify(oai.json));
    assert.deepEqual([oai.json.choices[0].text, oai.json.choices[0].finish_reason], ["  a\n  b\n ", "length"]);
  });

  test("t_max_predict_ms: past the time, a token with a new line ends the reply (stop_type limit), that line kept", async () => {
    const text = "line\n".repeat(40);
    const r = await post(`${server.url}/infill`, { input_prefix: "", input_suffix: "", n_predict: 400, temperature: 0, grammar: exactly(text), t_max_predict_ms: 1 });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const content: string = r.json.content;
    assert.equal(r.json.stop_type, "limit");
    assert.equal(r.json.has_new_line, true);
    assert.ok(content.includes("\n") && content.length < text.length && text.startsWith(content), JSON.stringify(content));
  });
});

describe("POST /infill on a model without FIM tokens", { skip: skipStories || noLlama }, () => {
  test("is llama-server's 501: Infill is not supported by this model, each missing token named", async () => {
    // llama.cpp finds no FIM tokens in stories260K either
    const model = await (await sharedLlama()).loadModel({ modelPath: sharedFile("models/stories260K.gguf")!, vocabOnly: true });
    try {
      assert.deepEqual([model.tokens.infill.prefix, model.tokens.infill.suffix, model.tokens.infill.middle], [null, null, null]);
    } finally {
      await model.dispose();
    }
    const s = await serveStories();
    try {
      const r = await post(`${s.url}/infill`, { input_prefix: "a", input_suffix: "b" });
      assert.equal(r.status, 501);
      assert.equal(r.json.error.type, "not_supported_error");
      assert.match(r.json.error.message, /^Infill is not supported by this model: prefix token is missing\. suffix token is missing\. middle token is missing\. /);
      assert.ok(!r.json.error.message.includes("\n"));
    } finally {
      await s.close();
    }
  });
});

test("a tokenizer.json vocabulary's FIM tokens are found by llama.cpp's texts among its added tokens", { skip: skipWithoutShared("hf-oracle/gpt2-tiny") }, () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-infill-hf-"));
  try {
    const from = sharedFile("hf-oracle/gpt2-tiny")!;
    const json = JSON.parse(readFileSync(join(from, "tokenizer.json"), "utf8"));
    // Qwen2.5-Coder's spellings, ids past gpt2's 50257
    const added = ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|file_sep|>"];
    added.forEach((content, i) => json.added_tokens.push({ id: 50257 + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(json));
    copyFileSync(join(from, "tokenizer_config.json"), join(dir, "tokenizer_config.json"));
    const tok = tokenizerFromFolder(dir);
    assert.deepEqual(tok.fimIds, { prefix: 50257, middle: 50258, suffix: 50259, fileSeparator: 50260 });
    // the file separator ends generation, as llama.cpp adds fim_pad/rep/sep to its end-of-generation set
    assert.ok(tok.endOfGenerationIds.has(50260));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
