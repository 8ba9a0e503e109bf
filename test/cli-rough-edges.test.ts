// The command line driven as a user of llama.cpp's tools drives it: output paths such as "-",
// /dev/stdout on a pipe, and the bad values, missing files and conflicting flags each command
// must answer with one line naming the flag, a nonzero status and no damaged file. Each run
// spawns the real CLI; llama-quantize's handling of its OUT (tools/quantize/quantize.cpp: any
// argument not starting with "--" is a file name, opened as given) is the judge for "-".
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { closeSync, copyFileSync, existsSync, ftruncateSync, lstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL);
const dir = mkdtempSync(join(tmpdir(), "tsllm-cli-rough-"));
after(() => rmSync(dir, { recursive: true, force: true }));
/** tsx and the CLI by absolute location, so that a run's working folder can be a test's own */
const CLI_ARGS = ["--import", import.meta.resolve("tsx"), resolve(PROJECT_ROOT, "src/cli/main.ts")];

/** a run killed after two minutes (status null): a regression that reads or waits without end fails, not hangs */
const RUN_LIMIT_MS = 120_000;

function tsllm(args: string[], options: { cwd?: string; input?: string; env?: NodeJS.ProcessEnv } = {}) {
  const r = spawnSync(process.execPath, [...CLI_ARGS, ...args], { cwd: options.cwd ?? PROJECT_ROOT, encoding: "utf8", input: options.input ?? "", timeout: RUN_LIMIT_MS, env: options.env ?? process.env });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test("quantize OUT - and convert --out / --outfile -: one line saying \"-\" is no stdout here, exit 2, no file named \"-\" (llama-quantize would write one)", { skip }, () => {
  const sub = mkdtempSync(join(dir, "dash-"));
  const input = join(sub, "in.gguf");
  copyFileSync(sharedFile(MODEL)!, input);
  const before = readFileSync(input);
  const hint = `give a file name (${process.platform === "win32" ? "" : "/dev/stdout to write the GGUF to stdout, "}./- for a file named "-")`;
  for (const [args, what] of [
    [["quantize", input, "-", "q8_0"], "OUT"],
    [["quantize", input, "-", "--type", "q8_0"], "OUT"],
    [["convert", "--model", sub, "--out", "-"], "--out"],
    [["convert", "--model", sub, "--outfile", "-"], "--outfile"],
  ] as const) {
    const r = tsllm([...args], { cwd: sub });
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stderr, `tsllm: error: ${what} -: "-" is not stdout here (llama-quantize would write a file named "-"); ${hint}\n`);
    assert.equal(r.stdout, "");
  }
  assert.deepEqual(readdirSync(sub), ["in.gguf"], "nothing was written");
  assert.ok(readFileSync(input).equals(before));
  // ./- is a file of that name, for whoever wants one
  const dotted = tsllm(["quantize", input, "./-", "q8_0"], { cwd: sub });
  assert.equal(dotted.code, 0, dotted.stderr);
  assert.deepEqual(readdirSync(sub).sort(), ["-", "in.gguf"]);
});

