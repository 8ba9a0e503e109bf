/**
 * `npm run bench`: tsllm vs llama.cpp side by side on random-weight models with the shapes of
 * SmolLM-135M and TinyLlama-1.1B (generated once into the model cache, outside the repo:
 * $TSLLM_CACHE or ~/.cache/tsllm/models), one summary table at the end.
 *
 *   npm run bench -- [--only smollm-q8_0,tinyllama-q4_0] [--all] [--threads 2] [--prompt-tokens 128[,1536,...]]
 *                    [--gen-tokens 128] [--repetitions 3] [--backend wasm|reference|webgpu] [--no-llama-cpp]
 *                    [--llama-cpp-gpu vulkan|cuda] [--timeout S] [--json] [--runtime node|chromium] [--chromium PATH] [--memory-margin SIZE]
 *
 * With --parallel 1,4,8,16 it measures concurrent requests instead: for each number N, N
 * different prompts (default 32 tokens, 64 generated) started at once on each engine; the
 * table gives aggregate decode tok/s, TTFT, TPOT and each engine's scaling from 1 request.
 * Its default models are smollm-q8_0 and tinyllama-q8_0.
 *
 * llama.cpp runs on its CPU build unless --llama-cpp-gpu names node-llama-cpp's vulkan or cuda
 * build, which then holds every layer on the GPU: the peer of --backend webgpu.
 *
 * --runtime chromium runs tsllm's side in headless Chromium (the browser build, the wasm backend
 * in the engine worker, the model over HTTP from the browser example's server) instead of Node;
 * llama.cpp stays native. Chromium's V8 may lower the relaxed SIMD dot products differently
 * (to AVX-VNNI), which is what this measures.
 *
 * A model whose runs fail (or hang past --timeout, default 600 s per run) is reported and
 * skipped; the exit code is then 1.
 *
 * Not a test: run it on a quiet machine; the numbers are only as steady as the machine.
 */
import { basename } from "node:path";
import { BENCH_MODELS, formatParallelSummary, formatReport, formatSampleWarnings, formatSummary, runBenchmark, runParallelBenchmark, type BenchModel, type BenchOptions, type BenchReport, type EngineSample, type ParallelSample } from "../src/bench/index.js";
import { benchCacheTypes, llamaCppGpuOption, seconds } from "../src/cli/bench.js";
import { flag, memoryMarginOption, optionalCountList, optionalNumber, optionalString, parse, UsageError } from "../src/cli/args.js";
import { typeName } from "../src/tensor/dtypes.js";
import { ensureRandomModel } from "../src/testing/index.js";

type Entry = BenchModel;
type Result<R> = { name: string; type: string; report: R };

const ENTRIES = BENCH_MODELS;
/** the concurrent-requests benchmark's models unless --only or --all says otherwise */
const PARALLEL_DEFAULT_MODELS = ["smollm-q8_0", "tinyllama-q8_0"];

