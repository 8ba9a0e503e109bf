import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { readSafetensorsHeader, SafetensorsError, SafetensorsModel } from "../src/formats/safetensors.js";
import { writeSafetensors, writeSafetensorsSharded } from "../src/formats/safetensors-writer.js";

/*
 * Files are built byte by byte from the format description (8-byte LE header length, UTF-8
 * JSON, data) so a writer bug cannot hide a reader bug. Every validation rule of the
 * reference implementation gets a file that breaks exactly that rule.
 */
const dir = mkdtempSync(join(tmpdir(), "tsllm-st-"));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

function file(header: string | Uint8Array, data: Uint8Array = new Uint8Array(0), lengthOverride?: bigint): string {
  const h = typeof header === "string" ? Buffer.from(header, "utf8") : Buffer.from(header);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(lengthOverride ?? BigInt(h.length));
  const p = join(dir, `f${n++}.safetensors`);
  writeFileSync(p, Buffer.concat([len, h, data]));
  return p;
}

function rejects(p: string, pattern: RegExp, what: string): void {
  assert.throws(() => readSafetensorsHeader(p), (e: unknown) => {
    assert.ok(e instanceof SafetensorsError, `${what}: expected a SafetensorsError, got ${String(e)}`);
    assert.ok(e.message.startsWith(`${p}: `), `${what}: message must start with the file: ${e.message}`);
    assert.match(e.message, pattern, what);
    return true;
  });
}

test("a hand-built file: dtypes, shapes, offsets and values read back", () => {
  // F16 1.0 = 0x3C00, BF16 -2.0 = 0xC000, F32 0.5 = 0x3F000000, I8 -3, U8 200
  const data = Buffer.from([0x00, 0x3c, 0x00, 0x3c, 0x00, 0xc0, 0x00, 0x00, 0x00, 0x3f, 0xfd, 200]);
  const header = JSON.stringify({
    __metadata__: { format: "pt" },
    a: { dtype: "F16", shape: [2], data_offsets: [0, 4] },
    b: { dtype: "BF16", shape: [1, 1], data_offsets: [4, 6] },
    c: { dtype: "F32", shape: [], data_offsets: [6, 10] },
    d: { dtype: "I8", shape: [1], data_offsets: [10, 11] },
    e: { dtype: "U8", shape: [1], data_offsets: [11, 12] },
  }) + "   "; // trailing spaces are allowed padding
  const p = file(header, data);
  const h = readSafetensorsHeader(p);
  assert.deepEqual(h.metadata, { format: "pt" });
  assert.deepEqual(h.tensors.map((t) => [t.name, t.dtype, t.shape, t.byteLength]), [
    ["a", "F16", [2], 4], ["b", "BF16", [1, 1], 2], ["c", "F32", [], 4], ["d", "I8", [1], 1], ["e", "U8", [1], 1],
  ]);
  const m = SafetensorsModel.open(p);
  try {
    const b = new Uint8Array(2);
    m.read("b", b);
    assert.deepEqual([...b], [0x00, 0xc0]);
    const c = new Uint8Array(4);
    m.read("c", c);
    assert.equal(new DataView(c.buffer).getFloat32(0, true), 0.5);
    const a1 = new Uint8Array(2);
    m.read("a", a1, 2); // the second element only
    assert.deepEqual([...a1], [0x00, 0x3c]);
    const d = new Int8Array(1);
    m.read("d", new Uint8Array(d.buffer));
    assert.equal(d[0], -3);
    assert.throws(() => m.read("a", new Uint8Array(4), 2), /outside its 4 bytes/);
    assert.throws(() => m.read("zz", new Uint8Array(1)), /tensor "zz": not in this model/);
  } finally {
    m.close();
  }
});

test("header length: over 100 MB, past the end of the file, or a file shorter than 8 bytes", () => {
  rejects(file("{}", new Uint8Array(0), 100_000_001n), /header length: 100000001 bytes exceeds the limit of 100000000/, "huge");
  rejects(file("{}", new Uint8Array(0), 1n << 62n), /exceeds the limit/, "2^62");
  rejects(file("{}", new Uint8Array(0), 50n), /header length: 50 bytes, but the file has only 2 bytes/, "past the end");
  const tiny = join(dir, "tiny.safetensors");
  writeFileSync(tiny, Buffer.from([1, 2, 3]));
  rejects(tiny, /fewer than the 8-byte header length/, "3-byte file");
});

