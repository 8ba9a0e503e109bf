import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { before, test } from "node:test";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { createWasmBackend } from "../src/kernels/wasm/index.js";
import { GGMLType, rowByteLength, typeInfo, typeName } from "../src/tensor/dtypes.js";
import { canQuantize, f32ToF16Bits, quantizeRow } from "../src/tensor/quant/index.js";
import type { Backend } from "../src/kernels/backend.js";
import type { Tensor } from "../src/tensor/tensor.js";
// @ts-expect-error: a plain .mjs build script without type declarations
import { ensureWasm } from "../scripts/build-wasm.mjs";
import { runChild } from "./helpers/child.js";
import { device, hostArray, onHost, type HostArray } from "./helpers/host-array.js";
import { addInPlace, applyRope, rmsNorm, swiglu } from "../src/kernels/ops/index.js";
import { rng } from "./helpers/rng.js";

// The wasm kernels against the reference backend (the executable spec, which follows ggml:
// activations converted to the weight's vec_dot type, exact integer block dots, float64 sums).
// The wasm kernels sum in f32 in a different order, so they agree to rounding: within
// 1e-5 * (largest |output| of the matrix). Activation conversion is checked bit for bit in
// wasm-activations.test.ts.

before(async () => {
  await ensureWasm();
});

function uniform(n: number, r: () => number): HostArray {
  const out = hostArray(n);
  for (let i = 0; i < n; i++) out[i] = r() * 2 - 1;
  return out;
}

/** byte offsets of the f16 scale fields in a block, for types without a quantizer (random blocks) */
const SCALE_FIELDS: Partial<Record<GGMLType, number[]>> = {
  [GGMLType.Q2_K]: [80, 82],
  [GGMLType.Q3_K]: [108],
  [GGMLType.Q5_K]: [0, 2],
  // the grid i-quants: every index / sign / scale bit pattern is valid; f16 d at 0
  [GGMLType.IQ2_XS]: [0],
  [GGMLType.IQ3_S]: [0],
  [GGMLType.IQ2_XXS]: [0],
  [GGMLType.IQ2_S]: [0],
  [GGMLType.IQ3_XXS]: [0],
  [GGMLType.IQ1_S]: [0],
  // IQ1_M has no d field: its f16 scale is the top nibbles of the scale words at 48..55 (set below)
  [GGMLType.IQ1_M]: [],
  // MXFP4: an E8M0 exponent at 0 (set below)
  [GGMLType.MXFP4]: [],
  [GGMLType.TQ1_0]: [52],
  [GGMLType.TQ2_0]: [64],
};

function fillWeights(type: GGMLType, data: Uint8Array, cols: number, rows: number, r: () => number): void {
  const rb = rowByteLength(type, cols);
  if (canQuantize(type)) {
    for (let row = 0; row < rows; row++) quantizeRow(type, uniform(cols, r), data.subarray(row * rb, (row + 1) * rb), cols);
    return;
  }
  for (let i = 0; i < data.length; i++) data[i] = Math.floor(r() * 256);
  const { typeSize } = typeInfo(type);
  for (let o = 0; o < data.length; o += typeSize) {
    if (type === GGMLType.MXFP4) data[o] = 118 + Math.floor(r() * 8);
    if (type === GGMLType.IQ1_M) {
      const h = f32ToF16Bits((r() + 0.1) * 0.01);
      for (let i = 0; i < 4; i++) data[o + 49 + 2 * i] = (data[o + 49 + 2 * i]! & 0x0f) | (((h >>> (4 * i)) & 0xf) << 4);
    }
    for (const f of SCALE_FIELDS[type]!) {
      const h = f32ToF16Bits((r() + 0.1) * 0.01);
      data[o + f] = h & 0xff;
      data[o + f + 1] = h >>> 8;
    }
  }
}

function weights(backend: Backend, type: GGMLType, cols: number, rows: number, seed: number): Tensor {
  const data = backend.allocWeights(rowByteLength(type, cols) * rows);
  fillWeights(type, data, cols, rows, rng(seed));
  return { name: `w.${typeName(type)}`, type, dims: [cols, rows], data };
}

