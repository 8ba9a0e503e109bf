// Compiles the AssemblyScript kernels (assembly/) to dist/kernels/wasm/kernels.wasm, and with
// Relaxed SIMD enabled to kernels-relaxed.wasm: the two builds in two worker threads, and only
// when a binary is older than an input (a source, this script, the installed compiler) or
// `--force` is given. Run by `npm run build` (and so by `npm ci` through `prepare`, and by the
// first `npx tsllm`, which links the project and runs its prepare again); tests call ensureWasm()
// to rebuild when stale. The loader (src/kernels/wasm/module.ts) finds the file next to itself
// in dist/, or in dist/ when it runs from src/ through tsx.
import { mkdirSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { availableParallelism } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Worker, isMainThread, parentPort, threadId, workerData } from "node:worker_threads";

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

/**
 * the newest input of the build: the kernels' sources, this script (its compiler flags) and the
 * installed compiler (npm ci rewrites its package.json)
 */
function newestInput() {
  let newest = statSync(fileURLToPath(import.meta.url)).mtimeMs;
  for (const f of readdirSync(sourceDir)) newest = Math.max(newest, statSync(path.join(sourceDir, f)).mtimeMs);
  try {
    newest = Math.max(newest, statSync(path.join(root, "node_modules", "assemblyscript", "package.json")).mtimeMs);
  } catch {
    // no installed compiler: the binaries (if any) are all there is to go by
  }
  return newest;
}

/** true when a binary is missing or older than an input of the build */
export function wasmIsStale() {
  try {
    const newest = newestInput();
    return statSync(wasmPath).mtimeMs < newest || statSync(relaxedWasmPath).mtimeMs < newest;
  } catch {
    return true;
  }
}

/** compiles one build into a temporary file and renames it, so an interrupted build never leaves a binary that looks fresh */
async function compile(outFile, features) {
  const asc = (await import("assemblyscript/asc")).default;
  const tmp = `${outFile}.${process.pid}-${threadId}.tmp`;
  const { error, stderr } = await asc.main(ascArgs(tmp, features));
  if (error) {
    rmSync(tmp, { force: true });
    throw new Error(`AssemblyScript build of ${sourceDir} (${path.basename(outFile)}) failed: ${error.message}\n${stderr.toString()}`);
  }
  renameSync(tmp, outFile);
}

/** runs compile() in a worker thread: the compiler is single-threaded, so the two builds take two cores side by side */
function compileInWorker(outFile, features) {
  return new Promise((resolve, reject) => {
    const worker = new Worker(fileURLToPath(import.meta.url), { workerData: { outFile, features } });
    let failure;
    worker.once("message", (m) => {
      failure = m.error;
    });
    worker.once("error", reject);
    worker.once("exit", (code) => {
      if (failure !== undefined) reject(new Error(failure));
      else if (code !== 0) reject(new Error(`AssemblyScript build of ${path.basename(outFile)}: its worker exited with code ${code}`));
      else resolve();
    });
  });
}

/** compiles both builds, side by side when the machine has a second core */
export async function buildWasm() {
  mkdirSync(path.dirname(wasmPath), { recursive: true });
  const builds = [
    [wasmPath, []],
    [relaxedWasmPath, ["relaxed-simd"]],
  ];
  if (availableParallelism() > 1) await Promise.all(builds.map(([outFile, features]) => compileInWorker(outFile, features)));
  else for (const [outFile, features] of builds) await compile(outFile, features);
  return wasmPath;
}

/** builds the kernels if a binary is missing or stale; returns its path */
export async function ensureWasm() {
  if (wasmIsStale()) await buildWasm();
  return wasmPath;
}

if (!isMainThread && workerData?.outFile) {
  try {
    await compile(workerData.outFile, workerData.features);
  } catch (e) {
    parentPort.postMessage({ error: e instanceof Error ? e.message : String(e) });
  }
} else if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  // `npm run build` (and npm ci's prepare, and the first `npx tsllm`, which builds the linked
  // project again) compiles only what changed: the two builds take minutes
  const force = process.argv.includes("--force");
  const outputs = `${path.relative(root, wasmPath)} and ${path.relative(root, relaxedWasmPath)}`;
  if (force || wasmIsStale()) {
    await buildWasm();
    console.log(`built ${outputs}`);
  } else console.log(`${outputs} are up to date (--force rebuilds)`);
}
