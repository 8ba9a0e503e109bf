import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createWebGPUBackend } from "../src/kernels/webgpu/index.js";
import { loadModel } from "../src/llm.js";
import { GGMLType } from "../src/tensor/dtypes.js";
import { ensureRandomModel, tinyLlama } from "../src/testing/index.js";
import { runTsllm } from "./helpers/child.js";
import { skipWithoutShared } from "./helpers/shared.js";

// What loading checks against the webgpu backend before it reads a weight. The adapter: the
// software one createWebGPUBackend finds without a GPU driver (docs/webgpu.md); none: skipped.
let skip: string | false = skipWithoutShared("models/stories260K.gguf");
if (!skip) {
  try {
    (await createWebGPUBackend()).dispose();
  } catch (e) {
    const message = (e as Error).message;
    if (!message.includes("no WebGPU adapter found")) throw e;
    skip = `no WebGPU adapter: ${message}`;
  }
}

// tinyLlama's 2 layers hold 7 matrices each (q, k, v, o, gate, up, down) and the model its own
// output matrix: 15 multiplied; the token embedding is only looked up. Every type a GGUF file
// stores has a webgpu matmul kernel (the GGUF-only MXFP4, TQ and grid i-quants since the
// thirty-fourth session): what is left is quantize on load to the in-memory NF4 or INT8.
const REFUSAL = /: tensors: 15 matrices are NF4 \(blk\.0\.attn_q\.weight, \.\.\.\) after quantize "nf4", which the webgpu backend has no matmul kernel for: load it with the wasm backend \(--backend wasm\), or quantize it on load to a type it multiplies: --quantize q4_k \(or q8_0, q6_k, [a-z0-9_, ]+\)$/;

describe("a model whose matrices the webgpu matmul cannot multiply", { skip }, () => {
  test("loadModel refuses it in one line naming the type, the count and what to do, with or without warmup", async () => {
    const f32 = await ensureRandomModel(tinyLlama);
    // warmup: false loaded it whole and failed only at the first request
    await assert.rejects(loadModel(f32, { backend: "webgpu", quantize: "nf4", warmup: false }), (e: Error) => {
      assert.match(e.message, REFUSAL);
      assert.ok(e.message.startsWith(f32), e.message);
      assert.ok(!e.message.includes("\n"), e.message);
      return true;
    });
    await assert.rejects(loadModel(f32, { backend: "webgpu", quantize: "nf4" }), (e: Error) => REFUSAL.test(e.message));
    // the advice holds: the wasm backend runs it
    const wasm = await loadModel(f32, { backend: "wasm", quantize: "nf4", warmup: false, contextSize: 64 });
    wasm.dispose();
  });

  test("tsllm generate --backend webgpu --quantize nf4 exits 1 with that line; --quantize q4_k, as it says, runs", async () => {
    const f32 = await ensureRandomModel(tinyLlama);
    const r = await runTsllm(["generate", "--model", f32, "--backend", "webgpu", "--quantize", "nf4", "--prompt", "Once", "--max-tokens", "2"]);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stdout, "");
    // (Dawn itself may print "Warning: ..." lines about the software adapter's limits first)
    const lines = r.stderr.trim().split("\n").filter((l) => !l.startsWith("Warning: "));
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0]!, /^tsllm: error: /);
    assert.match(lines[0]!, REFUSAL);
    const ok = await runTsllm(["generate", "--model", f32, "--backend", "webgpu", "--quantize", "q4_k", "--prompt", "Once", "--max-tokens", "2", "--json"]);
    assert.equal(ok.code, 0, ok.stderr);
  });

  test("a stored file's matrices are never refused: an IQ2_XXS model loads (quantize on load leaves its matrices as stored)", async () => {
    const iq = await ensureRandomModel({ ...tinyLlama, weightType: GGMLType.IQ2_XXS });
    for (const quantize of [undefined, "q4_k", "nf4"] as const) {
      const model = await loadModel(iq, { backend: "webgpu", quantize, warmup: false, contextSize: 64 });
      model.dispose();
    }
  });
});
