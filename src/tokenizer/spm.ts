import { ScoreHeap } from "./heap.js";
import { PairTable } from "./pair-table.js";
import { SCAN_CHARS, SpellingInSteps, type LongWordSteps, type WordCursor } from "./word-run.js";

const utf8 = new TextEncoder();

/**
 * SentencePiece-style BPE as llama.cpp runs it for `llama` vocabularies: start from single code
 * points, repeatedly merge the adjacent pair whose concatenation is the highest-scoring token
 * (leftmost on ties), then emit each final symbol as its token or, when it is not one, as byte
 * tokens via `byteToken`. Spaces must already be escaped to "▁" by the caller.
 * Symbols stay contiguous slices of `text`, so a pair's text is one slice. One merger serves a
 * vocabulary's words one after another, its buffers reused.
 */
export class SpmMerger {
  private start = new Int32Array(64);
  private len = new Int32Array(64);
  private next = new Int32Array(64);
  private prev = new Int32Array(64);
  private readonly heap = new ScoreHeap();

  constructor(private readonly vocab: ReadonlyMap<string, number>, private readonly scores: ArrayLike<number>) {}

  encode(text: string, byteToken: (byte: number, out: number[]) => void, out: number[]): void {
    if (this.start.length < text.length) {
      const size = Math.max(text.length, 2 * this.start.length);
      this.start = new Int32Array(size); this.len = new Int32Array(size); this.next = new Int32Array(size); this.prev = new Int32Array(size);
    }
    const state = this.begin(text, { start: this.start, len: this.len, next: this.next, prev: this.prev, heap: this.heap });
    this.addSymbols(state, Infinity);
    this.steps(state, Infinity);
    this.collect(state, byteToken, out, Infinity);
  }

  /**
   * encode(spell(word))'s ids made a step at a time: each call does about `budget` characters'
   * work (spelling the word, reading its symbols, a merge each, an id each into `out` once the
   * merges are done) and says whether the word is done (LongWordSteps; encodeAsync's long segments: a megabyte of one letter is one
   * segment). The text has buffers of its own, so other encodes may run between steps.
   */
  encodeInSteps(word: string, spell: (text: string) => string, byteToken: (byte: number, out: number[]) => void): LongWordSteps {
    const spelling = new SpellingInSteps(word, spell);
    let state: SpmState | undefined;
    return (budget, out) => {
      let left = budget;
      if (!state) {
        left -= spelling.step(left);
        const text = spelling.text;
        if (text === undefined) return false;
        const size = text.length;
        state = this.begin(text, { start: new Int32Array(size), len: new Int32Array(size), next: new Int32Array(size), prev: new Int32Array(size), heap: new ScoreHeap() });
      }
      left -= this.addSymbols(state, left);
      if (state.at < state.text.length) return false;
      // (the merges and the ids' collection each take up to a budget: a slice does at most twice its share)
      return this.steps(state, left) && this.collect(state, byteToken, out, budget);
    };
  }

  /** a text to merge, no symbol read yet (addSymbols reads them) */
  private begin(text: string, buffers: Omit<SpmState, "text" | "n" | "at" | "collected">): SpmState {
    buffers.heap.clear();
    return { text, n: 0, at: 0, collected: 0, ...buffers };
  }

  /**
   * reads up to `budget` more symbols (code points, llama.cpp's way) into the linked list, each
   * one's pair with the symbol before it into the heap if it is a token (left to right, as all at
   * once); the number read
   */
  private addSymbols(s: SpmState, budget: number): number {
    const { text, start, len, next, prev } = s;
    let n = s.n, at = s.at;
    const last = n + Math.max(1, budget);
    for (; at < text.length && n < last; n++) {
      const units = symbolLength(text, at);
      start[n] = at;
      len[n] = units;
      at += units;
      next[n] = -1;
      prev[n] = n - 1;
      if (n > 0) {
        next[n - 1] = n;
        this.tryAdd(s, n - 1, n);
      }
    }
    const read = n - s.n;
    s.n = n; s.at = at;
    return read;
  }

