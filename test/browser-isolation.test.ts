import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { test } from "node:test";
import type { BrowserContext, Page } from "playwright-core";
// @ts-expect-error: a plain .mjs build script
import { browserDir } from "../scripts/build-browser.mjs";
import type { PageDocument } from "./helpers/page-document.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";
import { pagesOver, skipWithoutChromium } from "./helpers/chromium.js";

/** the page's document, for the functions this file runs in the page (helpers/page-document.ts) */
declare const document: PageDocument;

// The browser example's page on a plain static server that sends no COOP/COEP headers, as GitHub
// Pages does: dist-browser/tsllm-isolate.js (served beside the page) isolates it through a service
// worker and one reload, so that the wasm backend runs on Web Worker threads; where it cannot, the
// page runs on one thread as before, with no second reload. llama.cpp's greedy tokens of
// stories260K (the golden file in ../shared) judge both paths.
const MODEL = "models/stories260K.gguf";
const EXPECTED = "models/stories260K.expected.json";
const skip = skipWithoutShared(MODEL) || skipWithoutShared(EXPECTED)
  || skipWithoutChromium();

interface GoldenCase { prompt: string; promptTokens: number[]; completionTokens: number[] }
const golden = (): GoldenCase => JSON.parse(readFileSync(sharedFile(EXPECTED)!, "utf8")).cases[0];

const example = new URL("../examples/browser/", import.meta.url).pathname;
/** what the server answers a browser's fetch of the service worker's script with (it sends `Service-Worker: script`) */
let workerScript: "real" | "passthrough" = "real";
/** a service worker that controls the page but adds no headers: one with which the page stays not isolated */
const PASSTHROUGH = "self.addEventListener('install', () => self.skipWaiting()); self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));";
/** requests for the page itself (/ with any query) */
let pageRequests = 0;
/** the query the page's <script src="tsllm-isolate.js"> tag gets ("?coep=credentialless") */
let isolateQuery = "";
/** a 1x1 PNG, served without Cross-Origin-Resource-Policy: what an image from another site (a CDN that sends no CORP) is */
const PIXEL = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==", "base64");
/** the same server under another origin (chromium maps the name to 127.0.0.1) */
const OTHER_SITE = "cross-site.test";

