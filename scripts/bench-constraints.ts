/**
 * The cost of constrained decoding on a random-weight SmolLM-135M-shaped model (Q8_0), greedy and
 * sampled: time per output token without a JSON Schema (TPOT) and under one, and the constraint's
 * own time per token inside those requests — masks, token checks (greedy's tries of refused
 * tokens included, each a sampler call), the parse advanced, the grammar's per-vocabulary tables
 * set up, and its compilation — for a schema's first request
 * (every cache cold) and for the same schema again. Each run takes a schema never seen before
 * (its description differs), so every run's first request is a first one; figures are medians
 * over the runs. Greedy decoding masks only when none of its best few tokens is allowed;
 * sampling masks every step. The model is written once into the model cache; `--vocab NAME`
 * takes another vocabulary from ../shared's tokenizer-tests (e.g. deepseek-llm: 102k tokens), or
 * `--vocab llama3`: Llama 3's 128k vocabulary (src/testing/llama3-vocab.ts).
 *
 *   node --import tsx scripts/bench-constraints.ts [--vocab starcoder] [--runs 5] [--tokens 80] [--json]
 *
 * Not a test: the numbers are only as steady as the machine.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { median } from "../src/bench/stats.js";
import { flag, optionalNumber, optionalString, UsageError } from "../src/cli/args.js";
import { loadModel } from "../src/index.js";
import { compileConstraint, ConstraintVocabulary, TokenConstraint, type JsonSchema } from "../src/sampling/constraints/index.js";
import { TokenMasks } from "../src/sampling/constraints/token-masks.js";
import type { Sampler } from "../src/sampling/index.js";
import { GGMLType } from "../src/tensor/dtypes.js";
import { ensureLlama3Vocab, ensureRandomModel, SHARED_DIR, SMOLLM_135M } from "../src/testing/index.js";
import { noPositionals, scriptOptions } from "./script-args.js";

const USAGE = "Usage: node --import tsx scripts/bench-constraints.ts [--vocab starcoder|deepseek-llm|llama3|NAME] [--runs 5] [--tokens 80] [--json]\n" +
  "  TPOT with and without a JSON Schema, and the constraint's own time per token (SmolLM-135M shape, Q8_0, random weights)\n" +
  "  --vocab NAME: ../shared/tokenizer-tests/ggml-vocab-NAME.gguf's vocabulary (llama3: Llama 3's 128k one)";
const { args, vocab, runs, tokens } = scriptOptions(USAGE, { vocab: { type: "string" }, runs: { type: "string" }, tokens: { type: "string" }, json: { type: "boolean" } }, (values, positionals) => {
  noPositionals(positionals);
  return {
    args: values,
    vocab: ((v) => {
      if (v !== "llama3" && !existsSync(join(SHARED_DIR, "tokenizer-tests", `ggml-vocab-${v}.gguf`))) throw new UsageError(`--vocab ${v}: ${join(SHARED_DIR, "tokenizer-tests", `ggml-vocab-${v}.gguf`)} not found (llama3, or a ggml-vocab-NAME.gguf there)`);
      return v;
    })(optionalString(values, "vocab") ?? "starcoder"),
    runs: optionalNumber(values, "runs", { integer: true, min: 1 }) ?? 5,
    tokens: optionalNumber(values, "tokens", { integer: true, min: 8 }) ?? 80,
  };
});
const tokenizerFrom = vocab === "llama3" ? await ensureLlama3Vocab() : join(SHARED_DIR, "tokenizer-tests", `ggml-vocab-${vocab}.gguf`);
const path = await ensureRandomModel({ ...SMOLLM_135M, weightType: GGMLType.Q8_0, seed: 3, tokenizerFrom });
const model = await loadModel(path, { threads: 2, contextSize: 512 });
const schemaOf = (run: number): JsonSchema => ({
  description: `run ${run}`,
  type: "object",
  properties: { name: { type: "string", maxLength: 24 }, age: { type: "integer", minimum: 0, maximum: 120 }, pets: { type: "array", items: { enum: ["cat", "dog"] }, maxItems: 4 } },
  required: ["name", "age", "pets"],
});

// the vocabulary is built once per model, at its first constrained request: timed apart
let t = performance.now();
ConstraintVocabulary.of(model.tokenizer);
const vocabMs = performance.now() - t;

// The constraint's time inside requests, summed by wrapping what the engine calls of it. choose()
// counts whole but for one sampler call, the one unconstrained decoding makes too: greedy's
// tries of refused tokens each cost a sampler call, which is the constraint's cost.
let constraintMs = 0;
let choosing = false;
const proto = TokenConstraint.prototype;
function timed<K extends "mask" | "allows" | "accept">(key: K): void {
  const f = proto[key] as (...a: unknown[]) => unknown;
  proto[key] = function (this: TokenConstraint, ...a: unknown[]) {
    if (choosing) return f.apply(this, a);
    const start = performance.now();
    try {
      return f.apply(this, a);
    } finally {
      constraintMs += performance.now() - start;
    }
  } as TokenConstraint[K];
}
for (const key of ["mask", "allows", "accept"] as const) timed(key);
const choose = proto.choose;
proto.choose = function (this: TokenConstraint, logits, sampler, history) {
  let lastSample = 0;
  const timedSampler: Sampler = {
    ...sampler,
    sample(l, h) {
      const start = performance.now();
      try {
        return sampler.sample(l, h);
      } finally {
        lastSample = performance.now() - start;
      }
    },
  };
  const start = performance.now();
  choosing = true;
  try {
    return choose.call(this, logits, timedSampler, history);
  } finally {
    choosing = false;
    constraintMs += performance.now() - start - lastSample;
  }
};
const makeMasks = TokenMasks.of;
TokenMasks.of = (grammar, vocabulary) => {
  const start = performance.now();
  try {
    return makeMasks(grammar, vocabulary);
  } finally {
    constraintMs += performance.now() - start;
  }
};

const report: Record<string, unknown>[] = [];
let schemaRun = 0;
for (const temperature of [0, 0.8]) {
  await model.generate("Hello", { maxTokens: 4, temperature, seed: 3 });
  const free: number[] = [], first: number[] = [], warm: number[] = [], firstMask: number[] = [], warmMask: number[] = [];
  for (let r = 0; r < runs; r++) {
    t = performance.now();
    const u = await model.generate("Hello", { maxTokens: tokens, temperature, seed: 3 + r, ignoreEos: true });
    free.push((performance.now() - t) / u.completionTokens.length);
    const schema = schemaOf(schemaRun++);
    // the engine compiles the schema once per request that brings it new: timed here on a copy
    const compileStart = performance.now();
    compileConstraint({ jsonSchema: schema });
    const compileMs = performance.now() - compileStart;
    for (const [times, masks] of [[first, firstMask], [warm, warmMask]] as const) {
      constraintMs = times === first ? compileMs : 0;
      t = performance.now();
      const c = await model.generate("Hello", { maxTokens: tokens, temperature, seed: 3 + r, jsonSchema: schema });
      const n = Math.max(1, c.completionTokens.length);
      times.push((performance.now() - t) / n);
      masks.push(constraintMs / n);
    }
  }
  const tpot = median(free);
  const row = {
    temperature, tpotMs: tpot, constrainedFirstMs: median(first), constrainedWarmMs: median(warm),
    maskFirstMs: median(firstMask), maskWarmMs: median(warmMask), maskFirstOfTpot: median(firstMask) / tpot, maskWarmOfTpot: median(warmMask) / tpot,
  };
  report.push(row);
  if (!flag(args, "json")) {
    const pct = (v: number) => `${(100 * v).toFixed(1)}%`;
    console.log(
      `${vocab} (${model.info.vocabSize} tokens), T=${temperature}, median of ${runs}: TPOT ${tpot.toFixed(1)} ms unconstrained; under a new schema ${row.constrainedFirstMs.toFixed(1)} ms/token, ` +
        `again ${row.constrainedWarmMs.toFixed(1)}; mask time per token ${row.maskFirstMs.toFixed(3)} ms first request (${pct(row.maskFirstOfTpot)} of TPOT), ${row.maskWarmMs.toFixed(3)} ms warm (${pct(row.maskWarmOfTpot)})`,
    );
  }
}
if (flag(args, "json")) console.log(JSON.stringify({ vocab, vocabSize: model.info.vocabSize, vocabularyBuildMs: vocabMs, runs, report }));
else console.log(`constraint vocabulary built once per model in ${vocabMs.toFixed(0)} ms (at its first constrained request)`);
model.dispose();
