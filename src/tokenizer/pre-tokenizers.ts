/**
 * Pre-tokenizer regexes for byte-level BPE vocabularies, chosen by GGUF `tokenizer.ggml.pre` the
 * way llama.cpp's llama-vocab.cpp chooses them. The patterns are the ones the models publish in
 * their tokenizer.json, written for JS (`u` flag): `\s` is spelled \p{White_Space} so it means what
 * it means in the Rust/Oniguruma engines behind HF tokenizers (JS's \s also matches U+FEFF), and
 * case-insensitive groups `(?i:'s)` are expanded since Node 20 has no inline modifiers.
 * Each pattern splits every piece left by the previous one; matches and the text between
 * matches both become pieces (HF's Split with behavior "Isolated").
 */
import { SCAN_CHARS } from "./word-run.js";

const S = "\\p{White_Space}";
const NS = "\\P{White_Space}";

const GPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${S}\\p{L}\\p{N}]+|${S}+(?!${NS})|${S}+`;
const CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
const LLAMA3 = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^${S}\\p{L}\\p{N}]+[\\r\\n]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;
const QWEN2 = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^${S}\\p{L}\\p{N}]+[\\r\\n]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;
/**
 * deepseek-llm's letters: its tokenizer.json's class, range for range (llama.cpp has the same). Not
 * \p{LC}: the class leaves out cased letters such as the mathematical alphanumerics (U+1D400..),
 * so "  \u{1D4B6}" is one piece there and was " ", " \u{1D4B6}" here.
 */
const DEEPSEEK_LETTERS = `[${
  "A-Za-z\\u00b5\\u00c0-\\u00d6\\u00d8-\\u00f6\\u00f8-\\u01ba\\u01bc-\\u01bf\\u01c4-\\u0293" +
  "\\u0295-\\u02af\\u0370-\\u0373\\u0376\\u0377\\u037b-\\u037d\\u037f\\u0386\\u0388-\\u038a\\u038c" +
  "\\u038e-\\u03a1\\u03a3-\\u03f5\\u03f7-\\u0481\\u048a-\\u052f\\u0531-\\u0556\\u10a0-\\u10c5" +
  "\\u13a0-\\u13f5\\u13f8-\\u13fd\\u1c90-\\u1cba\\u1cbd-\\u1cbf\\u1d00-\\u1d2b\\u1d6b-\\u1d77" +
  "\\u1d79-\\u1d9a\\u1e00-\\u1f15\\u1f18-\\u1f1d\\u1f20-\\u1f45\\u1f48-\\u1f4d\\u1f50-\\u1f57" +
  "\\u1f59\\u1f5b\\u1f5d\\u1f5f-\\u1f7d\\u1f80-\\u1fb4\\u1fb6-\\u1fbc\\u1fbe\\u1fc2-\\u1fc4" +
  "\\u1fc6-\\u1fcc\\u1fd0-\\u1fd3\\u1fd6-\\u1fdb\\u1fe0-\\u1fec\\u1ff2-\\u1ff4\\u1ff6-\\u1ffc" +
  "\\u2102\\u2107\\u210a-\\u2113\\u2115\\u2119-\\u211d\\u2124\\u2126\\u2128\\u212a-\\u212d" +
  "\\u212f-\\u2134\\u2139\\u213c-\\u213f\\u2145-\\u2149\\u214e\\u2183\\u2184\\u2c00-\\u2c7b" +
  "\\u2c7e-\\u2ce4\\u2ceb-\\u2cee\\u2cf2\\u2cf3\\ua640-\\ua66d\\ua680-\\ua69b\\ua722-\\ua76f" +
  "\\ua771-\\ua787\\ua78b-\\ua78e\\uab70-\\uabbf\\ufb00-\\ufb06\\ufb13-\\ufb17\\uff21-\\uff3a" +
  "\\uff41-\\uff5a\\u{10400}-\\u{1044f}\\u{104b0}-\\u{104d3}\\u{104d8}-\\u{104fb}" +
  "\\u{10c80}-\\u{10cb2}\\u{10cc0}-\\u{10cf2}\\u{118a0}-\\u{118df}\\u{1e900}-\\u{1e943}"
}]`;
// CJK ideographs, U+0800..U+4E00 and Hangul, as one class (deepseek's "[一-龥ࠀ-一가-퟿]")
const DEEPSEEK_CJK = "[\\u4e00-\\u9fa5\\u0800-\\u4e00\\uac00-\\ud7ff]";
/**
 * deepseek-llm's trailing whitespace, `\s+$`, starting only where a whitespace run starts: the same
 * leftmost match (a run that reaches the end begins after a non-space), but a backtracking engine
 * no longer tries `\s+$` from every space of a run that does not reach the end, which made 200K
 * spaces then a digit take 100 s (quadratic). Found backward without the regex (TrailingRun).
 */
const TRAILING_SPACE = `(?<!${S})${S}+$`;
/**
 * A run of one class to the piece's end, `C+$` (deepseek-llm's tokenizer.json writes `\s+$`, which
 * the tokenizers library reads as `\p{White_Space}+$`), or one starting where no C comes before,
 * `(?<!C)C+$` (TRAILING_SPACE), C matching one code point. The leftmost match from a position is
 * the run of C ending the piece, begun no earlier than there (`C+$`; `(?<!C)C+$` has none where
 * the run begins earlier), found backward from the piece's end. One search of `C+$` tries every
 * C of every run and reads each to the run's end: 40K spaces then a digit took 3 s (quadratic).
 */
interface TrailingRun {
  /** `(?<!C)`: a run begun before where the search starts is no match */
  readonly wholeRun: boolean;
  /** one character of C */
  readonly one: RegExp;
  /** the last character not in C, where only C follows it */
  readonly lastOther: RegExp;
}
const TRAILING_RUNS = new Map<string, TrailingRun | null>();
function trailingRunOf(re: RegExp): TrailingRun | undefined {
  return parsedOnce(re, TRAILING_RUNS, parseTrailingRun);
}
function parseTrailingRun(source: string): TrailingRun | null {
  let start = 0, behind: string | undefined;
  if (source.startsWith("(?<!")) {
    const e = atomEnd(source, 4);
    if (e < 0 || source[e] !== ")") return null;
    behind = source.slice(4, e);
    start = e + 1;
  }
  const end = atomEnd(source, start), c = source.slice(start, end);
  if (end < 0 || source.slice(end) !== "+$" || (behind !== undefined && behind !== c)) return null;
  return { wholeRun: behind !== undefined, one: new RegExp(`^${c}$`, "u"), lastOther: new RegExp(`(?!${c})[^](?=${c}*$)`, "u") };
}
/**
 * A pattern that is one character class, optionally after one character of another and optionally
 * repeated (`P?C+`, `C+`, `C`, `C{1,3}`; ClassRuns): a leftmost match is decided by at most one character
 * past its start and, repeated, by one past its end (the first character not in C). So a match
 * found in a window of the piece that ends before the window's end is the piece's; one reaching it
 * goes on to the end of its run of C; no match in a window leaves its last character (a P
 * before a C past the window) to search from next.
 */
interface ClassRun {
  /** `+`; otherwise at most a few C (`C`, `C{1,3}`) */
  readonly plus: boolean;
  /** the first character not in C */
  readonly end: RegExp;
}
/** the source of `prefix?cls+` (or `cls`, `cls{1,3}`: `repeat`), a ClassRun (checked here) */
function classRun(prefix: string, cls: string, repeat: "+" | "" | "{1,3}" = "+"): string {
  const source = `${prefix === "" ? "" : `${prefix}?`}${cls}${repeat}`;
  if (classRunOf(new RegExp(source, "gu")) === undefined) throw new Error(`not a ClassRun: ${source}`);
  return source;
}

/** pattern source -> its ClassRun, or null where it is none (a few per tokenizer; bounded) */
const CLASS_RUNS = new Map<string, ClassRun | null>();

/** what `parse` makes of a `gu` pattern's source, kept per source in `cache` (a few per tokenizer; bounded) */
function parsedOnce<T>(re: RegExp, cache: Map<string, T | null>, parse: (source: string) => T | null): T | undefined {
  if (re.flags !== "gu") return undefined;
  let parsed = cache.get(re.source);
  if (parsed === undefined) {
    parsed = parse(re.source);
    if (cache.size < 1000) cache.set(re.source, parsed);
  }
  return parsed ?? undefined;
}

/**
 * The ClassRun a pattern is, whatever its spelling: a tokenizer.json writes classes its own way
 * (DeepSeek-V3's second Split has its ranges as literal characters, `[一-龥぀-ゟ゠-ヿ]+`, where
 * llama.cpp has \u escapes), and a 10M-character match of it was one search that ran out of V8's
 * stack. Any `P?C+`, `C`, `C{1,n}` whose P and C each match one code point is one: a class, a
 * property or class escape, `.`, one character.
 */
function classRunOf(re: RegExp): ClassRun | undefined {
  return parsedOnce(re, CLASS_RUNS, parseClassRun);
}

function parseClassRun(source: string): ClassRun | null {
  // the tokenizers library compiles a Split's String pattern to a group, `( )` (m[0] is the same)
  if (/^\((?!\?).*\)$/s.test(source)) source = source.slice(1, -1);
  let start = 0, end = atomEnd(source, 0);
  if (end < 0) return null;
  if (source[end] === "?") {
    start = end + 1;
    end = atomEnd(source, start);
    if (end < 0) return null;
  }
  const repeat = source.slice(end);
  if (repeat !== "+" && repeat !== "" && !/^\{1,[1-9][0-9]{0,3}\}$/.test(repeat)) return null;
  return { plus: repeat === "+", end: new RegExp(`(?!${source.slice(start, end)})[^]`, "gu") };
}

/**
 * Where the atom at `i` of a compiled `u` pattern ends, when it matches exactly one code point
 * (no group, assertion, back-reference or quantifier); -1 otherwise. Inside a `u` class only
 * `\` and the closing `]` are special, and escapes such as \p{..} hold no `]`.
 */
function atomEnd(source: string, i: number): number {
  const c = source[i];
  if (c === undefined) return -1;
  if (c === "[") {
    let j = source[i + 1] === "^" ? i + 2 : i + 1;
    for (; j < source.length; j++) {
      if (source[j] === "\\") j++;
      else if (source[j] === "]") return j + 1;
    }
    return -1;
  }
  if (c === "\\") {
    const e = source[i + 1] ?? "";
    if (e === "p" || e === "P" || (e === "u" && source[i + 2] === "{")) {
      const close = source.indexOf("}", i);
      return close < 0 ? -1 : close + 1;
    }
    // \uXXXX of a surrogate may pair with the next escape (one code point of two atoms): left alone
    if (e === "u") return /^[0-9a-fA-F]{4}$/.test(source.slice(i + 2, i + 6)) && !/^[dD][89a-fA-F]/.test(source.slice(i + 2, i + 4)) ? i + 6 : -1;
    if (e === "x") return i + 4;
    if (e === "c") return i + 3;
    return "dDsSwWtnrfv0^$\\.*+?()[]{}|/-".includes(e) && e !== "" ? i + 2 : -1;
  }
  if ("^$*+?(){}|]".includes(c)) return -1;
  return i + (source.codePointAt(i)! > 0xffff ? 2 : 1);
}
const BLOOM = classRun(" ", `[^(${S}|.,!?\\u2026\\u3002\\uff0c\\u3001\\u0964\\u06d4\\u060c)]`);
/** deepseek-v3's third pattern (RunPatterns: v3MatchEnd) */
const DEEPSEEK_V3 = `[!"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_\`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;
/** tekken's pattern (RunPatterns: tekkenMatchEnd) */
const TEKKEN = `[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^${S}\\p{L}\\p{N}]+[\\r\\n/]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;
/**
 * o200k's (GPT-4o's; Phi-4's and gpt-oss's tokenizer.json), as the tokenizers library compiles it:
 * tekken's with the contractions after the letters and up to three digits (RunPatterns: tekkenMatchEnd).
 * Not llama.cpp's "gpt-4o" pre-tokenizer, which spells the letters otherwise.
 */
const O200K_LETTERS = "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]", O200K_LOWER = "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]";
const O200K = `[^\\r\\n\\p{L}\\p{N}]?${O200K_LETTERS}*${O200K_LOWER}+${CONTRACTIONS}?|[^\\r\\n\\p{L}\\p{N}]?${O200K_LETTERS}+${O200K_LOWER}*${CONTRACTIONS}?|` +
  `\\p{N}{1,3}| ?[^${S}\\p{L}\\p{N}]+[\\r\\n/]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;
/**
 * llama.cpp's tekken and "gpt-4o" patterns (llama-vocab.cpp), which a GGUF follows, not the
 * tokenizer.json's: their upper and lower letters are `(?=\p{L})[^a-z]` and `(?=\p{L})[^A-Z]`, so
 * every letter but ASCII's is both (llama.cpp's regex sees each non-ASCII letter as one stand-in
 * byte) and marks are no letters, as in `[^S\p{L}\p{N}]+`: "\u00c9COLE" is "\u00c9", "COLE" and
 * "e\u0301" is "e", "\u0301" there, one piece each under the tokenizer.json's classes
 * (RunPatterns: tekkenMatchEnd with LLAMA_CPP_CASES).
 */
const LCPP_UPPER = "[^\\P{L}a-z]", LCPP_LOWER = "[^\\P{L}A-Z]";
const TEKKEN_LLAMA_CPP = `[^\\r\\n\\p{L}\\p{N}]?${LCPP_UPPER}*${LCPP_LOWER}+|[^\\r\\n\\p{L}\\p{N}]?${LCPP_UPPER}+${LCPP_LOWER}*|` +
  `\\p{N}| ?[^${S}\\p{L}\\p{N}]+[\\r\\n/]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;
/** llama.cpp's "gpt-4o" (LLAMA_VOCAB_PRE_TYPE_GPT4O): its tekken's with a contraction after the letters and up to three digits */
const GPT4O = `[^\\r\\n\\p{L}\\p{N}]?${LCPP_UPPER}*${LCPP_LOWER}+${CONTRACTIONS}?|[^\\r\\n\\p{L}\\p{N}]?${LCPP_UPPER}+${LCPP_LOWER}*${CONTRACTIONS}?|` +
  `\\p{N}{1,3}| ?[^${S}\\p{L}\\p{N}]+[\\r\\n/]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;
/*
 * Patterns of shapes the windowed search does not know (searched a piece at a time), as
 * llama-vocab.cpp writes them or respelled to be, each linear in its piece (jais-2's cascade of
 * `\s{512}(?!\S)`... after `\s*[\r\n]+` was not, and is two patterns: JAIS2_CHUNKS). Under llama.cpp's regex
 * `\p{Lu}` and its kin mean any letter (its text has one stand-in byte per category), so youtu's
 * tekken-like letters are `[\p{L}\p{M}]`.
 */
const QWEN35 = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^${S}\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;
/** minicpm5's second pattern: llama3's with any run of digits (the first split cut them to three) */
const MINICPM5 = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^${S}\\p{L}\\p{N}]+[\\r\\n]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;
const SEED_CODER = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^${S}\\p{L}\\p{N}\\r\\n]+|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;
const BAILINGMOE = `'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^${S}\\p{L}\\p{N}]+[\\r\\n]*|${S}*[\\r\\n]|${S}+(?!${NS})|${S}+`;
const YOUTU = [
  "[\\uac00-\\ud7a3\\u3131-\\u318e]+|[\\uff01\\u2026\\u201c\\u201d\\u2018\\u2019\\u2014\\uff1a\\uff1b\\uff0c\\u3001-\\u303f\\ufe30-\\ufe4f]+|[\\u3105-\\u312f]+|[\\u4e00-\\u9fa5\\u3040-\\u309f\\u30a0-\\u30ff]+",
  `[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+${CONTRACTIONS}?|\\p{N}| ?[^${S}\\p{L}\\p{N}]+[\\r\\n/]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`,
];
/**
 * kimi-k2: llama.cpp splits it with code of its own (unicode.cpp, unicode_regex_split_custom_kimi_k2),
 * which is this regex: Han runs, then llama3's with letters that are no Han and no marks (a mark
 * is "other", as in `[^\s\p{L}\p{N}]`) and a contraction after them. Its Han is a list of CJK
 * blocks (unicode_cpt_is_han), not the Han script (U+3005, U+2E80.. are letters there).
 */
