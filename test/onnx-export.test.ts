import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { loadOrt, OrtDecoder, type OrtEngine } from "../src/bench/ort-engine.js";
import { argmax } from "../src/sampling/index.js";
import { loadModel } from "../src/index.js";
import { GGMLType, typeName } from "../src/tensor/index.js";
import { exportLlamaOnnx, tinyLlama, writeRandomModel, type OnnxExportOptions } from "../src/testing/index.js";

/*
 * The ONNX export (src/testing/onnx-export.ts) is the same model as the GGUF tsllm loads:
 * onnxruntime-web's logits for a prompt and for one cached decode step against tsllm's
 * reference backend. Skipped only when onnxruntime-web (a devDependency) cannot load.
 */
const ort: OrtEngine | Error = await loadOrt(2).catch((e: unknown) => (e instanceof Error ? e : new Error(String(e))));
const skip = ort instanceof Error ? `onnxruntime-web cannot load: ${ort.message}` : false;

const dir = mkdtempSync(join(tmpdir(), "tsllm-onnx-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** a larger std than the default 0.02, so the logits are not all near zero */
const spec = { ...tinyLlama, std: 0.1, seed: 7 };
const PROMPT = [1, 403, 407, 261, 378, 432, 383, 286];
const NEXT = 298;
/** |a - b| over the largest |b|: float32 rounding in two op orders stays far below this */
const RELATIVE_TOLERANCE = 1e-4;
/** int8 weights (1/254 of a column's range) and uint8 activations (1/255 of a tensor's) through two layers */
const INT8_TOLERANCE = 0.1;

async function model(type: GGMLType): Promise<string> {
  const path = join(dir, `tiny-${typeName(type)}.gguf`);
  await writeRandomModel(path, { ...spec, weightType: type });
  return path;
}

/** onnxruntime-web's logits for the prompt (every position, or the last with lastTokenLogits) and then NEXT through the cache */
async function ortLogits(path: string, options: OnnxExportOptions = {}): Promise<{ prefill: Float32Array; step: Float32Array }> {
  const dec = await OrtDecoder.create(ort as OrtEngine, exportLlamaOnnx(path, options), { layers: spec.blockCount, kvHeads: spec.headCountKv, headDim: spec.embeddingLength / spec.headCount });
  try {
    const prefill = await dec.forward(PROMPT);
    return { prefill, step: await dec.forward([NEXT]) };
  } finally {
    await dec.release();
  }
}

function assertClose(actual: Float32Array, expected: Float32Array, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  let diff = 0, scale = 0;
  for (let i = 0; i < actual.length; i++) {
    diff = Math.max(diff, Math.abs(actual[i]! - expected[i]!));
    scale = Math.max(scale, Math.abs(expected[i]!));
  }
  assert.ok(scale > 0.5, `${what}: logits near zero (largest ${scale}) would prove little`);
  assert.ok(diff <= RELATIVE_TOLERANCE * scale, `${what}: max |diff| ${diff} > ${RELATIVE_TOLERANCE} x max |logit| ${scale}`);
}

test("F32: onnxruntime-web's logits on the export equal tsllm's, for the prompt and a cached decode step", { skip }, async () => {
  const path = await model(GGMLType.F32);
  const m = await loadModel(path, { backend: "reference" });
  try {
    const lm = m.languageModel;
    const cache = lm.createCache(64);
    const prefill = lm.forward(PROMPT, cache, { allLogits: true });
    const step = lm.forward([NEXT], cache);
    const all = await ortLogits(path);
    assertClose(all.prefill, prefill, "prefill, every position");
    assertClose(all.step, step, "decode step");
    const V = lm.info.vocabSize;
    const last = await ortLogits(path, { lastTokenLogits: true });
    assertClose(last.prefill, prefill.subarray((PROMPT.length - 1) * V), "prefill, last position only");
    assertClose(last.step, step, "decode step after a last-position prefill");
  } finally {
    m.dispose();
  }
});

/*
 * tsllm's quantized matmuls quantize the activations to Q8_0 (as llama.cpp does), so its
 * logits differ from float math on the same weights by more than rounding; what the
 * MatMulNBits variant must get right is the repacking of the GGUF blocks: it has to equal the
 * float export of the same, dequantized, weights.
 */
for (const type of [GGMLType.Q4_0, GGMLType.Q8_0]) {
  test(`${typeName(type)}: the MatMulNBits (${type === GGMLType.Q4_0 ? 4 : 8}-bit) export equals the dequantized float export`, { skip }, async () => {
    const path = await model(type);
    const nbits = await ortLogits(path, { weights: "nbits" });
    const float = await ortLogits(path, { weights: "f32" });
    assertClose(nbits.prefill, float.prefill, "prefill");
    assertClose(nbits.step, float.step, "decode step");
  });
}

/*
 * transformers.js's "q8" (int8 weights per column, activations quantized per tensor) is a
 * different quantization of the same float model: close to the float export, not equal. The
 * bound is a quantization-error bound, loose on purpose; the greedy token must still agree.
 */
test("Q8_0: the int8 (DynamicQuantizeLinear + MatMulInteger) export approximates the float export", { skip }, async () => {
  const path = await model(GGMLType.Q8_0);
  const int8 = await ortLogits(path, { weights: "int8", lastTokenLogits: true });
  const float = await ortLogits(path, { weights: "f32", lastTokenLogits: true });
  for (const phase of ["prefill", "step"] as const) {
    const a = int8[phase], b = float[phase];
    let diff = 0, scale = 0;
    for (let i = 0; i < a.length; i++) {
      diff = Math.max(diff, Math.abs(a[i]! - b[i]!));
      scale = Math.max(scale, Math.abs(b[i]!));
    }
    assert.ok(diff <= INT8_TOLERANCE * scale, `${phase}: max |diff| ${diff} > ${INT8_TOLERANCE} x max |logit| ${scale}`);
    assert.equal(argmax(a), argmax(b), `${phase}: greedy token`);
  }
});