  private tryAdd(s: SpmState, left: number, right: number): void {
    if (left < 0 || right < 0) return;
    const size = s.len[left]! + s.len[right]!;
    const id = this.vocab.get(s.text.substr(s.start[left]!, size));
    if (id !== undefined) s.heap.push(this.scores[id] ?? 0, left, size);
  }

  /** pops up to `budget` candidates; true once none is left */
  private steps(s: SpmState, budget: number): boolean {
    const { len, next, prev, heap } = s;
    for (let popped = 0; heap.size > 0; popped++) {
      if (popped >= budget) return false;
      heap.pop();
      const left = heap.poppedLeft, right = next[left]!;
      // stale: the left symbol was merged into its neighbour, or either side has grown since
      if (len[left] === 0 || right < 0 || len[left]! + len[right]! !== heap.poppedSize) continue;
      len[left] = heap.poppedSize;
      len[right] = 0;
      const after = next[right]!;
      next[left] = after;
      if (after >= 0) prev[after] = left;
      this.tryAdd(s, prev[left]!, left);
      this.tryAdd(s, left, after);
    }
    return true;
  }

  /** appends the ids of up to `budget` more of the merged text's symbols; true once all are in */
  private collect(s: SpmState, byteToken: (byte: number, out: number[]) => void, out: number[], budget: number): boolean {
    const { text, start, len, next } = s;
    let i = s.n === 0 ? -1 : s.collected;
    for (let k = 0; i >= 0 && k < budget; i = next[i]!, k++) {
      const piece = text.substr(start[i]!, len[i]!);
      const id = this.vocab.get(piece);
      if (id !== undefined) out.push(id);
      else for (const byte of utf8.encode(piece)) byteToken(byte, out);
    }
    s.collected = i;
    return i < 0;
  }
}

/** one text being merged: its symbols' starts, lengths and neighbours, and its candidate pairs */
interface SpmState {
  readonly text: string;
  /** symbols read so far */
  n: number;
  /** where the next symbol starts in the text */
  at: number;
  /** the next symbol whose ids collect() appends (-1: all are in) */
  collected: number;
  readonly start: Int32Array;
  readonly len: Int32Array;
  readonly next: Int32Array;
  readonly prev: Int32Array;
  readonly heap: ScoreHeap;
}

/** SpmMerger's encoding of one text (a merger kept per vocabulary reuses its buffers) */
export function spmEncode(
  text: string,
  vocab: ReadonlyMap<string, number>,
  scores: ArrayLike<number>,
  byteToken: (byte: number, out: number[]) => void,
  out: number[],
): void {
  new SpmMerger(vocab, scores).encode(text, byteToken, out);
}

/** UTF-16 units of the symbol at `i`: a high surrogate takes the unit after it along, whatever it is */
function symbolLength(text: string, i: number): number {
  const c = text.charCodeAt(i);
  return c >= 0xd800 && c <= 0xdbff && i + 1 < text.length ? 2 : 1;
}

/** ASCII and "▁": SpmSegmenter's small alphabet */
const SMALL = 0x81;
const smallIndex = (cp: number): number => (cp < 0x80 ? cp : cp === 0x2581 ? 0x80 : -1);
/** the code point at `i` of the text with its spaces escaped to "▁" */
const escapedCodePoint = (text: string, i: number): number => { const cp = text.codePointAt(i)!; return cp === 0x20 ? 0x2581 : cp; };
/** UTF-16 units of the code point at `i` (a lone surrogate is one) */
const codePointLength = (text: string, i: number): number => (text.codePointAt(i)! > 0xffff ? 2 : 1);

/**
 * How a segmenter steps through text: as llama.cpp's SentencePiece merger does (spmEncode: a high
 * surrogate takes the next unit along), or as Hugging Face's BPE model does (code points, a lone
 * surrogate alone).
 */
export type SegmenterSymbols = "llama.cpp" | "code points";

