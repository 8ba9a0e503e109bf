/**
 * Times the WebGPU backend's kernels on whatever adapter it finds, for a machine with a GPU:
 *
 *   node --import tsx scripts/bench-webgpu.ts [--size 4096] [--tokens 1,128] [--keys 2048] [--repetitions 10]
 *   node --import tsx scripts/bench-webgpu.ts --model FILE.gguf [--prompt-tokens 128] [--steps 32] [--per-submit 256,64,32]
 *
 * matmul of a size x size weight of every type the backend multiplies (asked of it; the GGUF-only
 * types, which have no quantizer, with seeded random quant bits) for each token count (ms
 * per call, split into the host's recording and the GPU's time after it; weight GB/s = the
 * weight's bytes / GPU time, what decode is bound by; TFLOP/s on the same time; from 16 tokens
 * the types with two kernels (TILED_MATMUL_TYPES) on the other one too: one-row where the
 * default tiles through workgroup memory, tiled where it does not; under 16 tokens a quantized
 * type's one-row kernel as it runs when the type tiles, its units added in order), then causal
 * attention of 32 heads (8 kv heads) of 128 over --keys cached positions for each KV cache type
 * (f32, f16, q8_0, q4_0). Whole models: `npm run bench -- --backend webgpu`. Each figure is the mean of
 * --repetitions calls recorded back to back and synchronised once by a read, after one warm-up
 * call (pipeline compilation, weight upload); a last matmul line gives the section's wall time.
 *
 * With --model, instead: where a decode step of that model goes (after a --prompt-tokens prompt),
 * for each --per-submit (dispatches recorded per submitted batch): the host's recording (from the
 * pass's start to its read of the logits), the wait for the logits after it, the dispatches and
 * submits per step; "pipelined", --steps steps recorded back to back and synchronised once (their
 * logits not read: what the GPU and the host sustain when neither waits for the other); the round
 * trip of an empty read; the GPU time per kernel of a prefill and a decode step (timestamp
 * queries, where the adapter has them); and the engine's own decode rate (generate, greedy).
 *
 * Not a test. On a software adapter (SwiftShader, lavapipe) the numbers say nothing about GPU
 * speed: they only show the script runs.
 */
import { median } from "../src/bench/index.js";
import { parse, UsageError } from "../src/cli/args.js";
import { loadModel } from "../src/index.js";
import { openModel } from "../src/models/index.js";
import { createWebGPUBackend, DEFAULT_TILED_MATMUL_TYPES, TILED_MATMUL_TYPES } from "../src/kernels/webgpu/index.js";
import { KV_CACHE_TYPES, kvCacheEncoding, kvRowFloats } from "../src/kernels/reference/index.js";
import { GGMLType, rowByteLength, typeInfo, typeName } from "../src/tensor/dtypes.js";
import { canQuantize, quantizeRow } from "../src/tensor/quant/index.js";
import { randomQuantizedRow, Rng } from "../src/testing/index.js";

// (packed as plain JavaScript over dist/ by scripts/pack-portable.mjs: imports from ../src only)
const USAGE = "Usage: node --import tsx scripts/bench-webgpu.ts [--size 4096] [--tokens 1,128] [--keys 2048] [--repetitions 10]\n" +
  "       node --import tsx scripts/bench-webgpu.ts --model FILE.gguf [--prompt-tokens 128] [--steps 32] [--per-submit 256,64,32]\n" +
  "  the WebGPU backend's kernels (matmul per weight type, attention per KV cache type) on the adapter it finds;\n" +
  "  with --model, where a decode step of that model goes";
