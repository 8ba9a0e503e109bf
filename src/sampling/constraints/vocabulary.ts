import type { Tokenizer } from "../../tokenizer/index.js";

interface BuildNode {
  readonly children: Map<number, BuildNode>;
  readonly tokens: number[];
}

/**
 * What every token adds to the text when it follows other text (the text a constraint sees), as
 * a trie over the tokens' code points, so a mask walks a prefix shared by many tokens once.
 * Tokens whose text is empty, special, or not whole UTF-8 (byte pieces of a character) are left
 * out: a constraint never allows them (the model spells the character with tokens that are whole
 * text). Built once per tokenizer.
 *
 * Characters are numbered by the vocabulary's alphabet (its distinct code points, ascending), so
 * a grammar can map each to a class of characters it cannot tell apart (char-partition.ts). The
 * trie is flat, in preorder without its root, in typed arrays: a walk is a loop over them that
 * jumps over a subtree whose prefix the grammar refuses.
 */
export class ConstraintVocabulary {
  /** the distinct code points of the tokens' text, ascending (index: a character's number) */
  readonly alphabet: Int32Array;
  /** per trie node: the number of the character on the edge into it */
  readonly nodeChar: Int32Array;
  /** per trie node: the index one past its subtree (the next node that is not below it) */
  readonly nodeEnd: Int32Array;
  /** per trie node: its depth, 0 for the root's children (the length of its text, less one) */
  readonly nodeDepth: Uint16Array;
  /** tokens whose text ends at node i: tokens[tokenStart[i] .. tokenStart[i + 1]) */
  readonly tokenStart: Int32Array;
  readonly tokens: Int32Array;
  /** token id's characters (numbers): chars[charStart[id] .. charStart[id + 1]); none: never allowed */
  readonly charStart: Int32Array;
  readonly chars: Int32Array;
  /** the most characters of one token (the deepest node) */
  readonly maxLength: number;

  private constructor(readonly size: number, texts: readonly (readonly number[] | undefined)[]) {
    const codePoints = new Set<number>();
    for (const t of texts) if (t) for (const c of t) codePoints.add(c);
    this.alphabet = Int32Array.from([...codePoints].sort((a, b) => a - b));
    const number = new Map<number, number>();
    this.alphabet.forEach((c, i) => number.set(c, i));

    const root: BuildNode = { children: new Map(), tokens: [] };
    let nodes = 0, length = 0, maxLength = 0;
    this.charStart = new Int32Array(size + 1);
    for (let id = 0; id < size; id++) {
      const t = texts[id];
      if (t) {
        let node = root;
        for (const c of t) {
          let next = node.children.get(c);
          if (!next) {
            node.children.set(c, (next = { children: new Map(), tokens: [] }));
            nodes++;
          }
          node = next;
        }
        node.tokens.push(id);
        length += t.length;
        maxLength = Math.max(maxLength, t.length);
      }
      this.charStart[id + 1] = length;
    }
    this.maxLength = maxLength;
    this.chars = new Int32Array(length);
    for (let id = 0; id < size; id++) texts[id]?.forEach((c, k) => (this.chars[this.charStart[id]! + k] = number.get(c)!));

    this.nodeChar = new Int32Array(nodes);
    this.nodeEnd = new Int32Array(nodes);
    this.nodeDepth = new Uint16Array(nodes);
    this.tokenStart = new Int32Array(nodes + 1);
    const tokens: number[] = [];
    let at = 0;
    const flatten = (node: BuildNode, depth: number): void => {
      // children by code point: the layout does not depend on the order the tokens came in
      for (const c of [...node.children.keys()].sort((a, b) => a - b)) {
        const child = node.children.get(c)!;
        const i = at++;
        this.nodeChar[i] = number.get(c)!;
        this.nodeDepth[i] = depth;
        this.tokenStart[i] = tokens.length;
        tokens.push(...child.tokens);
        flatten(child, depth + 1);
        this.nodeEnd[i] = at;
      }
    };
    flatten(root, 0);
    this.tokenStart[nodes] = tokens.length;
    this.tokens = Int32Array.from(tokens);
  }

  /** whether token `id` has text a constraint can see (otherwise it is never allowed) */
  usable(id: number): boolean {
    return id >= 0 && id < this.size && this.charStart[id + 1]! > this.charStart[id]!;
  }

  private static cache = new WeakMap<Tokenizer, ConstraintVocabulary>();

  static of(tokenizer: Tokenizer): ConstraintVocabulary {
    let v = ConstraintVocabulary.cache.get(tokenizer);
    if (!v) {
      v = ConstraintVocabulary.build(tokenizer);
      ConstraintVocabulary.cache.set(tokenizer, v);
    }
    return v;
  }

  /** a vocabulary of the given token texts (undefined: a token that is never allowed) */
  static fromTexts(texts: readonly (string | undefined)[]): ConstraintVocabulary {
    return new ConstraintVocabulary(texts.length, texts.map((t) => (t ? [...t].map((ch) => ch.codePointAt(0)!) : undefined)));
  }

  private static build(tokenizer: Tokenizer): ConstraintVocabulary {
    // a plain token before each one, so a SentencePiece word start keeps its space (as mid-text)
    const context = tokenizer.encode("a", { addSpecialTokens: false }).slice(0, 1);
    const texts = Array.from({ length: tokenizer.vocabSize }, (_, id) => {
      if (tokenizer.isSpecial(id)) return undefined;
      const d = tokenizer.createStreamDecoder({ context });
      const text = d.push(id);
      return text === "" || d.flush() !== "" || text.includes("\uFFFD") ? undefined : text;
    });
    return ConstraintVocabulary.fromTexts(texts);
  }
}
