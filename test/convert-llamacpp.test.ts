import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { promisify } from "node:util";
import { GGUFMetadata, readGGUFHeader } from "../src/formats/gguf-reader.js";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { openModel } from "../src/models/open.js";
import { GGMLType, typeName } from "../src/tensor/dtypes.js";
import { Rng, tinyGpt2, tinyLlama, tinyQwen2, tinyQwen3, type RandomModelSpec } from "../src/testing/index.js";
import { writeRandomHFModel } from "../src/testing/random-hf-model.js";
import { disposeSharedLlama, llamaCppRun } from "./helpers/llama-cpp-oracle.js";
import { PROJECT_ROOT, skipWithoutShared } from "./helpers/shared.js";
import { stepAlongLlamaCpp } from "./helpers/logprobs.js";

/*
 * `tsllm convert` is judged by llama.cpp: the GGUF it writes from a Hugging Face folder,
 * loaded by llama.cpp (node-llama-cpp 3.21.1), gives the same next-token log-probabilities
 * over the whole vocabulary as tsllm running the folder itself — after a 12-token prompt and
 * after each of 4 greedy steps — and the same greedy tokens.
 */
const dir = mkdtempSync(join(tmpdir(), "tsllm-convert-"));
after(async () => {
  await disposeSharedLlama();
  rmSync(dir, { recursive: true, force: true });
});

const run = promisify(execFile);
const CLI = resolve(PROJECT_ROOT, "src/cli/main.ts");
const STEPS = 4;

interface Case { name: string; spec: RandomModelSpec; type: "f32" | "q8_0" | "iq4_xs"; tolerance: number; maxFlipped: number; chatTemplate?: string }

async function check(c: Case): Promise<void> {
  const folder = join(dir, c.name);
  await writeRandomHFModel(folder, c.spec, { dtype: "F32" });
  if (c.chatTemplate) writeFileSync(join(folder, "tokenizer_config.json"), JSON.stringify({ chat_template: c.chatTemplate }));
  const out = join(dir, `${c.name}.gguf`);
  await run(process.execPath, ["--import", "tsx", CLI, "convert", "--model", folder, "--out", out, "--type", c.type, "--vocab", c.spec.tokenizerFrom], { cwd: PROJECT_ROOT });

  const header = readGGUFHeader(out);
  const meta = new GGUFMetadata(out, header.metadata);
  if (c.chatTemplate) assert.equal(meta.string("tokenizer.chat_template"), c.chatTemplate);
  const want = c.type === "f32" ? GGMLType.F32 : c.type === "q8_0" ? GGMLType.Q8_0 : GGMLType.IQ4_XS;
  assert.equal(header.tensors.find((t) => t.name === "token_embd.weight")?.type, want, `token_embd stored as ${typeName(want)}`);

  const vocabGGUF = openModel(c.spec.tokenizerFrom);
  const opened = openModel(folder, { tokenizer: vocabGGUF.tokenizer });
  const be = createReferenceBackend();
  try {
    // tsllm on the folder, quantized on load like the conversion when the GGUF is Q8_0
    const lm = opened.build(be, c.type === "f32" ? {} : { quantize: c.type });
    const vocab = lm.info.vocabSize;
    const rng = new Rng(9);
    const prompt = [opened.tokenizer.bosId ?? 0, ...Array.from({ length: 11 }, () => rng.u32() % vocab)];
    const ref = await llamaCppRun(out, prompt, { decodeSteps: STEPS });
    const { diffs, ours } = stepAlongLlamaCpp(lm, lm.createCache(prompt.length + STEPS + 1), prompt, ref, STEPS);
    const label = `${c.name}: per-step max |Δ logprob| ${diffs.map((d) => d.toExponential(1)).join(", ")}`;
    console.log(label);
    assert.ok(diffs.filter((d) => d >= c.tolerance).length <= c.maxFlipped, label);
    assert.ok(Math.max(...diffs) < 3e-2, label);
    assert.deepEqual(ours, ref.greedyTokens, `${c.name}: greedy tokens`);
  } finally {
    be.dispose();
  }
}