function options() {
  try {
    const values = parse(process.argv.slice(2), {
      size: { type: "string", default: "4096" }, tokens: { type: "string", default: "1,128" }, keys: { type: "string", default: "2048" }, repetitions: { type: "string", default: "10" },
      model: { type: "string" }, "prompt-tokens": { type: "string", default: "128" }, steps: { type: "string", default: "32" }, "per-submit": { type: "string", default: "256,64,32" },
    }) as Record<string, string> & { help?: boolean };
    if (values.help) {
      console.log(USAGE);
      process.exit(0);
    }
    return values as Record<"size" | "tokens" | "keys" | "repetitions" | "prompt-tokens" | "steps" | "per-submit", string> & { model?: string };
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    console.error(`bench-webgpu: ${e.message}`);
    process.exit(2);
  }
}
const values = options();
if (values.model !== undefined) {
  await profileDecode(values.model, Number(values["prompt-tokens"]), Number(values.steps), values["per-submit"].split(",").map(Number));
  process.exit(0);
}
const size = Number(values.size), keys = Number(values.keys), reps = Number(values.repetitions);
const tokenCounts = values.tokens.split(",").map(Number);

const b = await createWebGPUBackend({ powerPreference: "high-performance" });
// the other kernel of each type that has two: one-row where the default tiles, tiled where it does not
const other = await createWebGPUBackend({ powerPreference: "high-performance", tiledMatmulTypes: TILED_MATMUL_TYPES.filter((t) => !DEFAULT_TILED_MATMUL_TYPES.includes(t)) });
console.log(`${b.name}: ${b.adapter}`);

/**
 * per call: `ms` from the first call's recording to the results' arrival, and `hostMs` the
 * recording alone. The calls are submitted together at the read (or every few hundred dispatches),
 * so the GPU mostly runs after the recording: ms - hostMs is about the GPU's own time.
 */
async function time(run: () => void, sync: () => Promise<unknown>): Promise<{ ms: number; hostMs: number; gpuMs: number }> {
  run();
  await sync();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) run();
  const t1 = performance.now();
  await sync();
  const t2 = performance.now();
  return { ms: (t2 - t0) / reps, hostMs: (t1 - t0) / reps, gpuMs: (t2 - t1) / reps };
}

const timing = (t: { ms: number; hostMs: number; gpuMs: number }) => `${t.ms.toFixed(3)} ms (host ${t.hostMs.toFixed(3)}, then GPU ${t.gpuMs.toFixed(3)})`;

const row = Float32Array.from({ length: size }, (_, i) => Math.sin(i) * 0.5);
// every weight type the backend multiplies (asked of the backend: a type that gains a kernel is timed
// without an edit here). The types with a quantizer first, a quantized sine row repeated; then the
// GGUF-only ones (MXFP4, TQ1_0/TQ2_0, the grid i-quants): random quant bits, a row each, from the
// random models' own filler (seeded: the same bytes every run). All get the same --repetitions.
const TYPES = Object.values(GGMLType)
  .filter((t): t is GGMLType => typeof t === "number" && b.canMultiply?.(t) === true)
  .sort((x, y) => Number(!canQuantize(x)) - Number(!canQuantize(y)));
