/**
 * The cost of constrained decoding: time per output token with and without a JSON Schema on a
 * random-weight SmolLM-135M-shaped model (Q8_0), greedy and sampled, for the schema's first
 * request (parse-state masks computed) and the ones after (masks cached). The model is written
 * once into the model cache; `--vocab NAME` takes another vocabulary from ../shared's
 * tokenizer-tests (e.g. deepseek-llm: 102k tokens).
 *
 *   node --import tsx scripts/bench-constraints.ts [--vocab starcoder] [--runs 3] [--tokens 80]
 *
 * Not a test: the numbers are only as steady as the machine.
 */
import { join } from "node:path";
import { flag, optionalNumber, optionalString, parse } from "../src/cli/args.js";
import { loadModel } from "../src/index.js";
import { GGMLType } from "../src/tensor/dtypes.js";
import { ensureRandomModel, SHARED_DIR, SMOLLM_135M } from "../src/testing/index.js";

const args = parse(process.argv.slice(2), { vocab: { type: "string" }, runs: { type: "string" }, tokens: { type: "string" }, json: { type: "boolean" } });
const vocab = optionalString(args, "vocab") ?? "starcoder";
const runs = optionalNumber(args, "runs", { integer: true, min: 1 }) ?? 3;
const tokens = optionalNumber(args, "tokens", { integer: true, min: 8 }) ?? 80;
const path = await ensureRandomModel({ ...SMOLLM_135M, weightType: GGMLType.Q8_0, seed: 3, tokenizerFrom: join(SHARED_DIR, "tokenizer-tests", `ggml-vocab-${vocab}.gguf`) });
const model = await loadModel(path, { threads: 2, contextSize: 512 });
const schema = { type: "object", properties: { name: { type: "string", maxLength: 24 }, age: { type: "integer", minimum: 0, maximum: 120 }, pets: { type: "array", items: { enum: ["cat", "dog"] }, maxItems: 4 } }, required: ["name", "age", "pets"] };
const report: Record<string, unknown>[] = [];
for (const temperature of [0, 0.8]) {
  await model.generate("Hello", { maxTokens: 4, temperature, seed: 3 });
  let t = performance.now();
  const u = await model.generate("Hello", { maxTokens: tokens, temperature, seed: 3, ignoreEos: true });
  const free = (performance.now() - t) / u.completionTokens.length;
  const constrained: number[] = [];
  for (let r = 0; r < runs; r++) {
    t = performance.now();
    const c = await model.generate("Hello", { maxTokens: tokens, temperature, seed: 3, jsonSchema: schema });
    constrained.push((performance.now() - t) / Math.max(1, c.completionTokens.length));
  }
  report.push({ temperature, unconstrainedMsPerToken: free, constrainedMsPerToken: constrained });
  if (!flag(args, "json")) {
    console.log(`${vocab} (${model.info.vocabSize} tokens), T=${temperature}: unconstrained ${free.toFixed(1)} ms/token; under the schema ${constrained.map((v) => v.toFixed(1)).join(", ")} ms/token (first request first)`);
  }
}
if (flag(args, "json")) console.log(JSON.stringify({ vocab, vocabSize: model.info.vocabSize, report }));
model.dispose();
