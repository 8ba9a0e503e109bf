import { loadModel, type GenerateOptions, type GenerationResult, type LoadModelOptions } from "../../src/index.js";

/**
 * The results of generating each job alone, one after another, on a fresh model with the default
 * KV pool: nothing shared, nothing batched, never preempted — the reference every concurrent
 * engine test compares its requests against.
 */
export async function soloResults(
  modelPath: string,
  jobs: readonly { prompt: string | number[]; options: GenerateOptions }[],
  loadOptions: LoadModelOptions = {},
): Promise<GenerationResult[]> {
  const model = await loadModel(modelPath, { contextSize: 512, ...loadOptions });
  try {
    const out: GenerationResult[] = [];
    for (const j of jobs) out.push(await model.generate(j.prompt, j.options));
    return out;
  } finally {
    model.dispose();
  }
}
