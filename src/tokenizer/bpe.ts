import { NumberHeap } from "./heap.js";
import { PairTable } from "./pair-table.js";
import type { TokenIds } from "./types.js";
import { WordCache } from "./word-cache.js";
import { SpellingInSteps, type LongWordSteps } from "./word-run.js";

export interface BPEOptions {
  /** when a whole word is already a token, emit it without merging (llama3's and HF's `ignore_merges`) */
  ignoreMerges?: boolean;
  /** appends ids for a starting symbol that is not in the vocabulary (byte fallback, unk, or nothing) */
  fallback?: (symbol: string, out: number[]) => void;
  /** about how many distinct words to remember (text repeats words constantly; WordCache keeps up to twice this); 0 disables the cache */
  cacheSize?: number;
  /**
   * names merge i in the error a merge outside the vocabulary raises (checkMerges' message,
   * found by the lookups the table needs anyway); absent: such a merge is skipped
   */
  mergeName?: (index: number) => string;
}

/** characters below this look their ids up in a table (the byte-level alphabet ends at U+0143) */
const SMALL_CHARS = 0x400;

/**
 * Rank-ordered byte-pair encoding over one pre-tokenized word, independent of where the vocabulary
 * came from (GGUF `tokenizer.ggml.merges` or a tokenizer.json `model.merges`). Symbols start as
 * single code points; the pair with the lowest merge rank (leftmost on ties) is merged until no
 * ranked pair is left. Symbols live in a doubly linked list and candidate pairs in a heap, so a
 * long word (a line of Chinese with no spaces) costs O(n log n).
 */
export class BPE {
  private readonly merges: MergeTable;
  /** the merges' pair ranks (read at every candidate pair) */
  private readonly pairRank: PairTable;
  private readonly cache: WordCache;
  /** merges of a pair an earlier merge already ranks (they never fire: the first rank wins) */
  readonly repeatedMerges: number;
  /** candidate pairs of the word being merged, reused from word to word */
  private readonly heap = new NumberHeap();
  /** the ids of the one-unit symbols below U+0400 (all of the byte-level alphabet), -1 where none */
  private readonly smallCharIds = new Int32Array(SMALL_CHARS);
  /** per symbol of the word being merged: its id, neighbours and start in the word (reused buffers) */
  private ids = new Int32Array(64);
  private next = new Int32Array(64);
  private prev = new Int32Array(64);
  private start = new Int32Array(64);

  /**
   * `merges`: the pairs of texts in rank order (each looked up in `vocab`), or a MergeTable made
   * from their ids already (one shared by encoders over the same merges).
   */
  constructor(
    private readonly vocab: TokenIds,
    merges: ReadonlyArray<readonly [string, string]> | MergeTable,
    private readonly options: BPEOptions = {},
  ) {
    this.merges = merges instanceof MergeTable ? merges : MergeTable.fromTexts(vocab, merges, options.mergeName);
    this.pairRank = this.merges.pairRank;
    this.repeatedMerges = this.merges.repeatedMerges;
    for (let c = 0; c < SMALL_CHARS; c++) this.smallCharIds[c] = vocab.get(String.fromCharCode(c)) ?? -1;
    this.cache = new WordCache(options.cacheSize ?? 16_384);
  }

  /** Appends the ids of `word` to `out`. */
  encodeWord(word: string, out: number[]): void {
    const cached = this.cache.get(word);
    if (cached) { for (const id of cached) out.push(id); return; }
    const ids = this.merge(word);
    this.cache.set(word, ids);
    for (const id of ids) out.push(id);
  }

  /** the rank of the pair of symbols (a, b), or -1 (a symbol outside the vocabulary never merges) */
  private rankOf(a: number, b: number): number {
    return a < 0 || b < 0 ? -1 : this.pairRank.get(a, b);
  }

