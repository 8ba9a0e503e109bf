import { writeOutputFile } from "./output-file.js";
import { isMemoryOnlyType, rowByteLength, typeName, type GGMLType } from "../tensor/index.js";
import { GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUFValueType, type GGUFEntry, type GGUFValue } from "./gguf-types.js";

/**
 * GGUF v3 writer. The header (metadata + tensor infos) is built in memory; tensor data is
 * streamed one tensor at a time, so a lazy `data` producer lets a multi-GB model be written
 * while only one tensor is ever held.
 */

export interface GGUFTensorSpec {
  readonly name: string;
  readonly type: GGMLType;
  /** ggml order: dims[0] is the contiguous row length */
  readonly dims: readonly number[];
  /** raw block bytes, or a producer called once when the tensor is written */
  readonly data: Uint8Array | (() => Uint8Array);
}

/**
 * A nested array whose inner arrays carry their own declared types. A plain `GGUFEntry` with
 * `itemType: ARRAY` (as `readGGUFHeader` returns it) works too; its inner types are then
 * inferred from the JS values (see `inferEntry`).
 */
export interface GGUFNestedArrayEntry {
  readonly type: GGUFValueType.ARRAY;
  readonly itemType: GGUFValueType.ARRAY;
  readonly value: readonly GGUFWriteEntry[];
}

export type GGUFWriteEntry = GGUFEntry | GGUFNestedArrayEntry;

export interface GGUFWriteSpec {
  readonly metadata: Iterable<readonly [string, GGUFWriteEntry]>;
  readonly tensors: readonly GGUFTensorSpec[];
  /**
   * Data alignment. Defaults to `general.alignment` from the metadata, else 32. When it is not
   * 32 and the metadata lacks `general.alignment`, the key is added (readers would assume 32).
   */
  readonly alignment?: number;
}

export class GGUFWriteError extends Error {
  constructor(path: string, field: string, message: string) {
    super(`${path}: ${field}: ${message}`);
    this.name = "GGUFWriteError";
  }
}

/** Builders for metadata entries with the declared GGUF type spelled out. */
export const ggufEntry = {
  u8: (v: number): GGUFEntry => ({ type: GGUFValueType.UINT8, value: v }),
  i8: (v: number): GGUFEntry => ({ type: GGUFValueType.INT8, value: v }),
  u16: (v: number): GGUFEntry => ({ type: GGUFValueType.UINT16, value: v }),
  i16: (v: number): GGUFEntry => ({ type: GGUFValueType.INT16, value: v }),
  u32: (v: number): GGUFEntry => ({ type: GGUFValueType.UINT32, value: v }),
  i32: (v: number): GGUFEntry => ({ type: GGUFValueType.INT32, value: v }),
  u64: (v: number | bigint): GGUFEntry => ({ type: GGUFValueType.UINT64, value: v }),
  i64: (v: number | bigint): GGUFEntry => ({ type: GGUFValueType.INT64, value: v }),
  f32: (v: number): GGUFEntry => ({ type: GGUFValueType.FLOAT32, value: v }),
  f64: (v: number): GGUFEntry => ({ type: GGUFValueType.FLOAT64, value: v }),
  bool: (v: boolean): GGUFEntry => ({ type: GGUFValueType.BOOL, value: v }),
  string: (v: string): GGUFEntry => ({ type: GGUFValueType.STRING, value: v }),
  strings: (v: readonly string[]): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType: GGUFValueType.STRING, value: [...v] }),
  bools: (v: readonly boolean[]): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType: GGUFValueType.BOOL, value: [...v] }),
  u8s: (v: ArrayLike<number>): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType: GGUFValueType.UINT8, value: Uint8Array.from(v) }),
  i8s: (v: ArrayLike<number>): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType: GGUFValueType.INT8, value: Int8Array.from(v) }),
  u16s: (v: ArrayLike<number>): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType: GGUFValueType.UINT16, value: Uint16Array.from(v) }),
  i16s: (v: ArrayLike<number>): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType: GGUFValueType.INT16, value: Int16Array.from(v) }),
  u32s: (v: ArrayLike<number>): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType: GGUFValueType.UINT32, value: Uint32Array.from(v) }),
  i32s: (v: ArrayLike<number>): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType: GGUFValueType.INT32, value: Int32Array.from(v) }),
  u64s: (v: readonly (number | bigint)[]): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType: GGUFValueType.UINT64, value: [...v] }),
  i64s: (v: readonly (number | bigint)[]): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType: GGUFValueType.INT64, value: [...v] }),
  f32s: (v: ArrayLike<number>): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType: GGUFValueType.FLOAT32, value: Float32Array.from(v) }),
  f64s: (v: ArrayLike<number>): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType: GGUFValueType.FLOAT64, value: Float64Array.from(v) }),
  /** an array of arrays, each inner entry keeping its own declared type */
  arrays: (v: readonly GGUFWriteEntry[]): GGUFNestedArrayEntry => {
    for (const e of v) if (e.type !== GGUFValueType.ARRAY) throw new Error(`ggufEntry.arrays: every item must be an array entry, found value type ${GGUFValueType[e.type]}`);
    return { type: GGUFValueType.ARRAY, itemType: GGUFValueType.ARRAY, value: [...v] };
  },
};

