import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { GGMLType, rowByteLength, typeName } from "../src/tensor/dtypes.js";
import { dequantizeRow, quantizeRow } from "../src/tensor/quant/index.js";

// Exact bytes follow from ggml's quantize_row_*_ref as published (ggml-quants.c); the round-trip
// bounds follow from each format's step size.

/** deterministic standard normals (xorshift32 + Box-Muller) */
function gaussians(n: number, seed: number, scale = 1, shift = 0): Float32Array {
  let s = seed >>> 0 || 1;
  const u = (): number => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return (s + 0.5) / 2 ** 32;
  };
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = shift + scale * Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u());
  return out;
}

function roundTrip(type: GGMLType, x: Float32Array): { bytes: Uint8Array; y: Float32Array } {
  const bytes = new Uint8Array(rowByteLength(type, x.length));
  quantizeRow(type, x, bytes, x.length);
  const y = new Float32Array(x.length);
  dequantizeRow(type, bytes, y, x.length);
  return { bytes, y };
}

test("Q8_0 quantization gives the bytes the spec implies (roundf: ties away from zero)", () => {
  // block 1: max |x| = 127 -> d = 1 (f16 0x3c00), q = roundf(x)
  // block 2: max |x| = 254 -> d = 2 (f16 0x4000), q = roundf(x / 2)
  // block 3: all zero -> d = 0, q = 0
  const b1 = [127, -0.5, 0.5, 2.5, -2.5, 1.49, -126.6, 3.7, ...new Array(24).fill(0)];
  const b2 = [254, 3, 1, -1, 5, -254, 100.9, ...new Array(25).fill(0)];
  const x = new Float32Array([...b1, ...b2, ...new Array(32).fill(0)]);
  const { bytes } = roundTrip(GGMLType.Q8_0, x);
  const q1 = [127, -1, 1, 3, -3, 1, -127, 4, ...new Array(24).fill(0)];
  const q2 = [127, 2, 1, -1, 3, -127, 50, ...new Array(25).fill(0)];
  const expected = [0x00, 0x3c, ...q1.map((v) => v & 0xff), 0x00, 0x40, ...q2.map((v) => v & 0xff), ...new Array(34).fill(0)];
  assert.deepEqual([...bytes], expected);
});

test("Q4_0 quantization gives the bytes the spec implies (d = max / -8, clipped at 15)", () => {
  // the first value of largest magnitude is -8, so d = -8 / -8 = 1 and q = min(15, trunc(x + 8.5))
  const x = new Float32Array(32);
  for (let j = 0; j < 16; j++) {
    x[j] = j - 8; // nibble j
    x[16 + j] = 8 - j; // trunc(16.5 - j): 16 clips to 15, then 15, 14, ...
  }
  const { bytes } = roundTrip(GGMLType.Q4_0, x);
  const expected = [0x00, 0x3c];
  for (let j = 0; j < 16; j++) expected.push(j | (Math.min(15, 16 - j) << 4));
  assert.deepEqual([...bytes], expected);
});

test("Q8_K quantization: d = max / -127 as f32, ties to even, int16 group sums", () => {
  // max = -127 (the first value of largest magnitude) -> iscale = 1, d = 1.0 (f32 0x3f800000)
  const x = new Float32Array(256);
  x.set([-127, 2.5, 3.5, -0.5, 0.5, 1.5, 126.6]);
  x[16] = 100;
  x[17] = 100;
  const { bytes } = roundTrip(GGMLType.Q8_K, x);
  assert.deepEqual([...bytes.subarray(0, 4)], [0, 0, 0x80, 0x3f]);
  assert.deepEqual([...bytes.subarray(4, 11)], [-127, 2, 4, 0, 0, 2, 127].map((v) => v & 0xff));
  // bsum 0 = -127 + 2 + 4 + 0 + 0 + 2 + 127 = 8; bsum 1 = 200; the rest 0
  assert.deepEqual([...bytes.subarray(260, 264)], [8, 0, 200, 0]);
  assert.deepEqual([...bytes.subarray(264)], new Array(28).fill(0));
});

