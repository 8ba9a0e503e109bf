import { existsSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { openFile, type RandomAccessFile } from "../platform/host.js";
import { isJsonObject, JsonSyntaxError, JsonTooLargeError, parseStrictJson, type JsonValue } from "./safetensors-json.js";
import { FileFieldError, readFailure } from "./errors.js";
import { readWholeFile } from "./read-file.js";

/**
 * safetensors: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
 * `{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__"?: {str: str}}`, then the
 * tensor bytes (little-endian, row-major, offsets relative to the end of the header).
 *
 * Validation follows the reference implementation: N <= 100 MB and inside the file, valid
 * UTF-8 JSON starting with '{', no duplicate keys, known dtypes, offsets that (sorted) start
 * at 0 and are contiguous without gaps or overlaps, byte length = elements x dtype size
 * (overflow-checked), and the data ending exactly at the end of the file.
 */

export const SAFETENSORS_MAX_HEADER = 100_000_000;
/**
 * Tensors (and __metadata__ keys) in one file, and tensors in an index: far past real checkpoints
 * (hundreds to a few thousand a shard; ~92K in the largest MoE indexes), small enough to read in
 * seconds (131K header entries: 2.5 s, 244 MB).
 */
const MAX_HEADER_ENTRIES = 1 << 17;
const MAX_INDEX_ENTRIES = 1 << 19;
export const SAFETENSORS_INDEX = "model.safetensors.index.json";
export const SAFETENSORS_SINGLE = "model.safetensors";

export type SafetensorsDType = "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" | "I16" | "U16" | "F16" | "BF16" | "I32" | "U32" | "F32" | "F64" | "I64" | "U64";

export const SAFETENSORS_DTYPE_SIZE: Readonly<Record<SafetensorsDType, number>> = {
  BOOL: 1, U8: 1, I8: 1, F8_E5M2: 1, F8_E4M3: 1,
  I16: 2, U16: 2, F16: 2, BF16: 2,
  I32: 4, U32: 4, F32: 4,
  F64: 8, I64: 8, U64: 8,
};

export class SafetensorsError extends FileFieldError {
  constructor(path: string, field: string, message: string) {
    super(path, field, message);
    this.name = "SafetensorsError";
  }
}

export interface SafetensorsTensorInfo {
  readonly name: string;
  /** the file holding the tensor */
  readonly path: string;
  readonly dtype: SafetensorsDType;
  /** row-major (PyTorch) order: the last dimension is contiguous */
  readonly shape: readonly number[];
  /** absolute byte offset in the file */
  readonly fileOffset: number;
  readonly byteLength: number;
}

export interface SafetensorsHeader {
  readonly path: string;
  readonly fileSize: number;
  readonly dataOffset: number;
  readonly metadata: Readonly<Record<string, string>>;
  /** in file order */
  readonly tensors: readonly SafetensorsTensorInfo[];
}

function readExactly(file: RandomAccessFile, into: Uint8Array, position: number, path: string, what: string): void {
  let got = 0;
  while (got < into.length) {
    const n = file.read(into, got, Math.min(into.length - got, 1 << 30), position + got);
    if (n === 0) throw new SafetensorsError(path, what, `unexpected end of file at offset ${position + got}`);
    got += n;
  }
}

function isDType(s: string): s is SafetensorsDType {
  return Object.hasOwn(SAFETENSORS_DTYPE_SIZE, s);
}

/** Parses and validates a safetensors file's header; reads no tensor data. */
export function readSafetensorsHeader(path: string): SafetensorsHeader {
  // a folder opens, and only its read fails, with a message naming no file
  if (statSync(path).isDirectory()) throw new SafetensorsError(path, "file", "is a folder, not a safetensors file");
  const file = openSafetensors(path);
  try {
    return parseHeader(file, path);
  } finally {
    file.close();
  }
}

/** openFile (a regular file only: a shard linked to a FIFO would block), its errors naming the file */
function openSafetensors(path: string): RandomAccessFile {
  try {
    return openFile(path);
  } catch (e) {
    throw readFailure(path, e);
  }
}

function parseHeader(file: RandomAccessFile, path: string): SafetensorsHeader {
  const fileSize = file.size;
  if (fileSize < 8) throw new SafetensorsError(path, "header length", `the file has ${fileSize} bytes, fewer than the 8-byte header length (not a safetensors file)`);
  const lenBytes = Buffer.alloc(8);
  readExactly(file, lenBytes, 0, path, "header length");
  const n = lenBytes.readBigUInt64LE(0);
  if (n > BigInt(SAFETENSORS_MAX_HEADER)) throw new SafetensorsError(path, "header length", `${n} bytes exceeds the limit of ${SAFETENSORS_MAX_HEADER}`);
  const headerLen = Number(n);
  if (8 + headerLen > fileSize) throw new SafetensorsError(path, "header length", `${headerLen} bytes, but the file has only ${fileSize - 8} bytes after the length field`);
  const raw = Buffer.alloc(headerLen);
  readExactly(file, raw, 8, path, "header");
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(raw);
  } catch {
    throw new SafetensorsError(path, "header", "is not valid UTF-8");
  }
  if (!text.startsWith("{")) throw new SafetensorsError(path, "header", `expected a JSON object starting with '{', found ${JSON.stringify(text.slice(0, 16))}`);
  let json: JsonValue;
  try {
    json = parseStrictJson(text, MAX_HEADER_ENTRIES);
  } catch (e) {
    if (e instanceof JsonSyntaxError) throw new SafetensorsError(path, "header", `invalid JSON: ${e.message}`);
    if (e instanceof JsonTooLargeError) throw new SafetensorsError(path, "header", `${e.message}: more tensors or __metadata__ keys than the ${MAX_HEADER_ENTRIES} a file may hold`);
    throw e;
  }
  if (!isJsonObject(json)) throw new SafetensorsError(path, "header", "expected a JSON object");
  const dataOffset = 8 + headerLen;
  const metadata: Record<string, string> = {};
  const entries: { name: string; dtype: SafetensorsDType; shape: number[]; begin: number; end: number }[] = [];
  for (const [name, v] of Object.entries(json)) {
    if (name === "__metadata__") {
      if (!isJsonObject(v)) throw new SafetensorsError(path, "__metadata__", "expected an object of strings");
      for (const [k, s] of Object.entries(v)) {
        if (typeof s !== "string") throw new SafetensorsError(path, `__metadata__.${k}`, `expected a string, found ${JSON.stringify(s)?.slice(0, 40)}`);
        metadata[k] = s;
      }
      continue;
    }
    const field = `tensor "${name}"`;
    if (!isJsonObject(v)) throw new SafetensorsError(path, field, "expected an object {dtype, shape, data_offsets}");
    for (const k of Object.keys(v)) {
      if (k !== "dtype" && k !== "shape" && k !== "data_offsets") throw new SafetensorsError(path, field, `unknown field "${k}"`);
    }
    const { dtype, shape, data_offsets: offs } = v;
    if (typeof dtype !== "string" || !isDType(dtype)) {
      throw new SafetensorsError(path, `${field} dtype`, `unknown dtype ${JSON.stringify(dtype)} (known: ${Object.keys(SAFETENSORS_DTYPE_SIZE).join(", ")})`);
    }
    if (!Array.isArray(shape) || !shape.every((d) => typeof d === "number" && Number.isSafeInteger(d) && d >= 0)) {
      throw new SafetensorsError(path, `${field} shape`, `expected an array of non-negative integers, found ${JSON.stringify(shape)?.slice(0, 60)}`);
    }
    if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((d) => typeof d === "number" && Number.isSafeInteger(d) && d >= 0)) {
      throw new SafetensorsError(path, `${field} data_offsets`, `expected [begin, end] non-negative integers, found ${JSON.stringify(offs)?.slice(0, 60)}`);
    }
    entries.push({ name, dtype, shape: shape as number[], begin: offs[0] as number, end: offs[1] as number });
  }
  // sorted by offsets, the tensors must tile the data section exactly from 0
  const sorted = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let expect = 0;
  for (const e of sorted) {
    const field = `tensor "${e.name}" data_offsets`;
    if (e.begin !== expect || e.end < e.begin) {
      const why = e.end < e.begin ? `end ${e.end} is before begin ${e.begin}` : e.begin < expect ? `begins at ${e.begin}, overlapping the previous tensor, which ends at ${expect}` : `begins at ${e.begin}, leaving a gap after the previous tensor, which ends at ${expect}`;
      throw new SafetensorsError(path, field, why);
    }
    let elements = 1n;
    for (const d of e.shape) elements *= BigInt(d);
    const bytes = elements * BigInt(SAFETENSORS_DTYPE_SIZE[e.dtype]);
    if (bytes !== BigInt(e.end - e.begin)) {
      throw new SafetensorsError(path, field, `[${e.begin}, ${e.end}] holds ${e.end - e.begin} bytes, but shape [${e.shape.join(", ")}] of ${e.dtype} needs ${bytes}`);
    }
    expect = e.end;
  }
  if (dataOffset + expect !== fileSize) {
    const why = dataOffset + expect > fileSize ? `the tensors need ${expect} data bytes but the file has ${fileSize - dataOffset} (truncated)` : `${fileSize - dataOffset - expect} trailing bytes after the last tensor`;
    throw new SafetensorsError(path, "data", why);
  }
  const tensors = entries.map((e) => ({ name: e.name, path, dtype: e.dtype, shape: e.shape, fileOffset: dataOffset + e.begin, byteLength: e.end - e.begin }));
  return { path, fileSize, dataOffset, metadata, tensors };
}

