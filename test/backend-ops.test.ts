import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import v8 from "node:v8";
import vm from "node:vm";
import type { Backend, DeviceArray, UnaryOp } from "../src/kernels/backend.js";
import { attention, bidirectionalAttention, gelu, geluErf, layerNorm, relu, rmsNorm, swiglu, tanh } from "../src/kernels/ops/index.js";
import { applyRope, type RopeParams } from "../src/kernels/ops/rope.js";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { createWasmBackend } from "../src/kernels/wasm/index.js";
import { createWebGPUBackend } from "../src/kernels/webgpu/index.js";
import { GGMLType, rowByteLength, typeName } from "../src/tensor/dtypes.js";
import { dequantizeRow, quantizeRow } from "../src/tensor/quant/index.js";
import type { Tensor } from "../src/tensor/tensor.js";
// @ts-expect-error: a plain .mjs build script without type declarations
import { ensureWasm } from "../scripts/build-wasm.mjs";
import { rng } from "./helpers/rng.js";

// The backend contract, op by op and backend by backend (llama.cpp's test-backend-ops idea):
// every op runs through a backend's own memory — allocActivations, write, the op, read — and is
// compared with the kernels/ops function (the spec) run on plain host arrays, within a
// tolerance per op: max |got - expected| <= tol * max(1, max |expected|). Memory ops and the
// element-wise adds are exact on every backend; the float kernels may add in another order.

const TOLERANCE = {
  exact: 0,
  norm: 1e-6,
  rope: 1e-6,
  swiglu: 1e-6,
  unary: { gelu: 1e-3, "gelu-erf": 1e-6, relu: 0, tanh: 1e-6 } as Record<UnaryOp, number>,
  attention: 1e-5,
  matmul: 1e-5,
};

const backends: { name: string; backend: Backend }[] = [];
before(async () => {
  await ensureWasm();
  backends.push({ name: "reference", backend: createReferenceBackend() });
  backends.push({ name: "wasm (2 threads)", backend: await createWasmBackend({ threads: 2 }) });
  backends.push({ name: "wasm (1 thread)", backend: await createWasmBackend({ threads: 1 }) });
  // the GPU backend where an adapter exists (a software one here: see docs/webgpu.md)
  try {
    // the table reads a weight on the host (getRows, the reference) after the GPU used it: keep its host bytes
    backends.push({ name: "webgpu", backend: await createWebGPUBackend({ keepHostWeights: true }) });
  } catch (e) {
    if (!(e as Error).message.includes("no WebGPU adapter found")) throw e;
    console.log(`# webgpu left out of the table: ${(e as Error).message}`);
  }
});
/** the weight types of this table the webgpu backend multiplies: all but the in-memory NF4 and INT8 (its matmul refuses those by name) */
const WEBGPU_TYPES = new Set([GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K, GGMLType.IQ4_NL, GGMLType.IQ4_XS]);
after(() => {
  for (const b of backends) b.backend.dispose();
});

function random(n: number, seed: number, scale = 1): Float32Array {
  const r = rng(seed);
  return Float32Array.from({ length: n }, () => (r() * 2 - 1) * scale);
}

function upload(be: Backend, host: ArrayLike<number>): DeviceArray {
  const a = be.allocActivations(host.length);
  be.write(a, host);
  return a;
}

function close(got: Float32Array, expected: Float32Array, tol: number, what: string): void {
  assert.equal(got.length, expected.length, `${what}: length`);
  let scale = 1, worst = 0, at = -1;
  for (const e of expected) scale = Math.max(scale, Math.abs(e));
  for (let i = 0; i < got.length; i++) {
    const err = Math.abs(got[i]! - expected[i]!);
    if (!(err <= worst)) { worst = err; at = i; }
  }
  assert.ok(worst <= tol * scale, `${what}: |error| ${worst} at ${at} (got ${got[at]}, expected ${expected[at]}) over ${tol} x ${scale}`);
}

/** a full collection, then a turn of the event loop for FinalizationRegistry callbacks */
async function collectGarbage(): Promise<void> {
  v8.setFlagsFromString("--expose-gc");
  const gc = vm.runInNewContext("gc") as () => void;
  gc();
  await new Promise((resolve) => setTimeout(resolve, 0));
  gc();
  await new Promise((resolve) => setTimeout(resolve, 0));
}