function assertClose(actual: Float32Array, expected: Float32Array, what: string): void {
  let scale = 0;
  for (const v of expected) scale = Math.max(scale, Math.abs(v));
  const tol = 1e-5 * scale;
  for (let i = 0; i < expected.length; i++) {
    if (!(Math.abs(actual[i]! - expected[i]!) <= tol)) {
      assert.fail(`${what}: out[${i}] = ${actual[i]}, reference ${expected[i]} (tolerance ${tol})`);
    }
  }
}

const GRID_TYPES = [GGMLType.IQ2_XS, GGMLType.IQ3_S, GGMLType.IQ2_XXS, GGMLType.IQ2_S, GGMLType.IQ3_XXS, GGMLType.IQ1_S, GGMLType.IQ1_M];

// wasm kernels first, then the types that fall back to the reference kernels
const TYPES = [
  GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_K, GGMLType.Q6_K,
  GGMLType.IQ4_NL, GGMLType.IQ4_XS, GGMLType.IQ2_XS, GGMLType.IQ3_S, GGMLType.IQ2_XXS, GGMLType.IQ2_S, GGMLType.IQ3_XXS, GGMLType.IQ1_S, GGMLType.IQ1_M, GGMLType.MXFP4, GGMLType.TQ1_0, GGMLType.TQ2_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q5_K,
];

/**
 * columns: whole blocks; for the float types also lengths that are not a multiple of 4 or of 16
 * (float.ts's one-token loop takes a row's 4-float chunks four at a time: 90, 62 and 7 leave 2, 3 and 1)
 * and one over several of float.ts's 512-float spans, the last one short, in rows over 4 KB (tile4x1)
 */
function colsFor(type: GGMLType): number[] {
  const { blockSize } = typeInfo(type);
  if (blockSize === 1) return [96, 131, 90, 62, 7, 2102];
  return blockSize === 32 ? [160] : [512];
}

test("every weight format matches the reference backend (rows 67, tokens 1/3/13, threads 1 and 2, identical bits)", async () => {
  const reference = createReferenceBackend();
  const one = await createWasmBackend({ threads: 1 });
  const two = await createWasmBackend({ threads: 2 });
  try {
    let seed = 1;
    for (const type of TYPES) {
      for (const cols of colsFor(type)) {
        const rows = 67;
        const w1 = weights(one, type, cols, rows, seed);
        const w2: Tensor = { ...w1, data: two.allocWeights(w1.data.length) };
        w2.data.set(w1.data);
        for (const nTokens of [1, 3, 13]) {
          const x = uniform(nTokens * cols, rng(++seed));
          const expected = hostArray(nTokens * rows);
          const a = hostArray(nTokens * rows);
          const b = hostArray(nTokens * rows);
          reference.matmul(expected, w1, x, nTokens);
          one.matmul(a, w1, x, nTokens);
          two.matmul(b, w2, x, nTokens);
          const what = `${typeName(type)} ${cols}x${rows}, ${nTokens} tokens`;
          assertClose(a, expected, what);
          assert.deepEqual(b, a, `${what}: 2 threads differ from 1 thread`);
        }
        seed++;
      }
    }
  } finally {
    one.dispose();
    two.dispose();
  }
});

/*
 * The grid i-quants (IQ2_XS, IQ3_S, IQ2_XXS, IQ2_S, IQ3_XXS, IQ1_S, IQ1_M): the kernels add in the reference's (llama.cpp's IQ panel) order, the
 * super-block FMA done in f64, so they give the reference's bits except where that f64 sum lands
 * on an f32 rounding midpoint (double rounding: one ulp, about 2^-29 of the sums); MXFP4 (the
 * repacked gemv order) and TQ1_0 / TQ2_0 (the AVX2 vec_dot's 8 lanes) likewise
 */