const rng = new Rng(0x6b75);
const matmulStart = performance.now();
for (const type of TYPES) {
  const rb = rowByteLength(type, size);
  const data = new Uint8Array(size * rb);
  if (canQuantize(type)) {
    const one = new Uint8Array(rb);
    quantizeRow(type, row, one, size);
    for (let r = 0; r < size; r++) data.set(one, r * rb);
  } else {
    for (let r = 0; r < size; r++) randomQuantizedRow(type, data.subarray(r * rb, (r + 1) * rb), rng, 0.5, size);
  }
  const w = { name: `bench.${typeName(type)}`, type, dims: [size, size], data };
  const bytes = data.length;
  // the other kernel's own copy (the backend detaches a weight's host bytes once uploaded)
  const wt = { ...w, name: `${w.name}.other`, data: data.slice() };
  for (const n of tokenCounts) {
    const x = b.allocActivations(n * size), out = b.allocActivations(n * size);
    b.write(x, Float32Array.from({ length: n * size }, (_, i) => Math.cos(i)));
    const t = await time(() => b.matmul(out, w, x, n), () => b.read(b.view(out, 0, 1)));
    // the weight's bytes per GPU time (its host copy is released once uploaded: counted before)
    console.log(`matmul ${typeName(type).padEnd(7)} ${size}x${size} x ${String(n).padStart(4)} tokens: ${timing(t)}, weights ${(bytes / t.gpuMs / 1e6).toFixed(1)} GB/s, ${(2 * size * size * n / t.gpuMs / 1e9).toFixed(2)} TFLOP/s`);
    // the same on the type's other kernel, for comparison (under 16 tokens a quantized type that
    // tiles takes its one-row kernel with units added in order, which batch invariance needs)
    const quantized = typeInfo(type).blockSize > 1;
    if ((n >= 16 || quantized) && TILED_MATMUL_TYPES.includes(typeName(type))) {
      const xt = other.allocActivations(n * size), outT = other.allocActivations(n * size);
      other.write(xt, Float32Array.from({ length: n * size }, (_, i) => Math.cos(i)));
      const tt = await time(() => other.matmul(outT, wt, xt, n), () => other.read(other.view(outT, 0, 1)));
      const kernel = n < 16 ? "one-row kernel, units in order" : DEFAULT_TILED_MATMUL_TYPES.includes(typeName(type)) ? "one-row kernel" : "tiled kernel";
      console.log(`matmul ${typeName(type).padEnd(7)} ${size}x${size} x ${String(n).padStart(4)} tokens, ${kernel}: ${timing(tt)}, ${(2 * size * size * n / tt.gpuMs / 1e9).toFixed(2)} TFLOP/s`);
    }
  }
}
// what the section cost in all (weights made and uploaded, pipelines compiled, the timed calls)
console.log(`matmul: ${TYPES.length} weight types in ${((performance.now() - matmulStart) / 1000).toFixed(1)} s (${TYPES.map((t) => typeName(t)).join(", ")})`);

const nHeads = 32, nKv = 8, hd = 128, width = nKv * hd;
const positions = Int32Array.from({ length: keys }, (_, i) => i);
const keyRows = b.allocActivations(keys * width), valueRows = b.allocActivations(keys * width);
b.write(keyRows, Float32Array.from({ length: keys * width }, (_, i) => Math.sin(i)));
b.write(valueRows, Float32Array.from({ length: keys * width }, (_, i) => Math.cos(i)));
for (const type of KV_CACHE_TYPES) {
  const encoding = kvCacheEncoding({ k: type, v: type }, hd);
  const kc = b.allocActivations(keys * kvRowFloats(type, width)), vc = b.allocActivations(keys * kvRowFloats(type, width));
  b.scatterRows(kc, positions, keyRows, width, keys, encoding.k);
  b.scatterRows(vc, positions, valueRows, width, keys, encoding.v);
  for (const n of tokenCounts) {
    if (n > keys) continue;
    const q = b.allocActivations(n * nHeads * hd), out = b.allocActivations(n * nHeads * hd);
    const t = await time(() => b.attention(out, q, kc, vc, n, keys - n, nHeads, nKv, hd, 1 / Math.sqrt(hd), positions, encoding), () => b.read(b.view(out, 0, 1)));
    console.log(`attention ${type.padEnd(4)} cache, ${nHeads}/${nKv} heads of ${hd}, ${keys} keys x ${String(n).padStart(4)} tokens: ${timing(t)}`);
  }
}
b.dispose();
other.dispose();

/** n token ids spread over the vocabulary (not 0), the same every run */
function syntheticTokens(n: number, vocab: number): number[] {
  return Array.from({ length: n }, (_, i) => 1 + ((i * 7919) % (vocab - 1)));
}

