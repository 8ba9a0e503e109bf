import assert from "node:assert/strict";
import { before, test } from "node:test";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { createWasmBackend } from "../src/kernels/wasm/index.js";
// @ts-expect-error: plain JS build script
import { ensureWasm } from "../scripts/build-wasm.mjs";

before(() => ensureWasm());

function filled(n: number, seed: number): Float32Array {
  let s = seed >>> 0;
  return Float32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s / 2 ** 32) * 4 - 2;
  });
}

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
      const expected = new Float32Array(q.length);
      ref.attention(expected, q, k, v, c.nTokens, c.startPos, c.nHeads, c.nKvHeads, c.headDim, scale);
      const results = [one, two].map((be) => {
        const kw = be.allocActivations(kv), vw = be.allocActivations(kv);
        kw.set(k);
        vw.set(v);
        const out = new Float32Array(q.length);
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
