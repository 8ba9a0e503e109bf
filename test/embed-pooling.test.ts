import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { embed, loadEmbeddingModel, pipeline, startServer } from "../src/index.js";
import { post } from "./helpers/serve.js";
import { PROJECT_ROOT, SHARED, skipWithoutShared } from "./helpers/shared.js";

/*
 * Prompts (config_sentence_transformers.json's prompts and default_prompt_name, encode(prompt=...,
 * prompt_name=...)): the prompt joins the text before it is stripped and tokenized, so a prompted
 * text embeds as the joined text does on a folder without prompts.
 *
 * sentence-transformers' Pooling modes beyond the oracle's mean: weightedmean (SGPT's
 * position-weighted mean: token t from 0 weighs t + 1, over the tokens the attention mask keeps),
 * computed here by hand from the feature-extraction pipeline's last_hidden_state (transformers'
 * semantics, checked against the oracle elsewhere) of the same folder.
 */
const skip = skipWithoutShared("hf-oracle/minilm-embed/model.safetensors");
const dir = mkdtempSync(join(tmpdir(), "tsllm-embed-pooling-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const TEXTS = ["a short one", "the quick brown fox jumps over the lazy dog"];

function folderWith(name: string, pooling: Record<string, unknown>, more: Record<string, unknown> = {}): string {
  const folder = join(dir, name);
  cpSync(`${SHARED}/hf-oracle/minilm-embed`, folder, { recursive: true });
  writeFileSync(join(folder, "1_Pooling", "config.json"), JSON.stringify({ word_embedding_dimension: 48, pooling_mode_cls_token: false, pooling_mode_mean_tokens: false, pooling_mode_max_tokens: false, pooling_mode_mean_sqrt_len_tokens: false, ...pooling }));
  for (const [file, json] of Object.entries(more)) writeFileSync(join(folder, file), JSON.stringify(json));
  return folder;
}

test("weightedmean pooling (pooling_mode_weightedmean_tokens) is sentence-transformers' position-weighted mean", { skip }, async () => {
  const folder = folderWith("weighted", { pooling_mode_weightedmean_tokens: true });
  const m = await loadEmbeddingModel(folder, { threads: 1 });
  const fx = await pipeline("feature-extraction", folder, { threads: 1 });
  try {
    const ours = await m.embed(TEXTS);
    for (const [i, text] of TEXTS.entries()) {
      const h = ((await fx(text)) as number[][][])[0]!;
      const w = h.map((_, t) => t + 1), total = w.reduce((a, b) => a + b, 0);
      const expected = h[0]!.map((_, j) => h.reduce((s, row, t) => s + w[t]! * row[j]!, 0) / total);
      ours[i]!.forEach((x, j) => assert.ok(Math.abs(x - expected[j]!) < 1e-6, `text ${i}, component ${j}: ${x} vs ${expected[j]}`));
    }
    // and the option on any folder
    const plain = await loadEmbeddingModel(`${SHARED}/hf-oracle/minilm-embed`, { threads: 1 });
    try {
      assert.deepEqual(await plain.embed(TEXTS, { pooling: "weightedmean" }), ours);
    } finally {
      plain.dispose();
    }
  } finally {
    m.dispose();
    fx.dispose();
  }
});

const PROMPTS = { query: "query: ", passage: "passage: " };
const ST_CONFIG = (defaultPromptName: string | null) => ({ "config_sentence_transformers.json": { prompts: PROMPTS, default_prompt_name: defaultPromptName, similarity_fn_name: "cosine" } });

test("prompts: promptName, prompt and the folder's default_prompt_name put the prompt before each text, as encode()", { skip }, async () => {
  const plain = `${SHARED}/hf-oracle/minilm-embed`;
  const named = folderWith("prompts", { pooling_mode_mean_tokens: true }, ST_CONFIG(null));
  const byDefault = folderWith("default-prompt", { pooling_mode_mean_tokens: true }, ST_CONFIG("query"));
  const joined = await embed(plain, TEXTS.map((t) => `query: ${t}`), { threads: 1 });
  const m = await loadEmbeddingModel(named, { threads: 1 });
  try {
    assert.deepEqual((await m.embed(TEXTS, { promptName: "query" })).map((v) => Array.from(v)), joined);
    assert.deepEqual((await m.embed(TEXTS, { prompt: "query: " })).map((v) => Array.from(v)), joined);
    assert.deepEqual((await m.embed(TEXTS)).map((v) => Array.from(v)), await embed(plain, TEXTS, { threads: 1 }), "no default prompt: none");
    assert.deepEqual(m.tokenize(TEXTS, { promptName: "passage" }), m.tokenize(TEXTS.map((t) => `passage: ${t}`)));
    await assert.rejects(m.embed(TEXTS, { promptName: "document" }), /^OptionError: promptName: expected one of this model's prompts \("query", "passage"\), got "document"$/);
  } finally {
    m.dispose();
  }
  assert.deepEqual(await embed(byDefault, TEXTS, { threads: 1 }), joined, "default_prompt_name applies when a call names none");
  assert.deepEqual(await embed(byDefault, TEXTS, { threads: 1, prompt: "" }), await embed(plain, TEXTS, { threads: 1 }), "an empty prompt overrides the default");

  const badDefault = folderWith("bad-default", { pooling_mode_mean_tokens: true }, ST_CONFIG("search"));
  await assert.rejects(loadEmbeddingModel(badDefault, { threads: 1 }), /config_sentence_transformers\.json.*default_prompt_name.*expected one of the prompts' names \(query, passage\), found "search"/);
});

test("serve: /v1/embeddings takes text-embeddings-inference's prompt_name; an unknown name is a 400 naming it", { skip }, async () => {
  const folder = folderWith("serve-prompts", { pooling_mode_mean_tokens: true }, ST_CONFIG(null));
  const m = await loadEmbeddingModel(folder, { threads: 1 });
  const server = await startServer(m, { port: 0 });
  try {
    const r = await post(`${server.url}/v1/embeddings`, { input: TEXTS, prompt_name: "query" });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const expected = await embed(`${SHARED}/hf-oracle/minilm-embed`, TEXTS.map((t) => `query: ${t}`), { threads: 1 });
    r.json.data.forEach((d: { embedding: number[] }, i: number) => d.embedding.forEach((x, j) => assert.ok(Math.abs(x - expected[i]![j]!) < 1e-7)));
    const bad = await post(`${server.url}/v1/embeddings`, { input: TEXTS, prompt_name: "document" });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, "prompt_name");
    assert.match(bad.json.error.message, /^'prompt_name': expected one of this model's prompts/);
  } finally {
    await server.close(1000);
    m.dispose();
  }
});

test("tsllm embed --prompt-name / --prompt: the prompted vectors", { skip }, async () => {
  const folder = folderWith("cli-prompts", { pooling_mode_mean_tokens: true }, ST_CONFIG(null));
  const expected = await embed(`${SHARED}/hf-oracle/minilm-embed`, TEXTS.map((t) => `passage: ${t}`), { threads: 1 });
  for (const flags of [["--prompt-name", "passage"], ["--prompt", "passage: "]]) {
    const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "embed", "--model", folder, ...TEXTS.flatMap((t) => ["--input", t]), ...flags, "--json", "--threads", "1"], { cwd: PROJECT_ROOT, encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    (JSON.parse(r.stdout) as number[][]).forEach((v, i) => v.forEach((x, j) => assert.ok(Math.abs(x - expected[i]![j]!) < 1e-7, flags.join(" "))));
  }
});

/*
 * include_prompt: false (INSTRUCTOR, GritLM): encode() zeroes the attention mask of the first
 * prompt_length positions before pooling, prompt_length being the prompt tokenized alone less its
 * trailing [SEP]; the model still attends to them. The judge: transformers' own last_hidden_state
 * of the whole text (bert-chinese-base's oracle, one token per Chinese character), pooled here by
 * hand over the rows from prompt_length on.
 */
const chineseSkip = skipWithoutShared("hf-oracle/bert-chinese-base/model.safetensors");

function chineseFolder(name: string, pooling: Record<string, unknown>, prompts: Record<string, string>): string {
  const folder = join(dir, name);
  cpSync(`${SHARED}/hf-oracle/bert-chinese-base`, folder, { recursive: true });
  mkdirSync(join(folder, "1_Pooling"), { recursive: true });
  writeFileSync(join(folder, "modules.json"), JSON.stringify([
    { idx: 0, name: "0", path: "", type: "sentence_transformers.models.Transformer" },
    { idx: 1, name: "1", path: "1_Pooling", type: "sentence_transformers.models.Pooling" },
  ]));
  writeFileSync(join(folder, "1_Pooling", "config.json"), JSON.stringify({ word_embedding_dimension: 64, pooling_mode_cls_token: false, pooling_mode_mean_tokens: false, pooling_mode_max_tokens: false, pooling_mode_mean_sqrt_len_tokens: false, include_prompt: false, ...pooling }));
  writeFileSync(join(folder, "sentence_bert_config.json"), JSON.stringify({ max_seq_length: 512, do_lower_case: false }));
  writeFileSync(join(folder, "config_sentence_transformers.json"), JSON.stringify({ prompts, default_prompt_name: null, similarity_fn_name: "cosine" }));
  return folder;
}

test("include_prompt: false leaves the prompt's tokens (and [CLS]) out of the pooling, as encode(): mean, max, weightedmean, lasttoken", { skip: chineseSkip }, async () => {
  const oracle = JSON.parse(readFileSync(`${SHARED}/hf-oracle/bert-chinese-base.expected.json`, "utf8")) as { cases: { text: string; input_ids: number[]; last_hidden_state: number[][] }[] };
  // the prompt alone: [CLS] 北 京 是 [SEP] -> prompt_length 4; "BERT" is one [UNK]: [CLS] [UNK] 模 型 [SEP] -> 4
  const cases = [{ c: oracle.cases[3]!, prompt: "北京是", promptLength: 4 }, { c: oracle.cases[4]!, prompt: "BERT模型", promptLength: 4 }];
  for (const c of cases) assert.ok(c.c.text.startsWith(c.prompt), c.c.text);
  const byHand: Record<string, (h: number[][], skip: number) => number[]> = {
    mean: (h, k) => h[0]!.map((_, j) => h.slice(k).reduce((s, row) => s + row[j]!, 0) / (h.length - k)),
    max: (h, k) => h[0]!.map((_, j) => Math.max(...h.slice(k).map((row) => row[j]!))),
    weightedmean: (h, k) => h[0]!.map((_, j) => h.reduce((s, row, t) => s + (t >= k ? (t + 1) * row[j]! : 0), 0) / h.reduce((s, _, t) => s + (t >= k ? t + 1 : 0), 0)),
    lasttoken: (h) => h.at(-1)!,
  };
  const modes: Record<string, string> = { mean: "pooling_mode_mean_tokens", max: "pooling_mode_max_tokens", weightedmean: "pooling_mode_weightedmean_tokens", lasttoken: "pooling_mode_lasttoken" };
  for (const [mode, key] of Object.entries(modes)) {
    const folder = chineseFolder(`exclude-${mode}`, { [key]: true }, { city: cases[0]!.prompt, model: cases[1]!.prompt });
    const m = await loadEmbeddingModel(folder, { threads: 1 });
    try {
      for (const [k, { c, prompt, promptLength }] of cases.entries()) {
        const rest = c.text.slice(prompt.length);
        assert.deepEqual(m.tokenize([rest], { prompt })[0], c.input_ids, "the prompted text's tokens are the oracle's");
        const expected = byHand[mode]!(c.last_hidden_state, promptLength);
        const [byName] = await m.embed([rest], { promptName: k === 0 ? "city" : "model" });
        const [given] = await m.embed([rest], { prompt });
        assert.deepEqual(given, byName);
        byName!.forEach((x, j) => assert.ok(Math.abs(x - expected[j]!) < 1e-4, `${mode}, "${c.text}", component ${j}: ${x} vs ${expected[j]}`));
        if (mode === "mean") {
          const all = byHand.mean!(c.last_hidden_state, 0);
          assert.ok(Math.abs(byName![0]! - all[0]!) > 1e-3, "leaving the prompt out changes the vector");
          // token ids get no prompt: nothing of theirs is left out
          (await m.embed([c.input_ids]))[0]!.forEach((x, j) => assert.ok(Math.abs(x - all[j]!) < 1e-4));
        }
      }
    } finally {
      m.dispose();
    }
  }
  const cls = chineseFolder("exclude-cls", { pooling_mode_cls_token: true }, { city: "北京是" });
  await assert.rejects(embed(cls, ["中华人民共和国的首都。"], { threads: 1, promptName: "city" }), /^OptionError: pooling: "cls" with a prompt on a Pooling that leaves the prompt out \(include_prompt: false\)/);
  assert.equal((await embed(cls, ["中华"], { threads: 1 }))[0]!.length, 64, "cls without a prompt: as include_prompt true");
  const short = chineseFolder("exclude-short", { pooling_mode_mean_tokens: true }, {});
  writeFileSync(join(short, "sentence_bert_config.json"), JSON.stringify({ max_seq_length: 4, do_lower_case: false }));
  await assert.rejects(embed(short, ["中华", "人民"], { threads: 1, prompt: "北京是" }), /^RangeError: embed: input 0: the prompt takes all its 4 tokens \(after truncation\), and this model's Pooling leaves the prompt out/);
});

test("serve: prompt_name (and the default prompt) on a Pooling with include_prompt: false leaves the prompt out, as embed()", { skip: chineseSkip }, async () => {
  const folder = chineseFolder("serve-exclude", { pooling_mode_mean_tokens: true }, { city: "北京是" });
  writeFileSync(join(folder, "config_sentence_transformers.json"), JSON.stringify({ prompts: { city: "北京是" }, default_prompt_name: "city", similarity_fn_name: "cosine" }));
  const oracle = JSON.parse(readFileSync(`${SHARED}/hf-oracle/bert-chinese-base.expected.json`, "utf8")) as { cases: { last_hidden_state: number[][] }[] };
  const h = oracle.cases[3]!.last_hidden_state;
  // transformers' rows of 北京是中华人民共和国的首都。 from prompt_length 4 on, averaged
  const expected = h[0]!.map((_, j) => h.slice(4).reduce((s, row) => s + row[j]!, 0) / (h.length - 4));
  const m = await loadEmbeddingModel(folder, { threads: 1 });
  const server = await startServer(m, { port: 0 });
  try {
    for (const body of [{ input: ["中华人民共和国的首都。"], prompt_name: "city" }, { input: "中华人民共和国的首都。" }]) {
      const r = await post(`${server.url}/v1/embeddings`, body);
      assert.equal(r.status, 200, JSON.stringify(r.json));
      r.json.data[0].embedding.forEach((x: number, j: number) => assert.ok(Math.abs(x - expected[j]!) < 1e-4, `${JSON.stringify(body)}: component ${j}: ${x} vs ${expected[j]}`));
    }
  } finally {
    await server.close(1000);
    m.dispose();
  }
});
