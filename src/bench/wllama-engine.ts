import { existsSync, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_CHROMIUM, launchWithExampleServer, stopExampleServer, withTimeout, type RouteLike } from "./chromium-engine.js";

/**
 * wllama (llama.cpp compiled to WebAssembly, multi-threaded) in headless Chromium: the peer the
 * browser build of tsllm is measured against. The page is the browser example's (cross-origin
 * isolated, so wllama gets its threads; the model under /models/); wllama's files are served from
 * the package under /wllama/. The model is fetched into a Blob and loaded with no GPU layers;
 * each run is one raw completion (greedy, EOS ignored, no prompt cache) in a fresh browser
 * context, timed by wllama's own llama-server timings (prompt_per_second, predicted_per_second).
 * Not a devDependency: `npm i --no-save --ignore-scripts @wllama/wllama@3.13.0`.
 */

export const WLLAMA_PACKAGE = "@wllama/wllama@3.13.0";

/** one wllama run: prompt text in, its own token count and rates out */
export interface WllamaSample {
  readonly promptTokens: number;
  readonly prefillTokensPerSecond: number;
  readonly decodeTokensPerSecond: number;
  readonly loadMs: number;
  readonly threads: number;
}

export interface WllamaRunner {
  readonly detail: string;
  run(job: { modelPath: string; threads: number; prompt: string; genTokens: number; contextSize: number }): Promise<WllamaSample>;
  close(): Promise<void>;
}

const projectRoot = fileURLToPath(new URL("../..", import.meta.url));
const CONTENT_TYPES: Readonly<Record<string, string>> = { ".js": "text/javascript", ".wasm": "application/wasm", ".json": "application/json" };

/** Starts Chromium and the example server over the folder of the models to run, with wllama's files at /wllama/. */
export async function startWllamaRunner(modelsDir: string, executablePath = DEFAULT_CHROMIUM, timeoutMs = 600_000): Promise<WllamaRunner> {
  const esm = join(projectRoot, "node_modules/@wllama/wllama/esm");
  if (!existsSync(join(esm, "index.js")) || !existsSync(join(esm, "wasm/wllama.wasm"))) {
    throw new Error(`wllama is not installed (it is no devDependency): npm i --no-save --ignore-scripts ${WLLAMA_PACKAGE}`);
  }
  const version = (JSON.parse(readFileSync(join(esm, "../package.json"), "utf8")) as { version: string }).version;
  const { browser, server } = await launchWithExampleServer(modelsDir, executablePath, "bench:wllama");
  const serve = (route: RouteLike): Promise<void> => {
    const rel = decodeURIComponent(new URL(route.request().url()).pathname.slice("/wllama/".length));
    const file = join(esm, rel);
    if (rel.includes("..") || !existsSync(file)) return route.fulfill({ status: 404, body: `not found: ${rel}` });
    return route.fulfill({ status: 200, body: readFileSync(file), headers: { "content-type": CONTENT_TYPES[file.slice(file.lastIndexOf("."))] ?? "application/octet-stream", "cross-origin-resource-policy": "same-origin" } });
  };
  return {
    detail: `wllama ${version} (llama.cpp in WebAssembly), in Chromium ${browser.version()}`,
    async run(job) {
      if (dirname(job.modelPath) !== modelsDir) throw new Error(`the wllama benchmark serves ${modelsDir}; ${job.modelPath} is not in it`);
      const context = await browser.newContext();
      try {
        await context.route(`${server.base}/wllama/**`, serve);
        const page = await context.newPage();
        await page.goto(`${server.base}/`);
        const run = page.evaluate(inPage, { url: `/models/${encodeURIComponent(basename(job.modelPath))}`, threads: job.threads, prompt: job.prompt, genTokens: job.genTokens, contextSize: job.contextSize });
        const r = await withTimeout(run, timeoutMs, `wllama in Chromium on ${job.modelPath} did not finish within ${(timeoutMs / 1000).toFixed(0)} s`);
        if (r.predicted !== job.genTokens) throw new Error(`wllama generated ${r.predicted} tokens, ${job.genTokens} were asked for`);
        return { promptTokens: r.promptTokens, prefillTokensPerSecond: r.prefill, decodeTokensPerSecond: r.decode, loadMs: r.loadMs, threads: r.threads };
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

/** runs in the page (no named inner functions: the bundler's helpers do not exist there) */
async function inPage(a: { url: string; threads: number; prompt: string; genTokens: number; contextSize: number }) {
  // URLs the page resolves, not the bundler
  const lib = "/wllama/index.js";
  const { Wllama } = await import(lib);
  const wllama = new Wllama({ "wllama.wasm": "/wllama/wasm/wllama.wasm", default: "/wllama/wasm/wllama.wasm" }, { suppressNativeLog: true });
  try {
    const blob = await (await fetch(a.url)).blob();
    const t0 = performance.now();
    await wllama.loadModel([blob], { n_ctx: a.contextSize, n_batch: a.contextSize, n_threads: a.threads, n_gpu_layers: 0 });
    const loadMs = performance.now() - t0;
    const res = await wllama.createCompletion({ prompt: a.prompt, max_tokens: a.genTokens, temperature: 0, ignore_eos: true, cache_prompt: false });
    const t = res.timings as { prompt_n: number; prompt_per_second: number; predicted_n: number; predicted_per_second: number };
    return { loadMs, threads: wllama.getNumThreads() as number, promptTokens: t.prompt_n, prefill: t.prompt_per_second, predicted: t.predicted_n, decode: t.predicted_per_second };
  } finally {
    await wllama.exit();
  }
}
