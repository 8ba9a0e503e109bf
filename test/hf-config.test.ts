import assert from "node:assert/strict";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { llama3RopeFactors, permuteHeadRows, transposeBytes } from "../src/convert/hf-tensors.js";
import { readGenerationConfig, readHFConfig } from "../src/formats/hf-config.js";
import { writeSafetensors } from "../src/formats/safetensors-writer.js";
import { applyRope, type RopeParams } from "../src/kernels/ops/index.js";
import { openModel } from "../src/models/open.js";
import { FileFieldError, loadModel } from "../src/index.js";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { tokenizerFromGGUF } from "../src/tokenizer/index.js";
import { GGUFMetadata, readGGUFHeader } from "../src/formats/gguf-reader.js";
import { Rng, tinyLlama } from "../src/testing/index.js";
import { writeRandomHFModel } from "../src/testing/random-hf-model.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

const dir = mkdtempSync(join(tmpdir(), "tsllm-hf-config-"));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

function folderWith(config: Record<string, unknown>, generation?: Record<string, unknown>): string {
  const f = join(dir, `m${n++}`);
  mkdirSync(f);
  writeFileSync(join(f, "config.json"), JSON.stringify(config));
  if (generation) writeFileSync(join(f, "generation_config.json"), JSON.stringify(generation));
  return f;
}

const LLAMA = {
  architectures: ["LlamaForCausalLM"], vocab_size: 512, hidden_size: 64, intermediate_size: 128,
  num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 256,
};

/** a GPT-2 config.json's fields over LLAMA's (which GPT-2 does not read) */
const GPT2 = { architectures: ["GPT2LMHeadModel"], n_embd: 64, n_head: 4, n_layer: 2 };

