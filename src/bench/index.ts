/** Side-by-side benchmarks (one stream, concurrent requests): tsllm vs llama.cpp (node-llama-cpp), one child process per engine run. */
export { runBenchmark, runParallelBenchmark, type BenchOptions, type ParallelBenchOptions } from "./run.js";
export { formatParallelSummary, formatReport, formatSummary, renderTable } from "./format.js";
export { randomPrompts, randomPromptTokens } from "./prompt.js";
export { median } from "./stats.js";
export type {
  BenchReport,
  EngineReport,
  EngineSample,
  EngineName,
  Metric,
  MetricMedians,
  ParallelBenchReport,
  ParallelEngineReport,
  ParallelLevelReport,
  ParallelMetric,
  ParallelSample,
  ParallelWorkerJob,
  RequestSample,
  WorkerJob,
} from "./types.js";
