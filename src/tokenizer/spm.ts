import { ScoreHeap } from "./heap.js";
import { PairTable } from "./pair-table.js";

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
    this.steps(state, Infinity);
    this.collect(state, byteToken, out);
  }

  /**
   * encode()'s ids made a step at a time: each call does at most `budget` merges and gives the ids
   * once the last is done, undefined before (encodeAsync's long segments: a megabyte of one letter
   * is one segment). The text has buffers of its own, so other encodes may run between steps.
   */
  encodeInSteps(text: string, byteToken: (byte: number, out: number[]) => void): (budget: number) => number[] | undefined {
    const size = text.length;
    const state = this.begin(text, { start: new Int32Array(size), len: new Int32Array(size), next: new Int32Array(size), prev: new Int32Array(size), heap: new ScoreHeap() });
    return (budget) => {
      if (!this.steps(state, budget)) return undefined;
      const out: number[] = [];
      this.collect(state, byteToken, out);
      return out;
    };
  }

  /** the text's symbols (code points, llama.cpp's way) in a linked list, its pairs that are tokens in the heap */
  private begin(text: string, buffers: Omit<SpmState, "text" | "n">): SpmState {
    const { start, len, next, prev, heap } = buffers;
    let n = 0;
    for (let i = 0; i < text.length; i += symbolLength(text, i)) start[n++] = i;
    for (let i = 0; i < n; i++) {
      len[i] = (i + 1 < n ? start[i + 1]! : text.length) - start[i]!;
      next[i] = i + 1 < n ? i + 1 : -1;
      prev[i] = i - 1;
    }
    heap.clear();
    const state: SpmState = { text, n, start, len, next, prev, heap };
    for (let i = 1; i < n; i++) this.tryAdd(state, i - 1, i);
    return state;
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

  private collect(s: SpmState, byteToken: (byte: number, out: number[]) => void, out: number[]): void {
    if (s.n === 0) return;
    const { text, start, len, next } = s;
    for (let i = 0; i >= 0; i = next[i]!) {
      const piece = text.substr(start[i]!, len[i]!);
      const id = this.vocab.get(piece);
      if (id !== undefined) out.push(id);
      else for (const byte of utf8.encode(piece)) byteToken(byte, out);
    }
  }
}

/** one text being merged: its symbols' starts, lengths and neighbours, and its candidate pairs */
interface SpmState {
  readonly text: string;
  readonly n: number;
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

  /** The end of the segment of `text` that starts at `start` (a symbol boundary): the next cut, or the text's end. */
  segmentEnd(text: string, start: number): number {
    if (start >= text.length) return text.length;
    const { llamaCpp, escapeSpaces } = this;
    let prev = escapeSpaces ? escapedCodePoint(text, start) : text.codePointAt(start)!;
    let prevSmall = smallIndex(prev);
    for (let i = start + (llamaCpp ? symbolLength(text, start) : codePointLength(text, start)); i < text.length; i += llamaCpp ? symbolLength(text, i) : codePointLength(text, i)) {
      const key = escapeSpaces ? escapedCodePoint(text, i) : text.codePointAt(i)!;
      const keySmall = smallIndex(key);
      const joined = prevSmall >= 0 && keySmall >= 0 ? this.smallJoins[prevSmall * SMALL + keySmall] === 1 : this.joins.get(prev, key) >= 0;
      if (!joined) return i;
      prev = key;
      prevSmall = keySmall;
    }
    return text.length;
  }
}

/** the segments of a text one at a time (SpmSegmenter's cuts), its spaces not escaped yet */
export class SegmentCursor {
  private pos = 0;
  constructor(private readonly text: string, private readonly segmenter: SpmSegmenter) {}
  next(): string | undefined {
    if (this.pos >= this.text.length) return undefined;
    const start = this.pos;
    this.pos = this.segmenter.segmentEnd(this.text, start);
    return this.text.slice(start, this.pos);
  }
}