test("config.json: fields read with HF defaults; absurd values rejected naming the field", () => {
  const c = readHFConfig(folderWith(LLAMA));
  assert.equal(c.arch, "llama");
  assert.equal(c.headDim, 16);
  assert.equal(c.tieWordEmbeddings, false);
  assert.equal(c.ropeTheta, 10000);
  // the activations transformers' classes build by default, and their aliases for the same function
  for (const patch of [{ hidden_act: "silu" }, { hidden_act: "swish" }, { ...GPT2 }, { ...GPT2, activation_function: "gelu_new", scale_attn_weights: true, scale_attn_by_inverse_layer_idx: false }, { ...GPT2, activation_function: "gelu_pytorch_tanh" }]) {
    assert.doesNotThrow(() => readHFConfig(folderWith({ ...LLAMA, ...patch })), JSON.stringify(patch));
  }
  assert.doesNotThrow(() => readHFConfig(folderWith({ ...LLAMA, partial_rotary_factor: 1 })), "partial_rotary_factor 1: the whole head, as without it");
  assert.equal(readHFConfig(folderWith({ ...LLAMA, architectures: ["MistralForCausalLM"] })).arch, "llama");
  assert.equal(readHFConfig(folderWith({ ...LLAMA, architectures: ["Qwen2ForCausalLM"] })).attentionBias, true);
  const bad: [Record<string, unknown>, RegExp][] = [
    [{ hidden_size: -64 }, /hidden_size: expected an integer in \[1, 131072\], found -64/],
    [{ hidden_size: 2 ** 40 }, /hidden_size: expected an integer in \[1, 131072\], found 1099511627776/],
    [{ vocab_size: 2 ** 40 }, /vocab_size: expected an integer/],
    [{ num_hidden_layers: 1.5 }, /num_hidden_layers: expected an integer/],
    [{ intermediate_size: "128" }, /intermediate_size: expected an integer/],
    [{ num_attention_heads: 5 }, /num_key_value_heads: 2 KV heads do not divide 5 attention heads/],
    [{ num_attention_heads: 6, num_key_value_heads: 6 }, /num_attention_heads: 6 heads do not divide hidden_size 64/],
    [{ head_dim: 15 }, /head_dim: RoPE needs an even head size, found 15/],
    [{ architectures: ["T5ForConditionalGeneration"] }, /architectures: unsupported architecture "T5ForConditionalGeneration"/],
    [{ architectures: ["BertModel"] }, /architectures: "BertModel" is an encoder, not a text generator: use pipeline\(\) \/ embed\(\)/],
    [{ architectures: undefined }, /architectures: expected a list/],
    [{ rope_scaling: { rope_type: "yarn", factor: 4 } }, /rope_scaling.rope_type: unsupported RoPE scaling "yarn"/],
    [{ rope_scaling: { type: "linear", factor: -1 } }, /rope_scaling\.factor: expected a number/],
    [{ rope_parameters: { rope_type: "yarn", factor: 4, rope_theta: 1e6 } }, /rope_parameters\.rope_type: unsupported RoPE scaling "yarn"/],
    [{ rope_parameters: { rope_type: "default", rope_theta: 0 } }, /rope_parameters\.rope_theta: expected a number/],
    [{ rms_norm_eps: "x" }, /rms_norm_eps: expected a number/],
    // transformers builds these MLPs / attentions otherwise: running them as silu / 1/sqrt(d) would be another model
    [{ hidden_act: "gelu" }, /hidden_act: "gelu" is not supported: tsllm runs the SwiGLU MLP \(silu\)/],
    [{ architectures: ["Qwen2ForCausalLM"], hidden_act: "relu" }, /hidden_act: "relu" is not supported/],
    [{ ...GPT2, activation_function: "relu" }, /activation_function: "relu" is not supported: tsllm runs GPT-2's tanh-approximated GELU/],
    [{ ...GPT2, activation_function: "gelu" }, /activation_function: "gelu" is not supported/],
    [{ ...GPT2, scale_attn_weights: false }, /scale_attn_weights: false is not supported/],
    [{ ...GPT2, scale_attn_by_inverse_layer_idx: true }, /scale_attn_by_inverse_layer_idx: true is not supported/],
    [{ max_position_embeddings: 0 }, /max_position_embeddings: expected an integer/],
    // transformers' Llama / Mistral / Qwen attention rotates the whole head; a factor below 1 was ignored (another model, silently)
    [{ partial_rotary_factor: 0.5 }, /partial_rotary_factor: expected 1 \(the whole head rotated; partial rotation is not supported\), found 0\.5/],
    [{ rope_parameters: { rope_type: "default", rope_theta: 1e6, partial_rotary_factor: 0.25 } }, /rope_parameters\.partial_rotary_factor: expected 1 .*found 0\.25/],
  ];
  for (const [patch, re] of bad) {
    const f = folderWith({ ...LLAMA, ...patch });
    assert.throws(() => readHFConfig(f), (e: Error) => e.message.startsWith(join(f, "config.json")) && re.test(e.message), JSON.stringify(patch));
  }
  assert.throws(() => readHFConfig(folderWith({ architectures: ["GPT2LMHeadModel"], n_embd: 64, n_head: 5, n_layer: 1, vocab_size: 10 })), /n_head: 5 heads do not divide n_embd 64/);
  const f = join(dir, "notjson");
  mkdirSync(f);
  writeFileSync(join(f, "config.json"), "{ not json");
  assert.throws(() => readHFConfig(f), /config.json: file: invalid JSON/);
  assert.throws(() => readHFConfig(dir), /config.json: file: not found/);
});

test("generation_config.json: sampling defaults and EOS ids", () => {
  const g = readGenerationConfig(folderWith(LLAMA, { do_sample: true, temperature: 0.6, top_p: 0.9, eos_token_id: [128001, 128009], bos_token_id: 128000, repetition_penalty: 1.1 }));
  assert.deepEqual(g.defaults, { temperature: 0.6, topK: 50, topP: 0.9, minP: 0, repeatPenalty: 1.1 });
  assert.deepEqual(g.eosTokenIds, [128001, 128009]);
  assert.equal(g.bosTokenId, 128000);
  assert.deepEqual(readGenerationConfig(folderWith(LLAMA, { do_sample: false, eos_token_id: 2 })).defaults, { temperature: 0 });
  assert.deepEqual(readGenerationConfig(folderWith(LLAMA)).defaults, {});
  assert.throws(() => readGenerationConfig(folderWith(LLAMA, { eos_token_id: [-1] })), /generation_config.json: eos_token_id: expected a token id/);
});

test("llama3 rope scaling: factors 1 for short wavelengths, `factor` for long ones, smooth in between (Llama 3.1 parameters)", () => {
  const c = readHFConfig(folderWith({
    ...LLAMA, hidden_size: 4096, num_attention_heads: 32, num_key_value_heads: 8, rope_theta: 500000,
    rope_scaling: { rope_type: "llama3", factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
  }));
  const f = llama3RopeFactors(c)!;
  assert.equal(f.length, 64);
  for (let i = 0; i < 64; i++) {
    // wavelength 2π·θ^(2i/128): below 8192/4 = 2048 tokens unchanged, above 8192 divided by 8
    const wavelen = 2 * Math.PI * Math.pow(500000, (2 * i) / 128);
    if (wavelen < 2048) assert.equal(f[i], 1, `i=${i}`);
    else if (wavelen > 8192) assert.equal(f[i], 8, `i=${i}`);
    else assert.ok(f[i]! > 1 && f[i]! < 8, `i=${i}: ${f[i]}`);
  }
  for (let i = 1; i < 64; i++) assert.ok(f[i]! >= f[i - 1]!, "non-decreasing");
  // head size 4, θ = (4096/2π)²: pair 1 has wavelength 2π·√θ = 4096, between 2048 and 8192;
  // smooth = (8192/4096 - 1) / (4 - 1) = 1/3, factor = 1 / ((2/3)/8 + 1/3) = 12/5
  const f2 = llama3RopeFactors({ ...c, headDim: 4, ropeTheta: (4096 / (2 * Math.PI)) ** 2 })!;
  assert.equal(f2[0], 1);
  assert.ok(Math.abs(f2[1]! - 2.4) < 1e-6, `${f2[1]}`);
});

test("Llama Q/K permutation: half-split RoPE on HF rows = adjacent-pair RoPE on the permuted rows", () => {
  const heads = 3, hd = 8;
  const rng = new Rng(5);
  const x = rng.fillNormal(new Float32Array(heads * hd), 1);
  const base: Omit<RopeParams, "style"> = { headDim: hd, ropeDim: hd, base: 10000, freqScale: 1 };
  const neox = Float32Array.from(x);
  applyRope(neox, 1, heads, [7], { ...base, style: "neox" });
  // one row per value: permuting rows of a [rows, 1] matrix permutes the vector
  const perm = new Float32Array(permuteHeadRows(new Uint8Array(x.buffer), heads * hd, 4, heads).buffer);
  applyRope(perm, 1, heads, [7], { ...base, style: "norm" });
  const neoxPerm = new Float32Array(permuteHeadRows(new Uint8Array(neox.buffer), heads * hd, 4, heads).buffer);
  assert.deepEqual(perm, neoxPerm);
  const back = permuteHeadRows(permuteHeadRows(new Uint8Array(x.buffer), heads * hd, 4, heads), heads * hd, 4, heads, true);
  assert.deepEqual(new Float32Array(back.buffer), x);
  const m = Uint8Array.from([1, 2, 3, 4, 5, 6]);
  assert.deepEqual([...transposeBytes(m, 2, 3, 1)], [1, 4, 2, 5, 3, 6]);
});

const vocab = sharedFile("models/stories260K.gguf");
const tok = () => tokenizerFromGGUF(new GGUFMetadata(vocab!, readGGUFHeader(vocab!).metadata));

test("folder checks: unknown and missing tensors are listed; buffers and a tied head's duplicate are ignored; EOS ids end generation", { skip: skipWithoutShared("models/stories260K.gguf") }, async () => {
  const spec = { ...tinyLlama, blockCount: 1, seed: 3 };
  const f = join(dir, "llama");
  await writeRandomHFModel(f, spec, { generationConfig: { eos_token_id: [2, 7], do_sample: true, temperature: 0.7 } });
  const opened = openModel(f, { tokenizer: tok() });
  assert.ok(opened.tokenizer.endOfGenerationIds.has(7), "generation_config eos ids join the end-of-generation set");
  assert.equal(opened.generationDefaults.temperature, 0.7);
  assert.equal(opened.tokenizer.encode("hello").length > 0, true, "the wrapped tokenizer still works");

  // a folder with no tokenizer fails naming the file it lacks, a FileFieldError as readHFConfig's for config.json (before: a plain Error)
  assert.throws(() => openModel(f), (e: Error) => e instanceof FileFieldError && e.path === join(f, "tokenizer.json") && e.message.startsWith(`${join(f, "tokenizer.json")}: file: not found (no tokenizer files: `));

  const st = join(f, "model.safetensors");
  const original = readFileSync(st);
  const header = JSON.parse(original.subarray(8, 8 + Number(original.readBigUInt64LE(0))).toString()) as Record<string, { dtype: string; shape: number[] }>;
  const names = Object.keys(header).filter((k) => k !== "__metadata__");
  const rewrite = async (drop: string[], add: string[]) => {
    const keep = names.filter((k) => !drop.includes(k));
    await writeSafetensors(st, [
      ...keep.map((k) => ({ name: k, dtype: "F32" as const, shape: header[k]!.shape, data: new Uint8Array(header[k]!.shape.reduce((a, b) => a * b, 4)) })),
      ...add.map((k) => ({ name: k, dtype: "F32" as const, shape: [4], data: new Uint8Array(16) })),
    ]);
  };
  await rewrite(["model.layers.0.mlp.up_proj.weight", "model.norm.weight"], ["model.layers.0.mlp.extra.weight", "vision.tower"]);
  assert.throws(() => openModel(f, { tokenizer: tok() }), /2 tensor\(s\) not used by LlamaForCausalLM: model.layers.0.mlp.extra.weight, vision.tower/);
  await rewrite(["model.layers.0.mlp.up_proj.weight", "model.norm.weight"], []);
  assert.throws(() => openModel(f, { tokenizer: tok() }), /2 tensor\(s\) that LlamaForCausalLM needs are missing: model.layers.0.mlp.up_proj.weight, model.norm.weight/);
  await rewrite([], ["model.layers.0.self_attn.rotary_emb.inv_freq"]);
  openModel(f, { tokenizer: tok() }); // an old checkpoint's RoPE buffer is not a weight
});

test("a transposed token embedding (transformer.wte.weight, model.embed_tokens.weight) is refused against config.json's vocab_size x width", { skip: skipWithoutShared("hf-oracle/gpt2-tiny/model.safetensors") || skipWithoutShared("models/stories260K.gguf") }, async () => {
  /** the folder's model.safetensors rewritten by the project's writer with `name`'s shape reversed (the bytes as they are) */
  const transpose = async (folder: string, name: string) => {
    const st = join(folder, "model.safetensors");
    const buf = readFileSync(st);
    const n = Number(buf.readBigUInt64LE(0));
    const header = JSON.parse(buf.subarray(8, 8 + n).toString()) as Record<string, { dtype: "F32"; shape: number[]; data_offsets: [number, number] }>;
    await writeSafetensors(st, Object.entries(header).filter(([k]) => k !== "__metadata__").map(([k, h]) => ({
      name: k, dtype: h.dtype, shape: k === name ? [...h.shape].reverse() : h.shape, data: buf.subarray(8 + n + h.data_offsets[0], 8 + n + h.data_offsets[1]),
    })));
    return st;
  };
  const gpt2 = join(dir, "gpt2-transposed");
  cpSync(sharedFile("hf-oracle/gpt2-tiny")!, gpt2, { recursive: true });
  const gpt2St = await transpose(gpt2, "transformer.wte.weight");
  // config.json: vocab_size 50257, n_embd 64 (ggml order: [64 per row, 50257 rows]); the tensor's [64, 50257] is [50257, 64] in ggml order
  await assert.rejects(loadModel(gpt2), (e: Error) => e.message === `${gpt2St}: tensor "token_embd.weight": expected shape [64, 50257], found [50257, 64] (F32)`);

  const llama = join(dir, "llama-transposed");
  const config = await writeRandomHFModel(llama, { ...tinyLlama, blockCount: 1, seed: 5 });
  const llamaSt = await transpose(llama, "model.embed_tokens.weight");
  const width = config.hidden_size as number, rows = config.vocab_size as number;
  assert.throws(() => openModel(llama, { tokenizer: tok() }).build(createReferenceBackend()), (e: Error) => e.message === `${llamaSt}: tensor "token_embd.weight": expected shape [${width}, ${rows}], found [${rows}, ${width}] (F32)`);
});
