import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { pipeline } from "../src/index.js";
import { gpt2TinyCopy } from "./helpers/gpt2-tiny-generation.js";
import { robertaTokenClassifier } from "./helpers/roberta-token-classifier.js";
import { PROJECT_ROOT, SHARED, skipWithoutShared } from "./helpers/shared.js";

/* `tsllm pipeline` and `tsllm embed` against the transformers oracles; usage errors exit 2. */

function tsllm(...args: string[]) {
  return spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, encoding: "utf8" });
}
const O = `${SHARED}/hf-oracle`;
const exp = (name: string) => JSON.parse(readFileSync(`${O}/${name}.expected.json`, "utf8"));
type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const close = (a: number[], b: number[], tol: number) => a.length === b.length && a.every((x, i) => Math.abs(x - b[i]!) <= tol);

test("tsllm pipeline sentiment-analysis --json: one element per input, as transformers returns it", { skip: skipWithoutShared("hf-oracle/bert-uncased-sst.expected.json") }, () => {
  const e = exp("bert-uncased-sst");
  const texts: string[] = e.cases.slice(0, 3).map((c: { text: string }) => c.text);
  const r = tsllm("pipeline", "sentiment-analysis", "--model", `${O}/bert-uncased-sst`, ...texts.flatMap((t) => ["--input", t]), "--json", "--threads", "1");
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { label: string; score: number }[][];
  assert.equal(out.length, 3);
  out.forEach((res, i) => {
    assert.deepEqual(res.map((x) => x.label), e.cases[i].pipeline.map((x: { label: string }) => x.label));
    assert.ok(close(res.map((x) => x.score), e.cases[i].pipeline.map((x: { score: number }) => x.score), 1e-4));
  });
  const all = JSON.parse(tsllm("pipeline", "text-classification", "--model", `${O}/bert-uncased-sst`, "--input", texts[0]!, "--top-k", "all", "--json", "--threads", "1").stdout);
  assert.deepEqual(all[0].map((x: { label: string }) => x.label), e.cases[0].pipeline_top_k_None.map((x: { label: string }) => x.label));
  const pair = e.pairs[0];
  const p = JSON.parse(tsllm("pipeline", "sentiment-analysis", "--model", `${O}/bert-uncased-sst`, "--input", pair.text, "--pair", pair.text_pair, "--json", "--threads", "1").stdout);
  assert.equal(p[0].label, pair.pipeline.label);
  const table = tsllm("pipeline", "sentiment-analysis", "--model", `${O}/bert-uncased-sst`, "--input", texts[0]!, "--threads", "1");
  assert.match(table.stdout, new RegExp(`> ${texts[0]}\\n\\s+label\\s+score\\n\\s+${e.cases[0].pipeline[0].label}\\s+0\\.\\d{4}`));
});

test("tsllm pipeline ner --aggregation-strategy and fill-mask --top-k", { skip: skipWithoutShared("hf-oracle/bert-ner.expected.json") }, () => {
  const e = exp("bert-ner"), c = e.cases[3];
  const r = tsllm("pipeline", "ner", "--model", `${O}/bert-ner`, "--input", c.text, "--aggregation-strategy", "first", "--json", "--threads", "1");
  assert.equal(r.status, 0, r.stderr);
  const groups = JSON.parse(r.stdout)[0];
  assert.deepEqual(groups.map((g: Record<string, unknown>) => [g.entity_group, g.word, g.start, g.end]), c.pipeline_first.map((g: Record<string, unknown>) => [g.entity_group, g.word, g.start, g.end]));
  const m = exp("bert-uncased-mlm").cases[5];
  const f = JSON.parse(tsllm("pipeline", "fill-mask", "--model", `${O}/bert-uncased-mlm`, "--input", m.text, "--top-k", "3", "--json", "--threads", "1").stdout);
  assert.deepEqual(f[0].map((row: { token: number }[]) => row.map((x) => x.token)), m.pipeline_fill_mask_top_k_5.map((row: { token: number }[]) => row.slice(0, 3).map((x) => x.token)));
  // --top-k 0: no proposal, no label (transformers' topk(0), [:0]), as the library answers; it was a usage error
  const none = (...args: string[]) => {
    const z = tsllm("pipeline", ...args, "--top-k", "0", "--json", "--threads", "1");
    assert.equal(z.status, 0, z.stderr);
    return JSON.parse(z.stdout);
  };
  assert.deepEqual(none("fill-mask", "--model", `${O}/bert-uncased-mlm`, "--input", m.text), [[[], []]]);
  assert.deepEqual(none("sentiment-analysis", "--model", `${O}/bert-uncased-sst`, "--input", "fine"), [[]]);
});

test("tsllm pipeline warns of an input past the model's tokens (read cut, where transformers fails on it)", { skip: skipWithoutShared("hf-oracle/bert-chinese-base") }, () => {
  const r = tsllm("pipeline", "feature-extraction", "--model", `${O}/bert-chinese-base`, "--input", "好", "--input", "好".repeat(600), "--json", "--threads", "1");
  assert.equal(r.status, 0, r.stderr);
  // 600 characters, one token each, and [CLS] [SEP]; the model's 512 positions
  assert.equal(r.stderr, `tsllm: warning: input 1 ("${"好".repeat(24)}...") has 602 tokens; only 512 (this model's limit) are read\n`);
  assert.deepEqual((JSON.parse(r.stdout) as number[][][][]).map((x) => x[0]!.length), [3, 512]);
  const short = tsllm("pipeline", "sentiment-analysis", "--model", `${O}/bert-uncased-sst`, "--input", "fine", "--pair", "good", "--json", "--threads", "1");
  assert.equal(short.stderr, "");
});

