/**
 * Encoder throughput: sentences per second of tsllm's embeddings (loadEmbeddingModel, the same
 * forward pass as classification: a sequence classifier adds one small matmul on the first token)
 * next to llama.cpp's (node-llama-cpp createEmbeddingContext) on the same random weights, for
 * batch 1 and 32 and 16- and 128-token inputs. The models (random BertModel folders with
 * MiniLM-L6's and BERT-base's shapes, and their F32 GGUF conversions) are written once into the
 * model cache ($TSLLM_CACHE or ~/.cache/tsllm/models), never into the repo.
 *
 *   node --import tsx scripts/bench-encoders.ts [--only minilm,base] [--tokens 16,128] [--batch 1,32]
 *                                               [--threads 2] [--sentences 32] [--no-llama-cpp] [--json]
 *
 * node-llama-cpp's embedding context evaluates one sequence per call, so its "batch 32" is 32
 * calls in a row; tsllm's is one forward pass over the 32 ragged sequences.
 * Not a test: the numbers are only as steady as the machine.
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { flag, optionalNumber, optionalString } from "../src/cli/args.js";
import { convertHFToGGUF } from "../src/convert/convert.js";
import { loadEmbeddingModel } from "../src/pipelines/index.js";
import { BERT_BASE, MINILM_L6, writeRandomBertFolder, type RandomBertSpec } from "../src/testing/random-bert.js";
import { defaultModelCacheDir } from "../src/testing/index.js";
import { noPositionals, scriptOptions } from "./script-args.js";

const USAGE = "Usage: node --import tsx scripts/bench-encoders.ts [--only minilm,base] [--tokens 16,128] [--batch 1,32] [--threads 2] [--sentences 32]\n" +
  "                                                   [--no-llama-cpp] [--json] [--tokenizer-from FOLDER]\n" +
  "  sentences/s of tsllm's embeddings next to llama.cpp's on random MiniLM-L6- and BERT-base-shaped models\n" +
  "  --tokenizer-from FOLDER: a bert-base-uncased WordPiece tokenizer (default ../shared/hf-oracle/bert-uncased-sst)";

const SHAPES: Record<string, Omit<RandomBertSpec, "seed">> = { minilm: MINILM_L6, base: BERT_BASE };
const WORDS = "the of and in to a is was for on as with by he at from his an were are which this also be has or had first one their its new after who they two her she been other when there all during into school time may years more most only over city some world would where later up such used many can state about national out known university united then made".split(" ");

const list = (v: string | undefined, d: string) => (v ?? d).split(",").map((s) => s.trim()).filter(Boolean);

/** a text of exactly n WordPiece tokens (+ [CLS]/[SEP]) for the bert-base-uncased vocabulary */
function sentence(n: number, k: number): string {
  return Array.from({ length: n }, (_, i) => WORDS[(i * 7 + k * 13) % WORDS.length]).join(" ");
}

async function ensureModel(name: string, tokenizerFolder: string): Promise<{ folder: string; gguf: string }> {
  const folder = join(defaultModelCacheDir(), `random-bert-${name}-v1`);
  const gguf = `${folder}.gguf`;
  if (!existsSync(join(folder, "model.safetensors"))) await writeRandomBertFolder(folder, { ...SHAPES[name]!, seed: 1234, std: 0.05 }, tokenizerFolder);
  if (!existsSync(gguf)) await convertHFToGGUF(folder, gguf, { type: "f32" });
  return { folder, gguf };
}

interface Row { model: string; tokens: number; batch: number; engine: "tsllm" | "llama.cpp"; sentencesPerSecond: number }

