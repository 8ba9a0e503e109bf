/**
 * `npm run bench`: tsllm vs llama.cpp side by side on random-weight models with the shapes of
 * SmolLM-135M and TinyLlama-1.1B (generated once into the model cache, outside the repo:
 * $TSLLM_CACHE or ~/.cache/tsllm/models), one summary table at the end.
 *
 *   npm run bench -- [--only smollm-q8_0,tinyllama-q4_0] [--all] [--threads 2] [--prompt-tokens 128]
 *                    [--gen-tokens 128] [--repetitions 3] [--backend wasm|reference] [--no-llama-cpp]
 *                    [--timeout S] [--json]
 *
 * A model whose runs fail (or hang past --timeout, default 600 s per run) is reported and
 * skipped; the exit code is then 1.
 *
 * Not a test: run it on a quiet machine; the numbers are only as steady as the machine.
 */
import { basename } from "node:path";
import { formatReport, formatSummary, runBenchmark, type BenchOptions, type BenchReport, type EngineSample } from "../src/bench/index.js";
import { seconds } from "../src/cli/bench.js";
import { flag, optionalNumber, optionalString, parse, UsageError } from "../src/cli/args.js";
import { GGMLType, typeName } from "../src/tensor/dtypes.js";
import { ensureRandomModel, SMOLLM_135M, TINYLLAMA_1_1B, type RandomModelSpec } from "../src/testing/index.js";

interface Entry { name: string; spec: RandomModelSpec; onlyWithAll?: boolean }

const ENTRIES: Entry[] = [
  ...[GGMLType.F32, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_K].map((t) => ({ name: `smollm-${typeName(t).toLowerCase()}`, spec: { ...SMOLLM_135M, weightType: t } })),
  ...[GGMLType.Q8_0, GGMLType.Q4_0].map((t) => ({ name: `tinyllama-${typeName(t).toLowerCase()}`, spec: { ...TINYLLAMA_1_1B, weightType: t } })),
  // the F32 TinyLlama file is 4.4 GB (generated only with --all or --only; the wasm backend loads it across two memories)
  ...[GGMLType.F32, GGMLType.Q4_K].map((t) => ({ name: `tinyllama-${typeName(t).toLowerCase()}`, spec: { ...TINYLLAMA_1_1B, weightType: t }, onlyWithAll: true })),
];

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
    timeout: { type: "string" },
    json: { type: "boolean" },
  });
  if (flag(values, "help")) {
    process.stdout.write(`Usage: npm run bench -- [--only NAME,...] [--all] [--threads N] [--prompt-tokens N] [--gen-tokens N] [--repetitions N] [--backend wasm|reference] [--no-llama-cpp] [--timeout S] [--json]\nModels: ${ENTRIES.map((e) => e.name + (e.onlyWithAll ? " (--all)" : "")).join(", ")}\n`);
    return;
  }
  const only = optionalString(values, "only")?.split(",").map((s) => s.trim().toLowerCase()).filter((s) => s !== "");
  for (const name of only ?? []) {
    if (!ENTRIES.some((e) => e.name === name)) throw new UsageError(`--only: unknown model "${name}" (known: ${ENTRIES.map((e) => e.name).join(", ")})`);
  }
  const selected = ENTRIES.filter((e) => (only ? only.includes(e.name) : !e.onlyWithAll || flag(values, "all")));
  const backend = optionalString(values, "backend");
  if (backend !== undefined && backend !== "wasm" && backend !== "reference") throw new UsageError(`--backend must be wasm or reference, got "${backend}"`);
  const json = flag(values, "json");
  const log = (s: string) => { if (!json) process.stderr.write(s); };

  const settings: Omit<BenchOptions, "modelPath"> = {
    backend,
    threads: optionalNumber(values, "threads", { integer: true, min: 1 }) ?? 2,
    promptTokens: optionalNumber(values, "prompt-tokens", { integer: true, min: 1 }) ?? 128,
    genTokens: optionalNumber(values, "gen-tokens", { integer: true, min: 0 }) ?? 128,
    repetitions: optionalNumber(values, "repetitions", { integer: true, min: 1 }) ?? 3,
    vsLlamaCpp: !flag(values, "no-llama-cpp"),
    timeoutMs: seconds(optionalNumber(values, "timeout", { min: 1 })),
    onSample: (engine: string, r: number, s: EngineSample) =>
      log(`  run ${r + 1} ${engine}: load ${s.loadMs.toFixed(0)} ms, prefill ${s.prefillTokensPerSecond.toFixed(1)} tok/s, decode ${s.decodeTokensPerSecond.toFixed(1)} tok/s, RSS ${(s.peakRssBytes / 2 ** 20).toFixed(0)} MiB\n`),
  };
  const benchOne = async (e: Entry): Promise<BenchReport> => {
    log(`${e.name}: preparing the model (generated once, then cached)...\n`);
    const modelPath = await ensureRandomModel(e.spec);
    log(`${e.name}: ${basename(modelPath)}\n`);
    return runBenchmark({ ...settings, modelPath });
  };

  const results: { name: string; type: string; report: BenchReport }[] = [];
  const failures: { name: string; error: string }[] = [];
  for (const e of selected) {
    // one model failing (a generator limit, a crashed or hung engine) does not stop the others
    const report = await benchOne(e).catch((err: unknown) => {
      const error = err instanceof Error ? err.message : String(err);
      failures.push({ name: e.name, error });
      log(`${e.name}: FAILED: ${error}\n\n`);
      return undefined;
    });
    if (!report) continue;
    log(formatReport(report) + "\n");
    results.push({ name: e.name, type: typeName(e.spec.weightType), report });
  }
  if (json) process.stdout.write(JSON.stringify({ results, failures }) + "\n");
  else process.stdout.write(formatSummary(results) + failures.map((f) => `${f.name}: FAILED: ${f.error}\n`).join(""));
  if (failures.length > 0) process.exitCode = 1;
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`bench: error: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = err instanceof UsageError ? 2 : 1;
});
