import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { promisify } from "node:util";
import { KVBlockPool, type KVStorage } from "../src/cache/index.js";
import { checkMemoryPlan, largestFittingContext, outgrownKvBlocks, planMemory, type PlanRequest } from "../src/engine/index.js";
import { createWasmBackend } from "../src/kernels/wasm/index.js";
import { loadModel, loadModelForOneRequest, loadPlanRequest } from "../src/llm.js";
import { loadDraftBeside } from "../src/cli/generate.js";
import { openModel } from "../src/models/index.js";
import { GGMLType } from "../src/tensor/dtypes.js";
import { formatBytes } from "../src/units/index.js";
import { tinyLlama, writeRandomModel } from "../src/testing/index.js";
import { spawnServe } from "./helpers/serve.js";
import { PROJECT_ROOT, skipWithoutShared } from "./helpers/shared.js";

/*
 * Memory planning before loading: weights (after quantization) + KV cache at the context +
 * scratch against the free memory, which tests inject (the availableMemory option, or the
 * TSLLM_AVAILABLE_MEMORY environment variable) so a small random model shows the refusal and
 * the proposal a big model would get on a small machine.
 */
const dir = mkdtempSync(join(tmpdir(), "tsllm-plan-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const SKIP = skipWithoutShared("models/stories260K.gguf");
const CLI = resolve(PROJECT_ROOT, "src/cli/main.ts");
const run = promisify(execFile);
const FILE = join(dir, "m.gguf");
// a large vocabulary makes the weights (token_embd + output) the bulk, as in a real model
const ready = SKIP ? Promise.resolve() : writeRandomModel(FILE, { ...tinyLlama, embeddingLength: 512, feedForwardLength: 1024, contextLength: 8192, seed: 61 });

/**
 * The judge's sizes of FILE: node-llama-cpp's reading of its header. Its tensors are F32, 4 bytes
 * an element (GGUF spec); f32 K and V take 2 x layers x KV heads x head size x 4 bytes a position.
 */
async function judgedSizes(): Promise<{ perToken: number; weights: number }> {
  const { readGgufFileInfo } = await import("node-llama-cpp");
  const info = await readGgufFileInfo(FILE);
  const llama = (info.metadata as unknown as { llama: { block_count: number; embedding_length: number; attention: { head_count: number; head_count_kv: number } } }).llama;
  const weights = info.fullTensorInfo!.reduce((sum, t) => {
    assert.equal(t.ggmlType, 0, t.name);
    return sum + 4 * t.dimensions.reduce((a: number, d) => a * Number(d), 1);
  }, 0);
  return { perToken: 2 * llama.block_count * llama.attention.head_count_kv * (llama.embedding_length / llama.attention.head_count) * 4, weights };
}

function request(ctx: number, quantize?: "q4_k" | "q8_0"): PlanRequest {
  return loadPlanRequest(openModel(FILE), { backend: "reference", ...(quantize ? { quantize } : {}) }, ctx)!;
}

test("loadModel refuses, before reading weights, a plan that does not fit: one line with what it needs, what is free and what fits", { skip: SKIP }, async () => {
  await ready;
  const f32 = planMemory(request(2048)), q4 = planMemory(request(2048, "q4_k"));
  assert.ok(f32.weightBytes > 5 * q4.weightBytes, `${f32.weightBytes} vs ${q4.weightBytes}`);
  // room for the q4_k plan at 2048 tokens, not for F32's
  const available = q4.totalBytes + 1000;
  await assert.rejects(loadModel(FILE, { backend: "reference", contextSize: 2048, availableMemory: available }), (e: Error) => {
    assert.doesNotMatch(e.message, /\n/);
    assert.match(e.message, /^.*m\.gguf: needs [\d.]+ MB \(weights [\d.]+ MB F32 \+ KV [\d.]+ MB at 2048 tokens \+ scratch [\d.]+ MB\), [\d.]+ MB free: try --quantize (q8_0|q6_k|q5_k|q4_k) \([\d.]+ MB\)( or --ctx-size \d+)?$/);
    return true;
  });
  // the proposal loads
  const m = await loadModel(FILE, { backend: "reference", contextSize: 2048, availableMemory: available, quantize: "q4_k" });
  assert.equal(m.contextSize, 2048);
  m.dispose();
  // only the context too large: the proposal is a context that fits
  const ctxOnly = planMemory(request(512)).totalBytes + 1000;
  await assert.rejects(loadModel(FILE, { backend: "reference", contextSize: 8192, availableMemory: ctxOnly }), /free: try (--quantize \S+ \([\d.]+ MB\) or )?--ctx-size (\d+)$/);
  const proposed = Number(/--ctx-size (\d+)$/.exec(await loadModel(FILE, { backend: "reference", contextSize: 8192, availableMemory: ctxOnly }).then(() => "", (e: Error) => e.message))![1]);
  assert.ok(proposed >= 512 && proposed < 8192, String(proposed));
  (await loadModel(FILE, { backend: "reference", contextSize: proposed, availableMemory: ctxOnly })).dispose();
  // nothing fits
  await assert.rejects(loadModel(FILE, { backend: "reference", availableMemory: 999 }), /999 B free: no quantization or context size tsllm offers fits$/);
});

test("the largest fitting context is found for any asked context, past 2^36 tokens too (the search's midpoint is not cut to 32 bits)", { skip: SKIP, timeout: 60_000 }, async () => {
  await ready;
  const available = planMemory(request(3000)).totalBytes;
  const expected = largestFittingContext(request(8192), available, 8192)!;
  assert.ok(expected > 2900 && expected <= 3000, String(expected));
  for (const max of [2 ** 40, 2 ** 52, 1e15]) assert.equal(largestFittingContext(request(8192), available, max), expected, `max ${max}`);
  await assert.rejects(loadModel(FILE, { backend: "reference", contextSize: 2 ** 52, availableMemory: available }), /--ctx-size \d+$/);
});

test('contextSize "auto" picks the largest context that fits (at most the trained one); the default KV pool shrinks to what is free', { skip: SKIP }, async () => {
  await ready;
  const available = planMemory(request(3000)).totalBytes;
  const m = await loadModel(FILE, { backend: "reference", contextSize: "auto", availableMemory: available });
  try {
    assert.equal(m.contextSize, largestFittingContext(request(8192), available, 8192));
    assert.ok(m.contextSize <= 3000 && m.contextSize > 2900, String(m.contextSize));
    assert.ok(planMemory(request(m.contextSize + 16)).totalBytes > available);
    // 16 contexts would not fit: the pool holds what is free, at least one context
    assert.ok(m.engine.stats.kvCapacityTokens >= m.contextSize && m.engine.stats.kvCapacityTokens < 2 * m.contextSize, String(m.engine.stats.kvCapacityTokens));
  } finally {
    m.dispose();
  }
  const big = await loadModel(FILE, { backend: "reference", contextSize: "auto", availableMemory: 1e12 });
  assert.equal(big.contextSize, 8192);
  big.dispose();
});

test('contextSize "auto" and the default KV pool leave memoryMargin free (llama.cpp --fit-target, 1 GiB by default); auto gives up the margin before going below 4096 tokens (--fit-ctx)', { skip: SKIP, timeout: 120_000 }, async () => {
  await ready;
  // the judge: llama.cpp's fit (common.h: fit_params_target 1024 MiB a device, fit_params_min_ctx
  // 4096) adjusts only what the user left unset so that the margin stays free. K/V bytes a
  // position from node-llama-cpp's reading of the header
  const { perToken } = await judgedSizes();
  const full = planMemory(request(8192));
  // room for the trained 8192 tokens, but not beside a margin of 2048 tokens' K/V and more
  const margin = 2500 * perToken;
  const available = full.totalBytes + 1000;
  const m = await loadModel(FILE, { backend: "reference", contextSize: "auto", availableMemory: available, memoryMargin: margin, warmup: false });
  try {
    assert.ok(m.contextSize >= 4096 && m.contextSize < 8192, String(m.contextSize));
    // what it keeps free: at least the margin at this context, less than it one block further
    assert.ok(available - planMemory(request(m.contextSize)).totalBytes >= margin);
    assert.ok(available - planMemory(request(m.contextSize + 16)).totalBytes < margin);
    // the default pool is one context here: 16 would eat the margin
    assert.equal(m.engine.stats.kvCapacityTokens, m.contextSize);
  } finally {
    m.dispose();
  }
  // without a margin it fills the free memory (the old behaviour): the trained context
  const none = await loadModel(FILE, { backend: "reference", contextSize: "auto", availableMemory: available, memoryMargin: 0, warmup: false });
  assert.equal(none.contextSize, 8192);
  none.dispose();
  // a margin that would take the context below 4096 tokens is given up first: 4096
  const floor = await loadModel(FILE, { backend: "reference", contextSize: "auto", availableMemory: available, memoryMargin: 6000 * perToken, warmup: false });
  assert.equal(floor.contextSize, 4096);
  floor.dispose();
  // the default pool keeps the margin beside an explicit context: free = the plan, 4 contexts more and the margin
  const p512 = planMemory(request(512));
  const pool = await loadModel(FILE, { backend: "reference", contextSize: 512, availableMemory: p512.totalBytes + 4 * 512 * perToken + margin, memoryMargin: margin, warmup: false });
  assert.equal(pool.engine.stats.kvCapacityTokens, 5 * 512);
  pool.dispose();
  // the CLI's margin is TSLLM_MEMORY_MARGIN; inspect picks the context loadModel does
  const env = { ...process.env, TSLLM_AVAILABLE_MEMORY: String(available), TSLLM_MEMORY_MARGIN: String(margin) };
  const j = JSON.parse((await run(process.execPath, ["--import", "tsx", CLI, "inspect", "--model", FILE, "--ctx-size", "auto", "--json"], { cwd: PROJECT_ROOT, env })).stdout) as { plan: { contextSize: number; marginBytes: number } };
  assert.equal(j.plan.marginBytes, margin);
  const wasm = await loadModel(FILE, { contextSize: "auto", availableMemory: available, memoryMargin: margin, warmup: false });
  assert.equal(j.plan.contextSize, wasm.contextSize);
  wasm.dispose();
  const bad = await run(process.execPath, ["--import", "tsx", CLI, "inspect", "--model", FILE, "--ctx-size", "auto"], { cwd: PROJECT_ROOT, env: { ...env, TSLLM_MEMORY_MARGIN: "1G" } }).then(() => "", (e: { stderr: string }) => e.stderr);
  assert.match(bad, /TSLLM_MEMORY_MARGIN must be a number of bytes, got "1G"/);
  await assert.rejects(loadModel(FILE, { memoryMargin: -1 }), /loadModel: memoryMargin: expected a number of bytes \(an integer >= 0\), got -1/);
});

test("on wasm the default KV pool is sized with the arrays it outgrows while filling: the plan's count is the pool's own allocations", async () => {
  // the real pool, as the engine makes it (arrays of one block at first), on the wasm backend,
  // its allocations counted: everything allocated past the final arrays was outgrown
  const backend = await createWasmBackend({ threads: 1 });
  try {
    for (const blocks of [1, 2, 15, 16, 40, 224, 513]) {
      let floats = 0;
      const allocActivations = (n: number) => {
        floats += n;
        return backend.allocActivations(n);
      };
      const storage = { ...backend, allocActivations } as unknown as KVStorage;
      const pool = new KVBlockPool(1, 1, 8, blocks, storage, 16, blocks * 16 * 2 * 8 * 4, undefined, 1);
      for (let b = 0; b < blocks; b++) pool.take();
      const final = 2 * blocks * 16 * 8; // one layer's K and V at 8 floats a row
      assert.equal((floats - final) / (2 * 16 * 8), outgrownKvBlocks(blocks), `${blocks} blocks`);
      assert.ok(outgrownKvBlocks(blocks) <= Math.max(1, blocks / 8), `${blocks} blocks`);
    }
  } finally {
    backend.dispose();
  }
});

test("the plan counts the wasm backend's worker threads (each measured at 32-37 MB of rss): more threads need more free memory", { skip: SKIP, timeout: 120_000 }, async () => {
  await ready;
  const one = planMemory(loadPlanRequest(openModel(FILE), { threads: 1 }, 512)!);
  const available = one.totalBytes + 1000;
  const m = await loadModel(FILE, { threads: 1, contextSize: 512, availableMemory: available, memoryMargin: 0, warmup: false });
  m.dispose();
  await assert.rejects(loadModel(FILE, { threads: 4, contextSize: 512, availableMemory: available, memoryMargin: 0, warmup: false }), (e: Error) => {
    assert.match(e.message, /m\.gguf: needs [\d.]+ MB \(weights [\d.]+ MB F32 \+ KV [\d.]+ MB at 512 tokens \+ scratch [\d.]+ MB\), [\d.]+ MB free: /);
    // three workers' worth more than one thread
    const needs = Number(/needs ([\d.]+) MB/.exec(e.message)![1]) * 1e6;
    assert.ok(needs - one.totalBytes > 3 * 32e6, `${needs} vs ${one.totalBytes}`);
    return true;
  });
  // the reference backend has no workers
  const ref = planMemory(loadPlanRequest(openModel(FILE), { backend: "reference", threads: 4 }, 512)!);
  assert.ok(ref.totalBytes < one.totalBytes + 1000);
});

test("the wasm backend's 4 GiB per memory: a tensor larger than one memory is refused with a quantization that fits", () => {
  // a 7B-like embedding: 4096 x 600000 F16 = 4.9 GB in one tensor
  const shape = { blockCount: 32, headCountKv: 8, headDim: 128, headCount: 32, embeddingLength: 4096, feedForwardLength: 14336, contextLength: 8192, vocabSize: 600000 };
  const tensors = [{ name: "token_embd.weight", type: GGMLType.F16, dims: [4096, 600000], byteLength: 4096 * 600000 * 2 }];
  const r: PlanRequest = { tensors, shape, contextSize: 4096, wasm: true };
  const p = planMemory(r);
  assert.throws(() => checkMemoryPlan("big.gguf", r, p, 64e9), /^Error: big\.gguf: needs [\d.]+ GB \(weights 4\.92 GB F16 .*64\.00 GB free; tensor token_embd\.weight is 4\.92 GB, more than the 4 GiB one wasm memory holds: try --quantize q8_0 \([\d.]+ GB\)$/);
  checkMemoryPlan("big.gguf", { ...r, wasm: false }, p, 64e9);
});

test("TSLLM_AVAILABLE_MEMORY: generate refuses in one line (exit 1); inspect --ctx-size N prints the plan and the proposal, --json has it", { skip: SKIP }, async () => {
  await ready;
  const q4 = planMemory(request(2048, "q4_k"));
  const env = { ...process.env, TSLLM_AVAILABLE_MEMORY: String(q4.totalBytes + 1000) };
  const cli = (args: string[]) => run(process.execPath, ["--import", "tsx", CLI, ...args], { cwd: PROJECT_ROOT, env }).then((r) => ({ code: 0, ...r }), (e: { code: number; stdout: string; stderr: string }) => e);
  const g = await cli(["generate", "--model", FILE, "--prompt", "hi", "--ctx-size", "2048", "--backend", "reference", "--max-tokens", "1"]);
  assert.equal(g.code, 1);
  assert.equal(g.stderr.trim().split("\n").length, 1, g.stderr);
  assert.match(g.stderr, /needs .* free: try --quantize/);
  const ok = await cli(["generate", "--model", FILE, "--prompt", "hi", "--ctx-size", "2048", "--backend", "reference", "--max-tokens", "1", "--quantize", "q4_k"]);
  assert.equal(ok.code, 0, ok.stderr);
  // inspect plans the default wasm backend, with its worker threads: free memory for its q4_k plan
  const q4wasm = planMemory(loadPlanRequest(openModel(FILE), { quantize: "q4_k" }, 2048)!);
  const inspect = (args: string[]) => run(process.execPath, ["--import", "tsx", CLI, ...args], { cwd: PROJECT_ROOT, env: { ...env, TSLLM_AVAILABLE_MEMORY: String(q4wasm.totalBytes + 1000) } });
  const i = await inspect(["inspect", "--model", FILE, "--ctx-size", "2048"]);
  assert.match(i.stdout, /load plan: +[\d.]+ MB = weights [\d.]+ MB F32 \+ KV [\d.]+ MB at 2048 tokens \+ scratch [\d.]+ MB \(estimate\); [\d.]+ MB free: does not fit\n +needs .*: try --quantize/);
  const j = JSON.parse((await inspect(["inspect", "--model", FILE, "--ctx-size", "auto", "--quantize", "q4_k", "--json"])).stdout) as { plan: { fits: boolean; contextSize: number; weightType: string } };
  assert.equal(j.plan.fits, true);
  assert.equal(j.plan.weightType, "Q4_K");
  assert.ok(j.plan.contextSize >= 2048, String(j.plan.contextSize));
});

test("a kvCacheBytes (--kv-memory) budget past free memory is refused with the largest budget that fits, sized by an independent reading of the GGUF", { skip: SKIP }, async () => {
  await ready;
  // the judge: node-llama-cpp's GGUF reader; F32 tensors are 4 bytes an element (GGUF spec), and
  // f32 K and V are 2 x layers x KV heads x head size x 4 bytes a position
  const { perToken, weights } = await judgedSizes();
  const perBlock = 16 * perToken;
  const asked = 1000 * perBlock;
  const r = { ...request(2048), kvCacheBytes: asked };
  const p = planMemory(r);
  assert.equal(p.weightBytes, weights);
  assert.equal(p.kvCacheBytes, asked);
  // free memory for the weights, the plan's scratch and 100.5 blocks of K/V
  const available = weights + p.scratchBytes + 100 * perBlock + perBlock / 2;
  const message = await loadModel(FILE, { backend: "reference", contextSize: 2048, kvCacheBytes: asked, availableMemory: available }).then(() => "loaded", (e: Error) => e.message);
  assert.doesNotMatch(message, /\n/);
  assert.match(message, new RegExp(`KV [\\d.]+ MB for 16000 tokens \\(kvCacheBytes ${asked}, --kv-memory\\)`));
  assert.match(message, new RegExp(`: try kvCacheBytes ${100 * perBlock} \\(--kv-memory; [\\d.]+ MB\\)`), message);
  // the proposal loads, with a pool of that many positions
  const m = await loadModel(FILE, { backend: "reference", contextSize: 2048, kvCacheBytes: 100 * perBlock, availableMemory: available });
  try {
    assert.equal(m.engine.stats.kvCapacityTokens * perToken, 100 * perBlock);
  } finally {
    m.dispose();
  }
});

test("a kvCacheBytes (--kv-memory) budget at a context whose scratch leaves no room for any budget is refused with a smaller --ctx-size and the budget that fits with it (it was: no context size fits)", { skip: SKIP }, async () => {
  await ready;
  // the judge: f32 K and V from node-llama-cpp's reading of the header, 2 x layers x KV heads x
  // head size x 4 bytes a position, and a load with the proposal at the same free memory
  const { perToken } = await judgedSizes();
  const perBlock = 16 * perToken;
  const asked = 1000 * perBlock;
  // free: the weights, the scratch at 2048 tokens and 40.5 blocks, less than the scratch at 8192 needs beside one block
  const at2048 = planMemory(request(2048)), at8192 = planMemory(request(8192));
  const available = at2048.weightBytes + at2048.scratchBytes + 40 * perBlock + perBlock / 2;
  assert.ok(at8192.weightBytes + at8192.scratchBytes + perBlock > available, "no budget fits beside the scratch at 8192");
  const message = await loadModel(FILE, { backend: "reference", contextSize: 8192, kvCacheBytes: asked, availableMemory: available }).then((m) => { m.dispose(); return "loaded"; }, (e: Error) => e.message);
  assert.doesNotMatch(message, /\n/);
  const proposal = /: try kvCacheBytes (\d+) \(--kv-memory; [\d.]+ [kMG]?B\) with --ctx-size (\d+)$/.exec(message);
  assert.ok(proposal, message);
  const [budget, context] = [Number(proposal[1]), Number(proposal[2])];
  assert.ok(context < 8192, message);
  assert.equal(budget % perBlock, 0, "whole blocks of K/V");
  // tsllm serve at the same free memory: the same line in its flags (--kv-memory, --ctx-size)
  const env = { ...process.env, TSLLM_AVAILABLE_MEMORY: String(available) };
  const served = await run(process.execPath, ["--import", "tsx", CLI, "serve", "--model", FILE, "--backend", "reference", "--ctx-size", "8192", "--kv-memory", String(asked), "--port", "0"], { cwd: PROJECT_ROOT, env }).then(() => "started", (e: { stderr: string }) => e.stderr);
  const inFlags = message.replace(`(kvCacheBytes ${asked}, --kv-memory)`, `(--kv-memory ${asked})`).replace(`try kvCacheBytes ${budget} (--kv-memory; `, `try --kv-memory ${budget} (`);
  assert.ok(served.includes(`\ntsllm: error: ${inFlags}\n`), `serve: ${served}\nlibrary: ${message}`);
  // the proposal loads at the same free memory, with a pool of that many positions
  const m = await loadModel(FILE, { backend: "reference", contextSize: context, kvCacheBytes: budget, availableMemory: available, warmup: false });
  try {
    assert.equal(m.engine.stats.kvCapacityTokens * perToken, budget);
  } finally {
    m.dispose();
  }
});

test("inspect names the KV pool loadModel reserves (room for 16 sequences, shrunk to what is free), not only the one context the plan needs", { skip: SKIP }, async () => {
  await ready;
  // the judge: f32 K and V from node-llama-cpp's reading of the header, 2 x layers x KV heads x
  // head size x 4 bytes a position, and the pool the loaded engine really holds
  const { perToken } = await judgedSizes();
  // the plan of the default (wasm) backend at its default threads, as inspect and loadModel below make it
  const p = planMemory(loadPlanRequest(openModel(FILE), {}, 1024)!);
  // free: the plan (one context), 2.5 contexts more and the default 1 GiB margin (llama.cpp's
  // --fit-target), so the default pool (16 contexts) shrinks to 3.5 contexts: 224 blocks of 16
  const available = p.totalBytes + 2.5 * 1024 * perToken + 2 ** 30;
  const env: NodeJS.ProcessEnv = { ...process.env, TSLLM_AVAILABLE_MEMORY: String(available) };
  delete env["TSLLM_MEMORY_MARGIN"];
  const out = (await run(process.execPath, ["--import", "tsx", CLI, "inspect", "--model", FILE, "--ctx-size", "1024", "--json"], { cwd: PROJECT_ROOT, env })).stdout;
  const plan = (JSON.parse(out) as { plan: { kvCacheBytes: number; kvPool?: { bytes: number; tokens: number } } }).plan;
  assert.equal(plan.kvCacheBytes, 1024 * perToken);
  assert.ok(plan.kvPool, "plan.kvPool is missing");
  // inspect plans the default (wasm) backend: its pool also leaves room for the arrays it outgrows
  // (1, 2, 4, 8 blocks, then all: 15), so 209 + 15 = 224 blocks
  const m = await loadModel(FILE, { contextSize: 1024, availableMemory: available, warmup: false });
  try {
    assert.equal(plan.kvPool.tokens, m.engine.stats.kvCapacityTokens);
    assert.equal(plan.kvPool.bytes, m.engine.stats.kvCapacityTokens * perToken);
    assert.equal(plan.kvPool.tokens, 209 * 16);
  } finally {
    m.dispose();
  }
  const text = (await run(process.execPath, ["--import", "tsx", CLI, "inspect", "--model", FILE, "--ctx-size", "1024"], { cwd: PROJECT_ROOT, env })).stdout;
  assert.match(text, new RegExp(`\\nKV pool: +[\\d.]+ MB for ${plan.kvPool.tokens} tokens, reserved at load \\(room for up to 16 sequences of 1024 tokens, shrunk to what is free less a 1\\.07 GB margin\\): about [\\d.]+ MB in all when every sequence is full \\(with [\\d.]+ [kMG]?B of K/V arrays the pool outgrows on the way, which wasm memory keeps\\)\\n`));
});

test("tsllm serve --parallel N past the KV pool free memory allows warns at start in one line naming pool tokens vs N x --ctx-size and what to change; no warning when N contexts fit, without --parallel, or with --kv-memory", { skip: SKIP, timeout: 120_000 }, async () => {
  await ready;
  // the judge: f32 K and V from node-llama-cpp's reading of the header (2 x layers x KV heads x
  // head size x 4 bytes a position); free memory = the plan (weights, scratch, one context) and
  // exactly two contexts more, so the pool holds 3 x 512 positions of the 16 x 512 asked for
  const { perToken } = await judgedSizes();
  const available = planMemory(request(512)).totalBytes + 2 * 512 * perToken;
  const warningsOf = async (args: string[], env = { ...process.env, TSLLM_AVAILABLE_MEMORY: String(available), TSLLM_MEMORY_MARGIN: "0" }) => {
    const s = await spawnServe(["--model", FILE, "--ctx-size", "512", "--backend", "reference", ...args], { env });
    try {
      const lines = s.stderr().split("\n");
      const ready = lines.findIndex((l) => l.includes("ready:"));
      return { warnings: lines.slice(0, ready).filter((l) => l.startsWith("tsllm: warning:")), ready: lines[ready]! };
    } finally {
      s.child.kill("SIGTERM");
      await s.exited;
    }
  };
  const asked = await warningsOf(["--parallel", "16"]);
  assert.match(asked.ready, /16 parallel sequences, 1536 KV tokens/);
  assert.equal(asked.warnings.length, 1, asked.warnings.join("\n"));
  const w = asked.warnings[0]!;
  assert.ok(w.startsWith(`tsllm: warning: ${FILE}: the KV pool holds 1536 tokens, 3 full contexts of 512, not the 16 x 512 = 8192 that --parallel 16 asks for `), w);
  // 16 x 512 positions of K/V are more than is free: no --kv-memory to try (a load with it is refused)
  assert.match(w, /; for 16 full contexts try --ctx-size 96 or --parallel 3$/);
  for (const args of [["--parallel", "3"], [], ["--parallel", "16", "--kv-memory", String(1536 * perToken)]]) {
    assert.deepEqual((await warningsOf(args)).warnings, [], args.join(" "));
  }
  // 16 contexts fit in the free memory, but the margin shrank the pool to 3: the budget for all of
  // them is proposed, and a serve with it starts with that pool
  // (free: the plan, one context, and 15.5 more; margin 13.5 contexts: the pool holds 3)
  const margin = 13.5 * 512 * perToken;
  const roomy = { ...process.env, TSLLM_AVAILABLE_MEMORY: String(planMemory(request(512)).totalBytes + 15.5 * 512 * perToken), TSLLM_MEMORY_MARGIN: String(margin) };
  const fits = await warningsOf(["--parallel", "16"], roomy);
  assert.match(fits.ready, /16 parallel sequences, 1536 KV tokens/);
  assert.match(fits.warnings[0] ?? "", new RegExp(`; for 16 full contexts try --kv-memory ${16 * 512 * perToken} \\([\\d.]+ MB, which fits in the free memory\\) or --ctx-size 96 or --parallel 3$`));
  const taken = await warningsOf(["--parallel", "16", "--kv-memory", String(16 * 512 * perToken)], roomy);
  assert.deepEqual(taken.warnings, []);
  assert.match(taken.ready, /16 parallel sequences, 8192 KV tokens/);
});

test("tsllm generate --n 20 / --num-beams 20 widens its engine for its one request without the --parallel warning (n choices share the prompt's rows, generate has no --parallel), where serve --parallel 20 gets it", { skip: SKIP, timeout: 180_000 }, async () => {
  await ready;
  // the same judge and free memory as above: f32 K and V from node-llama-cpp's reading of the
  // header; free memory = the plan and two contexts more, no margin, so the pool holds 3 contexts of 512
  const { perToken } = await judgedSizes();
  const env = { ...process.env, TSLLM_AVAILABLE_MEMORY: String(planMemory(request(512)).totalBytes + 2 * 512 * perToken), TSLLM_MEMORY_MARGIN: "0" };
  const common = ["generate", "--model", FILE, "--ctx-size", "512", "--backend", "reference", "--prompt", "Once", "--max-tokens", "2", "--seed", "1", "--json"];
  for (const width of [["--n", "20"], ["--num-beams", "20"]]) {
    const r = await run(process.execPath, ["--import", "tsx", CLI, ...common, ...width], { cwd: PROJECT_ROOT, env });
    assert.deepEqual(r.stderr.split("\n").filter((l) => /warning/i.test(l)), [], `${width.join(" ")}: ${r.stderr}`);
    // it ran that wide: 20 choices, or the beam search's returned beam (one by default)
    const out = JSON.parse(r.stdout) as { choices?: unknown[]; beams?: unknown[] };
    assert.equal(width[0] === "--n" ? out.choices?.length : out.beams?.length, width[0] === "--n" ? 20 : 1, `${width.join(" ")}: ${r.stdout}`);
  }
  // the library's own maxSequences still warns: the caller asked for that many full contexts
  const warnings: string[] = [];
  const m = await loadModel(FILE, { backend: "reference", contextSize: 512, maxSequences: 20, availableMemory: planMemory(request(512)).totalBytes + 2 * 512 * perToken, memoryMargin: 0, onWarning: (w) => warnings.push(w), warmup: false });
  m.dispose();
  assert.equal(warnings.length, 1, warnings.join("\n"));
  assert.match(warnings[0]!, /not the 20 x 512 = 10240 that maxSequences 20 \(--parallel\) asks for/);
});

test("generate --n / --num-beams below the memory margin: the pool holds the request's contexts where all of the free memory does (a warning names the margin given up), else one line in generate's flags", { skip: SKIP, timeout: 240_000 }, async () => {
  await ready;
  // the judge: f32 K and V from node-llama-cpp's reading of the header, as the tests above
  const { perToken } = await judgedSizes();
  const cli = (args: string[], env: NodeJS.ProcessEnv) => run(process.execPath, ["--import", "tsx", CLI, ...args], { cwd: PROJECT_ROOT, env }).then((r) => ({ code: 0, ...r }), (e: { code: number; stdout: string; stderr: string }) => e);
  const freeWith = (contextsMore: number) => ({ ...process.env, TSLLM_AVAILABLE_MEMORY: String(planMemory(request(512)).totalBytes + contextsMore * 512 * perToken), TSLLM_MEMORY_MARGIN: String(2 ** 30) });
  const gen = ["generate", "--model", FILE, "--ctx-size", "512", "--backend", "reference", "--prompt", "Once", "--max-tokens", "2", "--seed", "1", "--json"];
  // free = the plan and two contexts more, a 1 GiB margin: 20 choices (and 20 beams) run, in a pool
  // of the three contexts all of the free memory holds, which was one context (refused) before
  for (const width of [["--n", "20"], ["--num-beams", "20"]]) {
    const r = await cli([...gen, ...width], freeWith(2));
    assert.equal(r.code, 0, `${width.join(" ")}: ${r.stderr}`);
    const out = JSON.parse(r.stdout) as { choices?: unknown[]; beams?: unknown[] };
    assert.equal(width[0] === "--n" ? out.choices?.length : out.beams?.length, width[0] === "--n" ? 20 : 1, r.stdout);
    const lines = r.stderr.trim().split("\n");
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0]!, new RegExp(`^tsllm: warning: .*m\\.gguf: the KV pool for one request of 20 sequences \\(--n / --num-beams\\) holds ${3 * 512} tokens \\(3 full contexts of 512\\), which leaves 0 B free, less than the 1\\.07 GB memory margin \\(--memory-margin\\)`));
  }
  // one context of width: no warning (the pool keeps the margin as before)
  const one = await cli([...gen, "--n", "1"], freeWith(2));
  assert.equal(one.code, 0, one.stderr);
  assert.equal(one.stderr, "");
  // no memory for more than the one context: one line in generate's words (its flags, not the
  // library's maxTokens / kvCacheBytes, which generate has no flag for), exit 2
  const refused = await cli([...gen, "--n", "20"], freeWith(0));
  assert.equal(refused.code, 2, refused.stderr);
  assert.equal(refused.stderr.split("\n").length, 2, refused.stderr);
  assert.match(refused.stderr, new RegExp(`^tsllm: error: --max-tokens: the request needs room for up to \\d+ tokens of KV cache \\(prompt 2 \\+ --max-tokens 2, 20 choices\\) but the KV cache holds 512 tokens \\(${512 * perToken} bytes\\); lower --max-tokens or --n, or make the KV cache smaller per token: --cache-type-k q8_0 --cache-type-v q8_0\n$`));
  const beams = await cli([...gen, "--num-beams", "20"], freeWith(0));
  assert.match(beams.stderr, /20 beams\) but the KV cache holds 512 tokens .*; lower --max-tokens or --num-beams, or make the KV cache smaller per token: --cache-type-k q8_0 --cache-type-v q8_0\n$/);
  // the pool already gave up the margin for the request's contexts (the warning) and still holds
  // too few: a smaller --memory-margin frees nothing more, so the refusal does not propose it
  const pastArgs = [...gen.map((a) => (a === "2" ? "500" : a)), "--n", "20"];
  const past = await cli(pastArgs, freeWith(2));
  assert.equal(past.code, 2, past.stderr);
  const [warning, error, ...rest] = past.stderr.split("\n");
  assert.deepEqual(rest, [""], past.stderr);
  assert.match(warning!, /^tsllm: warning: .*the KV pool for one request of 20 sequences \(--n \/ --num-beams\) holds 1536 tokens \(3 full contexts of 512\), .*the margin is given up/);
  assert.match(error!, new RegExp(`^tsllm: error: --max-tokens: the request needs room for up to \\d+ tokens of KV cache \\(prompt 2 \\+ --max-tokens 500, 20 choices\\) but the KV cache holds 1536 tokens \\(${1536 * perToken} bytes\\); lower --max-tokens or --n, or make the KV cache smaller per token: --cache-type-k q8_0 --cache-type-v q8_0$`));
  // the judge: with no margin at all (--memory-margin 0) the pool is the same 1536 tokens
  const noMargin = await cli([...pastArgs, "--memory-margin", "0"], freeWith(2));
  assert.equal(noMargin.code, 2, noMargin.stderr);
  assert.match(noMargin.stderr, /but the KV cache holds 1536 tokens /);
  // the library keeps its own options' names
  const m = await loadModel(FILE, { backend: "reference", contextSize: 512, availableMemory: planMemory(request(512)).totalBytes, memoryMargin: 0, warmup: false });
  try {
    assert.throws(() => m.stream("Once", { n: 4, maxTokens: 500 }), /\(prompt 2 \+ maxTokens 500, 4 choices\) .*; lower maxTokens or raise kvCacheBytes$/);
  } finally {
    m.dispose();
  }
});