// /dev/stdout is a link to /proc/self/fd/1, which on a pipe leads to "pipe:[N]": there, but with
// no path realpath can give. A link of the test's own stands for /dev/stdout (the same two hops),
// so that a regression replaces that link, not the system's /dev/stdout (it did, as root).
test("quantize OUT /dev/stdout with stdout a pipe: the pipe gets the GGUF's bytes; the link is not replaced by a file; on a socket, one line", { skip: skip || !existsSync("/proc/self/fd/1") }, async () => {
  const sub = mkdtempSync(join(dir, "stdout-"));
  const reference = join(sub, "ref.gguf");
  assert.equal(tsllm(["quantize", sharedFile(MODEL)!, reference, "q8_0"]).code, 0);
  const stdout = join(sub, "stdout");
  symlinkSync("/proc/self/fd/1", stdout);
  const args = [...CLI_ARGS, "quantize", sharedFile(MODEL)!, stdout, "q8_0"];
  // a shell's pipe (Node's own stdio pipes are sockets): tsllm | cat, cat's output read here
  const child = spawn("sh", ["-c", '"$@" | cat', "sh", process.execPath, ...args], { cwd: PROJECT_ROOT, stdio: ["ignore", "pipe", "pipe"] });
  const chunks: Buffer[] = [];
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => chunks.push(d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const code = await new Promise<number | null>((done) => child.on("close", done));
  assert.equal(code, 0, stderr);
  assert.match(stderr, new RegExp(`^wrote ${stdout}: 48 tensors`, "m"), stderr);
  assert.ok(lstatSync(stdout).isSymbolicLink(), "the link is still a link");
  const got = Buffer.concat(chunks);
  assert.ok(got.equals(readFileSync(reference)), `the pipe got the GGUF (${got.length} bytes, expected ${readFileSync(reference).length})`);
  assert.deepEqual(readdirSync(sub).sort(), ["ref.gguf", "stdout"], "no temporary file left");
  // stdout a socket (a process Node or a service manager started): no name opens it; one line, exit 1
  const onSocket = spawnSync(process.execPath, args, { cwd: PROJECT_ROOT, stdio: ["ignore", "pipe", "pipe"], encoding: "utf8", timeout: RUN_LIMIT_MS });
  assert.equal(onSocket.status, 1, onSocket.stderr);
  assert.equal(onSocket.stderr, `tsllm: error: ${stdout}: cannot write the output: it leads to a socket or a device with nothing behind it (ENXIO), which cannot be opened by name; give a file\n`);
  assert.ok(lstatSync(stdout).isSymbolicLink(), "the link is still a link");
  assert.deepEqual(readdirSync(sub).sort(), ["ref.gguf", "stdout"]);
});

test("quantize IN - (no model comes from a pipe) is one line naming IN, exit 2, nothing written", { skip }, () => {
  const sub = mkdtempSync(join(dir, "in-dash-"));
  const r = tsllm(["quantize", "-", "out.gguf", "q8_0"], { cwd: sub, input: "GGUF" });
  assert.deepEqual(r, { code: 2, stdout: "", stderr: "tsllm: error: IN -: a model is not read from stdin; give a GGUF file or a Hugging Face model folder\n" });
  assert.deepEqual(readdirSync(sub), []);
});

test("generate --draft-model naming a folder without config.json, or an empty file: one line naming --draft-model, exit 1", { skip }, () => {
  const sub = mkdtempSync(join(dir, "draft-"));
  const empty = join(sub, "empty.gguf");
  writeFileSync(empty, "");
  for (const [draft, why] of [[sub, `${sub}/config.json: file: not found (a Hugging Face model folder needs config.json)`], [empty, `${empty}: magic: needs 4 bytes at offset 0 but the file ends at 0 (truncated or corrupt file)`]] as const) {
    const r = tsllm(["generate", "-m", sharedFile(MODEL)!, "-p", "Once", "-n", "2", "--backend", "reference", "--draft-model", draft]);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stderr, `tsllm: error: --draft-model: ${why}\n`);
    assert.equal(r.stdout, "");
  }
});

test("perplexity --kl-divergence --base naming a folder without config.json: one line naming --base, exit 1; embed --prompt-name the model lacks: one line naming --prompt-name, exit 2", { skip }, () => {
  const sub = mkdtempSync(join(dir, "base-"));
  const text = join(sub, "text.txt");
  writeFileSync(text, "Once upon a time there was a little cat. ".repeat(40));
  const r = tsllm(["perplexity", "-m", sharedFile(MODEL)!, "-f", text, "--ctx", "64", "--chunks", "1", "--kl-divergence", "--base", sub, "--backend", "reference", "--json"]);
  assert.equal(r.code, 1, r.stderr);
  // (a folder holding nothing a model could be: text.txt alone)
  assert.equal(r.stderr, `tsllm: error: --base: model not found: ${sub} is a folder with no model in it (no config.json, .gguf, .safetensors or tokenizer file; expected a local .gguf file or a Hugging Face model folder)\n`);
  const named = tsllm(["embed", "-m", sharedFile(MODEL)!, "-p", "x", "--prompt-name", "query", "--backend", "reference"]);
  assert.deepEqual(named, { code: 2, stdout: "", stderr: "tsllm: error: --prompt-name: expected one of this model's prompts (it has none: config_sentence_transformers.json names none), got \"query\"\n" });
});

