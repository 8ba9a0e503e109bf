import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { ggufEntry, writeGGUF } from "../src/formats/gguf-writer.js";
import { loadGGUFTokenizer } from "../src/tokenizer/index.js";
import { longMatchWindow } from "../src/tokenizer/pre-tokenizers.js";
import { disposeSharedLlama, llamaToken, sharedLlama } from "./helpers/llama-cpp-oracle.js";

/*
 * Every `tokenizer.ggml.pre` name llama.cpp maps to a regex list tsllm has (llama-vocab.cpp), judged
 * by llama.cpp itself (node-llama-cpp, vocab-only GGUF). The vocabulary is byte-level BPE made from
 * the texts themselves, so its merges cross every place a pre-tokenizer might cut: a piece
 * split elsewhere than llama.cpp splits it gives other ids (GPT-2's vocabulary has few merges
 * across a letter and a mark or two capitals, so it hid tekken's differences).
 */
const TEXTS = [
  "\u00c9COLE \u00e9cole HelloWorld ABCdef GHI \u01c5\u01c5ab \u00c0\u00c9\u00cfou \u0391\u0392\u03b3\u03b4 \u0416\u0436\u0416",
  "e\u0301x cafe\u0301's DON'T we'll I'M you'Re they'VE she'd it's \u2019s 'S",
  "12345 1234567 \u0661\u0662\u0663\u0664 x7y 3.14159 \u2167\u2168 \u00bd",
  "\u4e2d\u6587\u5b57 \u65e5\u672c\u8a9e\u3072\u3089\u304c\u306a\u30ab\u30bf\u30ab\u30ca \ud55c\uad6d\uc5b4 \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22 \u0939\u093f\u0928\u094d\u0926\u0940",
  "  \n\n  x\u00a0\u00a0y\t\tz   \r\n/path/to\n/x \u3000\u3000\u4e2d \u2028a  ",
  "!!! ?? \u2014\u2014 ... (a) [B] {c} <d> #e @f $g %h ^i &j *k _l +m =n |o ~p `q",
  "a\u0085b \u001cc\u001c d\u200b\u200be\ufeff\ufefff \u2029g\u000bh\u000ci \u0000j",
  "\u{1d400}\u{1d41a}\u{1d400} \ud83d\ude00\ud83d\ude00 \u02b0\u02b0a A\u02b0b \u0301\u0301 a\u0301\u0302B\u0301",
  // Han next to other letters (kimi-k2), its blocks and the script's edges (U+3005, U+2E80, U+F900, Ext B), afmoe's Asian scripts
  "\u4e2d\u6587English\u6df7\u5408 x\u4e2d \u4e2d'S \u3005\u3006\u2e80 \u{20000}\u{20001}a \uf900\u8c48b \u1780\u1781 \u1000\u1001 \uac00z \u1100 \uff66\uff67",
  // digit runs of every length mod 3 (afmoe, tiny_aya, superbpe), other numerals inside them
  "1 12 123 1234 12345 123456 1234567 x1234567890y \u0661\u0662\u0663\u0664 12\u00bd345 9\u2167 123\u00bd1\u00bd2345 \u00bd\u00bd1234",
  // letters joined by single spaces, marks after them (exaone-moe)
  "a b c  d e\u0301 f\u0302\u0303 g\u0301 h \u0301i j.\nk l\r\nm  n/\n\no",
];

/**
 * byte-level BPE over `texts`: each character's bytes merged into it, then every two and three
 * characters next to each other in the texts, in that order; so a piece that llama.cpp cuts
 * between two characters and tsllm does not (or the other way) comes out as other tokens
 */