  /**
   * The ids of `word` made a step at a time: each call of the stepper does about `budget`
   * characters' work (spelling the word with `spell`, reading its symbols, a merge each, an id
   * each into `out` once the merges are done) and says whether the word is done (LongWordSteps). encodeAsync hands the event loop back
   * between steps inside a word no cut can split (a megabyte of one letter: every point between
   * two letters sits in some token); the merges, and so the ids, are those of encodeWord(spell(word)).
   * The word has buffers of its own, so other encodes may run between steps.
   */
  mergeInSteps(word: string, spell: (text: string) => string): LongWordSteps {
    const spelling = new SpellingInSteps(word, spell);
    let state: MergeState | undefined;
    return (budget, out) => {
      let left = budget;
      if (!state) {
        left -= spelling.step(left);
        const text = spelling.text;
        if (text === undefined) return false;
        const whole = this.wholeWord(text);
        if (whole) { for (const id of whole) out.push(id); return true; }
        const n = text.length;
        state = this.begin(text, { ids: new Int32Array(n), next: new Int32Array(n), prev: new Int32Array(n), start: new Int32Array(n), heap: new NumberHeap() });
      }
      const s = state;
      left -= this.addSymbols(s, left);
      if (s.at < s.word.length) return false;
      // (the merges and the ids' collection each take up to a budget: a slice does at most twice its share)
      return this.steps(s, left) && this.collect(s, out, budget);
    };
  }

  /** the ids of a word that needs no merging (empty, or a token itself with ignore_merges) */
  private wholeWord(word: string): number[] | undefined {
    if (this.options.ignoreMerges) {
      const whole = this.vocab.get(word);
      if (whole !== undefined) return [whole];
    }
    return word.length === 0 ? [] : undefined;
  }

  private merge(word: string): number[] {
    const whole = this.wholeWord(word);
    if (whole) return whole;
    if (this.ids.length < word.length) {
      const size = Math.max(word.length, 2 * this.ids.length);
      this.ids = new Int32Array(size); this.next = new Int32Array(size); this.prev = new Int32Array(size); this.start = new Int32Array(size);
    }
    const state = this.begin(word, { ids: this.ids, next: this.next, prev: this.prev, start: this.start, heap: this.heap });
    this.addSymbols(state, Infinity);
    this.steps(state, Infinity);
    const out: number[] = [];
    this.collect(state, out, Infinity);
    return out;
  }

  /** a word to merge, no symbol read yet (addSymbols reads them) */
  private begin(word: string, buffers: Omit<MergeState, "word" | "n" | "at" | "collected">): MergeState {
    buffers.heap.clear();
    return { word, n: 0, at: 0, collected: 0, ...buffers };
  }

  /**
   * reads up to `budget` more symbols (code points) into the linked list, each one's pair with the
   * symbol before it into the heap (the pairs go in left to right, as they would all at once); the
   * number read
   */
  private addSymbols(s: MergeState, budget: number): number {
    const { word, ids, next, prev, start } = s;
    // -1: a starting symbol outside the vocabulary (never merges); -2: merged away
    let n = s.n, at = s.at;
    const last = n + Math.max(1, budget);
    for (; at < word.length && n < last; n++) {
      const cp = word.codePointAt(at)!;
      const units = cp > 0xffff ? 2 : 1;
      start[n] = at;
      ids[n] = cp < SMALL_CHARS ? this.smallCharIds[cp]! : this.vocab.get(word.slice(at, at + units)) ?? -1;
      at += units;
      next[n] = -1;
      prev[n] = n - 1;
      if (n > 0) {
        next[n - 1] = n;
        this.tryPush(s, n - 1, n);
      }
    }
    const read = n - s.n;
    s.n = n; s.at = at;
    return read;
  }

  // a candidate is one number, rank * (the word's length) + left: the lowest rank first, the
  // leftmost on ties (a symbol starts no later than its unit, so left < length); its
  // right symbol is whatever follows `left` when it comes out, so an entry whose pair has changed
  // since (one side merged away or grown) no longer has its rank and is dropped
  private tryPush(s: MergeState, left: number, right: number): void {
    if (left < 0 || right < 0) return;
    const rank = this.rankOf(s.ids[left]!, s.ids[right]!);
    if (rank >= 0) s.heap.push(rank * s.word.length + left);
  }

