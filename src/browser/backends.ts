/**
 * The compute backends a page may ask for. "wasm" (the default) is the WebAssembly SIMD
 * backend with Web Worker threads (one thread where the page is not cross-origin isolated);
 * "reference" the plain TypeScript kernels (one thread); "webgpu" the GPU through navigator.gpu.
 */
import type { Backend } from "../kernels/backend.js";
import { createReferenceBackend } from "../kernels/reference/index.js";
import { createWasmBackend } from "../kernels/wasm/backend.js";
import { createWebGPUBackend } from "../kernels/webgpu/index.js";
import { preloadKernels } from "../kernels/wasm/host.browser.js";
import type { KernelsMemory } from "../kernels/wasm/module.js";
import { cpuCount } from "../platform/host.js";
import { web } from "../platform/web.js";

export type BrowserBackendName = "wasm" | "webgpu" | "reference";
export const BROWSER_BACKENDS: readonly BrowserBackendName[] = ["wasm", "webgpu", "reference"];

export interface BrowserBackendOptions {
  /** wasm: threads computing each matmul, this worker included (default: navigator.hardwareConcurrency, at most 8; always 1 on a page that is not cross-origin isolated) */
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

/** how the wasm backend runs on this page */
export interface WasmThreading {
  /** the kernels' memory: shared where the page is cross-origin isolated, else unshared (one thread) */
  memory: KernelsMemory;
  /** threads computing each matmul */
  threads: number;
  /** why it runs on fewer threads than asked for (the page is not cross-origin isolated), and how to get them */
  note?: string;
}

/**
 * Threads need a memory shared between Web Workers, which a browser gives only a cross-origin
 * isolated page (COOP + COEP headers, which static hosts such as GitHub Pages cannot send).
 * Elsewhere the kernels run on one thread, the engine worker's own, on an unshared memory: slower,
 * but the same tokens, where before the load failed.
 */
export function wasmThreading(threads?: number): WasmThreading {
  const wanted = threads ?? defaultWasmThreads();
  if (web.crossOriginIsolated !== false) return { memory: "shared", threads: wanted };
  // resizable buffers keep the views into a growing unshared memory valid (memory.ts); without them, no fallback
  if (typeof (WebAssembly.Memory.prototype as { toResizableBuffer?: unknown }).toResizableBuffer !== "function") {
    throw new Error(`wasm backend: ${notIsolated()}, and this browser cannot run the kernels on one thread without it (it lacks WebAssembly.Memory.prototype.toResizableBuffer); ${isolate()}, or load with backend: "reference" (one thread, plain TypeScript, slower)`);
  }
  if (wanted === 1) return { memory: "unshared", threads: 1 };
  return { memory: "unshared", threads: 1, note: `tsllm: the wasm backend runs on 1 thread, not ${wanted}: ${notIsolated()}; for ${wanted} threads ${isolate()}` };
}

/** why this page has no SharedArrayBuffer */
const notIsolated = (): string => web.isSecureContext === false
  // COOP/COEP isolate only a secure context: saying "send the headers" sent an author on a LAN address round in circles
  ? "the page is not a secure context (http:// from a host other than localhost), and browsers give SharedArrayBuffer only to cross-origin isolated secure ones"
  : "the page is not cross-origin isolated, so it has no SharedArrayBuffer";

/** what gets the page isolated: the headers, or on a host that cannot send them (GitHub Pages) the build's service worker */
const isolate = (): string => `${web.isSecureContext === false ? "serve it over https: (or from localhost) " : "serve it "}with the headers Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp (or credentialless), or, where the host cannot send headers, with tsllm-isolate.js loaded before the page's own scripts (a service worker that adds them)`;

/** `signal` (the load's) ends the wait for the wasm backend's kernel workers: they are stopped, and this rejects */
export async function createBrowserBackend(name: BrowserBackendName = "wasm", options: BrowserBackendOptions & { signal?: AbortSignal } = {}): Promise<Backend> {
  switch (name) {
    case "reference":
      return createReferenceBackend();
    case "webgpu":
      // navigator.gpu; an error naming what is missing where the browser has none
      return createWebGPUBackend();
    case "wasm": {
      const threading = wasmThreading(options.threads);
      const base = new URL(options.assetsUrl ?? assetsBase(), assetsBase());
      try {
        await preloadKernels({ baseUrl: base, workerUrl: new URL("kernel-worker.js", base), memory: threading.memory });
      } catch (e) {
        // a browser without WebAssembly SIMD128 or threads: say where it can still run
        if (!(e instanceof Error) || !/does not compile in this browser/.test(e.message)) throw e;
        throw new Error(`${e.message}; load with backend: "reference" (one thread, plain TypeScript, slower), or "webgpu" where the browser has it`);
      }
      // the developer's console says why the model runs slower than it could, once per backend
      if (threading.note) console.info(threading.note);
      return createWasmBackend({ threads: threading.threads, simd: options.simd, memoryLimitBytes: options.memoryLimitBytes, signal: options.signal });
    }
    default:
      throw new Error(`unknown backend ${JSON.stringify(name)} (expected ${BROWSER_BACKENDS.join(", ")})`);
  }
}
