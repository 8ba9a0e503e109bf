import { f16BitsToF32, f32ToF16Bits } from "../../tensor/quant/half.js";
import { dequantizeQ4_0, quantizeQ4_0 } from "../../tensor/quant/q4_0.js";
import { dequantizeQ8_0 } from "../../tensor/quant/q8_0.js";
import { checkRows, type HalfSides } from "../ops/attention.js";
import { OptionError } from "../../units/index.js";
import { quantizeActivationsQ8_0 } from "./activation-quant.js";

/**
 * How K and V rows are stored in the KV cache (llama.cpp's `--cache-type-k/-v`): f32 (the
 * default), f16, or the 32-element block formats q8_0 (34 bytes a block, 3.8x smaller than f32)
 * and q4_0 (18 bytes, 7.1x). A row of a layer holds every KV head of one position, head after
 * head; each head's slice of a block format starts on a block, so head dims must be multiples of
 * 32 there. Rows are padded to whole floats (4 bytes), the unit the backends address memory in.
 *
 * Rows are written as llama.cpp's CPU backend writes them (ggml_set_rows with the type's
 * from_float): f16 rounded to nearest-even, q8_0 through the x86 SIMD quantizer (127 / amax,
 * nearest-even — the activation quantizer), q4_0 through quantize_row_q4_0_ref.
 */
export type KVCacheType = "f32" | "f16" | "q8_0" | "q4_0";

export const KV_CACHE_TYPES: readonly KVCacheType[] = ["f32", "f16", "q8_0", "q4_0"];

/** the element types of a cache's keys and values, and the order attention reads them in */
export interface KVCacheTypes {
  readonly k: KVCacheType;
  readonly v: KVCacheType;
  /**
   * llama.cpp's flash_attn: true attends in its flash-attention kernel's order (an f32 side cast
   * to f16), false in its matrix-product order (llama.cpp's -fa off, node-llama-cpp's default).
   * Unset: flash attention where a side is a block format (llama.cpp takes a quantized V cache
   * only with it), else the matrix-product order.
   */
  readonly flashAttention?: boolean;
}

export const F32_CACHE: KVCacheTypes = { k: "f32", v: "f32" };

/**
 * How one kind of row (K or V) is stored: its element type, and the chunk of the Walsh-Hadamard
 * rotation applied before encoding (0: none). llama.cpp rotates whenever the type is a block
 * format and the head dim is a multiple of 64: keys in chunks of the largest power of two
 * dividing the head dim (queries alike, so every score is unchanged but for rounding), values in
 * chunks of 64 (the attention output rotated back).
 */
export interface KVRowEncoding {
  readonly type: KVCacheType;
  readonly rotation: number;
}

export interface KVCacheEncoding {
  readonly k: KVRowEncoding;
  readonly v: KVRowEncoding;
  /** attention in llama.cpp's flash-attention order (reference/kv-attention.ts), else in its matrix-product order (ops/attention.ts) */
  readonly flash: boolean;
  /**
   * Set where the cache is stored as one plane per KV head (f32 / f16 sides only; a backend's
   * kvHeadPlanes says which it reads): the head rows between planes, so that head h of the row
   * of position p is headDim elements at head row h * headPlane + rows[p]. Absent: a row holds
   * every KV head of its position, head after head.
   */
  readonly headPlane?: number;
}

const isBlockFormat = (t: KVCacheType) => t === "q8_0" || t === "q4_0";

/** the encoding a cache of these types uses for a model with this head dim (llama.cpp's attn_rot_k / attn_rot_v) */
export function kvCacheEncoding(types: KVCacheTypes, headDim: number): KVCacheEncoding {
  let keyChunk = 64;
  while (headDim % (2 * keyChunk) === 0) keyChunk *= 2;
  const rotates = (t: KVCacheType) => isBlockFormat(t) && headDim % 64 === 0;
  const flash = types.flashAttention ?? (isBlockFormat(types.k) || isBlockFormat(types.v));
  return { k: { type: types.k, rotation: rotates(types.k) ? keyChunk : 0 }, v: { type: types.v, rotation: rotates(types.v) ? 64 : 0 }, flash };
}

export const F32_ENCODING: KVCacheEncoding = kvCacheEncoding(F32_CACHE, 1);

/** whether a cache is plain f32 rows read in the matrix-product order (attention then keeps kernels/ops/attention.ts as is) */
export function isPlainF32(e: KVCacheEncoding): boolean {
  return !e.flash && e.k.type === "f32" && e.v.type === "f32";
}

const BLOCK = 32;

/** bytes `n` elements take (n a multiple of 32 for the block formats) */
export function kvBytes(type: KVCacheType, n: number): number {
  switch (type) {
    case "f32": return 4 * n;
    case "f16": return 2 * n;
    case "q8_0": return (n / BLOCK) * 34;
    case "q4_0": return (n / BLOCK) * 18;
  }
}

/** floats one cached row of `width` elements (all KV heads of a position) occupies: its bytes rounded up to whole floats */
export function kvRowFloats(type: KVCacheType, width: number): number {
  return Math.ceil(kvBytes(type, width) / 4);
}

/** the parse of a user's cache type; `what` names the option in the error */
export function parseKVCacheType(value: string, what: string): KVCacheType {
  const t = value.toLowerCase();
  if (!(KV_CACHE_TYPES as readonly string[]).includes(t)) throw new RangeError(`${what} must be one of ${KV_CACHE_TYPES.join(", ")}, got "${value}"`);
  return t as KVCacheType;
}

