import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { loadModel, type Model } from "../src/index.js";
import { startServer } from "../src/server/index.js";
import { post, until } from "./helpers/serve.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";
import { skipWithoutWebGPUAdapter } from "./helpers/webgpu-adapter.js";
import { pagesOver, skipWithoutChromium, startBuildServer } from "./helpers/chromium.js";

// A GPU device lost under a loaded model (a driver reset, the GPU process gone; here
// device.destroy() from outside, which loses the device as the WebGPU spec says, with reason
// "destroyed"): the webgpu backend records it as Backend.failure, a generation running then and
// every later call reject with that one line (a read in flight failed with a bare AbortError
// and no message), and tsllm serve's /health answers 500 with it.
// Without an adapter (no GPU, no software Vulkan: docs/webgpu.md) every test here is skipped.

const noAdapter = await skipWithoutWebGPUAdapter();

const MODEL = "models/stories260K.gguf";
const EXPECTED = "models/stories260K.expected.json";
const skip = noAdapter || skipWithoutShared(MODEL) || skipWithoutShared(EXPECTED);
const PROMPT = "Once upon a time";
const LOST = "webgpu backend: the GPU device was lost (reason: destroyed; device was destroyed): load the model again";

/** llama.cpp's greedy tokens of stories260K after PROMPT */
const golden = (): number[] => (JSON.parse(readFileSync(sharedFile(EXPECTED)!, "utf8")) as { cases: { prompt: string; completionTokens: number[] }[] }).cases.find((c) => c.prompt === PROMPT)!.completionTokens;

/** the device under the model's backend: a private field, reached only here to lose it as a driver would */
const loseDevice = (model: Model): void => (model.backend as unknown as { device: { destroy(): void } }).device.destroy();

