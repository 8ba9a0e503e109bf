import assert from "node:assert/strict";
import { test } from "node:test";
import { findAdapter } from "../src/kernels/webgpu/adapter.js";
import type { GPUDeviceLike } from "../src/kernels/webgpu/gpu-types.js";
import { buildShader, type KernelDef } from "../src/kernels/webgpu/shaders.js";
import { rng } from "./helpers/rng.js";

// The shaders' correctly rounded division and square root (div_rn / sqrt_rn in shaders.ts), which
// the activation quantizers' scales, the norms and the softmax normalisation go through, checked
// bit for bit against the host's IEEE arithmetic (Math.fround of the double result, which is the
// correctly rounded f32) on random bit patterns of every exponent, subnormals, and quotients built
// to lie within an ulp's hundredth of a rounding tie. A compiler's a / b may be 2.5 ulp off and its
// fma unfused (Mesa's lavapipe: an fma-corrected quotient came out 1 ulp off in such a near-tie).

let device: GPUDeviceLike | null = null;
let skip: string | false = false;
try {
  const { adapter } = await findAdapter();
  device = await adapter.requestDevice({ requiredFeatures: [], requiredLimits: {} });
} catch (e) {
  const message = (e as Error).message;
  if (!message.includes("no WebGPU adapter found")) throw e;
  skip = `no WebGPU adapter: ${message}`;
}

const PROBE: KernelDef = {
  name: "roundingProbe",
  workgroupSize: 64,
  arrays: [],
  extras: [{ name: "IO", type: "u32", write: true }],
  params: [["n", "u32"]],
  body: `  let i = wgi * 64u + lid;
  if (i >= P.n) { return; }
  let a = bitcast<f32>(IO[4u * i]);
  let b = bitcast<f32>(IO[4u * i + 1u]);
  IO[4u * i + 2u] = bitcast<u32>(div_rn(a, b));
  IO[4u * i + 3u] = bitcast<u32>(sqrt_rn(a));`,
};

/** runs the probe on pairs (a, b): the bits of div_rn(a, b) and sqrt_rn(a) for each */
async function probe(gpu: GPUDeviceLike, pairs: Uint32Array): Promise<Uint32Array> {
  const n = pairs.length / 2;
  const io = new Uint32Array(4 * n);
  for (let i = 0; i < n; i++) io.set([pairs[2 * i]!, pairs[2 * i + 1]!], 4 * i);
  const STORAGE = 0x80, COPY_SRC = 0x4, COPY_DST = 0x8, MAP_READ = 0x1, UNIFORM = 0x40;
  const buffer = gpu.createBuffer({ size: io.byteLength, usage: STORAGE | COPY_SRC | COPY_DST });
  const readBack = gpu.createBuffer({ size: io.byteLength, usage: MAP_READ | COPY_DST });
  const groups = Math.ceil(n / 64);
  const uniforms = gpu.createBuffer({ size: 16, usage: UNIFORM | COPY_DST });
  gpu.queue.writeBuffer(uniforms, 0, new Uint32Array([groups, n, 0, 0]));
  gpu.queue.writeBuffer(buffer, 0, io);
  const module = gpu.createShaderModule({ code: buildShader(PROBE, []) });
  const pipeline = gpu.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
  const bindGroup = gpu.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: uniforms } }, { binding: 1, resource: { buffer } }] });
  const encoder = gpu.createCommandEncoder();
  const pass = encoder.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bindGroup);
  pass.dispatchWorkgroups(groups);
  pass.end();
  encoder.copyBufferToBuffer(buffer, 0, readBack, 0, io.byteLength);
  gpu.queue.submit([encoder.finish()]);
  await readBack.mapAsync(MAP_READ);
  const out = new Uint32Array(readBack.getMappedRange().slice(0));
  for (const b of [buffer, readBack, uniforms]) b.destroy();
  return out;
}

const bitsOf = (x: number): number => new Uint32Array(new Float32Array([x]).buffer)[0]!;
const f32Of = (bits: number): number => new Float32Array(new Uint32Array([bits]).buffer)[0]!;
const hex = (bits: number): string => `0x${(bits >>> 0).toString(16).padStart(8, "0")}`;

