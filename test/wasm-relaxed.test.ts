import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { createWasmBackend } from "../src/kernels/wasm/index.js";
import { relaxedSimdSupported } from "../src/kernels/wasm/module.js";
import { GGMLType, rowByteLength, typeInfo, typeName } from "../src/tensor/dtypes.js";
import { f32ToF16Bits, quantizeRow } from "../src/tensor/quant/index.js";
import type { Backend } from "../src/kernels/backend.js";
import type { Tensor } from "../src/tensor/tensor.js";
// @ts-expect-error: a plain .mjs build script without type declarations
import { ensureWasm } from "../scripts/build-wasm.mjs";
import { device, hostArray } from "./helpers/host-array.js";
import { rng } from "./helpers/rng.js";

// The Relaxed SIMD build (assembly/relaxed.ts: int8 dot for Q8_0 and IQ4_NL decode, Q4_0, Q4_K, Q6_K, IQ4_XS)
// against the SIMD128 build: the integer block sums are exact and land in the same f32 lanes
// (K-quants: are reduced to one integer first), so every output must be the same bits; and both against the reference backend (ggml's definition) to
// rounding, 1e-5 * the largest |output|.

let supported = false;
const backends: Backend[] = [];
let plain: Backend;
let relaxed1: Backend;
let relaxed2: Backend;
const reference = createReferenceBackend();

before(async () => {
  await ensureWasm();
  supported = relaxedSimdSupported();
  if (!supported) return;
  plain = await createWasmBackend({ threads: 1, simd: "plain" });
  relaxed1 = await createWasmBackend({ threads: 1, simd: "relaxed" });
  relaxed2 = await createWasmBackend({ threads: 2, simd: "relaxed" });
  backends.push(plain, relaxed1, relaxed2);
});

after(() => {
  for (const b of backends) b.dispose();
});

const SKIP = "this runtime has no WebAssembly Relaxed SIMD";

/** the same bytes in each backend's memory */
function tensorIn(backend: Backend, type: GGMLType, cols: number, rows: number, bytes: Uint8Array): Tensor {
  const data = backend.allocWeights(bytes.length);
  data.set(bytes);
  return { name: `w.${typeName(type)}`, type, dims: [cols, rows], data };
}

/**
 * random bytes for `rows` rows of a block type (every code, scale and index the format has), each
 * block's f16 scales at `scaleFields` (byte offsets in the block) kept finite
 */
function randomBlocks(type: GGMLType, cols: number, rows: number, r: () => number, scaleFields: readonly number[]): Uint8Array {
  const bytes = new Uint8Array(rowByteLength(type, cols) * rows).map(() => Math.floor(r() * 256));
  const { typeSize } = typeInfo(type);
  for (let o = 0; o < bytes.length; o += typeSize) {
    for (const f of scaleFields) {
      const h = f32ToF16Bits((r() + 0.1) * 0.01);
      bytes[o + f] = h & 0xff;
      bytes[o + f + 1] = h >>> 8;
    }
  }
  return bytes;
}

function quantized(type: GGMLType, cols: number, rows: number, r: () => number, value: () => number = () => r() * 2 - 1): Uint8Array {
  const rb = rowByteLength(type, cols);
  const bytes = new Uint8Array(rb * rows);
  const f = new Float32Array(cols);
  for (let row = 0; row < rows; row++) {
    for (let i = 0; i < cols; i++) f[i] = value();
    quantizeRow(type, f, bytes.subarray(row * rb, (row + 1) * rb), cols);
  }
  return bytes;
}

function assertClose(actual: Float32Array, expected: Float32Array, what: string): void {
  let scale = 0;
  for (const v of expected) scale = Math.max(scale, Math.abs(v));
  const tol = 1e-5 * scale;
  for (let i = 0; i < expected.length; i++) {
    if (!(Math.abs(actual[i]! - expected[i]!) <= tol)) assert.fail(`${what}: out[${i}] = ${actual[i]}, reference ${expected[i]} (tolerance ${tol})`);
  }
}

/**
 * The same matmul on the plain build and the relaxed build on 1 and 2 threads, and on the
 * reference; `want` is what the relaxed build must give bit for bit: the reference's result
 * where the relaxed build's multiply-add is fused (Q8_0 then runs in llama.cpp's order), else
 * the plain build's
 */
