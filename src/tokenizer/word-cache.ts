/**
 * The ids of recently encoded words (pre-tokenizer pieces, SentencePiece segments, BERT chunks):
 * text repeats its words constantly, and a hit skips the merging. Bounded twice: words longer
 * than `maxWordLength` UTF-16 units are not kept (rare, and each would hold its text), and at
 * most 2 * `generationSize` words are: when the current generation fills it becomes the old one
 * and the one before is dropped, so a word in use survives (a hit in the old generation moves it
 * into the current one) where clearing everything would lose the whole working set at once.
 */
export class WordCache {
  private current = new Map<string, readonly number[]>();
  private old = new Map<string, readonly number[]>();

  constructor(readonly generationSize = 16_384, readonly maxWordLength = 64) {}

  /** words held now (at most 2 * generationSize) */
  get size(): number { return this.current.size + this.old.size; }

  get(word: string): readonly number[] | undefined {
    const ids = this.current.get(word);
    if (ids !== undefined || this.old.size === 0) return ids;
    const aged = this.old.get(word);
    if (aged !== undefined) this.set(word, aged);
    return aged;
  }

  set(word: string, ids: readonly number[]): void {
    if (this.generationSize <= 0 || word.length > this.maxWordLength) return;
    if (this.current.size >= this.generationSize) {
      this.old = this.current;
      this.current = new Map();
    }
    this.current.set(word, ids);
  }
}
