import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, openSync, closeSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { existsSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { gguf } from "@huggingface/gguf";
import { writeGGUF, ggufEntry, GGUFWriteError, type GGUFWriteEntry } from "../src/formats/gguf-writer.js";
import { readGGUFHeader, readTensorInto } from "../src/formats/gguf-reader.js";
import { GGUFValueType } from "../src/formats/gguf-types.js";
import { GGMLType } from "../src/tensor/dtypes.js";

const dir = mkdtempSync(join(tmpdir(), "tsllm-gguf-writer-"));
test.after(() => rmSync(dir, { recursive: true, force: true }));

/** one entry of every metadata value type, arrays of every item type and nested arrays */
const ALL_TYPES: [string, GGUFWriteEntry][] = [
  ["t.u8", ggufEntry.u8(255)],
  ["t.i8", ggufEntry.i8(-128)],
  ["t.u16", ggufEntry.u16(65535)],
  ["t.i16", ggufEntry.i16(-32768)],
  ["t.u32", ggufEntry.u32(0xffffffff)],
  ["t.i32", ggufEntry.i32(-0x80000000)],
  ["t.f32", ggufEntry.f32(0.5)],
  ["t.f64", ggufEntry.f64(Math.PI)],
  ["t.bool", ggufEntry.bool(true)],
  ["t.bool0", ggufEntry.bool(false)],
  ["t.string", ggufEntry.string("héllo, 世界 🦙")],
  ["t.empty_string", ggufEntry.string("")],
  ["t.u64", ggufEntry.u64(2 ** 40)],
  ["t.u64big", ggufEntry.u64(0xffffffffffffffffn)],
  ["t.i64", ggufEntry.i64(-(2 ** 40))],
  ["t.i64big", ggufEntry.i64(-(1n << 63n))],
  ["a.u8", ggufEntry.u8s([0, 1, 255])],
  ["a.i8", ggufEntry.i8s([-1, 0, 127])],
  ["a.u16", ggufEntry.u16s([1, 65535])],
  ["a.i16", ggufEntry.i16s([-2, 300])],
  ["a.u32", ggufEntry.u32s([7, 0xffffffff])],
  ["a.i32", ggufEntry.i32s([-7, 49151])],
  ["a.f32", ggufEntry.f32s([0.25, -1.5, 3])],
  ["a.f64", ggufEntry.f64s([1e-300, -2.5])],
  ["a.bool", ggufEntry.bools([true, false, true])],
  ["a.string", ggufEntry.strings(["a", "", "▁the", "<0x0A>"])],
  ["a.u64", ggufEntry.u64s([1, 2n ** 60n])],
  ["a.i64", ggufEntry.i64s([-1, -(2n ** 60n)])],
  ["a.empty", ggufEntry.f32s([])],
  ["a.nested", ggufEntry.arrays([ggufEntry.i32s([1, 2]), ggufEntry.strings(["x"]), ggufEntry.arrays([ggufEntry.u8s([9])])])],
];

test("writeGGUF round-trips every metadata value type through readGGUFHeader", async () => {
  const path = join(dir, "all-types.gguf");
  await writeGGUF(path, { metadata: ALL_TYPES, tensors: [] });
  const h = readGGUFHeader(path);
  assert.equal(h.version, 3);
  assert.equal(h.tensors.length, 0);
  assert.deepEqual([...h.metadata.keys()], ALL_TYPES.map(([k]) => k));
  const get = (k: string) => h.metadata.get(k)!;
  for (const [k, e] of ALL_TYPES) {
    assert.equal(get(k).type, e.type, k);
    if (e.type === GGUFValueType.ARRAY) assert.equal(get(k).itemType, e.itemType, k);
  }
  assert.equal(get("t.u8").value, 255);
  assert.equal(get("t.i8").value, -128);
  assert.equal(get("t.u16").value, 65535);
  assert.equal(get("t.i16").value, -32768);
  assert.equal(get("t.u32").value, 0xffffffff);
  assert.equal(get("t.i32").value, -0x80000000);
  assert.equal(get("t.f32").value, 0.5);
  assert.equal(get("t.f64").value, Math.PI);
  assert.equal(get("t.bool").value, true);
  assert.equal(get("t.bool0").value, false);
  assert.equal(get("t.string").value, "héllo, 世界 🦙");
  assert.equal(get("t.empty_string").value, "");
  assert.equal(get("t.u64").value, 2 ** 40);
  assert.equal(get("t.u64big").value, 0xffffffffffffffffn);
  assert.equal(get("t.i64").value, -(2 ** 40));
  assert.equal(get("t.i64big").value, -(1n << 63n));
  assert.deepEqual(get("a.u8").value, new Uint8Array([0, 1, 255]));
  assert.deepEqual(get("a.i8").value, new Int8Array([-1, 0, 127]));
  assert.deepEqual(get("a.u16").value, new Uint16Array([1, 65535]));
  assert.deepEqual(get("a.i16").value, new Int16Array([-2, 300]));
  assert.deepEqual(get("a.u32").value, new Uint32Array([7, 0xffffffff]));
  assert.deepEqual(get("a.i32").value, new Int32Array([-7, 49151]));
  assert.deepEqual(get("a.f32").value, new Float32Array([0.25, -1.5, 3]));
  assert.deepEqual(get("a.f64").value, new Float64Array([1e-300, -2.5]));
  assert.deepEqual(get("a.bool").value, [true, false, true]);
  assert.deepEqual(get("a.string").value, ["a", "", "▁the", "<0x0A>"]);
  assert.deepEqual(get("a.u64").value, [1, 2n ** 60n]);
  assert.deepEqual(get("a.i64").value, [-1, -(2n ** 60n)]);
  assert.deepEqual(get("a.empty").value, new Float32Array([]));
  assert.deepEqual(get("a.nested").value, [new Int32Array([1, 2]), ["x"], [new Uint8Array([9])]]);

  // rewriting what the reader returned (nested inner types inferred) gives the same bytes
  const again = join(dir, "all-types-again.gguf");
  await writeGGUF(again, { metadata: h.metadata, tensors: [] });
  assert.deepEqual(readFileSync(again), readFileSync(path));
});

test("writeGGUF produces the byte layout of the GGUF v3 spec", async () => {
  // Hand-derived from the spec: header 24 bytes, kv "a"=u32 7 (8+1+4+4 = 17), tensor info
  // "t" (8+1 + 4 + 8 + 4 + 8 = 33) -> 74 bytes, padded to 96; 8 data bytes padded to 32.
  const path = join(dir, "layout.gguf");
  await writeGGUF(path, {
    metadata: [["a", ggufEntry.u32(7)]],
    tensors: [{ name: "t", type: GGMLType.F32, dims: [2], data: new Uint8Array(new Float32Array([1, 2]).buffer) }],
  });
  const b = readFileSync(path);
  const expected = Buffer.alloc(128);
  let o = 0;
  o += expected.write("GGUF", o, "latin1");
  o = expected.writeUInt32LE(3, o);
  o = expected.writeBigUInt64LE(1n, o);
  o = expected.writeBigUInt64LE(1n, o);
  o = expected.writeBigUInt64LE(1n, o);
  o += expected.write("a", o, "latin1");
  o = expected.writeUInt32LE(4, o);
  o = expected.writeUInt32LE(7, o);
  o = expected.writeBigUInt64LE(1n, o);
  o += expected.write("t", o, "latin1");
  o = expected.writeUInt32LE(1, o);
  o = expected.writeBigUInt64LE(2n, o);
  o = expected.writeUInt32LE(0, o);
  o = expected.writeBigUInt64LE(0n, o);
  assert.equal(o, 74);
  expected.writeFloatLE(1, 96);
  expected.writeFloatLE(2, 100);
  assert.deepEqual(b, expected);
});

test("writeGGUF aligns tensor data (custom alignment, lazy producers) and readTensorInto reads it back", async () => {
  const path = join(dir, "tensors.gguf");
  const q8 = new Uint8Array(34 * 2).map((_, i) => i);
  const f16 = new Uint8Array(2 * 3 * 5).map((_, i) => 255 - i);
  let produced = 0;
  await writeGGUF(path, {
    metadata: [["general.architecture", ggufEntry.string("llama")]],
    alignment: 64,
    tensors: [
      { name: "q", type: GGMLType.Q8_0, dims: [64, 1], data: () => { produced++; return q8; } },
      { name: "h", type: GGMLType.F16, dims: [3, 5], data: f16 },
      { name: "x", type: GGMLType.I8, dims: [1, 1, 1, 3], data: new Uint8Array([1, 2, 3]) },
    ],
  });
  assert.equal(produced, 1);
  const h = readGGUFHeader(path);
  assert.equal(h.alignment, 64);
  assert.equal(h.metadata.get("general.alignment")?.type, GGUFValueType.UINT32);
  assert.equal(h.metadata.get("general.alignment")?.value, 64);
  assert.deepEqual(h.tensors.map((t) => [t.name, t.type, t.dims, t.byteLength]), [
    ["q", GGMLType.Q8_0, [64, 1], 68],
    ["h", GGMLType.F16, [3, 5], 30],
    ["x", GGMLType.I8, [1, 1, 1, 3], 3],
  ]);
  for (const t of h.tensors) assert.equal(t.fileOffset % 64, 0, t.name);
  const fd = openSync(path, "r");
  try {
    const read = (i: number) => {
      const into = new Uint8Array(h.tensors[i]!.byteLength);
      readTensorInto(fd, h.tensors[i]!, into);
      return into;
    };
    assert.deepEqual(read(0), q8);
    assert.deepEqual(read(1), f16);
    assert.deepEqual(read(2), new Uint8Array([1, 2, 3]));
  } finally {
    closeSync(fd);
  }

  // an independent parser agrees on the layout
  const hf = await gguf(path, { allowLocalFile: true });
  assert.equal(Number(hf.tensorDataOffset), h.dataOffset);
  assert.deepEqual(
    hf.tensorInfos.map((t) => [t.name, Number(t.dtype), t.shape.map(Number), Number(hf.tensorDataOffset + t.offset)]),
    h.tensors.map((t) => [t.name, t.type, t.dims, t.fileOffset]),
  );
});

test("@huggingface/gguf reads every value type the writer writes", async () => {
  const path = join(dir, "all-types.gguf");
  await writeGGUF(path, { metadata: ALL_TYPES.filter(([k]) => k !== "a.nested"), tensors: [] });
  const { metadata } = await gguf(path, { allowLocalFile: true });
  const m = metadata as unknown as Record<string, unknown>;
  assert.equal(m["t.i8"], -128);
  assert.equal(m["t.u32"], 0xffffffff);
  assert.equal(m["t.f32"], 0.5);
  assert.equal(m["t.f64"], Math.PI);
  assert.equal(m["t.bool"], true);
  assert.equal(m["t.string"], "héllo, 世界 🦙");
  assert.equal(BigInt(m["t.u64big"] as bigint), 0xffffffffffffffffn);
  assert.equal(BigInt(m["t.i64big"] as bigint), -(1n << 63n));
  assert.deepEqual(m["a.string"], ["a", "", "▁the", "<0x0A>"]);
  assert.deepEqual(m["a.i32"], [-7, 49151]);
  assert.deepEqual(m["a.f32"], [0.25, -1.5, 3]);
  assert.deepEqual(m["a.bool"], [true, false, true]);
});

test("writeGGUF rejects bad input with errors naming the field", async () => {
  const path = join(dir, "bad.gguf");
  const cases: [string, Parameters<typeof writeGGUF>[1], RegExp][] = [
    ["wrong data size", { metadata: [], tensors: [{ name: "w", type: GGMLType.F32, dims: [4], data: new Uint8Array(15) }] }, /tensor "w" data: expected 16 bytes/],
    ["lazy wrong size", { metadata: [], tensors: [{ name: "w", type: GGMLType.F32, dims: [4], data: () => new Uint8Array(3) }] }, /tensor "w" data: .*returned 3/],
    ["row not whole blocks", { metadata: [], tensors: [{ name: "w", type: GGMLType.Q8_0, dims: [33], data: new Uint8Array(34) }] }, /tensor "w" dims\[0\]/],
    ["5 dims", { metadata: [], tensors: [{ name: "w", type: GGMLType.F32, dims: [1, 1, 1, 1, 1], data: new Uint8Array(4) }] }, /tensor "w" dims: expected 1..4/],
    ["duplicate tensor", { metadata: [], tensors: [{ name: "w", type: GGMLType.I8, dims: [1], data: new Uint8Array(1) }, { name: "w", type: GGMLType.I8, dims: [1], data: new Uint8Array(1) }] }, /duplicate tensor name/],
    ["duplicate key", { metadata: [["k", ggufEntry.u8(1)], ["k", ggufEntry.u8(2)]], tensors: [] }, /metadata "k": duplicate key/],
    ["u8 out of range", { metadata: [["k", ggufEntry.u8(256)]], tensors: [] }, /metadata "k": expected an integer in \[0, 255\]/],
    ["array item wrong type", { metadata: [["k", { type: GGUFValueType.ARRAY, itemType: GGUFValueType.STRING, value: [1, 2] }]], tensors: [] }, /metadata "k"\[0\]: expected a string/],
    ["alignment not power of two", { metadata: [], tensors: [], alignment: 48 }, /alignment: expected a power of two/],
    ["alignment contradiction", { metadata: [["general.alignment", ggufEntry.u32(64)]], tensors: [], alignment: 32 }, /contradicts/],
  ];
  for (const [what, spec, re] of cases) {
    await assert.rejects(writeGGUF(path, spec), (e: Error) => e instanceof GGUFWriteError && re.test(e.message) && e.message.startsWith(path), what);
  }
});

const SHARED = resolve(dirname(fileURLToPath(import.meta.url)), "..", "../shared");
const sharedFiles = ["tokenizer-tests", "models"]
  .map((d) => join(SHARED, d))
  .filter(existsSync)
  .flatMap((d) => readdirSync(d).filter((f) => f.endsWith(".gguf")).map((f) => join(d, f)));

test("rewriting the shared GGUFs (written by llama.cpp's gguf-py) reproduces them byte for byte", { skip: sharedFiles.length === 0 ? `../shared not found at ${SHARED}` : false }, async () => {
  for (const src of sharedFiles) {
    const h = readGGUFHeader(src);
    const fd = openSync(src, "r");
    const out = join(dir, "rewrite.gguf");
    try {
      await writeGGUF(out, {
        metadata: h.metadata,
        tensors: h.tensors.map((t) => ({
          name: t.name, type: t.type, dims: t.dims,
          data: () => { const b = new Uint8Array(t.byteLength); readTensorInto(fd, t, b); return b; },
        })),
      });
    } finally {
      closeSync(fd);
    }
    assert.ok(readFileSync(out).equals(readFileSync(src)), src);
  }
});