function matmulEverywhere(type: GGMLType, cols: number, rows: number, bytes: Uint8Array, x: Float32Array, nTokens: number) {
  const outs = [plain, relaxed1, relaxed2].map((b) => {
    const out = hostArray(nTokens * rows);
    b.matmul(out, tensorIn(b, type, cols, rows, bytes), device(x), nTokens);
    return out;
  });
  const expected = hostArray(nTokens * rows);
  reference.matmul(expected, { name: "w", type, dims: [cols, rows], data: bytes }, device(x), nTokens);
  const exact = type === GGMLType.Q8_0 && relaxed1.llamaCppOrder !== "none";
  return { outs, expected, exact, want: exact ? expected : outs[0]! };
}

/** plain, relaxed on 1 and 2 threads: identical bits (or the reference's, see above); and close to the reference */
function checkAll(type: GGMLType, cols: number, rows: number, bytes: Uint8Array, x: Float32Array, nTokens: number, what: string): void {
  const { outs, expected, exact, want } = matmulEverywhere(type, cols, rows, bytes, x, nTokens);
  assertClose(outs[0]!, expected, `${what}, plain build`);
  const wanted = exact ? "the reference (llama.cpp's order)" : "the plain build";
  assert.deepEqual(outs[1], want, `${what}: relaxed build (1 thread) differs from ${wanted}`);
  assert.deepEqual(outs[2], want, `${what}: relaxed build (2 threads) differs from ${wanted}`);
}

/** -1 or +1 with equal odds, from r */
function randomSign(r: () => number): () => number {
  return () => (r() < 0.5 ? -1 : 1);
}

test("relaxed build: Q8_0, Q4_0, Q5_0 and IQ4_NL give the plain build's bits (awkward sizes, 1 and 2 threads, 1 to 29 tokens)", (t) => {
  if (!supported) return t.skip(SKIP);
  let seed = 10;
  for (const type of [GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q5_0, GGMLType.IQ4_NL]) {
    // rows of whole fours (96x12) take every token's group and then only the leftover tokens'
    // repacked activations; any other row count also the last rows token after token
    for (const [cols, rows] of [[32, 1], [32, 7], [96, 12], [160, 67], [192, 6], [224, 5], [2080, 13], [5632, 9]] as const) {
      const r = rng(++seed);
      const bytes = quantized(type, cols, rows, r);
      // 1: the decode kernels; 3: rows; 4, 6, 13, 29: a group of four tokens (after the groups of
      // eight), then rows; 8, 13, 29: groups of eight tokens first
      for (const nTokens of [1, 3, 4, 6, 8, 13, 29]) {
        const x = new Float32Array(nTokens * cols).map(() => r() * 2 - 1);
        // a block of zeros (scale 0) and a block holding a single value
        x.fill(0, 0, 32);
        if (cols >= 64) x.fill(0, 32, 64).fill(-5, 40, 41);
        checkAll(type, cols, rows, bytes, x, nTokens, `${typeName(type)} ${cols}x${rows}, ${nTokens} tokens`);
      }
    }
  }
});

test("relaxed build: Q4_K, Q5_K and Q6_K give the plain build's bits (quantized and random blocks, 1 / 3 / 8 / 13 / 29 tokens)", (t) => {
  if (!supported) return t.skip(SKIP);
  let seed = 40;
  for (const type of [GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K]) {
    for (const [cols, rows] of [[256, 1], [256, 8], [512, 67], [2816, 9]] as const) {
      const r = rng(++seed);
      // random bytes reach every code (Q6_K: q = -32 and scales -128 included)
      const random = randomBlocks(type, cols, rows, r, type === GGMLType.Q6_K ? [208] : [0, 2]);
      for (const [what, bytes] of [["quantized", quantized(type, cols, rows, r)], ["random", random]] as const) {
        // 8, 13, 29: groups of eight tokens (kquant-slots.ts), then four, then rows
        for (const nTokens of [1, 3, 8, 13, 29]) {
          const x = new Float32Array(nTokens * cols).map(() => r() * 2 - 1);
          x.fill(0, 0, 256);
          checkAll(type, cols, rows, bytes, x, nTokens, `${typeName(type)} ${cols}x${rows} ${what}, ${nTokens} tokens`);
        }
      }
    }
  }
});

