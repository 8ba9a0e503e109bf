import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { convertHFToGGUF } from "../src/convert/index.js";
import { ggufEntry, writeGGUF, type GGUFTensorSpec, type GGUFWriteEntry } from "../src/formats/index.js";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { openModel } from "../src/models/open.js";
import { GGMLType } from "../src/tensor/dtypes.js";
import { planRandomModel, randomModelMetadata, readTokenizerEntries, Rng, tinyLlama, tinyQwen2, tinyQwen3, type RandomModelSpec } from "../src/testing/index.js";
import { tensorBytes } from "../src/testing/random-model.js";
import { writeRandomHFModel } from "../src/testing/random-hf-model.js";
import { disposeSharedLlama, llamaCppRun } from "./helpers/llama-cpp-oracle.js";
import { maxLogprobDiff, stepAlongLlamaCpp } from "./helpers/logprobs.js";
import { skipWithoutShared } from "./helpers/shared.js";

/*
 * config.json as transformers reads it, judged by llama.cpp. The RoPE settings: a Hugging Face folder whose config says
 * how positions rotate (rope_theta, rope_scaling, or transformers 5's rope_parameters, which holds
 * both) must give, in tsllm, the next-token log-probabilities llama.cpp computes on a GGUF of the
 * same weights that states the same rotation in llama.cpp's own terms (rope.freq_base,
 * rope.scaling.*, rope_freqs.weight) — and `tsllm convert` of the folder must be that GGUF for
 * llama.cpp. The judge GGUFs are written here from the settings, not by the code under test; the
 * llama3 divisors follow transformers' _compute_llama3_parameters (float32, as torch computes them).
 */
const TOLERANCE = 1e-3;
const STEPS = 4;
const dir = mkdtempSync(join(tmpdir(), "tsllm-hf-config-llamacpp-"));
after(async () => {
  await disposeSharedLlama();
  rmSync(dir, { recursive: true, force: true });
});

/** transformers' llama3 inverse frequencies, in float32 as torch computes them, as llama.cpp's rope_freqs divisors */
function llama3Divisors(theta: number, dim: number, s: { factor: number; low_freq_factor: number; high_freq_factor: number; original_max_position_embeddings: number }): Float32Array {
  const f = Math.fround;
  const out = new Float32Array(dim / 2);
  const lowWavelen = s.original_max_position_embeddings / s.low_freq_factor, highWavelen = s.original_max_position_embeddings / s.high_freq_factor;
  for (let i = 0; i < dim / 2; i++) {
    const inv = f(1 / f(Math.pow(theta, f((2 * i) / dim))));
    const wavelen = f((2 * Math.PI) / inv);
    let scaled = wavelen > lowWavelen ? inv / s.factor : inv;
    if (wavelen >= highWavelen && wavelen <= lowWavelen) {
      const smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      scaled = (1 - smooth) * (inv / s.factor) + smooth * inv;
    }
    out[i] = inv / scaled;
  }
  return out;
}

/** the random model of `spec` as a GGUF that states its rotation in llama.cpp's keys (`meta`) and tensors */
async function writeJudge(path: string, spec: RandomModelSpec, meta: [string, GGUFWriteEntry][], extra: GGUFTensorSpec[] = []): Promise<void> {
  const { entries, vocabSize } = readTokenizerEntries(spec.tokenizerFrom);
  const tensors: GGUFTensorSpec[] = planRandomModel(spec, vocabSize).map((t) => ({ name: t.name, type: t.type, dims: t.dims, data: () => tensorBytes(t, spec) }));
  const own = randomModelMetadata(spec, vocabSize).filter(([k]) => !meta.some(([m]) => m === k));
  await writeGGUF(path, { metadata: [...own, ...meta, ...entries], tensors: [...tensors, ...extra] });
}

interface Case {
  name: string;
  spec: RandomModelSpec;
  /** config.json fields replaced (undefined removes one) */
  config: Record<string, unknown>;
  /** the rotation in llama.cpp's keys */
  meta: [string, GGUFWriteEntry][];
  freqs?: Float32Array;
  promptTokens: number;
}

async function check(c: Case): Promise<void> {
  const judge = join(dir, `${c.name}.judge.gguf`);
  await writeJudge(judge, c.spec, c.meta, c.freqs ? [{ name: "rope_freqs.weight", type: GGMLType.F32, dims: [c.freqs.length], data: () => new Uint8Array(c.freqs!.buffer) }] : []);
  const folder = join(dir, c.name);
  await writeRandomHFModel(folder, c.spec, { config: c.config });
  const converted = join(dir, `${c.name}.gguf`);
  await convertHFToGGUF(folder, converted, { type: "f32", vocab: c.spec.tokenizerFrom });

  const vocab = openModel(c.spec.tokenizerFrom).tokenizer;
  const be = createReferenceBackend();
  try {
    const lm = openModel(folder, { tokenizer: vocab }).build(be);
    const rng = new Rng(9);
    const prompt = [vocab.bosId ?? 0, ...Array.from({ length: c.promptTokens - 1 }, () => rng.u32() % lm.info.vocabSize)];
    const ref = await llamaCppRun(judge, prompt, { decodeSteps: STEPS, threads: 1 });
    const { diffs, ours } = stepAlongLlamaCpp(lm, lm.createCache(prompt.length + STEPS + 1), prompt, ref, STEPS);
    const label = `${c.name}: tsllm on the folder vs llama.cpp, per-step max |Δ logprob| ${diffs.map((d) => d.toExponential(1)).join(", ")}`;
    console.log(label);
    assert.ok(Math.max(...diffs) < TOLERANCE, label);
    assert.deepEqual(ours, ref.greedyTokens, `${c.name}: greedy tokens`);

    const conv = await llamaCppRun(converted, prompt, { decodeSteps: STEPS, threads: 1 });
    const convDiff = Math.max(maxLogprobDiff(conv.promptLogprobs, ref.promptLogprobs), ...conv.stepLogprobs.map((s, i) => maxLogprobDiff(s, ref.stepLogprobs[i]!)));
    assert.ok(convDiff < TOLERANCE, `${c.name}: llama.cpp on \`tsllm convert\`'s GGUF vs on the judge: max |Δ logprob| ${convDiff.toExponential(1)}`);
    assert.deepEqual(conv.greedyTokens, ref.greedyTokens, `${c.name}: llama.cpp's greedy tokens on the converted GGUF`);
  } finally {
    be.dispose();
  }
}

