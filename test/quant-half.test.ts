import assert from "node:assert/strict";
import { test } from "node:test";
import { bf16BitsToF32, f16BitsToF32, f32ToBF16Bits, f32ToF16Bits } from "../src/tensor/quant/index.js";

// Expected bit patterns follow from the IEEE 754 binary16 layout (1 sign, 5 exponent bits with
// bias 15, 10 mantissa bits) and bfloat16 (the top 16 bits of an f32), rounding to nearest even.

test("f16: exact values encode to their IEEE bits", () => {
  assert.equal(f32ToF16Bits(1), 0x3c00);
  assert.equal(f32ToF16Bits(-2), 0xc000);
  assert.equal(f32ToF16Bits(0.5), 0x3800);
  assert.equal(f32ToF16Bits(65504), 0x7bff); // largest finite f16
  assert.equal(f32ToF16Bits(0), 0x0000);
  assert.equal(f32ToF16Bits(-0), 0x8000);
  assert.equal(f32ToF16Bits(2 ** -14), 0x0400); // smallest normal
  assert.equal(f32ToF16Bits(2 ** -24), 0x0001); // smallest subnormal
  assert.equal(f32ToF16Bits(1023 * 2 ** -24), 0x03ff); // largest subnormal
});

test("f16: ties round to even, others to nearest", () => {
  // 1 + 2^-11 is halfway between 1 (0x3c00, even) and 1 + 2^-10 (0x3c01)
  assert.equal(f32ToF16Bits(1 + 2 ** -11), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 0x3c01 and 0x3c02 (even)
  assert.equal(f32ToF16Bits(1 + 3 * 2 ** -11), 0x3c02);
  // just above the first tie
  assert.equal(f32ToF16Bits(1 + 2 ** -11 + 2 ** -20), 0x3c01);
  // 0x3bff..0x3c00: 1 - 2^-12 is halfway between 1 - 2^-11 (0x3bff, odd) and 1 (0x3c00, even)
  assert.equal(f32ToF16Bits(1 - 2 ** -12), 0x3c00);
  // a tie carrying into the exponent: 2047.5 is halfway between 2047 (0x67ff) and 2048 (0x6800)
  assert.equal(f32ToF16Bits(2047.5), 0x6800);
});

test("f16: subnormal rounding", () => {
  assert.equal(f32ToF16Bits(2 ** -25), 0x0000); // halfway between 0 and 2^-24: even is 0
  assert.equal(f32ToF16Bits(1.5 * 2 ** -25), 0x0001);
  assert.equal(f32ToF16Bits(3 * 2 ** -25), 0x0002); // 1.5 units: halfway between 1 and 2
  assert.equal(f32ToF16Bits(5 * 2 ** -25), 0x0002); // 2.5 units: halfway between 2 and 3
  assert.equal(f32ToF16Bits(-(2 ** -24)), 0x8001);
  assert.equal(f32ToF16Bits(2 ** -14 - 2 ** -25), 0x0400); // 1023.5 units rounds up into the normals
  assert.equal(f32ToF16Bits(1e-10), 0x0000);
  assert.equal(f32ToF16Bits(-1e-10), 0x8000);
});

test("f16: overflow to infinity and NaN", () => {
  assert.equal(f32ToF16Bits(65519), 0x7bff); // below the halfway point 65520
  assert.equal(f32ToF16Bits(65520), 0x7c00); // halfway between 65504 and 65536: even is inf
  assert.equal(f32ToF16Bits(1e6), 0x7c00);
  assert.equal(f32ToF16Bits(-1e6), 0xfc00);
  assert.equal(f32ToF16Bits(Infinity), 0x7c00);
  assert.equal(f32ToF16Bits(-Infinity), 0xfc00);
  assert.equal(f32ToF16Bits(NaN) & 0x7fff, 0x7e00); // ggml's quiet NaN
});

test("f16 -> f32 decodes every class", () => {
  assert.equal(f16BitsToF32(0x3c00), 1);
  assert.equal(f16BitsToF32(0xc000), -2);
  assert.equal(f16BitsToF32(0x7bff), 65504);
  assert.equal(f16BitsToF32(0x3555), 0.333251953125); // (1 + 341/1024) / 4
  assert.equal(f16BitsToF32(0x0001), 2 ** -24);
  assert.equal(f16BitsToF32(0x83ff), -1023 * 2 ** -24);
  assert.ok(Object.is(f16BitsToF32(0x8000), -0));
  assert.equal(f16BitsToF32(0x7c00), Infinity);
  assert.equal(f16BitsToF32(0xfc00), -Infinity);
  assert.ok(Number.isNaN(f16BitsToF32(0x7e00)));
  assert.ok(Number.isNaN(f16BitsToF32(0x7c01)));
});

test("f16: every finite value survives decode then encode", () => {
  for (let h = 0; h < 65536; h++) {
    if ((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0) continue; // NaN payloads are not preserved
    const back = f32ToF16Bits(f16BitsToF32(h));
    if (back !== h) assert.fail(`f16 0x${h.toString(16)} came back as 0x${back.toString(16)}`);
  }
});

test("bf16: rounding to nearest even, overflow, subnormals, NaN", () => {
  assert.equal(f32ToBF16Bits(1), 0x3f80);
  assert.equal(f32ToBF16Bits(-3), 0xc040);
  // f32 1 + 2^-8 = 0x3f808000: exactly halfway between 0x3f80 (even) and 0x3f81
  assert.equal(f32ToBF16Bits(1 + 2 ** -8), 0x3f80);
  // 1 + 3 * 2^-8 = 0x3f818000: halfway between 0x3f81 and 0x3f82 (even)
  assert.equal(f32ToBF16Bits(1 + 3 * 2 ** -8), 0x3f82);
  // 0x3f808001: just above the tie
  assert.equal(f32ToBF16Bits(1 + 2 ** -8 + 2 ** -23), 0x3f81);
  // the largest f32 (0x7f7fffff) rounds up to infinity
  assert.equal(f32ToBF16Bits(3.4028234663852886e38), 0x7f80);
  assert.equal(f32ToBF16Bits(-Infinity), 0xff80);
  // f32 subnormals are kept, not flushed: 2^-128 = 2^21 * 2^-149 = 0x00200000
  assert.equal(f32ToBF16Bits(2 ** -128), 0x0020);
  const nan = f32ToBF16Bits(NaN);
  assert.equal(nan & 0x7f80, 0x7f80);
  assert.equal(nan & 0x0040, 0x0040, "NaN must be quiet");
});

test("bf16 -> f32", () => {
  assert.equal(bf16BitsToF32(0x3f80), 1);
  assert.equal(bf16BitsToF32(0x4049), 3.140625);
  assert.equal(bf16BitsToF32(0xc040), -3);
  assert.equal(bf16BitsToF32(0x7f80), Infinity);
  assert.equal(bf16BitsToF32(0x0001), 2 ** -133);
  assert.ok(Number.isNaN(bf16BitsToF32(0x7fc0)));
});
