// Mutation fuzzer for the loaders (issue 17): takes the hostile corpus's valid files as seeds,
// mutates them (bit flips, byte runs, truncation, length fields blown up, splices of two inputs,
// JSON-level edits for tokenizer.json) and loads each mutant the way a user's command would
// (scripts/hostile-load.ts). Reported, with the input saved: an untyped error (TypeError,
// RangeError, ... from the JS engine rather than our own errors), a hang (> 10 s) or a peak RSS
// over 1 GB. Not part of npm test.
//
//   npm run fuzz -- --minutes N [--target gguf|safetensors|tokenizer|template] [--seed S] [--out DIR]
//
// Loads run in a child process (many mutants per child, one after another); the child is killed
// and restarted when a load runs past 10 s or its RSS passes 1 GB, and the input that did it is kept.
import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { buildHostileCorpus } from "./hostile-corpus.js";
import { UNTYPED_ERRORS, untypedMessage, type LoadKind, type LoadReport } from "./hostile-load.js";
import { Rng } from "../src/testing/rng.js";
import { optionalNumber, optionalString, UsageError } from "../src/cli/args.js";
import { noPositionals, scriptOptions } from "./script-args.js";

const TARGETS = ["gguf", "safetensors", "tokenizer", "template"] as const;
type Target = (typeof TARGETS)[number];
const HANG_MS = 10_000;
const RSS_LIMIT = 1 << 30;
const BATCH = 50;
const ROOT = resolve(fileURLToPath(import.meta.url), "../..");

const USAGE = `Usage: npm run fuzz -- [--minutes N] [--target ${TARGETS.join("|")}] [--seed S] [--out DIR]\n` +
  "  mutates the hostile corpus's valid files and loads each mutant in a watched child for N minutes (default 1)\n" +
  "  an untyped error, a hang over 10 s or an RSS over 1 GB is reported with its input saved under --out (default fuzz-findings/)";
const { minutes, targets, seed, out } = scriptOptions(USAGE, { minutes: { type: "string" }, target: { type: "string" }, seed: { type: "string" }, out: { type: "string" } }, (values, positionals) => {
  noPositionals(positionals);
  const minutes = optionalNumber(values, "minutes") ?? 1;
  if (!(minutes > 0)) throw new UsageError(`--minutes must be a positive number, got ${minutes}`);
  const target = optionalString(values, "target");
  if (target !== undefined && !(TARGETS as readonly string[]).includes(target)) throw new UsageError(`--target must be one of ${TARGETS.join(", ")}, got "${target}"`);
  const targets: Target[] = target === undefined ? [...TARGETS] : [target as Target];
  return { minutes, targets, seed: optionalNumber(values, "seed", { integer: true, min: 0 }), out: optionalString(values, "out") };
});
const rng = new Rng(seed ?? Date.now() % 1e9);
const work = mkdtempSync(join(tmpdir(), "tsllm-fuzz-"));
const crashDir = resolve(out ?? join(ROOT, "fuzz-findings"));
mkdirSync(crashDir, { recursive: true });
process.stderr.write(`fuzz: work in ${work}; findings go to ${crashDir}\n`);

const corpus = await buildHostileCorpus(join(work, "corpus"));
const templates = [
  "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% if loop.last %}{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}",
  "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('alternate') }}{% endif %}{{ '[INST] ' + message['content'] | trim + ' [/INST]' }}{% endfor %}",
  "{% set ns = namespace(a=[]) %}{% for i in range(10) %}{% set ns.a = ns.a + [i] %}{% endfor %}{{ ns.a | join(',') }}{{ messages | length }}{{ 'x' | upper }}{% macro f(x) %}{{ x * 2 }}{% endmacro %}{{ f(3) }}",
];

const rint = (n: number) => Math.floor(rng.uniform() * n);

