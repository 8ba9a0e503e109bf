import type { TokenIds } from "./types.js";

export interface WordPieceOptions {
  /** prepended to the first piece of a word: "" for tokenizer.json vocabularies, "▁" for llama.cpp's converted GGUF ones */
  wordPrefix: string;
  /** prepended to every following piece: "##" for tokenizer.json, "" for GGUF */
  continuingPrefix: string;
  unkId: number;
  /** words longer than this many code points become unk (HF's max_input_chars_per_word, 100) */
  maxInputChars: number;
  /** longest vocabulary entry in UTF-16 units, bounds the match search */
  maxTokenLength: number;
}

/**
 * Greedy longest-match-first WordPiece over one pre-tokenized word: take the longest vocabulary
 * entry that starts the rest of the word; if at some point nothing matches, the whole word is unk.
 */
export function wordPieceEncode(word: string, vocab: TokenIds, o: WordPieceOptions, out: number[]): void {
  if (word.length === 0) return;
  let chars = 0;
  for (const _ of word) if (++chars > o.maxInputChars) { out.push(o.unkId); return; }
  const pieces: number[] = [];
  let pos = 0;
  while (pos < word.length) {
    const prefix = pos === 0 ? o.wordPrefix : o.continuingPrefix;
    let found = -1, foundEnd = pos;
    for (let end = Math.min(word.length, pos + o.maxTokenLength); end > pos; end--) {
      // never cut a surrogate pair in half
      const c = word.charCodeAt(end);
      if (end < word.length && c >= 0xdc00 && c <= 0xdfff) continue;
      const id = vocab.get(prefix + word.slice(pos, end));
      if (id !== undefined) { found = id; foundEnd = end; break; }
    }
    if (found < 0) { out.push(o.unkId); return; }
    pieces.push(found);
    pos = foundEnd;
  }
  for (const id of pieces) out.push(id);
}