const KIMI_HAN = "\\u4e00-\\u9fff\\u3400-\\u4dbf\\uf900-\\ufaff\\u{20000}-\\u{2a6df}\\u{2a700}-\\u{2ebef}\\u{2f800}-\\u{2fa1f}";
const KIMI_K2 = `[${KIMI_HAN}]+|[^\\r\\n\\p{L}\\p{N}]?[^\\P{L}${KIMI_HAN}]+${CONTRACTIONS}?|\\p{N}{1,3}| ?[^${S}\\p{L}\\p{N}]+[\\r\\n]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;
/**
 * exaone-moe's, with its letters `(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+` spelled without the nested
 * quantifier: `\p{L}\p{M}*(?: ?\p{L}\p{M}*)*` matches the same (letters, marks and single spaces
 * are apart, so the greedy match is the same run), where the nested one backtracks through every
 * way of grouping a run that fails after it
 */
const EXAONE_MOE = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}\\p{M}*(?: ?\\p{L}\\p{M}*)*|\\p{N}| ?[^${S}\\p{L}\\p{N}]+[\\r\\n/]?|${S}*[\\r\\n]|${S}+(?!${NS})|${S}+`;
/**
 * afmoe's and tiny_aya's digits (llama.cpp's unicode_regex_split_custom_afmoe): a run of \p{N}
 * cut into its first one or two, then threes (1234567: 1, 234, 567), what comes before a run
 * staying with its first cut ("x 12345": "x 12", "345"; the text after the last run is one
 * piece). As a regex: other characters, then the run's head only where a run starts (its
 * lookahead reads the run once) or three digits; what follows the last run, whole.
 */
const DIGIT_GROUPS = "\\P{N}*(?:(?<!\\p{N})\\p{N}{1,2}(?=(?:\\p{N}{3})*(?!\\p{N}))|\\p{N}{3})|\\P{N}+";
/** afmoe's second pattern: CJK and other Asian scripts, as llama-vocab.cpp lists them (its 豈 is U+8C48) */
const AFMOE_ASIAN = "[\\u4e00-\\u9fff\\u3400-\\u4dbf\\u8c48-\\ufaff\\u3040-\\u309f\\u30a0-\\u30ff\\uff65-\\uff9f\\u2f00-\\u2fdf\\u0e40-\\u0e7f\\u0e80-\\u0eff\\u1780-\\u17ff\\u1000-\\u109f\\uaa60-\\uaa7f\\ua9e0-\\ua9ff\\uac00-\\ud7af\\u1100-\\u11ff]+";
/** tiny_aya's (cohere2moe's) second pattern: o200k's tokenizer.json one, its cased letters any letter or mark under llama.cpp's regex (as youtu's) */
const TINY_AYA = `[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+${CONTRACTIONS}?|\\p{N}{1,3}| ?[^${S}\\p{L}\\p{N}]+[\\r\\n/]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;
/**
 * superbpe's second pattern, `(?=(\d{3})+(?!\d))`, matches nothing but cuts a piece of numbers
 * (the first split's) before every three ASCII digits that end a run of them; a cut where a run
 * starts leaves what came before in the piece before ("1\u00bd2345" is "1\u00bd2", "345"). A
 * search of it reads the rest of the run at every digit (quadratic), so this matches the pieces
 * between the cuts instead, each search starting where the last ended: three digits at a cut,
 * and after a run's last three (or at the piece's start, where no cut is) what comes before the
 * next cut: other numerals, runs of one or two digits, the head of a longer run (SUPERBPE_LEAD).
 */
const SUPERBPE_LEAD = "(?:[^0-9]|[0-9]{1,2}(?![0-9]))*(?:[0-9]{1,2}(?=(?:[0-9]{3})+(?![0-9])))?";
const SUPERBPE_CUTS = `(?:^(?=(?:[0-9]{3})+(?![0-9]))|(?<=[^]))[0-9]{3}(?:(?![0-9])${SUPERBPE_LEAD})?|^${SUPERBPE_LEAD}`;
/**
 * jais-2's regex is llama3's with white space taken in chunks, `\s{512}(?!\S)|\s{256}(?!\S)|...|
 * \s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}` after `\s*[\r\n]+`, and that alternative read the rest of a
 * run at every chunk (quadratic). The chunks cover just what llama3's `\s+(?!\S)` and `\s+` take
 * (the other alternatives come first in both), so jais-2 is llama3's split, then each white space
 * piece without a line break cut into the chunks (the one with a break, llama3's `\s*[\r\n]+`,
 * ends with it and is left whole, read once from its start; other pieces hold no chunk).
 */
const JAIS2_CHUNK = `[^${NS}\\r\\n]`;
const JAIS2_CHUNKS = `^${JAIS2_CHUNK}*[\\r\\n][^]*|${[512, 256, 128, 64, 32, 16, 8, 4].map((n) => `${JAIS2_CHUNK}{${n}}(?!${NS})`).join("|")}|${JAIS2_CHUNK}{1,2}(?!${NS})`;
/**
 * granite-embed-multi-97m's (LLAMA_VOCAB_PRE_TYPE_GRANITE_EMB_MULTI): llama.cpp's "gpt-4o" with a
 * combining mark as both an upper and a lower letter, so marks stay with the letters they follow
 */
const GRANITE_UPPER = "(?:[^\\P{L}a-z]|\\p{M})", GRANITE_LOWER = "(?:[^\\P{L}A-Z]|\\p{M})";
const GRANITE_EMB_MULTI = `[^\\r\\n\\p{L}\\p{N}]?${GRANITE_UPPER}*${GRANITE_LOWER}+${CONTRACTIONS}?|[^\\r\\n\\p{L}\\p{N}]?${GRANITE_UPPER}+${GRANITE_LOWER}*${CONTRACTIONS}?|` +
  `\\p{N}{1,3}| ?[^${S}\\p{L}\\p{N}]+[\\r\\n/]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`;
/**
 * gemma4's, granite-embed-multi-311m's and sarvam-moe's: no split but at line breaks (their BPE
 * runs over the raw text, spaces written as U+2581, a line at a time: VocabSpec.rawText)
 */
const LINES = "[^\\n]+|[\\n]+";
/** chameleon's image sentinels (PieceCursor.sentinelWindowed) */
const SENTINEL = "<sentinel:[0-9]+>";
/**
 * A pattern without look-around or anchors that reads at most `reach` UTF-16 units from where a
 * search tries it: whether and what it matches at j is decided by [j, j + reach), so a window
 * holding that decides it as the whole piece does (PieceCursor.boundedWindowed).
 */
const BOUNDED = new Map<string, number>();
function bounded(source: string, reach: number): string {
  BOUNDED.set(source, reach);
  return source;
}

const PATTERNS: Record<string, string[]> = {
  default: [classRun("", "[\\p{P}\\$\\+<=>\\^~\\|]"), GPT2, classRun("", "\\p{N}"), bounded("[0-9][0-9][0-9]", 3)],
  gpt2: [GPT2],
  llama3: [LLAMA3],
  qwen2: [QWEN2],
  starcoder: ["\\p{N}", GPT2],
  falcon: [classRun("", "[\\p{P}\\$\\+<=>\\^~\\|`]"), GPT2, bounded("[0-9][0-9][0-9]", 3)],
  "deepseek-llm": [
    classRun("", "[\\r\\n]", ""), classRun(S, DEEPSEEK_LETTERS), classRun(S, "[!-/:-~\\uff01-\\uff0f\\uff1a-\\uff5e\\u2018-\\u201f\\u3000-\\u3002]"),
    TRAILING_SPACE, classRun("", DEEPSEEK_CJK), classRun("", "\\p{N}"),
  ],
  "deepseek-coder": [classRun("", "[\\r\\n]", ""), classRun(S, "\\p{L}"), classRun(S, "\\p{P}"), classRun("", DEEPSEEK_CJK), classRun("", "\\p{N}", "")],
  "deepseek-v3": [classRun("", "\\p{N}", "{1,3}"), classRun("", "[\\u4e00-\\u9fa5\\u3040-\\u309f\\u30a0-\\u30ff]"), DEEPSEEK_V3],
  bloom: [BLOOM],
  viking: [BLOOM, classRun("", "\\p{N}", "")],
  tekken: [TEKKEN_LLAMA_CPP],
  "gpt-4o": [GPT4O],
  qwen35: [QWEN35],
  "seed-coder": [SEED_CODER],
  minicpm5: [classRun("", "\\p{N}", "{1,3}"), MINICPM5],
  bailingmoe: [BAILINGMOE],
  laguna: [LINES, QWEN2],
  gemma4: [LINES],
  // llama.cpp's `\S+` (its white space is \p{White_Space}: non-ASCII spaces are made U+000B for std::wregex)
  whitespace: [classRun("", NS)],
  youtu: YOUTU,
  "kimi-k2": [KIMI_K2],
  "exaone-moe": [EXAONE_MOE],
  afmoe: [DIGIT_GROUPS, AFMOE_ASIAN, DEEPSEEK_V3],
  "tiny_aya": [DIGIT_GROUPS, TINY_AYA],
  superbpe: [classRun("", "\\p{N}"), SUPERBPE_CUTS],
  "jais-2": [LLAMA3, JAIS2_CHUNKS],
  "granite-embed-multi-97m": [GRANITE_EMB_MULTI],
  chameleon: [SENTINEL, bounded("(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", 12), bounded("([\\t\\n]|    |  )", 5), classRun("", "\\p{N}", ""), classRun("", "[\\p{P}!-/:-@\\[-`{-~]", ""), GPT2],
};

