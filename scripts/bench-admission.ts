// KV admission under load: N concurrent requests without max_tokens (as OpenAI clients send them;
// the server then lets each run to the end of the context: maxTokens = contextSize here) on an engine with a small KV pool, once with admission "reserve" (each request holds its worst
// case: a whole context) and once with "preempt" (admitted while its prompt fits, preempted and
// recomputed when the pool runs out). A reply ends after --reply tokens (the client leaves its
// stream, as an end-of-text token would end it: the engine cannot foresee either). With --n, each
// request asks for n choices (OpenAI's n) and the client leaves once every choice has --reply tokens.
// With --prompt-lookup each request decodes speculatively (prompt lookup), the client leaving as
// above; with --draft-model FILE as well, each drafts with that model (its draft cache counts
// against the same pool: a request's worst case is then about two contexts, so give --contexts 3 or
// more). With --beams B each request is a beam search of B beams with maxTokens --reply (a search
// streams its best hypothesis only when it ends, so a client cannot leave early; its worst case,
// B beams of --reply tokens, is what "reserve" holds). Prints aggregate throughput, TTFT p50 / p99,
// requests running at once (as seen at their tokens: a beam search's come at its end), the most
// sequences one step ran and preemptions for each; the requests are the same in both runs
// (sampled, seeded, ending at the end-of-text token or the context).
//
//   node --import tsx scripts/bench-admission.ts [--model FILE.gguf] [--requests 16] [--n 1 | --beams B | --prompt-lookup | --draft-model FILE.gguf] [--contexts 2] [--context 512] [--reply 200] [--runs 1]
//
// Default model: ../shared/models/stories260K.gguf. Not a test: the numbers are the machine's.
import { resolve } from "node:path";
import { optionalNumber, optionalString, UsageError } from "../src/cli/args.js";
import type { Admission } from "../src/engine/index.js";
import { loadModel, type Model } from "../src/index.js";
import { noPositionals, scriptOptions } from "./script-args.js";

const USAGE = "Usage: node --import tsx scripts/bench-admission.ts [--model FILE.gguf] [--requests N] [--n N | --beams B | --prompt-lookup | --draft-model FILE.gguf] [--contexts N] [--context N] [--reply N] [--runs N]\n" +
  "  N concurrent sampled requests without maxTokens on a KV pool of --contexts full contexts, under admission reserve and preempt\n" +
  "  --model: the GGUF (default ../shared/models/stories260K.gguf); --requests: concurrent requests (default 16); --n: choices per request (default 1)\n" +
  "  --beams B: beam searches of B beams, maxTokens --reply, instead; --prompt-lookup: speculative decoding by prompt lookup instead\n" +
  "  --draft-model FILE.gguf: speculative decoding drafting with that model instead (its cache counts against the pool)\n" +
  "  --contexts: the KV pool in full contexts (default 2); --context: contextSize (default 512)\n" +
  "  --reply: tokens after which the client leaves each stream (default 200; 0: to the end of the context); --runs: alternating runs of each (default 1)";

const opts = scriptOptions(USAGE, {
  model: { type: "string" }, requests: { type: "string" }, n: { type: "string" }, beams: { type: "string" }, "prompt-lookup": { type: "boolean" }, "draft-model": { type: "string" }, contexts: { type: "string" }, context: { type: "string" }, reply: { type: "string" }, runs: { type: "string" },
}, (values, positionals) => {
  noPositionals(positionals);
  const beams = optionalNumber(values, "beams", { integer: true, min: 1, max: 16 });
  const promptLookup = values["prompt-lookup"] === true;
  const draftModel = optionalString(values, "draft-model");
  if ([values.n !== undefined, beams !== undefined, promptLookup, draftModel !== undefined].filter(Boolean).length > 1) {
    throw new UsageError("--n, --beams, --prompt-lookup and --draft-model are four kinds of request: give one");
  }
  if (beams !== undefined && optionalNumber(values, "reply", { integer: true, min: 0 }) === 0) throw new UsageError("--beams needs --reply > 0: it is the searches' maxTokens");
  return {
    beams, promptLookup, draftModel: draftModel === undefined ? undefined : resolve(draftModel),
    model: resolve(optionalString(values, "model") ?? "../shared/models/stories260K.gguf"),
    requests: optionalNumber(values, "requests", { integer: true, min: 1 }) ?? 16,
    n: optionalNumber(values, "n", { integer: true, min: 1, max: 16 }) ?? 1,
    contexts: optionalNumber(values, "contexts", { min: 1 }) ?? 2,
    context: optionalNumber(values, "context", { integer: true, min: 32 }) ?? 512,
    reply: optionalNumber(values, "reply", { integer: true, min: 0 }) ?? 200,
    runs: optionalNumber(values, "runs", { integer: true, min: 1 }) ?? 1,
  };
});

/** the draft model (--draft-model), loaded once for both admissions' runs */
const draft: Model | undefined = opts.draftModel === undefined ? undefined : await loadModel(opts.draftModel, { contextSize: opts.context, warmup: false });

const STARTS = ["Once upon a time", "Lily and Ben", "The little dog", "One day, a girl named", "Tom had a big red", "The sun was", "A cat and a bird", "Mom said"];

const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

async function run(admission: Admission): Promise<string> {
  const probe = await loadModel(opts.model, { contextSize: opts.context, warmup: false });
  const bytes = Math.round(opts.contexts * opts.context * probe.engine.bytesPerToken);
  probe.dispose();
  // (maxSequences: every request's choices or beams may run at once, as 16 one-choice requests may by default)
  const model = await loadModel(opts.model, { contextSize: opts.context, kvCacheBytes: bytes, admission, maxSequences: Math.max(16, opts.requests * (opts.beams ?? opts.n)) });
  try {
    let peakRunning = 0;
    const t0 = performance.now();
    const results = await Promise.all(Array.from({ length: opts.requests }, async (_, i) => {
      let first = 0, tokens = 0;
      const perChoice = new Array<number>(opts.n).fill(0);
      // the client leaves the stream once every choice has its reply (aborting the request)
      const leave = new AbortController();
      const prompt = `${STARTS[i % STARTS.length]!}${i >= STARTS.length ? ` ${i}` : ""}`;
      const run = opts.beams !== undefined
        ? model.submit(prompt, { numBeams: opts.beams, maxTokens: opts.reply, signal: leave.signal })
        : model.submit(prompt, { temperature: 0.8, seed: 1000 + i, maxTokens: opts.context, n: opts.n, ...(opts.promptLookup ? { promptLookup: true } : {}), ...(draft ? { draftModel: draft } : {}), signal: leave.signal });
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
      `running at once ${peakRunning}  sequences in one step ${model.engine.stats.peakStepSequences}  preemptions ${model.engine.stats.preemptions}`;
  } finally {
    model.dispose();
  }
}

const kind = opts.beams !== undefined ? `beam searches of ${opts.beams} beams` : opts.promptLookup ? "speculative decodings (prompt lookup)" : draft ? `speculative decodings (draft ${opts.draftModel})` : `${opts.n} choice${opts.n > 1 ? "s" : ""}`;
console.log(`${opts.model}: ${opts.requests} requests of ${kind}, pool ${opts.contexts} x ${opts.context} positions, replies of ${opts.reply || "up to the context's"} tokens`);
try {
  for (let r = 0; r < opts.runs; r++) for (const admission of ["reserve", "preempt"] as const) console.log(await run(admission));
} finally {
  draft?.dispose();
}