/**
 * Growable little-endian byte buffer for the header. `reserve` may replace `buf`, so every
 * writer calls it before touching `this.buf`.
 */
class ByteSink {
  private buf = Buffer.alloc(1 << 16);
  length = 0;
  private reserve(n: number): number {
    if (this.length + n > this.buf.length) {
      const next = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
      this.buf.copy(next, 0, 0, this.length);
      this.buf = next;
    }
    const at = this.length;
    this.length += n;
    return at;
  }
  u8(v: number) { const at = this.reserve(1); this.buf.writeUInt8(v, at); }
  i8(v: number) { const at = this.reserve(1); this.buf.writeInt8(v, at); }
  u16(v: number) { const at = this.reserve(2); this.buf.writeUInt16LE(v, at); }
  i16(v: number) { const at = this.reserve(2); this.buf.writeInt16LE(v, at); }
  u32(v: number) { const at = this.reserve(4); this.buf.writeUInt32LE(v, at); }
  i32(v: number) { const at = this.reserve(4); this.buf.writeInt32LE(v, at); }
  f32(v: number) { const at = this.reserve(4); this.buf.writeFloatLE(v, at); }
  f64(v: number) { const at = this.reserve(8); this.buf.writeDoubleLE(v, at); }
  u64(v: number | bigint) { const at = this.reserve(8); this.buf.writeBigUInt64LE(BigInt(v), at); }
  i64(v: number | bigint) { const at = this.reserve(8); this.buf.writeBigInt64LE(BigInt(v), at); }
  bytes(b: Uint8Array) { const at = this.reserve(b.length); this.buf.set(b, at); }
  string(s: string) {
    const b = Buffer.from(s, "utf8");
    this.u64(b.length);
    this.bytes(b);
  }
  zeros(n: number) { const at = this.reserve(n); this.buf.fill(0, at, this.length); }
  result(): Buffer { return this.buf.subarray(0, this.length); }
}

const INT_RANGE: Partial<Record<GGUFValueType, [number, number]>> = {
  [GGUFValueType.UINT8]: [0, 0xff],
  [GGUFValueType.INT8]: [-0x80, 0x7f],
  [GGUFValueType.UINT16]: [0, 0xffff],
  [GGUFValueType.INT16]: [-0x8000, 0x7fff],
  [GGUFValueType.UINT32]: [0, 0xffffffff],
  [GGUFValueType.INT32]: [-0x80000000, 0x7fffffff],
};

/**
 * Declared type of an inner array of a nested array read back by `readGGUFHeader` (which keeps
 * only the outer item type). Typed arrays map one to one; a plain array of numbers/bigints is
 * what the reader makes of 64-bit integers, written as INT64 if any value is negative, else
 * UINT64 (the one ambiguity: use `ggufEntry.arrays` to keep the exact type).
 */
function inferEntry(v: GGUFValue | GGUFWriteEntry, field: string, path: string): GGUFWriteEntry {
  if (typeof v === "object" && v !== null && !Array.isArray(v) && !ArrayBuffer.isView(v) && "type" in v) return v as GGUFWriteEntry;
  const arr = (itemType: GGUFValueType): GGUFEntry => ({ type: GGUFValueType.ARRAY, itemType, value: v as GGUFValue });
  if (v instanceof Uint8Array) return arr(GGUFValueType.UINT8);
  if (v instanceof Int8Array) return arr(GGUFValueType.INT8);
  if (v instanceof Uint16Array) return arr(GGUFValueType.UINT16);
  if (v instanceof Int16Array) return arr(GGUFValueType.INT16);
  if (v instanceof Uint32Array) return arr(GGUFValueType.UINT32);
  if (v instanceof Int32Array) return arr(GGUFValueType.INT32);
  if (v instanceof Float32Array) return arr(GGUFValueType.FLOAT32);
  if (v instanceof Float64Array) return arr(GGUFValueType.FLOAT64);
  if (Array.isArray(v)) {
    const items = v as unknown[];
    if (items.length === 0) return arr(GGUFValueType.UINT8);
    const first = items[0];
    if (typeof first === "string") return arr(GGUFValueType.STRING);
    if (typeof first === "boolean") return arr(GGUFValueType.BOOL);
    if (typeof first === "number" || typeof first === "bigint") {
      return arr(items.some((x) => (x as number | bigint) < 0) ? GGUFValueType.INT64 : GGUFValueType.UINT64);
    }
    return arr(GGUFValueType.ARRAY);
  }
  throw new GGUFWriteError(path, field, `expected an array inside a nested array, found ${typeof v}`);
}

