// Differential fuzzer for the engine (src/engine/): random batches of requests run together
// through one engine with a small shared KV pool and prefix caching, each request then run alone
// on a fresh engine (nothing cached, a pool of the default size), the judge. Requests share whole
// or partial prompt prefixes, arrive while others decode, are aborted at random passes (before
// admission, mid-prefill, mid-decode), and mix greedy and seeded sampling, n choices, logprobs,
// prompt logprobs, stop strings (some across token boundaries of what the request says alone) and
// stop tokens, penalties (repeat, presence, frequency) and logit biases, grammar / JSON Schema /
// regex / choice constraints, beam search and speculative decoding (prompt lookup, the model
// drafting for itself, or another model of its vocabulary: its own draft pool and cache types; each
// draft pool planned as serve plans it, so a drafting request may find no room for a round and
// decode plainly until a later round finds it, or in a fifth of the cases unplanned, as a library
// caller's, its rows then charged to the engine's pool). Checked per request: every choice's tokens, text,
// finish reason and logprobs equal the solo run's (bit for bit: a row's logits do not depend on
// the rows beside it); an aborted one's tokens are a prefix of its solo tokens. Checked before
// every pass: each pool block's reference count is the number of live sequences holding it;
// after the batch settles: no block in use (cached prefixes idle), nothing queued or running,
// every draft pool empty. A batch that has not settled after --timeout seconds is a hang.
//
// A third of the requests are pinned to a slot (RequestParams.slot, serve's id_slot), in some cases
// all of them to one slot: checked before every pass, each running request holds a slot per place
// and no slot is held twice, a pinned one's first place is its slot, and a pinned request still
// waiting while its slot is free was not passed by a request behind it; after the batch, a pinned
// request that ran ran its first choice in its slot (the wait ending is the hang check's).
//
// Most cases run under admission "preempt" (a quarter under "reserve"): with a pool just big enough
// for the largest request, requests admitted on their prompts outgrow it and the newest are
// preempted and recomputed. A preempted request must still give its solo tokens, text and finish
// reason, and its events the outcome's tokens exactly once each; its logprobs only within 1e-3
// (rows recomputed in a chunk differ in the last bits from rows decoded one at a time). Half of
// them are bursts: requests arriving together, each 60 tokens to the context long (beam searches
// 16-60), end-of-text ignored, no constraint, few stops or aborts, a step's budget seldom tiny:
// 2 in 9 beam searches, 1 in 9 speculative decodings by prompt lookup, 2 in 9 drafting with a
// model (itself or another), the others sampled (a third of those with n choices). Under
// "preempt" a quarter of the requests ask for n choices (up to 4), which are preempted and
// recomputed as a group (the prompt once, the choices forking off it again): each choice must
// still be its solo one. Beam searches are preempted and recomputed as a unit too (their beams'
// tokens, text and order as alone, scores within 1e-4), and speculative requests, a draft model's
// cache with them (the same rounds, proposals and acceptances as alone, where no round of theirs
// found the draft's pool full: then greedy ones still their solo tokens, sampled ones unchecked).
//
// A third of the requests have slow readers (SlowReader): awaiting a few ms between events, pausing
// for passes, reading in bursts, leaving mid-way (cancel(), as Model.submit's events() on a break),
// or, under "preempt", stalling until every other request has settled. A reader 64 events behind
// pauses its request, which under "preempt" is preempted for what needs its room and waits until
// its reader reads on: still its solo tokens, its events each once (a leaver's a prefix, its tokens
// as an aborted one's). A stall during which no pass runs, and no other reader reads on, for 5 s
// while a request read at once is unsettled is a defect: the stalled reader held it back (a
// request pinned to the stalled one's slot included: it preempts the paused holder). The delays
// are drawn from the case's seed (the passes the others wait for still follow the clock).
//
// With --llama, stories260K's greedy requests (no penalties, biases or constraints, one choice) are also run by
// llama.cpp (node-llama-cpp, CPU, f32 K/V, no flash attention, the prompt in one batch): its
// greedy tokens must start with the engine's solo tokens.
//
//   node --import tsx scripts/fuzz-engine.ts [--seed S] [--cases N] [--case K] [--only NAMES] [--backend NAME] [--timeout SEC] [--llama] [--bursts] [--verbose]
//
// --bursts makes every case a burst of 4 or more requests under "preempt", 8 sequences at once
// (the cases that preempt most).
//
// Case k of seed s is what new Rng(s * 100003 + k) makes, so `--seed s --case k` runs it again.
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { optionalNumber, optionalString, UsageError } from "../src/cli/args.js";
import type { KVBlockPool } from "../src/cache/index.js";
import { Engine, RequestError, type Admission, type EngineRequest, type RequestEvent, type RequestOutcome, type RequestParams } from "../src/engine/index.js";
import { loadModel, type LanguageModel, type Model } from "../src/index.js";
import { ensureRandomModel, Rng, tinyLlama } from "../src/testing/index.js";
import { noPositionals, scriptOptions } from "./script-args.js";

const TARGETS = ["stories260K", "random", "random-q8kv"] as const;
const USAGE = "Usage: node --import tsx scripts/fuzz-engine.ts [--seed S] [--cases N] [--case K] [--only NAMES] [--backend NAME] [--timeout SEC] [--llama] [--bursts] [--verbose]\n" +
  "  random batches of concurrent requests through one engine (small KV pool, prefix cache, aborts, late arrivals),\n" +
  "  each request's result compared with the same request run alone on a fresh engine; KV pool references checked every pass\n" +
  `  --only NAMES: models, comma-separated (default all present: ${TARGETS.join(", ")}; stories260K needs ../shared/models)\n` +
  "  --seed S: the run's seed (default: the clock); --cases N: batches to run (default 20)\n" +
  "  --case K: run only case K of the seed (reproduces one failure)\n" +
  "  --backend NAME: wasm (default) or reference; --timeout SEC: a batch not settled by then is a hang (default 120)\n" +
  "  --llama: stories260K's greedy requests also against llama.cpp's greedy tokens (node-llama-cpp)\n" +
  "  --bursts: every case a burst of long requests under admission preempt (the cases that preempt most)\n" +
  "  --verbose: print every case's requests\n" +
  "  each defect: the seed and case, the request and what differed; exit 1 if any";

