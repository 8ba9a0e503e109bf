import { statSync } from "node:fs";
import { availableParallelism } from "node:os";
import { formatReport, formatSampleWarnings, LLAMA_CPP_GPUS, runBenchmark, type BenchOptions, type BenchReport, type LlamaCppGpu } from "../bench/index.js";
import { MODEL_MEANING, backendOption, flag, optionalCountList, optionalNumber, optionalString, parse, requireString, threadsOption, UsageError, type OptionSpec, type ParsedValues } from "./args.js";
import { cacheTypesFrom } from "./generate.js";
import { resolveInterruptibly } from "./interrupt.js";
import type { KVCacheTypes } from "../kernels/index.js";

export const benchHelp = `Usage: tsllm bench --model FILE.gguf [options]

Measures load time, prefill tokens/s (the prompt in one batched forward), decode tokens/s
(greedy single-token steps through the KV cache) and peak RSS. Every run is a fresh child
process, so the RSS is that engine's own; the table shows medians. A tsllm run's load warnings
(a context past the trained length) are printed under that run's line as "  warning: ...", and
kept in --json's samples as "warnings".

Options:
  --model FILE          GGUF model file, or a Hugging Face model folder or Hub reference org/name[:QUANT]
                        for tsllm alone (required; --vs-llama-cpp needs a GGUF file)
  --threads N           compute threads (default -1; 0 or less: all cores)
  --prompt-tokens N     prompt length in tokens, BOS included; random ids, the same for both engines (default 128)
  --gen-tokens N        decode steps (default 128; 0: prefill only, decode shown as -, null in --json,
                        as llama-bench -n 0 skips its tg test)
                        Both take llama-bench's lists: 16,32, 16-64 (each), 16-64+16, 16-128*2. Each
                        pair of a prompt length and a decode count is one benchmark (a prefill, then
                        that many decode steps after it; llama-bench runs each -p and each -n as a
                        test of its own), one table each, and --json prints an array of the objects
  --repetitions N       runs per engine (default 3)
  --backend NAME        tsllm backend: wasm (default), reference or webgpu
  --cache-type-k T      KV cache type of keys for both engines: f32, f16, q8_0, q4_0 (default: each
                        engine's own, tsllm f32 and llama.cpp F16; llama.cpp gets flash attention
                        when one is q8_0 or q4_0, as it needs)
  --cache-type-v T      KV cache type of values for both engines (as --cache-type-k)
  --vs-llama-cpp        also run llama.cpp (node-llama-cpp, CPU) on the same file, alternating with tsllm
  --llama-cpp-gpu B     run that llama.cpp on its vulkan or cuda build, every layer on the GPU (the
                        peer of --backend webgpu; needs @node-llama-cpp/linux-x64-B and a GPU driver)
  --timeout S           kill a run that takes longer than S seconds (default 600; at most 2147483, a
                        timer's longest delay)
  --json                print one JSON object (medians, ratios and every sample) and nothing else
  -h, --help            show this help
`;

export const BENCH_ARGS: OptionSpec = {
  model: { type: "string" },
  threads: { type: "string" },
  "prompt-tokens": { type: "string" },
  "gen-tokens": { type: "string" },
  repetitions: { type: "string" },
  backend: { type: "string" },
  "cache-type-k": { type: "string" },
  "cache-type-v": { type: "string" },
  "vs-llama-cpp": { type: "boolean" },
  "llama-cpp-gpu": { type: "string" },
  timeout: { type: "string" },
  json: { type: "boolean" },
};

/**
 * The longest --timeout: a timer's delay is a 32-bit count of milliseconds (2^31 - 1, about 24.8
 * days); past it Node fires at once, and --timeout 3000000 killed every run as it started
 */
const MAX_TIMEOUT_S = Math.floor((2 ** 31 - 1) / 1000);