test("relaxed build: k-quant batches with every weight at its largest (Q4_K 15, Q5_K 31, Q6_K 63) and activations at -128 / 127 stay exact (the int16 pairs' carries)", (t) => {
  if (!supported) return t.skip(SKIP);
  const cols = 512;
  const rows = 6;
  const r = rng(21);
  const sign = randomSign(r);
  for (const [type, scaleFields] of [[GGMLType.Q4_K, [0, 2]], [GGMLType.Q5_K, [0, 2]], [GGMLType.Q6_K, [208]]] as const) {
    // every quant byte 0xff: each weight at its largest, 6-bit scales and mins 63 (Q6_K's scales -1)
    const bytes = randomBlocks(type, cols, rows, r, scaleFields).map((b, i) => (scaleFields.some((f) => i % typeInfo(type).typeSize - f === 0 || i % typeInfo(type).typeSize - f === 1) ? b : 0xff));
    // +1 quantizes to -128 (Q8_K's scale is -128 / max), -1 to 127
    for (const [what, value] of [["+1", () => 1], ["-1", () => -1], ["+-1", sign]] as const) {
      for (const nTokens of [8, 13]) checkAll(type, cols, rows, bytes, new Float32Array(nTokens * cols).map(value), nTokens, `${typeName(type)} at its largest weights, activations ${what}, ${nTokens} tokens`);
    }
  }
});

test("relaxed build: Q2_K and Q3_K give the plain build's bits (random blocks: every 2-bit / 3-bit code, scale and min; 1 / 3 / 13 tokens)", (t) => {
  if (!supported) return t.skip(SKIP);
  let seed = 60;
  for (const [type, scaleFields] of [[GGMLType.Q2_K, [80, 82]], [GGMLType.Q3_K, [108]]] as const) {
    for (const [cols, rows] of [[256, 1], [512, 67]] as const) {
      const r = rng(++seed);
      const bytes = randomBlocks(type, cols, rows, r, scaleFields);
      for (const nTokens of [1, 3, 13]) {
        const x = new Float32Array(nTokens * cols).map(() => r() * 2 - 1);
        checkAll(type, cols, rows, bytes, x, nTokens, `${typeName(type)} ${cols}x${rows}, ${nTokens} tokens`);
      }
    }
  }
});

test("relaxed build: IQ4_XS (the int8 dot over a+ / a-, the eight sub-block scales decoded as one vector) gives the plain build's bits (quantized and random blocks, 1 / 3 / 4 / 13 tokens)", (t) => {
  if (!supported) return t.skip(SKIP);
  const r = rng(77);
  for (const [cols, rows] of [[256, 5], [1536, 19]] as const) {
    // random bytes reach every 6-bit scale (both of scales_h's bits for each sub-block) and index
    const random = randomBlocks(GGMLType.IQ4_XS, cols, rows, r, [0]);
    for (const [what, bytes] of [["quantized", quantized(GGMLType.IQ4_XS, cols, rows, r)], ["random", random]] as const) {
      for (const nTokens of [1, 3, 4, 13]) checkAll(GGMLType.IQ4_XS, cols, rows, bytes, new Float32Array(nTokens * cols).map(() => r() * 2 - 1), nTokens, `IQ4_XS ${cols}x${rows} ${what}, ${nTokens} tokens`);
    }
  }
});

test("relaxed build: extreme quants (|w| = 127 or nibbles 0 / 15, |a| = 127) stay exact", (t) => {
  if (!supported) return t.skip(SKIP);
  const cols = 256;
  const rows = 8;
  const r = rng(99);
  // +-1 everywhere: every weight and activation quantizes to +-127 (Q4_0: to nibble 0 or 15,
  // the block maximum being negative, or 1..15); the int16 pair sums reach their largest size
  const sign = randomSign(r);
  for (const type of [GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.IQ4_NL]) {
    const bytes = quantized(type, cols, rows, r, sign);
    for (const x of [new Float32Array(cols).map(sign), new Float32Array(cols).fill(1), new Float32Array(cols).fill(-1)]) {
      checkAll(type, cols, rows, bytes, x, 1, `${typeName(type)} with +-1 weights`);
    }
  }
});

