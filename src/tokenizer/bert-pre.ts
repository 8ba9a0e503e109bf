import { normalizeForm } from "./normalize.js";
import { SCAN_CHARS, type LongWordSteps } from "./word-run.js";

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
  if (o.stripAccents) s = normalizeForm(s, "NFD").replace(MARK, "");
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
  /** where the chunk being looked through started (-1: none) */
  private start = -1;

  constructor(private readonly text: string) {}

  /** the next chunk, or the number of characters looked through for the end of a long one (SCAN_CHARS) */
  next(): string | number | undefined {
    const text = this.text;
    let i = this.pos;
    if (this.start < 0) {
      // past whitespace
      while (i < text.length) {
        const cp = text.codePointAt(i)!;
        if (!isWhitespace(cp)) break;
        i += cp > 0xffff ? 2 : 1;
      }
      if (i >= text.length) { this.pos = i; return undefined; }
      this.start = i;
      const first = text.codePointAt(i)!;
      i += first > 0xffff ? 2 : 1;
      if (isChineseChar(first)) { this.pos = i; this.start = -1; return text.slice(i - (first > 0xffff ? 2 : 1), i); }
    }
    const from = i, stop = Math.min(text.length, from + SCAN_CHARS);
    while (i < text.length) {
      const cp = text.codePointAt(i)!;
      if (isWhitespace(cp) || isChineseChar(cp)) break;
      if (i >= stop) { this.pos = i; return i - from; }
      i += cp > 0xffff ? 2 : 1;
    }
    const start = this.start;
    this.pos = i;
    this.start = -1;
    return text.slice(start, i);
  }
}

/** bertNormalize's whitespace (\p{White_Space}), ASCII answered without the regex */
function isWhitespace(cp: number): boolean {
  if (cp < 0x80) return cp === 0x20 || (cp >= 0x09 && cp <= 0x0d);
  return WHITESPACE.test(String.fromCodePoint(cp));
}

/**
 * One long chunk (BertChunkCursor's: a megabyte of letters with no white space) normalized and
 * split into words a step of about `budget` characters at a time (LongWordSteps), each word's ids
 * appended by `encode` as it is found (encodeAsync: before, the chunk was normalized, split and
 * encoded in one go; a word is cheap to encode, WordPiece making [UNK] of one past 100
 * characters). The chunk is normalized in pieces cut before a character that is no mark (\p{M}):
 * bertNormalize maps character by character but for NFD, which reorders and decomposes only
 * within a run of marks after a starter, and every character of a nonzero combining class is a
 * mark; the pieces' results joined are the whole's. The split then goes on where the last step
 * stopped.
 */
export function bertLongChunk(chunk: string, o: BertNormalizeOptions, encode: (word: string, out: number[]) => void): LongWordSteps {
  const parts: string[] = [];
  let at = 0;
  let text: string | undefined;
  /** where the split goes on, and where the word it is in started (-1: none) */
  let pos = 0, wordStart = -1;
  return (budget, out) => {
    let done = 0;
    while (text === undefined) {
      let end = Math.min(chunk.length, at + Math.max(1, budget - done));
      while (end < chunk.length) {
        const cp = chunk.codePointAt(end)!;
        if ((cp < 0xdc00 || cp > 0xdfff) && !MARK_ONE.test(String.fromCodePoint(cp))) break;
        end++;
      }
      parts.push(bertNormalize(chunk.slice(at, end), o));
      done += end - at;
      at = end;
      if (at === chunk.length) { text = parts.join(""); parts.length = 0; }
      if (done >= budget) return false;
    }
    while (pos < text.length) {
      if (done >= budget) return false;
      const cp = text.codePointAt(pos)!;
      const width = cp > 0xffff ? 2 : 1;
      const ch = width === 1 ? text[pos]! : text.slice(pos, pos + 2);
      if (isWhitespace(cp) || isBertPunctuation(ch, cp)) {
        if (wordStart >= 0) { encode(text.slice(wordStart, pos), out); wordStart = -1; }
        if (!isWhitespace(cp)) encode(ch, out);
      } else if (wordStart < 0) wordStart = pos;
      pos += width;
      done++;
    }
    if (wordStart >= 0) { encode(text.slice(wordStart), out); wordStart = -1; }
    return true;
  };
}

const MARK_ONE = /^\p{M}$/u;