/**
 * Where a text can be cut into pieces that a merger (SentencePiece's best score first, or BPE's
 * lowest merge rank first, leftmost on ties) merges exactly as it merges the whole text. Every
 * merged symbol is a vocabulary token, so two neighbouring symbols that sit side by side in no
 * token are never joined; the merges on either side of them never meet, and each side merges in
 * the same order alone (the best pair of a side is the best of that side either way, the leftmost
 * on ties). A text is mostly such cuts ("▁the" | "▁cat"), so its segments repeat and their ids
 * can be remembered.
 */
export class SpmSegmenter {
  /** (symbol, next symbol) pairs, by code point, that occur side by side in some token */
  private readonly joins = new PairTable(1 << 16);
  /** the same for the pairs of ASCII and "▁" (most of most text), read without hashing */
  private readonly smallJoins = new Uint8Array(SMALL * SMALL);
  private readonly llamaCpp: boolean;

  /**
   * `escapeSpaces`: text is read with its spaces as "▁", so that the caller escapes only the
   * segments it has not seen before (escaping megabytes at once held a server for 300 ms).
   */
  constructor(tokens: Iterable<string>, symbols: SegmenterSymbols = "llama.cpp", private readonly escapeSpaces = true) {
    this.llamaCpp = symbols === "llama.cpp";
    const step = this.llamaCpp ? symbolLength : codePointLength;
    for (const t of tokens) {
      // symbols as the merger steps through text; a pair of text symbols inside a merged symbol is a pair of the token's
      let i = 0, prev = -1;
      while (i < t.length) {
        const key = t.codePointAt(i)!;
        if (prev >= 0) {
          this.joins.add(prev, key, 0);
          const a = smallIndex(prev), b = smallIndex(key);
          if (a >= 0 && b >= 0) this.smallJoins[a * SMALL + b] = 1;
        }
        prev = key;
        i += step(t, i);
      }
    }
  }

  /** whether code points `a` then `b` sit side by side in some token */
  joined(a: number, b: number): boolean {
    const sa = smallIndex(a), sb = smallIndex(b);
    return sa >= 0 && sb >= 0 ? this.smallJoins[sa * SMALL + sb] === 1 : this.joins.get(a, b) >= 0;
  }

  /**
   * The end of the segment of `text` that starts at `start` (a symbol boundary): the next cut, or
   * the text's end. With a `limit`, a negative number -i where no cut was found within about
   * `limit` units: the look goes on from the symbol at i (the pairs up to it are joined).
   */
  segmentEnd(text: string, start: number, limit = Infinity): number {
    if (start >= text.length) return text.length;
    const { llamaCpp, escapeSpaces } = this;
    let prev = escapeSpaces ? escapedCodePoint(text, start) : text.codePointAt(start)!;
    let prevSmall = smallIndex(prev);
    for (let i = start + (llamaCpp ? symbolLength(text, start) : codePointLength(text, start)); i < text.length; i += llamaCpp ? symbolLength(text, i) : codePointLength(text, i)) {
      const key = escapeSpaces ? escapedCodePoint(text, i) : text.codePointAt(i)!;
      const keySmall = smallIndex(key);
      const joined = prevSmall >= 0 && keySmall >= 0 ? this.smallJoins[prevSmall * SMALL + keySmall] === 1 : this.joins.get(prev, key) >= 0;
      if (!joined) return i;
      if (i - start >= limit) return -i;
      prev = key;
      prevSmall = keySmall;
    }
    return text.length;
  }
}

/**
 * the segments of a text one at a time (SpmSegmenter's cuts), its spaces not escaped yet; a
 * number when SCAN_CHARS more were read and the segment goes on (WordCursor)
 */
export class SegmentCursor implements WordCursor {
  private pos = 0;
  /** where the look for the current segment's end goes on */
  private scan = 0;
  constructor(private readonly text: string, private readonly segmenter: SpmSegmenter) {}
  next(): string | number | undefined {
    if (this.pos >= this.text.length) return undefined;
    const from = this.scan;
    const end = this.segmenter.segmentEnd(this.text, from, SCAN_CHARS);
    if (end < 0) {
      this.scan = -end;
      return -end - from;
    }
    const start = this.pos;
    this.pos = this.scan = end;
    return this.text.slice(start, end);
  }
}
