import { fileFromDescriptor, openFile, type RandomAccessFile } from "../platform/host.js";
import { isKnownType, rowByteLength, typeName, type GGMLType } from "../tensor/index.js";
import { FileFieldError, readFailure } from "./errors.js";
import {
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GGUFValueType,
  type GGUFEntry,
  type GGUFHeader,
  type GGUFTensorInfo,
  type GGUFValue,
} from "./gguf-types.js";

/** Limits that keep a hostile header from causing giant allocations or endless loops. */
const MAX_STRING_BYTES = 64 * 1024 * 1024;
const MAX_DIMS = 4;
/**
 * Counts far past any model's (tens of keys; ~1,100 tensors in the largest MoE files, experts
 * merged) yet small enough that the header's objects stay small: 1M tensors of one byte each (a
 * 29 MB file) took 600 MB and 5.5 s to refuse, 1M one-byte keys 500 MB and 4.5 s.
 */
const MAX_KV_COUNT = 1 << 16;
const MAX_TENSOR_COUNT = 1 << 17;
/**
 * Inner arrays of arrays of arrays, in all: each costs a JS array or typed array (~200 bytes with its
 * ArrayBuffer) for 12 bytes of file, so 4M empty ones (a 46 MB file) took 1.5 GB and 17 s. llama.cpp
 * reads no nested arrays at all; gguf-py does, and no model file has them.
 */
const MAX_NESTED_ARRAYS = 1 << 16;
/**
 * Elements of an array read into a JS list rather than a typed array (BOOL, UINT64, INT64): 8 to
 * 24 bytes of memory per element, so a 48 MB array of bools took 1.1 GB and 8.6 s. Model files
 * hold a few per-layer flags at most.
 */
const MAX_LIST_ELEMENTS = 1 << 20;
const CHUNK = 1 << 20;
const MAX_STRING_BYTES_U64 = BigInt(MAX_STRING_BYTES);

/**
 * An array element's name in errors ("tokenizer.ggml.tokens[7]", with an optional suffix),
 * formatted only when an error is thrown: a vocabulary's ~100K strings are read without
 * building a name for each.
 */
class ElementName {
  index = 0;
  constructor(
    private readonly array: string,
    private readonly suffix = "",
  ) {}
  toString(): string {
    return `${this.array}[${this.index}]${this.suffix}`;
  }
}
/** a field named in errors: a string, or an array element's name made on demand */
type FieldName = string | ElementName;

export class GGUFError extends FileFieldError {
  constructor(path: string, field: string, message: string) {
    super(path, field, message);
    this.name = "GGUFError";
  }
}

/**
 * Sequential little-endian reader over a positioned-read file with a sliding buffer. Every
 * read is checked against the file size first, so a length field can never make us allocate
 * or wait for more bytes than the file has.
 */
class FileCursor {
  private buf = new Uint8Array(0);
  private view = new DataView(this.buf.buffer);
  private bufStart = 0;
  pos = 0;
  constructor(
    private readonly file: RandomAccessFile,
    readonly size: number,
    private readonly path: string,
  ) {}

  private ensure(n: number, field: FieldName): number {
    if (this.pos + n > this.size) {
      throw new GGUFError(this.path, String(field), `needs ${n} bytes at offset ${this.pos} but the file ends at ${this.size} (truncated or corrupt file)`);
    }
    const end = this.pos + n;
    if (!(this.pos >= this.bufStart && end <= this.bufStart + this.buf.length)) {
      const want = Math.min(Math.max(n, CHUNK), this.size - this.pos);
      this.buf = new Uint8Array(want);
      this.view = new DataView(this.buf.buffer);
      let got = 0;
      while (got < want) {
        const r = this.file.read(this.buf, got, want - got, this.pos + got);
        if (r === 0) throw new GGUFError(this.path, String(field), `unexpected end of file at offset ${this.pos + got}`);
        got += r;
      }
      this.bufStart = this.pos;
    }
    const at = this.pos - this.bufStart;
    this.pos += n;
    return at;
  }

