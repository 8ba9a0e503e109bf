import { BPE, type MergeTable } from "../bpe.js";
import { normalizeForm } from "../normalize.js";
import { byteLevelEncode, ByteLevelCuts, LongByteLevelWords } from "../byte-level.js";
import { PieceCursor } from "../pre-tokenizers.js";
import { SpecialMatcher, type SpecialToken } from "../special-split.js";
import { SegmentCursor, SpmSegmenter } from "../spm.js";
import type { TokenIds } from "../types.js";
import { WordCache } from "../word-cache.js";
import { wordPieceEncode, type WordPieceOptions } from "../wordpiece.js";
import { advanceWords, type LongWordSteps, type WordCursor, type WordEncoder, type WordRun } from "../word-run.js";
import { isObject, type JsonObject } from "./json-files.js";

/*
 * tokenizer.json layouts encoded with tsllm's own cores (BPE, the SentencePiece segmenter,
 * WordPiece) instead of @huggingface/tokenizers, with the library's ids: the library is the
 * reference for these files, and each step below does what its code does, quirks included (added
 * tokens split before normalizing, a normalizer and a Metaspace prefix per text section, the
 * whole section one BPE word without a pre-tokenizer, its Split cutting at empty matches, merge
 * ranks by string pair, the byte-level alphabet, WordPiece's longest-first). Anything else, or
 * anything about which a file leaves doubt, is left to the library: fastEncoderFor answers
 * undefined. The library spends its time where these cores do not (a regex test per character
 * in BertNormalizer, a whole Llama 2 text merged as one word), 0.07-0.6 MB/s.
 */

/** the parts of the library's built Tokenizer used here: its normalizer and pre-tokenizer objects, its model's token -> id map */
export interface LibraryPipeline {
  readonly normalizer: { normalize(text: string): string } | null;
  readonly pre_tokenizer: LibraryPreTokenizer | null;
  /** (read where it is a Map: model.vocab with the added tokens it was built with set over it) */
  readonly model?: { readonly tokens_to_ids?: unknown };
}

/**
 * model.merges as the loader checked them: their rank table (made once, shared by the encoders
 * with and without special tokens) and whether every "a b" string has exactly one space, inside
 * it, as the library needs to split it where the loader did.
 */
export interface CheckedMerges {
  readonly splitAsLibrary: boolean;
  table(): MergeTable;
}
interface LibraryPreTokenizer {
  /** Split's and ByteLevel's compiled pattern (the tokenizer.json regex rewritten for JS) */
  readonly pattern?: RegExp | null;
  /** Sequence's parts */
  readonly tokenizers?: readonly (LibraryPreTokenizer | null)[];
  pre_tokenize_text(text: string, options: { section_index?: number }): string[];
}

type Normalize = (text: string) => string;

/** String.prototype.trim's white space (the library's lstrip / rstrip) and JS regex \s */
export function isJsSpace(unit: number): boolean {
  if (unit < 0x80) return unit === 0x20 || (unit >= 0x09 && unit <= 0x0d);
  return unit === 0xa0 || unit === 0x1680 || (unit >= 0x2000 && unit <= 0x200a) || unit === 0x2028 || unit === 0x2029 ||
    unit === 0x202f || unit === 0x205f || unit === 0x3000 || unit === 0xfeff;
}

/** BertPreTokenizer's punctuation: \p{P} and every ASCII symbol */
const PUNCT = /\p{P}/u;
function isBertPunct(cp: number, ch: string): boolean {
  if (cp < 0x80) return (cp >= 0x21 && cp <= 0x2f) || (cp >= 0x3a && cp <= 0x40) || (cp >= 0x5b && cp <= 0x60) || (cp >= 0x7b && cp <= 0x7e);
  return PUNCT.test(ch);
}

/** per BMP unit, what BertNormalizer's clean_text does with it: 0 keep, 1 drop, 2 becomes " " (made on first use) */
let cleanTextClass: Uint8Array | undefined;
const CONTROL = /^(?:\p{Cc}|\p{Cf}|\p{Co}|\p{Cs})$/u;
const ASTRAL_CONTROL = /^(?:\p{Cf}|\p{Co})$/u;
function cleanTextClasses(): Uint8Array {
  if (cleanTextClass) return cleanTextClass;
  const t = new Uint8Array(0x10000);
  for (let u = 0; u < 0x10000; u++) {
    const ch = String.fromCharCode(u);
    // NUL, U+FFFD and controls other than \t \n \r are dropped; the rest of JS's \s is a space
    if (u === 0 || u === 0xfffd || (u !== 0x09 && u !== 0x0a && u !== 0x0d && CONTROL.test(ch))) t[u] = 1;
    else if (u !== 0x20 && isJsSpace(u)) t[u] = 2;
  }
  return (cleanTextClass = t);
}

