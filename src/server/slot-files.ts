import { createHash } from "node:crypto";
import { statSync } from "node:fs";
import { open, readdir, stat } from "node:fs/promises";
import { endianness } from "node:os";
import { basename, join } from "node:path";
import type { KVLayout, SlotCache } from "../engine/index.js";
import { writeOutputFile } from "../formats/index.js";

/*
 * The files of llama-server's POST /slots/{id}?action=save|restore, under --slot-save-path.
 * llama-server writes llama.cpp's binary sequence state (llama_state_seq_save_file); this is
 * tsllm's own format, and claims no compatibility with it:
 *
 *   "TSLLMSLT"  u32 LE version  u32 LE header bytes  header (JSON, UTF-8)  tokens (u32 LE each)  rows
 *
 * The header names the model (its file's name, size and a SHA-256 of a sample of its bytes) and
 * the KV pool's layout (engine KVLayout), the counts, and a SHA-256 of everything after it: a file
 * another model saved, or one cut short or changed, is refused before the slot is touched. The
 * rows are each block's floats as the pool stores them (raw, in the host's byte order, named too).
 */

const MAGIC = "TSLLMSLT";
const VERSION = 1;
/** magic, version, header length */
const PREFIX_BYTES = 16;
/** the most header bytes read (a real one is a few hundred) */
const MAX_HEADER_BYTES = 64 * 1024;
/** the model file's bytes hashed: its first MiB (the GGUF header and metadata) and this many 4 KiB pieces spread over the rest */
const HEAD_BYTES = 2 ** 20, SAMPLES = 64, SAMPLE_BYTES = 4096;

/** what names the model a slot file was saved by */
export interface ModelIdentity {
  readonly file: string;
  readonly bytes: number;
  readonly sha256: string;
  /**
   * the format its weights were quantized to while loading (serve --quantize), none where they are
   * the file's: the same file loaded otherwise computes other K/V rows (absent from the files of
   * 4b8975d, which were saved by a server that may have quantized: taken as none)
   */
  readonly quantize?: string;
}

interface SlotFileHeader {
  readonly model: ModelIdentity;
  readonly kv: KVLayout;
  readonly byteOrder: string;
  readonly tokens: number;
  readonly blocks: number;
  /** SHA-256 of the tokens and rows after the header */
  readonly payloadSha256: string;
}

/**
 * Whether `name` is a file name llama-server's fs_validate_filename (common.cpp, allow_subdirs
 * false) takes: 1..255 UTF-8 bytes, no control characters (C0, DEL, C1), none of / \ : * ? " < > |
 * nor their look-alikes (U+FF0E, U+2215, U+2216), no lone surrogate, U+FFFD or BOM, no leading or
 * trailing space, no trailing dot, no "..", not ".". So a name can never leave the folder.
 */
export function validSlotFilename(name: string): boolean {
  if (name.length === 0 || Buffer.byteLength(name, "utf8") > 255) return false;
  for (const ch of name) {
    const c = ch.codePointAt(0)!;
    if (c <= 0x1f || c === 0x7f || (c >= 0x80 && c <= 0x9f) || c === 0xff0e || c === 0x2215 || c === 0x2216 || (c >= 0xd800 && c <= 0xdfff) || c === 0xfffd || c === 0xfeff) return false;
    if (':*?"<>|/\\'.includes(ch)) return false;
  }
  return !(name.startsWith(" ") || name.endsWith(" ") || name.endsWith(".") || name.includes("..") || name === ".");
}

/** throws a RangeError naming `setting` unless `folder` is an existing folder (llama-server's --slot-save-path: "not a directory") */
export function checkSlotFolder(folder: string, setting: string): void {
  let isFolder = false;
  try {
    isFolder = statSync(folder).isDirectory();
  } catch {
    // (missing or unreadable: not a folder)
  }
  if (typeof folder !== "string" || folder === "" || !isFolder) throw new RangeError(`${setting}: not a directory: ${JSON.stringify(folder)} (the slot files' folder must exist)`);
}

const identities = new Map<string, Promise<ModelIdentity>>();

/**
 * The model file's name, size and a SHA-256 of its first MiB and 64 pieces of 4 KiB spread over
 * the rest (about 1.3 MB read, once per file; a folder's files each so): two models of the same shape and metadata with
 * other weights (a fine-tune, another seed) differ in it, without hashing gigabytes
 */
export function modelIdentity(path: string): Promise<ModelIdentity> {
  let known = identities.get(path);
  if (!known) {
    known = hashModel(path);
    identities.set(path, known);
    // (a failure is not kept: the next save tries again)
    known.catch(() => identities.delete(path));
  }
  return known;
}

