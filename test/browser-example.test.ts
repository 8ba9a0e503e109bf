import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import { after, before, test } from "node:test";
import { chromium, type Browser, type Page } from "playwright-core";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

// the browser example (examples/browser) driven through its fixed contract: the server's
// command line and the page's query parameters and #result; llama.cpp's greedy output of
// stories260K (the golden file in ../shared) is the judge
const MODEL = "models/stories260K.gguf";
const EXPECTED = "models/stories260K.expected.json";
const CHROMIUM = "/usr/bin/chromium";
const skip = skipWithoutShared(MODEL) || skipWithoutShared(EXPECTED)
  || (existsSync(CHROMIUM) ? false : `${CHROMIUM} not found: this test needs Debian's chromium (apt-get install -y chromium; .ci/run installs it)`);

interface GoldenCase { prompt: string; promptTokens: number[]; completionTokens: number[]; completion: string }
const cases = (): GoldenCase[] => JSON.parse(readFileSync(sharedFile(EXPECTED)!, "utf8")).cases;

let server: ChildProcess | undefined;
let base = "";
let browser: Browser | undefined;

/** starts `npm run example:browser -- --port 0 --models DIR` and waits for the URL it prints */
async function startServer(): Promise<string> {
  const child = spawn("npm", ["run", "--silent", "example:browser", "--", "--port", "0", "--models", dirname(sharedFile(MODEL)!)], { cwd: PROJECT_ROOT, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  server = child;
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the example server printed no URL within 120 s:\n${output}`)), 120_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      const m = /tsllm browser example: (http:\/\/127\.0\.0\.1:\d+)\//.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the example server exited (${code}) before listening:\n${output}`));
    });
  });
}

before(async () => {
  if (skip) return;
  base = await startServer();
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
});
after(async () => {
  await browser?.close();
  // npm runs the server in a shell: stop the whole process group it leads
  if (server?.pid !== undefined && server.exitCode === null) process.kill(-server.pid, "SIGTERM");
});

/** opens the page with these query parameters and returns #result once it is written */
async function runPage(query: Record<string, string>, prepare?: (page: Page) => Promise<void>): Promise<{ result: any; errors: string[] }> {
  const page = await browser!.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  try {
    await page.goto(`${base}/?${new URLSearchParams(query)}`);
    if (prepare) await prepare(page);
    await page.waitForFunction(() => document.getElementById("result")!.textContent !== "", null, { timeout: 60_000 });
    return { result: JSON.parse((await page.textContent("#result"))!), errors };
  } finally {
    await page.close();
  }
}

test("the example server: COOP/COEP on every response, /models/ with Range requests", { skip }, async () => {
  for (const path of ["/", "/page.js", "/tsllm/engine-worker.js", "/tsllm/kernels.wasm", "/models/", "/models/stories260K.gguf", "/nothing-here"]) {
    const r = await fetch(`${base}${path}`, { method: path.endsWith(".gguf") ? "HEAD" : "GET" });
    assert.equal(r.headers.get("cross-origin-opener-policy"), "same-origin", path);
    assert.equal(r.headers.get("cross-origin-embedder-policy"), "require-corp", path);
    assert.equal(r.status, path === "/nothing-here" ? 404 : 200, path);
  }
  assert.equal((await fetch(`${base}/tsllm/kernels.wasm`)).headers.get("content-type"), "application/wasm");
  assert.deepEqual(await (await fetch(`${base}/models/`)).json(), ["stories260K.gguf"].filter((f) => existsSync(sharedFile(`models/${f}`)!)));
  const size = readFileSync(sharedFile(MODEL)!).length;
  const part = await fetch(`${base}/models/stories260K.gguf`, { headers: { Range: "bytes=0-3" } });
  assert.equal(part.status, 206);
  assert.equal(part.headers.get("content-range"), `bytes 0-3/${size}`);
  assert.equal(await part.text(), "GGUF");
  const tail = await fetch(`${base}/models/stories260K.gguf`, { headers: { Range: "bytes=-10" } });
  assert.equal(tail.headers.get("content-range"), `bytes ${size - 10}-${size - 1}/${size}`);
  assert.equal((await tail.arrayBuffer()).byteLength, 10);
  assert.equal((await fetch(`${base}/models/stories260K.gguf`, { headers: { Range: `bytes=${size}-` } })).status, 416);
  assert.equal((await fetch(`${base}/models/..%2f..%2fpackage.json`)).status, 404);
});

test("stories260K greedy in headless Chromium (wasm backend, Web Worker threads) gives llama.cpp's golden tokens", { skip }, async () => {
  for (const c of cases()) {
    const { result, errors } = await runPage({ model: "/models/stories260K.gguf", prompt: c.prompt, maxTokens: String(c.completionTokens.length), temperature: "0", run: "1" });
    assert.equal(result.error, undefined, `no error for ${JSON.stringify(c.prompt)}`);
    assert.equal(result.backend, "wasm");
    assert.deepEqual(result.promptTokens, c.promptTokens, `prompt tokens for ${JSON.stringify(c.prompt)}`);
    assert.deepEqual(result.completionTokens, c.completionTokens, `completion tokens for ${JSON.stringify(c.prompt)}`);
    // the golden text is the completion detokenized alone, which drops a word's leading space
    assert.equal(result.completion.trimStart(), c.completion.trimStart());
    const t = result.timings;
    assert.equal(t.promptTokens, c.promptTokens.length);
    assert.equal(t.completionTokens, c.completionTokens.length);
    assert.ok(t.ttftMs > 0 && t.tpotMs > 0 && t.decodeTokensPerSecond > 0 && t.loadMs > 0, JSON.stringify(t));
    assert.deepEqual(errors, []);
  }
});

test("a GGUF the user picks (a File, read with FileReaderSync) gives the same golden tokens", { skip }, async () => {
  const c = cases()[1]!;
  const { result } = await runPage({ prompt: c.prompt, maxTokens: "16", temperature: "0" }, async (page) => {
    await page.setInputFiles("#file", sharedFile(MODEL)!);
    await page.click("#run");
  });
  assert.equal(result.error, undefined);
  assert.deepEqual(result.completionTokens, c.completionTokens.slice(0, 16));
});

test("a bad model URL answers {error} naming the URL", { skip }, async () => {
  const { result } = await runPage({ model: "/models/no-such-model.gguf", prompt: "Once upon a time", maxTokens: "4", run: "1" });
  assert.deepEqual(Object.keys(result), ["error"]);
  assert.match(result.error, /\/models\/no-such-model\.gguf: HTTP 404/);
  const notGGUF = await runPage({ model: "/page.css", prompt: "x", maxTokens: "4", run: "1" });
  assert.match(notGGUF.result.error, /\/page\.css: magic: expected "GGUF"/);
});
