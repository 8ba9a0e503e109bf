import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { formatParallelSummary, formatServeReport, formatSummary, runParallelBenchmark, runServeBenchmark, SERVE_METRICS } from "../src/bench/index.js";
import { PARALLEL_METRICS } from "../src/bench/types.js";
import { planMemory } from "../src/engine/index.js";
import { loadModel, loadPlanRequest } from "../src/llm.js";
import { openModel } from "../src/models/index.js";
import { ensureRandomModel, tinyLlama } from "../src/testing/index.js";
import { PROJECT_ROOT, skipWithoutShared } from "./helpers/shared.js";
import { largestGpuBuffer } from "./helpers/webgpu-limit.js";

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

test("tsllm bench plans its run as generate --ctx-size plans the same context (prompt + decode steps + 1): refused where generate is, with the same plan, its proposals in bench's flags", { skip, timeout: 120_000 }, async () => {
  const model = await ensureRandomModel({ ...tinyLlama, seed: 5 }, dir);
  // 64 + 64 + 1 = 129 tokens, 9 blocks of K/V: the plan at one position (what bench planned) holds 1
  const context = 129;
  const need = planMemory(loadPlanRequest(openModel(model), { backend: "reference", threads: 1 }, context)!).totalBytes;
  const cli = (args: string[], free: number) => spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, encoding: "utf8", env: { ...process.env, TSLLM_AVAILABLE_MEMORY: String(free) } });
  const generate = (free: number) => cli(["generate", "--model", model, "--ctx-size", String(context), "--backend", "reference", "--threads", "1", "--prompt", "Once", "--max-tokens", "1", "--no-warmup"], free);
  const benchAt = (free: number) => cli(["bench", "--model", model, "--prompt-tokens", "64", "--gen-tokens", "64", "--repetitions", "1", "--threads", "1", "--backend", "reference", "--json"], free);
  // the judge: generate's own decision on each side of the plan
  const refused = generate(need - 1);
  assert.equal(refused.status, 1, refused.stderr);
  const needs = /needs [^,]+, [^,]+ free/.exec(refused.stderr)?.[0];
  assert.ok(needs, refused.stderr);
  const b = benchAt(need - 1);
  assert.equal(b.status, 1, b.stderr);
  assert.ok(b.stderr.includes(needs), `bench: ${b.stderr}\ngenerate: ${refused.stderr}`);
  // the same proposals in bench's flags: it has no --ctx-size (its context is --prompt-tokens +
  // --gen-tokens + 1) and no --quantize (it measures a file, which tsllm quantize makes)
  const tries = /: try (.*)$/m.exec(refused.stderr)?.[1];
  const quant = /--quantize (\S+) \(([^)]+)\)/.exec(tries ?? "");
  const ctx = /--ctx-size (\d+)$/.exec(tries ?? "");
  assert.ok(quant && ctx, refused.stderr);
  const inBench = tries!.replace(quant[0], `a file quantized to ${quant[1]} by tsllm quantize IN OUT.gguf --type ${quant[1]} (${quant[2]})`).replace(ctx[0], `--prompt-tokens + --gen-tokens at most ${Number(ctx[1]) - 1}`);
  assert.ok(b.stderr.trimEnd().endsWith(`: try ${inBench}`), `bench: ${b.stderr}\ngenerate: ${refused.stderr}`);
  assert.doesNotMatch(b.stderr, /--ctx-size|--quantize/);
  assert.equal(generate(need).status, 0);
  const ran = benchAt(need);
  assert.equal(ran.status, 0, ran.stderr);
  assert.equal(JSON.parse(ran.stdout).contextSize, context);
});

test("npm run bench -- --memory-margin takes a size for --parallel runs' KV pool; without --parallel, or a bad size, one line naming the flag", () => {
  const script = (args: string[]) => spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "scripts/bench.ts"), ...args], { cwd: PROJECT_ROOT, encoding: "utf8" });
  const bad = script(["--parallel", "1", "--memory-margin", "lots"]);
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, /--memory-margin expects a size in bytes \(e\.g\. 268435456, 256MiB, 1G\), got "lots"/);
  const single = script(["--memory-margin", "0"]);
  assert.equal(single.status, 2, single.stderr);
  assert.match(single.stderr, /--memory-margin sizes the KV pool of --parallel runs; a single-stream run's context \(--prompt-tokens \+ --gen-tokens\) is checked against all of the free memory/);
});

