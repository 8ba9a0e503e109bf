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

/**
 * Where the text of a stream under transformers' clean_up_tokenization (cleanUpTokenization) can
 * be cut: every text it rewrites is a space followed by at most three of "n", "'", "v", "r" and
 * then one more character (" n't", " 've", " ' ", " ." ...), and it only ever removes spaces, so no
 * rewrite, even one a previous rewrite made possible, reaches across a point that no space
 * precedes within the text's trailing run of " n'vr". The cut is that run's first space (the end
 * when the run holds none): the text before it cleans up alone as it does within the whole.
 */
function cleanUpCut(text: string): number {
  let run = text.length;
  while (run > 0 && " n'vr".includes(text[run - 1]!)) run--;
  const space = text.indexOf(" ", run);
  return space < 0 ? text.length : space;
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