async function profileDecode(file: string, promptTokens: number, steps: number, perSubmit: number[]): Promise<void> {
  const opened = openModel(file);
  for (const dispatchesPerSubmit of perSubmit) {
    const gpu = await createWebGPUBackend({ powerPreference: "high-performance", dispatchesPerSubmit });
    if (dispatchesPerSubmit === perSubmit[0]) console.log(`${gpu.name}: ${gpu.adapter}`);
    const model = opened.build(gpu);
    const vocab = model.info.vocabSize;
    const cache = model.createCache(promptTokens + 3 * steps + 8);
    const prompt = syntheticTokens(promptTokens, vocab);
    let t = performance.now();
    await model.forwardAsync(prompt, cache);
    const firstPrefill = performance.now() - t;
    // the read of the logits marks the end of the host's recording
    const read = gpu.read.bind(gpu);
    let readAt = 0, skipRead = false;
    gpu.read = (a) => {
      readAt = performance.now();
      // pipelined steps: their logits are not needed (the next token is fixed), so nothing waits
      return skipRead ? Promise.resolve(new Float32Array(vocab)) : read(a);
    };
    const record: number[] = [], wait: number[] = [], total: number[] = [];
    const c0 = gpu.counters();
    for (let i = 0; i < steps; i++) {
      t = performance.now();
      await model.forwardAsync([1 + (i % (vocab - 1))], cache);
      const end = performance.now();
      record.push(readAt - t);
      wait.push(end - readAt);
      total.push(end - t);
    }
    const c1 = gpu.counters();
    skipRead = true;
    t = performance.now();
    for (let i = 0; i < steps; i++) await model.forwardAsync([1 + (i % (vocab - 1))], cache);
    const recorded = performance.now() - t;
    await read(gpu.view(gpu.allocActivations(1), 0, 1));
    const pipelined = performance.now() - t;
    skipRead = false;
    const trips: number[] = [];
    const one = gpu.allocActivations(1);
    for (let i = 0; i < 20; i++) {
      t = performance.now();
      await read(one);
      trips.push(performance.now() - t);
    }
    const f = (x: number) => x.toFixed(3);
    console.log(`decode ${file.split("/").pop()} after ${promptTokens} tokens, ${dispatchesPerSubmit} dispatches per submit: step ${f(median(total))} ms (record ${f(median(record))}, then wait ${f(median(wait))}), ${((c1.dispatches - c0.dispatches) / steps).toFixed(0)} dispatches and ${((c1.submits - c0.submits) / steps).toFixed(1)} submits a step; pipelined ${f(pipelined / steps)} ms a step (recording ${f(recorded / steps)}); empty read ${f(median(trips))} ms; first prefill ${firstPrefill.toFixed(1)} ms`);
    gpu.dispose();
  }
  // where the GPU's time goes, kernel by kernel (timestamp queries: a pass per dispatch)
  const gpu = await createWebGPUBackend({ powerPreference: "high-performance", profileKernels: true }).catch((e: Error) => e);
  if (gpu instanceof Error) console.log(`no kernel profile: ${gpu.message}`);
  else {
    const model = opened.build(gpu);
    const cache = model.createCache(promptTokens + steps + 8);
    const vocab = model.info.vocabSize;
    const prompt = syntheticTokens(promptTokens, vocab);
    await model.forwardAsync(prompt.slice(0, 8), model.createCache(16));
    await gpu.kernelTimes();
    await model.forwardAsync(prompt, cache);
    const show = (what: string, times: Awaited<ReturnType<typeof gpu.kernelTimes>>, per: number) => {
      const total = times.reduce((a, t) => a + t.ms, 0);
      console.log(`${what}: GPU ${(total / per).toFixed(3)} ms in kernels (${per > 1 ? `per step, ` : ""}profiled: a pass per dispatch)`);
      for (const t of times.slice(0, 12)) console.log(`  ${t.kernel.padEnd(36)} ${(t.ms / per).toFixed(3)} ms  ${(t.dispatches / per).toFixed(0)} dispatches  ${((100 * t.ms) / total).toFixed(1)}%`);
    };
    show(`prefill of ${promptTokens} tokens`, await gpu.kernelTimes(), 1);
    for (let i = 0; i < steps; i++) await model.forwardAsync([1 + (i % (vocab - 1))], cache);
    show(`decode after ${promptTokens} tokens`, await gpu.kernelTimes(), steps);
    gpu.dispose();
  }
  const m = await loadModel(file, { backend: "webgpu" });
  for (let i = 0; i < 2; i++) {
    const r = await m.generate(syntheticTokens(promptTokens, m.info.vocabSize), { maxTokens: 64, temperature: 0, ignoreEos: true });
    console.log(`engine: prefill ${r.timings.prefillTokensPerSecond.toFixed(1)} tok/s, decode ${r.timings.decodeTokensPerSecond.toFixed(1)} tok/s (${r.timings.completionTokens} tokens)`);
  }
  m.dispose();
}