test("tsllm bench rejects bad options with a usage error naming the option", () => {
  const r = bench(["--model", "x.gguf", "--gen-tokens=-1"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--gen-tokens must be >= 0/);
  const missing = bench(["--model", join(dir, "absent.gguf"), "--repetitions", "1"]);
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /not found: .*absent\.gguf/);
  const gpu = bench(["--model", "x.gguf", "--vs-llama-cpp", "--llama-cpp-gpu", "metal"]);
  assert.equal(gpu.status, 2);
  assert.match(gpu.stderr, /--llama-cpp-gpu must be vulkan or cuda, got "metal"/);
});

test("tsllm bench --llama-cpp-gpu vulkan runs llama.cpp on a named Vulkan device, or says it found none instead of running on the CPU", { skip }, async () => {
  const model = await ensureRandomModel({ ...tinyLlama, seed: 5 }, dir);
  const r = bench(["--model", model, "--prompt-tokens", "8", "--gen-tokens", "2", "--repetitions", "1", "--threads", "1", "--backend", "reference", "--vs-llama-cpp", "--llama-cpp-gpu", "vulkan", "--json"]);
  if (r.status === 0) {
    // a machine with a Vulkan GPU: the report names it
    const report = JSON.parse(r.stdout);
    assert.match(report.llamaCpp.samples[0].detail, /^node-llama-cpp vulkan \(.+\)/);
    assertEngine(report.llamaCpp, 1, 2, "llama.cpp");
  } else {
    // no GPU (a software Vulkan driver is not listed by llama.cpp): one line saying so, no CPU numbers under the GPU's name
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /llama\.cpp's vulkan build (found no GPU device|could not be loaded)/);
    // --json: the error as JSON on stdout, and no report
    const out = JSON.parse(r.stdout);
    assert.deepEqual(Object.keys(out), ["error"]);
    assert.match(out.error.message, /llama\.cpp's vulkan build (found no GPU device|could not be loaded)/);
  }
});

test("the concurrent-requests bench runs every request to its 64 tokens on both engines at 1 and 2 requests", { skip }, async () => {
  const model = await ensureRandomModel({ ...tinyLlama, seed: 5 }, dir);
  const report = await runParallelBenchmark({ modelPath: model, threads: 1, promptTokens: 32, genTokens: 64, repetitions: 1, concurrency: [1, 2], backend: "reference", vsLlamaCpp: true });
  assert.deepEqual(report.levels.map((l) => l.concurrency), [1, 2]);
  for (const level of report.levels) {
    for (const e of [level.tsllm, level.llamaCpp!]) {
      const what = `${e.engine} at ${level.concurrency}`;
      for (const m of PARALLEL_METRICS) assert.ok(e.medians[m] > 0, `${what}: ${m} is a positive number: ${e.medians[m]}`);
      assert.equal(e.samples.length, 1, `${what}: one sample per repetition`);
      for (const s of e.samples) {
        assert.equal(s.requests.length, level.concurrency, `${what}: one entry per request`);
        for (const r of s.requests) assert.equal(r.tokens.length, 64, `${what}: tokens generated`);
      }
    }
    assert.ok(level.ratio!.aggregateTokensPerSecond > 0, "aggregate ratio");
    assert.ok(level.scaling.tsllm! > 0 && level.scaling.llamaCpp! > 0, "scaling from 1 request");
  }
  assert.deepEqual(report.levels[0]!.scaling, { tsllm: 1, llamaCpp: 1 });
  const lines = formatParallelSummary([{ name: "tiny", type: "F32", report }]).split("\n");
  assert.match(lines[0]!, /^model\s+type\s+requests\s+aggregate tok\/s tsllm/);
  assert.match(lines[2]!, /^tiny\s+F32\s+1\s/);
  assert.match(lines[3]!, /^tiny\s+F32\s+2\s/);
});

test("npm run bench --parallel: the KV pool's warning and the plan's refusal name the benchmark's flags (--parallel N requests, --prompt-tokens + --gen-tokens, --memory-margin), judged by the library's own words at the same memory", { skip, timeout: 180_000 }, async () => {
  const model = await ensureRandomModel({ ...tinyLlama, seed: 5 }, dir);
  // the judge for the per-token bytes: node-llama-cpp's reading of the header (f32 K and V)
  const { readGgufFileInfo } = await import("node-llama-cpp");
  const llama = ((await readGgufFileInfo(model)).metadata as unknown as { llama: { block_count: number; embedding_length: number; attention: { head_count: number; head_count_kv: number } } }).llama;
  const perToken = 2 * llama.block_count * llama.attention.head_count_kv * (llama.embedding_length / llama.attention.head_count) * 4;
  // 64 + 64 tokens and the 32 of slack a request gets: contexts of 160, 4 requests at once
  const context = 64 + 64 + 32;
  const plan = planMemory(loadPlanRequest(openModel(model), { backend: "reference", threads: 1 }, context)!);
  const oneContext = context * perToken;
  const benchAt = async (available: number, memoryMargin: number) => {
    const saved = process.env["TSLLM_AVAILABLE_MEMORY"];
    process.env["TSLLM_AVAILABLE_MEMORY"] = String(available);
    try {
      return await runParallelBenchmark({ modelPath: model, threads: 1, promptTokens: 64, genTokens: 64, repetitions: 1, concurrency: [4], backend: "reference", memoryMargin });
    } finally {
      if (saved === undefined) delete process.env["TSLLM_AVAILABLE_MEMORY"];
      else process.env["TSLLM_AVAILABLE_MEMORY"] = saved;
    }
  };
  const libraryWarnings = async (available: number, memoryMargin: number) => {
    const warnings: string[] = [];
    const m = await loadModel(model, { backend: "reference", threads: 1, contextSize: context, maxSequences: 4, availableMemory: available, memoryMargin, onWarning: (w) => warnings.push(w), warmup: false });
    m.dispose();
    return warnings;
  };
  // free: the plan and 3.5 contexts more; a margin of 2.5 contexts leaves the pool 2 of the 4
  const available = plan.totalBytes + 3.5 * oneContext;
  const margin = 2.5 * oneContext;
  const [lib] = await libraryWarnings(available, margin);
  const proposal = /try kvCacheBytes (\d+) \(--kv-memory; ([^,]+), which fits in the free memory\) or contextSize (\d+) \(--ctx-size\) or maxSequences (\d+) \(--parallel\)$/.exec(lib ?? "");
  assert.ok(proposal && lib!.includes("that maxSequences 4 (--parallel) asks for"), lib);
  const [, , size, ctx, fewer] = proposal;
  const expected = lib!.replace("that maxSequences 4 (--parallel) asks for", "that --parallel 4 asks for")
    .replace(proposal[0], `try a smaller --memory-margin (K/V for all of them, ${size}, fits in the free memory) or --prompt-tokens + --gen-tokens at most ${Number(ctx) - 32} or --parallel ${fewer}`);
  const warned = await benchAt(available, margin);
  assert.deepEqual(warned.levels[0]!.tsllm.samples[0]!.warnings, [expected]);
  // no margin to give up, and free memory for the four: no warning
  const roomy = await benchAt(plan.totalBytes + 3 * oneContext, 0);
  assert.equal(roomy.levels[0]!.tsllm.samples[0]!.warnings, undefined);
  // below the plan: the load's refusal, its context proposal in the benchmark's flags
  await assert.rejects(benchAt(plan.totalBytes - 1, 0), (e: Error) => {
    const ctxProposal = /--prompt-tokens \+ --gen-tokens at most (\d+)/.exec(e.message);
    assert.ok(ctxProposal && Number(ctxProposal[1]) + 32 < context, e.message);
    assert.doesNotMatch(e.message, /--ctx-size|contextSize|maxSequences|--quantize/);
    return true;
  });
});

test("tsllm bench: a single-stream run's load warnings (a context past the trained length) come back in the sample and under its progress line, judged by loadModel's own warnings for the same load", { skip, timeout: 120_000 }, async () => {
  const model = await ensureRandomModel({ ...tinyLlama, seed: 5 }, dir);
  // 256 + 8 tokens and the one of slack: a context of 265, past the 256 the model was trained with
  const args = ["--model", model, "--prompt-tokens", String(tinyLlama.contextLength), "--gen-tokens", "8", "--repetitions", "1", "--threads", "1", "--backend", "reference"];
  const library: string[] = [];
  const m = await loadModel(model, { backend: "reference", threads: 1, contextSize: tinyLlama.contextLength + 9, maxSequences: 1, onWarning: (w) => library.push(w), warmup: false });
  m.dispose();
  assert.ok(library.some((w) => w.includes(`more than the ${tinyLlama.contextLength} tokens the model was trained with`)), library.join("\n"));
  const json = bench([...args, "--json"]);
  assert.equal(json.status, 0, json.stderr);
  assert.deepEqual(JSON.parse(json.stdout).tsllm.samples[0].warnings, library);
  const shown = bench(args);
  assert.equal(shown.status, 0, shown.stderr);
  for (const w of library) assert.ok(shown.stderr.includes(`  warning: ${w}\n`), shown.stderr);
  // --help says where they go: the line's prefix and the samples' key, as the two runs above show them
  const help = bench(["--help"]).stdout;
  const sampleKey = Object.keys(JSON.parse(json.stdout).tsllm.samples[0]).find((k) => k.startsWith("warn"));
  assert.ok(help.replaceAll("\n", " ").includes(`printed under that run's line as "  warning: ...", and kept in --json's samples as "${sampleKey}"`), help);
});

test("tsllm bench passes its run a prompt longer than one command-line argument holds (40000 ids): the child reads the job, here to refuse it by the memory plan", { skip, timeout: 120_000 }, async () => {
  const model = await ensureRandomModel({ ...tinyLlama, seed: 5 }, dir);
  // 1 byte free: the run's own refusal, which only a child that got its job can make (it was spawn E2BIG)
  const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "bench", "--model", model, "--prompt-tokens", "40000", "--gen-tokens", "0", "--repetitions", "1", "--threads", "1", "--backend", "reference"], { cwd: PROJECT_ROOT, encoding: "utf8", env: { ...process.env, TSLLM_AVAILABLE_MEMORY: "1" } });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /tsllm bench worker on .* exited with code 1: .*: needs [\d.]+ [kMG]?B \(weights .* KV [\d.]+ [kMG]?B at 40001 tokens .*\), 1 B free/);
  assert.doesNotMatch(r.stderr, /E2BIG/);
});

