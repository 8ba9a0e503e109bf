import type { Backend, DeviceArray, MatmulEpilogue } from "../backend.js";
import { rowByteLength, typeName, rowCount, type Tensor } from "../../tensor/index.js";
import { dequantizeRow } from "../../tensor/quant/index.js";
import { VEC_DOT } from "./vec-dot.js";
import { attention } from "../ops/attention.js";
import { attentionEncoded, attentionMatmulOrder } from "./kv-attention.js";
import { bytesOf, isPlainF32, kvRowFloats, rowsFromHeadPlanes, type KVCacheType } from "./kv-encoding.js";
import { bidirectionalAttention } from "../ops/bidirectional-attention.js";
import { addBias } from "../ops/elementwise.js";
import { geluErf } from "../ops/activations.js";
import { device, host, hostMemoryOps } from "./host-memory.js";

/**
 * The plain-TypeScript backend: the executable spec the WebAssembly kernels are tested against.
 * One thread, no caching: every matmul converts each activation row once to the weight's
 * vec_dot type (as ggml does), then takes its dot product with every weight row.
 */

const ALIGN = 64;

/** a weight matrix's columns, rows and row bytes, checked against its data (every backend's matmul / getRows) */
export function matrixShape(op: string, w: Tensor): { cols: number; rows: number; rowBytes: number } {
  const { cols, rows, rowBytes } = matrixDims(op, w);
  if (w.data.length < rows * rowBytes) {
    throw new Error(`${op}: tensor ${w.name} (${typeName(w.type)} [${w.dims.join(", ")}]) needs ${rows * rowBytes} bytes, has ${w.data.length}`);
  }
  return { cols, rows, rowBytes };
}

/** a matrix's columns, rows and row bytes from its dims and type alone (a backend whose device holds the bytes checks them at upload) */
export function matrixDims(op: string, w: Tensor): { cols: number; rows: number; rowBytes: number } {
  const cols = w.dims[0];
  if (cols === undefined || w.dims.length < 1) throw new Error(`${op}: tensor ${w.name} has no dimensions`);
  return { cols, rows: rowCount(w), rowBytes: rowByteLength(w.type, cols) };
}

/** a matmul's epilogue: a bias of one float per output row, a known activation */
export function checkEpilogue(w: Tensor, rows: number, epilogue: MatmulEpilogue | undefined): void {
  const bias = epilogue?.bias;
  if (bias && bias.length !== rows) throw new Error(`matmul ${w.name}: bias holds ${bias.length} floats, expected ${rows} (one per output row)`);
  const activation = epilogue?.activation;
  if (activation !== undefined && activation !== "gelu-erf") throw new Error(`matmul ${w.name}: unknown activation ${JSON.stringify(activation)} (expected "gelu-erf")`);
}

