import assert from "node:assert/strict";
import { test } from "node:test";
import { GGMLType, rowByteLength, typeInfo } from "../src/tensor/dtypes.js";
import { dequantizeRow, iqGrid } from "../src/tensor/quant/index.js";
import { Rng } from "../src/testing/rng.js";

// Each test builds blocks byte by byte from ggml's block layouts (ggml-common.h) with chosen
// scales and quants, and states the values the layout implies. f16 constants used below:
// 0x3c00 = 1, 0x3800 = 0.5, 0x3400 = 0.25, 0x4000 = 2, 0xbc00 = -1.

/** a buffer whose row starts at an odd byte offset, so nothing may assume alignment */
function unaligned(bytes: number[] | Uint8Array): Uint8Array {
  const buf = new Uint8Array(bytes.length + 3);
  buf.set(bytes, 3);
  return buf.subarray(3);
}

function dequant(type: GGMLType, bytes: number[] | Uint8Array, n: number): Float32Array {
  assert.equal(bytes.length, rowByteLength(type, n), "test block has the wrong size");
  const out = new Float32Array(n);
  dequantizeRow(type, unaligned(bytes), out, n);
  return out;
}

const f16 = (h: number): number[] => [h & 0xff, h >>> 8];
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

test("F32 / F16 / BF16 rows at odd byte offsets", () => {
  // 1.5 = 0x3fc00000, -0.25 = 0xbe800000 (little-endian)
  assert.deepEqual([...dequant(GGMLType.F32, [0, 0, 0xc0, 0x3f, 0, 0, 0x80, 0xbe], 2)], [1.5, -0.25]);
  assert.deepEqual([...dequant(GGMLType.F16, [...f16(0x3c00), ...f16(0xc000), ...f16(0x7bff), ...f16(0x0001)], 4)], [1, -2, 65504, 2 ** -24]);
  assert.deepEqual([...dequant(GGMLType.BF16, [...f16(0x3f80), ...f16(0xc040), ...f16(0x4049)], 3)], [1, -3, 3.140625]);
});

test("Q4_0: (nibble - 8) * d, byte j = weight j (low) and j + 16 (high)", () => {
  const qs = range(16).map((j) => j | ((15 - j) << 4));
  const y = dequant(GGMLType.Q4_0, [...f16(0x3800), ...qs], 32);
  assert.equal(y[0], -4); // (0 - 8) * 0.5
  assert.equal(y[15], 3.5); // (15 - 8) * 0.5
  assert.equal(y[16], 3.5); // high nibble of byte 0 = 15
  assert.equal(y[31], -4); // high nibble of byte 15 = 0
  for (let j = 0; j < 16; j++) {
    assert.equal(y[j], (j - 8) * 0.5);
    assert.equal(y[j + 16], (7 - j) * 0.5);
  }
});

test("Q4_1: nibble * d + m", () => {
  const qs = range(16).map((j) => j | ((15 - j) << 4));
  const y = dequant(GGMLType.Q4_1, [...f16(0x3800), ...f16(0xbc00), ...qs], 32);
  assert.equal(y[0], -1);
  assert.equal(y[16], 6.5); // 15 * 0.5 - 1
  for (let j = 0; j < 16; j++) {
    assert.equal(y[j], j * 0.5 - 1);
    assert.equal(y[j + 16], (15 - j) * 0.5 - 1);
  }
});

test("Q5_0: ((nibble | qh bit i << 4) - 16) * d", () => {
  // qh = 0x0000ffff (little-endian): weights 0..15 have their 5th bit set, 16..31 do not
  const qs = range(16).map((j) => j | (j << 4));
  const y = dequant(GGMLType.Q5_0, [...f16(0x3400), 0xff, 0xff, 0x00, 0x00, ...qs], 32);
  assert.equal(y[3], 0.75); // (3 + 16 - 16) * 0.25
  assert.equal(y[19], -3.25); // (3 - 16) * 0.25
  for (let j = 0; j < 16; j++) {
    assert.equal(y[j], j * 0.25);
    assert.equal(y[j + 16], (j - 16) * 0.25);
  }
});

