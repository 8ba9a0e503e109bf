/**
 * Times the WebGPU backend's kernels on whatever adapter it finds, for a machine with a GPU:
 *
 *   node --import tsx scripts/bench-webgpu.ts [--size 4096] [--tokens 1,128] [--keys 2048] [--repetitions 10]
 *
 * matmul of a size x size weight in F16, Q8_0, Q4_0, Q4_K, Q6_K for each token count (ms per
 * call; weight GB/s = the weight's bytes / time, what decode is bound by), then causal attention
 * of 32 heads (8 kv heads) of 128 over --keys cached positions. Each figure is the mean of
 * --repetitions calls recorded back to back and synchronised once by a read, after one warm-up
 * call (pipeline compilation, weight upload).
 *
 * Not a test. On a software adapter (SwiftShader, lavapipe) the numbers say nothing about GPU
 * speed: they only show the script runs.
 */
import { parseArgs } from "node:util";
import { createWebGPUBackend } from "../src/kernels/webgpu/index.js";
import { GGMLType, rowByteLength, typeName } from "../src/tensor/dtypes.js";
import { quantizeRow } from "../src/tensor/quant/index.js";

const { values } = parseArgs({
  options: { size: { type: "string", default: "4096" }, tokens: { type: "string", default: "1,128" }, keys: { type: "string", default: "2048" }, repetitions: { type: "string", default: "10" } },
});
const size = Number(values.size), keys = Number(values.keys), reps = Number(values.repetitions);
const tokenCounts = values.tokens.split(",").map(Number);

const b = await createWebGPUBackend({ powerPreference: "high-performance" });
console.log(b.name);

async function time(run: () => void, sync: () => Promise<unknown>): Promise<number> {
  run();
  await sync();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) run();
  await sync();
  return (performance.now() - t0) / reps;
}

const row = Float32Array.from({ length: size }, (_, i) => Math.sin(i) * 0.5);
for (const type of [GGMLType.F16, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_K, GGMLType.Q6_K]) {
  const rb = rowByteLength(type, size);
  const data = new Uint8Array(size * rb);
  const one = new Uint8Array(rb);
  quantizeRow(type, row, one, size);
  for (let r = 0; r < size; r++) data.set(one, r * rb);
  const w = { name: `bench.${typeName(type)}`, type, dims: [size, size], data };
  for (const n of tokenCounts) {
    const x = b.allocActivations(n * size), out = b.allocActivations(n * size);
    b.write(x, Float32Array.from({ length: n * size }, (_, i) => Math.cos(i)));
    const ms = await time(() => b.matmul(out, w, x, n), () => b.read(b.view(out, 0, 1)));
    console.log(`matmul ${typeName(type).padEnd(5)} ${size}x${size} x ${String(n).padStart(4)} tokens: ${ms.toFixed(3)} ms, weights ${(data.length / ms / 1e6).toFixed(1)} GB/s`);
  }
}

const nHeads = 32, nKv = 8, hd = 128;
const kc = b.allocActivations(keys * nKv * hd), vc = b.allocActivations(keys * nKv * hd);
b.write(kc, Float32Array.from({ length: keys * nKv * hd }, (_, i) => Math.sin(i)));
b.write(vc, Float32Array.from({ length: keys * nKv * hd }, (_, i) => Math.cos(i)));
for (const n of tokenCounts) {
  if (n > keys) continue;
  const q = b.allocActivations(n * nHeads * hd), out = b.allocActivations(n * nHeads * hd);
  const ms = await time(() => b.attention(out, q, kc, vc, n, keys - n, nHeads, nKv, hd, 1 / Math.sqrt(hd)), () => b.read(b.view(out, 0, 1)));
  console.log(`attention ${nHeads}/${nKv} heads of ${hd}, ${keys} keys x ${String(n).padStart(4)} tokens: ${ms.toFixed(3)} ms`);
}
b.dispose();
