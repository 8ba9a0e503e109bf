import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
// @ts-expect-error: a plain .mjs build script without type declarations
import { ensureWasm } from "../scripts/build-wasm.mjs";
import type { ServeChild } from "../src/bench/index.js";
import { runChild } from "./helpers/child.js";
import { post, spawnServe, until } from "./helpers/serve.js";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

// A Node kernel worker (src/kernels/wasm/worker.ts) that stops for good after its start: the
// main thread, busy in a generation's jobs, hears none of the worker's events (its event loop
// is blocked), so the worker says so itself through the shared words, as the browser's does.
// test/helpers/kernel-worker-dies.cjs (preloaded with --require, which Node runs in worker
// threads) makes worker 1 throw out of its loop, or call process.exit, once a file appears; or
// ends it where none of its JavaScript runs: worker.terminate(), or its heap out of memory.

const MODEL = "models/stories260K.gguf";
const EXPECTED = "models/stories260K.expected.json";
const skip = skipWithoutShared(MODEL) || skipWithoutShared(EXPECTED);

// generations until one rejects (a kill lands at a moment of its own, mid-job or between two; a
// worker that throws or exits stops at its first job), then one more call
const child = `
  import { writeFileSync } from "node:fs";
  import { loadModel } from "./src/index.ts";
  const { MODEL_PATH, TSLLM_TEST_WORKER_TRIGGER: trigger } = process.env;
  const options = { temperature: 0, maxTokens: 64 };
  const load = () => loadModel(MODEL_PATH, { backend: "wasm", threads: 2, contextSize: 128 });
  const model = await load();
  const before = (await model.generate("Once upon a time", options)).completionTokens;
  writeFileSync(trigger, "");
  const errors = [];
  let resolved = 0;
  while (errors.length === 0 && resolved < 200) {
    try {
      await model.generate("Once upon a time", options);
      resolved++;
    } catch (e) {
      errors.push(e.message);
    }
  }
  try {
    await model.generate("Once upon a time", options);
  } catch (e) {
    errors.push(e.message);
  }
  model.dispose();
  const again = await load();
  const after = (await again.generate("Once upon a time", options)).completionTokens;
  again.dispose();
  console.error("RESULT " + JSON.stringify({ before, errors, resolved, after }));
`;

/**
 * Runs the child with kernel worker 1 stopped `how` (test/helpers/kernel-worker-dies.cjs): the
 * generations before and after a load again give llama.cpp's greedy tokens, and the generation the
 * stop fails and the call after it both reject with `message`.
 */
