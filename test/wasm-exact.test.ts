import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createReferenceBackend, F32_CACHE, kvCacheEncoding } from "../src/kernels/reference/index.js";
import { createWasmBackend } from "../src/kernels/wasm/index.js";
import { GGMLType } from "../src/tensor/dtypes.js";
import { quantizeRow } from "../src/tensor/quant/index.js";
import type { Backend } from "../src/kernels/backend.js";
import type { Tensor } from "../src/tensor/tensor.js";
import { device, hostArray, onHost, type HostArray } from "./helpers/host-array.js";
import { rng } from "./helpers/rng.js";
// @ts-expect-error: plain JS build script
import { ensureWasm } from "../scripts/build-wasm.mjs";

// Where Relaxed SIMD's multiply-add is fused (x86 with FMA), the wasm backend's Q8_0 matmul and
// attention add in llama.cpp's order: bit for bit the reference kernels, which are checked
// against llama.cpp itself in llama-cpp-parity.test.ts. Every output here must be the same f32.

let backends: Backend[] = [];
let skip: string | false = false;

before(async () => {
  await ensureWasm();
  backends = [await createWasmBackend({ threads: 1 }), await createWasmBackend({ threads: 2 })];
  assert.equal(backends[1]!.llamaCppOrder, backends[0]!.llamaCppOrder);
  if (backends[0]!.llamaCppOrder === "none") skip = "the wasm backend runs its SIMD128-order kernels here (no Relaxed SIMD, a multiply-add that is not fused, or TSLLM_WASM_SIMD=plain); wasm-backend.test.ts checks those";
});

after(() => {
  for (const be of backends) be.dispose();
});

const filled = (n: number, r: () => number, scale = 2): HostArray => device(Float32Array.from({ length: n }, () => (r() * 2 - 1) * scale));

function firstDifference(a: Float32Array, b: Float32Array): string | undefined {
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return `element ${i}: wasm ${a[i]} reference ${b[i]}`;
  return undefined;
}

test("Q8_0 matmul equals the reference kernel bit for bit (decode and batches, awkward shapes, 1 and 2 threads, with and without a -128 weight)", async (t) => {
  if (skip) return t.skip(skip);
  const reference = createReferenceBackend();
  const r = rng(17);
  for (const [rows, cols] of [[67, 160], [130, 576], [5, 2048]] as const) {
    const rowBytes = (cols / 32) * 34;
    const data = new Uint8Array(rows * rowBytes);
    for (let row = 0; row < rows; row++) quantizeRow(GGMLType.Q8_0, filled(cols, r, 1 + (row % 5)), data.subarray(row * rowBytes, (row + 1) * rowBytes), cols);
    // as quantized (one-token rows take the activations' signs onto the weights), then with a
    // weight of -128 (legal in a file, never written by ggml's quantizer), which must be exact too
    for (const [nTokens, minus128] of [1, 3, 4, 8, 13, 29].flatMap((n) => [[n, false], [n, true]] as const)) {
      data[2] = minus128 ? 0x80 : 0x7f;
      const x = filled(nTokens * cols, r, 3);
      const expected = hostArray(nTokens * rows);
      reference.matmul(expected, { name: "w", type: GGMLType.Q8_0, dims: [cols, rows], data }, x, nTokens);
      for (const be of backends) {
        const w: Tensor = { name: "w", type: GGMLType.Q8_0, dims: [cols, rows], data: be.allocWeights(data.length) };
        w.data.set(data);
        const out = hostArray(nTokens * rows);
        be.matmul(out, w, x, nTokens);
        assert.equal(firstDifference(out, expected), undefined, `${rows}x${cols}, ${nTokens} tokens, ${be.threads} threads${minus128 ? ", a weight of -128" : ""}`);
      }
    }
  }
});

