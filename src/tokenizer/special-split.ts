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

interface TrieNode { children: Map<number, TrieNode>; token?: SpecialToken }

// C isspace(): what llama.cpp strips next to lstrip/rstrip tokens
const isSpace = (c: number) => c === 0x20 || (c >= 0x09 && c <= 0x0d);

/**
 * Finds special tokens in text, leftmost-longest (as the HF added-vocabulary matcher does), with
 * one trie walk per position, and splits the text around them.
 */
export class SpecialMatcher {
  private readonly root: TrieNode = { children: new Map() };
  readonly size: number;

  constructor(tokens: Iterable<SpecialToken>) {
    let n = 0;
    for (const t of tokens) {
      if (!t.text) continue;
      let node = this.root;
      for (let i = 0; i < t.text.length; i++) {
        const c = t.text.charCodeAt(i);
        let child = node.children.get(c);
        if (!child) { child = { children: new Map() }; node.children.set(c, child); }
        node = child;
      }
      node.token ??= t;
      n++;
    }
    this.size = n;
  }

  /** the text around the special tokens found in it, except inside `literal` ranges ([start, end), ascending) */
  split(text: string, literal: readonly (readonly [number, number])[] = []): Fragment[] {
    if (this.size === 0) return text ? [text] : [];
    let r = 0;
    const out: Fragment[] = [];
    let rawStart = 0;
    let i = 0;
    while (i < text.length) {
      let node = this.root.children.get(text.charCodeAt(i));
      let match: SpecialToken | undefined;
      let matchEnd = i;
      for (let j = i + 1; node; j++) {
        if (node.token) { match = node.token; matchEnd = j; }
        if (j >= text.length) break;
        node = node.children.get(text.charCodeAt(j));
      }
      while (r < literal.length && literal[r]![1] <= i) r++;
      if (match && r < literal.length && literal[r]![0] < matchEnd && i < literal[r]![1]) match = undefined;
      if (!match) { i++; continue; }
      let rawEnd = i;
      if (match.lstrip) while (rawEnd > rawStart && isSpace(text.charCodeAt(rawEnd - 1))) rawEnd--;
      if (rawEnd > rawStart) out.push(text.slice(rawStart, rawEnd));
      out.push(match.id);
      i = matchEnd;
      if (match.rstrip) while (i < text.length && isSpace(text.charCodeAt(i))) i++;
      rawStart = i;
    }
    if (rawStart < text.length) out.push(text.slice(rawStart));
    return out;
  }
}
