import type { Backend } from "./backend.js";
import type { GGMLType } from "../tensor/index.js";
import { createReferenceBackend, VEC_DOT } from "./reference/index.js";

export { hostMemory, checkAttentionOrder, checkKVCacheType, F32_CACHE, headRowIndex, isPlainF32, KV_CACHE_TYPES, kvCacheEncoding, kvRowFloats, parseKVCacheType, type KVCacheEncoding, type KVCacheType, type KVCacheTypes, type KVRowEncoding } from "./reference/index.js";
import { createWasmBackend } from "./wasm/index.js";
import { OptionError, shownValue } from "../units/index.js";

export type { Backend, DeviceArray, MatmulEpilogue, UnaryOp } from "./backend.js";
export { whileBackendStarts } from "./backend.js";

/** whether the backends can multiply by a matrix of this type (ggml's CPU vec_dot table; Q8_1 and Q8_K are activation-only formats) */
export function canMatmul(type: GGMLType): boolean {
  return VEC_DOT.has(type);
}
export type BackendName = "wasm" | "reference" | "webgpu";

/** the webgpu adapter's facts a model must fit, without starting the backend (loads the optional "webgpu" package only when called) */
export async function probeWebGPU(): Promise<{ adapter: string; maxBufferBytes: number; matmulTypes: readonly string[] }> {
  return (await import("./webgpu/index.js")).probeWebGPU();
}

let warnedFallback = false;

/**
 * Creates the named backend. By default the WebAssembly one; if it cannot start (e.g. the
 * .wasm was not built) the reference kernels are used instead, with a warning. An explicitly
 * requested backend that cannot start is an error.
 */
export async function createBackend(name: BackendName | undefined, options: { threads?: number; onWarning?: (message: string) => void } = {}): Promise<Backend> {
  if (name !== undefined && name !== "wasm" && name !== "reference" && name !== "webgpu") {
    throw new OptionError(`unknown backend "${String(name)}" (expected "wasm", "reference" or "webgpu")`, "backend");
  }
  if (options.threads !== undefined && (!Number.isInteger(options.threads) || options.threads < 1)) {
    throw new OptionError(`threads must be a positive integer, got ${shownValue(options.threads)}`, "threads");
  }
  if (name === "reference") return createReferenceBackend();
  // loaded only when asked for: it loads the optional "webgpu" package (Dawn) in Node
  if (name === "webgpu") return (await import("./webgpu/index.js")).createWebGPUBackend();
  try {
    return await createWasmBackend({ threads: options.threads });
  } catch (e) {
    if (name === "wasm") throw e;
    if (!warnedFallback) {
      warnedFallback = true;
      const message = `WebAssembly backend unavailable (${(e as Error).message}); using the slow reference kernels`;
      if (options.onWarning) options.onWarning(message);
      else process.emitWarning(message);
    }
    return createReferenceBackend();
  }
}