// a text longer than a JavaScript string can be (constants.MAX_STRING_LENGTH bytes) can never be
// decoded; /dev/zero as --file or on stdin was read without end (past 4 GB of memory in 40 s)
test("--file /dev/zero and a prompt piped from /dev/zero stop at the longest text a string holds: one line, exit 1; a larger regular file is refused by its size", { skip: skip || !existsSync("/dev/zero") }, () => {
  const limit = 536870888; // node:buffer's constants.MAX_STRING_LENGTH on 64-bit V8
  const line = (where: string) => `tsllm: error: ${where}: more than ${limit} bytes, the longest text a JavaScript string holds; give a smaller text\n`;
  const fromFile = tsllm(["tokenize", "-m", sharedFile(MODEL)!, "-f", "/dev/zero"]);
  assert.deepEqual(fromFile, { code: 1, stdout: "", stderr: line("--file /dev/zero") });
  const zero = openSync("/dev/zero", "r");
  try {
    const piped = spawnSync(process.execPath, [...CLI_ARGS, "generate", "-m", sharedFile(MODEL)!, "--backend", "reference"], { cwd: PROJECT_ROOT, encoding: "utf8", stdio: [zero, "pipe", "pipe"], timeout: RUN_LIMIT_MS });
    assert.equal(piped.status, 1, piped.stderr);
    assert.equal(piped.stderr, line("the prompt on stdin"));
  } finally {
    closeSync(zero);
  }
  // sparse: no disk taken, no byte read
  const big = join(mkdtempSync(join(dir, "big-")), "big.txt");
  const fd = openSync(big, "w");
  ftruncateSync(fd, limit + 1);
  closeSync(fd);
  assert.deepEqual(tsllm(["perplexity", "-m", sharedFile(MODEL)!, "-f", big]), { code: 1, stdout: "", stderr: line(`--file ${big}`) });
});

test("chat from a pipe with a line longer than 64 MiB (4 bytes a token of the longest context): the lines before it answered, then one line, exit 1, no stack trace", { skip }, () => {
  const sub = mkdtempSync(join(dir, "chat-line-"));
  const template = join(sub, "t.jinja");
  writeFileSync(template, "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:");
  const input = Buffer.concat([Buffer.from("Once upon\n"), Buffer.alloc(64 * 2 ** 20 + 1, 0x61)]);
  const r = spawnSync(process.execPath, [...CLI_ARGS, "chat", "-m", sharedFile(MODEL)!, "--chat-template", template, "-n", "2", "--backend", "reference"], { cwd: PROJECT_ROOT, encoding: "utf8", input, timeout: RUN_LIMIT_MS });
  assert.equal(r.status, 1, r.stderr);
  assert.ok(r.stderr.endsWith("tsllm: error: stdin: a line of more than 67108864 bytes (from byte 10); give shorter lines\n"), r.stderr);
  assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");
  assert.ok(r.stdout.length > 0, "the first line was answered");
});

test("bench --timeout past a timer's longest delay (2^31 - 1 ms) is one line, exit 2, not every run killed as it starts", { skip }, () => {
  assert.deepEqual(tsllm(["bench", "-m", sharedFile(MODEL)!, "--timeout", "3000000"]), { code: 2, stdout: "", stderr: "tsllm: error: --timeout must be <= 2147483, got 3000000\n" });
});

