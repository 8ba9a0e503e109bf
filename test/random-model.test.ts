import { test } from "node:test";
import assert from "node:assert/strict";
import { GGMLType, typeName } from "../src/tensor/dtypes.js";
import { planRandomModel } from "../src/testing/random-model.js";
import { SMOLLM_135M, TINYLLAMA_1_1B, tinyLlama } from "../src/testing/presets.js";
import { randomModelKey } from "../src/testing/model-cache.js";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { skipWithoutShared } from "./helpers/shared.js";

const typesByName = (plan: ReturnType<typeof planRandomModel>) => new Map(plan.map((t) => [t.name, typeName(t.type)]));

// llama.cpp's quantize (llama-quant.cpp) stores a k-quant tensor whose rows are not a multiple
// of 256 in a fallback type: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL (Q2_K/Q3_K:
// Q4_0 now, IQ4_NL in older releases; not written here)
test("k-quant random models store 576-wide rows in llama.cpp's fallback types", () => {
  const smol = typesByName(planRandomModel({ ...SMOLLM_135M, weightType: GGMLType.Q4_K }, 49152));
  assert.equal(smol.get("token_embd.weight"), "Q5_0");
  assert.equal(smol.get("blk.0.attn_q.weight"), "Q5_0");
  assert.equal(smol.get("blk.0.ffn_up.weight"), "Q5_0");
  assert.equal(smol.get("blk.0.ffn_down.weight"), "Q4_K"); // rows of 1536 = 6 x 256
  assert.equal(smol.get("blk.0.attn_norm.weight"), "F32");
  assert.equal(typesByName(planRandomModel({ ...SMOLLM_135M, weightType: GGMLType.Q6_K }, 49152)).get("blk.3.attn_v.weight"), "Q8_0");
  assert.equal(typesByName(planRandomModel({ ...SMOLLM_135M, weightType: GGMLType.Q5_K }, 49152)).get("blk.3.attn_v.weight"), "Q5_1");
  const iq = typesByName(planRandomModel({ ...SMOLLM_135M, weightType: GGMLType.IQ4_XS }, 49152));
  assert.equal(iq.get("blk.3.attn_v.weight"), "IQ4_NL");
  assert.equal(iq.get("blk.0.ffn_down.weight"), "IQ4_XS");
  // llama-quant.cpp's tensor_type_fallback: the grid i-quants -> IQ4_NL, TQ1_0 / TQ2_0 -> Q4_0
  for (const [type, fallback] of [[GGMLType.IQ2_XS, "IQ4_NL"], [GGMLType.IQ3_S, "IQ4_NL"], [GGMLType.IQ1_M, "IQ4_NL"], [GGMLType.TQ1_0, "Q4_0"]] as const) {
    const plan = typesByName(planRandomModel({ ...SMOLLM_135M, weightType: type }, 49152));
    assert.equal(plan.get("blk.3.attn_v.weight"), fallback, typeName(type));
    assert.equal(plan.get("blk.0.ffn_down.weight"), typeName(type));
  }
  const tiny = typesByName(planRandomModel({ ...TINYLLAMA_1_1B, weightType: GGMLType.Q4_K }, 32000));
  assert.deepEqual(new Set([...tiny].filter(([n]) => !n.includes("norm")).map(([, t]) => t)), new Set(["Q4_K"]));
  assert.throws(() => planRandomModel({ ...SMOLLM_135M, weightType: GGMLType.Q3_K }, 49152), /tensor "token_embd.weight" has rows of 576, not a multiple of 256.*IQ4_NL/);
});

// The presets borrow their vocabulary from ../shared by an absolute path; the model cache is
// keyed by the vocabulary's content, so a second clone of the project (each CI run) finds the
// models the first one generated instead of writing its own copies into ~/.cache/tsllm.
test("a random model's cache key follows the vocabulary's content, not its path", { skip: skipWithoutShared("models/stories260K.gguf") }, () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-model-key-"));
  try {
    const copy = join(dir, "elsewhere.gguf");
    copyFileSync(tinyLlama.tokenizerFrom, copy);
    assert.equal(randomModelKey({ ...tinyLlama, tokenizerFrom: copy }), randomModelKey(tinyLlama));
    const changed = join(dir, "changed.gguf");
    writeFileSync(changed, Buffer.concat([readFileSync(copy), Buffer.from([0])]));
    assert.notEqual(randomModelKey({ ...tinyLlama, tokenizerFrom: changed }), randomModelKey(tinyLlama));
    assert.notEqual(randomModelKey({ ...tinyLlama, seed: tinyLlama.seed + 1 }), randomModelKey(tinyLlama));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
