import assert from "node:assert/strict";
import { statSync } from "node:fs";
import { after, test } from "node:test";
import { disposeSharedLlama, llamaCppRun } from "./helpers/llama-cpp-oracle.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL);

// every WebAssembly.Memory the wasm backend makes, to read their sizes (the memory it holds, as a
// browser tab is charged for it: a shared memory's pages count once grown, touched or not)
const memories: WebAssembly.Memory[] = [];
const NativeMemory = WebAssembly.Memory;
function CountedMemory(descriptor: WebAssembly.MemoryDescriptor): WebAssembly.Memory {
  const m = new NativeMemory(descriptor);
  memories.push(m);
  return m;
}
CountedMemory.prototype = NativeMemory.prototype;

test("stories260K on wasm at contextSize 2048: 8 tokens hold the weights, one context of K/V and the fixed scratch, not 16 contexts", { skip }, async () => {
  (WebAssembly as { Memory: unknown }).Memory = CountedMemory;
  const { loadModel } = await import("../src/index.js");
  const path = sharedFile(MODEL)!;
  const contextSize = 2048;
  const model = await loadModel(path, { backend: "wasm", threads: 1, contextSize });
  try {
    await model.generate("Once upon a time", { maxTokens: 8, temperature: 0 });
    const i = model.info;
    // f32 K and V of every layer, one full context: what the request could use at most
    const oneContextKv = 2 * i.blockCount * i.headCountKv * i.headDim * 4 * contextSize;
    // the wasm backend's fixed part: 8 MiB of matmul scratch, 1 MiB of control block and tables, slack
    const fixed = 12 * 2 ** 20;
    const bound = statSync(path).size + oneContextKv + fixed;
    const held = memories.reduce((sum, m) => sum + m.buffer.byteLength, 0);
    assert.ok(memories.length > 0, "the wasm backend made no WebAssembly.Memory");
    // before: the engine allocated its default pool (maxSequences 16 x 2048 positions, 42 MB) at the first request
    assert.ok(held <= bound, `wasm memories hold ${(held / 2 ** 20).toFixed(1)} MiB > bound ${(bound / 2 ** 20).toFixed(1)} MiB`);
  } finally {
    model.dispose();
    (WebAssembly as { Memory: unknown }).Memory = NativeMemory;
  }
});

after(disposeSharedLlama);

// F32 weights: llama.cpp adds in the order tsllm reproduces on every CPU (no AMX Q8_0 here)
test("stories260K on wasm: the engine's KV pool growing under a decode (1, 2, 4, 8, 16 blocks) keeps llama.cpp's greedy tokens", { skip }, async () => {
  const { loadModel } = await import("../src/index.js");
  const path = sharedFile(MODEL)!;
  const model = await loadModel(path, { backend: "wasm", threads: 2, contextSize: 2048 });
  try {
    // 200 positions: the pool's arrays grow four times while this one sequence decodes
    const r = await model.generate("Once upon a time", { maxTokens: 190, temperature: 0, ignoreEos: true });
    assert.equal(r.completionTokens.length, 190);
    const judge = await llamaCppRun(path, r.promptTokens, { decodeSteps: 190 });
    assert.deepEqual(r.completionTokens, judge.greedyTokens.slice(0, 190));
    assert.equal(model.engine.stats.kv?.peakBlocksInUse, Math.ceil((r.promptTokens.length + 190) / 16));
  } finally {
    model.dispose();
  }
});

test("a lazily stored KV pool used to its last block leaves outgrown arrays of at most an eighth of its bytes behind (doubling to the whole pool would leave about as many again)", async () => {
  const { KVBlockPool } = await import("../src/cache/index.js");
  const { hostMemory } = await import("../src/kernels/index.js");
  const host = hostMemory();
  let allocated = 0;
  const storage = { ...host, allocActivations: (length: number) => { allocated += 4 * length; return host.allocActivations(length); } };
  const blocks = 4096, nLayers = 2;
  const pool = new KVBlockPool(nLayers, 1, 4, blocks, storage, 16, undefined, undefined, 1);
  for (let i = 0; i < blocks; i++) assert.equal(pool.take(), i);
  assert.equal(pool.storedBytes, pool.byteLength, "every block's rows are stored");
  const leftBehind = allocated - pool.byteLength;
  assert.ok(leftBehind <= pool.byteLength / 8, `outgrown arrays: ${leftBehind} bytes of a ${pool.byteLength}-byte pool`);
});