test("tsllm bench --backend webgpu: a context whose K/V array passes the adapter's largest binding is refused in the benchmark's flags (its pool's context too), judged by loadModel's own refusal", { skip, timeout: 180_000 }, async (t) => {
  const limit = await largestGpuBuffer();
  if (limit === undefined) return t.skip("no WebGPU adapter (or one without a stated largest buffer)");
  // tinyLlama's K row: 2 KV heads x 64 f32 = 512 bytes a position; one position past the binding
  const model = await ensureRandomModel({ ...tinyLlama, contextLength: 1 << 22 }, dir);
  const context = limit / 512 + 1;
  const env = { ...process.env, TSLLM_AVAILABLE_MEMORY: String(2 ** 40) };
  const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "bench", "--model", model, "--prompt-tokens", String(context - 1), "--gen-tokens", "0", "--repetitions", "1", "--threads", "1", "--backend", "webgpu"], { cwd: PROJECT_ROOT, encoding: "utf8", env });
  assert.equal(r.status, 1, r.stderr);
  // the judge: the library's refusal at the same context and memory, its proposals mapped to bench's flags
  const { loadModel } = await import("../src/llm.js");
  const refusal = await loadModel(model, { backend: "webgpu", contextSize: context, availableMemory: 2 ** 40, warmup: false }).then((m) => { m.dispose(); return ""; }, (e: Error) => e.message);
  const tries = /: try contextSize (\d+) \(--ctx-size\) or a smaller cache type \(cacheTypeK \/ cacheTypeV f16 or q8_0\)$/.exec(refusal);
  assert.ok(tries, refusal);
  // the pool's context too: bench's prompt and generated tokens and the one of slack
  assert.ok(refusal.includes(`positions (contextSize ${context}):`), refusal);
  const inBench = refusal.replace(`positions (contextSize ${context}):`, `positions (--prompt-tokens + --gen-tokens + 1 = ${context} tokens):`)
    .replace(tries[0], `: try --prompt-tokens + --gen-tokens at most ${Number(tries[1]) - 1} or a smaller cache type (--cache-type-k / --cache-type-v f16 or q8_0)`);
  assert.ok(r.stderr.trimEnd().endsWith(inBench), `bench: ${r.stderr}\nlibrary: ${refusal}`);
});

