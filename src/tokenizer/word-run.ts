import type { Fragment, SpecialSplit } from "./special-split.js";
import type { WordCache } from "./word-cache.js";

/**
 * How much text encodeAsync encodes between turns of the event loop: ~32K characters take a few
 * milliseconds at the word cache's speed and tens where every word is new.
 */
export const ASYNC_SLICE_CHARS = 1 << 15;

/**
 * the words of one text fragment, one at a time (pre-tokenizer pieces, SentencePiece segments, BERT
 * chunks); a number: that many characters were read looking for the end of a word not found yet
 * (a cursor that looks for cuts in a long word stops every SCAN_CHARS, so that the looking does
 * not hold the event loop: a megabyte of one digit is one word)
 */
export interface WordCursor {
  next(): string | number | undefined;
  /**
   * set once next() has answered undefined: the token id the whole fragment stands for, found only
   * at its end (a long section normalized a chunk at a time into an added token's text)
   */
  readonly id?: number;
}

/** how far a cursor reads looking for the end of a word before it reports a number (WordCursor) */
export const SCAN_CHARS = 1 << 14;

/** an encode in progress: the text's fragments, the words of the current one, the ids so far */
export interface WordRun {
  /** the fragments found so far: all of them once `split` is done (or absent) */
  readonly fragments: readonly Fragment[];
  /** finds the rest of `fragments` a stretch of text at a time */
  readonly split?: SpecialSplit;
  /** the next fragment to start */
  index: number;
  /** the words left of the fragment before `index`, if it is text */
  words?: WordCursor;
  readonly ids: number[];
  /** a long word being merged a step at a time (WordEncoder.longWord), its ids going into `ids` at its end */
  pending?: LongWordSteps;
}

/** how one tokenizer turns the text fragments of a run into words, and words into ids */
export interface WordEncoder {
  /** the words of text fragment `index` of `fragments`, or the id the whole fragment stands for */
  words(fragments: readonly Fragment[], index: number): WordCursor | number;
  /** appends the ids of one word */
  encodeWord(word: string, out: number[]): void;
  /**
   * for a word over LONG_WORD_STEPS characters, its ids made a step of about `budget` characters'
   * work at a time, where encodeWord cannot stop midway; absent: encodeWord
   */
  longWord?(word: string): LongWordSteps | undefined;
}

/**
 * a long word's encoding a step of about `budget` characters' work at a time: true once done; its
 * ids go into `out` at the end, in steps too (nothing else may be appended to `out` meanwhile)
 */
export type LongWordSteps = (budget: number, out: number[]) => boolean;

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
    if (!run.pending!(budget - done, ids)) return false;
    run.pending = undefined;
    return true;
  };
  if (run.pending && !stepLong()) return false;
  for (;;) {
    if (run.words) {
      for (let word = run.words.next(); word !== undefined; word = run.words.next()) {
        if (typeof word === "number") {
          done += word;
          if (done >= budget) return false;
          continue;
        }
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
      if (run.words.id !== undefined) ids.push(run.words.id);
      run.words = undefined;
    }
    if (run.index === fragments.length) {
      if (!run.split || run.split.done) return true;
      done += run.split.scan(budget - done);
      if (done >= budget) return false;
      continue;
    }
    const f = fragments[run.index++]!;
    const words = typeof f === "number" ? f : encoder.words(fragments, run.index - 1);
    if (typeof words === "number") ids.push(words);
    else run.words = words;
  }
}

/**
 * A long word's spelling for its merger (its UTF-8 bytes in the byte-level alphabet, its spaces as
 * "▁") made a chunk at a time: `spell` is applied to pieces cut between code points, where the
 * pieces' spellings join into the whole's (spelling a megabyte of CJK at once took 0.6 s).
 */
export class SpellingInSteps {
  private readonly parts: string[] = [];
  private at = 0;
  private spelled?: string;
  constructor(private readonly word: string, private readonly spell: (text: string) => string) {}

  /** the spelled word once done, else undefined */
  get text(): string | undefined { return this.spelled; }

  /** spells about `budget` more characters (at least one); the number spelled */
  step(budget: number): number {
    const { word } = this;
    if (this.spelled !== undefined) return 0;
    const from = this.at;
    let end = Math.min(word.length, from + Math.max(1, budget));
    // a surrogate pair stays in one piece
    const c = word.charCodeAt(end - 1);
    if (end < word.length && c >= 0xd800 && c <= 0xdbff) end++;
    this.parts.push(this.spell(from === 0 && end === word.length ? word : word.slice(from, end)));
    this.at = end;
    if (end === word.length) this.spelled = this.parts.length === 1 ? this.parts[0]! : this.parts.join("");
    return end - from;
  }
}
