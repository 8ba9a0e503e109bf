// Issue 17's acceptance: every case of the hostile corpus (scripts/hostile-corpus.ts: damaged GGUF
// and safetensors files, bad hyper-parameters, Object.prototype names, NaN norms, huge special
// tokens, regex and chat-template bombs, bad merges, broken config.json / tokenizer.json) is
// rejected within 10 s, with a peak RSS under 1 GB, with one line of error text that names the
// file (and the field at fault), never a JS engine error (TypeError, RangeError, ...) or a stack.
//
// The cases run in two child processes (scripts/hostile-load.ts --batch), one case after another;
// a child's peak RSS is reported after each case, so "under 1 GB after case i" bounds case i. A
// case that runs past 10 s or kills its child is recorded and the child restarted after it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { buildHostileCorpus, type HostileCase } from "../scripts/hostile-corpus.js";
import { UNTYPED_ERRORS, untypedMessage, type LoadReport } from "../scripts/hostile-load.js";
import { PROJECT_ROOT } from "./helpers/shared.js";

const HANG_MS = 10_000;
const RSS_LIMIT = 1 << 30;
const CHILDREN = 2;

type Outcome = (LoadReport & { stderr: string }) | { hung: true } | { crashed: string };

/** runs `cases` in one child after the other, restarting the child after a hang or a crash */
async function runBatch(cases: readonly HostileCase[], listFile: string): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  while (outcomes.length < cases.length) {
    const rest = cases.slice(outcomes.length);
    writeFileSync(listFile, JSON.stringify(rest.map((c) => ({ kind: c.kind, path: c.path }))));
    const child = spawn(process.execPath, ["--import", "tsx", "scripts/hostile-load.ts", "--batch", listFile], { cwd: PROJECT_ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => { stderr += d.toString(); });
    let timer: NodeJS.Timeout | undefined;
    let hung = false;
    const arm = () => { clearTimeout(timer); timer = setTimeout(() => { hung = true; child.kill("SIGKILL"); }, HANG_MS); };
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    const before = outcomes.length;
    for await (const line of createInterface({ input: child.stdout })) {
      const msg = JSON.parse(line) as { start?: number } & LoadReport & { stderr: string };
      if (msg.start !== undefined) { arm(); continue; }
      clearTimeout(timer);
      outcomes.push(msg);
    }
    await exited;
    clearTimeout(timer);
    if (outcomes.length < cases.length) outcomes.push(hung ? { hung: true } : { crashed: stderr.trim().slice(0, 2000) || "the child exited" });
    assert.ok(outcomes.length > before, "the child made progress");
  }
  return outcomes;
}

const corpus = await buildHostileCorpus();
test.after(() => rmSync(corpus.dir, { recursive: true, force: true }));

const results = new Map<HostileCase, Outcome>();
const ran = (async () => {
  const shares = Array.from({ length: CHILDREN }, (_, k) => corpus.cases.filter((_, i) => i % CHILDREN === k));
  const outs = await Promise.all(shares.map((share, k) => runBatch(share, join(corpus.dir, `list-${k}.json`))));
  shares.forEach((share, k) => share.forEach((c, i) => results.set(c, outs[k]![i]!)));
})();

test("the corpus covers issue 17's families", () => {
  const families = new Set(corpus.cases.map((c) => c.family));
  for (const f of ["gguf structure", "huge counts and lengths", "Object.prototype names", "NaN norms", "bad hyper-parameters", "huge special tokens",
    "catastrophic regex", "chat template bombs", "safetensors header", "bad merges", "config.json", "tokenizer.json shape", "control characters"]) {
    assert.ok(families.has(f), `a case of "${f}"`);
  }
  assert.ok(corpus.cases.length >= 100, `${corpus.cases.length} cases`);
});

test("the JS engine's words are told from jinja2's (which a template's error repeats)", () => {
  for (const m of ["Cannot read properties of undefined (reading 'length')", "t.map is not a function", "tokens is not iterable", "undefined is not iterable (cannot read property Symbol(Symbol.iterator))"]) assert.ok(untypedMessage(m), m);
  // python3 -c "import jinja2; jinja2.Environment().from_string('{{ 3|join }}').render()": TypeError: 'int' object is not iterable
  for (const m of ["x/tokenizer_config.json: chat template (chat_template): rendering failed: 'int' object is not iterable (line 1)", "'bool' object is not iterable", "'builtin_function_or_method' object is not iterable"]) assert.ok(!untypedMessage(m), m);
});

test("the valid files the corpus is made from load", async () => {
  const { reportCase } = await import("../scripts/hostile-load.js");
  for (const [kind, path] of [["model", corpus.bases.gguf], ["model", corpus.bases.hfFolder], ["tokenizer", corpus.bases.tokenizerFolder], ["chat", corpus.bases.tokenizerFolder]] as const) {
    const r = await reportCase(kind, path);
    assert.ok(r.ok, `${kind} ${path}: ${r.message}`);
  }
});

test("no case hangs, kills its process or takes 1 GB", async () => {
  await ran;
  const bad = corpus.cases.flatMap((c) => {
    const r = results.get(c)!;
    if ("hung" in r) return [`${c.name}: still running after ${HANG_MS / 1000} s`];
    if ("crashed" in r) return [`${c.name}: the loading process died: ${r.crashed.slice(0, 300)}`];
    return r.maxRssBytes >= RSS_LIMIT ? [`${c.name}: peak RSS ${(r.maxRssBytes / 2 ** 20).toFixed(0)} MiB`] : [];
  });
  assert.deepEqual(bad, []);
});

for (const c of corpus.cases) {
  test(`${c.family}: ${c.name} is rejected with one line naming the file${c.field ? ` and ${c.field}` : ""}`, async () => {
    await ran;
    const r = results.get(c)!;
    assert.ok(!("hung" in r), `${c.path}: still running after ${HANG_MS / 1000} s`);
    assert.ok(!("crashed" in r), `${c.path}: the loading process died: ${"crashed" in r ? r.crashed : ""}`);
    assert.ok(r.maxRssBytes < RSS_LIMIT, `${c.path}: peak RSS ${(r.maxRssBytes / 2 ** 20).toFixed(0)} MiB`);
    assert.ok(!r.ok, `${c.path}: accepted (loaded and generated without an error)`);
    const message = r.message!;
    assert.ok(!UNTYPED_ERRORS.has(r.name!), `${c.path}: a JS engine error reached the user: ${r.name}: ${message.slice(0, 300)}`);
    assert.equal(r.stderr, "", `${c.path}: nothing else is printed`);
    assert.ok(!message.includes("\n"), `${c.path}: one line, got: ${message.slice(0, 300)}`);
    assert.ok(!untypedMessage(message), `${c.path}: the JS engine's words: ${message.slice(0, 300)}`);
    assert.doesNotMatch(message, /TypeError|\n\s+at /, `${c.path}: ${message.slice(0, 300)}`);
    // control characters from the file are escaped by the CLI (printable); the message itself names the file
    assert.ok(message.includes(c.path), `names the file ${c.path}: ${message.slice(0, 300)}`);
    if (c.field) assert.ok(message.includes(c.field), `names ${c.field}: ${message.slice(0, 300)}`);
    assert.ok(message.length < 2000, `${c.path}: a short message (${message.length} characters)`);
  });
}
