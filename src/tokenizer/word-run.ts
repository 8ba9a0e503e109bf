import type { Fragment } from "./special-split.js";
import type { WordCache } from "./word-cache.js";

/**
 * How much text encodeAsync encodes between turns of the event loop: ~32K characters take a few
 * milliseconds at the word cache's speed and tens where every word is new.
 */
export const ASYNC_SLICE_CHARS = 1 << 15;

/** the words of one text fragment, one at a time (pre-tokenizer pieces, SentencePiece segments, BERT chunks) */
export interface WordCursor { next(): string | undefined }

/** an encode in progress: the text's fragments, the words of the current one, the ids so far */
export interface WordRun {
  readonly fragments: readonly Fragment[];
  /** the next fragment to start */
  index: number;
  /** the words left of the fragment before `index`, if it is text */
  words?: WordCursor;
  readonly ids: number[];
  /** a long word being merged a step at a time (WordEncoder.longWord), its ids not yet in `ids` */
  pending?: (budget: number) => number[] | undefined;
}

/** how one tokenizer turns the text fragments of a run into words, and words into ids */
export interface WordEncoder {
  /** the words of text fragment `index` of `fragments`, or the id the whole fragment stands for */
  words(fragments: readonly Fragment[], index: number): WordCursor | number;
  /** appends the ids of one word */
  encodeWord(word: string, out: number[]): void;
  /**
   * for a word over LONG_WORD_STEPS characters, its ids made a step of about `budget` characters'
   * work at a time (undefined until done), where encodeWord cannot stop midway; absent: encodeWord
   */
  longWord?(word: string): ((budget: number) => number[] | undefined) | undefined;
}

/** words longer than this are merged a step at a time (WordEncoder.longWord), not cached */
export const LONG_WORD_STEPS = 1 << 14;

/**
 * Encodes words of `run` until about `budget` characters are done (a special token's id goes in
 * as it comes); true once every fragment is done. The ids of a word are remembered in `cache`:
 * text repeats its words constantly. Stopping between words is what lets encodeAsync hand the
 * event loop back mid-text: encoding goes on with the same ids as in one go.
 */
export function advanceWords(run: WordRun, budget: number, cache: WordCache, encoder: WordEncoder): boolean {
  const { ids, fragments } = run;
  let done = 0;
  // a long word's merges go on where the last slice stopped: a budget's worth per slice
  const stepLong = (): boolean => {
    const out = run.pending!(budget - done);
    if (!out) return false;
    for (let i = 0; i < out.length; i++) ids.push(out[i]!);
    run.pending = undefined;
    return true;
  };
  if (run.pending && !stepLong()) return false;
  for (;;) {
    if (run.words) {
      for (let word = run.words.next(); word !== undefined; word = run.words.next()) {
        const hit = cache.get(word);
        const steps = !hit && word.length > LONG_WORD_STEPS ? encoder.longWord?.(word) : undefined;
        if (hit) for (let i = 0; i < hit.length; i++) ids.push(hit[i]!);
        else if (steps) {
          run.pending = steps;
          if (!stepLong()) return false;
        } else {
          const from = ids.length;
          encoder.encodeWord(word, ids);
          cache.set(word, ids.slice(from));
        }
        done += word.length;
        if (done >= budget) return false;
      }
      run.words = undefined;
    }
    if (run.index === fragments.length) return true;
    const f = fragments[run.index++]!;
    const words = typeof f === "number" ? f : encoder.words(fragments, run.index - 1);
    if (typeof words === "number") ids.push(words);
    else run.words = words;
  }
}