test("div_rn and sqrt_rn in WGSL round as IEEE does, near ties and subnormals included", { skip }, async () => {
  const r = rng(4242);
  const u32 = (): number => Math.floor(r() * 2 ** 32) >>> 0;
  const pairs: number[] = [];
  // finite nonzero bit patterns of every exponent, either sign (subnormals among them)
  const finite = (): number => {
    for (;;) {
      const b = u32();
      if ((b & 0x7f800000) !== 0x7f800000 && (b & 0x7fffffff) !== 0) return b;
    }
  };
  for (let i = 0; i < 20000; i++) pairs.push(finite(), finite());
  // exponents near 1 (the scales' range) and subnormal operands
  for (let i = 0; i < 5000; i++) pairs.push((u32() & 0x807fffff) | ((100 + Math.floor(r() * 56)) << 23), (u32() & 0x807fffff) | ((100 + Math.floor(r() * 56)) << 23));
  for (let i = 0; i < 2000; i++) pairs.push(u32() & 0x807fffff || 1, finite());
  // a / b near the midpoint between two f32s: a = the f32 nearest b (q + ulp / 2) (about 2% within an ulp's hundredth)
  let nearTies = 0;
  for (let i = 0; i < 20000; i++) {
    const b = f32Of((u32() & 0x807fffff) | ((110 + Math.floor(r() * 36)) << 23));
    const q = f32Of((u32() & 0x007fffff) | ((110 + Math.floor(r() * 36)) << 23));
    const ulp = f32Of(bitsOf(q) + 1) - q;
    const a = Math.fround(b * (q + ulp / 2));
    const rel = Math.abs(a / b - (q + ulp / 2)) / ulp;
    if (rel < 0.01) nearTies++;
    pairs.push(bitsOf(a), bitsOf(b));
  }
  // 127 / amax and -127 / max as the Q8 quantizers take them, and the near tie lavapipe got wrong
  pairs.push(bitsOf(-127), bitsOf(2.7358310222625732), bitsOf(127), bitsOf(2.7358310222625732));
  // squares of f32s and their neighbours: roots at and next to exact values
  for (let i = 0; i < 2000; i++) {
    const s = Math.fround(f32Of(finite() & 0x3fffffff) * 1);
    const sq = bitsOf(Math.fround(s * s));
    pairs.push(sq, 1, (sq + 1) >>> 0, 1, Math.max(1, sq - 1), 1);
  }
  const input = Uint32Array.from(pairs);
  const out = await probe(device!, input);
  let checked = 0;
  for (let i = 0; i < input.length / 2; i++) {
    const a = f32Of(input[2 * i]!), b = f32Of(input[2 * i + 1]!);
    const q = Math.fround(a / b);
    if (Number.isFinite(q) && q !== 0 && Number.isFinite(a / b)) {
      assert.equal(hex(out[4 * i + 2]!), hex(bitsOf(q)), `div_rn(${a} [${hex(input[2 * i]!)}], ${b} [${hex(input[2 * i + 1]!)}])`);
      checked++;
    }
    if (a > 0) assert.equal(hex(out[4 * i + 3]!), hex(bitsOf(Math.fround(Math.sqrt(a)))), `sqrt_rn(${a} [${hex(input[2 * i]!)}])`);
  }
  assert.ok(nearTies > 300, `only ${nearTies} constructed quotients lie within 1% of an ulp of a tie`);
  assert.ok(checked > 40000, `only ${checked} quotients checked`);
});

test("div_rn and sqrt_rn keep IEEE's zeros, infinities and NaN", { skip }, async () => {
  const inf = bitsOf(Infinity), nan = 0x7fc00000, negZero = 0x80000000;
  const cases: [number, number][] = [[0, bitsOf(3)], [negZero, bitsOf(3)], [bitsOf(3), inf], [inf, bitsOf(3)], [bitsOf(-2), 0], [nan, bitsOf(1)], [bitsOf(1), nan], [bitsOf(-4), bitsOf(1)]];
  const out = await probe(device!, Uint32Array.from(cases.flat()));
  cases.forEach(([a, b], i) => {
    const q = f32Of(a) / f32Of(b), s = Math.sqrt(f32Of(a));
    const got = f32Of(out[4 * i + 2]!), root = f32Of(out[4 * i + 3]!);
    assert.ok(Object.is(got, Math.fround(q)) || (Number.isNaN(q) && Number.isNaN(got)), `div_rn(${f32Of(a)}, ${f32Of(b)}) = ${got}, expected ${q}`);
    assert.ok(Object.is(root, Math.fround(s)) || (Number.isNaN(s) && Number.isNaN(root)), `sqrt_rn(${f32Of(a)}) = ${root}, expected ${s}`);
  });
});