async function hashModel(path: string): Promise<ModelIdentity> {
  const hash = createHash("sha256");
  // (a model loaded from a folder, safetensors and config: each of its files, by name)
  const files = (await stat(path)).isDirectory() ? (await readdir(path, { withFileTypes: true })).filter((e) => e.isFile()).map((e) => e.name).sort().map((name) => join(path, name)) : [path];
  let total = 0;
  for (const file of files) {
    const fh = await open(file, "r");
    try {
      const bytes = (await fh.stat()).size;
      total += bytes;
      hash.update(`${basename(file)}\0${bytes}\0`);
      const piece = async (at: number, n: number) => {
        const buf = Buffer.alloc(Math.max(0, Math.min(n, bytes - at)));
        if (buf.length > 0) await fh.read(buf, 0, buf.length, at);
        hash.update(buf);
      };
      await piece(0, HEAD_BYTES);
      for (let i = 0; i < SAMPLES && bytes > HEAD_BYTES; i++) await piece(HEAD_BYTES + Math.floor(((bytes - HEAD_BYTES) * i) / SAMPLES), SAMPLE_BYTES);
    } finally {
      await fh.close();
    }
  }
  return { file: basename(path), bytes: total, sha256: hash.digest("hex") };
}

/** writes the slot's cache to `folder`/`filename` (a temporary file renamed over it once complete); resolves with the bytes written */
export async function writeSlotFile(folder: string, filename: string, model: ModelIdentity, kv: KVLayout, cache: SlotCache): Promise<number> {
  const tokens = Buffer.alloc(4 * cache.tokens.length);
  cache.tokens.forEach((t, i) => tokens.writeUInt32LE(t, 4 * i));
  const rows = cache.blocks.map((b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength));
  const payload = createHash("sha256").update(tokens);
  for (const r of rows) payload.update(r);
  const header: SlotFileHeader = { model, kv, byteOrder: endianness(), tokens: cache.tokens.length, blocks: cache.blocks.length, payloadSha256: payload.digest("hex") };
  const json = Buffer.from(JSON.stringify(header), "utf8");
  const prefix = Buffer.alloc(PREFIX_BYTES);
  prefix.write(MAGIC, 0, "latin1");
  prefix.writeUInt32LE(VERSION, 8);
  prefix.writeUInt32LE(json.length, 12);
  const parts = [prefix, json, tokens, ...rows];
  await writeOutputFile(join(folder, filename), async (fh) => {
    for (const p of parts) await fh.write(p);
  });
  return parts.reduce((n, p) => n + p.length, 0);
}

/** a slot file that is not one this server can restore: its message says why, in one line */
export class SlotFileError extends Error {
  override name = "SlotFileError";
}

/**
 * Reads and checks a slot file written by writeSlotFile for this model and KV layout, reading no
 * more than its header says it holds (and its header at most 64 KiB): refused in one line where it
 * is missing, of another format or version, saved by another model or with another KV layout, of
 * more tokens than `contextSize`, cut short, longer, or changed (its payload's hash)
 */
