/** Side-by-side benchmark: tsllm vs llama.cpp (node-llama-cpp), one child process per engine run. */
export { runBenchmark, type BenchOptions } from "./run.js";
export { formatReport, formatSummary, renderTable } from "./format.js";
export { randomPromptTokens } from "./prompt.js";
export { median } from "./stats.js";
export type { BenchReport, EngineReport, EngineSample, EngineName, Metric, MetricMedians, WorkerJob } from "./types.js";
