import { yieldToEventLoop } from "../platform/host.js";
import { BPE } from "./bpe.js";
import { BertChunkCursor, bertLongChunk, bertNormalize, bertSplit, type BertNormalizeOptions } from "./bert-pre.js";
import { byteLevelDecode, byteLevelEncode, ByteLevelCuts, LongByteLevelWords } from "./byte-level.js";
import { checkDecodeOptions, checkEncodeOptions, checkStreamDecoderOptions } from "./options.js";
import { PieceCursor } from "./pre-tokenizers.js";
import { SpecialMatcher, type SpecialToken } from "./special-split.js";
import { SegmentCursor, SpmMerger, SpmSegmenter } from "./spm.js";
import { TokenType, tokenIdRefusal, type ChatTemplateReading, type ChatTemplateSource, type DecodeOptions, type EncodeOptions, type FimTokenIds, type StreamDecoder, type StreamDecoderOptions, type Tokenizer } from "./types.js";
import { wordPieceEncode, type WordPieceOptions } from "./wordpiece.js";
import { WordCache } from "./word-cache.js";
import { ASYNC_SLICE_CHARS, advanceWords, type WordCursor, type WordEncoder, type WordRun } from "./word-run.js";

/**
 * Everything a vocabulary-driven tokenizer needs, independent of the file it came from. The GGUF
 * loader fills it with llama.cpp's defaults already applied.
 */
export interface VocabSpec extends ChatTemplateReading {
  readonly model: "llama" | "gpt2" | "bert";
  readonly pre?: string;
  readonly tokens: readonly string[];
  /** TokenType per token */
  readonly types: ArrayLike<number>;
  /** SentencePiece piece scores (llama) */
  readonly scores?: ArrayLike<number>;
  /** ordered merges (gpt2) */
  readonly merges?: ReadonlyArray<readonly [string, string]>;
  /** names merge i in the error a merge outside the vocabulary raises (absent: such merges are skipped) */
  readonly mergeName?: (index: number) => string;
  /** the tokens' ids by text, a later duplicate winning (tokenIndex): made from `tokens` when absent */
  readonly textToId?: ReadonlyMap<string, number>;
  /** split patterns (gpt2) */
  readonly prePatterns?: readonly RegExp[];
  readonly ignoreMerges?: boolean;
  /**
   * gpt2: BPE over the text's own characters, not GPT-2's byte alphabet (llama.cpp's byte_encode
   * false: gemma4, sarvam-moe, whitespace), a character no token has spelled in <0xXX> tokens
   * (a byte without one dropped) and tokens decoded as their own UTF-8
   */
  readonly rawText?: boolean;
  /** gpt2: a text fragment's spaces written as U+2581 before it is split, and back when decoded (llama.cpp's escape_whitespaces) */
  readonly escapeSpaces?: boolean;
  /** gpt2: a piece of line breaks only that is a token is that token, unmerged (llama.cpp's gemma4 pre-tokenizer) */
  readonly newlinesWhole?: boolean;
  /**
   * gpt2: pieces of white space dropped, the text lowercased or not first (llama.cpp's "whitespace"
   * tokenizer model, whose session cuts the text at white space and tokenizes what is between)
   */
  readonly dropWhitespace?: { readonly lowercase: boolean };
  readonly bosId?: number;
  readonly eosId?: number;
  readonly unkId?: number;
  readonly padId?: number;
  readonly sepId?: number;
  readonly clsId?: number;
  readonly maskId?: number;
  readonly eogIds: ReadonlySet<number>;
  /** the end-of-turn token (llama.cpp's token_eot()), if any */
  readonly eotId?: number;
  /** fill-in-the-middle tokens (absent: none) */
  readonly fimIds?: FimTokenIds;
  readonly addBos: boolean;
  readonly addEos: boolean;
  /** llama: prefix a space to text at the start and after special tokens */
  readonly addSpacePrefix: boolean;
  readonly lstripIds?: ReadonlySet<number>;
  readonly rstripIds?: ReadonlySet<number>;
  /** the error line when encoding needs a special id the vocabulary lacks, naming the file and key it came from */
  readonly missingIdMessage?: (what: SpecialIdRole) => string;
}

/** the special ids encoding may need */
export type SpecialIdRole = "BOS" | "EOS" | "CLS" | "SEP" | "UNK";

