/** Side-by-side benchmarks (one stream, concurrent requests): tsllm vs llama.cpp (node-llama-cpp), one child process per engine run. */
export { runBenchmark, runParallelBenchmark, type BenchOptions, type ParallelBenchOptions } from "./run.js";
export { formatParallelSummary, formatReport, formatSampleWarnings, formatServeReport, formatSummary, renderTable } from "./format.js";
export { BENCH_MODELS, type BenchModel } from "./models.js";
export { runServeBenchmark, defaultRequests, type ServeBenchOptions } from "./serve.js";
export { completionBody, runLoad, streamCompletion, summarizeLoad, type CompletionRequest, type LoadResult } from "./load.js";
export { spawnTsllmServe, startLlamaServer, startTsllmServe, type ServeChild, type ServerProcess, type ServerSettings } from "./servers.js";
export { defaultLlamaServerBuildDir, ensureLlamaServer, shippedLlamaCpp } from "./llama-server.js";
export { partialTextTokens, randomPrompts, randomPromptTokens } from "./prompt.js";
export { median, percentile } from "./stats.js";
export type {
  BenchReport,
  EngineReport,
  EngineSample,
  EngineName,
  LlamaCppGpu,
  Metric,
  MetricMedians,
  ParallelBenchReport,
  ParallelEngineReport,
  ParallelLevelReport,
  ParallelMetric,
  ParallelSample,
  ParallelWorkerJob,
  RequestSample,
  ServeBenchReport,
  ServeLevelReport,
  ServeLevelSample,
  ServeMetric,
  ServeRequestSample,
  ServerName,
  WorkerJob,
} from "./types.js";
export { LLAMA_CPP_GPUS, PARALLEL_METRICS, SERVE_METRICS } from "./types.js";
