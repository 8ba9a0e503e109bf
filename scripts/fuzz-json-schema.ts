// Differential fuzzer of tsllm's JSON Schema support (scripts/json-schema-diff.ts), judged by ajv:
// random schemas over the keywords tsllm claims; every sentence a random walk of the recognizer
// completes must validate, and every valid random instance (compact, with llama.cpp's whitespace,
// with \u escapes) must be accepted. Unsupported keywords must be refused with a GrammarError.
// The differences tsllm makes on purpose (a bounded number written with an exponent, a key beyond
// the properties where additionalProperties is unset, a format beside a pattern, a lone surrogate
// in a string's own characters: see
// scripts/json-schema-diff.ts) are counted apart as known, not as findings.
//
//   node --import tsx scripts/fuzz-json-schema.ts [--seed S] [--cases N] [--seconds T] [--case K]
//
// Case k of seed s is the one new Rng(s + k) makes, so `--seed s --case k` shows that one case again.
import { optionalNumber, UsageError } from "../src/cli/args.js";
import { Rng } from "../src/testing/rng.js";
import { checkSchema, makeAjv, randomRootSchema } from "./json-schema-diff.js";
import { noPositionals, scriptOptions } from "./script-args.js";

const USAGE = "Usage: node --import tsx scripts/fuzz-json-schema.ts [--seed S] [--cases N] [--seconds T] [--case K]\n" +
  "  random JSON Schemas compiled to grammars; random walks of the recognizer validated by ajv, ajv-valid instances fed to the recognizer\n" +
  "  --seed S: the run's seed (default: the clock); case k is the one new Rng(S + k) makes\n" +
  "  --cases N: how many schemas (default 2000)\n" +
  "  --seconds T: stop after T seconds (default 60)\n" +
  "  --case K: run only case K of the seed, printing its schema and outcome\n" +
  "  each finding: the seed and case, the schema, the text and why; exit 1 if any\n" +
  "  known differences (a bounded number with an exponent, a key beyond the properties where additionalProperties is unset, a format beside a pattern, a lone surrogate in a string's own characters) are counted apart, not findings";

const { seed, cases, seconds, onlyCase } = scriptOptions(USAGE, { seed: { type: "string" }, cases: { type: "string" }, seconds: { type: "string" }, case: { type: "string" } }, (values, positionals) => {
  noPositionals(positionals);
  const cases = optionalNumber(values, "cases", { integer: true, min: 1 }) ?? 2000;
  const seconds = optionalNumber(values, "seconds") ?? 60;
  if (!(seconds > 0)) throw new UsageError(`--seconds must be a positive number, got ${seconds}`);
  return { seed: optionalNumber(values, "seed", { integer: true, min: 0 }) ?? Date.now() % 1e9, cases, seconds, onlyCase: optionalNumber(values, "case", { integer: true, min: 0 }) };
});

const ajv = makeAjv();
const started = performance.now();
let ran = 0, refused = 0, walks = 0, instances = 0, found = 0;
const known = new Map<string, number>();
const refusals = new Map<string, number>();
const [first, total] = onlyCase === undefined ? [0, cases] : [onlyCase, 1];
for (let k = first; k < first + total && performance.now() - started < seconds * 1000; k++) {
  const rng = new Rng(seed + k);
  const schema = randomRootSchema(rng);
  const r = checkSchema(schema, rng, ajv);
  ran++;
  walks += r.walks;
  instances += r.instances;
  for (const [kind, n] of Object.entries(r.known)) known.set(kind, (known.get(kind) ?? 0) + n);
  if (onlyCase !== undefined) process.stdout.write(`schema: ${JSON.stringify(schema)}\n${r.refused ? `refused: ${r.refused}\n` : ""}`);
  if (r.refused !== undefined) {
    refused++;
    const key = r.refused.replace(/^[^:]*: /, "").slice(0, 80);
    refusals.set(key, (refusals.get(key) ?? 0) + 1);
  }
  for (const f of r.findings) {
    found++;
    process.stdout.write(`${f.kind.toUpperCase()} seed ${seed} case ${k}\n  schema: ${JSON.stringify(f.schema)}\n  text: ${JSON.stringify(f.text)}\n  ${f.detail}\n`);
  }
}
process.stdout.write(`seed ${seed}: ${ran} schemas (${refused} refused), ${walks} walks, ${instances} instances, ${found} findings, ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
process.stdout.write(`  known differences (not findings): ${[...known].map(([kind, n]) => `${kind} ${n}`).join(", ")}\n`);
for (const [why, n] of [...refusals].sort((a, b) => b[1] - a[1]).slice(0, 8)) process.stdout.write(`  refused ${n}x: ${why}\n`);
process.exitCode = found > 0 ? 1 : 0;