  // ensure() first: it may replace this.view
  bytes(n: number, field: FieldName): Uint8Array {
    const at = this.ensure(n, field);
    return this.buf.subarray(at, at + n);
  }
  u8(f: FieldName) { const at = this.ensure(1, f); return this.view.getUint8(at); }
  i8(f: FieldName) { const at = this.ensure(1, f); return this.view.getInt8(at); }
  u16(f: FieldName) { const at = this.ensure(2, f); return this.view.getUint16(at, true); }
  i16(f: FieldName) { const at = this.ensure(2, f); return this.view.getInt16(at, true); }
  u32(f: FieldName) { const at = this.ensure(4, f); return this.view.getUint32(at, true); }
  i32(f: FieldName) { const at = this.ensure(4, f); return this.view.getInt32(at, true); }
  f32(f: FieldName) { const at = this.ensure(4, f); return this.view.getFloat32(at, true); }
  f64(f: FieldName) { const at = this.ensure(8, f); return this.view.getFloat64(at, true); }
  u64(f: FieldName) { const at = this.ensure(8, f); return this.view.getBigUint64(at, true); }
  i64(f: FieldName) { const at = this.ensure(8, f); return this.view.getBigInt64(at, true); }
}

/** UTF-8 as Buffer.toString decodes it: invalid bytes become U+FFFD, a leading BOM is kept */
const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });

const utf8Length = (s: string): number => new TextEncoder().encode(s).length;

function toSafeNumber(v: bigint): number | bigint {
  return v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(v) : v;
}

const SCALAR_SIZE: Partial<Record<GGUFValueType, number>> = {
  [GGUFValueType.UINT8]: 1, [GGUFValueType.INT8]: 1, [GGUFValueType.BOOL]: 1,
  [GGUFValueType.UINT16]: 2, [GGUFValueType.INT16]: 2,
  [GGUFValueType.UINT32]: 4, [GGUFValueType.INT32]: 4, [GGUFValueType.FLOAT32]: 4,
  [GGUFValueType.UINT64]: 8, [GGUFValueType.INT64]: 8, [GGUFValueType.FLOAT64]: 8,
};

/**
 * Parses a GGUF file's header (metadata and tensor infos) without reading tensor data.
 * Validates like the reference parser: magic, version 2/3, bounded counts and lengths,
 * known types, n_dims <= 4, overflow-checked sizes, power-of-two alignment, every tensor
 * inside the file.
 */
export function readGGUFHeader(path: string): GGUFHeader {
  let file: RandomAccessFile;
  try {
    file = openFile(path);
  } catch (e) {
    throw readFailure(path, e); // Node's own messages name the path, openFile's refusal of a FIFO does not
  }
  try {
    return parseGGUFHeader(file, path);
  } catch (e) {
    throw readFailure(path, e);
  } finally {
    file.close();
  }
}

/**
 * readGGUFHeader over any positioned-read file (a Blob or an HTTP resource in a browser);
 * `path` names it in errors and becomes the header's path. The file stays open.
 */