/** `p`, or a rejection naming `what` after `ms` (a hang fails the test instead of holding it) */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms / 1000} s (a hang)`)), ms); });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

const load = () => loadModel(sharedFile(MODEL)!, { backend: "webgpu", contextSize: 512 });

test("a GPU device lost mid-generation: the generation and the next one reject with one line saying so, Backend.failure says it, and a load again gives llama.cpp's greedy tokens", { skip, timeout: 300_000 }, async () => {
  const expected = golden();
  const model = await load();
  try {
    assert.equal(model.backend.failure, undefined, "a device that runs");
    assert.deepEqual((await model.generate(PROMPT, { temperature: 0, maxTokens: expected.length })).completionTokens, expected, "before the device is lost");
    // lost while the third read back (a step's logits) waits for its map, the generation's passes still to come
    const backend = model.backend as { read: typeof model.backend.read };
    const read = backend.read.bind(model.backend);
    let reads = 0;
    backend.read = (a) => {
      const reading = read(a);
      if (++reads === 3) loseDevice(model);
      return reading;
    };
    const running = model.generate(PROMPT, { temperature: 0, maxTokens: 400, ignoreEos: true });
    await assert.rejects(within(running, 60_000, "the generation on the lost device"), (e: Error) => { assert.equal(e.message, LOST); return true; });
    assert.equal(reads, 3, "no read after the one the loss failed");
    assert.equal(model.backend.failure, LOST);
    await assert.rejects(within(model.generate(PROMPT, { temperature: 0, maxTokens: 8 }), 60_000, "a generation after the loss"), (e: Error) => { assert.equal(e.message, LOST); return true; });
  } finally {
    model.dispose();
  }
  assert.equal(model.backend.failure, undefined, "disposed: nothing to report");
  const again = await load();
  try {
    assert.deepEqual((await again.generate(PROMPT, { temperature: 0, maxTokens: expected.length })).completionTokens, expected, "a load again");
  } finally {
    again.dispose();
  }
});

test("serve on a model whose GPU device is lost: /health answers 500 with why (200 before), and a completion answers 500 with it", { skip, timeout: 300_000 }, async () => {
  const model = await load();
  const server = await startServer(model, { port: 0 });
  try {
    const health = () => fetch(`${server.url}/health`, { signal: AbortSignal.timeout(20_000) });
    const ask = () => post(`${server.url}/v1/completions`, { prompt: PROMPT, max_tokens: 8, temperature: 0 }, {}, AbortSignal.timeout(60_000));
    const before = await health();
    assert.equal(before.status, 200, await before.text());
    assert.equal((await ask()).status, 200, "before the device is lost");
    // no request runs: /health alone must see the loss (the device's lost promise settles on its own)
    loseDevice(model);
    await until(async () => (await health()).status !== 200, "/health to leave 200 after the device was lost");
    const after = await health();
    assert.equal(after.status, 500);
    assert.deepEqual(await after.json(), { status: "error", error: LOST });
    const refused = await ask();
    assert.equal(refused.status, 500, JSON.stringify(refused.json));
    assert.ok(String(refused.json.error?.message).includes(LOST), JSON.stringify(refused.json));
  } finally {
    await server.close(1000);
    model.dispose();
  }
});

// The same in chromium (--enable-unsafe-webgpu: a SwiftShader adapter), through TsllmWorker and the
// build's engine worker: /lost/engine-worker.js is that worker with the device it requests kept,
// which it destroys once the page says so on the BroadcastChannel "tsllm test".
const LOSES_DEVICE: Record<string, string> = {
  "/lost/engine-worker.js": "import '/lost/arm.js'; import '/tsllm/engine-worker.js';",
  "/lost/arm.js": [
    "const request = GPUAdapter.prototype.requestDevice; let device;",
    "GPUAdapter.prototype.requestDevice = async function (...args) { device = await request.apply(this, args); return device; };",
    "new BroadcastChannel('tsllm test').onmessage = () => device.destroy();",
  ].join("\n"),
};

const skipChromium = skipWithoutChromium() || skipWithoutShared(MODEL) || skipWithoutShared(EXPECTED);
const rig = pagesOver(skipChromium, () => startBuildServer({ scripts: LOSES_DEVICE, models: { "stories260K.gguf": readFileSync(sharedFile(MODEL)!) } }), ["--enable-unsafe-webgpu"]);

test("chromium: a GPU device lost mid-generation in the engine worker: the generation and the next one reject with the one line, and a load again gives llama.cpp's greedy tokens", { skip: skipChromium, timeout: 300_000 }, async (t) => {
  const page = await rig.browser.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  try {
    await page.goto(`${rig.base}/`);
    // each call settled, or "still pending" 60 s on: a hang fails the test instead of holding it
    // (a string: tsx's compile of a function would name helpers the page lacks)
    const settled = (await page.evaluate(`(async () => {
      const { TsllmWorker } = await import("/tsllm/tsllm.js");
      const settle = (p) => Promise.race([
        p.then((v) => "resolved: " + JSON.stringify(v), (e) => "rejected: " + e.message),
        new Promise((r) => setTimeout(() => r("still pending"), 60000)),
      ]);
      const prompt = ${JSON.stringify(PROMPT)}, n = 4;
      const options = { cache: false, backend: "webgpu", assetsUrl: "/tsllm/" };
      const tokens = (r) => r.completionTokens;
      const w = new TsllmWorker("/lost/engine-worker.js");
      try {
        const loaded = await settle(w.load("/models/stories260K.gguf", options));
        if (!loaded.startsWith("resolved")) return { loaded };
        const before = await settle(w.generate(prompt, { maxTokens: n, temperature: 0 }).then(tokens));
        let generation;
        // lost once the generation's first token arrived, its passes still to come
        await new Promise((first) => { generation = w.generate(prompt, { maxTokens: 2000, ignoreEos: true, temperature: 0, onStep: first }); });
        new BroadcastChannel("tsllm test").postMessage("destroy the device");
        const lost = await settle(generation);
        const later = await settle(w.generate(prompt, { maxTokens: n, temperature: 0 }));
        const again = await settle(w.load("/models/stories260K.gguf", options).then(() => w.generate(prompt, { maxTokens: n, temperature: 0 })).then(tokens));
        return { loaded, before, lost, later, again };
      } finally {
        w.terminate();
      }
    })()`)) as Record<string, string>;
    if (/no WebGPU adapter found/.test(String(settled.loaded))) return t.skip(`chromium offers no WebGPU adapter here: ${settled.loaded}`);
    // (four tokens: SwiftShader is slow)
    const expected = `resolved: ${JSON.stringify(golden().slice(0, 4))}`;
    assert.equal(settled.before, expected, "before the device is lost");
    // Dawn in chromium words the reason's message itself: the line is the backend's around it
    assert.match(String(settled.lost), /^rejected: webgpu backend: the GPU device was lost \(reason: destroyed; [^)]*\): load the model again$/);
    assert.equal(settled.later, settled.lost, "the next call");
    assert.equal(settled.again, expected, "a load again");
    assert.deepEqual(errors, []);
  } finally {
    await page.close();
  }
});