/**
 * The tensors of a model: one safetensors file, or the shards a `model.safetensors.index.json`
 * names. Tensor bytes are read on demand, straight into the caller's buffer (e.g. backend
 * weight memory); file descriptors stay open until `close()`.
 */
export class SafetensorsModel {
  private readonly files = new Map<string, RandomAccessFile>();

  private constructor(
    /** the file or index the tensors came from (used in errors) */
    readonly path: string,
    readonly tensors: ReadonlyMap<string, SafetensorsTensorInfo>,
    readonly metadata: Readonly<Record<string, string>>,
  ) {}

  /** a .safetensors file, a model.safetensors.index.json, or a folder holding either */
  static open(path: string): SafetensorsModel {
    if (statSync(path).isDirectory()) {
      const index = join(path, SAFETENSORS_INDEX);
      if (existsSync(index)) return SafetensorsModel.openIndex(index);
      const single = join(path, SAFETENSORS_SINGLE);
      if (existsSync(single)) return SafetensorsModel.openFile(single);
      // PyTorch pickles are not read (unpickling is code execution in Python, and a format of its own)
      const bin = existsSync(join(path, "pytorch_model.bin")) || existsSync(join(path, "pytorch_model.bin.index.json"));
      throw new Error(`${path}: no ${SAFETENSORS_SINGLE} or ${SAFETENSORS_INDEX} in this folder${bin ? " (its pytorch_model.bin is not read: use a revision with safetensors weights, e.g. org/name@refs/pr/N where the Hub's conversion bot added them)" : ""}`);
    }
    if (basename(path).endsWith(".index.json")) return SafetensorsModel.openIndex(path);
    return SafetensorsModel.openFile(path);
  }

