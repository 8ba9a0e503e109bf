// What users coming from llama.cpp's tools type: its short spellings (-m -p -n -c -t -s -f, --temp,
// -ngl), a prompt piped in or read from a file (llama.cpp's -f drops the file's final line break),
// and a mistyped option or command answered with the closest name. The facts come from llama.cpp's
// common/arg.cpp (the option names, -f's handling); each run here spawns the real CLI.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { readGGUFHeader } from "../src/formats/gguf-reader.js";
import { GGMLType, typeName } from "../src/tensor/dtypes.js";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";
import { disposeSharedLlama, sharedLlama } from "./helpers/llama-cpp-oracle.js";

const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL);
const dir = mkdtempSync(join(tmpdir(), "tsllm-cli-habits-"));
after(async () => {
  rmSync(dir, { recursive: true, force: true });
  await disposeSharedLlama();
});

function tsllm(args: string[], input?: string) {
  const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, encoding: "utf8", input: input ?? "" });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** tsllm() without blocking the event loop (for a test that serves the child meanwhile) */
function tsllmAsync(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "", stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  return new Promise((done) => child.on("close", (code) => done({ code, stdout, stderr })));
}

/** a greedy 4-token completion's JSON, the model given */
function greedy(args: string[], input?: string) {
  const r = tsllm(["generate", "--model", sharedFile(MODEL)!, "--temperature", "0", "--max-tokens", "4", "--backend", "reference", "--json", ...args], input);
  assert.equal(r.code, 0, r.stderr);
  return { ...(JSON.parse(r.stdout) as { prompt: string; promptTokens: number[]; completionTokens: number[]; seed: number }), stderr: r.stderr };
}

test("llama.cpp's spellings -m -p -n -c -t -s and --temp=V mean tsllm's options; -ngl N is taken and ignored with a one-line note", { skip }, () => {
  const ours = greedy(["--prompt", "Once", "--seed", "5"]);
  const r = tsllm(["generate", "-m", sharedFile(MODEL)!, "-p", "Once", "-n", "4", "--temp=0", "-c", "64", "-t", "1", "-s", "5", "-ngl", "99", "--backend", "reference", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const theirs = JSON.parse(r.stdout) as typeof ours;
  assert.deepEqual(theirs.promptTokens, ours.promptTokens);
  assert.deepEqual(theirs.completionTokens, ours.completionTokens);
  assert.equal(theirs.completionTokens.length, 4);
  assert.equal(theirs.seed, 5);
  assert.equal(r.stderr, "tsllm: warning: -ngl is llama.cpp's GPU offload and is ignored here; --backend picks where the model runs\n");
  // llama-tokenize's -p is the text; a command without the option still refuses the spelling
  const tok = tsllm(["tokenize", "-m", sharedFile(MODEL)!, "-p", "Once upon", "--json"]);
  assert.equal(tok.code, 0, tok.stderr);
  assert.equal((JSON.parse(tok.stdout) as { ids: number[] }).ids.length, 2);
  // and so is its long spelling --prompt (llama-tokenize's usage: --prompt, -f, --stdin, --ids); it was "unknown option --prompt"
  const long = tsllm(["tokenize", "--model", sharedFile(MODEL)!, "--prompt", "Once upon", "--json"]);
  assert.equal(long.code, 0, long.stderr);
  assert.equal(long.stdout, tok.stdout);
  const quant = tsllm(["quantize", "-m", "x.gguf"]);
  assert.equal(quant.code, 2);
  assert.match(quant.stderr, /^tsllm: error: unknown option -m /);
});

test("tokenize -f FILE / --file - (llama-tokenize's -f and stdin flag) tokenizes the file's text as it is, final line break included; with --text too, or neither, one line", { skip }, () => {
  // llama-tokenize's read_prompt_from_file: the file's bytes whole, nothing stripped (unlike llama-cli's -f)
  const text = "Once upon a time\nthere was\n";
  const file = join(dir, "tokenize.txt");
  writeFileSync(file, text);
  const asText = tsllm(["tokenize", "--model", sharedFile(MODEL)!, "--text", text, "--json"]);
  assert.equal(asText.code, 0, asText.stderr);
  for (const [args, input] of [[["-f", file]], [["--file", "-"], text]] as const) {
    const r = tsllm(["tokenize", "-m", sharedFile(MODEL)!, ...args, "--json"], input);
    assert.deepEqual(r, asText, args.join(" "));
  }
  assert.deepEqual(tsllm(["tokenize", "--model", "x.gguf", "--text", "a", "--file", file]), { code: 2, stdout: "", stderr: "tsllm: error: --text and --file both give the text; give one\n" });
  assert.deepEqual(tsllm(["tokenize", "--model", "x.gguf"]), { code: 2, stdout: "", stderr: "tsllm: error: --text is required (or --file FILE; --stdin or --file - reads stdin)\n" });
});

test("tokenize takes llama-tokenize's --stdin, --ids ([1, 2, 3]) and --show-count (\"Total number of tokens: N\"); --ids or --show-count with --json, or two text sources, one line", { skip }, () => {
  const json = tsllm(["tokenize", "-m", sharedFile(MODEL)!, "--text", "Once upon a time\n", "--json"]);
  assert.equal(json.code, 0, json.stderr);
  const { ids } = JSON.parse(json.stdout) as { ids: number[] };
  assert.ok(ids.length > 2);
  // llama-tokenize's print_ids: "[" ids joined by ", " "]"; show_token_count: the line after
  const r = tsllm(["tokenize", "-m", sharedFile(MODEL)!, "--stdin", "--ids", "--show-count"], "Once upon a time\n");
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, `[${ids.join(", ")}]\nTotal number of tokens: ${ids.length}\n`);
  const table = tsllm(["tokenize", "-m", sharedFile(MODEL)!, "-p", "Once upon a time\n", "--show-count"]);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /^Token ID \| Token Text\n/);
  assert.ok(table.stdout.endsWith(`\nTotal number of tokens: ${ids.length}\n`), table.stdout);
  assert.equal(table.stdout.split("\n").length, ids.length + 4);
  for (const [args, message] of [
    [["--text", "x", "--ids", "--json"], "--json and --ids both choose the output; give one (--json's ids are the tokens, their length the count)"],
    [["--text", "x", "--show-count", "--json"], "--json and --show-count both choose the output; give one (--json's ids are the tokens, their length the count)"],
    [["--text", "x", "--stdin"], "--text and --stdin both give the text; give one"],
    [["--text", "x", "--file", "-", "--stdin"], "--text, --file and --stdin all give the text; give one"],
  ] as const) {
    const bad = tsllm(["tokenize", "-m", sharedFile(MODEL)!, ...args], "y");
    assert.equal(bad.code, 2, bad.stderr);
    assert.equal(bad.stderr, `tsllm: error: ${message}\n`);
  }
});

test("tokenize takes llama-tokenize's --no-parse-special (special tokens' text as text), --no-bos and --log-disable; the ids are llama.cpp's either way", { skip }, async () => {
  const text = "<s>Once upon</s> a time";
  const model = await (await sharedLlama()).loadModel({ modelPath: sharedFile(MODEL)!, vocabOnly: true });
  try {
    for (const [args, parseSpecial] of [[[], true], [["--no-parse-special", "--no-bos", "--log-disable"], false]] as const) {
      const r = tsllm(["tokenize", "-m", sharedFile(MODEL)!, "-p", text, "--ids", ...args]);
      assert.equal(r.code, 0, r.stderr);
      // node-llama-cpp's tokenize(text, specialTokens): llama_tokenize without BOS, parse_special as given
      assert.equal(r.stdout, `[${Array.from(model.tokenize(text, parseSpecial)).join(", ")}]\n`, args.join(" "));
    }
    assert.match(tsllm(["tokenize", "-m", sharedFile(MODEL)!, "-p", text, "--ids"]).stdout, /^\[1, .*, 2, /, "<s> and </s> are BOS and EOS when parsed");
  } finally {
    await model.dispose();
  }
  assert.deepEqual(tsllm(["tokenize", "-m", sharedFile(MODEL)!, "-p", "x", "--add-special", "--no-bos"]), { code: 2, stdout: "", stderr: "tsllm: error: --add-special and --no-bos contradict each other: give one (without either no BOS is added)\n" });
});

test("bench -n 0 (llama-bench's -n 0 skips its tg test) measures prefill only: decode is -, null in --json, not 0 tok/s or a crash", { skip }, () => {
  const table = tsllm(["bench", "-m", sharedFile(MODEL)!, "-p", "8", "-n", "0", "-r", "1", "--backend", "reference"]);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /^decode \(tok\/s\) +-$/m);
  assert.match(table.stdout, /^prefill \(tok\/s\) +[\d.]+$/m);
  assert.match(table.stderr, /^ {2}run 1 tsllm: load \d+ ms, prefill [\d.]+ tok\/s, decode -, RSS \d+ MiB$/m);
  const json = tsllm(["bench", "-m", sharedFile(MODEL)!, "-p", "8", "-n", "0", "-r", "1", "--backend", "reference", "--json"]);
  assert.equal(json.code, 0, json.stderr);
  const report = JSON.parse(json.stdout) as { genTokens: number; tsllm: { medians: Record<string, number | null>; samples: Record<string, number | null>[] } };
  assert.equal(report.genTokens, 0);
  assert.equal(report.tsllm.medians.decodeTokensPerSecond, null);
  assert.equal(report.tsllm.samples[0]!.decodeTokensPerSecond, null);
  assert.ok(report.tsllm.medians.prefillTokensPerSecond! > 0);
});