test("generate's KV refusal proposes only a cache type that stores fewer bytes a token: q4_0 past q8_0, none past q4_0 (the cache it has refuses the same; the proposal runs)", { skip: SKIP, timeout: 240_000 }, async () => {
  await ready;
  const cli = (args: string[], env: NodeJS.ProcessEnv) => run(process.execPath, ["--import", "tsx", CLI, ...args], { cwd: PROJECT_ROOT, env }).then((r) => ({ code: 0, ...r }), (e: { code: number; stdout: string; stderr: string }) => e);
  // free = the plan at 512 tokens of the cache asked for, a 1 GiB margin: the pool holds one context and 20 choices are refused
  const envAt = (type: "q8_0" | "q4_0") => ({ ...process.env, TSLLM_AVAILABLE_MEMORY: String(planMemory(loadPlanRequest(openModel(FILE), { backend: "reference", cacheTypeK: type, cacheTypeV: type }, 512)!).totalBytes), TSLLM_MEMORY_MARGIN: String(2 ** 30) });
  const gen = (type: string) => ["generate", "--model", FILE, "--ctx-size", "512", "--backend", "reference", "--prompt", "Once", "--max-tokens", "2", "--seed", "1", "--json", "--n", "20", "--cache-type-k", type, "--cache-type-v", type];
  const refused = await cli(gen("q8_0"), envAt("q8_0"));
  assert.equal(refused.code, 2, refused.stderr);
  assert.match(refused.stderr, /but the KV cache holds 512 tokens .*; lower --max-tokens or --n, or make the KV cache smaller per token: --cache-type-k q4_0 --cache-type-v q4_0\n$/);
  // the judge: the CLI itself. The cache it already has (the old proposal) refuses the same; the proposal runs the 20 choices
  assert.equal((await cli(gen("q8_0"), envAt("q8_0"))).stderr, refused.stderr);
  const proposed = await cli(gen("q4_0"), envAt("q8_0"));
  assert.equal(proposed.code, 0, proposed.stderr);
  assert.equal((JSON.parse(proposed.stdout) as { choices: unknown[] }).choices.length, 20);
  // q4_0 is the smallest cache type: refused at its own plan, no cache flags are proposed
  const smallest = await cli(gen("q4_0"), envAt("q4_0"));
  assert.equal(smallest.code, 2, smallest.stderr);
  assert.match(smallest.stderr, /but the KV cache holds 512 tokens .*; lower --max-tokens or --n\n$/);
  assert.doesNotMatch(smallest.stderr, /--cache-type/);
});

