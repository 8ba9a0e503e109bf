import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import type { Page } from "playwright-core";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";
import { pagesOver, skipWithoutChromium, startBuildServer } from "./helpers/chromium.js";

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
  // the build's kernel worker, whose loop throws once it has said ready (a worker that dies after it started)
  "/dies/kernel-worker.js": "import '/tsllm/kernel-worker.js'; const post = self.postMessage.bind(self); self.postMessage = (m, t) => { post(m, t); if (m && m.ready) throw new Error('boom after its start'); };",
  // the build's engine worker, which ends its kernel worker 1 outright (worker.terminate(): none of
  // its JavaScript runs, no event says so) at its first look at the clock once the page has armed
  // it on the BroadcastChannel "tsllm test" (it answers "armed"): in the next generation, mid-job
  // where the pool waits for the workers' rows; it then holds its thread a second, as a busy one
  // would, so that the generation (thousands of tokens a second) cannot end before the end is seen
  "/terminates/engine-worker.js": "import '/terminates/arm.js'; import '/tsllm/engine-worker.js';",
  "/terminates/arm.js": [
    "const Base = self.Worker; let victim; let armed = false;",
    "self.Worker = class extends Base { constructor(url, options) { super(url, options); if (options && options.name === 'tsllm kernels 1') victim = this; } };",
    "const channel = new BroadcastChannel('tsllm test');",
    "channel.onmessage = () => { armed = true; channel.postMessage('armed'); };",
    "const now = performance.now.bind(performance);",
    "performance.now = () => { if (armed && victim) { armed = false; victim.terminate(); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000); } return now(); };",
  ].join("\n"),
};

