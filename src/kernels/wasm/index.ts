/** Public surface of the WebAssembly SIMD backend. */
export { createWasmBackend, type WasmBackendOptions } from "./backend.js";