const opts = scriptOptions(USAGE, {
  seed: { type: "string" }, cases: { type: "string" }, case: { type: "string" }, only: { type: "string" }, backend: { type: "string" }, timeout: { type: "string" }, llama: { type: "boolean" }, bursts: { type: "boolean" }, verbose: { type: "boolean" },
}, (values, positionals) => {
  noPositionals(positionals);
  const only = optionalString(values, "only")?.split(",").map((s) => s.trim()).filter(Boolean);
  for (const name of only ?? []) if (!(TARGETS as readonly string[]).includes(name)) throw new UsageError(`--only: unknown model ${JSON.stringify(name)} (expected ${TARGETS.join(", ")})`);
  const backend = optionalString(values, "backend") ?? "wasm";
  if (backend !== "wasm" && backend !== "reference") throw new UsageError(`--backend must be wasm or reference, got ${JSON.stringify(backend)}`);
  return {
    seed: optionalNumber(values, "seed", { integer: true, min: 0 }) ?? Date.now() % 1e9,
    cases: optionalNumber(values, "cases", { integer: true, min: 1 }) ?? 20,
    onlyCase: optionalNumber(values, "case", { integer: true, min: 0 }),
    only, backend: backend as "wasm" | "reference",
    timeoutS: optionalNumber(values, "timeout", { min: 1 }) ?? 120,
    verbose: values["verbose"] === true,
    llama: values["llama"] === true,
    bursts: values["bursts"] === true,
  };
});

const CONTEXT = 256;

interface Target { name: string; model: Model }
const targets: Target[] = [];
const wants = (name: string) => opts.only === undefined || opts.only.includes(name);
const stories = resolve("../shared/models/stories260K.gguf");
if (wants("stories260K")) {
  if (existsSync(stories)) targets.push({ name: "stories260K", model: await loadModel(stories, { backend: opts.backend, contextSize: CONTEXT }) });
  else console.log(`stories260K: skipped (${stories} is absent)`);
}
if ((wants("random") || wants("random-q8kv")) && !existsSync(join(resolve("../shared/models"), "stories260K.gguf"))) {
  // the random models borrow stories260K's vocabulary (src/testing/presets.ts)
  console.log("random models: skipped (their tokenizer comes from ../shared/models/stories260K.gguf)");
} else {
  const spec = { ...tinyLlama, contextLength: CONTEXT };
  if (wants("random")) targets.push({ name: "random", model: await loadModel(await ensureRandomModel(spec), { backend: opts.backend, contextSize: CONTEXT }) });
  if (wants("random-q8kv")) targets.push({ name: "random-q8kv", model: await loadModel(await ensureRandomModel(spec), { backend: opts.backend, contextSize: CONTEXT, cacheTypeK: "q8_0", cacheTypeV: "q8_0" }) });
}
/** llama.cpp's greedy tokens for stories260K (with --llama) */
const llamaGreedy = opts.llama && targets.some((t) => t.name === "stories260K") ? await llamaCppGreedy(stories) : undefined;
async function llamaCppGreedy(path: string): Promise<(prompt: readonly number[], n: number) => Promise<number[]>> {
  const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, progressLogs: false });
  const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
  return async (prompt, n) => {
    if (n === 0) return [];
    // a context of the request's size (llama.cpp's attention sums over its whole padded KV: a
    // larger one adds its rows in another order), the prompt in one batch, as test/helpers' oracle
    // (f32 K/V without flash attention: the engine's default cache and order)
    const context = await model.createContext({
      contextSize: prompt.length + n, batchSize: prompt.length, sequences: 1, threads: 2, flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
    });
    try {
      const sequence = context.getSequence();
      // each step's whole distribution, its argmax taken here (lowest id on ties, as the engine's greedy)
      const next = { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } as const;
      const out: number[] = [];
      let input: number[] = [...prompt];
      while (out.length < n) {
        const last = input.length - 1;
        const batch = input.map((t, i) => (i === last ? ([t, { generateNext: next }] as const) : t));
        const res = await sequence.controlledEvaluate(batch as Parameters<typeof sequence.controlledEvaluate>[0]);
        let best = -1, bestP = -1;
        for (const [t, p] of res[last]?.next?.probabilities ?? []) if (p > bestP || (p === bestP && t < best)) [best, bestP] = [t, p];
        out.push(best);
        input = [best];
      }
      return out;
    } finally {
      await context.dispose();
    }
  };
}

if (targets.length === 0) {
  console.log("no model to fuzz");
  process.exit(0);
}

/** what one request of a case is: its parameters (no signal) and when it arrives and is aborted (pass numbers; -1: never) */
interface Job {
  params: RequestParams;
  arriveAt: number;
  abortAt: number;
  /** the signal is aborted before submit */
  preAborted: boolean;
  /** the model that drafts for a speculative request (the target itself, or another of the same vocabulary) */
  draft?: Target;
  /** how its events are read (undefined: each as it comes) */
  reader?: SlowReader;
}

/**
 * A slow reader of a request's events: awaits a while between events, pauses for some passes,
 * reads in bursts, leaves mid-way (cancel(), as Model.submit's events() does when its caller
 * breaks out), or stalls until every other request has settled (admission "preempt" only: a
 * reserved request is never preempted, so one stalled reader holds its room by design). A reader
 * more than 64 events behind pauses its request (the bounded backlog); under "preempt" a paused
 * request is preempted for what needs its room, and waits until its reader catches up.
 */
type SlowReader =
  | { kind: "delays"; maxMs: number }
  | { kind: "pause"; after: number; passes: number }
  | { kind: "bursts"; size: number; passes: number }
  | { kind: "leave"; after: number }
  | { kind: "stall"; after: number };

interface Case {
  target: Target;
  maxSequences: number;
  maxBatchTokens: number;
  kvBlocks: number;
  admission: Admission;
  burst: boolean;
  jobs: Job[];
  /** the context the batch engine plans the draft models' KV pools for (planDraftCache): serve's, or less so rounds find no room */
  draftContext: number;
  /** false: the draft pools have no plan (a library caller's draft model): they grow within kvCacheBytes, their rows charged to the engine's pool */
  draftPlanned: boolean;
  /** the case's seed (what its Rng was made from): the slow readers' delays are drawn from it too */
  seed: number;
}

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng.uniform() * xs.length)]!;
const int = (rng: Rng, lo: number, hi: number) => lo + Math.floor(rng.uniform() * (hi - lo + 1));
const chance = (rng: Rng, p: number) => rng.uniform() < p;

/**
 * blocks a request's worst case needs (the scheduler's rule, without cached blocks): to size the
 * pool so every job is admissible. `draftPlanned`: its draft model's pool is planned, its rows not
 * charged to the engine's pool (any plan: only whether there is one counts here)
 */
function worstBlocks(engine: Engine, p: RequestParams, draftPlanned: boolean): number {
  // the engine refuses at submit what exceeds the pool; ask it with a pool of `blocks` until it takes the request
  for (let blocks = 1; ; blocks++) {
    const e = new Engine(engine.model, engine.tokenizer, { contextSize: CONTEXT, kvCacheBytes: blocks * 16 * engine.bytesPerToken, maxSequences: 16 });
    if (draftPlanned && p.decoding.kind === "speculative" && p.decoding.draft) e.planDraftCache(p.decoding.draft, p.decoding.draftTokens ?? 1);
    try {
      const r = e.submit({ ...p, signal: AbortSignal.abort() });
      e.close();
      void r.outcome.catch(() => undefined);
      return blocks;
    } catch (err) {
      e.close();
      if (!(err instanceof RequestError) || !/KV cache/.test(err.message)) throw err;
    }
  }
}