/** `tokenizer.ggml.pre` value -> pattern family, as llama.cpp groups them. */
const PRE_FAMILY: Record<string, string> = {
  default: "default",
  "llama3": "llama3", "llama-v3": "llama3", "llama-bpe": "llama3", "falcon3": "llama3", dbrx: "llama3", "smaug-bpe": "llama3", "chatglm-bpe": "llama3",
  "falcon-h1": "llama3", pixtral: "llama3", "midm-2.0": "llama3", lfm2: "llama3", "jina-v5-nano": "llama3", glm4: "llama3",
  "deepseek-llm": "deepseek-llm", "deepseek-coder": "deepseek-coder", "deepseek-v3": "deepseek-v3",
  falcon: "falcon",
  starcoder: "starcoder", refact: "starcoder", "command-r": "starcoder", smollm: "starcoder", codeshell: "starcoder", exaone: "starcoder", "minerva-7b": "starcoder",
  "gpt-2": "gpt2", "phi-2": "gpt2", "jina-es": "gpt2", "jina-de": "gpt2", gigachat: "gpt2", "jina-v1-en": "gpt2", "jina-v2-es": "gpt2",
  "jina-v2-de": "gpt2", "jina-v2-code": "gpt2", "roberta-bpe": "gpt2", mpt: "gpt2", olmo: "gpt2", jais: "gpt2",
  "a.x-4.0": "gpt2", mellum: "gpt2", "modern-bert": "gpt2", exaone4: "gpt2", trillion: "gpt2", "granite-docling": "gpt2",
  qwen2: "qwen2", stablelm2: "qwen2", megrez: "qwen2", "deepseek-r1-qwen": "qwen2", kormo: "qwen2", f2llmv2: "qwen2",
  hunyuan: "qwen2", "solar-open": "qwen2", "grok-2": "qwen2",
  "hunyuan-dense": "deepseek-v3", "joyai-llm": "deepseek-v3", mellum2: "starcoder",
  "poro-chat": "bloom", bloom: "bloom", "gpt3-finnish": "bloom",
  viking: "viking", tekken: "tekken", chameleon: "chameleon",
  qwen35: "qwen35", "seed-coder": "seed-coder", bailingmoe: "bailingmoe", bailingmoe2: "bailingmoe", "llada-moe": "bailingmoe",
  laguna: "laguna", youtu: "youtu", minicpm5: "minicpm5",
  "kimi-k2": "kimi-k2", "exaone-moe": "exaone-moe", afmoe: "afmoe", "tiny_aya": "tiny_aya", cohere2moe: "tiny_aya", superbpe: "superbpe", "jais-2": "jais-2", "granite-embed-multi-97m": "granite-embed-multi-97m",
  gemma4: "gemma4", "granite-embed-multi-311m": "gemma4", "sarvam-moe": "gemma4", whitespace: "whitespace",
  "gpt-4o": "gpt-4o", llama4: "gpt-4o", kanana2: "gpt-4o", talkie: "gpt-4o", "minimax-m2": "gpt-4o",
};