const utf8 = new TextEncoder();
const EMPTY = new Uint8Array(0);
const ESCAPED_SPACE = "\u2581"; // "▁"
const escapeSpaces = (text: string): string => text.replaceAll(" ", ESCAPED_SPACE);
const unchanged = (text: string): string => text;
/** a piece of white space only (\p{White_Space} is llama.cpp's is_whitespace set) */
const ALL_SPACE = /^\p{White_Space}+$/u;
const LINE_BREAKS = /^\n+$/;
/**
 * llama.cpp's unicode_tolower, code point by code point: JS's lower case, its first code point
 * where it has more (U+0130 is "i" there, "i\u0307" in JS)
 */
function lowercaseEach(text: string): string {
  let out = "";
  for (const ch of text) {
    const l = ch.toLowerCase();
    out += l.length === ch.length ? l : String.fromCodePoint(l.codePointAt(0)!);
  }
  return out;
}

/** the words of `inner` but those of white space only (llama.cpp's "whitespace" tokenizer model drops them) */
class WordsBetweenSpaces implements WordCursor {
  constructor(private readonly inner: WordCursor) {}
  next(): string | number | undefined {
    for (;;) {
      const w = this.inner.next();
      if (typeof w !== "string" || !ALL_SPACE.test(w)) return w;
    }
  }
}
/** llama.cpp's BERT (WPM) normalization: lowercased, accents stripped, ideographs apart */
const BERT_NORMALIZE: BertNormalizeOptions = { lowercase: true, stripAccents: true, chineseChars: true };


/** an encode in progress, and whether to close it with EOS / SEP */
interface EncodeRun extends WordRun {
  readonly addSpecial: boolean;
}

/**
 * The text with each lone surrogate as U+FFFD, one unit for one (literal ranges stay put): the
 * UTF-8 every other consumer of the string sees (llama.cpp, TextEncoder, a file), so SentencePiece
 * merges "\uFFFD" as the token it may be instead of spelling a lone surrogate in byte tokens, and
 * the pre-tokenizers' classes see a symbol, not an unpaired surrogate.
 */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
function wellFormed(text: string): string {
  const s = text as string & { toWellFormed?: () => string };
  return s.toWellFormed ? s.toWellFormed() : text.replace(LONE_SURROGATE, "\ufffd");
}

/** HF's decoder clean-up, applied per WordPiece token as HF's WordPiece decoder does. */
function wordPieceCleanup(s: string): string {
  return s.replaceAll(" .", ".").replaceAll(" ?", "?").replaceAll(" !", "!").replaceAll(" ,", ",")
    .replaceAll(" ' ", "'").replaceAll(" n't", "n't").replaceAll(" 'm", "'m").replaceAll(" do not", " don't")
    .replaceAll(" 's", "'s").replaceAll(" 've", "'ve").replaceAll(" 're", "'re");
}

/** each token's id by its text; a later duplicate wins, as in llama.cpp's token_to_id map */
export function tokenIndex(tokens: readonly string[]): Map<string, number> {
  const byText = new Map<string, number>();
  for (let i = 0; i < tokens.length; i++) byText.set(tokens[i]!, i);
  return byText;
}

export class VocabTokenizer implements Tokenizer {
  readonly type: "llama" | "gpt2" | "bert";
  readonly pre?: string;
  readonly vocabSize: number;
  readonly bosId?: number;
  readonly eosId?: number;
  readonly unkId?: number;
  readonly padId?: number;
  readonly sepId?: number;
  readonly clsId?: number;
  readonly maskId?: number;
  readonly endOfGenerationIds: ReadonlySet<number>;
  readonly endOfTurnId?: number;
  readonly fimIds: FimTokenIds;
  readonly addBos: boolean;
  readonly addEos: boolean;
  readonly chatTemplate?: ChatTemplateSource;
  readonly chatTemplateProblem?: string;
  readonly namedChatTemplates?: ReadonlyMap<string, ChatTemplateSource>;

  private readonly tokens: readonly string[];
  private readonly types: ArrayLike<number>;
  private readonly textToId: ReadonlyMap<string, number>;
  private readonly allSpecial: SpecialMatcher;
  private readonly userDefinedOnly: SpecialMatcher;
  private readonly bytesCache: (Uint8Array | undefined)[];
  private readonly missingIdMessage?: (what: SpecialIdRole) => string;
  private readonly bpe?: BPE;
  /** where a gpt2 word too long to hold the event loop for is cut (made on first use) */
  private longWordCuts?: ByteLevelCuts;
  private readonly segmenter?: SpmSegmenter;
  private readonly spm?: SpmMerger;
  private readonly wordPiece?: WordPieceOptions;
  /** ids of recent words, whichever kind of word the tokenizer splits text into */
  private readonly wordIds = new WordCache();
  /** a gpt2 word as the BPE reads it: GPT-2's byte alphabet, or the text itself (VocabSpec.rawText) */
  private readonly spell: (word: string) => string;

