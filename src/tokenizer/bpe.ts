import { Heap } from "./heap.js";

export interface BPEOptions {
  /** when a whole word is already a token, emit it without merging (llama3's and HF's `ignore_merges`) */
  ignoreMerges?: boolean;
  /** appends ids for a starting symbol that is not in the vocabulary (byte fallback, unk, or nothing) */
  fallback?: (symbol: string, out: number[]) => void;
  /** how many distinct words to remember (text repeats words constantly); 0 disables the cache */
  cacheSize?: number;
  /**
   * names merge i in the error a merge outside the vocabulary raises (checkMerges' message,
   * found by the lookups the table needs anyway); absent: such a merge is skipped
   */
  mergeName?: (index: number) => string;
}

interface Pair { rank: number; left: number; right: number }

/**
 * Merge ranks by (left id, right id): open addressing over typed arrays, each pair held as two
 * int32s. A Map keyed by left * vocabSize + right holds keys past V8's small-integer range for
 * any vocabulary of more than ~32K tokens, each one a heap number allocated when the key is made
 * (at every lookup while encoding, too) and hashed as a double.
 */
class PairRanks {
  private readonly lefts: Int32Array;
  private readonly rights: Int32Array;
  /** rank + 1; 0 marks an empty slot */
  private readonly ranks: Int32Array;
  private readonly mask: number;

  constructor(pairs: number) {
    let size = 16;
    while (size < 2 * pairs) size *= 2;
    this.lefts = new Int32Array(size);
    this.rights = new Int32Array(size);
    this.ranks = new Int32Array(size);
    this.mask = size - 1;
  }

  private slot(a: number, b: number): number {
    return (Math.imul(a, 0x9e3779b1) ^ Math.imul(b, 0x85ebca6b)) >>> 0;
  }

  /** the rank of pair (a, b), or undefined */
  get(a: number, b: number): number | undefined {
    for (let i = this.slot(a, b) & this.mask; ; i = (i + 1) & this.mask) {
      const r = this.ranks[i]!;
      if (r === 0) return undefined;
      if (this.lefts[i] === a && this.rights[i] === b) return r - 1;
    }
  }

  /** sets the rank of (a, b) unless it has one (the first, lowest rank wins); whether it was set */
  add(a: number, b: number, rank: number): boolean {
    for (let i = this.slot(a, b) & this.mask; ; i = (i + 1) & this.mask) {
      if (this.ranks[i] === 0) {
        this.lefts[i] = a;
        this.rights[i] = b;
        this.ranks[i] = rank + 1;
        return true;
      }
      if (this.lefts[i] === a && this.rights[i] === b) return false;
    }
  }
}

/**
 * Rank-ordered byte-pair encoding over one pre-tokenized word, independent of where the vocabulary
 * came from (GGUF `tokenizer.ggml.merges` or a tokenizer.json `model.merges`). Symbols start as
 * single code points; the pair with the lowest merge rank (leftmost on ties) is merged until no
 * ranked pair is left. Symbols live in a doubly linked list and candidate pairs in a heap, so a
 * long word (a line of Chinese with no spaces) costs O(n log n).
 */
export class BPE {
  private readonly pairRank: PairRanks;
  private readonly mergedId: Int32Array;
  private readonly cache = new Map<string, number[]>();
  private readonly cacheSize: number;

  constructor(
    private readonly vocab: ReadonlyMap<string, number>,
    merges: ReadonlyArray<readonly [string, string]>,
    private readonly options: BPEOptions = {},
  ) {
    this.pairRank = new PairRanks(merges.length);
    this.mergedId = new Int32Array(merges.length).fill(-1);
    for (let rank = 0; rank < merges.length; rank++) {
      const [a, b] = merges[rank]!;
      const merged = a + b;
      const ia = vocab.get(a), ib = vocab.get(b), im = vocab.get(merged);
      if (ia === undefined || ib === undefined || im === undefined) {
        // refused where the loader names merges (as checkMerges does); one kept could never fire usefully
        if (options.mergeName) throw mergeError(options.mergeName(rank), a, b, merged, ia === undefined ? "left" : ib === undefined ? "right" : "merged");
        continue;
      }
      if (this.pairRank.add(ia, ib, rank)) this.mergedId[rank] = im;
    }
    this.cacheSize = options.cacheSize ?? 20000;
  }

