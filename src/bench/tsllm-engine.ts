import { loadModel } from "../llm.js";
import { argmax, rates } from "./stats.js";
import type { EngineSample, WorkerJob } from "./types.js";

/**
 * tsllm's side: the raw forward pass (no sampler, no detokenizer), so both engines do the same
 * work: one batched prefill, then single-token forwards each followed by an argmax.
 */
export async function runTsllm(job: WorkerJob): Promise<Omit<EngineSample, "peakRssBytes">> {
  const t0 = performance.now();
  // the Model's own cache is not used (generate() would add sampling and detokenizing), so it
  // gets one position and the benchmark's cache is made here, inside the load time
  const model = await loadModel(job.modelPath, { backend: job.backend, threads: job.threads, contextSize: 1 });
  try {
    const lm = model.languageModel;
    const cache = lm.createCache(job.contextSize);
    const loadMs = performance.now() - t0;
    const tokens: number[] = [];

    const t1 = performance.now();
    let tok = argmax(lm.forward(job.promptTokens, cache));
    const prefillMs = performance.now() - t1;
    tokens.push(tok);

    const t2 = performance.now();
    for (let i = 0; i < job.genTokens; i++) {
      tok = argmax(lm.forward([tok], cache));
      tokens.push(tok);
    }
    const decodeMs = performance.now() - t2;
    const detail = `${model.backend.name}, ${model.backend.threads} thread${model.backend.threads === 1 ? "" : "s"}`;
    return { detail, loadMs, prefillMs, decodeMs, ...rates(job.promptTokens.length, prefillMs, job.genTokens, decodeMs), tokens };
  } finally {
    model.dispose();
  }
}
