/**
 * Times the wasm backend's matmul kernels against the table in DESIGN.md ("Kernels"), then its
 * decode attention (SmolLM-135M's heads, 30 layers' distinct K/V rows, f32, f16, q8_0 and the mixed f16/f32 caches,
 * after 128 and 1536 cached positions: the decode-at-depth cost, docs/kernels.md; then the same f32 bytes with one KV
 * head per layer, its rows contiguous or in runs of 16), and a prompt chunk's attention
 * (256 queries after 768 keys). Not a test: run by hand on a quiet machine:
 *   node --import tsx scripts/kernel-bench.ts [repeats] [threads, e.g. 1,2] [attention]
 * ("attention": the decode attention only).
 * TSLLM_WASM_SIMD=plain or relaxed picks the kernels build (default: relaxed where the runtime has it).
 */
import { device } from "../src/kernels/reference/index.js";
import { createWasmBackend } from "../src/kernels/wasm/index.js";
import { GGMLType, rowByteLength, typeName } from "../src/tensor/dtypes.js";
import { quantizeRow } from "../src/tensor/quant/index.js";
import type { Backend } from "../src/kernels/backend.js";
import { KVBlockPool, kvBytesPerToken } from "../src/cache/index.js";
import type { Tensor } from "../src/tensor/tensor.js";
import { UsageError } from "../src/cli/args.js";
import { scriptOptions } from "./script-args.js";

const USAGE = "Usage: node --import tsx scripts/kernel-bench.ts [REPEATS (30)] [THREADS, e.g. 1,2 (default)] [attention]\n" +
  "  times the wasm matmul kernels, then decode and prompt attention; \"attention\": the decode attention only";
const { repeats, threadCounts, attentionOnly } = scriptOptions(USAGE, {}, (_values, positionals) => {
  const [r = "30", t = "1,2", only, ...extra] = positionals;
  const repeats = Number(r);
  if (!Number.isInteger(repeats) || repeats < 1) throw new UsageError(`REPEATS must be an integer >= 1, got "${r}"`);
  /** thread counts to measure, e.g. "1,2" (default) */
  const threadCounts = t.split(",").map(Number);
  if (!threadCounts.every((n) => Number.isInteger(n) && n >= 1)) throw new UsageError(`THREADS must be counts >= 1 separated by commas, e.g. 1,2; got "${t}"`);
  if ((only !== undefined && only !== "attention") || extra.length > 0) throw new UsageError(`unexpected argument "${only !== "attention" ? only : extra[0]}" (the third may only be "attention")`);
  return { repeats, threadCounts, attentionOnly: only === "attention" };
});

function randomWeights(backend: Backend, type: GGMLType, cols: number, rows: number): Tensor {
  const rowBytes = rowByteLength(type, cols);
  const data = backend.allocWeights(rowBytes * rows);
  const f = new Float32Array(cols);
  for (let r = 0; r < rows; r++) {
    for (let i = 0; i < cols; i++) f[i] = Math.random() * 2 - 1;
    quantizeRow(type, f, data.subarray(r * rowBytes, (r + 1) * rowBytes), cols);
  }
  return { name: `${typeName(type)} ${cols}x${rows}`, type, dims: [cols, rows], data };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}

/** the median milliseconds of `repeats` runs of `run`, after three untimed ones */
function medianTime(run: () => void): number {
  for (let i = 0; i < 3; i++) run();
  const times: number[] = [];
  for (let i = 0; i < repeats; i++) {
    const t0 = performance.now();
    run();
    times.push(performance.now() - t0);
  }
  return median(times);
}

/** copies: distinct matrices cycled through, so that the working set exceeds the caches (decode streams from memory) */
const cases: { type: GGMLType; cols: number; rows: number; tokens: number; copies?: number }[] = [
  { type: GGMLType.F32, cols: 4096, rows: 4096, tokens: 1 },
  { type: GGMLType.Q8_0, cols: 4096, rows: 4096, tokens: 1 },
  { type: GGMLType.Q4_0, cols: 4096, rows: 4096, tokens: 1 },
  { type: GGMLType.Q4_K, cols: 4096, rows: 4096, tokens: 1 },
  { type: GGMLType.Q6_K, cols: 4096, rows: 4096, tokens: 1 },
  { type: GGMLType.F16, cols: 4096, rows: 4096, tokens: 1 },
  // one token over weights that stay in the caches (1-1.7 MB): the single-token kernels' arithmetic
  // alone, what decode costs when memory is not the limit (docs/kernels.md, thirteenth session)
  ...[GGMLType.Q4_0, GGMLType.Q5_0, GGMLType.Q8_0, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K].map((type) => ({ type, cols: 2048, rows: 1024, tokens: 1 })),
  // TinyLlama-1.1B's FFN matrices, 6 copies: 74 MB of Q8_0
  { type: GGMLType.Q8_0, cols: 2048, rows: 5632, tokens: 1, copies: 6 },
  { type: GGMLType.Q4_0, cols: 2048, rows: 5632, tokens: 1, copies: 6 },
  { type: GGMLType.Q8_0, cols: 5632, rows: 2048, tokens: 1, copies: 6 },
  { type: GGMLType.Q4_0, cols: 5632, rows: 2048, tokens: 1, copies: 6 },
  // SmolLM-135M's FFN gate+up (fused) and output matrices in F32 / F16, 30 copies (212 MB of
  // F32): decode at the memory bandwidth (docs/kernels.md)
  { type: GGMLType.F32, cols: 576, rows: 3072, tokens: 1, copies: 30 },
  { type: GGMLType.F16, cols: 576, rows: 3072, tokens: 1, copies: 30 },
  { type: GGMLType.F32, cols: 576, rows: 49152, tokens: 1 },
  { type: GGMLType.Q8_0, cols: 576, rows: 1536, tokens: 128 },
  { type: GGMLType.Q4_0, cols: 576, rows: 1536, tokens: 128 },
  { type: GGMLType.F32, cols: 576, rows: 1536, tokens: 128 },
];