async function stopsWith(how: string, message: string): Promise<void> {
  await ensureWasm();
  const dir = mkdtempSync(join(tmpdir(), "tsllm-worker-dies-"));
  try {
    const env = { ...process.env, MODEL_PATH: sharedFile(MODEL)!, TSLLM_TEST_WORKER_DIES: how, TSLLM_TEST_WORKER_TRIGGER: join(dir, "trigger") };
    const r = await runChild(child, 120_000, { nodeArgs: ["--require", resolve(PROJECT_ROOT, "test/helpers/kernel-worker-dies.cjs")], env });
    assert.equal(r.timedOut, false, `the child did not finish within 120 s (a hang): ${r.stderr}`);
    assert.equal(r.code, 0, r.stderr);
    const line = r.stderr.split("\n").find((l) => l.startsWith("RESULT "));
    assert.ok(line, r.stderr);
    const { before, errors, resolved, after } = JSON.parse(line.slice("RESULT ".length)) as { before: number[]; errors: string[]; resolved: number; after: number[] };
    const expected = (JSON.parse(readFileSync(sharedFile(EXPECTED)!, "utf8")) as { cases: { prompt: string; completionTokens: number[] }[] }).cases.find((c) => c.prompt === "Once upon a time")!.completionTokens;
    assert.deepEqual(before, expected, "before the worker stopped");
    assert.equal(errors.length, 2, `no generation rejected after the worker stopped (${resolved} resolved)`);
    for (const e of errors) assert.ok(e.includes(message), `expected "${message}" in: ${e}`);
    assert.deepEqual(after, expected, "a load again");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const how of ["throw", "exit"] as const) {
  const why = how === "throw" ? "its loop threw Error: boom" : "its thread exited (code 3)";
  test(`a Node kernel worker that ${how === "throw" ? "throws out of its loop" : "calls process.exit"} mid-generation: the generation rejects naming worker 1 and why, so does the next call, and a load again gives llama.cpp's greedy tokens`, { skip }, () =>
    stopsWith(how, `wasm backend: kernel worker 1 stopped: ${resolve(PROJECT_ROOT, "src/kernels/wasm/worker.ts")}: ${why} after its start; the backend cannot run without it: load the model again`));
}

const killed = {
  terminate: { what: "ended from outside (worker.terminate(), none of its JavaScript runs)", why: "its thread was ended from outside (exit code 1)" },
  oom: { what: "whose heap runs out (its resourceLimits: Node ends its thread, none of its JavaScript runs)", why: "its thread ended (exit code 1): Error: Worker terminated due to reaching memory limit: JS heap out of memory" },
};
for (const [how, { what, why }] of Object.entries(killed)) {
  test(`a Node kernel worker ${what} mid-generation: the generation rejects naming worker 1 and why, so does the next call, no hang, and a load again gives llama.cpp's greedy tokens`, { skip }, () =>
    stopsWith(how, `wasm backend: kernel worker 1 stopped: ${why}; the backend cannot run without it: load the model again`));
}

/** SIGTERM to the server (SIGKILL if it still runs 20 s on), the folder removed; fails the test if SIGTERM did not stop it */
async function stopServe(serve: ServeChild, dir: string): Promise<void> {
  serve.child.kill("SIGTERM");
  const code = await Promise.race([serve.exited, new Promise((r) => setTimeout(() => r("still running 20 s after SIGTERM"), 20_000).unref())]);
  if (code === "still running 20 s after SIGTERM") serve.child.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
  assert.notEqual(code, "still running 20 s after SIGTERM", serve.stderr());
}

test("tsllm serve whose kernel worker is ended from outside: the running request and later ones answer 500 with why, /health answers 500 with it, and the process still stops on SIGTERM", { skip }, async () => {
  await ensureWasm();
  const dir = mkdtempSync(join(tmpdir(), "tsllm-serve-worker-killed-"));
  const trigger = join(dir, "trigger");
  const env = { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --require ${resolve(PROJECT_ROOT, "test/helpers/kernel-worker-dies.cjs")}`, TSLLM_TEST_WORKER_DIES: "terminate", TSLLM_TEST_WORKER_TRIGGER: trigger };
  const serve = await spawnServe(["--threads", "2", "--backend", "wasm"], { env });
  try {
    const healthy = await fetch(`${serve.url}/health`, { signal: AbortSignal.timeout(20_000) });
    assert.equal(healthy.status, 200, await healthy.text());
    // stories260K's context (512 tokens) less the prompt: a request of a second or more
    const ask = () => post(`${serve.url}/v1/completions`, { prompt: "Once upon a time", max_tokens: 500, temperature: 0, ignore_eos: true }, {}, AbortSignal.timeout(60_000));
    const first = await ask();
    assert.equal(first.status, 200, "before the worker is ended");
    const pending = ask();
    await until(async () => ((await (await fetch(`${serve.url}/health`)).json()) as { requests_running?: number }).requests_running === 1, "the request to run");
    writeFileSync(trigger, "");
    const why = "wasm backend: kernel worker 1 stopped: its thread was ended from outside (exit code 1); the backend cannot run without it: load the model again";
    const running = await pending;
    assert.equal(running.status, 500, JSON.stringify(running.json));
    assert.ok(String(running.json.error?.message).includes(why), JSON.stringify(running.json));
    const health = await fetch(`${serve.url}/health`, { signal: AbortSignal.timeout(20_000) });
    assert.equal(health.status, 500);
    assert.deepEqual(await health.json(), { status: "error", error: why });
    const later = await ask();
    assert.equal(later.status, 500);
    assert.ok(String(later.json.error?.message).includes(why), JSON.stringify(later.json));
  } finally {
    await stopServe(serve, dir);
  }
});

const EMBEDDER = "hf-oracle/minilm-embed";
const skipEmbedder = skipWithoutShared(`${EMBEDDER}.expected.json`);

test("tsllm serve on an embedding model (an encoder folder) whose kernel worker is ended from outside: /health answers 500 with why, between requests too, embedding requests answer 500 with it, and the process still stops on SIGTERM", { skip: skipEmbedder }, async () => {
  await ensureWasm();
  const dir = mkdtempSync(join(tmpdir(), "tsllm-serve-embed-worker-killed-"));
  const trigger = join(dir, "trigger");
  const env = { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --require ${resolve(PROJECT_ROOT, "test/helpers/kernel-worker-dies.cjs")}`, TSLLM_TEST_WORKER_DIES: "terminate", TSLLM_TEST_WORKER_TRIGGER: trigger };
  const serve = await spawnServe(["--model", sharedFile(EMBEDDER)!, "--threads", "2", "--backend", "wasm"], { env });
  try {
    const oracle = (JSON.parse(readFileSync(sharedFile(`${EMBEDDER}.expected.json`)!, "utf8")) as { cases: { text: string; embedding_unnormalized: number[] }[] }).cases[0]!;
    const ask = () => post(`${serve.url}/v1/embeddings`, { input: oracle.text }, {}, AbortSignal.timeout(60_000));
    const healthy = await fetch(`${serve.url}/health`, { signal: AbortSignal.timeout(20_000) });
    assert.equal(healthy.status, 200, await healthy.text());
    const first = await ask();
    assert.equal(first.status, 200, JSON.stringify(first.json));
    const vector = first.json.data[0].embedding as number[];
    assert.ok(vector.length === oracle.embedding_unnormalized.length && vector.every((x, i) => Math.abs(x - oracle.embedding_unnormalized[i]!) <= 1e-4), "before the worker is ended: sentence-transformers' vector");
    // no request runs: the worker is ended between requests, and /health alone must see it
    writeFileSync(trigger, "");
    const why = "wasm backend: kernel worker 1 stopped: its thread was ended from outside (exit code 1); the backend cannot run without it: load the model again";
    await until(async () => (await fetch(`${serve.url}/health`, { signal: AbortSignal.timeout(20_000) })).status !== 200, "/health to leave 200 after the worker was ended");
    const health = await fetch(`${serve.url}/health`, { signal: AbortSignal.timeout(20_000) });
    assert.equal(health.status, 500);
    assert.deepEqual(await health.json(), { status: "error", error: why });
    const later = await ask();
    assert.equal(later.status, 500);
    assert.ok(String(later.json.error?.message).includes(why), JSON.stringify(later.json));
  } finally {
    await stopServe(serve, dir);
  }
});