  /** pops up to `budget` candidates; true once none is left */
  private steps(s: MergeState, budget: number): boolean {
    const { ids, next, prev, heap } = s;
    const stride = s.word.length;
    for (let popped = 0; heap.size > 0; popped++) {
      if (popped >= budget) return false;
      const key = heap.pop();
      const left = key % stride, rank = (key - left) / stride;
      const right = next[left]!;
      if (right < 0 || this.rankOf(ids[left]!, ids[right]!) !== rank) continue;
      ids[left] = this.merges.mergedId[rank]!;
      ids[right] = -2;
      const after = next[right]!;
      next[left] = after;
      if (after >= 0) prev[after] = left;
      this.tryPush(s, prev[left]!, left);
      this.tryPush(s, left, after);
    }
    return true;
  }

  /** appends the ids of up to `budget` more of the merged word's symbols; true once all are in */
  private collect(s: MergeState, out: number[], budget: number): boolean {
    const { ids, next, start, word } = s;
    let i = s.collected;
    for (let k = 0; i >= 0 && k < budget; i = next[i]!, k++) {
      const id = ids[i]!;
      if (id >= 0) out.push(id);
      else this.options.fallback?.(word.slice(start[i]!, word.codePointAt(start[i]!)! > 0xffff ? start[i]! + 2 : start[i]! + 1), out);
    }
    s.collected = i;
    return i < 0;
  }
}

/** one word being merged: its symbols' ids, neighbours and starts, and its candidate pairs */
interface MergeState {
  readonly word: string;
  /** symbols read so far */
  n: number;
  /** where the next symbol starts in the word */
  at: number;
  /** the next symbol whose ids collect() appends (-1: all are in) */
  collected: number;
  readonly ids: Int32Array;
  readonly next: Int32Array;
  readonly prev: Int32Array;
  readonly start: Int32Array;
  readonly heap: NumberHeap;
}

/** Splits GGUF / merges.txt style "left right" merge lines (the separator is the first space after position 0). */
export function parseMergeLines(lines: readonly string[], where: string): Array<[string, string]> {
  return lines.map((line, i) => {
    const pos = line.indexOf(" ", 1);
    if (pos < 0) throw new Error(`${where}[${i}]: expected "left right", found ${JSON.stringify(line)}`);
    return [line.slice(0, pos), line.slice(pos + 1)];
  });
}

/** merges as ids, in rank order: merge r joins left[r] and right[r] into merged[r] */
export interface MergeIds {
  readonly left: Int32Array;
  readonly right: Int32Array;
  readonly merged: Int32Array;
}

/**
 * What BPE needs of its merges: the rank of each pair of ids, and each rank's merged id. Made from
 * the merges' texts (looked up in the vocabulary) or from their ids (MergeIds): Llama 3's 280K
 * merges as texts cost a lookup of three strings each, two of them cut out of "a b" and one made
 * by joining them, most of a tokenizer.json's first encode.
 */
export class MergeTable {
  private constructor(
    readonly pairRank: PairTable,
    /** by rank, the merged token's id (-1: a merge that never fires) */
    readonly mergedId: Int32Array,
    /** merges of a pair an earlier merge already ranks (they never fire: the first rank wins) */
    readonly repeatedMerges: number,
  ) {}

  /** merges whose parts and result are all tokens (ids >= 0); a merge with a -1 is skipped */
  static fromIds(ids: MergeIds): MergeTable {
    const count = ids.left.length;
    const pairRank = new PairTable(count), mergedId = new Int32Array(count).fill(-1);
    let repeated = 0;
    for (let rank = 0; rank < count; rank++) {
      const ia = ids.left[rank]!, ib = ids.right[rank]!, im = ids.merged[rank]!;
      if (ia < 0 || ib < 0 || im < 0) continue;
      if (pairRank.add(ia, ib, rank)) mergedId[rank] = im;
      else repeated++;
    }
    return new MergeTable(pairRank, mergedId, repeated);
  }

