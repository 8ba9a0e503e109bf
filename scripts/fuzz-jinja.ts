// Differential fuzzer of tsllm's Jinja engine against Python's jinja2 3.1 (scripts/jinja-diff.ts):
// random small chat-template-like templates and contexts, rendered by both; the text must be the
// same, or both must fail in the same class (compile or render). jinja2 runs once per batch.
//
//   node --import tsx scripts/fuzz-jinja.ts [--seed S] [--cases N] [--seconds T] [--case K]
//
// Case k of seed s is the one new Rng(s + k) makes, so `--seed s --case k` shows that one case again.
import { optionalNumber, UsageError } from "../src/cli/args.js";
import { compareCases, fuzzCases } from "./jinja-diff.js";
import { noPositionals, scriptOptions } from "./script-args.js";

const USAGE = "Usage: node --import tsx scripts/fuzz-jinja.ts [--seed S] [--cases N] [--seconds T] [--case K]\n" +
  "  random templates rendered by tsllm and by python3's jinja2 (transformers' environment), compared: text, or the class of failure\n" +
  "  --seed S: the run's seed (default: the clock); case k is the one new Rng(S + k) makes\n" +
  "  --cases N: how many cases (default 2000), in batches of 500 (one python process each)\n" +
  "  --seconds T: stop starting batches after T seconds (default 120)\n" +
  "  --case K: run only case K of the seed, printing its template and both outcomes\n" +
  "  each mismatch: the seed and case, the template, the context and both outcomes; exit 1 if any";

const { seed, cases, seconds, onlyCase } = scriptOptions(USAGE, { seed: { type: "string" }, cases: { type: "string" }, seconds: { type: "string" }, case: { type: "string" } }, (values, positionals) => {
  noPositionals(positionals);
  const cases = optionalNumber(values, "cases", { integer: true, min: 1 }) ?? 2000;
  const seconds = optionalNumber(values, "seconds") ?? 120;
  if (!(seconds > 0)) throw new UsageError(`--seconds must be a positive number, got ${seconds}`);
  return { seed: optionalNumber(values, "seed", { integer: true, min: 0 }) ?? Date.now() % 1e9, cases, seconds, onlyCase: optionalNumber(values, "case", { integer: true, min: 0 }) };
});

const BATCH = 500;
const started = performance.now();
let compared = 0, skipped = 0, mismatched = 0, ran = 0;
const [first, total] = onlyCase === undefined ? [0, cases] : [onlyCase, 1];
for (let at = 0; at < total && performance.now() - started < seconds * 1000; at += BATCH) {
  const n = Math.min(BATCH, total - at);
  const result = compareCases(fuzzCases(seed, n, first + at));
  ran += n;
  compared += result.compared;
  skipped += result.skipped;
  for (const m of result.mismatches) {
    mismatched++;
    process.stdout.write(`MISMATCH seed ${seed} case ${first + at + m.index}\n  template: ${JSON.stringify(m.template)}\n  context: ${JSON.stringify(m.context)}\n  jinja2: ${JSON.stringify(m.jinja2)}\n  tsllm: ${m.tsllm}\n`);
  }
  if (onlyCase !== undefined && result.mismatches.length === 0) {
    const c = fuzzCases(seed, 1, first)[0]!;
    process.stdout.write(`seed ${seed} case ${first}: ${JSON.stringify(c.template)}: ${result.compared ? "the same" : "skipped (a time or size bound)"}\n`);
  }
}
process.stdout.write(`seed ${seed}: ${ran} cases run, ${compared} compared, ${skipped} skipped (a time or size bound), ${mismatched} mismatched, ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
process.exit(mismatched ? 1 : 0);