test("Q8_1 stores s = d * sum(q) as f16", () => {
  const x = new Float32Array(32);
  x[0] = 127;
  x[1] = 10;
  x[2] = -3;
  const { bytes } = roundTrip(GGMLType.Q8_1, x);
  // d = 1 (0x3c00), s = 127 + 10 - 3 = 134 = f16 0x5830 (134 = 1.046875 * 2^7)
  assert.deepEqual([...bytes.subarray(0, 4)], [0x00, 0x3c, 0x30, 0x58]);
});

test("F16 / BF16 / F32 rows encode each value", () => {
  const x = new Float32Array([1, -2, 0.5, 65520]);
  assert.deepEqual([...roundTrip(GGMLType.F16, x).bytes], [0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38, 0x00, 0x7c]);
  assert.deepEqual([...roundTrip(GGMLType.BF16, x).bytes], [0x80, 0x3f, 0x00, 0xc0, 0x00, 0x3f, 0x80, 0x47]);
  assert.deepEqual([...roundTrip(GGMLType.F32, x).y], [1, -2, 0.5, 65520]);
});

/**
 * Per-block worst-case error of each format, from its step: the block scale is stored as f16
 * (relative error <= 2^-11, times the largest |q|), plus half a step of rounding.
 */
const F16_EPS = 2 ** -11;
const BOUNDS: [GGMLType, number, (blk: Float32Array) => number][] = [
  // d = amax / 127, |q| <= 127
  [GGMLType.Q8_0, 32, (b) => (amax(b) / 127) * (0.5 + 127 * F16_EPS) * 1.001],
  // d = amax / 8; the side opposite the largest value clips at 7 * d: error up to one step
  [GGMLType.Q4_0, 32, (b) => (amax(b) / 8) * (1 + 8 * F16_EPS) * 1.001],
  [GGMLType.Q5_0, 32, (b) => (amax(b) / 16) * (1 + 16 * F16_EPS) * 1.001],
  // d = (max - min) / 15, plus the f16 rounding of the min
  [GGMLType.Q4_1, 32, (b) => (spread(b) / 15) * (0.5 + 15 * F16_EPS) * 1.001 + amax(b) * F16_EPS],
  [GGMLType.Q5_1, 32, (b) => (spread(b) / 31) * (0.5 + 31 * F16_EPS) * 1.001 + amax(b) * F16_EPS],
  // d = amax / 127 stored as f32
  [GGMLType.Q8_K, 256, (b) => (amax(b) / 127) * 0.5 * 1.001],
];

function amax(b: Float32Array): number {
  let m = 0;
  for (const v of b) m = Math.max(m, Math.abs(v));
  return m;
}

function spread(b: Float32Array): number {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of b) {
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  return hi - lo;
}

for (const [type, block, bound] of BOUNDS) {
  test(`${typeName(type)} round trip stays within half a step per block`, () => {
    for (const [seed, scale, shift] of [[1, 0.02, 0], [2, 1, 0], [3, 3, 2], [4, 100, -50]] as const) {
      const x = gaussians(block * 8, seed, scale, shift);
      x.fill(0, 0, block); // one all-zero block
      const { y } = roundTrip(type, x);
      for (let b = 0; b < x.length; b += block) {
        const blk = x.subarray(b, b + block);
        const limit = bound(blk);
        for (let i = 0; i < block; i++) {
          const err = Math.abs(y[b + i]! - blk[i]!);
          if (!(err <= limit)) assert.fail(`${typeName(type)} seed ${seed}: |error| ${err} > ${limit} at ${b + i}`);
        }
      }
    }
  });
}