export const KNOWN_PRE_TOKENIZERS: readonly string[] = Object.keys(PRE_FAMILY);

/** The compiled split patterns for a `tokenizer.ggml.pre` value, or undefined when it is unknown. */
export function preTokenizerPatterns(pre: string): RegExp[] | undefined {
  // a name from the file: only the table's own entries count ("constructor" is not a pre-tokenizer)
  const family = Object.hasOwn(PRE_FAMILY, pre) ? PRE_FAMILY[pre] : undefined;
  return family === undefined ? undefined : PATTERNS[family]!.map((p) => new RegExp(p, "gu"));
}

/**
 * The pieces of `text` one at a time: each pattern splits every piece left by the previous one,
 * matches and the text between matches both become pieces, empty ones dropped (HF's Split with
 * behavior "Isolated", applied pattern after pattern). The same pieces as splitting the whole text
 * pattern by pattern, found depth first with one current piece per pattern, so a long text can be
 * taken a few pieces at a time without an array of all of them.
 */
export class PieceCursor {
  /** per pattern: the piece it is splitting, where the piece's next gap starts, where to search next */
  private readonly piece: string[];
  private readonly gapStart: Int32Array;
  private readonly searchFrom: Int32Array;
  /** per pattern: a match found after a gap, handed down once the gap is done */
  private readonly pending: (string | undefined)[];
  /** the pattern whose piece is being split; -1 when done */
  private depth: number;
  /** per pattern: whether it is GPT-2's (LongRuns), found a window at a time */
  private readonly longRuns: (LongRuns | undefined)[];
  /** per pattern: the end of a long match being looked for from here (-1: none), and the test for it */
  private readonly runScan: Int32Array;
  private readonly runEnd: (RegExp | undefined)[];
  private readonly runSpaces: boolean[];
  /** per pattern: a RunPattern (Llama 3's, Qwen2's, deepseek-v3's, tekken's, o200k's), a ClassRun, a bounded pattern's reach */
  private readonly runPatterns: (RunPattern | undefined)[];
  private readonly classRuns: (ClassRun | undefined)[];
  private readonly trailingRuns: (TrailingRun | undefined)[];
  private readonly reach: (number | undefined)[];
  /** per pattern (RunPatterns, ClassRuns, sentinels): a long match's start, and its end being looked for */
  private readonly scanStart: Int32Array;
  private readonly matchScan: (Generator<number, number> | undefined)[];
  /**
   * per pattern (LongRuns, RunPatterns): a cut of the piece where a word ends (WORD_CUT; 0: none
   * yet), the piece up to just past it, and where the next cut is looked for from
   */
  private readonly cutAt: Int32Array;
  private readonly cutWindow: string[];
  private readonly noCutBefore: Int32Array;

  /**
   * `emptyMatchCuts`: an empty match ends the gap before it (Hugging Face's JS tokenizers split
   * that way); otherwise it is skipped and the gap goes on.
   */
  constructor(text: string, private readonly patterns: readonly RegExp[], private readonly emptyMatchCuts = false) {
    const n = patterns.length;
    this.piece = new Array<string>(n + 1);
    this.gapStart = new Int32Array(n);
    this.searchFrom = new Int32Array(n);
    this.pending = new Array<string | undefined>(n);
    this.depth = text === "" ? -1 : 0;
    this.longRuns = patterns.map(longRunsOf);
    this.runScan = new Int32Array(n).fill(-1);
    this.runEnd = new Array<RegExp | undefined>(n);
    this.runSpaces = new Array<boolean>(n).fill(false);
    this.runPatterns = patterns.map((re) => (re.flags === "gu" ? RUN_PATTERNS.get(re.source) : undefined));
    this.classRuns = patterns.map(classRunOf);
    this.trailingRuns = patterns.map(trailingRunOf);
    this.reach = patterns.map((re) => (re.flags === "gu" ? BOUNDED.get(re.source) : undefined));
    this.scanStart = new Int32Array(n);
    this.matchScan = new Array<Generator<number, number> | undefined>(n);
    this.cutAt = new Int32Array(n);
    this.cutWindow = new Array<string>(n);
    this.noCutBefore = new Int32Array(n);
    // no patterns: the text is the one piece
    if (n === 0) this.piece[0] = text;
    else this.enter(0, text);
  }

  private enter(level: number, piece: string): void {
    this.piece[level] = piece;
    this.gapStart[level] = 0;
    this.searchFrom[level] = 0;
    this.pending[level] = undefined;
    this.cutAt[level] = this.noCutBefore[level] = 0;
  }

