import { GGUFError, type SourceTensorInfo, type TensorSource } from "../formats/index.js";
import { canMatmul, type Backend } from "../kernels/index.js";
import { convertRows, dequantizeRow, elementCount, FILE_QUANTIZATIONS, GGMLType, quantizationType, QUANTIZATIONS, rowByteLength, typeForRows, typeName, type Quantization, type Tensor } from "../tensor/index.js";
import { canDequantize } from "../tensor/quant/index.js";

/** weight formats a model can be quantized to while loading: every GGUF quantization tsllm writes, and the in-memory nf4 / int8 */
export const LOAD_QUANTIZATIONS: readonly Quantization[] = QUANTIZATIONS;
export type LoadQuantization = Quantization;

export interface WeightStoreOptions {
  /**
   * Quantize F32/F16/BF16 matrices to this format while reading them: row chunks are read,
   * widened to f32 and quantized straight into backend memory, so no full-precision copy of
   * the tensor is ever held. Vectors (norms, biases), GPT-2's position table and matrices
   * whose rows are not whole blocks keep their stored type, as llama.cpp's quantize does
   * (and as it does, a type whose blocks do not divide a matrix's rows falls back: iq4_xs ->
   * IQ4_NL, q2_k / q3_k -> Q4_0, q4_k -> Q5_0, q5_k -> Q5_1, q6_k -> Q8_0; nf4 -> INT8).
   */
  readonly quantize?: LoadQuantization;
}

const FLOAT_TYPES = new Set([GGMLType.F32, GGMLType.F16, GGMLType.BF16]);
/**
 * The type a tensor is kept in when loaded with quantization `q`: its own, or `q` (or llama.cpp's
 * fallback for it) for F32/F16/BF16 matrices; vectors, GPT-2's position table and matrices whose
 * rows are not whole blocks of either keep their stored type.
 */
export function loadedType(info: Pick<SourceTensorInfo, "name" | "type" | "dims">, q: GGMLType | undefined): GGMLType {
  if (q === undefined || info.dims.length !== 2 || !FLOAT_TYPES.has(info.type)) return info.type;
  if (info.name === "position_embd.weight") return info.type;
  return typeForRows(q, info.dims[0]!) ?? info.type;
}

/** the bytes of tensor `info` stored as `type` */
export function byteLengthAs(info: Pick<SourceTensorInfo, "type" | "dims" | "byteLength">, type: GGMLType): number {
  return type === info.type ? info.byteLength : rowByteLength(type, info.dims[0]!) * (elementCount(info.dims) / info.dims[0]!);
}

/** bytes of the weights of `tensors` once loaded with quantization `q` (undefined: as stored) */
export function loadedWeightBytes(tensors: Iterable<SourceTensorInfo>, q: Quantization | undefined): number {
  const type = q === undefined ? undefined : quantizationType(q);
  let n = 0;
  for (const t of tensors) n += byteLengthAs(t, loadedType(t, type));
  return n;
}

/** 2-D tensors a model only looks rows up in (getRows: position and token-type tables), never multiplies */
const LOOKED_UP_ONLY = new Set(["position_embd.weight", "token_types.weight"]);

/**
 * The matrices of a model, loaded with quantization `q`, whose type `canMultiply` refuses: how many
 * of each type and the first, in the model's order. Tables only looked up are not counted (the
 * token embedding of a model with its own output matrix, position and token-type tables).
 */
export function matricesWithoutKernel(tensors: ReadonlyMap<string, Pick<SourceTensorInfo, "name" | "type" | "dims">>, q: GGMLType | undefined, canMultiply: (type: GGMLType) => boolean): Map<GGMLType, { tensors: number; first: string }> {
  const lookedUpOnly = tensors.has("output.weight") ? "token_embd.weight" : undefined;
  const missing = new Map<GGMLType, { tensors: number; first: string }>();
  for (const t of tensors.values()) {
    if (t.dims.length !== 2 || t.name === lookedUpOnly || LOOKED_UP_ONLY.has(t.name)) continue;
    const type = loadedType(t, q);
    if (canMultiply(type)) continue;
    const e = missing.get(type) ?? { tensors: 0, first: t.name };
    e.tensors++;
    missing.set(type, e);
  }
  return missing;
}

/**
 * Refuses, before any weight is read, a model with matrices the backend has no matmul kernel for
 * (webgpu: the in-memory NF4 and INT8 of quantize on load), which would otherwise be read whole onto the device
 * and fail only at the first forward pass. No fallback to the host for those matmuls: every
 * forward would copy activations off the device and back for each such matrix (all of them, in
 * such a model), slower than the wasm backend it would amount to.
 */
export function checkMatmulTypes(path: string, tensors: ReadonlyMap<string, Pick<SourceTensorInfo, "name" | "type" | "dims">>, quantize: Quantization | undefined, backend: Pick<Backend, "name" | "canMultiply">): void {
  const can = backend.canMultiply;
  if (!can) return;
  const q = quantize === undefined ? undefined : quantizationType(quantize);
  const missing = [...matricesWithoutKernel(tensors, q, can)];
  if (missing.length === 0) return;
  const what = missing.map(([type, e]) => `${e.tensors} ${e.tensors === 1 ? "matrix is" : "matrices are"} ${typeName(type)} (${e.first}${e.tensors > 1 ? ", ..." : ""})`).join(", ");
  const from = q === undefined ? "" : ` after quantize ${JSON.stringify(quantize)}`;
  const to = FILE_QUANTIZATIONS.filter((t) => can(quantizationType(t)));
  const first = to.includes("q4_k") ? "q4_k" : to[0];
  const others = `(or ${to.filter((t) => t !== first).join(", ")})`;
  // quantized on load (every type a GGUF file stores has a webgpu kernel; NF4 and INT8 do not): another --quantize
  const convert = to.length === 0 ? "" : q === undefined ? `, or convert it to a type it multiplies: tsllm quantize IN OUT.gguf --type ${first} --pure ${others}` : `, or quantize it on load to a type it multiplies: --quantize ${first} ${others}`;
  throw new GGUFError(path, "tensors", `${what}${from}, which the ${backend.name} backend has no matmul kernel for: load it with the wasm backend (--backend wasm)${convert}`);
}

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
    this.quantType = options.quantize === undefined ? undefined : quantizationType(options.quantize);
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
    if (type !== info.type) this.checkBackendType(name, type);
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
    if (infos.some((i) => i.type !== type) && this.backend.canMultiply?.(type) === false) return names.map((n, i) => this.get(n, [cols, rows[i]!]));
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

  /**
   * A load quantization to a type the backend does not multiply (webgpu has fewer kernels than
   * the reference ones) is refused here, at load, not at the first matmul. (Stored types are
   * left to checkMatmulTypes, which loadModel runs before any read: a table only looked up by
   * getRows needs no matmul kernel.)
   */
  private checkBackendType(name: string, type: GGMLType): void {
    if (this.backend.canMultiply?.(type) !== false) return;
    const q = this.quantType === undefined ? "" : ` (from quantize ${JSON.stringify(typeName(this.quantType).toLowerCase())})`;
    throw new GGUFError(this.source.path, `tensor "${name}"`, `type ${typeName(type)}${q} has no ${this.backend.name} matmul kernel; use the wasm backend, or a type the ${this.backend.name} backend multiplies`);
  }

  /** the type a matrix is kept in: its own, or the load quantization where that applies */
  private targetType(info: SourceTensorInfo): GGMLType {
    return loadedType(info, this.quantType);
  }

  private byteLengthAs(info: SourceTensorInfo, type: GGMLType): number {
    return byteLengthAs(info, type);
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