test("Q5_1: (nibble | qh bit i << 4) * d + m", () => {
  // qh = 0xaaaaaaaa: the odd weights have their 5th bit set; d = 1, m = 0.5 (0x3800)
  const qs = range(16).map((j) => j | ((15 - j) << 4));
  const y = dequant(GGMLType.Q5_1, [...f16(0x3c00), ...f16(0x3800), 0xaa, 0xaa, 0xaa, 0xaa, ...qs], 32);
  assert.equal(y[0], 0.5);
  assert.equal(y[1], 17.5); // 1 + 16 + 0.5
  assert.equal(y[17], 30.5); // high nibble of byte 1 = 14, + 16, + 0.5
  for (let j = 0; j < 16; j++) {
    const h = j % 2 === 1 ? 16 : 0;
    assert.equal(y[j], j + h + 0.5);
    assert.equal(y[j + 16], 15 - j + h + 0.5);
  }
});

test("Q8_0 and Q8_1: int8 q * d", () => {
  const q = range(32).map((j) => j - 16);
  q[0] = -128;
  q[31] = 127;
  const qs = q.map((v) => v & 0xff);
  const y = dequant(GGMLType.Q8_0, [...f16(0x4000), ...qs], 32);
  assert.deepEqual([...y], q.map((v) => v * 2));
  assert.equal(y[0], -256);
  assert.equal(y[31], 254);
  // Q8_1 carries s = d * sum(q) after d; it does not change the values
  const y1 = dequant(GGMLType.Q8_1, [...f16(0x4000), ...f16(0x1234), ...qs], 32);
  assert.deepEqual([...y1], q.map((v) => v * 2));
});

test("Q8_K: f32 d, int8 q", () => {
  // d = 0.125 = f32 0x3e000000; q_i = i - 128; bsums are not used by dequantization
  const bytes = [0, 0, 0, 0x3e, ...range(256).map((i) => (i - 128) & 0xff), ...new Array(32).fill(0)];
  const y = dequant(GGMLType.Q8_K, bytes, 256);
  assert.equal(y[0], -16);
  assert.equal(y[255], 15.875);
  for (let i = 0; i < 256; i++) assert.equal(y[i], (i - 128) * 0.125);
});

test("Q2_K: d * scale * q - dmin * min, group of 16 = weight / 16", () => {
  // scales byte g: scale g in the low nibble, min 15 - g in the high nibble
  const scales = range(16).map((g) => g | ((15 - g) << 4));
  // quants: weight 128h + 32s + l has 2 bits at shift 2s of qs[32h + l]
  const qs = range(64).map((k) => (k * 37 + 11) & 0xff);
  const y = dequant(GGMLType.Q2_K, [...scales, ...qs, ...f16(0x3800), ...f16(0x3400)], 256);
  // spot value: weight 37 -> h 0, s 1, l 5, group 2: q = (qs[5] >> 2) & 3 = (196 >> 2) & 3 = 1
  assert.equal(y[37], 0.5 * 2 * 1 - 0.25 * 13);
  for (let i = 0; i < 256; i++) {
    const h = i >> 7;
    const s = (i >> 5) & 3;
    const l = i & 31;
    const g = i >> 4;
    const q = (qs[32 * h + l]! >> (2 * s)) & 3;
    assert.equal(y[i], 0.5 * g * q - 0.25 * (15 - g), `weight ${i}`);
  }
});