async function main(argv: string[]): Promise<void> {
  const values = parse(argv, {
    only: { type: "string" },
    all: { type: "boolean" },
    threads: { type: "string" },
    "prompt-tokens": { type: "string" },
    "gen-tokens": { type: "string" },
    repetitions: { type: "string" },
    backend: { type: "string" },
    "no-llama-cpp": { type: "boolean" },
    "llama-cpp-gpu": { type: "string" },
    timeout: { type: "string" },
    json: { type: "boolean" },
    parallel: { type: "string" },
    "cache-type-k": { type: "string" },
    "cache-type-v": { type: "string" },
    runtime: { type: "string" },
    chromium: { type: "string" },
    "memory-margin": { type: "string" },
  });
  if (flag(values, "help")) {
    process.stdout.write(`Usage: npm run bench -- [--only NAME,...] [--all] [--threads N] [--prompt-tokens N[,N...]] [--gen-tokens N] [--repetitions N] [--backend wasm|reference|webgpu] [--no-llama-cpp] [--llama-cpp-gpu vulkan|cuda] [--timeout S] [--json] [--parallel N,...] [--cache-type-k T] [--cache-type-v T] [--runtime node|chromium] [--chromium PATH] [--memory-margin SIZE]\nModels: ${ENTRIES.map((e) => e.name + (e.onlyWithAll ? " (--all)" : "")).join(", ")}\n--prompt-tokens N,N,...: each model after each prompt length (the summary's "decode at depth": decode rate relative to the shortest)\n--prompt-tokens and --parallel take lists as llama-bench's -p does: 128,1536, 128-1024*2 (128,256,512,1024), 1-16+5 (1,6,11,16)\n--parallel N,...: concurrent requests (default models ${PARALLEL_DEFAULT_MODELS.join(", ")}; --prompt-tokens 32, --gen-tokens 64)\n--runtime chromium: tsllm in headless Chromium (the browser build, wasm backend; --chromium PATH, default /usr/bin/chromium)\n--memory-margin SIZE: with --parallel, the free memory tsllm's KV pool leaves unused, as generate's (default TSLLM_MEMORY_MARGIN, else 1G)\n`);
    return;
  }
  // llama-bench's lists, as tsllm bench -p takes them: 1,4,8, 128-1536*2, 16-64+16
  const concurrency = optionalCountList(values, "parallel", { min: 1 });
  const promptLengths = optionalCountList(values, "prompt-tokens", { min: 1 }) ?? [];
  if (concurrency && promptLengths.length > 1) throw new UsageError("--prompt-tokens takes one length with --parallel");
  const only = optionalString(values, "only")?.split(",").map((s) => s.trim().toLowerCase()).filter((s) => s !== "");
  for (const name of only ?? []) {
    if (!ENTRIES.some((e) => e.name === name)) throw new UsageError(`--only: unknown model "${name}" (known: ${ENTRIES.map((e) => e.name).join(", ")})`);
  }
  const byDefault = (e: Entry) => (concurrency ? PARALLEL_DEFAULT_MODELS.includes(e.name) : !e.onlyWithAll);
  const selected = ENTRIES.filter((e) => (only ? only.includes(e.name) : byDefault(e) || flag(values, "all")));
  const backend = optionalString(values, "backend");
  if (backend !== undefined && backend !== "wasm" && backend !== "reference" && backend !== "webgpu") throw new UsageError(`--backend must be wasm, reference or webgpu, got "${backend}"`);
  if (backend === "webgpu" && concurrency) throw new UsageError("--parallel measures the server on the wasm or reference backend: drop --backend webgpu (or run tsllm bench --backend webgpu per model)");
  const runtime = optionalString(values, "runtime") ?? "node";
  if (runtime !== "node" && runtime !== "chromium") throw new UsageError(`--runtime must be node or chromium, got "${runtime}"`);
  if (runtime === "chromium" && (concurrency || backend !== undefined || optionalString(values, "cache-type-k") !== undefined || optionalString(values, "cache-type-v") !== undefined)) {
    throw new UsageError("--runtime chromium measures the single-stream run on the wasm backend with an f32 KV cache: drop --parallel, --backend and --cache-type-k/-v");
  }
  const memoryMargin = memoryMarginOption(values);
  // a single-stream run's context is explicit (prompt + decode steps), checked against all of the free memory as generate --ctx-size N is: no margin to size
  if (memoryMargin !== undefined && !concurrency) throw new UsageError("--memory-margin sizes the KV pool of --parallel runs; a single-stream run's context (--prompt-tokens + --gen-tokens) is checked against all of the free memory");
  const json = flag(values, "json");
  const log = (s: string) => { if (!json) process.stderr.write(s); };

  const settings: Omit<BenchOptions, "modelPath" | "onSample"> = {
    backend,
    cacheTypes: benchCacheTypes(values),
    threads: optionalNumber(values, "threads", { integer: true, min: 1 }) ?? 2,
    // a concurrent run's requests are short, like a server's; the time per output token needs two tokens
    promptTokens: promptLengths[0] ?? (concurrency ? 32 : 128),
    genTokens: optionalNumber(values, "gen-tokens", { integer: true, min: concurrency ? 2 : 0 }) ?? (concurrency ? 64 : 128),
    repetitions: optionalNumber(values, "repetitions", { integer: true, min: 1 }) ?? 3,
    vsLlamaCpp: !flag(values, "no-llama-cpp"),
    llamaCppGpu: llamaCppGpuOption(values),
    runtime,
    chromiumPath: optionalString(values, "chromium"),
    timeoutMs: seconds(optionalNumber(values, "timeout", { min: 1 })),
    memoryMargin,
  };

  /** each selected model's report; one model failing (a generator limit, a crashed or hung engine) does not stop the others */
  async function benchEach<R>(bench: (modelPath: string) => Promise<R>, report?: (r: R) => string): Promise<{ results: Result<R>[]; failures: { name: string; error: string }[] }> {
    const results: Result<R>[] = [];
    const failures: { name: string; error: string }[] = [];
    for (const e of selected) {
      try {
        log(`${e.name}: preparing the model (generated once, then cached)...\n`);
        const modelPath = await ensureRandomModel(e.spec);
        log(`${e.name}: ${basename(modelPath)}\n`);
        const r = await bench(modelPath);
        if (report) log(report(r));
        results.push({ name: e.name, type: typeName(e.spec.weightType), report: r });
      } catch (err) {
        const error = err instanceof Error ? err.message : String(err);
        failures.push({ name: e.name, error });
        log(`${e.name}: FAILED: ${error}\n\n`);
      }
    }
    return { results, failures };
  }
  const finish = <R>(out: { results: Result<R>[]; failures: { name: string; error: string }[] }, summary: (results: Result<R>[]) => string) => {
    if (json) process.stdout.write(JSON.stringify(out) + "\n");
    else process.stdout.write(summary(out.results) + out.failures.map((f) => `${f.name}: FAILED: ${f.error}\n`).join(""));
    if (out.failures.length > 0) process.exitCode = 1;
  };

  if (concurrency) {
    const onSample = (engine: string, n: number, r: number, s: ParallelSample) =>
      log(`  ${n} request${n === 1 ? "" : "s"}, run ${r + 1} ${engine}: ${s.aggregateTokensPerSecond.toFixed(1)} tok/s aggregate, TTFT ${s.ttftMs.toFixed(0)} ms, TPOT ${s.tpotMs.toFixed(1)} ms, RSS ${(s.peakRssBytes / 2 ** 20).toFixed(0)} MiB\n${formatSampleWarnings(s)}`);
    // the summary table at the end is the report; per model only the progress lines
    finish(await benchEach((modelPath) => runParallelBenchmark({ ...settings, modelPath, concurrency, onSample })), formatParallelSummary);
    return;
  }
  const onSample = (engine: string, r: number, s: EngineSample) =>
    log(`  run ${r + 1} ${engine}: load ${s.loadMs.toFixed(0)} ms, prefill ${s.prefillTokensPerSecond.toFixed(1)} tok/s, decode ${s.decodeTokensPerSecond.toFixed(1)} tok/s${Number.isFinite(s.peakRssBytes) ? `, RSS ${(s.peakRssBytes / 2 ** 20).toFixed(0)} MiB` : ""}\n${formatSampleWarnings(s)}`);
  // each model at each prompt length (decode after a long prompt: "decode at depth" in the summary)
  const lengths = promptLengths.length > 0 ? promptLengths : [settings.promptTokens];
  const runs: { results: Result<BenchReport>[]; failures: { name: string; error: string }[] } = { results: [], failures: [] };
  for (const promptTokens of lengths) {
    const r = await benchEach((modelPath) => runBenchmark({ ...settings, promptTokens, modelPath, onSample }), (rep) => formatReport(rep) + "\n");
    runs.results.push(...r.results);
    runs.failures.push(...r.failures);
  }
  // rows grouped by model, shortest prompt first
  runs.results.sort((a, b) => selected.findIndex((e) => e.name === a.name) - selected.findIndex((e) => e.name === b.name) || a.report.promptTokens - b.report.promptTokens);
  finish(runs, formatSummary);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`bench: error: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = err instanceof UsageError ? 2 : 1;
});
