import assert from "node:assert/strict";
import { test } from "node:test";
import { createReferenceBackend, VEC_DOT } from "../src/kernels/reference/index.js";
import { GGMLType, QK_K, rowByteLength, typeInfo, typeName } from "../src/tensor/dtypes.js";
import { canQuantize, dequantizeRow, f32ToF16Bits, quantizeRow } from "../src/tensor/quant/index.js";
import type { Tensor } from "../src/tensor/tensor.js";
import { device, hostArray } from "./helpers/host-array.js";
import { rng } from "./helpers/rng.js";
import { Rng } from "../src/testing/rng.js";
import { randomQuantizedRow } from "../src/testing/random-quant.js";

// The reference backend's matmul must equal, up to rounding, the float64 dot product of the
// dequantized weights with the dequantized converted activations: that is ggml's definition of
// a matmul (activations first converted to the weight type's vec_dot type).

function normals(n: number, r: () => number, scale: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = scale * Math.sqrt(-2 * Math.log(r() + 1e-12)) * Math.cos(2 * Math.PI * r());
  return out;
}

/** byte offsets of the f16 scale fields of one block, for types whose blocks we fill with random bytes */
const SCALE_FIELDS: Partial<Record<GGMLType, number[]>> = {
  [GGMLType.Q2_K]: [80, 82],
  [GGMLType.Q3_K]: [108],
};

/** a weight tensor whose data starts at an odd byte offset of its buffer */
function makeWeights(type: GGMLType, cols: number, rows: number, r: () => number): Tensor {
  const rb = rowByteLength(type, cols);
  const data = new Uint8Array(rows * rb + 5).subarray(3, 3 + rows * rb);
  if (canQuantize(type)) {
    for (let row = 0; row < rows; row++) quantizeRow(type, normals(cols, r, 0.5), data.subarray(row * rb), cols);
  } else if (SCALE_FIELDS[type] === undefined) {
    // the types without a quantizer whose scales are not one f16 field per block (IQ1_M, MXFP4) and the other grid i-quants
    const g = new Rng(type);
    for (let row = 0; row < rows; row++) randomQuantizedRow(type, data.subarray(row * rb, (row + 1) * rb), g, 0.5, cols);
  } else {
    // no quantizer for this type here: random quants with sane f16 scales are valid blocks
    for (let i = 0; i < data.length; i++) data[i] = Math.floor(r() * 256);
    const { typeSize } = typeInfo(type);
    for (let o = 0; o < data.length; o += typeSize) {
      for (const f of SCALE_FIELDS[type]!) {
        const h = f32ToF16Bits((r() + 0.1) * 0.01);
        data[o + f] = h & 0xff;
        data[o + f + 1] = h >>> 8;
      }
    }
  }
  return { name: `w.${typeName(type)}`, type, dims: [cols, rows], data };
}

function dequantAll(type: GGMLType, bytes: Uint8Array, cols: number, rows: number): Float32Array {
  const out = new Float32Array(cols * rows);
  const rb = rowByteLength(type, cols);
  for (let r = 0; r < rows; r++) dequantizeRow(type, bytes.subarray(r * rb), out.subarray(r * cols), cols);
  return out;
}

