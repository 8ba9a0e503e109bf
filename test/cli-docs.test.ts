// README's CLI synopsis, each command's --help and each command's parser name the same options,
// and the values the synopsis shows (choices such as wasm|reference|webgpu, defaults such as
// --port 8080) are the ones --help gives.
// The parser tables come from the code (src/cli/commands.ts), the help from running the command
// with --help, the synopsis from README's "## CLI" block: nothing here is a copy of either list.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { COMMANDS } from "../src/cli/commands.js";

/** `--flag` names in a text (not `--help`, which every command takes) */
function flagsIn(text: string): Set<string> {
  const out = new Set<string>();
  for (const m of text.matchAll(/(?<![\w-])--([a-z][a-z0-9-]*)/g)) if (m[1] !== "help") out.add(m[1]!);
  return out;
}

/** README's synopsis: the first ```sh block after "## CLI", one entry per `tsllm COMMAND` line and its indented continuations */
function readmeSynopsis(): Map<string, string> {
  const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
  const section = readme.slice(readme.indexOf("\n## CLI\n"));
  const block = /```sh\n([\s\S]*?)```/.exec(section);
  assert.ok(block, "README has a ```sh block under ## CLI");
  const synopsis = new Map<string, string>();
  let current: string | undefined;
  for (const raw of block[1]!.split("\n")) {
    const line = raw.replace(/\s#\s.*$/, ""); // a trailing comment (chat's "# /reset, /exit")
    const start = /^tsllm\s+([a-z]+)\b(.*)$/.exec(line);
    if (start) {
      current = start[1]!;
      assert.ok(!synopsis.has(current), `README lists "tsllm ${current}" once`);
      synopsis.set(current, start[2]!);
    } else if (current !== undefined && /^\s+\S/.test(line)) {
      synopsis.set(current, synopsis.get(current)! + " " + line.trim());
    } else if (line.trim() !== "") {
      current = undefined;
    }
  }
  return synopsis;
}

/** what `tsllm COMMAND --help` prints, run in this process (stdout captured) */
async function helpOutput(name: string): Promise<string> {
  const chunks: string[] = [];
  const write = process.stdout.write;
  process.stdout.write = ((chunk: string | Uint8Array) => { chunks.push(String(chunk)); return true; }) as typeof process.stdout.write;
  try {
    await COMMANDS[name]!.run(["--help"]);
  } finally {
    process.stdout.write = write;
  }
  return chunks.join("");
}

const sorted = (s: Iterable<string>) => [...s].sort();
const missing = (from: Set<string>, in_: Set<string>) => sorted([...from].filter((f) => !in_.has(f)));

test("README's CLI synopsis lists every command, and only the commands there are", () => {
  assert.deepEqual(sorted(readmeSynopsis().keys()), sorted(Object.keys(COMMANDS)));
});

for (const name of Object.keys(COMMANDS)) {
  test(`tsllm ${name}: README, --help and the parser list the same options`, async () => {
    const parser = new Set(Object.keys(COMMANDS[name]!.options));
    const help = await helpOutput(name);
    assert.equal(help, COMMANDS[name]!.help, "--help prints the command's help text");
    const helpFlags = flagsIn(help);
    const readme = flagsIn(readmeSynopsis().get(name) ?? "");
    assert.deepEqual(missing(readme, parser), [], `README's "tsllm ${name}" lists options its parser does not take`);
    assert.deepEqual(missing(helpFlags, parser), [], `"tsllm ${name} --help" lists options its parser does not take`);
    assert.deepEqual(missing(parser, readme), [], `README's "tsllm ${name}" leaves out options its parser takes`);
    assert.deepEqual(missing(parser, helpFlags), [], `"tsllm ${name} --help" leaves out options its parser takes`);
  });
}

/** a flag's entry in a --help text: its line and the continuation lines under it (up to the next option or a blank line) */
function helpEntry(help: string, flag: string): string | undefined {
  const lines = help.split("\n");
  const at = lines.findIndex((l) => new RegExp(`^\\s+(?:-\\w, )?--${flag}(?![\\w-])`).test(l));
  if (at < 0) return undefined;
  let end = at + 1;
  while (end < lines.length && lines[end]!.trim() !== "" && !/^\s+-/.test(lines[end]!)) end++;
  return lines.slice(at, end).join("\n");
}

/** `--flag VALUE` pairs of README's synopsis of a command (a VALUE is what follows the flag up to a space or bracket) */
function synopsisValues(name: string): [flag: string, value: string][] {
  return [...(readmeSynopsis().get(name) ?? "").matchAll(/(?<![\w-])--([a-z][a-z0-9-]*) ([^\s[\]]+)/g)].map((m) => [m[1]!, m[2]!]);
}

/** what --help says about a flag: its entry, with the entries it defers to ("as --cache-type-k", chat's "as in generate") */
async function helpAbout(name: string, flag: string): Promise<string> {
  const help = await helpOutput(name);
  const entry = helpEntry(help, flag) ?? "";
  const deferred = [...entry.matchAll(/\bas (?:in )?--([a-z][a-z0-9-]*)/g)].map((m) => helpEntry(help, m[1]!) ?? "");
  if (name !== "generate" && /as in generate/.test(help)) deferred.push(await helpAbout("generate", flag));
  return [entry, ...deferred].join("\n");
}

const escaped = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

for (const name of Object.keys(COMMANDS)) {
  test(`tsllm ${name}: the values and defaults README's synopsis shows are the ones --help gives`, async () => {
    for (const [flag, value] of synopsisValues(name)) {
      // placeholders (N, FILE.gguf, ID=BIAS) have capitals; what is left is literal: choices (wasm|reference|webgpu) or a default (--port 8080)
      const literals = value.split("|").filter((v) => !/[A-Z]/.test(v) && v !== "...");
      if (value.startsWith("--") || literals.length === 0) continue;
      const about = await helpAbout(name, flag);
      if (value.includes("|")) {
        for (const v of literals) assert.match(about, new RegExp(`(?<![\\w.-])${escaped(v)}(?![\\w-])`), `README's "tsllm ${name} --${flag} ${value}": --help does not name "${v}" for --${flag}:\n${about}`);
      } else if (!new RegExp(`^\\s*--${escaped(flag)} ${escaped(value)}\\s`).test(about)) {
        // a literal is a default, unless --help's entry spells the flag with it as its one value (inspect's --backend webgpu)
        assert.match(about, new RegExp(`default ${escaped(value)}(?![\\w.])`), `README's "tsllm ${name} [--${flag} ${value}]" shows ${value}, but --help says:\n${about}`);
      }
    }
  });
}

test("README's synopsis and each --help's usage line give a flag the same placeholder (--model MODEL, not FILE.gguf)", async () => {
  const differ: string[] = [];
  for (const name of Object.keys(COMMANDS)) {
    const usage = (await helpOutput(name)).split("\n\n")[0]!;
    const inUsage = new Map([...usage.matchAll(/(?<![\w-])--([a-z][a-z0-9-]*) ([^\s[\]]+)/g)].map((m) => [m[1]!, m[2]!]));
    for (const [flag, value] of synopsisValues(name)) {
      const other = inUsage.get(flag);
      // a placeholder against a placeholder (MODEL, FILE.gguf); README may spell out a choice the usage line names by a letter (K|all, K)
      const single = (v: string) => !v.startsWith("--") && !v.includes("|");
      if (other !== undefined && single(value) && single(other) && other !== value) differ.push(`tsllm ${name} --${flag}: README ${value}, --help ${other}`);
    }
  }
  assert.deepEqual(differ, []);
});
