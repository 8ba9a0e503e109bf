import type { LlamaContext, LlamaContextOptions, Token } from "node-llama-cpp";
import type { KVCacheType } from "../kernels/index.js";
import { timeConcurrentRequests } from "./concurrent.js";
import { rates } from "./stats.js";
import type { EngineJob, EngineSample, ParallelSample, ParallelWorkerJob, WorkerJob } from "./types.js";

/**
 * llama.cpp's side, through node-llama-cpp's prebuilt binaries (a devDependency, imported only
 * here so tsllm itself never needs it): the CPU build, or with `llamaCppGpu` its Vulkan or CUDA
 * build with every layer on the GPU, the peer of tsllm's WebGPU backend.
 *
 * Prefill is one `controlledEvaluate` of the whole prompt (one batch: batchSize = prompt
 * length) that samples the first token greedily. Decode uses the `sequence.evaluate`
 * generator at temperature 0: each `next()` is one native decode of one token plus a native
 * greedy sample, and the sampled token is fed back without a JS round trip per token list,
 * which is the least JS overhead node-llama-cpp offers (controlledEvaluate per token builds
 * and parses an input/result array each step). `yieldEogToken` keeps it going past
 * end-of-generation tokens, as tsllm's loop does.
 *
 * Load time is `loadModel` + `createContext`; `getLlama` (loading the native addon) is not
 * counted, like Node's own start-up on the tsllm side.
 */
export async function runLlamaCpp(job: WorkerJob): Promise<Omit<EngineSample, "peakRssBytes">> {
  const contextOptions = { contextSize: job.contextSize, batchSize: job.promptTokens.length, sequences: 1 };
  return withLlamaContext(job, contextOptions, async (context, loadMs, detail) => {
    const sequence = context.getSequence();
    const prompt = [...job.promptTokens] as Token[];
    const tokens: number[] = [];

    const t1 = performance.now();
    const last = prompt.length - 1;
    const input = prompt.map((t, i) => (i === last ? ([t, { generateNext: { token: true, options: { temperature: 0 } } }] as const) : t));
    const res = await sequence.controlledEvaluate(input as Parameters<typeof sequence.controlledEvaluate>[0]);
    const first = res[last]?.next.token;
    const prefillMs = performance.now() - t1;
    if (first === undefined || first === null) throw new Error(`llama.cpp returned no token after the prompt of ${job.modelPath}`);
    tokens.push(first);

    const t2 = performance.now();
    if (job.genTokens > 0) {
      const gen = sequence.evaluate([first], { temperature: 0, yieldEogToken: true });
      for await (const tok of gen) {
        tokens.push(tok);
        if (tokens.length > job.genTokens) break;
      }
    }
    const decodeMs = performance.now() - t2;
    if (tokens.length !== job.genTokens + 1) throw new Error(`llama.cpp stopped after ${tokens.length - 1} of ${job.genTokens} decode steps`);
    return { detail, loadMs, prefillMs, decodeMs, ...rates(prompt.length, prefillMs, job.genTokens, decodeMs), tokens };
  });
}

/**
 * Concurrent requests on llama.cpp: one context with a sequence per request, every prompt fitting
 * one batch. Each request is a `sequence.evaluate` generator over its whole prompt; started in
 * the same tick, node-llama-cpp puts what all sequences have pending into one decode: the
 * prompts together, then one token of every request a step.
 */
export async function runLlamaCppParallel(job: ParallelWorkerJob): Promise<Omit<ParallelSample, "peakRssBytes">> {
  const n = job.prompts.length;
  const contextOptions = { contextSize: job.sequenceContextSize, batchSize: job.prompts.reduce((s, p) => s + p.length, 0), sequences: n };
  return withLlamaContext(job, contextOptions, async (context, loadMs, detail) => {
    const sequences = job.prompts.map(() => context.getSequence());
    const times = await timeConcurrentRequests(
      job.prompts.map((prompt, i) => () => firstTokens(sequences[i]!.evaluate([...prompt] as Token[], { temperature: 0, yieldEogToken: true }), job.genTokens)),
      job.genTokens,
    );
    return { detail, loadMs, ...times };
  });
}

/** the first `n` tokens of an endless generator (ending it then frees its sequence) */
async function* firstTokens(gen: AsyncGenerator<Token, unknown>, n: number): AsyncGenerator<number> {
  let count = 0;
  for await (const token of gen) {
    yield token;
    if (++count === n) return;
  }
}

/** node-llama-cpp's name of a KV cache type */
function ggmlTypeName(t: KVCacheType): "F32" | "F16" | "Q8_0" | "Q4_0" {
  return t.toUpperCase() as "F32" | "F16" | "Q8_0" | "Q4_0";
}

/**
 * Loads the model into a context of `job.threads` threads (on `job.llamaCppGpu`'s build with every
 * layer offloaded when set, else the CPU build), runs `body` on it and frees everything.
 */
async function withLlamaContext<T>(
  job: EngineJob,
  contextOptions: Pick<LlamaContextOptions, "contextSize" | "batchSize" | "sequences">,
  body: (context: LlamaContext, loadMs: number, detail: string) => Promise<T>,
): Promise<T> {
  let mod: typeof import("node-llama-cpp");
  try {
    mod = await import("node-llama-cpp");
  } catch (e) {
    throw new Error(`--vs-llama-cpp needs the node-llama-cpp package (npm i -D -E node-llama-cpp@3.21.1): ${(e as Error).message}`);
  }
  const gpu = job.llamaCppGpu ?? false;
  let llama: Awaited<ReturnType<typeof mod.getLlama>>;
  try {
    llama = await mod.getLlama({ gpu, build: "never", logLevel: mod.LlamaLogLevel.error, progressLogs: false, maxThreads: job.threads });
  } catch (e) {
    throw new Error(`llama.cpp's ${gpu === false ? "CPU" : gpu} build could not be loaded (node-llama-cpp's prebuilt binary${gpu === false ? "" : `, @node-llama-cpp/linux-x64-${gpu}, and the GPU's driver`}): ${(e as Error).message}`);
  }
  try {
    // a GPU build that finds no device (a software Vulkan driver is not listed) runs on the CPU
    // without a word: that would be the CPU's numbers under the GPU's name
    const devices = gpu === false ? [] : await llama.getGpuDeviceNames();
    if (gpu !== false && devices.length === 0) throw new Error(`llama.cpp's ${gpu} build found no GPU device (node-llama-cpp lists none), so it would run on the CPU: check the GPU driver (for Vulkan, VK_DRIVER_FILES naming its ICD)`);
    const t0 = performance.now();
    // on a GPU build every layer is offloaded ("max"), as tsllm's GPU backend runs all of them
    const model = await llama.loadModel({ modelPath: job.modelPath, gpuLayers: gpu === false ? 0 : "max" });
    const types = job.cacheTypes;
    const blocks = types !== undefined && [types.k, types.v].some((t) => t === "q8_0" || t === "q4_0");
    const cache = types === undefined ? {} : { experimentalKvCacheKeyType: ggmlTypeName(types.k), experimentalKvCacheValueType: ggmlTypeName(types.v) };
    const context = await model.createContext({ ...contextOptions, threads: { ideal: job.threads, min: job.threads }, flashAttention: blocks, ...cache });
    const loadMs = performance.now() - t0;
    const device = gpu === false ? "CPU" : `${gpu} (${devices.join(", ")})`;
    const result = await body(context, loadMs, `node-llama-cpp ${device}, ${context.currentThreads} threads`);
    await context.dispose();
    await model.dispose();
    return result;
  } finally {
    await llama.dispose();
  }
}
