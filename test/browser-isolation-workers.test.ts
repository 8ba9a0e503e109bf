import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { test } from "node:test";
import type { Page } from "playwright-core";
// @ts-expect-error: a plain .mjs build script
import { browserDir } from "../scripts/build-browser.mjs";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";
import { pagesOver, skipWithoutChromium } from "./helpers/chromium.js";

// The browser engine's workers when one fails to start: the engine worker's script (TsllmWorker's
// argument) or the wasm backend's kernel worker (kernel-worker.js beside the `assetsUrl` folder's
// kernels) answering 404, throwing at its top level, or loading but never answering. A page on a
// cross-origin isolated server (COOP/COEP on everything) drives TsllmWorker in headless chromium.
// Every call must settle: the load rejects with one error naming the script that failed, and so
// does every later call of a worker that never started; a load whose backend never starts ends
// with its signal. Afterwards the same page loads stories260K on the good build: llama.cpp's tokens.
const MODEL = "models/stories260K.gguf";
const EXPECTED = "models/stories260K.expected.json";
const skip = skipWithoutShared(MODEL) || skipWithoutShared(EXPECTED) || skipWithoutChromium();

/** scripts served in place of the build's, by path: what a broken deploy, a stale cache or a wrong assetsUrl serves */
const BROKEN: Record<string, string> = {
  // module evaluation throws: what a build for another browser, or a half-deployed one, does
  "/throws/engine-worker.js": "throw new Error('boom in the engine worker');",
  "/throws/kernel-worker.js": "throw new Error('boom in the kernel worker');",
  // loads, and never answers its start message (a kernel worker of another build that waits for something else)
  "/silent/kernel-worker.js": "self.onmessage = () => undefined;",
};

