/**
 * `npm run bench:onnx`: tsllm (wasm backend) vs onnxruntime-web (its wasm execution provider)
 * on the same random-weight SmolLM-135M-shape models as `npm run bench` (smollm-f32, -q8_0,
 * -q4_0), each exported to ONNX by src/testing/onnx-export.ts: F32 as float MatMul, Q8_0 and
 * Q4_0 as com.microsoft MatMulNBits (8 / 4 bits, block 32) from the GGUF blocks themselves.
 *
 *   npm run bench:onnx -- [--only smollm-f32,...] [--threads 2] [--prompt-tokens 128] [--gen-tokens 32]
 *                         [--repetitions 5] [--accuracy-level 0|4] [--json]
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
import { argmax, rates } from "../src/bench/stats.js";
import { flag, optionalNumber, optionalString, parse, UsageError } from "../src/cli/args.js";
import { loadModel } from "../src/llm.js";
import { GGMLType, typeName } from "../src/tensor/dtypes.js";
import { ensureRandomModel, exportLlamaOnnx, type OnnxExportOptions } from "../src/testing/index.js";

const DEFAULT_MODELS = ["smollm-f32", "smollm-q8_0", "smollm-q4_0"];
/** the GGUF weight types the export can keep quantized (MatMulNBits); every other type would be exported as float */
const NBITS_TYPES: readonly GGMLType[] = [GGMLType.Q4_0, GGMLType.Q8_0];

interface Turn { prefillTokensPerSecond: number; decodeTokensPerSecond: number; tokens: number[] }
/** one engine as the loop drives it: a forward over new tokens (logits of the last one), and a fresh cache */
interface Engine { forward(tokens: readonly number[]): Promise<Float32Array>; reset(): void }

async function main(argv: string[]): Promise<void> {
  const values = parse(argv, {
    only: { type: "string" },
    threads: { type: "string" },
    "prompt-tokens": { type: "string" },
    "gen-tokens": { type: "string" },
    repetitions: { type: "string" },
    "accuracy-level": { type: "string" },
    json: { type: "boolean" },
  });
  if (flag(values, "help")) {
    process.stdout.write(`Usage: npm run bench:onnx -- [--only NAME,...] [--threads N] [--prompt-tokens N] [--gen-tokens N] [--repetitions N] [--accuracy-level 0|4] [--json]\nModels: ${DEFAULT_MODELS.join(", ")}\n`);
    return;
  }
  const names = optionalString(values, "only")?.split(",").map((s) => s.trim().toLowerCase()).filter((s) => s !== "") ?? DEFAULT_MODELS;
  const models = names.map((name) => {
    const m = BENCH_MODELS.find((e) => e.name === name);
    if (!m || !DEFAULT_MODELS.includes(name)) throw new UsageError(`--only: unknown model "${name}" (known: ${DEFAULT_MODELS.join(", ")})`);
    return m;
  });
  const threads = optionalNumber(values, "threads", { integer: true, min: 1 }) ?? 2;
  const promptTokens = optionalNumber(values, "prompt-tokens", { integer: true, min: 1 }) ?? 128;
  const genTokens = optionalNumber(values, "gen-tokens", { integer: true, min: 1 }) ?? 32;
  const repetitions = optionalNumber(values, "repetitions", { integer: true, min: 1 }) ?? 5;
  const accuracyLevel = optionalNumber(values, "accuracy-level", { integer: true, min: 0, max: 4 }) ?? 0;
  if (accuracyLevel !== 0 && accuracyLevel !== 4) throw new UsageError(`--accuracy-level must be 0 or 4, got ${accuracyLevel}`);
  const json = flag(values, "json");
  const log = (s: string) => { if (!json) process.stderr.write(s); };

  const ort = await loadOrt(threads);
  const rows: string[][] = [];
  const results: unknown[] = [];
  for (const m of models) {
    log(`${m.name}: preparing the model (generated once, then cached)...\n`);
    const path = await ensureRandomModel(m.spec);
    const prompt = await randomPromptTokens(path, promptTokens);
    const exportOptions: OnnxExportOptions = { weights: NBITS_TYPES.includes(m.spec.weightType) ? "nbits" : "f32", accuracyLevel, lastTokenLogits: true, maxPositions: promptTokens + genTokens + 1 };
    log(`${m.name}: exporting to ONNX (${exportOptions.weights})...\n`);
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
      const same = samples.tsllm[0]!.tokens.filter((t, i) => t === samples.ort[0]!.tokens[i]).length;
      const r = {
        model: m.name, type: typeName(m.spec.weightType), onnxWeights: exportOptions.weights,
        tsllm: { prefill: med(samples.tsllm, "prefillTokensPerSecond"), decode: med(samples.tsllm, "decodeTokensPerSecond") },
        ort: { prefill: med(samples.ort, "prefillTokensPerSecond"), decode: med(samples.ort, "decodeTokensPerSecond") },
        sameGreedyTokens: `${same}/${genTokens + 1}`,
        samples,
      };
      results.push(r);
      rows.push([
        m.name, r.onnxWeights === "nbits" ? `MatMulNBits ${m.spec.weightType === GGMLType.Q4_0 ? 4 : 8}-bit` : "MatMul f32",
        r.tsllm.prefill.toFixed(1), r.ort.prefill.toFixed(1), `${(r.tsllm.prefill / r.ort.prefill).toFixed(2)}x`,
        r.tsllm.decode.toFixed(1), r.ort.decode.toFixed(1), `${(r.tsllm.decode / r.ort.decode).toFixed(2)}x`, r.sameGreedyTokens,
      ]);
    } finally {
      await decoder.release();
      model.dispose();
    }
  }
  if (json) {
    process.stdout.write(JSON.stringify({ threads, promptTokens, genTokens, repetitions, accuracyLevel, results }) + "\n");
    return;
  }
  process.stdout.write(`\n${threads} threads, prefill ${promptTokens} tokens, ${genTokens} greedy decode steps; tok/s, median of ${repetitions} alternating turns in one process; onnxruntime-web wasm EP, MatMulNBits accuracy_level ${accuracyLevel}\n\n`);
  process.stdout.write(renderTable(["model", "ONNX weights", "tsllm pp", "ort pp", "pp ratio", "tsllm tg", "ort tg", "tg ratio", "same greedy tokens"], rows, 2));
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