test("relaxed build: Q8_0 weights holding -128 (no quantizer writes it; a hand-made file may) are exact", (t) => {
  if (!supported) return t.skip(SKIP);
  const cols = 96;
  const rows = 5;
  const r = rng(7);
  const bytes = new Uint8Array(rowByteLength(GGMLType.Q8_0, cols) * rows);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(r() * 256);
  for (let o = 0; o < bytes.length; o += 34) {
    const h = f32ToF16Bits(0.01 + r() * 0.01);
    bytes[o] = h & 0xff;
    bytes[o + 1] = h >>> 8;
  }
  // random bytes hold -128 here and there; a whole block of them too
  bytes.fill(0x80, 34 + 2, 34 + 34);
  const x = new Float32Array(cols).map(() => r() * 2 - 1);
  checkAll(GGMLType.Q8_0, cols, rows, bytes, x, 1, "Q8_0 with a -128 weight");
});

test("block scales of every f16 class (zeros, subnormals, the largest, Inf, NaN) give the same values in every build", (t) => {
  if (!supported) return t.skip(SKIP);
  // the decode kernels compute a block's f16 scale from its bits instead of reading the table
  // (assembly/half.ts f16At); any f16 must give the value the table (and the reference) gives
  const scales = [0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xb555, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfe01];
  const cols = 32 * scales.length;
  const rows = 6;
  const r = rng(41);
  for (const type of [GGMLType.Q8_0, GGMLType.Q4_0]) {
    const bytes = quantized(type, cols, rows, r);
    const blockBytes = rowByteLength(type, 32);
    // rows 0..2 see every finite scale, rows 3..5 every scale, at a different block per row
    const finite = scales.filter((h) => (h & 0x7c00) !== 0x7c00);
    for (let row = 0; row < rows; row++) {
      for (let b = 0; b < scales.length; b++) {
        const h = row < 3 ? finite[(b + row) % finite.length]! : scales[(b + row) % scales.length]!;
        const o = row * rowByteLength(type, cols) + b * blockBytes;
        bytes[o] = h & 0xff;
        bytes[o + 1] = h >>> 8;
      }
    }
    for (const nTokens of [1, 4]) {
      const x = new Float32Array(nTokens * cols).map(() => r() * 2 - 1);
      // rows 0..2 alone: a weight whose scales are all finite, which takes the kernels that skip the Inf/NaN handling
      checkAll(type, cols, 3, bytes.subarray(0, 3 * rowByteLength(type, cols)), x, nTokens, `${typeName(type)}, ${nTokens} tokens, finite scales only`);
      const { outs, expected, want } = matmulEverywhere(type, cols, rows, bytes, x, nTokens);
      // the relaxed build on 1 and 2 threads: exactly `want`
      for (const [i, out] of outs.slice(1).entries()) {
        const differs = out.findIndex((v, k) => !Object.is(v, want[k]));
        assert.equal(differs, -1, `${typeName(type)}, ${nTokens} tokens, relaxed build on ${i + 1} thread(s): out[${differs}] = ${out[differs]}, expected ${want[differs]}`);
      }
      // the plain build (SIMD128 order): NaN / Inf exactly where the reference has them, close elsewhere
      const finiteExpected = expected.filter((v) => Number.isFinite(v));
      assert.ok(finiteExpected.length > 0 && finiteExpected.length < expected.length, "the scales make some outputs NaN or Inf and leave others finite");
      const tol = 1e-5 * Math.max(...finiteExpected.map(Math.abs));
      outs[0]!.forEach((v, k) => {
        const e = expected[k]!;
        assert.ok(Number.isFinite(e) ? Math.abs(v - e) <= tol : Object.is(v, e), `${typeName(type)}, ${nTokens} tokens, plain build: out[${k}] = ${v}, reference ${e}`);
      });
    }
  }
});

test("the simd option rejects unknown builds", async () => {
  await assert.rejects(createWasmBackend({ threads: 1, simd: "avx" as "plain" }), /simd .*"auto", "plain" or "relaxed".*"avx"/);
});
