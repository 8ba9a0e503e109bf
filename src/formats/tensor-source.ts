import { openFile, type RandomAccessFile } from "../platform/host.js";
import type { GGMLType } from "../tensor/index.js";
import { readFailure } from "./errors.js";
import { GGUFError } from "./gguf-reader.js";
import type { GGUFHeader, GGUFTensorInfo } from "./gguf-types.js";

/** A tensor as a model builder sees it: llama.cpp's name, ggml type and ggml-order dims. */
export interface SourceTensorInfo {
  readonly name: string;
  readonly type: GGMLType;
  /** ggml order: dims[0] is the contiguous row length */
  readonly dims: readonly number[];
  readonly byteLength: number;
}

/**
 * Where weights come from: a GGUF file, or a Hugging Face folder whose safetensors are mapped
 * to llama.cpp's names and layout (see src/convert/hf-tensors.ts). Rows are contiguous in
 * every source, so a byte range is a row range.
 */
export interface TensorSource {
  /** the file or folder, for error messages */
  readonly path: string;
  readonly tensors: ReadonlyMap<string, SourceTensorInfo>;
  /** reads `into.length` bytes of tensor `name` (in its stored type) starting `byteOffset` bytes into it */
  read(name: string, into: Uint8Array, byteOffset: number): void;
  /** tensors in the files that a model may leave unused without that being an error (e.g. HF's rotary inv_freq buffers) */
  readonly ignorable?: ReadonlySet<string>;
  close(): void;
}

/**
 * The tensors of a GGUF file, read with positioned reads from one open file: the header's
 * path opened, or `file` (a Blob or URL in a browser, src/browser/files.ts), which the
 * source then owns and closes.
 */
export class GGUFTensorSource implements TensorSource {
  readonly path: string;
  readonly tensors: ReadonlyMap<string, GGUFTensorInfo>;
  private file: RandomAccessFile | undefined;

  constructor(header: GGUFHeader, file?: RandomAccessFile) {
    this.path = header.path;
    this.tensors = new Map(header.tensors.map((t) => [t.name, t]));
    this.file = file ?? openFile(header.path);
  }

  read(name: string, into: Uint8Array, byteOffset: number): void {
    const info = this.tensors.get(name);
    if (!info) throw new GGUFError(this.path, `tensor "${name}"`, "not in this file");
    if (this.file === undefined) throw new Error(`${this.path}: read of tensor "${name}" after close`);
    if (byteOffset + into.length > info.byteLength) throw new Error(`tensor "${name}": read of ${into.length} bytes at ${byteOffset} is outside its ${info.byteLength} bytes`);
    let got = 0;
    while (got < into.length) {
      let n: number;
      try {
        n = this.file.read(into, got, Math.min(into.length - got, 1 << 30), info.fileOffset + byteOffset + got);
      } catch (e) {
        throw readFailure(this.path, e);
      }
      // the header was read whole and checked against the file's size: the file changed since
      if (n === 0) throw new GGUFError(this.path, `tensor "${name}"`, `unexpected end of file at offset ${info.fileOffset + byteOffset + got} (the file is shorter than when it was opened)`);
      got += n;
    }
  }

  close(): void {
    if (this.file === undefined) return;
    try { this.file.close(); } catch { /* already closed */ }
    this.file = undefined;
  }
}
