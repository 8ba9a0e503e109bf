import { isChineseChar } from "./bert-pre.js";
import { byteLevelDecode } from "./byte-level.js";

/**
 * Character offsets of tokens in the text they came from, as Hugging Face tokenizers report
 * them (`return_offsets_mapping`): [start, end) in code points of the original text (Python
 * string indices), the normalizer's changes (lowercasing, accents, spaces around CJK)
 * mapped back to the characters that produced them.
 */
export type Offset = readonly [number, number];

const WHITESPACE = /\p{White_Space}/u;
const OTHER = /\p{C}/u;
const PUNCT = /\p{P}/u;
const MARK = /\p{M}/gu;

function isPunct(ch: string): boolean {
  const cp = ch.codePointAt(0)!;
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126)) return true;
  return PUNCT.test(ch);
}

export interface WordPieceOffsetOptions {
  readonly lowercase: boolean;
  readonly stripAccents: boolean;
  readonly chineseChars: boolean;
  /** the continuing-subword prefix ("##") */
  readonly prefix: string;
  readonly unkPiece?: string;
}

/**
 * WordPiece (BERT): the text is normalized character by character (BertNormalizer), each
 * normalized character remembering its source; the pieces are then found in order ("##kel"
 * continues a word; [UNK] covers a whole word).
 */
export function wordPieceOffsets(text: string, pieces: readonly string[], o: WordPieceOffsetOptions): Offset[] {
  const norm: string[] = [], src: number[] = [];
  let ci = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    const push = (s: string) => { for (const c of s) { norm.push(c); src.push(ci); } };
    if (cp === 0 || cp === 0xfffd) { /* dropped */ } else if (WHITESPACE.test(ch)) push(" ");
    else if (OTHER.test(ch)) { /* dropped */ } else if (o.chineseChars && isChineseChar(cp)) push(` ${ch} `);
    else {
      let s = ch;
      // (one character: no run of marks for normalizeForm to put in order)
      if (o.stripAccents) s = s.normalize("NFD").replace(MARK, "");
      if (o.lowercase) s = s.toLowerCase();
      push(s);
    }
    ci++;
  }
  const out: Offset[] = [];
  let p = 0;
  for (const piece of pieces) {
    while (p < norm.length && norm[p] === " ") p++;
    if (p >= norm.length) { out.push([ci, ci]); continue; }
    let len: number;
    if (piece === o.unkPiece) {
      // the whole word: one punctuation character, or up to the next space or punctuation
      len = 1;
      if (!isPunct(norm[p]!)) while (p + len < norm.length && norm[p + len] !== " " && !isPunct(norm[p + len]!)) len++;
    } else {
      const surface = piece.startsWith(o.prefix) && piece.length > o.prefix.length ? piece.slice(o.prefix.length) : piece;
      len = Math.max(1, Math.min([...surface].length, norm.length - p));
    }
    out.push([src[p]!, src[p + len - 1]! + 1]);
    p += len;
  }
  return out;
}

/**
 * Byte-level BPE (GPT-2, RoBERTa): the pieces' bytes are consecutive in the text's UTF-8; with
 * trim_offsets the spaces a piece carries ("Ġ") are left out of its span.
 */
export function byteLevelOffsets(text: string, pieces: readonly string[], trimOffsets: boolean): Offset[] {
  const bytes = new TextEncoder().encode(text);
  // byte index -> code point index
  const cpAt = new Int32Array(bytes.length + 1);
  let b = 0, ci = 0;
  for (const ch of text) {
    const n = new TextEncoder().encode(ch).length;
    for (let k = 0; k < n; k++) cpAt[b + k] = ci;
    b += n;
    ci++;
  }
  cpAt[bytes.length] = ci;
  const out: Offset[] = [];
  let at = 0;
  for (const piece of pieces) {
    const pb = byteLevelDecode(piece);
    let s = at, e = Math.min(at + pb.length, bytes.length);
    at = e;
    if (trimOffsets) {
      while (s < e && isSpaceByte(bytes[s]!)) s++;
      while (e > s && isSpaceByte(bytes[e - 1]!)) e--;
      if (s === e && pb.length > 0) { s = at - pb.length; e = at; }
    }
    // a piece ending inside a multi-byte character still ends after that character
    const end = e > 0 && e < bytes.length && (bytes[e]! & 0xc0) === 0x80 ? cpAt[e]! + 1 : cpAt[e]!;
    out.push([cpAt[s]!, end]);
  }
  return out;
}

function isSpaceByte(b: number): boolean {
  return b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;
}

/**
 * SentencePiece-style pieces (Metaspace "▁" for spaces, Unigram or BPE, <0xNN> byte fallback):
 * each piece's text, "▁" dropped, is found at the next non-space character of the text; the
 * span leaves the space out ("▁world" in "Hello world" is [6, 11]), as transformers reports it.
 * A piece whose text does not match there (a normalizer changed it) still takes as many
 * characters as it has. Byte pieces take one character when they complete its UTF-8 sequence.
 */
export function metaspaceOffsets(text: string, pieces: readonly string[], marker = "\u2581"): Offset[] {
  const cps = [...text];
  const out: Offset[] = [];
  let p = 0, pendingBytes = 0, byteStart = 0;
  for (const piece of pieces) {
    const byte = /^<0x([0-9A-Fa-f]{2})>$/.exec(piece);
    if (byte) {
      const b = parseInt(byte[1]!, 16);
      if (pendingBytes === 0) {
        while (p < cps.length && WHITESPACE.test(cps[p]!)) p++;
        byteStart = p;
        pendingBytes = b >= 0xf0 ? 3 : b >= 0xe0 ? 2 : b >= 0xc0 ? 1 : 0;
        if (pendingBytes === 0) p++;
      } else if (--pendingBytes === 0) p++;
      out.push([byteStart, pendingBytes === 0 ? p : byteStart + 1]);
      continue;
    }
    const surface = [...piece.split(marker).join("")];
    if (surface.length === 0) {
      // a lone "▁" stands for the space itself
      const ws = p < cps.length && WHITESPACE.test(cps[p]!);
      out.push([p, ws ? p + 1 : p]);
      if (ws) p++;
      continue;
    }
    while (p < cps.length && WHITESPACE.test(cps[p]!)) p++;
    const start = p;
    p = Math.min(cps.length, p + surface.length);
    out.push([start, p]);
  }
  return out;
}
