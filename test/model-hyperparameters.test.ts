import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { loadModel } from "../src/index.js";
import { ggufEntry, writeGGUF, type GGUFWriteEntry } from "../src/formats/index.js";
import { elementCount, GGMLType, rowByteLength } from "../src/tensor/index.js";
import { planRandomModel, randomModelMetadata, readTokenizerEntries, tinyGpt2, tinyLlama, type RandomModelSpec } from "../src/testing/index.js";
import { skipWithoutShared } from "./helpers/shared.js";

/*
 * Hyper-parameters that contradict each other or their range fail at load with the file and the
 * key named, before any weight is read: zero or negative head counts (which used to spin in
 * attention), head counts that do not divide, unbounded or odd RoPE dimensions (an invalid typed
 * array length, a 9 s prefill), a non-positive epsilon or RoPE base (NaN logits at sampling).
 */
const dir = mkdtempSync(join(tmpdir(), "tsllm-hparams-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const skip = skipWithoutShared("tokenizer-tests/ggml-vocab-llama-spm.gguf") || skipWithoutShared("tokenizer-tests/ggml-vocab-gpt-2.gguf");

/** a model file of `spec`'s tensors (zeros) whose metadata has `overrides` replacing or adding keys */
/** fill: a value for every element of a tensor, or for its rows from `fromRow` on (the others stay 0) */
async function modelWith(spec: RandomModelSpec, name: string, overrides: Record<string, GGUFWriteEntry>, retype: Record<string, GGMLType> = {}, fill: Record<string, number | { value: number; fromRow: number }> = {}): Promise<string> {
  const { entries, vocabSize } = readTokenizerEntries(spec.tokenizerFrom);
  const metadata = new Map([...randomModelMetadata(spec, vocabSize), ...entries]);
  for (const [k, v] of Object.entries(overrides)) metadata.set(k, v);
  const tensors = planRandomModel(spec, vocabSize).map((t) => {
    const type = retype[t.name] ?? t.type;
    const data = new Uint8Array(rowByteLength(type, t.dims[0]!) * (elementCount(t.dims) / t.dims[0]!));
    const f = fill[t.name];
    if (typeof f === "number") new Float32Array(data.buffer).fill(f);
    else if (f) new Float32Array(data.buffer).fill(f.value, f.fromRow * t.dims[0]!);
    return { name: t.name, type, dims: t.dims, data };
  });
  const path = join(dir, `${name}.gguf`);
  await writeGGUF(path, { metadata: [...metadata], tensors });
  return path;
}

const i32 = (v: number) => ggufEntry.i32(v);
const f32 = (v: number) => ggufEntry.f32(v);

test("contradictory or out-of-range hyper-parameters fail at load naming the file and the key", { skip }, async () => {
  const cases: [RandomModelSpec, string, Record<string, GGUFWriteEntry>, RegExp][] = [
    [tinyLlama, "negative-heads", { "llama.attention.head_count": i32(-8) }, /llama\.attention\.head_count.*expected an integer in \[1, 4096\], found -8/],
    [tinyLlama, "zero-kv-heads", { "llama.attention.head_count_kv": i32(0) }, /llama\.attention\.head_count_kv.*found 0/],
    [tinyLlama, "kv-not-dividing", { "llama.attention.head_count_kv": i32(3) }, /llama\.attention\.head_count_kv.*4 heads cannot be grouped over 3 KV heads/],
    [tinyLlama, "huge-rope-dims", { "llama.rope.dimension_count": i32(2 ** 30) }, /llama\.rope\.dimension_count.*even number of rotated dimensions in \[2, head size 64\], found 1073741824/],
    [tinyLlama, "odd-rope-dims", { "llama.rope.dimension_count": i32(33) }, /llama\.rope\.dimension_count.*found 33/],
    [tinyLlama, "zero-rope-base", { "llama.rope.freq_base": f32(0) }, /llama\.rope\.freq_base.*positive RoPE frequency base, found 0/],
    // these three were taken as factor 1 without a word: a silently unscaled model
    [tinyLlama, "negative-rope-factor", { "llama.rope.scaling.type": ggufEntry.string("linear"), "llama.rope.scaling.factor": f32(-2) }, /llama\.rope\.scaling\.factor.*linear RoPE scaling factor in \(0, 1e6\] \(0: not scaled\), found -2/],
    [tinyLlama, "nan-rope-factor", { "llama.rope.scaling.type": ggufEntry.string("linear"), "llama.rope.scaling.factor": f32(NaN) }, /llama\.rope\.scaling\.factor.*found NaN/],
    [tinyLlama, "infinite-rope-factor", { "llama.rope.scaling.type": ggufEntry.string("linear"), "llama.rope.scaling.factor": f32(Infinity) }, /llama\.rope\.scaling\.factor.*found Infinity/],
    [tinyLlama, "negative-eps", { "llama.attention.layer_norm_rms_epsilon": f32(-1e-5) }, /llama\.attention\.layer_norm_rms_epsilon.*norm epsilon in \(0, 1\)/],
    [tinyLlama, "zero-layers", { "llama.block_count": i32(0) }, /llama\.block_count.*found 0/],
    [tinyLlama, "fractional-head-size", { "llama.attention.head_count": i32(3), "llama.attention.head_count_kv": i32(3) }, /llama\.attention\.key_length.*head size 85\.33/],
    [tinyGpt2, "gpt2-zero-heads", { "gpt2.attention.head_count": i32(0) }, /gpt2\.attention\.head_count.*found 0/],
    [tinyGpt2, "gpt2-negative-eps", { "gpt2.attention.layer_norm_epsilon": f32(0) }, /gpt2\.attention\.layer_norm_epsilon/],
  ];
  for (const [spec, name, overrides, message] of cases) {
    const path = await modelWith(spec, name, overrides);
    await assert.rejects(loadModel(path, { backend: "reference" }), (e: Error) => {
      assert.match(e.message, message, name);
      assert.ok(e.message.includes(path), `${name}: the message names the file`);
      return true;
    });
  }
  // the untouched files load
  for (const spec of [tinyLlama, tinyGpt2]) (await loadModel(await modelWith(spec, `ok-${spec.arch}`, {}), { backend: "reference" })).dispose();
});

test("names from a file that are Object.prototype members are unknown names, not crashes", { skip }, async () => {
  const str = (v: string) => ggufEntry.string(v);
  for (const arch of ["__proto__", "constructor", "toString", "hasOwnProperty"]) {
    const path = await modelWith(tinyLlama, `arch-${arch}`, { "general.architecture": str(arch) });
    await assert.rejects(loadModel(path, { backend: "reference" }), new RegExp(`general\\.architecture.*unsupported architecture "${arch}"`), arch);
  }
  for (const pre of ["constructor", "__proto__", "valueOf"]) {
    const path = await modelWith(tinyGpt2, `pre-${pre}`, { "tokenizer.ggml.pre": str(pre) });
    await assert.rejects(loadModel(path, { backend: "reference" }), new RegExp(`tokenizer\\.ggml\\.pre.*unknown pre-tokenizer "${pre}"`), pre);
  }
  const { writeRandomHFModel } = await import("../src/testing/random-hf-model.js");
  const { readFileSync, writeFileSync } = await import("node:fs");
  const folder = join(dir, "hf-constructor");
  await writeRandomHFModel(folder, tinyLlama, { dtype: "F32" });
  const config = JSON.parse(readFileSync(join(folder, "config.json"), "utf8"));
  writeFileSync(join(folder, "config.json"), JSON.stringify({ ...config, architectures: ["constructor"] }));
  await assert.rejects(loadModel(folder, { backend: "reference" }), /architectures.*unsupported architecture "constructor"/);
});

test("control characters from a file are escaped in error messages (no terminal injection)", { skip }, async () => {
  const evil = "\x1b[2J\x1b[31mowned\x07\x9b";
  const path = await modelWith(tinyLlama, "control-chars", { "general.architecture": ggufEntry.string(evil) });
  await assert.rejects(loadModel(path, { backend: "reference" }), (e: Error) => {
    assert.doesNotMatch(e.message, /[\x00-\x08\x0b-\x1f\x7f-\x9f]/, "no control character left");
    assert.ok(e.message.includes("\\x1b[2J\\x1b[31mowned\\x07\\x9b"), e.message);
    return true;
  });
  const { spawnSync } = await import("node:child_process");
  const { resolve } = await import("node:path");
  const { PROJECT_ROOT } = await import("./helpers/shared.js");
  const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "inspect", "--model", path], { cwd: PROJECT_ROOT, encoding: "utf8" });
  assert.doesNotMatch(r.stdout + r.stderr, /\x1b/, "the CLI prints no escape sequence");
});