async function makeCase(seed: number): Promise<Case> {
  const rng = new Rng(seed);
  const target = pick(rng, targets);
  const { model } = target;
  const admission: Admission = chance(rng, 0.75) || opts.bursts ? "preempt" : "reserve";
  // a burst: every request long (60 tokens to the context, end-of-text ignored, few stop strings and
  // late aborts), so the pool runs out again and again (half the "preempt" cases: with a third, and
  // stop strings and aborts as often as elsewhere, 7 preemptions in 30 cases of seeds 1-3)
  const burst = (admission === "preempt" && chance(rng, 0.5)) || opts.bursts;
  const vocab = Math.min(model.info.vocabSize, model.tokenizer.vocabSize);
  const tok = () => int(rng, 3, vocab - 1);
  // prompts grow from a few stems (shared prefixes, often past a 16-token block)
  const stems = Array.from({ length: int(rng, 1, 4) }, () => Array.from({ length: int(rng, 0, 90) }, tok));
  const jobs: Job[] = [];
  // (--bursts: at least 4 requests, and below up to 8 sequences at once, so the pool runs out)
  const count = Math.max(opts.bursts ? 4 : 1, int(rng, 1, 12));
  const stopPieces = Array.from({ length: 8 }, () => model.tokenizer.decode([tok()]).trim().slice(0, int(rng, 1, 2))).filter((s) => s.length > 0);
  let arrival = 0;
  for (let i = 0; i < count; i++) {
    const stem = pick(rng, stems);
    const cut = chance(rng, 0.5) ? stem.length : int(rng, 0, stem.length);
    let promptTokens = [...(chance(rng, 0.7) ? [1] : []), ...stem.slice(0, cut), ...Array.from({ length: int(rng, chance(rng, 0.2) ? 0 : 1, 20) }, tok)];
    if (promptTokens.length === 0) promptTokens = [tok()];
    // a prompt equal to an earlier one, sometimes (a whole prompt cached)
    const reuse = jobs.length > 0 ? rng.uniform() : 1;
    if (reuse < 0.15) promptTokens = [...pick(rng, jobs).params.promptTokens];
    // or a chat's next turn: an earlier prompt, its reply (as it runs alone) and more
    else if (reuse < 0.3) {
      const earlier = pick(rng, jobs);
      const reply = (await soloOf(target, earlier)).outcome?.choices[0]?.completionTokens ?? [];
      promptTokens = [...earlier.params.promptTokens, ...reply, ...Array.from({ length: int(rng, 1, 8) }, tok)].slice(0, CONTEXT - 48);
    }
    const greedy = chance(rng, 0.5);
    const sampling = greedy ? { temperature: 0, seed: 0 } : {
      temperature: pick(rng, [0.3, 0.8, 1.2, 2]), topK: pick(rng, [0, 5, 40]), topP: pick(rng, [1, 0.9, 0.5]), minP: pick(rng, [0, 0.05]),
      repeatPenalty: pick(rng, [1, 1, 1.3]), seed: int(rng, 0, 1e6), ...(chance(rng, 0.2) ? { logitBias: { [tok()]: 5, [tok()]: -Infinity } } : {}),
      ...(chance(rng, 0.3) ? { presencePenalty: pick(rng, [0.5, -0.5, 1.5]), frequencyPenalty: pick(rng, [0, 0.4, 1]), repeatLastN: pick(rng, [-1, 0, 8, 64]) } : {}),
      ...(chance(rng, 0.1) ? { typicalP: pick(rng, [0.5, 0.9]) } : {}),
    };
    // greedy with penalties or a bias too: they change the argmax, and the history they read is the sequence's own
    if (greedy && chance(rng, 0.2)) Object.assign(sampling, { repeatPenalty: 1.5, frequencyPenalty: 0.5, presencePenalty: 0.3, logitBias: { [tok()]: 3 } });
    // (a burst's requests are all of the preemptible kinds and arrive together: sampling, one choice
    // or n recomputed together, beam search (kind 0.15), speculative decoding by prompt lookup (0.25)
    // or drafting with the model itself (0.3) or another (0.34))
    const kind = burst ? pick(rng, [1, 1, 1, 1, 0.15, 0.15, 0.25, 0.3, 0.34]) : rng.uniform();
    // no tokens, a few, or past the context (a sequence that fills it ends with "length")
    const size = rng.uniform();
    // (under "preempt" a third of them up to the context, as a server gives a request without max_tokens: they outgrow the pool)
    // (a burst's beam searches shorter: their worst case, which sizes the pool, is beams x maxTokens, so the others' run out too)
    const maxTokens = burst ? (kind === 0.15 ? int(rng, 16, 60) : int(rng, 60, CONTEXT)) : size < 0.05 ? 0 : size < (admission === "preempt" ? 0.35 : 0.1) ? CONTEXT : int(rng, 1, 40);
    // n choices (under "preempt" a quarter of the requests, bursts included: preempted and recomputed as a group)
    const choices = admission === "preempt" ? (burst ? chance(rng, 0.35) : kind < 0.12 || (kind >= 0.36 && kind < 0.5)) : kind < 0.12;
    let decoding: RequestParams["decoding"] = { kind: "sample", n: choices ? int(rng, 2, admission === "preempt" ? 4 : 3) : 1 };
    if (kind >= 0.12 && kind < 0.22) decoding = { kind: "beam", numBeams: int(rng, 2, 3), ...(chance(rng, 0.3) ? { earlyStopping: true } : {}), ...(chance(rng, 0.3) ? { noRepeatNgramSize: 2 } : {}) };
    else if (kind >= 0.22 && kind < 0.28) decoding = { kind: "speculative", promptLookup: int(rng, 1, 3), draftTokens: int(rng, 1, 6) };
    let draft: Target | undefined;
    if (kind >= 0.28 && kind < 0.36) {
      // the model itself, or another model of the same vocabulary (its own shape and cache types: a second draft pool)
      const others = targets.filter((t) => t !== target && t.model.info.vocabSize === model.info.vocabSize);
      draft = kind < 0.33 || others.length === 0 ? target : pick(rng, others);
      decoding = { kind: "speculative", draft: draft.model.languageModel, draftTokens: int(rng, 1, 5) };
    }
    const plain = decoding.kind === "sample";
    // a constraint on what the output may be (the grammar's parse state is per sequence: forks and beams copy it)
    const constraint = !burst && chance(rng, 0.15) ? pick(rng, CONSTRAINTS) : undefined;
    const params: RequestParams = {
      promptTokens, decoding, sampling, maxTokens,
      // (a burst's rarely: a stop string of one or two characters ends most replies within a few tokens, before the pool runs out)
      stop: chance(rng, burst ? 0.1 : 0.3) && stopPieces.length > 0 ? [pick(rng, stopPieces)] : [],
      // (two random stop tokens end about half of 200-token replies: a burst's rarely have them)
      stopTokens: chance(rng, burst ? 0.05 : 0.15) ? [tok(), tok()] : [],
      ignoreEos: burst || chance(rng, 0.5),
      topLogprobs: plain && chance(rng, 0.3) ? pick(rng, [0, 1, 3]) : undefined,
      ...(plain && chance(rng, 0.15) ? { promptLogprobs: pick(rng, [0, 2]) } : {}),
      ...(constraint ? { constraint } : {}),
    };
    // a stop string across a token boundary of what an earlier request says alone: its end of one token and the start of the next
    const earlierStop = jobs.length > 0 && chance(rng, burst ? 0.05 : 0.2) ? await stopAcrossTokens(rng, target, pick(rng, jobs)) : undefined;
    if (earlierStop) {
      Object.assign(params, { ...earlierStop.job.params, stop: [earlierStop.stop], ...(chance(rng, 0.5) ? { decoding } : {}) });
      // (the earlier request's logprobs go only with sampling, as Model.submit requires)
      if (params.decoding.kind !== "sample") Object.assign(params, { topLogprobs: undefined });
    }
    if (!burst && chance(rng, 0.5)) arrival += int(rng, 0, 6);
    const abort = rng.uniform();
    const drafting = params.decoding.kind === "speculative" ? targets.find((t) => t.model.languageModel === (params.decoding as { draft?: LanguageModel }).draft) : undefined;
    // (a burst's aborts fewer and later: most while it decodes, some while it is preempted)
    const abortAt = abort < (burst ? 0.1 : 0.2) ? arrival + int(rng, 0, burst ? 150 : 25) : -1;
    jobs.push({ params, arriveAt: arrival, abortAt, preAborted: abort > 0.98, ...(drafting ? { draft: drafting } : {}) });
  }
  // a pool just big enough for the largest request, or a little more: admission waits, cached prefixes are evicted
  // (half the time at most one block spare: cached prefixes are evicted under pressure and recomputed by the next request needing them)
  // under "preempt" 70% of the time exactly that: requests admitted on their prompts outgrow it, and the newest are preempted
  const spare = rng.uniform();
  const extraBlocks = admission === "preempt" && spare < 0.7 ? 0 : spare < 0.5 ? int(rng, 0, 1) : spare < 0.7 ? int(rng, 2, 3) : int(rng, 4, 40);
  const widest = Math.max(...jobs.map((j) => (j.params.decoding.kind === "sample" ? j.params.decoding.n : j.params.decoding.kind === "beam" ? j.params.decoding.numBeams : 1)));
  const maxSequences = int(rng, admission === "preempt" ? Math.max(widest, 4) : widest, 8);
  // (a burst's budget seldom tiny: decodes take it first, so with 1 or 2 tokens a step the others' prompts wait for them to end)
  const maxBatchTokens = pick(rng, burst ? [2, 16, 33, 64, 128] : [1, 2, 5, 16, 33, 64, 128]);
  // the context the draft pools are planned for: serve's (the whole context) or less, a pool that
  // concurrent drafting requests (or a long one alone) outgrow, so rounds find no room and later find it again
  const draftContext = chance(rng, 0.3) ? CONTEXT : int(rng, 32, CONTEXT / 2);
  // a fifth of the cases leave the draft pools unplanned, as a library caller's draft model: the
  // admission then charges their rows to the engine's pool, which a planned pool's are not
  // (drawn last, so the cases' other draws are what they were before it)
  const draftPlanned = !chance(rng, 0.2);
  const probe = new Engine(model.languageModel, model.tokenizer, { contextSize: CONTEXT });
  // (the largest worst case counts a draft's rows only where its pool has no plan, as the engine does)
  const kvBlocks = Math.max(...jobs.map((j) => worstBlocks(probe, j.params, draftPlanned))) + extraBlocks;
  const sequences = opts.bursts ? Math.max(widest, 8) : maxSequences;
  // a third of the requests pinned to a slot (serve's id_slot), a few cases all of them to one slot
  // (the others pass them while it is busy; drawn after the rest, so the cases' other draws are what they were)
  const crowded = chance(rng, 0.15) ? int(rng, 0, sequences - 1) : undefined;
  for (const j of jobs) {
    if (chance(rng, 1 / 3)) j.params = { ...j.params, slot: crowded ?? int(rng, 0, sequences - 1) };
  }
  // slow readers for a third of the requests (drawn last, so the cases' other draws are what they were)
  for (const j of jobs) {
    if (!chance(rng, 1 / 3)) continue;
    const kinds: SlowReader["kind"][] = ["delays", "pause", "pause", "bursts", "leave", ...(admission === "preempt" ? (["stall", "stall"] as const) : [])];
    const kind = pick(rng, kinds);
    // (pauses and stalls past 64 events: the request pauses on its backlog)
    j.reader = kind === "delays" ? { kind, maxMs: pick(rng, [1, 3, 10]) } : kind === "pause" ? { kind, after: int(rng, 0, 20), passes: pick(rng, [5, 40, 120]) } : kind === "bursts" ? { kind, size: int(rng, 2, 80), passes: int(rng, 1, 70) } : { kind, after: int(rng, 0, 30) };
  }
  return { target, maxSequences: sequences, maxBatchTokens, kvBlocks, admission, burst, jobs, draftContext, draftPlanned, seed };
}

