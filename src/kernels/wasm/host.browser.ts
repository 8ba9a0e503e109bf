/**
 * The wasm backend's platform seam, browser side (host.ts has the contract and the Node side).
 * The kernels are fetched and compiled with WebAssembly.compileStreaming by preloadKernels(),
 * which the browser entry awaits before it creates a backend (module.ts asks for them
 * synchronously); kernel threads are module Web Workers (src/browser/kernel-worker.ts) sharing
 * the backend's WebAssembly.Memory, which needs a cross-origin isolated page (elsewhere the
 * kernels are compiled for an unshared memory and run on the calling thread alone). A Web Worker
 * cannot read its messages without returning to its event loop, so a kernel error travels back
 * through a small shared mailbox that the main thread reads synchronously.
 *
 * A kernel worker ended outright (worker.terminate(), its thread crashed) runs none of its
 * JavaScript, and the web has no event for it ('exit' is Node's); the thread that started it is
 * blocked in a job when it matters. So each kernel worker holds a Web Lock while its thread lives,
 * which the browser releases however the thread ends, and a watchdog (kernel-worker.js started to
 * watch, not to compute), whose event loop is free, waits for each lock: granted one while the end
 * is not told (endTold), it leaves why in the worker's mailbox and marks it stopped, which the
 * pool's waits read. Where there are no Web Locks, such an end stays unseen as before.
 */
import { baseHref, need, wasmCompile, web, type WebWorker } from "../../platform/web.js";
import type { KernelThread, KernelsMemory, KernelsVariant, SpaceAnnouncement, WorkerStart } from "./protocol.js";
import { unsharedMemoryImport } from "./unshared.js";

export type { KernelThread } from "./protocol.js";

const FILES: Record<KernelsVariant, string> = { plain: "kernels.wasm", relaxed: "kernels-relaxed.wasm" };

interface Loaded {
  /** the folder the kernels were fetched from */
  baseUrl: string;
  workerUrl: URL;
  memory: KernelsMemory;
  modules: Map<KernelsVariant, WebAssembly.Module>;
}
let loaded: Loaded | undefined;

async function compileFrom(url: URL, memory: KernelsMemory): Promise<WebAssembly.Module> {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`wasm backend: ${url.href}: HTTP ${response.status} ${response.statusText}`);
  // compileStreaming needs Content-Type application/wasm; a server that sends another type still works, compiled from bytes
  if (memory === "shared" && wasmCompile.compileStreaming && response.headers.get("content-type")?.split(";")[0]?.trim() === "application/wasm") {
    return wasmCompile.compileStreaming(response);
  }
  const bytes = new Uint8Array(await response.arrayBuffer());
  return wasmCompile.compile((memory === "shared" ? bytes : unsharedMemoryImport(bytes)).buffer as ArrayBuffer);
}

export interface PreloadKernelsOptions {
  /** the folder holding kernels.wasm and kernels-relaxed.wasm */
  baseUrl: string | URL;
  /** the kernel worker's script (the build's kernel-worker.js) */
  workerUrl: string | URL;
  /** the memory the kernels will run on (default "shared"; "unshared": one thread, a page without cross-origin isolation) */
  memory?: KernelsMemory;
}

/**
 * Fetches and compiles both kernel builds (once per folder and worker script: later calls with
 * the same ones return the first result). The relaxed one is optional: a browser without Relaxed
 * SIMD fails to compile it and runs the SIMD128 build. Returns whether the relaxed build runs here.
 */
export async function preloadKernels(options: PreloadKernelsOptions): Promise<{ relaxed: boolean }> {
  const memory = options.memory ?? "shared";
  const base = new URL(options.baseUrl, baseHref());
  const workerUrl = new URL(options.workerUrl, baseHref());
  // the same files only: a load that named another folder (assetsUrl) after one whose kernel worker failed kept that worker's URL
  if (loaded?.memory === memory && loaded.baseUrl === base.href && loaded.workerUrl.href === workerUrl.href) return { relaxed: loaded.modules.has("relaxed") };
  const modules = new Map<KernelsVariant, WebAssembly.Module>();
  const [plain, relaxed] = await Promise.allSettled([compileFrom(new URL(FILES.plain, base), memory), compileFrom(new URL(FILES.relaxed, base), memory)]);
  if (plain.status === "rejected") {
    const e = plain.reason as Error;
    throw e.message.startsWith("wasm backend") ? e : new Error(`wasm backend: ${FILES.plain} does not compile in this browser (needs WebAssembly SIMD128 and threads): ${e.message}`);
  }
  modules.set("plain", plain.value);
  if (relaxed.status === "fulfilled") modules.set("relaxed", relaxed.value);
  loaded = { baseUrl: base.href, workerUrl, memory, modules };
  return { relaxed: modules.has("relaxed") };
}

/** the memory the loaded kernels import */
export function hostKernelsMemory(): KernelsMemory {
  return ready().memory;
}

function ready(): Loaded {
  if (!loaded) throw new Error("wasm backend: the kernels are not loaded yet (await preloadKernels() first)");
  return loaded;
}

export function hostRunsRelaxedSimd(): boolean {
  return ready().modules.has("relaxed");
}

export function compileKernels(variant: KernelsVariant): WebAssembly.Module {
  const module = ready().modules.get(variant);
  if (!module) throw new Error(`wasm backend: the ${variant} kernels did not compile in this browser`);
  return module;
}