test("Q3_K: d * scale * (low 2 bits - (hmask bit ? 0 : 4))", () => {
  // hmask[i % 32] bit i / 32 is weight i's high bit; 0x55 sets it for i / 32 even
  const hmask = new Array(32).fill(0x55);
  const qs = range(64).map((k) => (k * 53 + 7) & 0xff);
  // 16 scales, scale g = g - 8, stored as u = g + 24 in 6 bits: low nibbles in bytes 0..7
  // (scale g < 8 low nibble of byte g, else high nibble of byte g - 8), top 2 bits at
  // bits 2 * (g / 4) of byte 8 + g % 4
  const sc = new Array(12).fill(0);
  for (let g = 0; g < 16; g++) {
    const u = g + 24;
    if (g < 8) sc[g] |= u & 15;
    else sc[g - 8] |= (u & 15) << 4;
    sc[8 + (g % 4)] |= (u >> 4) << (2 * (g >> 2));
  }
  // spot check of the packing by hand: byte 0 = scale 0 (24 -> low nibble 8) | scale 8 (32 -> 0) << 4
  assert.equal(sc[0], 0x08);
  const y = dequant(GGMLType.Q3_K, [...hmask, ...qs, ...sc, ...f16(0x3800)], 256);
  for (let i = 0; i < 256; i++) {
    const low = (qs[32 * (i >> 7) + (i & 31)]! >> (2 * ((i >> 5) & 3))) & 3;
    const high = ((i >> 5) & 1) === 0 ? 1 : 0;
    const q = low - (high ? 0 : 4);
    assert.equal(y[i], 0.5 * ((i >> 4) - 8) * q, `weight ${i}`);
  }
});

// Q4_K / Q5_K scale bytes for (scale, min) pairs sc = [1, 2, 3, 60, 17, 33, 49, 63] and
// m = [5, 6, 7, 8, 18, 34, 50, 62], packed by hand: bytes 0..3 = sc[j] | (sc[j+4] >> 4) << 6,
// bytes 4..7 = m[j] | (m[j+4] >> 4) << 6, bytes 8..11 = (sc[j+4] & 15) | (m[j+4] & 15) << 4.
const K4_SC = [1, 2, 3, 60, 17, 33, 49, 63];
const K4_M = [5, 6, 7, 8, 18, 34, 50, 62];
const K4_SCALES = [0x41, 0x82, 0xc3, 0xfc, 0x45, 0x86, 0xc7, 0xc8, 0x21, 0x21, 0x21, 0xef];

test("Q4_K: d * scale_j * q - dmin * min_j over 8 groups of 32", () => {
  // chunk c (64 weights) uses bytes 32c..32c+31: low nibbles = group 2c, high = group 2c+1
  const qs = range(128).map((k) => (k & 15) | ((15 - (k & 15)) << 4));
  const y = dequant(GGMLType.Q4_K, [...f16(0x3800), ...f16(0x3400), ...K4_SCALES, ...qs], 256);
  assert.equal(y[0], -1.25); // 0.5 * 1 * 0 - 0.25 * 5
  assert.equal(y[255], -15.5); // group 7, q = 15 - 15 = 0: -0.25 * 62
  assert.equal(y[200], 183.5); // group 6, l = 8, q = 8: 0.5 * 49 * 8 - 0.25 * 50
  for (let i = 0; i < 256; i++) {
    const j = i >> 5;
    const l = i & 31;
    const q = j % 2 === 0 ? l & 15 : 15 - (l & 15);
    assert.equal(y[i], 0.5 * K4_SC[j]! * q - 0.25 * K4_M[j]!, `weight ${i}`);
  }
});

test("Q5_K: as Q4_K with a 5th bit from qh", () => {
  const qh = range(32).map((l) => (l * 37 + 5) & 0xff);
  const qs = range(128).map((k) => (k * 29 + 3) & 0xff);
  const y = dequant(GGMLType.Q5_K, [...f16(0x3800), ...f16(0x3400), ...K4_SCALES, ...qh, ...qs], 256);
  for (let i = 0; i < 256; i++) {
    const j = i >> 5; // group; chunk c = j >> 1
    const l = i & 31;
    const byte = qs[32 * (j >> 1) + l]!;
    const low = j % 2 === 0 ? byte & 15 : byte >> 4;
    const high = (qh[l]! >> j) & 1; // bit 2c for the low nibbles, 2c + 1 for the high
    assert.equal(y[i], 0.5 * K4_SC[j]! * (low + 16 * high) - 0.25 * K4_M[j]!, `weight ${i}`);
  }
});

