/** Public surface of the WebAssembly SIMD backend. */
export { createWasmBackend, MIN_MEMORY_LIMIT, type WasmBackend, type WasmBackendOptions } from "./backend.js";