/** the UTF-16 units the library's BertNormalizer puts spaces around (handle_chinese_chars) */
const isBertCjk = (u: number): boolean => (u >= 0x4e00 && u <= 0x9fff) || (u >= 0x3400 && u <= 0x4dbf) || (u >= 0xf900 && u <= 0xfaff);

/** the library's BertNormalizer, each step as it does it (clean_text by code point, CJK spacing by UTF-16 unit) */
function bertNormalizer(config: JsonObject): Normalize {
  const clean = Boolean(config.clean_text), chinese = Boolean(config.handle_chinese_chars), lower = Boolean(config.lowercase);
  const strip = lower ? config.strip_accents !== false : Boolean(config.strip_accents);
  return (text) => {
    let s = text;
    if (clean) {
      const cls = cleanTextClasses();
      let out = "", runStart = 0;
      for (let i = 0; i < s.length; i++) {
        const u = s.charCodeAt(i);
        let c: number;
        let width = 1;
        if (u >= 0xd800 && u <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
          width = 2;
          c = ASTRAL_CONTROL.test(s.slice(i, i + 2)) ? 1 : 0;
        } else c = cls[u]!;
        if (c !== 0) {
          out += s.slice(runStart, i) + (c === 2 ? " " : "");
          runStart = i + width;
        }
        i += width - 1;
      }
      s = runStart === 0 ? s : out + s.slice(runStart);
    }
    if (chinese) {
      let out = "", runStart = 0;
      for (let i = 0; i < s.length; i++) {
        if (isBertCjk(s.charCodeAt(i))) {
          out += `${s.slice(runStart, i)} ${s[i]} `;
          runStart = i + 1;
        }
      }
      s = runStart === 0 ? s : out + s.slice(runStart);
    }
    if (lower) s = s.toLowerCase();
    if (strip && /[^\x00-\x7f]/.test(s)) s = normalizeForm(s, "NFD").replace(/\p{Mn}/gu, "");
    return s;
  };
}

/**
 * A normalizer applied to one chunk of a section, cut before a character its `cut` accepts,
 * knowing whether the chunk is the section's first: the chunks' results joined are the whole
 * section's.
 */
type ChunkNormalize = (text: string, first: boolean) => string;

/**
 * Where a long section may be cut for a normalizer step (encodeAsync normalizes a chunk per
 * slice): given the character a chunk after the first starts with, the character the step leaves
 * it starting with, or undefined where a cut before it could change the step's result. A cut is
 * exact for a step when no rule of the step reaches across it:
 * - NFC / NFD / NFKC / NFKD: before a starter that has no decomposition at all (canonical or
 *   compatibility, so not U+FF9E, which NFKC makes a combining mark) and is the second part of no
 *   composition. Every character of a nonzero combining class, and every one that composes with
 *   the character before it, is a mark (\p{M}) or a Hangul vowel or final jamo; so a character
 *   that is neither begins a new combining sequence in every form, on both sides of the cut.
 * - Lowercase: before a character neither cased nor case-ignorable. Its one context rule
 *   (Final_Sigma) looks across case-ignorable characters to the nearest cased one on each side of
 *   a "Σ", and such a character stops that look, whole or cut, with the same answer (not cased).
 * - BertNormalizer: clean_text, the CJK spacing and accent stripping go character by character
 *   (clean_text keeps the character, or turns white space into " "; an ideograph becomes " x ")
 *   and its lowercasing and NFD are the two above.
 * - Replace (a plain string): before a character that is no character of the pattern, so that no
 *   match spans the cut.
 * - Prepend belongs to the first chunk alone.
 * In a Sequence each step is asked about the character the steps before it left first.
 * Spaces, newlines and ideographs pass every step but a Replace of them: a text of words or of
 * Chinese is cut near where the chunk size says.
 */
type CutBefore = (ch: string) => string | undefined;

const MARK_OR_JAMO = /^(?:\p{M}|[\u1100-\u11ff\ua960-\ua97f\ud7b0-\ud7ff])$/u;
/** a starter no normalization form changes, combines with what comes before, or reorders past */
const stableStarter = (ch: string): boolean => !MARK_OR_JAMO.test(ch) && ch.normalize("NFKD") === ch;
const CASE_CONTEXT = /^(?:\p{Cased}|\p{Case_Ignorable})$/u;

/** the characters a long section is normalized in per chunk (encodeAsync); tests set it small so that cuts are many */
export const normalizeChunk = { chars: 1 << 15 };

