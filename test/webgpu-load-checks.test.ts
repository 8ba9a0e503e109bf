import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
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
// output matrix: 15 multiplied; the token embedding is only looked up
const REFUSAL = /: tensors: 15 matrices are IQ2_XXS \(blk\.0\.attn_q\.weight, \.\.\.\), which the webgpu backend has no matmul kernel for: load it with the wasm backend \(--backend wasm\), or convert it to a type it multiplies: tsllm quantize IN OUT\.gguf --type q4_k \(or q8_0, q6_k, [a-z0-9_, ]+\)$/;

describe("a model whose matrices the webgpu matmul cannot multiply", { skip }, () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-webgpu-load-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("loadModel refuses it in one line naming the type, the count and what to do, with or without warmup", async () => {
    const iq = await ensureRandomModel({ ...tinyLlama, weightType: GGMLType.IQ2_XXS });
    // warmup: false loaded it whole and failed only at the first request
    await assert.rejects(loadModel(iq, { backend: "webgpu", warmup: false }), (e: Error) => {
      assert.match(e.message, REFUSAL);
      assert.ok(e.message.startsWith(iq), e.message);
      assert.ok(!e.message.includes("\n"), e.message);
      return true;
    });
    await assert.rejects(loadModel(iq, { backend: "webgpu" }), (e: Error) => REFUSAL.test(e.message));
    // the advice holds: the wasm backend runs it
    const wasm = await loadModel(iq, { backend: "wasm", warmup: false, contextSize: 64 });
    wasm.dispose();
  });

  test("tsllm generate --backend webgpu exits 1 with that line; tsllm quantize --type q4_k makes a model it loads", async () => {
    const iq = await ensureRandomModel({ ...tinyLlama, weightType: GGMLType.IQ2_XXS });
    const r = await runTsllm(["generate", "--model", iq, "--backend", "webgpu", "--prompt", "Once", "--max-tokens", "2"]);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stdout, "");
    // (Dawn itself may print "Warning: ..." lines about the software adapter's limits first)
    const lines = r.stderr.trim().split("\n").filter((l) => !l.startsWith("Warning: "));
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0]!, /^tsllm: error: /);
    assert.match(lines[0]!, REFUSAL);
    const q4 = join(dir, "q4_k.gguf");
    const q = await runTsllm(["quantize", iq, q4, "--type", "q4_k"]);
    assert.equal(q.code, 0, q.stderr);
    const ok = await runTsllm(["generate", "--model", q4, "--backend", "webgpu", "--prompt", "Once", "--max-tokens", "2", "--json"]);
    assert.equal(ok.code, 0, ok.stderr);
  });

  test("quantize on load to a type the backend multiplies does not rescue stored IQ2_XXS matrices; floats quantized to one it lacks are named with the quantization", async () => {
    const iq = await ensureRandomModel({ ...tinyLlama, weightType: GGMLType.IQ2_XXS });
    await assert.rejects(loadModel(iq, { backend: "webgpu", quantize: "q4_k", warmup: false }), (e: Error) => / 15 matrices are IQ2_XXS .* after quantize "q4_k", which the webgpu/.test(e.message));
    const f32 = await ensureRandomModel(tinyLlama);
    await assert.rejects(loadModel(f32, { backend: "webgpu", quantize: "nf4", warmup: false }), (e: Error) => /: tensors: 15 matrices are NF4 \(blk\.0\.attn_q\.weight, \.\.\.\) after quantize "nf4", which the webgpu backend has no matmul kernel for/.test(e.message));
  });
});
