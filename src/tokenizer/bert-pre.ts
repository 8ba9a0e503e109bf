/**
 * BERT text normalization and word splitting with the semantics of HF tokenizers' BertNormalizer
 * (clean_text, handle_chinese_chars, strip_accents, lowercase) followed by BertPreTokenizer
 * (split on whitespace, isolate punctuation).
 */
export interface BertNormalizeOptions {
  lowercase: boolean;
  stripAccents: boolean;
  /** put spaces around CJK ideographs so each becomes its own word */
  chineseChars: boolean;
}

const WHITESPACE = /\p{White_Space}/u;
const OTHER = /\p{C}/u; // control, format, surrogate, private use, unassigned
const PUNCT = /\p{P}/u;
const MARK = /\p{M}/gu;

/** The CJK Unified Ideograph blocks BERT treats as single-character words (as in the original BERT code). */
export function isChineseChar(cp: number): boolean {
  return (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3400 && cp <= 0x4dbf) || (cp >= 0x20000 && cp <= 0x2a6df) ||
    (cp >= 0x2a700 && cp <= 0x2b73f) || (cp >= 0x2b740 && cp <= 0x2b81f) || (cp >= 0x2b920 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0x2f800 && cp <= 0x2fa1f);
}

function isBertPunctuation(ch: string, cp: number): boolean {
  // all ASCII non-alphanumeric printables count, symbols such as $ + < = > ^ ` | ~ included
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126)) return true;
  return cp >= 0x80 && PUNCT.test(ch);
}

export function bertNormalize(text: string, o: BertNormalizeOptions): string {
  let s = "";
  // ASCII has no decompositions, marks or case rules past A-Z: such text skips those steps
  let ascii = true;
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    if (cp === 0 || cp === 0xfffd) continue;
    if (isWhitespace(cp)) { s += " "; continue; }
    if (cp < 0x80 ? cp < 0x20 || cp === 0x7f : OTHER.test(ch)) continue;
    if (cp >= 0x80) ascii = false;
    s += o.chineseChars && isChineseChar(cp) ? ` ${ch} ` : ch;
  }
  if (ascii) return o.lowercase ? s.toLowerCase() : s;
  if (o.stripAccents) s = s.normalize("NFD").replace(MARK, "");
  if (o.lowercase) {
    // per character, like HF: no context-dependent rules such as the final-sigma form
    let lower = "";
    for (const ch of s) lower += ch.toLowerCase();
    s = lower;
  }
  return s;
}

/** Splits normalized text into words: whitespace separates, each punctuation character stands alone. */
export function bertSplit(text: string): string[] {
  const words: string[] = [];
  let cur = "";
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    if (isWhitespace(cp)) {
      if (cur) { words.push(cur); cur = ""; }
    } else if (isBertPunctuation(ch, cp)) {
      if (cur) { words.push(cur); cur = ""; }
      words.push(ch);
    } else {
      cur += ch;
    }
  }
  if (cur) words.push(cur);
  return words;
}

/**
 * The pieces of raw text that bertNormalize + bertSplit handle independently, one at a time: runs
 * between whitespace, and each CJK ideograph alone (whitespace is skipped: it makes no words).
 * Normalization maps character by character, and what follows (NFD, dropping marks, lowercasing,
 * splitting) never crosses the space that whitespace becomes or that surrounds an ideograph:
 * canonical reordering moves only combining marks, and a space is none. So the words of a text are
 * its chunks' words in order, and a chunk that comes again can reuse its ids.
 */
export class BertChunkCursor {
  private pos = 0;

  constructor(private readonly text: string) {}

  next(): string | undefined {
    const text = this.text;
    let i = this.pos;
    // past whitespace
    while (i < text.length) {
      const cp = text.codePointAt(i)!;
      if (!isWhitespace(cp)) break;
      i += cp > 0xffff ? 2 : 1;
    }
    if (i >= text.length) { this.pos = i; return undefined; }
    const start = i;
    const first = text.codePointAt(i)!;
    i += first > 0xffff ? 2 : 1;
    if (!isChineseChar(first)) {
      while (i < text.length) {
        const cp = text.codePointAt(i)!;
        if (isWhitespace(cp) || isChineseChar(cp)) break;
        i += cp > 0xffff ? 2 : 1;
      }
    }
    this.pos = i;
    return text.slice(start, i);
  }
}

/** bertNormalize's whitespace (\p{White_Space}), ASCII answered without the regex */
function isWhitespace(cp: number): boolean {
  if (cp < 0x80) return cp === 0x20 || (cp >= 0x09 && cp <= 0x0d);
  return WHITESPACE.test(String.fromCodePoint(cp));
}