  constructor(private readonly spec: VocabSpec) {
    this.type = spec.model;
    this.pre = spec.pre;
    this.tokens = spec.tokens;
    this.types = spec.types;
    this.vocabSize = spec.tokens.length;
    this.bosId = spec.bosId; this.eosId = spec.eosId; this.unkId = spec.unkId; this.padId = spec.padId;
    this.sepId = spec.sepId; this.clsId = spec.clsId; this.maskId = spec.maskId;
    this.endOfGenerationIds = spec.eogIds;
    if (spec.eotId !== undefined) this.endOfTurnId = spec.eotId;
    this.fimIds = spec.fimIds ?? {};
    this.addBos = spec.addBos;
    this.addEos = spec.addEos;
    this.chatTemplate = spec.chatTemplate;
    this.chatTemplateProblem = spec.chatTemplateProblem;
    this.namedChatTemplates = spec.namedChatTemplates;
    this.bytesCache = new Array(this.vocabSize);
    this.missingIdMessage = spec.missingIdMessage;

    this.textToId = spec.textToId ?? tokenIndex(spec.tokens);

    const specials: SpecialToken[] = [];
    const userDefined: SpecialToken[] = [];
    for (let id = 0; id < this.vocabSize; id++) {
      const t = spec.types[id];
      if (t !== TokenType.Control && t !== TokenType.UserDefined && t !== TokenType.Unknown) continue;
      const st: SpecialToken = { text: spec.tokens[id]!, id, lstrip: spec.lstripIds?.has(id), rstrip: spec.rstripIds?.has(id) };
      specials.push(st);
      if (t === TokenType.UserDefined) userDefined.push(st);
    }
    this.allSpecial = new SpecialMatcher(specials);
    this.userDefinedOnly = new SpecialMatcher(userDefined);

    this.spell = spec.rawText ? unchanged : byteLevelEncode;
    if (spec.model === "gpt2") {
      if (!spec.merges) throw new Error("gpt2 tokenizer: the merges list is missing");
      this.bpe = new BPE(this.textToId, spec.merges, {
        ignoreMerges: spec.ignoreMerges,
        cacheSize: 0, // wordIds remembers words before their byte-level spelling is even made
        mergeName: spec.mergeName,
        // a character with no token: its single-byte pieces, or its bytes' <0xXX> tokens over raw text, where they exist (llama.cpp's fallback)
        fallback: spec.rawText
          ? (symbol, out) => {
            for (const b of utf8.encode(symbol)) {
              const id = this.textToId.get(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
              if (id !== undefined) out.push(id);
            }
          }
          : (symbol, out) => {
            for (const b of utf8.encode(symbol)) {
              const id = this.textToId.get(String.fromCharCode(b));
              if (id !== undefined && b < 0x80) out.push(id);
            }
          },
      });
    } else if (spec.model === "llama") {
      this.segmenter = new SpmSegmenter(this.textToId.keys());
      this.spm = new SpmMerger(this.textToId, spec.scores ?? []);
    } else {
      let maxTokenLength = 0;
      for (const t of spec.tokens) if (t.length > maxTokenLength) maxTokenLength = t.length;
      this.wordPiece = { wordPrefix: ESCAPED_SPACE, continuingPrefix: "", unkId: this.unkId ?? -1, maxInputChars: 100, maxTokenLength };
    }
  }

  piece(id: number): string {
    this.checkId(id);
    return this.tokens[id]!;
  }

  isSpecial(id: number): boolean {
    const t = this.types[id];
    return t === TokenType.Control || t === TokenType.UserDefined;
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    const run = this.startRun(text, options);
    this.advance(run, Infinity);
    return run.ids;
  }

  /**
   * encode()'s ids, made a slice of text at a time with a turn of the event loop between slices,
   * so that a server stays responsive while a multi-megabyte prompt is tokenized. Slices end
   * between the words the tokenizer itself splits text into (special tokens, pre-tokenizer
   * pieces, SentencePiece segments no token spans, BERT chunks), where encode() makes the same
   * ids on either side.
   */
  async encodeAsync(text: string, options: EncodeOptions = {}): Promise<number[]> {
    const run = this.startRun(text, options);
    while (!this.advance(run, ASYNC_SLICE_CHARS)) await yieldToEventLoop();
    return run.ids;
  }

  private startRun(text: string, options: EncodeOptions): EncodeRun {
    checkEncodeOptions(options);
    const addSpecial = options.addSpecialTokens ?? true;
    // the special tokens are looked for as the words go (SpecialSplit): a scan of megabytes at once holds the event loop
    const split = (options.parseSpecial ?? true ? this.allSpecial : this.userDefinedOnly).splitter(wellFormed(text), options.literalRanges);
    const ids: number[] = [];
    if (addSpecial) {
      if (this.type === "bert") ids.push(this.required(this.clsId ?? this.bosId, "CLS"));
      else if (this.addBos) ids.push(this.required(this.bosId, "BOS"));
    }
    // WordPiece writes unk for a word it cannot spell: refused up front, whatever the text
    if (this.type === "bert") this.required(this.unkId, "UNK");
    return { fragments: split.fragments, split, index: 0, addSpecial, ids };
  }

  /** encodes words of `run` until about `budget` characters are done; true once it is complete */
  private advance(run: EncodeRun, budget: number): boolean {
    if (!advanceWords(run, budget, this.wordIds, this.wordEncoder)) return false;
    if (run.addSpecial) {
      if (this.type === "bert") run.ids.push(this.required(this.sepId, "SEP"));
      else if (this.addEos) run.ids.push(this.required(this.eosId, "EOS"));
    }
    return true;
  }

  /** the words of a text fragment: SentencePiece segments, pre-tokenizer pieces or BERT chunks */
  private readonly wordEncoder: WordEncoder = {
    words: (fragments, index) => {
      const f = fragments[index] as string;
      switch (this.type) {
        case "llama": {
          // the start of the text counts as "after a special token" (text fragments never touch)
          const prefix = this.spec.addSpacePrefix && (index === 0 || typeof fragments[index - 1] === "number") ? " " : "";
          return new SegmentCursor(prefix + f, this.segmenter!);
        }
        case "gpt2": return this.gpt2Words(f);
        case "bert": return new BertChunkCursor(f);
      }
    },
    encodeWord: (word, out) => this.encodeWord(word, out),
    longWord: (word) => {
      switch (this.type) {
        case "llama": return this.spm!.encodeInSteps(word, escapeSpaces, this.pushByteToken);
        case "gpt2": return this.newlineToken(word) === undefined ? this.bpe!.mergeInSteps(word, this.spell) : undefined;
        case "bert": return bertLongChunk(word, BERT_NORMALIZE, (w, out) => wordPieceEncode(w, this.textToId, this.wordPiece!, out));
      }
    },
  };

  /**
   * a gpt2 fragment's words: its pre-tokenizer pieces (over the text lowercased, spaces escaped
   * first, white space dropped, as the spec says), a long one cut where byte-level BPE merges
   * nothing across (raw text has no such cuts: a long word is merged in steps, longWord)
   */
  private gpt2Words(f: string): WordCursor {
    const { dropWhitespace, escapeSpaces: spacesEscaped, rawText, prePatterns } = this.spec;
    if (dropWhitespace?.lowercase) f = lowercaseEach(f);
    if (spacesEscaped) f = escapeSpaces(f);
    let words: WordCursor = new PieceCursor(f, prePatterns ?? []);
    if (dropWhitespace) words = new WordsBetweenSpaces(words);
    return rawText ? words : new LongByteLevelWords(words, (this.longWordCuts ??= new ByteLevelCuts(this.textToId)));
  }

  /** the token of a word of line breaks only, where one is and the spec says so (VocabSpec.newlinesWhole) */
  private newlineToken(word: string): number | undefined {
    return this.spec.newlinesWhole && LINE_BREAKS.test(word) ? this.textToId.get(word) : undefined;
  }

  /** appends the ids of one word of the current kind (see WordCursor) */
  private encodeWord(word: string, out: number[]): void {
    switch (this.type) {
      case "llama":
        this.spm!.encode(escapeSpaces(word), this.pushByteToken, out);
        break;
      case "gpt2": {
        const whole = this.newlineToken(word);
        if (whole !== undefined) out.push(whole);
        else this.bpe!.encodeWord(this.spell(word), out);
        break;
      }
      case "bert":
        for (const w of bertSplit(bertNormalize(word, BERT_NORMALIZE))) wordPieceEncode(w, this.textToId, this.wordPiece!, out);
        break;
    }
  }

  decode(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    checkDecodeOptions(options);
    const d = this.streamDecoder(options);
    let s = "";
    for (let i = 0; i < ids.length; i++) s += d.push(ids[i]!);
    return s + d.flush();
  }

  createStreamDecoder(options: StreamDecoderOptions = {}): StreamDecoder {
    checkStreamDecoderOptions(options);
    return this.streamDecoder(options);
  }

  /** createStreamDecoder for options already checked (decode checks its own, which have no context) */
  private streamDecoder(options: StreamDecoderOptions): StreamDecoder {
    const skip = options.skipSpecialTokens ?? false;
    const td = new TextDecoder("utf-8");
    // SentencePiece and WordPiece mark word starts with a space; the text's first one is dropped
    let stripPending = this.type === "bert" || (this.type === "llama" && this.spec.addSpacePrefix);
    /**
     * the context left a UTF-8 sequence open: the U+FFFD that ends decode(context) is the
     * prompt's, so the first text after it drops one where it starts (the next bytes did not
     * complete the sequence, or nothing followed at all: a completion of no tokens adds no text)
     */
    let contextOpen = false;
    const after = (text: string): string => {
      if (!contextOpen || text.length === 0) return text;
      contextOpen = false;
      return text.startsWith("\uFFFD") ? text.slice(1) : text;
    };
    const bytesOf = (id: number): Uint8Array | undefined => {
      this.checkId(id);
      const t = this.types[id];
      if (skip && (t === TokenType.Control || t === TokenType.Unknown)) return undefined;
      let bytes = this.tokenBytes(id);
      if (bytes.length === 0) return undefined;
      if (stripPending) {
        stripPending = false;
        if (bytes[0] === 0x20 && !this.isSpecial(id)) bytes = bytes.subarray(1);
      }
      return bytes;
    };
    // the context's text is not streamed, but it decides the strip and any UTF-8 sequence it leaves
    // open (a second decoder fed the same bytes tells, by its flush, whether one is)
    const probe = new TextDecoder("utf-8");
    for (const id of options.context ?? []) {
      const bytes = bytesOf(id);
      if (!bytes) continue;
      td.decode(bytes, { stream: true });
      probe.decode(bytes, { stream: true });
    }
    contextOpen = probe.decode() !== "";
    return {
      push: (id: number): string => {
        const bytes = bytesOf(id);
        return bytes ? after(td.decode(bytes, { stream: true })) : "";
      },
      flush: (): string => after(td.decode()),
    };
  }

  /** The bytes a token contributes to decoded text (cached per id). */
  tokenBytes(id: number): Uint8Array {
    this.checkId(id);
    const cached = this.bytesCache[id];
    if (cached) return cached;
    const text = this.tokens[id]!;
    let bytes: Uint8Array;
    switch (this.types[id]) {
      case TokenType.Control:
      case TokenType.Unknown:
      case TokenType.UserDefined:
        bytes = utf8.encode(text);
        break;
      case TokenType.Byte: {
        const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(text);
        bytes = m ? Uint8Array.of(parseInt(m[1]!, 16)) : utf8.encode(text);
        break;
      }
      case TokenType.Normal:
        if (this.type === "gpt2" && !this.spec.rawText) bytes = byteLevelDecode(text);
        else if (this.type === "gpt2") bytes = utf8.encode(this.spec.escapeSpaces ? text.replaceAll(ESCAPED_SPACE, " ") : text);
        else if (this.type === "bert") bytes = utf8.encode(wordPieceCleanup(text.replaceAll(ESCAPED_SPACE, " ")));
        else bytes = utf8.encode(text.replaceAll(ESCAPED_SPACE, " "));
        break;
      default:
        bytes = EMPTY; // unused / undefined tokens render as nothing, as in llama.cpp
    }
    this.bytesCache[id] = bytes;
    return bytes;
  }

  private readonly pushByteToken = (byte: number, out: number[]): void => { out.push(this.byteToken(byte)); };

  /** The <0xNN> token for a byte, else the byte as a one-character token (llama.cpp's byte_to_token). */
  private byteToken(byte: number): number {
    const hex = byte.toString(16).toUpperCase().padStart(2, "0");
    const id = this.textToId.get(`<0x${hex}>`) ?? (byte < 0x80 ? this.textToId.get(String.fromCharCode(byte)) : undefined) ?? this.unkId;
    if (id === undefined) throw new Error(`llama tokenizer: byte 0x${hex} has no <0x${hex}> token and the vocabulary has no unknown token`);
    return id;
  }

  private required(id: number | undefined, what: SpecialIdRole): number {
    if (id === undefined) {
      throw new Error(this.missingIdMessage?.(what) ?? `${this.type} tokenizer: adding special tokens needs a ${what} token id, but the vocabulary defines none`);
    }
    return id;
  }

  private checkId(id: number): void {
    const refusal = tokenIdRefusal(id, this.vocabSize);
    if (refusal) throw new RangeError(refusal);
  }
}
