/**
 * The memory plan against what the process really holds: writes a random llama (F32), then, in a
 * fresh `node --expose-gc` child, plans it (planMemory, the default KV pool) and loads it, and
 * reports the rss growth from before the load (after gc) at its peak (getrusage's maxrss) after
 * the load and after `--sequences` concurrent generations have filled their whole contexts,
 * beside the plan's terms: weights, KV (one context; the full pool), scratch, and on wasm the K/V
 * arrays the pool outgrows on the way. One JSON object on stdout.
 *
 *   node --import tsx scripts/measure-memory-plan.ts [--layers 4] [--width 512] [--ffn 1024]
 *     [--ctx 512] [--sequences 16] [--quantize Q] [--backend wasm|reference] [--threads N]
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { kvBytesPerToken } from "../src/cache/index.js";
import { DEFAULT_BLOCK_SIZE } from "../src/cache/index.js";
import { UsageError } from "../src/cli/args.js";
import { kvPoolBytes, outgrownKvBlocks, planMemory } from "../src/engine/index.js";
import { loadModel, loadPlanRequest, type LoadModelOptions } from "../src/llm.js";
import { openModel } from "../src/models/index.js";
import { isQuantization, type Quantization } from "../src/tensor/index.js";
import { tinyLlama, writeRandomModel } from "../src/testing/index.js";
import { scriptOptions } from "./script-args.js";

const USAGE = `usage: node --import tsx scripts/measure-memory-plan.ts [--layers N] [--width N] [--ffn N] [--ctx N] [--sequences N] [--quantize Q] [--backend wasm|reference] [--threads N]
  the memory plan (weights + KV + scratch, the default pool, wasm's outgrown K/V arrays) against
  the rss a fresh process grows by: after the load, and after N concurrent full-context generations`;

const int = (v: unknown, name: string, d: number) => {
  if (v === undefined) return d;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`--${name} must be an integer >= 0, got "${String(v)}"`);
  return n;
};
const o = scriptOptions(USAGE, {
  layers: { type: "string" }, width: { type: "string" }, ffn: { type: "string" }, ctx: { type: "string" }, sequences: { type: "string" },
  quantize: { type: "string" }, backend: { type: "string" }, threads: { type: "string" }, child: { type: "string" }, help: { type: "boolean" },
}, (v) => {
  const quantize = v["quantize"] as string | undefined;
  if (quantize !== undefined && !isQuantization(quantize)) throw new UsageError(`--quantize: unknown quantization "${quantize}"`);
  const backend = (v["backend"] as string | undefined) ?? "wasm";
  if (backend !== "wasm" && backend !== "reference") throw new UsageError(`--backend must be wasm or reference, got "${backend}"`);
  return {
    layers: int(v["layers"], "layers", 4), width: int(v["width"], "width", 512), ffn: int(v["ffn"], "ffn", 1024), ctx: int(v["ctx"], "ctx", 512),
    sequences: int(v["sequences"], "sequences", 16), quantize: quantize as Quantization | undefined, backend: backend as "wasm" | "reference",
    threads: v["threads"] === undefined ? undefined : int(v["threads"], "threads", 1), child: v["child"] as string | undefined,
  };
});

const MB = (n: number) => Math.round(n / 1e5) / 10;

if (o.child === undefined) {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-measure-"));
  try {
    const file = join(dir, "m.gguf");
    await writeRandomModel(file, { ...tinyLlama, blockCount: o.layers, embeddingLength: o.width, headCount: o.width / 128, headCountKv: o.width / 128, feedForwardLength: o.ffn, contextLength: o.ctx, seed: 7 });
    const out = execFileSync(process.execPath, ["--expose-gc", "--import", "tsx", process.argv[1]!, ...process.argv.slice(2), "--child", file], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
    process.stdout.write(out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
} else {
  const gc = (globalThis as { gc?: () => void }).gc!;
  const options: LoadModelOptions = { backend: o.backend, threads: o.threads, contextSize: o.ctx, quantize: o.quantize, availableMemory: 1e12, memoryMargin: 0 };
  const r = loadPlanRequest(openModel(o.child), options, o.ctx)!;
  const p = planMemory(r);
  const pool = kvPoolBytes(r, p, 1e12, 0);
  const perBlock = DEFAULT_BLOCK_SIZE * kvBytesPerToken(r.shape, r.kvCacheTypes);
  const outgrown = r.wasm ? outgrownKvBlocks(pool / perBlock) * perBlock : 0;
  gc();
  const usage0 = process.memoryUsage();
  const before = usage0.rss;
  // where the growth is: the JS heap, ArrayBuffers (the reference backend's weights), the rest (wasm memories, threads, code)
  const parts = () => {
    const u = process.memoryUsage();
    return { heapTotal: MB(u.heapTotal - usage0.heapTotal), arrayBuffers: MB(u.arrayBuffers - usage0.arrayBuffers), external: MB(u.external - usage0.external) };
  };
  const peak = () => process.resourceUsage().maxRSS * 1024 - before;
  const m = await loadModel(o.child, options);
  gc();
  const afterLoad = { rss: process.memoryUsage().rss - before, peak: peak(), ...parts() };
  let filled: { rss: number; peak: number; tokens: number } | undefined;
  if (o.sequences > 0) {
    const results = await Promise.all(Array.from({ length: o.sequences }, (_, i) => m.generate(`Once upon a time ${i}`, { maxTokens: o.ctx - 16, ignoreEos: true, temperature: 0 })));
    gc();
    filled = { rss: process.memoryUsage().rss - before, peak: peak(), ...parts(), tokens: results.reduce((n, x) => n + x.completionTokens.length, 0) };
  }
  m.dispose();
  const oneContext = p.totalBytes;
  const fullBefore = p.weightBytes + pool + p.scratchBytes;
  process.stdout.write(`${JSON.stringify({
    model: { layers: o.layers, width: o.width, ffn: o.ffn, ctx: o.ctx, quantize: o.quantize ?? null, backend: o.backend, sequences: o.sequences },
    planMB: { weights: MB(p.weightBytes), kvOneContext: MB(p.kvCacheBytes), scratch: MB(p.scratchBytes), total: MB(oneContext), pool: MB(pool), poolTokens: pool / (perBlock / DEFAULT_BLOCK_SIZE), outgrown: MB(outgrown), fullWithoutOutgrown: MB(fullBefore), full: MB(fullBefore + outgrown) },
    measuredMB: { afterLoad: { ...afterLoad, rss: MB(afterLoad.rss), peak: MB(afterLoad.peak) }, ...(filled ? { filled: { ...filled, rss: MB(filled.rss), peak: MB(filled.peak) } } : {}) },
    peakOverPlan: {
      load: `${Math.round((afterLoad.peak / oneContext - 1) * 1000) / 10}%`,
      ...(filled ? { filledVsPlanWithoutOutgrown: `${Math.round((filled.peak / fullBefore - 1) * 1000) / 10}%`, filledVsPlan: `${Math.round((filled.peak / (fullBefore + outgrown) - 1) * 1000) / 10}%` } : {}),
    },
  })}\n`);
}
