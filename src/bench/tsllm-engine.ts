import { loadModel, type Model } from "../llm.js";
import { refusalInTerms, type RefusalTerms } from "../engine/index.js";
import { timeConcurrentRequests } from "./concurrent.js";
import { timeGreedyForward } from "../generation/index.js";
import { rates } from "./stats.js";
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
  const model = await loadModel(job.modelPath, { backend: job.backend, threads: job.threads, contextSize: job.contextSize, maxSequences: 1, cacheTypeK: job.cacheTypes?.k, cacheTypeV: job.cacheTypes?.v, ...marginOf(job) })
    .catch((e: unknown) => { throw e instanceof Error ? new Error(refusalInTerms(e.message, BENCH_TERMS)) : e; });
  try {
    const loadMs = performance.now() - t0;
    const { prefillMs, decodeMs, tokens } = await timeGreedyForward(model.languageModel, job.promptTokens, job.genTokens, job.contextSize);
    return { detail: backendDetail(model), loadMs, prefillMs, decodeMs, ...rates(job.promptTokens.length, prefillMs, job.genTokens, decodeMs), tokens: [...tokens] };
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
  // each request's context as llama.cpp's sequences get; the engine's KV pool holds them all at once
  const model = await loadModel(job.modelPath, {
    backend: job.backend, threads: job.threads, contextSize: job.sequenceContextSize, maxSequences: Math.max(16, job.prompts.length), ...marginOf(job),
  });
  try {
    const loadMs = performance.now() - t0;
    const options = { maxTokens: job.genTokens, temperature: 0, ignoreEos: true };
    const times = await timeConcurrentRequests(job.prompts.map((prompt) => () => generatedTokens(model, prompt, options)), job.genTokens);
    return { detail: backendDetail(model), loadMs, ...times };
  } finally {
    model.dispose();
  }
}

/** the token ids of a streamed generation (its last step may carry only held-back text) */
async function* generatedTokens(model: Model, prompt: readonly number[], options: Parameters<Model["stream"]>[1]): AsyncGenerator<number> {
  for await (const step of model.stream(prompt, options)) if (step.token !== undefined) yield step.token;
}

/**
 * The load plan's proposals in the benchmark's flags (tsllm bench, npm run bench): it has no
 * --ctx-size (its context is --prompt-tokens + --gen-tokens + 1) and no --quantize (a quantized
 * file, made by tsllm quantize, is what it measures); its --cache-type-k / -v are generate's.
 */
const BENCH_TERMS: RefusalTerms = {
  contextSize: (tokens) => `--prompt-tokens + --gen-tokens at most ${tokens - 1}`,
  quantize: (type) => `a file quantized to ${type} by tsllm quantize IN OUT.gguf --type ${type}`,
};

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
