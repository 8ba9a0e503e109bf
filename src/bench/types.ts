/** What one benchmark child is asked to do, and what it reports back. */

export type EngineName = "tsllm" | "llama.cpp";

/** One child run: load the model, prefill the prompt once, decode `genTokens` greedy steps. */
export interface WorkerJob {
  readonly engine: EngineName;
  readonly modelPath: string;
  readonly threads: number;
  /** the prompt as token ids (BOS included when the model uses one); the same for both engines */
  readonly promptTokens: readonly number[];
  readonly genTokens: number;
  /** KV cache size in tokens, the same for both engines */
  readonly contextSize: number;
  /** tsllm only: compute backend */
  readonly backend?: "wasm" | "reference";
}

/** One engine's measurements from one child process. */
export interface EngineSample {
  /** model load + KV cache/context creation (ms) */
  readonly loadMs: number;
  /** one batched forward of the whole prompt, including picking the first token (ms) */
  readonly prefillMs: number;
  readonly prefillTokensPerSecond: number;
  /** `genTokens` single-token forwards through the KV cache, each followed by a greedy pick (ms) */
  readonly decodeMs: number;
  readonly decodeTokensPerSecond: number;
  /** the child's peak resident set size (bytes), from process.resourceUsage().maxRSS */
  readonly peakRssBytes: number;
  /** what actually ran, e.g. "wasm, 2 threads" (a backend may fall back) */
  readonly detail: string;
  /** greedy tokens produced (first from prefill, then one per decode step); not compared, just reported */
  readonly tokens: readonly number[];
}

/** The metrics a report summarizes, in table order. */
export const METRICS = ["loadMs", "prefillTokensPerSecond", "decodeTokensPerSecond", "peakRssBytes"] as const;
export type Metric = (typeof METRICS)[number];

export type MetricMedians = Record<Metric, number>;

export interface EngineReport {
  readonly engine: EngineName;
  /** what ran (from the first sample), e.g. "wasm, 2 threads" */
  readonly detail: string;
  readonly medians: MetricMedians;
  readonly samples: readonly EngineSample[];
}

export interface BenchReport {
  readonly model: string;
  readonly threads: number;
  readonly promptTokens: number;
  readonly genTokens: number;
  readonly repetitions: number;
  readonly contextSize: number;
  readonly tsllm: EngineReport;
  readonly llamaCpp?: EngineReport;
  /** tsllm / llama.cpp for every metric (only with llama.cpp) */
  readonly ratio?: MetricMedians;
}