test("bench -p 4,8 -n 0,2 (llama-bench's comma lists and ranges) runs each pair of a prompt length and a decode count: a table each, --json an array; a bad list is one line", { skip }, () => {
  const json = tsllm(["bench", "-m", sharedFile(MODEL)!, "-p", "4-8+4", "-n", "0,2", "-r", "1", "--backend", "reference", "--json"]);
  assert.equal(json.code, 0, json.stderr);
  const reports = JSON.parse(json.stdout) as { promptTokens: number; genTokens: number; tsllm: { medians: Record<string, number | null> } }[];
  assert.deepEqual(reports.map((r) => [r.promptTokens, r.genTokens]), [[4, 0], [4, 2], [8, 0], [8, 2]]);
  assert.deepEqual(reports.map((r) => r.tsllm.medians.decodeTokensPerSecond === null), [true, false, true, false]);
  const table = tsllm(["bench", "-m", sharedFile(MODEL)!, "-p", "4,8", "-n", "2", "-r", "1", "--backend", "reference"]);
  assert.equal(table.code, 0, table.stderr);
  assert.deepEqual([...table.stdout.matchAll(/ (\d+) prompt tokens, (\d+) decode steps,/g)].map((m) => [m[1], m[2]]), [["4", "2"], ["8", "2"]]);
  assert.equal(table.stdout.match(/^prefill \(tok\/s\) +[\d.]+$/gm)?.length, 2);
  for (const [args, message] of [
    [["-p", "16,,32"], "--prompt-tokens expects a number or a list as llama-bench takes it (e.g. 128, 16,32 or 16-128*2), got \"16,,32\""],
    [["-n", "1-9*1"], "--gen-tokens: the range 1-9*1 never reaches its end (a step must be at least +1 or *2, from 1 up)"],
    [["-p", "1-100000"], "--prompt-tokens \"1-100000\" holds more than 1000 values; give fewer"],
    [["-p", "8,0"], "--prompt-tokens must be >= 1, got 0 (in \"8,0\")"],
  ] as const) {
    assert.deepEqual(tsllm(["bench", "-m", sharedFile(MODEL)!, ...args]), { code: 2, stdout: "", stderr: `tsllm: error: ${message}\n` }, args.join(" "));
  }
});

test("embed -f FILE / --file - (llama-embedding's -f): one text a line, a BOM and the final line break dropped, CRLF lines too; with --input too, or neither, one line", { skip }, () => {
  const texts = ["Once upon a time", "", "there was a dog"];
  const given = tsllm(["embed", "-m", sharedFile(MODEL)!, ...texts.flatMap((t) => ["--input", t]), "--json", "--threads", "1"]);
  assert.equal(given.code, 0, given.stderr);
  const expected = JSON.parse(given.stdout) as number[][];
  assert.equal(expected.length, 3);
  const file = join(dir, "embed-lines.txt");
  writeFileSync(file, "\uFEFF" + texts.join("\r\n") + "\r\n");
  const fromFile = tsllm(["embed", "-m", sharedFile(MODEL)!, "-f", file, "--json", "--threads", "1"]);
  assert.equal(fromFile.code, 0, fromFile.stderr);
  assert.deepEqual(JSON.parse(fromFile.stdout), expected);
  const fromStdin = tsllm(["embed", "-m", sharedFile(MODEL)!, "--file", "-", "--json", "--threads", "1"], texts.join("\n") + "\n");
  assert.equal(fromStdin.code, 0, fromStdin.stderr);
  assert.deepEqual(JSON.parse(fromStdin.stdout), expected);
  assert.deepEqual(tsllm(["embed", "-m", "x.gguf", "--input", "a", "--file", file]), { code: 2, stdout: "", stderr: "tsllm: error: --input and --file both give the texts; give one\n" });
  assert.deepEqual(tsllm(["embed", "-m", "x.gguf"]), { code: 2, stdout: "", stderr: "tsllm: error: --input is required (or --file FILE, one text a line; --file - reads stdin)\n" });
});

test("embed --embd-separator SEP (llama-embedding's) splits each --input and the file's text at SEP, every part a text, line breaks kept inside; an empty SEP is one line", { skip }, () => {
  const texts = ["Once upon\na time", "", "there was a dog"];
  const given = tsllm(["embed", "-m", sharedFile(MODEL)!, ...texts.flatMap((t) => ["--input", t]), "--json", "--threads", "1"]);
  assert.equal(given.code, 0, given.stderr);
  const expected = JSON.parse(given.stdout) as number[][];
  const split = tsllm(["embed", "-m", sharedFile(MODEL)!, "-p", texts.slice(0, 2).join("<#sep#>"), "--input", texts[2]!, "--embd-separator", "<#sep#>", "--json", "--threads", "1"]);
  assert.equal(split.code, 0, split.stderr);
  assert.deepEqual(JSON.parse(split.stdout), expected);
  const file = join(dir, "embed-sep.txt");
  writeFileSync(file, texts.join("<#sep#>") + "\n");
  const fromFile = tsllm(["embed", "-m", sharedFile(MODEL)!, "-f", file, "--embd-separator", "<#sep#>", "--json", "--threads", "1"]);
  assert.equal(fromFile.code, 0, fromFile.stderr);
  assert.deepEqual(JSON.parse(fromFile.stdout), expected, "the file's final line break is dropped, as llama.cpp's -f drops it");
  assert.deepEqual(tsllm(["embed", "-m", "x.gguf", "--input", "a", "--embd-separator", ""]), { code: 2, stdout: "", stderr: "tsllm: error: --embd-separator is empty; give the text between the texts or leave the option out\n" });
});

test("generate --grammar takes the grammar's text as llama.cpp's --grammar does, or a file; --grammar-file (llama.cpp's file option) is --grammar; an empty one is one line", { skip }, () => {
  // llama.cpp's common/arg.cpp: --grammar GRAMMAR is the BNF text, --grammar-file FNAME reads a file;
  // "root ::= ..." was "--grammar root ::= ...: no such file"
  const gbnf = 'root ::= " yes" | " no"';
  const file = join(dir, "yes-no.gbnf");
  writeFileSync(file, gbnf);
  const fromFile = greedy(["--prompt", "Once", "--grammar", file]);
  assert.ok(fromFile.completionTokens.length > 0);
  for (const args of [["--grammar", gbnf], ["--grammar-file", file], [`--grammar-file=${file}`]]) {
    assert.deepEqual(greedy(["--prompt", "Once", ...args]).completionTokens, fromFile.completionTokens, args.join(" "));
  }
  assert.deepEqual(tsllm(["generate", "--model", "x.gguf", "--prompt", "hi", "--grammar", ""]), { code: 2, stdout: "", stderr: "tsllm: error: --grammar is empty; give a GBNF grammar file or the grammar's text or leave the option out\n" });
});

test("--chat-template takes the template's text as llama.cpp's --chat-template and vLLM's do, or a file; --chat-template-file (llama.cpp's file option) is --chat-template; llama.cpp's built-in names are said to be unknown", { skip }, () => {
  // llama.cpp's common/arg.cpp: --chat-template JINJA_TEMPLATE is the template (or a built-in name),
  // --chat-template-file reads a file; vLLM's load_chat_template takes a path or, with {, } or a
  // line break in it, the text. "--chat-template {% for ... %}" was "...: no such file"
  const template = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}";
  const file = join(dir, "plain-chat.jinja");
  writeFileSync(file, template);
  const fromFile = greedy(["--prompt", "Once", "--chat", "--chat-template", file]);
  assert.notDeepEqual(fromFile.promptTokens, greedy(["--prompt", "Once"]).promptTokens, "the template is used");
  for (const args of [["--chat-template", template], ["--chat-template-file", file], [`--chat-template-file=${file}`]]) {
    const r = greedy(["--prompt", "Once", "--chat", ...args]);
    assert.deepEqual([r.promptTokens, r.completionTokens], [fromFile.promptTokens, fromFile.completionTokens], args.join(" "));
  }
  // chat reads the same flags
  const chat = (...args: string[]) => tsllm(["chat", "--model", sharedFile(MODEL)!, ...args, "--temperature", "0", "--max-tokens", "4", "--backend", "reference"], "Once\n");
  const chatFromFile = chat("--chat-template", file);
  assert.equal(chatFromFile.code, 0, chatFromFile.stderr);
  for (const args of [["--chat-template", template], ["--chat-template-file", file]]) assert.deepEqual(chat(...args), chatFromFile, args.join(" "));
  // a broken text is named as the flag's text, not by the whole template
  const broken = tsllm(["generate", "--model", sharedFile(MODEL)!, "--prompt", "hi", "--chat", "--chat-template", "{% for m in messages %}{{ m.content }}"]);
  assert.deepEqual(broken, { code: 1, stdout: "", stderr: "tsllm: error: --chat-template's text: the template does not parse: unterminated for loop: {% for m in messages %} (line 1) has no {% endfor %}\n" });
  // llama.cpp's built-in names: tsllm has none, and says so instead of a bare "no such file"
  for (const cmd of [["generate", "--prompt", "hi", "--chat"], ["chat"]]) {
    assert.deepEqual(tsllm([cmd[0]!, "--model", sharedFile(MODEL)!, ...cmd.slice(1), "--chat-template", "chatml"], "hi\n"), { code: 1, stdout: "", stderr: "tsllm: error: --chat-template chatml: no such file (tsllm has no built-in templates such as llama.cpp's chatml: give a Jinja file or the template's text)\n" }, cmd[0]);
  }
});

test("an empty --json-schema (\"$SCHEMA\" unset) is one line saying it takes a file or the JSON itself, not \"give a file name\"", () => {
  assert.deepEqual(tsllm(["generate", "--model", "x.gguf", "--prompt", "hi", "--json-schema", ""]), { code: 2, stdout: "", stderr: "tsllm: error: --json-schema is empty; give a JSON Schema file or the schema's JSON or leave the option out\n" });
});

test("an empty --stop (generate, chat) is one line naming the flag before any model loads, not the library's \"stop strings[0]\" after the load", () => {
  for (const args of [["generate", "--model", "x.gguf", "--prompt", "hi", "--stop", ""], ["generate", "--model", "x.gguf", "--prompt", "hi", "--stop", "a", "--stop", ""], ["chat", "--model", "x.gguf", "--stop", ""]]) {
    assert.deepEqual(tsllm(args), { code: 2, stdout: "", stderr: "tsllm: error: --stop is empty; give the text to stop at, or leave the option out\n" }, args.join(" "));
  }
});

