import type { GGMLType } from "../tensor/index.js";

/** GGUF metadata value type ids (gguf.h) */
export enum GGUFValueType {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
}

/**
 * A metadata value. Numeric arrays are typed arrays (a vocabulary's scores and token types
 * stay compact); 64-bit integers become numbers when exactly representable, else bigint.
 */
export type GGUFValue =
  | number
  | bigint
  | boolean
  | string
  | string[]
  | boolean[]
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | Float32Array
  | Float64Array
  | (number | bigint)[]
  | GGUFValue[];

/** A metadata entry keeps its declared type so a writer can round-trip it exactly. */
export interface GGUFEntry {
  readonly type: GGUFValueType;
  /** for arrays: the element type */
  readonly itemType?: GGUFValueType;
  readonly value: GGUFValue;
}

export interface GGUFTensorInfo {
  readonly name: string;
  /** ggml order: dims[0] is the contiguous row length */
  readonly dims: number[];
  readonly type: GGMLType;
  /** absolute byte offset of the tensor data in the file */
  readonly fileOffset: number;
  readonly byteLength: number;
}

export interface GGUFHeader {
  readonly path: string;
  readonly version: number;
  readonly fileSize: number;
  readonly alignment: number;
  /** absolute offset of the tensor data section */
  readonly dataOffset: number;
  readonly metadata: ReadonlyMap<string, GGUFEntry>;
  readonly tensors: readonly GGUFTensorInfo[];
}

export const GGUF_MAGIC = 0x46554747; // "GGUF" little-endian
export const GGUF_DEFAULT_ALIGNMENT = 32;
