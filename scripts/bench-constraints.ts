/**
 * The cost of constrained decoding on a random-weight SmolLM-135M-shaped model (Q8_0), greedy and
 * sampled: time per output token without a JSON Schema (TPOT) and under one, and the constraint's
 * own time per token — the mask of every step and the parse advanced by the token taken —
 * replayed on the tokens each request produced, once with the schema new (a fresh grammar: every
 * cache cold, the grammar's compilation included) and once again (masks cached). Each run takes a
 * schema never seen before (its description differs), so every run's first request is a first
 * one; the figures are medians over the runs. The replay masks every step, as sampling does;
 * greedy decoding masks only when none of its best few tokens is allowed, so it costs less. The
 * model is written once into the model cache; `--vocab NAME` takes another vocabulary from
 * ../shared's tokenizer-tests (e.g. deepseek-llm: 102k tokens).
 *
 *   node --import tsx scripts/bench-constraints.ts [--vocab starcoder] [--runs 5] [--tokens 80] [--json]
 *
 * Not a test: the numbers are only as steady as the machine.
 */
import { join } from "node:path";
import { median } from "../src/bench/stats.js";
import { flag, optionalNumber, optionalString, parse } from "../src/cli/args.js";
import { loadModel } from "../src/index.js";
import { compileConstraint, ConstraintVocabulary, TokenConstraint, type Grammar, type JsonSchema } from "../src/sampling/constraints/index.js";
import { GGMLType } from "../src/tensor/dtypes.js";
import { ensureRandomModel, SHARED_DIR, SMOLLM_135M } from "../src/testing/index.js";

const args = parse(process.argv.slice(2), { vocab: { type: "string" }, runs: { type: "string" }, tokens: { type: "string" }, json: { type: "boolean" } });
const vocab = optionalString(args, "vocab") ?? "starcoder";
const runs = optionalNumber(args, "runs", { integer: true, min: 1 }) ?? 5;
const tokens = optionalNumber(args, "tokens", { integer: true, min: 8 }) ?? 80;
const path = await ensureRandomModel({ ...SMOLLM_135M, weightType: GGMLType.Q8_0, seed: 3, tokenizerFrom: join(SHARED_DIR, "tokenizer-tests", `ggml-vocab-${vocab}.gguf`) });
const model = await loadModel(path, { threads: 2, contextSize: 512 });
const schemaOf = (run: number): JsonSchema => ({
  description: `run ${run}`,
  type: "object",
  properties: { name: { type: "string", maxLength: 24 }, age: { type: "integer", minimum: 0, maximum: 120 }, pets: { type: "array", items: { enum: ["cat", "dog"] }, maxItems: 4 } },
  required: ["name", "age", "pets"],
});

// the vocabulary is built once per model, at its first constrained request: timed apart
let t = performance.now();
const constraintVocab = ConstraintVocabulary.of(model.tokenizer);
const vocabMs = performance.now() - t;
const endIds = new Set(model.tokenizer.endOfGenerationIds);
const scratch = new Float32Array(model.info.vocabSize);

/** the constraint's time over `ids`, in ms: mask and accept at every step (and the mask after the last) */
function replay(ids: readonly number[], grammar: Grammar): number {
  const start = performance.now();
  const c = new TokenConstraint(grammar, constraintVocab, endIds);
  for (const id of ids) {
    c.mask(scratch);
    if (!endIds.has(id)) c.accept(id);
  }
  c.mask(scratch);
  return performance.now() - start;
}

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
    for (const times of [first, warm]) {
      t = performance.now();
      const c = await model.generate("Hello", { maxTokens: tokens, temperature, seed: 3 + r, jsonSchema: schema });
      times.push((performance.now() - t) / Math.max(1, c.completionTokens.length));
      if (times === first) {
        // a grammar of its own: the engine's (compiled for the request above) has warm caches now
        const start = performance.now();
        const grammar = compileConstraint({ jsonSchema: schema });
        const compileMs = performance.now() - start;
        const steps = c.completionTokens.length + 1;
        firstMask.push((compileMs + replay(c.completionTokens, grammar)) / steps);
        warmMask.push(replay(c.completionTokens, grammar) / steps);
      }
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
