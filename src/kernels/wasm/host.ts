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
import { markStopped } from "./control.js";
import type { KernelThread, KernelsMemory, KernelsVariant, SupervisorInit, SupervisorRequest, WorkerStart } from "./protocol.js";

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
 * A worker is a small evaluated bootstrap that imports its module (worker.ts, supervisor.ts),
 * started with the parent's Node options as Node passes them on (no execArgv of ours): a worker
 * started from the file refuses --input-type (`node --input-type=module -e ...`), and an execArgv
 * list given to it refuses V8 and per-process flags (--max-old-space-size, --expose-gc,
 * --stack-size, --title), either of which left loadModel on the slow reference kernels. Under tsx
 * (this file is .ts) the worker is TypeScript: Node 20 does not pass --import hooks on to
 * workers, so the bootstrap registers tsx first.
 */
function bootstrapSource(module: "worker" | "supervisor"): string {
  if (import.meta.url.endsWith(".ts")) {
    const url = new URL(`./${module}.ts`, import.meta.url).href;
    return `import("tsx/esm/api").then((api) => { api.register(); return import(${JSON.stringify(url)}); });`;
  }
  return `import(${JSON.stringify(new URL(`./${module}.js`, import.meta.url).href)});`;
}

/** the process's supervisor thread (supervisor.ts), which starts every kernel worker and hears its end; started with the first */
let supervisor: { worker: Worker; failed: Set<(why: string) => void> } | undefined;

function theSupervisor(): NonNullable<typeof supervisor> {
  if (supervisor) return supervisor;
  const init: SupervisorInit = { kernelWorkerSource: bootstrapSource("worker") };
  const s = { worker: new Worker(bootstrapSource("supervisor"), { eval: true, workerData: init }), failed: new Set<(why: string) => void>() };
  // it never holds the process open; the kernel workers it started end with the process
  s.worker.unref();
  const end = (why: string): void => {
    if (supervisor === s) supervisor = undefined;
    for (const fail of s.failed) fail(why);
  };
  s.worker.on("error", (e) => end(`the kernel workers' supervisor thread failed: ${e.message}`));
  s.worker.once("exit", (code) => end(`the kernel workers' supervisor thread exited with code ${code}`));
  supervisor = s;
  return s;
}

let nextWorkerId = 1;

/**
 * The error messages that arrive on a port once its worker has started, read synchronously (the
 * main thread is blocked in a job when it needs them). Both ways are needed: while this thread's
 * event loop turns (between two jobs) the port delivers its messages as events, where a port
 * without a listener drops them, and during a job only receiveMessageOnPort reads them.
 */
function errorInbox(port: MessagePort): () => string[] {
  const arrived: string[] = [];
  const take = (message: unknown): void => {
    const error = (message as { error?: string }).error;
    if (error) arrived.push(error);
  };
  port.on("message", take);
  port.unref();
  return () => {
    for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) take(m.message);
    return arrived.splice(0);
  };
}

/**
 * Starts a kernel worker (worker.ts) on a worker thread, linked by a MessagePort; the supervisor
 * thread starts it, and says on a second port (`reports`) when its thread ends with none of its
 * own JavaScript left to say so.
 */
export function spawnKernelWorker(start: WorkerStart): KernelThread {
  const { port1: port, port2 } = new MessageChannel();
  const { port1: reports, port2: supervisorReports } = new MessageChannel();
  const s = theSupervisor();
  const id = nextWorkerId++;
  const request: SupervisorRequest = { spawn: { id, init: { ...start, port: port2 }, reports: supervisorReports } };
  s.worker.postMessage(request, [port2, supervisorReports]);
  /** once started: the error messages of the worker and of the supervisor about it */
  let fromWorker: (() => string[]) | undefined;
  let fromSupervisor: (() => string[]) | undefined;
  /** why the supervisor ended while this worker ran (the worker ended with it) */
  let supervisorEnded: string | undefined;
  let supervisorFailed = (_why: string): void => undefined;
  // first message of a worker: ready, or the error that stopped it from starting
  const started = new Promise<void>((resolve, reject) => {
    port.once("message", (m: { ready?: boolean; error?: string }) => (m.ready ? resolve() : reject(new Error(String(m.error)))));
    reports.once("message", (m: { error?: string }) => reject(new Error(String(m.error))));
    supervisorFailed = (why) => {
      reject(new Error(why));
      // heard on this thread's event loop only: the next job (not one under way) ends with it
      supervisorEnded ??= why;
      markStopped(start);
    };
    s.failed.add(supervisorFailed);
  });
  return {
    started,
    announce: (a) => port.postMessage(a),
    takeErrors: () => {
      // the worker's own word first: the supervisor speaks only where the worker could not
      const errors = [...(fromWorker?.() ?? []), ...(fromSupervisor?.() ?? [])];
      if (supervisorEnded) errors.push(supervisorEnded);
      return errors;
    },
    detach: () => {
      port.removeAllListeners("message");
      reports.removeAllListeners("message");
      // errors after start arrive through the shared words and takeErrors
      fromWorker = errorInbox(port);
      fromSupervisor = errorInbox(reports);
    },
    close: () => {
      s.failed.delete(supervisorFailed);
      port.close();
      reports.close();
    },
    terminate: () => {
      const terminate: SupervisorRequest = { terminate: id };
      s.worker.postMessage(terminate);
    },
  };
}