function writeScalar(s: ByteSink, t: GGUFValueType, v: unknown, field: string, path: string): void {
  const bad = (want: string) => new GGUFWriteError(path, field, `expected ${want} for value type ${GGUFValueType[t]}, found ${typeof v} ${String(v).slice(0, 40)}`);
  const range = INT_RANGE[t];
  if (range) {
    if (typeof v !== "number" || !Number.isInteger(v) || v < range[0] || v > range[1]) throw bad(`an integer in [${range[0]}, ${range[1]}]`);
  }
  switch (t) {
    case GGUFValueType.UINT8: return s.u8(v as number);
    case GGUFValueType.INT8: return s.i8(v as number);
    case GGUFValueType.UINT16: return s.u16(v as number);
    case GGUFValueType.INT16: return s.i16(v as number);
    case GGUFValueType.UINT32: return s.u32(v as number);
    case GGUFValueType.INT32: return s.i32(v as number);
    case GGUFValueType.FLOAT32:
    case GGUFValueType.FLOAT64:
      if (typeof v !== "number") throw bad("a number");
      return t === GGUFValueType.FLOAT32 ? s.f32(v) : s.f64(v);
    case GGUFValueType.UINT64:
    case GGUFValueType.INT64: {
      if (!(typeof v === "bigint" || (typeof v === "number" && Number.isSafeInteger(v)))) throw bad("a safe integer or bigint");
      const b = BigInt(v);
      const ok = t === GGUFValueType.UINT64 ? b >= 0n && b < 1n << 64n : b >= -(1n << 63n) && b < 1n << 63n;
      if (!ok) throw bad(`a ${t === GGUFValueType.UINT64 ? "u64" : "i64"} in range`);
      return t === GGUFValueType.UINT64 ? s.u64(b) : s.i64(b);
    }
    case GGUFValueType.BOOL:
      if (typeof v !== "boolean") throw bad("a boolean");
      return s.u8(v ? 1 : 0);
    case GGUFValueType.STRING:
      if (typeof v !== "string") throw bad("a string");
      return s.string(v);
    default:
      throw new GGUFWriteError(path, field, `unknown metadata value type ${String(t)}`);
  }
}

function writeValue(s: ByteSink, e: GGUFWriteEntry, field: string, path: string): void {
  if (e.type !== GGUFValueType.ARRAY) return writeScalar(s, e.type, e.value, field, path);
  const itemType = e.itemType;
  if (itemType === undefined) throw new GGUFWriteError(path, field, "array entry without itemType");
  const v = e.value as unknown;
  if (!Array.isArray(v) && !(ArrayBuffer.isView(v) && !(v instanceof DataView))) {
    throw new GGUFWriteError(path, field, `expected an array value for an array entry, found ${typeof v}`);
  }
  const items = v as ArrayLike<unknown>;
  s.u32(itemType);
  s.u64(items.length);
  for (let i = 0; i < items.length; i++) {
    if (itemType === GGUFValueType.ARRAY) {
      writeValue(s, inferEntry(items[i] as GGUFValue, `${field}[${i}]`, path), `${field}[${i}]`, path);
    } else {
      writeScalar(s, itemType, items[i], `${field}[${i}]`, path);
    }
  }
}

function isPowerOfTwo(a: number): boolean {
  return Number.isInteger(a) && a > 0 && (a & (a - 1)) === 0;
}

/**
 * Writes `spec` as a GGUF v3 file at `path`, replacing it only once the new file is complete
 * (output-file.ts); `inputs` are files the tensors are read from, which `path` must not be.
 * Resolves with the bytes written (the file's size; also where `path` is a device such as
 * /dev/null, whose size says nothing).
 */