export async function readSlotFile(folder: string, filename: string, model: ModelIdentity, kv: KVLayout, contextSize: number): Promise<{ cache: SlotCache; bytes: number }> {
  let fh;
  try {
    fh = await open(join(folder, filename), "r");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new SlotFileError(code === "ENOENT" ? `no slot file named ${JSON.stringify(filename)} in the slot save folder` : `slot file ${JSON.stringify(filename)} cannot be opened (${code ?? (e as Error).message})`);
  }
  const bad = (why: string) => new SlotFileError(`slot file ${JSON.stringify(filename)} ${why}`);
  try {
    const stat = await fh.stat();
    if (!stat.isFile()) throw bad("is not a regular file");
    const size = stat.size;
    const readAt = async (at: number, n: number): Promise<Buffer> => {
      const buf = Buffer.alloc(n);
      const { bytesRead } = await fh.read(buf, 0, n, at);
      if (bytesRead !== n) throw bad(`is truncated: ${size} bytes, cut short at byte ${at + bytesRead}`);
      return buf;
    };
    if (size < PREFIX_BYTES) throw bad(`is truncated or no slot file: ${size} bytes, less than its ${PREFIX_BYTES}-byte start`);
    const prefix = await readAt(0, PREFIX_BYTES);
    if (prefix.toString("latin1", 0, 8) !== MAGIC) throw bad(`is not a tsllm slot file (it does not start with "${MAGIC}")`);
    const version = prefix.readUInt32LE(8), headerBytes = prefix.readUInt32LE(12);
    if (version !== VERSION) throw bad(`is of format version ${version}; this server reads version ${VERSION}`);
    if (headerBytes > MAX_HEADER_BYTES) throw bad(`says its header is ${headerBytes} bytes, more than the ${MAX_HEADER_BYTES} a slot file's can be: it is corrupt`);
    if (size < PREFIX_BYTES + headerBytes) throw bad(`is truncated: ${size} bytes, its header alone ${PREFIX_BYTES + headerBytes}`);
    let header: SlotFileHeader;
    try {
      header = JSON.parse((await readAt(PREFIX_BYTES, headerBytes)).toString("utf8")) as SlotFileHeader;
    } catch (e) {
      if (e instanceof SlotFileError) throw e;
      throw bad("has a header that is not JSON: it is corrupt");
    }
    checkHeader(header, bad);
    const m = header.model;
    if (m.sha256 !== model.sha256 || m.bytes !== model.bytes) {
      throw bad(`was saved by model ${JSON.stringify(m.file)} (${m.bytes} bytes, sha256 ${m.sha256.slice(0, 12)}...), not this server's ${JSON.stringify(model.file)} (${model.bytes} bytes, sha256 ${model.sha256.slice(0, 12)}...): its KV rows mean nothing to this model`);
    }
    if (m.quantize !== model.quantize) {
      const loaded = (q: string | undefined) => (q === undefined ? "its weights as the file stores them" : `its weights quantized to ${q} while loading`);
      throw bad(`was saved by this model file loaded with ${loaded(m.quantize)}, this server has ${loaded(model.quantize)}: its KV rows come from other weights; restore it where the model is loaded the same way`);
    }
    const differs = (Object.keys(kv) as (keyof KVLayout)[]).filter((k) => header.kv[k] !== kv[k]);
    if (differs.length > 0) throw bad(`was saved with another KV cache layout (${differs.map((k) => `${k} ${String(header.kv[k])}, here ${String(kv[k])}`).join("; ")}): restore it on a server started with the same settings`);
    if (header.byteOrder !== endianness()) throw bad(`was written on a ${header.byteOrder} host; this one is ${endianness()}`);
    if (header.tokens > contextSize) throw bad(`holds ${header.tokens} tokens, more than this server's context of ${contextSize}`);
    if (header.tokens !== header.blocks * kv.blockSize) throw bad(`says it holds ${header.tokens} tokens in ${header.blocks} blocks of ${kv.blockSize}: it is corrupt`);
    const payloadAt = PREFIX_BYTES + headerBytes, blockBytes = 4 * kv.blockFloats;
    const expected = payloadAt + 4 * header.tokens + header.blocks * blockBytes;
    if (size < expected) throw bad(`is truncated: ${size} bytes, its header says ${expected}`);
    if (size > expected) throw bad(`has ${size - expected} bytes more than the ${expected} its header says: it is corrupt`);
    const payload = await readAt(payloadAt, expected - payloadAt);
    if (createHash("sha256").update(payload).digest("hex") !== header.payloadSha256) throw bad("does not match its checksum: it is corrupt");
    const tokens: number[] = [];
    for (let i = 0; i < header.tokens; i++) tokens.push(payload.readUInt32LE(4 * i));
    const blocks: Float32Array[] = [];
    for (let b = 0; b < header.blocks; b++) {
      const at = 4 * header.tokens + b * blockBytes;
      // (copied out: a Float32Array needs its offset aligned to 4, which the header's length does not promise)
      blocks.push(new Float32Array(new Uint8Array(payload.subarray(at, at + blockBytes)).buffer));
    }
    return { cache: { tokens, blocks }, bytes: size };
  } finally {
    await fh.close();
  }
}

/** the header's fields are of their types (a file edited by hand, or another program's) */
function checkHeader(h: SlotFileHeader, bad: (why: string) => SlotFileError): void {
  const count = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0;
  const ok = typeof h === "object" && h !== null && typeof h.model === "object" && h.model !== null && typeof h.model.file === "string" && count(h.model.bytes) && typeof h.model.sha256 === "string" && (h.model.quantize === undefined || typeof h.model.quantize === "string")
    && typeof h.kv === "object" && h.kv !== null && typeof h.byteOrder === "string" && count(h.tokens) && count(h.blocks) && typeof h.payloadSha256 === "string";
  if (!ok) throw bad("has a header without the fields of a tsllm slot file's: it is corrupt");
}