/**
 * The normalizer as a function: BertNormalizer's own replica (the library tests a regex per
 * character), the usual small ones natively, anything else the library's object itself; with a
 * chunked form and where it may be cut (CutBefore) where every step is one this knows (none for
 * the library's).
 */
function normalizerOf(node: unknown, library: LibraryPipeline["normalizer"]): { whole: Normalize; chunk?: ChunkNormalize; cut?: CutBefore } | undefined {
  if (node === null || node === undefined) return { whole: (s) => s };
  const simple = (n: unknown): { f: ChunkNormalize; cut: CutBefore } | undefined => {
    if (!isObject(n)) return undefined;
    switch (n.type) {
      case "BertNormalizer": {
        const clean = Boolean(n.clean_text), chinese = Boolean(n.handle_chinese_chars), lower = Boolean(n.lowercase);
        const strip = lower ? n.strip_accents !== false : Boolean(n.strip_accents);
        const cut: CutBefore = (ch) => {
          const u = ch.charCodeAt(0);
          let c = 0;
          if (clean) c = ch.length === 2 ? (ASTRAL_CONTROL.test(ch) ? 1 : 0) : cleanTextClasses()[u]!;
          if (c === 1) return undefined;
          if (c === 2) return " ";
          if (chinese && ch.length === 1 && isBertCjk(u)) return " ";
          return (lower && CASE_CONTEXT.test(ch)) || (strip && !stableStarter(ch)) ? undefined : ch;
        };
        return { f: bertNormalizer(n), cut };
      }
      case "NFC": case "NFD": case "NFKC": case "NFKD": {
        const form = n.type;
        return { f: (s) => normalizeForm(s, form), cut: (ch) => stableStarter(ch) ? ch : undefined };
      }
      case "Lowercase": return { f: (s) => s.toLowerCase(), cut: (ch) => CASE_CONTEXT.test(ch) ? undefined : ch };
      case "Prepend": { const p = n.prepend; return typeof p === "string" ? { f: (s, first) => first ? p + s : s, cut: (ch) => ch } : undefined; }
      case "Replace": {
        // a plain string replaced by text without $ patterns, neither with surrogates (the library's regex has the u flag)
        const from = isObject(n.pattern) ? n.pattern.String : undefined, to = n.content;
        if (typeof from !== "string" || from === "" || typeof to !== "string" || to.includes("$") || /[\ud800-\udfff]/.test(from)) return undefined;
        return { f: (s) => s.replaceAll(from, to), cut: (ch) => from.includes(ch) ? undefined : ch };
      }
      case "Sequence": {
        if (!Array.isArray(n.normalizers)) return undefined;
        const parts = n.normalizers.map(simple);
        if (parts.some((p) => p === undefined)) return undefined;
        return {
          f: (s, first) => parts.reduce((t, p) => p!.f(t, first), s),
          cut: (ch) => parts.reduce<string | undefined>((c, p) => c === undefined ? undefined : p!.cut(c), ch),
        };
      }
      default: return undefined;
    }
  };
  const own = simple(node);
  if (own) return { whole: (s) => own.f(s, true), chunk: own.f, cut: own.cut };
  return library ? { whole: (s) => library.normalize(s) } : undefined;
}

/** where a long section may be cut (CutBefore) as a test per UTF-16 unit, answered once per BMP unit */
function cutTest(cut: CutBefore): (text: string, i: number) => boolean {
  const known = new Uint8Array(0x10000); // 0 not asked yet, 1 a cut, 2 none
  return (text, i) => {
    const u = text.charCodeAt(i);
    if (u >= 0xdc00 && u <= 0xdfff) return false; // never between a surrogate pair's halves
    if (u >= 0xd800 && u <= 0xdbff) return cut(String.fromCodePoint(text.codePointAt(i)!)) !== undefined;
    let k = known[u]!;
    if (k === 0) known[u] = k = cut(String.fromCharCode(u)) === undefined ? 2 : 1;
    return k === 1;
  };
}

/**
 * A section longer than a chunk normalized a chunk per next() (the number of characters done, so
 * that encodeAsync's slices end between chunks), then the words of the whole normalized text. A
 * chunk ends at the first place past the chunk size where `cuts` allows a cut; the looking goes a
 * chunk's worth of characters per next() too (a megabyte of "a" under Lowercase has no such place:
 * it is normalized in one go at its end).
 */
