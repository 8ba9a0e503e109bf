import { quantizeActivationsQ8_0 } from "../src/kernels/reference/activation-quant.js";
import assert from "node:assert/strict";
import { before, test } from "node:test";
import { GGMLType, rowByteLength } from "../src/tensor/dtypes.js";
import { bf16BitsToF32, f16BitsToF32, f32ToBF16Bits, f32ToF16Bits, quantizeRow } from "../src/tensor/quant/index.js";
import * as C from "../src/kernels/wasm/control.js";
import { SharedArena } from "../src/kernels/wasm/memory.js";
import { instantiateKernels, kernelsModule, type KernelExports } from "../src/kernels/wasm/module.js";
import { createThreadPool } from "../src/kernels/wasm/pool.js";
// @ts-expect-error: a plain .mjs build script without type declarations
import { ensureWasm } from "../scripts/build-wasm.mjs";

// The wasm activation conversions must produce exactly the bytes of the TS quantizers
// (src/tensor/quant, which follow ggml's reference quantizers): any difference in rounding
// would change every integer dot product. And a kernel failing on a worker must surface as an
// exception on the calling thread.

before(async () => {
  await ensureWasm();
});

function setup(): { arena: SharedArena; kernels: KernelExports; table: number } {
  const arena = new SharedArena(1 << 20, 1024);
  const kernels = instantiateKernels(kernelsModule(), arena.memory);
  const table = arena.alloc(65536 * 4, "f16 table");
  kernels.fillF16Table(table);
  kernels.useF16Table(table);
  return { arena, kernels, table };
}

/** awkward inputs: ties, subnormals, huge values, zeros of both signs, plus random spread */
function inputs(n: number, seed: number): Float32Array {
  const x = new Float32Array(n);
  let s = seed;
  const next = (): number => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const special = [0, -0, 1, -1, 0.5, 2.5, -2.5, 65504, 65519, 65520, -70000, 6.1e-5, 5.96e-8, 2.98e-8, 1e-40, 3e38, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 3.3961e38, Infinity, -Infinity, NaN];
  for (let i = 0; i < n; i++) {
    const k = next();
    x[i] = k < 0.2 ? special[i % special.length]! : (next() * 2 - 1) * 10 ** Math.floor(next() * 8 - 4);
  }
  return x;
}

test("activations rounded through f16 (as they are, and times 2^112: the F16 one-token kernels' scaling) and bf16 equal the TS conversions bit for bit", () => {
  const { arena, kernels } = setup();
  // four lanes at a time, then a tail of three one by one
  const n = 4099;
  const x = inputs(n, 1);
  const ptr = arena.alloc(n * 4, "x");
  for (const [round, expect] of [
    [(p: number, n: number) => kernels.roundRowsF16(p, n, true), (v: number) => f16BitsToF32(f32ToF16Bits(v)) * 2 ** 112],
    [(p: number, n: number) => kernels.roundRowsF16(p, n, false), (v: number) => f16BitsToF32(f32ToF16Bits(v))],
    [kernels.roundRowsBF16, (v: number) => bf16BitsToF32(f32ToBF16Bits(v))],
  ] as const) {
    const view = new Float32Array(arena.buffer, ptr, n);
    view.set(x);
    round(ptr, n);
    for (let i = 0; i < n; i++) assert.ok(Object.is(view[i], Math.fround(expect(x[i]!))), `x = ${x[i]}: wasm ${view[i]}, TS ${expect(x[i]!)}`);
  }
});