test("tsllm pipeline --function-to-apply, --ignore-labels and --target reach the pipeline (transformers' function_to_apply, ignore_labels, targets)", { skip: skipWithoutShared("hf-oracle/bert-ner.expected.json") }, () => {
  const sst = exp("bert-uncased-sst").cases[0];
  const raw = JSON.parse(tsllm("pipeline", "sentiment-analysis", "--model", `${O}/bert-uncased-sst`, "--input", sst.text, "--function-to-apply", "None", "--top-k", "all", "--json", "--threads", "1").stdout);
  // function_to_apply="none" (in any case, as transformers reads it): the logits themselves, best first
  assert.ok(close(raw[0].map((x: { score: number }) => x.score), [...sst.logits].sort((a: number, b: number) => b - a), 1e-4), JSON.stringify(raw));
  const c = exp("bert-ner").cases[0];
  const all = tsllm("pipeline", "ner", "--model", `${O}/bert-ner`, "--input", c.text, "--ignore-labels", "", "--json", "--threads", "1");
  assert.equal(all.status, 0, all.stderr);
  // nothing ignored: every token with its argmax label, O included
  assert.deepEqual(JSON.parse(all.stdout)[0].map((e: { entity: string }) => e.entity), c.argmax_labels.slice(1, -1));
  const noLoc = JSON.parse(tsllm("pipeline", "ner", "--model", `${O}/bert-ner`, "--input", c.text, "--aggregation-strategy", "SIMPLE", "--ignore-labels", "O,LOC", "--json", "--threads", "1").stdout)[0];
  assert.deepEqual(noLoc.map((g: { word: string }) => g.word), c.pipeline_simple.filter((g: { entity_group: string }) => g.entity_group !== "LOC").map((g: { word: string }) => g.word));
  const m = exp("bert-uncased-mlm").cases.find((x: { text: string }) => x.text === "Paris is the [MASK] of France.").masks[0];
  const f = JSON.parse(tsllm("pipeline", "fill-mask", "--model", `${O}/bert-uncased-mlm`, "--input", "Paris is the [MASK] of France.", "--target", "kramer", "--target", "shanghai", "--json", "--threads", "1").stdout)[0];
  const want = ["shanghai", "kramer"].map((t) => m.top20_softmax[m.top20_tokens.indexOf(t)]);
  assert.deepEqual(f.map((x: { token_str: string }) => x.token_str), ["shanghai", "kramer"]);
  assert.ok(close(f.map((x: { score: number }) => x.score), want, 1e-4));
  // a --target that is no vocabulary entry (vocab.txt holds "paris", not "Paris"): its first token is scored, as transformers, with one warning naming both, once for all inputs
  const cased = tsllm("pipeline", "fill-mask", "--model", `${O}/bert-uncased-mlm`, "--input", "Paris is the [MASK] of France.", "--input", "[MASK] is big.", "--target", "Paris", "--target", "shanghai", "--json", "--threads", "1");
  assert.equal(cased.status, 0, cased.stderr);
  assert.deepEqual(JSON.parse(cased.stdout)[0].map((x: { token_str: string }) => x.token_str).sort(), ["paris", "shanghai"]);
  assert.equal(cased.stderr, `tsllm: warning: fill-mask: targets: "Paris" is not in the model's vocabulary; scoring its first token "paris" instead\n`);
  const bad = tsllm("pipeline", "sentiment-analysis", "--model", "m", "--input", "x", "--function-to-apply", "tanh");
  assert.equal(bad.status, 2);
  assert.equal(bad.stderr, 'tsllm: error: --function-to-apply must be one of softmax, sigmoid, none, got "tanh"\n');
});

// transformers' is_split_into_words: each word tokenized alone (for WordPiece the text's own tokens,
// so the recorded logits), the spans in the words joined by the delimiter, here the --input as given
test("tsllm pipeline ner --is-split-into-words [--delimiter]: pre-split words give transformers' recorded entities", { skip: skipWithoutShared("hf-oracle/bert-ner.expected.json") }, () => {
  const e = exp("bert-ner");
  const spacesBefore = (text: string, at: number) => [...text].slice(0, at).filter((ch) => ch === " ").length;
  const rows = (r: Record<string, unknown>[]) => r.map((g) => [g.entity_group, g.word, g.start, g.end]);
  for (const s of ["simple", "first"] as const) {
    const cases = e.cases.slice(0, 3);
    const plain = tsllm("pipeline", "ner", "--model", `${O}/bert-ner`, ...cases.flatMap((c: Json) => ["--input", c.text]), "--is-split-into-words", "--aggregation-strategy", s, "--json", "--threads", "1");
    assert.equal(plain.status, 0, plain.stderr);
    const got = JSON.parse(plain.stdout) as Json[][];
    cases.forEach((c: Json, i: number) => {
      assert.deepEqual(rows(got[i]!), rows(c[`pipeline_${s}`]));
      assert.ok(close(got[i]!.map((g) => g.score), c[`pipeline_${s}`].map((g: Json) => g.score), 1e-4));
    });
    // another delimiter: each span moved by 2 per delimiter before it
    const c = e.cases[1];
    const piped = tsllm("pipeline", "ner", "--model", `${O}/bert-ner`, "--input", c.text.split(" ").join(" | "), "--is-split-into-words", "--delimiter", " | ", "--aggregation-strategy", s, "--json", "--threads", "1");
    assert.equal(piped.status, 0, piped.stderr);
    const moved = c[`pipeline_${s}`].map((g: Json) => ({ ...g, start: g.start + 2 * spacesBefore(c.text, g.start), end: g.end + 2 * spacesBefore(c.text, g.end) }));
    assert.deepEqual(rows(JSON.parse(piped.stdout)[0]), rows(moved));
  }
});