// the broken folders hold the build's kernels only (their scripts are BROKEN's, or missing)
const rig = pagesOver(skip, () => startBuildServer({ scripts: BROKEN, kernelFolders: ["missing", "throws", "silent", "dies"], models: { "stories260K.gguf": readFileSync(sharedFile(MODEL)!) } }));

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
async function inPage<T>(page: Page, body: string, pendingAfterMs = 30_000): Promise<T> {
  return page.evaluate(async ([code, ms]) => {
    const lib = "/tsllm/tsllm.js";
    const { TsllmWorker } = await import(lib);
    return new Function("TsllmWorker", `
      const settled = (p) => Promise.race([
        p.then((v) => "resolved: " + JSON.stringify(v), (e) => "rejected: " + (e.name === "Error" ? "" : e.name + ": ") + e.message),
        new Promise((r) => setTimeout(() => r("still pending"), ${ms})),
      ]);
      return (async () => { ${code} })();
    `)(TsllmWorker);
  }, [body, pendingAfterMs] as const) as Promise<T>;
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

/**
 * Stops the JavaScript of the page's kernel worker `thread` through the DevTools protocol
 * (Runtime.terminateExecution, what the browser does to a worker's script it ends): its thread
 * lives on, its loop is gone, mid-claim or between jobs.
 */
async function terminateKernelWorker(thread: number): Promise<void> {
  const cdp = await rig.browser.newBrowserCDPSession();
  try {
    const { targetInfos } = await cdp.send("Target.getTargets");
    const target = targetInfos.find((t) => t.type === "worker" && t.title === `tsllm kernels ${thread}`);
    assert.ok(target, `no kernel worker ${thread} among ${JSON.stringify(targetInfos.map((t) => t.title))}`);
    // a nested worker's session is reached through the browser's (Playwright has no handle on it)
    const { sessionId } = await cdp.send("Target.attachToTarget", { targetId: target.targetId, flatten: false });
    const answered = new Promise<string>((resolve) => cdp.on("Target.receivedMessageFromTarget", (e) => {
      if ((JSON.parse(e.message) as { id?: number }).id === 1) resolve(e.message);
    }));
    await cdp.send("Target.sendMessageToTarget", { sessionId, message: JSON.stringify({ id: 1, method: "Runtime.terminateExecution" }) });
    assert.equal(await answered, JSON.stringify({ id: 1, result: {} }));
  } finally {
    await cdp.detach();
  }
}

/** what a load or a generation ends with once kernel worker 1 (of the script at `url`) has stopped for good */
const stopped = (url: string, why: string): string => `rejected: wasm backend: kernel worker 1 stopped: ${url}: ${why}; the backend cannot run without it: load the model again`;

test("a kernel worker whose loop throws once it has said ready: the load rejects with one error naming it (it loaded, on one thread fewer than it said), and the same engine worker then loads with the build's kernel worker", { skip }, async () => {
  const { page, errors } = await openPage();
  try {
    const dies = await inPage<string[]>(page, `
      const w = new TsllmWorker("/tsllm/engine-worker.js");
      const load = await settled(w.load("/models/stories260K.gguf", { cache: false, threads: 2, assetsUrl: "/dies/" }));
      const again = await settled(w.load("/models/stories260K.gguf", { cache: false, threads: 2, assetsUrl: "/tsllm/" })
        .then((loaded) => w.generate("Once upon a time", { maxTokens: 4, temperature: 0 }).then((r) => [loaded.threads, r.completionTokens])));
      w.terminate();
      return [load, again];
    `);
    assert.deepEqual(dies, [stopped(`${rig.base}/dies/kernel-worker.js`, "its loop threw Error: boom after its start"), `resolved: ${JSON.stringify([2, golden()])}`]);
    assert.deepEqual(errors, []);
  } finally {
    await page.close();
  }
});

/**
 * On a page of its own: stories260K loaded on two threads with the engine worker `script`, `arm`
 * run in the page, a long generation whose first token arrived, then `end` ends kernel worker 1
 * (or the engine worker `arm` armed has already). That generation and the
 * next one must reject with one error saying why (`why`, naming the build's kernel worker), and a
 * load again on the same engine worker give llama.cpp's tokens; no hang (inPage bounds each wait).
 */
async function kernelWorkerEndsMidGeneration(script: string, arm: string, end: (page: Page) => Promise<void>, why: string | readonly string[]): Promise<void> {
  const { page, errors } = await openPage();
  try {
    await inPage(page, `
      const w = new TsllmWorker(${JSON.stringify(script)});
      globalThis.w = w;
      await w.load("/models/stories260K.gguf", { cache: false, threads: 2, assetsUrl: "/tsllm/" });
      ${arm}
      await new Promise((first) => { globalThis.generation = w.generate("Once upon a time", { maxTokens: 2000, ignoreEos: true, temperature: 0, onStep: first }); });
      // handled: it may end before the next call looks at it
      globalThis.generation.catch(() => undefined);
    `);
    await end(page);
    const settledAfter = await inPage<string[]>(page, `
      const w = globalThis.w;
      const generation = await settled(globalThis.generation);
      const later = await settled(w.generate("Once upon a time", { maxTokens: 4, temperature: 0 }));
      const again = await settled(w.load("/models/stories260K.gguf", { cache: false, threads: 2 })
        .then((loaded) => w.generate("Once upon a time", { maxTokens: 4, temperature: 0 }).then((r) => [loaded.threads, r.completionTokens])));
      w.terminate();
      return [generation, later, again];
    `);
    // (a reason among `why`: the one heard first, and the next call gives the same)
    const gone = (typeof why === "string" ? [why] : why).map((w) => stopped(`${rig.base}/tsllm/kernel-worker.js`, w));
    assert.ok(gone.includes(settledAfter[0]!), `the generation: ${settledAfter[0]}`);
    assert.deepEqual(settledAfter, [settledAfter[0], settledAfter[0], `resolved: ${JSON.stringify([2, golden()])}`]);
    assert.deepEqual(errors, []);
  } finally {
    await page.close();
  }
}

test("a kernel worker whose JavaScript is terminated mid-generation: the generation rejects with one error naming it (it waited forever where the worker held rows of a job, else ran on without it), so does the next, and a load again runs", { skip }, () =>
  // (its thread ends with its JavaScript: the watchdog's lock may be granted before the pool's wait sees the loop stopped, bc89526)
  kernelWorkerEndsMidGeneration("/tsllm/engine-worker.js", "", () => terminateKernelWorker(1), ["its loop stopped running (its JavaScript was terminated)", "its thread was ended from outside (worker.terminate(), or it crashed)"]));

test("a kernel worker ended outright mid-generation (worker.terminate(): none of its JavaScript runs, and no event tells the engine worker): the generation rejects with one error naming it (it waited forever where the worker held rows of a job, else ran on without it), so does the next, and a load again runs", { skip }, () =>
  kernelWorkerEndsMidGeneration(
    "/terminates/engine-worker.js",
    `const channel = new BroadcastChannel("tsllm test");
     await new Promise((armed) => { channel.onmessage = armed; channel.postMessage("arm"); });
     channel.close();`,
    async () => undefined,
    "its thread was ended from outside (worker.terminate(), or it crashed)",
  ));

test("a kernel worker that never answers its start message: a load with no signal ends 30 s on with one error naming it (it waited forever); Stop ends the thread pool's start too, which stops the worker (it lived on, its start pending)", { skip }, async () => {
  const { page, errors } = await openPage();
  const silent = `${rig.base}/silent/kernel-worker.js`;
  /** the silent kernel workers' close events, as Playwright reports them (a nested worker too) */
  let closed = 0;
  page.on("worker", (w) => {
    if (w.url() === silent) w.on("close", () => closed++);
  });
  try {
    const bounded = await inPage<string>(page, `
      globalThis.w = new TsllmWorker("/tsllm/engine-worker.js");
      return settled(w.load("/models/stories260K.gguf", { cache: false, threads: 2, assetsUrl: "/silent/" }));
    `, 60_000);
    assert.equal(bounded, `rejected: wasm backend: worker 1 failed to start: kernel worker ${silent} did not answer its start message in 30 s`);
    const aborted = await inPage<string>(page, `
      const controller = new AbortController();
      const loading = w.load("/models/stories260K.gguf", { cache: false, threads: 2, assetsUrl: "/silent/", signal: controller.signal });
      setTimeout(() => controller.abort(), 1000);
      return settled(loading);
    `);
    assert.equal(aborted, `rejected: AbortError: ${rig.base}/models/stories260K.gguf: aborted`);
    // the aborted load's worker is stopped at its Stop, long before its 30 s bound (it lived on until the page closed)
    for (const until = Date.now() + 10_000; closed < 2 && Date.now() < until;) await new Promise((r) => setTimeout(r, 100));
    assert.equal(closed, 2, "the silent kernel workers stopped: the first at its 30 s bound, the aborted load's within 10 s of its Stop");
    await inPage(page, "w.terminate();");
    assert.deepEqual(errors, []);
  } finally {
    await page.close();
  }
});
