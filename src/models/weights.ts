import { GGUFError, type SourceTensorInfo, type TensorSource } from "../formats/index.js";
import { canMatmul, type Backend } from "../kernels/index.js";
import { convertRows, dequantizeRow, elementCount, GGMLType, rowByteLength, typeFromName, typeInfo, typeName, type Tensor } from "../tensor/index.js";
import { canDequantize, canQuantize } from "../tensor/quant/index.js";

/** weight formats a model can be quantized to while loading */
export const LOAD_QUANTIZATIONS = ["q8_0", "q4_0", "iq4_nl", "iq4_xs"] as const;
export type LoadQuantization = (typeof LOAD_QUANTIZATIONS)[number];

export interface WeightStoreOptions {
  /**
   * Quantize F32/F16/BF16 matrices to this format while reading them: row chunks are read,
   * widened to f32 and quantized straight into backend memory, so no full-precision copy of
   * the tensor is ever held. Vectors (norms, biases), GPT-2's position table and matrices
   * whose rows are not whole blocks keep their stored type, as llama.cpp's quantize does
   * (and as it does, "iq4_xs" stores matrices whose rows are not a multiple of 256 as IQ4_NL).
   */
  readonly quantize?: LoadQuantization;
}

/**
 * The one-line error for a quantize option that is not a LOAD_QUANTIZATIONS value; for a GGUF type
 * without a quantizer here (the grid i-quants, TQ1_0 / TQ2_0, MXFP4: files in them load as they
 * are) it says so
 */
export function quantizeRefusal(q: unknown): string {
  const choices = LOAD_QUANTIZATIONS.map((c) => JSON.stringify(c)).join(", ");
  const type = typeof q === "string" ? typeFromName(q) : undefined;
  if (type !== undefined && !canQuantize(type)) {
    return `quantize: cannot quantize to ${typeName(type)} (no quantizer: ggml's needs an importance matrix or its own tool; ${typeName(type)} GGUF files load as they are); expected ${choices}, found ${JSON.stringify(q)}`;
  }
  return `quantize: expected ${choices}, found ${JSON.stringify(q)}`;
}

const QUANT_TYPES: Record<LoadQuantization, GGMLType> = { q8_0: GGMLType.Q8_0, q4_0: GGMLType.Q4_0, iq4_nl: GGMLType.IQ4_NL, iq4_xs: GGMLType.IQ4_XS };
/** llama-quant.cpp's replacement for a type whose blocks do not divide a matrix's rows */
const ROW_FALLBACK = new Map<GGMLType, GGMLType>([[GGMLType.IQ4_XS, GGMLType.IQ4_NL]]);
const FLOAT_TYPES = new Set([GGMLType.F32, GGMLType.F16, GGMLType.BF16]);
/** read this many source bytes per chunk when converting */
const CHUNK_BYTES = 4 << 20;

/**
 * Hands a model builder the tensors it asks for, reading each one from its source straight
 * into the backend's weight memory (no second copy). Tensors that are always used together
 * (Q/K/V, gate/up) can be placed back to back and returned as one fused matrix, so one kernel
 * call (one thread synchronisation) computes all of them. At the end `finish()` rejects a
 * model with tensors nobody asked for — a sign that the architecture was misread.
 */
export class WeightStore {
  private readonly used = new Set<string>();
  private readonly quantType: GGMLType | undefined;
  bytesLoaded = 0;

  constructor(
    readonly source: TensorSource,
    private readonly backend: Backend,
    options: WeightStoreOptions = {},
  ) {
    this.quantType = options.quantize === undefined || !Object.hasOwn(QUANT_TYPES, options.quantize) ? undefined : QUANT_TYPES[options.quantize];
    if (options.quantize !== undefined && this.quantType === undefined) throw new Error(quantizeRefusal(options.quantize));
  }

  get path(): string {
    return this.source.path;
  }

  /** total weights in the source (for ModelInfo.parameterCount) */
  parameterCount(): number {
    let n = 0;
    for (const t of this.source.tensors.values()) n += elementCount(t.dims);
    return n;
  }

  has(name: string): boolean {
    return this.source.tensors.has(name);
  }

  info(name: string): SourceTensorInfo {
    const info = this.source.tensors.get(name);
    if (!info) throw new GGUFError(this.source.path, `tensor "${name}"`, "required tensor is missing");
    return info;
  }

  /** a weight matrix or vector, in its stored format (or the load quantization); checks its shape when `dims` is given */
  get(name: string, dims?: readonly number[]): Tensor {
    const info = this.info(name);
    this.checkDims(info, dims);
    const type = this.targetType(info);
    if (!canMatmul(type)) {
      throw new GGUFError(this.source.path, `tensor "${name}"`, `type ${typeName(type)} is an activation format that no kernel multiplies weights in; convert the model to Q8_0 or another weight type`);
    }
    const data = this.backend.allocWeights(this.byteLengthAs(info, type), name);
    this.readInto(info, type, data);
    this.checkFirstRow(info, type, data);
    return { name, type, dims: info.dims, data };
  }

  optional(name: string, dims?: readonly number[]): Tensor | undefined {
    return this.has(name) ? this.get(name, dims) : undefined;
  }