test("download / rm / ls with an empty --revision, --token or --cache (\"$REV\" unset): one line naming the flag, exit 2, nothing fetched or removed", () => {
  for (const [args, expected] of [
    [["download", "org/name", "--revision", ""], "--revision is empty; give a branch, tag or commit or leave the option out"],
    [["download", "org/name", "--token", ""], "--token is empty; give a Hugging Face access token or leave the option out"],
    [["rm", "org/name", "--revision", ""], "--revision is empty; give the revision (branch, tag or commit) to remove or leave the option out"],
    [["rm", "org/name", "--cache", ""], "--cache is empty; give the cache folder or leave the option out"],
    [["ls", "--cache", ""], "--cache is empty; give the cache folder or leave the option out"],
  ] as const) {
    assert.deepEqual(tsllm([...args]), { code: 2, stdout: "", stderr: `tsllm: error: ${expected}\n` }, args.join(" "));
  }
});

test("an empty file or model flag (\"$FILE\" unset: --file, --chat-template, --draft-model, --base) is one line naming the flag, exit 2, not \"--file : no such file\"", { skip }, () => {
  const file = "--file is empty; give a file name", model = (flag: string) => `${flag} is empty; give a .gguf file, a model folder or a Hub reference org/name`;
  for (const [args, expected] of [
    [["generate", "--model", "x.gguf", "--file", ""], file],
    [["perplexity", "--model", "x.gguf", "--file", ""], file],
    [["tokenize", "--model", "x.gguf", "--file", ""], file],
    // the template is read once the model is found
    [["generate", "--model", sharedFile(MODEL)!, "--prompt", "hi", "--chat", "--chat-template", ""], "--chat-template is empty; give a file name"],
    [["chat", "--model", sharedFile(MODEL)!, "--chat-template", ""], "--chat-template is empty; give a file name"],
    [["generate", "--model", "x.gguf", "--prompt", "hi", "--draft-model", ""], model("--draft-model")],
    [["perplexity", "--model", sharedFile(MODEL)!, "--file", "-", "--kl-divergence", "--base", ""], model("--base")],
  ] as const) {
    assert.deepEqual(tsllm([...args], "text"), { code: 2, stdout: "", stderr: `tsllm: error: ${expected}\n` }, args.join(" "));
  }
});

test("an option left without its value, or a switch given one, is one line naming the option as typed (-fa, not --flash-attn), not Node's \"Option '--x <value>' argument missing\"", () => {
  for (const [args, expected] of [
    [["generate", "--model", "x.gguf", "-p"], "-p needs a value after it"],
    [["generate", "--model", "x.gguf", "--prompt", "hi", "-fa"], "-fa needs a value after it"],
    [["generate", "--model", "x.gguf", "--prompt", "hi", "--seed"], "--seed needs a value after it"],
    [["tokenize", "-m"], "-m needs a value after it"],
    [["generate", "--model", "x.gguf", "--prompt", "hi", "--json=1"], "--json takes no value: give --json alone"],
    // an option followed by another: named as typed too; a short spelling's =VALUE form is its long name's
    [["generate", "--model", "x.gguf", "--prompt", "hi", "--temp", "--", "x"], "--temp is followed by an option, not its value (for a value that is also an option's name, write --temp=VALUE)"],
    [["generate", "--model", "x.gguf", "-p", "--seed", "1"], "-p is followed by an option, not its value (for a value that is also an option's name, write --prompt=VALUE)"],
  ] as const) {
    assert.deepEqual(tsllm([...args]), { code: 2, stdout: "", stderr: `tsllm: error: ${expected}\n` }, args.join(" "));
  }
});

test("a short spelling with its value run into it (-n5, -n=5, -c512, -ctkq8_0, -ngl99) is one line saying to write the value apart, as llama.cpp refuses it; as a value (-p -n5) it is the value", { skip }, () => {
  // Node's parser read -n5 as generate's one-letter --n: 5 completions instead of 5 tokens, silently;
  // llama.cpp's common/arg.cpp looks each argument up whole ("error: invalid argument: -n5")
  for (const [arg, write] of [["-n5", "-n 5"], ["-n=5", "-n 5"], ["-c512", "-c 512"], ["-ctkq8_0", "-ctk q8_0"], ["-ngl99", "-ngl 99"], ["-s=3", "-s 3"]] as const) {
    const r = tsllm(["generate", "--model", "x.gguf", "--prompt", "hi", arg]);
    assert.deepEqual(r, { code: 2, stdout: "", stderr: `tsllm: error: ${arg}: an option and its value run together; write ${write} (the value as the next argument, as llama.cpp's tools take it)\n` }, arg);
  }
  // the value of an option before it stays that value: the prompt "-n5", 4 tokens, one completion
  const asValue = greedy(["-p", "-n5"]);
  assert.equal(asValue.prompt, "-n5");
  assert.equal(asValue.completionTokens.length, 4);
});

test("a stray argument (tsllm inspect model.gguf, convert DIR as llama.cpp's convert script takes it) is one line saying how the model is given, or that the command takes options only", () => {
  for (const [args, expected] of [
    [["inspect", "model.gguf"], "unexpected argument 'model.gguf' (the model is given as --model model.gguf)"],
    [["convert", "some/folder", "--out", "x.gguf"], "unexpected argument 'some/folder' (the model is given as --model some/folder)"],
    [["generate", "-m", "x.gguf", "x.gguf"], "unexpected argument 'x.gguf' (this command takes options only; --help lists them)"],
    [["ls", "extra"], "unexpected argument 'extra' (this command takes options only; --help lists them)"],
  ] as const) {
    assert.deepEqual(tsllm([...args]), { code: 2, stdout: "", stderr: `tsllm: error: ${expected}\n` }, args.join(" "));
  }
});

test("a near miss in a value or another tool's short flag is one line with the suggestion, by the same closest() as an option's typo: a task, a quantize type (any case, as llama-quantize's), -o, a pipeline's text without --input", () => {
  for (const [args, expected] of [
    // transformers' task aliases (sentiment-analysis) are suggested as its task names are
    [["pipeline", "sentimen", "--input", "hi"], 'unknown task "sentimen" (did you mean "sentiment-analysis"?)'],
    [["pipeline", "text-generaton", "--input", "hi"], 'unknown task "text-generaton" (did you mean "text-generation"?)'],
    // -o: llama-imatrix's and llama-gguf-split's output file, most tools' too; convert's is --out
    [["convert", "--model", "some/folder", "-o", "x.gguf"], "unknown option -o (did you mean --out?)"],
    // a pipeline's text typed after TASK without --input (it was "this command takes options only")
    [["pipeline", "sentiment-analysis", "--model", "some/folder", "some text"], 'unexpected argument \'some text\' (the text is given as --input "some text")'],
    [["pipeline", "sentiment-analysis", "hello"], "unexpected argument 'hello' (the text is given as --input hello)"],
    // one that looks like a model is still the model
    [["pipeline", "sentiment-analysis", "org/model", "--input", "hi"], "unexpected argument 'org/model' (the model is given as --model org/model)"],
  ] as const) {
    assert.deepEqual(tsllm([...args]), { code: 2, stdout: "", stderr: `tsllm: error: ${expected}\n` }, args.join(" "));
  }
  // llama-quantize upper-cases the type before it compares (tools/quantize/quantize.cpp try_parse_ftype): Q8 is no type there either
  for (const [args, expected] of [
    [["quantize", "in.gguf", "out.gguf", "Q8"], /^tsllm: error: the type must be one of f32, .*, got "Q8" \(did you mean q8_0\?\)\n$/],
    [["quantize", "in.gguf", "out.gguf", "--type", "IQ4NL"], /^tsllm: error: --type must be one of f32, .*, got "IQ4NL" \(did you mean iq4_nl\?\)\n$/],
  ] as const) {
    const r = tsllm([...args]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, expected);
  }
  // far from every name, the list stays
  assert.match(tsllm(["pipeline", "summarization", "--input", "hi"]).stderr, /^tsllm: error: unknown task "summarization" \(tasks: text-classification, .*\)\n$/);
});

test("a bare prompt (llama-cli's and ollama run's habit) is refused pointing to the command's text option: generate's --prompt, tokenize's --text, embed's --input, --file for an existing file; one that looks like a model keeps the --model line", () => {
  const text = join(dir, "wiki.test.raw");
  writeFileSync(text, "some text\n");
  for (const [args, expected] of [
    [["generate", "-m", "x.gguf", "hello"], "unexpected argument 'hello' (the prompt is given as --prompt hello)"],
    [["generate", "-m", "x.gguf", "Once upon a time"], 'unexpected argument \'Once upon a time\' (the prompt is given as --prompt "Once upon a time")'],
    [["generate", "hello"], "unexpected argument 'hello' (the prompt is given as --prompt hello)"],
    [["generate", "model.gguf", "-p", "hi"], "unexpected argument 'model.gguf' (the model is given as --model model.gguf)"],
    [["generate", "org/model", "-p", "hi"], "unexpected argument 'org/model' (the model is given as --model org/model)"],
    [["tokenize", "-m", "x.gguf", "hello"], "unexpected argument 'hello' (the text is given as --text hello)"],
    // embed's --prompt is a prefix to the text, which is --input
    [["embed", "-m", "x.gguf", "hello"], "unexpected argument 'hello' (the text is given as --input hello)"],
    // llama-perplexity -f FILE; an existing file, not a model, is the text's file where the command reads one
    [["perplexity", "-m", "x.gguf", text], `unexpected argument '${text}' (the text file is given as --file ${text})`],
    [["generate", "-m", "x.gguf", text], `unexpected argument '${text}' (the text file is given as --file ${text})`],
    [["perplexity", "-m", "x.gguf", "wiki"], "unexpected argument 'wiki' (the text file is given as --file wiki)"],
  ] as const) {
    assert.deepEqual(tsllm([...args]), { code: 2, stdout: "", stderr: `tsllm: error: ${expected}\n` }, args.join(" "));
  }
});