// The k-quants search their scales, so the bound is on the RMS error relative to the data's
// standard deviation: a 4-bit grid over a group of 32 normals (range about +-2.1 sigma) has
// step ~0.28 sigma, RMS ~0.08 sigma; 5 bits: RMS ~0.04 sigma; 6 bits over groups of 16: step
// ~0.06 sigma, RMS ~0.02.
for (const [type, limit] of [[GGMLType.Q2_K, 0.45], [GGMLType.Q3_K, 0.22], [GGMLType.Q4_K, 0.1], [GGMLType.Q5_K, 0.05], [GGMLType.Q6_K, 0.025]] as const) {
  test(`${typeName(type)} round trip RMS error is that of its bit width`, () => {
    for (const [seed, scale, shift] of [[5, 0.02, 0], [6, 1, 0.5], [7, 10, 0]] as const) {
      const x = gaussians(256 * 8, seed, scale, shift);
      const { y } = roundTrip(type, x);
      let se = 0;
      for (let i = 0; i < x.length; i++) se += (y[i]! - x[i]!) ** 2;
      const rel = Math.sqrt(se / x.length) / scale;
      assert.ok(rel < limit, `${typeName(type)} seed ${seed}: RMS error ${rel} sigma >= ${limit}`);
    }
    // an all-zero super-block stays exactly zero
    const z = roundTrip(type, new Float32Array(256));
    assert.ok(z.y.every((v) => v === 0));
  });
}

// IQ4_NL / IQ4_XS: 16 non-linear levels (kvalues_iq4nl) per block of 32, the scale searched
// (ggml's quantize_iq4_nl / quantize_iq4_xs); IQ4_XS also rounds each block's scale to 6 bits
// of a super-block scale. Their RMS error is about Q4_K's.
for (const [type, limit] of [[GGMLType.IQ4_NL, 0.1], [GGMLType.IQ4_XS, 0.1]] as const) {
  test(`${typeName(type)} round trip RMS error is that of 4 bits, every index and scale field valid`, () => {
    for (const [seed, scale, shift] of [[5, 0.02, 0], [6, 1, 0.5], [7, 10, 0]] as const) {
      const x = gaussians(256 * 8, seed, scale, shift);
      const { bytes, y } = roundTrip(type, x);
      let se = 0;
      for (let i = 0; i < x.length; i++) se += (y[i]! - x[i]!) ** 2;
      const rel = Math.sqrt(se / x.length) / scale;
      assert.ok(rel < limit, `${typeName(type)} seed ${seed}: RMS error ${rel} sigma >= ${limit}`);
      // a finite f16 scale in every block
      const blockBytes = type === GGMLType.IQ4_NL ? 18 : 136;
      for (let o = 0; o < bytes.length; o += blockBytes) assert.ok(((bytes[o]! | (bytes[o + 1]! << 8)) & 0x7c00) !== 0x7c00, `block at ${o}: f16 scale is Inf/NaN`);
    }
    // an all-zero block stays exactly zero; so does a zero block among others
    assert.ok(roundTrip(type, new Float32Array(256)).y.every((v) => v === 0));
    const mixed = gaussians(256, 9);
    mixed.fill(0, 32, 64);
    const m = roundTrip(type, mixed).y;
    assert.ok(m.subarray(32, 64).every((v) => v === 0));
    // the scale search keeps the value of largest magnitude close (4-bit steps at the ends are ~0.15 of it)
    const one = new Float32Array(32).fill(0.01);
    one[5] = -3;
    const r = roundTrip(GGMLType.IQ4_NL, one).y;
    assert.ok(Math.abs(r[5]! + 3) < 0.05, `largest value ${r[5]}`);
  });
}

test("quantizeRow rejects bad arguments with the parameter named", () => {
  assert.throws(() => quantizeRow(GGMLType.Q8_0, new Float32Array(40), new Uint8Array(100), 40), /n = 40 is not a multiple of the Q8_0 block size 32/);
  assert.throws(() => quantizeRow(GGMLType.Q8_0, new Float32Array(32), new Uint8Array(10), 32), /needs 34 bytes/);
  assert.throws(() => quantizeRow(GGMLType.I32, new Float32Array(256), new Uint8Array(1024), 256), /I32 is not supported/);
});