function crossingVocab(texts: readonly string[]): { tokens: string[]; merges: string[] } {
  // every byte's character, in byte order
  const tokens = Array.from({ length: 256 }, (_, b) => byteChar(b));
  const seen = new Set(tokens), merges: string[] = [];
  const merge = (a: string, b: string): void => {
    if (seen.has(a + b)) return;
    seen.add(a + b);
    tokens.push(a + b);
    merges.push(`${a} ${b}`);
  };
  const chars = texts.map((t) => Array.from(t, (c) => Array.from(Buffer.from(c, "utf8"), byteChar)));
  for (const text of chars) {
    for (const bytes of text) {
      bytes.reduce((a, b) => {
        merge(a, b);
        return a + b;
      });
    }
  }
  const joined = chars.map((text) => text.map((bytes) => bytes.join("")));
  for (const text of joined) for (let i = 0; i + 1 < text.length; i++) merge(text[i]!, text[i + 1]!);
  for (const text of joined) for (let i = 0; i + 2 < text.length; i++) merge(text[i]! + text[i + 1]!, text[i + 2]!);
  return { tokens, merges };
}
/** GPT-2's character for byte `b` */
function byteChar(b: number): string {
  const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  if (printable) return String.fromCharCode(b);
  let n = 0;
  for (let c = 0; c < b; c++) if (!((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff))) n++;
  return String.fromCharCode(256 + n);
}

const dir = mkdtempSync(join(tmpdir(), "tsllm-pre-types-"));
after(async () => {
  rmSync(dir, { recursive: true, force: true });
  await disposeSharedLlama();
});

/** a vocab-only GGUF of a BPE vocabulary under `pre` (none: undefined), tokenizer.ggml.model `model`, with `extra` keys */
async function vocabGGUF(name: string, pre: string | undefined, tokens: string[], merges: string[], types?: number[],
  { model = "gpt2", extra = [] }: { model?: string; extra?: Array<[string, ReturnType<typeof ggufEntry.bool>]> } = {}): Promise<string> {
  const path = join(dir, name);
  await writeGGUF(path, {
    // (llama.cpp reads a vocab-only file's architecture and its sizes too)
    metadata: [["general.architecture", ggufEntry.string("gpt2")], ["gpt2.block_count", ggufEntry.u32(1)], ["gpt2.context_length", ggufEntry.u32(64)],
      ["gpt2.embedding_length", ggufEntry.u32(8)], ["gpt2.feed_forward_length", ggufEntry.u32(8)], ["gpt2.attention.head_count", ggufEntry.u32(1)],
      ["gpt2.attention.layer_norm_epsilon", ggufEntry.f32(1e-5)], ["tokenizer.ggml.model", ggufEntry.string(model)],
      ...(pre === undefined ? [] : [["tokenizer.ggml.pre", ggufEntry.string(pre)] as const]),
      ["tokenizer.ggml.tokens", ggufEntry.strings(tokens)], ["tokenizer.ggml.merges", ggufEntry.strings(merges)],
      ...(types ? [["tokenizer.ggml.token_type", ggufEntry.i32s(types)] as const] : []), ...extra],
    tensors: [],
  });
  return path;
}

/** names whose regexes are the ones tsllm has; the first of each line is the one the fix added or changed */
const PRE_NAMES = [
  "gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2", "tekken",
  "a.x-4.0", "mellum", "modern-bert", "exaone4", "trillion", "granite-docling", "gpt-2",
  "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open", "grok-2", "qwen2",
  "hunyuan-dense", "joyai-llm", "deepseek-v3", "mellum2", "starcoder", "llama-bpe", "default",
  "qwen35", "seed-coder", "bailingmoe", "bailingmoe2", "llada-moe", "laguna", "youtu",
  "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano", "glm4", "minicpm5",
  "kimi-k2", "exaone-moe", "afmoe", "tiny_aya", "cohere2moe", "superbpe", "jais-2", "granite-embed-multi-97m",
];

test("every pre-tokenizer name tsllm knows splits as llama.cpp's (node-llama-cpp, vocab-only GGUF, a vocabulary whose merges cross every cut)", async () => {
  const { tokens, merges } = crossingVocab(TEXTS);
  const llama = await sharedLlama();
  const texts = [...TEXTS, TEXTS.join(" "), TEXTS.join("\n"), `${"\u00c9".repeat(300)}${"A".repeat(300)}abc`, `x${"\u0301".repeat(300)}'s`, `${" ".repeat(600)}x\n${" ".repeat(37)}y\t\t\t\t\t`, `${" ".repeat(1100)}\n \n${"\t".repeat(515)}!${" ".repeat(7)}7 \u00a0 \u3000\u3000\u3000x${" ".repeat(9)}`];
  for (const pre of PRE_NAMES) {
    const path = await vocabGGUF(`${pre}.gguf`, pre, tokens, merges);
    const ours = loadGGUFTokenizer(path);
    const model = await llama.loadModel({ modelPath: path, vocabOnly: true });
    try {
      for (const text of texts) {
        const want = Array.from(model.tokenize(text, false)) as number[];
        // the window small, so that words and runs cross window ends (the windowed search)
        for (const chars of [5, longMatchWindow.chars]) {
          const saved = longMatchWindow.chars;
          longMatchWindow.chars = chars;
          try {
            assert.deepEqual(ours.encode(text, { addSpecialTokens: false }), want, `${pre}, window ${chars}: ${JSON.stringify(text.slice(0, 40))}`);
          } finally {
            longMatchWindow.chars = saved;
          }
        }
      }
    } finally {
      await model.dispose();
    }
  }
});