class NormalizingCursor implements WordCursor {
  private readonly parts: string[] = [];
  private at = 0;
  /** where the looking for the current chunk's end goes on */
  private look = 0;
  private words?: WordCursor;
  id?: number;
  constructor(
    private readonly raw: string,
    private readonly normalize: ChunkNormalize,
    private readonly cuts: (text: string, i: number) => boolean,
    private readonly chunkChars: number,
    /** the words of the normalized section, or the id of the added token it is */
    private readonly wordsOf: (text: string) => WordCursor | number,
  ) {}
  next(): string | number | undefined {
    if (this.words) return this.words.next();
    const { raw } = this;
    const from = this.at;
    if (from < raw.length) {
      const chunk = Math.max(1, this.chunkChars);
      const start = Math.max(this.look, from + chunk);
      const stop = Math.min(raw.length, start + chunk);
      let end = start;
      while (end < stop && !this.cuts(raw, end)) end++;
      if (end === stop && stop < raw.length) {
        this.look = stop;
        return stop - start;
      }
      this.parts.push(this.normalize(raw.slice(from, end), from === 0));
      this.at = this.look = end;
      return end - from;
    }
    const words = this.wordsOf(this.parts.join(""));
    this.parts.length = 0;
    if (typeof words === "number") {
      this.id = words;
      this.words = NO_WORDS;
      return undefined;
    }
    this.words = words;
    return words.next();
  }
}

/** Replace " " with "▁" */
function isSpaceEscape(node: unknown): boolean {
  return isObject(node) && node.type === "Replace" && isObject(node.pattern) && node.pattern.String === " " && node.content === ESCAPED_SPACE;
}

/**
 * The normalizer without a last step that replaces every space with "▁", and whether it had one:
 * the segmenter then reads spaces as "▁" and only words not seen before are escaped (replacing
 * the spaces of megabytes at once holds the event loop for a fifth of a second).
 */
function splitSpaceEscape(node: unknown): { rest: unknown; escapes: boolean } {
  if (isSpaceEscape(node)) return { rest: null, escapes: true };
  if (isObject(node) && node.type === "Sequence" && Array.isArray(node.normalizers) && node.normalizers.length > 0 && isSpaceEscape(node.normalizers.at(-1))) {
    return { rest: { ...node, normalizers: node.normalizers.slice(0, -1) }, escapes: true };
  }
  return { rest: node, escapes: false };
}

/** a text that is cut no further: its segments where the vocabulary lets BPE merge them apart */
class SegmentedPieces implements WordCursor {
  private current?: SegmentCursor;
  constructor(private readonly pieces: WordCursor, private readonly segmenter: SpmSegmenter) {}
  next(): string | number | undefined {
    for (;;) {
      const s = this.current?.next();
      if (s !== undefined) return s;
      const piece = this.pieces.next();
      if (piece === undefined || typeof piece === "number") return piece;
      this.current = new SegmentCursor(piece, this.segmenter);
    }
  }
}

const NO_WORDS: WordCursor = { next: () => undefined };

/** one text, whole */
class OnePiece implements WordCursor {
  constructor(private text: string | undefined) {}
  next(): string | undefined { const t = this.text; this.text = undefined; return t === "" ? undefined : t; }
}

/** BertPreTokenizer's words, a chunk between white space at a time (encodeWord splits off punctuation) */
class WhitespaceChunks implements WordCursor {
  private pos = 0;
  constructor(private readonly text: string) {}
  next(): string | undefined {
    const t = this.text;
    let i = this.pos;
    while (i < t.length && isJsSpace(t.charCodeAt(i))) i++;
    if (i >= t.length) { this.pos = i; return undefined; }
    const start = i;
    while (i < t.length && !isJsSpace(t.charCodeAt(i))) i++;
    this.pos = i;
    return t.slice(start, i);
  }
}

type Model =
  | { readonly kind: "bpe"; readonly bpe: BPE; readonly cuts?: ByteLevelCuts; readonly byteLevel: boolean; readonly segmenter?: SpmSegmenter; readonly escapeSpaces: boolean }
  | { readonly kind: "wordpiece"; readonly vocab: TokenIds; readonly options: WordPieceOptions };

/** how the pre-tokenizer cuts a normalized section */
type Words =
  | { readonly kind: "none" }
  | { readonly kind: "split"; readonly patterns: readonly RegExp[] }
  /** spaces as "▁" (read so by the segmenter) and "▁" put before a section as prepend_scheme says */
  | { readonly kind: "metaspace"; readonly prependScheme: "always" | "first" | "never" }
  | { readonly kind: "bert" };

/**
 * One tokenizer.json's encoding (no post-processor: the caller adds BOS/EOS) for one set of added
 * tokens: the library builds its tokenizer for a set, and so does this.
 */
export class HFFastEncoder implements WordEncoder {
  private readonly cache = new WordCache();
  /** the longest added token's length */
  private readonly longestAdded: number;

