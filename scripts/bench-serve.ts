/**
 * `npm run bench:serve`: a load generator against two OpenAI-compatible servers on the same
 * GGUF — `tsllm serve` and llama.cpp's own `llama-server` — with the same load, one run.
 *
 *   npm run bench:serve -- [--only smollm-q8_0 | --model FILE.gguf] [--concurrency 1,8,32]
 *                          [--requests N] [--repetitions 1] [--threads 2] [--prompt-tokens 32] [--max-tokens 64]
 *                          [--llama-server PATH | --no-llama-server] [--backend wasm|reference]
 *                          [--timeout S] [--json] [--json-out FILE]
 *
 * For each concurrency level C: a fresh server with C parallel slots, one warm-up request,
 * then C clients sending streaming POST /v1/completions back to back (--requests in all,
 * default 4 per client and at least 16; every one a different prompt of --prompt-tokens token
 * ids, max_tokens --max-tokens with ignore_eos, temperature 0); then the same on llama-server.
 * Per request the client notes TTFT (first chunk with text) and TPOT; per level the
 * throughput (generated tokens / wall time). The table gives p50 / p99 and the ratios
 * tsllm / llama-server (--json prints the report as JSON instead; --json-out FILE writes it too).
 *
 * The default model is the SmolLM-135M shape with random Q8_0 weights (generated once into
 * $TSLLM_CACHE or ~/.cache/tsllm/models). llama-server is built on first use from the
 * llama.cpp source node-llama-cpp ships, into ~/.cache/tsllm/llama-server-build (or
 * $TSLLM_LLAMA_SERVER_BUILD); when that fails the tsllm side still runs.
 *
 * Not a test: run it on a quiet machine; the numbers are only as steady as the machine.
 */
import { existsSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import {
  BENCH_MODELS,
  defaultRequests,
  ensureLlamaServer,
  formatServeReport,
  runServeBenchmark,
  shippedLlamaCpp,
  type ServeLevelSample,
} from "../src/bench/index.js";
import { flag, optionalNumber, optionalString, parse, UsageError } from "../src/cli/args.js";
import { seconds } from "../src/cli/bench.js";
import { ensureRandomModel } from "../src/testing/index.js";

const DEFAULT_MODEL = "smollm-q8_0";

async function main(argv: string[]): Promise<void> {
  const values = parse(argv, {
    only: { type: "string" },
    model: { type: "string" },
    concurrency: { type: "string" },
    requests: { type: "string" },
    repetitions: { type: "string" },
    threads: { type: "string" },
    "prompt-tokens": { type: "string" },
    "max-tokens": { type: "string" },
    "llama-server": { type: "string" },
    "no-llama-server": { type: "boolean" },
    backend: { type: "string" },
    timeout: { type: "string" },
    json: { type: "boolean" },
    "json-out": { type: "string" },
  });
  if (flag(values, "help")) {
    process.stdout.write(
      "Usage: npm run bench:serve -- [--only NAME | --model FILE.gguf] [--concurrency 1,8,32] [--requests N] [--repetitions N] [--threads N] [--prompt-tokens N] [--max-tokens N]\n" +
      "                              [--llama-server PATH | --no-llama-server] [--backend wasm|reference] [--timeout S] [--json] [--json-out FILE]\n" +
      `Models: ${BENCH_MODELS.map((e) => e.name).join(", ")} (default ${DEFAULT_MODEL})\n`,
    );
    return;
  }
  const only = optionalString(values, "only");
  const modelFile = optionalString(values, "model");
  if (only !== undefined && modelFile !== undefined) throw new UsageError("give --only or --model, not both");
  const entry = BENCH_MODELS.find((e) => e.name === (only ?? DEFAULT_MODEL).toLowerCase());
  if (!entry) throw new UsageError(`--only: unknown model "${only}" (known: ${BENCH_MODELS.map((e) => e.name).join(", ")})`);
  const concurrency = concurrencyList(optionalString(values, "concurrency") ?? "1,8,32");
  const requests = optionalNumber(values, "requests", { integer: true, min: 1 });
  const backend = optionalString(values, "backend");
  if (backend !== undefined && backend !== "wasm" && backend !== "reference") throw new UsageError(`--backend must be wasm or reference, got "${backend}"`);
  if (flag(values, "no-llama-server") && values["llama-server"] !== undefined) throw new UsageError("give --llama-server PATH or --no-llama-server, not both");
  const json = flag(values, "json");
  const log = (s: string) => { if (!json) process.stderr.write(`${s}\n`); };

  let modelPath: string;
  if (modelFile !== undefined) modelPath = resolve(modelFile);
  else {
    log(`${entry.name}: preparing the model (generated once, then cached)...`);
    modelPath = await ensureRandomModel(entry.spec);
  }

  // the peer: given, or built once from node-llama-cpp's llama.cpp; a failed build leaves the tsllm side running
  let llamaServer = optionalString(values, "llama-server");
  if (llamaServer !== undefined && !existsSync(llamaServer)) throw new UsageError(`--llama-server: ${llamaServer} not found`);
  let llamaServerSkipped: string | undefined;
  const { tag, nodeLlamaCpp } = shippedLlamaCpp();
  let llamaServerDetail = llamaServer === undefined ? `llama-server from llama.cpp ${tag} (node-llama-cpp ${nodeLlamaCpp}), built -DGGML_NATIVE=ON Release` : `llama-server ${llamaServer}`;
  if (flag(values, "no-llama-server")) llamaServerSkipped = "--no-llama-server";
  else if (llamaServer === undefined) {
    try {
      llamaServer = await ensureLlamaServer({ log });
      llamaServerDetail += ` (${llamaServer})`;
    } catch (e) {
      llamaServerSkipped = `the llama-server build failed: ${e instanceof Error ? e.message : String(e)}`;
      process.stderr.write(`bench:serve: ${llamaServerSkipped}; running the tsllm side only\n`);
    }
  }

  const onLevel = (s: ServeLevelSample, c: number) =>
    log(`  ${c} client${c === 1 ? "" : "s"}, ${s.server}: ${s.requests.length} requests, ${s.tokensPerSecond.toFixed(1)} tok/s, TTFT p50 ${s.ttftP50Ms.toFixed(0)} / p99 ${s.ttftP99Ms.toFixed(0)} ms, ` +
      `TPOT p50 ${s.tpotP50Ms.toFixed(1)} / p99 ${s.tpotP99Ms.toFixed(1)} ms`);
  log(`${modelPath}: concurrency ${concurrency.join(", ")}`);
  const report = await runServeBenchmark({
    modelPath,
    threads: optionalNumber(values, "threads", { integer: true, min: 1 }) ?? 2,
    concurrency,
    promptTokens: optionalNumber(values, "prompt-tokens", { integer: true, min: 1 }) ?? 32,
    maxTokens: optionalNumber(values, "max-tokens", { integer: true, min: 2 }) ?? 64,
    requests: requests === undefined ? defaultRequests : () => requests,
    repetitions: optionalNumber(values, "repetitions", { integer: true, min: 1 }) ?? 1,
    llamaServer: llamaServerSkipped === undefined ? llamaServer : undefined,
    llamaServerDetail,
    llamaServerSkipped,
    backend,
    requestTimeoutMs: seconds(optionalNumber(values, "timeout", { min: 1 })),
    onLevel,
  });
  process.stdout.write(json ? `${JSON.stringify(report)}\n` : `\n${formatServeReport(report)}`);
  const jsonOut = optionalString(values, "json-out");
  if (jsonOut !== undefined) writeFileSync(jsonOut, `${JSON.stringify(report)}\n`);
}

/** "1,8,32" as distinct client counts in the order given */
function concurrencyList(list: string): number[] {
  const counts = list.split(",").map((s) => s.trim());
  for (const c of counts) {
    if (!/^[1-9][0-9]*$/.test(c)) throw new UsageError(`--concurrency expects client counts >= 1 separated by commas, e.g. 1,8,32; got "${list}"`);
  }
  return [...new Set(counts.map(Number))];
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`bench:serve: error: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = err instanceof UsageError ? 2 : 1;
});
