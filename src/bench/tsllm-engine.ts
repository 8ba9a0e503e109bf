import { loadModel, type LoadModelOptions, type Model } from "../llm.js";
import { refusalInTerms, type RefusalTerms } from "../engine/index.js";
import { timeConcurrentRequests } from "./concurrent.js";
import { timeGreedyForward } from "../generation/index.js";
import { rates } from "./stats.js";
import { formatBytes } from "../units/index.js";
import type { EngineSample, ParallelSample, ParallelWorkerJob, WorkerJob } from "./types.js";

/**
 * tsllm's side: the raw forward pass (no sampler, no detokenizer), so both engines do the same
 * work: one batched prefill, then single-token forwards each followed by an argmax.
 */
export async function runTsllm(job: WorkerJob): Promise<Omit<EngineSample, "peakRssBytes">> {
  const t0 = performance.now();
  // loaded at the benchmark's context, so the memory plan counts the K/V timeGreedyForward
  // allocates for it (a cache of its own, made before its clock starts) and refuses what generate
  // --ctx-size would; the Model's own pool runs no request: one sequence, stored lazily
  const { model, warned } = await loadInBenchTerms(job.modelPath, { backend: job.backend, threads: job.threads, contextSize: job.contextSize, maxSequences: 1, cacheTypeK: job.cacheTypes?.k, cacheTypeV: job.cacheTypes?.v, ...marginOf(job) },
    job.contextSize - job.promptTokens.length - job.genTokens, 1);
  try {
    const loadMs = performance.now() - t0;
    const { prefillMs, decodeMs, tokens } = await timeGreedyForward(model.languageModel, job.promptTokens, job.genTokens, job.contextSize);
    return { detail: backendDetail(model), loadMs, prefillMs, decodeMs, ...rates(job.promptTokens.length, prefillMs, job.genTokens, decodeMs), tokens: [...tokens], ...warned };
  } finally {
    model.dispose();
  }
}

/**
 * tsllm serving concurrent requests through the public API only (`Model.stream`, which times
 * each token; `generate` is the same loop without the steps), so the benchmark measures
 * whatever scheduling the Model does with calls that overlap — one after another, or batched.
 * Unlike the single-stream run this includes sampling and detokenizing, as a server's requests do.
 */
export async function runTsllmParallel(job: ParallelWorkerJob): Promise<Omit<ParallelSample, "peakRssBytes">> {
  const t0 = performance.now();
  // each request's context as llama.cpp's sequences get (as many as requests); the engine's KV pool
  // holds them all at once, and where it cannot the load warns, in the benchmark's flags
  const { model, warned } = await loadInBenchTerms(job.modelPath, {
    backend: job.backend, threads: job.threads, contextSize: job.sequenceContextSize, maxSequences: job.prompts.length, ...marginOf(job),
  }, job.sequenceContextSize - (job.prompts[0]?.length ?? 0) - job.genTokens, PARALLEL_LEAST);
  try {
    const loadMs = performance.now() - t0;
    const options = { maxTokens: job.genTokens, temperature: 0, ignoreEos: true };
    const times = await timeConcurrentRequests(job.prompts.map((prompt) => () => generatedTokens(model, prompt, options)), job.genTokens);
    return { detail: backendDetail(model), loadMs, ...times, ...warned };
  } finally {
    model.dispose();
  }
}

/** the token ids of a streamed generation (its last step may carry only held-back text) */
async function* generatedTokens(model: Model, prompt: readonly number[], options: Parameters<Model["stream"]>[1]): AsyncGenerator<number> {
  for await (const step of model.stream(prompt, options)) if (step.token !== undefined) yield step.token;
}

/**
 * The load plan's proposals and the KV pool's warning in the benchmark's flags (tsllm bench, npm
 * run bench): it has no --ctx-size (its context is --prompt-tokens + --gen-tokens + `slack`: 1 for
 * a single stream, 32 a request with --parallel), no --quantize (a quantized file, made by tsllm
 * quantize, is what it measures; `least`: its smallest --prompt-tokens + --gen-tokens) and no --kv-memory (its pool is sized less --memory-margin); its
 * --parallel is the requests run at once, its --cache-type-k / -v are generate's.
 */
function benchTerms(slack: number, least: number): RefusalTerms {
  return {
    // a context that holds no run of the benchmark's (at least `least` tokens past the slack): no proposal
    contextSize: (tokens) => (tokens - slack >= least ? `--prompt-tokens + --gen-tokens at most ${tokens - slack}` : undefined),
    quantize: (type) => `a file quantized to ${type} by tsllm quantize IN OUT.gguf --type ${type}`,
    maxSequences: (n) => `--parallel ${n}`,
    kvCacheBytes: (bytes) => `a smaller --memory-margin (K/V for all of them, ${formatBytes(bytes)}, fits in the free memory)`,
    cacheTypes: "--cache-type-k / --cache-type-v",
    // the context a refusal describes (the K/V-array refusal's pool): the run's, as bench makes it
    context: (tokens) => `--prompt-tokens + --gen-tokens + ${slack} = ${tokens} tokens`,
  };
}

/** a concurrent run's shortest request: a prompt token and the two generated ones its time per output token needs */
const PARALLEL_LEAST = 3;

/**
 * loadModel for a run, its warnings (a context past the trained length, the memory margin given
 * up, a KV pool short of the requests) and its refusal in the benchmark's flags (benchTerms): the
 * child's stderr is dropped when the run succeeds, so the warnings travel in the sample
 */
async function loadInBenchTerms(modelPath: string, options: Omit<LoadModelOptions, "onWarning">, slack: number, least: number): Promise<{ model: Model; warned: { warnings?: string[] } }> {
  const warnings: string[] = [];
  const model = await loadModel(modelPath, { ...options, onWarning: (w) => warnings.push(refusalInTerms(w, benchTerms(slack, least))) })
    .catch(inBenchTerms(slack, least));
  return { model, warned: warnings.length > 0 ? { warnings } : {} };
}

/** a load's refusal rethrown in the benchmark's flags (benchTerms) */
function inBenchTerms(slack: number, least: number): (e: unknown) => never {
  return (e) => {
    throw e instanceof Error ? new Error(refusalInTerms(e.message, benchTerms(slack, least))) : e;
  };
}

/** the job's memory margin as a load option (absent: loadModel reads TSLLM_MEMORY_MARGIN, as generate does) */
function marginOf(job: WorkerJob | ParallelWorkerJob): { memoryMargin?: number } {
  return job.memoryMargin === undefined ? {} : { memoryMargin: job.memoryMargin };
}

/** what actually ran, e.g. "wasm, 2 threads" (a backend may fall back) */
function backendDetail(model: Model): string {
  // a GPU backend says which adapter it found (a software one must not pass for the GPU)
  const adapter = "adapter" in model.backend && typeof model.backend.adapter === "string" ? ` (${model.backend.adapter})` : "";
  return `${model.backend.name}${adapter}, ${model.backend.threads} thread${model.backend.threads === 1 ? "" : "s"}`;
}