test("npm run bench -- --parallel rejects a list that is not request counts >= 1", () => {
  const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "scripts/bench.ts"), "--parallel", "1,0"], { cwd: PROJECT_ROOT, encoding: "utf8" });
  assert.equal(r.status, 2, r.stderr);
  assert.equal(r.stderr, 'bench: error: --parallel must be >= 1, got 0 (in "1,0")\n');
});

test("npm run bench -- --prompt-tokens and --parallel take tsllm bench's (llama-bench's) ranges: 16-64+16 is four lengths, 1-1000000 too many counts", () => {
  const script = (args: string[]) => spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "scripts/bench.ts"), ...args], { cwd: PROJECT_ROOT, encoding: "utf8" });
  // refused before anything runs, for holding more than one length: the range was read as 16,32,48,64
  const lengths = script(["--prompt-tokens", "16-64+16", "--parallel", "1"]);
  assert.deepEqual({ status: lengths.status, stderr: lengths.stderr }, { status: 2, stderr: "bench: error: --prompt-tokens takes one length with --parallel\n" });
  const counts = script(["--parallel", "1-1000000"]);
  assert.deepEqual({ status: counts.status, stderr: counts.stderr }, { status: 2, stderr: 'bench: error: --parallel "1-1000000" holds more than 1000 values; give fewer\n' });
  const bad = script(["--prompt-tokens", "128,,1536"]);
  assert.deepEqual({ status: bad.status, stderr: bad.stderr }, { status: 2, stderr: 'bench: error: --prompt-tokens expects a number or a list as llama-bench takes it (e.g. 128, 16,32 or 16-128*2), got "128,,1536"\n' });
});

