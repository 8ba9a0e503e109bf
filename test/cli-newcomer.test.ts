// A newcomer's first hour with the command line: each run spawns the real CLI and follows the advice
// its one-line errors give, which must itself be a command line the CLI takes.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { test } from "node:test";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL);
const CLI_ARGS = ["--import", import.meta.resolve("tsx"), resolve(PROJECT_ROOT, "src/cli/main.ts")];

/** a run killed after two minutes (status null): a regression that waits without end fails, not hangs */
function tsllm(args: string[], input = "") {
  const r = spawnSync(process.execPath, [...CLI_ARGS, ...args], { cwd: PROJECT_ROOT, encoding: "utf8", input, timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** the argv a "(the prompt is given as --prompt=--help)" line advises, split as a shell would split it */
function advised(stderr: string): string[] {
  const m = /is given as (--[\w-]+)(=| )("(?:[^"\\]|\\.)*"|\S+)\)$/m.exec(stderr);
  assert.ok(m, stderr);
  const value = m[3]!.startsWith('"') ? (JSON.parse(m[3]!) as string) : m[3]!;
  return m[2] === "=" ? [`${m[1]}=${value}`] : [m[1]!, value];
}

test("a stray argument after -- that starts with a dash (--help, --text, \"-- a\"): the advised --prompt=VALUE / --text=VALUE runs, not a second refusal", { skip }, () => {
  const model = sharedFile(MODEL) ?? "";
  for (const [command, stray, extra] of [
    ["tokenize", "--text", ["--ids"]],
    ["tokenize", "-- a", ["--ids"]],
    ["generate", "--help", ["-n", "1", "--seed", "1"]],
    ["generate", "-n", ["-n", "1", "--seed", "1"]],
  ] as const) {
    const refused = tsllm([command, "--model", model, ...extra, "--", stray]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /^tsllm: error: unexpected argument/);
    const again = tsllm([command, "--model", model, ...extra, ...advised(refused.stderr)]);
    assert.equal(again.code, 0, `${command} ${stray}: ${again.stderr}`);
    assert.notEqual(again.stdout, "");
  }
});

test("bench --vs-llama-cpp on a Hugging Face folder: one line naming --vs-llama-cpp and the folder, exit 2, before any run (llama.cpp's worker failed with EISDIR after tsllm's runs)", { skip: skipWithoutShared("hf-oracle/gpt2-tiny") }, () => {
  const folder = sharedFile("hf-oracle/gpt2-tiny") ?? "";
  const r = tsllm(["bench", "--model", folder, "-p", "4", "-n", "1", "-r", "1", "--vs-llama-cpp"]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /^tsllm: error: --vs-llama-cpp needs a GGUF file .*--model \S*gpt2-tiny is a folder/);
  assert.equal(r.stderr.split("\n").length, 2, r.stderr);
  assert.doesNotMatch(r.stderr, /run 1|EISDIR/);
  assert.equal(r.stdout, "");
});

test("an option before any command: -v prints the version (node -v, npm -v, ollama -v); the advice names a command that takes the option, or none", () => {
  const version = `tsllm ${(JSON.parse(readFileSync(resolve(PROJECT_ROOT, "package.json"), "utf8")) as { version: string }).version}\n`;
  assert.deepEqual(Object.values(tsllm(["-v"])), [0, version, ""]);
  const typo = tsllm(["--versio"]);
  assert.deepEqual([typo.code, typo.stdout, typo.stderr], [2, "", "tsllm: error: unknown option --versio (did you mean --version?)\n"]);
  // each advised command line, run with --help, is taken (generate -v and generate --verbose were refused)
  for (const [option, command] of [["--verbose", "convert"], ["-m", "generate"], ["--json", "generate"]] as const) {
    const r = tsllm([option]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, new RegExp(`^tsllm: error: tsllm takes a command first, then its options: tsllm ${command} ${option} \\.\\.\\. `));
    const advised = tsllm([command, ...(option === "-m" ? [] : [option]), "--help"]);
    assert.equal(advised.code, 0, advised.stderr);
  }
  const none = tsllm(["--frobnicate"]);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /^tsllm: error: unknown option --frobnicate: tsllm takes a command first, then its options \(commands: generate, /);
});

test("llama.cpp's own multi-letter short options (-cnv, -no-cnv, -st, -np, -cb, -tb, -ub, -sp) are named as llama.cpp's, not as a value run together (\"write -c nv\") or Node's \"unknown option -n\"", { skip }, () => {
  const model = sharedFile(MODEL) ?? "";
  for (const [command, option, line] of [
    ["generate", "-cnv", "unknown option -cnv: llama.cpp's --conversation; tsllm chat is the conversation"],
    ["generate", "-no-cnv", "unknown option -no-cnv: llama.cpp's --no-conversation; tsllm generate is one completion"],
    ["generate", "-st", "unknown option -st: llama.cpp's --single-turn; tsllm generate answers once"],
    ["serve", "-np", "unknown option -np: llama.cpp's --parallel (did you mean --parallel?)"],
    ["serve", "-cb", "unknown option -cb: llama.cpp's --cont-batching; tsllm serve always batches"],
    ["serve", "-tb", "unknown option -tb: llama.cpp's --threads-batch (--help lists the options)"],
    ["serve", "-ub", "unknown option -ub: llama.cpp's --ubatch-size (--help lists the options)"],
    ["generate", "-sp", "unknown option -sp: llama.cpp's --special (--help lists the options)"],
  ] as const) {
    const text = command === "generate" ? ["-p", "hi"] : [];
    const value = ["-np", "-tb", "-ub"].includes(option) ? ["2"] : [];
    const r = tsllm([command, "--model", model, ...text, option, ...value]);
    assert.deepEqual([r.code, r.stdout, r.stderr], [2, "", `tsllm: error: ${line}\n`], `${command} ${option}`);
  }
  // as a value it is the value: a prompt "-cnv"
  const prompt = tsllm(["generate", "--model", model, "-n", "1", "--seed", "1", "-p", "-cnv"]);
  assert.equal(prompt.code, 0, prompt.stderr);
});