test("Q6_K: d * scale_g * (6-bit q - 32), int8 scales", () => {
  const ql = range(128).map((k) => (k * 13 + 7) & 0xff);
  const qh = range(64).map((k) => (k * 29 + 3) & 0xff);
  const scales = range(16).map((g) => (g - 8) & 0xff);
  const y = dequant(GGMLType.Q6_K, [...ql, ...qh, ...scales, ...f16(0x3400)], 256);
  for (let i = 0; i < 256; i++) {
    // weight 128h + 32s + l: low 4 bits from ql[64h + 32(s & 1) + l], the high nibble when s >= 2;
    // top 2 bits at shift 2s of qh[32h + l]
    const h = i >> 7;
    const s = (i >> 5) & 3;
    const l = i & 31;
    const b = ql[64 * h + 32 * (s & 1) + l]!;
    const low = s >= 2 ? b >> 4 : b & 15;
    const high = (qh[32 * h + l]! >> (2 * s)) & 3;
    assert.equal(y[i], 0.25 * ((i >> 4) - 8) * ((low | (high << 4)) - 32), `weight ${i}`);
  }
});

test("multi-block rows and argument errors", () => {
  const block = (d: number, q: number) => [...f16(d), ...new Array(32).fill(q & 0xff)];
  const y = dequant(GGMLType.Q8_0, [...block(0x3c00, 3), ...block(0x4000, -5)], 64);
  assert.equal(y[0], 3);
  assert.equal(y[63], -10);
  assert.throws(() => dequantizeRow(GGMLType.Q8_0, new Uint8Array(34), new Float32Array(48), 48), /block size 32/);
  assert.throws(() => dequantizeRow(GGMLType.Q4_K, new Uint8Array(100), new Float32Array(256), 256), /needs 144 bytes/);
  assert.throws(() => dequantizeRow(GGMLType.Q8_0, new Uint8Array(34), new Float32Array(16), 32), /float buffer/);
  assert.throws(() => dequantizeRow(GGMLType.I32, new Uint8Array(4), new Float32Array(1), 1), /I32 is not supported/);
});

// kvalues_iq4nl (ggml-common.h)
const IQ4NL = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

test("IQ4_NL: d * kvalues_iq4nl[index], byte j = weight j (low) and j + 16 (high)", () => {
  const qs = range(16).map((j) => j | ((15 - j) << 4));
  const y = dequant(GGMLType.IQ4_NL, [...f16(0x3800), ...qs], 32);
  for (let j = 0; j < 16; j++) {
    assert.equal(y[j], 0.5 * IQ4NL[j]!, `weight ${j}`);
    assert.equal(y[j + 16], 0.5 * IQ4NL[15 - j]!, `weight ${j + 16}`);
  }
});

test("IQ4_XS: d * (6-bit scale - 32) * kvalues_iq4nl[index] over 8 sub-blocks of 32", () => {
  // sub-block ib's scale: low 4 bits = nibble ib of scales_l, high 2 bits = bits 2ib, 2ib + 1 of scales_h
  const ls = [0, 31, 32, 33, 63, 40, 17, 50];
  let sh = 0;
  const sl = [0, 0, 0, 0];
  ls.forEach((l, ib) => {
    sl[ib >> 1]! |= (l & 15) << (4 * (ib & 1));
    sh |= (l >> 4) << (2 * ib);
  });
  const qs = range(128).map((k) => (k * 7 + 3) & 0xff);
  const y = dequant(GGMLType.IQ4_XS, [...f16(0x3400), ...f16(sh), ...sl, ...qs], 256);
  for (let i = 0; i < 256; i++) {
    const ib = i >> 5, j = i & 31;
    const byte = qs[16 * ib + (j & 15)]!;
    const idx = j < 16 ? byte & 15 : byte >> 4;
    assert.equal(y[i], 0.25 * (ls[ib]! - 32) * IQ4NL[idx]!, `weight ${i}`);
  }
});