test("a weight in an activation-only format (Q8_1) is refused at load naming the tensor, not at the first matmul", { skip }, async () => {
  const path = await modelWith(tinyLlama, "q8_1-weight", {}, { "blk.0.ffn_down.weight": GGMLType.Q8_1 });
  for (const backend of ["reference", "wasm"] as const) {
    await assert.rejects(loadModel(path, { backend }), /tensor "blk\.0\.ffn_down\.weight": type Q8_1 is an activation format/, backend);
  }
});

test("NaN weights past the rows checked at load fail the request with one line naming the file, not a sampler's RangeError", { skip }, async () => {
  // the output matrix's rows from 2 on are NaN: load passes (first rows finite), the logits are NaN
  const path = await modelWith(tinyLlama, "nan-rows", {}, {}, { "output.weight": { value: NaN, fromRow: 2 } });
  const model = await loadModel(path, { backend: "reference", contextSize: 16 });
  try {
    await assert.rejects(model.generate([1, 2, 3], { maxTokens: 2 }), (e: Error) => {
      assert.equal(e.constructor, Error);
      assert.match(e.message, new RegExp(`^${path.replaceAll(".", "\\.")}: the model computed NaN for the logit of token \\d+: its weights \\(or what they compute\\) are not finite`));
      assert.ok(!e.message.includes("\n"));
      return true;
    });
  } finally {
    model.dispose();
  }
});

test("a NaN or Inf in a norm weight or bias is refused at load naming the tensor (not NaN logits at sampling)", { skip }, async () => {
  for (const [name, value] of [["output_norm.weight", NaN], ["blk.1.attn_norm.weight", Infinity]] as const) {
    const path = await modelWith(tinyLlama, `nonfinite-${name}`, {}, {}, { [name]: value });
    await assert.rejects(loadModel(path, { backend: "reference" }), new RegExp(`tensor "${name.replaceAll(".", "\\.")}": element 0 is ${value}; the weights are damaged`), name);
  }
});