test("the serve load generator streams every request to its 64 tokens from a real tsllm serve at 1 and 2 clients", { skip }, async () => {
  const model = await ensureRandomModel({ ...tinyLlama, seed: 5 }, dir);
  const report = await runServeBenchmark({ modelPath: model, threads: 1, concurrency: [1, 2], promptTokens: 32, maxTokens: 64, requests: (c) => 2 * c });
  assert.equal(report.slotContextSize, 32 + 64 + 32);
  assert.equal(report.llamaServerDetail, undefined);
  assert.deepEqual(report.levels.map((l) => [l.concurrency, l.requests]), [[1, 2], [2, 4]]);
  for (const level of report.levels) {
    const s = level.tsllm;
    const what = `tsllm at ${level.concurrency} clients`;
    assert.equal(s.server, "tsllm");
    assert.match(s.command, new RegExp(`^tsllm serve --threads 1 --parallel ${level.concurrency} --ctx-size 128`));
    assert.equal(level.llamaServer, undefined);
    assert.equal(level.ratio, undefined);
    for (const m of SERVE_METRICS) assert.ok(Number.isFinite(s[m]) && s[m] > 0, `${what}: ${m} is a positive number: ${s[m]}`);
    assert.ok(s.ttftP99Ms >= s.ttftP50Ms && s.tpotP99Ms >= s.tpotP50Ms, `${what}: p99 >= p50`);
    assert.equal(s.requests.length, level.requests, `${what}: one sample per request`);
    for (const r of s.requests) {
      assert.equal(r.completionTokens, 64, `${what}: tokens generated`);
      assert.ok(r.textChunks >= 1 && r.textChunks <= 64, `${what}: text chunks ${r.textChunks}`);
      assert.ok(r.ttftMs > 0 && r.totalMs >= r.ttftMs, `${what}: ttft within the request`);
    }
  }
  const lines = formatServeReport(report).split("\n");
  const header = lines.findIndex((l) => /^clients\s+requests\s+metric\s+tsllm$/.test(l));
  assert.ok(header > 0, `a table header: ${lines.join("\n")}`);
  assert.match(lines[header + 2]!, /^1\s+2\s+throughput \(tok\/s\)\s+\d/);
  assert.match(lines[header + 2 + SERVE_METRICS.length]!, /^2\s+4\s+throughput/);
});