// transformers' stride: with a window of case 1's tokens (--max-length) and stride 0, case 1 + " " +
// case 0 is read as the two recorded inputs: their recorded entities, case 0's moved past case 1's text
test("tsllm pipeline ner --stride [--max-length]: a text past the window is read in windows, each as transformers reads it", { skip: skipWithoutShared("hf-oracle/bert-ner.expected.json") }, () => {
  const [b, a] = exp("bert-ner").cases as Json[];
  const text = `${a.text} ${b.text}`, shift = [...a.text].length + 1;
  const rows = (r: Json[]) => r.map((g) => [g.entity_group, g.word, g.start, g.end]);
  for (const s of ["simple", "average"] as const) {
    const r = tsllm("pipeline", "ner", "--model", `${O}/bert-ner`, "--input", text, "--max-length", String(a.input_ids.length), "--stride", "0", "--aggregation-strategy", s, "--json", "--threads", "1");
    assert.equal(r.status, 0, r.stderr);
    // the whole text is read: no warning of a cut
    assert.equal(r.stderr, "");
    const want = [...a[`pipeline_${s}`], ...b[`pipeline_${s}`].map((g: Json) => ({ ...g, start: g.start + shift, end: g.end + shift }))];
    const got = JSON.parse(r.stdout)[0] as Json[];
    assert.deepEqual(rows(got), rows(want));
    assert.ok(close(got.map((g) => g.score), want.map((g) => g.score), 1e-4));
  }
  // no strategy given: each token's entry, as transformers' default "none" reads the windows (stride
  // is refused only beside a "none" given with it); case 0's indices are its own window's
  const tokens = tsllm("pipeline", "ner", "--model", `${O}/bert-ner`, "--input", text, "--max-length", String(a.input_ids.length), "--stride", "0", "--json", "--threads", "1");
  assert.equal(tokens.status, 0, tokens.stderr);
  assert.equal(tokens.stderr, "");
  const wantTokens = [...a.pipeline_none, ...b.pipeline_none.map((e: Json) => ({ ...e, start: e.start + shift, end: e.end + shift }))];
  const gotTokens = JSON.parse(tokens.stdout)[0] as Json[];
  assert.deepEqual(gotTokens.map((e) => [e.entity, e.index, e.word, e.start, e.end]), wantTokens.map((e) => [e.entity, e.index, e.word, e.start, e.end]));
  assert.ok(close(gotTokens.map((e) => e.score), wantTokens.map((e) => e.score), 1e-4));
  // without a stride the window is the first: case 1's entities alone, with the cut said
  const cut = tsllm("pipeline", "ner", "--model", `${O}/bert-ner`, "--input", text, "--max-length", String(a.input_ids.length), "--aggregation-strategy", "simple", "--json", "--threads", "1");
  assert.equal(cut.stderr, `tsllm: warning: the input has ${a.input_ids.length + b.input_ids.length - 2} tokens; only ${a.input_ids.length} (--max-length) are read\n`);
  assert.deepEqual(rows(JSON.parse(cut.stdout)[0]), rows(a.pipeline_simple));
  // windows of 13 content tokens ([CLS] and [SEP] left out): stride 12 at most
  const wide = tsllm("pipeline", "ner", "--model", `${O}/bert-ner`, "--input", text, "--max-length", String(a.input_ids.length), "--stride", "13", "--aggregation-strategy", "simple", "--threads", "1");
  assert.equal(wide.status, 2);
  assert.equal(wide.stderr, `tsllm: error: --stride must be <= 12 (windows of 13 tokens: 15 less 2 special), got 13\n`);
});

// --input-json: the words as a JSON list, so a word may hold the delimiter. "New York" as one word:
// each word is tokenized alone, and BERT's pre-tokenizer still splits it at its space, its offsets
// moved to where it starts in the words joined by " " (transformers' word_ids + word_to_chars_map):
// the text's own tokens and spans, so the recorded entities
test("tsllm pipeline ner --is-split-into-words --input-json: a word holding the delimiter; the recorded entities", { skip: skipWithoutShared("hf-oracle/bert-ner.expected.json") }, () => {
  const c = exp("bert-ner").cases[1];
  const words: string[] = c.text.split(" ");
  const at = words.indexOf("New");
  words.splice(at, 2, `${words[at]} ${words[at + 1]}`);
  assert.ok(words.includes("New York"));
  for (const s of ["simple", "first"] as const) {
    const r = tsllm("pipeline", "ner", "--model", `${O}/bert-ner`, "--input", JSON.stringify(words), "--is-split-into-words", "--input-json", "--aggregation-strategy", s, "--json", "--threads", "1");
    assert.equal(r.status, 0, r.stderr);
    const [got] = JSON.parse(r.stdout) as Json[][];
    assert.deepEqual(got!.map((g) => [g.entity_group, g.word, g.start, g.end]), c[`pipeline_${s}`].map((g: Json) => [g.entity_group, g.word, g.start, g.end]));
    assert.ok(close(got!.map((g) => g.score), c[`pipeline_${s}`].map((g: Json) => g.score), 1e-4));
  }
  assert.match(tsllm("pipeline", "--help").stdout, /--input-json +token-classification, with --is-split-into-words: each --input is a JSON list of\n/);
});

// past the model's positions the window cannot be read: refused naming the flag and the limit (it was quietly capped)
test("tsllm pipeline ner --max-length past the model's positions: one line naming the flag and the limit, exit 2", { skip: skipWithoutShared("hf-oracle/bert-ner.expected.json") }, () => {
  const r = tsllm("pipeline", "ner", "--model", `${O}/bert-ner`, "--input", "John lives in Paris", "--max-length", "513", "--threads", "1");
  assert.equal(r.status, 2);
  assert.equal(r.stderr, "tsllm: error: --max-length: expected at most 512, the tokens BertForTokenClassification reads (its position embeddings), got 513\n");
  assert.equal(r.stdout, "");
});

// a generation asking for more tokens than the model's context stops at its end; transformers warns
// there (MaxLengthCriteria's "friendly reminder" past max_position_embeddings) and GPT-2's model then
// fails: the command line says so up front, once per input, and still answers
test("tsllm pipeline text-generation --max-length / --max-new-tokens past the model's context: a one-line warning", { skip: skipWithoutShared("hf-oracle/gpt2-tiny.expected.json") }, () => {
  const prompt = Array(509).fill("Hello").join(" "); // 509 GPT-2 tokens; gpt2-tiny has 512 positions
  const past = tsllm("pipeline", "text-generation", "--model", `${O}/gpt2-tiny`, "--input", prompt, "--max-length", "514", "--json", "--threads", "1");
  assert.equal(past.status, 0, past.stderr);
  assert.equal(past.stderr, "tsllm: warning: text-generation: the input asks for up to 514 tokens in all, the prompt's 509 included (maxLength, --max-length); the model's context holds 512: the generation stops there at the latest\n");
  assert.ok(JSON.parse(past.stdout)[0][0].generated_text.startsWith(prompt));
  const viaNew = tsllm("pipeline", "text-generation", "--model", `${O}/gpt2-tiny`, "--input", prompt, "--max-new-tokens", "4", "--json", "--threads", "1");
  assert.equal(viaNew.stderr, "tsllm: warning: text-generation: the input asks for up to 513 tokens in all, the prompt's 509 included (maxNewTokens, --max-new-tokens); the model's context holds 512: the generation stops there at the latest\n");
  // within the context: no warning
  const within = tsllm("pipeline", "text-generation", "--model", `${O}/gpt2-tiny`, "--input", prompt, "--max-length", "512", "--json", "--threads", "1");
  assert.equal(within.status, 0, within.stderr);
  assert.equal(within.stderr, "");
});