export function parseGGUFHeader(file: RandomAccessFile, path: string): GGUFHeader {
  const fileSize = file.size;
  const c = new FileCursor(file, fileSize, path);
  const magic = c.u32("magic");
  if (magic !== GGUF_MAGIC) {
    const got = String.fromCharCode(magic & 0xff, (magic >>> 8) & 0xff, (magic >>> 16) & 0xff, magic >>> 24);
    throw new GGUFError(path, "magic", `expected "GGUF", found ${JSON.stringify(got)} (not a GGUF file)`);
  }
  const version = c.u32("version");
  if (version !== 2 && version !== 3) {
    const hint = version > 0xffff ? " (big-endian GGUF files are not supported)" : "";
    throw new GGUFError(path, "version", `expected 2 or 3, found ${version}${hint}`);
  }
  const tensorCount = c.u64("tensor_count");
  const kvCount = c.u64("metadata_kv_count");
  if (tensorCount > BigInt(MAX_TENSOR_COUNT)) throw new GGUFError(path, "tensor_count", `${tensorCount} exceeds the limit of ${MAX_TENSOR_COUNT}`);
  if (kvCount > BigInt(MAX_KV_COUNT)) throw new GGUFError(path, "metadata_kv_count", `${kvCount} exceeds the limit of ${MAX_KV_COUNT}`);

  const readString = (field: FieldName, lengthField: FieldName = `${String(field)} (string length)`): string => {
    const len = c.u64(lengthField);
    if (len > MAX_STRING_BYTES_U64) throw new GGUFError(path, String(field), `string length ${len} exceeds the limit of ${MAX_STRING_BYTES} bytes`);
    const n = Number(len);
    if (n > fileSize - c.pos) throw new GGUFError(path, String(field), `string length ${len} is larger than the rest of the file (${fileSize - c.pos} bytes)`);
    return utf8.decode(c.bytes(n, field));
  };

  const readScalar = (t: GGUFValueType, field: string): number | bigint | boolean | string => {
    switch (t) {
      case GGUFValueType.UINT8: return c.u8(field);
      case GGUFValueType.INT8: return c.i8(field);
      case GGUFValueType.UINT16: return c.u16(field);
      case GGUFValueType.INT16: return c.i16(field);
      case GGUFValueType.UINT32: return c.u32(field);
      case GGUFValueType.INT32: return c.i32(field);
      case GGUFValueType.FLOAT32: return c.f32(field);
      case GGUFValueType.FLOAT64: return c.f64(field);
      case GGUFValueType.UINT64: return toSafeNumber(c.u64(field));
      case GGUFValueType.INT64: return toSafeNumber(c.i64(field));
      case GGUFValueType.BOOL: {
        const b = c.u8(field);
        if (b > 1) throw new GGUFError(path, field, `bool must be 0 or 1, found ${b}`);
        return b === 1;
      }
      case GGUFValueType.STRING: return readString(field);
      default: throw new GGUFError(path, field, `unknown metadata value type ${t}`);
    }
  };

  const readTypedArray = (t: GGUFValueType, n: number, field: string): GGUFValue => {
    const size = SCALAR_SIZE[t]!;
    const raw = c.bytes(n * size, field);
    const copy = new Uint8Array(raw.length);
    copy.set(raw);
    const ab = copy.buffer;
    switch (t) {
      case GGUFValueType.UINT8: return copy;
      case GGUFValueType.INT8: return new Int8Array(ab);
      case GGUFValueType.UINT16: return new Uint16Array(ab);
      case GGUFValueType.INT16: return new Int16Array(ab);
      case GGUFValueType.UINT32: return new Uint32Array(ab);
      case GGUFValueType.INT32: return new Int32Array(ab);
      case GGUFValueType.FLOAT32: return new Float32Array(ab);
      case GGUFValueType.FLOAT64: return new Float64Array(ab);
      case GGUFValueType.BOOL: return Array.from(copy, (b) => b !== 0);
      default: {
        const view = new DataView(ab);
        const out: (number | bigint)[] = new Array(n);
        for (let i = 0; i < n; i++) {
          out[i] = toSafeNumber(t === GGUFValueType.UINT64 ? view.getBigUint64(i * 8, true) : view.getBigInt64(i * 8, true));
        }
        return out;
      }
    }
  };

  let nestedArrays = 0;
  const readValue = (t: GGUFValueType, field: string, depth: number): GGUFEntry => {
    if (t !== GGUFValueType.ARRAY) return { type: t, value: readScalar(t, field) };
    if (depth > 4) throw new GGUFError(path, field, "arrays nested deeper than 4 levels");
    const itemType = c.u32(`${field} (array item type)`) as GGUFValueType;
    if (!(itemType in GGUFValueType)) throw new GGUFError(path, field, `unknown array item type ${itemType}`);
    const count = c.u64(`${field} (array length)`);
    // every element takes at least one byte (strings at least 8), so the file bounds the count
    const minItem = itemType === GGUFValueType.STRING ? 8 : itemType === GGUFValueType.ARRAY ? 12 : SCALAR_SIZE[itemType]!;
    if (count * BigInt(minItem) > BigInt(fileSize - c.pos)) {
      throw new GGUFError(path, field, `array length ${count} does not fit in the rest of the file (${fileSize - c.pos} bytes)`);
    }
    const n = Number(count);
    if (itemType === GGUFValueType.STRING) {
      const out: string[] = new Array(n);
      const element = new ElementName(field), elementLength = new ElementName(field, " (string length)");
      for (let i = 0; i < n; i++) {
        element.index = elementLength.index = i;
        out[i] = readString(element, elementLength);
      }
      return { type: t, itemType, value: out };
    }
    if (itemType === GGUFValueType.ARRAY) {
      nestedArrays += n;
      if (nestedArrays > MAX_NESTED_ARRAYS) throw new GGUFError(path, field, `an array of ${n} arrays: more than the ${MAX_NESTED_ARRAYS} nested arrays a file may hold`);
      const out: GGUFValue[] = new Array(n);
      for (let i = 0; i < n; i++) out[i] = readValue(itemType, `${field}[${i}]`, depth + 1).value;
      return { type: t, itemType, value: out };
    }
    if ((itemType === GGUFValueType.BOOL || itemType === GGUFValueType.UINT64 || itemType === GGUFValueType.INT64) && n > MAX_LIST_ELEMENTS) {
      throw new GGUFError(path, field, `an array of ${n} ${GGUFValueType[itemType]} values: more than the ${MAX_LIST_ELEMENTS} such an array may hold`);
    }
    return { type: t, itemType, value: readTypedArray(itemType, n, field) };
  };

  const metadata = new Map<string, GGUFEntry>();
  for (let i = 0; i < Number(kvCount); i++) {
    const key = readString(`metadata key #${i}`);
    const vt = c.u32(`metadata "${key}" (value type)`) as GGUFValueType;
    if (!(vt in GGUFValueType)) throw new GGUFError(path, `metadata "${key}"`, `unknown value type ${vt}`);
    if (metadata.has(key)) throw new GGUFError(path, `metadata "${key}"`, "duplicate key");
    metadata.set(key, readValue(vt, `metadata "${key}"`, 0));
  }

  let alignment = GGUF_DEFAULT_ALIGNMENT;
  const alignEntry = metadata.get("general.alignment");
  if (alignEntry) {
    const a = alignEntry.value;
    if (typeof a !== "number" || !Number.isInteger(a) || a <= 0 || (a & (a - 1)) !== 0 || a > 1 << 20) {
      // a power of two past the bound is one, so say which bound it broke
      throw new GGUFError(path, "general.alignment", `expected a power of two, at most ${1 << 20}, found ${String(a)}`);
    }
    alignment = a;
  }

  interface RawInfo { name: string; dims: number[]; type: GGMLType; offset: bigint; byteLength: number }
  const raw: RawInfo[] = [];
  const names = new Set<string>();
  for (let i = 0; i < Number(tensorCount); i++) {
    const name = readString(`tensor #${i} name`);
    // llama.cpp's GGML_MAX_NAME (64, with the NUL): a longer name is refused there too
    if (name.length >= 16 && utf8Length(name) >= 64) throw new GGUFError(path, `tensor #${i} name`, `${utf8Length(name)} bytes "${name.slice(0, 64)}...": a tensor name may have at most 63 (llama.cpp's limit)`);
    const field = `tensor "${name}"`;
    if (names.has(name)) throw new GGUFError(path, field, "duplicate tensor name");
    names.add(name);
    const nDims = c.u32(`${field} n_dims`);
    if (nDims < 1 || nDims > MAX_DIMS) throw new GGUFError(path, `${field} n_dims`, `expected 1..${MAX_DIMS}, found ${nDims}`);
    const dims: number[] = [];
    let elements = 1n;
    for (let d = 0; d < nDims; d++) {
      const v = c.u64(`${field} dims[${d}]`);
      if (v === 0n || v > BigInt(Number.MAX_SAFE_INTEGER)) throw new GGUFError(path, `${field} dims[${d}]`, `invalid dimension ${v}`);
      elements *= v;
      if (elements > BigInt(Number.MAX_SAFE_INTEGER)) throw new GGUFError(path, `${field} dims`, `element count overflows (${dims.join("x")}x${v}...)`);
      dims.push(Number(v));
    }
    const type = c.u32(`${field} type`);
    if (!isKnownType(type)) throw new GGUFError(path, `${field} type`, `unknown tensor type id ${type}`);
    const offset = c.u64(`${field} offset`);
    let byteLength: number;
    try {
      byteLength = rowByteLength(type, dims[0]!) * (Number(elements) / dims[0]!);
    } catch (e) {
      throw new GGUFError(path, `${field} dims[0]`, (e as Error).message);
    }
    if (!Number.isSafeInteger(byteLength)) throw new GGUFError(path, `${field} size`, "byte size overflows");
    if (offset % BigInt(alignment) !== 0n) throw new GGUFError(path, `${field} offset`, `${offset} is not a multiple of the alignment ${alignment}`);
    raw.push({ name, dims, type, offset, byteLength });
  }

  const dataOffset = Math.ceil(c.pos / alignment) * alignment;
  const tensors: GGUFTensorInfo[] = raw.map((t) => {
    const end = BigInt(dataOffset) + t.offset + BigInt(t.byteLength);
    if (end > BigInt(fileSize)) {
      throw new GGUFError(path, `tensor "${t.name}" offset`, `data [${BigInt(dataOffset) + t.offset}, ${end}) lies past the end of the file (${fileSize} bytes; ${typeName(t.type)} ${t.dims.join("x")})`);
    }
    return { name: t.name, dims: t.dims, type: t.type, fileOffset: dataOffset + Number(t.offset), byteLength: t.byteLength };
  });
  // tensors must not overlap each other
  const sorted = [...tensors].sort((a, b) => a.fileOffset - b.fileOffset);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1]!, cur = sorted[i]!;
    if (prev.fileOffset + prev.byteLength > cur.fileOffset) {
      throw new GGUFError(path, `tensor "${cur.name}" offset`, `overlaps tensor "${prev.name}"`);
    }
  }
  return { path, version, fileSize, alignment, dataOffset, metadata, tensors };
}

