import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fma64 } from "../src/kernels/ops/fma64.js";
import { cosfGlibc, sinfGlibc } from "../src/kernels/ops/sincosf.js";

/** a*b+c rounded once, by exact integer arithmetic: the naive reference for fma64 */
function exactFma(a: number, b: number, c: number): number {
  const parts = (x: number): [bigint, number] => {
    const view = new DataView(new ArrayBuffer(8));
    view.setFloat64(0, x);
    const hi = view.getUint32(0), exponent = (hi >>> 20) & 0x7ff;
    let m = (BigInt(hi & 0xfffff) << 32n) | BigInt(view.getUint32(4));
    if (exponent !== 0) m |= 1n << 52n;
    return [hi >>> 31 ? -m : m, Math.max(exponent, 1) - 1075];
  };
  const [ma, ea] = parts(a), [mb, eb] = parts(b), [mc, ec] = parts(c);
  const e = Math.min(ea + eb, ec);
  const m = ((ma * mb) << BigInt(ea + eb - e)) + (mc << BigInt(ec - e));
  // an exact zero is -0 only when both addends are -0 (IEEE 754 round to nearest)
  if (m === 0n) return Object.is(a * b, -0) && Object.is(c, -0) ? -0 : 0;
  let mag = m < 0n ? -m : m, exponent = e;
  const drop = mag.toString(2).length - 53;
  if (drop > 0) {
    const rest = mag & ((1n << BigInt(drop)) - 1n), half = 1n << BigInt(drop - 1);
    mag >>= BigInt(drop);
    exponent += drop;
    if (rest > half || (rest === half && (mag & 1n) === 1n)) mag += 1n; // ties to even
  }
  return (m < 0n ? -1 : 1) * Number(mag) * 2 ** exponent;
}

test("fma64 rounds a*b+c once, like a hardware fused multiply-add (checked against exact integer arithmetic)", () => {
  let seed = 2024;
  const random = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const operand = (): number => {
    const x = (random() * 2 - 1) * 2 ** Math.floor(random() * 60 - 30);
    // short mantissas make exact ties and exact cancellations common
    return random() < 0.4 ? Math.round(x * 2 ** 20) / 2 ** 20 : x;
  };
  for (let i = 0; i < 200_000; i++) {
    const a = operand(), b = operand();
    const r = random();
    const c = r < 0.3 ? -(a * b) : r < 0.5 ? -(a * b) * (1 + (random() - 0.5) * 2 ** -40) : operand();
    const want = exactFma(a, b, c);
    assert.equal(fma64(a, b, c), want, `fma64(${a}, ${b}, ${c})`);
  }
});

/** [x, glibc sinf(x), glibc cosf(x)] as float bits, printed by glibc 2.36 (x86-64, FMA) — all
 * angles where glibc's result is not the correctly rounded one, so Math.sin would miss them */
const GLIBC_VALUES = [
  [0x3e4cccf5, 0x3e4b7021, 0x3f7ae5a3], [0x3e4d6912, 0x3e4c091f, 0x3f7adddf], [0x3e4d9032, 0x3e4c2f76, 0x3f7adbec],
  [0x3f4cd3a7, 0x3f37a96c, 0x3f325674], [0x3f4d4f2e, 0x3f37ff64, 0x3f31fdc1], [0x3f4d9ddd, 0x3f383611, 0x3f31c52b],
  [0x42f2025c, 0x3f7fa2f7, 0xbd5a2d36], [0x42f27755, 0x3f75e7e1, 0xbe8e5b48], [0x42f2c5a4, 0x3f6830ed, 0xbed79f67],
  [0x459c4001, 0xbf7ce669, 0x3e1edfda], [0x459c670b, 0xbea2a5fc, 0xbf72bd44], [0x459d0363, 0xbf59b1ce, 0xbf06b425],
] as const;

test("sinfGlibc/cosfGlibc reproduce glibc's sinf/cosf where they are not correctly rounded", () => {
  const f = new Float32Array(1), u = new Uint32Array(f.buffer);
  const float = (bits: number): number => { u[0] = bits; return f[0]!; };
  let differFromMathSin = 0;
  for (const [x, s, c] of GLIBC_VALUES) {
    assert.equal(sinfGlibc(float(x)), float(s), `sinf(${float(x)})`);
    assert.equal(cosfGlibc(float(x)), float(c), `cosf(${float(x)})`);
    if (Math.fround(Math.sin(float(x))) !== float(s) || Math.fround(Math.cos(float(x))) !== float(c)) differFromMathSin++;
  }
  assert.equal(differFromMathSin, GLIBC_VALUES.length, "every listed angle is one where correct rounding differs from glibc");
  assert.equal(sinfGlibc(0), 0);
  assert.equal(cosfGlibc(0), 1);
  assert.ok(Number.isNaN(sinfGlibc(Infinity)) && Number.isNaN(cosfGlibc(NaN)));
});

const compiler = spawnSync("cc", ["--version"]).status === 0 ? "cc" : undefined;

test("sinfGlibc/cosfGlibc equal this machine's C library on 300k floats of every range", { skip: compiler ? false : "no C compiler (cc) on this machine to call the C library's sinf/cosf" }, () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-sincosf-"));
  try {
    // a C program that writes (x, sinf(x), cosf(x)) for pseudo-random float bit patterns
    writeFileSync(join(dir, "dump.c"), `#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
int main(void) { uint32_t s = 7; FILE *out = fopen("${join(dir, "values.bin")}", "wb");
  for (int i = 0; i < 300000; i++) { s = s * 1103515245u + 12345u; uint32_t bits = s; s = s * 1103515245u + 12345u;
    bits = (bits & 0xffff0000u) | (s >> 16); float x; memcpy(&x, &bits, 4);
    if (!isfinite(x) || i % 3 == 0) x = fmodf(fabsf(isfinite(x) ? x : (float)i), 70000.0f);
    float r[3] = { x, sinf(x), cosf(x) }; fwrite(r, 4, 3, out); }
  fclose(out); return 0; }
`);
    execFileSync(compiler!, ["-O2", "-o", join(dir, "dump"), join(dir, "dump.c"), "-lm"]);
    execFileSync(join(dir, "dump"));
    const bytes = readFileSync(join(dir, "values.bin"));
    const v = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
    let mismatches = 0, notCorrectlyRounded = 0;
    for (let i = 0; i < v.length; i += 3) {
      if (!Object.is(sinfGlibc(v[i]!), v[i + 1]!) || !Object.is(cosfGlibc(v[i]!), v[i + 2]!)) mismatches++;
      if (Math.fround(Math.sin(v[i]!)) !== v[i + 1]) notCorrectlyRounded++;
    }
    assert.equal(mismatches, 0);
    console.log(`# ${v.length / 3} floats: 0 mismatches; Math.sin rounded to float differs from this libm on ${notCorrectlyRounded}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
