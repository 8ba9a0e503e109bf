import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { before, test } from "node:test";
import { unsharedMemoryImport } from "../src/kernels/wasm/unshared.js";
import { f16BitsToF32 } from "../src/tensor/quant/index.js";
// @ts-expect-error: a plain .mjs build script without type declarations
import { ensureWasm } from "../scripts/build-wasm.mjs";

// A page without cross-origin isolation runs the kernels on one thread over an unshared memory
// (src/browser/backends.ts): the built module, which imports a shared one, has its import's
// shared flag cleared. V8 is the judge: the rewritten module must validate, link only to an
// unshared memory, and compute what the shared build computes.

before(async () => {
  await ensureWasm();
});

const built = (file: string): Uint8Array => new Uint8Array(readFileSync(new URL(`../dist/kernels/wasm/${file}`, import.meta.url)));

/** the kernels' f16 table (65536 floats) computed by `module` over `memory` */
function f16Table(module: WebAssembly.Module, memory: WebAssembly.Memory): Float32Array {
  const kernels = new WebAssembly.Instance(module, { env: { memory } }).exports as { heapBase(): number; fillF16Table(p: number): void };
  const at = Math.ceil(kernels.heapBase() / 64) * 64;
  memory.grow(5);
  kernels.fillF16Table(at);
  return new Float32Array(memory.buffer, at, 65536).slice();
}

test("the kernels with their memory import unshared link to an unshared memory only, and fill the same f16 table as the shared build", () => {
  const bytes = built("kernels.wasm");
  const shared = new WebAssembly.Module(bytes);
  const unshared = new WebAssembly.Module(unsharedMemoryImport(bytes));
  const sharedMemory = () => new WebAssembly.Memory({ initial: 1, maximum: 65536, shared: true });
  const plainMemory = () => new WebAssembly.Memory({ initial: 1, maximum: 65536 });
  assert.throws(() => new WebAssembly.Instance(shared, { env: { memory: plainMemory() } }), /^LinkError: /);
  assert.throws(() => new WebAssembly.Instance(unshared, { env: { memory: sharedMemory() } }), /^LinkError: /);
  const table = f16Table(unshared, plainMemory());
  assert.deepEqual(table, f16Table(shared, sharedMemory()));
  // and the table is f16's: the project's own decoder, bit by bit, for a few values
  for (const bits of [0x0000, 0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00]) assert.equal(table[bits], f16BitsToF32(bits));
});

test("the relaxed build rewrites too; the input is not changed; what is no shared-memory module is one clear error", () => {
  const relaxed = built("kernels-relaxed.wasm");
  const before = relaxed.slice();
  const out = unsharedMemoryImport(relaxed);
  assert.deepEqual(relaxed, before);
  assert.notDeepEqual(out, relaxed);
  assert.throws(() => unsharedMemoryImport(out), /^Error: wasm kernels: the memory import is not shared already$/);
  assert.throws(() => unsharedMemoryImport(new TextEncoder().encode("<!doctype html>")), /^Error: wasm kernels: not a WebAssembly module/);
  // a module with no imports at all: the header alone
  assert.throws(() => unsharedMemoryImport(new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0])), /^Error: wasm kernels: the module imports no memory$/);
});