/** grammars, JSON Schemas, regexes and choices the requests may be held to */
const CONSTRAINTS: readonly NonNullable<RequestParams["constraint"]>[] = [
  { json: "object" },
  { jsonSchema: { type: "object", properties: { name: { type: "string", maxLength: 8 }, age: { type: "integer", minimum: 0, maximum: 120 } }, required: ["name", "age"] } },
  { jsonSchema: { type: "array", items: { enum: ["cat", "dog", "a b"] }, minItems: 1, maxItems: 3 } },
  { choice: ["yes", "no", "maybe so", "the end"] },
  { regex: "[A-Z][a-z]{2,8} \\d{1,3}(\\.\\d+)?" },
  { grammar: 'root ::= "Once " [a-z ]{1,20} ("." | "!")' },
];

/**
 * A stop string that crosses a token boundary of the job's solo completion (the last characters
 * of one token's text and the first of the next), with the job it came from; undefined when the
 * completion has no such boundary
 */
async function stopAcrossTokens(rng: Rng, target: Target, job: Job): Promise<{ job: Job; stop: string } | undefined> {
  const tokens = (await soloOf(target, job)).outcome?.choices[0]?.completionTokens ?? [];
  const decode = (t: readonly number[]) => target.model.tokenizer.decode(t, { skipSpecialTokens: true });
  const text = decode(tokens);
  const cuts: number[] = [];
  for (let j = 1; j < tokens.length; j++) {
    const head = decode(tokens.slice(0, j));
    if (head.length > 0 && head.length < text.length && text.startsWith(head)) cuts.push(head.length);
  }
  if (cuts.length === 0) return undefined;
  const at = pick(rng, cuts);
  const stop = text.slice(Math.max(0, at - int(rng, 1, 3)), at + int(rng, 1, 3));
  return stop.trim().length > 0 ? { job, stop } : undefined;
}