/*
 * llama.cpp's loader also sets, per name, whether a BOS is added, which BOS there is by default and
 * whether a piece that is a whole token skips the merges (ignore_merges): a vocabulary with whole
 * words as tokens and no merges leading to them shows the last (merged, they are single bytes).
 */
test("every pre-tokenizer name sets BOS, add_bos and ignore_merges as llama.cpp's loader does (node-llama-cpp, vocab-only GGUF)", async () => {
  const words = ["Hello", " world", "\u00e9t\u00e9", " 123"];
  const tokens = [...Array.from({ length: 256 }, (_, b) => byteChar(b)), ...words.map((w) => Array.from(Buffer.from(w, "utf8"), byteChar).join(""))];
  const llama = await sharedLlama();
  for (const pre of PRE_NAMES) {
    // gpt2's default BOS (11) a control token, as node-llama-cpp reports only control tokens as BOS
    const path = await vocabGGUF(`flags-${pre}.gguf`, pre, tokens, [], tokens.map((_, id) => (id === 11 ? 3 : 1)));
    const ours = loadGGUFTokenizer(path);
    const model = await llama.loadModel({ modelPath: path, vocabOnly: true });
    try {
      assert.equal(ours.bosId ?? null, model.tokens.bos, `${pre}: BOS id`);
      assert.equal(ours.addBos, model.tokens.shouldPrependBosToken, `${pre}: add_bos`);
      const text = words.join("");
      assert.deepEqual(ours.encode(text, { addSpecialTokens: false }), Array.from(model.tokenize(text, false)), `${pre}: ignore_merges`);
    } finally {
      await model.dispose();
    }
  }
});

test("an unknown pre-tokenizer name is refused, naming the key and the names tsllm knows", async () => {
  const tokens = Array.from({ length: 256 }, (_, b) => byteChar(b));
  const path = await vocabGGUF("refused-no-such-pre.gguf", "no-such-pre", tokens, []);
  assert.throws(() => loadGGUFTokenizer(path), /tokenizer\.ggml\.pre: unknown pre-tokenizer "no-such-pre"; known: .*gemma4.*whitespace/);
});

/*
 * gemma4, granite-embed-multi-311m, sarvam-moe and whitespace: llama.cpp runs their BPE over the
 * raw text (byte_encode false), the first three with spaces written as U+2581 and cut only at line
 * breaks, a character no token has spelled in <0xXX> tokens. The vocabulary: every character of
 * the texts but a few (so byte fallback shows; NUL too, which ends a token in llama.cpp), their bytes' tokens but <0xF0> (a byte with no
 * token is dropped), merges of every two and three characters next to each other, and runs of
 * line breaks no merge makes (gemma4's pieces of line breaks that are a token are taken whole).
 */
