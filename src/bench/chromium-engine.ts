import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { basename, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { rates } from "./stats.js";
import type { EngineSample, WorkerJob } from "./types.js";

/**
 * tsllm's side in a browser: the browser build (dist-browser/) in headless Chromium, served by the
 * browser example's server (examples/browser/server.ts, cross-origin isolated, the model's folder
 * under /models/), the model loaded into the engine worker with HTTP Range reads and timed by
 * the worker's `timeForward` — the same raw forward pass runTsllm times in Node. Each run is a
 * fresh browser context (a fresh worker and wasm memory), as each Node run is a fresh process.
 * Needs the repository checkout (the example server) and the devDependency playwright-core.
 */

export const DEFAULT_CHROMIUM = "/usr/bin/chromium";

/** A started browser and example server; run() as often as needed, then close(). */
export interface ChromiumRunner {
  run(job: WorkerJob): Promise<EngineSample>;
  close(): Promise<void>;
}

/** the parts of playwright-core's Browser the benchmark runners use */
export interface BrowserLike {
  version(): string;
  newContext(): Promise<ContextLike>;
  close(): Promise<void>;
}
export interface ContextLike {
  newPage(): Promise<PageLike>;
  route(url: string, handler: (route: RouteLike) => unknown): Promise<void>;
  close(): Promise<void>;
}
export interface RouteLike {
  request(): { url(): string };
  fulfill(response: { status: number; body: Buffer | string; headers?: Record<string, string> }): Promise<void>;
}
export interface PageLike {
  goto(url: string): Promise<unknown>;
  evaluate<R, A>(fn: (arg: A) => Promise<R>, arg: A): Promise<R>;
}

const projectRoot = fileURLToPath(new URL("../..", import.meta.url));

/**
 * Headless Chromium (`executablePath`) and the browser example's server over `modelsDir` (a
 * cross-origin isolated page with the models under /models/); `what` names the caller in errors.
 */
export async function launchWithExampleServer(modelsDir: string, executablePath: string, what: string): Promise<{ browser: BrowserLike; server: { base: string; child: ChildProcess } }> {
  if (!existsSync(executablePath)) throw new Error(`${what}: ${executablePath} not found (install Debian's chromium: apt-get install -y chromium)`);
  if (!existsSync(`${projectRoot}/examples/browser/server.ts`)) throw new Error(`${what} runs from the repository checkout (it needs examples/browser/server.ts)`);
  const pkg = "playwright-core";
  const { chromium } = (await import(pkg)) as { chromium: { launch(o: { executablePath: string; args: string[] }): Promise<BrowserLike> } };
  const server = await startExampleServer(modelsDir);
  try {
    return { browser: await chromium.launch({ executablePath, args: ["--no-sandbox"] }), server };
  } catch (e) {
    stopExampleServer(server.child);
    throw e;
  }
}

/** Starts Chromium (`executablePath`) and the example server over the folder of the models to run. */
export async function startChromiumRunner(modelsDir: string, executablePath = DEFAULT_CHROMIUM, timeoutMs = 600_000): Promise<ChromiumRunner> {
  const { browser, server } = await launchWithExampleServer(modelsDir, executablePath, "--runtime chromium");
  const version = browser.version();
  return {
    async run(job) {
      if (dirname(job.modelPath) !== modelsDir) throw new Error(`the browser benchmark serves ${modelsDir}; ${job.modelPath} is not in it`);
      if (job.cacheTypes) throw new Error("--runtime chromium: the browser build has no KV cache type options (f32 only)");
      if (job.backend !== undefined && job.backend !== "wasm") throw new Error(`--runtime chromium runs the wasm backend, not ${job.backend}`);
      const context = await browser.newContext();
      try {
        const page = await context.newPage();
        await page.goto(`${server.base}/`);
        const run = page.evaluate(inPage, { url: `/models/${encodeURIComponent(basename(job.modelPath))}`, threads: job.threads, promptTokens: [...job.promptTokens], genTokens: job.genTokens, contextSize: job.contextSize });
        const r = await withTimeout(run, timeoutMs, `tsllm in Chromium on ${job.modelPath} did not finish within ${(timeoutMs / 1000).toFixed(0)} s`);
        return {
          detail: `wasm, ${r.threads} thread${r.threads === 1 ? "" : "s"}, ${r.simd} SIMD, in Chromium ${version}`,
          loadMs: r.loadMs, prefillMs: r.prefillMs, decodeMs: r.decodeMs,
          ...rates(job.promptTokens.length, r.prefillMs, job.genTokens, r.decodeMs),
          // the browser's processes are not one process whose peak a child can report
          peakRssBytes: Number.NaN,
          tokens: r.tokens,
        };
      } finally {
        await context.close();
      }
    },
    async close() {
      await browser.close();
      stopExampleServer(server.child);
    },
  };
}

/** runs in the page: the engine worker loads the model and times the forward pass */
async function inPage(a: { url: string; threads: number; promptTokens: number[]; genTokens: number; contextSize: number }) {
  // a URL of the example server, resolved by the browser (not by the bundler)
  const lib = "/tsllm/tsllm.js";
  const { TsllmWorker } = await import(lib);
  const engine = new TsllmWorker("/tsllm/engine-worker.js");
  try {
    const t0 = performance.now();
    const info = await engine.load(a.url, { backend: "wasm", threads: a.threads, cache: false, contextSize: 1 });
    const loadMs = performance.now() - t0;
    const t = await engine.timeForward(a.promptTokens, a.genTokens, a.contextSize);
    return { loadMs, prefillMs: t.prefillMs as number, decodeMs: t.decodeMs as number, tokens: t.tokens as number[], threads: info.threads as number, simd: info.simd as string };
  } finally {
    engine.terminate();
  }
}

/**
 * Starts `npm run example:browser -- --port 0 --models DIR [--log-requests]` and resolves with its
 * URL once it prints it; `onOutput` sees everything it prints (its request log, with logRequests).
 * stopExampleServer(child) stops it.
 */
export function startExampleServer(modelsDir: string, options: { logRequests?: boolean; onOutput?: (text: string) => void } = {}): Promise<{ base: string; child: ChildProcess }> {
  const args = ["run", "--silent", "example:browser", "--", "--port", "0", "--models", modelsDir, ...(options.logRequests ? ["--log-requests"] : [])];
  const child = spawn("npm", args, { cwd: projectRoot, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      stopExampleServer(child);
      reject(new Error(`the browser example's server printed no URL within 180 s:\n${output}`));
    }, 180_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      options.onOutput?.(d.toString());
      const m = /tsllm browser example: (http:\/\/127\.0\.0\.1:\d+)\//.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve({ base: m[1]!, child });
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the browser example's server exited (${code}) before listening:\n${output}`));
    });
  });
}

/** npm runs the server in a shell: stops the whole process group it leads */
export function stopExampleServer(child: ChildProcess): void {
  if (child.pid !== undefined && child.exitCode === null) process.kill(-child.pid, "SIGTERM");
}

export function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const limit = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)));
  return Promise.race([p, limit]).finally(() => clearTimeout(timer));
}