  /**
   * the next piece, or undefined after the last; a number: that many characters of a long match
   * or gap were read, its end not found yet (a megabyte of one letter is one match, and one regex
   * search over it held the event loop for a fifth of a second): every pattern of llama.cpp's
   * pre-tokenizers, a tokenizer.json's ClassRun or TrailingRun in any spelling, and o200k's, is
   * searched a window at a time
   */
  next(): string | number | undefined {
    const n = this.patterns.length;
    if (n === 0) {
      if (this.depth < 0) return undefined;
      this.depth = -1;
      return this.piece[0];
    }
    for (;;) {
      const d = this.depth;
      if (d < 0) return undefined;
      let child = this.pending[d];
      if (child !== undefined) this.pending[d] = undefined;
      else {
        const piece = this.piece[d]!;
        const from = this.searchFrom[d]!;
        const start = this.gapStart[d]!;
        if (from > piece.length) { this.depth--; continue; }
        const re = this.patterns[d]!;
        let m: RegExpExecArray | null;
        const runs = this.longRuns[d], runPattern = this.runPatterns[d], classRun = this.classRuns[d], reach = this.reach[d];
        const settled = (runs !== undefined || runPattern !== undefined) && piece.length - from > longMatchWindow.chars ? this.cutSearch(d, piece, from) : undefined;
        if (settled !== undefined) {
          if (typeof settled === "number") return settled;
          m = settled;
        } else if (runs && piece.length - from > longMatchWindow.chars) {
          const found = this.windowed(d, runs, piece, from);
          if (typeof found === "number") return found;
          m = found;
        } else if (runPattern !== undefined && piece.length - from > longMatchWindow.chars) {
          const found = this.runWindowed(d, runPattern, piece, from);
          if (typeof found === "number") return found;
          m = found;
        } else if (reach !== undefined && piece.length - from > longMatchWindow.chars) {
          const found = this.boundedWindowed(d, reach, piece, from);
          if (typeof found === "number") return found;
          m = found;
        } else if (re.source === SENTINEL && re.flags === "gu" && piece.length - from > longMatchWindow.chars) {
          const found = this.sentinelWindowed(d, piece, from);
          if (typeof found === "number") return found;
          m = found;
        } else if (this.trailingRuns[d] !== undefined) {
          // (any length: one search of `C+$` is quadratic in the piece's runs of C)
          const found = this.trailingWindowed(d, this.trailingRuns[d], piece, from);
          if (typeof found === "number") return found;
          m = found;
        } else if (classRun !== undefined && piece.length - from > longMatchWindow.chars) {
          const found = this.classWindowed(d, classRun, piece, from);
          if (typeof found === "number") return found;
          m = found;
        } else {
          re.lastIndex = from;
          m = execOrRefuse(re, piece);
        }
        // an empty match is skipped (the search moves one code point on; the gap keeps growing)
        // or, with emptyMatchCuts, ends a gap that has begun
        let cut = -1;
        while (m !== null && m[0].length === 0) {
          const at = m.index + (piece.codePointAt(m.index)! > 0xffff ? 2 : 1);
          if (this.emptyMatchCuts && m.index > start) { cut = m.index; this.searchFrom[d] = at; break; }
          if (at > piece.length) { m = null; break; }
          re.lastIndex = at;
          m = execOrRefuse(re, piece);
        }
        if (cut >= 0) {
          child = piece.slice(start, cut);
          this.gapStart[d] = cut;
        } else if (m === null) {
          this.searchFrom[d] = piece.length + 1; // done after this last gap
          if (start >= piece.length) { this.depth--; continue; }
          child = start === 0 ? piece : piece.slice(start);
        } else {
          const end = m.index + m[0].length;
          this.gapStart[d] = this.searchFrom[d] = end;
          if (m.index > start) {
            child = piece.slice(start, m.index);
            this.pending[d] = m[0];
          } else child = m[0];
        }
      }
      if (d + 1 === n) return child;
      this.enter(d + 1, child);
      this.depth = d + 1;
    }
  }

  /**
   * A LongRuns or RunPattern pattern searched from `from` in the piece up to a cut (WORD_CUT)
   * found once per window: its match there where it starts before the cut, else the search goes
   * on from the cut (a number: characters read). undefined: no cut within a window of `from`
   * (a long run: the window's own search, runWindowed or windowed, takes it). On ordinary text
   * this is one search per match, as searching the whole piece is, where checking each match's
   * window cost up to 1.7x that.
   */
  private cutSearch(d: number, piece: string, from: number): RegExpExecArray | number | undefined {
    let cut = this.cutAt[d]!;
    if (from >= cut) {
      if (from < this.noCutBefore[d]!) return undefined;
      const chars = Math.max(4, longMatchWindow.chars), x = windowEnd(piece, from + chars);
      const cutRe = this.runPatterns[d]?.cut ?? WORD_CUT;
      cutRe.lastIndex = from + (chars >> 1);
      const f = cutRe.exec(piece.slice(0, x));
      if (f === null) {
        // looked for again a half window on: each character is read by at most two of these searches
        this.noCutBefore[d] = from + (chars >> 1);
        return undefined;
      }
      cut = this.cutAt[d] = f.index + f[0].length;
      this.cutWindow[d] = piece.slice(0, windowEnd(piece, cut + 1));
    }
    const re = this.patterns[d]!;
    re.lastIndex = from;
    const m = re.exec(this.cutWindow[d]!);
    return m !== null && m.index < cut ? m : this.searchOnFrom(d, from, cut);
  }

  /**
   * GPT-2's pattern searched from `from` in a window of the piece: its match there where it ends
   * inside the window (LongRuns: then it is the whole piece's); one reaching the window's end is
   * a run, whose end is looked for a window per call (a number: characters read).
   */
  private windowed(d: number, runs: LongRuns, piece: string, from: number): RegExpExecArray | null | number {
    const scan = this.runScan[d]!;
    if (scan < 0) {
      const x = windowEnd(piece, from + Math.max(4, longMatchWindow.chars));
      const re = this.patterns[d]!;
      re.lastIndex = from;
      const m = re.exec(piece.slice(0, x));
      if (m === null || m.index !== from) { re.lastIndex = from; return execOrRefuse(re, piece); } // (never: every character starts a match)
      if (m.index + m[0].length < x) return m;
      // a run of one class up to the window's end: of its last character's class
      const last = piece.codePointAt(piece.charCodeAt(x - 1) >= 0xdc00 && piece.charCodeAt(x - 1) <= 0xdfff ? x - 2 : x - 1)!;
      const ch = String.fromCodePoint(last);
      const kind = LETTER.test(ch) ? 0 : NUMBER.test(ch) ? 1 : runs.space.test(ch) ? 2 : 3;
      this.runEnd[d] = runs.ends[kind]!;
      this.runSpaces[d] = kind === 2;
      this.runScan[d] = x;
      return x - from;
    }
    // the first character past the run: the first in the window is the first in the piece (one character, no look around)
    const endRe = this.runEnd[d]!;
    const stop = windowEnd(piece, scan + Math.max(4, longMatchWindow.chars));
    endRe.lastIndex = scan;
    const f = endRe.exec(stop < piece.length ? piece.slice(0, stop) : piece);
    if (f === null && stop < piece.length) {
      this.runScan[d] = stop;
      return stop - scan;
    }
    const q = f === null ? piece.length : f.index;
    // S+(?!NS): a run of white space before a non-space leaves its last space (one unit: all are BMP)
    const end = this.runSpaces[d] && q < piece.length ? q - 1 : q;
    this.runScan[d] = -1;
    return matchOf(piece, from, end);
  }

  /**
   * A RunPattern searched from `from` in a window of the piece: its match there where what the
   * search read lies inside the window, else the match worked out from the runs it is made of,
   * each looked for a window per call; no match in the window: the search goes on from the
   * window's last character (a number: characters read).
   */
  private runWindowed(d: number, run: RunPattern, piece: string, from: number): RegExpExecArray | number {
    if (this.matchScan[d] === undefined) {
      const x = windowEnd(piece, from + Math.max(4, longMatchWindow.chars));
      const re = this.patterns[d]!;
      re.lastIndex = from;
      const w = piece.slice(0, x);
      const m = re.exec(w);
      // whether a match starts at a character is decided by it and the next: none before the last
      if (m === null) return this.searchOnFrom(d, from, lastCharAt(piece, x));
      if (m.index + m[0].length + 1 < x && run.inWindow(w, m.index, m.index + m[0].length)) return m;
      this.matchScan[d] = run.matchEnd(piece, m.index);
      this.scanStart[d] = m.index;
    }
    return this.scanStep(d, piece);
  }

  /** the search of pattern `d` goes on from `at`: characters read since `from` */
  private searchOnFrom(d: number, from: number, at: number): number {
    this.searchFrom[d] = at;
    return at - from;
  }

  /**
   * A bounded pattern searched from `from` in a window of the piece: its match there where the
   * window holds the pattern's reach from it; else the search goes on from that match, or, none
   * found, from the first character whose reach the window does not hold (a number: characters read).
   */
  private boundedWindowed(d: number, reach: number, piece: string, from: number): RegExpExecArray | null | number {
    const x = windowEnd(piece, from + Math.max(4, longMatchWindow.chars) + reach);
    const re = this.patterns[d]!;
    re.lastIndex = from;
    const m = re.exec(piece.slice(0, x));
    if (x >= piece.length || (m !== null && m.index + reach <= x)) return m;
    // the window decides every character whose reach it holds (at least 5)
    return this.searchOnFrom(d, from, charStart(piece, Math.min(m !== null ? m.index : x, x - reach + 1)));
  }

  /**
   * chameleon's `<sentinel:[0-9]+>` searched from `from` in a window of the piece: its match there
   * where it ends inside the window (no match holds another's "<"); none: the search goes on from
   * the first "<" that may begin a match going past the window, or past the window. Where that
   * "<" is at \`from\`, the digits after it are a long run, whose end is looked for a window per call
   * (a number: characters read).
   */
  private sentinelWindowed(d: number, piece: string, from: number): RegExpExecArray | null | number {
    if (this.matchScan[d] === undefined) {
      const x = windowEnd(piece, from + Math.max(4, longMatchWindow.chars) + SENTINEL_HEAD);
      const re = this.patterns[d]!;
      re.lastIndex = from;
      const m = re.exec(piece.slice(0, x));
      if (m !== null || x >= piece.length) return m;
      const open = SENTINEL_OPEN.exec(piece.slice(from, x));
      if (open === null) return this.searchOnFrom(d, from, x);
      if (open.index > 0) return this.searchOnFrom(d, from, from + open.index);
      // "<sentinel:" and digits up to the window's end (the window holds more than the head)
      this.matchScan[d] = runEnd(piece, x, NON_DIGIT);
      this.scanStart[d] = from;
    }
    const step = this.matchScan[d]!.next();
    if (!step.done) return step.value;
    this.matchScan[d] = undefined;
    const end = step.value;
    if (piece.charCodeAt(end) === 0x3e) return matchOf(piece, from, end + 1);
    // no match from here, nor inside the digits (no "<"): on from where they end
    return this.searchOnFrom(d, from, end);
  }

