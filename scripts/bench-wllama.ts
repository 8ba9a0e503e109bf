/**
 * `npm run bench:wllama`: tsllm's browser build vs wllama (llama.cpp in WebAssembly), both in
 * headless Chromium on the same random-weight SmolLM-135M-shape GGUF files as `npm run bench`.
 *
 *   npm run bench:wllama -- [--only smollm-f32,smollm-q8_0,smollm-q4_0] [--threads 2]
 *                           [--prompt-tokens 128] [--gen-tokens 64] [--repetitions 3] [--chromium PATH] [--json]
 *
 * wllama is not a devDependency: `npm i --no-save --ignore-scripts @wllama/wllama@3.13.0`.
 * One prompt text per model, cut to --prompt-tokens of tsllm's tokenizer (wllama tokenizes it
 * itself; each engine's rate is over its own count, both printed). Each repetition runs tsllm
 * (the wasm backend in the engine worker, timed by timeForward: one batched prefill, then greedy
 * steps) and then wllama (one raw completion, greedy, EOS ignored, timed by its own llama-server
 * timings), each in a fresh browser context; the medians and the per-repetition ratios are printed.
 *
 * Not a test: run it on a quiet machine; the numbers are only as steady as the machine.
 */
import { dirname } from "node:path";
import { BENCH_MODELS, median, renderTable } from "../src/bench/index.js";
import { DEFAULT_CHROMIUM, startChromiumRunner } from "../src/bench/chromium-engine.js";
import { startWllamaRunner } from "../src/bench/wllama-engine.js";
import { flag, optionalNumber, optionalString, parse, UsageError } from "../src/cli/args.js";
import { loadTokenizer } from "../src/llm.js";
import { typeName } from "../src/tensor/dtypes.js";
import { ensureRandomModel } from "../src/testing/index.js";
import { PEER_BENCH_FLAGS } from "./peer-flags.js";

const DEFAULT_MODELS = ["smollm-f32", "smollm-q8_0", "smollm-q4_0"];
/** the prompt's source text, repeated until it is long enough */
const TEXT = "Once upon a time, in a small village by the sea, there lived an old fisherman who told the children stories about the stars, the tides and the long roads beyond the hills. ";

