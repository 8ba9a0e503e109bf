import type { StreamDecoder } from "../types.js";
import { cleanUpTokenization } from "./decoder.js";

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
  for (const id of context) check(id);
  // a window that decodes to nothing (special tokens skipped) would leave the first streamed token
  // at the text's start, where a decoder drops its space (WordPiece): earlier tokens are taken in,
  // twice as many each time, until the window shows text or holds the whole context
  let width = CONTEXT_TOKENS;
  while (width < context.length && decode(context.slice(-width)) === "") width *= 2;
  const ids: number[] = context.slice(-width);
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

/** what clean_up_tokenization rewrites, after the space each starts with */
const CLEANUP_TAILS = [".", "?", "!", ",", "' ", "n't", "'m", "'s", "'ve", "'re"];

/**
 * The texts from a space to a cut that a rewrite starting at that space may still reach across,
 * with the part of its tail they have shown: the shown part is a proper beginning of a tail, and
 * only a " ' " inside it can have lost its spaces before (every other rewrite needs a character
 * none of these has) — " n" has shown the "n" of " n't", "  ' " the "'" of " 's".
 */
const OPEN_STARTS: readonly (readonly [string, string])[] = [
  [" ", ""], [" n", "n"], [" n'", "n'"], [" n ' ", "n'"], [" '", "'"], ["  ' ", "'"], [" 'v", "'v"], ["  ' v", "'v"], [" 'r", "'r"], ["  ' r", "'r"],
];

/** whether `rest` (what a tail still needs) can come next in `text` from `i` (beyond its end: anything can) */
function canContinue(rest: string, text: string, i: number): boolean {
  if (rest === "" || i >= text.length) return true;
  if (text[i] === rest[0]) return canContinue(rest.slice(1), text, i + 1);
  // a " ' " there loses its spaces (" ' " -> "'") before the contractions are rewritten: its "'" goes on the tail
  if (rest[0] === "'" && text[i] === " " && (i + 1 >= text.length || (text[i + 1] === "'" && (i + 2 >= text.length || text[i + 2] === " ")))) return canContinue(rest.slice(1), text, i + 3);
  return false;
}

/** whether some rewrite starting before `cut` may reach across it, given the text after it */
function openAt(text: string, cut: number): boolean {
  for (const [start, shown] of OPEN_STARTS) {
    if (cut < start.length || !text.startsWith(start, cut - start.length)) continue;
    for (const tail of CLEANUP_TAILS) if (tail.length > shown.length && tail.startsWith(shown) && canContinue(tail.slice(shown.length), text, cut)) return true;
  }
  return false;
}

/**
 * Where the text of a stream under transformers' clean_up_tokenization (cleanUpTokenization) can
 * be cut: the last point no rewrite may reach across, whatever text comes later (it only removes
 * spaces, and every rewrite starts with one): the text before it cleans up alone as it does within
 * the whole. Mostly the end; before " n" or a trailing space; further back only in runs such as
 * " ' ' ' '", whose rewrites pair up from their start.
 */
function cleanUpCut(text: string): number {
  let cut = text.length;
  while (cut > 0 && openAt(text, cut)) cut--;
  return cut;
}

/**
 * `raw` (a stream of the decoder's text) with transformers' clean_up_tokenization applied, as
 * decode applies it to the whole text: a chunk's tail that a later one may still rewrite (" ",
 * " n", " '"...) is held until the text that follows decides it. `contextText` is the context's
 * own text before clean-up: the stream yields what transformers' text-generation pipeline
 * returns, clean(context + streamed) less the first clean(context).length characters (a prompt
 * ending in " " before a streamed "." loses that "." there too).
 */
export function cleanUpStream(raw: StreamDecoder, contextText = ""): StreamDecoder {
  // the context's tail that its continuation may still rewrite, and how much of its clean text was the context's
  let held = contextText.slice(cleanUpCut(contextText));
  let skip = cleanUpTokenization(held).length;
  const emit = (text: string): string => {
    if (skip === 0 || text === "") return text;
    const drop = Math.min(skip, text.length);
    skip -= drop;
    return text.slice(drop);
  };
  return {
    push(id: number): string {
      held += raw.push(id);
      const cut = cleanUpCut(held);
      if (cut === 0) return "";
      const ready = held.slice(0, cut);
      held = held.slice(cut);
      return emit(cleanUpTokenization(ready));
    },
    flush(): string {
      const rest = held + raw.flush();
      held = "";
      return emit(cleanUpTokenization(rest));
    },
  };
}
