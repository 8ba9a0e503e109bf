import { type GGMLType, rowByteLength, typeName } from "./dtypes.js";
import { dequantizeRow, quantizeRow } from "./quant/index.js";

/**
 * Re-encodes whole rows of `cols` values from `srcType` to `dstType` (widen to f32, then
 * quantize as ggml's reference quantizers do). `scratch` holds at least `cols` floats.
 */
export function convertRows(srcType: GGMLType, src: Uint8Array, dstType: GGMLType, dst: Uint8Array, cols: number, scratch = new Float32Array(cols)): void {
  const srcRow = rowByteLength(srcType, cols), dstRow = rowByteLength(dstType, cols);
  const rows = src.length / srcRow;
  if (!Number.isInteger(rows) || dst.length !== rows * dstRow) throw new Error(`convertRows: ${src.length} bytes of ${typeName(srcType)} rows of ${cols} do not fill ${dst.length} bytes of ${typeName(dstType)}`);
  for (let r = 0; r < rows; r++) {
    dequantizeRow(srcType, src.subarray(r * srcRow, (r + 1) * srcRow), scratch, cols);
    quantizeRow(dstType, scratch, dst.subarray(r * dstRow, (r + 1) * dstRow), cols);
  }
}