  constructor(
    private readonly matcher: SpecialMatcher,
    /** added tokens by text: a whole section that normalizes to one is that token (the library's rule) */
    private readonly addedIds: ReadonlyMap<string, number>,
    private readonly normalizer: { readonly whole: Normalize; readonly chunk?: ChunkNormalize; readonly cut?: CutBefore },
    private readonly pre: Words,
    private readonly model: Model,
  ) {
    let longest = 0;
    for (const t of addedIds.keys()) if (t.length > longest) longest = t.length;
    this.longestAdded = longest;
  }

  /** a run over `text` whose ids are appended to `ids` */
  start(text: string, ids: number[] = []): WordRun {
    const split = this.matcher.splitter(text);
    return { fragments: split.fragments, split, index: 0, ids };
  }

  /** encodes words of `run` until about `budget` characters are done; true once it is complete */
  advance(run: WordRun, budget: number): boolean {
    // encode() (no budget) normalizes a section whole; encodeAsync a chunk per slice where that is exact
    this.chunkChars = Number.isFinite(budget) ? normalizeChunk.chars : Infinity;
    return advanceWords(run, budget, this.cache, this);
  }
  /** where a long section may be cut for the normalizer (made on first use) */
  private cuts?: (text: string, i: number) => boolean;
  /** how long a section words() normalizes whole, set by the advance() it is called from */
  private chunkChars = Infinity;

  words(fragments: readonly (string | number)[], index: number): WordCursor | number {
    const raw = fragments[index] as string, { chunk, cut } = this.normalizer;
    if (chunk && cut && raw.length > this.chunkChars) {
      return new NormalizingCursor(raw, chunk, (this.cuts ??= cutTest(cut)), this.chunkChars, (text) => this.sectionWords(text, index));
    }
    return this.sectionWords(this.normalizer.whole(raw), index);
  }

  /** the words of normalized text fragment `index`, or the id of the added token it is as a whole */
  private sectionWords(text: string, index: number): WordCursor | number {
    // a section the normalizer empties (controls dropped, a Strip, a Replace with "") is no text
    // at all to the library: no Metaspace "▁" is put before it
    if (text === "") return NO_WORDS;
    const pre = this.pre, model = this.model;
    if (text.length <= this.longestAdded) {
      // the normalized section as the library has it (spaces escaped by a normalizer are still spaces here)
      const normalized = pre.kind === "none" && model.kind === "bpe" && model.escapeSpaces ? text.replaceAll(" ", ESCAPED_SPACE) : text;
      const added = this.addedIds.get(normalized);
      if (added !== undefined) return added;
    }
    switch (pre.kind) {
      case "bert": return new WhitespaceChunks(text);
      case "split": {
        const pieces = new PieceCursor(text, pre.patterns, true);
        if (model.kind === "bpe" && model.cuts) return new LongByteLevelWords(pieces, model.cuts);
        return model.kind === "bpe" && model.segmenter ? new SegmentedPieces(pieces, model.segmenter) : pieces;
      }
      case "none": return model.kind === "bpe" && model.segmenter ? new SegmentCursor(text, model.segmenter) : new OnePiece(text);
      case "metaspace": {
        // "▁" first unless the text starts with one (a space reads as one); "first": only the
        // library's section 0, text at the very start
        const prepend = pre.prependScheme === "always" || (pre.prependScheme === "first" && index === 0);
        const whole = prepend && !(text.startsWith(" ") || text.startsWith(ESCAPED_SPACE)) ? ESCAPED_SPACE + text : text;
        return new SegmentCursor(whole, (model as { segmenter: SpmSegmenter }).segmenter);
      }
    }
  }

  longWord(word: string): LongWordSteps | undefined {
    const model = this.model;
    if (model.kind === "bpe") return model.bpe.mergeInSteps(word, (text) => bpeSymbols(model, text));
    // a megabyte between white space (a run of words and punctuation): split and encoded across slices
    let at = 0, start = 0;
    return (budget, out) => {
      at = bertPunctSplit(word, at, start, Math.min(word.length, at + Math.max(1, budget)), model, out);
      if (at < 0) { start = ~at; at = start; return false; }
      return true;
    };
  }

  encodeWord(word: string, out: number[]): void {
    const model = this.model;
    if (model.kind === "bpe") {
      model.bpe.encodeWord(bpeSymbols(model, word), out);
      return;
    }
    bertPunctSplit(word, 0, 0, word.length, model, out);
  }
}

/**
 * BertPreTokenizer over a word between white space, from `at` (the run being read started at
 * `start`) to about `stop`: each punctuation character alone, the runs between them WordPiece
 * words. Reaching the end: the word's length; stopping first (after a punctuation character past
 * `stop`): ~ the start of the run it stopped in.
 */