const LEFT_OUT = /\u0000|\u0301|\u00bd|\u{1d400}|\u{1f600}|\u3000|\u0661/u;
function rawCrossingVocab(texts: readonly string[], escapeSpaces: boolean): { tokens: string[]; merges: string[]; types: number[] } {
  const tokens: string[] = [], types: number[] = [];
  for (let b = 0; b < 256; b++) {
    if (b === 0xf0) continue;
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(6); // BYTE
  }
  const seen = new Set(tokens), merges: string[] = [];
  const add = (t: string): void => {
    if (seen.has(t)) return;
    seen.add(t);
    tokens.push(t);
    types.push(1);
  };
  const spelled = texts.map((t) => Array.from(escapeSpaces ? t.replaceAll(" ", "\u2581") : t));
  for (const chars of spelled) for (const c of chars) if (!LEFT_OUT.test(c)) add(c);
  const merge = (a: string, b: string): void => {
    if (seen.has(a + b) || LEFT_OUT.test(a + b)) return;
    add(a + b);
    merges.push(`${a} ${b}`);
  };
  for (const chars of spelled) for (let i = 0; i + 1 < chars.length; i++) merge(chars[i]!, chars[i + 1]!);
  for (const chars of spelled) for (let i = 0; i + 2 < chars.length; i++) merge(chars[i]! + chars[i + 1]!, chars[i + 2]!);
  for (const t of ["\n\n\n\n", "\n\n\n\n\n\n"]) add(t);
  return { tokens, merges, types };
}
const RAW_TEXTS = [...TEXTS, "a\n\n\n\nb\n\n\n\n\n\nc\n\n\n\n\nd\n\n\ne \n\n\n\n f\r\n\r\n", "lone \ud800 surrogate \u00e9\u0301 \u{1d400}x \ud83d\ude00!"];

test("gemma4, granite-embed-multi-311m, sarvam-moe and whitespace tokenize as llama.cpp's BPE over raw text (node-llama-cpp, vocab-only GGUF)", async () => {
  const llama = await sharedLlama();
  const texts = [...RAW_TEXTS, RAW_TEXTS.join(" "), RAW_TEXTS.join("\n"), `${" ".repeat(1100)}x\n\n\n\n${"\u00e9".repeat(2000)} \u3000 y`, "", " ", "\n\n\n\n"];
  const cases: Array<[string, string | undefined, string, Array<[string, ReturnType<typeof ggufEntry.bool>]>]> = [
    ["gemma4", "gemma4", "gpt2", []], ["granite-embed-multi-311m", "granite-embed-multi-311m", "gpt2", []], ["sarvam-moe", "sarvam-moe", "gpt2", []],
    // llama.cpp's gemma4 model: its own pre-tokenizer whatever the file says (here none, then another)
    ["gemma4-model", undefined, "gemma4", []], ["gemma4-model-llama3", "llama3", "gemma4", []],
    ["whitespace", "whitespace", "gpt2", []],
    // the whitespace model (jina-embeddings-v2-base-zh): white space dropped, lowercased where the file says so
    ["whitespace-model", "whitespace", "whitespace", []],
    ["whitespace-model-lowercase", "whitespace", "whitespace", [["tokenizer.ggml.normalizer.lowercase", ggufEntry.bool(true)]]],
    ["whitespace-model-qwen2", "qwen2", "whitespace", []],
  ];
  for (const [name, pre, model, extra] of cases) {
    const escaped = model === "gemma4" || (pre !== undefined && /gemma4|granite|sarvam/.test(pre));
    const { tokens, merges, types } = rawCrossingVocab(name.includes("lowercase") ? RAW_TEXTS.map((t) => t.toLowerCase()) : RAW_TEXTS, escaped);
    const path = await vocabGGUF(`raw-${name}.gguf`, pre, tokens, merges, types, { model, extra });
    const ours = loadGGUFTokenizer(path);
    const lm = await llama.loadModel({ modelPath: path, vocabOnly: true });
    try {
      for (const text of texts) {
        // (llama.cpp asserts a merge's sides hold no space: under the whitespace pre-tokenizer of a gpt2 model, white space
        // with a space in it, two characters or more, aborts it; its whitespace model drops white space first)
        if (name === "whitespace" && /\p{White_Space} | \p{White_Space}/u.test(text)) continue;
        const want = Array.from(lm.tokenize(text, false)) as number[];
        const got = ours.encode(text, { addSpecialTokens: false });
        assert.deepEqual(got, want, `${name}: ${JSON.stringify(text.slice(0, 40))}`);
        assert.deepEqual(await ours.encodeAsync(text, { addSpecialTokens: false }), want, `${name} (async): ${JSON.stringify(text.slice(0, 40))}`);
        // decoded as llama.cpp decodes raw text where it cleans no spaces (gemma4's loader turns its clean-up of " ?" and the like on, as
        // for every gpt2 name tsllm decodes without it; its whitespace pre-tokenizer decodes GPT-2's alphabet, a raw-text bug)
        if (name === "sarvam-moe") assert.equal(ours.decode(got), lm.detokenize(want.map(llamaToken)), `${name}: decode ${JSON.stringify(text.slice(0, 40))}`);
      }
    } finally {
      await lm.dispose();
    }
  }
});