test("generate --logprobs with --num-beams, --draft-model or --prompt-lookup: one line naming the flags before any model loads, exit 2 (the library's refusal came after the load)", () => {
  for (const extra of [["--num-beams", "2"], ["--draft-model", "no-such-draft.gguf"], ["--prompt-lookup"]]) {
    const r = tsllm(["generate", "-m", "no-such-model.gguf", "-p", "x", "--json", "--logprobs", "2", ...extra]);
    assert.equal(r.code, 2, r.stderr);
    assert.equal(r.stderr, "tsllm: error: --logprobs cannot be combined with --num-beams, --draft-model or --prompt-lookup (sampling gives the log-probabilities)\n");
  }
});

test("convert / quantize --vocab naming a file that is no GGUF (a text, an empty file): one line naming --vocab, exit 1, nothing written", { skip: skipWithoutShared("hf-oracle/gpt2-tiny") }, () => {
  const sub = mkdtempSync(join(dir, "vocab-"));
  const text = join(sub, "vocab.txt"), empty = join(sub, "empty.gguf");
  writeFileSync(text, "hi\n");
  writeFileSync(empty, "");
  const folder = sharedFile("hf-oracle/gpt2-tiny")!;
  for (const [args, vocab, why] of [
    [["convert", "--model", folder, "--out", join(sub, "out.gguf")], text, "magic: needs 4 bytes at offset 0 but the file ends at 3 (truncated or corrupt file)"],
    [["quantize", folder, join(sub, "out.gguf"), "q8_0"], empty, "magic: needs 4 bytes at offset 0 but the file ends at 0 (truncated or corrupt file)"],
  ] as const) {
    const r = tsllm([...args, "--vocab", vocab]);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stderr, `tsllm: error: --vocab: ${vocab}: ${why}\n`);
  }
  assert.deepEqual(readdirSync(sub).sort(), ["empty.gguf", "vocab.txt"]);
});

test("ls / rm with HF_HUB_CACHE naming a file: one line naming the variable and the remedy, exit 1, not Node's ENOTDIR", () => {
  const file = join(mkdtempSync(join(dir, "cache-file-")), "hub");
  writeFileSync(file, "not a folder");
  const line = `tsllm: error: the cache root ${file} is a file, not a folder (HF_HUB_CACHE (else HF_HOME/hub) names the cache root; set it to a folder, or give --cache DIR)\n`;
  for (const args of [["ls"], ["rm", "acme/x"]]) {
    assert.deepEqual(tsllm(args, { env: { ...process.env, HF_HUB_CACHE: file } }), { code: 1, stdout: "", stderr: line }, args.join(" "));
  }
  assert.equal(readFileSync(file, "utf8"), "not a folder");
});

test("number flags take only what a user means as a number: an integer flag decimal digits, a float flag a decimal number; hex, exponents, blanks and trailing junk are one line naming the flag, exit 2", () => {
  // JavaScript's Number() read 0x10 as 16, 1e2 as 100 and "  5 " as 5; llama.cpp's std::stoi reads 0x10 as 0 and 1e2 as 1
  const run = (flag: string, value: string) => tsllm(["generate", "--model", join(dir, "absent.gguf"), "--prompt", "hi", flag, value]);
  for (const value of ["0x10", "1e2", "  5 ", "5.", "", "1.5", "+", "12abc"]) {
    assert.deepEqual(run("--threads", value), { code: 2, stdout: "", stderr: `tsllm: error: --threads expects an integer (decimal digits, optionally signed), got "${value}"\n` }, `--threads "${value}"`);
  }
  for (const value of ["0x10", "", " 0.5", "0.5abc", "1e", "Infinity", "0b1"]) {
    assert.deepEqual(run("--temperature", value), { code: 2, stdout: "", stderr: `tsllm: error: --temperature expects a decimal number (such as 0.5, -2 or 1e-3), got "${value}"\n` }, `--temperature "${value}"`);
  }
  assert.deepEqual(run("--temperature", "1e400"), { code: 2, stdout: "", stderr: 'tsllm: error: --temperature expects a finite number, got "1e400"\n' });
  assert.deepEqual(run("--logit-bias", "5=0x10"), { code: 2, stdout: "", stderr: 'tsllm: error: --logit-bias expects ID=BIAS (a token id and a number, or -inf), got "5=0x10"\n' });
  // taken: the run goes on to the model, which is absent (exit 1)
  for (const [flag, value] of [["--threads", "-1"], ["--threads", "+2"], ["--temperature", "5."], ["--temperature", ".5"], ["--temperature", "-1e-1"], ["--logit-bias", "5=-1e-1"]] as const) {
    const r = run(flag, value);
    assert.equal(r.code, 1, `${flag} ${value}: ${r.stderr}`);
    assert.match(r.stderr, /^tsllm: error: model not found: /, `${flag} ${value}`);
  }
});