test("did you mean picks the fewest edits (q4_k_n is q4_k_m, not the q4_k it starts with; a swap of two letters is one edit), and quantize IN q8 (no type, no path's look) suggests the type", () => {
  for (const [args, expected] of [
    // a shared start ranked q4_k (prefix) over q4_k_m (one letter changed)
    [["quantize", "in.gguf", "out.gguf", "--type", "q4_k_n"], /^tsllm: error: --type must be one of f32, .*, got "q4_k_n" \(did you mean q4_k_m\?\)\n$/],
    [["quantize", "in.gguf", "out.gguf", "Q5_K_N"], /^tsllm: error: the type must be one of f32, .*, got "Q5_K_N" \(did you mean q5_k_m\?\)\n$/],
    // Damerau-Levenshtein: --sede is one swap from --seed (two edits to Levenshtein, past a four-letter name's one)
    [["generate", "-m", "x.gguf", "-p", "hi", "--sede", "1"], /^tsllm: error: unknown option --sede \(did you mean --seed\?\)\n$/],
    // llama-quantize IN TYPE with the type mistyped: read as OUT, so --type was missing
    [["quantize", "in.gguf", "q8"], /^tsllm: error: --type is required \(or the type after OUT, or after IN alone, as llama-quantize takes it\); "q8" was read as OUT, no type: did you mean q8_0\?\n$/],
    [["quantize", "in.gguf", "Q4_K_N"], /; "Q4_K_N" was read as OUT, no type: did you mean q4_k_m\?\n$/],
    // an OUT that looks like a path is OUT
    [["quantize", "in.gguf", "q8.gguf"], /^tsllm: error: --type is required \(or the type after OUT, or after IN alone, as llama-quantize takes it\)\n$/],
  ] as const) {
    const r = tsllm([...args]);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, expected, args.join(" "));
  }
});

test("tsllm help COMMAND (git help's, ollama help's habit) prints that command's help, as COMMAND --help; an unknown one or a second argument is one line", () => {
  for (const command of ["generate", "quantize", "tokenize"]) {
    const r = tsllm(["help", command]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, tsllm([command, "--help"]).stdout);
    assert.match(r.stdout, new RegExp(`^Usage: tsllm ${command} `));
  }
  assert.deepEqual(tsllm(["help", "genrate"]), { code: 2, stdout: "", stderr: 'tsllm: error: unknown command "genrate" (did you mean "generate"?)\n' });
  assert.deepEqual(tsllm(["help", "generate", "quantize"]), { code: 2, stdout: "", stderr: "tsllm: error: unexpected argument 'quantize' (help takes one command: tsllm help generate)\n" });
  // alone, the list of commands, which says so
  assert.match(tsllm(["help"]).stdout, /^Usage: tsllm <command> [\s\S]*"tsllm help <command>"/);
});

test("a mistyped option or command: one line naming the closest one; a name like none lists where to look", () => {
  for (const [args, message] of [
    [["generate", "--model", "x.gguf", "--prompt", "hi", "--seeds", "1"], "tsllm: error: unknown option --seeds (did you mean --seed?)\n"],
    [["generate", "--model", "x.gguf", "--prompt", "hi", "--max-token=3"], "tsllm: error: unknown option --max-token (did you mean --max-tokens?)\n"],
    [["perplexity", "--model", "x.gguf", "--fille", "x.txt"], "tsllm: error: unknown option --fille (did you mean --file?)\n"],
    // a shortened name, the other command's name, llama.cpp's snake_case spellings
    [["generate", "--model", "x.gguf", "--prompt", "hi", "--ctx", "64"], "tsllm: error: unknown option --ctx (did you mean --ctx-size?)\n"],
    [["perplexity", "--model", "x.gguf", "--chunk", "2"], "tsllm: error: unknown option --chunk (did you mean --chunks?)\n"],
    [["generate", "--model", "x.gguf", "--prompt", "hi", "--n_predict", "8"], "tsllm: error: unknown option --n_predict (did you mean --max-tokens?)\n"],
    [["generate", "--model", "x.gguf", "--prompt", "hi", "--repeat_penalty", "1.1"], "tsllm: error: unknown option --repeat_penalty (did you mean --repeat-penalty?)\n"],
    [["generate", "--model", "x.gguf", "--prompt", "hi", "--frobnicate"], "tsllm: error: unknown option --frobnicate (--help lists the options)\n"],
    [["generat"], 'tsllm: error: unknown command "generat" (did you mean "generate"?)\n'],
    // ollama's verbs, and llama-cli's habit of options with no command
    [["run", "m.gguf"], 'tsllm: error: unknown command "run" (did you mean "chat"?)\n'],
    [["pull", "org/name"], 'tsllm: error: unknown command "pull" (did you mean "download"?)\n'],
    [["-m", "m.gguf", "-p", "hi"], /^tsllm: error: tsllm takes a command first, then its options: tsllm generate -m \.\.\. \(commands: generate, chat, /],
  ] as const) {
    const r = tsllm([...args]);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    if (typeof message === "string") assert.equal(r.stderr, message);
    else assert.match(r.stderr, message);
    assert.equal(r.stdout, "");
  }
});

test("generate reads the prompt from a pipe or --file: a BOM and the final line break (LF or CRLF) dropped, as llama.cpp's -f", { skip }, () => {
  const given = greedy(["--prompt", "Once"]);
  const piped = greedy([], "Once\n");
  assert.equal(piped.prompt, "Once");
  assert.deepEqual(piped.promptTokens, given.promptTokens);
  assert.deepEqual(piped.completionTokens, given.completionTokens);
  const file = join(dir, "prompt.txt");
  writeFileSync(file, "\uFEFFOnce\r\n");
  const fromFile = greedy(["-f", file]);
  assert.equal(fromFile.prompt, "Once");
  assert.deepEqual(fromFile.completionTokens, given.completionTokens);
  // a line break inside stays: only the one that ends the file goes
  writeFileSync(file, "Once\nupon\n\n");
  assert.equal(greedy(["--file", file]).prompt, "Once\nupon\n");
  // - is stdin, as the GNU tools take it (it was a file named "-": ENOENT)
  const dash = greedy(["--file", "-"], "Once\n");
  assert.equal(dash.prompt, "Once");
  assert.deepEqual(dash.completionTokens, given.completionTokens);
});

test("generate: a prompt from --file or stdin longer than the context is refused naming where it came from, not --prompt, which was not given", { skip }, () => {
  const text = "Once upon a time there was a dog and a cat";
  const file = join(dir, "long-prompt.txt");
  writeFileSync(file, text + "\n");
  const tail = ": the prompt has 14 tokens but the context holds 8; use a larger --ctx-size or a shorter prompt\n";
  for (const [args, input, source] of [[["-f", file], undefined, `--file ${file}`], [["--file", "-"], text, "--file -"], [[], text, "the prompt on stdin"]] as const) {
    const r = tsllm(["generate", "-m", sharedFile(MODEL)!, ...args, "-c", "8", "-n", "3", "--backend", "reference"], input);
    assert.equal(r.code, 2, r.stderr);
    assert.equal(r.stderr, `tsllm: error: ${source}${tail}`);
  }
});

test("generate's prompt sources: nothing piped, both --prompt and --file, each one line and exit 2", () => {
  for (const [args, message] of [
    [["generate", "--model", "x.gguf"], /^tsllm: error: no prompt: stdin was empty \(give --prompt TEXT or --file FILE; --prompt "" for an empty prompt\)\n$/],
    [["generate", "--model", "x.gguf", "--prompt", "hi", "--file", "p.txt"], /^tsllm: error: give --prompt or --file, not both\n$/],
    // --file - with an empty pipe ran an empty prompt silently; llama.cpp's -f takes no "-" (a file named "-")
    [["generate", "--model", "x.gguf", "--file", "-"], /^tsllm: error: no prompt: --file - read an empty stdin \(give --prompt TEXT or --file FILE; --prompt "" for an empty prompt\)\n$/],
  ] as const) {
    const r = tsllm([...args]);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, message);
    assert.equal(r.stdout, "");
  }
});

const hasScript = spawnSync("script", ["--version"]).status === 0;
test("--file - on a terminal (nothing piped) is one line and exit 2, not a silent wait for Ctrl-D; an empty FILE stays an empty prompt, as llama.cpp's -f", { skip: skip || (!hasScript && "script(1) (util-linux) is not installed") }, () => {
  const cli = `${process.execPath} --import tsx ${resolve(PROJECT_ROOT, "src/cli/main.ts")}`;
  for (const [command, message] of [
    ["generate --model x.gguf --file -", "--file -: stdin is a terminal, not a pipe or a file (pipe the text in, e.g. cat FILE | tsllm ... --file -, or give --file FILE)"],
    ["perplexity --model x.gguf --file -", "--file -: stdin is a terminal, not a pipe or a file (pipe the text in, e.g. cat FILE | tsllm ... --file -, or give --file FILE)"],
  ] as const) {
    // script(1) gives the command a pseudo-terminal as stdin; </dev/null ends script's own input at once
    const r = spawnSync("script", ["-qec", `${cli} ${command}; echo "status $?"`, "/dev/null"], { cwd: PROJECT_ROOT, encoding: "utf8", input: "", timeout: 60_000 });
    assert.equal(r.stdout.replace(/\r\n/g, "\n"), `tsllm: error: ${message}\nstatus 2\n`, command);
  }
  // an empty file: llama.cpp's -f reads "" and starts from BOS alone (main.cpp: "Should not run without any tokens")
  const empty = join(dir, "empty.txt");
  writeFileSync(empty, "");
  assert.equal(greedy(["--file", empty]).prompt, "");
});

test("generate: Ctrl-C (SIGINT) mid-completion ends the line, prints the timings and the seed, and exits 130, as llama.cpp's sigint_handler", { skip }, async () => {
  const child = spawn(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "generate", "--model", sharedFile(MODEL)!, "--prompt", "Once", "--max-tokens", "-1", "--seed", "7", "--backend", "reference"], { cwd: PROJECT_ROOT });
  let out = "", err = "";
  child.stdout.on("data", (d: Buffer) => { out += d.toString(); });
  child.stderr.on("data", (d: Buffer) => { err += d.toString(); });
  const exited = new Promise<{ code: number | null; signal: string | null }>((r) => child.on("exit", (code, signal) => r({ code, signal })));
  // the completion has started: text on stdout (the handler is set before the first token)
  while (out === "") await new Promise((r) => setTimeout(r, 50));
  child.kill("SIGINT");
  // killed by the signal (signal SIGINT, no status) the text ended mid-line and the seed was never printed
  assert.deepEqual(await exited, { code: 130, signal: null }, err);
  assert.ok(out.endsWith("\n"), JSON.stringify(out.slice(-20)));
  assert.match(err, /^\[abort\] load .* \| completion \d+ tok, .* \| seed 7\n$/);
});