test("generate --draft-model below the memory margin: the pool holds the request's context and a round's proposal past it where all of the free memory does (a warning), the draft's own planned pool counted once, beside it, not again in the pool", { skip: SKIP, timeout: 240_000 }, async () => {
  await ready;
  // the judge for the per-token bytes: node-llama-cpp's reading of the header (f32 K and V)
  const { perToken } = await judgedSizes();
  const cli = (args: string[], env: NodeJS.ProcessEnv) => run(process.execPath, ["--import", "tsx", CLI, ...args], { cwd: PROJECT_ROOT, env }).then((r) => ({ code: 0, ...r }), (e: { code: number; stdout: string; stderr: string }) => e);
  // free = the plan at 512, one context more and the draft's own plan (the same file: its weights,
  // scratch and the draft pool the engine keeps for it, a context and a block), a 1 GiB margin:
  // the default pool keeps one context
  const draftPlan = planMemory({ ...request(512), kvCacheBytes: 33 * 16 * perToken }).totalBytes;
  const available = planMemory(request(512)).totalBytes + 512 * perToken + draftPlan;
  const env = { ...process.env, TSLLM_AVAILABLE_MEMORY: String(available), TSLLM_MEMORY_MARGIN: String(2 ** 30) };
  // a request that fills the context (its prompt and 512 tokens, cut at the context's 512)
  const gen = ["generate", "--model", FILE, "--ctx-size", "512", "--backend", "reference", "--prompt", "Once", "--max-tokens", "512", "--ignore-eos", "--temperature", "0", "--seed", "1", "--json", "--no-warmup"];
  // the judge: the same request without a draft runs in that one context (and llama.cpp gives a draft its own context)
  const plain = await cli(gen, env);
  assert.equal(plain.code, 0, plain.stderr);
  // drafting (8 tokens a round, generate's default), the request's own rows are its 512 positions
  // and a round's proposal past them: 8 + 1 positions, one block, and the block it may start
  // mid-way, 2 blocks (by hand): 544 tokens, which a pool of one context refuses. The draft's
  // cache is in its own pool, counted once in draftPlan; counted in this pool too (a context of
  // the same bytes), the pool took 2 contexts, 1024 tokens, of the memory the margin keeps
  const drafted = await cli([...gen, "--draft-model", FILE], env);
  assert.equal(drafted.code, 0, drafted.stderr);
  const out = JSON.parse(drafted.stdout) as { completion: string; speculative?: unknown };
  assert.ok(out.speculative, drafted.stdout);
  assert.equal(out.completion, (JSON.parse(plain.stdout) as { completion: string }).completion, "greedy: the draft changes no token");
  const lines = drafted.stderr.trim().split("\n");
  assert.equal(lines.length, 1, drafted.stderr);
  // what it leaves free: the free memory less the model's weights and scratch, the draft's plan
  // and the pool of 544 tokens: 512 + 512 - 544 = 480 tokens' bytes (by hand)
  const left = formatBytes(480 * perToken).replace(/\./g, "\\.");
  assert.match(lines[0]!, new RegExp(`^tsllm: warning: .*m\\.gguf: the KV pool for one speculative request \\(its context and a round's proposal past it; the draft model's KV cache has its own pool, planned beside\\) holds 544 tokens \\(1 full context of 512\\), which leaves ${left} free, less than the 1\\.07 GB memory margin`));
  // free = the plan alone: no room for the draft beside the pool's one context, refused in one line
  // by the model's plan, which counts the draft (one account), naming it and what makes it smaller; it
  // does not propose a smaller --memory-margin: the judge, --memory-margin 0, is refused the same
  const tight = { ...env, TSLLM_AVAILABLE_MEMORY: String(planMemory(request(512)).totalBytes) };
  const refused = await cli([...gen, "--draft-model", FILE], tight);
  assert.equal(refused.code, 1, refused.stderr);
  assert.match(refused.stderr, /^tsllm: error: .*m\.gguf: needs [\d.]+ [kMG]?B \(weights .* \+ --draft-model .*m\.gguf [\d.]+ [kMG]?B \(its weights, scratch and KV cache at 512 tokens\)\), [\d.]+ [kMG]?B free: try (.* or )?a smaller --draft-model \(or --draft-quantize\)\n$/);
  const noMargin = await cli([...gen, "--draft-model", FILE, "--memory-margin", "0"], tight);
  assert.equal(noMargin.stderr, refused.stderr);
});

