import assert from "node:assert/strict";
import { before, test } from "node:test";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { createWasmBackend } from "../src/kernels/wasm/index.js";
// @ts-expect-error: plain JS build script
import { ensureWasm } from "../scripts/build-wasm.mjs";
import { device, filled, hostArray, onHost, type HostArray } from "./helpers/host-array.js";

before(() => ensureWasm());

// the wasm kernel (f32 SIMD, online softmax) against the reference (float64 sums, tiled softmax)
const CASES = [
  { nHeads: 4, nKvHeads: 2, headDim: 8, startPos: 0, nTokens: 5 },
  { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 37, nTokens: 1 },
  { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 3, nTokens: 13 },
  { nHeads: 4, nKvHeads: 4, headDim: 128, startPos: 300, nTokens: 2 },
  { nHeads: 8, nKvHeads: 1, headDim: 12, startPos: 0, nTokens: 1 },
  // TinyLlama's decode: enough groups of heads that threads claim whole groups
  { nHeads: 32, nKvHeads: 4, headDim: 64, startPos: 150, nTokens: 1 },
];

for (const c of CASES) {
  test(`wasm attention matches the reference: ${JSON.stringify(c)}`, async () => {
    const ref = createReferenceBackend();
    const one = await createWasmBackend({ threads: 1 });
    const two = await createWasmBackend({ threads: 2 });
    try {
      const total = c.startPos + c.nTokens;
      const kv = total * c.nKvHeads * c.headDim;
      const q = filled(c.nTokens * c.nHeads * c.headDim, 1);
      const k = filled(kv, 2), v = filled(kv, 3);
      const scale = 1 / Math.sqrt(c.headDim);
      const expected = hostArray(q.length);
      ref.attention(expected, q, k, v, c.nTokens, c.startPos, c.nHeads, c.nKvHeads, c.headDim, scale);
      const results = [one, two].map((be) => {
        const kw = onHost(be.allocActivations(kv)), vw = onHost(be.allocActivations(kv));
        kw.set(k);
        vw.set(v);
        const out = hostArray(q.length);
        be.attention(out, q, kw, vw, c.nTokens, c.startPos, c.nHeads, c.nKvHeads, c.headDim, scale);
        return out;
      });
      for (let i = 0; i < q.length; i++) assert.ok(Math.abs(results[0]![i]! - expected[i]!) < 1e-5, `element ${i}: wasm ${results[0]![i]} reference ${expected[i]}`);
      // each (token, head) item is computed whole by one thread, so the thread count does not
      // change the arithmetic: the same bits. (The 1-ulp differences once seen here were views
      // not recognised as wasm memory after another backend's memory grew, which fell back to
      // the reference kernel; see SharedArena.buffer.)
      assert.deepEqual(results[1], results[0]);
    } finally {
      one.dispose();
      two.dispose();
    }
  });
}

// encoders: bidirectional attention of one sequence, Q/K/V as column blocks of one fused
// projection (row stride 3 d), against the reference (float64 softmax); 1 and 2 threads agree bit for bit
for (const c of [
  { n: 1, nHeads: 2, headDim: 8 },
  { n: 7, nHeads: 3, headDim: 12 },
  { n: 130, nHeads: 12, headDim: 32 },
  // a head size the kernel does not take (not a multiple of 4): the reference op runs
  { n: 9, nHeads: 2, headDim: 6 },
]) {
  test(`wasm bidirectional attention matches the reference: ${JSON.stringify(c)}`, async () => {
    const ref = createReferenceBackend();
    const one = await createWasmBackend({ threads: 1 });
    const two = await createWasmBackend({ threads: 2 });
    try {
      const d = c.nHeads * c.headDim, stride = 3 * d;
      const qkv = filled(c.n * stride, 11);
      const scale = 1 / Math.sqrt(c.headDim);
      const outs = [ref, one, two].map((b) => {
        const out = hostArray(c.n * d);
        b.bidirectionalAttention(out, qkv, device(qkv.subarray(d)), device(qkv.subarray(2 * d)), c.n, c.nHeads, c.headDim, scale, stride);
        return out;
      });
      const [expected, a, b] = outs as [HostArray, HostArray, HostArray];
      // Q, K and V as three separate arrays give the same bits
      const part = (j: number) => device(Float32Array.from({ length: c.n * d }, (_, i) => qkv[Math.floor(i / d) * stride + j * d + (i % d)]!));
      const separate = hostArray(c.n * d);
      two.bidirectionalAttention(separate, part(0), part(1), part(2), c.n, c.nHeads, c.headDim, scale);
      assert.deepEqual(separate, b, "separate Q/K/V arrays differ from the fused layout");
      for (let i = 0; i < expected.length; i++) assert.ok(Math.abs(a[i]! - expected[i]!) <= 2e-6 * Math.max(1, Math.abs(expected[i]!)), `out[${i}] ${a[i]} vs ${expected[i]}`);
      assert.deepEqual(b, a, "2 threads differ from 1");
    } finally {
      ref.dispose();
      one.dispose();
      two.dispose();
    }
  });
}

test("wasm GELU (erf form) matches the TS op to 5e-6 relative, tails, Inf and NaN included", async () => {
  const ref = createReferenceBackend();
  const wasm = await createWasmBackend({ threads: 2 });
  try {
    const special = [0, -0, 1e-30, -1e-30, 0.5, -0.5, 3, -3, 5.5, -5.5, 9.99, 10, 10.01, -10, -12, -20, 40, -87, -200, Infinity, NaN, 3e38, -3e38];
    const x = hostArray(20001 + special.length);
    for (let i = 0; i <= 20000; i++) x[i] = -12 + (24 * i) / 20000;
    x.set(special, 20001);
    const expected = hostArray(x.length), got = hostArray(x.length);
    ref.unary("gelu-erf", expected, x, x.length);
    wasm.unary("gelu-erf", got, x, x.length);
    for (let i = 0; i < x.length; i++) {
      const e = expected[i]!, g = got[i]!;
      if (Number.isNaN(e)) assert.ok(Number.isNaN(g), `gelu(${x[i]}) = ${g}, expected NaN`);
      // (measured: 4e-7 for x >= 0, 3.5e-6 in the negative tail, whose values are below 1e-2; an
      // absolute 1e-12 where the TS op's float64 1 + erf cancels to 0 beyond x = -5.7)
      else assert.ok(g === e || Math.abs(g - e) <= 5e-6 * Math.abs(e) + 1e-12, `gelu(${x[i]}) = ${g}, TS op ${e}`);
    }
    // in place
    const inPlace = device(x.slice());
    wasm.unary("gelu-erf", inPlace, inPlace, inPlace.length);
    assert.deepEqual(inPlace, got);
  } finally {
    ref.dispose();
    wasm.dispose();
  }
});