/** a job's parameters as text (no model objects) */
function describe(j: Job): string {
  const d = j.params.decoding.kind === "speculative" ? { ...j.params.decoding, draft: j.draft?.name } : j.params.decoding;
  return JSON.stringify({ ...j.params, decoding: d, arriveAt: j.arriveAt, abortAt: j.abortAt, preAborted: j.preAborted || undefined, reader: j.reader });
}

interface Internals {
  pool: KVBlockPool | undefined;
  scheduler: { waiting: EngineRequest[]; running: EngineRequest[] } | undefined;
  draftPools: WeakMap<LanguageModel, KVBlockPool>;
}
const internals = (e: Engine) => e as unknown as Internals;

/** every block's reference count against the live sequences holding it; "" when they agree */
function auditRefs(engine: Engine): string {
  const { pool, scheduler } = internals(engine);
  if (!pool || !scheduler) return "";
  const held = new Map<number, number>();
  for (const r of scheduler.running) for (const s of r.sequences) for (const b of s.cache.blockIds) held.set(b, (held.get(b) ?? 0) + 1);
  const bad: string[] = [];
  let inUse = 0;
  for (let b = 0; b < pool.blockCount; b++) {
    const refs = pool.references(b), want = held.get(b) ?? 0;
    if (refs > 0) inUse++;
    if (refs !== want) bad.push(`block ${b}: ${refs} references, ${want} live sequences hold it`);
  }
  if (inUse !== pool.stats.blocksInUse) bad.push(`stats say ${pool.stats.blocksInUse} blocks in use, ${inUse} are referenced`);
  if (pool.availableBlocks + inUse !== pool.blockCount) bad.push(`${pool.availableBlocks} available + ${inUse} in use != ${pool.blockCount} blocks`);
  return bad.slice(0, 5).join("; ");
}

/**
 * the slots of the running requests (the engine's, synced before the pass): each running request
 * holds one slot per place, no slot two places; a pinned one's first place is its slot; a pinned
 * request still waiting while its slot is free was not passed over by a request behind it in the
 * queue (`queue`: the waiting queue as the step found it). "" when all holds
 */
function auditSlots(engine: Engine, queue: readonly EngineRequest[], index: (r: EngineRequest) => number): string {
  const s = internals(engine).scheduler;
  if (!s) return "";
  const bad: string[] = [];
  const holder = new Map<number, EngineRequest>();
  for (const r of s.running) {
    for (let place = 0; place < r.strategy.width; place++) {
      const id = r.slots[place];
      if (id === undefined) { bad.push(`request ${index(r)} runs without a slot for its place ${place}`); continue; }
      const other = holder.get(id);
      if (other !== undefined) bad.push(`slot ${id} held by request ${index(other)} and request ${index(r)} at once`);
      holder.set(id, r);
    }
    if (r.params.slot !== undefined && r.slots[0] !== r.params.slot) bad.push(`request ${index(r)} pinned to slot ${r.params.slot} runs in slot ${r.slots[0]}`);
  }
  const started = new Set(s.running.filter((r) => queue.includes(r)));
  for (const [w, r] of queue.entries()) {
    const pin = r.params.slot;
    // (one preempted while its reader lagged waits for its reader, passed meanwhile)
    if (pin === undefined || !s.waiting.includes(r) || holder.has(pin) || r.backlog > 64) continue;
    const passed = queue.slice(w + 1).filter((x) => started.has(x));
    if (passed.length > 0) bad.push(`request ${index(r)} waits for slot ${pin}, which is free, while request ${passed.map(index).join(", ")} behind it started`);
  }
  return bad.slice(0, 5).join("; ");
}

interface Got {
  outcome?: RequestOutcome; error?: unknown; events: RequestEvent[]; aborted: boolean; /** times the engine preempted it */ preemptions: number;
  /** its slow reader left mid-way (cancelled it): its events are a prefix of what it emitted */
  left?: boolean;
}

/** slow readers' counts over the run: requests read slowly, paused on their backlog, preempted while their reader lagged, left mid-way, stalls released by the no-progress bound */
const slow = { readers: 0, paused: 0, preemptedBehind: 0, left: 0, stalls: 0, stallsBounded: 0 };
/** how long no pass may run while a stalled reader waits on requests that could run before the stall is released (a request held back by it) */
const STALL_BOUND_MS = 5000;

