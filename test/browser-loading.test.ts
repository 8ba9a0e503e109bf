import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { createServer, type Server, type ServerResponse } from "node:http";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
// @ts-expect-error: a plain .mjs build script
import { browserDir, ensureBrowserBuild } from "../scripts/build-browser.mjs";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";
import { CHROMIUM, skipWithoutChromium } from "./helpers/chromium.js";

// The browser build's model loading (TsllmWorker.load) against a loopback server that serves the
// model every way a real one might: with and without Range support, cut off mid-way, slowly, from
// another origin without CORS headers; with the Cache API's quota used up, a damaged cached copy,
// the browser out of wasm memory, a page without cross-origin isolation. llama.cpp's greedy tokens
// of stories260K (../shared) judge that a load that should work gives the right model.
const MODEL = "models/stories260K.gguf";
const EXPECTED = "models/stories260K.expected.json";
const skip = skipWithoutShared(MODEL) || skipWithoutShared(EXPECTED)
  || skipWithoutChromium();

/** llama.cpp's first 8 greedy tokens after "Once upon a time" */
const golden = (): number[] => JSON.parse(readFileSync(sharedFile(EXPECTED)!, "utf8")).cases[0].completionTokens.slice(0, 8);

/** how the server answers a request for /m/MODE/stories260K.gguf */
type Mode = "range" | "norange" | "truncated" | "slow" | "404" | "padded" | "huge" | "html" | "changing";
/** requests per "MODE RANGE-HEADER|whole", and bytes sent before the client closed a slow download */
const requests = new Map<string, number>();
const closedAt: number[] = [];
const countRequest = (key: string): void => void requests.set(key, (requests.get(key) ?? 0) + 1);
const requestCount = (prefix: string): number => [...requests].filter(([k]) => k.startsWith(prefix)).reduce((n, [, c]) => n + c, 0);

const paddings = new Map<number, Buffer>();
const padded = (model: Buffer, zeros: number): Buffer => paddings.get(zeros) ?? paddings.set(zeros, Buffer.concat([model, Buffer.alloc(zeros)])).get(zeros)!;

function serveModel(res: ServerResponse, mode: Mode, range: string | undefined, model: Buffer): void {
  const m = /^bytes=(\d+)-(\d*)$/.exec(range ?? "");
  if (mode === "404") return void res.writeHead(404, { "content-type": "text/plain" }).end("not here");
  // the model and zeros after it (which the loader never reads): 40 MB (a file of three 16 MiB parts), or 300 MB (over 256 MiB)
  // 40 MB that is no GGUF (an HTML page where the model should be, a safetensors file)
  if (mode === "html") model = paddings.get(-1) ?? paddings.set(-1, Buffer.alloc(40_000_000, "<!doctype html>")).get(-1)!;
  if (mode === "padded" || mode === "huge") model = padded(model, mode === "padded" ? 40_000_000 : 300_000_000);
  // a file replaced on the server after the first byte was probed: a new ETag, other weights
  const changed = mode === "changing" && range !== "bytes=0-0";
  if (changed) model = paddings.get(-2) ?? paddings.set(-2, Buffer.from(model.map((b, i) => (i > 600000 ? b ^ 0x40 : b)))).get(-2)!;
  if (m && mode !== "norange" && mode !== "slow") {
    const start = Number(m[1]), end = m[2] ? Math.min(Number(m[2]), model.length - 1) : model.length - 1;
    res.writeHead(206, { "content-type": "application/octet-stream", "content-range": `bytes ${start}-${end}/${model.length}`, "content-length": end - start + 1, ...(mode === "changing" ? { etag: changed ? '"v2"' : '"v1"' } : {}) });
    return void res.end(model.subarray(start, end + 1));
  }
  // a wrong content type on purpose: a GGUF is bytes whatever the server calls it
  res.writeHead(200, { "content-type": mode === "norange" ? "text/html" : "application/octet-stream", "content-length": model.length });
  if (mode === "truncated") {
    // half the announced bytes, then the connection drops
    res.write(model.subarray(0, model.length >> 1));
    setTimeout(() => res.destroy(), 20);
    return;
  }
  if (mode === "slow") {
    let at = 0;
    const timer = setInterval(() => {
      res.write(model.subarray(at, at + 16384));
      at += 16384;
      if (at >= model.length) {
        clearInterval(timer);
        res.end();
      }
    }, 50);
    res.on("close", () => {
      clearInterval(timer);
      if (at < model.length) closedAt.push(at);
    });
    return;
  }
  res.end(model);
}