/** mailbox: Int32 byte count (0 = empty), then that many UTF-8 bytes of the worker's last kernel error */
const MAILBOX_BYTES = 4096;

/** the worker's side: leaves `message` in the mailbox */
export function postToMailbox(mailbox: SharedArrayBuffer, message: string): void {
  const bytes = new TextEncoder().encode(message).subarray(0, MAILBOX_BYTES - 4);
  new Uint8Array(mailbox, 4).set(bytes);
  Atomics.store(new Int32Array(mailbox, 0, 1), 0, bytes.length);
}

/** the main thread's side: the message in the mailbox, if any, which is emptied */
function takeFromMailbox(mailbox: SharedArrayBuffer): string | undefined {
  const n = Atomics.exchange(new Int32Array(mailbox, 0, 1), 0, 0);
  if (n === 0) return undefined;
  // TextDecoder does not read shared memory: copy first
  return new TextDecoder().decode(new Uint8Array(mailbox, 4, n).slice());
}

/** what the kernel worker's first message holds */
export interface KernelWorkerInit {
  start: WorkerStart;
  mailbox: SharedArrayBuffer;
  /** the Web Lock the worker takes before it says ready and holds while its thread lives (its ready message says whether it holds it; undefined: no Web Locks here) */
  lock?: string;
}

/** what the watchdog is sent for each kernel worker once it has said ready (holding its lock) */
export interface KernelWorkerWatch {
  watch: {
    lock: string;
    mailbox: SharedArrayBuffer;
    worker: Pick<WorkerStart, "memory" | "ctrl" | "left" | "thread">;
    /** the kernel worker's script, which its message names */
    script: string;
  };
}

/** the watchdog per kernel worker script, started with the first of its kernel workers to say ready */
const watchdogs = new Map<string, WebWorker>();

function watchdog(workerUrl: URL): WebWorker {
  let w = watchdogs.get(workerUrl.href);
  if (w) return w;
  w = new (need("Worker", "wasm backend threads"))(workerUrl, { type: "module", name: "tsllm kernel watchdog" });
  // a watchdog that fails is replaced at the next kernel worker (the kernel workers it watched go unwatched)
  w.onerror = (e) => {
    e.preventDefault?.();
    watchdogs.delete(workerUrl.href);
  };
  watchdogs.set(workerUrl.href, w);
  return w;
}

/**
 * How long a kernel worker may take to answer its start message, in milliseconds. It answers
 * once it has fetched its script and instantiated the compiled kernels: milliseconds, a second or
 * two on a busy machine. One that has not answered in 30 s never will (another build's script, a
 * blocked fetch): the load ends with that instead of waiting forever where it has no signal.
 */
export const KERNEL_WORKER_START_MS = 30_000;

export function spawnKernelWorker(start: WorkerStart): KernelThread {
  const { workerUrl } = ready();
  const Worker = need("Worker", "wasm backend threads");
  const mailbox = new SharedArrayBuffer(MAILBOX_BYTES);
  // unique across the origin: Web Locks are shared by every tab and worker of it
  const lock = web.navigator?.locks ? `tsllm kernel worker ${crypto.randomUUID()}` : undefined;
  const worker = new Worker(workerUrl, { type: "module", name: `tsllm kernels ${start.thread}` });
  // every way the worker can fail to start rejects this, naming its script (the pool awaits it)
  const script = `kernel worker ${workerUrl.href}`;
  let startTimer: ReturnType<typeof setTimeout> | undefined;
  let stopped = (): void => undefined;
  const started = new Promise<void>((resolve, reject) => {
    // a worker terminated before it answered (an aborted load) answers nothing: its start settles here
    stopped = () => reject(new Error(`${script} was stopped before it answered its start message`));
    startTimer = setTimeout(() => reject(new Error(`${script} did not answer its start message in ${KERNEL_WORKER_START_MS / 1000} s`)), KERNEL_WORKER_START_MS);
    worker.onmessage = (e) => {
      const m = e.data as { ready?: boolean; locked?: boolean; error?: string };
      if (m.ready) {
        if (lock && m.locked) {
          const watch: KernelWorkerWatch = { watch: { lock, mailbox, worker: { memory: start.memory, ctrl: start.ctrl, left: start.left, thread: start.thread }, script: workerUrl.href } };
          watchdog(workerUrl).postMessage(watch);
        }
        resolve();
      } else reject(new Error(`${script}: ${String(m.error)}`));
    };
    worker.onerror = (e) => {
      e.preventDefault?.();
      // no message: the script did not load (404, not JavaScript, blocked); else it threw at its top level
      reject(new Error(e.message ? `${script}: ${e.message}` : `${script} failed to load`));
    };
    // its answer could not be read here: it never arrives
    worker.onmessageerror = () => reject(new Error(`${script}: its answer to the start message could not be read (messageerror)`));
  }).finally(() => clearTimeout(startTimer));
  const init: KernelWorkerInit = { start, mailbox, lock };
  worker.postMessage(init);
  return {
    started,
    announce: (a: SpaceAnnouncement) => worker.postMessage(a),
    takeErrors: () => {
      const m = takeFromMailbox(mailbox);
      return m === undefined ? [] : [m];
    },
    detach: () => {
      worker.onmessage = null;
      worker.onmessageerror = null;
      worker.onerror = (e) => e.preventDefault?.();
    },
    // the worker leaves its loop on STOP and closes itself
    close: () => undefined,
    terminate: () => {
      worker.terminate();
      stopped();
    },
  };
}