/** the case's jobs through one engine, arrivals and aborts at their passes; defects found on the way go to `defects` */
async function runBatch(c: Case, defects: string[]): Promise<Got[]> {
  const tokenizer = c.target.model.tokenizer;
  let pass = 0;
  let engine!: Engine;
  const got: Got[] = c.jobs.map(() => ({ events: [], aborted: false, preemptions: 0 }));
  const controllers = c.jobs.map(() => new AbortController());
  const settled: Promise<void>[] = [];
  const requests: EngineRequest[] = [];
  /** the waiting queue after the last pass (the order the next step admits in) */
  let queue: EngineRequest[] = [];
  let submitted = 0;
  const submitDue = () => {
    while (submitted < c.jobs.length && c.jobs[submitted]!.arriveAt <= pass) {
      const i = submitted++;
      const job = batchJobs[i]!;
      if (job.preAborted) controllers[i]!.abort();
      const request = engine.submit({ ...job.params, signal: controllers[i]!.signal });
      requests[i] = request;
      settled.push((async () => {
        try {
          await read(i, request, job.reader);
          got[i]!.outcome = await request.outcome;
        } catch (e) {
          got[i]!.error = e;
        }
        got[i]!.preemptions = request.preemptions;
        done[i] = true;
      })());
    }
  };
  /** which requests have settled, and whose reader is waiting on purpose (paused, stalled) */
  const done: boolean[] = c.jobs.map(() => false);
  const holding: boolean[] = c.jobs.map(() => false);
  /** readers that stopped waiting on purpose so far: each is progress as a pass is (the engine has a reader to run for again) */
  let resumed = 0;
  /** the delays readers' waits, drawn from the case's seed (not Math.random): a seed's run waits as it did */
  const delays = new Rng(c.seed ^ 0x5eed1e55);
  const tick = () => new Promise((r) => setTimeout(r, 1));
  /** waits until `passes` more passes ran, or none ran for 100 ms (the engine waits for this reader, or on nothing) */
  const awaitPasses = async (passes: number) => {
    const until = pass + passes;
    let last = pass, since = Date.now();
    while (pass < until && Date.now() - since < 100) {
      await tick();
      if (pass !== last) [last, since] = [pass, Date.now()];
    }
  };
  /** the request's events, read as its reader reads them */
  const read = async (i: number, request: EngineRequest, reader: SlowReader | undefined) => {
    if (reader) slow.readers++;
    const it = request[Symbol.asyncIterator]();
    let n = 0;
    const hold = async (what: () => Promise<void>) => {
      holding[i] = true;
      const preemptions = request.preemptions;
      await what();
      if (request.backlog > 64) slow.paused++;
      if (request.preemptions > preemptions) slow.preemptedBehind++;
      holding[i] = false;
      resumed++;
    };
    for (;;) {
      if (reader?.kind === "leave" && n === reader.after) {
        // as Model.submit's events() when its caller breaks out: the request is cancelled
        await it.return?.();
        request.cancel();
        got[i]!.left = true;
        slow.left++;
        return;
      }
      if (reader?.kind === "pause" && n === reader.after) await hold(() => awaitPasses(reader.passes));
      if (reader?.kind === "bursts" && n > 0 && n % reader.size === 0) await hold(() => awaitPasses(reader.passes));
      if (reader?.kind === "stall" && n === reader.after) {
        slow.stalls++;
        await hold(async () => {
          // until every other request has settled; a pass must run meanwhile while another can
          // (one read at once, pinned to this one's slot or not). Another reader reading on is
          // progress too: two stalled readers, each waiting for the other to settle, are both
          // released by the bound, and the first released (reading on, its request resuming) was
          // held back by nobody (before, the second's bound, a few ms later, found it not holding
          // and not settled, and blamed the second stall for the 5 s the first waited on purpose)
          let last = pass, lastResumed = resumed, since = Date.now();
          while (done.some((d, j) => !d && j !== i)) {
            await tick();
            if (pass !== last || resumed !== lastResumed) [last, lastResumed, since] = [pass, resumed, Date.now()];
            if (Date.now() - since < STALL_BOUND_MS) continue;
            const heldBack = c.jobs.map((_, j) => j).filter((j) => j !== i && !done[j] && !holding[j] && j < submitted);
            if (heldBack.length > 0) defects.push(`request ${i}'s stalled reader (${n} events read, backlog ${request.backlog}) held back request ${heldBack.join(", ")}: no pass for ${STALL_BOUND_MS} ms`);
            slow.stallsBounded++;
            break;
          }
        });
      }
      if (reader?.kind === "delays") await new Promise((r) => setTimeout(r, Math.floor(delays.uniform() * (reader.maxMs + 1))));
      const e = await it.next();
      if (e.done) return;
      got[i]!.events.push(e.value);
      n++;
    }
  };
  const onPass = () => {
    pass++;
    const audit = auditRefs(engine);
    if (audit) defects.push(`before pass ${pass}: ${audit}`);
    const slotted = auditSlots(engine, queue, (r) => requests.indexOf(r));
    if (slotted) defects.push(`before pass ${pass}: ${slotted}`);
    c.jobs.forEach((j, i) => {
      if (j.abortAt >= 0 && j.abortAt <= pass && i < submitted && !controllers[i]!.signal.aborted) controllers[i]!.abort();
    });
    submitDue();
    queue = [...(internals(engine).scheduler?.waiting ?? [])];
  };
  // the model with a hook before each engine pass (the same object drafts for itself, so passes stay queued on one model)
  const hooked: LanguageModel = new Proxy(c.target.model.languageModel, {
    get(m, key) {
      if (key === "passBatch") {
        return (seqs: Parameters<LanguageModel["passBatch"]>[0]) => {
          onPass();
          return m.passBatch(seqs);
        };
      }
      const v = Reflect.get(m, key, m);
      return typeof v === "function" ? v.bind(m) : v;
    },
  });
  // cacheReplies false: a chat turn through an earlier reply must then match its solo run bit for bit
  // (with the default, the reply's rows come from one-row passes and may differ in the last bits)
  engine = new Engine(hooked, tokenizer, { contextSize: CONTEXT, kvCacheBytes: c.kvBlocks * 16 * c.target.model.engine.bytesPerToken, maxSequences: c.maxSequences, maxBatchTokens: c.maxBatchTokens, sliceMs: 0, cacheReplies: false, admission: c.admission });
  // the model drafting for itself drafts through the hooked object: its passes queue on the one model with the engine's
  const batchJobs = c.jobs.map((j): Job => (j.draft === c.target && j.params.decoding.kind === "speculative" ? { ...j, params: { ...j.params, decoding: { ...j.params.decoding, draft: hooked } } } : j));
  // each draft model's KV pool planned as serve plans it (loadDraftBeside: a context and a round of
  // the most tokens its requests propose, which serve holds them to), of the case's draftContext:
  // the drafting requests share it, and a round it has no room for proposes nothing (plain decoding)
  // until a later one finds room
  const rounds = new Map<LanguageModel, number>();
  for (const j of batchJobs) {
    const d = j.params.decoding;
    if (d.kind === "speculative" && d.draft) rounds.set(d.draft, Math.max(rounds.get(d.draft) ?? 1, d.draftTokens ?? 1));
  }
  if (c.draftPlanned) for (const [draft, draftTokens] of rounds) engine.planDraftCache(draft, draftTokens, c.draftContext);
  submitDue();
  // arrivals past the last pass (nothing left running) come now, one pass's worth at a time
  const deadline = Date.now() + opts.timeoutS * 1000;
  for (;;) {
    const before = settled.length;
    const all = Promise.all(settled);
    // a timer that holds the process: an engine stalled with nothing pending (a leaked block
    // holding admission back) would otherwise let node exit quietly, as if all was well
    let timeout: NodeJS.Timeout | undefined;
    const timer = new Promise<"hang">((r) => (timeout = setTimeout(() => r("hang"), Math.max(0, deadline - Date.now()))));
    const settledOrHang = await Promise.race([all, timer]);
    clearTimeout(timeout);
    if (settledOrHang === "hang") {
      const s = internals(engine).scheduler;
      defects.push(`hang: not settled after ${opts.timeoutS} s (waiting ${s?.waiting.length}, running ${s?.running.length}, pass ${pass}, kv ${JSON.stringify(internals(engine).pool?.stats)})`);
      engine.close();
      return got;
    }
    if (submitted === c.jobs.length && settled.length === before) break;
    pass = Math.max(pass, c.jobs[submitted]?.arriveAt ?? pass);
    submitDue();
  }
  got.forEach((g, i) => (g.aborted = controllers[i]!.signal.aborted || g.left === true));
  // a pinned request that ran: its first choice ran in its slot (what serve reports as id_slot)
  c.jobs.forEach((j, i) => {
    const pin = j.params.slot, ran = requests[i]?.slots[0];
    if (pin !== undefined) pinned++;
    if (pin !== undefined && ran !== undefined && ran !== pin) defects.push(`request ${i}: pinned to slot ${pin}, its first choice ran in slot ${ran}`);
    if (pin !== undefined && ran === undefined && !got[i]!.aborted) defects.push(`request ${i}: pinned to slot ${pin}, finished without running in a slot`);
  });
  // settled: nothing queued or running, no block in use, every draft pool empty
  const { pool, scheduler, draftPools } = internals(engine);
  evictions += pool?.stats.evictions ?? 0;
  preemptions += engine.stats.preemptions;
  preempted += got.filter((g) => g.preemptions > 0).length;
  preemptedGroups += got.filter((g, i) => g.preemptions > 0 && c.jobs[i]!.params.decoding.kind === "sample" && (c.jobs[i]!.params.decoding as { n: number }).n > 1).length;
  preemptedBeams += got.filter((g, i) => g.preemptions > 0 && c.jobs[i]!.params.decoding.kind === "beam").length;
  preemptedSpeculative += got.filter((g, i) => g.preemptions > 0 && c.jobs[i]!.params.decoding.kind === "speculative").length;
  preemptedDrafting += got.filter((g, i) => g.preemptions > 0 && c.jobs[i]!.draft !== undefined).length;
  draftFallbacks += engine.stats.draftFallbacks;
  draftResumes += engine.stats.draftResumes;
  if (scheduler && (scheduler.waiting.length > 0 || scheduler.running.length > 0)) defects.push(`settled with ${scheduler.waiting.length} waiting, ${scheduler.running.length} running`);
  if (pool && pool.stats.blocksInUse !== 0) defects.push(`leak: ${pool.stats.blocksInUse} blocks still in use after every request settled (${auditRefs(engine) || "no live sequence holds them"})`);
  for (const draft of new Set(batchJobs.map((j) => (j.params.decoding.kind === "speculative" ? j.params.decoding.draft : undefined)))) {
    const p = draft && draftPools.get(draft);
    if (p && p.stats.blocksInUse !== 0) defects.push(`leak: the draft pool of ${draft === hooked ? "the model itself" : "another model"} has ${p.stats.blocksInUse} blocks in use after every request settled`);
  }
  engine.close();
  return got;
}

