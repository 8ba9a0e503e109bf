import { rates } from "./stats.js";
import type { EngineSample, WorkerJob } from "./types.js";

/**
 * llama.cpp's side, through node-llama-cpp's prebuilt CPU binary (a devDependency, imported
 * only here so tsllm itself never needs it).
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
  let mod: typeof import("node-llama-cpp");
  try {
    mod = await import("node-llama-cpp");
  } catch (e) {
    throw new Error(`--vs-llama-cpp needs the node-llama-cpp package (npm i -D -E node-llama-cpp@3.21.1): ${(e as Error).message}`);
  }
  const llama = await mod.getLlama({ gpu: false, build: "never", logLevel: mod.LlamaLogLevel.error, progressLogs: false, maxThreads: job.threads });
  try {
    const t0 = performance.now();
    const model = await llama.loadModel({ modelPath: job.modelPath, gpuLayers: 0 });
    const context = await model.createContext({
      contextSize: job.contextSize,
      batchSize: job.promptTokens.length,
      sequences: 1,
      threads: { ideal: job.threads, min: job.threads },
      flashAttention: false,
    });
    const loadMs = performance.now() - t0;
    const sequence = context.getSequence();
    const prompt = [...job.promptTokens] as import("node-llama-cpp").Token[];
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

    const detail = `node-llama-cpp CPU, ${context.currentThreads} threads`;
    await context.dispose();
    await model.dispose();
    return { detail, loadMs, prefillMs, decodeMs, ...rates(prompt.length, prefillMs, job.genTokens, decodeMs), tokens };
  } finally {
    await llama.dispose();
  }
}
