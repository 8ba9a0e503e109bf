/**
 * Pre-tokenizer regexes for byte-level BPE vocabularies, chosen by GGUF `tokenizer.ggml.pre` the
 * way llama.cpp's llama-vocab.cpp chooses them. The patterns are the ones the models publish in
 * their tokenizer.json, written for JS (`u` flag): `\s` is spelled \p{White_Space} so it means what
 * it means in the Rust/Oniguruma engines behind HF tokenizers (JS's \s also matches U+FEFF), and
 * case-insensitive groups `(?i:'s)` are expanded since Node 20 has no inline modifiers.
 * Each pattern splits every piece left by the previous one; matches and the text between
 * matches both become pieces (HF's Split with behavior "Isolated").
 */
const S = "\\p{White_Space}";
const NS = "\\P{White_Space}";

const GPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${S}\\p{L}\\p{N}]+|${S}+(?!${NS})|${S}+`;
const CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
const LLAMA3 = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^${S}\\p{L}\\p{N}]+[\\r\\n]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;
const QWEN2 = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^${S}\\p{L}\\p{N}]+[\\r\\n]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;
// CJK ideographs, U+0800..U+4E00 and Hangul, as one class (deepseek's "[一-龥ࠀ-一가-퟿]")
const DEEPSEEK_CJK = "[\\u4e00-\\u9fa5\\u0800-\\u4e00\\uac00-\\ud7ff]+";
const BLOOM = ` ?[^(${S}|.,!?\\u2026\\u3002\\uff0c\\u3001\\u0964\\u06d4\\u060c)]+`;

const PATTERNS: Record<string, string[]> = {
  default: ["[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+", "[0-9][0-9][0-9]"],
  gpt2: [GPT2],
  llama3: [LLAMA3],
  qwen2: [QWEN2],
  starcoder: ["\\p{N}", GPT2],
  falcon: ["[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2, "[0-9][0-9][0-9]"],
  // deepseek's letter class is the cased letters (Lu, Ll, Lt) written out as ranges
  "deepseek-llm": ["[\\r\\n]", `${S}?\\p{LC}+`, `${S}?[!-/:-~\\uff01-\\uff0f\\uff1a-\\uff5e\\u2018-\\u201f\\u3000-\\u3002]+`, `${S}+$`, DEEPSEEK_CJK, "\\p{N}+"],
  "deepseek-coder": ["[\\r\\n]", `${S}?\\p{L}+`, `${S}?\\p{P}+`, DEEPSEEK_CJK, "\\p{N}"],
  "deepseek-v3": [
    "\\p{N}{1,3}",
    "[\\u4e00-\\u9fa5\\u3040-\\u309f\\u30a0-\\u30ff]+",
    `[!"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_\`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`,
  ],
  bloom: [BLOOM],
  viking: [BLOOM, "\\p{N}"],
  tekken: [
    `[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^${S}\\p{L}\\p{N}]+[\\r\\n/]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`,
  ],
  chameleon: ["<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", GPT2],
};

/** `tokenizer.ggml.pre` value -> pattern family, as llama.cpp groups them. */
const PRE_FAMILY: Record<string, string> = {
  default: "default",
  "llama3": "llama3", "llama-v3": "llama3", "llama-bpe": "llama3", "falcon3": "llama3", dbrx: "llama3", "smaug-bpe": "llama3", "chatglm-bpe": "llama3",
  "deepseek-llm": "deepseek-llm", "deepseek-coder": "deepseek-coder", "deepseek-v3": "deepseek-v3",
  falcon: "falcon",
  starcoder: "starcoder", refact: "starcoder", "command-r": "starcoder", smollm: "starcoder", codeshell: "starcoder", exaone: "starcoder", "minerva-7b": "starcoder",
  "gpt-2": "gpt2", "phi-2": "gpt2", "jina-es": "gpt2", "jina-de": "gpt2", gigachat: "gpt2", "jina-v1-en": "gpt2", "jina-v2-es": "gpt2",
  "jina-v2-de": "gpt2", "jina-v2-code": "gpt2", "roberta-bpe": "gpt2", mpt: "gpt2", olmo: "gpt2", jais: "gpt2",
  qwen2: "qwen2", stablelm2: "qwen2", megrez: "qwen2",
  "poro-chat": "bloom", bloom: "bloom", "gpt3-finnish": "bloom",
  viking: "viking", tekken: "tekken", chameleon: "chameleon",
};

export const KNOWN_PRE_TOKENIZERS: readonly string[] = Object.keys(PRE_FAMILY);

/** The compiled split patterns for a `tokenizer.ggml.pre` value, or undefined when it is unknown. */
export function preTokenizerPatterns(pre: string): RegExp[] | undefined {
  // a name from the file: only the table's own entries count ("constructor" is not a pre-tokenizer)
  const family = Object.hasOwn(PRE_FAMILY, pre) ? PRE_FAMILY[pre] : undefined;
  return family === undefined ? undefined : PATTERNS[family]!.map((p) => new RegExp(p, "gu"));
}

/** Applies each pattern in turn to every piece; matches and gaps are kept, empty pieces dropped. */
export function regexSplit(text: string, patterns: readonly RegExp[]): string[] {
  let pieces = text ? [text] : [];
  for (const re of patterns) {
    const next: string[] = [];
    for (const piece of pieces) {
      let last = 0;
      for (const m of piece.matchAll(re)) {
        if (m[0].length === 0) continue;
        if (m.index! > last) next.push(piece.slice(last, m.index));
        next.push(m[0]);
        last = m.index! + m[0].length;
      }
      if (last < piece.length) next.push(piece.slice(last));
    }
    pieces = next;
  }
  return pieces;
}