function bertPunctSplit(word: string, at: number, start: number, stop: number, model: { readonly vocab: TokenIds; readonly options: WordPieceOptions }, out: number[]): number {
  for (let i = at; i < word.length;) {
    const cp = word.codePointAt(i)!;
    const width = cp > 0xffff ? 2 : 1;
    if (isBertPunct(cp, cp < 0x80 ? "" : word.slice(i, i + width))) {
      if (i > start) wordPieceEncode(word.slice(start, i), model.vocab, model.options, out);
      wordPieceEncode(word.slice(i, i + width), model.vocab, model.options, out);
      start = i + width;
      if (start >= stop && start < word.length) return ~start;
    }
    i += width;
  }
  if (start < word.length) wordPieceEncode(start === 0 ? word : word.slice(start), model.vocab, model.options, out);
  return word.length;
}

/** a word as its BPE model's symbols: the byte-level alphabet, or "▁" for spaces */
function bpeSymbols(model: { readonly byteLevel: boolean; readonly escapeSpaces: boolean }, word: string): string {
  return model.byteLevel ? byteLevelEncode(word) : model.escapeSpaces ? word.replaceAll(" ", ESCAPED_SPACE) : word;
}

/** the pre-tokenizer's cuts, when they are ones this encoder reproduces: a Split regex (or several), ByteLevel last */
function wordsOf(node: unknown, library: LibraryPreTokenizer | null, modelType: string): { words: Words; byteLevel: boolean } | undefined {
  if (node === null || node === undefined) return { words: { kind: "none" }, byteLevel: false };
  if (!isObject(node) || !library) return undefined;
  if (node.type === "BertPreTokenizer") return modelType === "WordPiece" ? { words: { kind: "bert" }, byteLevel: false } : undefined;
  if (node.type === "Metaspace") {
    // the library's fields (it ignores add_prefix_space and split); "▁" only, what the segmenter reads spaces as
    const scheme = node.prepend_scheme ?? "always";
    const replacement = node.replacement ?? ESCAPED_SPACE;
    if (replacement !== ESCAPED_SPACE || (node.str_rep && node.str_rep !== ESCAPED_SPACE) || !(scheme === "always" || scheme === "first" || scheme === "never")) return undefined;
    return { words: { kind: "metaspace", prependScheme: scheme }, byteLevel: false };
  }
  const parts = node.type === "Sequence" ? node.pretokenizers : [node];
  const libParts = node.type === "Sequence" ? library.tokenizers : [library];
  if (!Array.isArray(parts) || !Array.isArray(libParts) || parts.length !== libParts.length || parts.length === 0) return undefined;
  const patterns: RegExp[] = [];
  let byteLevel = false;
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i], lp = libParts[i];
    if (!isObject(p) || !lp || byteLevel) return undefined; // ByteLevel must come last
    const pattern = lp.pattern;
    if (p.type === "Split") {
      // the library keeps matches and what lies between (Isolated) unless told to invert or remove
      if (p.invert || (typeof p.behavior === "string" && p.behavior.toLowerCase() === "removed") || !(pattern instanceof RegExp)) return undefined;
      patterns.push(new RegExp(pattern.source, pattern.flags));
    } else if (p.type === "ByteLevel") {
      if (p.add_prefix_space || !(pattern instanceof RegExp)) return undefined;
      // its GPT-2 pattern matches every character, so keeping only matches is keeping everything
      if (p.use_regex ?? true) patterns.push(new RegExp(pattern.source, pattern.flags));
      byteLevel = true;
    } else return undefined;
  }
  if (patterns.length === 0) return undefined; // a whole section as one byte-level word: left to the library
  return { words: { kind: "split", patterns }, byteLevel };
}

const ESCAPED_SPACE = "\u2581"; // "▁"
const utf8 = new TextEncoder();
const byteTokenText = (b: number) => `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`;

/**
 * The fast encoder for a tokenizer.json and the added tokens the library was built with, or
 * undefined where its layout is one the library must run: models other than BPE and WordPiece,
 * BPE dropout, suffixes and prefixes, unknown tokens fused across symbols, pre-tokenizers other
 * than Split / ByteLevel / Metaspace / BertPreTokenizer, added tokens that are normalized, ids
 * that two texts share, repeated merges, and options of tokenizer_config.json that change text.
 */