// 0xE9 is Latin-1's é; in UTF-8 it opens a three-byte character, which " " cannot continue (RFC 3629).
// Read leniently it became U+FFFD, three bytes llama.cpp never saw (it tokenizes the file's bytes).
const LATIN1 = Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x20, 0x6f, 0x6b]); // "café ok" in Latin-1
test("text files a flag names, and the prompt on stdin: missing, a folder, not UTF-8 — one line naming the flag and the file, exit 1, nothing run", () => {
  const latin1 = join(dir, "latin1.txt");
  writeFileSync(latin1, LATIN1);
  // the valid part before the bad byte may hold a U+FFFD of its own: the offset is still the bad byte's
  const replaced = join(dir, "replacement-then-latin1.txt");
  writeFileSync(replaced, Buffer.concat([Buffer.from("\uFFFD"), LATIN1]));
  const notUtf8 = (at: number) => `not UTF-8 text (byte ${at}, 0xE9, starts a 3-byte character, but byte ${at + 1}, 0x20, cannot continue it: invalid continuation byte); convert it to UTF-8 first, e.g. iconv -f latin1 -t utf-8`;
  for (const [args, message, input] of [
    [["generate", "--model", "x.gguf", "--file", join(dir, "missing.txt")], `--file ${join(dir, "missing.txt")}: no such file`],
    [["generate", "--model", "x.gguf", "--file", dir], `--file ${dir}: it is a folder, not a text file`],
    [["generate", "--model", "x.gguf", "--file", latin1], `--file ${latin1}: ${notUtf8(3)}`],
    [["generate", "--model", "x.gguf", "--file", replaced], `--file ${replaced}: ${notUtf8(6)}`],
    [["generate", "--model", "x.gguf", "--file", "-"], `--file - (stdin): ${notUtf8(3)}`, LATIN1],
    [["generate", "--model", "x.gguf"], `the prompt on stdin: ${notUtf8(3)}`, LATIN1],
    [["generate", "--model", "x.gguf", "--prompt", "hi", "--grammar", latin1], `--grammar ${latin1}: ${notUtf8(3)}`],
    [["perplexity", "--model", "x.gguf", "--file", latin1], `--file ${latin1}: ${notUtf8(3)}`],
  ] as const) {
    const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, encoding: "utf8", input: input ?? "" });
    assert.equal(r.stderr, `tsllm: error: ${message}\n`, args.join(" "));
    assert.equal(r.status, 1, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stdout, "");
  }
});

test("a text file or stdin with a UTF-8 character's first bytes followed by a byte that cannot continue it: one line naming both bytes, invalid continuation byte, not a byte that starts no character", () => {
  // offsets and reasons as Python's b"...".decode("utf-8") gives them, "invalid continuation byte"
  // from UnicodeDecodeError.start to .end (the byte that cannot continue): b"x\xe2Ay" 1..2,
  // b"ab\xf0\x9f\x98A" 2..5, b"\xe0\x80\x80" 0..1 (overlong), b"o\xed\xa0\x80" 1..2 (a surrogate)
  const file = join(dir, "continuation.txt");
  writeFileSync(file, Buffer.from([0x78, 0xe2, 0x41, 0x79])); // "xâ" in Windows-1252 would be E2: here E2 then "A"
  const message = (at: number, lead: string, length: number, bad: number, byte: string) =>
    `not UTF-8 text (byte ${at}, ${lead}, starts a ${length}-byte character, but byte ${bad}, ${byte}, cannot continue it: invalid continuation byte); convert it to UTF-8 first, e.g. iconv -f latin1 -t utf-8`;
  for (const [args, expected, input] of [
    [["generate", "--model", "x.gguf", "--file", file], `--file ${file}: ${message(1, "0xE2", 3, 2, "0x41")}`],
    [["perplexity", "--model", "x.gguf", "--file", file], `--file ${file}: ${message(1, "0xE2", 3, 2, "0x41")}`],
    [["generate", "--model", "x.gguf", "--file", "-"], `--file - (stdin): ${message(2, "0xF0", 4, 5, "0x41")}`, Buffer.from([0x61, 0x62, 0xf0, 0x9f, 0x98, 0x41])],
    [["generate", "--model", "x.gguf"], `the prompt on stdin: ${message(0, "0xE0", 3, 1, "0x80")}`, Buffer.from([0xe0, 0x80, 0x80])],
    [["perplexity", "--model", "x.gguf", "--file", "-"], `--file - (stdin): ${message(1, "0xED", 3, 2, "0xA0")}`, Buffer.from([0x6f, 0xed, 0xa0, 0x80])],
  ] as const) {
    const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, encoding: "utf8", input: input ?? "" });
    assert.equal(r.stderr, `tsllm: error: ${expected}\n`, args.join(" "));
    assert.equal(r.status, 1, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stdout, "");
  }
});

test("a text file or stdin that ends inside a UTF-8 character: one line saying it is cut off there, naming the byte the character starts at, not a byte that starts no character", () => {
  // offsets and reasons as Python's b"...".decode("utf-8") gives them: "caf\xc3" start 3 and
  // "ab\xf0\x9f\x98" start 2, both "unexpected end of data" (the bytes are a character's first ones)
  const cut = join(dir, "cut.txt");
  writeFileSync(cut, Buffer.from([0x63, 0x61, 0x66, 0xc3])); // "café" in UTF-8, its last byte cut off
  const emoji = Buffer.from([0x61, 0x62, 0xf0, 0x9f, 0x98]); // "ab😀" (F0 9F 98 80), its last byte cut off
  for (const [args, message, input] of [
    [["generate", "--model", "x.gguf", "--file", cut], `--file ${cut}: not UTF-8 text: it ends inside a character (byte 3, 0xC3, starts a 2-byte character and the input ends after 1 of its bytes); was it cut off?`],
    [["perplexity", "--model", "x.gguf", "--file", cut], `--file ${cut}: not UTF-8 text: it ends inside a character (byte 3, 0xC3, starts a 2-byte character and the input ends after 1 of its bytes); was it cut off?`],
    [["generate", "--model", "x.gguf", "--file", "-"], "--file - (stdin): not UTF-8 text: it ends inside a character (byte 2, 0xF0, starts a 4-byte character and the input ends after 3 of its bytes); was it cut off?", emoji],
    [["generate", "--model", "x.gguf"], "the prompt on stdin: not UTF-8 text: it ends inside a character (byte 2, 0xF0, starts a 4-byte character and the input ends after 3 of its bytes); was it cut off?", emoji],
  ] as const) {
    const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, encoding: "utf8", input: input ?? "" });
    assert.equal(r.stderr, `tsllm: error: ${message}\n`, args.join(" "));
    assert.equal(r.status, 1, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stdout, "");
  }
});

test("perplexity --chunks -1 (llama-perplexity's default) scores all the windows, as no --chunks; --chunks 0 is one line; --ctx-size / --batch-size are --ctx / --batch", { skip }, () => {
  // llama-perplexity: n_chunk = params.n_chunks < 0 ? n_chunk_max : min(params.n_chunks, n_chunk_max)
  const text = join(dir, "ppl.txt");
  writeFileSync(text, readFileSync(sharedFile("text/tinystories-valid-30k.txt")!, "utf8").slice(0, 1500));
  const ppl = (args: string[]) => {
    const r = tsllm(["perplexity", "--model", sharedFile(MODEL)!, "--file", text, "--ctx", "64", "--backend", "reference", "--json", ...args]);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as { chunks: number; perplexity: number };
  };
  const all = ppl([]);
  assert.ok(all.chunks > 1, String(all.chunks));
  // llama-perplexity's long spellings of -c and -b: --ctx-size and --batch-size (it was "unknown option --ctx-size")
  const batched = ppl(["--batch", "16"]);
  assert.deepEqual(ppl(["--ctx-size", "64", "--batch-size", "16"]), batched);
  assert.deepEqual(ppl(["--ctx-size=64", "--batch-size=16"]), batched);
  assert.deepEqual(ppl(["--chunks", "-1"]), all);
  assert.deepEqual(ppl(["--chunks", "-5"]), all);
  assert.equal(ppl(["--chunks", "1"]).chunks, 1);
  const zero = tsllm(["perplexity", "--model", "x.gguf", "--file", text, "--chunks", "0"]);
  assert.deepEqual(zero, { code: 2, stdout: "", stderr: "tsllm: error: --chunks must be >= 1, or -1 for all the windows (the default); got 0\n" });
});

test("--repeat-penalty 0 is refused as > 0, not as >= 5e-324", () => {
  const r = tsllm(["generate", "--model", "x.gguf", "--prompt", "hi", "--repeat-penalty", "0"]);
  assert.equal(r.code, 2);
  assert.equal(r.stderr, "tsllm: error: --repeat-penalty must be > 0, got 0\n");
});

test("quantize takes llama-quantize's IN OUT TYPE order and its upper-case names; Q2_K_S (it needs an importance matrix) is one line saying so", { skip }, () => {
  const positional = join(dir, "a.gguf"), flagged = join(dir, "b.gguf");
  const a = tsllm(["quantize", sharedFile(MODEL)!, positional, "Q8_0"]);
  assert.equal(a.code, 0, a.stderr);
  const b = tsllm(["quantize", sharedFile(MODEL)!, flagged, "--type", "q8_0"]);
  assert.equal(b.code, 0, b.stderr);
  assert.ok(readFileSync(positional).equals(readFileSync(flagged)), "Q8_0 as the third argument writes what --type q8_0 writes");
  for (const [args, message] of [
    [[positional, "Q2_K_S"], "tsllm: error: the type Q2_K_S needs an importance matrix (llama-quantize --imatrix), which tsllm does not compute or read; give another type\n"],
    [[positional, "q8_0", "--type", "q4_0"], 'tsllm: error: the type is given twice: "q8_0" and --type q4_0; give one\n'],
    [[positional], "tsllm: error: --type is required (or the type after OUT, or after IN alone, as llama-quantize takes it)\n"],
  ] as const) {
    const r = tsllm(["quantize", sharedFile(MODEL)!, ...args]);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stderr, message);
  }
});

