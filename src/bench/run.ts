import type { KVCacheTypes } from "../kernels/index.js";
import { dirname } from "node:path";
import { startChromiumRunner } from "./chromium-engine.js";
import { runWorker } from "./child.js";
import { randomPrompts, randomPromptTokens } from "./prompt.js";
import { medians, ratios } from "./stats.js";
import {
  METRICS,
  PARALLEL_METRICS,
  type BenchReport,
  type EngineName,
  type EngineSample,
  type LlamaCppGpu,
  type ParallelBenchReport,
  type ParallelEngineReport,
  type ParallelLevelReport,
  type ParallelSample,
  type ParallelWorkerJob,
  type WorkerJob,
} from "./types.js";

export interface BenchOptions {
  readonly modelPath: string;
  readonly threads: number;
  readonly promptTokens: number;
  readonly genTokens: number;
  readonly repetitions: number;
  readonly backend?: "wasm" | "reference" | "webgpu";
  /** KV cache types for both engines (EngineJob.cacheTypes) */
  readonly cacheTypes?: KVCacheTypes;
  readonly vsLlamaCpp?: boolean;
  /** llama.cpp on this GPU build, every layer offloaded (EngineJob.llamaCppGpu; absent: CPU) */
  readonly llamaCppGpu?: LlamaCppGpu;
  /**
   * where tsllm runs: "node" (default; a child process per run) or "chromium" (the browser build in
   * headless Chromium, a fresh context per run; wasm backend, f32 KV cache; see chromium-engine.ts)
   */
  readonly runtime?: "node" | "chromium";
  /** the Chromium executable for runtime "chromium" (default /usr/bin/chromium) */
  readonly chromiumPath?: string;
  /** limit for each child run (default DEFAULT_WORKER_TIMEOUT_MS, 10 minutes) */
  readonly timeoutMs?: number;
  /** tsllm's memory margin (EngineJob.memoryMargin) */
  readonly memoryMargin?: number;
  /** called after each child finishes (progress output) */
  readonly onSample?: (engine: string, repetition: number, sample: EngineSample) => void;
}

/** The single-stream benchmark: one prompt prefilled, then greedy decode steps, on each engine in turn. */
export async function runBenchmark(o: BenchOptions): Promise<BenchReport> {
  assertCounts({ threads: [o.threads, 1], promptTokens: [o.promptTokens, 1], genTokens: [o.genTokens, 0], repetitions: [o.repetitions, 1] });
  const prompt = await randomPromptTokens(o.modelPath, o.promptTokens);
  // prompt + first token + decode steps, all in the cache
  const contextSize = o.promptTokens + o.genTokens + 1;
  const base = { modelPath: o.modelPath, threads: o.threads, promptTokens: prompt, genTokens: o.genTokens, contextSize, cacheTypes: o.cacheTypes };
  const tsJob: WorkerJob = { ...base, engine: "tsllm", backend: o.backend, memoryMargin: o.memoryMargin };
  const lcJob: WorkerJob = { ...base, engine: "llama.cpp", llamaCppGpu: o.llamaCppGpu };

  const browser = o.runtime === "chromium" ? await startChromiumRunner(dirname(o.modelPath), o.chromiumPath, o.timeoutMs) : undefined;
  const run = (job: WorkerJob) => (browser && job.engine === "tsllm" ? browser.run(job) : runWorker(job, o.timeoutMs));
  let runs: { tsllm: EngineSample[]; llamaCpp: EngineSample[] };
  try {
    runs = await alternate(o.repetitions, tsJob, o.vsLlamaCpp ? lcJob : undefined, run, o.onSample);
  } finally {
    await browser?.close();
  }
  const tsllm = engineReport("tsllm", runs.tsllm, METRICS);
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
  const llamaCpp = engineReport("llama.cpp", runs.llamaCpp, METRICS);
  return { ...report, llamaCpp, ratio: ratios(tsllm.medians, llamaCpp.medians, METRICS) };
}

export interface ParallelBenchOptions extends Omit<BenchOptions, "onSample"> {
  /** numbers of concurrent requests to measure, one level each */
  readonly concurrency: readonly number[];
  /** called after each child finishes (progress output) */
  readonly onSample?: (engine: string, concurrency: number, repetition: number, sample: ParallelSample) => void;
}

/** KV cells a request gets beyond its prompt and generated tokens (tsllm stops one short of a full cache) */
const SEQUENCE_SLACK = 32;