/** a static server: no COOP, COEP or CORP header on anything */
function startStaticServer(model: Buffer): Promise<Server> {
  const server = createServer((req, res) => {
    const p = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
    const send = (type: string, body: Buffer | string): void => void res.writeHead(200, { "content-type": type }).end(body);
    if (p === "/") {
      pageRequests++;
      return send("text/html; charset=utf-8", readFileSync(join(example, "index.html"), "utf8").replace('src="/tsllm-isolate.js"', `src="/tsllm-isolate.js${isolateQuery}"`));
    }
    if (p === "/page.js" || p === "/page.css") return send(p.endsWith(".js") ? "text/javascript" : "text/css", readFileSync(join(example, p.slice(1))));
    if (p === "/tsllm-isolate.js") {
      const asWorker = req.headers["service-worker"] === "script";
      return send("text/javascript", asWorker && workerScript === "passthrough" ? PASSTHROUGH : readFileSync(join(browserDir, "tsllm-isolate.js")));
    }
    if (p.startsWith("/tsllm/") && /^[\w.-]+$/.test(p.slice(7)) && existsSync(join(browserDir, p.slice(7)))) {
      return send(p.endsWith(".wasm") ? "application/wasm" : "text/javascript", readFileSync(join(browserDir, p.slice(7))));
    }
    if (p === "/pixel.png") return send("image/png", PIXEL);
    if (p === "/models/") return send("application/json", "[]");
    if (p === "/models/stories260K.gguf") {
      const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
      if (!m) return void res.writeHead(200, { "content-type": "application/octet-stream", "content-length": model.length, "accept-ranges": "bytes" }).end(model);
      const start = Number(m[1]), end = m[2] ? Math.min(Number(m[2]), model.length - 1) : model.length - 1;
      return void res.writeHead(206, { "content-type": "application/octet-stream", "content-range": `bytes ${start}-${end}/${model.length}`, "content-length": end - start + 1 }).end(model.subarray(start, end + 1));
    }
    res.writeHead(404).end();
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

const rig = pagesOver(skip, () => startStaticServer(readFileSync(sharedFile(MODEL)!)), [`--host-resolver-rules=MAP ${OTHER_SITE} 127.0.0.1`]);

/** the page's status line once it is past "starting…" (on the page the one reload brings, if any;
 * while that reload parses its new document, #status may not exist yet) */
async function settledStatus(page: Page): Promise<string> {
  await page.waitForFunction(() => (document.getElementById("status")?.textContent ?? "starting…") !== "starting…", null, { timeout: 60_000 });
  return (await page.textContent("#status"))!;
}

/** opens the example page in `page` (greedy, the golden prompt), waits for it to settle, runs it, and returns #result and what the page said */
async function visit(page: Page): Promise<{ status: string; isolated: boolean; controlled: boolean; loads: number; result: any }> {
  const c = golden();
  const before = pageRequests;
  await page.goto(`${rig.base}/?${new URLSearchParams({ model: "/models/stories260K.gguf", prompt: c.prompt, maxTokens: String(c.completionTokens.length), temperature: "0" })}`);
  const status = await settledStatus(page);
  await page.click("#run");
  await page.waitForFunction(() => document.getElementById("result")!.textContent !== "", null, { timeout: 120_000 });
  const result = JSON.parse((await page.textContent("#result"))!);
  const isolated = await page.evaluate("crossOriginIsolated") as boolean;
  const controlled = await page.evaluate("navigator.serviceWorker?.controller != null") as boolean;
  return { status, isolated, controlled, loads: pageRequests - before, result };
}

/** a new tab of `context`, with a list of its uncaught errors */
async function newTab(context: BrowserContext): Promise<{ page: Page; errors: string[] }> {
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  return { page, errors };
}

/** the example page's line for a page that is not cross-origin isolated (examples/browser/page.js, unchanged) */
const NOT_ISOLATED = "ready (not cross-origin isolated: the wasm backend runs on one thread; COOP/COEP headers give it more, as the example server sends, or tsllm-isolate.js where a host cannot send them)";

test("on a server that sends no COOP/COEP, tsllm-isolate.js reloads the page once under its service worker: cross-origin isolated, the wasm backend on 2 threads, llama.cpp's golden tokens; the next visit needs no reload", { skip }, async () => {
  workerScript = "real";
  const plain = await fetch(`${rig.base}/`);
  assert.equal(plain.headers.get("cross-origin-opener-policy"), null);
  assert.equal(plain.headers.get("cross-origin-embedder-policy"), null);
  const c = golden();
  const context = await rig.browser.newContext();
  try {
    const { page, errors } = await newTab(context);
    const first = await visit(page);
    assert.deepEqual(errors, []);
    assert.equal(first.result.error, undefined, first.result.error);
    assert.deepEqual([first.loads, first.isolated, first.controlled, first.status], [2, true, true, "ready"], "one reload, then isolated");
    assert.equal(first.result.wasm.threads, 2, JSON.stringify(first.result.wasm));
    assert.equal(first.result.wasm.threadsNote, undefined);
    assert.deepEqual(first.result.promptTokens, c.promptTokens);
    assert.deepEqual(first.result.completionTokens, c.completionTokens);
    const again = await visit((await newTab(context)).page);
    assert.deepEqual([again.loads, again.isolated, again.status], [1, true, "ready"], "the worker already serves the page: no reload");
    assert.deepEqual([again.result.wasm.threads, again.result.completionTokens], [2, c.completionTokens]);
  } finally {
    await context.close();
  }
});

test("a browser without service workers (a private window) or whose registration fails: no reload, one thread with the page's usual line, the golden tokens", { skip }, async () => {
  workerScript = "real";
  const c = golden();
  for (const script of [
    // Firefox's private windows have no navigator.serviceWorker
    "Object.defineProperty(Navigator.prototype, 'serviceWorker', { get: () => undefined })",
    "ServiceWorkerContainer.prototype.register = () => Promise.reject(new DOMException('The operation is insecure.', 'SecurityError'))",
  ]) {
    const context = await rig.browser.newContext();
    try {
      await context.addInitScript(script);
      const { page, errors } = await newTab(context);
      const got = await visit(page);
      assert.deepEqual(errors, [], script);
      assert.equal(got.result.error, undefined, got.result.error);
      assert.deepEqual([got.loads, got.isolated, got.status], [1, false, NOT_ISOLATED], script);
      assert.deepEqual([got.result.wasm.threads, got.result.completionTokens], [1, c.completionTokens], script);
    } finally {
      await context.close();
    }
  }
});

test("a service worker that leaves the page not isolated: one reload, never a second (this visit nor the next), one thread, the golden tokens", { skip }, async () => {
  workerScript = "passthrough";
  const c = golden();
  const context = await rig.browser.newContext();
  try {
    const { page, errors } = await newTab(context);
    const first = await visit(page);
    assert.deepEqual(errors, []);
    assert.equal(first.result.error, undefined, first.result.error);
    assert.deepEqual([first.loads, first.isolated, first.controlled, first.status], [2, false, true, NOT_ISOLATED]);
    assert.deepEqual([first.result.wasm.threads, first.result.completionTokens], [1, c.completionTokens]);
    // the tab remembers its reload (sessionStorage): opened again in it, the page gives up at once
    const next = await visit(page);
    assert.deepEqual([next.loads, next.isolated, next.status], [1, false, NOT_ISOLATED]);
    assert.deepEqual([next.result.wasm.threads, next.result.completionTokens], [1, c.completionTokens]);
    assert.deepEqual(errors, []);
  } finally {
    workerScript = "real";
    await context.close();
  }
});

/** whether an <img> of another site that sends no Cross-Origin-Resource-Policy loads on the page ("loaded") or is blocked */
async function otherSiteImage(page: Page): Promise<string> {
  const src = `${rig.base.replace("127.0.0.1", OTHER_SITE)}/pixel.png?${Math.random()}`;
  return page.evaluate((url) => new Promise<string>((resolve) => {
    const img = new (globalThis as unknown as { Image: new () => { onload: () => void; onerror: () => void; src: string } }).Image();
    img.onload = () => resolve("loaded");
    img.onerror = () => resolve("blocked");
    img.src = url;
  }), src);
}

/** the Cross-Origin-Embedder-Policy the page's own URL is served with now (through its service worker) */
const servedPolicy = (page: Page): Promise<string | null> => page.evaluate(async () => (await fetch(location.href)).headers.get("cross-origin-embedder-policy"));
declare const location: { href: string };

test("tsllm-isolate.js?coep=credentialless: the page is isolated with COEP credentialless, so an image of another site without CORP loads (require-corp blocks it); the wasm backend on 2 threads, llama.cpp's golden tokens; a page isolated under require-corp switches at its next load", { skip }, async () => {
  workerScript = "real";
  const c = golden();
  const seen: Record<string, [boolean, string | null, string]> = {};
  for (const query of ["", "?coep=credentialless"]) {
    isolateQuery = query;
    const context = await rig.browser.newContext();
    try {
      const { page, errors } = await newTab(context);
      const got = await visit(page);
      assert.deepEqual(errors, [], query);
      assert.equal(got.result.error, undefined, got.result.error);
      assert.deepEqual([got.loads, got.isolated, got.controlled, got.status], [2, true, true, "ready"], query);
      assert.deepEqual([got.result.wasm.threads, got.result.completionTokens], [2, c.completionTokens], query);
      seen[query || "default"] = [got.isolated, await servedPolicy(page), await otherSiteImage(page)];
    } finally {
      isolateQuery = "";
      await context.close();
    }
  }
  assert.deepEqual(seen, { default: [true, "require-corp", "blocked"], "?coep=credentialless": [true, "credentialless", "loaded"] });

  // a page the require-corp worker isolates, now loading ?coep=credentialless: that worker still
  // serves this load (no second reload), the new one takes over for the next
  const context = await rig.browser.newContext();
  try {
    const { page, errors } = await newTab(context);
    assert.deepEqual((await visit(page)).loads, 2);
    isolateQuery = "?coep=credentialless";
    const switched = await visit(page);
    assert.deepEqual([switched.loads, switched.isolated, switched.result.completionTokens], [1, true, c.completionTokens]);
    await page.waitForFunction("navigator.serviceWorker.controller?.scriptURL.endsWith('?coep=credentialless')", null, { timeout: 30_000 });
    const next = await visit(page);
    assert.deepEqual([next.loads, next.isolated, next.result.wasm.threads], [1, true, 2]);
    assert.deepEqual([await servedPolicy(page), await otherSiteImage(page)], ["credentialless", "loaded"]);
    assert.deepEqual(errors, []);
  } finally {
    isolateQuery = "";
    await context.close();
  }
});

test("tsllm-isolate.js?coep= with another value: no service worker, the page not isolated, tsllmIsolation says what the parameter takes", { skip }, async () => {
  isolateQuery = "?coep=corp";
  const context = await rig.browser.newContext();
  try {
    const { page, errors } = await newTab(context);
    const before = pageRequests;
    await page.goto(`${rig.base}/`);
    assert.deepEqual(await page.evaluate("globalThis.tsllmIsolation"), { isolated: false, why: "tsllm-isolate.js?coep=corp: expected require-corp or credentialless" });
    assert.deepEqual([pageRequests - before, await page.evaluate("crossOriginIsolated"), await page.evaluate("navigator.serviceWorker.getRegistrations().then((r) => r.length)")], [1, false, 0]);
    assert.deepEqual(errors, []);
  } finally {
    isolateQuery = "";
    await context.close();
  }
});

test("tsllmUnregisterIsolation() unregisters the service worker; tsllm-isolate.js?unregister does it at load and reloads the page once, no longer cross-origin isolated (nor on its next load)", { skip }, async () => {
  workerScript = "real";
  const registrations = (page: Page): Promise<number> => page.evaluate("navigator.serviceWorker.getRegistrations().then((r) => r.length)") as Promise<number>;
  const context = await rig.browser.newContext();
  try {
    const { page, errors } = await newTab(context);
    const first = await visit(page);
    assert.deepEqual([first.loads, first.isolated, first.controlled], [2, true, true]);
    assert.equal(await page.evaluate("globalThis.tsllmUnregisterIsolation()"), true);
    assert.equal(await registrations(page), 0);
    assert.equal(await page.evaluate("globalThis.tsllmUnregisterIsolation()"), false, "nothing left to unregister");
    assert.deepEqual(errors, []);

    // a page that loads the script as before registers the worker again (in another tab here; the same tab: the last test)
    const tab = await newTab(context);
    const again = await visit(tab.page);
    assert.deepEqual([again.loads, again.isolated, again.controlled], [2, true, true]);
    // the site takes it back: the page, still served by the worker, unregisters it and reloads once without it
    isolateQuery = "?unregister";
    const off = await visit(tab.page);
    assert.deepEqual(tab.errors, []);
    assert.equal(off.result.error, undefined, off.result.error);
    assert.deepEqual([off.loads, off.isolated, off.controlled, off.status], [2, false, false, NOT_ISOLATED]);
    assert.deepEqual([off.result.wasm.threads, off.result.completionTokens], [1, golden().completionTokens]);
    assert.deepEqual(await tab.page.evaluate("globalThis.tsllmIsolation"), { isolated: false, why: "tsllm-isolate.js?unregister: its service worker is not registered" });
    assert.equal(await registrations(tab.page), 0);
    const next = await visit(tab.page);
    assert.deepEqual([next.loads, next.isolated, next.controlled], [1, false, false], "no worker, no reload");
    assert.deepEqual(tab.errors, []);
  } finally {
    isolateQuery = "";
    await context.close();
  }
});

test("a tab that left its isolated page (the worker unregistered) and loads tsllm-isolate.js again is isolated again with one reload, though Chromium gives it back the sessionStorage from before the isolating reload, which still holds the reload guard", { skip }, async () => {
  workerScript = "real";
  const context = await rig.browser.newContext();
  try {
    const { page, errors } = await newTab(context);
    const first = await visit(page);
    assert.deepEqual([first.loads, first.isolated, first.controlled], [2, true, true]);
    assert.equal(await page.evaluate("globalThis.tsllmUnregisterIsolation()"), true);
    // the same tab: before, the page found its guard (set before the first reload, in the storage it left for the isolated one) and gave up
    const again = await visit(page);
    assert.deepEqual(await page.evaluate("globalThis.tsllmIsolation"), { isolated: true });
    assert.deepEqual([again.loads, again.isolated, again.controlled], [2, true, true]);
    assert.equal(again.result.error, undefined, again.result.error);
    assert.deepEqual([again.result.wasm.threads, again.result.completionTokens], [2, golden().completionTokens]);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
