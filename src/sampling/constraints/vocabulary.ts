import type { Tokenizer } from "../../tokenizer/index.js";

interface BuildNode {
  readonly children: Map<number, BuildNode>;
  readonly tokens: number[];
}

/**
 * The bytes every token adds to the text when it follows other text (what a constraint sees), as
 * a trie over the tokens' bytes, so a mask walks a prefix shared by many tokens once. Bytes, not
 * characters: a byte-fallback piece (<0xE6>) or a byte-level piece may hold part of a character,
 * and the grammar runs over UTF-8 bytes (utf8-grammar.ts), so such pieces spell the characters a
 * vocabulary has no whole piece for. Special tokens and tokens that add nothing are left out: a
 * constraint never allows them, save the special tokens a caller names as preserved (markers,
 * below). Built once per tokenizer.
 *
 * Bytes are numbered by the vocabulary's alphabet (its distinct byte values, ascending), so a
 * grammar can map each to a class of bytes it cannot tell apart (char-partition.ts). The trie is
 * flat, in preorder without its root, in typed arrays: a walk is a loop over them that jumps over
 * a subtree whose prefix the grammar refuses.
 */
export class ConstraintVocabulary {
  /** the distinct byte values of the tokens, ascending (index: a byte's number) */
  readonly alphabet: Int32Array;
  /** per trie node: the number of the byte on the edge into it */
  readonly nodeChar: Int32Array;
  /** per trie node: the index one past its subtree (the next node that is not below it) */
  readonly nodeEnd: Int32Array;
  /** per trie node: its depth, 0 for the root's children (the length of its bytes, less one) */
  readonly nodeDepth: Uint16Array;
  /** tokens whose text ends at node i: tokens[tokenStart[i] .. tokenStart[i + 1]) */
  readonly tokenStart: Int32Array;
  readonly tokens: Int32Array;
  /** token id's bytes (numbers): chars[charStart[id] .. charStart[id + 1]); none: never allowed */
  readonly charStart: Int32Array;
  readonly chars: Int32Array;
  /** the most bytes of one token (the deepest node) */
  readonly maxLength: number;
  /**
   * Special tokens a caller named as preserved (a tool format's call markers, as llama.cpp's chat
   * code lists them), by id: their text's bytes as numbers. They are not in the trie: a parse state
   * takes one only where the grammar spells its text out as literal characters (parse-states.ts),
   * never where a class such as a JSON string's character happens to match it.
   */
  readonly markers: ReadonlyMap<number, Int32Array> = new Map();

  private constructor(readonly size: number, texts: readonly (readonly number[] | undefined)[]) {
    const values = new Set<number>();
    for (const t of texts) if (t) for (const c of t) values.add(c);
    this.alphabet = Int32Array.from([...values].sort((a, b) => a - b));
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
      // children by byte: the layout does not depend on the order the tokens came in
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

  /** whether token `id` has bytes a constraint can see (otherwise it is never allowed) */
  usable(id: number): boolean {
    return id >= 0 && id < this.size && this.charStart[id + 1]! > this.charStart[id]!;
  }

  private static cache = new WeakMap<Tokenizer, ConstraintVocabulary>();
  /** per tokenizer, the variants with preserved special tokens, by their sorted texts */
  private static variants = new WeakMap<Tokenizer, Map<string, ConstraintVocabulary>>();

  /**
   * The vocabulary of a tokenizer, built once; with `preserved`, the special tokens whose text is
   * one of them join it as markers (end-of-generation tokens never: they keep their own handling).
   * The variant shares the trie: one per distinct preserved set, a scan of the ids when first made.
   */
  static of(tokenizer: Tokenizer, preserved: readonly string[] = []): ConstraintVocabulary {
    let v = ConstraintVocabulary.cache.get(tokenizer);
    if (!v) {
      v = ConstraintVocabulary.build(tokenizer);
      ConstraintVocabulary.cache.set(tokenizer, v);
    }
    if (preserved.length === 0) return v;
    const texts = [...new Set(preserved)].sort();
    const key = JSON.stringify(texts);
    let byKey = ConstraintVocabulary.variants.get(tokenizer);
    if (!byKey) ConstraintVocabulary.variants.set(tokenizer, (byKey = new Map()));
    let variant = byKey.get(key);
    if (!variant) {
      const wanted = new Set(texts);
      const utf8 = new TextDecoder();
      const markers = new Map<number, Uint8Array>();
      for (let id = 0; id < tokenizer.vocabSize; id++) {
        if (!tokenizer.isSpecial(id) || tokenizer.endOfGenerationIds.has(id)) continue;
        const bytes = tokenizer.tokenBytes(id);
        if (wanted.has(utf8.decode(bytes))) markers.set(id, bytes);
      }
      byKey.set(key, (variant = v.withMarkers(markers)));
    }
    return variant;
  }

  /**
   * This vocabulary with `markers` (id: its text's bytes) as preserved special tokens; the trie is
   * shared. A marker with a byte no token of the trie has is left out: the grammar's character
   * classes are told apart over the trie's bytes only (char-partition.ts), and no call format's
   * marker has such a byte in a real vocabulary.
   */
  withMarkers(markers: ReadonlyMap<number, Uint8Array>): ConstraintVocabulary {
    const number = new Map<number, number>();
    this.alphabet.forEach((c, i) => number.set(c, i));
    const numbered = new Map<number, Int32Array>();
    for (const [id, bytes] of markers) {
      if (id < 0 || id >= this.size || bytes.length === 0 || bytes.some((b) => !number.has(b))) continue;
      numbered.set(id, Int32Array.from(bytes, (b) => number.get(b)!));
    }
    return Object.assign(Object.create(ConstraintVocabulary.prototype) as ConstraintVocabulary, this, { markers: numbered });
  }

  /** a vocabulary of the given token texts, as UTF-8 (undefined: a token that is never allowed) */
  static fromTexts(texts: readonly (string | undefined)[]): ConstraintVocabulary {
    const utf8 = new TextEncoder();
    return ConstraintVocabulary.fromBytes(texts.map((t) => (t ? utf8.encode(t) : undefined)));
  }

  /** a vocabulary of the given tokens' bytes (undefined or empty: a token that is never allowed) */
  static fromBytes(pieces: readonly (Uint8Array | undefined)[]): ConstraintVocabulary {
    return new ConstraintVocabulary(pieces.length, pieces.map((b) => (b && b.length > 0 ? [...b] : undefined)));
  }

  private static build(tokenizer: Tokenizer): ConstraintVocabulary {
    return ConstraintVocabulary.fromBytes(Array.from({ length: tokenizer.vocabSize }, (_, id) => (tokenizer.isSpecial(id) ? undefined : tokenizer.tokenBytes(id))));
  }
}
