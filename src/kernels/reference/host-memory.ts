import type { Backend, DeviceArray, UnaryOp } from "../backend.js";
import { gelu, geluErf, relu, swiglu, tanh } from "../ops/activations.js";
import { addBias, addInPlace } from "../ops/elementwise.js";
import { layerNorm, rmsNorm } from "../ops/norm.js";
import { applyRope } from "../ops/rope.js";
import { hadamardInPlace } from "../ops/hadamard.js";
import { bytesOf, encodeKVRow, kvRowFloats, type KVRowEncoding } from "./kv-encoding.js";

/**
 * The part of the contract every backend whose memory the host addresses shares (reference,
 * wasm): its device arrays ARE Float32Arrays (of an ArrayBuffer or of a wasm memory), so views,
 * reads, writes and row copies are typed-array operations, and the element-wise ops are the
 * kernels/ops functions themselves, run on that memory in place. A backend spreads these and
 * replaces the ops it has faster kernels for.
 */
export type HostMemoryOps = Pick<Backend, "view" | "write" | "clear" | "read" | "readSync" | "scatterRows" | "gatherRows" | "copy2d" | "rmsNorm" | "layerNorm" | "rope" | "addBias" | "add" | "swiglu" | "unary">;

/** the Float32Array behind a host backend's device array (the arrays its own alloc made, or a caller's) */
export function host(a: DeviceArray): Float32Array {
  if (!(a instanceof Float32Array)) throw new TypeError("expected an array of this backend's memory (a Float32Array on host-memory backends)");
  return a;
}

/** a Float32Array of a host backend's memory as the contract's device array (the same object, still typed as the Float32Array it is) */
export function device<T extends Float32Array>(a: T): T & DeviceArray {
  return a as T & DeviceArray;
}

const UNARY: Record<UnaryOp, (out: Float32Array, x: Float32Array, n: number) => void> = { gelu, "gelu-erf": geluErf, relu, tanh };

/** scatterRows for an encoded KV cache: each row rotated (a copy), then encoded into its slot of kvRowFloats floats */
function scatterEncoded(d: Float32Array, dstRows: Int32Array, s: Float32Array, width: number, n: number, encoding: KVRowEncoding): void {
  const rowFloats = kvRowFloats(encoding.type, width), bytes = bytesOf(d);
  const row = new Float32Array(width);
  for (let t = 0; t < n; t++) {
    const r = dstRows[t]!;
    if (r < 0 || (r + 1) * rowFloats > d.length) throw new Error(`scatterRows: row ${r} is outside the destination's ${Math.floor(d.length / rowFloats)} rows`);
    row.set(s.subarray(t * width, (t + 1) * width));
    if (encoding.rotation > 0) hadamardInPlace(row, 0, width, encoding.rotation);
    encodeKVRow(encoding.type, bytes, 4 * r * rowFloats, row, 0, width);
  }
}

function checkCount(op: string, n: number, ...arrays: DeviceArray[]): void {
  if (!Number.isInteger(n) || n < 0) throw new Error(`${op}: element count must be a non-negative integer, got ${n}`);
  for (const a of arrays) if (a.length < n) throw new Error(`${op}: ${n} elements asked, an array holds ${a.length}`);
}