for (const threads of threadCounts) {
  const backend = await createWasmBackend({ threads });
  for (const c of attentionOnly ? [] : cases) {
    const ws = Array.from({ length: c.copies ?? 1 }, () => randomWeights(backend, c.type, c.cols, c.rows));
    const w = ws[0]!;
    // host Float32Arrays, as the wasm backend takes them (kernels/reference/host-memory.ts)
    const x = device(new Float32Array(c.cols * c.tokens).map(() => Math.random() * 2 - 1));
    const out = device(new Float32Array(c.rows * c.tokens));
    for (let i = 0; i < 5; i++) for (const wi of ws) backend.matmul(out, wi, x, c.tokens);
    const times: number[] = [];
    for (let i = 0; i < repeats; i++) {
      for (const wi of ws) {
        const t0 = performance.now();
        backend.matmul(out, wi, x, c.tokens);
        times.push(performance.now() - t0);
      }
    }
    const ms = median(times);
    const gbs = w.data.length / (ms * 1e6);
    const gflops = (2 * c.cols * c.rows * c.tokens) / (ms * 1e6);
    const what = c.tokens === 1 ? `matvec ${c.rows}x${c.cols}` : `matmul ${c.tokens}x${c.cols} . ${c.cols}x${c.rows}`;
    console.log(
      `${threads} thread${threads > 1 ? "s" : " "}  ${typeName(c.type).padEnd(5)} ${what.padEnd(28)} ${ms.toFixed(3).padStart(8)} ms  ` +
        (c.tokens === 1 ? `${gbs.toFixed(1)} GB/s` : `${gflops.toFixed(1)} GFLOP/s`),
    );
  }
  benchDecodeAttention(backend, threads);
  benchPromptAttention(backend, threads);
  backend.dispose();
}

/** layer l of the pool: random K and V rows at `rows`, stored as the pool's types */
function fillLayer(backend: Backend, pool: KVBlockPool, l: number, rows: Int32Array, width: number): void {
  const n = rows.length;
  const staged = backend.allocActivations(n * width);
  const stagedV = backend.allocActivations(n * width);
  backend.write(staged, new Float32Array(n * width).map(() => Math.random() - 0.5));
  backend.write(stagedV, new Float32Array(n * width).map(() => Math.random() - 0.5));
  pool.writeRows(l, rows, staged, stagedV, n);
}

/**
 * A prompt chunk's attention in one layer of the SmolLM-135M shape: 256 queries after 768 cached
 * positions (f32 and f16 caches), the chunk a long prompt's prefill is made of
 */
function benchPromptAttention(backend: Backend, threads: number): void {
  const nHeads = 9, nKvHeads = 3, headDim = 64, nTokens = 256, startPos = 768, nAll = startPos + nTokens;
  const width = nKvHeads * headDim;
  const random = (n: number) => new Float32Array(n).map(() => Math.random() - 0.5);
  const q = backend.allocActivations(nTokens * nHeads * headDim), out = backend.allocActivations(nTokens * nHeads * headDim);
  backend.write(q, random(nTokens * nHeads * headDim));
  const rows = Int32Array.from({ length: nAll }, (_, i) => i);
  for (const types of [{ k: "f32", v: "f32" }, { k: "f16", v: "f16" }] as const) {
    const pool = new KVBlockPool(1, nKvHeads, headDim, nAll / 16, backend, 16, undefined, types);
    fillLayer(backend, pool, 0, rows, width);
    const pass = () => backend.attention(out, q, pool.keys[0]!, pool.values[0]!, nTokens, startPos, nHeads, nKvHeads, headDim, 0.125, rows, pool.encoding);
    console.log(`${threads} thread${threads > 1 ? "s" : " "}  prompt attention, ${nTokens} queries after ${startPos} keys, one layer, ${types.k.padEnd(4)} cache ${medianTime(pass).toFixed(3).padStart(8)} ms`);
  }
}

