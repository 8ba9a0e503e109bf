import { Heap } from "./heap.js";

export interface BPEOptions {
  /** when a whole word is already a token, emit it without merging (llama3's and HF's `ignore_merges`) */
  ignoreMerges?: boolean;
  /** appends ids for a starting symbol that is not in the vocabulary (byte fallback, unk, or nothing) */
  fallback?: (symbol: string, out: number[]) => void;
  /** how many distinct words to remember (text repeats words constantly); 0 disables the cache */
  cacheSize?: number;
}

interface Pair { rank: number; left: number; right: number }

/**
 * Rank-ordered byte-pair encoding over one pre-tokenized word, independent of where the vocabulary
 * came from (GGUF `tokenizer.ggml.merges` or a tokenizer.json `model.merges`). Symbols start as
 * single code points; the pair with the lowest merge rank (leftmost on ties) is merged until no
 * ranked pair is left. Symbols live in a doubly linked list and candidate pairs in a heap, so a
 * long word (a line of Chinese with no spaces) costs O(n log n).
 */
export class BPE {
  private readonly pairRank = new Map<number, number>();
  private readonly mergedId: Int32Array;
  private readonly stride: number;
  private readonly cache = new Map<string, number[]>();
  private readonly cacheSize: number;

  constructor(
    private readonly vocab: ReadonlyMap<string, number>,
    merges: ReadonlyArray<readonly [string, string]>,
    private readonly options: BPEOptions = {},
  ) {
    let maxId = 0;
    for (const id of vocab.values()) if (id > maxId) maxId = id;
    this.stride = maxId + 1;
    this.mergedId = new Int32Array(merges.length).fill(-1);
    merges.forEach(([a, b], rank) => {
      const ia = vocab.get(a), ib = vocab.get(b), im = vocab.get(a + b);
      // the loaders refuse such merges (checkMerges); one reaching here can never fire usefully
      if (ia === undefined || ib === undefined || im === undefined) return;
      const key = ia * this.stride + ib;
      if (this.pairRank.has(key)) return; // first (lowest) rank wins
      this.pairRank.set(key, rank);
      this.mergedId[rank] = im;
    });
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
    return a < 0 || b < 0 ? undefined : this.pairRank.get(a * this.stride + b);
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
    const missing = !has(a) ? `its left part ${JSON.stringify(a)}` : !has(b) ? `its right part ${JSON.stringify(b)}` : !has(merged) ? `the merged token ${JSON.stringify(merged)}` : undefined;
    if (missing) throw new Error(`${field(i)}: the merge ${JSON.stringify(`${a} ${b}`)} needs ${missing}, which is not in the vocabulary`);
  }
}