const solos = new Map<Job, Promise<{ outcome?: RequestOutcome; error?: unknown }>>();
/** the job's solo run (once) */
function soloOf(t: Target, job: Job): Promise<{ outcome?: RequestOutcome; error?: unknown }> {
  let r = solos.get(job);
  if (!r) solos.set(job, (r = runSolo(t, job)));
  return r;
}

/** the job alone on a fresh engine (default pool, nothing cached) */
async function runSolo(t: Target, job: Job): Promise<{ outcome?: RequestOutcome; error?: unknown }> {
  const engine = new Engine(t.model.languageModel, t.model.tokenizer, { contextSize: CONTEXT, maxSequences: 16 });
  try {
    const params = job.params;
    return { outcome: await engine.submit(params).outcome };
  } catch (error) {
    return { error };
  } finally {
    engine.close();
  }
}

const isPrefix = (a: readonly number[], b: readonly number[]) => a.length <= b.length && a.every((x, i) => x === b[i]);

/**
 * whether a preempted request's logprobs are the solo ones up to the last bits: its recomputed
 * rows (a chunk) differ in the last bits from the solo's decoded ones (one row a pass)
 */
function closeLogprobs(x: RequestOutcome["choices"][number]["logprobs"], y: typeof x): boolean {
  if (!x || !y) return x === y;
  const near = (a: number, b: number) => a === b || Math.abs(a - b) < 1e-3;
  return x.length === y.length && x.every((l, i) => l.token === y[i]!.token && near(l.logprob, y[i]!.logprob) && l.top.length === y[i]!.top.length && l.top.every((t, j) => near(t.logprob, y[i]!.top[j]!.logprob)));
}

/**
 * whether a preempted beam search's beams are the solo ones: the same hypotheses in the same order
 * (tokens, text, end), their scores up to the last bits (recomputed rows, as closeLogprobs)
 */
function closeBeams(x: RequestOutcome["extra"]["beams"], y: typeof x): boolean {
  if (!x || !y) return x === y;
  const near = (a: number, b: number, d: number) => a === b || Math.abs(a - b) < d;
  return x.length === y.length && x.every((b, i) => JSON.stringify(b.tokens) === JSON.stringify(y[i]!.tokens) && b.text === y[i]!.text && b.finished === y[i]!.finished && near(b.score, y[i]!.score, 1e-4) && near(b.sumLogprobs, y[i]!.sumLogprobs, 1e-3));
}