/** one byte-level mutation of `b` (a new buffer) */
function mutateBytes(b: Buffer, other: Buffer): Buffer {
  const out = Buffer.from(b);
  switch (rint(6)) {
    case 0: { for (let k = 1 + rint(8); k > 0; k--) { const i = rint(out.length); out[i] = out[i]! ^ (1 << rint(8)); } return out; }
    case 1: { const i = rint(out.length); out.fill(rint(256), i, Math.min(out.length, i + 1 + rint(16))); return out; }
    case 2: return out.subarray(0, rint(out.length));
    case 3: { // a 4- or 8-byte little-endian field, as a length or count would be, blown up
      const i = rint(Math.max(1, Math.min(out.length - 8, 4096)));
      const v = [0xffffffffn, 1n << 31n, 1n << 62n, 0n, (1n << 64n) - 1n, BigInt(rint(1 << 20))][rint(6)]!;
      if (rint(2)) out.writeBigUInt64LE(v & ((1n << 64n) - 1n), i); else out.writeUInt32LE(Number(v & 0xffffffffn), i);
      return out;
    }
    case 4: { const i = rint(out.length), j = rint(other.length); return Buffer.concat([out.subarray(0, i), other.subarray(j)]); }
    default: { const i = rint(out.length), n = 1 + rint(64), j = rint(out.length); return Buffer.concat([out.subarray(0, j), out.subarray(i, i + n), out.subarray(j)]); }
  }
}

/** a JSON-level mutation: a random value somewhere replaced by a hostile one */
function mutateJson(v: unknown, depth = 0): unknown {
  const hostile = () => [null, -1, 2 ** 53, Number.MAX_SAFE_INTEGER, "__proto__", "constructor", [], {}, "(a+)+$", "x".repeat(1 << (10 + rint(10))), [1, 2], { type: "constructor" }, true, 1e308][rint(14)];
  if (depth > 0 && rint(6) === 0) return hostile();
  if (Array.isArray(v)) {
    if (v.length === 0) return [hostile()];
    const out = [...v];
    const i = rint(out.length);
    out[i] = mutateJson(out[i], depth + 1);
    return out;
  }
  if (v && typeof v === "object") {
    const keys = Object.keys(v);
    const out: Record<string, unknown> = { ...(v as Record<string, unknown>) };
    if (keys.length === 0 || rint(8) === 0) { out[["__proto__", "constructor", "type", "vocab", "merges"][rint(5)]!] = hostile(); return out; }
    const k = keys[rint(keys.length)]!;
    out[k] = mutateJson(out[k], depth + 1);
    return out;
  }
  return depth > 0 ? hostile() : v;
}

function mutateTemplate(t: string): string {
  const pieces = ["{%", "%}", "{{", "}}", "{% for x in range(99999) %}", "{% endfor %}", "{% if", "{% endif %}", "(", ")", "|join", "|reverse|list", " + ", " * ", "[", "]", "'", "messages", "loop", "{% set a = a + a %}", "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "namespace(", ".split(' ')"];
  let s = t;
  for (let k = 1 + rint(4); k > 0; k--) {
    const i = rint(s.length + 1);
    s = rint(3) === 0 ? s.slice(0, i) + s.slice(i + 1 + rint(10)) : s.slice(0, i) + pieces[rint(pieces.length)] + s.slice(i);
  }
  return s;
}

/** writes the k-th mutant for `target`; returns how to load it */
function makeMutant(target: Target, k: number): { kind: LoadKind; path: string } {
  const dir = join(work, "m", String(k));
  mkdirSync(dir, { recursive: true });
  if (target === "gguf") {
    const base = readFileSync(rint(3) === 0 ? corpus.bases.vocab : corpus.bases.gguf);
    const path = join(dir, "model.gguf");
    let b: Buffer = base;
    for (let n = 1 + rint(3); n > 0; n--) b = mutateBytes(b, base);
    writeFileSync(path, b);
    return { kind: "model", path };
  }
  if (target === "safetensors") {
    cpSync(corpus.bases.hfFolder, dir, { recursive: true });
    const st = join(dir, "model.safetensors");
    const base = readFileSync(st);
    const headerLen = Number(base.readBigUInt64LE(0));
    if (rint(2) === 0 && headerLen < 1 << 20) { // edit the header as JSON, keep the data
      const header = JSON.parse(base.subarray(8, 8 + headerLen).toString("utf8")) as unknown;
      const h = Buffer.from(JSON.stringify(mutateJson(header)));
      const len = Buffer.alloc(8);
      len.writeBigUInt64LE(BigInt(h.length));
      writeFileSync(st, Buffer.concat([len, h, base.subarray(8 + headerLen)]));
    } else if (rint(4) === 0) {
      const c = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as unknown;
      writeFileSync(join(dir, "config.json"), JSON.stringify(mutateJson(c)));
    } else {
      writeFileSync(st, mutateBytes(base.subarray(0, Math.min(base.length, 8 + headerLen + 4096)), base).length < 8 ? Buffer.alloc(3) : Buffer.concat([mutateBytes(base.subarray(0, 8 + headerLen + 64), base), base.subarray(8 + headerLen + 64)]));
    }
    return { kind: "model", path: dir };
  }
  if (target === "tokenizer") {
    const text = readFileSync(join(corpus.bases.tokenizerFolder, "tokenizer.json"), "utf8");
    cpSync(corpus.bases.tokenizerFolder, dir, { recursive: true });
    const out = rint(3) === 0 ? mutateBytes(Buffer.from(text), Buffer.from(text)).toString("utf8") : JSON.stringify(mutateJson(JSON.parse(text)));
    writeFileSync(join(dir, "tokenizer.json"), out);
    return { kind: "tokenizer", path: dir };
  }
  cpSync(corpus.bases.tokenizerFolder, dir, { recursive: true });
  writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ eos_token: "<|endoftext|>", chat_template: mutateTemplate(templates[rint(templates.length)]!) }));
  return { kind: "chat", path: dir };
}

