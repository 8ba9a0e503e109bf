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
 * spaces then a digit take 100 s (quadratic).
 */
const TRAILING_SPACE = `(?<!${S})${S}+$`;
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
const CLASS_RUNS = new Map<string, ClassRun>();
/** the source of `prefix?cls+` (or `cls`, `cls{1,3}`: `repeat`), recorded as a ClassRun */
function classRun(prefix: string, cls: string, repeat: "+" | "" | "{1,3}" = "+"): string {
  const source = `${prefix === "" ? "" : `${prefix}?`}${cls}${repeat}`;
  CLASS_RUNS.set(source, { plus: repeat === "+", end: new RegExp(`(?!${cls})[^]`, "gu") });
  return source;
}
const BLOOM = classRun(" ", `[^(${S}|.,!?\\u2026\\u3002\\uff0c\\u3001\\u0964\\u06d4\\u060c)]`);

const PATTERNS: Record<string, string[]> = {
  default: ["[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+", "[0-9][0-9][0-9]"],
  gpt2: [GPT2],
  llama3: [LLAMA3],
  qwen2: [QWEN2],
  starcoder: ["\\p{N}", GPT2],
  falcon: ["[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2, "[0-9][0-9][0-9]"],
  "deepseek-llm": [
    classRun("", "[\\r\\n]", ""), classRun(S, DEEPSEEK_LETTERS), classRun(S, "[!-/:-~\\uff01-\\uff0f\\uff1a-\\uff5e\\u2018-\\u201f\\u3000-\\u3002]"),
    TRAILING_SPACE, classRun("", DEEPSEEK_CJK), classRun("", "\\p{N}"),
  ],
  "deepseek-coder": [classRun("", "[\\r\\n]", ""), classRun(S, "\\p{L}"), classRun(S, "\\p{P}"), classRun("", DEEPSEEK_CJK), classRun("", "\\p{N}", "")],
  "deepseek-v3": [
    classRun("", "\\p{N}", "{1,3}"),
    classRun("", "[\\u4e00-\\u9fa5\\u3040-\\u309f\\u30a0-\\u30ff]"),
    `[!"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_\`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|${S}*[\\r\\n]+|${S}+(?!${NS})|${S}+`,
  ],
  bloom: [BLOOM],
  viking: [BLOOM, classRun("", "\\p{N}", "")],
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
  /** per pattern: Llama 3's or Qwen2's (LlamaRuns), its digits per piece; or a ClassRun */
  private readonly llamaDigits: (number | undefined)[];
  private readonly classRuns: (ClassRun | undefined)[];
  /** per pattern (LlamaRuns, ClassRuns): a long match's start, and its end being looked for */
  private readonly scanStart: Int32Array;
  private readonly matchScan: (Generator<number, number> | undefined)[];

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
    this.llamaDigits = patterns.map((re) => (re.flags === "gu" ? LLAMA_DIGITS.get(re.source) : undefined));
    this.classRuns = patterns.map((re) => (re.flags === "gu" ? CLASS_RUNS.get(re.source) : undefined));
    this.scanStart = new Int32Array(n);
    this.matchScan = new Array<Generator<number, number> | undefined>(n);
    // no patterns: the text is the one piece
    if (n === 0) this.piece[0] = text;
    else this.enter(0, text);
  }

  private enter(level: number, piece: string): void {
    this.piece[level] = piece;
    this.gapStart[level] = 0;
    this.searchFrom[level] = 0;
    this.pending[level] = undefined;
  }

  /**
   * the next piece, or undefined after the last; a number: that many characters of a long match
   * or gap of GPT-2's, Llama 3's, Qwen2's pattern or a ClassRun were read, its end not found yet (a megabyte of one letter is one match,
   * and one regex search over it held the event loop for a fifth of a second)
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
        const runs = this.longRuns[d], digits = this.llamaDigits[d], classRun = this.classRuns[d];
        if (runs && piece.length - from > longMatchWindow.chars) {
          const found = this.windowed(d, runs, piece, from);
          if (typeof found === "number") return found;
          m = found;
        } else if (digits !== undefined && piece.length - from > longMatchWindow.chars) {
          const found = this.llamaWindowed(d, digits, piece, from);
          if (typeof found === "number") return found;
          m = found;
        } else if (re.source === TRAILING_SPACE && re.flags === "gu" && piece.length - from > longMatchWindow.chars) {
          const found = this.trailingWindowed(d, piece, from);
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
   * Llama 3's or Qwen2's pattern searched from `from` in a window of the piece: its match there
   * where what the search read lies inside the window (LlamaRuns), else the match worked out from
   * the runs it is made of, each looked for a window per call (a number: characters read).
   */
  private llamaWindowed(d: number, digits: number, piece: string, from: number): RegExpExecArray | number {
    if (this.matchScan[d] === undefined) {
      const x = windowEnd(piece, from + Math.max(4, longMatchWindow.chars));
      const re = this.patterns[d]!;
      re.lastIndex = from;
      const m = re.exec(piece.slice(0, x));
      if (m !== null && m.index === from && from + m[0].length + 1 < x) {
        // white space: the search read its whole run ("\n" then spaces: the match ends after the run's last newline)
        if (!SPACE_CHAR.test(piece[from]!)) return m;
        SPACE_END.lastIndex = from;
        if (SPACE_END.exec(piece.slice(0, x)) !== null) return m;
      }
      this.matchScan[d] = llamaMatchEnd(piece, from, digits);
    }
    this.scanStart[d] = from;
    return this.scanStep(d, piece);
  }

  /** a step of the long match being worked out (LlamaRuns, ClassRuns): characters read, or the match */
  private scanStep(d: number, piece: string): RegExpExecArray | number {
    const step = this.matchScan[d]!.next();
    if (!step.done) return step.value;
    this.matchScan[d] = undefined;
    const from = this.scanStart[d]!;
    return matchOf(piece, from, step.value);
  }

  /**
   * deepseek-llm's trailing white space searched from `from`: the piece's last run of white space
   * where the piece ends with one and the run starts at or after `from` (a match needs a non-space
   * or the piece's start before it), looked for backward a window per call (a number: characters read).
   */
  private trailingWindowed(d: number, piece: string, from: number): RegExpExecArray | null | number {
    if (this.matchScan[d] === undefined) {
      // white space is all in the BMP: a piece ending otherwise has no match
      if (!SPACE_CHAR.test(piece[piece.length - 1]!)) return null;
      this.matchScan[d] = trailingRunStart(piece, from);
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
      if (m === null) {
        const last = x - (piece.charCodeAt(x - 1) >= 0xdc00 && piece.charCodeAt(x - 1) <= 0xdfff ? 2 : 1);
        this.searchFrom[d] = last;
        return last - from;
      }
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
 * Llama 3's and Qwen2's pattern (their tokenizer.json's, as the tokenizers library and this file
 * spell it), per source the digits one piece takes: `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])
 * |[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^S\p{L}\p{N}]+[\r\n]*|S*[\r\n]+|S+(?!NS)|S+`. Every
 * character starts a match. Taking the characters as letters, digits, white space (S) and the rest
 * (O), a search from p reads: the contractions and the digits at most 3 characters on; the letters,
 * the O's and newlines after them, and the spaces + O's of the alternatives it takes, up to one
 * past its match; and, starting on white space and reaching `S*[\r\n]+`, the whole run of white
 * space (its match ends after the run's last newline, so one newline before a megabyte of spaces
 * reads them all) and one past it. So a match found in a window ending 2+ characters before the
 * window's end, not starting on white space or with that run ending inside the window, is the
 * text's; otherwise llamaMatchEnd works the match out from where its runs end.
 */
const LLAMA_DIGITS = new Map<string, number>([[LLAMA3, 3], [QWEN2, 1]]);
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

/** where the run of white space ending `piece` starts, -1 where before `from` (no match from there); yields characters read a window at a time, backward */
function* trailingRunStart(piece: string, from: number): Generator<number, number> {
  for (let i = piece.length; ;) {
    const a = Math.max(from, i - Math.max(4, longMatchWindow.chars));
    const f = LAST_NON_SPACE.exec(piece.slice(a, i));
    if (f !== null) return a + f.index + f[0].length;
    // the window is all white space (a split pair at `a` would have been a non-space)
    if (a <= from) return from === 0 || !SPACE_CHAR.test(piece[from - 1]!) ? from : -1;
    yield i - a;
    i = a;
  }
}
const LAST_NON_SPACE = new RegExp(`${NS}(?=${S}*$)`, "u");

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

/** the class of the character at `i` (LlamaRuns): 0 letter, 1 digit, 2 white space, 3 other, -1 past the end */
function classAt(piece: string, i: number): number {
  if (i >= piece.length) return -1;
  const ch = String.fromCodePoint(piece.codePointAt(i)!);
  return LETTER.test(ch) ? 0 : NUMBER.test(ch) ? 1 : SPACE_CHAR.test(ch) ? 2 : 3;
}

/** the end of the match of Llama 3's / Qwen2's pattern at `p`, alternative by alternative (LlamaRuns) */
function* llamaMatchEnd(piece: string, p: number, digits: number): Generator<number, number> {
  const c0 = piece.codePointAt(p)!, next = p + (c0 > 0xffff ? 2 : 1), k0 = classAt(piece, p), k1 = classAt(piece, next);
  if (c0 === 0x27) {
    const m = CONTRACTION.exec(piece.slice(p, p + 3));
    if (m !== null) return p + m[0].length;
  }
  if (k0 === 0) return yield* runEnd(piece, p, LETTER_END);
  if (k0 === 1) {
    let e = next;
    for (let n = 1; n < digits && classAt(piece, e) === 1; n++) e += piece.codePointAt(e)! > 0xffff ? 2 : 1;
    return e;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+: one O or white space other than a newline, then letters
  if (k1 === 0 && c0 !== 10 && c0 !== 13) return yield* runEnd(piece, next, LETTER_END);
  // ' ?[^S\p{L}\p{N}]+[\r\n]*'
  if (k0 === 3 || (c0 === 0x20 && k1 === 3)) {
    const o = yield* runEnd(piece, k0 === 3 ? p : next, OTHER_END);
    const c = piece.charCodeAt(o);
    return c === 10 || c === 13 ? yield* runEnd(piece, o, NEWLINE_END) : o;
  }
  // S*[\r\n]+ (to the run's last newline), S+(?!NS) (all but its last before a non-space), S+
  const [q, last] = yield* spaceRun(piece, p);
  if (last >= 0) return last + 1;
  return q - p >= 2 && q < piece.length ? q - 1 : q;
}

/** the characters GPT-2's pattern is searched in at a time from where a piece goes on (PieceCursor); tests set it small */
export const longMatchWindow = { chars: SCAN_CHARS };

/** `end`, or one more where it would split a surrogate pair, at most the piece's length */
function windowEnd(piece: string, end: number): number {
  if (end >= piece.length) return piece.length;
  const c = piece.charCodeAt(end - 1);
  return c >= 0xd800 && c <= 0xdbff ? end + 1 : end;
}

const LETTER = /^\p{L}$/u;
const NUMBER = /^\p{N}$/u;

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
 * single match of millions of characters (10M "中" with no space under deepseek-v3's letters; 3M
 * pass; GPT-2's, Llama 3's, Qwen2's patterns and ClassRuns are searched a window at a time) threw a bare "RangeError:
 * Maximum call stack size exceeded".
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
