export interface SpecialToken {
  readonly text: string;
  readonly id: number;
  /** swallow whitespace right before the token */
  readonly lstrip?: boolean;
  /** swallow whitespace right after the token */
  readonly rstrip?: boolean;
}

/** Raw text still to be tokenized, or the id of a special token found in the input. */
export type Fragment = string | number;

/** C isspace(): what llama.cpp strips next to lstrip/rstrip tokens */
export const isCSpace = (c: number): boolean => c === 0x20 || (c >= 0x09 && c <= 0x0d);

/**
 * Finds special tokens in text, leftmost-longest (as the HF added-vocabulary matcher does), and
 * splits the text around them. Tokens are bucketed by their first two characters (one-character
 * tokens by their only one), longest first, so a position costs one lookup and a few startsWith
 * checks, and the matcher's memory is the tokens' own text: a character trie spent a node per
 * character, 1.86 GB for one 8 MB control token of a hostile GGUF.
 */
export class SpecialMatcher {
  /** first two characters -> tokens starting with them, longest first */
  private readonly byPrefix = new Map<string, SpecialToken[]>();
  /** one-character tokens */
  private readonly single = new Map<string, SpecialToken>();
  /** 1 at the UTF-16 units some token starts with: the other positions of a text need no lookup */
  readonly startsToken = new Uint8Array(0x10000);
  readonly size: number;

  /** `isSpace`: the UTF-16 units an lstrip/rstrip token swallows (llama.cpp's C isspace() by default) */
  constructor(tokens: Iterable<SpecialToken>, readonly isSpace: (unit: number) => boolean = isCSpace) {
    let n = 0;
    const seen = new Set<string>();
    for (const t of tokens) {
      // the first of several tokens with the same text wins, as the first inserted did in a trie
      if (!t.text || seen.has(t.text)) continue;
      seen.add(t.text);
      this.startsToken[t.text.charCodeAt(0)] = 1;
      if (t.text.length === 1) this.single.set(t.text, t);
      else {
        const key = t.text.slice(0, 2);
        const list = this.byPrefix.get(key);
        if (list) list.push(t);
        else this.byPrefix.set(key, [t]);
      }
      n++;
    }
    for (const list of this.byPrefix.values()) list.sort((a, b) => b.text.length - a.text.length);
    this.size = n;
  }

  /** the longest token starting at `i`, if any */
  matchAt(text: string, i: number): SpecialToken | undefined {
    const list = this.byPrefix.get(text.slice(i, i + 2));
    if (list) for (const t of list) if (text.startsWith(t.text, i)) return t;
    return this.single.get(text[i]!);
  }

  /** the text around the special tokens found in it, except inside `literal` ranges ([start, end), ascending) */
  split(text: string, literal: readonly (readonly [number, number])[] = []): Fragment[] {
    const s = this.splitter(text, literal);
    s.scan(Infinity);
    return s.fragments;
  }

  /** split()'s fragments found a stretch of text at a time (SpecialSplit.scan) */
  splitter(text: string, literal: readonly (readonly [number, number])[] = []): SpecialSplit {
    return new SpecialSplit(this, text, literal);
  }

}

/**
 * SpecialMatcher.split() in steps: each scan() reads about `budget` more characters and appends
 * the fragments completed so far, so that encodeAsync hands the event loop back while the special
 * tokens of a multi-megabyte prompt are looked for (one scan of 4 MiB held it for 20-140 ms). A
 * raw piece goes out once the token after it (whose lstrip may shorten it) or the end is found.
 */
export class SpecialSplit {
  readonly fragments: Fragment[] = [];
  private i = 0;
  private rawStart = 0;
  private r = 0;
  private finished: boolean;

  constructor(private readonly matcher: SpecialMatcher, private readonly text: string, private readonly literal: readonly (readonly [number, number])[]) {
    this.finished = matcher.size === 0;
    if (this.finished && text) this.fragments.push(text);
  }

  /** whether every fragment is in `fragments` */
  get done(): boolean { return this.finished; }

  /** reads about `budget` characters further (at least one); the number read */
  scan(budget: number): number {
    if (this.finished) return 0;
    const { text, literal, fragments, matcher } = this;
    const { startsToken, isSpace } = matcher;
    let { i, r, rawStart } = this;
    const from = i, stop = Math.min(text.length, i + Math.max(1, budget));
    while (i < stop) {
      if (startsToken[text.charCodeAt(i)] === 0) { i++; continue; }
      let match = matcher.matchAt(text, i);
      const matchEnd = match ? i + match.text.length : i;
      while (r < literal.length && literal[r]![1] <= i) r++;
      if (match && r < literal.length && literal[r]![0] < matchEnd && i < literal[r]![1]) match = undefined;
      if (!match) { i++; continue; }
      let rawEnd = i;
      if (match.lstrip) while (rawEnd > rawStart && isSpace(text.charCodeAt(rawEnd - 1))) rawEnd--;
      if (rawEnd > rawStart) fragments.push(text.slice(rawStart, rawEnd));
      fragments.push(match.id);
      i = matchEnd;
      if (match.rstrip) while (i < text.length && isSpace(text.charCodeAt(i))) i++;
      rawStart = i;
    }
    this.i = i; this.r = r; this.rawStart = rawStart;
    if (i >= text.length) {
      this.finished = true;
      if (rawStart < text.length) fragments.push(text.slice(rawStart));
    }
    return i - from;
  }
}