  /** one .safetensors file (a folder of that name is refused as one, not searched) */
  private static openFile(path: string): SafetensorsModel {
    const h = readSafetensorsHeader(path);
    return new SafetensorsModel(path, new Map(h.tensors.map((t) => [t.name, t])), h.metadata);
  }

  private static openIndex(indexPath: string): SafetensorsModel {
    let json: JsonValue;
    // bounded as a header is: the whole file is read and parsed
    const text = readWholeFile(indexPath, SAFETENSORS_MAX_HEADER, (size) => new SafetensorsError(indexPath, "index", `${size} bytes exceeds the limit of ${SAFETENSORS_MAX_HEADER}`)).toString("utf8");
    try {
      json = parseStrictJson(text, MAX_INDEX_ENTRIES);
    } catch (e) {
      if (e instanceof JsonSyntaxError) throw new SafetensorsError(indexPath, "index", `invalid JSON: ${e.message}`);
      if (e instanceof JsonTooLargeError) throw new SafetensorsError(indexPath, "index", `${e.message}: more tensors than the ${MAX_INDEX_ENTRIES} an index may list`);
      throw e;
    }
    const weightMap = isJsonObject(json) ? json["weight_map"] : undefined;
    if (!isJsonObject(weightMap)) throw new SafetensorsError(indexPath, "weight_map", "expected an object {tensor name: shard file}");
    const byFile = new Map<string, Set<string>>();
    for (const [name, file] of Object.entries(weightMap)) {
      if (typeof file !== "string" || file === "" || file.includes("/") || file.includes("\\") || file === "." || file === "..") {
        throw new SafetensorsError(indexPath, `weight_map["${name}"]`, `expected a shard file name in the same folder, found ${JSON.stringify(file)}`);
      }
      if (!byFile.has(file)) byFile.set(file, new Set());
      byFile.get(file)!.add(name);
    }
    const tensors = new Map<string, SafetensorsTensorInfo>();
    const dir = dirname(indexPath);
    for (const [file, names] of byFile) {
      if (!existsSync(join(dir, file))) throw new SafetensorsError(indexPath, `weight_map`, `shard ${file} (holding ${[...names][0]}) does not exist`);
    }
    for (const [file, names] of byFile) {
      const shard = join(dir, file);
      const h = readSafetensorsHeader(shard);
      for (const t of h.tensors) {
        if (!names.has(t.name)) throw new SafetensorsError(shard, `tensor "${t.name}"`, `is not listed for this shard in ${basename(indexPath)}`);
        tensors.set(t.name, t);
      }
      for (const n of names) {
        if (!tensors.has(n)) throw new SafetensorsError(shard, `tensor "${n}"`, `listed in ${basename(indexPath)} but missing from the shard`);
      }
    }
    const meta = isJsonObject(json) && isJsonObject(json["metadata"]) ? json["metadata"] : {};
    const metadata: Record<string, string> = {};
    for (const [k, v] of Object.entries(meta)) metadata[k] = typeof v === "string" ? v : JSON.stringify(v);
    return new SafetensorsModel(indexPath, tensors, metadata);
  }

  info(name: string): SafetensorsTensorInfo | undefined {
    return this.tensors.get(name);
  }

  /**
   * Reads `into.length` bytes of tensor `name` starting `byteOffset` bytes into it (default:
   * the whole tensor) — row ranges can be read without touching the rest.
   */
  read(name: string, into: Uint8Array, byteOffset = 0): void {
    const t = this.tensors.get(name);
    if (!t) throw new SafetensorsError(this.path, `tensor "${name}"`, "not in this model");
    if (byteOffset < 0 || byteOffset + into.length > t.byteLength) {
      throw new SafetensorsError(t.path, `tensor "${name}"`, `read of ${into.length} bytes at ${byteOffset} is outside its ${t.byteLength} bytes`);
    }
    readExactly(this.file(t.path), into, t.fileOffset + byteOffset, t.path, `tensor "${name}"`);
  }

  private file(path: string): RandomAccessFile {
    let file = this.files.get(path);
    if (file === undefined) {
      file = openSafetensors(path);
      this.files.set(path, file);
    }
    return file;
  }

  close(): void {
    for (const file of this.files.values()) {
      try { file.close(); } catch { /* already closed */ }
    }
    this.files.clear();
  }
}