/** each backend in turn (the list is filled in before()) */
function eachBackend(name: string, body: (be: Backend, backendName: string) => Promise<void>): void {
  test(name, async () => {
    assert.ok(backends.length >= 3);
    for (const { name: bn, backend } of backends) await body(backend, bn);
  });
}

describe("memory ops", () => {
  eachBackend("write / view / read round-trip exactly, views address the right floats", async (be, bn) => {
    const host = random(100, 1);
    const a = upload(be, host);
    assert.deepEqual(await be.read(a), host, `${bn}: read after write`);
    assert.deepEqual(await be.read(be.view(a, 10, 20)), host.subarray(10, 30), `${bn}: view`);
    assert.deepEqual(await be.read(be.view(be.view(a, 10), 5, 3)), host.subarray(15, 18), `${bn}: view of a view`);
    be.write(be.view(a, 40, 10), [1, 2, 3], 2);
    const back = await be.read(a);
    assert.deepEqual([...back.subarray(40, 46)], [host[40], host[41], 1, 2, 3, host[45]], `${bn}: write through a view at an offset`);
    assert.throws(() => be.view(a, 90, 20), /outside/, `${bn}: a view past the end`);
  });

  eachBackend("allocActivations hands out zeros, memory recycled from dropped arrays too", async (be, bn) => {
    // dropped arrays go back to the backend when collected (the wasm backend's free lists): the
    // next owner must not see the last one's floats (a new KV cache, a new scratch)
    const length = 4096 + 3;
    for (let round = 0; round < 6; round++) {
      const a = be.allocActivations(length);
      const got = await be.read(a);
      assert.equal(got.findIndex((x) => x !== 0), -1, `${bn}: allocation ${round} is all zeros`);
      be.write(a, random(length, 10 + round));
      if (round === 0 && be.clear) {
        be.clear(be.view(a, 5, 100));
        const back = await be.read(a);
        assert.deepEqual([back[4] !== 0, back.subarray(5, 105).some((x) => x !== 0), back[105] !== 0], [true, false, true], `${bn}: clear zeros the view's floats only`);
      }
      await collectGarbage();
    }
  });

  eachBackend("scatterRows / gatherRows / copy2d move rows and column blocks", async (be, bn) => {
    const width = 6, src = random(4 * width, 2), dstRows = Int32Array.from([7, 2, 3, 0]);
    const dst = be.allocActivations(8 * width);
    be.scatterRows(dst, dstRows, upload(be, src), width, 4);
    const expected = new Float32Array(8 * width);
    dstRows.forEach((r, i) => expected.set(src.subarray(i * width, (i + 1) * width), r * width));
    assert.deepEqual(await be.read(dst), expected, `${bn}: scatterRows`);

    const gathered = be.allocActivations(3 * width);
    be.gatherRows(gathered, dst, [3, 7, 7], width);
    assert.deepEqual(await be.read(gathered), Float32Array.from([...expected.subarray(18, 24), ...expected.subarray(42, 48), ...expected.subarray(42, 48)]), `${bn}: gatherRows`);

    // a fused projection's middle column block (5 rows of 12, columns 4..8) into its own rows
    const fused = random(5 * 12, 3), block = be.allocActivations(5 * 4);
    be.copy2d(block, 0, 4, upload(be, fused), 4, 12, 5, 4);
    const blockExpected = new Float32Array(20);
    for (let r = 0; r < 5; r++) blockExpected.set(fused.subarray(r * 12 + 4, r * 12 + 8), r * 4);
    assert.deepEqual(await be.read(block), blockExpected, `${bn}: copy2d columns`);
    // rows copied within one array (a KV block's rows into a fresh block)
    const pool = upload(be, fused);
    be.copy2d(pool, 36, 24, pool, 0, 24, 1, 24);
    const poolExpected = fused.slice();
    poolExpected.copyWithin(36, 0, 24);
    assert.deepEqual(await be.read(pool), poolExpected, `${bn}: copy2d within one array`);
  });
});