/**
 * One decode step's attention over every layer of a SmolLM-135M-shaped model (9 query heads on 3
 * KV heads of 64, 30 layers) on each cache type: the rows in a paged pool as the engine keeps them,
 * each layer its own, so that the step's rows (70 MB of f32 at 1536 positions) come from memory
 * as in a real decode, not from the caches; then the deep step over one layer's rows for every
 * layer ("rows in cache"): the arithmetic alone, the difference the memory's share
 */
function benchDecodeAttention(backend: Backend, threads: number): void {
  const nHeads = 9, nKvHeads = 3, headDim = 64, layers = 30, capacity = 1536;
  const width = nKvHeads * headDim;
  const random = (n: number) => new Float32Array(n).map(() => Math.random() - 0.5);
  const q = backend.allocActivations(nHeads * headDim), out = backend.allocActivations(nHeads * headDim);
  backend.write(q, random(nHeads * headDim));
  const rows = Int32Array.from({ length: capacity }, (_, i) => i);
  // the mixed caches say what each side's type costs
  for (const types of [{ k: "f32", v: "f32" }, { k: "f16", v: "f16" }, { k: "f16", v: "f32" }, { k: "f32", v: "f16" }, { k: "q8_0", v: "q8_0" }] as const) {
    const type = types.k === types.v ? types.k : `${types.k}/${types.v}`;
    const pool = new KVBlockPool(layers, nKvHeads, headDim, capacity / 16, backend, 16, undefined, types);
    for (let l = 0; l < layers; l++) fillLayer(backend, pool, l, rows, width);
    const bytesPerRow = kvBytesPerToken({ blockCount: 1, headCountKv: nKvHeads, headDim }, types);
    // last, the deep step over layer 0's rows 30 times: they stay in the caches, which leaves the arithmetic
    for (const [depth, resident] of [[128, false], [capacity, false], [capacity, true]] as const) {
      const step = () => {
        for (let l = 0; l < layers; l++) {
          const layer = resident ? 0 : l;
          backend.attention(out, q, pool.keys[layer]!, pool.values[layer]!, 1, depth - 1, nHeads, nKvHeads, headDim, 0.125, rows, pool.encoding);
        }
      };
      const ms = medianTime(step);
      const gbs = (layers * depth * bytesPerRow) / (ms * 1e6);
      const what = resident ? "rows in cache" : `${gbs.toFixed(1)} GB/s of K/V`;
      console.log(`${threads} thread${threads > 1 ? "s" : " "}  decode attention, ${layers} layers, ${type.padEnd(8)} cache, ${String(depth).padStart(4)} keys ${ms.toFixed(3).padStart(8)} ms  ${what}`);
    }
  }
  benchHeadContiguousRows(backend, threads, capacity);
}

/**
 * The f32 decode step at depth over the same bytes with one KV head per layer (90 layers of one
 * KV head and three query heads instead of 30 of three and nine), its rows contiguous or in runs
 * of 16 positions three runs apart (a pool stored per KV head within each block of 16): the
 * measurement that chose the wasm pools' planes per KV head, which the 30-layer f32 and f16 steps
 * above now read (docs/kernels.md, "Decode at depth: planes per KV head")
 */
function benchHeadContiguousRows(backend: Backend, threads: number, depth: number): void {
  const layers = 90, headDim = 64;
  const q = backend.allocActivations(3 * headDim), out = backend.allocActivations(3 * headDim);
  backend.write(q, new Float32Array(3 * headDim).map(() => Math.random() - 0.5));
  for (const [runs, what] of [[false, "each head's rows contiguous"], [true, "runs of 16 rows, 48 apart"]] as const) {
    const poolRows = runs ? 3 * depth : depth;
    const rows = Int32Array.from({ length: depth }, (_, p) => (runs ? Math.floor(p / 16) * 48 + (p % 16) : p));
    const pool = new KVBlockPool(layers, 1, headDim, poolRows / 16, backend, 16);
    for (let l = 0; l < layers; l++) fillLayer(backend, pool, l, Int32Array.from({ length: poolRows }, (_, i) => i), headDim);
    const ms = medianTime(() => {
      for (let l = 0; l < layers; l++) backend.attention(out, q, pool.keys[l]!, pool.values[l]!, 1, depth - 1, 3, 1, headDim, 0.125, rows, pool.encoding);
    });
    console.log(`${threads} thread${threads > 1 ? "s" : " "}  decode attention, ${layers} layers of one KV head, f32 cache, ${depth} keys ${ms.toFixed(3).padStart(8)} ms  ${what}`);
  }
}
