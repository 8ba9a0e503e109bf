import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before } from "node:test";
import { pipeline, type TextGenerationPipeline } from "../../src/index.js";
import { SHARED } from "./shared.js";

/*
 * The hf-oracle gpt2-tiny text-generation pipeline the tests of transformers' logits processors
 * judge: the pipeline itself, its reply to one prompt, and copies of its folder with other
 * generation_config.json / config.json settings (their pipelines disposed after the suite).
 */

export const GPT2_TINY = `${SHARED}/hf-oracle/gpt2-tiny`;

/** a copy of gpt2-tiny in `dir`: `generation` over its generation_config.json, `config` over its config.json */
export function gpt2TinyCopy(dir: string, name: string, generation: object, config: object = {}): string {
  const folder = join(dir, name);
  mkdirSync(folder);
  for (const f of readdirSync(GPT2_TINY)) copyFileSync(join(GPT2_TINY, f), join(folder, f));
  const read = (f: string) => JSON.parse(readFileSync(join(GPT2_TINY, f), "utf8"));
  writeFileSync(join(folder, "generation_config.json"), JSON.stringify({ ...read("generation_config.json"), ...generation }));
  writeFileSync(join(folder, "config.json"), JSON.stringify({ ...read("config.json"), ...config }));
  return folder;
}

export interface Gpt2TinyGeneration {
  /** the pipeline on gpt2-tiny's own folder (set in the suite's before) */
  readonly gen: () => TextGenerationPipeline;
  /** a scratch folder for copies, removed after the suite */
  readonly dir: string;
  /** the completion alone of `prompt` with these options */
  readonly reply: (g: TextGenerationPipeline, prompt: string, o: object) => Promise<string>;
  /** a pipeline on a folder (with these pipeline options), disposed after the suite */
  readonly openFolder: (folder: string, options?: object) => Promise<TextGenerationPipeline>;
}

/** call inside a describe: opens gpt2-tiny's pipeline before the suite and cleans up after it */
export function gpt2TinyGeneration(scratchPrefix: string): Gpt2TinyGeneration {
  let gen: TextGenerationPipeline | undefined;
  const dir = mkdtempSync(join(tmpdir(), scratchPrefix));
  const opened: TextGenerationPipeline[] = [];
  before(async () => {
    gen = await pipeline("text-generation", GPT2_TINY, { threads: 1 });
  });
  after(() => {
    gen?.dispose();
    for (const g of opened) g.dispose();
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    gen: () => gen!,
    dir,
    reply: async (g, prompt, o) => ((await g(prompt, { returnFullText: false, ...o })) as { generated_text: string }[])[0]!.generated_text,
    openFolder: async (folder, options = {}) => {
      const g = await pipeline("text-generation", folder, { threads: 1, ...options });
      opened.push(g);
      return g;
    },
  };
}

/** gpt2's end of text */
export const GPT2_EOS = 50256;

/**
 * Greedy decoding of `prompt` (token ids) from the model's own logits, each step's scores passed
 * first through `process` (a test's own transcription of transformers' logits processors, in
 * their order; `seq`: the prompt and the tokens so far, `generated` of them new): the argmax, the
 * lowest id among equals as torch's; stops at one of `ends` (not kept) or after `max` new tokens
 */
export function greedyFromLogits(
  gen: TextGenerationPipeline, prompt: readonly number[], max: number,
  process: (scores: number[], seq: readonly number[], generated: number) => number[], ends: readonly number[] = [GPT2_EOS],
): number[] {
  const lm = gen.model.languageModel;
  const cache = lm.createCache(prompt.length + max + 1);
  let logits = lm.forward([...prompt], cache);
  const seq = [...prompt];
  const out: number[] = [];
  while (out.length < max) {
    const scores = process(Array.from(logits), seq, out.length);
    let best = 0;
    for (let id = 1; id < scores.length; id++) if (scores[id]! > scores[best]!) best = id;
    if (ends.includes(best)) break;
    out.push(best);
    seq.push(best);
    logits = lm.forward([best], cache);
  }
  return out;
}
