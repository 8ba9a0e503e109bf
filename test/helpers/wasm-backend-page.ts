/**
 * A test page's dedicated worker: creates the wasm backend as the browser's engine worker does
 * (bundled by buildBrowser() with the kernel worker, Web Worker threads, the kernels fetched from
 * beside the bundle) and runs the matmuls it is sent. A worker, not the page: the pool's main
 * thread sleeps in Atomics.wait when a job outlasts its spin, which a window may not do.
 */
import { createBrowserBackend } from "../../src/browser/backends.js";
import type { WasmBackend } from "../../src/kernels/wasm/backend.js";
import type { WorkerScope } from "../../src/platform/web.js";
import type { GGMLType } from "../../src/tensor/dtypes.js";

const scope = globalThis as unknown as WorkerScope;
/** for the page itself, which may not create a threaded backend */
export { createBrowserBackend };

export interface MatmulRequest {
  threads: number;
  tokens: number[];
  x: number[];
  weights: { rows: number; cols: number; type: GGMLType; data: number[] }[];
}

export interface MatmulReply {
  llamaCppOrder: string;
  vnniDot: boolean;
  threads: number;
  /** per weight, per token count: the output's f32 bits */
  out: number[][];
}

async function runMatmuls(a: MatmulRequest): Promise<MatmulReply> {
  const b = await createBrowserBackend("wasm", { threads: a.threads, simd: "relaxed" });
  try {
    const out: number[][] = [];
    for (const w of a.weights) {
      const wd = b.allocWeights(w.data.length);
      wd.set(w.data);
      const tensor = { name: "w", type: w.type, dims: [w.cols, w.rows], data: wd };
      for (const n of a.tokens) {
        const x = b.allocActivations(n * w.cols);
        b.write(x, new Float32Array(a.x.slice(0, n * w.cols)));
        const o = b.allocActivations(n * w.rows);
        b.matmul(o, tensor, x, n);
        const result = await b.read(o);
        out.push(Array.from(new Uint32Array(result.buffer, result.byteOffset, result.length)));
      }
    }
    const wasm = b as WasmBackend;
    return { llamaCppOrder: wasm.llamaCppOrder, vnniDot: wasm.vnniDot, threads: wasm.threads, out };
  } finally {
    b.dispose();
  }
}

scope.onmessage = (e) => {
  runMatmuls(e.data as MatmulRequest).then(
    (reply) => scope.postMessage({ reply }),
    (error: Error) => scope.postMessage({ error: error.stack ?? String(error) }),
  );
};