/** a static server with COOP/COEP on everything: the build under /tsllm/ and, with its kernels, under /missing/, /throws/ and /silent/ (each with its broken script, or none), the model under /models/ */
function startServer(model: Buffer): Promise<Server> {
  const server = createServer((req, res) => {
    const p = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
    const headers = { "cross-origin-opener-policy": "same-origin", "cross-origin-embedder-policy": "require-corp", "cross-origin-resource-policy": "same-origin" };
    const send = (type: string, body: Buffer | string): void => void res.writeHead(200, { ...headers, "content-type": type }).end(body);
    if (p === "/") return send("text/html; charset=utf-8", "<!doctype html><title>workers</title>");
    if (BROKEN[p] !== undefined) return send("text/javascript", BROKEN[p]);
    const m = /^\/(tsllm|missing|throws|silent)\/([\w.-]+)$/.exec(p);
    // the broken folders hold the build's kernels only (their scripts are BROKEN's, or missing)
    if (m && (m[1] === "tsllm" || m[2]!.endsWith(".wasm")) && existsSync(join(browserDir, m[2]!))) {
      return send(m[2]!.endsWith(".wasm") ? "application/wasm" : "text/javascript", readFileSync(join(browserDir, m[2]!)));
    }
    if (p === "/models/stories260K.gguf") return void res.writeHead(200, { ...headers, "content-type": "application/octet-stream", "content-length": model.length }).end(model);
    res.writeHead(404, headers).end();
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

const rig = pagesOver(skip, () => startServer(readFileSync(sharedFile(MODEL)!)));

async function openPage(): Promise<{ page: Page; errors: string[] }> {
  const page = await rig.browser.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(`${rig.base}/`);
  return { page, errors };
}

/**
 * Runs `body` in the page with TsllmWorker and `settled(promise)` in scope: settled gives
 * "resolved: <value>" or "rejected: <message>", or "still pending" when the promise has not
 * settled 30 s after the call: a hang, which no fix may leave (no load here needs a second).
 */
async function inPage<T>(page: Page, body: string): Promise<T> {
  return page.evaluate(async (code) => {
    const lib = "/tsllm/tsllm.js";
    const { TsllmWorker } = await import(lib);
    return new Function("TsllmWorker", `
      const settled = (p) => Promise.race([
        p.then((v) => "resolved: " + JSON.stringify(v), (e) => "rejected: " + (e.name === "Error" ? "" : e.name + ": ") + e.message),
        new Promise((r) => setTimeout(() => r("still pending"), 30000)),
      ]);
      return (async () => { ${code} })();
    `)(TsllmWorker);
  }, body) as Promise<T>;
}

const golden = (): number[] => JSON.parse(readFileSync(sharedFile(EXPECTED)!, "utf8")).cases[0].completionTokens.slice(0, 4);

/** the good build's load and greedy tokens on the same page: what failed before left nothing behind */
const GOOD_RUN = `
  const good = new TsllmWorker("/tsllm/engine-worker.js");
  try {
    const loaded = await good.load("/models/stories260K.gguf", { cache: false, threads: 2 });
    const r = await good.generate("Once upon a time", { maxTokens: 4, temperature: 0 });
    return [loaded.threads, r.completionTokens];
  } finally {
    good.terminate();
  }
`;

test("an engine worker whose script answers 404 or throws at its top level: load() rejects with one error naming the script, and so does every later call (a script that threw left them pending forever)", { skip }, async () => {
  const { page, errors } = await openPage();
  try {
    const got = await inPage<Record<string, string[]>>(page, `
      const out = {};
      for (const dir of ["missing", "throws"]) {
        const w = new TsllmWorker("/" + dir + "/engine-worker.js");
        const load = await settled(w.load("/models/stories260K.gguf", { cache: false }));
        // sent after the worker failed: there is nobody to answer it
        const later = await settled(w.tokenize("Once upon a time"));
        out[dir] = [load, later];
        w.terminate();
      }
      return out;
    `);
    const url = (dir: string): string => `/${dir}/engine-worker.js`;
    assert.deepEqual(got, {
      missing: Array(2).fill(`rejected: tsllm engine worker: ${url("missing")} failed to load`),
      throws: Array(2).fill(`rejected: tsllm engine worker: ${url("throws")} failed to start: Uncaught Error: boom in the engine worker`),
    });
    assert.deepEqual(await inPage(page, GOOD_RUN), [2, golden()]);
    assert.deepEqual(errors, []);
  } finally {
    await page.close();
  }
});

test("a kernel worker whose script answers 404 or throws at its top level: load() rejects with one error naming kernel-worker.js; one that never answers its start message ends with the load's signal (it waited forever, Stop did nothing); the same engine worker then loads with the build's kernel worker (it kept the failed one's script)", { skip }, async () => {
  const { page, errors } = await openPage();
  try {
    const got = await inPage<Record<string, string>>(page, `
      const out = {};
      for (const dir of ["missing", "throws", "silent"]) {
        const w = new TsllmWorker("/tsllm/engine-worker.js");
        const controller = new AbortController();
        const loading = w.load("/models/stories260K.gguf", { cache: false, threads: 2, assetsUrl: "/" + dir + "/", signal: controller.signal });
        // the silent worker: Stop once the load has had its chance (the others have failed long before)
        if (dir === "silent") setTimeout(() => controller.abort(), 2000);
        out[dir] = await settled(loading);
        // the same engine worker, the build's own kernel worker: it kept the first load's kernel worker script
        out[dir + " then"] = await settled(w.load("/models/stories260K.gguf", { cache: false, threads: 2, assetsUrl: "/tsllm/" })
          .then((loaded) => w.generate("Once upon a time", { maxTokens: 4, temperature: 0 }).then((r) => [loaded.threads, r.completionTokens])));
        w.terminate();
      }
      return out;
    `);
    const url = (dir: string): string => `${rig.base}/${dir}/kernel-worker.js`;
    const good = `resolved: ${JSON.stringify([2, golden()])}`;
    const missing = `wasm backend: worker 1 failed to start: kernel worker ${url("missing")} failed to load`;
    const throws = `wasm backend: worker 1 failed to start: kernel worker ${url("throws")}: Uncaught Error: boom in the kernel worker`;
    const aborted = `AbortError: ${rig.base}/models/stories260K.gguf: aborted`;
    assert.deepEqual(got, {
      missing: `rejected: ${missing}`, "missing then": good,
      throws: `rejected: ${throws}`, "throws then": good,
      silent: `rejected: ${aborted}`, "silent then": good,
    });
    assert.deepEqual(errors, []);
  } finally {
    await page.close();
  }
});