  /**
   * merges by text; one outside the vocabulary is skipped, or refused where `mergeName` names
   * merges (as mergeIdsOf's message, found by the lookups the table needs anyway): one kept could
   * never fire usefully
   */
  static fromTexts(vocab: TokenIds, merges: ReadonlyArray<readonly [string, string]>, mergeName?: (index: number) => string): MergeTable {
    const ids: MergeIds = { left: new Int32Array(merges.length), right: new Int32Array(merges.length), merged: new Int32Array(merges.length) };
    for (let rank = 0; rank < merges.length; rank++) {
      const [a, b] = merges[rank]!;
      const merged = a + b;
      const ia = vocab.get(a), ib = vocab.get(b), im = vocab.get(merged);
      if ((ia === undefined || ib === undefined || im === undefined) && mergeName) {
        throw mergeError(mergeName(rank), a, b, merged, ia === undefined ? "left" : ib === undefined ? "right" : "merged");
      }
      ids.left[rank] = ia ?? -1; ids.right[rank] = ib ?? -1; ids.merged[rank] = im ?? -1;
    }
    return MergeTable.fromIds(ids);
  }
}

/**
 * The ids of `count` merges (`pairAt(i)`: merge i's texts), refusing a merge whose parts or result
 * are not tokens, naming it (`field(i)`: the file and the merge's index). Such a merge is a broken
 * vocabulary: the library encoder turns its result into no id at all, silently dropping text, and
 * Hugging Face's Rust tokenizers refuse the file (MergeTokenOutOfVocabulary). With a
 * `continuingPrefix` (e.g. "##") the right part's prefix is not part of the result, as in those
 * tokenizers. The merges' texts are not kept: a loader that checks its merges has their ids for
 * BPE (MergeTable.fromIds) without looking them up again. `textOf` (id -> the text idOf gives
 * that id for, where known) spares most merged tokens their lookup: see guessMerged.
 */
export function mergeIdsOf(
  count: number,
  pairAt: (index: number) => readonly [string, string],
  idOf: (token: string) => number | undefined,
  field: (index: number) => string,
  continuingPrefix = "",
  textOf?: (id: number) => string | undefined,
): MergeIds {
  const ids: MergeIds = { left: new Int32Array(count), right: new Int32Array(count), merged: new Int32Array(count) };
  let last = -2;
  for (let i = 0; i < count; i++) {
    const [a, b] = pairAt(i);
    const merged = a + (continuingPrefix !== "" && b.startsWith(continuingPrefix) ? b.slice(continuingPrefix.length) : b);
    const ia = idOf(a), ib = idOf(b);
    const im = (textOf && guessMerged(textOf, last, merged)) ?? idOf(merged);
    if (im !== undefined) last = im;
    if (ia === undefined || ib === undefined || im === undefined) throw mergeError(field(i), a, b, merged, ia === undefined ? "left" : ib === undefined ? "right" : "merged");
    ids.left[i] = ia; ids.right[i] = ib; ids.merged[i] = im;
  }
  return ids;
}

/**
 * The id of `merged` when it is the previous merge's token or the next id, else undefined. A
 * vocabulary trained by BPE numbers its tokens in the order its merges made them (several merges
 * may make one token): Qwen3's and Llama 3's merges all, Gemma 3's 99.7%. A hash lookup of a fresh
 * string (the slices of "a b" and their join) was most of a big tokenizer.json's merge check; a
 * comparison with a known text is not one. Exact: textOf(id) === merged means idOf(merged) is id.
 */
function guessMerged(textOf: (id: number) => string | undefined, last: number, merged: string): number | undefined {
  if (textOf(last + 1) === merged) return last + 1;
  if (textOf(last) === merged) return last;
  return undefined;
}

/** merge `a b` (making `merged`) needs a token outside the vocabulary: its left part, its right part or the merged token */
function mergeError(name: string, a: string, b: string, merged: string, missing: "left" | "right" | "merged"): Error {
  const what = missing === "left" ? `its left part ${JSON.stringify(a)}` : missing === "right" ? `its right part ${JSON.stringify(b)}` : `the merged token ${JSON.stringify(merged)}`;
  return new Error(`${name}: the merge ${JSON.stringify(`${a} ${b}`)} needs ${what}, which is not in the vocabulary`);
}