/**
 * The concurrent-requests benchmark: for each level N, N different prompts started at once on
 * each engine, alternating engines per repetition as runBenchmark does. Every level's request
 * i gets the same prompt, so a level adds requests to the one below it.
 */
export async function runParallelBenchmark(o: ParallelBenchOptions): Promise<ParallelBenchReport> {
  // two tokens at least: the time per output token is measured between them
  assertCounts({ threads: [o.threads, 1], promptTokens: [o.promptTokens, 1], genTokens: [o.genTokens, 2], repetitions: [o.repetitions, 1] });
  if (o.concurrency.length === 0) throw new RangeError("bench: concurrency needs at least one number of requests");
  for (const n of o.concurrency) assertCounts({ concurrency: [n, 1] });
  const prompts = await randomPrompts(o.modelPath, o.promptTokens, Math.max(...o.concurrency));
  const sequenceContextSize = o.promptTokens + o.genTokens + SEQUENCE_SLACK;

  const measured: Omit<ParallelLevelReport, "scaling">[] = [];
  for (const n of o.concurrency) {
    const base = { modelPath: o.modelPath, threads: o.threads, prompts: prompts.slice(0, n), genTokens: o.genTokens, sequenceContextSize };
    const tsJob: ParallelWorkerJob = { ...base, engine: "tsllm", backend: o.backend, memoryMargin: o.memoryMargin };
    const lcJob: ParallelWorkerJob = { ...base, engine: "llama.cpp", llamaCppGpu: o.llamaCppGpu };
    const runs = await alternate(o.repetitions, tsJob, o.vsLlamaCpp ? lcJob : undefined, (job) => runWorker(job, o.timeoutMs), (engine, r, s) => o.onSample?.(engine, n, r, s));
    const tsllm = engineReport("tsllm", runs.tsllm, PARALLEL_METRICS);
    if (!o.vsLlamaCpp) {
      measured.push({ concurrency: n, tsllm });
      continue;
    }
    const llamaCpp = engineReport("llama.cpp", runs.llamaCpp, PARALLEL_METRICS);
    measured.push({ concurrency: n, tsllm, llamaCpp, ratio: ratios(tsllm.medians, llamaCpp.medians, PARALLEL_METRICS) });
  }

  const single = measured.find((l) => l.concurrency === 1);
  const scaled = (at: ParallelEngineReport | undefined, one: ParallelEngineReport | undefined) =>
    at && one ? at.medians.aggregateTokensPerSecond / one.medians.aggregateTokensPerSecond : undefined;
  const levels = measured.map((l) => ({ ...l, scaling: { tsllm: scaled(l.tsllm, single?.tsllm), llamaCpp: scaled(l.llamaCpp, single?.llamaCpp) } }));
  return { model: o.modelPath, threads: o.threads, promptTokens: o.promptTokens, genTokens: o.genTokens, repetitions: o.repetitions, sequenceContextSize, levels };
}

/** Throws a RangeError naming the first value that is not an integer >= its minimum. */
function assertCounts(values: Record<string, readonly [value: number, min: number]>): void {
  for (const [name, [v, min]] of Object.entries(values)) {
    if (!Number.isInteger(v) || v < min) throw new RangeError(`bench: ${name} must be an integer >= ${min}, got ${v}`);
  }
}

/**
 * Per repetition one fresh tsllm child, then (when given) one fresh llama.cpp child,
 * alternating so slow drifts of a shared machine hit both engines alike.
 */
async function alternate<J, S>(
  repetitions: number,
  tsJob: J,
  lcJob: J | undefined,
  run: (job: J) => Promise<S>,
  onSample?: (engine: EngineName, repetition: number, sample: S) => void,
): Promise<{ tsllm: S[]; llamaCpp: S[] }> {
  const out = { tsllm: [] as S[], llamaCpp: [] as S[] };
  for (let r = 0; r < repetitions; r++) {
    const s = await run(tsJob);
    out.tsllm.push(s);
    onSample?.("tsllm", r, s);
    if (lcJob === undefined) continue;
    const l = await run(lcJob);
    out.llamaCpp.push(l);
    onSample?.("llama.cpp", r, l);
  }
  return out;
}

function engineReport<S extends { readonly detail: string } & Readonly<Record<M, number>>, M extends string>(engine: EngineName, samples: S[], metrics: readonly M[]) {
  // what ran, from the first sample (a backend may fall back, the same way each run)
  return { engine, detail: samples[0]!.detail, medians: medians(samples, metrics), samples };
}
