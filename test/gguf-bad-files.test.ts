import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GGUFError, readGGUFHeader } from "../src/formats/gguf-reader.js";
import { GGUFValueType } from "../src/formats/gguf-types.js";
import { GGUFTensorSource } from "../src/formats/tensor-source.js";
import { GGMLType } from "../src/tensor/dtypes.js";
import { Rng } from "../src/testing/rng.js";

/*
 * Hostile GGUF files, built byte by byte from the GGUF v3 spec (not with our writer, so a
 * writer bug cannot hide a reader bug). Each must fail at once with a GGUFError naming the
 * file and the field; a reader that trusted a length would hang or allocate instead.
 */

const dir = mkdtempSync(join(tmpdir(), "tsllm-gguf-bad-"));
test.after(() => rmSync(dir, { recursive: true, force: true }));

/** little-endian byte builder */
class B {
  private parts: Buffer[] = [];
  raw(b: Uint8Array | string): this { this.parts.push(typeof b === "string" ? Buffer.from(b, "latin1") : Buffer.from(b)); return this; }
  u32(v: number): this { const b = Buffer.alloc(4); b.writeUInt32LE(v); return this.raw(b); }
  u64(v: number | bigint): this { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); return this.raw(b); }
  f32(v: number): this { const b = Buffer.alloc(4); b.writeFloatLE(v); return this.raw(b); }
  str(s: string, len?: number | bigint): this { const b = Buffer.from(s, "utf8"); return this.u64(len ?? b.length).raw(b); }
  get length(): number { return this.parts.reduce((n, p) => n + p.length, 0); }
  pad(align: number): this { return this.raw(new Uint8Array((align - (this.length % align)) % align)); }
  bytes(): Buffer { return Buffer.concat(this.parts); }
}

const header = (tensors: number | bigint, kvs: number | bigint) => new B().raw("GGUF").u32(3).u64(tensors).u64(kvs);
const kvU32 = (b: B, key: string, v: number) => b.str(key).u32(GGUFValueType.UINT32).u32(v);
const kvStr = (b: B, key: string, v: string) => b.str(key).u32(GGUFValueType.STRING).str(v);
const tensorInfo = (b: B, name: string, dims: (number | bigint)[], type: number, offset: number | bigint) => {
  b.str(name).u32(dims.length);
  for (const d of dims) b.u64(d);
  return b.u32(type).u64(offset);
};

/**
 * A small valid file: a string, a u32 and a string array of metadata, two F32 tensors. The
 * last tensor's data ends the file (no trailing padding), so every shorter prefix is invalid.
 */
function validFile(): Buffer {
  const b = header(2, 3);
  kvStr(b, "general.architecture", "llama");
  kvU32(b, "llama.block_count", 1);
  b.str("tokenizer.ggml.tokens").u32(GGUFValueType.ARRAY).u32(GGUFValueType.STRING).u64(3).str("a").str("b").str("▁c");
  tensorInfo(b, "x", [4, 2], GGMLType.F32, 0);
  tensorInfo(b, "y", [3], GGMLType.F32, 32);
  b.pad(32);
  b.raw(new Uint8Array(new Float32Array([1, 2, 3, 4, 5, 6, 7, 8]).buffer)); // 32 bytes
  b.raw(new Uint8Array(new Float32Array([9, 10, 11]).buffer));
  return b.bytes();
}

let fileNo = 0;
function write(bytes: Uint8Array): string {
  const p = join(dir, `f${fileNo++}.gguf`);
  writeFileSync(p, bytes);
  return p;
}

function expectGGUFError(bytes: Uint8Array, field: RegExp, what: string): void {
  const p = write(bytes);
  assert.throws(() => readGGUFHeader(p), (e: unknown) => {
    assert.ok(e instanceof GGUFError, `${what}: expected a GGUFError, got ${String(e)}`);
    assert.ok(e.message.startsWith(`${p}: `), `${what}: message names the file: ${e.message}`);
    assert.match(e.message, field, `${what}: message names the field`);
    return true;
  }, what);
}