async function main(): Promise<void> {
  const { values, threads, count } = scriptOptions(USAGE, {
    only: { type: "string" }, tokens: { type: "string" }, batch: { type: "string" }, threads: { type: "string" }, sentences: { type: "string" },
    "no-llama-cpp": { type: "boolean" }, json: { type: "boolean" }, "tokenizer-from": { type: "string" },
  }, (values, positionals) => {
    noPositionals(positionals);
    return { values, threads: optionalNumber(values, "threads", { integer: true, min: 1 }) ?? 2, count: optionalNumber(values, "sentences", { integer: true, min: 1 }) ?? 32 };
  });
  const tokenizerFolder = resolve(optionalString(values, "tokenizer-from") ?? "../shared/hf-oracle/bert-uncased-sst");
  if (!existsSync(join(tokenizerFolder, "vocab.txt")) && !existsSync(join(tokenizerFolder, "tokenizer.json"))) {
    throw new Error(`${tokenizerFolder}: needs a bert-base-uncased WordPiece tokenizer (--tokenizer-from FOLDER)`);
  }
  const rows: Row[] = [];
  const llamaMod = flag(values, "no-llama-cpp") ? undefined : await import("node-llama-cpp");
  const llama = llamaMod ? await llamaMod.getLlama({ gpu: false, build: "never", logLevel: llamaMod.LlamaLogLevel.error, progressLogs: false, maxThreads: threads }) : undefined;
  for (const name of list(optionalString(values, "only"), "minilm,base")) {
    if (!SHAPES[name]) throw new Error(`unknown model ${name} (minilm, base)`);
    const { folder, gguf } = await ensureModel(name, tokenizerFolder);
    for (const n of list(optionalString(values, "tokens"), "16,128").map(Number)) {
      const texts = Array.from({ length: count }, (_, k) => sentence(n - 2, k));
      for (const batch of list(optionalString(values, "batch"), "1,32").map(Number)) {
        const m = await loadEmbeddingModel(folder, { threads, batchSize: batch });
        try {
          await m.embed(texts.slice(0, Math.min(batch, 2))); // warm-up
          const t0 = performance.now();
          for (let i = 0; i < texts.length; i += batch) await m.embed(texts.slice(i, i + batch));
          rows.push({ model: name, tokens: n, batch, engine: "tsllm", sentencesPerSecond: texts.length / ((performance.now() - t0) / 1000) });
        } finally {
          m.dispose();
        }
        if (!llama) continue;
        const lm = await llama.loadModel({ modelPath: gguf });
        const ctx = await lm.createEmbeddingContext({ contextSize: 512, batchSize: 512, threads });
        try {
          const ids = texts.map((t) => [101, ...lm.tokenize(t), 102]);
          await ctx.getEmbeddingFor(ids[0] as never);
          const t0 = performance.now();
          for (const x of ids) await ctx.getEmbeddingFor(x as never);
          rows.push({ model: name, tokens: n, batch, engine: "llama.cpp", sentencesPerSecond: texts.length / ((performance.now() - t0) / 1000) });
        } finally {
          await ctx.dispose();
          await lm.dispose();
        }
        process.stderr.write(`${name} ${n} tokens batch ${batch}: ${rows.slice(-2).map((r) => `${r.engine} ${r.sentencesPerSecond.toFixed(1)}/s`).join(", ")}\n`);
      }
    }
  }
  await llama?.dispose();
  if (flag(values, "json")) { process.stdout.write(JSON.stringify(rows) + "\n"); return; }
  const lines = ["| model (random weights) | tokens | batch | tsllm sentences/s | llama.cpp sentences/s | ratio |", "|---|---|---|---|---|---|"];
  for (const r of rows.filter((x) => x.engine === "tsllm")) {
    const l = rows.find((x) => x.engine === "llama.cpp" && x.model === r.model && x.tokens === r.tokens && x.batch === r.batch);
    lines.push(`| ${r.model === "minilm" ? "MiniLM-L6 shape" : "BERT-base shape"}, F32 | ${r.tokens} | ${r.batch} | ${r.sentencesPerSecond.toFixed(1)} | ${l ? l.sentencesPerSecond.toFixed(1) : "-"} | ${l ? (r.sentencesPerSecond / l.sentencesPerSecond).toFixed(2) : "-"} |`);
  }
  process.stdout.write(lines.join("\n") + "\n");
}

main().catch((e: unknown) => {
  process.stderr.write(`bench-encoders: ${(e as Error).message}\n`);
  process.exitCode = 1;
});