test("the grid i-quant, MXFP4 and TQ kernels give the reference dot's bits (both builds, 1/4/7 tokens, 2048 columns)", async () => {
  const reference = createReferenceBackend();
  for (const simd of ["plain", "relaxed"] as const) {
    const wasm = await createWasmBackend({ threads: 2, simd });
    try {
      let seed = 300;
      for (const type of [...GRID_TYPES, GGMLType.MXFP4, GGMLType.TQ1_0, GGMLType.TQ2_0]) {
        const cols = 2048, rows = 64;
        const w = weights(wasm, type, cols, rows, ++seed);
        for (const n of [1, 4, 7]) {
          const x = uniform(n * cols, rng(++seed));
          const expected = hostArray(n * rows), got = hostArray(n * rows);
          reference.matmul(expected, w, x, n);
          wasm.matmul(got, w, x, n);
          assert.deepEqual(got, expected, `${simd} build, ${typeName(type)}, ${n} tokens`);
        }
      }
    } finally {
      wasm.dispose();
    }
  }
});

test("a matmul's epilogue gives the bits of applying it afterwards: bias, GELU (every format, both backends, decode and batches); bad epilogues name the tensor", async () => {
  const reference = createReferenceBackend();
  const wasm = await createWasmBackend({ threads: 2 });
  try {
    let seed = 70;
    for (const type of TYPES) {
      const cols = colsFor(type)[0]!;
      const rows = 37;
      const w = weights(wasm, type, cols, rows, ++seed);
      const bias = uniform(rows, rng(++seed));
      for (const backend of [reference, wasm]) {
        for (const n of [1, 3, 13]) {
          const x = uniform(n * cols, rng(++seed));
          const plain = hostArray(n * rows), withBias = hostArray(n * rows), withGelu = hostArray(n * rows);
          backend.matmul(plain, w, x, n);
          for (let t = 0; t < n; t++) for (let r = 0; r < rows; r++) plain[t * rows + r] = plain[t * rows + r]! + bias[r]!;
          backend.matmul(withBias, w, x, n, { bias });
          assert.deepEqual(withBias, plain, `${backend.name} ${typeName(type)}, ${n} tokens: bias`);
          backend.matmul(withGelu, w, x, n, { bias, activation: "gelu-erf" });
          // the TS op over the biased result: the reference backend's bits, the wasm kernel's within 5e-7
          const viaOp = hostArray(n * rows);
          reference.unary("gelu-erf", viaOp, plain, plain.length);
          if (backend === reference) assert.deepEqual(withGelu, viaOp, `reference ${typeName(type)}, ${n} tokens: bias + GELU`);
          for (let i = 0; i < viaOp.length; i++) assert.ok(Math.abs(withGelu[i]! - viaOp[i]!) <= 1e-6 * Math.max(1, Math.abs(viaOp[i]!)), `${backend.name} ${typeName(type)}: GELU ${withGelu[i]} vs ${viaOp[i]}`);
        }
        assert.throws(() => backend.matmul(hostArray(rows), w, uniform(cols, rng(1)), 1, { bias: new Float32Array(rows - 1) }), /matmul w\.\w+: bias holds 36 floats, expected 37/);
        assert.throws(() => backend.matmul(hostArray(rows), w, uniform(cols, rng(1)), 1, { activation: "tanh" as "gelu-erf" }), /matmul w\.\w+: unknown activation "tanh"/);
      }
      // a job after one with an epilogue carries none
      const x = uniform(cols, rng(++seed));
      const a = hostArray(rows), b = hostArray(rows);
      wasm.matmul(a, w, x, 1);
      wasm.matmul(b, w, x, 1, { bias, activation: "gelu-erf" });
      wasm.matmul(b, w, x, 1);
      assert.deepEqual(b, a, `${typeName(type)}: the epilogue of the previous matmul leaked into the next`);
    }
  } finally {
    reference.dispose();
    wasm.dispose();
  }
});

/*
 * A request's tokens must not depend on what else the engine batches with it: a row computed
 * for one token (decode) and inside a batch (prefill tiles, leftovers of odd batches) takes the
 * same arithmetic, so the same bits. Float weights and the k-quants in both builds; Q8_0 where the
 * kernels add in llama.cpp's order.
 */