test("gemma4 and granite-embed-multi-311m always add a BOS, as llama.cpp's loader sets (node-llama-cpp, vocab-only GGUF)", async () => {
  const llama = await sharedLlama();
  const { tokens, merges, types } = rawCrossingVocab(["Hello world"], true);
  // the BOS a control token, as node-llama-cpp reports only control tokens as BOS
  const bos = tokens.length;
  for (const [name, pre, model] of [["gemma4", "gemma4", "gpt2"], ["granite-embed-multi-311m", "granite-embed-multi-311m", "gpt2"], ["sarvam-moe", "sarvam-moe", "gpt2"],
    ["gemma4-model", undefined, "gemma4"], ["whitespace-model", "whitespace", "whitespace"]] as const) {
    const path = await vocabGGUF(`bos-${name}.gguf`, pre, [...tokens, "<bos>"], merges, [...types, 3], {
      model, extra: [["tokenizer.ggml.bos_token_id", ggufEntry.u32(bos)], ["tokenizer.ggml.add_bos_token", ggufEntry.bool(false)]],
    });
    const ours = loadGGUFTokenizer(path);
    const lm = await llama.loadModel({ modelPath: path, vocabOnly: true });
    try {
      assert.equal(ours.bosId ?? null, lm.tokens.bos, `${name}: BOS id`);
      assert.equal(ours.addBos, lm.tokens.shouldPrependBosToken, `${name}: add_bos`);
    } finally {
      await lm.dispose();
    }
  }
});

/*
 * Decode. node-llama-cpp's detokenize is llama_detokenize(remove_special false, unparse_special
 * = its specialTokens flag): each token's piece (llama.cpp's token_to_piece: U+2581 made a space,
 * a byte token its byte, a control or unknown token nothing unless unparse_special, a user-defined
 * one its text), joined, then its clean_spaces pass (" ?" " !" " ." " ," " ' " " 's" " 'm" " 're"
 * " 've" tidied) where the loader turns it on: gemma4's pre type and the whitespace pre, not
 * sarvam-moe. tsllm's decode is the pieces joined, as llama-server's text and /detokenize are
 * (common_token_to_piece, no clean_spaces: docs/hardening.md, "llama.cpp's clean_spaces"), with
 * skipSpecialTokens as unparse_special false. Its judge: llama.cpp's detokenize of the same ids
 * under the same tokens written as sarvam-moe (the same token_to_piece over raw UTF-8, no
 * clean-up); and the file's own detokenize wherever it has nothing to tidy. The whitespace pre
 * leaves escape_whitespaces off, and llama.cpp then decodes its raw-text tokens through GPT-2's
 * byte alphabet ("[UNK_BYTE_0x...]" for a space or a Han character, one byte for "é"): there
 * the judge is the sarvam-moe copy alone, and the file's own detokenize only for printable ASCII.
 */
