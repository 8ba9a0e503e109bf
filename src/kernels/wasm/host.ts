/**
 * The wasm backend's platform seam, Node side: where the compiled kernels come from and how a
 * kernel thread is started. The browser build (scripts/build-browser.mjs) resolves imports of
 * this file to host.browser.ts, which has the same exports (kernels fetched and compiled with
 * WebAssembly.compileStreaming, threads as Web Workers); module.ts and pool.ts only call these.
 */
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from "node:worker_threads";
import type { KernelThread, KernelsMemory, KernelsVariant, WorkerInit, WorkerStart } from "./protocol.js";

export type { KernelThread } from "./protocol.js";


/**
 * Where the compiled kernels live: next to this file once built (dist/kernels/wasm/), or in
 * dist/ when this file runs from src/ through tsx. `npm run build` (scripts/build-wasm.mjs)
 * produces both files.
 */
const FILES: Record<KernelsVariant, string> = { plain: "kernels.wasm", relaxed: "kernels-relaxed.wasm" };
const candidates = (file: string): string[] => [new URL(`./${file}`, import.meta.url), new URL(`../../../dist/kernels/wasm/${file}`, import.meta.url)].map((u) => fileURLToPath(u));

function readKernels(variant: KernelsVariant): { path: string; bytes: Uint8Array } {
  const paths = candidates(FILES[variant]);
  const found = paths.find((p) => existsSync(p));
  if (!found) throw new Error(`wasm backend: ${FILES[variant]} not found (looked at ${paths.join(", ")}); run "npm run build"`);
  return { path: found, bytes: readFileSync(found) };
}

/**
 * Whether this runtime runs the relaxed build. Node 20's V8 (11.3) has Relaxed SIMD behind
 * --experimental-wasm-relaxed-simd: if the build does not validate as is, the flag is switched
 * on (process-wide, so worker threads see it too; it only adds instructions to what
 * WebAssembly accepts) and the build validated again.
 */
export function hostRunsRelaxedSimd(): boolean {
  let bytes: Uint8Array;
  try {
    bytes = readKernels("relaxed").bytes;
  } catch {
    return false;
  }
  if (!WebAssembly.validate(bytes)) {
    try {
      setFlagsFromString("--experimental-wasm-relaxed-simd");
    } catch {
      // not V8, or flags locked: stay on the SIMD128 build
    }
  }
  return WebAssembly.validate(bytes);
}

/** Node always has shared memory (worker_threads share it without any isolation) */
export function hostKernelsMemory(): KernelsMemory {
  return "shared";
}

/** compiles a variant's kernels (module.ts caches the result) */
export function compileKernels(variant: KernelsVariant): WebAssembly.Module {
  const { path, bytes } = readKernels(variant);
  try {
    return new WebAssembly.Module(bytes);
  } catch (e) {
    throw new Error(`wasm backend: ${path} does not compile on this runtime (needs WebAssembly SIMD128 and threads): ${(e as Error).message}`);
  }
}

/**
 * The worker is a small evaluated bootstrap that imports the worker module, started with the
 * parent's Node options as Node passes them on (no execArgv of ours): a worker started from the
 * file refuses --input-type (`node --input-type=module -e ...`), and an execArgv list given to
 * it refuses V8 and per-process flags (--max-old-space-size, --expose-gc, --stack-size, --title),
 * either of which left loadModel on the slow reference kernels. Under tsx (this file is .ts) the
 * worker is TypeScript: Node 20 does not pass --import hooks on to workers, so the bootstrap
 * registers tsx first.
 */
function spawnWorker(init: WorkerInit): Worker {
  const options = { workerData: init, transferList: [init.port], eval: true };
  if (import.meta.url.endsWith(".ts")) {
    const url = new URL("./worker.ts", import.meta.url).href;
    return new Worker(`import("tsx/esm/api").then((api) => { api.register(); return import(${JSON.stringify(url)}); });`, options);
  }
  return new Worker(`import(${JSON.stringify(new URL("./worker.js", import.meta.url).href)});`, options);
}

/** starts a kernel worker (worker.ts) on a worker thread, linked by a MessagePort */
export function spawnKernelWorker(start: WorkerStart): KernelThread {
  const { port1, port2 } = new MessageChannel();
  const worker = spawnWorker({ ...start, port: port2 });
  const port: MessagePort = port1;
  // first message of a worker: ready, or the error that stopped it from starting
  const started = new Promise<void>((resolve, reject) => {
    port.once("message", (m: { ready?: boolean; error?: string }) => (m.ready ? resolve() : reject(new Error(String(m.error)))));
    worker.once("error", (e) => reject(new Error(e.message)));
    worker.once("exit", (code) => reject(new Error(`exited with code ${code}`)));
  });
  return {
    started,
    announce: (a) => port.postMessage(a),
    takeErrors: () => {
      const errors: string[] = [];
      for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) {
        const msg = m.message as { error?: string };
        if (msg.error) errors.push(msg.error);
      }
      return errors;
    },
    detach: () => {
      worker.removeAllListeners("error");
      worker.removeAllListeners("exit");
      // errors after start arrive through FAILED and the port; keep one listener so an
      // unexpected worker crash is not an unhandled 'error' event
      worker.on("error", () => {});
      worker.unref();
      port.removeAllListeners("message");
      port.unref();
    },
    close: () => port.close(),
    terminate: () => void worker.terminate(),
  };
}
