// Prefill and greedy decode rates of one model on the raw forward pass (no engine, no sampler):
//   node --import tsx scripts/prof-decode.mts FILE.gguf
import { existsSync } from "node:fs";
import { UsageError } from "../src/cli/args.js";
import { loadModel } from "../src/index.js";
import { scriptOptions } from "./script-args.js";
const path = scriptOptions("Usage: node --import tsx scripts/prof-decode.mts FILE.gguf\n  prefill tok/s of a 128-token prompt and decode tok/s of 64 greedy steps (2 threads, raw forward pass)", {}, (_values, positionals) => {
  if (positionals.length !== 1) throw new UsageError("expected one model file (FILE.gguf)");
  if (!existsSync(positionals[0]!)) throw new UsageError(`${positionals[0]}: no such file`);
  return positionals[0]!;
});
const m = await loadModel(path, { threads: 2, contextSize: 512 });
const lm = m.languageModel;
const cache = lm.createCache(512);
const prompt = Array.from({ length: 128 }, (_, i) => (i * 7919) % 32000 + 1);
let t = performance.now();
let logits = lm.forward(prompt, cache);
const prefillMs = performance.now() - t;
t = performance.now();
const N = 64;
for (let i = 0; i < N; i++) { let best = 0; for (let j = 1; j < logits.length; j++) if (logits[j]! > logits[best]!) best = j; logits = lm.forward([best], cache); }
const decMs = performance.now() - t;
console.log(`prefill ${(128000 / prefillMs).toFixed(1)} tok/s, decode ${(N * 1000 / decMs).toFixed(1)} tok/s`);
m.dispose();
