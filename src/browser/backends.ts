/**
 * The compute backends a page may ask for. "wasm" (the default) is the WebAssembly SIMD
 * backend with Web Worker threads; "reference" the plain TypeScript kernels (no threads, no
 * cross-origin isolation needed); "webgpu" plugs in here once it exists.
 */
import type { Backend } from "../kernels/backend.js";
import { createReferenceBackend } from "../kernels/reference/index.js";
import { createWasmBackend } from "../kernels/wasm/backend.js";
import { createWebGPUBackend } from "../kernels/webgpu/index.js";
import { preloadKernels } from "../kernels/wasm/host.browser.js";
import { cpuCount } from "../platform/host.js";
import { web } from "../platform/web.js";

export type BrowserBackendName = "wasm" | "webgpu" | "reference";
export const BROWSER_BACKENDS: readonly BrowserBackendName[] = ["wasm", "webgpu", "reference"];

export interface BrowserBackendOptions {
  /** wasm: threads computing each matmul, this worker included (default: navigator.hardwareConcurrency, at most 8) */
  threads?: number;
  /** wasm: "auto" (default: Relaxed SIMD where the browser has it), "plain" or "relaxed" */
  simd?: "auto" | "plain" | "relaxed";
  /** wasm: bytes one WebAssembly memory may hold (default 4 GiB; a small limit spreads a small model over several memories, as one over 4 GiB is) */
  memoryLimitBytes?: number;
  /** wasm: the folder with kernels.wasm, kernels-relaxed.wasm and kernel-worker.js (default: beside the engine worker's script) */
  assetsUrl?: string | URL;
}

/** the wasm backend's threads when none are asked for: the browser's cores, at most 8 */
export const defaultWasmThreads = (): number => Math.min(8, cpuCount());

/** the folder of this build's files: where the bundled engine worker (this module's bundle) was loaded from */
const assetsBase = (): URL => new URL(".", import.meta.url);

export async function createBrowserBackend(name: BrowserBackendName = "wasm", options: BrowserBackendOptions = {}): Promise<Backend> {
  switch (name) {
    case "reference":
      return createReferenceBackend();
    case "webgpu":
      // navigator.gpu; an error naming what is missing where the browser has none
      return createWebGPUBackend();
    case "wasm": {
      if (web.crossOriginIsolated === false && web.isSecureContext === false) {
        // COOP/COEP isolate only a secure context: saying "send the headers" sent an author on a LAN address round in circles
        throw new Error("wasm backend: the page is not a secure context (http:// from a host other than localhost), and browsers isolate (give SharedArrayBuffer to) only secure ones: serve it over https: (or from localhost) with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp, or load with backend: \"reference\" (one thread, plain TypeScript, slower)");
      }
      if (web.crossOriginIsolated === false) {
        throw new Error("wasm backend: the page is not cross-origin isolated, so it has no SharedArrayBuffer; serve it with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp, or load with backend: \"reference\" (one thread, plain TypeScript, slower)");
      }
      const base = new URL(options.assetsUrl ?? assetsBase(), assetsBase());
      try {
        await preloadKernels({ baseUrl: base, workerUrl: new URL("kernel-worker.js", base) });
      } catch (e) {
        // a browser without WebAssembly SIMD128 or threads: say where it can still run
        if (!(e instanceof Error) || !/does not compile in this browser/.test(e.message)) throw e;
        throw new Error(`${e.message}; load with backend: "reference" (one thread, plain TypeScript, slower), or "webgpu" where the browser has it`);
      }
      return createWasmBackend({ threads: options.threads ?? defaultWasmThreads(), simd: options.simd, memoryLimitBytes: options.memoryLimitBytes });
    }
    default:
      throw new Error(`unknown backend ${JSON.stringify(name)} (expected ${BROWSER_BACKENDS.join(", ")})`);
  }
}