export async function writeGGUF(path: string, spec: GGUFWriteSpec, inputs: readonly string[] = []): Promise<number> {
  const metadata = new Map<string, GGUFWriteEntry>();
  for (const [k, e] of spec.metadata) {
    if (metadata.has(k)) throw new GGUFWriteError(path, `metadata "${k}"`, "duplicate key");
    metadata.set(k, e);
  }
  const alignEntry = metadata.get("general.alignment");
  const declared = alignEntry ? alignEntry.value : undefined;
  if (alignEntry && (alignEntry.type !== GGUFValueType.UINT32 || !isPowerOfTwo(declared as number))) {
    throw new GGUFWriteError(path, "general.alignment", `expected a UINT32 power of two, found ${String(declared)}`);
  }
  const alignment = spec.alignment ?? (declared as number | undefined) ?? GGUF_DEFAULT_ALIGNMENT;
  if (!isPowerOfTwo(alignment)) throw new GGUFWriteError(path, "alignment", `expected a power of two, found ${alignment}`);
  if (declared !== undefined && declared !== alignment) {
    throw new GGUFWriteError(path, "alignment", `option ${alignment} contradicts general.alignment ${String(declared)}`);
  }
  if (declared === undefined && alignment !== GGUF_DEFAULT_ALIGNMENT) metadata.set("general.alignment", ggufEntry.u32(alignment));

  const pad = (n: number) => (alignment - (n % alignment)) % alignment;
  const names = new Set<string>();
  const sizes: number[] = [];
  const offsets: number[] = [];
  let dataSize = 0;
  for (const t of spec.tensors) {
    const field = `tensor "${t.name}"`;
    if (names.has(t.name)) throw new GGUFWriteError(path, field, "duplicate tensor name");
    names.add(t.name);
    if (t.dims.length < 1 || t.dims.length > 4) throw new GGUFWriteError(path, `${field} dims`, `expected 1..4 dimensions, found ${t.dims.length}`);
    let rows = 1;
    for (const d of t.dims.slice(1)) rows *= d;
    for (const d of t.dims) if (!Number.isSafeInteger(d) || d < 1) throw new GGUFWriteError(path, `${field} dims`, `invalid dimension ${d}`);
    if (isMemoryOnlyType(t.type)) throw new GGUFWriteError(path, `${field} type`, `${typeName(t.type)} is an in-memory format of tsllm, not a GGUF type; quantize to a GGUF type (q4_k, q8_0, ...) to write a file`);
    let size: number;
    try {
      size = rowByteLength(t.type, t.dims[0]!) * rows;
    } catch (e) {
      throw new GGUFWriteError(path, `${field} dims[0]`, (e as Error).message);
    }
    if (!Number.isSafeInteger(size)) throw new GGUFWriteError(path, `${field} size`, "byte size overflows");
    if (t.data instanceof Uint8Array && t.data.length !== size) {
      throw new GGUFWriteError(path, `${field} data`, `expected ${size} bytes for ${typeName(t.type)} ${t.dims.join("x")}, found ${t.data.length}`);
    }
    offsets.push(dataSize);
    sizes.push(size);
    dataSize += size + pad(size);
  }

  const s = new ByteSink();
  s.u32(GGUF_MAGIC);
  s.u32(3);
  s.u64(spec.tensors.length);
  s.u64(metadata.size);
  for (const [k, e] of metadata) {
    s.string(k);
    s.u32(e.type);
    writeValue(s, e, `metadata "${k}"`, path);
  }
  spec.tensors.forEach((t, i) => {
    s.string(t.name);
    s.u32(t.dims.length);
    for (const d of t.dims) s.u64(d);
    s.u32(t.type);
    s.u64(offsets[i]!);
  });
  // gguf-py leaves a tensor-less (vocab-only) file unpadded; doing the same keeps such files
  // byte-identical when rewritten
  if (spec.tensors.length > 0) s.zeros(pad(s.length));

  let written = 0;
  await writeOutputFile(path, async (fh) => {
    written += await writeAll(fh, s.result());
    const zeros = new Uint8Array(alignment);
    for (let i = 0; i < spec.tensors.length; i++) {
      const t = spec.tensors[i]!;
      const bytes = typeof t.data === "function" ? t.data() : t.data;
      if (bytes.length !== sizes[i]) {
        throw new GGUFWriteError(path, `tensor "${t.name}" data`, `expected ${sizes[i]} bytes for ${typeName(t.type)} ${t.dims.join("x")}, the producer returned ${bytes.length}`);
      }
      written += await writeAll(fh, bytes);
      const p = pad(bytes.length);
      if (p > 0) written += await writeAll(fh, zeros.subarray(0, p));
    }
  }, inputs);
  return written;
}

/** writes all of `b`, resolving with its length */
async function writeAll(fh: import("node:fs/promises").FileHandle, b: Uint8Array): Promise<number> {
  let off = 0;
  while (off < b.length) {
    const { bytesWritten } = await fh.write(b, off, Math.min(b.length - off, 1 << 30));
    off += bytesWritten;
  }
  return off;
}