export function createReferenceBackend(): Backend {
  let disposed = false;
  const alive = (op: string): void => {
    if (disposed) throw new Error(`reference backend: ${op} called after dispose()`);
  };

  return {
    name: "reference",
    llamaCppOrder: "all",
    threads: 1,
    ...hostMemoryOps(alive),

    allocWeights(byteLength: number): Uint8Array {
      alive("allocWeights");
      if (!Number.isSafeInteger(byteLength) || byteLength < 0) {
        throw new Error(`allocWeights: byteLength must be a non-negative integer, got ${byteLength}`);
      }
      // a fresh ArrayBuffer starts the view at offset 0, so offset 0 is 64-byte aligned
      // relative to the buffer; round the length up so consumers may read whole 64-byte lines
      const buffer = new ArrayBuffer(Math.ceil(byteLength / ALIGN) * ALIGN);
      return new Uint8Array(buffer, 0, byteLength);
    },

    matmul(outArray: DeviceArray, w: Tensor, xArray: DeviceArray, nTokens: number, epilogue?: MatmulEpilogue): void {
      alive("matmul");
      const out = host(outArray), x = host(xArray);
      const vd = VEC_DOT.get(w.type);
      if (!vd) throw new Error(`matmul: tensor ${w.name} has type ${typeName(w.type)}, which the reference backend cannot multiply`);
      const { cols, rows, rowBytes } = matrixShape("matmul", w);
      checkEpilogue(w, rows, epilogue);
      if (!Number.isInteger(nTokens) || nTokens < 0) throw new Error(`matmul: nTokens must be a non-negative integer, got ${nTokens}`);
      if (x.length < nTokens * cols) throw new Error(`matmul ${w.name}: x holds ${x.length} floats, expected ${nTokens} x ${cols}`);
      if (out.length < nTokens * rows) throw new Error(`matmul ${w.name}: out holds ${out.length} floats, expected ${nTokens} x ${rows}`);
      const xq = new Uint8Array(rowByteLength(vd.vecDotType, cols));
      for (let t = 0; t < nTokens; t++) {
        vd.convert(x.subarray(t * cols, (t + 1) * cols), xq, cols);
        for (let r = 0; r < rows; r++) out[t * rows + r] = vd.dot(w.data, r * rowBytes, xq, 0, cols);
      }
      const result = out.subarray(0, nTokens * rows);
      if (epilogue?.bias) addBias(result, epilogue.bias, nTokens);
      if (epilogue?.activation === "gelu-erf") geluErf(result, result, result.length);
    },

    getRows(outArray: DeviceArray, w: Tensor, ids: ArrayLike<number>): void {
      alive("getRows");
      const out = host(outArray);
      const { cols, rows, rowBytes } = matrixShape("getRows", w);
      if (out.length < ids.length * cols) throw new Error(`getRows ${w.name}: out holds ${out.length} floats, expected ${ids.length} x ${cols}`);
      for (let i = 0; i < ids.length; i++) {
        const id = ids[i]!;
        if (!Number.isInteger(id) || id < 0 || id >= rows) throw new Error(`getRows ${w.name}: row id ${id} at index ${i} is outside 0..${rows - 1}`);
      }
      for (let i = 0; i < ids.length; i++) {
        const id = ids[i]!;
        dequantizeRow(w.type, w.data.subarray(id * rowBytes, (id + 1) * rowBytes), out.subarray(i * cols, (i + 1) * cols), cols);
      }
    },

    allocActivations(length: number): DeviceArray {
      alive("allocActivations");
      if (!Number.isSafeInteger(length) || length < 0) throw new Error(`allocActivations: length must be a non-negative integer, got ${length}`);
      return device(new Float32Array(length));
    },

    attention(out, q, keys, values, nTokens, startPos, nHeads, nKvHeads, headDim, scale, rows, encoding): void {
      alive("attention");
      const plane = encoding?.headPlane;
      if (encoding && plane) {
        // planes per KV head: the attended rows gathered into rows of every head, position order
        const nAll = startPos + nTokens;
        const gather = (a: DeviceArray, type: KVCacheType) => device(rowsFromHeadPlanes(host(a), rows, nAll, nKvHeads, kvRowFloats(type, headDim), plane));
        const { headPlane: _, ...byRows } = encoding;
        [keys, values, rows, encoding] = [gather(keys, encoding.k.type), gather(values, encoding.v.type), undefined, byRows];
      }
      if (encoding && !isPlainF32(encoding)) return (encoding.flash ? attentionEncoded : attentionMatmulOrder)(host(out), host(q), bytesOf(host(keys)), bytesOf(host(values)), nTokens, startPos, nHeads, nKvHeads, headDim, scale, encoding, rows);
      attention(host(out), host(q), host(keys), host(values), nTokens, startPos, nHeads, nKvHeads, headDim, scale, rows);
    },

    bidirectionalAttention(out, q, k, v, n, nHeads, headDim, scale, stride): void {
      alive("bidirectionalAttention");
      bidirectionalAttention(host(out), host(q), host(k), host(v), n, nHeads, headDim, scale, stride);
    },

    dispose(): void {
      disposed = true;
    },
  };
}