test("rm / download REPO@R --revision OTHER: two revisions are one line naming both, exit 2, nothing removed; the same one twice is taken", () => {
  const cache = mkdtempSync(join(dir, "rm-two-"));
  const repo = join(cache, "models--acme--x");
  const [main, dev] = ["a".repeat(40), "b".repeat(40)];
  mkdirSync(join(repo, "blobs"), { recursive: true });
  for (const [ref, commit] of [["main", main], ["dev", dev]] as const) {
    mkdirSync(join(repo, "snapshots", commit), { recursive: true });
    writeFileSync(join(repo, "snapshots", commit, "config.json"), "{}");
    mkdirSync(join(repo, "refs"), { recursive: true });
    writeFileSync(join(repo, "refs", ref), commit);
  }
  assert.deepEqual(tsllm(["rm", "acme/x@main", "--revision", "dev", "--cache", cache]), { code: 2, stdout: "", stderr: "tsllm: error: rm acme/x@main --revision dev: two revisions (main after @, dev from --revision); give one\n" });
  assert.deepEqual(readdirSync(join(repo, "snapshots")).sort(), [main, dev]);
  // download likewise, before any request (offline: without the check it was "not in the cache", exit 1)
  assert.deepEqual(tsllm(["download", "acme/y@main", "--revision", "dev", "--offline", "--cache", cache]), { code: 2, stdout: "", stderr: "tsllm: error: download acme/y@main --revision dev: two revisions (main after @, dev from --revision); give one\n" });
  const same = tsllm(["rm", "acme/x@dev", "--revision", "dev", "--cache", cache]);
  assert.equal(same.code, 0, same.stderr);
  assert.deepEqual(readdirSync(join(repo, "snapshots")), [main]);
});

test("an empty value for a required path flag (convert --out \"\", --outfile \"\", --model \"\" of any command, perplexity --file \"\") says the value is empty, not that the flag is missing", () => {
  const folder = join(dir, "no-model");
  for (const [args, expected] of [
    [["convert", "--model", folder, "--out", ""], "--out is empty; give the GGUF file to write"],
    [["convert", "--model", folder, "--outfile", ""], "--outfile is empty; give the GGUF file to write"],
    [["convert", "--model", "", "--out", "x.gguf"], "--model is empty; give a Hugging Face model folder or a Hub reference org/name"],
    [["perplexity", "--model", "x.gguf", "--file", ""], "--file is empty; give a file name"],
    [["generate", "--model", "", "--prompt", "hi"], "--model is empty; give a .gguf file, a model folder or a Hub reference org/name"],
    [["serve", "--model", ""], "--model is empty; give a .gguf file, a model folder or a Hub reference org/name"],
    [["convert", "--model", folder], "--out is required"],
  ] as const) {
    assert.deepEqual(tsllm([...args]), { code: 2, stdout: "", stderr: `tsllm: error: ${expected}\n` }, args.join(" "));
  }
});

test("ls --help, rm --help and download --help list -h, --help as every command's help does", () => {
  for (const command of ["ls", "rm", "download"]) {
    const r = tsllm([command, "--help"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^ {2}-h, --help +show this help$/m, command);
  }
});