const STD = 0.05;
const skipStories = skipWithoutShared("models/stories260K.gguf");
const skipStarcoder = skipWithoutShared("tokenizer-tests/ggml-vocab-starcoder.gguf");
const skipGpt2 = skipWithoutShared("tokenizer-tests/ggml-vocab-gpt-2.gguf");

test("convert Llama (GQA, untied) F32: llama.cpp on the GGUF = tsllm on the folder (≤ 1e-3)", { skip: skipStories }, async () => {
  await check({ name: "llama-f32", spec: { ...tinyLlama, std: STD, seed: 31 }, type: "f32", tolerance: 1e-3, maxFlipped: 0, chatTemplate: "{% for m in messages %}{{ m.content }}{% endfor %}" });
});
test("convert Qwen2 (QKV bias, tied) F32: llama.cpp = tsllm on the folder (≤ 1e-3)", { skip: skipStarcoder }, async () => {
  await check({ name: "qwen2-f32", spec: { ...tinyQwen2, std: STD, seed: 32 }, type: "f32", tolerance: 1e-3, maxFlipped: 0 });
});
test("convert GPT-2 F32: llama.cpp = tsllm on the folder (≤ 1e-3)", { skip: skipGpt2 }, async () => {
  await check({ name: "gpt2-f32", spec: { ...tinyGpt2, std: STD, seed: 33 }, type: "f32", tolerance: 1e-3, maxFlipped: 0 });
});
test("convert Qwen3 (q/k norm, head_dim 128) F32: llama.cpp = tsllm on the folder (≤ 1e-3)", { skip: skipStories }, async () => {
  await check({ name: "qwen3-f32", spec: { ...tinyQwen3, std: STD, seed: 34 }, type: "f32", tolerance: 1e-3, maxFlipped: 0 });
});
/*
 * Q8_0: the conversion and quantize-on-load must produce the same blocks, so llama.cpp on the
 * converted file matches tsllm quantizing the folder while loading (up to the rare activation
 * rounding flips llama-cpp-parity.test.ts documents).
 */
test("convert Llama --type q8_0: llama.cpp on the GGUF = tsllm on the folder with quantize q8_0", { skip: skipStories }, async () => {
  await check({ name: "llama-q8_0", spec: { ...tinyLlama, std: STD, seed: 35 }, type: "q8_0", tolerance: 1e-3, maxFlipped: 2 });
});
test("convert Llama --type iq4_xs: llama.cpp on the GGUF = tsllm on the folder with quantize iq4_xs", { skip: skipStories }, async () => {
  await check({ name: "llama-iq4_xs", spec: { ...tinyLlama, std: STD, seed: 36 }, type: "iq4_xs", tolerance: 1e-3, maxFlipped: 2 });
});

/*
 * llama.cpp's converter writes the position and token-type tables F32 whatever --outtype (POS_EMBD
 * and TOKEN_TYPES are among its tensors "always in float32"); quantize-on-load keeps them as stored,
 * so the Q8_0 file and tsllm on the folder hold the same table.
 */
test("convert GPT-2 --type q8_0 and f16: the position table is F32, as llama.cpp's converter writes it; llama.cpp on the q8_0 GGUF = tsllm on the folder with quantize q8_0", { skip: skipGpt2 }, async () => {
  await check({ name: "gpt2-q8_0", spec: { ...tinyGpt2, std: STD, seed: 38 }, type: "q8_0", tolerance: 1e-3, maxFlipped: 2 });
  const typeOf = (file: string, name: string) => typeName(readGGUFHeader(file).tensors.find((t) => t.name === name)!.type);
  assert.equal(typeOf(join(dir, "gpt2-q8_0.gguf"), "position_embd.weight"), "F32");
  const f16 = join(dir, "gpt2-f16.gguf");
  await run(process.execPath, ["--import", "tsx", CLI, "convert", "--model", join(dir, "gpt2-q8_0"), "--out", f16, "--type", "f16", "--vocab", tinyGpt2.tokenizerFrom], { cwd: PROJECT_ROOT });
  assert.equal(typeOf(f16, "position_embd.weight"), "F32");
  assert.equal(typeOf(f16, "token_embd.weight"), "F16");
});

