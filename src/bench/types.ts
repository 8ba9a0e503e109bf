import type { KVCacheTypes } from "../kernels/index.js";

/** What one benchmark child is asked to do, and what it reports back. */

export type EngineName = "tsllm" | "llama.cpp";

/** What every child run is told, whatever it measures. */
export interface EngineJob {
  readonly engine: EngineName;
  readonly modelPath: string;
  readonly threads: number;
  readonly genTokens: number;
  /** tsllm only: compute backend */
  readonly backend?: "wasm" | "reference" | "webgpu";
  /**
   * KV cache types for both engines (absent: each engine's default, tsllm f32 and llama.cpp
   * F16); llama.cpp runs with flash attention whenever one is a block format, as it must
   */
  readonly cacheTypes?: KVCacheTypes;
  /** llama.cpp only: the GPU build to offload every layer to (absent: its CPU build, no offload) */
  readonly llamaCppGpu?: LlamaCppGpu;
  /** tsllm only: the free memory its KV pool leaves unused (loadModel's memoryMargin; absent: TSLLM_MEMORY_MARGIN, else 1 GiB) */
  readonly memoryMargin?: number;
}

/** node-llama-cpp's prebuilt GPU builds the benchmarks can run llama.cpp on */
export type LlamaCppGpu = "vulkan" | "cuda";
export const LLAMA_CPP_GPUS: readonly LlamaCppGpu[] = ["vulkan", "cuda"];

/** One child run: load the model, prefill the prompt once, decode `genTokens` greedy steps. */
export interface WorkerJob extends EngineJob {
  /** the prompt as token ids (BOS included when the model uses one); the same for both engines */
  readonly promptTokens: readonly number[];
  /** KV cache size in tokens, the same for both engines */
  readonly contextSize: number;
}

/**
 * One concurrent-requests child run: load the model, then start one greedy request per prompt
 * all at once, each generating `genTokens` tokens (end-of-generation tokens included).
 */
export interface ParallelWorkerJob extends EngineJob {
  /** one prompt (token ids) per request, all different; the same for both engines */
  readonly prompts: readonly (readonly number[])[];
  /**
   * KV cells one request needs (prompt + generated tokens + slack): tsllm's one cache gets
   * prompts.length times this, llama.cpp's context this per sequence (node-llama-cpp's
   * contextSize is per sequence)
   */
  readonly sequenceContextSize: number;
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
  /** the engine's load warnings (tsllm: a context past the trained length, the memory margin given up), in the benchmark's flags */
  readonly warnings?: readonly string[];
}

/** One request of a concurrent run. */
export interface RequestSample {
  /** from the request's start to its first token (ms): its prefill plus any wait for the other requests */
  readonly ttftMs: number;
  /** mean time between its later tokens (ms) */
  readonly tpotMs: number;
  /** the tokens it generated */
  readonly tokens: readonly number[];
}

