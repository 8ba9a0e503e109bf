/**
 * The WebAssembly arithmetic roofline of this runtime and machine, and the prefill kernels as a
 * fraction of it. Register-only loops (assembly/roofline.ts: eight independent accumulators, no
 * memory traffic) give the most each kind of SIMD instruction can do on 1 and 2 threads:
 *   - int8: Relaxed SIMD's i32x4.relaxed_dot_i8x16_i7x16_add_s (16 multiply-adds each), the ceiling
 *     of the quantized kernels where the runtime has Relaxed SIMD;
 *   - int16: SIMD128's i32x4.dot_i16x8_s + add (8 each), the ceiling without it;
 *   - f32: f32x4.relaxed_madd (fused where the CPU has FMA) or mul + add.
 * Then every weight format's matmul of a 128-token chunk on SmolLM-135M's FFN down projection (1536 -> 576)
 * through the wasm backend, in GOPS (2 ops per multiply-add) and as a fraction of its roofline
 * (f32 for the float formats, the faster integer dot for the quantized ones).
 *
 *   node --import tsx scripts/roofline.ts [--threads 1,2] [--seconds 0.5] [--json] [--runtime chromium]
 *
 * Every run also says how the runtime lowers the relaxed int8 dot (probeDotAdd): exactly, as
 * x86's VNNI vpdpbusd does, or through int16 pairs that saturate (pmaddubsw + pmaddwd) — the
 * kernels' choice of dot depends on it. --runtime chromium runs the three loops (one thread) and
 * the probe in headless Chromium (/usr/bin/chromium, or --chromium PATH) on the browser build's
 * kernels, served by the browser example's server; no matmuls there (`npm run bench -- --runtime
 * chromium` times the whole model).
 *
 * TSLLM_WASM_SIMD=plain measures the SIMD128 build. Not a test: run it on a quiet machine.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { DEFAULT_CHROMIUM, startExampleServer, stopExampleServer } from "../src/bench/chromium-engine.js";
import { flag, optionalNumber, optionalString, UsageError } from "../src/cli/args.js";
import { device } from "../src/kernels/reference/index.js";
import { createWasmBackend } from "../src/kernels/wasm/index.js";
import { kernelsModule, relaxedSimdSupported } from "../src/kernels/wasm/module.js";
import { GGMLType, rowByteLength, typeName } from "../src/tensor/dtypes.js";
import { quantizeRow } from "../src/tensor/quant/index.js";
import { noPositionals, scriptOptions } from "./script-args.js";

const USAGE = "Usage: npm run bench:roofline -- [--threads 1,2] [--seconds 0.5] [--json] [--runtime node|chromium] [--chromium PATH]\n" +
  "  the SIMD ceilings (int8, int16, f32) of this runtime on each thread count, and every prefill kernel as a fraction of its own\n" +
  "  --runtime chromium: the loops on one thread in headless Chromium (--chromium PATH, default /usr/bin/chromium)";
const { args, threadCounts, seconds, asJson } = scriptOptions(USAGE, { threads: { type: "string" }, seconds: { type: "string" }, json: { type: "boolean" }, runtime: { type: "string" }, chromium: { type: "string" } }, (values, positionals) => {
  noPositionals(positionals);
  const threadCounts = (optionalString(values, "threads") ?? "1,2").split(",").map(Number);
  if (!threadCounts.every((n) => Number.isInteger(n) && n >= 1)) throw new UsageError(`--threads expects thread counts >= 1 separated by commas, e.g. 1,2; got "${values["threads"]}"`);
  const runtime = optionalString(values, "runtime") ?? "node";
  if (runtime !== "node" && runtime !== "chromium") throw new UsageError(`--runtime must be node or chromium, got "${runtime}"`);
  return { args: values, threadCounts, seconds: optionalNumber(values, "seconds", { min: 0.01 }) ?? 0.5, asJson: flag(values, "json") };
});
const variant = process.env["TSLLM_WASM_SIMD"] === "plain" || !relaxedSimdSupported() ? "plain" : "relaxed";
const module = kernelsModule(variant);

/** how a relaxed int8 dot of four products -128 x 255 comes out: -130560 exact (VNNI), -65536 saturated in int16 pairs */
function lowering(probe: number): string {
  if (probe === -130560) return "exact (VNNI's vpdpbusd)";
  if (probe === -65536) return "int16 pairs that saturate (pmaddubsw + pmaddwd)";
  // Node 20's V8 (11.3) adds the zero accumulator wrongly: the kernels do not use this instruction
  if (probe === -131072) return "int16 pairs that saturate, and twice the sum with a zero accumulator (V8 11's fault; no kernel uses it)";
  return `unexpected (${probe})`;
}


