/**
 * `npm run bench:onnx`: tsllm (wasm backend) vs onnxruntime-web (its wasm execution provider)
 * on the same random-weight SmolLM-135M-shape models as `npm run bench` (smollm-f32, -q8_0,
 * -q4_0), each exported to ONNX by src/testing/onnx-export.ts. The cases (CASES):
 *   smollm-f32          float MatMul
 *   smollm-q8_0-int8    transformers.js's "q8" (its default on wasm): DynamicQuantizeLinear +
 *                       MatMulInteger, int8 per column requantized from the Q8_0 values
 *   smollm-q8_0-nbits   com.microsoft MatMulNBits, 8 bits, block 32: the Q8_0 blocks themselves
 *   smollm-q4_0-nbits   MatMulNBits, 4 bits, block 32: the Q4_0 blocks (transformers.js's "q4")
 *
 *   npm run bench:onnx -- [--only smollm-f32,...] [--threads 2] [--prompt-tokens 128] [--gen-tokens 32]
 *                         [--repetitions 5] [--accuracy-level 0|4] [--ort web|node] [--json]
 *
 * --ort node runs onnxruntime-node's native CPU provider instead (transformers.js's backend in
 * Node; not a devDependency: `npm i --no-save --ignore-scripts onnxruntime-node@1.23.2`).
 *
 * Both engines live in ONE process, loaded once per model, and take turns each repetition
 * (tsllm, then onnxruntime-web), so a shared machine's slow drifts hit both alike; one untimed
 * turn each warms them up first. A turn is a prefill of the prompt from an empty cache (one
 * forward, logits of the last position: the export is made with lastTokenLogits so both do the
 * same work), then greedy decode steps through the KV cache, each an argmax of the logits.
 *
 * Not a test: run it on a quiet machine; the numbers are only as steady as the machine.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { BENCH_MODELS, median, randomPromptTokens, renderTable } from "../src/bench/index.js";
import { loadOrt, OrtDecoder } from "../src/bench/ort-engine.js";
import { rates } from "../src/bench/stats.js";
import { argmax } from "../src/sampling/index.js";
import { flag, optionalNumber, optionalString, parse, UsageError } from "../src/cli/args.js";
import { loadModel } from "../src/llm.js";
import { GGMLType, typeName } from "../src/tensor/dtypes.js";
import { ensureRandomModel, exportLlamaOnnx, type OnnxExportOptions } from "../src/testing/index.js";
import { PEER_BENCH_FLAGS } from "./peer-flags.js";

/** benchmark case -> the bench model and the export's weight variant */
const CASES: ReadonlyMap<string, { model: string; weights: NonNullable<OnnxExportOptions["weights"]> }> = new Map([
  ["smollm-f32", { model: "smollm-f32", weights: "f32" }],
  ["smollm-q8_0-int8", { model: "smollm-q8_0", weights: "int8" }],
  ["smollm-q8_0-nbits", { model: "smollm-q8_0", weights: "nbits" }],
  ["smollm-q4_0-nbits", { model: "smollm-q4_0", weights: "nbits" }],
]);
const ONNX_WEIGHTS = { f32: "MatMul f32", int8: "MatMulInteger int8", nbits: "MatMulNBits" } as const;

interface Turn { prefillTokensPerSecond: number; decodeTokensPerSecond: number; tokens: number[] }
/** one engine as the loop drives it: a forward over new tokens (logits of the last one), and a fresh cache */
interface Engine { forward(tokens: readonly number[]): Promise<Float32Array>; reset(): void }

