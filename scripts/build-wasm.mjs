// Compiles the AssemblyScript kernels (assembly/) to dist/kernels/wasm/kernels.wasm, and with
// Relaxed SIMD enabled to kernels-relaxed.wasm.
// Run by `npm run build` (and so by `npm ci` through `prepare`); tests call ensureWasm() to
// rebuild when the sources are newer than the binary. The loader
// (src/kernels/wasm/module.ts) finds the file next to itself in dist/, or in dist/ when it
// runs from src/ through tsx.
import { mkdirSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const sourceDir = path.join(root, "assembly");
export const wasmPath = path.join(root, "dist", "kernels", "wasm", "kernels.wasm");
/** the same kernels with Relaxed SIMD enabled (its int8 dot: assembly/relaxed.ts, kquant.ts), loaded where the runtime has it */
export const relaxedWasmPath = path.join(root, "dist", "kernels", "wasm", "kernels-relaxed.wasm");

const ascArgs = (outFile, features) => [
  path.join(sourceDir, "index.ts"),
  "--outFile", outFile,
  "-O3",
  // no allocator, no GC: the host owns all memory above the module's heap base; no abort
  // messages. The only static data are math tables (Mathf.exp): every worker's instantiation
  // writes the same bytes there again, which is harmless
  "--runtime", "stub",
  "--noAssert",
  "--use", "abort=",
  // one memory, created by the host, shared by all threads; 65536 pages = the 4 GiB wasm32 limit
  "--importMemory",
  "--sharedMemory",
  "--initialMemory", "1",
  "--maximumMemory", "65536",
  "--enable", "simd",
  "--enable", "threads",
  ...features.flatMap((f) => ["--enable", f]),
];

function newestSource() {
  let newest = 0;
  for (const f of readdirSync(sourceDir)) newest = Math.max(newest, statSync(path.join(sourceDir, f)).mtimeMs);
  return newest;
}

/** true when the binary is missing or older than a source file */
export function wasmIsStale() {
  try {
    const newest = newestSource();
    return statSync(wasmPath).mtimeMs < newest || statSync(relaxedWasmPath).mtimeMs < newest;
  } catch {
    return true;
  }
}

export async function buildWasm() {
  mkdirSync(path.dirname(wasmPath), { recursive: true });
  const asc = (await import("assemblyscript/asc")).default;
  for (const [outFile, features] of [[wasmPath, []], [relaxedWasmPath, ["relaxed-simd"]]]) {
    const { error, stderr } = await asc.main(ascArgs(outFile, features));
    if (error) throw new Error(`AssemblyScript build of ${sourceDir} (${path.basename(outFile)}) failed: ${error.message}\n${stderr.toString()}`);
  }
  return wasmPath;
}

/** builds the kernels if the binary is missing or stale; returns its path */
export async function ensureWasm() {
  if (wasmIsStale()) await buildWasm();
  return wasmPath;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await buildWasm();
  console.log(`built ${path.relative(root, wasmPath)} and ${path.relative(root, relaxedWasmPath)}`);
}
