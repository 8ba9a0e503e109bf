import { type GGMLType, rowByteLength } from "./dtypes.js";

/**
 * A named tensor in any ggml format. `dims` are in ggml order: dims[0] is the contiguous
 * (row) length, dims[1] the number of rows, ... `data` is the raw block bytes; for weights it
 * is a view into the backend's weight arena so kernels use it in place.
 */
export interface Tensor {
  readonly name: string;
  readonly type: GGMLType;
  readonly dims: readonly number[];
  readonly data: Uint8Array;
}

export function elementCount(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) n *= d;
  return n;
}

/** number of rows of a (possibly >2-D) tensor: every dimension but the first */
export function rowCount(t: Tensor): number {
  return elementCount(t.dims) / t.dims[0]!;
}

/** bytes of one row of `t` */
export function rowBytes(t: Tensor): number {
  return rowByteLength(t.type, t.dims[0]!);
}
