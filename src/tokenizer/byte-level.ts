/**
 * GPT-2's byte-level alphabet: every byte maps to one printable code point so that byte strings
 * can live in a vocabulary of ordinary strings (space -> "Ġ", newline -> "Ċ"). Printable Latin-1
 * bytes map to themselves; the rest map, in byte order, to U+0100 and up.
 */
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
