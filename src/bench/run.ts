import { runWorker } from "./child.js";
import { randomPromptTokens } from "./prompt.js";
import { medians, ratios } from "./stats.js";
import type { BenchReport, EngineSample, WorkerJob } from "./types.js";

export interface BenchOptions {
  readonly modelPath: string;
  readonly threads: number;
  readonly promptTokens: number;
  readonly genTokens: number;
  readonly repetitions: number;
  readonly backend?: "wasm" | "reference";
  readonly vsLlamaCpp?: boolean;
  /** limit for each child run (default DEFAULT_WORKER_TIMEOUT_MS, 10 minutes) */
  readonly timeoutMs?: number;
  /** called after each child finishes (progress output) */
  readonly onSample?: (engine: string, repetition: number, sample: EngineSample) => void;
}

/**
 * Runs the benchmark: per repetition one fresh tsllm child, then (with vsLlamaCpp) one fresh
 * llama.cpp child, alternating so slow drifts of a shared machine hit both engines alike.
 */
export async function runBenchmark(o: BenchOptions): Promise<BenchReport> {
  for (const [name, v, min] of [["threads", o.threads, 1], ["promptTokens", o.promptTokens, 1], ["genTokens", o.genTokens, 0], ["repetitions", o.repetitions, 1]] as const) {
    if (!Number.isInteger(v) || v < min) throw new RangeError(`bench: ${name} must be an integer >= ${min}, got ${v}`);
  }
  const prompt = await randomPromptTokens(o.modelPath, o.promptTokens);
  // prompt + first token + decode steps, all in the cache
  const contextSize = o.promptTokens + o.genTokens + 1;
  const base = { modelPath: o.modelPath, threads: o.threads, promptTokens: prompt, genTokens: o.genTokens, contextSize };
  const tsJob: WorkerJob = { ...base, engine: "tsllm", backend: o.backend };
  const lcJob: WorkerJob = { ...base, engine: "llama.cpp" };

  const ts: EngineSample[] = [];
  const lc: EngineSample[] = [];
  for (let r = 0; r < o.repetitions; r++) {
    const s = await runWorker(tsJob, o.timeoutMs);
    ts.push(s);
    o.onSample?.("tsllm", r, s);
    if (o.vsLlamaCpp) {
      const l = await runWorker(lcJob, o.timeoutMs);
      lc.push(l);
      o.onSample?.("llama.cpp", r, l);
    }
  }
  const tsllm = { engine: "tsllm" as const, detail: ts[0]!.detail, medians: medians(ts), samples: ts };
  const report: BenchReport = {
    model: o.modelPath,
    threads: o.threads,
    promptTokens: o.promptTokens,
    genTokens: o.genTokens,
    repetitions: o.repetitions,
    contextSize,
    tsllm,
  };
  if (!o.vsLlamaCpp) return report;
  const llamaCpp = { engine: "llama.cpp" as const, detail: lc[0]!.detail, medians: medians(lc), samples: lc };
  return { ...report, llamaCpp, ratio: ratios(tsllm.medians, llamaCpp.medians) };
}