  /** a small vector (norm weight, bias) as f32, whatever its stored type */
  vector(name: string, length: number): Float32Array {
    const info = this.info(name);
    this.checkDims(info, [length]);
    const bytes = new Uint8Array(info.byteLength);
    this.readInto(info, info.type, bytes);
    const out = new Float32Array(length);
    dequantizeRow(info.type, bytes, out, length);
    // a norm weight or bias is read whole anyway: a NaN or Inf in it would only surface as NaN logits at sampling
    const bad = out.findIndex((v) => !Number.isFinite(v));
    if (bad >= 0) throw new GGUFError(this.source.path, `tensor "${name}"`, `element ${bad} is ${out[bad]}; the weights are damaged`);
    return out;
  }

  optionalVector(name: string, length: number): Float32Array | undefined {
    return this.has(name) ? this.vector(name, length) : undefined;
  }

  /**
   * Matrices with the same type and row length placed back to back: the result has
   * rows = sum of their rows, in the given order. Falls back to separate tensors when the
   * types differ.
   */
  fused(names: readonly string[], cols: number, rows: readonly number[]): Tensor | Tensor[] {
    const infos = names.map((n, i) => {
      const info = this.info(n);
      this.checkDims(info, [cols, rows[i]!]);
      return info;
    });
    const types = infos.map((i) => this.targetType(i));
    if (types.some((t) => t !== types[0])) return names.map((n, i) => this.get(n, [cols, rows[i]!]));
    const type = types[0]!;
    const sizes = infos.map((i) => this.byteLengthAs(i, type));
    const data = this.backend.allocWeights(sizes.reduce((s, b) => s + b, 0), names.join("+"));
    let off = 0;
    infos.forEach((info, i) => {
      this.readInto(info, type, data.subarray(off, off + sizes[i]!));
      this.checkFirstRow(info, type, data.subarray(off, off + sizes[i]!));
      off += sizes[i]!;
    });
    const totalRows = rows.reduce((s, r) => s + r, 0);
    return { name: names.join("+"), type, dims: [cols, totalRows], data };
  }

  /** the type a matrix is kept in: its own, or the load quantization where that applies */
  private targetType(info: SourceTensorInfo): GGMLType {
    const q = this.quantType;
    if (q === undefined || info.dims.length !== 2 || !FLOAT_TYPES.has(info.type)) return info.type;
    if (info.name === "position_embd.weight") return info.type;
    for (let type: GGMLType | undefined = q; type !== undefined; type = ROW_FALLBACK.get(type)) {
      if (info.dims[0]! % typeInfo(type).blockSize === 0) return type;
    }
    return info.type; // rows are not whole blocks
  }

  private byteLengthAs(info: SourceTensorInfo, type: GGMLType): number {
    return type === info.type ? info.byteLength : rowByteLength(type, info.dims[0]!) * (elementCount(info.dims) / info.dims[0]!);
  }

  /** reads `info` into `into` as `type`: a straight copy, or chunked widen-and-quantize */
  private readInto(info: SourceTensorInfo, type: GGMLType, into: Uint8Array): void {
    this.used.add(info.name);
    this.bytesLoaded += into.length;
    if (type === info.type) {
      this.source.read(info.name, into, 0);
      return;
    }
    const cols = info.dims[0]!;
    const rows = elementCount(info.dims) / cols;
    const srcRow = rowByteLength(info.type, cols), dstRow = rowByteLength(type, cols);
    const chunkRows = Math.max(1, Math.min(rows, Math.floor(CHUNK_BYTES / srcRow)));
    const chunk = new Uint8Array(chunkRows * srcRow);
    const f32 = new Float32Array(cols);
    for (let r0 = 0; r0 < rows; r0 += chunkRows) {
      const n = Math.min(chunkRows, rows - r0);
      const src = chunk.subarray(0, n * srcRow);
      this.source.read(info.name, src, r0 * srcRow);
      convertRows(info.type, src, type, into.subarray(r0 * dstRow, (r0 + n) * dstRow), cols, f32);
    }
  }

  /**
   * A NaN or Inf in the weights only shows as NaN logits at sampling time; the first row of every
   * matrix is checked at load (cheap: one row), as vector() checks norms and biases whole.
   */
  private checkFirstRow(info: SourceTensorInfo, type: GGMLType, data: Uint8Array): void {
    const cols = info.dims[0]!;
    if (!canDequantize(type) || data.length < rowByteLength(type, cols)) return;
    const row = new Float32Array(cols);
    dequantizeRow(type, data.subarray(0, rowByteLength(type, cols)), row, cols);
    const bad = row.findIndex((v) => !Number.isFinite(v));
    if (bad >= 0) throw new GGUFError(this.source.path, `tensor "${info.name}"`, `element ${bad} of its first row is ${row[bad]}; the weights are damaged`);
  }

  private checkDims(info: SourceTensorInfo, dims?: readonly number[]): void {
    if (!dims) return;
    const same = info.dims.length === dims.length && dims.every((d, i) => info.dims[i] === d);
    if (!same) {
      throw new GGUFError(this.source.path, `tensor "${info.name}"`, `expected shape [${dims.join(", ")}], found [${info.dims.join(", ")}] (${typeName(info.type)})`);
    }
  }

  /** closes the source; throws if it has tensors the model did not use */
  finish(): void {
    this.source.close();
    const unused = [...this.source.tensors.keys()].filter((n) => !this.used.has(n) && !this.source.ignorable?.has(n));
    if (unused.length > 0) {
      throw new GGUFError(this.source.path, "tensors", `${unused.length} tensor(s) not used by the architecture: ${unused.slice(0, 10).join(", ")}${unused.length > 10 ? ", ..." : ""}`);
    }
  }

  close(): void {
    this.source.close();
  }
}
