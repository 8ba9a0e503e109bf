/**
 * ggml tensor types: ids as stored in GGUF files and their block layouts.
 * A "block" is the smallest unit a quantized row is made of: `blockSize` weights stored in
 * `typeSize` bytes. Row lengths must be a multiple of the block size.
 */
export enum GGMLType {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  /**
   * In-memory-only formats (not GGUF types): negative ids, which a GGUF file's u32 type field
   * can never hold, so no file can name them; isKnownType() (the reader's check) refuses them and
   * the GGUF writer refuses to write them. NF4: QLoRA's NormalFloat-4 code book, blocks of 64
   * with an f16 absmax. INT8: one f32 absmax / 127 scale per row, then the row's int8 values.
   */
  NF4 = -1,
  INT8 = -2,
}

export interface TypeInfo {
  readonly name: string;
  /** weights per block */
  readonly blockSize: number;
  /** bytes per block */
  readonly typeSize: number;
  /** bytes every row carries besides its blocks (a per-row scale), in front of them */
  readonly rowHeader?: number;
}

/** super-block size of the k-quants */
export const QK_K = 256;

const TYPES: ReadonlyMap<number, TypeInfo> = new Map<number, TypeInfo>([
  [GGMLType.F32, { name: "F32", blockSize: 1, typeSize: 4 }],
  [GGMLType.F16, { name: "F16", blockSize: 1, typeSize: 2 }],
  [GGMLType.BF16, { name: "BF16", blockSize: 1, typeSize: 2 }],
  [GGMLType.Q4_0, { name: "Q4_0", blockSize: 32, typeSize: 2 + 16 }],
  [GGMLType.Q4_1, { name: "Q4_1", blockSize: 32, typeSize: 2 + 2 + 16 }],
  [GGMLType.Q5_0, { name: "Q5_0", blockSize: 32, typeSize: 2 + 4 + 16 }],
  [GGMLType.Q5_1, { name: "Q5_1", blockSize: 32, typeSize: 2 + 2 + 4 + 16 }],
  [GGMLType.Q8_0, { name: "Q8_0", blockSize: 32, typeSize: 2 + 32 }],
  [GGMLType.Q8_1, { name: "Q8_1", blockSize: 32, typeSize: 4 + 32 }],
  [GGMLType.Q2_K, { name: "Q2_K", blockSize: QK_K, typeSize: QK_K / 16 + QK_K / 4 + 2 + 2 }],
  [GGMLType.Q3_K, { name: "Q3_K", blockSize: QK_K, typeSize: QK_K / 8 + QK_K / 4 + 12 + 2 }],
  [GGMLType.Q4_K, { name: "Q4_K", blockSize: QK_K, typeSize: 2 + 2 + 12 + QK_K / 2 }],
  [GGMLType.Q5_K, { name: "Q5_K", blockSize: QK_K, typeSize: 2 + 2 + 12 + QK_K / 8 + QK_K / 2 }],
  [GGMLType.Q6_K, { name: "Q6_K", blockSize: QK_K, typeSize: QK_K / 2 + QK_K / 4 + QK_K / 16 + 2 }],
  [GGMLType.Q8_K, { name: "Q8_K", blockSize: QK_K, typeSize: 4 + QK_K + (QK_K / 16) * 2 }],
  // ggml-common.h block_iq4_nl: f16 d, 16 bytes of 4-bit indices into kvalues_iq4nl
  [GGMLType.IQ4_NL, { name: "IQ4_NL", blockSize: 32, typeSize: 2 + 16 }],
  // block_iq4_xs: f16 d, u16 scales_h, 4 bytes scales_l, 128 bytes of indices
  [GGMLType.IQ4_XS, { name: "IQ4_XS", blockSize: QK_K, typeSize: 2 + 2 + QK_K / 64 + QK_K / 2 }],
  // the grid i-quants (ggml-common.h block_iq*; see quant/iq-grid.ts for the fields)
  [GGMLType.IQ2_XXS, { name: "IQ2_XXS", blockSize: QK_K, typeSize: 2 + QK_K / 4 }],
  [GGMLType.IQ2_XS, { name: "IQ2_XS", blockSize: QK_K, typeSize: 2 + QK_K / 4 + QK_K / 32 }],
  [GGMLType.IQ2_S, { name: "IQ2_S", blockSize: QK_K, typeSize: 2 + QK_K / 4 + QK_K / 16 }],
  [GGMLType.IQ3_XXS, { name: "IQ3_XXS", blockSize: QK_K, typeSize: 2 + (3 * QK_K) / 8 }],
  [GGMLType.IQ3_S, { name: "IQ3_S", blockSize: QK_K, typeSize: 2 + (13 * QK_K) / 32 + QK_K / 64 }],
  [GGMLType.IQ1_S, { name: "IQ1_S", blockSize: QK_K, typeSize: 2 + QK_K / 8 + QK_K / 16 }],
  [GGMLType.IQ1_M, { name: "IQ1_M", blockSize: QK_K, typeSize: QK_K / 8 + QK_K / 16 + QK_K / 32 }],
  // ternary: block_tq1_0 (qs[48], qh[4], f16 d), block_tq2_0 (qs[64], f16 d)
  [GGMLType.TQ1_0, { name: "TQ1_0", blockSize: QK_K, typeSize: 2 + QK_K / 64 + (QK_K - (4 * QK_K) / 64) / 5 }],
  [GGMLType.TQ2_0, { name: "TQ2_0", blockSize: QK_K, typeSize: 2 + QK_K / 4 }],
  // block_mxfp4: E8M0 exponent, 16 bytes of E2M1 nibbles
  [GGMLType.MXFP4, { name: "MXFP4", blockSize: 32, typeSize: 1 + 16 }],
  [GGMLType.I8, { name: "I8", blockSize: 1, typeSize: 1 }],
  [GGMLType.I16, { name: "I16", blockSize: 1, typeSize: 2 }],
  [GGMLType.I32, { name: "I32", blockSize: 1, typeSize: 4 }],
  [GGMLType.I64, { name: "I64", blockSize: 1, typeSize: 8 }],
  [GGMLType.F64, { name: "F64", blockSize: 1, typeSize: 8 }],
  [GGMLType.NF4, { name: "NF4", blockSize: 64, typeSize: 2 + 32 }],
  [GGMLType.INT8, { name: "INT8", blockSize: 1, typeSize: 1, rowHeader: 4 }],
]);

/** formats that live only in memory (load-time quantization), never in a file */
export function isMemoryOnlyType(type: number): boolean {
  return type < 0 && TYPES.has(type);
}

/** a type id a GGUF file may hold */
export function isKnownType(type: number): type is GGMLType {
  return type >= 0 && TYPES.has(type);
}

export function typeInfo(type: GGMLType): TypeInfo {
  const info = TYPES.get(type);
  if (!info) throw new Error(`unknown ggml tensor type id ${type}`);
  return info;
}

export function typeName(type: number): string {
  return TYPES.get(type)?.name ?? `unknown(${type})`;
}

export function typeFromName(name: string): GGMLType | undefined {
  for (const [id, info] of TYPES) if (info.name.toLowerCase() === name.toLowerCase()) return id;
  return undefined;
}

/**
 * Bytes needed by one row of `n` weights. Throws when `n` is not a whole number of blocks.
 */
export function rowByteLength(type: GGMLType, n: number): number {
  const { blockSize, typeSize, name, rowHeader = 0 } = typeInfo(type);
  if (n % blockSize !== 0) throw new Error(`row length ${n} is not a multiple of the ${name} block size ${blockSize}`);
  return rowHeader + (n / blockSize) * typeSize;
}