test("Q8_0 and Q8_K activation quantization equals the reference backend's byte for byte", () => {
  const { arena, kernels } = setup();
  const n = 2048;
  const x = inputs(n, 2);
  // a block of zeros and a block with a single nonzero value: the d = 0 and max = -value paths
  x.fill(0, 256, 512);
  x.fill(0, 512, 768);
  x[600] = -3;
  // blocks whose scale is a subnormal f16 (max |x| below 127 * 2^-14) or rounds to zero there
  for (let i = 768; i < 896; i++) x[i] = Math.sin(i) * 10 ** -(3 + ((i >> 5) & 3));
  const xp = arena.alloc(n * 4, "x");
  const qs = arena.alloc(n * 2, "qs (int16)");
  const sc = arena.alloc(n, "scales");
  const bs = arena.alloc(n * 4, "bsums");
  new Float32Array(arena.buffer, xp, n).set(x);

  kernels.quantizeRowQ8_0(xp, qs, sc, n);
  const q8_0 = new Uint8Array(rowByteLength(GGMLType.Q8_0, n));
  quantizeActivationsQ8_0(q8_0, x, n);
  const wq = new Int16Array(arena.buffer, qs, n);
  const ws = new Float32Array(arena.buffer, sc, n / 32);
  for (let b = 0; b < n / 32; b++) {
    const o = b * 34;
    assert.equal(ws[b], f16BitsToF32(q8_0[o]! | (q8_0[o + 1]! << 8)), `Q8_0 block ${b} scale`);
    assert.deepEqual(Array.from(wq.subarray(b * 32, b * 32 + 32)), Array.from(new Int8Array(q8_0.buffer, o + 2, 32)), `Q8_0 block ${b} quants`);
  }

  kernels.quantizeRowQ8_K(xp, qs, sc, bs, n);
  const q8_k = new Uint8Array(rowByteLength(GGMLType.Q8_K, n));
  quantizeRow(GGMLType.Q8_K, x, q8_k, n);
  const dv = new DataView(q8_k.buffer);
  const kd = new Float32Array(arena.buffer, sc, n / 256);
  const kb = new Int32Array(arena.buffer, bs, n / 16);
  for (let b = 0; b < n / 256; b++) {
    const o = b * 292;
    assert.equal(kd[b], dv.getFloat32(o, true), `Q8_K block ${b} scale`);
    assert.deepEqual(Array.from(wq.subarray(b * 256, b * 256 + 256)), Array.from(new Int8Array(q8_k.buffer, o + 4, 256)), `Q8_K block ${b} quants`);
    for (let g = 0; g < 16; g++) assert.equal(kb[b * 16 + g], dv.getInt16(o + 4 + 256 + 2 * g, true), `Q8_K block ${b} bsum ${g}`);
  }
});

test("a kernel that traps on a worker thread surfaces as an exception, and the pool keeps working", async () => {
  const { arena, kernels, table } = setup();
  const ctrl = arena.alloc(C.CONTROL_BYTES, "control");
  const control = new Int32Array(arena.buffer, ctrl, C.CONTROL_BYTES / 4);
  const pool = await createThreadPool(kernelsModule(), { memory: arena.memory, kernels, ctrl, control, f16Table: table }, 2);
  try {
    control[C.KIND] = 99; // no such kernel: work() reaches `unreachable`
    control[C.ROWS] = 64;
    control[C.GRANULE] = 4;
    control[C.SHARES] = 16;
    control[C.MAX_CLAIM] = 4;
    assert.throws(() => pool.run(), /worker thread: worker 1: RuntimeError: unreachable/);
    control[C.ROWS] = 0; // an empty job: nothing to do, nothing fails
    pool.run();
    assert.throws(() => pool.run(1), /no memory 1 \(the pool knows 1\)/);
    // a second memory: the worker takes it from its port and runs the job in it (the trap proves it ran there)
    const second = setup();
    const ctrl2 = second.arena.alloc(C.CONTROL_BYTES, "control");
    const control2 = new Int32Array(second.arena.buffer, ctrl2, C.CONTROL_BYTES / 4);
    pool.addSpace({ memory: second.arena.memory, kernels: second.kernels, ctrl: ctrl2, control: control2, f16Table: second.table });
    control2[C.KIND] = 99;
    control2[C.ROWS] = 64;
    control2[C.GRANULE] = 4;
    control2[C.SHARES] = 16;
    control2[C.MAX_CLAIM] = 4;
    assert.throws(() => pool.run(1), /worker thread: worker 1: RuntimeError: unreachable/);
    control2[C.ROWS] = 0;
    pool.run(1);
    pool.run(0);
  } finally {
    pool.close();
  }
});