describe("element-wise ops", () => {
  eachBackend("rmsNorm / layerNorm over rows, in place and not", async (be, bn) => {
    const width = 96, rows = 5, x = random(width * rows, 4, 3), w = random(width, 5), b = random(width, 6);
    for (const weight of [w, null]) {
      const expected = new Float32Array(x.length);
      rmsNorm(expected, x, weight, width, rows, 1e-5);
      const out = be.allocActivations(x.length);
      be.rmsNorm(out, upload(be, x), weight, width, rows, 1e-5);
      close(await be.read(out), expected, TOLERANCE.norm, `${bn}: rmsNorm ${weight ? "weighted" : "unweighted"}`);
    }
    const expected = new Float32Array(x.length);
    layerNorm(expected, x, w, b, width, rows, 1e-12);
    const inPlace = upload(be, x);
    be.layerNorm(inPlace, inPlace, w, b, width, rows, 1e-12);
    close(await be.read(inPlace), expected, TOLERANCE.norm, `${bn}: layerNorm in place`);
  });

  eachBackend("rope: both layouts, partial rotation, positions past the start", async (be, bn) => {
    const nTokens = 3, nHeads = 4, headDim = 16, positions = [5, 6, 40];
    const cases: RopeParams[] = [
      { headDim, ropeDim: headDim, base: 10000, freqScale: 1, style: "norm" },
      { headDim, ropeDim: 8, base: 500000, freqScale: 0.25, style: "neox", freqFactors: Float32Array.from([1, 2, 4, 8]) },
    ];
    for (const p of cases) {
      const x = random(nTokens * nHeads * headDim, 7), expected = x.slice();
      applyRope(expected, nTokens, nHeads, positions, p);
      const a = upload(be, x);
      be.rope(a, nTokens, nHeads, positions, p);
      close(await be.read(a), expected, TOLERANCE.rope, `${bn}: rope ${p.style} ropeDim ${p.ropeDim}`);
    }
  });

  eachBackend("addBias / add are exact; swiglu and every unary op", async (be, bn) => {
    const n = 3 * 40, x = random(n, 8, 4), y = random(n, 9, 4), bias = random(40, 10);
    const expected = x.slice();
    for (let r = 0; r < 3; r++) for (let i = 0; i < 40; i++) expected[r * 40 + i] = expected[r * 40 + i]! + bias[i]!;
    const a = upload(be, x);
    be.addBias(a, bias, 3);
    close(await be.read(a), expected, TOLERANCE.exact, `${bn}: addBias`);
    for (let i = 0; i < n; i++) expected[i] = expected[i]! + y[i]!;
    be.add(a, upload(be, y));
    close(await be.read(a), expected, TOLERANCE.exact, `${bn}: add`);

    const sw = new Float32Array(n);
    swiglu(sw, x, y, n);
    const out = be.allocActivations(n);
    be.swiglu(out, upload(be, x), upload(be, y), n);
    close(await be.read(out), sw, TOLERANCE.swiglu, `${bn}: swiglu`);

    const spec = { gelu, "gelu-erf": geluErf, relu, tanh } satisfies Record<UnaryOp, unknown>;
    // a long gelu-erf runs on the wasm backend's threads (the short one in TS)
    for (const [op, f] of Object.entries(spec) as [UnaryOp, (o: Float32Array, x: Float32Array, n: number) => void][]) {
      for (const len of op === "gelu-erf" ? [n, 20000] : [n]) {
        const input = random(len, 11, 6), want = new Float32Array(len);
        f(want, input, len);
        const got = upload(be, input);
        be.unary(op, got, got, len);
        close(await be.read(got), want, TOLERANCE.unary[op], `${bn}: unary ${op} over ${len}`);
      }
    }
  });

  eachBackend("gelu after a garbage collection: a backend's own tables outlive the host arrays they were made from", async (be, bn) => {
    // the webgpu backend once uploaded its f16 gelu table as a host array's copy, which went with
    // that array: a GPT-2's passes after the next collection bound a destroyed buffer
    const input = random(300, 12, 6), want = new Float32Array(300);
    gelu(want, input, 300);
    // (a buffer collected is destroyed after the next submit: the third round binds it)
    for (const round of [0, 1, 2]) {
      const got = upload(be, input);
      be.unary("gelu", got, got, 300);
      close(await be.read(got), want, TOLERANCE.unary.gelu, `${bn}: gelu, round ${round}`);
      await collectGarbage();
    }
  });
});