test("tsllm pipeline --stride, --is-split-into-words, --delimiter: a bad value or combination is one line naming the flag, exit 2", () => {
  for (const [args, message] of [
    [["--stride", "2.5", "--aggregation-strategy", "simple"], '--stride expects an integer (decimal digits, optionally signed), got "2.5"'],
    [["--stride", "-1", "--aggregation-strategy", "simple"], "--stride must be >= 0, got -1"],
    [["--stride", "many", "--aggregation-strategy", "simple"], '--stride expects an integer (decimal digits, optionally signed), got "many"'],
    [["--stride", "16", "--aggregation-strategy", "None"], "--stride with --aggregation-strategy none is refused, as transformers refuses it: give simple, first, average or max, or leave --aggregation-strategy out for each token's entry (a token two windows share once)"],
    [["--delimiter", "|"], "--delimiter joins the words of --is-split-into-words; give that too"],
    [["--is-split-into-words", "--delimiter", ""], "--delimiter is empty; give the text joining the words of --is-split-into-words or leave the option out"],
    [["--max-length", "1"], "--max-length must be >= 2, got 1"],
    [["--input-json"], "--input-json reads each --input as the words of --is-split-into-words; give that too"],
    [["--is-split-into-words", "--input-json"], '--input: expected a JSON list of words (--input-json), got "x"'],
  ] as const) {
    const r = tsllm("pipeline", "ner", "--model", "m", "--input", "x", ...args);
    assert.equal(r.status, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stderr, `tsllm: error: ${message}\n`);
  }
  assert.match(tsllm("pipeline", "--help").stdout, /--stride N[\s\S]*--is-split-into-words[\s\S]*--delimiter D/);
  for (const [input, message] of [['["New York", 5]', '--input 1: expected a non-empty JSON list of strings (--input-json), got ["New York",5]'], ["[]", "--input 1: expected a non-empty JSON list of strings (--input-json), got []"]]) {
    const r = tsllm("pipeline", "ner", "--model", "m", "--input", '["a"]', "--input", input!, "--is-split-into-words", "--input-json");
    assert.equal(r.status, 2, r.stderr);
    assert.equal(r.stderr, `tsllm: error: ${message}\n`);
  }
});

test("tsllm embed --normalize --json equals sentence-transformers' encode", { skip: skipWithoutShared("hf-oracle/minilm-embed.expected.json") }, () => {
  const e = exp("minilm-embed");
  const r = tsllm("embed", "--model", `${O}/minilm-embed`, "--input", e.cases[0].text, "--input", e.cases[1].text, "--normalize", "--json", "--threads", "1");
  assert.equal(r.status, 0, r.stderr);
  const v = JSON.parse(r.stdout) as number[][];
  assert.ok(close(v[0]!, e.cases[0].embedding, 1e-4) && close(v[1]!, e.cases[1].embedding, 1e-4));
  const plain = tsllm("embed", "--model", `${O}/minilm-embed`, "--input", e.cases[0].text, "--threads", "1").stdout.trim().split(" ").map(Number);
  assert.ok(close(plain, e.cases[0].embedding_unnormalized, 1e-4));
});