/** `alive(op)` throws once the backend is disposed */
export function hostMemoryOps(alive: (op: string) => void): HostMemoryOps {
  return {
    view(a, offset, length) {
      const x = host(a);
      const end = length === undefined ? x.length : offset + length;
      if (!Number.isInteger(offset) || offset < 0 || end > x.length || end < offset) throw new Error(`view: floats [${offset}, ${end}) are outside an array of ${x.length}`);
      return device(x.subarray(offset, end));
    },
    write(dst, src, offset = 0) {
      alive("write");
      const d = host(dst);
      if (offset < 0 || offset + src.length > d.length) throw new Error(`write: ${src.length} floats at ${offset} do not fit an array of ${d.length}`);
      d.set(src, offset);
    },
    clear(a) {
      alive("clear");
      host(a).fill(0);
    },
    read(a) {
      alive("read");
      return Promise.resolve(host(a).slice());
    },
    readSync(a) {
      alive("read");
      return host(a).slice();
    },
    scatterRows(dst, dstRows, src, width, n, encoding) {
      alive("scatterRows");
      const d = host(dst), s = host(src);
      if (s.length < n * width || dstRows.length < n) throw new Error(`scatterRows: ${n} rows of ${width} asked, source holds ${s.length} floats and the row index ${dstRows.length} rows`);
      if (encoding && (encoding.type !== "f32" || encoding.rotation !== 0)) return scatterEncoded(d, dstRows, s, width, n, encoding);
      // runs of consecutive rows (a whole prompt, for a lone sequence) in one copy each
      for (let t = 0; t < n;) {
        const r = dstRows[t]!;
        let run = 1;
        while (t + run < n && dstRows[t + run] === r + run) run++;
        if (r < 0 || (r + run) * width > d.length) throw new Error(`scatterRows: row ${r} is outside the destination's ${Math.floor(d.length / width)} rows`);
        d.set(s.subarray(t * width, (t + run) * width), r * width);
        t += run;
      }
    },
    gatherRows(dst, src, srcRows, width) {
      alive("gatherRows");
      const d = host(dst), s = host(src);
      if (d.length < srcRows.length * width) throw new Error(`gatherRows: ${srcRows.length} rows of ${width} do not fit a destination of ${d.length} floats`);
      for (let i = 0; i < srcRows.length; i++) {
        const r = srcRows[i]!;
        if (!Number.isInteger(r) || r < 0 || (r + 1) * width > s.length) throw new Error(`gatherRows: row ${r} is outside the source's ${Math.floor(s.length / width)} rows`);
        d.set(s.subarray(r * width, (r + 1) * width), i * width);
      }
    },
    copy2d(dst, dstOffset, dstStride, src, srcOffset, srcStride, rows, width) {
      alive("copy2d");
      const d = host(dst), s = host(src);
      if (rows === 0 || width === 0) return;
      if (dstOffset + (rows - 1) * dstStride + width > d.length || srcOffset + (rows - 1) * srcStride + width > s.length) throw new Error(`copy2d: ${rows} rows of ${width} floats run past the destination (${d.length}) or the source (${s.length})`);
      if (dstStride === width && srcStride === width) return void (d === s ? d.copyWithin(dstOffset, srcOffset, srcOffset + rows * width) : d.set(s.subarray(srcOffset, srcOffset + rows * width), dstOffset));
      for (let r = 0; r < rows; r++) d.set(s.subarray(srcOffset + r * srcStride, srcOffset + r * srcStride + width), dstOffset + r * dstStride);
    },
    rmsNorm(out, x, weight, width, rows, eps) {
      alive("rmsNorm");
      checkCount("rmsNorm", width * rows, out, x);
      rmsNorm(host(out), host(x), weight, width, rows, eps);
    },
    layerNorm(out, x, weight, bias, width, rows, eps) {
      alive("layerNorm");
      checkCount("layerNorm", width * rows, out, x);
      layerNorm(host(out), host(x), weight, bias, width, rows, eps);
    },
    rope(x, nTokens, nHeads, positions, p) {
      alive("rope");
      checkCount("rope", nTokens * nHeads * p.headDim, x);
      applyRope(host(x), nTokens, nHeads, positions, p);
    },
    addBias(x, bias, rows) {
      alive("addBias");
      checkCount("addBias", rows * bias.length, x);
      addBias(host(x), bias, rows);
    },
    add(x, y) {
      alive("add");
      checkCount("add", x.length, y);
      addInPlace(host(x), host(y));
    },
    swiglu(out, gate, up, n) {
      alive("swiglu");
      checkCount("swiglu", n, out, gate, up);
      swiglu(host(out), host(gate), host(up), n);
    },
    unary(op, out, x, n) {
      alive("unary");
      const f = UNARY[op];
      if (!f) throw new Error(`unary: unknown op ${JSON.stringify(op)} (expected ${Object.keys(UNARY).join(", ")})`);
      checkCount(`unary ${op}`, n, out, x);
      f(host(out), host(x), n);
    },
  };
}

/** plain host arrays with the contract's memory ops: the default storage of a KV pool made without a backend (tests, tools) */
export function hostMemory(): Pick<Backend, "allocActivations"> & HostMemoryOps {
  return {
    allocActivations(length) {
      if (!Number.isSafeInteger(length) || length < 0) throw new Error(`allocActivations: length must be a non-negative integer, got ${length}`);
      return device(new Float32Array(length));
    },
    ...hostMemoryOps(() => {}),
  };
}