/** how the batched result differs from the solo one ("" when it does not) */
function compare(job: Job, got: Got, solo: { outcome?: RequestOutcome; error?: unknown }): string {
  if (solo.error !== undefined) {
    if (got.error === undefined) return `solo failed (${String(solo.error)}) but the batch's run did not`;
    return String(got.error) === String(solo.error) ? "" : `batch failed with ${String(got.error)}, solo with ${String(solo.error)}`;
  }
  if (got.error !== undefined) return `failed in the batch: ${(got.error as Error).stack ?? String(got.error)}`;
  const a = got.outcome!, b = solo.outcome!;
  if (a.choices.length !== b.choices.length) return `${a.choices.length} choices, solo ${b.choices.length}`;
  // rounds that found no room in the draft's planned pool proposed nothing (the solo run's pool, of
  // no plan, always has room): greedy tokens are still the solo ones, the rounds and proposals not;
  // a sampled request's draws then follow other rounds (as exact a sample, not the same one)
  const fellBack = (a.extra.speculative?.fallbackRounds ?? 0) > 0;
  const sampledFallback = fellBack && job.params.sampling.temperature !== 0;
  for (let i = 0; i < a.choices.length; i++) {
    const x = a.choices[i]!, y = b.choices[i]!;
    const aborted = x.finishReason === "abort";
    if (aborted && !got.aborted) return `choice ${i} finished "abort" but its request was not aborted`;
    if (sampledFallback) continue;
    if (aborted) {
      if (job.params.decoding.kind === "beam") continue; // beam search emits its best hypothesis so far: not a prefix of the solo one
      if (!isPrefix(x.completionTokens, y.completionTokens)) return `choice ${i} (aborted): tokens ${JSON.stringify(x.completionTokens)} are not a prefix of solo ${JSON.stringify(y.completionTokens)}`;
      const soloPrefix = y.logprobs?.slice(0, x.logprobs?.length);
      if (x.logprobs && soloPrefix && (got.preemptions > 0 ? !closeLogprobs(x.logprobs, soloPrefix) : JSON.stringify(x.logprobs) !== JSON.stringify(soloPrefix))) return `choice ${i} (aborted): logprobs differ from solo's prefix`;
      continue;
    }
    if (JSON.stringify(x.completionTokens) !== JSON.stringify(y.completionTokens)) return `choice ${i}: tokens ${JSON.stringify(x.completionTokens)}, solo ${JSON.stringify(y.completionTokens)}`;
    if (x.completion !== y.completion) return `choice ${i}: text ${JSON.stringify(x.completion)}, solo ${JSON.stringify(y.completion)}`;
    if (x.finishReason !== y.finishReason) return `choice ${i}: finish ${x.finishReason}, solo ${y.finishReason}`;
    if (got.preemptions > 0 ? !closeLogprobs(x.logprobs, y.logprobs) : JSON.stringify(x.logprobs) !== JSON.stringify(y.logprobs)) return `choice ${i}: logprobs differ${got.preemptions > 0 ? " by 1e-3 or more (preempted)" : ""} (${JSON.stringify(x.logprobs)?.slice(0, 300)} vs ${JSON.stringify(y.logprobs)?.slice(0, 300)})`;
  }
  if (!got.aborted) {
    if (JSON.stringify(a.promptLogprobs) !== JSON.stringify(b.promptLogprobs)) return `promptLogprobs differ`;
    if (got.preemptions > 0 ? !closeBeams(a.extra.beams, b.extra.beams) : JSON.stringify(a.extra.beams) !== JSON.stringify(b.extra.beams)) {
      return `beams differ${got.preemptions > 0 ? " (preempted: tokens, text, order, scores within 1e-4)" : ""}: ${JSON.stringify(a.extra.beams)?.slice(0, 300)} vs ${JSON.stringify(b.extra.beams)?.slice(0, 300)}`;
    }
    // the same rounds, proposals and acceptances: each proposal verified once, as alone
    if (!fellBack && JSON.stringify(a.extra.speculative) !== JSON.stringify(b.extra.speculative)) return `speculative stats ${JSON.stringify(a.extra.speculative)}, solo ${JSON.stringify(b.extra.speculative)}`;
  }
  // the events say the same as the outcome: each choice's tokens in order, one end each
  for (let i = 0; i < a.choices.length; i++) {
    const tokens = got.events.filter((e) => e.choice === i && e.step?.token !== undefined).map((e) => e.step!.token!);
    const ends = got.events.filter((e) => e.choice === i && e.finishReason !== undefined);
    // (a reader that left read a prefix of them)
    if (got.left) {
      if (job.params.decoding.kind !== "beam" && !isPrefix(tokens, a.choices[i]!.completionTokens)) return `choice ${i}: events read before leaving carried ${JSON.stringify(tokens)}, not a prefix of the outcome's ${JSON.stringify(a.choices[i]!.completionTokens)}`;
      if (ends.length > 1) return `choice ${i}: ${ends.length} end events`;
      continue;
    }
    if (job.params.decoding.kind !== "beam" && JSON.stringify(tokens) !== JSON.stringify(a.choices[i]!.completionTokens)) return `choice ${i}: events carried ${JSON.stringify(tokens)}, the outcome ${JSON.stringify(a.choices[i]!.completionTokens)}`;
    // (a request aborted before its prompt was computed ends without an event: the server reads it so)
    if (ends.length !== 1 && !(got.aborted && ends.length === 0 && a.prefilledAt === 0)) return `choice ${i}: ${ends.length} end events`;
  }
  return "";
}

let pinned = 0;
let defectsTotal = 0, requests = 0, aborted = 0, llamaChecked = 0, evictions = 0, preemptions = 0, preempted = 0, preemptedGroups = 0, preemptedBeams = 0, preemptedSpeculative = 0, preemptedDrafting = 0, draftFallbacks = 0, draftResumes = 0;
const t0 = performance.now();
const first = opts.onlyCase ?? 0, last = opts.onlyCase ?? opts.cases - 1;
for (let k = first; k <= last; k++) {
  const c = await makeCase(opts.seed * 100003 + k);
  const defects: string[] = [];
  const preemptedBefore = preemptions;
  const got = await runBatch(c, defects);
  for (const [i, job] of c.jobs.entries()) {
    requests++;
    if (got[i]!.aborted) aborted++;
    const solo = await soloOf(c.target, job);
    const diff = compare(job, got[i]!, solo);
    if (diff) defects.push(`request ${i}${got[i]!.preemptions > 0 ? ` (preempted ${got[i]!.preemptions}x)` : ""} ${describe(job)}: ${diff}`);
    const p = job.params, sp = p.sampling;
    const plainGreedy = sp.temperature === 0 && (sp.repeatPenalty ?? 1) === 1 && !sp.presencePenalty && !sp.frequencyPenalty && sp.logitBias === undefined && p.constraint === undefined && p.decoding.kind === "sample" && p.decoding.n === 1;
    if (llamaGreedy && c.target.name === "stories260K" && plainGreedy && solo.outcome) {
      const ours = solo.outcome.choices[0]!.completionTokens;
      const theirs = await llamaGreedy(p.promptTokens, ours.length);
      llamaChecked++;
      const at = ours.findIndex((t, j) => t !== theirs[j]);
      if (at >= 0) defects.push(`request ${i}: solo greedy token ${at} is ${ours[at]}, llama.cpp's ${theirs[at]} (solo ${JSON.stringify(ours.slice(at))}, llama.cpp ${JSON.stringify(theirs.slice(at))}) ${describe(job)}`);
    }
  }
  solos.clear();
  const head = `seed ${opts.seed} case ${k} (${c.target.name}, ${c.jobs.length} requests, maxSequences ${c.maxSequences}, maxBatchTokens ${c.maxBatchTokens}, kv ${c.kvBlocks} blocks, ${c.draftPlanned ? `draft context ${c.draftContext}` : "draft pools unplanned"}, admission ${c.admission}${c.burst ? ", a burst" : ""}; ${preemptions - preemptedBefore} preemptions)`;
  if (opts.verbose) console.log(`${head}\n${c.jobs.map((j, i) => `  ${i}: ${describe(j)}`).join("\n")}`);
  if (defects.length > 0) {
    defectsTotal += defects.length;
    console.log(`DEFECT ${head}:\n  ${defects.join("\n  ")}`);
    if (!opts.verbose) console.log(c.jobs.map((j, i) => `  ${i}: ${describe(j)}`).join("\n"));
  }
}
for (const t of targets) t.model.dispose();
console.log(`${last - first + 1} cases, ${requests} requests (${aborted} aborted${llamaGreedy ? `, ${llamaChecked} greedy against llama.cpp` : ""}), ${evictions} cached prefix blocks evicted, ${preemptions} preemptions (${preempted} requests: ${preemptedGroups} with n choices, ${preemptedBeams} beam searches, ${preemptedSpeculative} speculative, ${preemptedDrafting} of them with a draft model), ${draftFallbacks} draft-pool fallbacks (${draftResumes} drafting again), seed ${opts.seed}: ${defectsTotal} defects, ${pinned} requests pinned to a slot, ${slow.readers} slow readers (${slow.paused} paused on their backlog, ${slow.preemptedBehind} preempted while their reader lagged, ${slow.left} left mid-way, ${slow.stalls} stalled till the others settled, ${slow.stallsBounded} of them released by the no-progress bound), ${((performance.now() - t0) / 1000).toFixed(1)} s`);
process.exit(defectsTotal > 0 ? 1 : 0);