test("a token's outputs have the same bits alone and in batches of every size (float weights, F16 with subnormal halves, the k-quants, IQ4_XS, the grid i-quants, MXFP4, TQ1_0, TQ2_0; Q8_0 in llama.cpp's order)", async () => {
  for (const simd of ["plain", "relaxed"] as const) {
    const backend = await createWasmBackend({ threads: 2, simd });
    try {
      const types = [GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K, GGMLType.IQ4_XS, ...GRID_TYPES, GGMLType.MXFP4, GGMLType.TQ1_0, GGMLType.TQ2_0];
      if (backend.llamaCppOrder !== "none") types.push(GGMLType.Q8_0);
      let seed = 40;
      for (const type of types) {
        const { blockSize } = typeInfo(type);
        // the float types: the lengths that are not a multiple of 4 or 16
        const colsList = blockSize === 1 ? colsFor(type).slice(1) : blockSize === 256 ? [512] : [96];
        for (const cols of colsList) {
          const rows = 23;
          const w = weights(backend, type, cols, rows, ++seed);
          // F16: every fifth weight a subnormal half or a zero of either sign (batches convert them exactly, single tokens scale them by 2^-112)
          if (type === GGMLType.F16) {
            const halves = new Uint16Array(w.data.buffer, w.data.byteOffset, w.data.length / 2), r = rng(++seed);
            for (let i = 0; i < halves.length; i += 5) halves[i] = (r() < 0.5 ? 0x8000 : 0) | (r() < 0.1 ? 0 : Math.floor(r() * 1024));
          }
          const x = uniform(13 * cols, rng(++seed));
          const alone = hostArray(13 * rows);
          for (let t = 0; t < 13; t++) backend.matmul(device(alone.subarray(t * rows)), w, device(x.subarray(t * cols)), 1);
          for (const n of [2, 3, 4, 5, 8, 13]) {
            const batch = hostArray(n * rows);
            backend.matmul(batch, w, x, n);
            assert.deepEqual(batch, alone.subarray(0, n * rows), `${simd} build, ${typeName(type)} ${cols} columns: a batch of ${n} differs from its tokens alone`);
          }
        }
      }
    } finally {
      backend.dispose();
    }
  }
});

