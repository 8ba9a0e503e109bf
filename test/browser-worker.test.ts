import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium, type Browser, type CDPSession, type Page } from "playwright-core";
import { startExampleServer, stopExampleServer } from "../src/bench/chromium-engine.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

// TsllmWorker (src/browser/client.ts) and the engine worker (src/browser/engine-worker.ts) driven
// directly from a page of the browser example's server (cross-origin isolated), in headless chromium
const MODEL = "models/stories260K.gguf";
const CHROMIUM = "/usr/bin/chromium";
const skip = skipWithoutShared(MODEL) || (existsSync(CHROMIUM) ? false : `${CHROMIUM} not found: this test needs Debian's chromium (apt-get install -y chromium; .ci/run installs it)`);

const modelsDir = mkdtempSync(join(tmpdir(), "tsllm-browser-worker-"));
let server: ChildProcess | undefined;
let base = "";
let browser: Browser | undefined;

before(async () => {
  if (skip) return;
  symlinkSync(sharedFile(MODEL)!, join(modelsDir, "stories260K.gguf"));
  ({ base, child: server } = await startExampleServer(modelsDir));
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
});
after(async () => {
  await browser?.close();
  if (server) stopExampleServer(server);
  rmSync(modelsDir, { recursive: true, force: true });
});

async function openPage(): Promise<{ page: Page; errors: string[] }> {
  const page = await browser!.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(`${base}/`);
  return { page, errors };
}

/** the wasm kernel threads (Web Workers named "tsllm kernels N") alive in the browser, as DevTools lists them */
async function kernelWorkers(cdp: CDPSession): Promise<number> {
  const { targetInfos } = await cdp.send("Target.getTargets");
  return targetInfos.filter((t) => t.type === "worker" && t.title.startsWith("tsllm kernels")).length;
}

/** polls until there are `want` kernel workers (a terminated worker leaves the list a moment later) or 5 s passed; returns the last count */
async function settleKernelWorkers(cdp: CDPSession, want: number): Promise<number> {
  const deadline = Date.now() + 5000;
  let n = await kernelWorkers(cdp);
  while (n !== want && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    n = await kernelWorkers(cdp);
  }
  return n;
}

test("leaving a stream() loop early stops the generation in the worker (finishReason abort), as Model.stream does", { skip }, async () => {
  const { page, errors } = await openPage();
  const got = await page.evaluate(async () => {
    const lib = "/tsllm/tsllm.js";
    const { TsllmWorker } = await import(lib);
    const engine = new TsllmWorker("/tsllm/engine-worker.js");
    try {
      await engine.load("/models/stories260K.gguf", { cache: false, threads: 1 });
      // the worker's own final answer to the stream's request, read beside the client's handler
      const results: { finishReason: string; completionTokens: number[] }[] = [];
      const worker = engine.worker;
      const handler = worker.onmessage;
      worker.onmessage = (e: { data: { kind: string; value: (typeof results)[number] } }) => {
        // (an abort request is answered with a result of its own, undefined)
        if (e.data.kind === "result" && e.data.value?.finishReason !== undefined) results.push(e.data.value);
        handler(e);
      };
      let steps = 0;
      for await (const _ of engine.stream("Once upon a time", { maxTokens: 400, ignoreEos: true, temperature: 0.8 })) {
        if (++steps === 3) break;
      }
      while (results.length === 0) await new Promise((r) => setTimeout(r, 10));
      return { steps, finishReason: results[0]!.finishReason, tokens: results[0]!.completionTokens.length };
    } finally {
      engine.terminate();
    }
  });
  assert.equal(got.steps, 3);
  assert.equal(got.finishReason, "abort");
  assert.ok(got.tokens < 400, `${got.tokens} tokens generated after the loop was left`);
  assert.deepEqual(errors, []);
  await page.close();
});

test("two loads at once leave one model: the one the first load built is disposed, its kernel threads end", { skip }, async () => {
  const { page, errors } = await openPage();
  const cdp = await browser!.newBrowserCDPSession();
  try {
    await page.evaluate(async () => {
      const lib = "/tsllm/tsllm.js";
      const { TsllmWorker } = await import(lib);
      (globalThis as unknown as { engine: unknown }).engine = new TsllmWorker("/tsllm/engine-worker.js");
    });
    // threads 2: each model has one kernel worker beside the engine worker
    const loaded = await page.evaluate(async () => {
      const engine = (globalThis as unknown as { engine: any }).engine;
      const [a, b] = await Promise.all([engine.load("/models/stories260K.gguf", { cache: false, threads: 2 }), engine.load("/models/stories260K.gguf", { cache: false, threads: 2 })]);
      const r = await engine.generate("Once upon a time", { maxTokens: 4, temperature: 0 });
      return [a.threads, b.threads, r.completionTokens.length];
    });
    assert.deepEqual(loaded, [2, 2, 4]);
    assert.equal(await settleKernelWorkers(cdp, 1), 1, "one model's kernel threads");
    await page.evaluate(() => (globalThis as unknown as { engine: any }).engine.unload());
    assert.equal(await settleKernelWorkers(cdp, 0), 0, "no kernel threads after unload");
  } finally {
    await cdp.detach();
  }
  assert.deepEqual(errors, []);
  await page.close();
});
