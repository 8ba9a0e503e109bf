/**
 * GPT-2's byte-level alphabet: every byte maps to one printable code point so that byte strings
 * can live in a vocabulary of ordinary strings (space -> "Ġ", newline -> "Ċ"). Printable Latin-1
 * bytes map to themselves; the rest map, in byte order, to U+0100 and up.
 */
import { SpmSegmenter } from "./spm.js";
import type { TokenIds } from "./types.js";
import { SCAN_CHARS, type WordCursor } from "./word-run.js";

const BYTE_TO_CHAR: string[] = new Array(256);
const CHAR_TO_BYTE = new Map<number, number>();

{
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const cp = printable(b) ? b : 256 + extra++;
    BYTE_TO_CHAR[b] = String.fromCodePoint(cp);
    CHAR_TO_BYTE.set(cp, b);
  }
}

const utf8 = new TextEncoder();

/** Text -> its UTF-8 bytes written in the byte-level alphabet. */
export function byteLevelEncode(text: string): string {
  let out = "";
  // ASCII is its own UTF-8: no byte array for the (usual) all-ASCII word
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) {
      for (const b of utf8.encode(text.slice(i))) out += BYTE_TO_CHAR[b];
      break;
    }
    out += BYTE_TO_CHAR[c];
  }
  return out;
}

/** The byte a byte-level character stands for, or undefined if it is not in the alphabet. */
export function byteLevelCharToByte(codePoint: number): number | undefined {
  return CHAR_TO_BYTE.get(codePoint);
}

/**
 * Byte-level piece -> raw bytes. Characters outside the alphabet (added tokens stored as plain
 * text) are passed through as their own UTF-8 bytes.
 */
export function byteLevelDecode(piece: string): Uint8Array {
  const out: number[] = [];
  for (const ch of piece) {
    const b = CHAR_TO_BYTE.get(ch.codePointAt(0)!);
    if (b !== undefined) out.push(b);
    else for (const x of utf8.encode(ch)) out.push(x);
  }
  return Uint8Array.from(out);
}

/** what LongByteLevelWords needs of a byte-level vocabulary, made when a first long word comes */
export class ByteLevelCuts {
  private pairs?: SpmSegmenter;
  private longest = 0;
  constructor(private readonly vocab: TokenIds) {}
  /** whether byte-level characters `a` then `b` sit side by side in some token */
  joined(a: number, b: number): boolean {
    if (!this.pairs) {
      this.pairs = new SpmSegmenter(this.vocab.keys(), "code points", false);
      for (const t of this.vocab.keys()) if (t.length > this.longest) this.longest = t.length;
    }
    return this.pairs.joined(a, b);
  }
  /** whether a text's bytes are one token (a text longer than every token is not encoded to see) */
  isToken(text: string): boolean {
    return text.length <= this.longest && this.vocab.has(byteLevelEncode(text));
  }
}

/** words longer than this are cut (LongByteLevelWords); pre-tokenizer words of real text are far shorter */
export const LONG_WORD_CHARS = 1024;

/** the byte-level character of the first UTF-8 byte of the code point at `i` (a lone surrogate is U+FFFD, as TextEncoder has it) */
function firstByteChar(text: string, i: number): number {
  let cp = text.codePointAt(i)!;
  if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
  const b = cp < 0x80 ? cp : cp < 0x800 ? 0xc0 | (cp >> 6) : cp < 0x10000 ? 0xe0 | (cp >> 12) : 0xf0 | (cp >> 18);
  return BYTE_TO_CHAR[b]!.codePointAt(0)!;
}
/** the byte-level character of the last UTF-8 byte of the code point at `i` */
function lastByteChar(text: string, i: number): number {
  let cp = text.codePointAt(i)!;
  if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
  return BYTE_TO_CHAR[cp < 0x80 ? cp : 0x80 | (cp & 0x3f)]!.codePointAt(0)!;
}

/**
 * A pre-tokenizer's words, each one longer than LONG_WORD_CHARS cut where byte-level BPE merges
 * the pieces as it merges the whole word: between two characters whose bytes meet in no token
 * (ByteLevelCuts), no piece being a whole token
 * itself (with ignore_merges a word that is a token skips the merges; a word of LONG_WORD_CHARS
 * never is one). A multi-megabyte word of letters is then many words, and encodeAsync hands the
 * event loop back between them; the merges cost the same. The look for a cut reports a number
 * every SCAN_CHARS characters (WordCursor): a megabyte of one digit has none.
 */
export class LongByteLevelWords implements WordCursor {
  private word?: string;
  private pos = 0;
  /** where the look for the current piece's end goes on (past `pos`), and the byte-level character before it */
  private scan = 0;
  private scanLast = 0;
  constructor(private readonly inner: WordCursor, private readonly cuts: ByteLevelCuts) {}

  next(): string | number | undefined {
    if (this.word === undefined) {
      const w = this.inner.next();
      if (w === undefined || typeof w === "number" || w.length <= LONG_WORD_CHARS) return w;
      this.word = w;
      this.pos = this.scan = 0;
    }
    const w = this.word, cuts = this.cuts, start = this.pos;
    let i = this.scan, last = this.scanLast;
    if (i === start) {
      last = lastByteChar(w, i);
      i += w.codePointAt(i)! > 0xffff ? 2 : 1;
    }
    const from = i;
    for (; i < w.length; i += w.codePointAt(i)! > 0xffff ? 2 : 1) {
      if (i - from >= SCAN_CHARS) {
        this.scan = i; this.scanLast = last;
        return i - from;
      }
      // neither side of the cut a whole token: the last piece is the rest of the word
      if (!cuts.joined(last, firstByteChar(w, i)) && !cuts.isToken(w.slice(start, i)) && !cuts.isToken(w.slice(i))) break;
      last = lastByteChar(w, i);
    }
    this.pos = this.scan = i;
    if (i >= w.length) this.word = undefined;
    return w.slice(start, i);
  }
}