test("a batch's RMSNorm, RoPE, residual additions, SwiGLU and row copies run as jobs in the backend's memory with the TS ops' bits; matmuls read and write such activations in place with the bits of host arrays", async () => {
  for (const simd of ["plain", "relaxed"] as const) {
    for (const threads of [1, 2]) {
      const backend = await createWasmBackend({ threads, simd });
      const what = `${simd} build, ${threads} thread(s)`;
      const inMemory = (values: Float32Array): HostArray => {
        const a = onHost(backend.allocActivations(values.length));
        a.set(values);
        return a;
      };
      try {
        let seed = 700;
        // widths with and without a tail of 1-3 floats; 1e-6 is no f32, so eps is added in f64
        for (const [width, rows, eps, withWeight] of [[576, 40, Math.fround(1e-5), true], [131, 200, 1e-6, false], [67, 300, 1e-5, true]] as const) {
          const x = uniform(width * rows, rng(++seed)), weight = withWeight ? uniform(width, rng(++seed)) : null;
          const expected = new Float32Array(width * rows);
          rmsNorm(expected, x, weight, width, rows, eps);
          const out = inMemory(new Float32Array(width * rows));
          backend.rmsNorm(out, inMemory(x), weight, width, rows, eps);
          assert.deepEqual(out, expected, `${what}: rmsNorm ${rows} x ${width}`);
          const inPlace = inMemory(x);
          backend.rmsNorm(inPlace, inPlace, weight, width, rows, eps);
          assert.deepEqual(inPlace, expected, `${what}: rmsNorm ${rows} x ${width} in place`);
        }
        for (const n of [16384, 20001]) {
          const x = uniform(n, rng(++seed)), y = uniform(n, rng(++seed));
          const sum = x.slice();
          addInPlace(sum, y);
          const xs = inMemory(x);
          backend.add(xs, inMemory(y));
          assert.deepEqual(xs, sum, `${what}: add of ${n}`);
          const gate = uniform(n, rng(++seed)).map((v) => v * 8), up = uniform(n, rng(++seed));
          const expected = new Float32Array(n);
          swiglu(expected, gate, up, n);
          const out = inMemory(new Float32Array(n));
          backend.swiglu(out, inMemory(gate), inMemory(up), n);
          assert.deepEqual(out, expected, `${what}: swiglu of ${n}`);
        }
        // RoPE: both pair layouts, a partial rotation, positions out of order and repeated
        for (const [style, headDim, ropeDim, nHeads] of [["norm", 64, 64, 9], ["neox", 128, 96, 4]] as const) {
          const nTokens = 40, p = { headDim, ropeDim, base: 10000, freqScale: 1, style };
          const positions = Array.from({ length: nTokens }, (_, t) => (t * 37) % 29 + (t >> 3) * 1000);
          const x = uniform(nTokens * nHeads * headDim, rng(++seed));
          const expected = x.slice();
          applyRope(expected, nTokens, nHeads, positions, p);
          const xs = inMemory(x);
          backend.rope(xs, nTokens, nHeads, positions, p);
          assert.deepEqual(xs, expected, `${what}: rope (${style}, ${ropeDim} of ${headDim})`);
        }
        // copy2d: strided rows out of a wider array, both ways
        {
          const rows = 64, width = 333, wide = uniform(rows * 1000, rng(++seed));
          const src = inMemory(wide), dst = inMemory(new Float32Array(rows * width));
          backend.copy2d(dst, 0, width, src, 7, 1000, rows, width);
          for (let r = 0; r < rows; r++) assert.deepEqual(dst.subarray(r * width, (r + 1) * width), wide.subarray(7 + r * 1000, 7 + r * 1000 + width), `${what}: copy2d row ${r}`);
          const back = inMemory(new Float32Array(rows * 1000));
          backend.copy2d(back, 500, 1000, dst, 0, width, rows, width);
          for (let r = 0; r < rows; r++) assert.deepEqual(back.subarray(500 + r * 1000, 500 + r * 1000 + width), dst.subarray(r * width, (r + 1) * width), `${what}: copy2d back, row ${r}`);
        }
        for (const type of [GGMLType.F32, GGMLType.F16, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_K, GGMLType.Q6_K]) {
          const cols = 512, rows = 40, n = 13;
          const w = weights(backend, type, cols, rows, ++seed);
          const x = uniform(n * cols, rng(++seed));
          const viaHost = hostArray(n * rows);
          backend.matmul(viaHost, w, x, n);
          const out = inMemory(new Float32Array(n * rows));
          backend.matmul(out, w, inMemory(x), n);
          assert.deepEqual(out, viaHost, `${what}: ${typeName(type)} matmul on activations in the backend's memory`);
        }
        // the output over its own input: read through a copy
        const w = weights(backend, GGMLType.F32, 64, 64, ++seed);
        const x = uniform(5 * 64, rng(++seed));
        const viaHost = hostArray(5 * 64);
        backend.matmul(viaHost, w, x, 5);
        const same = inMemory(x);
        backend.matmul(same, w, same, 5);
        assert.deepEqual(same, viaHost, `${what}: F32 matmul whose output is its input`);
      } finally {
        backend.dispose();
      }
    }
  }
});