test("attention equals the reference kernel bit for bit (GQA, head sizes with leftovers, batches across 64-key padding, scattered rows)", async (t) => {
  if (skip) return t.skip(skip);
  const reference = createReferenceBackend();
  const r = rng(29);
  const cases = [
    { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 0, nTokens: 1 },
    { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 37, nTokens: 1 },
    { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 3, nTokens: 16 },
    { nHeads: 4, nKvHeads: 4, headDim: 128, startPos: 63, nTokens: 1 },
    { nHeads: 4, nKvHeads: 4, headDim: 128, startPos: 60, nTokens: 9 },
    { nHeads: 6, nKvHeads: 2, headDim: 80, startPos: 5, nTokens: 70 },
    { nHeads: 8, nKvHeads: 1, headDim: 12, startPos: 0, nTokens: 3 },
    // groups of heads taken together over several key blocks: head size 128 (two chunks), a
    // group split between the threads' runs, and a group longer than one run
    { nHeads: 8, nKvHeads: 2, headDim: 128, startPos: 100, nTokens: 1 },
    { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 200, nTokens: 1 },
    { nHeads: 32, nKvHeads: 2, headDim: 64, startPos: 150, nTokens: 1 },
    // sweeps of eight positions and more take the value loop's barrier variant: a batch past 128
    // keys, a decode step past 512
    { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 130, nTokens: 12 },
    { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 600, nTokens: 1 },
    // decode over fewer keys than its 64 accumulator lanes: one, two and three groups of 16 live
    // (the others are skipped), also past the last 32 dimensions
    { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 20, nTokens: 1 },
    { nHeads: 4, nKvHeads: 2, headDim: 40, startPos: 9, nTokens: 1 },
    { nHeads: 4, nKvHeads: 2, headDim: 40, startPos: 44, nTokens: 1 },
    // one token after 512 keys or more (the value sweeps' barrier variant): exactly 512 keys, a
    // key count off every block size, two runs of eight heads per group, head size 128, a head
    // size with leftover dimensions (80), and an odd head left alone after the pairs
    { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 511, nTokens: 1 },
    { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 1000, nTokens: 1 },
    { nHeads: 32, nKvHeads: 2, headDim: 64, startPos: 700, nTokens: 1 },
    { nHeads: 8, nKvHeads: 2, headDim: 128, startPos: 515, nTokens: 1 },
    { nHeads: 6, nKvHeads: 2, headDim: 80, startPos: 530, nTokens: 1 },
    { nHeads: 5, nKvHeads: 1, headDim: 64, startPos: 777, nTokens: 1 },
  ];
  for (const c of cases) {
    const nAll = c.startPos + c.nTokens;
    const rowFloats = c.nKvHeads * c.headDim;
    // positions stored in reverse order of rows: the row index must be followed
    const rows = Int32Array.from({ length: nAll }, (_, j) => nAll - 1 - j);
    const k = filled(nAll * rowFloats, r, 3), v = filled(nAll * rowFloats, r);
    const q = filled(c.nTokens * c.nHeads * c.headDim, r);
    const scale = 1 / Math.sqrt(c.headDim);
    const expected = hostArray(q.length);
    reference.attention(expected, q, k, v, c.nTokens, c.startPos, c.nHeads, c.nKvHeads, c.headDim, scale, rows);
    for (const be of backends) {
      const kw = onHost(be.allocActivations(k.length)), vw = onHost(be.allocActivations(v.length));
      kw.set(k);
      vw.set(v);
      const out = hostArray(q.length);
      be.attention(out, q, kw, vw, c.nTokens, c.startPos, c.nHeads, c.nKvHeads, c.headDim, scale, rows);
      assert.equal(firstDifference(out, expected), undefined, `${JSON.stringify(c)}, ${be.threads} threads`);
    }
  }
});

test("attention over planes per KV head equals the reference kernel bit for bit (one token, a pool larger than the context, rows in reverse order)", async (t) => {
  if (skip) return t.skip(skip);
  const reference = createReferenceBackend();
  const r = rng(31);
  for (const c of [
    { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 200 },
    { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 900 },
    { nHeads: 12, nKvHeads: 4, headDim: 64, startPos: 1100 },
  ]) {
    const nAll = c.startPos + 1;
    // a pool of more rows than positions, each KV head's rows a plane of its own, positions in reverse row order
    const plane = nAll + 17;
    const rows = Int32Array.from({ length: nAll }, (_, j) => nAll - 1 - j);
    const k = filled(c.nKvHeads * plane * c.headDim, r, 3), v = filled(c.nKvHeads * plane * c.headDim, r);
    const q = filled(c.nHeads * c.headDim, r);
    const encoding = { ...kvCacheEncoding(F32_CACHE, c.headDim), headPlane: plane };
    const scale = 1 / Math.sqrt(c.headDim);
    const expected = hostArray(q.length);
    reference.attention(expected, q, k, v, 1, c.startPos, c.nHeads, c.nKvHeads, c.headDim, scale, rows, encoding);
    for (const be of backends) {
      const kw = onHost(be.allocActivations(k.length)), vw = onHost(be.allocActivations(v.length));
      kw.set(k);
      vw.set(v);
      const out = hostArray(q.length);
      be.attention(out, q, kw, vw, 1, c.startPos, c.nHeads, c.nKvHeads, c.headDim, scale, rows, encoding);
      assert.equal(firstDifference(out, expected), undefined, `${JSON.stringify(c)}, ${be.threads} threads`);
    }
  }
});

test("SwiGLU equals the plain-TS op bit for bit (ggml's exp: normal, denormal, overflowing and non-finite arguments; odd lengths)", (t) => {
  if (skip) return t.skip(skip);
  const reference = createReferenceBackend();
  const r = rng(41);
  for (const n of [1, 7, 1536, 5633]) {
    // mostly ordinary values, some far out where e^-g underflows, goes denormal or overflows,
    // and ±Inf and NaN (some beside the slow path's lanes)
    const special = [Infinity, -Infinity, Number.NaN];
    const gate = device(Float32Array.from({ length: n }, (_, i) => (i % 97 === 0 ? (r() * 2 - 1) * 200 : i % 89 === 0 ? -88 - r() * 20 : i % 96 === 1 ? special[(i / 96) % 3 | 0]! : (r() * 2 - 1) * 8)));
    const up = filled(n, r);
    const expected = hostArray(n);
    reference.swiglu(expected, gate, up, n);
    for (const be of backends) {
      const out = hostArray(n);
      be.swiglu(out, gate, up, n);
      assert.equal(firstDifference(out, expected), undefined, `n = ${n}, ${be.threads} threads`);
    }
  }
});