export async function runBench(argv: string[]): Promise<void> {
  const values = parse(argv, BENCH_ARGS);
  if (flag(values, "help")) { process.stdout.write(benchHelp); return; }
  const modelPath = requireString(values, "model", MODEL_MEANING);
  const backend = backendOption(values);
  const json = flag(values, "json");
  const prompts = optionalCountList(values, "prompt-tokens", { min: 1 }) ?? [128];
  const gens = optionalCountList(values, "gen-tokens", { min: 0 }) ?? [128];
  const options: Omit<BenchOptions, "promptTokens" | "genTokens"> = {
    modelPath,
    backend,
    cacheTypes: benchCacheTypes(values),
    threads: threadsOption(values) ?? availableParallelism(),
    repetitions: optionalNumber(values, "repetitions", { integer: true, min: 1 }) ?? 3,
    vsLlamaCpp: flag(values, "vs-llama-cpp"),
    llamaCppGpu: llamaCppGpuOption(values),
    timeoutMs: seconds(optionalNumber(values, "timeout", { min: 1, max: MAX_TIMEOUT_S })),
    onSample: json ? undefined : (engine, r, s) =>
      process.stderr.write(`  run ${r + 1} ${engine}: load ${s.loadMs.toFixed(0)} ms, prefill ${s.prefillTokensPerSecond.toFixed(1)} tok/s, decode ${Number.isNaN(s.decodeTokensPerSecond) ? "-" : `${s.decodeTokensPerSecond.toFixed(1)} tok/s`}, RSS ${(s.peakRssBytes / 2 ** 20).toFixed(0)} MiB\n${formatSampleWarnings(s)}`),
  };
  // each table as soon as its benchmark ends (a sweep takes long); --json's array at the end
  const reports: BenchReport[] = [];
  // a hub reference is downloaded once, after the flags are checked, where Ctrl-C stops it as it
  // stops tsllm download (each benchmark's workers were given the reference and fetched it themselves)
  const model = await resolveInterruptibly("bench", modelPath);
  // llama.cpp reads GGUF only: a folder failed its worker with EISDIR after every tsllm run had taken its time
  if (options.vsLlamaCpp && statSync(model, { throwIfNoEntry: false })?.isDirectory()) {
    throw new UsageError(`--vs-llama-cpp needs a GGUF file (llama.cpp reads no model folder); --model ${model} is a folder: tsllm convert --model ${model} --out FILE.gguf makes one`);
  }
  for (const promptTokens of prompts) {
    for (const genTokens of gens) {
      const report = await runBenchmark({ ...options, modelPath: model, promptTokens, genTokens });
      if (!json) process.stdout.write((reports.length > 0 ? "\n" : "") + formatReport(report));
      reports.push(report);
    }
  }
  // one benchmark: the one object, as before lists were taken
  if (json) process.stdout.write(JSON.stringify(reports.length === 1 ? reports[0] : reports) + "\n");
}

/** --cache-type-k / -v for a benchmark: either sets both engines' types (the other kind f32), neither leaves each engine's default */
export function benchCacheTypes(values: ParsedValues): KVCacheTypes | undefined {
  const { cacheTypeK, cacheTypeV } = cacheTypesFrom(values);
  return cacheTypeK === undefined && cacheTypeV === undefined ? undefined : { k: cacheTypeK ?? "f32", v: cacheTypeV ?? "f32" };
}

/** --llama-cpp-gpu vulkan|cuda: llama.cpp's GPU build for the comparison; absent: its CPU build */
export function llamaCppGpuOption(values: ParsedValues): LlamaCppGpu | undefined {
  const gpu = optionalString(values, "llama-cpp-gpu");
  if (gpu === undefined) return undefined;
  const known = LLAMA_CPP_GPUS.find((g) => g === gpu);
  if (known === undefined) throw new UsageError(`--llama-cpp-gpu must be ${LLAMA_CPP_GPUS.join(" or ")}, got "${gpu}"`);
  return known;
}

export function seconds(s: number | undefined): number | undefined {
  return s === undefined ? undefined : s * 1000;
}