const TIDIED = "Hello , world . I ' m here ? yes ! it 's we 're they 've , don 't";
test("gemma4, granite-embed-multi-311m, sarvam-moe and whitespace decode and stream as llama.cpp's pieces joined (node-llama-cpp's detokenize, vocab-only GGUF)", async () => {
  const llama = await sharedLlama();
  const texts = [...RAW_TEXTS, TIDIED, "Hello,world.I'm(here)?", "\n\n\n\n", ""];
  const cases: Array<[string, string | undefined, string, Array<[string, ReturnType<typeof ggufEntry.bool>]>]> = [
    ["gemma4", "gemma4", "gpt2", []], ["granite-embed-multi-311m", "granite-embed-multi-311m", "gpt2", []], ["sarvam-moe", "sarvam-moe", "gpt2", []],
    ["gemma4-model", undefined, "gemma4", []], ["gemma4-model-llama3", "llama3", "gemma4", []],
    ["whitespace", "whitespace", "gpt2", []], ["whitespace-model", "whitespace", "whitespace", []],
    ["whitespace-model-lowercase", "whitespace", "whitespace", [["tokenizer.ggml.normalizer.lowercase", ggufEntry.bool(true)]]],
    ["whitespace-model-qwen2", "qwen2", "whitespace", []],
  ];
  for (const [name, pre, model, extra] of cases) {
    const escaped = model === "gemma4" || (pre !== undefined && /gemma4|granite|sarvam/.test(pre));
    const vocabTexts = name.includes("lowercase") ? texts.map((t) => t.toLowerCase()) : texts;
    const vocab = rawCrossingVocab(vocabTexts, escaped);
    // a control token and a user-defined one, which the texts do not hold
    const ctl = vocab.tokens.length, ud = ctl + 1;
    const tokens = [...vocab.tokens, "<ctl>", "<ud>"], types = [...vocab.types, 3, 4];
    const path = await vocabGGUF(`decode-${name}.gguf`, pre, tokens, vocab.merges, types, { model, extra });
    const judgePath = await vocabGGUF(`decode-${name}-judge.gguf`, "sarvam-moe", tokens, vocab.merges, types);
    const ours = loadGGUFTokenizer(path);
    const lm = await llama.loadModel({ modelPath: path, vocabOnly: true });
    const judge = await llama.loadModel({ modelPath: judgePath, vocabOnly: true });
    let tidied = 0, misread = 0;
    try {
      for (const text of texts) {
        const ids = ours.encode(text, { addSpecialTokens: false });
        const half = ids.length >> 1;
        for (const seq of [ids, [ctl, ...ids.slice(0, half), ud, ...ids.slice(half), ctl, ud]]) {
          for (const skipSpecialTokens of [true, false]) {
            const what = `${name}: ${JSON.stringify(text.slice(0, 30))} (${seq === ids ? "plain" : "with special tokens"}, skip ${skipSpecialTokens})`;
            const want = judge.detokenize(seq.map(llamaToken), !skipSpecialTokens);
            const got = ours.decode(seq, { skipSpecialTokens });
            assert.equal(got, want, what);
            // the file's own detokenize, where it has nothing to tidy (and, without escape_whitespaces, where GPT-2's alphabet reads printable ASCII as itself)
            const own = lm.detokenize(seq.map(llamaToken), !skipSpecialTokens);
            if (!escaped && !/^[!-~]*$/.test(want)) misread += own === want ? 0 : 1;
            else if (/ [?!.,']/.test(want)) tidied += own === want ? 0 : 1;
            else assert.equal(got, own, `${what}: the file's own detokenize`);
            // a stream, token by token, alone and after a context cut anywhere: decode's text
            const stream = ours.createStreamDecoder({ skipSpecialTokens });
            assert.equal(seq.map((id) => stream.push(id)).join("") + stream.flush(), got, `${what}: stream`);
            for (const cut of [1, half, seq.length - 1]) {
              if (cut <= 0 || cut >= seq.length) continue;
              const before = judge.detokenize(seq.slice(0, cut).map(llamaToken), !skipSpecialTokens);
              if (!want.startsWith(before) || before.endsWith("\ufffd")) continue; // a character cut in two
              const rest = ours.createStreamDecoder({ skipSpecialTokens, context: seq.slice(0, cut) });
              assert.equal(seq.slice(cut).map((id) => rest.push(id)).join("") + rest.flush(), want.slice(before.length), `${what}: stream after ${cut}`);
            }
          }
        }
      }
    } finally {
      await lm.dispose();
      await judge.dispose();
    }
    // llama.cpp's clean_spaces is on for gemma4's pre type and the whitespace pre (seen where the text has " ?" and the like); its
    // byte-alphabet reading of raw text under the whitespace model and pre (seen on non-ASCII)
    const cleans = /gemma4|granite/.test(name);
    if (escaped) assert.equal(tidied > 0, cleans, `${name}: llama.cpp's clean_spaces ${cleans ? "seen" : "not expected"}`);
    // (under qwen2's pre the whitespace model is byte-level BPE, in llama.cpp and tsllm alike: a byte-level reading is right there)
    else assert.equal(misread > 0, pre === "whitespace", `${name}: llama.cpp's GPT-2-alphabet reading of raw text ${pre === "whitespace" ? "seen" : "not expected"}`);
  }
});