describe("attention", () => {
  eachBackend("causal attention through a paged row index, GQA, a prompt chunk after cached positions", async (be, bn) => {
    const nHeads = 4, nKvHeads = 2, headDim = 16, startPos = 5, nTokens = 3, nAll = startPos + nTokens, cacheRows = 12;
    const kvWidth = nKvHeads * headDim;
    const keys = random(cacheRows * kvWidth, 12), values = random(cacheRows * kvWidth, 13), q = random(nTokens * nHeads * headDim, 14);
    const rows = Int32Array.from([9, 3, 4, 0, 11, 6, 1, 2]);
    const expected = new Float32Array(nTokens * nHeads * headDim);
    attention(expected, q, keys, values, nTokens, startPos, nHeads, nKvHeads, headDim, 0.25, rows);
    const out = be.allocActivations(expected.length);
    be.attention(out, upload(be, q), upload(be, keys), upload(be, values), nTokens, startPos, nHeads, nKvHeads, headDim, 0.25, rows);
    close(await be.read(out), expected, TOLERANCE.attention, `${bn}: attention`);
    assert.equal(rows.length, nAll);
  });

  eachBackend("bidirectional attention over the column blocks of a fused projection", async (be, bn) => {
    const n = 7, nHeads = 3, headDim = 8, d = nHeads * headDim, stride = 3 * d;
    const qkv = random(n * stride, 15, 2);
    const expected = new Float32Array(n * d);
    bidirectionalAttention(expected, qkv, qkv.subarray(d), qkv.subarray(2 * d), n, nHeads, headDim, 0.3, stride);
    const base = upload(be, qkv), out = be.allocActivations(n * d);
    be.bidirectionalAttention(out, base, be.view(base, d), be.view(base, 2 * d), n, nHeads, headDim, 0.3, stride);
    close(await be.read(out), expected, TOLERANCE.attention, `${bn}: bidirectional attention`);
  });
});

describe("matmul and embedding lookup over weight types", () => {
  const TYPES = [GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q5_0, GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K, GGMLType.Q4_1, GGMLType.Q5_1, GGMLType.IQ4_NL, GGMLType.IQ4_XS, GGMLType.NF4, GGMLType.INT8];
  const cols = 256, rows = 37;

  function tensor(be: Backend, type: GGMLType, seed: number): Tensor {
    const rb = rowByteLength(type, cols), data = be.allocWeights(rb * rows);
    const values = random(cols * rows, seed);
    for (let r = 0; r < rows; r++) quantizeRow(type, values.subarray(r * cols, (r + 1) * cols), data.subarray(r * rb, (r + 1) * rb), cols);
    return { name: `w.${typeName(type)}`, type, dims: [cols, rows], data };
  }

  eachBackend("matmul of 1 and 5 tokens with and without the epilogue equals the reference kernels", async (be, bn) => {
    const reference = createReferenceBackend();
    try {
      for (const type of TYPES) {
        if (be.name === "webgpu" && !WEBGPU_TYPES.has(type)) {
          assert.throws(() => be.matmul(be.allocActivations(rows), tensor(be, type, 1), be.allocActivations(cols), 1), new RegExp(typeName(type)), `${bn}: refuses ${typeName(type)} by name`);
          continue;
        }
        const w = tensor(be, type, 16 + type);
        const bias = random(rows, 17);
        for (const nTokens of [1, 5]) {
          const x = random(nTokens * cols, 18 + nTokens, 2);
          for (const epilogue of [undefined, { bias, activation: "gelu-erf" as const }]) {
            const expected = new Float32Array(nTokens * rows);
            reference.matmul(expected as unknown as DeviceArray, w, x as unknown as DeviceArray, nTokens, epilogue);
            const out = be.allocActivations(nTokens * rows);
            be.matmul(out, w, upload(be, x), nTokens, epilogue);
            close(await be.read(out), expected, TOLERANCE.matmul, `${bn}: ${typeName(type)} x ${nTokens} tokens${epilogue ? " + bias + gelu" : ""}`);
          }
        }
        // the embedding lookup is a dequantization: exact
        const ids = [36, 0, 5, 5];
        const want = new Float32Array(ids.length * cols);
        ids.forEach((id, i) => dequantizeRow(type, w.data.subarray(id * rowByteLength(type, cols), (id + 1) * rowByteLength(type, cols)), want.subarray(i * cols, (i + 1) * cols), cols));
        const got = be.allocActivations(ids.length * cols);
        be.getRows(got, w, ids);
        close(await be.read(got), want, TOLERANCE.exact, `${bn}: getRows ${typeName(type)}`);
      }
    } finally {
      reference.dispose();
    }
  });
});