  /** a step of the long match being worked out (RunPatterns, ClassRuns): characters read, or the match */
  private scanStep(d: number, piece: string): RegExpExecArray | number {
    const step = this.matchScan[d]!.next();
    if (!step.done) return step.value;
    this.matchScan[d] = undefined;
    const from = this.scanStart[d]!;
    return matchOf(piece, from, step.value);
  }

  /**
   * A TrailingRun searched from `from`: the run of C ending the piece, where it ends with one,
   * from `from` on (`(?<!C)`: none where the run begins before `from`), looked for backward a
   * window per call (a number: characters read).
   */
  private trailingWindowed(d: number, run: TrailingRun, piece: string, from: number): RegExpExecArray | null | number {
    if (this.matchScan[d] === undefined) {
      if (from >= piece.length || !run.one.test(charAt(piece, charStart(piece, piece.length - 1)))) return null;
      this.matchScan[d] = trailingRunStart(piece, from, run);
    }
    const step = this.matchScan[d]!.next();
    if (!step.done) return step.value;
    this.matchScan[d] = undefined;
    if (step.value < 0) return null;
    return matchOf(piece, step.value, piece.length);
  }

  /**
   * A ClassRun searched from `from` in a window of the piece: its match there where it ends before
   * the window's end (or is one character), else the run of its class looked for a window per
   * call; no match in the window: the search goes on from the window's last character (a number:
   * characters read).
   */
  private classWindowed(d: number, run: ClassRun, piece: string, from: number): RegExpExecArray | number {
    if (this.matchScan[d] === undefined) {
      const x = windowEnd(piece, from + Math.max(4, longMatchWindow.chars));
      const re = this.patterns[d]!;
      re.lastIndex = from;
      const m = re.exec(piece.slice(0, x));
      if (m === null) return this.searchOnFrom(d, from, lastCharAt(piece, x));
      const end = m.index + m[0].length;
      if (end < x) return m;
      // a few C up to the window's end: the piece's match there (the search reads a few characters)
      if (!run.plus) { re.lastIndex = m.index; return re.exec(piece)!; }
      this.scanStart[d] = m.index;
      this.matchScan[d] = runEnd(piece, x, run.end);
    }
    return this.scanStep(d, piece);
  }
}

/**
 * A cut for LongRuns and RunPatterns: a letter, then a character that is neither letter nor mark;
 * or a digit, then one that is neither letter, mark nor digit (at the cut). Of those patterns only
 * the letter and digit alternatives read a letter or digit (deepseek-v3's letters may start on
 * one digit), and they stop at the first character that goes on no run of letters (letters and
 * marks) or of digits; every other run they read, of white space or others, stops at a letter
 * or digit (GPT-2's lookahead reads one character past white space). So a search from before the
 * cut reads nothing past it, and a match starting before it ends at or before it: a search of the
 * piece up to one character past the cut is the piece's there.
 */