/** loop name -> operations per iteration (2 per multiply-add) */
const LOOPS = { int8: ["rooflineDotI8", 8 * 16 * 2], int16: ["rooflineDotI16", 8 * 8 * 2], f32: ["rooflineF32", 8 * 4 * 2] } as const;
type Loop = keyof typeof LOOPS;

const runtime = optionalString(args, "runtime") ?? "node";
if (runtime === "chromium") {
  const executable = optionalString(args, "chromium") ?? DEFAULT_CHROMIUM;
  if (!existsSync(executable)) {
    console.error(`roofline: --runtime chromium: ${executable} not found (install Debian's chromium: apt-get install -y chromium, or give --chromium PATH)`);
    process.exit(2);
  }
  await rooflineInChromium(executable);
  process.exit(0);
}

/** giga-operations per second of one loop on `threads` threads started together */
async function rate(loop: Loop, threads: number): Promise<number> {
  const [name, opsPerIteration] = LOOPS[loop];
  // calibrate on one thread: iterations for about `seconds`
  const probe = await runThreads(name, 1, 2_000_000);
  const iterations = Math.max(1_000_000, Math.round((2_000_000 * seconds * 1000) / Math.max(probe[0]!, 0.01)));
  const times = await runThreads(name, threads, iterations);
  // the slowest thread bounds the aggregate
  return (threads * iterations * opsPerIteration) / (Math.max(...times) * 1e6);
}

async function runThreads(name: string, threads: number, iterations: number): Promise<number[]> {
  const start = new SharedArrayBuffer(8);
  const flags = new Int32Array(start);
  const workers = Array.from({ length: threads }, () => new Worker(new URL("./roofline-worker.mjs", import.meta.url), { workerData: { module, name, iterations, start } }));
  const done = workers.map((w) => new Promise<number>((resolve, reject) => {
    w.once("message", (m: { ms: number }) => resolve(m.ms));
    w.once("error", reject);
  }));
  while (Atomics.load(flags, 1) < threads) await new Promise((r) => setTimeout(r, 5));
  Atomics.store(flags, 0, 1);
  Atomics.notify(flags, 0);
  const ms = await Promise.all(done);
  await Promise.all(workers.map((w) => w.terminate()));
  return ms;
}

/**
 * The roofline each weight format's kernel is held to: f32 for the float formats; for the quantized
 * ones the faster of the two integer dots this runtime has (Node 20's V8 lowers the relaxed int8
 * dot to pmaddubsw + pmaddwd + paddd, which can run slower than SIMD128's widening dot: a kernel is
 * free to use either)
 */
function ceilingOf(type: GGMLType, roofline: Record<Loop, number>): Loop {
  if (type === GGMLType.F32 || type === GGMLType.F16 || type === GGMLType.BF16) return "f32";
  return roofline.int8 > roofline.int16 ? "int8" : "int16";
}

