import { closeSync, openSync } from "node:fs";
import { readTensorInto, GGUFError } from "../formats/gguf-reader.js";
import type { GGUFHeader, GGUFTensorInfo } from "../formats/gguf-types.js";
import type { Backend } from "../kernels/backend.js";
import { typeName } from "../tensor/dtypes.js";
import type { Tensor } from "../tensor/tensor.js";
import { dequantizeRow } from "../tensor/quant/index.js";

/**
 * Hands a model builder the tensors it asks for, reading each one from the file straight into
 * the backend's weight memory (no second copy). Tensors that are always used together (Q/K/V,
 * gate/up) can be placed back to back and returned as one fused matrix, so one kernel call
 * (one thread synchronisation) computes all of them. At the end `finish()` rejects a file
 * with tensors nobody asked for — a sign that the architecture was misread.
 */
export class WeightStore {
  private readonly infos = new Map<string, GGUFTensorInfo>();
  private readonly used = new Set<string>();
  private fd: number;
  bytesLoaded = 0;

  constructor(
    readonly header: GGUFHeader,
    private readonly backend: Backend,
  ) {
    for (const t of header.tensors) this.infos.set(t.name, t);
    this.fd = openSync(header.path, "r");
  }

  has(name: string): boolean {
    return this.infos.has(name);
  }

  info(name: string): GGUFTensorInfo {
    const info = this.infos.get(name);
    if (!info) throw new GGUFError(this.header.path, `tensor "${name}"`, "required tensor is missing");
    return info;
  }

  /** a weight matrix or vector, in its stored format; checks its shape when `dims` is given */
  get(name: string, dims?: readonly number[]): Tensor {
    const info = this.info(name);
    this.checkDims(info, dims);
    this.used.add(name);
    const data = this.backend.allocWeights(info.byteLength);
    readTensorInto(this.fd, info, data);
    this.bytesLoaded += info.byteLength;
    return { name, type: info.type, dims: info.dims, data };
  }

  optional(name: string, dims?: readonly number[]): Tensor | undefined {
    return this.has(name) ? this.get(name, dims) : undefined;
  }

  /** a small vector (norm weight, bias) as f32, whatever its stored type */
  vector(name: string, length: number): Float32Array {
    const t = this.get(name, [length]);
    const out = new Float32Array(length);
    dequantizeRow(t.type, t.data, out, length);
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
    if (infos.some((i) => i.type !== infos[0]!.type)) return names.map((n, i) => this.get(n, [cols, rows[i]!]));
    const total = infos.reduce((s, i) => s + i.byteLength, 0);
    const data = this.backend.allocWeights(total);
    let off = 0;
    for (const info of infos) {
      readTensorInto(this.fd, info, data.subarray(off, off + info.byteLength));
      off += info.byteLength;
      this.used.add(info.name);
    }
    this.bytesLoaded += total;
    const totalRows = rows.reduce((s, r) => s + r, 0);
    return { name: names.join("+"), type: infos[0]!.type, dims: [cols, totalRows], data };
  }

  private checkDims(info: GGUFTensorInfo, dims?: readonly number[]): void {
    if (!dims) return;
    const same = info.dims.length === dims.length && dims.every((d, i) => info.dims[i] === d);
    if (!same) {
      throw new GGUFError(this.header.path, `tensor "${info.name}"`, `expected shape [${dims.join(", ")}], found [${info.dims.join(", ")}] (${typeName(info.type)})`);
    }
  }

  /** closes the file; throws if the file has tensors the model did not use */
  finish(): void {
    closeSync(this.fd);
    const unused = [...this.infos.keys()].filter((n) => !this.used.has(n));
    if (unused.length > 0) {
      throw new GGUFError(this.header.path, "tensors", `${unused.length} tensor(s) not used by the architecture: ${unused.slice(0, 10).join(", ")}${unused.length > 10 ? ", ..." : ""}`);
    }
  }

  close(): void {
    try { closeSync(this.fd); } catch { /* already closed */ }
  }
}