const WORD_CUT = /\p{L}(?=[^\p{L}\p{M}])|\p{N}(?=[^\p{L}\p{M}\p{N}])/gu;
/** WORD_CUT for o200k's pattern, whose letters may go on with a contraction */
const O200K_CUT = /\p{L}(?=[^\p{L}\p{M}'])|\p{N}(?=[^\p{L}\p{M}\p{N}])/gu;

/**
 * A pattern whose match at a position can be worked out from the runs of character classes it
 * reads, and where whether a match starts at a character is decided by it and the next:
 * Llama 3's, Qwen2's, deepseek-v3's third, tekken's and o200k's (their tokenizer.json's patterns,
 * as the tokenizers library and this file spell them). A match found in a window of the piece,
 * ending 2+ characters before the window's end, is the piece's where `inWindow` says what the
 * search read lies inside the window; otherwise `matchEnd` works it out.
 */
interface RunPattern {
  /** `window`: the piece up to the window's end; the match [i, e) */
  readonly inWindow: (window: string, i: number, e: number) => boolean;
  /** the end of the piece's match at `p` (there is one), alternative by alternative; yields characters read */
  readonly matchEnd: (piece: string, p: number) => Generator<number, number>;
  /** where a word ends (PieceCursor.cutSearch): WORD_CUT unless a match may go on past it */
  readonly cut?: RegExp;
}
/**
 * Llama 3's and Qwen2's: `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])
 * |[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^S\p{L}\p{N}]+[\r\n]*|S*[\r\n]+|S+(?!NS)|S+` (Qwen2: \p{N}).
 * Every character starts a match. Taking the characters as letters, digits, white space (S) and the rest
 * (O), a search from p reads: the contractions and the digits at most 3 characters on; the letters,
 * the O's and newlines after them, and the spaces + O's of the alternatives it takes, up to one
 * past its match; and, starting on white space and reaching `S*[\r\n]+`, the whole run of white
 * space (its match ends after the run's last newline, so one newline before a megabyte of spaces
 * reads them all) and one past it.
 *
 * deepseek-v3's third: `[!-/:-@[-\`{-~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|`
 * and the same white space. A digit or other character (not L, M, P, S, S) with no letter or mark
 * after it starts no match. The search reads one past an ASCII punctuation's ASCII letters, past a
 * run of letters and marks, past the punctuation and symbols and newlines after them, and a whole
 * run of white space where it starts on one.
 *
 * tekken's: `X?U*W+|X?U+W*|\p{N}| ?[^S\p{L}\p{N}]+[\r\n/]*|` and the same white space, where X is
 * `[^\r\n\p{L}\p{N}]`, U `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, W `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`: every character
 * starts a match. The letter alternatives backtrack inside the run of letters and marks after X
 * (U* gives back to its last character also in W), so they read that whole run and one past it;
 * the others read as Llama 3's do.
 *
 * o200k's: tekken's with `(?:'[sS]|...)?` after each letter alternative and `\p{N}{1,3}`: the
 * search reads up to three characters past a letter match for a contraction, so a word's end
 * before "'" is no cut (O200K_CUT).
 *
 * llama.cpp's tekken and "gpt-4o": tekken's and o200k's with its letter classes (LLAMA_CPP_CASES),
 * read the same way.
 */
const RUN_PATTERNS = new Map<string, RunPattern>([
  [LLAMA3, { inWindow: spaceEndsIn, matchEnd: (piece, p) => llamaMatchEnd(piece, p, 3) }],
  [QWEN2, { inWindow: spaceEndsIn, matchEnd: (piece, p) => llamaMatchEnd(piece, p, 1) }],
  [DEEPSEEK_V3, { inWindow: spaceEndsIn, matchEnd: v3MatchEnd }],
  [TEKKEN, { inWindow: lettersEndIn, matchEnd: (piece, p) => tekkenMatchEnd(piece, p, 1, false) }],
  [O200K, { inWindow: (w, i, e) => e + 3 < w.length && lettersEndIn(w, i, e), matchEnd: (piece, p) => tekkenMatchEnd(piece, p, 3, true), cut: O200K_CUT }],
  [TEKKEN_LLAMA_CPP, { inWindow: lettersEndIn, matchEnd: (piece, p) => tekkenMatchEnd(piece, p, 1, false, LLAMA_CPP_CASES) }],
  [GPT4O, { inWindow: (w, i, e) => e + 3 < w.length && lettersEndIn(w, i, e), matchEnd: (piece, p) => tekkenMatchEnd(piece, p, 3, true, LLAMA_CPP_CASES), cut: O200K_CUT }],
]);
const SPACE_CHAR = new RegExp(`^${S}$`, "u");
const SPACE_END = new RegExp(NS, "gu");
const LETTER_END = /\P{L}/gu;
const OTHER_END = new RegExp(`[${S}\\p{L}\\p{N}]`, "gu");
const NEWLINE_END = /[^\r\n]/gu;
const CONTRACTION = new RegExp(`^${CONTRACTIONS}`);

/** the first character from `i` that `end` matches (the end of a run), or the piece's end; yields characters read a window at a time */
function* runEnd(piece: string, i: number, end: RegExp): Generator<number, number> {
  for (;;) {
    const stop = windowEnd(piece, i + Math.max(4, longMatchWindow.chars));
    end.lastIndex = i;
    const f = end.exec(stop < piece.length ? piece.slice(0, stop) : piece);
    if (f !== null) return f.index;
    if (stop >= piece.length) return piece.length;
    yield stop - i;
    i = stop;
  }
}

/**
 * where the run of C ending `piece` starts, at `from` at the earliest (`wholeRun`: -1 where it
 * starts before, no match from there); yields characters read a window at a time, backward
 */
function* trailingRunStart(piece: string, from: number, run: TrailingRun): Generator<number, number> {
  for (let i = piece.length; ;) {
    // (a window starting inside a surrogate pair takes the pair)
    const a = charStart(piece, Math.max(from, i - Math.max(4, longMatchWindow.chars)));
    const f = run.lastOther.exec(piece.slice(a, i));
    if (f !== null) return a + f.index + f[0].length;
    // the window is all C
    if (a <= from) return from === 0 || !run.wholeRun || !run.one.test(charAt(piece, charStart(piece, from - 1))) ? from : -1;
    yield i - a;
    i = a;
  }
}
/** the character (code point) at `i` */
const charAt = (piece: string, i: number): string => String.fromCodePoint(piece.codePointAt(i)!);

/** where the run of white space from `p` ends, and its last "\r" or "\n" (-1: none) */
function* spaceRun(piece: string, p: number): Generator<number, [number, number]> {
  let last = -1;
  for (let i = p; ;) {
    const stop = windowEnd(piece, i + Math.max(4, longMatchWindow.chars));
    SPACE_END.lastIndex = i;
    const f = SPACE_END.exec(stop < piece.length ? piece.slice(0, stop) : piece);
    const q = f === null ? stop : f.index;
    for (let j = q - 1; j >= i; j--) {
      const c = piece.charCodeAt(j);
      if (c === 10 || c === 13) { last = j; break; }
    }
    if (f !== null || stop >= piece.length) return [q, last];
    yield stop - i;
    i = stop;
  }
}

/** the index of the first of `classes` the character at `i` is in (their count: none), -1 past the end */
function classOf(piece: string, i: number, classes: readonly RegExp[]): number {
  if (i >= piece.length) return -1;
  const ch = charAt(piece, i);
  const k = classes.findIndex((c) => c.test(ch));
  return k < 0 ? classes.length : k;
}
const after = (piece: string, i: number): number => i + (piece.codePointAt(i)! > 0xffff ? 2 : 1);

/** Llama 3's classes: 0 letter, 1 digit, 2 white space, 3 other */
const LETTER = /^\p{L}$/u;
const NUMBER = /^\p{N}$/u;
const LLAMA_CLASSES = [LETTER, NUMBER, SPACE_CHAR];

/** the end of the match of Llama 3's / Qwen2's pattern at `p`, alternative by alternative (RunPatterns) */
function* llamaMatchEnd(piece: string, p: number, digits: number): Generator<number, number> {
  const c0 = piece.codePointAt(p)!, next = after(piece, p), k0 = classOf(piece, p, LLAMA_CLASSES), k1 = classOf(piece, next, LLAMA_CLASSES);
  if (c0 === 0x27) {
    const e = contractionEnd(piece, p);
    if (e > p) return e;
  }
  if (k0 === 0) return yield* runEnd(piece, p, LETTER_END);
  if (k0 === 1) return digitsEnd(piece, next, digits);
  // [^\r\n\p{L}\p{N}]?\p{L}+: one O or white space other than a newline, then letters
  if (k1 === 0 && c0 !== 10 && c0 !== 13) return yield* runEnd(piece, next, LETTER_END);
  // ' ?[^S\p{L}\p{N}]+[\r\n]*'
  if (k0 === 3 || (c0 === 0x20 && k1 === 3)) return yield* othersEnd(piece, k0 === 3 ? p : next, OTHER_END, NEWLINE_END);
  return yield* spaceMatchEnd(piece, p);
}

/** past a contraction at `p` (`'s`, `'T`, `'re` ...), or `p` where none begins there */
function contractionEnd(piece: string, p: number): number {
  const m = CONTRACTION.exec(piece.slice(p, p + 3));
  return m === null ? p : p + m[0].length;
}

/** past up to `digits` digits in all, the first of them before `next` */
function digitsEnd(piece: string, next: number, digits: number): number {
  let e = next;
  for (let n = 1; n < digits && e < piece.length && NUMBER.test(charAt(piece, e)); n++) e = after(piece, e);
  return e;
}

/** a run of `others` from `i` (`end`: the first character not one), then a run of `newlines` where one follows */
function* othersEnd(piece: string, i: number, end: RegExp, newlines: RegExp): Generator<number, number> {
  const o = yield* runEnd(piece, i, end);
  const c = piece.charCodeAt(o);
  return c === 10 || c === 13 ? yield* runEnd(piece, o, newlines) : o;
}

/** `S*[\r\n]+|S+(?!NS)|S+` at `p` (white space): to the run's last newline, or all the run but its last before a non-space */
function* spaceMatchEnd(piece: string, p: number): Generator<number, number> {
  const [q, last] = yield* spaceRun(piece, p);
  if (last >= 0) return last + 1;
  return q - p >= 2 && q < piece.length ? q - 1 : q;
}

/** deepseek-v3's classes: 0 letter, 1 mark, 2 punctuation or symbol, 3 white space, 4 other */
const V3_CLASSES = [LETTER, /^\p{M}$/u, /^[\p{P}\p{S}]$/u, SPACE_CHAR];
const LETTER_MARK_END = /[^\p{L}\p{M}]/gu;
const ASCII_LETTER_END = /[^A-Za-z]/g;
const PUNCT_SYMBOL_END = /[^\p{P}\p{S}]/gu;
const isAsciiPunct = (c: number): boolean => (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) || (c >= 0x7b && c <= 0x7e);
const isAsciiLetter = (c: number): boolean => (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);

/** the end of the match of deepseek-v3's third pattern at `p`, alternative by alternative (RunPatterns) */
function* v3MatchEnd(piece: string, p: number): Generator<number, number> {
  const c0 = piece.codePointAt(p)!, next = after(piece, p), k0 = classOf(piece, p, V3_CLASSES), k1 = classOf(piece, next, V3_CLASSES);
  // [!-/:-@[-`{-~][A-Za-z]+
  if (isAsciiPunct(c0) && isAsciiLetter(piece.charCodeAt(next))) return yield* runEnd(piece, next, ASCII_LETTER_END);
  // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
  if (k0 === 0 || k0 === 1) return yield* runEnd(piece, p, LETTER_MARK_END);
  if ((k1 === 0 || k1 === 1) && k0 !== 2 && c0 !== 10 && c0 !== 13) return yield* runEnd(piece, next, LETTER_MARK_END);
  // ' ?[\p{P}\p{S}]+[\r\n]*'
  if (k0 === 2 || (c0 === 0x20 && k1 === 2)) return yield* othersEnd(piece, k0 === 2 ? p : next, PUNCT_SYMBOL_END, NEWLINE_END);
  return yield* spaceMatchEnd(piece, p);
}

/** how a tekken-like pattern spells its upper (U) and lower (W) letters */
interface Cases {
  /** 0 U only, 1 W only, 2 both, 3 mark in both (also X), 4 digit, 5 white space, 6 other */
  readonly classes: readonly RegExp[];
  /** the first character not in U, not in W */
  readonly upperEnd: RegExp;
  readonly lowerEnd: RegExp;
  /** the last character in both U and W of a run of U */
  readonly lastBoth: RegExp;
}
/** the tokenizer.json's: U `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, W `[\p{Ll}\p{Lm}\p{Lo}\p{M}]` */
const TEKKEN_CASES: Cases = {
  classes: [/^[\p{Lu}\p{Lt}]$/u, /^\p{Ll}$/u, /^[\p{Lm}\p{Lo}]$/u, /^\p{M}$/u, NUMBER, SPACE_CHAR],
  upperEnd: /[^\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]/gu,
  lowerEnd: /[^\p{Ll}\p{Lm}\p{Lo}\p{M}]/gu,
  lastBoth: /[\p{Lm}\p{Lo}\p{M}][\p{Lu}\p{Lt}]*$/u,
};
/** llama.cpp's (TEKKEN_LLAMA_CPP): U A-Z and every non-ASCII letter, W a-z and the same; a mark is other */
const LLAMA_CPP_CASES: Cases = {
  classes: [/^[A-Z]$/, /^[a-z]$/, /^[^\P{L}A-Za-z]$/u, /(?!)/, NUMBER, SPACE_CHAR],
  upperEnd: /[\P{L}a-z]/gu,
  lowerEnd: /[\P{L}A-Z]/gu,
  lastBoth: /[^\P{L}A-Za-z][A-Z]*$/u,
};
const NEWLINE_SLASH_END = /[^\r\n/]/gu;

/** where the run of U from `i` ends, and its last character also in W (-1: none); yields characters read a window at a time */
function* upperRun(piece: string, i: number, cases: Cases): Generator<number, [number, number]> {
  let both = -1;
  for (;;) {
    const stop = windowEnd(piece, i + Math.max(4, longMatchWindow.chars));
    cases.upperEnd.lastIndex = i;
    const f = cases.upperEnd.exec(stop < piece.length ? piece.slice(0, stop) : piece);
    const q = f === null ? stop : f.index;
    const b = cases.lastBoth.exec(piece.slice(i, q));
    if (b !== null) both = i + b.index;
    if (f !== null || stop >= piece.length) return [q, both];
    yield stop - i;
    i = stop;
  }
}

/** `U*W+` at `s`: U* gives back to the last character W+ can start on; -1: no match */
function* tekkenUpperLower(piece: string, s: number, cases: Cases): Generator<number, number> {
  const [u, both] = yield* upperRun(piece, s, cases);
  if (classOf(piece, u, cases.classes) === 1) return yield* runEnd(piece, u, cases.lowerEnd);
  // the characters after `both` are U only and the one at u is not W: W+ is that one character
  return both < 0 ? -1 : after(piece, both);
}

/**
 * the end of the match of tekken's pattern at `p`, alternative by alternative (RunPatterns); o200k's:
 * up to 3 digits, and a contraction after the letters (optional, so it takes no other letters)
 */
function* tekkenMatchEnd(piece: string, p: number, digits: number, contractions: boolean, cases = TEKKEN_CASES): Generator<number, number> {
  const c0 = piece.codePointAt(p)!, next = after(piece, p), k0 = classOf(piece, p, cases.classes), k1 = classOf(piece, next, cases.classes);
  const letter = (k: number): boolean => k >= 0 && k <= 3;
  // where U and W may start: after X (a mark, white space other than a newline, other) first, then at p
  const starts: number[] = [];
  if ((k0 === 3 || k0 === 5 || k0 === 6) && c0 !== 10 && c0 !== 13 && letter(k1)) starts.push(next);
  if (letter(k0)) starts.push(p);
  const withContraction = (e: number): number => (contractions ? contractionEnd(piece, e) : e);
  for (const s of starts) {
    const e = yield* tekkenUpperLower(piece, s, cases);
    if (e >= 0) return withContraction(e);
  }
  // X?U+W*: U+ to its run's end, then W*
  for (const s of starts) {
    if (classOf(piece, s, cases.classes) === 1) continue;
    const [u] = yield* upperRun(piece, s, cases);
    return withContraction(yield* runEnd(piece, u, cases.lowerEnd));
  }
  if (k0 === 4) return digitsEnd(piece, next, digits);
  // ' ?[^S\p{L}\p{N}]+[\r\n/]*' (marks are in that class; under TEKKEN_CASES a run of them was taken above)
  if (k0 === 6 || (c0 === 0x20 && k1 === 6)) return yield* othersEnd(piece, k0 === 6 ? p : next, OTHER_END, NEWLINE_SLASH_END);
  return yield* spaceMatchEnd(piece, p);
}

/** RunPatterns: a match at `i` starting on white space read its whole run, which must end inside the window */
function spaceEndsIn(window: string, i: number): boolean {
  // (printable ASCII is no white space: most matches start on it)
  const c = window.charCodeAt(i);
  if ((c > 0x20 && c < 0x7f) || !SPACE_CHAR.test(window[i]!)) return true;
  SPACE_END.lastIndex = i;
  return SPACE_END.exec(window) !== null;
}

/**
 * tekken's: the run of letters and marks at `i`, or after the character there, ends inside the
 * window too. A letter match is all letters and marks, so one followed by neither ended its run;
 * the other alternatives read no letter.
 */
function lettersEndIn(window: string, i: number, e: number): boolean {
  LETTER_MARK.lastIndex = e;
  if (LETTER_MARK.test(window)) {
    LETTER_MARK_END.lastIndex = i;
    const f = LETTER_MARK_END.exec(window);
    if (f === null) return false;
    if (f.index === i) {
      LETTER_MARK_END.lastIndex = after(window, i);
      if (LETTER_MARK_END.exec(window) === null) return false;
    }
  }
  return spaceEndsIn(window, i);
}
const LETTER_MARK = /[\p{L}\p{M}]/uy;

/** chameleon's sentinel: "<sentinel:" and a digit; a window's end may fall inside a match from the "<" */
const SENTINEL_HEAD = 11;
const SENTINEL_OPEN = /<(?:s(?:e(?:n(?:t(?:i(?:n(?:e(?:l(?::[0-9]*)?)?)?)?)?)?)?)?)?$/;
const NON_DIGIT = /[^0-9]/g;

/** the start of the last character before `x` */
function lastCharAt(piece: string, x: number): number {
  return x - (piece.charCodeAt(x - 1) >= 0xdc00 && piece.charCodeAt(x - 1) <= 0xdfff ? 2 : 1);
}

/** `i`, or one less where it is the second half of a surrogate pair */
function charStart(piece: string, i: number): number {
  const c = piece.charCodeAt(i);
  return c >= 0xdc00 && c <= 0xdfff && i > 0 && piece.charCodeAt(i - 1) >= 0xd800 && piece.charCodeAt(i - 1) <= 0xdbff ? i - 1 : i;
}


/** the characters GPT-2's pattern is searched in at a time from where a piece goes on (PieceCursor); tests set it small */
export const longMatchWindow = { chars: SCAN_CHARS };

/** `end`, or one more where it would split a surrogate pair, at most the piece's length */
function windowEnd(piece: string, end: number): number {
  if (end >= piece.length) return piece.length;
  const c = piece.charCodeAt(end - 1), d = piece.charCodeAt(end);
  // (a lone first half before a pair is a character of its own: "\ud800" then "\u{1d400}" is not split in the pair)
  return c >= 0xd800 && c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff ? end + 1 : end;
}

/**
 * GPT-2's pattern (the tokenizers library's ByteLevel one with JS \s, or tsllm's with
 * \p{White_Space}): `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^S\p{L}\p{N}]+|S+(?!NS)|S+`.
 * Every character starts a match, and which alternative matches at a position and where a match
 * ends are decided by what lies at most three characters past the position or one past the match
 * (a run of letters, of digits, of white space or of the other characters; white space before
 * a non-space leaves its last one): a match found in a window of the text that ends before the
 * window's end is the text's, and one reaching it is a run of its last character's class, going
 * on to the first character of another class. `ends`: that first character, per class (letter,
 * digit, white space, other); `space`: white space.
 */
interface LongRuns {
  readonly space: RegExp;
  readonly ends: readonly RegExp[];
}
const GPT2_SOURCES = new Map<string, [string, string]>([
  ["'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", ["\\s", "\\S"]],
  [GPT2, [S, NS]],
]);
function longRunsOf(re: RegExp): LongRuns | undefined {
  const spelling = re.flags === "gu" ? GPT2_SOURCES.get(re.source) : undefined;
  if (!spelling) return undefined;
  const [space, nonSpace] = spelling;
  return {
    space: new RegExp(`^${space}$`, "u"),
    ends: ["\\P{L}", "\\P{N}", nonSpace, `[${space}\\p{L}\\p{N}]`].map((e) => new RegExp(e, "gu")),
  };
}

/**
 * `re.exec(text)` from re.lastIndex, or one clear line where V8's backtracking stack runs out: a
 * single match of millions of characters (10M "中" with no space under a tokenizer.json's Split
 * `(?: ?[\u4e00-\u9fa5])+`; 3M pass; llama.cpp's patterns, and any ClassRun however spelled, are
 * searched a window at a time) threw a bare "RangeError: Maximum call stack size exceeded".
 */
function execOrRefuse(re: RegExp, text: string): RegExpExecArray | null {
  const from = re.lastIndex;
  try {
    return re.exec(text);
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    throw new Error(`a pre-tokenizer match from character ${from} of a ${text.length}-character piece of the text is too long for the JS regex engine (${e.message}); put spaces or newlines in it`);
  }
}

/** Applies each pattern in turn to every piece; matches and gaps are kept, empty pieces dropped. */
export function regexSplit(text: string, patterns: readonly RegExp[]): string[] {
  const pieces: string[] = [];
  const cursor = new PieceCursor(text, patterns);
  for (let p = cursor.next(); p !== undefined; p = cursor.next()) if (typeof p === "string") pieces.push(p);
  return pieces;
}

/** the match of piece[start, end) found without the regex, as exec() gives one (its text and index) */
function matchOf(piece: string, start: number, end: number): RegExpExecArray {
  const m = [piece.slice(start, end)] as unknown as RegExpExecArray;
  m.index = start;
  return m;
}