// llama-quant.cpp's llama_tensor_get_type reads --tensor-type only when the file type's default type
// is quantized: llama_model_quantize with F16 and BF16 and attn_v=q8_0 wrote every attn_v F16 / BF16
// (recorded in helpers/llama-quantize-types.json), the override silently unused
test("quantize --type f16/bf16/f32 with --tensor-type is one line saying llama-quantize leaves it unused, before IN is read; the library refuses it too", { skip }, async () => {
  const { quantizeModel } = await import("../src/convert/index.js");
  for (const type of ["f16", "BF16", "0"]) {
    const out = join(dir, `tt-${type}.gguf`);
    const r = tsllm(["quantize", join(dir, "no-such-input.gguf"), out, "--type", type, "--tensor-type", "attn_v=q8_0"]);
    assert.equal(r.code, 2, r.stderr);
    const named = type === "0" ? "f32" : type.toLowerCase();
    assert.equal(r.stderr, `tsllm: error: --tensor-type with the file type ${named}: llama-quantize applies --tensor-type to quantized file types only (with f32, f16 or bf16 every matrix is written in that type, the overrides unused); give a quantized type (where --tensor-type NAME=f16 keeps those tensors F16), or leave --tensor-type out\n`);
    assert.ok(!existsSync(out));
  }
  const out = join(dir, "tt-lib.gguf");
  await assert.rejects(quantizeModel(sharedFile(MODEL)!, out, { type: "f16", tensorTypes: [["attn_v", "q8_0"]] }), /--tensor-type with the file type f16: llama-quantize applies --tensor-type to quantized file types only/);
  assert.ok(!existsSync(out));
  // with a quantized type an override naming f16 keeps those tensors F16
  const kept = tsllm(["quantize", sharedFile(MODEL)!, out, "--type", "q8_0", "--tensor-type", "attn_v=f16"]);
  assert.equal(kept.code, 0, kept.stderr);
  const types = readGGUFHeader(out).tensors.filter((t) => t.name.includes("attn_v")).map((t) => t.type);
  assert.ok(types.length > 0 && types.every((t) => t === GGMLType.F16), String(types));
});

// ggml's k-quants pack rows in blocks of QK_K = 256 values; llama-quant.cpp's tensor_type_fallback
// writes a matrix whose rows are not whole blocks in another type (Q4_K -> Q5_0), and its LM head rule
// asks Q8_0 outright for such an output.weight. stories260K's rows are 64 or 172 wide: every matrix
// but output.weight falls back under Q4_K_M.
test("quantize sums up the tensors that fell back in one line; --verbose lists each", { skip }, () => {
  const input = sharedFile(MODEL)!;
  const judged = readGGUFHeader(input).tensors.filter((t) => t.dims.length > 1 && t.dims[0]! % 256 !== 0 && t.name !== "output.weight").map((t) => t.name);
  const out = join(dir, "fallbacks.gguf");
  const r = tsllm(["quantize", input, out, "--type", "q4_k_m"]);
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stderr.trimEnd().split("\n");
  assert.equal(lines.length, 2, r.stderr);
  const m = /^tsllm: (\d+) tensors fell back to another type, their rows \(of 64 or 172\) not whole blocks of the asked type, as llama\.cpp's do: (.*); e\.g\. (.*), \.\.\. \(--verbose lists all (\d+)\)$/.exec(lines[0]!);
  assert.ok(m, lines[0]);
  assert.equal(Number(m[1]), judged.length);
  assert.equal(Number(m[4]), judged.length);
  const pairs = m[2]!.split(", ").map((p) => /^(\w+) -> (\w+) x(\d+)$/.exec(p)!);
  assert.equal(pairs.reduce((s, p) => s + Number(p[3]), 0), judged.length, m[2]);
  assert.ok(pairs.some((p) => p[1] === "Q4_K" && p[2] === "Q5_0"), m[2]);
  for (const name of m[3]!.split(", ")) assert.ok(judged.includes(name), name);
  assert.match(lines[1]!, /^wrote /);
  const verbose = tsllm(["quantize", input, out, "--type", "q4_k_m", "--verbose"]);
  assert.equal(verbose.code, 0, verbose.stderr);
  const listed = verbose.stderr.split("\n").filter((l) => l.startsWith("tsllm: fallback: ")).map((l) => l.split(" ")[2]);
  assert.deepEqual([...listed].sort(), [...judged].sort());
});