  /** Appends the ids of `word` to `out`. */
  encodeWord(word: string, out: number[]): void {
    const cached = this.cache.get(word);
    if (cached) { for (const id of cached) out.push(id); return; }
    const ids = this.merge(word);
    if (this.cacheSize > 0) {
      if (this.cache.size >= this.cacheSize) this.cache.clear();
      this.cache.set(word, ids);
    }
    for (const id of ids) out.push(id);
  }

  private rankOf(a: number, b: number): number | undefined {
    return a < 0 || b < 0 ? undefined : this.pairRank.get(a, b);
  }

  private merge(word: string): number[] {
    if (this.options.ignoreMerges) {
      const whole = this.vocab.get(word);
      if (whole !== undefined) return [whole];
    }
    const chars = Array.from(word);
    const n = chars.length;
    if (n === 0) return [];
    // -1: a starting symbol outside the vocabulary (never merges); -2: merged away
    const ids = new Int32Array(n);
    const next = new Int32Array(n);
    const prev = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      ids[i] = this.vocab.get(chars[i]!) ?? -1;
      next[i] = i + 1 < n ? i + 1 : -1;
      prev[i] = i - 1;
    }
    const heap = new Heap<Pair>((x, y) => x.rank < y.rank || (x.rank === y.rank && x.left < y.left));
    const tryPush = (left: number, right: number) => {
      if (left < 0 || right < 0) return;
      const rank = this.rankOf(ids[left]!, ids[right]!);
      if (rank !== undefined) heap.push({ rank, left, right });
    };
    for (let i = 0; i + 1 < n; i++) tryPush(i, i + 1);

    for (let p = heap.pop(); p; p = heap.pop()) {
      // stale entry: one side was merged since, or the pair changed
      if (next[p.left] !== p.right || this.rankOf(ids[p.left]!, ids[p.right]!) !== p.rank) continue;
      ids[p.left] = this.mergedId[p.rank]!;
      ids[p.right] = -2;
      const after = next[p.right]!;
      next[p.left] = after;
      if (after >= 0) prev[after] = p.left;
      tryPush(prev[p.left]!, p.left);
      tryPush(p.left, after);
    }

    const out: number[] = [];
    for (let i = 0; i >= 0; i = next[i]!) {
      const id = ids[i]!;
      if (id >= 0) out.push(id);
      else this.options.fallback?.(chars[i]!, out);
    }
    return out;
  }
}

/** Splits GGUF / merges.txt style "left right" merge lines (the separator is the first space after position 0). */
export function parseMergeLines(lines: readonly string[], where: string): Array<[string, string]> {
  return lines.map((line, i) => {
    const pos = line.indexOf(" ", 1);
    if (pos < 0) throw new Error(`${where}[${i}]: expected "left right", found ${JSON.stringify(line)}`);
    return [line.slice(0, pos), line.slice(pos + 1)];
  });
}

/**
 * Refuses a merge whose parts or result are not tokens, naming it (`field(i)`: the file and the
 * merge's index). Such a merge is a broken vocabulary: the library encoder turns its result into
 * no id at all, silently dropping text, and Hugging Face's Rust tokenizers refuse the file
 * (MergeTokenOutOfVocabulary). With a `continuingPrefix` (e.g. "##") the right part's prefix is not
 * part of the result, as in those tokenizers.
 */
export function checkMerges(has: (token: string) => boolean, merges: ReadonlyArray<readonly [string, string]>, field: (index: number) => string, continuingPrefix = ""): void {
  for (let i = 0; i < merges.length; i++) {
    const [a, b] = merges[i]!;
    const merged = a + (continuingPrefix !== "" && b.startsWith(continuingPrefix) ? b.slice(continuingPrefix.length) : b);
    const missing = !has(a) ? "left" : !has(b) ? "right" : !has(merged) ? "merged" : undefined;
    if (missing !== undefined) throw mergeError(field(i), a, b, merged, missing);
  }
}

/** merge `a b` (making `merged`) needs a token outside the vocabulary: its left part, its right part or the merged token */
function mergeError(name: string, a: string, b: string, merged: string, missing: "left" | "right" | "merged"): Error {
  const what = missing === "left" ? `its left part ${JSON.stringify(a)}` : missing === "right" ? `its right part ${JSON.stringify(b)}` : `the merged token ${JSON.stringify(merged)}`;
  return new Error(`${name}: the merge ${JSON.stringify(`${a} ${b}`)} needs ${what}, which is not in the vocabulary`);
}