test("generate's default KV pool for a speculative request leaves the draft model its weights, scratch and draft cache: the model's weights and scratch, its pool and the draft fit in the free memory together", { skip: SKIP, timeout: 240_000 }, async () => {
  await ready;
  // the judges: the weights from the header's tensor sizes (F32: 4 bytes an element), K and V per
  // token from its shape (f32), both as node-llama-cpp reads them
  const { perToken, weights } = await judgedSizes();
  // free: the model's plan at 512, three contexts more and the draft's plan (the same file), no margin
  const available = planMemory(request(512)).totalBytes + 3 * 512 * perToken + planMemory({ ...request(512), kvCacheBytes: 33 * 16 * perToken }).totalBytes;
  const options = { backend: "reference", contextSize: 512, availableMemory: available, memoryMargin: 0, warmup: false } as const;
  const model = await loadModelForOneRequest(FILE, options, 1, { ref: FILE, options, draftTokens: 8 });
  try {
    const m = model.memory;
    const loaded = await loadDraftBeside(model, FILE, options, "--ctx-size", 8);
    const d = loaded.memory;
    loaded.dispose();
    assert.ok(m.residentBytes >= weights && d.residentBytes >= weights, `the weights and scratch ${m.residentBytes} and ${d.residentBytes}, the weights ${weights}`);
    // the draft's weights and scratch and the draft cache its request takes (its context and a proposal's block)
    const draft = d.residentBytes + 528 * perToken;
    // before, the pool took the memory past the model's weights and scratch, the draft's too: 16 contexts, not 4
    assert.ok(m.residentBytes + m.budgetBytes + draft <= available, `weights and scratch ${m.residentBytes} + KV pool ${m.budgetBytes} + draft ${draft} > ${available} free`);
    assert.equal(m.budgetBytes, 4 * 512 * perToken, "the one context of the model's plan and the three more");
  } finally {
    model.dispose();
  }
});