async function kernelRate(type: GGMLType, threads: number): Promise<number> {
  const cols = 1536, rows = 576, tokens = 128;
  const backend = await createWasmBackend({ threads, simd: variant });
  try {
    const rowBytes = rowByteLength(type, cols);
    const data = backend.allocWeights(rowBytes * rows);
    const f = new Float32Array(cols);
    for (let r = 0; r < rows; r++) {
      for (let i = 0; i < cols; i++) f[i] = Math.sin(r * 31 + i * 7);
      quantizeRow(type, f, data.subarray(r * rowBytes, (r + 1) * rowBytes), cols);
    }
    const w = { name: `${typeName(type)} ${cols}x${rows}`, type, dims: [cols, rows], data };
    // host Float32Arrays, as the wasm backend takes them (kernels/reference/host-memory.ts)
    const x = device(Float32Array.from({ length: cols * tokens }, (_, i) => Math.cos(i)));
    const out = device(new Float32Array(rows * tokens));
    for (let i = 0; i < 3; i++) backend.matmul(out, w, x, tokens);
    const times: number[] = [];
    const until = performance.now() + seconds * 1000;
    while (times.length < 5 || performance.now() < until) {
      const t0 = performance.now();
      backend.matmul(out, w, x, tokens);
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    return (2 * cols * rows * tokens) / (times[times.length >> 1]! * 1e6);
  } finally {
    backend.dispose();
  }
}

const TYPES = [GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q5_0, GGMLType.Q4_K, GGMLType.Q6_K];
const report: { threads: number; roofline: Record<Loop, number>; kernels: { type: string; gops: number; ceiling: Loop; fraction: number }[] }[] = [];
for (const threads of threadCounts) {
  const roofline = { int8: variant === "relaxed" ? await rate("int8", threads) : 0, int16: await rate("int16", threads), f32: await rate("f32", threads) };
  const kernels = [];
  for (const type of TYPES) {
    const gops = await kernelRate(type, threads);
    const ceiling = ceilingOf(type, roofline);
    kernels.push({ type: typeName(type), gops, ceiling, fraction: gops / roofline[ceiling] });
  }
  report.push({ threads, roofline, kernels });
}

const probe = variant === "relaxed" ? (new WebAssembly.Instance(module, { env: { memory: new WebAssembly.Memory({ initial: 1, maximum: 65536, shared: true }) } }).exports.probeDotAdd as (a: number, b: number, c: number) => number)(-128, 255, 0) : undefined;
if (asJson) console.log(JSON.stringify({ node: process.version, build: variant, relaxedDot: probe === undefined ? undefined : lowering(probe), report }, null, 2));
else {
  console.log(`Node ${process.version}, ${variant} build${probe === undefined ? "" : `; the relaxed int8 dot is ${lowering(probe)}`}`);
  for (const { threads, roofline, kernels } of report) {
    console.log(`\n${threads} thread${threads > 1 ? "s" : ""}: roofline int8 ${roofline.int8.toFixed(0)} GOPS, int16 ${roofline.int16.toFixed(0)} GOPS, f32 ${roofline.f32.toFixed(0)} GFLOP/s`);
    console.log("matmul 128 x 1536 . 1536 x 576  GOPS   of roofline");
    for (const k of kernels) console.log(`  ${k.type.padEnd(6)}${k.gops.toFixed(1).padStart(25)}   ${(100 * k.fraction).toFixed(0).padStart(3)}% of ${k.ceiling}`);
  }
}

/** the loops and the probe on one thread of headless Chromium, on the browser build's relaxed kernels */
async function rooflineInChromium(executablePath: string): Promise<void> {
  const empty = mkdtempSync(join(tmpdir(), "tsllm-roofline-"));
  const server = await startExampleServer(empty);
  const pkg = "playwright-core";
  const { chromium } = (await import(pkg)) as typeof import("playwright-core");
  const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  try {
    const page = await browser.newPage();
    await page.goto(`${server.base}/`);
    const r = await page.evaluate(inPage, { seconds, loops: LOOPS });
    if (asJson) console.log(JSON.stringify({ chromium: browser.version(), build: "relaxed", relaxedDot: lowering(r.probe), roofline: r.rates }, null, 2));
    else {
      console.log(`Chromium ${browser.version()}, relaxed build; the relaxed int8 dot is ${lowering(r.probe)}`);
      console.log(`\n1 thread: roofline int8 ${r.rates.int8!.toFixed(0)} GOPS, int16 ${r.rates.int16!.toFixed(0)} GOPS, f32 ${r.rates.f32!.toFixed(0)} GFLOP/s`);
    }
  } finally {
    await browser.close();
    stopExampleServer(server.child);
    rmSync(empty, { recursive: true, force: true });
  }
}

/**
 * Runs in the page (no named inner functions: tsx's keepNames would wrap them in a helper the
 * page does not have): the kernels instantiated on a shared memory, each loop warmed up until
 * V8's optimized code replaced its baseline code, then timed.
 */
async function inPage(a: { seconds: number; loops: Record<string, readonly [string, number]> }) {
  const bytes = await (await fetch("/tsllm/kernels-relaxed.wasm")).arrayBuffer();
  const memory = new WebAssembly.Memory({ initial: 1, maximum: 65536, shared: true });
  // WebAssembly.instantiate, which the project's WebAssembly declarations (src/kernels/wasm/webassembly.d.ts) leave out
  const wasm = WebAssembly as unknown as { instantiate(bytes: ArrayBuffer, imports: Record<string, Record<string, unknown>>): Promise<{ instance: WebAssembly.Instance }> };
  const k = (await wasm.instantiate(bytes, { env: { memory } })).instance.exports as Record<string, (n: number, s: number, c?: number) => number>;
  const rates: Record<string, number> = {};
  for (const [loop, [name, ops]] of Object.entries(a.loops)) {
    const f = k[name]!;
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 20; i++) f(20_000, 7);
      await new Promise((r) => setTimeout(r, 300));
    }
    let n = 1_000_000, ms = 0;
    for (;;) {
      const t0 = performance.now();
      f(n, 7);
      ms = performance.now() - t0;
      if (ms > a.seconds * 1000) break;
      n *= 2;
    }
    rates[loop] = (n * ops) / (ms * 1e6);
  }
  return { probe: k["probeDotAdd"]!(-128, 255, 0), rates };
}
