import type { Tokenizer } from "../../tokenizer/index.js";

/** a trie over the tokens' text, code point by code point (children as parallel arrays: walked far more often than built) */
export interface TrieNode {
  readonly chars: number[];
  readonly children: TrieNode[];
  /** tokens whose text ends at this node */
  readonly tokens: number[];
}

interface BuildNode {
  readonly children: Map<number, BuildNode>;
  readonly tokens: number[];
}

/**
 * What every token adds to the text when it follows other text (the text a constraint sees): its
 * code points, and a trie of them. Tokens whose text is empty, special, or not whole UTF-8 (byte
 * pieces of a character) are left out: a constraint never allows them (the model spells the
 * character with tokens that are whole text). Built once per tokenizer.
 */
export class ConstraintVocabulary {
  readonly root: TrieNode = { chars: [], children: [], tokens: [] };
  /** code points per token id; undefined: never allowed */
  readonly text: (readonly number[] | undefined)[];

  private constructor(readonly size: number) {
    this.text = new Array(size);
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

  private static build(tokenizer: Tokenizer): ConstraintVocabulary {
    const v = new ConstraintVocabulary(tokenizer.vocabSize);
    // a plain token before each one, so a SentencePiece word start keeps its space (as mid-text)
    const context = tokenizer.encode("a", { addSpecialTokens: false }).slice(0, 1);
    const building: BuildNode = { children: new Map(), tokens: [] };
    for (let id = 0; id < tokenizer.vocabSize; id++) {
      if (tokenizer.isSpecial(id)) continue;
      const d = tokenizer.createStreamDecoder({ context });
      const text = d.push(id);
      if (text === "" || d.flush() !== "" || text.includes("\uFFFD")) continue;
      const cps = [...text].map((ch) => ch.codePointAt(0)!);
      v.text[id] = cps;
      let node = building;
      for (const c of cps) {
        let next = node.children.get(c);
        if (!next) node.children.set(c, (next = { children: new Map(), tokens: [] }));
        node = next;
      }
      node.tokens.push(id);
    }
    const freeze = (from: BuildNode, to: TrieNode): void => {
      to.tokens.push(...from.tokens);
      for (const [c, child] of from.children) {
        const node: TrieNode = { chars: [], children: [], tokens: [] };
        to.chars.push(c);
        to.children.push(node);
        freeze(child, node);
      }
    };
    freeze(building, v.root);
    return v;
  }
}