/** Reads one tensor's bytes from the file straight into `into` (e.g. a view of the weight arena). */
export function readTensorInto(fd: number, info: GGUFTensorInfo, into: Uint8Array): void {
  if (into.length !== info.byteLength) throw new Error(`tensor "${info.name}": destination holds ${into.length} bytes, expected ${info.byteLength}`);
  const file = fileFromDescriptor(fd);
  let got = 0;
  while (got < info.byteLength) {
    const n = file.read(into, got, Math.min(info.byteLength - got, 1 << 30), info.fileOffset + got);
    if (n === 0) throw new Error(`tensor "${info.name}": unexpected end of file`);
    got += n;
  }
}

/** Typed accessors for metadata with errors that name the key. */
export class GGUFMetadata {
  constructor(
    readonly path: string,
    readonly entries: ReadonlyMap<string, GGUFEntry>,
  ) {}
  has(key: string): boolean { return this.entries.has(key); }
  raw(key: string): GGUFValue | undefined { return this.entries.get(key)?.value; }
  number(key: string): number | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    if (typeof v !== "number") throw new GGUFError(this.path, key, `expected a number, found ${describe(v)}`);
    return v;
  }
  requireNumber(key: string): number {
    const v = this.number(key);
    if (v === undefined) throw new GGUFError(this.path, key, "required metadata key is missing");
    return v;
  }
  /**
   * A key llama.cpp reads as uint32_t (the special token ids): its loader refuses every other
   * stored type, an i32 or f32 included, rather than converting.
   */
  u32(key: string): number | undefined {
    const e = this.entries.get(key);
    if (e === undefined) return undefined;
    if (e.type !== GGUFValueType.UINT32) {
      const v = e.value;
      const value = Array.isArray(v) || ArrayBuffer.isView(v) ? `of ${(v as ArrayLike<unknown>).length}` : JSON.stringify(typeof v === "bigint" ? v.toString() : v).slice(0, 40);
      throw new GGUFError(this.path, key, `expected a u32, found ${GGUF_TYPE_NAMES[e.type] ?? `type ${e.type}`} ${value}`);
    }
    return e.value as number;
  }
  string(key: string): string | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    if (typeof v !== "string") throw new GGUFError(this.path, key, `expected a string, found ${describe(v)}`);
    return v;
  }
  bool(key: string): boolean | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    if (typeof v !== "boolean") throw new GGUFError(this.path, key, `expected a bool, found ${describe(v)}`);
    return v;
  }
  strings(key: string): string[] | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    if (!Array.isArray(v) || (v.length > 0 && typeof v[0] !== "string")) throw new GGUFError(this.path, key, `expected an array of strings, found ${describe(v)}`);
    return v as string[];
  }
  numbers(key: string): ArrayLike<number> | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    if (ArrayBuffer.isView(v) && !(v instanceof DataView)) return v as unknown as ArrayLike<number>;
    if (Array.isArray(v) && v.every((x) => typeof x === "number")) return v as number[];
    throw new GGUFError(this.path, key, `expected a numeric array, found ${describe(v)}`);
  }
}

/** gguf.h's names of the value types (gguf_type_name), as llama.cpp's messages spell them */
const GGUF_TYPE_NAMES: Partial<Record<GGUFValueType, string>> = {
  [GGUFValueType.UINT8]: "u8", [GGUFValueType.INT8]: "i8", [GGUFValueType.UINT16]: "u16", [GGUFValueType.INT16]: "i16",
  [GGUFValueType.UINT32]: "u32", [GGUFValueType.INT32]: "i32", [GGUFValueType.FLOAT32]: "f32", [GGUFValueType.BOOL]: "bool",
  [GGUFValueType.STRING]: "str", [GGUFValueType.ARRAY]: "arr", [GGUFValueType.UINT64]: "u64", [GGUFValueType.INT64]: "i64",
  [GGUFValueType.FLOAT64]: "f64",
};

function describe(v: GGUFValue): string {
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (ArrayBuffer.isView(v)) return `a numeric array of ${(v as Uint8Array).length}`;
  return `${typeof v} ${JSON.stringify(typeof v === "bigint" ? v.toString() : v).slice(0, 40)}`;
}