/** One engine's measurements from one concurrent-requests child process. */
export interface ParallelSample {
  /** model load + KV cache/context creation (ms) */
  readonly loadMs: number;
  /** from starting all requests to the last one finishing (ms) */
  readonly wallMs: number;
  /** every request's generated tokens / wallMs */
  readonly aggregateTokensPerSecond: number;
  /** the request medians of ttftMs and tpotMs */
  readonly ttftMs: number;
  readonly tpotMs: number;
  readonly peakRssBytes: number;
  readonly detail: string;
  readonly requests: readonly RequestSample[];
  /** the engine's load warnings (tsllm: a KV pool that holds fewer full contexts than requests), in the benchmark's flags */
  readonly warnings?: readonly string[];
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

export const PARALLEL_METRICS = ["aggregateTokensPerSecond", "ttftMs", "tpotMs", "loadMs", "peakRssBytes"] as const;
export type ParallelMetric = (typeof PARALLEL_METRICS)[number];

export interface ParallelEngineReport {
  readonly engine: EngineName;
  readonly detail: string;
  /** medians over the repetitions (of each run's request medians, for ttftMs and tpotMs) */
  readonly medians: Record<ParallelMetric, number>;
  readonly samples: readonly ParallelSample[];
}

/** Both engines at one number of concurrent requests. */
export interface ParallelLevelReport {
  readonly concurrency: number;
  readonly tsllm: ParallelEngineReport;
  readonly llamaCpp?: ParallelEngineReport;
  /** tsllm / llama.cpp for every metric (only with llama.cpp) */
  readonly ratio?: Record<ParallelMetric, number>;
  /** each engine's median aggregate tok/s here / at one request (only when 1 was among the levels) */
  readonly scaling: { readonly tsllm?: number; readonly llamaCpp?: number };
}

export interface ParallelBenchReport {
  readonly model: string;
  readonly threads: number;
  readonly promptTokens: number;
  readonly genTokens: number;
  readonly repetitions: number;
  readonly sequenceContextSize: number;
  readonly levels: readonly ParallelLevelReport[];
}

/** The two OpenAI-compatible servers `npm run bench:serve` loads. */
export type ServerName = "tsllm" | "llama-server";

/** One streamed completion, timed by the client over loopback HTTP. */
export interface ServeRequestSample {
  /** from sending the request to the first chunk with text (ms) */
  readonly ttftMs: number;
  /** (last text chunk - first text chunk) / (completion tokens - 1) (ms) */
  readonly tpotMs: number;
  /** from sending the request to the end of the response (ms) */
  readonly totalMs: number;
  /** generated tokens, as the server's usage (or timings) reports them */
  readonly completionTokens: number;
  /** SSE chunks that carried text (a token whose text is empty or an unfinished UTF-8 character sends none) */
  readonly textChunks: number;
}

/** The figures one server's level is summarized by, in table order. */
export const SERVE_METRICS = ["tokensPerSecond", "ttftP50Ms", "ttftP99Ms", "tpotP50Ms", "tpotP99Ms"] as const;
export type ServeMetric = (typeof SERVE_METRICS)[number];

/** One server at one concurrency level: C clients sending requests back to back. */
export interface ServeLevelSample extends Readonly<Record<ServeMetric, number>> {
  readonly server: ServerName;
  /** how the server was started, e.g. "tsllm serve --threads 2 --parallel 8 --ctx-size 128" */
  readonly command: string;
  /** from the first request sent to the last response ended (ms) */
  readonly wallMs: number;
  /** every request's completion tokens / wallMs (tok/s) */
  readonly tokensPerSecond: number;
  readonly requests: readonly ServeRequestSample[];
}

export interface ServeLevelReport {
  /** clients sending at once */
  readonly concurrency: number;
  /** requests sent in the level (by all clients together) */
  readonly requests: number;
  /** runs per server (alternating); with more than one, tsllm and llamaServer hold each metric's median and every run's requests */
  readonly repetitions: number;
  readonly tsllm: ServeLevelSample;
  readonly llamaServer?: ServeLevelSample;
  /** tsllm / llama-server for every metric (only with llama-server) */
  readonly ratio?: Record<ServeMetric, number>;
  /** each run's sample, with more than one repetition */
  readonly runs?: { readonly tsllm: readonly ServeLevelSample[]; readonly llamaServer?: readonly ServeLevelSample[] };
}

export interface ServeBenchReport {
  readonly model: string;
  readonly threads: number;
  readonly promptTokens: number;
  readonly maxTokens: number;
  /** KV cells each server gets per parallel slot */
  readonly slotContextSize: number;
  /** what ran on the peer's side, e.g. "llama-server (llama.cpp b1234 from node-llama-cpp 3.21.1)" */
  readonly llamaServerDetail?: string;
  /** why the peer did not run (build failed, --no-llama-server) */
  readonly llamaServerSkipped?: string;
  readonly levels: readonly ServeLevelReport[];
}
