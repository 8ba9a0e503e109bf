// README's CLI synopsis, each command's --help and each command's parser name the same options.
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