export function fastEncoderFor(tj: JsonObject, addedTokens: readonly JsonObject[], config: JsonObject, library: LibraryPipeline, merges?: CheckedMerges): HFFastEncoder | undefined {
  const model = tj.model;
  if (!isObject(model) || !isObject(model.vocab) || Array.isArray(model.vocab)) return undefined;
  if (config.remove_space === true || config.do_lowercase_and_remove_accent) return undefined;
  const modelType = model.type;
  if (modelType !== "BPE" && modelType !== "WordPiece") return undefined;

  const pre = wordsOf(tj.pre_tokenizer, library.pre_tokenizer, modelType);
  if (!pre) return undefined;
  // spaces become "▁" as the segmenter reads them (BPE cut into segments, no Split to see the spaces first)
  const spaceEscape = splitSpaceEscape(tj.normalizer);
  const escapeSpaces = modelType === "BPE" && !pre.byteLevel && (pre.words.kind === "metaspace" || (pre.words.kind === "none" && spaceEscape.escapes));
  if (pre.words.kind === "metaspace" && (modelType !== "BPE" || spaceEscape.escapes)) return undefined;
  const normalize = escapeSpaces && spaceEscape.escapes ? normalizerOf(spaceEscape.rest, null) : normalizerOf(tj.normalizer, library.normalizer);
  if (!normalize) return undefined;

  const vocab = vocabOf(model.vocab, addedTokens, tj.added_tokens, library.model?.tokens_to_ids);
  if (!vocab) return undefined;
  const specials: SpecialToken[] = [];
  const addedIds = new Map<string, number>();
  let strips = false, spaceEdged = false;
  for (const t of addedTokens) {
    const text = t.content as string, id = t.id as number;
    const special = t.special === true;
    // a normalized added token is matched again in normalized text: left to the library
    if ((t.normalized ?? !special) === true && tj.normalizer !== null && tj.normalizer !== undefined) return undefined;
    addedIds.set(text, id);
    const lstrip = t.lstrip === true, rstrip = t.rstrip === true;
    strips ||= lstrip || rstrip;
    spaceEdged ||= text !== "" && (isJsSpace(text.charCodeAt(0)) || isJsSpace(text.charCodeAt(text.length - 1)));
    specials.push({ text, id, lstrip, rstrip });
  }
  // the library strips the neighbouring sections, an added token's own white space included
  if (strips && spaceEdged) return undefined;
  const matcher = new SpecialMatcher(specials, isJsSpace);

  const unkText = model.unk_token;
  if (unkText !== null && unkText !== undefined && (typeof unkText !== "string" || !vocab.has(unkText))) return undefined;
  const unkId = typeof unkText === "string" ? vocab.get(unkText) : undefined;

  if (modelType === "WordPiece") {
    const prefix = model.continuing_subword_prefix;
    const maxChars = model.max_input_chars_per_word ?? 100;
    if (pre.words.kind !== "bert" || unkId === undefined || typeof prefix !== "string" || model.fuse_unk === true) return undefined;
    if (typeof maxChars !== "number") return undefined;
    let maxTokenLength = 0;
    for (const t of vocab.keys()) if (t.length > maxTokenLength) maxTokenLength = t.length;
    const options: WordPieceOptions = { wordPrefix: "", continuingPrefix: prefix, unkId, maxInputChars: maxChars, maxTokenLength };
    return new HFFastEncoder(matcher, addedIds, normalize, pre.words, { kind: "wordpiece", vocab, options });
  }

  // BPE
  if ((model.dropout !== null && model.dropout !== undefined && model.dropout !== 0) || model.continuing_subword_suffix) return undefined;
  for (const k of ["continuing_subword_prefix", "end_of_word_suffix"]) if (model[k] !== null && model[k] !== undefined && model[k] !== "") return undefined;
  const ignoreMerges = model.ignore_merges === true;
  const byteFallback = model.byte_fallback === true;
  const byteIds = byteFallback ? Array.from({ length: 256 }, (_, b) => vocab.get(byteTokenText(b))) : [];
  const unkPossible = unkId !== undefined && !(byteFallback && byteIds.every((id) => id !== undefined));
  if (model.fuse_unk === true && unkPossible) return undefined;
  // merges the library splits elsewhere than the loader did ("a b c", " a b") are left to it
  if (!merges?.splitAsLibrary) return undefined;
  // a character without a token: its <0xNN> tokens when all exist, else the unknown token, else nothing
  const fallback = (symbol: string, out: number[]) => {
    if (byteFallback) {
      const bytes = utf8.encode(symbol);
      if (bytes.every((b) => byteIds[b] !== undefined)) { for (const b of bytes) out.push(byteIds[b]!); return; }
    }
    if (unkId !== undefined) out.push(unkId);
  };
  const bpe = new BPE(vocab, merges.table(), { ignoreMerges, fallback, cacheSize: 0 });
  if (bpe.repeatedMerges > 0) return undefined; // the library ranks a repeated pair by its last merge
  // long words (a whole section without a pre-tokenizer) are cut where no merge can cross; a
  // whole word that is a token is one token with ignore_merges, so those words stay whole
  const cut = !pre.byteLevel;
  if (cut && ignoreMerges) return undefined;
  const segmenter = cut ? new SpmSegmenter(vocab.keys(), "code points", escapeSpaces) : undefined;
  return new HFFastEncoder(matcher, addedIds, normalize, pre.words, { kind: "bpe", bpe, cuts: pre.byteLevel ? new ByteLevelCuts(vocab) : undefined, byteLevel: pre.byteLevel, segmenter, escapeSpaces });
}