async function main(argv: string[]): Promise<void> {
  const values = parse(argv, { ...PEER_BENCH_FLAGS, chromium: { type: "string" } });
  if (flag(values, "help")) {
    process.stdout.write("Usage: npm run bench:wllama -- [--only NAME,...] [--threads N] [--prompt-tokens N] [--gen-tokens N] [--repetitions N] [--chromium PATH] [--json]\n");
    return;
  }
  const names = optionalString(values, "only")?.split(",").map((s) => s.trim().toLowerCase()).filter((s) => s !== "") ?? DEFAULT_MODELS;
  const models = names.map((name) => {
    const m = BENCH_MODELS.find((e) => e.name === name);
    if (!m) throw new UsageError(`--only: unknown model "${name}" (known: ${BENCH_MODELS.map((e) => e.name).join(", ")})`);
    return m;
  });
  const threads = optionalNumber(values, "threads", { integer: true, min: 1 }) ?? 2;
  const promptTokens = optionalNumber(values, "prompt-tokens", { integer: true, min: 2 }) ?? 128;
  const genTokens = optionalNumber(values, "gen-tokens", { integer: true, min: 1 }) ?? 64;
  const repetitions = optionalNumber(values, "repetitions", { integer: true, min: 1 }) ?? 3;
  const chromiumPath = optionalString(values, "chromium") ?? DEFAULT_CHROMIUM;
  const json = flag(values, "json");
  const log = (s: string) => { if (!json) process.stderr.write(s); };

  const paths: string[] = [];
  for (const m of models) {
    log(`${m.name}: preparing the model (generated once, then cached)...\n`);
    paths.push(await ensureRandomModel(m.spec));
  }
  const modelsDir = dirname(paths[0]!);
  if (paths.some((p) => dirname(p) !== modelsDir)) throw new Error("the models are not in one folder (the page serves one)");
  const tsllm = await startChromiumRunner(modelsDir, chromiumPath);
  let wllama;
  try {
    wllama = await startWllamaRunner(modelsDir, chromiumPath);
  } catch (e) {
    await tsllm.close();
    throw e;
  }
  const rows: string[][] = [];
  const results: unknown[] = [];
  try {
    for (const [i, m] of models.entries()) {
      const path = paths[i]!;
      const tok = await loadTokenizer(path);
      const ids = tok.encode(TEXT.repeat(Math.ceil((2 * promptTokens) / 8))).slice(0, promptTokens);
      // the text of those ids (BOS aside: wllama adds its own), and tsllm's tokens of that text
      const prompt = tok.decode(ids, { skipSpecialTokens: true });
      const tsllmIds = tok.encode(prompt);
      const contextSize = Math.max(tsllmIds.length, promptTokens) + genTokens + 16;
      const samples: { tsllm: { prefill: number; decode: number }[]; wllama: { prefill: number; decode: number; promptTokens: number }[] } = { tsllm: [], wllama: [] };
      let wllamaDetail = "";
      for (let r = 0; r < repetitions; r++) {
        const t = await tsllm.run({ engine: "tsllm", modelPath: path, threads, promptTokens: tsllmIds, genTokens, contextSize });
        samples.tsllm.push({ prefill: t.prefillTokensPerSecond, decode: t.decodeTokensPerSecond });
        const w = await wllama.run({ modelPath: path, threads, prompt, genTokens, contextSize });
        samples.wllama.push({ prefill: w.prefillTokensPerSecond, decode: w.decodeTokensPerSecond, promptTokens: w.promptTokens });
        wllamaDetail = `${w.threads} threads`;
        log(`  ${m.name} run ${r + 1}: tsllm prefill ${t.prefillTokensPerSecond.toFixed(1)} decode ${t.decodeTokensPerSecond.toFixed(1)} tok/s (${t.detail}); wllama prefill ${w.prefillTokensPerSecond.toFixed(1)} decode ${w.decodeTokensPerSecond.toFixed(1)} tok/s (${w.promptTokens} prompt tokens, ${w.threads} threads)\n`);
      }
      const med = (s: { prefill: number; decode: number }[], k: "prefill" | "decode") => median(s.map((x) => x[k]));
      const range = (k: "prefill" | "decode") => {
        const rs = samples.tsllm.map((x, j) => x[k] / samples.wllama[j]![k]);
        return `${Math.min(...rs).toFixed(2)}-${Math.max(...rs).toFixed(2)}`;
      };
      const res = {
        model: m.name, type: typeName(m.spec.weightType), promptTokens: { tsllm: tsllmIds.length, wllama: samples.wllama[0]!.promptTokens }, genTokens,
        tsllm: { prefill: med(samples.tsllm, "prefill"), decode: med(samples.tsllm, "decode") },
        wllama: { prefill: med(samples.wllama, "prefill"), decode: med(samples.wllama, "decode"), detail: `${wllama.detail}, ${wllamaDetail}` },
        samples,
      };
      results.push(res);
      rows.push([
        m.name, res.type, `${res.promptTokens.tsllm} / ${res.promptTokens.wllama}`,
        res.tsllm.prefill.toFixed(1), res.wllama.prefill.toFixed(1), `${(res.tsllm.prefill / res.wllama.prefill).toFixed(2)}x (${range("prefill")})`,
        res.tsllm.decode.toFixed(1), res.wllama.decode.toFixed(1), `${(res.tsllm.decode / res.wllama.decode).toFixed(2)}x (${range("decode")})`,
      ]);
    }
  } finally {
    await tsllm.close();
    await wllama.close();
  }
  if (json) {
    process.stdout.write(JSON.stringify({ threads, promptTokens, genTokens, repetitions, wllama: wllama.detail, results }) + "\n");
    return;
  }
  process.stdout.write(`\n${threads} threads, ${genTokens} greedy decode steps; tok/s, median of ${repetitions} alternating runs; ${wllama.detail}\n\n`);
  process.stdout.write(renderTable(["model", "type", "prompt tokens tsllm / wllama", "tsllm pp", "wllama pp", "pp ratio (per run)", "tsllm tg", "wllama tg", "tg ratio (per run)"], rows, 3));
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`bench:wllama: error: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = err instanceof UsageError ? 2 : 1;
});