test("the hand-built valid file parses (the baseline for the hostile variants)", () => {
  const h = readGGUFHeader(write(validFile()));
  assert.deepEqual(h.tensors.map((t) => [t.name, t.dims, t.byteLength]), [["x", [4, 2], 32], ["y", [3], 12]]);
  assert.deepEqual(h.metadata.get("tokenizer.ggml.tokens")?.value, ["a", "b", "▁c"]);
});

test("every truncated prefix of a valid file throws GGUFError", () => {
  const full = validFile();
  for (let n = 0; n < full.length; n++) {
    const p = write(full.subarray(0, n));
    assert.throws(() => readGGUFHeader(p), (e: unknown) => e instanceof GGUFError && e.message.startsWith(`${p}: `), `prefix of ${n} bytes`);
  }
});

test("bad magic", () => {
  const b = validFile();
  b.write("GGML", 0, "latin1");
  expectGGUFError(b, /magic: expected "GGUF", found "GGML"/, "bad magic");
});

test("string length larger than the file", () => {
  const b = header(0, 1).str("general.name", 1_000_000).raw("xyz").bytes();
  expectGGUFError(b, /metadata key #0: string length 1000000 is larger than the rest of the file/, "key length");
  const v = header(0, 1).str("general.name").u32(GGUFValueType.STRING).u64(2n ** 62n).bytes();
  expectGGUFError(v, /metadata "general.name"/, "value length 2^62");
  // an array's strings are named by their index (names made only for the error)
  const arrayOf = (n: number) => header(0, 1).str("t").u32(GGUFValueType.ARRAY).u32(GGUFValueType.STRING).u64(n).str("a");
  expectGGUFError(arrayOf(2).str("b", 1_000_000).raw("bc").bytes(), /metadata "t"\[1\]: string length 1000000 is larger than the rest of the file/, "element length");
  // three strings take at least 24 bytes, 25 are left, and the third's length is cut after 7
  expectGGUFError(arrayOf(3).str("b").raw(new Uint8Array(7)).bytes(), /metadata "t"\[2\] \(string length\): needs 8 bytes/, "element length cut short");
});

test("array length larger than the file", () => {
  const b = header(0, 1).str("a").u32(GGUFValueType.ARRAY).u32(GGUFValueType.FLOAT32).u64(2n ** 61n).f32(1).bytes();
  expectGGUFError(b, /metadata "a": array length 2305843009213693952 does not fit/, "f32 array");
  const s = header(0, 1).str("a").u32(GGUFValueType.ARRAY).u32(GGUFValueType.STRING).u64(1_000_000).str("x").bytes();
  expectGGUFError(s, /metadata "a": array length 1000000 does not fit/, "string array");
});

test("tensor count of 2^40", () => {
  expectGGUFError(header(2n ** 40n, 0).bytes(), /tensor_count: 1099511627776 exceeds/, "tensor count");
  // far fewer than the file could describe (32 bytes a tensor): each costs ~500 bytes of memory once read
  expectGGUFError(header(131_073, 0).bytes(), /tensor_count: 131073 exceeds the limit of 131072/, "tensor count past the limit");
  expectGGUFError(header(0, 65_537).bytes(), /metadata_kv_count: 65537 exceeds the limit of 65536/, "key count past the limit");
});

test("n_dims = 5", () => {
  const b = header(1, 0);
  tensorInfo(b, "w", [1, 1, 1, 1, 1], GGMLType.F32, 0);
  expectGGUFError(b.pad(32).raw(new Uint8Array(4)).bytes(), /tensor "w" n_dims: expected 1\.\.4, found 5/, "n_dims");
});

test("unknown tensor type", () => {
  for (const type of [4, 5, 99, 0xffffffff]) {
    const b = header(1, 0);
    tensorInfo(b, "w", [32], type, 0);
    expectGGUFError(b.pad(32).raw(new Uint8Array(128)).bytes(), new RegExp(`tensor "w" type: unknown tensor type id ${type}`), `type ${type}`);
  }
});

test("tensor offset past the end of the file", () => {
  const b = header(1, 0);
  tensorInfo(b, "w", [8], GGMLType.F32, 1024);
  expectGGUFError(b.pad(32).raw(new Uint8Array(32)).bytes(), /tensor "w" offset: data .* lies past the end of the file/, "offset");
  const huge = header(1, 0);
  tensorInfo(huge, "w", [8], GGMLType.F32, 2n ** 64n - 32n);
  expectGGUFError(huge.pad(32).raw(new Uint8Array(32)).bytes(), /tensor "w" offset/, "offset near 2^64");
});

test("dims whose product overflows", () => {
  const b = header(1, 0);
  tensorInfo(b, "w", [2n ** 32n, 2n ** 32n, 2n ** 32n], GGMLType.F32, 0);
  expectGGUFError(b.pad(32).bytes(), /tensor "w" dims: element count overflows/, "dims product");
  const z = header(1, 0);
  tensorInfo(z, "w", [0, 4], GGMLType.F32, 0);
  expectGGUFError(z.pad(32).bytes(), /tensor "w" dims\[0\]: invalid dimension 0/, "zero dim");
  const big = header(1, 0);
  tensorInfo(big, "w", [2n ** 63n], GGMLType.I8, 0);
  expectGGUFError(big.pad(32).bytes(), /tensor "w" dims\[0\]: invalid dimension/, "dim 2^63");
});

test("an alignment that is not a power of two", () => {
  // 2^31 is a power of two, but past the 1 MiB this reader takes (the data would start 2 GiB in)
  for (const a of [0, 3, 48, 2 ** 31]) {
    const b = header(0, 1);
    kvU32(b, "general.alignment", a);
    expectGGUFError(b.bytes(), new RegExp(`general.alignment: expected a power of two, at most 1048576, found ${a}$`), `alignment ${a}`);
  }
  // stored as a float, 0.5 passes a bit test (0 & -0.5 === 0) but is no alignment (it used
  // to reach BigInt(0.5) and throw a RangeError)
  const f = header(1, 1).str("general.alignment").u32(GGUFValueType.FLOAT32).f32(0.5);
  tensorInfo(f, "w", [1], GGMLType.F32, 0);
  expectGGUFError(f.raw(new Uint8Array(8)).bytes(), /general.alignment: expected a power of two, at most 1048576, found 0.5/, "alignment 0.5");
});

test("arrays of arrays are bounded in all, not only by the file's size", () => {
  // 12 bytes of file each, ~200 bytes of memory each once read: 4M empty ones (46 MB) took 1.5 GB
  const nested = (key: string, n: number, b = header(0, 1)) => {
    b.str(key).u32(GGUFValueType.ARRAY).u32(GGUFValueType.ARRAY).u64(n);
    for (let i = 0; i < n; i++) b.u32(GGUFValueType.UINT8).u64(0);
    return b;
  };
  const ok = write(nested("x.a", 1 << 16).bytes());
  assert.equal((readGGUFHeader(ok).metadata.get("x.a")!.value as unknown[]).length, 1 << 16);
  expectGGUFError(nested("x.a", (1 << 16) + 1).bytes(), /metadata "x.a": an array of 65537 arrays: more than the 65536 nested arrays a file may hold/, "one array");
  // the bound is for the file: two keys of 40,000 each pass it together
  expectGGUFError(nested("x.b", 40_000, nested("x.a", 40_000, header(0, 2))).bytes(), /metadata "x.b": an array of 40000 arrays/, "two arrays");
});

test("arrays read into JS lists (BOOL, UINT64, INT64) are bounded, not only by the file's size", () => {
  // 1 or 8 bytes of file each, 8 to 24 bytes of memory: 48 MB of bools took 1.1 GB and 8.6 s
  const list = (type: GGUFValueType, n: number, size: number) => {
    const b = header(0, 1).str("x.list").u32(GGUFValueType.ARRAY).u32(type).u64(n);
    return b.raw(new Uint8Array(n * size).fill(1)).bytes();
  };
  assert.equal((readGGUFHeader(write(list(GGUFValueType.BOOL, 1 << 20, 1))).metadata.get("x.list")!.value as boolean[]).length, 1 << 20);
  expectGGUFError(list(GGUFValueType.BOOL, (1 << 20) + 1, 1), /metadata "x.list": an array of 1048577 BOOL values: more than the 1048576 such an array may hold/, "bools");
  expectGGUFError(list(GGUFValueType.UINT64, (1 << 20) + 1, 8), /metadata "x.list": an array of 1048577 UINT64 values/, "u64s");
  // typed arrays (as many bytes of memory as of file) are bounded by the file alone
  assert.equal((readGGUFHeader(write(list(GGUFValueType.UINT8, 3 << 20, 1))).metadata.get("x.list")!.value as Uint8Array).length, 3 << 20);
});

test("a tensor name of 64 bytes or more is refused, as llama.cpp refuses it (GGML_MAX_NAME)", () => {
  const named = (name: string) => { const b = header(1, 0); tensorInfo(b, name, [8], GGMLType.F32, 0); return b.pad(32).raw(new Uint8Array(32)).bytes(); };
  assert.equal(readGGUFHeader(write(named("n".repeat(63)))).tensors[0]!.name, "n".repeat(63));
  expectGGUFError(named("n".repeat(64)), /tensor #0 name: 64 bytes "n{64}\.\.\.": a tensor name may have at most 63/, "64 bytes");
  expectGGUFError(named("é".repeat(32)), /tensor #0 name: 64 bytes/, "32 two-byte characters");
});

test("a file cut short after its header was read: the tensor read names the file", () => {
  const p = write(validFile());
  const source = new GGUFTensorSource(readGGUFHeader(p));
  try {
    truncateSync(p, statSync(p).size - 8);
    assert.throws(() => source.read("y", new Uint8Array(12), 0), (e: Error) => e instanceof GGUFError && e.message.startsWith(`${p}: tensor "y": unexpected end of file at offset `));
  } finally {
    source.close();
  }
});

test("duplicate metadata keys and tensor names", () => {
  const k = header(0, 2);
  kvU32(k, "llama.block_count", 1);
  kvU32(k, "llama.block_count", 2);
  expectGGUFError(k.bytes(), /metadata "llama.block_count": duplicate key/, "duplicate key");
  const t = header(2, 0);
  tensorInfo(t, "w", [8], GGMLType.F32, 0);
  tensorInfo(t, "w", [8], GGMLType.F32, 32);
  expectGGUFError(t.pad(32).raw(new Uint8Array(64)).bytes(), /tensor "w": duplicate tensor name/, "duplicate tensor");
});

test("a tensor offset that is not a multiple of the alignment", () => {
  const b = header(1, 0);
  tensorInfo(b, "w", [8], GGMLType.F32, 4);
  expectGGUFError(b.pad(32).raw(new Uint8Array(64)).bytes(), /tensor "w" offset: 4 is not a multiple of the alignment 32/, "misaligned");
});

test("overlapping tensors", () => {
  const b = header(2, 0);
  tensorInfo(b, "a", [16], GGMLType.F32, 0);
  tensorInfo(b, "b", [8], GGMLType.F32, 32);
  expectGGUFError(b.pad(32).raw(new Uint8Array(96)).bytes(), /tensor "b" offset: overlaps tensor "a"/, "overlap");
});

test("fuzz: 300 seeded mutations of a valid file either parse or throw GGUFError", () => {
  const base = validFile();
  // the header (metadata + tensor infos) is where mutations matter; the data section is 44 bytes
  const headerEnd = base.length - 44;
  const rng = new Rng(20240601);
  let parsed = 0;
  for (let i = 0; i < 300; i++) {
    const b = Buffer.from(base);
    const edits = 1 + (rng.u32() % 4);
    for (let e = 0; e < edits; e++) {
      const pos = rng.uniform() < 0.9 ? rng.u32() % headerEnd : rng.u32() % b.length;
      // mostly single-byte noise; sometimes an extreme byte so lengths and counts blow up
      const r = rng.u32() % 4;
      b[pos] = r === 0 ? 0xff : r === 1 ? 0 : rng.u32() & 0xff;
    }
    const p = write(b);
    try {
      readGGUFHeader(p);
      parsed++;
    } catch (err) {
      assert.ok(err instanceof GGUFError, `mutation #${i}: expected GGUFError, got ${(err as Error).stack}`);
    }
  }
  // some mutations only touch string contents or data and must still parse
  assert.ok(parsed > 0, "no mutation parsed");
});
