/**
 * How long the thread that owns a Model goes without serving its event loop while the engine
 * prefills a long prompt: perf_hooks' event-loop delay histogram during a 512-token prefill of
 * the SmolLM-135M shape (random weights, Q8_0), through the engine (passes that give the loop a
 * turn between layers once a time slice is used) and, for comparison, through the raw
 * synchronous forward pass.
 *
 *   node --import tsx scripts/event-loop-delay.ts [--threads 2] [--prompt-tokens 512] [--runs 3] [--max-batch-tokens N]
 *
 * Not a test: a benchmark of a shared machine; quote the medians.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { optionalNumber } from "../src/cli/args.js";
import { loadModel } from "../src/index.js";
import { GGMLType } from "../src/tensor/dtypes.js";
import { ensureRandomModel, SMOLLM_135M } from "../src/testing/index.js";
import { noPositionals, scriptOptions } from "./script-args.js";

const USAGE = "Usage: node --import tsx scripts/event-loop-delay.ts [--threads 2] [--prompt-tokens 512] [--runs 3] [--max-batch-tokens N]\n" +
  "  the event loop's delay (p50, p99, max) while the engine prefills a long prompt (SmolLM-135M shape, Q8_0, random weights)";
const { threads, promptTokens, runs, maxBatchTokens } = scriptOptions(USAGE, { threads: { type: "string" }, "prompt-tokens": { type: "string" }, runs: { type: "string" }, "max-batch-tokens": { type: "string" } }, (values, positionals) => {
  noPositionals(positionals);
  const positive = (name: string) => optionalNumber(values, name, { integer: true, min: 1 });
  return { threads: positive("threads") ?? 2, promptTokens: positive("prompt-tokens") ?? 512, runs: positive("runs") ?? 3, maxBatchTokens: positive("max-batch-tokens") };
});

const path = await ensureRandomModel({ ...SMOLLM_135M, weightType: GGMLType.Q8_0 });
const model = await loadModel(path, { threads, contextSize: promptTokens + 16, maxBatchTokens });
const prompt = Array.from({ length: promptTokens }, (_, i) => 1 + ((i * 7919) % (model.info.vocabSize - 1)));
const ms = (ns: number) => (ns / 1e6).toFixed(1);

/** the loop's delay while `work` runs, in ms: p50, p99, max */
async function measure(work: () => Promise<unknown>): Promise<{ p50: number; p99: number; max: number; wallMs: number }> {
  const h = monitorEventLoopDelay({ resolution: 1 });
  const t0 = performance.now();
  h.enable();
  await work();
  h.disable();
  return { p50: h.percentile(50), p99: h.percentile(99), max: h.max, wallMs: performance.now() - t0 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rows: Record<string, { p50: number[]; p99: number[]; max: number[]; wall: number[] }> = {};
const record = (label: string, r: Awaited<ReturnType<typeof measure>>) => {
  const row = (rows[label] ??= { p50: [], p99: [], max: [], wall: [] });
  row.p50.push(r.p50); row.p99.push(r.p99); row.max.push(r.max); row.wall.push(r.wallMs);
};
try {
  for (let i = 0; i < runs; i++) {
    // a different first token each run, so the prefix cache has nothing to reuse
    const p = [1 + i, ...prompt.slice(1)];
    record("engine (Model.generate)", await measure(() => model.generate(p, { maxTokens: 1, temperature: 0 })));
    record("raw forward (synchronous)", await measure(async () => {
      // a timer tick first so the histogram sees the blocked stretch as one delay
      await new Promise((r) => setTimeout(r, 2));
      model.languageModel.forward(p, model.languageModel.createCache(promptTokens + 1));
      await new Promise((r) => setTimeout(r, 2));
    }));
  }
  process.stdout.write(`event-loop delay during a ${promptTokens}-token prefill, SmolLM-135M shape Q8_0, ${threads} threads, engine steps of ${model.engine.maxBatchTokens} tokens, median of ${runs} runs\n`);
  for (const [label, r] of Object.entries(rows)) {
    process.stdout.write(`${label.padEnd(28)} p50 ${ms(median(r.p50)).padStart(7)} ms  p99 ${ms(median(r.p99)).padStart(7)} ms  max ${ms(median(r.max)).padStart(7)} ms  prefill wall ${median(r.wall).toFixed(0)} ms\n`);
  }
} finally {
  model.dispose();
}