/**
 * The library's token -> id map for a tokenizer built with `added` (all of `allAdded`, or its
 * non-special ones): model.vocab with the added tokens over it, one text per id and one id per
 * text; undefined where the file breaks that (the library then encodes).
 *
 * The library has this map already for all added tokens (`library`, built when the tokenizer
 * loaded): where each added token is new to model.vocab or the same entry, and no id has two
 * texts, it is read as it is, and without the added tokens `added` leaves out (a view); reading
 * model.vocab again (Object.entries over Llama 3's 128K keys) was a third of the first encode.
 */
function vocabOf(modelVocab: JsonObject, added: readonly JsonObject[], allAdded: unknown, library: unknown): TokenIds | undefined {
  const all = Array.isArray(allAdded) ? (allAdded as JsonObject[]) : [];
  if (library instanceof Map && all.length >= added.length) {
    const reused = libraryVocab(modelVocab, added, all, library as ReadonlyMap<string, unknown>);
    if (reused) return reused;
  }
  // built here: model.vocab, then the added tokens over it
  const vocab = new Map<string, number>();
  const idTaken = new Set<number>();
  for (const [text, id] of Object.entries(modelVocab)) {
    if (typeof id !== "number" || idTaken.has(id)) return undefined;
    idTaken.add(id);
    vocab.set(text, id);
  }
  const addedTexts = new Set<string>();
  for (const t of added) {
    const text = t.content, id = t.id;
    if (typeof text !== "string" || typeof id !== "number" || addedTexts.has(text)) return undefined;
    addedTexts.add(text);
    const known = vocab.get(text);
    if (known === undefined) {
      if (idTaken.has(id)) return undefined;
      idTaken.add(id);
      vocab.set(text, id);
    } else if (known !== id) return undefined;
  }
  return vocab;
}

const ID_LIMIT = 1 << 24;

/** the library's map as vocabOf's, or undefined where it is not that map (vocabOf then builds one) */
function libraryVocab(modelVocab: JsonObject, added: readonly JsonObject[], all: readonly JsonObject[], library: ReadonlyMap<string, unknown>): TokenIds | undefined {
  const kept = new Set(added);
  const texts = new Set<string>();
  const leftOut = new Set<string>();
  for (const t of all) {
    const text = t.content, id = t.id;
    if (typeof text !== "string" || typeof id !== "number" || texts.has(text) || library.get(text) !== id) return undefined;
    texts.add(text);
    const own = Object.hasOwn(modelVocab, text) ? modelVocab[text] : undefined;
    if (own === undefined) { if (!kept.has(t)) leftOut.add(text); } else if (own !== id) return undefined;
  }
  if (kept.size !== added.length || added.some((t) => !texts.has(t.content as string))) return undefined;
  // one text per id (a bit each; the loader refuses ids past 2^24)
  const seen = new Uint32Array(ID_LIMIT >>> 5);
  for (const id of library.values()) {
    if (typeof id !== "number" || !Number.isInteger(id) || id < 0 || id >= ID_LIMIT) return undefined;
    const bit = 1 << (id & 31);
    if (seen[id >>> 5]! & bit) return undefined;
    seen[id >>> 5]! |= bit;
  }
  return leftOut.size === 0 ? (library as ReadonlyMap<string, number>) : new TokenIdsWithout(library as ReadonlyMap<string, number>, leftOut);
}

/** a vocabulary less some texts (the special added tokens, for the encoder of literal text) */
class TokenIdsWithout implements TokenIds {
  constructor(private readonly all: ReadonlyMap<string, number>, private readonly without: ReadonlySet<string>) {}
  get(text: string): number | undefined { return this.without.has(text) ? undefined : this.all.get(text); }
  has(text: string): boolean { return !this.without.has(text) && this.all.has(text); }
  *keys(): MapIterator<string> { for (const t of this.all.keys()) if (!this.without.has(t)) yield t; }
}
