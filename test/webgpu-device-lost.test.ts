import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { loadModel, type Model } from "../src/index.js";
import { probeWebGPU } from "../src/kernels/webgpu/index.js";
import { startServer } from "../src/server/index.js";
import { post, until } from "./helpers/serve.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

// A GPU device lost under a loaded model (a driver reset, the GPU process gone; here
// device.destroy() from outside, which loses the device as the WebGPU spec says, with reason
// "destroyed"): the webgpu backend records it as Backend.failure, a generation running then and
// every later call reject with that one line (a read in flight failed with a bare AbortError
// and no message), and tsllm serve's /health answers 500 with it.
// Without an adapter (no GPU, no software Vulkan: docs/webgpu.md) every test here is skipped.

let noAdapter: string | false = false;
try {
  await probeWebGPU();
} catch (e) {
  const message = (e as Error).message;
  if (!message.includes("no WebGPU adapter found")) throw e;
  noAdapter = `no WebGPU adapter: ${message}`;
}

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