test("header: invalid UTF-8, not an object, invalid JSON, duplicate keys, non-string metadata", () => {
  rejects(file(Buffer.from([0x7b, 0xff, 0xfe, 0x7d])), /header: is not valid UTF-8/, "utf-8");
  rejects(file("[1,2]"), /expected a JSON object starting with '\{'/, "array");
  rejects(file(' {"a":1}'), /starting with '\{'/, "leading space");
  rejects(file('{"a": {"dtype": "F32",'), /invalid JSON/, "truncated JSON");
  const t = '{"dtype":"U8","shape":[1],"data_offsets":[0,1]}';
  rejects(file(`{"x":${t},"x":${t}}`, new Uint8Array(1)), /invalid JSON: duplicate key "x"/, "duplicate tensor");
  rejects(file('{"x":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}', new Uint8Array(1)), /duplicate key "dtype"/, "duplicate field");
  rejects(file('{"__metadata__":{"k":1}}'), /__metadata__.k: expected a string/, "metadata value");
  rejects(file('{"x":[1]}'), /tensor "x": expected an object/, "tensor not an object");
  rejects(file('{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}}', new Uint8Array(1)), /tensor "x": unknown field "extra"/, "extra field");
  rejects(file("{" + "[".repeat(0) + '"a":' + "[".repeat(1000) + "]".repeat(1000) + "}"), /invalid JSON: nesting deeper/, "deep nesting");
});

test("tensor info: unknown dtype, bad shape, bad offsets", () => {
  rejects(file('{"x":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}', new Uint8Array(16)), /tensor "x" dtype: unknown dtype "F128"/, "dtype");
  rejects(file('{"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', new Uint8Array(4)), /tensor "x" shape: expected an array of non-negative integers/, "negative dim");
  rejects(file('{"x":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}', new Uint8Array(4)), /tensor "x" shape/, "fractional dim");
  rejects(file('{"x":{"dtype":"F32","shape":[1],"data_offsets":[0]}}', new Uint8Array(4)), /tensor "x" data_offsets: expected \[begin, end\]/, "one offset");
});

