// The commands README.md and docs/*.md give (`npm run X -- ...`, `node --import tsx scripts/X.ts ...`,
// `tsllm COMMAND ...`, in code blocks and inline code, historical benchmark commands included) still
// name what exists and take the options shown: every `npm run X` is a package.json script, every
// scripts/ file is there, each script answers --help with its usage (exit 0, nothing measured)
// listing every option and --only name the docs use with it, and a tsllm command's options are
// its parser's. test/cli-docs.test.ts checks README's CLI synopsis the other way round.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { LLAMA_CPP_ALIASES } from "../src/cli/args.js";
import { COMMANDS } from "../src/cli/commands.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const docs = ["README.md", ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`)];
const npmScripts: Record<string, string> = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).scripts;

/** one command as a doc gives it: what it runs ("npm:bench", "scripts/kernel-bench.ts", "tsllm:serve"), its options and --only names */
interface DocCommand { doc: string; target: string; text: string; flags: string[]; only: string[] }

/** the code of a markdown text: fenced blocks line by line (a trailing `\` joins the next line), inline code spans with their line breaks as spaces */
function codeSpans(md: string): string[] {
  const spans: string[] = [];
  for (const m of md.matchAll(/```[a-z]*\n([\s\S]*?)```/g)) spans.push(...m[1]!.replace(/\\\n/g, " ").split("\n"));
  for (const m of md.replace(/```[a-z]*\n[\s\S]*?```/g, "").matchAll(/`([^`]+)`/g)) spans.push(m[1]!.replace(/\s+/g, " "));
  return spans;
}

function docCommands(): DocCommand[] {
  const out: DocCommand[] = [];
  const start = new RegExp(`npm run ([a-z][a-z:-]*)|node (?:--import tsx )?(scripts/[\\w.-]+)|(?<![\\w/.-])tsllm (${Object.keys(COMMANDS).join("|")})\\b`, "g");
  for (const doc of docs) {
    for (const span of codeSpans(readFileSync(join(root, doc), "utf8"))) {
      const starts = [...span.matchAll(start)];
      starts.forEach((m, i) => {
        const text = span.slice(m.index! + m[0].length, starts[i + 1]?.index ?? span.length).replace(/\s#\s.*$/, "");
        const flags = [...text.matchAll(/(?<![\w-])--([a-z][a-z0-9-]*)/g)].map((f) => f[1]!).filter((f) => f !== "help");
        const only = [...text.matchAll(/--only[ =]([\w.,-]+)/g)].flatMap((o) => o[1]!.split(",")).filter((n) => /^[a-z0-9_-]+$/.test(n));
        const target = m[1] !== undefined ? `npm:${m[1]}` : m[2] !== undefined ? m[2] : `tsllm:${m[3]}`;
        out.push({ doc, target, text: m[0] + text, flags, only });
      });
    }
  }
  return out;
}

const commands = docCommands();
const byTarget = new Map<string, DocCommand[]>();
for (const c of commands) byTarget.set(c.target, [...(byTarget.get(c.target) ?? []), c]);

test("the docs' commands were found (README's quick start, the benchmarks, the browser example)", () => {
  for (const t of ["npm:bench", "npm:fuzz", "npm:bench:roofline", "npm:example:browser", "scripts/kernel-bench.ts", "tsllm:generate"]) assert.ok(byTarget.has(t), t);
});

test("every `npm run X` in the docs is a package.json script, every scripts/ file they name exists", () => {
  for (const [target, uses] of byTarget) {
    if (target.startsWith("npm:")) assert.ok(Object.hasOwn(npmScripts, target.slice(4)), `${uses[0]!.doc}: "${uses[0]!.text}": package.json has no script "${target.slice(4)}"`);
    else if (target.startsWith("scripts/")) assert.ok(existsSync(join(root, target)), `${uses[0]!.doc}: "${uses[0]!.text}": ${target} does not exist`);
  }
});

test("the docs' tsllm commands take the options they show", () => {
  for (const [target, uses] of byTarget) {
    if (!target.startsWith("tsllm:")) continue;
    const options = COMMANDS[target.slice(6)]!.options;
    // a llama.cpp spelling (--temp) counts where it stands for one of the command's options
    const takes = (f: string) => Object.hasOwn(options, f) || (LLAMA_CPP_ALIASES[`--${f}`] ?? []).some((o) => Object.hasOwn(options, o));
    for (const use of uses) for (const f of use.flags) assert.ok(takes(f), `${use.doc}: "${use.text}": tsllm ${target.slice(6)} has no --${f}`);
  }
});

/** the script file a target runs through tsx, or undefined (npm scripts that are not one: build, lint, ...) */
function tsxScript(target: string): string | undefined {
  const file = target.startsWith("npm:") ? /^node --import tsx (\S+\.m?ts)$/.exec(npmScripts[target.slice(4)] ?? "")?.[1] : target;
  return file !== undefined && /\.m?ts$/.test(file) ? file : undefined;
}

/** the scripts the docs run, each once, with the docs' uses of it */
const scripts = new Map<string, DocCommand[]>();
for (const [target, uses] of byTarget) {
  const file = tsxScript(target) ?? (target.startsWith("scripts/") ? target : undefined);
  if (file !== undefined) scripts.set(file, [...(scripts.get(file) ?? []), ...uses]);
}

for (const [file, uses] of scripts) {
  if (!existsSync(join(root, file))) continue; // the test above names it
  const usedFlags = [...new Set(uses.flatMap((u) => u.flags))];
  const usedOnly = [...new Set(uses.flatMap((u) => u.only))];
  if (file.endsWith(".mjs")) {
    // the build and pack scripts: plain JavaScript that reads its own argv; the options are in its source
    test(`${file}: takes the options the docs show (${usedFlags.join(", ") || "none"})`, () => {
      const source = readFileSync(join(root, file), "utf8");
      for (const f of usedFlags) assert.ok(source.includes(`"--${f}"`), `${file} does not read --${f} (${uses.find((u) => u.flags.includes(f))!.doc})`);
    });
    continue;
  }
  test(`${file} --help: its usage, at once, with the options the docs show (${usedFlags.join(", ") || "none"})`, () => {
    const r = spawnSync(process.execPath, ["--import", "tsx", file, "--help"], { cwd: root, encoding: "utf8", timeout: 60_000 });
    assert.equal(r.status, 0, `${file} --help exited ${r.status}${r.signal ? ` (${r.signal})` : ""}: ${r.stderr.trim().split("\n")[0]}`);
    assert.match(r.stdout, /^usage: /i, `${file} --help prints its usage first, not a run: ${r.stdout.slice(0, 200)}`);
    for (const f of usedFlags) assert.match(r.stdout, new RegExp(`--${f}\\b`), `${file} --help does not list --${f}, which ${uses.find((u) => u.flags.includes(f))!.doc} uses`);
    for (const name of usedOnly) assert.ok(r.stdout.includes(name), `${file} --help does not list "${name}", which ${uses.find((u) => u.only.includes(name))!.doc} runs with --only`);
  });
}
