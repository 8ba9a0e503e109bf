import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ensureRandomModel, tinyLlama } from "../src/testing/index.js";
import { PROJECT_ROOT, skipWithoutShared } from "./helpers/shared.js";

// the tiny model borrows stories260K's vocabulary
const skip = skipWithoutShared("models/stories260K.gguf");
const dir = mkdtempSync(join(tmpdir(), "tsllm-bench-"));
test.after(() => rmSync(dir, { recursive: true, force: true }));

function bench(args: string[]) {
  return spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "bench", ...args], { cwd: PROJECT_ROOT, encoding: "utf8" });
}

const METRICS = ["loadMs", "prefillTokensPerSecond", "decodeTokensPerSecond", "peakRssBytes"];

function assertEngine(e: { medians: Record<string, number>; samples: { tokens: number[] }[] }, runs: number, genTokens: number, what: string): void {
  for (const m of METRICS) assert.ok(typeof e.medians[m] === "number" && e.medians[m]! > 0, `${what} ${m} is a positive number: ${e.medians[m]}`);
  assert.equal(e.samples.length, runs, `${what}: one sample per repetition`);
  // the first token comes from the prefill, then one per decode step
  for (const s of e.samples) assert.equal(s.tokens.length, genTokens + 1, `${what}: tokens produced`);
}

test("tsllm bench --json (reference backend) prints positive medians for every metric", { skip }, async () => {
  const model = await ensureRandomModel({ ...tinyLlama, seed: 5 }, dir);
  const r = bench(["--model", model, "--prompt-tokens", "8", "--gen-tokens", "4", "--repetitions", "1", "--threads", "1", "--backend", "reference", "--json"]);
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trim().split("\n");
  assert.equal(lines.length, 1, "--json prints one line");
  const report = JSON.parse(lines[0]!);
  assert.equal(report.promptTokens, 8);
  assert.equal(report.genTokens, 4);
  assert.equal(report.llamaCpp, undefined);
  assertEngine(report.tsllm, 1, 4, "tsllm");
});

test("tsllm bench --vs-llama-cpp runs both engines on the same file and reports ratios", { skip }, async () => {
  const model = await ensureRandomModel({ ...tinyLlama, seed: 5 }, dir);
  const r = bench(["--model", model, "--prompt-tokens", "8", "--gen-tokens", "4", "--repetitions", "2", "--threads", "1", "--backend", "reference", "--vs-llama-cpp", "--json"]);
  assert.equal(r.status, 0, r.stderr);
  const report = JSON.parse(r.stdout);
  assertEngine(report.tsllm, 2, 4, "tsllm");
  assertEngine(report.llamaCpp, 2, 4, "llama.cpp");
  for (const m of METRICS) assert.ok(report.ratio[m] > 0, `ratio ${m}`);
});

test("tsllm bench rejects bad options with a usage error naming the option", () => {
  const r = bench(["--model", "x.gguf", "--gen-tokens=-1"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--gen-tokens must be >= 0/);
  const missing = bench(["--model", join(dir, "absent.gguf"), "--repetitions", "1"]);
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /not found: .*absent\.gguf/);
});