test("quantize --json prints {input, output, type, tensors, types, fallbacks, bytes} on stdout, nothing on stderr; the written file agrees", { skip }, () => {
  const input = sharedFile(MODEL)!;
  const out = join(dir, "json.gguf");
  const r = tsllm(["quantize", input, out, "Q4_K_M", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, "");
  const j = JSON.parse(r.stdout) as { input: string; output: string; type: string; tensors: number; types: Record<string, number>; fallbacks: { tensor: string; rowLength: number; asked: string; type: string }[]; bytes: number };
  assert.deepEqual(Object.keys(j), ["input", "output", "type", "tensors", "types", "fallbacks", "bytes"]);
  assert.equal(j.input, input);
  assert.equal(j.output, out);
  assert.equal(j.type, "q4_k_m");
  const written = readGGUFHeader(out).tensors;
  assert.equal(j.tensors, written.length);
  const counted: Record<string, number> = {};
  for (const t of written) counted[typeName(t.type)] = (counted[typeName(t.type)] ?? 0) + 1;
  assert.deepEqual(j.types, counted);
  assert.equal(j.bytes, statSync(out).size);
  // every matrix whose rows are not whole 256-blocks, as the summary line counts them
  const judged = written.filter((t) => t.dims.length > 1 && t.dims[0]! % 256 !== 0 && t.name !== "output.weight");
  assert.deepEqual(j.fallbacks.map((f) => f.tensor).sort(), judged.map((t) => t.name).sort());
  for (const f of j.fallbacks) assert.equal(f.type, typeName(judged.find((t) => t.name === f.tensor)!.type), f.tensor);
});

// llama-quantize's try_parse_ftype: a name, or llama.h's llama_ftype number (its usage lists "7 or
// Q8_0"); the derived output is named after the type's name; COPY copies tensors as stored
test("quantize takes llama-quantize's numeric types (7 is Q8_0, also as IN TYPE); a number for a type it cannot write, an unknown number and COPY are one line each", { skip }, () => {
  const sub = mkdtempSync(join(dir, "ftype-"));
  const input = join(sub, "in.gguf");
  copyFileSync(sharedFile(MODEL)!, input);
  const reference = join(sub, "ref.gguf");
  assert.equal(tsllm(["quantize", input, reference, "--type", "q8_0"]).code, 0);
  const derived = tsllm(["quantize", input, "7"]);
  assert.equal(derived.code, 0, derived.stderr);
  assert.ok(readFileSync(join(sub, "ggml-model-Q8_0.gguf")).equals(readFileSync(reference)), "IN 7 writes ggml-model-Q8_0.gguf, as --type q8_0");
  for (const [args, message] of [
    [[input, "21"], "tsllm: error: the type 21 (llama-quantize's Q2_K_S) needs an importance matrix (llama-quantize --imatrix), which tsllm does not compute or read; give another type\n"],
    [[input, join(sub, "o.gguf"), "--type", "26"], /^tsllm: error: --type 26 \(llama-quantize's IQ3_S\) is a llama\.cpp file type whose tensor types tsllm does not write; give one of f32, .*\n$/],
    [[input, join(sub, "o.gguf"), "5"], /^tsllm: error: the type must be one of f32, .*, got "5"\n$/],
    [[input, "COPY"], "tsllm: error: the type COPY (llama-quantize's copy of every tensor as stored) is not done here: copy the file itself, or give a type\n"],
  ] as const) {
    const r = tsllm(["quantize", ...args]);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    if (typeof message === "string") assert.equal(r.stderr, message);
    else assert.match(r.stderr, message);
  }
  assert.ok(!existsSync(join(sub, "o.gguf")) && !existsSync(join(sub, "ggml-model-COPY.gguf")), "nothing written for a refused type");
});

test("-n -1 (llama.cpp's no limit) generates until the context is full, and says so", { skip }, () => {
  // after greedy()'s --max-tokens 4: a repeated option keeps its last value, as llama.cpp's parser
  const r = greedy(["--prompt", "Once", "--max-tokens", "-1", "--ctx-size", "48", "--ignore-eos"]);
  const result = r as unknown as { finishReason: string; finishDetail: string; completionTokens: number[] };
  assert.equal(result.finishReason, "length");
  assert.equal(result.finishDetail, "context full (48 tokens)");
  assert.equal(result.completionTokens.length, 48 - r.promptTokens.length);
});

test("-n -2 (llama.cpp's until the context is filled) generates until the context is full, as -n -1", { skip }, () => {
  const r = greedy(["--prompt", "Once", "-n", "-2", "--ctx-size", "48", "--ignore-eos"]);
  const result = r as unknown as { finishReason: string; finishDetail: string; completionTokens: number[] };
  assert.equal(result.finishReason, "length");
  assert.equal(result.finishDetail, "context full (48 tokens)");
  assert.equal(result.completionTokens.length, 48 - r.promptTokens.length);
  const three = tsllm(["generate", "--model", "x.gguf", "--prompt", "hi", "-n", "-3"]);
  assert.equal(three.code, 2);
  assert.equal(three.stderr, "tsllm: error: --max-tokens must be >= 0, or -1 / -2 for no limit but the context; got -3\n");
});

// llama.cpp's sampler (src/llama-sampler.cpp) reads a value past a knob's end as that end: top-k
// <= 0, top-p >= 1, min-p <= 0 and typical >= 1 are off, a temperature <= 0 (arg.cpp clamps it to
// 0) is greedy, a top-p <= 0 keeps the one most likely token
test("sampling values past their ends mean what llama.cpp reads them as: --temp -1 greedy, --top-k -1 off, --top-p 1.5 off, --top-p -1 the top token", { skip }, () => {
  const base = ["--prompt", "Once", "--max-tokens", "8", "--ignore-eos"];
  const greedyRun = greedy([...base]);
  assert.deepEqual(greedy([...base, "--temp", "-1"]).completionTokens, greedyRun.completionTokens);
  assert.deepEqual(greedy([...base, "--temperature", "2", "--seed", "7", "--top-p", "-1"]).completionTokens, greedyRun.completionTokens);
  const off = greedy([...base, "--temperature", "2", "--seed", "7", "--top-k", "0", "--top-p", "1", "--min-p", "0", "--typical-p", "1"]);
  const past = greedy([...base, "--temperature", "2", "--seed", "7", "--top-k", "-1", "--top-p", "1.5", "--min-p", "-0.5", "--typical-p", "2"]);
  assert.deepEqual(past.completionTokens, off.completionTokens);
  // all filters off at temperature 2 draws from the whole vocabulary: not the greedy text
  assert.notDeepEqual(off.completionTokens, greedyRun.completionTokens);
});

// llama.cpp's --samplers a;b;c and --sampling-seq / --sampler-seq abc (common/arg.cpp, common/sampling.cpp):
// the chain is exactly the list, so a sampler left out does not run; --min-keep goes to top-p, min-p
// and typical-p. These flags were unknown here.
test("--samplers / --sampling-seq set the sampler chain as llama.cpp's (a sampler left out does not run); --min-keep is heeded", { skip }, () => {
  const base = ["--prompt", "Once", "--max-tokens", "8", "--ignore-eos"];
  const greedyRun = greedy([...base]).completionTokens;
  const hot = [...base, "--temperature", "2", "--seed", "7", "--top-k", "1", "--top-p", "1", "--min-p", "0"];
  assert.deepEqual(greedy([...hot, "--samplers", "top_k;temperature"]).completionTokens, greedyRun);
  assert.deepEqual(greedy([...hot, "--sampler-seq", "kt"]).completionTokens, greedyRun);
  assert.notDeepEqual(greedy([...hot, "--sampling-seq", "t"]).completionTokens, greedyRun);
  assert.notDeepEqual(greedy([...hot, "--samplers", "temp"]).completionTokens, greedyRun);
  const narrow = [...base, "--temperature", "2", "--seed", "7", "--top-k", "0", "--top-p", "0", "--min-p", "0"];
  assert.deepEqual(greedy(narrow).completionTokens, greedyRun);
  assert.notDeepEqual(greedy([...narrow, "--min-keep", "20"]).completionTokens, greedyRun);
  const model = ["generate", "--model", sharedFile(MODEL)!, "--prompt", "Once"];
  for (const [args, message] of [
    [["--sampling-seq", "kq"], `tsllm: error: --sampling-seq: "q" names no sampler; expected letters of edskypmxtia\n`],
    [["--samplers", "top_k;adaptive_p"], `tsllm: error: --samplers: "adaptive_p" (adaptive_p) is a sampler this library does not implement; leave it out\n`],
    [["--samplers", "top_k", "--sampling-seq", "k"], "tsllm: error: --samplers and --sampling-seq both set the sampler chain; give one\n"],
  ] as const) {
    const r = tsllm([...model, ...args]);
    assert.deepEqual([r.code, r.stderr], [2, message]);
  }
});

// llama.cpp's min-p (src/llama-sampler.cpp) keeps the candidates whose logit >= the top logit +
// log(p), and always the first sorted one: above 1 that is the one top token, while a min-p of 1
// keeps every token tied at the top. Two token ids given the same huge bias (1e30 absorbs the
// model's logit in float32) are such a tie.
test("--min-p above 1 keeps the one top token, as llama.cpp's sampler; --min-p 1 keeps tokens tied at the top", { skip }, () => {
  const tie = ["--prompt", "Once", "--max-tokens", "1", "--logit-bias", "300=1e30", "--logit-bias", "400=1e30"];
  const first = (args: string[]) => greedy([...tie, ...args]).completionTokens[0];
  const top = first([]);
  assert.ok(top === 300 || top === 400, `greedy picks one of the tied tokens, got ${top}`);
  const seeds = [1, 2, 3, 4];
  for (const seed of seeds) assert.equal(first(["--temperature", "2", "--seed", String(seed), "--min-p", "1.5"]), top, `--min-p 1.5 --seed ${seed}`);
  const atOne = new Set(seeds.map((seed) => first(["--temperature", "2", "--seed", String(seed), "--min-p", "1"])));
  assert.deepEqual([...atOne].sort(), [300, 400], "--min-p 1 draws from both tied tokens");
});

// llama-quantize (tools/quantize/quantize.cpp): IN [OUT] TYPE [NTHREADS]; without OUT it writes
// ggml-model-<TYPE>.gguf in IN's folder; the same file as input and output is refused
// A disk that fills up mid-write, made as test/hub-disk-limit.test.ts makes it: a file size limit
// (ulimit -f) on the child, whose write past it fails (EFBIG; ENOSPC on a full disk, measured on a
// 200 kB tmpfs: the same line with "no space left on the device of DIR (ENOSPC)")
test("quantize onto a disk that fills up: one line naming OUT and why, exit 1, no temporary file left", { skip: skip || process.platform === "win32" }, () => {
  const sub = mkdtempSync(join(dir, "full-"));
  const out = join(sub, "out.gguf");
  const r = spawnSync("sh", ["-c", 'ulimit -f 200; exec "$0" --import tsx src/cli/main.ts quantize "$1" "$2" f32', process.execPath, sharedFile(MODEL)!, out], { cwd: PROJECT_ROOT, encoding: "utf8" });
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stderr, `tsllm: error: ${out}: cannot write the output: the file grew larger than this process or file system allows (EFBIG); nothing was left there\n`);
  assert.deepEqual(readdirSync(sub), []);
});

// llama-quantize fopen()s OUT and a shell's > writes through a link: an existing OUT is written
// where it leads. Renaming a temporary file over it replaced a symlink by a file and, run as root,
// turned /dev/stdout and /dev/null into regular files in /dev (a FIFO stands in for those here)
test("quantize OUT a symlink writes the file it leads to and keeps the link; OUT a FIFO (as /dev/stdout, /dev/null) gets the GGUF's bytes, not a file renamed over it", { skip: skip || process.platform === "win32" }, async () => {
  const sub = mkdtempSync(join(dir, "where-out-leads-"));
  const reference = join(sub, "ref.gguf");
  assert.equal(tsllm(["quantize", sharedFile(MODEL)!, reference, "q8_0"]).code, 0);
  const target = join(sub, "target.gguf"), link = join(sub, "link.gguf");
  writeFileSync(target, "old");
  symlinkSync("target.gguf", link);
  const viaLink = tsllm(["quantize", sharedFile(MODEL)!, link, "q8_0"]);
  assert.equal(viaLink.code, 0, viaLink.stderr);
  assert.ok(lstatSync(link).isSymbolicLink(), "the link is still a link");
  assert.ok(readFileSync(target).equals(readFileSync(reference)), "the file it leads to holds the GGUF");

  const fifo = join(sub, "fifo"), received = join(sub, "received.gguf");
  assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
  const reader = spawn("sh", ["-c", 'exec cat "$0" > "$1"', fifo, received]);
  const readerDone = new Promise<number | null>((done) => reader.on("close", done));
  const r = await tsllmAsync(["quantize", sharedFile(MODEL)!, fifo, "q8_0"]);
  const stillFifo = lstatSync(fifo).isFIFO();
  if (!stillFifo) reader.kill(); // its FIFO was replaced: nothing will ever open it for writing
  assert.equal(r.code, 0, r.stderr);
  assert.ok(stillFifo, "the FIFO is still a FIFO");
  assert.equal(await readerDone, 0);
  assert.ok(readFileSync(received).equals(readFileSync(reference)), "the FIFO's reader got the GGUF");
  // the size reported is what was written, not the FIFO's (0)
  assert.match(r.stderr, new RegExp(`^wrote ${fifo}: 48 tensors \\(Q8_0 x32, F32 x11, F16 x5\\), 379\\.2 kB\n`, "m"));
  assert.deepEqual(readdirSync(sub).sort(), ["fifo", "link.gguf", "received.gguf", "ref.gguf", "target.gguf"]);
});

// POSIX: only / separates folders; a backslash is a character of a file name (Node's path.posix
// and path.win32 say the same). A Windows-style OUT would be one oddly named file in the working folder
test("a Windows-style output path (out\\model.gguf) off Windows is one usage error naming the option, and nothing is written", { skip: skip || process.platform === "win32" }, () => {
  const sub = mkdtempSync(join(dir, "backslash-"));
  const input = join(sub, "in.gguf");
  copyFileSync(sharedFile(MODEL)!, input);
  // run in `sub`, so that relative names land there: tsx and the CLI by absolute location
  const inSub = ["--import", import.meta.resolve("tsx"), resolve(PROJECT_ROOT, "src/cli/main.ts")];
  for (const [args, what] of [[["quantize", input, "out\\model.gguf", "q8_0"], "OUT"], [["convert", "--model", sub, "--out", "out\\model.gguf"], "--out"]] as const) {
    const r = spawnSync(process.execPath, [...inSub, ...args], { cwd: sub, encoding: "utf8" });
    assert.equal(r.status, 2, r.stderr);
    assert.equal(r.stderr, `tsllm: error: ${what} out\\model.gguf: contains a backslash, which is not a folder separator on this system (only / is); write the path with /\n`);
  }
  // IN's folder for the derived name is the folder this system reads in IN: a backslash in an existing IN is part of its name
  copyFileSync(input, join(sub, "a\\in.gguf"));
  const derived = spawnSync(process.execPath, [...inSub, "quantize", "a\\in.gguf", "q8_0"], { cwd: sub, encoding: "utf8" });
  assert.equal(derived.status, 0, derived.stderr);
  assert.deepEqual(readdirSync(sub).sort(), ["a\\in.gguf", "ggml-model-Q8_0.gguf", "in.gguf"]);
});

test("quantize takes llama-quantize's IN TYPE (output ggml-model-TYPE.gguf beside IN) and a trailing thread count; the input is never overwritten", { skip }, () => {
  const sub = mkdtempSync(join(dir, "quant-"));
  const input = join(sub, "in.gguf");
  copyFileSync(sharedFile(MODEL)!, input);
  const original = readFileSync(input);
  const unchanged = (what: string) => assert.ok(readFileSync(input).equals(original), `${what}: the input is byte-identical`);
  const reference = join(sub, "ref.gguf");
  assert.equal(tsllm(["quantize", input, reference, "--type", "q8_0"]).code, 0);
  unchanged("IN OUT --type");

  const derived = tsllm(["quantize", input, "Q8_0"]);
  assert.equal(derived.code, 0, derived.stderr);
  const named = join(sub, "ggml-model-Q8_0.gguf");
  assert.ok(readFileSync(named).equals(readFileSync(reference)), "IN Q8_0 writes ggml-model-Q8_0.gguf beside IN, as IN OUT --type q8_0");
  unchanged("IN TYPE");

  const out = join(sub, "out.gguf");
  const threaded = tsllm(["quantize", input, out, "Q8_0", "4"]);
  assert.equal(threaded.code, 0, threaded.stderr);
  assert.ok(readFileSync(out).equals(readFileSync(reference)));
  assert.match(threaded.stderr, /^tsllm: warning: the thread count 4 is llama-quantize's and is ignored here; this quantizes on one thread\n/);
  unchanged("IN OUT TYPE N");

  const q4 = tsllm(["quantize", input, "q4_0", "2"]);
  assert.equal(q4.code, 0, q4.stderr);
  assert.ok(existsSync(join(sub, "ggml-model-Q4_0.gguf")));
  unchanged("IN TYPE N");

  // OUT the input itself, by its name or another spelling of it, or derived to be it: refused
  for (const args of [[input, input, "q8_0"], [input, `${sub}/./in.gguf`, "--type", "q8_0"]]) {
    const r = tsllm(["quantize", ...args]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /the output is the input; write it to another path\n$/);
    unchanged(args.join(" "));
  }
  const self = readFileSync(named);
  const again = tsllm(["quantize", named, "q8_0"]);
  assert.equal(again.code, 1, again.stderr);
  assert.match(again.stderr, /ggml-model-Q8_0\.gguf: the output is the input/);
  assert.ok(readFileSync(named).equals(self), "a derived name that is the input: the input is untouched");

  for (const [args, message] of [
    [[input, out, "q8_0", "four"], 'tsllm: error: the thread count after the type must be an integer, as llama-quantize\'s nthreads; got "four"\n'],
    [[input, out, "q8_0", "4", "extra"], /^tsllm: error: expected IN and OUT\.gguf .* got 5 argument\(s\)/],
  ] as const) {
    const r = tsllm(["quantize", ...args]);
    assert.equal(r.code, 2, r.stderr);
    if (typeof message === "string") assert.equal(r.stderr, message);
    else assert.match(r.stderr, message);
    unchanged(args.join(" "));
  }
});

const HF_FOLDER = "hf-oracle/gpt2-tiny";
test("convert / quantize --vocab naming no file, or a folder: one line naming --vocab, exit 1, nothing written", { skip: skipWithoutShared(HF_FOLDER) }, () => {
  const folder = sharedFile(HF_FOLDER)!;
  const out = join(dir, "vocab-refused.gguf");
  const missing = join(dir, "no-such-vocab.gguf");
  for (const command of [["convert", "--model", folder, "--out", out], ["quantize", folder, out, "q8_0"]]) {
    // Node's own "ENOENT: no such file or directory, open '...'" named no option; a folder was "DIR: file: is a folder, not a file"
    for (const [vocab, message] of [[missing, `--vocab ${missing}: no such file`], [dir, `--vocab ${dir}: it is a folder, not a file`]] as const) {
      const r = tsllm([...command, "--vocab", vocab]);
      assert.equal(r.stderr, `tsllm: error: ${message}\n`, command[0]);
      assert.equal(r.code, 1, r.stderr);
      assert.equal(r.stdout, "");
      assert.ok(!existsSync(out));
    }
  }
});

test("convert --vocab of another model (fewer tokens than the embedding rows, not the folder's own count): one line naming both numbers and files, exit 1", { skip: skipWithoutShared(HF_FOLDER) }, () => {
  const folder = sharedFile(HF_FOLDER)!;
  const out = join(dir, "vocab-mismatch.gguf");
  // llama.cpp's LLaMA SentencePiece vocabulary holds 32000 tokens; GPT-2's 50257 (the folder's config.json vocab_size
  // and its vocab.json): the 32000 were padded to 50257 rows silently, every id another token than GPT-2's
  const llama = sharedFile("tokenizer-tests/ggml-vocab-llama-spm.gguf")!;
  const r = tsllm(["convert", "--model", folder, "--out", out, "--vocab", llama]);
  assert.equal(r.stderr, `tsllm: error: --vocab ${llama}: 32000 tokens, but the embedding of ${folder} (token_embd.weight) has 50257 rows and ${join(folder, "tokenizer.json")} has 50257 tokens; the vocabulary is not this model's (give the GGUF of the same tokenizer)\n`);
  assert.equal(r.code, 1);
  assert.ok(!existsSync(out));
  // the folder's own vocabulary (llama.cpp's GPT-2 vocab GGUF, 50257 tokens) still converts
  const gpt2 = sharedFile("tokenizer-tests/ggml-vocab-gpt-2.gguf")!;
  const ok = tsllm(["convert", "--model", folder, "--out", out, "--vocab", gpt2, "--type", "f32"]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.equal((readGGUFHeader(out).metadata.get("tokenizer.ggml.tokens")!.value as string[]).length, 50257);
});

test("convert takes llama.cpp's convert_hf_to_gguf.py spellings --outfile (its {ftype} templates) and --outtype (the types that mean ours); its others are refused naming --outtype", { skip: skipWithoutShared(HF_FOLDER) }, () => {
  const folder = sharedFile(HF_FOLDER)!;
  const ours = join(dir, "ours-q8.gguf");
  assert.equal(tsllm(["convert", "--model", folder, "--out", ours, "--type", "q8_0"]).code, 0);
  // gguf-py's fill_templated_filename: {ftype} lower-case, {FTYPE} upper-case
  for (const [name, file] of [["outfile-{ftype}.gguf", "outfile-q8_0.gguf"], ["outfile-{FTYPE}.gguf", "outfile-Q8_0.gguf"]] as const) {
    const r = tsllm(["convert", "--model", folder, "--outfile", join(dir, name), "--outtype", "q8_0"]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(readFileSync(join(dir, file)), readFileSync(ours), name);
  }
  const refused = join(dir, "outtype-refused.gguf");
  for (const [args, message] of [
    [["--outfile", refused, "--outtype", "auto"], `--outtype must be one of f32, f16, bf16, q8_0 (llama.cpp's converter's types this convert writes; --type also takes q4_0, iq4_nl, iq4_xs), got "auto"`],
    [["--outfile", refused, "--outtype", "tq1_0"], `--outtype must be one of f32, f16, bf16, q8_0 (llama.cpp's converter's types this convert writes; --type also takes q4_0, iq4_nl, iq4_xs), got "tq1_0"`],
    [["--out", refused, "--outfile", refused], "--out and --outfile are the same option: give one"],
    [["--out", refused, "--type", "f16", "--outtype", "f16"], "--type and --outtype are the same option: give one"],
  ] as const) {
    assert.deepEqual(tsllm(["convert", "--model", folder, ...args]), { code: 2, stdout: "", stderr: `tsllm: error: ${message}\n` }, args.join(" "));
    assert.ok(!existsSync(refused));
  }
});

test("convert --out a FIFO (as /dev/null) --json reports the bytes written, not the FIFO's size 0; quantize of a folder likewise", { skip: skipWithoutShared(HF_FOLDER) || process.platform === "win32" }, async () => {
  const folder = sharedFile(HF_FOLDER)!;
  const sub = mkdtempSync(join(dir, "convert-fifo-"));
  for (const command of [["convert", "--model", folder, "--out"], ["quantize", folder]]) {
    const file = join(sub, "file.gguf");
    const asFile = tsllm([...command, file, ...(command[0] === "quantize" ? ["q8_0"] : []), "--json"]);
    assert.equal(asFile.code, 0, asFile.stderr);
    const size = statSync(file).size;
    assert.equal((JSON.parse(asFile.stdout) as { bytes: number }).bytes, size);
    const fifo = join(sub, "fifo");
    rmSync(fifo, { force: true });
    assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
    const reader = spawn("sh", ["-c", 'exec cat "$0" > /dev/null', fifo]);
    const readerDone = new Promise<number | null>((done) => reader.on("close", done));
    const r = await tsllmAsync([...command, fifo, ...(command[0] === "quantize" ? ["q8_0"] : []), "--json"]);
    if (!lstatSync(fifo).isFIFO()) reader.kill();
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await readerDone, 0);
    assert.equal((JSON.parse(r.stdout) as { bytes: number }).bytes, size, command[0]);
  }
});

test("generate on a model folder takes generation_config.json's max_new_tokens and do_sample false as its defaults, as its help says; -n and --temp win", { skip: skipWithoutShared(HF_FOLDER) }, () => {
  assert.match(tsllm(["generate", "--help"]).stdout, /A model folder's generation_config\.json gives the defaults of what it sets \(max_new_tokens,\ndo_sample false: greedy,/);
  // the folder's files, its generation_config.json replaced
  const folder = mkdtempSync(join(dir, "generation-config-"));
  for (const name of readdirSync(sharedFile(HF_FOLDER)!)) if (name !== "generation_config.json") symlinkSync(join(sharedFile(HF_FOLDER)!, name), join(folder, name));
  writeFileSync(join(folder, "generation_config.json"), JSON.stringify({ do_sample: false, max_new_tokens: 5 }));
  const run = (args: string[]) => {
    const r = tsllm(["generate", "-m", folder, "-p", "Hello", "--ignore-eos", "--backend", "reference", "--json", ...args]);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as { completionTokens: number[] };
  };
  const greedy = run(["--temp", "0", "-n", "5"]);
  for (const seed of ["1", "2"]) assert.deepEqual(run(["--seed", seed]).completionTokens, greedy.completionTokens, "the file's max_new_tokens and greedy decoding");
  assert.equal(run(["-n", "7"]).completionTokens.length, 7);
});