test("serve --draft-model: one memory plan with the model's --kv-memory pool, which it allocates only as requests come: the draft's weights, scratch and draft cache must fit beside the model's weights and scratch and the whole budget (a byte less: one line naming --draft-model, the numbers and what to lower)", { skip: SKIP, timeout: 240_000 }, async () => {
  await ready;
  // the judge for the per-token bytes: node-llama-cpp's reading of the header (f32 K and V)
  const { perToken, weights } = await judgedSizes();
  // the model's budget: 4 contexts; the draft (the same file) needs its weights, scratch and the
  // draft cache its first request takes (a context and a block: 528 positions)
  const budget = 4 * 512 * perToken;
  const model = planMemory({ ...request(512), kvCacheBytes: budget }).totalBytes;
  const draftPlan = planMemory({ ...request(512), kvCacheBytes: 33 * 16 * perToken }).totalBytes;
  const args = ["--model", FILE, "--draft-model", FILE, "--ctx-size", "512", "--backend", "reference", "--kv-memory", String(budget), "--no-warmup"];
  const envWith = (free: number) => ({ ...process.env, TSLLM_AVAILABLE_MEMORY: String(free), TSLLM_MEMORY_MARGIN: "0" });
  // before, TSLLM_AVAILABLE_MEMORY (a figure no load changes) was taken off only the budget's
  // growth, not the model's weights: the draft started in the budget and its own plan alone, which
  // is not enough for both models (the weights, 21 MB each, from the header's tensor sizes)
  const over = await run(process.execPath, ["--import", "tsx", CLI, "serve", "--port", "0", ...args], { cwd: PROJECT_ROOT, env: envWith(budget + draftPlan) }).then((r) => ({ code: 0, ...r }), (e: { code: number; stdout: string; stderr: string }) => e);
  assert.equal(over.code, 2, over.stderr);
  const resident = /--model takes [\d.]+ [kMG]?B \(weights and scratch ([\d.]+) MB \+/.exec(over.stderr);
  assert.ok(resident && Number(resident[1]) * 1e6 >= weights, over.stderr);
  const s = await spawnServe(args, { env: envWith(model + draftPlan) });
  try {
    // the draft's KV pool stated as the plan counts it: a context and a block (528 positions)
    assert.match(s.stderr(), /ready: .*, 2048 KV tokens, drafting with .*m\.gguf \(its KV pool 528 tokens, [\d.]+ [kMG]?B\)/);
  } finally {
    s.child.kill("SIGTERM");
    await s.exited;
  }
  // before: the draft was checked against the free memory alone (and planned a pool of a context of its own), so it started
  const refused = await run(process.execPath, ["--import", "tsx", CLI, "serve", "--port", "0", ...args], { cwd: PROJECT_ROOT, env: envWith(model + draftPlan - 1) }).then((r) => ({ code: 0, ...r }), (e: { code: number; stdout: string; stderr: string }) => e);
  assert.equal(refused.code, 2, refused.stderr);
  assert.match(refused.stderr, /\ntsllm: error: --draft-model .*m\.gguf: needs [\d.]+ [kMG]?B \(weights [\d.]+ [kMG]?B F32 \+ scratch [\d.]+ [kMG]?B \+ its draft cache of 528 tokens [\d.]+ [kMG]?B\), but of the [\d.]+ [kMG]?B free, --model takes [\d.]+ [kMG]?B \(weights and scratch [\d.]+ [kMG]?B \+ its KV pool's budget 8\.4 MB\): lower --kv-memory, --parallel or --ctx-size, or make the draft smaller \(--draft-quantize\)\n$/);
});

test("serve --draft-tokens 24: the draft cache in the plan holds the context and a whole round past it (512 + 24 + 1 positions: 34 blocks, 544 tokens), not a context and one 16-token block; a byte less than that plan is refused naming 544 tokens", { skip: SKIP, timeout: 240_000 }, async () => {
  await ready;
  // the judge for the per-token bytes: node-llama-cpp's reading of the header (f32 K and V); the
  // positions by hand: the context, the round's 24 proposed tokens and the current token, in 16-token blocks
  const { perToken } = await judgedSizes();
  const draftTokens = Math.ceil((512 + 24 + 1) / 16) * 16;
  assert.equal(draftTokens, 544);
  const budget = 4 * 512 * perToken;
  const model = planMemory({ ...request(512), kvCacheBytes: budget }).totalBytes;
  // the draft's weights and scratch (a plan with no pool of its own) and its draft cache
  const draftPlan = planMemory({ ...request(512), kvCacheBytes: draftTokens * perToken }).totalBytes;
  const args = ["--model", FILE, "--draft-model", FILE, "--draft-tokens", "24", "--ctx-size", "512", "--backend", "reference", "--kv-memory", String(budget), "--no-warmup"];
  const envWith = (free: number) => ({ ...process.env, TSLLM_AVAILABLE_MEMORY: String(free), TSLLM_MEMORY_MARGIN: "0" });
  // before, the plan counted 528 tokens (a context and a block): it started with 16 positions' K and V less than a request of 24 draft tokens takes
  // (a server that starts is killed after 60 s: the refusal comes before it listens)
  const refused = await run(process.execPath, ["--import", "tsx", CLI, "serve", "--port", "0", ...args], { cwd: PROJECT_ROOT, env: envWith(model + draftPlan - 1), timeout: 60_000 }).then((r) => ({ code: 0, ...r }), (e: { code: number; stdout: string; stderr: string }) => e);
  assert.equal(refused.code, 2, `serve started (or failed otherwise) where the draft's plan does not fit: ${refused.stderr}`);
  assert.match(refused.stderr, /\ntsllm: error: --draft-model .*m\.gguf: needs [\d.]+ [kMG]?B \(weights [\d.]+ [kMG]?B F32 \+ scratch [\d.]+ [kMG]?B \+ its draft cache of 544 tokens [\d.]+ [kMG]?B\), but of the [\d.]+ [kMG]?B free, /);
  const s = await spawnServe(args, { env: envWith(model + draftPlan) });
  try {
    // the draft's KV pool stated as the plan counts it (the 544 tokens above)
    assert.match(s.stderr(), /ready: .*, 2048 KV tokens, drafting with .*m\.gguf \(its KV pool 544 tokens, [\d.]+ [kMG]?B\)/);
  } finally {
    s.child.kill("SIGTERM");
    await s.exited;
  }
});

test("--memory-margin SIZE (llama.cpp's --fit-target) sets the margin automatic sizes leave on generate, serve, inspect, over TSLLM_MEMORY_MARGIN; a bad value is one line naming the flag on every command that takes it", { skip: SKIP, timeout: 420_000 }, async () => {
  await ready;
  // the judge: f32 K and V from node-llama-cpp's reading of the header, as the tests above
  const { perToken } = await judgedSizes();
  const cli = (args: string[], env: NodeJS.ProcessEnv) => run(process.execPath, ["--import", "tsx", CLI, ...args], { cwd: PROJECT_ROOT, env }).then((r) => ({ code: 0, ...r }), (e: { code: number; stdout: string; stderr: string }) => e);
  // generate --n 20 at 512 tokens: free = the plan and two contexts more, so the default 1 GiB
  // margin (the environment's here) is given up for the request's contexts, with a warning; a 0
  // margin (the flag, over the environment) has none to give up
  const twoMore = { ...process.env, TSLLM_AVAILABLE_MEMORY: String(planMemory(request(512)).totalBytes + 2 * 512 * perToken), TSLLM_MEMORY_MARGIN: String(2 ** 30) };
  const gen = ["generate", "--model", FILE, "--ctx-size", "512", "--backend", "reference", "--prompt", "Once", "--max-tokens", "2", "--seed", "1", "--n", "20", "--json"];
  const narrow = await cli(gen, twoMore);
  assert.equal(narrow.code, 0, narrow.stderr);
  assert.match(narrow.stderr, /less than the 1\.07 GB memory margin \(--memory-margin\)/);
  const wide = await cli([...gen, "--memory-margin", "0"], twoMore);
  assert.equal(wide.code, 0, wide.stderr);
  assert.equal(wide.stderr, "");
  assert.equal((JSON.parse(wide.stdout) as { choices: unknown[] }).choices.length, 20);
  // serve: free = the plan and 15.5 contexts more; a 13.5-context margin (as 1024ths: K) leaves a
  // pool of 3 contexts, whichever of the flag and the environment gives it; the flag wins
  const margin = 13.5 * 512 * perToken;
  assert.ok(Number.isInteger(margin / 1024));
  const roomy = (envMargin: string) => ({ ...process.env, TSLLM_AVAILABLE_MEMORY: String(planMemory(request(512)).totalBytes + 15.5 * 512 * perToken), TSLLM_MEMORY_MARGIN: envMargin });
  const readyLine = async (args: string[], env: NodeJS.ProcessEnv) => {
    const s = await spawnServe(["--model", FILE, "--ctx-size", "512", "--backend", "reference", "--parallel", "16", ...args], { env });
    try {
      return s.stderr().split("\n").find((l) => l.includes("ready:"))!;
    } finally {
      s.child.kill("SIGTERM");
      await s.exited;
    }
  };
  assert.match(await readyLine(["--memory-margin", `${margin / 1024}K`], roomy("0")), /16 parallel sequences, 1536 KV tokens/);
  assert.match(await readyLine(["--memory-margin", "0"], roomy(String(margin))), /16 parallel sequences, 8192 KV tokens/);
  // inspect plans with the flag's margin, the context loadModel picks with it
  const free = planMemory(request(8192)).totalBytes + 1000;
  const autoMargin = 2500 * perToken;
  const j = JSON.parse((await cli(["inspect", "--model", FILE, "--ctx-size", "auto", "--memory-margin", String(autoMargin), "--json"], { ...process.env, TSLLM_AVAILABLE_MEMORY: String(free), TSLLM_MEMORY_MARGIN: "0" })).stdout) as { plan: { contextSize: number; marginBytes: number } };
  assert.equal(j.plan.marginBytes, autoMargin);
  const m = await loadModel(FILE, { contextSize: "auto", availableMemory: free, memoryMargin: autoMargin, warmup: false });
  assert.equal(j.plan.contextSize, m.contextSize);
  assert.ok(m.contextSize < 8192, String(m.contextSize));
  m.dispose();
  // bad values: one line, exit 2, before anything loads
  for (const command of [["generate", "--prompt", "x"], ["chat"], ["serve"], ["inspect"], ["perplexity", "--file", FILE]]) {
    for (const [value, expected] of [["lots", `expects a size in bytes (e.g. 268435456, 256MiB, 1G), got "lots"`], ["1.5X", `expects a size in bytes (e.g. 268435456, 256MiB, 1G), got "1.5X"`], ["99999999T", `expects at most ${Number.MAX_SAFE_INTEGER} bytes, got "99999999T"`]] as const) {
      const r = await cli([command[0]!, "--model", FILE, ...command.slice(1), "--memory-margin", value], process.env);
      assert.equal(r.code, 2, `${command[0]} ${value}: ${r.stderr}`);
      assert.equal(r.stderr, `tsllm: error: --memory-margin ${expected}\n`, `${command[0]} ${value}`);
    }
  }
});

test("inspect --threads N plans N compute threads as generate --threads does (each wasm worker counted): its plan fits where loadModel with those threads loads", { skip: SKIP, timeout: 120_000 }, async () => {
  await ready;
  const inspect = async (threads: string, available: number) => {
    const { stdout } = await run(process.execPath, ["--import", "tsx", CLI, "inspect", "--model", FILE, "--ctx-size", "512", "--threads", threads, "--json"], { cwd: PROJECT_ROOT, env: { ...process.env, TSLLM_AVAILABLE_MEMORY: String(available), TSLLM_MEMORY_MARGIN: "0" } });
    return (JSON.parse(stdout) as { plan: { totalBytes: number; fits: boolean } }).plan;
  };
  // inspect's one-thread plan, exactly: loadModel with one thread loads there, with two it does not
  const one = await inspect("1", 2 ** 40);
  const two = await inspect("2", one.totalBytes);
  assert.equal((await inspect("1", one.totalBytes)).fits, true);
  assert.equal(two.fits, false);
  (await loadModel(FILE, { threads: 1, contextSize: 512, availableMemory: one.totalBytes, memoryMargin: 0, warmup: false })).dispose();
  await assert.rejects(loadModel(FILE, { threads: 2, contextSize: 512, availableMemory: one.totalBytes, memoryMargin: 0, warmup: false }), /m\.gguf: needs/);
  // two threads' plan is loadModel's: it loads with exactly that much free
  (await loadModel(FILE, { threads: 2, contextSize: 512, availableMemory: two.totalBytes, memoryMargin: 0, warmup: false })).dispose();
  const bad = await run(process.execPath, ["--import", "tsx", CLI, "inspect", "--model", FILE, "--threads", "1.5"], { cwd: PROJECT_ROOT }).then(() => "", (e: { stderr: string }) => e.stderr);
  assert.equal(bad, 'tsllm: error: --threads expects an integer (decimal digits, optionally signed), got "1.5"\n');
});

test("an explicit kvCacheBytes (--kv-memory) on wasm is checked with the K/V arrays its pool outgrows while filling (which the pool's own allocations show)", { skip: SKIP, timeout: 120_000 }, async () => {
  await ready;
  const perBlock = planMemory(request(512)).kvCacheBytes / 32;
  // 224 blocks outgrow 1 + 2 + 4 + 8 = 15 blocks on the way (the test of the default pool above
  // counts the real pool's allocations); one thread: no worker, so the wasm plan is the
  // reference backend's and those arrays
  const budget = 224 * perBlock;
  const without = planMemory({ ...request(512), kvCacheBytes: budget }).totalBytes;
  const options = { threads: 1, contextSize: 512, kvCacheBytes: budget, memoryMargin: 0, warmup: false } as const;
  const message = await loadModel(FILE, { ...options, availableMemory: without + 14 * perBlock }).then((m) => { m.dispose(); return "loaded"; }, (e: Error) => e.message);
  assert.match(message, new RegExp(`KV [\\d.]+ MB for 3584 tokens \\(kvCacheBytes ${budget}, --kv-memory\\) \\+ [\\d.]+ [kMG]?B of K/V arrays it outgrows`), message);
  // the proposed budget loads in that memory, and all 224 blocks with the 15 outgrown ones free
  const proposed = Number(/try kvCacheBytes (\d+)/.exec(message)![1]);
  assert.ok(proposed < budget && proposed >= 200 * perBlock, String(proposed / perBlock));
  (await loadModel(FILE, { ...options, kvCacheBytes: proposed, availableMemory: without + 14 * perBlock })).dispose();
  const m = await loadModel(FILE, { ...options, availableMemory: without + 15 * perBlock });
  assert.equal(m.engine.stats.kvCapacityTokens, 224 * 16);
  m.dispose();
});