test("tsllm embed warns of an input past max_seq_length (embedded cut, as encode()); --dimensions keeps the first components", { skip: skipWithoutShared("hf-oracle/minilm-embed.expected.json") }, () => {
  const e = exp("minilm-embed");
  const long = e.cases.find((c: { n_tokens: number }) => c.n_tokens === e.config.max_seq_length);
  const r = tsllm("embed", "--model", `${O}/minilm-embed`, "--input", e.cases[0].text, "--input", long.text, "--json", "--threads", "1");
  assert.equal(r.status, 0, r.stderr);
  // named by its place and first words, as tsllm pipeline's
  const start = JSON.stringify(`${[...(long.text as string)].slice(0, 24).join("")}...`);
  assert.ok(r.stderr.startsWith(`tsllm: warning: input 1 (${start}) has `), r.stderr);
  assert.match(r.stderr, new RegExp(`\\) has \\d+ tokens; only its first ${e.config.max_seq_length} \\(this model's limit\\) are embedded\\n$`));
  const v = JSON.parse(r.stdout) as number[][];
  assert.ok(close(v[0]!, e.cases[0].embedding_unnormalized, 1e-4) && close(v[1]!, long.embedding_unnormalized, 1e-4));
  const cut = tsllm("embed", "--model", `${O}/minilm-embed`, "--input", e.cases[0].text, "--dimensions", "16", "--json", "--threads", "1");
  assert.equal(cut.stderr, "");
  assert.ok(close(JSON.parse(cut.stdout)[0], e.cases[0].embedding_unnormalized.slice(0, 16), 1e-4));
  const wide = tsllm("embed", "--model", `${O}/minilm-embed`, "--input", "x", "--dimensions", "49", "--threads", "1");
  assert.equal(wide.status, 2);
  assert.match(wide.stderr, /^tsllm: error: --dimensions must be <= 48 \(this model's embeddings have 48\), got 49\n$/);
});

test("usage errors: one line, exit 2", () => {
  for (const args of [["pipeline"], ["pipeline", "summarize", "--input", "x"], ["pipeline", "ner", "--model", "m"], ["pipeline", "ner", "--input", "x", "--aggregation-strategy", "mean"], ["pipeline", "fill-mask", "--input", "x", "--top-k", "1.5"], ["pipeline", "fill-mask", "--input", "x", "--top-k", "all"], ["embed", "--model", "m"], ["embed", "--input", "x", "--pooling", "avg"]]) {
    const r = tsllm(...args);
    assert.equal(r.status, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
    assert.match(r.stderr, /^tsllm: error: /);
  }
  for (const cmd of ["pipeline", "embed"]) assert.match(tsllm(cmd, "--help").stdout, new RegExp(`Usage: tsllm ${cmd}`));
});

/*
 * A folder whose generation_config.json sets do_sample: true made `tsllm pipeline text-generation`
 * sample with a random seed the command line neither took nor told: no run could be repeated, nor
 * made greedy. Now --do-sample / --no-do-sample, --temperature, --top-k, --top-p and --seed reach the
 * pipeline as a call's options, and a random seed that was used is printed, as generate prints it.
 */
test("tsllm pipeline text-generation --do-sample / --no-do-sample, --temperature, --top-k, --top-p, --seed: a folder's do_sample run repeated by the printed seed, made greedy, refused at temperature 0", { skip: skipWithoutShared("hf-oracle/gpt2-tiny.expected.json") }, () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-pipeline-sample-"));
  try {
    const folder = join(dir, "gpt2-sampling");
    mkdirSync(folder);
    for (const f of readdirSync(`${O}/gpt2-tiny`)) copyFileSync(join(`${O}/gpt2-tiny`, f), join(folder, f));
    const own = JSON.parse(readFileSync(join(folder, "generation_config.json"), "utf8"));
    writeFileSync(join(folder, "generation_config.json"), JSON.stringify({ ...own, do_sample: true, temperature: 1.5, max_new_tokens: 12 }));
    const run = (model: string, ...args: string[]) => tsllm("pipeline", "text-generation", "--model", model, "--input", "Once upon a time", "--json", "--threads", "1", ...args);
    const text = (r: ReturnType<typeof tsllm>) => {
      assert.equal(r.status, 0, r.stderr);
      return (JSON.parse(r.stdout) as { generated_text: string }[][])[0]![0]!.generated_text;
    };
    // a random seed, printed; given back, the same text
    const first = run(folder);
    const printed = /^seed (\d+) \(--seed \1 repeats the run\)\n$/.exec(first.stderr);
    assert.ok(printed, first.stderr);
    const again = run(folder, "--seed", printed[1]!);
    assert.equal(text(again), text(first));
    assert.equal(again.stderr, "", "a seed given is not printed");
    // the flags as a call's options: the plain folder with --do-sample and the file's values gives the same text
    assert.equal(text(run(folder, "--seed", "5")), text(run(`${O}/gpt2-tiny`, "--do-sample", "--temperature", "1.5", "--max-new-tokens", "12", "--seed", "5")));
    assert.equal(text(run(folder, "--seed", "5", "--temperature", "0.7", "--top-k", "20", "--top-p", "0.9")), text(run(`${O}/gpt2-tiny`, "--do-sample", "--temperature", "0.7", "--top-k", "20", "--top-p", "0.9", "--max-new-tokens", "12", "--seed", "5")));
    // --no-do-sample: greedy, and no seed printed
    const greedy = run(folder, "--no-do-sample");
    assert.equal(text(greedy), text(run(`${O}/gpt2-tiny`, "--max-new-tokens", "12")));
    assert.equal(greedy.stderr, "");
    // temperature 0 while sampling: refused as transformers refuses it, naming the flag
    const zero = run(folder, "--temperature", "0");
    assert.equal(zero.status, 2);
    assert.equal(zero.stderr, "tsllm: error: --temperature must be above 0 when sampling (--do-sample, or the model folder's do_sample), got 0, as transformers refuses it; give --no-do-sample for greedy decoding\n");
    for (const [args, message] of [
      [["--do-sample", "--no-do-sample"], "--do-sample and --no-do-sample: give one"],
      [["--top-k", "all"], "--top-k all is for text-classification, sentiment-analysis; text-generation takes sampling's top-k (0 for none)"],
      [["--top-p", "1.5"], "--top-p must be <= 1, got 1.5"],
      [["--seed", "x"], `--seed must be an integer from 0 to ${2 ** 32 - 1}, or -1 for a random seed; got "x"`],
    ] as const) {
      const r = run(folder, ...args);
      assert.equal(r.status, 2, r.stderr);
      assert.equal(r.stderr, `tsllm: error: ${message}\n`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/*
 * `tsllm pipeline text-generation` had no flag for transformers' repetition_penalty (the library's
 * repetitionPenalty), and a sampled run's --json output did not say which seed made it: the run could
 * not be repeated from its output (the seed went to stderr only, and only when drawn at random).
 */
test("tsllm pipeline text-generation --repetition-penalty (transformers' repetition_penalty) and --json's seed of a sampled run", { skip: skipWithoutShared("hf-oracle/gpt2-tiny.expected.json") }, () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-pipeline-penalty-"));
  try {
    const run = (model: string, ...args: string[]) => tsllm("pipeline", "text-generation", "--model", model, "--input", "Once upon a time", "--json", "--threads", "1", "--max-new-tokens", "40", ...args);
    const out = (r: ReturnType<typeof tsllm>) => {
      assert.equal(r.status, 0, r.stderr);
      return (JSON.parse(r.stdout) as Json[][])[0]![0]!;
    };
    // the flag as the folder's repetition_penalty: the same reply, another than without it
    const folder = join(dir, "gpt2-penalty");
    mkdirSync(folder);
    for (const f of readdirSync(`${O}/gpt2-tiny`)) copyFileSync(join(`${O}/gpt2-tiny`, f), join(folder, f));
    const own = JSON.parse(readFileSync(join(folder, "generation_config.json"), "utf8"));
    writeFileSync(join(folder, "generation_config.json"), JSON.stringify({ ...own, repetition_penalty: 1.8 }));
    const penalized = out(run(`${O}/gpt2-tiny`, "--repetition-penalty", "1.8"));
    assert.deepEqual(penalized, out(run(folder)));
    assert.notEqual(penalized.generated_text, out(run(`${O}/gpt2-tiny`)).generated_text);
    assert.deepEqual(out(run(folder, "--repetition-penalty", "1")), out(run(`${O}/gpt2-tiny`)), "the flag over the folder's");
    for (const bad of ["0", "-1"]) {
      const r = run(`${O}/gpt2-tiny`, "--repetition-penalty", bad);
      assert.equal(r.status, 2);
      assert.equal(r.stderr, `tsllm: error: --repetition-penalty must be > 0, got ${bad}\n`);
    }
    // a sampled run's JSON carries its seed, random or given; given back, the same reply; a greedy one has none
    const sampled = run(`${O}/gpt2-tiny`, "--do-sample", "--max-new-tokens", "12");
    const first = out(sampled);
    assert.ok(Number.isInteger(first.seed), sampled.stdout);
    assert.equal(sampled.stderr, `seed ${first.seed} (--seed ${first.seed} repeats the run)\n`);
    assert.deepEqual(out(run(`${O}/gpt2-tiny`, "--do-sample", "--max-new-tokens", "12", "--seed", String(first.seed))), first);
    assert.deepEqual(Object.keys(out(run(`${O}/gpt2-tiny`, "--max-new-tokens", "3"))), ["generated_text"]);
    // no room for a new token: refused as transformers refuses it, not answered with the prompt alone
    const zero = run(`${O}/gpt2-tiny`, "--max-new-tokens", "0");
    assert.equal(zero.status, 2);
    assert.equal(zero.stderr, "tsllm: error: --max-new-tokens must be >= 1, got 0\n");
    const full = tsllm("pipeline", "text-generation", "--model", `${O}/gpt2-tiny`, "--input", "Once upon a time", "--max-length", "4", "--threads", "1");
    assert.equal(full.status, 1);
    assert.equal(full.stderr, `tsllm: error: text-generation: the input has 4 tokens and maxLength 4 (maxLength, --max-length) counts them: no room for a new token; transformers refuses it too ("Input length of input_ids is 4, but max_length is set to 4"): give maxNewTokens, or a larger maxLength\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** a run of `tsllm pipeline text-generation` on gpt2-tiny's `input` (greedy, --json) with more flags */
function gpt2TinyText(input: string, maxNewTokens: number, model = `${O}/gpt2-tiny`) {
  return (...args: string[]) => tsllm("pipeline", "text-generation", "--model", model, "--input", input, "--json", "--threads", "1", "--max-new-tokens", String(maxNewTokens), ...args);
}

/** a run refused as a usage error: exit 2, one line `message` */
function assertUsageError(r: ReturnType<typeof tsllm>, message: string): void {
  assert.equal(r.status, 2, r.stderr);
  assert.equal(r.stderr, `tsllm: error: ${message}\n`);
}

/** the results of a run that succeeded */
function textResults(r: ReturnType<typeof tsllm>): Json[][] {
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as Json[][];
}

/*
 * `tsllm pipeline text-generation` had no flag for transformers' no_repeat_ngram_size, min_new_tokens
 * and min_length (the library refused them in a folder). The flags give what the library's options
 * give (test/text-generation-bans.test.ts judges those against the model's own logits, banned there).
 */
test("tsllm pipeline text-generation --no-repeat-ngram-size, --min-new-tokens, --min-length: the library's options", { skip: skipWithoutShared("hf-oracle/gpt2-tiny.expected.json") }, async () => {
  const gen = await pipeline("text-generation", `${O}/gpt2-tiny`, { threads: 1 });
  try {
    const input = "In the beginning";
    const run = gpt2TinyText(input, 30);
    const plain = textResults(run());
    const banned = textResults(run("--no-repeat-ngram-size", "2"));
    assert.deepEqual(banned, [await gen(input, { maxNewTokens: 30, noRepeatNgramSize: 2 })]);
    assert.notDeepEqual(banned, plain, "greedy repeats a 2-gram here");
    assert.deepEqual(textResults(run("--min-new-tokens", "3", "--min-length", "9", "--no-repeat-ngram-size", "3")), [await gen(input, { maxNewTokens: 30, minNewTokens: 3, minLength: 9, noRepeatNgramSize: 3 })]);
    for (const [flag, bad, message] of [
      ["--no-repeat-ngram-size", "-1", "--no-repeat-ngram-size must be >= 0, got -1"],
      ["--min-new-tokens", "1.5", `--min-new-tokens expects an integer (decimal digits, optionally signed), got "1.5"`],
      ["--min-length", "x", `--min-length expects an integer (decimal digits, optionally signed), got "x"`],
    ] as const) assertUsageError(run(flag, bad), message);
  } finally {
    gen.dispose();
  }
});

/*
 * transformers' suppress_tokens, begin_suppress_tokens, bad_words_ids, sequence_bias,
 * forced_bos_token_id and forced_eos_token_id had no flag (the library's options and a folder's
 * keys only). The flags give what the library's options give (test/text-generation-bad-words and
 * text-generation-forced-tokens judge those against the model's own logits).
 */
test("tsllm pipeline text-generation --suppress-tokens, --begin-suppress-tokens, --bad-words-ids, --sequence-bias, --forced-bos-token-id, --forced-eos-token-id: the library's options", { skip: skipWithoutShared("hf-oracle/gpt2-tiny.expected.json") }, async () => {
  const gen = await pipeline("text-generation", `${O}/gpt2-tiny`, { threads: 1 });
  try {
    const input = "In the beginning";
    const run = gpt2TinyText(input, 12);
    const plain = textResults(run());
    const suppressed = textResults(run("--suppress-tokens", "35169, 7675", "--begin-suppress-tokens", "11119"));
    assert.deepEqual(suppressed, [await gen(input, { maxNewTokens: 12, suppressTokens: [35169, 7675], beginSuppressTokens: [11119] })]);
    assert.notDeepEqual(suppressed, plain, "greedy takes those tokens here");
    // an id past the vocabulary bans nothing, as transformers' SuppressTokensLogitsProcessor (before: "--suppress-tokens: token id 50257 is outside the vocabulary", exit 2)
    assert.deepEqual(textResults(run("--suppress-tokens", "35169,50257,7675", "--begin-suppress-tokens", "11119,99999")), suppressed);
    const options = { maxNewTokens: 12, badWordsIds: [[35169, 35169], [26309]], sequenceBias: [[[11119, 7675], 4], [[35169], -3.5]] as [number[], number][], forcedEosTokenId: 11119 };
    assert.deepEqual(textResults(run("--bad-words-ids", "35169,35169", "--bad-words-ids", "26309", "--sequence-bias", "11119,7675=4", "--sequence-bias", "35169=-3.5", "--forced-eos-token-id", "11119")), [await gen(input, options)]);
    assert.deepEqual(textResults(run("--forced-eos-token-id", "50256,11119", "--forced-bos-token-id", "0")), [await gen(input, { maxNewTokens: 12, forcedEosTokenId: [50256, 11119], forcedBosTokenId: 0 })]);
    // the decay ends this reply early (before: an unknown flag)
    const decayed = textResults(run("--exponential-decay-length-penalty", "0, 3", "--repetition-penalty", "1.3"));
    assert.deepEqual(decayed, [await gen(input, { maxNewTokens: 12, exponentialDecayLengthPenalty: [0, 3], repetitionPenalty: 1.3 })]);
    assert.notDeepEqual(decayed, textResults(run("--repetition-penalty", "1.3")));
    for (const [flag, bad, message] of [
      ["--suppress-tokens", "1,x", `--suppress-tokens expects token ids separated by commas (such as 35169,7675; "" for none), got "1,x"`],
      ["--forced-eos-token-id", "7,", `--forced-eos-token-id expects token ids separated by commas (such as 35169,7675; "" for none), got "7,"`],
      ["--forced-bos-token-id", "x", `--forced-bos-token-id expects an integer (decimal digits, optionally signed), got "x"`],
      ["--sequence-bias", "35169", `--sequence-bias expects ID,...=BIAS (token ids separated by commas and a finite number), got "35169"`],
      ["--sequence-bias", "-1=2", `--sequence-bias expects token ids separated by commas (such as 35169,7675), got "-1"`],
      ["--forced-bos-token-id", "-3", "--forced-bos-token-id must be >= 0, got -3"],
      ["--exponential-decay-length-penalty", "3", `--exponential-decay-length-penalty expects START,FACTOR (an integer and a finite number, such as 10,1.5), got "3"`],
      ["--exponential-decay-length-penalty", "1.5,2", `--exponential-decay-length-penalty expects START,FACTOR (an integer and a finite number, such as 10,1.5), got "1.5,2"`],
      // ids past gpt2-tiny's 50257 tokens: the flag named, not the library's option (before: "suppressTokens: ...", exit 1)
      ["--sequence-bias", "7,60000=1", "--sequence-bias: token id 60000 is outside the vocabulary [0, 50257)"],
      ["--forced-eos-token-id", "50256,50300", "--forced-eos-token-id: token id 50300 is outside the vocabulary [0, 50257)"],
    ] as const) assertUsageError(run(flag, bad), message);
    // a forced token the suppression bans: in the flags' words (before: "every candidate token has logit -Infinity (did logitBias ...)", exit 1)
    assertUsageError(run("--forced-eos-token-id", "7", "--suppress-tokens", "3,7"), "--forced-eos-token-id 7 is in --suppress-tokens: the last step would have no token left");
  } finally {
    gen.dispose();
  }
});

/*
 * transformers' typical_p, epsilon_cutoff and eta_cutoff had no flag (typical_p: the library's option
 * and a folder's key; the cutoffs were refused). The flags give what the library's options give
 * (test/text-generation-cutoffs and text-generation-decay judge those against transformers' warpers).
 */
test("tsllm pipeline text-generation --typical-p, --epsilon-cutoff, --eta-cutoff: the library's options", { skip: skipWithoutShared("hf-oracle/gpt2-tiny.expected.json") }, async () => {
  const gen = await pipeline("text-generation", `${O}/gpt2-tiny`, { threads: 1 });
  try {
    const input = "In the beginning";
    const run = gpt2TinyText(input, 12);
    const sampling = ["--do-sample", "--seed", "7", "--temperature", "1.3"];
    const text = (r: ReturnType<typeof tsllm>) => (textResults(r)[0]![0] as { generated_text: string }).generated_text;
    const library = async (o: object) => ((await gen(input, { maxNewTokens: 12, doSample: true, seed: 7, temperature: 1.3, ...o })) as { generated_text: string }[])[0]!.generated_text;
    const plain = text(run(...sampling));
    const cut = text(run(...sampling, "--typical-p", "0.9", "--epsilon-cutoff", "0.02", "--eta-cutoff", "0.9"));
    assert.equal(cut, await library({ typicalP: 0.9, epsilonCutoff: 0.02, etaCutoff: 0.9 }));
    assert.notEqual(cut, plain, "the cutoffs change this reply");
    assert.equal(text(run(...sampling, "--epsilon-cutoff", "0.02")), await library({ epsilonCutoff: 0.02 }));
    assert.equal(text(run(...sampling, "--eta-cutoff", "1.5", "--typical-p", "2")), plain, "outside (0, 1) and typical-p 1 or more: none");
    for (const [flag, bad, message] of [
      ["--typical-p", "0", "--typical-p must be > 0, got 0"],
      ["--epsilon-cutoff", "x", `--epsilon-cutoff expects a decimal number (such as 0.5, -2 or 1e-3), got "x"`],
      ["--eta-cutoff", "1e400", `--eta-cutoff expects a finite number, got "1e400"`],
    ] as const) assertUsageError(run(flag, bad), message);
  } finally {
    gen.dispose();
  }
});

/*
 * A folder's forced_bos_token_id / forced_eos_token_id could not be turned off from the command line
 * ("" was refused): "" is none, as the list flags' "", the library's null (transformers' None).
 */
test("tsllm pipeline text-generation --forced-bos-token-id \"\", --forced-eos-token-id \"\": the folder's forced tokens off", { skip: skipWithoutShared("hf-oracle/gpt2-tiny.expected.json") }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-cli-forced-off-"));
  const gen = await pipeline("text-generation", `${O}/gpt2-tiny`, { threads: 1 });
  try {
    const folder = gpt2TinyCopy(dir, "forced", { forced_bos_token_id: 16492, forced_eos_token_id: 11119 });
    const input = "In the beginning";
    // the judge: the library on gpt2-tiny's own folder, which forces nothing (text-generation-forced-tokens judges it against the model's logits)
    const plain = [await gen(input, { maxNewTokens: 12 })];
    const run = gpt2TinyText(input, 12, folder);
    assert.notDeepEqual(textResults(run()), plain, "the folder's forced EOS changes the reply");
    assert.deepEqual(textResults(run("--forced-eos-token-id", "")), plain);
    // an empty --input starts from BOS, where the folder forces its token first
    const fromBos = gpt2TinyText("", 12, folder);
    assert.notDeepEqual(textResults(fromBos("--forced-eos-token-id", "")), [await gen("", { maxNewTokens: 12 })], "the folder's forced BOS changes the reply");
    assert.deepEqual(textResults(fromBos("--forced-bos-token-id", " ", "--forced-eos-token-id", "")), [await gen("", { maxNewTokens: 12 })]);
  } finally {
    gen.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("an option of other tasks (--pair, --top-k, --function-to-apply, --aggregation-strategy, --ignore-labels, --stride, --is-split-into-words, --delimiter, --input-json, --target, --max-new-tokens, --max-length, --memory-margin, --do-sample, --temperature, --top-p, --typical-p, --epsilon-cutoff, --eta-cutoff, --repetition-penalty, --no-repeat-ngram-size, --min-new-tokens, --min-length, --suppress-tokens, --begin-suppress-tokens, --bad-words-ids, --sequence-bias, --forced-bos-token-id, --forced-eos-token-id, --exponential-decay-length-penalty, --seed) is a usage error naming it and its tasks", () => {
  // what each option is for, as --help documents it
  const classification = "text-classification, sentiment-analysis";
  for (const [task, option, value, tasks] of [
    ...["token-classification", "ner", "fill-mask", "feature-extraction", "text-generation"].map((t) => [t, "pair", "second text", classification]),
    ["ner", "top-k", "2", `${classification}, fill-mask, text-generation`],
    ["fill-mask", "aggregation-strategy", "simple", "token-classification, ner"],
    ["sentiment-analysis", "max-new-tokens", "3", "text-generation"], ["fill-mask", "max-length", "8", "text-generation, token-classification, ner"],
    ["sentiment-analysis", "stride", "8", "token-classification, ner"], ["fill-mask", "is-split-into-words", "", "token-classification, ner"], ["text-generation", "delimiter", ",", "token-classification, ner"],
    ["feature-extraction", "input-json", "", "token-classification, ner"],
    ["ner", "function-to-apply", "none", classification], ["fill-mask", "ignore-labels", "O", "token-classification, ner"], ["sentiment-analysis", "target", "good", "fill-mask"],
    ["fill-mask", "memory-margin", "0", "text-generation"],
    ["fill-mask", "do-sample", "", "text-generation"], ["ner", "no-do-sample", "", "text-generation"], ["sentiment-analysis", "temperature", "0.5", "text-generation"],
    ["fill-mask", "top-p", "0.5", "text-generation"], ["feature-extraction", "seed", "3", "text-generation"], ["sentiment-analysis", "repetition-penalty", "1.2", "text-generation"],
    ["fill-mask", "no-repeat-ngram-size", "2", "text-generation"], ["ner", "min-new-tokens", "2", "text-generation"], ["sentiment-analysis", "min-length", "2", "text-generation"],
    ["fill-mask", "suppress-tokens", "2", "text-generation"], ["ner", "begin-suppress-tokens", "2", "text-generation"], ["feature-extraction", "bad-words-ids", "2,3", "text-generation"],
    ["sentiment-analysis", "sequence-bias", "2=1", "text-generation"], ["fill-mask", "forced-bos-token-id", "2", "text-generation"], ["ner", "forced-eos-token-id", "2", "text-generation"],
    ["fill-mask", "exponential-decay-length-penalty", "2,1.5", "text-generation"],
    ["ner", "typical-p", "0.5", "text-generation"], ["sentiment-analysis", "epsilon-cutoff", "0.01", "text-generation"], ["feature-extraction", "eta-cutoff", "0.01", "text-generation"],
  ] as const) {
    // a boolean flag takes no value
    const r = tsllm("pipeline", task, "--model", "m", "--input", "x", `--${option}`, ...(value === "" ? [] : [value]));
    assert.equal(r.status, 2, `${task} --${option}: ${r.stderr}`);
    assert.equal(r.stderr, `tsllm: error: --${option} is for ${tasks}, not ${task}\n`);
  }
});

// with several --input, every warning read "the input" (text-generation's, the library's, one per
// input) or "input 1" without its text: which of them was it about had to be guessed
test("tsllm pipeline with several --input: a warning or an error about one names it, its place and first words (one --input alone: the input); an option's refusal names none", { skip: skipWithoutShared("hf-oracle/gpt2-tiny.expected.json") || skipWithoutShared("hf-oracle/bert-uncased-mlm") }, () => {
  const texts = ["Hello there", "Once upon a time, in a land far away"];
  const generate = (...inputs: string[]) => tsllm("pipeline", "text-generation", "--model", `${O}/gpt2-tiny`, ...inputs.flatMap((t) => ["--input", t]), "--max-new-tokens", "600", "--json", "--threads", "1");
  // each input's warning as it reads run alone (its text is the test's above)
  const alone = texts.map((t) => generate(t));
  for (const r of alone) {
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /^tsllm: warning: text-generation: the input asks for up to \d+ tokens in all[^\n]*\n$/);
  }
  const own = alone.map((r) => r.stderr.slice("tsllm: warning: ".length));
  const both = generate(...texts);
  assert.equal(both.status, 0, both.stderr);
  assert.equal(both.stderr, `tsllm: warning: input 0 ("Hello there"): ${own[0]}tsllm: warning: input 1 ("Once upon a time, in a l..."): ${own[1]}`);
  assert.deepEqual(JSON.parse(both.stdout), alone.map((r) => JSON.parse(r.stdout)[0]));
  // an error during one input's run names it
  const fill = (...args: string[]) => tsllm("pipeline", "fill-mask", "--model", `${O}/bert-uncased-mlm`, "--input", "paris is the [MASK] of france.", "--input", "no mask here", ...args, "--threads", "1");
  const noMask = fill();
  assert.equal(noMask.status, 1);
  assert.equal(noMask.stderr, 'tsllm: error: input 1 ("no mask here"): fill-mask: the input has no mask token ([MASK]): "no mask here"\n');
  // an option's refusal is about the option, not the input it came with
  const target = fill("--target", "");
  assert.equal(target.status, 1);
  assert.equal(target.stderr, 'tsllm: error: fill-mask: targets: at least one target must be a token (given [""])\n');
});

// generate, serve, chat, inspect and perplexity take --memory-margin; pipeline text-generation loads a
// decoder too and had none (an unknown flag). The pool it sizes: test/pipelines.test.ts
test("tsllm pipeline text-generation --memory-margin SIZE: generate's flag, read by the same rule", { skip: skipWithoutShared("hf-oracle/gpt2-tiny.expected.json") }, () => {
  const run = (...args: string[]) => tsllm("pipeline", "text-generation", "--model", `${O}/gpt2-tiny`, "--input", "Hello", "--max-new-tokens", "3", "--json", "--threads", "1", ...args);
  const plain = run();
  for (const size of ["0", "512M"]) {
    const r = run("--memory-margin", size);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, plain.stdout, size);
  }
  assert.match(tsllm("pipeline", "--help").stdout, /\n {2}--memory-margin SIZE {10}text-generation: free memory the default KV pool leaves unused/);
  // generate's rule and words (test/memory-plan.test.ts), before the model loads; another task's refusal: the test above
  const bad = tsllm("pipeline", "text-generation", "--model", "m", "--input", "x", "--memory-margin", "lots");
  assert.equal(bad.status, 2, bad.stderr);
  assert.equal(bad.stderr, 'tsllm: error: --memory-margin expects a size in bytes (e.g. 268435456, 256MiB, 1G), got "lots"\n');
});

// first / average / max on a tokenizer that marks no continuing token guess words from spaces, as
// transformers' fallback heuristic, which warns; the command line printed nothing of it
test("tsllm pipeline ner --aggregation-strategy first on a byte-level BPE tokenizer: one warning line, transformers' fallback heuristic; none with simple", { skip: skipWithoutShared("hf-oracle/roberta-sst") }, async () => {
  const folder = await robertaTokenClassifier();
  try {
    const r = tsllm("pipeline", "ner", "--model", folder, "--input", "Hugging Face is in New York", "--input", "Paris", "--aggregation-strategy", "first", "--json", "--threads", "1");
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /^tsllm: warning: input 0 \("Hugging Face is in New Y\.\.\."\): token-classification: aggregationStrategy "first": [^\n]*\(transformers: "Tokenizer does not support real words, using fallback heuristic"\)\n$/);
    const simple = tsllm("pipeline", "ner", "--model", folder, "--input", "Hugging Face is in New York", "--aggregation-strategy", "simple", "--json", "--threads", "1");
    assert.equal(simple.status, 0, simple.stderr);
    assert.equal(simple.stderr, "");
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
});