test("offsets: must start at 0, be contiguous, not overlap; byte length = shape x dtype size", () => {
  const T = (name: string, b: number, e: number, shape = [(e - b) / 4]) => `"${name}":{"dtype":"F32","shape":[${shape.join(",")}],"data_offsets":[${b},${e}]}`;
  rejects(file(`{${T("x", 4, 8)}}`, new Uint8Array(8)), /tensor "x" data_offsets: begins at 4, leaving a gap/, "not at 0");
  rejects(file(`{${T("x", 0, 4)},${T("y", 8, 12)}}`, new Uint8Array(12)), /tensor "y" data_offsets: begins at 8, leaving a gap after the previous tensor, which ends at 4/, "gap");
  rejects(file(`{${T("x", 0, 8)},${T("y", 4, 12)}}`, new Uint8Array(12)), /tensor "y" data_offsets: begins at 4, overlapping/, "overlap");
  rejects(file(`{"x":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, new Uint8Array(4)), /tensor "x" data_offsets/, "end before begin");
  rejects(file(`{${T("x", 0, 8, [3])}}`, new Uint8Array(8)), /tensor "x" data_offsets: \[0, 8\] holds 8 bytes, but shape \[3\] of F32 needs 12/, "size mismatch");
  // 2^40 x 2^40 elements: caught by the size check with exact (bigint) arithmetic, nothing allocated
  rejects(file(`{${T("x", 0, 8, [2 ** 40, 2 ** 40])}}`, new Uint8Array(8)), /needs 4835703278458516698824704/, "overflowing shape");
});

test("data: trailing bytes and truncation are rejected", () => {
  const h = '{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}';
  rejects(file(h, new Uint8Array(9)), /data: 1 trailing bytes after the last tensor/, "trailing");
  rejects(file(h, new Uint8Array(5)), /data: the tensors need 8 data bytes but the file has 5/, "truncated");
});

test("writer round trip (single file and shards + index); index errors name the shard and tensor", async () => {
  const vals = Float32Array.from({ length: 12 }, (_, i) => i - 5.5);
  const tensors = [
    { name: "a.weight", dtype: "F32" as const, shape: [3, 4], data: new Uint8Array(vals.buffer) },
    { name: "b.bias", dtype: "U8" as const, shape: [5], data: () => Uint8Array.from([1, 2, 3, 4, 5]) },
    { name: "c", dtype: "I8" as const, shape: [2, 2], data: Uint8Array.from([255, 1, 2, 3]) },
  ];
  const single = join(dir, "rt.safetensors");
  await writeSafetensors(single, tensors, { format: "pt" });
  const h = readSafetensorsHeader(single);
  assert.equal(h.dataOffset % 8, 0, "data section is 8-byte aligned");
  const folder = join(dir, "sharded");
  mkdirSync(folder);
  const shards = await writeSafetensorsSharded(folder, tensors, 40);
  assert.equal(shards.length, 2);
  for (const path of [single, folder]) {
    const m = SafetensorsModel.open(path);
    try {
      const out = new Float32Array(12);
      m.read("a.weight", new Uint8Array(out.buffer));
      assert.deepEqual(out, vals);
      const b = new Uint8Array(5);
      m.read("b.bias", b);
      assert.deepEqual([...b], [1, 2, 3, 4, 5]);
      assert.deepEqual(m.info("c")?.shape, [2, 2]);
    } finally {
      m.close();
    }
  }
  await assert.rejects(writeSafetensors(join(dir, "bad.safetensors"), [{ name: "x", dtype: "F32", shape: [2], data: new Uint8Array(4) }]), /tensor "x" has 4 bytes, shape \[2\] of F32 needs 8/);

  const idx = join(folder, "model.safetensors.index.json");
  writeFileSync(idx, JSON.stringify({ weight_map: { "a.weight": shards[0], "b.bias": shards[1], c: "missing.safetensors" } }));
  assert.throws(() => SafetensorsModel.open(folder), /weight_map: shard missing.safetensors \(holding c\) does not exist/);
  writeFileSync(idx, JSON.stringify({ weight_map: { "a.weight": shards[0], "b.bias": shards[1], c: shards[1], d: shards[1] } }));
  assert.throws(() => SafetensorsModel.open(folder), /tensor "d": listed in model.safetensors.index.json but missing from the shard/);
  writeFileSync(idx, JSON.stringify({ weight_map: { "a.weight": shards[0], c: shards[1] } }));
  assert.throws(() => SafetensorsModel.open(folder), /tensor "b.bias": is not listed for this shard/);
  writeFileSync(idx, JSON.stringify({ weight_map: { "a.weight": "../x.safetensors" } }));
  assert.throws(() => SafetensorsModel.open(folder), /expected a shard file name in the same folder/);
  writeFileSync(idx, '{"weight_map": {"a.weight": "x", "a.weight": "y"}}');
  assert.throws(() => SafetensorsModel.open(folder), /invalid JSON: duplicate key "a.weight"/);
});

test("a header or an index with absurdly many entries is refused while it is parsed, not read into memory", () => {
  // 2M __metadata__ keys (19 MB) took 816 MB and 29 s; each entry is bounded, not only the header's bytes
  const keys = (n: number) => Array.from({ length: n }, (_, i) => `"k${i}":""`).join(",");
  rejects(file(`{"__metadata__":{${keys(131_073)}}}`), /header: an object of more than 131072 members: more tensors or __metadata__ keys than the 131072 a file may hold/, "metadata keys");
  const ok = readSafetensorsHeader(file(`{"__metadata__":{${keys(131_072)}}}`));
  assert.equal(Object.keys(ok.metadata).length, 131_072);
  const folder = join(dir, "index-large");
  mkdirSync(folder);
  const idx = join(folder, "model.safetensors.index.json");
  writeFileSync(idx, `{"weight_map":{${Array.from({ length: (1 << 19) + 1 }, (_, i) => `"t${i}":"a.safetensors"`).join(",")}}}`);
  assert.throws(() => SafetensorsModel.open(folder), (e: Error) => e.message === `${idx}: index: an object of more than 524288 members: more tensors than the 524288 an index may list`);
});