async function main(argv: string[]): Promise<void> {
  const values = parse(argv, { ...PEER_BENCH_FLAGS, "accuracy-level": { type: "string" }, ort: { type: "string" } });
  if (flag(values, "help")) {
    process.stdout.write(`Usage: npm run bench:onnx -- [--only NAME,...] [--threads N] [--prompt-tokens N] [--gen-tokens N] [--repetitions N] [--accuracy-level 0|4] [--ort web|node] [--json]\nCases: ${[...CASES.keys()].join(", ")}\n`);
    return;
  }
  const names = optionalString(values, "only")?.split(",").map((s) => s.trim().toLowerCase()).filter((s) => s !== "") ?? [...CASES.keys()];
  const cases = names.map((name) => {
    const c = CASES.get(name);
    if (!c) throw new UsageError(`--only: unknown case "${name}" (known: ${[...CASES.keys()].join(", ")})`);
    return { name, weights: c.weights, model: BENCH_MODELS.find((e) => e.name === c.model)! };
  });
  const threads = optionalNumber(values, "threads", { integer: true, min: 1 }) ?? 2;
  const promptTokens = optionalNumber(values, "prompt-tokens", { integer: true, min: 1 }) ?? 128;
  const genTokens = optionalNumber(values, "gen-tokens", { integer: true, min: 1 }) ?? 32;
  const repetitions = optionalNumber(values, "repetitions", { integer: true, min: 1 }) ?? 5;
  const accuracyLevel = optionalNumber(values, "accuracy-level", { integer: true, min: 0, max: 4 }) ?? 0;
  if (accuracyLevel !== 0 && accuracyLevel !== 4) throw new UsageError(`--accuracy-level must be 0 or 4, got ${accuracyLevel}`);
  const runtime = optionalString(values, "ort") ?? "web";
  if (runtime !== "web" && runtime !== "node") throw new UsageError(`--ort must be web or node, got "${runtime}"`);
  const json = flag(values, "json");
  const log = (s: string) => { if (!json) process.stderr.write(s); };

  const ort = await loadOrt(threads, runtime);
  const peer = runtime === "web" ? "onnxruntime-web wasm EP" : "onnxruntime-node CPU EP (native)";
  const rows: string[][] = [];
  const results: unknown[] = [];
  for (const { name: caseName, weights, model: m } of cases) {
    log(`${caseName}: preparing the model (generated once, then cached)...\n`);
    const path = await ensureRandomModel(m.spec);
    const prompt = await randomPromptTokens(path, promptTokens);
    const exportOptions: OnnxExportOptions = { weights, accuracyLevel, lastTokenLogits: true, maxPositions: promptTokens + genTokens + 1 };
    log(`${caseName}: exporting to ONNX (${weights})...\n`);
    const onnx = exportLlamaOnnx(path, exportOptions);

    const model = await loadModel(path, { backend: "wasm", threads, contextSize: 1 });
    const lm = model.languageModel;
    const contextSize = promptTokens + genTokens + 1;
    let cache = lm.createCache(contextSize);
    const tsllm: Engine = { forward: (t) => lm.forwardAsync(t, cache), reset: () => { cache = lm.createCache(contextSize); } };
    const headDim = m.spec.headDim ?? m.spec.embeddingLength / m.spec.headCount;
    const decoder = await OrtDecoder.create(ort, onnx, { layers: m.spec.blockCount, kvHeads: m.spec.headCountKv, headDim });
    const onnxrt: Engine = { forward: (t) => decoder.forward(t), reset: () => decoder.reset() };
    try {
      const samples = { tsllm: [] as Turn[], ort: [] as Turn[] };
      for (let r = -1; r < repetitions; r++) {
        for (const [name, engine] of [["tsllm", tsllm], ["ort", onnxrt]] as const) {
          // the other engine's worker threads may still spin for a moment after their last job
          await sleep(200);
          const turn = await runTurn(engine, prompt, genTokens);
          if (r < 0) continue;
          samples[name].push(turn);
          log(`  run ${r + 1} ${name}: prefill ${turn.prefillTokensPerSecond.toFixed(1)} tok/s, decode ${turn.decodeTokensPerSecond.toFixed(1)} tok/s\n`);
        }
      }
      const med = (s: Turn[], k: "prefillTokensPerSecond" | "decodeTokensPerSecond") => median(s.map((t) => t[k]));
      // each repetition's own ratio (its two turns ran back to back): the spread says how far the median can be trusted
      const pairRange = (k: "prefillTokensPerSecond" | "decodeTokensPerSecond") => {
        const rs = samples.tsllm.map((t, i) => t[k] / samples.ort[i]![k]);
        return `${Math.min(...rs).toFixed(2)}-${Math.max(...rs).toFixed(2)}`;
      };
      const same = samples.tsllm[0]!.tokens.filter((t, i) => t === samples.ort[0]!.tokens[i]).length;
      const r = {
        case: caseName, model: m.name, type: typeName(m.spec.weightType), onnxWeights: weights,
        tsllm: { prefill: med(samples.tsllm, "prefillTokensPerSecond"), decode: med(samples.tsllm, "decodeTokensPerSecond") },
        ort: { prefill: med(samples.ort, "prefillTokensPerSecond"), decode: med(samples.ort, "decodeTokensPerSecond") },
        sameGreedyTokens: `${same}/${genTokens + 1}`,
        samples,
      };
      results.push(r);
      rows.push([
        caseName, weights === "nbits" ? `${ONNX_WEIGHTS.nbits} ${m.spec.weightType === GGMLType.Q4_0 ? 4 : 8}-bit` : ONNX_WEIGHTS[weights],
        r.tsllm.prefill.toFixed(1), r.ort.prefill.toFixed(1), `${(r.tsllm.prefill / r.ort.prefill).toFixed(2)}x (${pairRange("prefillTokensPerSecond")})`,
        r.tsllm.decode.toFixed(1), r.ort.decode.toFixed(1), `${(r.tsllm.decode / r.ort.decode).toFixed(2)}x (${pairRange("decodeTokensPerSecond")})`, r.sameGreedyTokens,
      ]);
    } finally {
      await decoder.release();
      model.dispose();
    }
  }
  if (json) {
    process.stdout.write(JSON.stringify({ ort: runtime, threads, promptTokens, genTokens, repetitions, accuracyLevel, results }) + "\n");
    return;
  }
  process.stdout.write(`\n${threads} threads, prefill ${promptTokens} tokens, ${genTokens} greedy decode steps; tok/s, median of ${repetitions} alternating turns in one process; ${peer}, MatMulNBits accuracy_level ${accuracyLevel}\n\n`);
  process.stdout.write(renderTable(["case", "ONNX weights", "tsllm pp", "ort pp", "pp ratio (per run)", "tsllm tg", "ort tg", "tg ratio (per run)", "same greedy tokens"], rows, 2));
}

/** a prefill from an empty cache, then `genTokens` greedy steps; tok/s of each phase */
async function runTurn(engine: Engine, prompt: readonly number[], genTokens: number): Promise<Turn> {
  engine.reset();
  const t0 = performance.now();
  let tok = argmax(await engine.forward(prompt));
  const prefillMs = performance.now() - t0;
  const tokens = [tok];
  const t1 = performance.now();
  for (let i = 0; i < genTokens; i++) {
    tok = argmax(await engine.forward([tok]));
    tokens.push(tok);
  }
  const decodeMs = performance.now() - t1;
  return { ...rates(prompt.length, prefillMs, genTokens, decodeMs), tokens };
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`bench:onnx: error: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = err instanceof UsageError ? 2 : 1;
});