test("weights outside the backend's memory are copied in; views stay valid while the memory grows", async () => {
  const backend = await createWasmBackend({ threads: 2 });
  const reference = createReferenceBackend();
  try {
    const cols = 64;
    const rows = 9;
    const first = weights(backend, GGMLType.Q8_0, cols, rows, 7);
    const firstBytes = first.data.slice();
    backend.allocWeights(64 << 20); // grows the memory
    assert.deepEqual(first.data, firstBytes);
    const plain: Tensor = { ...first, name: "plain", data: first.data.slice() };
    const x = uniform(2 * cols, rng(8));
    const expected = hostArray(2 * rows);
    const a = hostArray(2 * rows);
    const b = hostArray(2 * rows);
    reference.matmul(expected, first, x, 2);
    backend.matmul(a, first, x, 2);
    backend.matmul(b, plain, x, 2);
    assertClose(a, expected, "weights allocated before growing");
    assert.deepEqual(b, a);
    const ids = [3, 0, 8];
    const rowsOut = hostArray(ids.length * cols);
    const rowsRef = hostArray(ids.length * cols);
    backend.getRows(rowsOut, first, ids);
    reference.getRows(rowsRef, first, ids);
    assert.deepEqual(rowsOut, rowsRef);
  } finally {
    backend.dispose();
  }
});