// sha256 of the bytes ggml's quantize_row_{q2..q6}_K_ref (a libggml-base.so built from llama.cpp,
// called through Python's ctypes) wrote for this input: 12 super-blocks of normals at four scales and shifts,
// super-block 1 all zero
test("the k-quant quantizers write the bytes of ggml's quantize_row_*_K_ref", () => {
  const x = new Float32Array(256 * 12);
  const parts = [[11, 0.02, 0], [12, 1, 0.5], [13, 10, 0], [14, 1e-3, -0.2]] as const;
  parts.forEach(([seed, scale, shift], i) => x.set(gaussians(256 * 3, seed, scale, shift), 256 * 3 * i));
  x.fill(0, 256, 512);
  const expected: [GGMLType, string][] = [
    [GGMLType.Q2_K, "ae09c681c3a0bb3cad6f149b32c4dfb10a76f60b0e12e5372c42e998bf19e91d"],
    [GGMLType.Q3_K, "65f666c4e8bf9a398d14a4035635ed94b66ed70c92d3e31758c0336eede899a8"],
    [GGMLType.Q4_K, "cf46619e7c2da9b073a38d40631f4887ec969bc92d503b459889f597806da9fc"],
    [GGMLType.Q5_K, "7988d891269178e5b6251372b1c7b3a6368eaf22af89427ccc6eff2e693085c0"],
    [GGMLType.Q6_K, "ef5da5350beb6a7034d9730139ec1a6db7f7eca233ef355b6bb0ad504a4e94da"],
  ];
  for (const [type, sha] of expected) {
    const { bytes } = roundTrip(type, x);
    assert.equal(createHash("sha256").update(bytes).digest("hex"), sha, typeName(type));
  }
});

test("NF4 / INT8 (in-memory formats): code-book values round-trip exactly, RMS error of 4 / 8 bits, no GGUF id", async () => {
  const { NF4_CODE } = await import("../src/tensor/quant/index.js");
  const { isKnownType, isMemoryOnlyType } = await import("../src/tensor/dtypes.js");
  // a block whose values are the code book times 3 (absmax 3, exact in f16) comes back exactly
  const x = new Float32Array(64);
  for (let i = 0; i < 64; i++) x[i] = Math.fround(NF4_CODE[i % 16]! * 3);
  assert.deepEqual([...roundTrip(GGMLType.NF4, x).y], [...x]);
  for (const [type, limit] of [[GGMLType.NF4, 0.12], [GGMLType.INT8, 0.02]] as const) {
    const g = gaussians(256 * 4, 21, 0.5, 0.1);
    const { y } = roundTrip(type, g);
    let se = 0;
    for (let i = 0; i < g.length; i++) se += (y[i]! - g[i]!) ** 2;
    assert.ok(Math.sqrt(se / g.length) / 0.5 < limit, `${typeName(type)} RMS ${Math.sqrt(se / g.length) / 0.5}`);
    assert.ok(roundTrip(type, new Float32Array(256)).y.every((v) => v === 0));
    assert.ok(isMemoryOnlyType(type) && !isKnownType(type), "no file can name it");
  }
  assert.equal(rowByteLength(GGMLType.INT8, 100), 104);
  assert.equal(rowByteLength(GGMLType.NF4, 128), 68);
  const { writeGGUF } = await import("../src/formats/gguf-writer.js");
  await assert.rejects(writeGGUF("/nonexistent-dir/x.gguf", { metadata: [], tensors: [{ name: "w", type: GGMLType.NF4, dims: [64, 1], data: new Uint8Array(34) }] }), /NF4 is an in-memory format/);
});