for (const [type, { vecDotType }] of VEC_DOT) {
  const block = typeInfo(type).blockSize;
  // row lengths that are no multiple of anything beyond the block size
  const cols = block === 1 ? 37 : block === QK_K ? 2 * QK_K : 3 * block;
  const rows = 7;
  for (const nTokens of [1, 7]) {
    test(`matmul ${typeName(type)} (x as ${typeName(vecDotType)}), ${rows} rows x ${cols}, ${nTokens} token(s)`, () => {
      const r = rng(1000 * type + nTokens);
      const w = makeWeights(type, cols, rows, r);
      const x = device(normals(cols * nTokens, r, 1));
      const backend = createReferenceBackend();
      const out = hostArray(rows * nTokens + 1).fill(NaN);
      backend.matmul(out, w, x, nTokens);
      assert.ok(Number.isNaN(out[rows * nTokens]!), "matmul wrote past nTokens * rows");

      const wf = dequantAll(type, w.data, cols, rows);
      const xb = new Uint8Array(rowByteLength(vecDotType, cols));
      const xc = new Float32Array(cols);
      for (let t = 0; t < nTokens; t++) {
        quantizeRow(vecDotType, x.subarray(t * cols, (t + 1) * cols), xb, cols);
        dequantizeRow(vecDotType, xb, xc, cols);
        for (let row = 0; row < rows; row++) {
          let exact = 0;
          let mag = 0;
          let minTerm = 0;
          for (let c = 0; c < cols; c++) {
            exact += wf[row * cols + c]! * xc[c]!;
            mag += Math.abs(wf[row * cols + c]! * xc[c]!);
          }
          if (vecDotType === GGMLType.Q8_1) {
            // ggml uses the activation block's sum as stored: an f16 s = d * sum(q), so the
            // weight's min term carries that rounding (|m| <= max |w| of the block)
            for (let b = 0; b < cols; b += 32) {
              let sx = 0;
              let wmax = 0;
              for (let c = b; c < b + 32; c++) {
                sx += xc[c]!;
                wmax = Math.max(wmax, Math.abs(wf[row * cols + c]!));
              }
              minTerm += wmax * Math.abs(sx) * 2 ** -10;
            }
          }
          const got = out[t * rows + row]!;
          const tol = 1e-6 * mag + minTerm + 1e-30;
          assert.ok(Math.abs(got - exact) <= tol, `token ${t} row ${row}: got ${got}, float64 reference ${exact} (tol ${tol})`);
        }
      }
    });
  }
}

test("getRows dequantizes the requested rows, in order, repeats allowed", () => {
  const backend = createReferenceBackend();
  const cols = 64;
  const w = makeWeights(GGMLType.Q8_0, cols, 5, rng(7));
  const out = hostArray(3 * cols);
  backend.getRows(out, w, [4, 0, 4]);
  const all = dequantAll(GGMLType.Q8_0, w.data, cols, 5);
  assert.deepEqual([...out.subarray(0, cols)], [...all.subarray(4 * cols, 5 * cols)]);
  assert.deepEqual([...out.subarray(cols, 2 * cols)], [...all.subarray(0, cols)]);
  assert.deepEqual([...out.subarray(2 * cols)], [...all.subarray(4 * cols, 5 * cols)]);
  assert.throws(() => backend.getRows(out, w, [5]), /row id 5 at index 0 is outside 0\.\.4/);
  assert.throws(() => backend.getRows(hostArray(10), w, [0]), /out holds 10 floats/);
});

test("allocWeights gives a zeroed view at a 64-byte-aligned offset", () => {
  const backend = createReferenceBackend();
  const a = backend.allocWeights(1000);
  assert.equal(a.length, 1000);
  assert.equal(a.byteOffset % 64, 0);
  assert.equal(a.buffer.byteLength % 64, 0);
  assert.ok(a.every((v) => v === 0));
  assert.equal(backend.name, "reference");
  assert.equal(backend.threads, 1);
  assert.throws(() => backend.allocWeights(-1), /byteLength/);
});

test("matmul validates its arguments and the backend refuses work after dispose", () => {
  const backend = createReferenceBackend();
  const w = makeWeights(GGMLType.F32, 8, 3, rng(3));
  assert.throws(() => backend.matmul(hostArray(3), w, hostArray(7), 1), /x holds 7 floats, expected 1 x 8/);
  assert.throws(() => backend.matmul(hostArray(2), w, hostArray(8), 1), /out holds 2 floats/);
  const short: Tensor = { ...w, data: w.data.subarray(0, 10) };
  assert.throws(() => backend.matmul(hostArray(3), short, hostArray(8), 1), /needs 96 bytes, has 10/);
  const q8k: Tensor = { name: "act", type: GGMLType.Q8_K, dims: [256, 1], data: new Uint8Array(292) };
  assert.throws(() => backend.matmul(hostArray(1), q8k, hostArray(256), 1), /type Q8_K/);
  backend.dispose();
  assert.throws(() => backend.matmul(hostArray(3), w, hostArray(8), 1), /after dispose/);
});