interface Finding { target: Target; what: string; saved: string }
const findings: Finding[] = [];
const seen = new Set<string>();
function keep(target: Target, what: string, input: string): void {
  const key = `${target}:${what.replace(/\d+/g, "N").slice(0, 120)}`;
  if (seen.has(key)) return; // one saved input per kind of failure
  seen.add(key);
  const saved = join(crashDir, `${target}-${findings.length}`);
  cpSync(input, saved, { recursive: true });
  findings.push({ target, what, saved });
  process.stderr.write(`fuzz: FINDING ${target}: ${what.slice(0, 300)}\n      input: ${saved}\n`);
}

/** loads `list` in one child; returns how many it finished (stops early at a hang or blow-up) */
async function runChild(target: Target, list: { kind: LoadKind; path: string }[]): Promise<number> {
  const listFile = join(work, "list.json");
  writeFileSync(listFile, JSON.stringify(list));
  const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "scripts/hostile-load.ts"), "--batch", listFile], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => { stderr = (stderr + d.toString()).slice(-4000); });
  let current = -1, done = 0, timer: NodeJS.Timeout | undefined, killed = "";
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  for await (const line of createInterface({ input: child.stdout })) {
    let msg: { start?: number; i?: number } & Partial<LoadReport>;
    try { msg = JSON.parse(line); } catch { continue; }
    if (msg.start !== undefined) {
      current = msg.start;
      clearTimeout(timer);
      timer = setTimeout(() => { killed = `hang: still loading after ${HANG_MS / 1000} s`; child.kill("SIGKILL"); }, HANG_MS);
      continue;
    }
    clearTimeout(timer);
    done++;
    const input = list[msg.i!]!.path;
    if (msg.maxRssBytes! >= RSS_LIMIT) { keep(target, `peak RSS ${(msg.maxRssBytes! / 2 ** 20).toFixed(0)} MiB`, input); child.kill("SIGKILL"); break; }
    if (!msg.ok && UNTYPED_ERRORS.has(msg.name!)) keep(target, `${msg.name}: ${msg.message}`, input);
    else if (!msg.ok && untypedMessage(msg.message!)) keep(target, `untyped message: ${msg.message}`, input);
  }
  const code = await exited;
  clearTimeout(timer);
  if (done < list.length && current >= 0) keep(target, killed || `the loading process died (exit ${code}): ${stderr.trim().split("\n").slice(-3).join(" | ")}`, list[current]!.path);
  return Math.max(done, current + 1);
}

const stats: Record<string, number> = {};
const perTarget = (minutes * 60_000) / targets.length;
let k = 0;
for (const target of targets) {
  const until = Date.now() + perTarget;
  stats[target] = 0;
  while (Date.now() < until) {
    const list = Array.from({ length: BATCH }, () => makeMutant(target, k++));
    stats[target] += await runChild(target, list);
    rmSync(join(work, "m"), { recursive: true, force: true });
  }
  process.stderr.write(`fuzz: ${target}: ${stats[target]} inputs in ${(perTarget / 60_000).toFixed(1)} min\n`);
}
rmSync(work, { recursive: true, force: true });
process.stdout.write(JSON.stringify({ minutes, iterations: stats, findings }, null, 2) + "\n");
if (findings.length === 0 && existsSync(crashDir)) rmSync(crashDir, { recursive: true, force: true });
process.exitCode = findings.length > 0 ? 1 : 0;