test("npm run bench:serve rejects a --concurrency list that is not client counts >= 1", () => {
  const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "scripts/bench-serve.ts"), "--concurrency", "1,x", "--no-llama-server"], { cwd: PROJECT_ROOT, encoding: "utf8" });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /--concurrency expects client counts >= 1/);
});

test("the serve load generator's repetitions: each run kept, the level's figures their medians", { skip }, async () => {
  const model = await ensureRandomModel({ ...tinyLlama, seed: 5 }, dir);
  const report = await runServeBenchmark({ modelPath: model, threads: 1, concurrency: [1], promptTokens: 8, maxTokens: 8, requests: () => 2, repetitions: 2 });
  const level = report.levels[0]!;
  assert.equal(level.repetitions, 2);
  const runs = level.runs!.tsllm;
  assert.equal(runs.length, 2);
  for (const m of SERVE_METRICS) assert.equal(level.tsllm[m], (runs[0]![m] + runs[1]![m]) / 2, `${m}: the median of two runs`);
  assert.equal(level.tsllm.requests.length, 4, "every run's requests");
  assert.match(formatServeReport(report), /median of 2 runs per server/);
  await assert.rejects(runServeBenchmark({ modelPath: model, threads: 1, concurrency: [1], promptTokens: 8, maxTokens: 8, repetitions: 0 }), /repetitions must be an integer >= 1, got 0/);
});

test("the summary of runs at several prompt lengths has a prompt column and each engine's decode rate relative to the model's shortest prompt", () => {
  const engine = (decode: number) => ({ engine: "tsllm" as const, detail: "", medians: { loadMs: 1, prefillTokensPerSecond: 100, decodeTokensPerSecond: decode, peakRssBytes: 2 ** 20 }, samples: [] });
  const report = (promptTokens: number, ours: number, theirs: number) => ({
    model: "m.gguf", threads: 2, promptTokens, genTokens: 8, repetitions: 1, contextSize: promptTokens + 9,
    tsllm: engine(ours), llamaCpp: { ...engine(theirs), engine: "llama.cpp" as const },
    ratio: { loadMs: 1, prefillTokensPerSecond: 1, decodeTokensPerSecond: ours / theirs, peakRssBytes: 1 },
  });
  const text = formatSummary([
    { name: "smollm-q8_0", type: "Q8_0", report: report(128, 100, 80) },
    { name: "smollm-q8_0", type: "Q8_0", report: report(1536, 60, 72) },
  ]);
  const [header, , first, second] = text.split("\n");
  assert.match(header!, /prompt .* decode at depth tsllm\s+llama\.cpp$/);
  assert.match(first!, /\s128\s.*\s1\.00x\s+1\.00x$/);
  assert.match(second!, /\s1536\s.*\s0\.60x\s+0\.90x$/);
  // one prompt length: no such columns
  assert.doesNotMatch(formatSummary([{ name: "smollm-q8_0", type: "Q8_0", report: report(128, 100, 80) }]), /depth|prompt/);
});