test("a tensor larger than a wasm32 memory fails in allocWeights with an error naming it and suggesting a quantized format", async () => {
  const backend = await createWasmBackend({ threads: 1 });
  try {
    assert.throws(() => backend.allocWeights(5 * 2 ** 30, "output.weight"), /tensor output\.weight needs 5368709120 bytes, more than one WebAssembly memory holds for weights \(3758096384 of its 4 GiB.*Q8_0 or Q4_K/);
    assert.throws(() => backend.allocWeights(-1), /byteLength/);
  } finally {
    backend.dispose();
  }
  assert.throws(() => backend.matmul(hostArray(1), { name: "w", type: GGMLType.F32, dims: [1, 1], data: new Uint8Array(4) }, hostArray(1), 1), /after dispose/);
});

test("bad shapes are rejected naming the tensor", async () => {
  const backend = await createWasmBackend({ threads: 1 });
  try {
    const w = weights(backend, GGMLType.Q4_0, 64, 4, 1);
    assert.throws(() => backend.matmul(hostArray(4), w, hostArray(63), 1), /w\.Q4_0: x holds 63 floats, expected 1 x 64/);
    assert.throws(() => backend.matmul(hostArray(3), w, hostArray(64), 1), /w\.Q4_0: out holds 3 floats/);
    const short: Tensor = { ...w, data: w.data.subarray(0, 10) };
    assert.throws(() => backend.matmul(hostArray(4), short, hostArray(64), 1), /w\.Q4_0 .* needs 144 bytes, has 10/);
  } finally {
    backend.dispose();
  }
});

test("a matmul completes while another process keeps a core busy", async () => {
  const busy = spawn(process.execPath, ["-e", "const end = Date.now() + 1500; while (Date.now() < end);"], { stdio: "ignore" });
  const exited = new Promise((resolve) => busy.once("exit", resolve));
  const backend = await createWasmBackend({ threads: 2 });
  const reference = createReferenceBackend();
  try {
    const w = weights(backend, GGMLType.Q8_0, 1024, 256, 3);
    const x = uniform(4 * 1024, rng(4));
    const expected = hostArray(4 * 256);
    reference.matmul(expected, w, x, 4);
    const out = hostArray(4 * 256);
    const end = Date.now() + 1000;
    let runs = 0;
    while (Date.now() < end || runs < 3) {
      backend.matmul(out, w, x, 4);
      runs++;
    }
    assertClose(out, expected, "under load");
  } finally {
    backend.dispose();
    await exited;
  }
});

test("a worker stopped mid-claim holds nothing up: the main thread takes its rows over, results keep their bits, the late rows are dropped", async () => {
  const one = await createWasmBackend({ threads: 1 });
  const two = await createWasmBackend({ threads: 2 });
  try {
    const cols = 2048, rows = 512;
    const w1 = weights(one, GGMLType.Q8_0, cols, rows, 21);
    const w2: Tensor = { ...w1, data: two.allocWeights(w1.data.length) };
    w2.data.set(w1.data);
    // single-token inputs (stealable matmuls) and a three-token one (not stealable)
    const inputs = [1, 1, 1, 1, 3, 1, 1].map((n, i) => ({ n, x: uniform(n * cols, rng(100 + i)) }));
    const expected = inputs.map(({ n, x }) => {
      const out = hostArray(n * rows);
      one.matmul(out, w1, x, n);
      return out;
    });
    const runAll = (when: string): void => {
      inputs.forEach(({ n, x }, i) => {
        const out = hostArray(n * rows);
        two.matmul(out, w2, x, n);
        assert.deepEqual(out, expected[i], `${when}: input ${i} (${n} tokens) differs from 1 thread`);
      });
    };
    two.stallWorkerOnce(200);
    // the worker stops in its first claim and the jobs go on without it; when it resumes (in
    // the middle of later jobs) it finds its claim taken and must drop its rows, computed from
    // inputs overwritten since, rather than write them into the memory those jobs use
    const end = Date.now() + 500;
    for (let round = 0; Date.now() < end || round < 3; round++) runAll(`round ${round}`);
    assert.ok(two.stolenClaims >= 1, `the main thread took no claim over (${two.stolenClaims})`);
  } finally {
    one.dispose();
    two.dispose();
  }
});

test("thousands of tiny jobs of different sizes under a busy core keep their bits and never hang (a late worker never claims rows of the next job)", async () => {
  const busy = spawn(process.execPath, ["-e", "const end = Date.now() + 2500; while (Date.now() < end);"], { stdio: "ignore" });
  const exited = new Promise((resolve) => busy.once("exit", resolve));
  // jobs of a few microseconds, each with a different ROWS than the one before: a worker that
  // wakes up late could read the next job's words under the old job's tag
  const r = await runChild(`
    import { createWasmBackend } from "./src/kernels/wasm/index.ts";
    const one = await createWasmBackend({ threads: 1 });
    const two = await createWasmBackend({ threads: 2 });
    const cols = 64;
    const shapes = [8, 128, 64, 344, 4].map((rows, i) => {
      const data = new Uint8Array(rows * cols * 4);
      const f = new Float32Array(data.buffer);
      for (let j = 0; j < f.length; j++) f[j] = Math.sin(j * 0.37 + i);
      const w1 = { name: "w" + i, type: 0, dims: [cols, rows], data: one.allocWeights(data.length) };
      w1.data.set(data);
      const w2 = { ...w1, data: two.allocWeights(data.length) };
      w2.data.set(data);
      return { rows, w1, w2 };
    });
    const end = Date.now() + 2000;
    let jobs = 0;
    for (let k = 0; Date.now() < end || jobs < 1000; k++) {
      const { rows, w1, w2 } = shapes[k % shapes.length];
      const n = k % 7 === 0 ? 3 : 1;
      const x = new Float32Array(n * cols).map((_, j) => Math.cos(j + k));
      const a = new Float32Array(n * rows), b = new Float32Array(n * rows);
      one.matmul(a, w1, x, n);
      two.matmul(b, w2, x, n);
      for (let j = 0; j < a.length; j++) if (!Object.is(a[j], b[j])) throw new Error("job " + k + " (" + rows + " rows, " + n + " tokens): row " + j + " differs");
      jobs++;
    }
    one.dispose();
    two.dispose();`, 60000);
  await exited;
  assert.equal(r.timedOut, false, `the jobs did not finish within 60 s (a hang): ${r.stderr}`);
  assert.equal(r.code, 0, r.stderr);
});

test("the process exits by itself after dispose(), and also when dispose() is never called", async () => {
  const body = (dispose: boolean): string => `
    import { createWasmBackend } from "./src/kernels/wasm/index.ts";
    const b = await createWasmBackend({ threads: 2 });
    const w = { name: "w", type: 0, dims: [8, 8], data: b.allocWeights(256) };
    b.matmul(new Float32Array(8), w, new Float32Array(8), 1);
    ${dispose ? "b.dispose();" : ""}`;
  for (const dispose of [true, false]) {
    const r = await runChild(body(dispose), 30000);
    assert.equal(r.timedOut, false, `process with dispose=${dispose} did not exit: ${r.stderr}`);
    assert.equal(r.code, 0, r.stderr);
  }
});