/** the test server: / (a blank page, cross-origin isolated unless under /plain/), /tsllm/ (the build), /m/MODE/ (the model) */
function startTestServer(model: Buffer): Promise<Server> {
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
    const plain = path.startsWith("/plain/");
    if (!plain) {
      res.setHeader("Cross-Origin-Opener-Policy", "same-origin");
      res.setHeader("Cross-Origin-Embedder-Policy", "require-corp");
    }
    res.setHeader("Cross-Origin-Resource-Policy", "same-origin");
    const p = plain ? path.slice("/plain".length) : path;
    if (p === "/") return void res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>tsllm loading test</title>");
    if (p.startsWith("/tsllm/") && /^[\w.-]+$/.test(p.slice(7))) {
      const file = join(browserDir, p.slice(7));
      if (!existsSync(file)) return void res.writeHead(404).end();
      return void res.writeHead(200, { "content-type": file.endsWith(".wasm") ? "application/wasm" : "text/javascript" }).end(readFileSync(file));
    }
    const m = /^\/m\/([a-z0-9]+)\//.exec(p);
    if (m) {
      countRequest(`${m[1]} ${req.headers.range ?? "whole"}`);
      return serveModel(res, m[1] as Mode, req.headers.range, model);
    }
    res.writeHead(404).end();
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

let server: Server | undefined;
/** a second origin (another port) that sends no CORS headers */
let other: Server | undefined;
let base = "", otherBase = "";
let browser: Browser | undefined;

before(async () => {
  if (skip) return;
  await ensureBrowserBuild();
  const model = readFileSync(sharedFile(MODEL)!);
  server = await startTestServer(model);
  other = await startTestServer(model);
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  otherBase = `http://127.0.0.1:${(other.address() as { port: number }).port}`;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
});
after(async () => {
  await browser?.close();
  server?.close();
  other?.close();
});

/**
 * runs `body` (the text of an async function body, with TsllmWorker, URL_BASE and OTHER_BASE in
 * scope) in a fresh page of its own browser context (its own Cache API) and returns its value;
 * a string, not a function: tsx would wrap a function's inner arrows in a __name the page lacks
 */
async function inPage<T>(body: string, options: { path?: string; context?: BrowserContext; prepare?: (page: Page, context: BrowserContext) => Promise<void>; on?: Browser } = {}): Promise<T> {
  const context = options.context ?? await (options.on ?? browser!).newContext();
  const page = await context.newPage();
  try {
    await page.goto(`${base}${options.path ?? "/"}`);
    await options.prepare?.(page, context);
    const lib = options.path?.startsWith("/plain/") ? "/plain/tsllm/tsllm.js" : "/tsllm/tsllm.js";
    return await page.evaluate(`(async () => { const { TsllmWorker } = await import(${JSON.stringify(lib)}); const URL_BASE = ${JSON.stringify(base)}, OTHER_BASE = ${JSON.stringify(otherBase)}; ${body} })()`) as T;
  } finally {
    await page.close();
    if (!options.context) await context.close();
  }
}

/** page code: loads `url` with `options` and generates 8 greedy tokens; {tokens, fromCache, cached, notCached} or {error, name} */
const loadAndGenerate = (url: string, options = "{ threads: 1 }"): string => `
  const engine = new TsllmWorker();
  try {
    const info = await engine.load(${url}, ${options});
    const r = await engine.generate("Once upon a time", { maxTokens: 8, temperature: 0 });
    return { tokens: r.completionTokens, fromCache: info.fromCache, cached: info.cached, notCached: info.notCached };
  } catch (e) {
    return { error: e.message, name: e.name };
  } finally {
    engine.terminate();
  }`;

interface Loaded { tokens?: number[]; fromCache?: boolean; cached?: boolean; notCached?: string; error?: string; name?: string }

test("a model served with Range, without Range (and a wrong content type), cached or not, gives llama.cpp's tokens; a 404 names the URL", { skip }, async () => {
  for (const [mode, options] of [["range", "{ threads: 1 }"], ["range", "{ threads: 1, cache: false }"], ["norange", "{ threads: 1 }"], ["norange", "{ threads: 1, cache: false }"]] as const) {
    const r = await inPage<Loaded>(loadAndGenerate(`"/m/${mode}/stories260K.gguf"`, options));
    assert.deepEqual(r.tokens, golden(), `${mode} ${options}: ${r.error}`);
  }
  const missing = await inPage<Loaded>(loadAndGenerate(`"/m/404/stories260K.gguf"`));
  assert.equal(missing.error, `${base}/m/404/stories260K.gguf: HTTP 404 Not Found`);
});

test("a download that breaks off mid-way is one error naming the URL and how far it got, not a second download or a bare 'Failed to fetch'", { skip }, async () => {
  const before = requestCount("truncated");
  const cached = await inPage<Loaded>(loadAndGenerate(`"/m/truncated/stories260K.gguf"`));
  assert.match(cached.error ?? "", new RegExp(`^${base}/m/truncated/stories260K\\.gguf: the download broke off after \\d+ of 1185376 bytes \\(`), JSON.stringify(cached));
  assert.equal(requestCount("truncated") - before, 1, "one request: a broken download is not retried as Range reads");
  // the same server without Range support, not cached: the whole body in one response, cut short
  const whole = await inPage<Loaded>(loadAndGenerate(`"/m/truncated/stories260K.gguf"`, "{ threads: 1, cache: false, wholeFile: true }"));
  assert.match(whole.error ?? "", new RegExp(`^${base}/m/truncated/stories260K\\.gguf: the download broke off before its 1185376 bytes arrived`), JSON.stringify(whole));
});

test("another origin that sends no CORS headers: the error names the URL and the missing headers", { skip }, async () => {
  const r = await inPage<Loaded>(loadAndGenerate("OTHER_BASE + \"/m/range/stories260K.gguf\""));
  assert.match(r.error ?? "", new RegExp(`^${otherBase}/m/range/stories260K\\.gguf: cannot fetch: .*${otherBase} is another origin: it must answer with Access-Control-Allow-Origin`), r.error);
});

test("load's AbortSignal stops a download mid-way: an AbortError, the connection closed early, nothing cached, no model; the next load works", { skip }, async () => {
  const closedBefore = closedAt.length;
  const r = await inPage<{ error: string; name: string; progressEvents: number; cachedModels: number; generate: string; next: number[] }>(`
    const engine = new TsllmWorker();
    const controller = new AbortController();
    let progressEvents = 0;
    const onProgress = (p) => { progressEvents++; if (p.loaded > 100000) controller.abort(); };
    let error, name;
    try {
      await engine.load("/m/slow/stories260K.gguf", { threads: 1, signal: controller.signal, onProgress });
    } catch (e) {
      error = e.message;
      name = e.name;
    }
    const cachedModels = (await engine.cachedModels()).length;
    let generate;
    try { await engine.generate("x", { maxTokens: 1 }); } catch (e) { generate = e.message; }
    await engine.load("/m/range/stories260K.gguf", { threads: 1 });
    const next = (await engine.generate("Once upon a time", { maxTokens: 8, temperature: 0 })).completionTokens;
    engine.terminate();
    return { error, name, progressEvents, cachedModels, generate, next };`);
  assert.equal(r.name, "AbortError");
  assert.equal(r.error, `${base}/m/slow/stories260K.gguf: aborted`);
  assert.ok(r.progressEvents > 0);
  assert.equal(r.cachedModels, 0, "nothing of the aborted download is cached");
  assert.equal(r.generate, `no model is loaded (the last load failed: ${base}/m/slow/stories260K.gguf: aborted)`);
  assert.deepEqual(r.next, golden());
  // the server saw the download end before the file did
  for (let i = 0; i < 100 && closedAt.length === closedBefore; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(closedAt.length, closedBefore + 1, "the slow download's connection was closed early");
  assert.ok(closedAt.at(-1)! < 1185376);
});

test("the storage quota used up: the model still loads (Range reads), not cached, and notCached names QuotaExceededError", { skip }, async () => {
  const r = await inPage<Loaded>(loadAndGenerate(`"/m/range/stories260K.gguf"`), {
    prepare: async (page, context) => {
      const cdp = await context.newCDPSession(page);
      await cdp.send("Storage.overrideQuotaForOrigin", { origin: base, quotaSize: 100_000 });
    },
  });
  assert.deepEqual(r.tokens, golden(), r.error);
  assert.equal(r.cached, false);
  assert.match(r.notCached ?? "", /^the model cache could not keep .*stories260K\.gguf: this site's storage quota is used up \(QuotaExceededError\)/, r.notCached);
});

test("a damaged cached copy (its header overwritten) is detected: taken out, downloaded again, llama.cpp's tokens", { skip }, async () => {
  const before = requestCount("range whole");
  const r = await inPage<{ first: boolean; second: Loaded & { refetched?: string }; third: boolean }>(`
    const engine = new TsllmWorker();
    const url = URL_BASE + "/m/range/stories260K.gguf";
    const first = (await engine.load(url, { threads: 1 })).cached;
    // the cached copy (its one 16 MiB part), same size, its first 64 bytes garbage
    const cache = await caches.open("tsllm-models-v1");
    const entry = await cache.match(url + "?tsllm-part=0");
    const bytes = new Uint8Array(await entry.arrayBuffer());
    bytes.fill(0x55, 0, 64);
    await cache.put(url + "?tsllm-part=0", new Response(bytes, { headers: entry.headers }));
    let second;
    try {
      const info = await engine.load(url, { threads: 1 });
      second = { tokens: (await engine.generate("Once upon a time", { maxTokens: 8, temperature: 0 })).completionTokens, fromCache: info.fromCache, cached: info.cached, refetched: info.refetched };
    } catch (e) {
      second = { error: e.message };
    }
    const third = (await engine.load(url, { threads: 1 })).fromCache;
    engine.terminate();
    return { first, second, third };`);
  assert.equal(r.first, true);
  assert.deepEqual(r.second, { tokens: golden(), fromCache: false, cached: true, refetched: `${base}/m/range/stories260K.gguf: the cached copy was damaged (bytes 0-1185375 differ from what was downloaded): downloaded again` }, r.second.error);
  assert.equal(r.third, true, "the fresh copy is cached again");
  assert.equal(requestCount("range whole") - before, 2, "downloaded twice: at first, and after the damaged copy");
});

test("a cached copy damaged in its weights (same size, header intact) is found by its digests: downloaded again, one message saying so, llama.cpp's tokens", { skip }, async () => {
  const before = requestCount("range whole");
  const r = await inPage<{ first: Loaded; damaged: Loaded & { refetched?: string; phases: string[] }; third: Loaded & { refetched?: string } }>(`
    const engine = new TsllmWorker();
    const url = URL_BASE + "/m/range/stories260K.gguf";
    const run = async (onProgress) => {
      const info = await engine.load(url, { threads: 1, onProgress });
      const tokens = (await engine.generate("Once upon a time", { maxTokens: 8, temperature: 0 })).completionTokens;
      return { tokens, fromCache: info.fromCache, cached: info.cached, refetched: info.refetched };
    };
    const first = await run();
    // the cached copy (its one 16 MiB part), same size, 64 bytes in the middle of the weights changed (as a bad disk sector would)
    const cache = await caches.open("tsllm-models-v1");
    const entry = await cache.match(url + "?tsllm-part=0");
    const bytes = new Uint8Array(await entry.arrayBuffer());
    for (let i = 600000; i < 600064; i++) bytes[i] ^= 0x40;
    await cache.put(url + "?tsllm-part=0", new Response(bytes, { headers: entry.headers }));
    const phases = [];
    let damaged;
    try {
      damaged = { ...(await run((p) => phases.push(p.phase + (p.fromCache ? " (cache)" : "")))), phases: [...new Set(phases)] };
    } catch (e) {
      damaged = { error: e.message, phases };
    }
    const third = await run();
    engine.terminate();
    return { first, damaged, third };`);
  assert.deepEqual([r.first.tokens, r.first.cached], [golden(), true], r.first.error);
  assert.deepEqual([r.damaged.tokens, r.damaged.fromCache, r.damaged.cached], [golden(), false, true], r.damaged.error);
  assert.equal(r.damaged.refetched, `${base}/m/range/stories260K.gguf: the cached copy was damaged (bytes 0-1185375 differ from what was downloaded): downloaded again`);
  assert.deepEqual(r.damaged.phases, ["verify (cache)", "download", "read"]);
  assert.deepEqual([r.third.tokens, r.third.fromCache, r.third.refetched], [golden(), true, undefined], "the fresh copy is cached again and checks out");
  assert.equal(requestCount("range whole") - before, 2, "downloaded twice: at first, and after the damaged copy");
});

test("a file of several digest blocks, downloaded in pieces of any size: a clean copy checks out, a changed byte in its second block is found and named", { skip }, async () => {
  const r = await inPage<{ clean: Loaded & { refetched?: string }; damaged: Loaded & { refetched?: string }; parts: number }>(`
    const engine = new TsllmWorker();
    const url = URL_BASE + "/m/padded/stories260K.gguf";
    const run = async () => {
      const info = await engine.load(url, { threads: 1 });
      const tokens = (await engine.generate("Once upon a time", { maxTokens: 8, temperature: 0 })).completionTokens;
      return { tokens, fromCache: info.fromCache, ...(info.refetched ? { refetched: info.refetched } : {}) };
    };
    await run();
    const clean = await run();
    // byte 30000000 is in the second 16 MiB part
    const cache = await caches.open("tsllm-models-v1");
    const parts = Number((await cache.match(url)).headers.get("x-tsllm-parts"));
    const entry = await cache.match(url + "?tsllm-part=1");
    const bytes = new Uint8Array(await entry.arrayBuffer());
    bytes[30000000 - 16777216] = 1;
    await cache.put(url + "?tsllm-part=1", new Response(bytes, { headers: entry.headers }));
    const damaged = await run();
    engine.terminate();
    return { clean, damaged, parts };`);
  assert.equal(r.parts, 3, "41,185,376 bytes in 16 MiB parts");
  assert.deepEqual(r.clean, { tokens: golden(), fromCache: true }, r.clean.error);
  assert.deepEqual([r.damaged.tokens, r.damaged.fromCache], [golden(), false], r.damaged.error);
  assert.equal(r.damaged.refetched, `${base}/m/padded/stories260K.gguf: the cached copy was damaged (bytes 16777216-33554431 differ from what was downloaded): downloaded again`);
});

test("a model over 256 MiB (one Cache API entry of that size is refused by Chromium) is cached, and the next load reads it from the cache; an abort stops its check", { skip }, async () => {
  const r = await inPage<{ loads: Loaded[]; aborted: { name: string; error: string; checked: number; total: number; cachedModels: number } }>(`
    const engine = new TsllmWorker();
    const url = "/m/huge/stories260K.gguf";
    const loads = [];
    for (let i = 0; i < 2; i++) {
      const info = await engine.load(url, { threads: 1 });
      const tokens = (await engine.generate("Once upon a time", { maxTokens: 8, temperature: 0 })).completionTokens;
      loads.push({ tokens, fromCache: info.fromCache, cached: info.cached, notCached: info.notCached ?? null });
    }
    // Stop at the check's first progress: the load ends there, the copy stays cached
    const controller = new AbortController();
    let checked = 0, total = 0, aborted;
    const onProgress = (p) => { if (p.phase === "verify") { checked = Math.max(checked, p.loaded); total = p.total; controller.abort(); } };
    try {
      await engine.load(url, { threads: 1, signal: controller.signal, onProgress });
    } catch (e) {
      aborted = { name: e.name, error: e.message };
    }
    aborted = { ...aborted, checked, total, cachedModels: (await engine.cachedModels()).length };
    engine.terminate();
    return { loads, aborted };`);
  assert.deepEqual(r.loads, [{ tokens: golden(), fromCache: false, cached: true, notCached: null }, { tokens: golden(), fromCache: true, cached: true, notCached: null }]);
  assert.deepEqual([r.aborted.name, r.aborted.error, r.aborted.cachedModels], ["AbortError", `${base}/m/huge/stories260K.gguf: aborted`, 1]);
  assert.ok(r.aborted.checked < r.aborted.total, `the check stopped at ${r.aborted.checked} of ${r.aborted.total} bytes`);
});

test("a URL that is no GGUF fails at its first bytes with the reader's error, not once 40 MB have arrived; nothing is cached", { skip }, async () => {
  const r = await inPage<{ error: string; downloaded: number; cachedModels: number }>(`
    const engine = new TsllmWorker();
    let downloaded = 0, error;
    const onProgress = (p) => { if (p.phase === "download") downloaded = Math.max(downloaded, p.loaded); };
    try {
      await engine.load("/m/html/model.gguf", { threads: 1, onProgress });
    } catch (e) {
      error = e.message;
    }
    const cachedModels = (await engine.cachedModels()).length;
    engine.terminate();
    return { error, downloaded, cachedModels };`);
  assert.equal(r.error, `${base}/m/html/model.gguf: magic: expected "GGUF", found "<!do" (not a GGUF file)`);
  assert.ok(r.downloaded < 40_000_000, `stopped after ${r.downloaded} bytes`);
  assert.equal(r.cachedModels, 0);
});

test("Range reads of a file replaced on the server mid-load (its ETag changed): an error saying so, not two files' bytes mixed", { skip }, async () => {
  const r = await inPage<Loaded>(loadAndGenerate(`"/m/changing/stories260K.gguf"`, "{ threads: 1, cache: false }"));
  assert.equal(r.error, `${base}/m/changing/stories260K.gguf: the file changed on the server while it was read (ETag "v1" became ETag "v2"); load it again`, JSON.stringify(r));
});

test("a copy cached before digests were kept loads from the cache (no download), gets its digests then, and damage to it is found from then on", { skip }, async () => {
  const before = requestCount("range whole");
  const r = await inPage<{ legacy: Loaded & { refetched?: string }; damaged: Loaded & { refetched?: string } }>(`
    const engine = new TsllmWorker();
    const url = URL_BASE + "/m/range/stories260K.gguf";
    const run = async () => {
      const info = await engine.load(url, { threads: 1 });
      const tokens = (await engine.generate("Once upon a time", { maxTokens: 8, temperature: 0 })).completionTokens;
      return { tokens, fromCache: info.fromCache, ...(info.refetched ? { refetched: info.refetched } : {}) };
    };
    await engine.load(url, { threads: 1 });
    // as an older version stored it: the file as the entry's body (no parts), without its copy id, no digests beside it
    const cache = await caches.open("tsllm-models-v1");
    const entry = await cache.match(url);
    const headers = new Headers(entry.headers);
    headers.delete("x-tsllm-copy");
    headers.delete("x-tsllm-parts");
    const bytes = new Uint8Array(await (await cache.match(url + "?tsllm-part=0")).arrayBuffer());
    await cache.delete(url + "?tsllm-digests");
    await cache.delete(url + "?tsllm-part=0");
    await cache.put(url, new Response(bytes, { headers }));
    const legacy = await run();
    bytes[900000] ^= 1;
    await cache.put(url, new Response(bytes, { headers }));
    const damaged = await run();
    engine.terminate();
    return { legacy, damaged };`);
  assert.deepEqual(r.legacy, { tokens: golden(), fromCache: true }, r.legacy.error);
  assert.deepEqual([r.damaged.tokens, r.damaged.fromCache], [golden(), false], r.damaged.error);
  assert.match(r.damaged.refetched ?? "", /: the cached copy was damaged \(bytes 0-1185375 differ from what was downloaded\): downloaded again$/);
  assert.equal(requestCount("range whole") - before, 2, "downloaded at first and after the damage, not for the legacy copy");
});

test("two tabs loading one URL at once into one cache: both give llama.cpp's tokens, and a third load reads the cache, its digests agreeing", { skip }, async () => {
  const context = await browser!.newContext();
  try {
    const url = `${base}/m/range/stories260K.gguf?two-tabs`;
    const [a, b] = await Promise.all([0, 1].map(() => inPage<Loaded>(loadAndGenerate(JSON.stringify(url)), { context })));
    assert.deepEqual([a!.tokens, a!.cached, b!.tokens, b!.cached], [golden(), true, golden(), true], `${a!.error} ${b!.error}`);
    const third = await inPage<Loaded & { refetched?: string; listed: number }>(`
      const engine = new TsllmWorker();
      const info = await engine.load(${JSON.stringify(url)}, { threads: 1 });
      const tokens = (await engine.generate("Once upon a time", { maxTokens: 8, temperature: 0 })).completionTokens;
      const listed = (await engine.cachedModels()).length;
      engine.terminate();
      return { tokens, fromCache: info.fromCache, refetched: info.refetched ?? null, listed };`, { context });
    assert.deepEqual(third, { tokens: golden(), fromCache: true, refetched: null, listed: 1 });
  } finally {
    await context.close();
  }
});

test("out of wasm memory at load is an error naming the model and saying so, not a hang; the cached file stays", { skip }, async () => {
  // V8's cap on wasm memory pages (64 KiB each): the weights and KV cache of stories260K need more than 40
  const small = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--js-flags=--wasm-max-mem-pages=40"] });
  try {
    const r = await inPage<Loaded & { cachedModels: number }>(`
      const engine = new TsllmWorker();
      try {
        await engine.load("/m/range/stories260K.gguf", { threads: 1 });
        return { cachedModels: -1 };
      } catch (e) {
        return { error: e.message, cachedModels: (await engine.cachedModels()).length };
      } finally {
        engine.terminate();
      }`, { on: small });
    assert.match(r.error ?? "", new RegExp(`^${base}/m/range/stories260K\\.gguf: out of memory: .*Unable to grow instance memory`), r.error);
    assert.equal(r.cachedModels, 1, "out of memory says nothing about the file: it stays cached");
  } finally {
    await small.close();
  }
});

test("the same page with and without cross-origin isolation: the wasm backend gives llama.cpp's tokens on both, on 2 threads and on 1 (the console and threadsNote say why)", { skip }, async () => {
  const body = `
    const engine = new TsllmWorker();
    try {
      const info = await engine.load("/m/range/stories260K.gguf", { threads: 2 });
      const r = await engine.generate("Once upon a time", { maxTokens: 8, temperature: 0 });
      return { isolated: crossOriginIsolated, tokens: r.completionTokens, threads: info.threads, note: info.threadsNote };
    } catch (e) {
      return { isolated: crossOriginIsolated, error: e.message };
    } finally {
      engine.terminate();
    }`;
  type Run = { isolated: boolean; tokens?: number[]; threads?: number; note?: string; error?: string };
  const isolated = await inPage<Run>(body);
  const logged: string[] = [];
  const plain = await inPage<Run>(body, { path: "/plain/", prepare: async (page) => void page.on("console", (m) => logged.push(m.text())) });
  assert.deepEqual([isolated.isolated, isolated.tokens, isolated.threads, isolated.note], [true, golden(), 2, undefined], isolated.error);
  assert.deepEqual([plain.isolated, plain.tokens, plain.threads], [false, golden(), 1], plain.error);
  const note = "tsllm: the wasm backend runs on 1 thread, not 2: the page is not cross-origin isolated, so it has no SharedArrayBuffer; for 2 threads serve it with the headers Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp (or credentialless), or, where the host cannot send headers, with tsllm-isolate.js loaded before the page's own scripts (a service worker that adds them)";
  assert.equal(plain.note, note);
  assert.ok(logged.includes(note), `the console says why: ${JSON.stringify(logged)}`);
});

test("two engines with a model each generate side by side; an unloaded or terminated one says so", { skip }, async () => {
  const r = await inPage<{ a: number[]; b: number[]; unloaded: string; terminated: string }>(`
    const a = new TsllmWorker(), b = new TsllmWorker();
    await Promise.all([a.load("/m/range/stories260K.gguf", { threads: 1 }), b.load("/m/norange/stories260K.gguf", { threads: 1, cache: false })]);
    const [ra, rb] = await Promise.all([a.generate("Once upon a time", { maxTokens: 8, temperature: 0 }), b.generate("Once upon a time", { maxTokens: 8, temperature: 0 })]);
    await a.unload();
    let unloaded, terminated;
    try { await a.generate("x", { maxTokens: 1 }); } catch (e) { unloaded = e.message; }
    b.terminate();
    try { await b.generate("x", { maxTokens: 1 }); } catch (e) { terminated = e.message; }
    a.terminate();
    return { a: ra.completionTokens, b: rb.completionTokens, unloaded, terminated };`);
  assert.deepEqual(r.a, golden());
  assert.deepEqual(r.b, golden());
  assert.equal(r.unloaded, "no model is loaded (send load first)");
  assert.equal(r.terminated, "tsllm engine worker terminated");
});

test("an engine worker whose script does not load: that call and every later one reject naming it (none waits forever)", { skip }, async () => {
  const r = await inPage<string[]>(`
    const engine = new TsllmWorker("/tsllm/no-such-worker.js");
    const settle = (p) => p.then(() => "resolved", (e) => e.message);
    const first = await settle(engine.load("/m/range/stories260K.gguf"));
    const later = await Promise.race([settle(engine.tokenize("x")), new Promise((resolve) => setTimeout(() => resolve("still waiting after 10 s"), 10000))]);
    return [first, later];`);
  const message = "tsllm engine worker: /tsllm/no-such-worker.js failed to load";
  assert.deepEqual(r, [message, message]);
});

test("the webgpu backend where the browser has no adapter (chromium without --enable-unsafe-webgpu): an error saying so", { skip }, async () => {
  const r = await inPage<Loaded>(loadAndGenerate(`"/m/range/stories260K.gguf"`, `{ backend: "webgpu" }`));
  assert.match(r.error ?? "", /^webgpu backend: no WebGPU adapter found/, r.error);
});

test("cache: \"revalidate\" with the server unreachable (offline) or failing (500) loads the cached copy; a 404 is still the URL's error", { skip }, async () => {
  const context = await browser!.newContext();
  try {
    const url = `${base}/m/range/stories260K.gguf`;
    const first = await inPage<Loaded>(loadAndGenerate(JSON.stringify(url)), { context });
    assert.equal(first.cached, true, first.error);
    // the model's URL now fails the way an offline browser, a down server and an erroring one do
    for (const failure of ["connectionrefused", "internetdisconnected", 500, 404] as const) {
      await context.unrouteAll();
      await context.route(url, (route) => (typeof failure === "number" ? route.fulfill({ status: failure, body: "no" }) : route.abort(failure)));
      const r = await inPage<Loaded>(loadAndGenerate(JSON.stringify(url), `{ threads: 1, cache: "revalidate" }`), { context });
      if (failure === 404) assert.equal(r.error, `${url}: HTTP 404 Not Found`);
      else assert.deepEqual([r.tokens, r.fromCache], [golden(), true], `${failure}: ${r.error}`);
    }
  } finally {
    await context.close();
  }
});