/*
 * The types without a quantizer (grid i-quants, ternary, MXFP4): rows of 2048 random bytes with
 * bounded scales (so the values are finite), dequantized; the FNV-1a hash of the f32 bits must
 * equal that of llama.cpp's own dequantization (ggml_get_type_traits(type)->to_float of
 * node-llama-cpp 3.21.1's libggml-base.so, run on the same bytes when this test was written:
 * bit-identical). Every field takes random values here, including TQ1_0 bytes >= 243.
 */
const LLAMA_CPP_DEQUANT_FNV: [GGMLType, number][] = [
  [GGMLType.IQ2_XXS, 0xd205d459],
  [GGMLType.IQ2_XS, 0x416dabb1],
  [GGMLType.IQ2_S, 0x57d88f05],
  [GGMLType.IQ3_XXS, 0xd7248d1d],
  [GGMLType.IQ3_S, 0x6f4ff605],
  [GGMLType.IQ1_S, 0xaa04ae85],
  [GGMLType.IQ1_M, 0xac573dc5],
  [GGMLType.TQ1_0, 0x577ffdc5],
  [GGMLType.TQ2_0, 0x10089dc5],
  [GGMLType.MXFP4, 0xf6863dc5],
];

function randomBytesRow(t: GGMLType, n: number): Uint8Array {
  const b = new Uint8Array(rowByteLength(t, n));
  new Rng(100 + t).fillBytes(b);
  const { typeSize } = typeInfo(t);
  for (let o = 0; o < b.length; o += typeSize) {
    // MXFP4: exponents 100..131; IQ1_M: f16 scale 2^-7 in the top nibbles; others: the f16 d's exponent below 15
    if (t === GGMLType.MXFP4) b[o] = 100 + (b[o]! & 31);
    else if (t === GGMLType.IQ1_M) for (let i = 0; i < 4; i++) b[o + 49 + 2 * i] = (b[o + 49 + 2 * i]! & 0x0f) | (i === 3 ? 0x20 : 0);
    else {
      const d = t === GGMLType.TQ1_0 ? 52 : t === GGMLType.TQ2_0 ? 64 : 0;
      b[o + d + 1] = b[o + d + 1]! & 0x3b;
    }
  }
  return b;
}

for (const [type, want] of LLAMA_CPP_DEQUANT_FNV) {
  test(`${typeInfo(type).name}: dequantization bit-identical to llama.cpp's on random blocks`, () => {
    const y = dequant(type, randomBytesRow(type, 2048), 2048);
    const u = new Uint32Array(y.buffer);
    let h = 0x811c9dc5;
    for (let j = 0; j < u.length; j++) h = Math.imul(h ^ u[j]!, 0x01000193) >>> 0;
    assert.equal(h.toString(16), want.toString(16));
  });
}

test("IQ3_S: d * (1 + 2 * scale) * iq3s_grid[9-bit index] * sign, one block by hand", () => {
  // d = 1, scales 0 (x1), every index 0 except qs[0] = 1 with qh bit 0 set (index 257), sign bit 0 set
  const b = new Uint8Array(110);
  b.set(f16(0x3c00), 0);
  b[2] = 1;
  b[66] = 1;
  b[74] = 1;
  const y = dequant(GGMLType.IQ3_S, b, 256);
  const g = iqGrid.IQ3S_GRID;
  assert.deepEqual([...y.subarray(0, 4)], [-g[4 * 257]!, g[4 * 257 + 1]!, g[4 * 257 + 2]!, g[4 * 257 + 3]!]);
  assert.deepEqual([...y.subarray(4, 8)], [g[0]!, g[1]!, g[2]!, g[3]!]);
});
