import type { StreamDecoder } from "../types.js";

/** context tokens kept ahead of a stream: enough for a space decision and an open UTF-8 sequence of byte tokens */
const CONTEXT_TOKENS = 8;

/**
 * Streaming detokenization for decoders that only work on whole token sequences (tokenizer.json
 * decoders strip, fuse and byte-combine across tokens). It decodes a small window twice per token:
 * the tokens already emitted that give context, and the same plus the new ones; the difference is
 * the new text. Text ending in U+FFFD (an unfinished UTF-8 sequence of byte tokens) is held back
 * until more tokens or flush() arrive. The window restarts after each emission, so each push costs
 * a few tokens' worth of decoding, not the whole history.
 */
export function windowedStreamDecoder(decode: (ids: number[]) => string, check: (id: number) => void, context: readonly number[] = []): StreamDecoder {
  // the context's last tokens open the window, so the first streamed text is decoded after them
  // (a decoder's start-of-text rules then do not apply to it)
  const ids: number[] = context.slice(-CONTEXT_TOKENS);
  for (const id of ids) check(id);
  let prefixStart = 0; // first token of the context window
  let readEnd = ids.length; // tokens before this index have been emitted
  const step = (final: boolean): string => {
    const prefixText = readEnd > prefixStart ? decode(ids.slice(prefixStart, readEnd)) : "";
    const text = ids.length > prefixStart ? decode(ids.slice(prefixStart)) : "";
    if (text.length <= prefixText.length && !final) return "";
    if (!final && text.endsWith("\uFFFD")) return "";
    prefixStart = readEnd;
    readEnd = ids.length;
    return text.slice(prefixText.length);
  };
  return {
    push(id: number): string {
      check(id);
      ids.push(id);
      return step(false);
    },
    flush(): string {
      return readEnd < ids.length ? step(true) : "";
    },
  };
}