const STD = 0.05;
const skipStories = skipWithoutShared("models/stories260K.gguf");
const skipStarcoder = skipWithoutShared("tokenizer-tests/ggml-vocab-starcoder.gguf");
const LLAMA3 = { rope_type: "llama3", factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 64 } as const;

test("rope_theta and rope_scaling linear (transformers 4 keys): tsllm on the folder and llama.cpp on its conversion = llama.cpp", { skip: skipStories }, async () => {
  await check({
    name: "llama-linear", spec: { ...tinyLlama, std: STD, seed: 41, ropeTheta: 500000 }, promptTokens: 24,
    config: { rope_theta: 500000, rope_scaling: { type: "linear", factor: 4 } },
    meta: [["llama.rope.freq_base", ggufEntry.f32(500000)], ["llama.rope.scaling.type", ggufEntry.string("linear")], ["llama.rope.scaling.factor", ggufEntry.f32(4)]],
  });
});

test("rope_scaling llama3 (transformers 4 keys): = llama.cpp with transformers' divisors as rope_freqs", { skip: skipStories }, async () => {
  await check({
    name: "llama-llama3", spec: { ...tinyLlama, std: STD, seed: 42, ropeTheta: 500000, contextLength: 512 }, promptTokens: 40,
    config: { rope_theta: 500000, rope_scaling: LLAMA3 },
    meta: [["llama.rope.freq_base", ggufEntry.f32(500000)]],
    freqs: llama3Divisors(500000, 64, LLAMA3),
  });
});

/*
 * transformers 5 saves RoPE settings as one `rope_parameters` object (rope_type, rope_theta and
 * the scaling fields) with no top-level rope_theta / rope_scaling: read as if absent, the folder
 * ran at theta 10000 unscaled (~1 nat from llama.cpp per step) and converted to such a GGUF.
 */
test("rope_parameters (transformers 5): Qwen2 rope_theta 1e6 inside it = llama.cpp", { skip: skipStarcoder }, async () => {
  await check({
    name: "qwen2-rope-parameters", spec: { ...tinyQwen2, std: STD, seed: 43 }, promptTokens: 16,
    config: { rope_theta: undefined, rope_parameters: { rope_type: "default", rope_theta: 1000000 } },
    meta: [["qwen2.rope.freq_base", ggufEntry.f32(1000000)]],
  });
});

test("rope_parameters (transformers 5): Llama llama3 scaling with rope_theta inside it = llama.cpp", { skip: skipStories }, async () => {
  await check({
    name: "llama-rope-parameters-llama3", spec: { ...tinyLlama, std: STD, seed: 44, ropeTheta: 500000, contextLength: 512 }, promptTokens: 40,
    config: { rope_theta: undefined, rope_parameters: { ...LLAMA3, rope_theta: 500000 } },
    meta: [["llama.rope.freq_base", ggufEntry.f32(500000)]],
    freqs: llama3Divisors(500000, 64, LLAMA3),
  });
});

test("rope_parameters (transformers 5): linear scaling, rope_theta left to the top-level key = llama.cpp", { skip: skipStories }, async () => {
  await check({
    name: "llama-rope-parameters-linear", spec: { ...tinyLlama, std: STD, seed: 45, ropeTheta: 20000 }, promptTokens: 24,
    config: { rope_theta: 20000, rope_parameters: { rope_type: "linear", factor: 2 } },
    meta: [["llama.rope.freq_base", ggufEntry.f32(20000)], ["llama.rope.scaling.type", ggufEntry.string("linear")], ["llama.rope.scaling.factor", ggufEntry.f32(2)]],
  });
});

/*
 * transformers' Qwen3Config defaults head_dim to 128, not hidden_size / num_attention_heads
 * (configuration_qwen3.py: `head_dim: int = 128`; Qwen3Attention reads config.head_dim): a
 * config.json without the key is a model of 128-wide heads, which tsllm refused as a shape
 * mismatch of q_proj.
 */
test("Qwen3 config.json without head_dim: transformers' default 128, = llama.cpp", { skip: skipStories }, async () => {
  await check({
    name: "qwen3-no-head-dim", spec: { ...tinyQwen3, std: STD, seed: 46 }, promptTokens: 16,
    config: { head_dim: undefined },
    meta: [],
  });
});