/** throws unless a model with this head dim can store K or V as `type` */
export function checkKVCacheType(type: KVCacheType, headDim: number, what: string): void {
  if (!(KV_CACHE_TYPES as readonly string[]).includes(type)) throw new OptionError(`${what} must be one of ${KV_CACHE_TYPES.join(", ")}, got "${String(type)}"`, what);
  if (isBlockFormat(type) && headDim % BLOCK !== 0) {
    throw new OptionError(`${what} ${type} needs a head dim that is a multiple of ${BLOCK} (each head is stored in whole blocks); this model's is ${headDim}: use f16 or f32`, what);
  }
}

/** which sides of a cache hold f16 values (the matrix-product order's `halves`) */
export function halfSidesOf(e: KVCacheEncoding): HalfSides {
  return { keys: e.k.type === "f16", values: e.v.type === "f16" };
}

/** how an error names the cache options: the library's option names unless a caller (the CLI) gives its flags */
export interface CacheOptionWords {
  readonly k: string;
  readonly v: string;
  /** how to ask for flash attention */
  readonly flashOn: string;
}

const LIBRARY_WORDS: CacheOptionWords = { k: "cacheTypeK", v: "cacheTypeV", flashOn: "leave flashAttention unset or true" };

/** throws unless attention can read a cache of these types in the order they ask for */
export function checkAttentionOrder(types: KVCacheTypes, words: CacheOptionWords = LIBRARY_WORDS): void {
  if (types.flashAttention !== false) return;
  for (const [t, what] of [[types.k, words.k], [types.v, words.v]] as const) {
    if (isBlockFormat(t)) throw new OptionError(`${what} ${t} needs flash attention (llama.cpp's order for a block-format cache): ${words.flashOn}, or use f16 / f32`, what);
  }
}

/** encodes `width` floats of src (from srcOffset) as one row of `type` at dst[dstOffset...] */
export function encodeKVRow(type: KVCacheType, dst: Uint8Array, dstOffset: number, src: Float32Array, srcOffset: number, width: number): void {
  const row = src.subarray(srcOffset, srcOffset + width);
  switch (type) {
    case "f32":
      dst.set(new Uint8Array(row.buffer, row.byteOffset, 4 * width), dstOffset);
      return;
    case "f16":
      for (let i = 0; i < width; i++) {
        const h = f32ToF16Bits(row[i]!);
        dst[dstOffset + 2 * i] = h & 0xff;
        dst[dstOffset + 2 * i + 1] = h >>> 8;
      }
      return;
    case "q8_0": return quantizeActivationsQ8_0(dst.subarray(dstOffset), row, width);
    case "q4_0": return quantizeQ4_0(dst.subarray(dstOffset), row, width);
  }
}

/** decodes `n` elements of `type` at src[offset...] into out (ggml's to_float for the type) */
export function decodeKV(type: KVCacheType, src: Uint8Array, offset: number, n: number, out: Float32Array): void {
  switch (type) {
    case "f32":
    {
      const view = new DataView(src.buffer, src.byteOffset + offset, 4 * n);
      for (let i = 0; i < n; i++) out[i] = view.getFloat32(4 * i, true);
      return;
    }
    case "f16":
      for (let i = 0; i < n; i++) out[i] = f16BitsToF32(src[offset + 2 * i]! | (src[offset + 2 * i + 1]! << 8));
      return;
    case "q8_0": return dequantizeQ8_0(out, src.subarray(offset), n);
    case "q4_0": return dequantizeQ4_0(out, src.subarray(offset), n);
  }
}

/**
 * The head rows of n positions' rows in a cache of planes per KV head (KVCacheEncoding.headPlane),
 * position after position: out[i * nKvHeads + h] = h * headPlane + rows[i], the order of a source
 * holding each position's heads one after another
 */
export function headRowIndex(rows: ArrayLike<number>, n: number, nKvHeads: number, headPlane: number, out: Int32Array<ArrayBufferLike> = new Int32Array(n * nKvHeads)): Int32Array<ArrayBufferLike> {
  for (let i = 0; i < n; i++) for (let h = 0; h < nKvHeads; h++) out[i * nKvHeads + h] = h * headPlane + rows[i]!;
  return out;
}

/**
 * The rows of positions [0, nAll) of a cache side stored as one plane per KV head
 * (KVCacheEncoding.headPlane: head h of pool row r at head row h * headPlane + r, headFloats
 * floats each), as rows of every head in position order (row p: position p's), the layout the
 * kernels without planes read
 */
export function rowsFromHeadPlanes(cache: Float32Array, rows: Int32Array | undefined, nAll: number, nKvHeads: number, headFloats: number, headPlane: number): Float32Array {
  checkRows(rows, nAll, Math.min(headPlane, Math.floor(cache.length / (nKvHeads * headFloats))));
  const out = new Float32Array(nAll * nKvHeads * headFloats);
  for (let p = 0; p < nAll; p++) {
    const r = rows ? rows[p]! : p;
    for (let h = 0; h < nKvHeads; h++) {
      const at = (h * headPlane + r) * headFloats;
      out.set(cache.subarray(at, at + headFloats), (p * nKvHeads + h) * headFloats);
    }
  }
  return out;
}

/** the bytes of a host-memory backend's float array */
export function bytesOf(a: Float32Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}
