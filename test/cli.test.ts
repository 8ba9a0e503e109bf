import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { COMMANDS } from "../src/cli/commands.js";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL);
const dir = mkdtempSync(join(tmpdir(), "tsllm-cli-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function tsllm(...args: string[]) {
  const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, encoding: "utf8" });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test("--help works for the program and every command", () => {
  const top = tsllm("--help");
  assert.equal(top.code, 0);
  for (const cmd of ["generate", "tokenize", "inspect"]) {
    assert.match(top.stdout, new RegExp(`\\b${cmd}\\b`));
    const r = tsllm(cmd, "--help");
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^Usage: tsllm ${cmd}`));
  }
});

test("usage errors print one line and exit 2", () => {
  for (const args of [["frobnicate"], ["generate", "--prompt", "hi"], ["generate", "--model", "x.gguf", "--prompt", "hi", "--temperature", "hot"], ["generate", "--model", "x.gguf", "--prompt", "hi", "--repeat-last-n", "-2"], ["tokenize", "--model", "x.gguf", "--bogus"], ["generate", "--model", "x.gguf", "--prompt", "hi", "--cache-type-k", "q5_0"], ["serve", "--model", "x.gguf", "--cache-type-v", "int8"], ["quantize", "x.gguf", "y.gguf", "--type", "q8_0", "--tensor-type", "(=q4_0"],
    // past 2^53 (or any trained context): the library's memory plan hung on --ctx-size 9007199254740993, and --top-k 1e20 reached the sampler
    ["generate", "--model", "x.gguf", "--prompt", "hi", "--ctx-size", "9007199254740993"], ["inspect", "--model", "x.gguf", "--ctx-size", "16777217"], ["generate", "--model", "x.gguf", "--prompt", "hi", "--top-k", "1e20"], ["perplexity", "--model", "x.gguf", "--file", "x.txt", "--ctx", "4503599627370496"]]) {
    const r = tsllm(...args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
    assert.match(r.stderr, /^tsllm: error: /);
    assert.equal(r.stdout, "");
  }
});

test("a negative number given to an option is checked like any value, in one line; --version; a command named like an Object member is unknown", () => {
  for (const [args, message] of [
    [["generate", "--model", "x.gguf", "--prompt", "hi", "--max-tokens", "-3"], /^tsllm: error: --max-tokens must be >= 0, or -1 \/ -2 for no limit but the context; got -3$/],
    // (a negative --temperature is llama.cpp's greedy: accepted, test/cli-habits.test.ts)
    [["generate", "--model", "x.gguf", "--prompt", "hi", "--repeat-penalty", "-0.5"], /^tsllm: error: --repeat-penalty must be > 0, got -0.5$/],
    [["generate", "--model"], /^tsllm: error: --model needs a value after it$/],
    [["generate", "--model", "x.gguf", "--prompt", "hi", "--cache-type-v", "q8_0", "--flash-attn", "off"], /^tsllm: error: --cache-type-v q8_0 needs flash attention \(llama.cpp's order for a block-format cache\): leave --flash-attn auto or on, or use f16 \/ f32$/],
    [["constructor"], /^tsllm: error: unknown command "constructor"/],
    [["__proto__"], /^tsllm: error: unknown command "__proto__"/],
  ] as const) {
    const r = tsllm(...args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr.trim(), message);
  }
  const v = tsllm("--version");
  assert.equal(v.code, 0);
  assert.equal(v.stdout, `tsllm ${JSON.parse(readFileSync(join(PROJECT_ROOT, "package.json"), "utf8")).version}\n`);
  // a stray argument after it is refused, as every command refuses one, not dropped
  for (const flag of ["--version", "-V"]) {
    const extra = tsllm(flag, "extra");
    assert.deepEqual([extra.code, extra.stdout, extra.stderr], [2, "", `tsllm: error: unexpected argument 'extra' (${flag} takes no arguments)\n`], flag);
  }
});

test("a missing or corrupt model file is one clear error line naming the file", () => {
  const missing = tsllm("generate", "--model", join(dir, "nope.gguf"), "--prompt", "hi");
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /model not found: .*nope\.gguf/);
  const bad = join(dir, "bad.gguf");
  writeFileSync(bad, Buffer.from("GGML this is not a gguf file"));
  for (const cmd of ["generate", "inspect", "tokenize"]) {
    const r = tsllm(cmd, "--model", bad, ...(cmd === "generate" ? ["--prompt", "hi"] : cmd === "tokenize" ? ["--text", "hi"] : []));
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
    assert.match(r.stderr, /bad\.gguf: magic: expected "GGUF"/);
  }
});

test("a --draft-model not found is named by its flag, before the target loads", { skip }, () => {
  // it was "model not found: ..." after the target model had loaded, naming no flag
  const noDraft = join(dir, "no-draft.gguf");
  const r = tsllm("generate", "--model", sharedFile(MODEL)!, "--draft-model", noDraft, "--prompt", "hi", "--max-tokens", "2");
  assert.equal(r.code, 1, r.stderr);
  assert.ok(r.stderr.startsWith(`tsllm: error: --draft-model: model not found: ${noDraft} (`), r.stderr);
  assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
});

test("a truncated model fails at load with the file and field named", { skip }, () => {
  const truncated = join(dir, "truncated.gguf");
  writeFileSync(truncated, readFileSync(sharedFile(MODEL)!).subarray(0, 200_000));
  const r = tsllm("generate", "--model", truncated, "--prompt", "hi");
  assert.equal(r.code, 1);
  assert.match(r.stderr, /truncated\.gguf: tensor "[^"]+" offset: data .* lies past the end of the file/);
});

test("tokenize prints the table and JSON with llama.cpp's ids", { skip }, () => {
  // "Once upon a time" -> [1, 403, 407, 261, 378] is llama.cpp's tokenization (stories260K.expected.json)
  const expected = JSON.parse(readFileSync(sharedFile("models/stories260K.expected.json")!, "utf8")).cases[0];
  const json = tsllm("tokenize", "--model", sharedFile(MODEL)!, "--text", expected.prompt, "--json");
  assert.equal(json.code, 0, json.stderr);
  const parsed = JSON.parse(json.stdout);
  assert.deepEqual(parsed.ids, expected.promptTokens.slice(1));
  assert.equal(parsed.pieces.join("").replaceAll("\u2581", " "), " " + expected.prompt);
  const withSpecial = JSON.parse(tsllm("tokenize", "--model", sharedFile(MODEL)!, "--text", expected.prompt, "--json", "--add-special").stdout);
  assert.deepEqual(withSpecial.ids, expected.promptTokens);
  const table = tsllm("tokenize", "--model", sharedFile(MODEL)!, "--text", expected.prompt);
  const lines = table.stdout.trimEnd().split("\n");
  assert.match(lines[0]!, /Token ID \| Token Text/);
  assert.equal(lines.length, 2 + parsed.ids.length);
  assert.match(lines[2]!, new RegExp(`^\\s*${parsed.ids[0]} \\| ${parsed.pieces[0]}$`));
});

test("tokenize takes a Hugging Face folder, as its --help says: transformers' ids and tokens", { skip: skipWithoutShared("hf-oracle/roberta-sst.expected.json") }, () => {
  assert.match(tsllm("tokenize", "--help").stdout, /--model MODEL\s+a \.gguf file .*, a Hugging Face folder/);
  const oracle = JSON.parse(readFileSync(sharedFile("hf-oracle/roberta-sst.expected.json")!, "utf8"));
  for (const c of oracle.cases.slice(-2)) {
    const r = tsllm("tokenize", "--model", sharedFile("hf-oracle/roberta-sst")!, "--text", c.text, "--add-special", "--json");
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout).ids, c.input_ids, c.text);
  }
});

test("inspect describes the model without loading it", { skip }, () => {
  const r = tsllm("inspect", "--model", sharedFile(MODEL)!);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /architecture:\s+llama/);
  assert.match(r.stdout, /context length:\s+2048/);
  assert.match(r.stdout, /vocabulary:\s+512 tokens, llama/);
  assert.match(r.stdout, /tensor types:\s+F32 x48/);
  assert.match(r.stdout, /BOS 1 "<s>", EOS 2 "<\/s>"/);
  assert.match(r.stdout, /chat template:\s+no/);
  const json = JSON.parse(tsllm("inspect", "--model", sharedFile(MODEL)!, "--json").stdout);
  assert.equal(json.architecture, "llama");
  assert.equal(json.blockCount, 5);
  assert.equal(json.headCountKv, 4);
});

test("generate streams text to stdout and timings to stderr; stop strings and seeds work", { skip }, () => {
  const r = tsllm("generate", "--model", sharedFile(MODEL)!, "--prompt", "Once upon a time", "--temperature", "0", "--max-tokens", "64");
  assert.equal(r.code, 0, r.stderr);
  const expected = JSON.parse(readFileSync(sharedFile("models/stories260K.expected.json")!, "utf8")).cases[0];
  assert.equal(r.stdout, expected.completion + "\n");
  assert.match(r.stderr, /TTFT [\d.]+ ms/);
  assert.match(r.stderr, /TPOT [\d.]+ ms/);
  const stopped = JSON.parse(tsllm("generate", "--model", sharedFile(MODEL)!, "--prompt", "Once upon a time", "--temperature", "0", "--stop", "Lily", "--json").stdout);
  assert.equal(stopped.finishReason, "stop");
  assert.equal(stopped.completion, expected.completion.slice(0, expected.completion.indexOf("Lily")));
  const seeded = (seed: string) => JSON.parse(tsllm("generate", "--model", sharedFile(MODEL)!, "--prompt", "Lily", "--seed", seed, "--max-tokens", "24", "--temperature", "1", "--json").stdout).completionTokens;
  assert.deepEqual(seeded("42"), seeded("42"));
  assert.notDeepEqual(seeded("42"), seeded("43"));
});

/** runs the CLI and closes its stdout after the first bytes, as `| head -c 1` does: the exit status and stderr */
function tsllmReadByHead(...args: string[]): Promise<{ code: number | null; signal: string | null; stderr: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  child.stdout.once("data", () => child.stdout.destroy());
  return new Promise((done) => child.on("close", (code, signal) => done({ code, signal, stderr })));
}

test("a reader that goes away (| head) stops every command quietly with 141, the status SIGPIPE gives in a shell", { skip }, async () => {
  const model = sharedFile(MODEL)!;
  // each writes far more than a pipe's 64 KiB buffer: generate in many small writes, tokenize in one table
  for (const args of [
    ["generate", "--model", model, "--prompt", "Once upon a time", "--max-tokens", "2000", "--ignore-eos", "--threads", "1"],
    ["tokenize", "--model", model, "--text", "Once upon a time there was a cat. ".repeat(3000)],
  ]) {
    const r = await tsllmReadByHead(...args);
    // POSIX: a process killed by SIGPIPE shows as 128 + 13 in the shell; nothing is printed
    assert.deepEqual(r, { code: 141, signal: null, stderr: "" }, args[0]);
  }
});

test("--threads above the machine's cores is capped with a one-line warning; 0 or less (-1 documented) is the default, as llama.cpp's -t", { skip }, () => {
  const r = tsllm("generate", "--model", sharedFile(MODEL)!, "--prompt", "Lily", "--max-tokens", "3", "--temperature", "0", "--threads", "1000");
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, new RegExp(`^tsllm: warning: --threads 1000 is more than the ${availableParallelism()} cores of this machine; using ${availableParallelism()}$`, "m"));
  // -1 is the default, as llama.cpp's -t -1; so are 0 and any other N <= 0, which llama.cpp's -t
  // (common/arg.cpp: n_threads <= 0 -> hardware_concurrency()) and llama-bench's -t take for all cores
  for (const t of ["-1", "0", "-2"]) {
    const dflt = tsllm("generate", "--model", sharedFile(MODEL)!, "--prompt", "Lily", "--max-tokens", "3", "--temperature", "0", "--threads", t);
    assert.equal(dflt.code, 0, `${t}: ${dflt.stderr}`);
    assert.doesNotMatch(dflt.stderr, /warning|error/);
  }
  assert.equal(tsllm("generate", "--model", sharedFile(MODEL)!, "--prompt", "Lily", "--threads", "1.5").stderr, 'tsllm: error: --threads expects an integer (decimal digits, optionally signed), got "1.5"\n');
  // the encoder commands too (they started a worker per asked thread)
  const bert = sharedFile("hf-oracle/bert-ner");
  if (bert === undefined) return;
  for (const args of [["pipeline", "ner", "--model", bert, "--input", "Paris"], ["embed", "--model", bert, "--input", "Paris"]]) {
    const e = tsllm(...args, "--threads", "1000");
    assert.equal(e.code, 0, e.stderr);
    assert.equal(e.stderr, `tsllm: warning: --threads 1000 is more than the ${availableParallelism()} cores of this machine; using ${availableParallelism()}\n`, args[0]);
  }
});

test("generate refuses option combinations that would be silently ignored, naming the flags", () => {
  const base = ["generate", "--model", "x.gguf", "--prompt", "hi"];
  for (const [extra, message] of [
    [["--logprobs", "2"], /--logprobs needs --json/],
    [["--num-beams", "2", "--prompt-lookup"], /--num-beams cannot be combined with --draft-model or --prompt-lookup/],
    [["--num-beams", "2", "--draft-model", "y.gguf"], /--num-beams cannot be combined with --draft-model or --prompt-lookup/],
    [["--n", "2", "--num-beams", "2"], /--n cannot be combined with --num-beams, --draft-model or --prompt-lookup/],
    [["--draft-model", "y.gguf", "--prompt-lookup"], /two ways of drafting/],
    [["--repeat-last-n", "-3"], /--repeat-last-n must be >= -1, got -3/],
  ] as const) {
    const r = tsllm(...base, ...extra);
    assert.equal(r.code, 2, `${extra.join(" ")}: ${r.stderr}`);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
    assert.match(r.stderr, message);
  }
});

test("--seed outside the sampler's 32-bit seeds is a usage error quoting what was typed", () => {
  // the sampler is mt19937, seeded with a uint32 as llama.cpp's; -1 is the one value below (a random seed)
  for (const seed of ["18446744073709551615", "9007199254740993", "4294967296", "-2", "1.5", "0x10", ""]) {
    const r = tsllm("generate", "--model", "x.gguf", "--prompt", "hi", "--seed", seed);
    assert.equal(r.code, 2, `--seed ${seed}: ${r.stderr}`);
    assert.equal(r.stderr, `tsllm: error: --seed must be an integer from 0 to 4294967295, or -1 for a random seed; got "${seed}"\n`);
  }
});

test("--seed -1 is a random seed, as llama.cpp's LLAMA_DEFAULT_SEED; the seed used is reported and reproduces the run", { skip }, () => {
  const run = (...extra: string[]) => tsllm("generate", "--model", sharedFile(MODEL)!, "--prompt", "Lily", "--max-tokens", "24", "--temperature", "1", "--threads", "1", ...extra);
  const a = JSON.parse(run("--seed", "-1", "--json").stdout), b = JSON.parse(run("--seed", "-1", "--json").stdout);
  assert.ok(Number.isInteger(a.seed) && a.seed >= 0 && a.seed <= 4294967295, `seed ${a.seed}`);
  assert.notEqual(a.seed, b.seed, "two random seeds (equal once in 2^32)");
  const again = JSON.parse(run("--seed", String(a.seed), "--json").stdout);
  assert.equal(again.seed, a.seed);
  assert.deepEqual(again.completionTokens, a.completionTokens);
  // the largest seed is a seed like any other; text mode names the seed on stderr
  assert.equal(JSON.parse(run("--seed", "4294967295", "--json").stdout).seed, 4294967295);
  const text = run("--seed", "7");
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stderr, /\| seed 7$/m);
});

test("--frequency-penalty, --presence-penalty and --repeat-last-n reach the sampler (the same tokens as the library's)", { skip }, async () => {
  const { loadModel } = await import("../src/index.js");
  const model = await loadModel(sharedFile(MODEL)!);
  try {
    const options = { temperature: 0, maxTokens: 24, frequencyPenalty: 1.5, presencePenalty: 0.5, repeatLastN: 16 };
    const lib = await model.generate("Lily", options);
    const plain = await model.generate("Lily", { temperature: 0, maxTokens: 24 });
    assert.notDeepEqual(lib.completionTokens, plain.completionTokens, "the penalties change the greedy text");
    const r = tsllm("generate", "--model", sharedFile(MODEL)!, "--prompt", "Lily", "--temperature", "0", "--max-tokens", "24", "--frequency-penalty", "1.5", "--presence-penalty", "0.5", "--repeat-last-n", "16", "--json");
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout).completionTokens, lib.completionTokens);
    // -1: the whole history, as llama.cpp's --repeat-last-n -1 and the library's repeatLastN -1
    const all = await model.generate("Lily", { ...options, repeatLastN: -1 });
    const rAll = tsllm("generate", "--model", sharedFile(MODEL)!, "--prompt", "Lily", "--temperature", "0", "--max-tokens", "24", "--frequency-penalty", "1.5", "--presence-penalty", "0.5", "--repeat-last-n", "-1", "--json");
    assert.equal(rAll.code, 0, rAll.stderr);
    assert.deepEqual(JSON.parse(rAll.stdout).completionTokens, all.completionTokens);
  } finally {
    model.dispose();
  }
});

test("generate --json-schema / --grammar / --choice: the completion follows the constraint; conflicting ones are one-line usage errors, an unreadable one a one-line error", { skip }, () => {
  const model = sharedFile(MODEL)!;
  const schema = { type: "object", properties: { n: { type: "integer" }, ok: { type: "boolean" } }, required: ["n", "ok"] };
  const r = tsllm("generate", "--model", model, "--prompt", "Once", "--json-schema", JSON.stringify(schema), "--max-tokens", "80", "--temperature", "0", "--json");
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.finishReason, "stop", out.completion);
  const value = JSON.parse(out.completion);
  assert.deepEqual(Object.keys(value), ["n", "ok"]);
  assert.ok(Number.isInteger(value.n) && typeof value.ok === "boolean", out.completion);
  const file = join(dir, "yes-no.gbnf");
  writeFileSync(file, 'root ::= ("yes" | "no") "!"\n');
  const g = tsllm("generate", "--model", model, "--prompt", "Once", "--grammar", file, "--temperature", "0.9", "--seed", "4", "--json");
  assert.equal(g.code, 0, g.stderr);
  assert.match(JSON.parse(g.stdout).completion, /^(yes|no)!$/);
  const x = tsllm("generate", "--model", model, "--prompt", "Once", "--regex", "[a-z]{3,6}[.!]", "--temperature", "0.9", "--seed", "2", "--json");
  assert.match(JSON.parse(x.stdout).completion, /^[a-z]{3,6}[.!]$/);
  const c = tsllm("generate", "--model", model, "--prompt", "Once", "--choice", "red", "--choice", "blue", "--json");
  assert.ok(["red", "blue"].includes(JSON.parse(c.stdout).completion), c.stdout);
  for (const [args, re] of [[["--grammar", file, "--choice", "a"], /give one of --grammar, --json-schema, --json-object, --choice and --regex, not --grammar and --choice/],
    [["--json-schema", "{nope"], /--json-schema: the argument is not JSON/],
    [["--choice", "a", "--prompt-lookup"], /work with sampling and --num-beams, not with --draft-model or --prompt-lookup/]] as const) {
    const e = tsllm("generate", "--model", model, "--prompt", "Once", ...args);
    assert.equal(e.code, 2, e.stderr);
    assert.match(e.stderr, re);
    assert.equal(e.stderr.trim().split("\n").length, 1);
  }
  // a file that cannot be read is no malformed command line: exit 1, as a --model not found
  const missing = tsllm("generate", "--model", model, "--prompt", "Once", "--grammar", join(dir, "missing.gbnf"));
  assert.equal(missing.code, 1, missing.stderr);
  assert.equal(missing.stderr, `tsllm: error: --grammar ${join(dir, "missing.gbnf")}: no such file\n`);
});

// The engine refuses these at submit (RequestError, naming the library's option); from the
// command line each is a bad flag: exit 2, one line naming the flag, nothing generated
test("values the engine refuses are usage errors naming the flag; --num-beams past the engine's default width runs", { skip }, () => {
  const model = sharedFile(MODEL)!;
  for (const [args, re] of [[["--stop", ""], /^tsllm: error: --stop is empty; give the text to stop at, or leave the option out$/],
    [["--logit-bias", "99999=1"], /^tsllm: error: --logit-bias: token id 99999 is outside the vocabulary \[0, 512\)$/],
    [["--regex", "("], /^tsllm: error: --regex: regex "\(", at 1: an unterminated group$/],
    [["--json-schema", '{"type":"foo"}'], /^tsllm: error: --json-schema: #\/type: expected one of object/]] as const) {
    const e = tsllm("generate", "--model", model, "--prompt", "Once", "--max-tokens", "4", ...args);
    assert.equal(e.code, 2, `${args.join(" ")}: ${e.stderr}`);
    assert.equal(e.stderr.trim().split("\n").length, 1, e.stderr);
    assert.match(e.stderr.trim(), re);
    assert.equal(e.stdout, "");
  }
  const wide = tsllm("generate", "--model", model, "--prompt", "Once", "--max-tokens", "3", "--num-beams", "20", "--json");
  assert.equal(wide.code, 0, wide.stderr);
  assert.equal(JSON.parse(wide.stdout).completionTokens.length, 3);
});

test("the fallback to the reference kernels is one tsllm warning line, not Node's", { skip }, () => {
  // an unusable kernel choice makes the WebAssembly backend refuse to start: the default backend falls back
  const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "generate", "--model", sharedFile(MODEL)!, "--prompt", "Once", "--max-tokens", "2"], {
    cwd: PROJECT_ROOT, encoding: "utf8", env: { ...process.env, TSLLM_WASM_SIMD: "bogus" },
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr.split("\n")[0]!, /^tsllm: warning: WebAssembly backend unavailable \(.*TSLLM_WASM_SIMD.*"bogus"\); using the slow reference kernels$/);
  assert.doesNotMatch(r.stderr, /\(node:\d+\)|--trace-warnings/);
  // embed (openEmbeddingModel: a decoder, an encoder) and an encoder's pipeline load through the pipelines' options: the same line
  for (const args of [["embed", "--model", sharedFile(MODEL)!, "--input", "Once"], ["embed", "--model", sharedFile("hf-oracle/minilm-embed")!, "--input", "Once"], ["pipeline", "text-classification", "--model", sharedFile("hf-oracle/bert-uncased-sst")!, "--input", "Once"]]) {
    const e = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, encoding: "utf8", env: { ...process.env, TSLLM_WASM_SIMD: "bogus" } });
    assert.equal(e.status, 0, `${args[0]}: ${e.stderr}`);
    assert.match(e.stderr.split("\n")[0]!, /^tsllm: warning: WebAssembly backend unavailable \(.*TSLLM_WASM_SIMD.*"bogus"\); using the slow reference kernels$/, args[0]);
    assert.doesNotMatch(e.stderr, /\(node:\d+\)|--trace-warnings/, args[0]);
  }
});

test("--json: a failure is also one JSON object on stdout ({error: {message, type}}), for every command that has --json; the stderr line and exit code stay", () => {
  const withJson = Object.entries(COMMANDS).filter(([, c]) => Object.hasOwn(c.options, "json")).map(([name]) => name);
  assert.ok(withJson.length >= 8, withJson.join(" "));
  const cases: [string[], number, string][] = [
    ...withJson.map((name): [string[], number, string] => [[name, "--json", "--no-such-option"], 2, "usage_error"]),
    [["inspect", "--model", join(dir, "missing.gguf"), "--json"], 1, "error"],
  ];
  for (const [args, code, type] of cases) {
    const r = tsllm(...args);
    assert.equal(r.code, code, `${args.join(" ")}: ${r.stderr}`);
    const line = /^tsllm: error: (.*)\n$/.exec(r.stderr);
    assert.ok(line, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { error: { message: line[1], type } }, args.join(" "));
  }
  // without --json, stdout stays empty
  assert.equal(tsllm("inspect", "--model", join(dir, "missing.gguf")).stdout, "");
});

test("an unknown option is one short line for every command, positional ones (download, rm) included", () => {
  for (const args of [["download", "--bogus", "org/name"], ["rm", "--bogus", "org/name"], ["generate", "--bogus"], ["serve", "--bogus"]]) {
    const r = tsllm(...args);
    assert.equal(r.code, 2, r.stderr);
    assert.equal(r.stderr, "tsllm: error: unknown option --bogus (--help lists the options)\n");
  }
});

test("serve: a bad server option is one usage line before anything loads, and an empty --host or --api-key is refused", () => {
  // the model does not exist: were its load started before the options were checked, its failure
  // would follow the usage line as an unhandled rejection's stack trace (exit 1)
  const missing = join(dir, "missing.gguf");
  for (const [flag, value, says] of [["--port", "99999", "--port must be <= 65535"], ["--max-queue", "-1", "--max-queue must be >= 0"], ["--chat-template-kwargs", "{bad", "--chat-template-kwargs expects a JSON object"],
    // an empty --host would listen on every interface instead of the default 127.0.0.1; an empty key would refuse every client
    ["--host", "", "--host is empty"], ["--api-key", "", "--api-key is empty"]] as const) {
    const r = tsllm("serve", "--model", missing, flag, value);
    assert.equal(r.code, 2, `${flag} ${value}: ${r.stderr}`);
    assert.equal(r.stderr.split("\n").length, 2, r.stderr);
    assert.ok(r.stderr.startsWith(`tsllm: error: ${says}`), r.stderr);
  }
});

test("a value that starts with a dash is the option's value (as llama.cpp takes the next argument), unless it is one of the command's options", { skip }, () => {
  const model = sharedFile(MODEL)!;
  // a markdown list item, a flag-like word: the same tokens as parseArgs' own --text=VALUE form
  for (const text of ["- item", "-v", "-"]) {
    const spaced = tsllm("tokenize", "--model", model, "--text", text, "--json");
    assert.equal(spaced.code, 0, `${text}: ${spaced.stderr}`);
    assert.deepEqual(JSON.parse(spaced.stdout), JSON.parse(tsllm("tokenize", "--model", model, `--text=${text}`, "--json").stdout), text);
  }
  // a forgotten value: the next option is not taken for it, and the line says how to give such a value
  for (const next of ["--json", "-h", "--"]) {
    const r = tsllm("tokenize", "--model", model, "--text", next);
    assert.equal(r.code, 2, r.stderr);
    assert.equal(r.stderr, "tsllm: error: --text is followed by an option, not its value (for a value that is also an option's name, write --text=VALUE)\n");
  }
});

test("--ctx-size 0 is the model's trained context (llama.cpp's -c 0): serve loads with it, inspect plans it", { skip }, async () => {
  const model = sharedFile(MODEL)!;
  // the trained context as llama.cpp's own GGUF reader reads it (llama.context_length)
  const { readGgufFileInfo } = await import("node-llama-cpp");
  const trained = ((await readGgufFileInfo(model)).metadata as { llama: { context_length: number } }).llama.context_length;
  const inspected = JSON.parse(tsllm("inspect", "--model", model, "--ctx-size", "0", "--json").stdout);
  assert.equal(inspected.memory.contextSize, trained);
  const child = spawn(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "serve", "--model", model, "--port", "0", "--ctx-size", "0", "--no-warmup"], { cwd: PROJECT_ROOT });
  let stderr = "";
  const ready = await new Promise<string>((done, fail) => {
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
      const line = /tsllm serve: ready: .*/.exec(stderr);
      if (line) done(line[0]);
    });
    child.on("exit", (code) => fail(new Error(`serve exited ${code} before it was ready: ${stderr}`)));
  });
  child.kill("SIGTERM");
  await new Promise((done) => child.once("exit", done));
  assert.match(ready, new RegExp(`, context ${trained}, `));
  // perplexity's window flag takes 0 the same way; 1 to 3 stay refused
  assert.match(tsllm("perplexity", "--model", model, "--file", "x.txt", "--ctx", "3").stderr, /--ctx must be >= 4, or 0 for the model's trained context; got 3/);
});
