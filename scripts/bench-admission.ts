// KV admission under load: N concurrent requests without max_tokens (as OpenAI clients send them;
// the server then lets each run to the end of the context: maxTokens = contextSize here) on an engine with a small KV pool, once with admission "reserve" (each request holds its worst
// case: a whole context) and once with "preempt" (admitted while its prompt fits, preempted and
// recomputed when the pool runs out). A reply ends after --reply tokens (the client leaves its
// stream, as an end-of-text token would end it: the engine cannot foresee either). With --n, each
// request asks for n choices (OpenAI's n) and the client leaves once every choice has --reply tokens. Prints aggregate throughput, TTFT p50 / p99, requests
// running at once and preemptions for each; the requests are the same in both runs (sampled,
// seeded, ending at the end-of-text token or the context).
//
//   node --import tsx scripts/bench-admission.ts [--model FILE.gguf] [--requests 16] [--n 1] [--contexts 2] [--context 512] [--reply 200] [--runs 1]
//
// Default model: ../shared/models/stories260K.gguf. Not a test: the numbers are the machine's.
import { resolve } from "node:path";
import { optionalNumber, optionalString } from "../src/cli/args.js";
import type { Admission } from "../src/engine/index.js";
import { loadModel } from "../src/index.js";
import { noPositionals, scriptOptions } from "./script-args.js";

const USAGE = "Usage: node --import tsx scripts/bench-admission.ts [--model FILE.gguf] [--requests N] [--n N] [--contexts N] [--context N] [--reply N] [--runs N]\n" +
  "  N concurrent sampled requests without maxTokens on a KV pool of --contexts full contexts, under admission reserve and preempt\n" +
  "  --model: the GGUF (default ../shared/models/stories260K.gguf); --requests: concurrent requests (default 16); --n: choices per request (default 1)\n" +
  "  --contexts: the KV pool in full contexts (default 2); --context: contextSize (default 512)\n" +
  "  --reply: tokens after which the client leaves each stream (default 200; 0: to the end of the context); --runs: alternating runs of each (default 1)";

const opts = scriptOptions(USAGE, { model: { type: "string" }, requests: { type: "string" }, n: { type: "string" }, contexts: { type: "string" }, context: { type: "string" }, reply: { type: "string" }, runs: { type: "string" } }, (values, positionals) => {
  noPositionals(positionals);
  return {
    model: resolve(optionalString(values, "model") ?? "../shared/models/stories260K.gguf"),
    requests: optionalNumber(values, "requests", { integer: true, min: 1 }) ?? 16,
    n: optionalNumber(values, "n", { integer: true, min: 1, max: 16 }) ?? 1,
    contexts: optionalNumber(values, "contexts", { min: 1 }) ?? 2,
    context: optionalNumber(values, "context", { integer: true, min: 32 }) ?? 512,
    reply: optionalNumber(values, "reply", { integer: true, min: 0 }) ?? 200,
    runs: optionalNumber(values, "runs", { integer: true, min: 1 }) ?? 1,
  };
});

const STARTS = ["Once upon a time", "Lily and Ben", "The little dog", "One day, a girl named", "Tom had a big red", "The sun was", "A cat and a bird", "Mom said"];

const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

async function run(admission: Admission): Promise<string> {
  const probe = await loadModel(opts.model, { contextSize: opts.context, warmup: false });
  const bytes = Math.round(opts.contexts * opts.context * probe.engine.bytesPerToken);
  probe.dispose();
  // (maxSequences: every request's choices may run at once, as 16 one-choice requests may by default)
  const model = await loadModel(opts.model, { contextSize: opts.context, kvCacheBytes: bytes, admission, maxSequences: Math.max(16, opts.requests * opts.n) });
  try {
    let peakRunning = 0;
    const t0 = performance.now();
    const results = await Promise.all(Array.from({ length: opts.requests }, async (_, i) => {
      let first = 0, tokens = 0;
      const perChoice = new Array<number>(opts.n).fill(0);
      // the client leaves the stream once every choice has its reply (aborting the request)
      const leave = new AbortController();
      const run = model.submit(`${STARTS[i % STARTS.length]!}${i >= STARTS.length ? ` ${i}` : ""}`, { temperature: 0.8, seed: 1000 + i, maxTokens: opts.context, n: opts.n, signal: leave.signal });
      for await (const event of run.events()) {
        if (event.step?.token === undefined) continue;
        if (tokens++ === 0) first = performance.now() - t0;
        perChoice[event.choice]!++;
        peakRunning = Math.max(peakRunning, model.engine.stats.running);
        if (opts.reply > 0 && perChoice.every((t) => t >= opts.reply)) {
          leave.abort();
          break;
        }
      }
      return { first, tokens };
    }));
    const wall = (performance.now() - t0) / 1000;
    const generated = results.reduce((s, r) => s + r.tokens, 0);
    const ttft = results.map((r) => r.first);
    return `${admission.padEnd(7)} ${(generated / wall).toFixed(0).padStart(6)} tok/s  ${generated} tokens in ${wall.toFixed(2)} s  TTFT p50 ${percentile(ttft, 50).toFixed(0)} / p99 ${percentile(ttft, 99).toFixed(0)} ms  ` +
      `running at once ${peakRunning}  preemptions ${model.engine.stats.preemptions}`;
  } finally {
    model.dispose();
  }
}

console.log(`${opts.model}: ${opts.requests} requests of ${opts.n} choice${opts.n > 1 ? "s" : ""}, pool ${opts.contexts} x ${opts.context} positions, replies of ${opts.reply || "up to the context's"} tokens`);
for (let r = 0; r < opts.runs; r++) for (const admission of ["reserve", "preempt"] as const) console.log(await run(admission));