/*
 * IQ4_XS packs rows in blocks of 256; llama-quant.cpp's tensor_type_fallback writes a matrix whose
 * rows are not whole blocks as IQ4_NL (blocks of 32). convert reports them as quantize does.
 */
test("convert --type iq4_xs sums up the matrices that fell back (rows of 160: IQ4_XS -> IQ4_NL) in one line, as quantize; --verbose lists each; llama.cpp runs the file", { skip: skipStories }, async () => {
  const spec = { ...tinyLlama, embeddingLength: 160, std: STD, seed: 37 };
  const folder = join(dir, "rows160");
  await writeRandomHFModel(folder, spec, { dtype: "F32" });
  const out = join(dir, "rows160.gguf");
  const convert = (...more: string[]) => run(process.execPath, ["--import", "tsx", CLI, "convert", "--model", folder, "--out", out, "--type", "iq4_xs", "--vocab", spec.tokenizerFrom, ...more], { cwd: PROJECT_ROOT });
  const { stderr } = await convert();
  const matrices = readGGUFHeader(out).tensors.filter((t) => t.dims.length === 2);
  const judged = matrices.filter((t) => t.dims[0]! % 256 !== 0).map((t) => t.name);
  assert.ok(judged.length > 0 && judged.length < matrices.length, judged.join(" "));
  for (const t of matrices) assert.equal(typeName(t.type), judged.includes(t.name) ? "IQ4_NL" : "IQ4_XS", t.name);
  const lines = stderr.trimEnd().split("\n");
  assert.equal(lines.length, 2, stderr);
  const m = /^tsllm: (\d+) tensors fell back to another type, their rows \(of 160\) not whole blocks of the asked type, as llama\.cpp's do: IQ4_XS -> IQ4_NL x(\d+); e\.g\. (.*), \.\.\. \(--verbose lists all (\d+)\)$/.exec(lines[0]!);
  assert.ok(m, lines[0]);
  assert.deepEqual([Number(m[1]), Number(m[2]), Number(m[4])], [judged.length, judged.length, judged.length]);
  for (const name of m[3]!.split(", ")) assert.ok(judged.includes(name), name);
  assert.match(lines[1]!, /^wrote /);
  const verbose = await convert("--verbose");
  const listed = verbose.stderr.split("\n").filter((l) => l.startsWith("tsllm: fallback: "));
  assert.deepEqual(listed.map((l) => l.split(" ")[2]).sort(), [...judged].sort());
  assert.ok(listed.every((l) => l.endsWith("(rows of 160): IQ4_XS -> IQ4_NL")), listed.join("\n"));
  // --json: the same facts as one object on stdout, nothing on stderr
  const json = await convert("--json");
  assert.equal(json.stderr, "");
  const j = JSON.parse(json.stdout) as { model: string; output: string; architecture: string; tensors: number; type: string; fallbacks: { tensor: string; rowLength: number; asked: string; type: string }[]; bytes: number };
  assert.deepEqual([j.model, j.output, j.architecture, j.tensors, j.type, j.bytes], [folder, out, "llama", readGGUFHeader(out).tensors.length, "iq4_xs", statSync(out).size]);
  assert.deepEqual(j.fallbacks.map((f) => f.tensor).sort(), [...judged].sort());
  assert.ok(j.fallbacks.every((f) => f.rowLength === 160 && f.asked === "IQ4_XS" && f.type === "IQ4_NL"), JSON.stringify(j.fallbacks));
  const ref = await llamaCppRun(out, [1, 2, 3, 4], { decodeSteps: 1 });
  assert.equal(ref.greedyTokens.length, 1);
});
