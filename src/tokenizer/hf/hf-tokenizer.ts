import { Tokenizer as LibTokenizerClass } from "@huggingface/tokenizers";
import { mergeIdsOf, MergeTable, type MergeIds } from "../bpe.js";
import { detectSpecialTokens } from "../gguf-eog.js";
import { tokenIdRefusal, type ChatTemplateReading, type ChatTemplateSource, type DecodeOptions, type EncodeOptions, type FimTokenIds, type StreamDecoder, type StreamDecoderOptions, type Tokenizer } from "../types.js";
import { isObject, tokenText, type JsonObject } from "./json-files.js";
import { cleanUpStream, windowedStreamDecoder } from "./stream.js";
import { cleanUpTokenization, ownDecoderFor, type OwnDecoder } from "./decoder.js";
import { fastEncoderFor, type CheckedMerges, type HFFastEncoder, type LibraryPipeline } from "./fast-encoder.js";
import { ASYNC_SLICE_CHARS } from "../word-run.js";
import { checkDecodeOptions, checkEncodeOptions, checkStreamDecoderOptions } from "../options.js";
import { yieldToEventLoop } from "../../platform/host.js";
import { byteLevelDecode } from "../byte-level.js";
import { byteLevelOffsets, metaspaceOffsets, wordPieceOffsets, type Offset } from "../offsets.js";
import type { InputTemplate, TemplateToken } from "../model-input.js";

/**
 * The part of @huggingface/tokenizers' Tokenizer we use, typed here: its bundled .d.ts files import
 * each other without extensions, which NodeNext resolution cannot follow.
 */
interface HFLibTokenizer {
  encode(text: string, options: { add_special_tokens: boolean; text_pair?: string; return_token_type_ids?: boolean }): { ids: number[]; token_type_ids?: number[] };
  decode(ids: number[], options: { skip_special_tokens: boolean; clean_up_tokenization_spaces: boolean }): string;
  id_to_token(id: number): string | undefined;
  /** its model's id -> text list (added tokens set over it), which get_vocab reads */
  readonly model: { readonly vocab: readonly (string | undefined)[] };
}
const utf8 = new TextEncoder();
const HFLib = LibTokenizerClass as unknown as new (tokenizerJson: object, config: object) => HFLibTokenizer;

/** ids past this are refused: a hostile tokenizer.json must not make us allocate a giant vocabulary */
const MAX_TOKEN_ID = 1 << 24;

/** with the model's chat template as its folder gives it (tokenizerFromFolder reads it; none when absent) */
export interface HFTokenizerSource extends ChatTemplateReading {
  /** file or folder named in errors */
  readonly where: string;
  /** parsed tokenizer.json (or one built from legacy vocabulary files) */
  readonly tokenizerJson: JsonObject;
  /** parsed tokenizer_config.json (special tokens, add_bos_token), if any */
  readonly config?: JsonObject;
  /** more ids that end generation (generation_config.json's eos_token_id) */
  readonly extraEosIds?: readonly number[];
  /** encode with @huggingface/tokenizers only, never tsllm's own cores (the reference they are tested and measured against) */
  readonly libraryOnly?: boolean;
}

/**
 * model.merges as validate() found them: each merge's ids in model.vocab (the right part's
 * continuing_subword_prefix left out of the merged token), and whether every "a b" string has
 * exactly one space, inside it (the library then splits each one where validate does).
 */
export interface ResolvedMerges {
  readonly ids: MergeIds;
  readonly splitAsLibrary: boolean;
}

/** where each section's Sequence keeps its steps */
const SEQUENCE_LISTS = { normalizer: "normalizers", pre_tokenizer: "pretokenizers", post_processor: "processors", decoder: "decoders" } as const;

/**
 * A section is an object or null, and a Sequence's steps are objects, as tokenizers (Rust) reads
 * them: the library skipped a null pre-tokenizer step ("Hello world" encoded as "Helloworld") and
 * crashed on a null decoder step at decode. Nesting is bounded: the check and the library recurse.
 */
function checkSteps(where: string, node: unknown, field: string, list: string, depth: number): void {
  if (node === undefined || node === null) return;
  if (!isObject(node)) throw new Error(`${where}: "${field}": expected an object with "type" or null, found ${JSON.stringify(node)?.slice(0, 60)}`);
  if (node.type !== "Sequence") return;
  if (depth >= 32) throw new Error(`${where}: "${field}": Sequences nested more than 32 deep`);
  const steps = node[list];
  if (!Array.isArray(steps)) throw new Error(`${where}: "${field}.${list}": expected a list of steps, found ${JSON.stringify(steps)?.slice(0, 60)}`);
  steps.forEach((step, i) => {
    const at = `${field}.${list}[${i}]`;
    if (!isObject(step)) throw new Error(`${where}: "${at}": expected an object with "type", found ${JSON.stringify(step)?.slice(0, 60)}`);
    checkSteps(where, step, at, list, depth + 1);
  });
}

/** Checks the parts of tokenizer.json the library would otherwise crash on or turn into huge allocations; a BPE model's merges as ids. */
function validate(where: string, tj: JsonObject): ResolvedMerges | undefined {
  const model = tj.model;
  if (!isObject(model)) throw new Error(`${where}: "model": required section is missing (expected an object with "type" and "vocab")`);
  if (model.vocab === undefined || model.vocab === null || typeof model.vocab !== "object") {
    throw new Error(`${where}: "model.vocab": required vocabulary is missing (expected an object or array)`);
  }
  // the library guesses the model from its shape when the type is not one it knows: an unknown type is an error here
  if (model.type !== undefined && !(typeof model.type === "string" && MODEL_TYPES.includes(model.type))) {
    throw new Error(`${where}: "model.type": expected one of ${MODEL_TYPES.join(", ")}, found ${JSON.stringify(model.type)?.slice(0, 60)}`);
  }
  if (model.type === "BPE" && !Array.isArray(model.merges)) throw new Error(`${where}: "model.merges": a BPE model needs its merges array`);
  for (const [section, list] of Object.entries(SEQUENCE_LISTS)) checkSteps(where, tj[section], section, list, 0);
  const isId = (id: unknown) => typeof id === "number" && Number.isInteger(id) && id >= 0 && id < MAX_TOKEN_ID;
  const badId = (field: string, id: unknown) => new Error(`${where}: ${field}: expected a token id in [0, ${MAX_TOKEN_ID}), found ${JSON.stringify(id)}`);
  // a BPE model's texts by id (the last of a shared id's), for its merge check
  let texts: string[] | undefined;
  if (!Array.isArray(model.vocab)) {
    const vocab = model.vocab as Record<string, unknown>;
    // for-in rather than Object.entries (no [key, value] array per entry; a JSON object has no
    // inherited enumerable keys), the field spelled only for an error
    if (model.type === "BPE") texts = [];
    for (const t in vocab) {
      const id = vocab[t];
      if (!isId(id)) throw badId(`"model.vocab[${JSON.stringify(t)}]"`, id);
      if (texts) texts[id as number] = t;
    }
  } else if (model.vocab.length >= MAX_TOKEN_ID) throw new Error(`${where}: "model.vocab": ${model.vocab.length} entries is more than ${MAX_TOKEN_ID}`);
  let merges: ResolvedMerges | undefined;
  if (model.type === "BPE") {
    const list = model.merges as unknown[];
    const vocab = model.vocab as Record<string, unknown>;
    // (own properties only: an object's are all checked ids; "constructor" is no token)
    const idOf = (t: string) => { const id = vocab[t]; return typeof id === "number" ? id : Object.hasOwn(vocab, t) ? -1 : undefined; };
    const prefix = typeof model.continuing_subword_prefix === "string" ? model.continuing_subword_prefix : "";
    let splitAsLibrary = true;
    const ids = mergeIdsOf(list.length, (i): [string, string] => {
      const m = list[i];
      // "a b" splits at the first space after position 0, as GGUF's merges and merges.txt do
      const space = typeof m === "string" ? m.indexOf(" ", 1) : -1;
      if (typeof m === "string" && space > 0) {
        splitAsLibrary &&= space < m.length - 1 && m.indexOf(" ", space + 1) < 0;
        return [m.slice(0, space), m.slice(space + 1)];
      }
      if (Array.isArray(m) && m.length === 2 && m.every((x) => typeof x === "string")) return m as [string, string];
      throw new Error(`${where}: "model.merges[${i}]": expected "a b" or ["a", "b"], found ${JSON.stringify(m)?.slice(0, 60)}`);
    }, idOf, (i) => `${where}: "model.merges[${i}]"`, prefix, texts && ((id) => texts[id]));
    merges = { ids, splitAsLibrary };
  }
  if (model.type === "Unigram") {
    if (!Array.isArray(model.vocab)) throw new Error(`${where}: "model.vocab": a Unigram model needs a list of [piece, score]`);
    model.vocab.forEach((e, i) => {
      if (!(Array.isArray(e) && typeof e[0] === "string" && typeof e[1] === "number")) throw new Error(`${where}: "model.vocab[${i}]": expected [piece, score], found ${JSON.stringify(e)?.slice(0, 60)}`);
    });
  }
  if (tj.added_tokens !== undefined && tj.added_tokens !== null) {
    if (!Array.isArray(tj.added_tokens)) throw new Error(`${where}: "added_tokens": expected an array`);
    tj.added_tokens.forEach((t, i) => {
      if (!isObject(t) || typeof t.content !== "string") throw new Error(`${where}: "added_tokens[${i}]": expected {"id", "content"}`);
      if (t.content.length > MAX_ADDED_TOKEN_CHARS) throw new Error(`${where}: "added_tokens[${i}].content": ${t.content.length} characters, more than the ${MAX_ADDED_TOKEN_CHARS} a token may have`);
      if (!isId(t.id)) throw badId(`"added_tokens[${i}].id"`, t.id);
    });
  }
  for (const section of ["normalizer", "pre_tokenizer"] as const) checkRegexes(where, section, tj[section]);
  return merges;
}

/**
 * The library's Unigram model hands a word's pieces on with one `push(...pieces)`, and a spread of
 * more than ~100K arguments overflows the stack: 150K characters of Chinese with no space (one
 * word to a Metaspace pre-tokenizer, a chapter of a novel) was refused. Not a bound on memory (the
 * lattice is linear in the word), so the same pieces, in the same order, are pushed one at a time.
 */
function withUnigramPushes(lib: HFLibTokenizer): HFLibTokenizer {
  const model = (lib as unknown as { model?: UnigramModel }).model;
  // tokenize (the lattice's best pieces of one word) is the model's own; only the spread is replaced
  if (model && typeof model.tokenize === "function" && typeof model.encode === "function") {
    model.encode = (words) => {
      const pieces: string[] = [];
      for (const word of words) for (const piece of model.tokenize(word)) pieces.push(piece);
      return pieces;
    };
  }
  return lib;
}
interface UnigramModel { tokenize(word: string): string[]; encode(words: string[]): string[] }

/** longest added token accepted (real ones are a few dozen characters; the library's matcher spends memory per character) */
const MAX_ADDED_TOKEN_CHARS = 4096;
const MODEL_TYPES = ["BPE", "WordPiece", "Unigram", "WordLevel"];
/** the tokenizer.json sections the library builds from; a failure is blamed on the first whose removal cures it */
const SECTIONS = ["normalizer", "pre_tokenizer", "post_processor", "decoder", "added_tokens"] as const;

/**
 * Refuses Split / Replace regexes with a quantified group that itself ends in a quantifier —
 * `(a+)+`, `(x*)*`, `(\s+)*` — the shape of catastrophic backtracking, which would hang the
 * library's constructor (it tokenizes a probe) or any later call. Real tokenizers' patterns have
 * no such nesting.
 */
function checkRegexes(where: string, path: string, node: unknown): void {
  if (Array.isArray(node)) return node.forEach((n, i) => checkRegexes(where, `${path}[${i}]`, n));
  if (!isObject(node)) return;
  const pattern = isObject(node.pattern) ? node.pattern.Regex : undefined;
  if (typeof pattern === "string" && NESTED_QUANTIFIER.test(pattern)) {
    throw new Error(`${where}: "${path}.pattern.Regex": ${JSON.stringify(pattern.slice(0, 60))} repeats a group that repeats itself (catastrophic backtracking); refusing it`);
  }
  for (const [k, v] of Object.entries(node)) if (k !== "pattern" && (Array.isArray(v) || isObject(v))) checkRegexes(where, `${path}.${k}`, v);
}

/** a group whose body ends in + * or {n,} (its last atom repeats), itself followed by + * or {n,} */
const NESTED_QUANTIFIER = /\((?:[^()\\]|\\.)*(?:[+*]|\{\d+,\d*\})\)(?:[+*]|\{\d+,\d*\})/;

/** where the library's encoding may be cut: the space of "a b" (letters or digits each side, cutChar) */
const LIBRARY_CUT = /([\p{L}\p{N}]) ([\p{L}\p{N}])/gu;
const ALNUM = /^[\p{L}\p{N}]$/u;
/** Han ideographs: BertNormalizer's handle_chinese_chars puts spaces around them */
const HAN = /^\p{sc=Han}$/u;

/**
 * A letter or digit that a normalizer keeps a letter or digit with no space: not U+037A nor the
 * Arabic ligatures whose NFKC starts with a space, not a Han ideograph (BertNormalizer spaces them)
 */
function cutChar(c: string): boolean {
  return ALNUM.test(c) && !HAN.test(c) && !/\s/u.test(c.normalize("NFKC").toLowerCase());
}

/** whether a token has a letter or digit right before the space mark `m` */
function spansCut(piece: string, m: string): boolean {
  for (let i = piece.indexOf(m, 1); i > 0; i = piece.indexOf(m, i + 1)) {
    const before = piece.codePointAt(i - 1)! >= 0xdc00 && piece.codePointAt(i - 1)! <= 0xdfff && i >= 2 ? piece.slice(i - 2, i) : piece.charAt(i - 1);
    if (ALNUM.test(before)) return true;
  }
  return false;
}

/** normalizers that treat "a b" the same whole or cut before the space (libraryChunks) */
function cutSafeNormalizer(node: unknown): boolean {
  if (node === null || node === undefined) return true;
  if (!isObject(node)) return false;
  switch (node.type) {
    case "NFC": case "NFD": case "NFKC": case "NFKD": case "Lowercase": case "StripAccents": case "Precompiled": case "BertNormalizer": return true;
    case "Replace": {
      // a pattern can only match across the cut through the letter or digit before it; XLM-R's " {2,}" needs two spaces
      const p = isObject(node.pattern) ? node.pattern : {};
      return (typeof p.String === "string" && !/[\p{L}\p{N}]/u.test(p.String)) || p.Regex === " {2,}";
    }
    case "Sequence": return Array.isArray(node.normalizers) && node.normalizers.every(cutSafeNormalizer);
    default: return false; // Prepend and Strip act at every text's ends
  }
}

/**
 * Whether the library's encoding of a text is that of its pieces cut at the space of "a b"
 * (libraryChunks): a normalizer that keeps it, a pre-tokenizer that starts a word at the space
 * (BertPreTokenizer, Whitespace, ByteLevel's regex) or else a vocabulary without a token that
 * holds a letter or digit then the space ("a▁": the whole text is one word, Metaspace's and
 * Unigram's included), and added tokens without a space, nor stripping white space on a side
 * where they end in a letter or digit.
 */
function libraryCutsText(tj: JsonObject): boolean {
  if (!cutSafeNormalizer(tj.normalizer)) return false;
  for (const t of (tj.added_tokens as JsonObject[] | undefined) ?? []) {
    const c = String(t.content);
    const first = String.fromCodePoint(c.codePointAt(0) ?? 32), last = [...c].pop() ?? " ";
    if (c.includes(" ") || (t.lstrip === true && ALNUM.test(first)) || (t.rstrip === true && ALNUM.test(last))) return false;
  }
  const pre = tj.pre_tokenizer;
  const model = tj.model as JsonObject;
  if (isObject(pre) && (pre.type === "BertPreTokenizer" || pre.type === "Whitespace" || pre.type === "WhitespaceSplit" || (pre.type === "ByteLevel" && pre.use_regex !== false))) return true;
  // the whole text one word: WordPiece makes a long one [UNK], others must not have a token across the cut
  if (model.type === "WordPiece" || !(pre === null || pre === undefined || (isObject(pre) && (pre.type === "ByteLevel" || pre.type === "Metaspace")))) return false;
  // the space as the model sees it: itself, "▁" (Metaspace, a normalizer's Replace) or byte-level "Ġ"
  const marks = [" ", "\u2581", "\u0120"];
  if (isObject(pre) && typeof pre.replacement === "string") marks.push(pre.replacement);
  const pieces = Array.isArray(model.vocab) ? model.vocab.map((e) => (Array.isArray(e) ? String(e[0]) : "")) : Object.keys(model.vocab as JsonObject);
  return !pieces.some((p) => marks.some((m) => p.indexOf(m, 1) > 0 && spansCut(p, m)));
}

const SPECIAL_KEYS = ["bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"] as const;

/** tokenizer_config.json with special-token entries flattened to strings, as the library expects. */
function libraryConfig(config: JsonObject): JsonObject {
  const out: JsonObject = { ...config, clean_up_tokenization_spaces: false };
  for (const k of SPECIAL_KEYS) {
    const t = tokenText(config[k]);
    if (t === undefined) delete out[k];
    else out[k] = t;
  }
  delete out.chat_template; // we render templates ourselves
  return out;
}

/**
 * A tokenizer from Hugging Face files: @huggingface/tokenizers does the tokenizer.json pipeline
 * (normalizer, pre-tokenizer, BPE / WordPiece / Unigram model, decoder); this class adds what the
 * engine needs on top: special ids from tokenizer_config.json, BOS/EOS as the post-processor and
 * `add_bos_token` say, end-of-generation ids, and streaming decode.
 */
export class HFTokenizer implements Tokenizer {
  readonly type: "llama" | "gpt2" | "bert";
  readonly pre = undefined;
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
  /** the fill-in-the-middle tokens among the added tokens, found by text as llama.cpp finds them in a GGUF */
  readonly fimIds: FimTokenIds;
  readonly addBos: boolean;
  readonly addEos: boolean;
  /** tokenizer_config.json's chat_template (the "default" one when it names several, as transformers) or chat_template.jinja */
  readonly chatTemplate?: ChatTemplateSource;
  readonly chatTemplateProblem?: string;
  readonly namedChatTemplates?: ReadonlyMap<string, ChatTemplateSource>;
  /** the special-token strings templates get as variables */
  readonly specialTokenTexts: { readonly bos?: string; readonly eos?: string; readonly unk?: string; readonly pad?: string };
  /**
   * decode applies transformers' clean_up_tokenization (" ." -> ".", " n't" -> "n't"...):
   * tokenizer_config.json's clean_up_tokenization_spaces is true (absent: false, transformers 5's
   * default) and the model is not BPE — transformers 5.7+ ignores the flag for BPE models (Llama
   * 3's configs set it), unless clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output
   */
  readonly cleanUpSpaces: boolean;

  /**
   * The library for everything but encoding text: the vocabulary both ways, the post-processor,
   * the decoder, the normalizer and pre-tokenizer objects. A BPE model's is built without its
   * merges (tsllm's encoder has them as ids from validate()): the library's own ranks, a
   * JSON.stringify and a Map entry per merge, were most of its build (Llama 3, CPU ms of one run:
   * 993 whole, 188 without them), and none of these parts reads them.
   */
  private readonly lib: HFLibTokenizer;
  /** the library with model.merges, for encoding text (see encodingLib); lib itself where lib has them */
  private fullLib?: HFLibTokenizer;
  /** a BPE model's merges as validate() resolved them, for tsllm's encoder */
  private readonly merges?: CheckedMerges;
  private literalLib?: HFLibTokenizer;
  private readonly addedIds = new Set<number>();
  private readonly specialIds = new Set<number>();
  private readonly prefix: number[];
  private readonly suffix: number[];
  private readonly bytesCache = new Map<number, Uint8Array>();

  constructor(private readonly source: HFTokenizerSource) {
    const { where, tokenizerJson: tj } = source;
    const config = source.config ?? {};
    const merges = validate(where, tj);
    let table: MergeTable | undefined;
    // one table for both of fastEncoder's encoders, made on first use
    this.merges = merges && { splitAsLibrary: merges.splitAsLibrary, table: () => (table ??= MergeTable.fromIds(merges.ids)) };
    const model = tj.model as JsonObject;
    // libraryOnly is the reference: the library as it stands, built once
    this.lib = this.build(tj.added_tokens as JsonObject[] | undefined, config, merges && !source.libraryOnly ? { ...model, merges: [] } : undefined);
    if (!merges || source.libraryOnly) this.fullLib = this.lib;

    for (const t of (tj.added_tokens as JsonObject[] | undefined) ?? []) {
      this.addedIds.add(t.id as number);
      if (t.special === true) this.specialIds.add(t.id as number);
    }

    const byteLevel = JSON.stringify([tj.pre_tokenizer, tj.decoder]).includes('"ByteLevel"');
    this.type = model.type === "WordPiece" ? "bert" : model.type === "BPE" && byteLevel ? "gpt2" : "llama";
    // a model without a type is BPE when it has merges (the library's guess from its shape)
    const bpe = model.type === "BPE" || (model.type === undefined && Array.isArray(model.merges));
    this.cleanUpSpaces = config.clean_up_tokenization_spaces === true && (!bpe || config.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output === true);

    // each special token's texts in order: tokenizer_config.json's, then BERT's or the model's own
    const bert = (text: string) => (this.type === "bert" ? [text] : []);
    const unk = typeof model.unk_token === "string" ? [model.unk_token] : typeof model.unk_id === "number" ? [this.lib.id_to_token(model.unk_id) ?? ""] : [];
    const fallbacks = { bos_token: bert("[CLS]"), eos_token: bert("[SEP]"), unk_token: unk, pad_token: bert("[PAD]"), sep_token: bert("[SEP]"), cls_token: bert("[CLS]"), mask_token: bert("[MASK]") };
    const textsOf = (key: keyof typeof fallbacks) => [tokenText(config[key]), ...fallbacks[key]].filter((t) => t !== undefined);
    // get_vocab(true)'s size (its largest id + 1) and its ids of those texts, without its Map of
    // every token (a second pass over a 128K+ vocabulary at load): get_vocab sets text -> id for
    // each id in turn, so a text's id is the last one with it
    const list = this.lib.model.vocab;
    this.vocabSize = list.length;
    const wanted = new Set((Object.keys(fallbacks) as (keyof typeof fallbacks)[]).flatMap(textsOf));
    const vocab = new Map<string, number>();
    for (let id = 0; id < list.length; id++) { const t = list[id]; if (t !== undefined && wanted.has(t)) vocab.set(t, id); }
    const idOf = (key: keyof typeof fallbacks): number | undefined => {
      for (const text of textsOf(key)) {
        const id = vocab.get(text);
        if (id !== undefined) return id;
      }
      return undefined;
    };
    this.bosId = idOf("bos_token");
    this.eosId = idOf("eos_token");
    this.unkId = idOf("unk_token");
    this.padId = idOf("pad_token");
    this.sepId = idOf("sep_token");
    this.clsId = idOf("cls_token");
    this.maskId = idOf("mask_token");
    this.specialTokenTexts = {
      bos: tokenText(config.bos_token), eos: tokenText(config.eos_token), unk: tokenText(config.unk_token), pad: tokenText(config.pad_token),
    };

    // what the post-processor adds around a single sequence, then tokenizer_config's add_*_token on top
    const probe = "a";
    const plain = this.lib.encode(probe, { add_special_tokens: false }).ids;
    const full = this.lib.encode(probe, { add_special_tokens: true }).ids;
    let at = 0;
    while (at + plain.length <= full.length && plain.some((id, i) => full[at + i] !== id)) at++;
    this.prefix = full.slice(0, at);
    this.suffix = full.slice(at + plain.length);
    const adjust = (list: number[], id: number | undefined, want: unknown, front: boolean) => {
      if (id === undefined || typeof want !== "boolean") return;
      const has = list.includes(id);
      if (want && !has) { if (front) list.unshift(id); else list.push(id); }
      if (!want && has) list.splice(list.indexOf(id), 1);
    };
    adjust(this.prefix, this.bosId, config.add_bos_token, true);
    adjust(this.suffix, this.eosId, config.add_eos_token, false);
    this.addBos = this.bosId !== undefined && this.prefix.includes(this.bosId);
    this.addEos = this.eosId !== undefined && this.suffix.includes(this.eosId);

    // end of generation: eos, generation_config's ids, and llama.cpp's end-of-turn texts among the added tokens
    const texts: string[] = new Array(this.vocabSize).fill("");
    for (const id of this.addedIds) texts[id] = this.lib.id_to_token(id) ?? "";
    const special = detectSpecialTokens(texts, new Int32Array(this.vocabSize), { eos: this.eosId });
    const eog = special.endOfGeneration;
    this.fimIds = special.fim;
    if (special.endOfTurn !== undefined) this.endOfTurnId = special.endOfTurn;
    for (const id of source.extraEosIds ?? []) if (Number.isInteger(id) && id >= 0 && id < this.vocabSize) eog.add(id);
    this.endOfGenerationIds = eog;

    this.chatTemplate = source.chatTemplate;
    this.chatTemplateProblem = source.chatTemplateProblem;
    this.namedChatTemplates = source.namedChatTemplates;
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    checkEncodeOptions(options);
    const addSpecial = options.addSpecialTokens ?? true;
    const ids = addSpecial ? this.prefix.slice() : [];
    for (const [piece, literal] of this.pieces(text, options)) {
      const fast = this.fastEncoder(literal);
      // in the same cuts as encodeAsync: the library's Unigram spreads a word's ids into one push,
      // which overflows the stack past ~100K ids (a long text with no pre-tokenizer is one word)
      if (!fast) for (const chunk of this.source.libraryOnly ? [piece] : this.libraryChunks(piece)) this.libraryEncode(chunk, literal, ids);
      else fast.advance(fast.start(piece, ids), Infinity);
    }
    if (addSpecial) for (const id of this.suffix) ids.push(id);
    return ids;
  }

  /**
   * encode()'s ids, a slice of text at a time with turns of the event loop between, as GGUF
   * vocabularies do: tsllm's own cores (fastEncoderFor) stop anywhere; the library, which cannot
   * stop midway, is given the text cut where its ids are those of the whole (libraryChunks).
   */
  async encodeAsync(text: string, options: EncodeOptions = {}): Promise<number[]> {
    checkEncodeOptions(options);
    const addSpecial = options.addSpecialTokens ?? true;
    // the ids go into the array handed back as they are made: copying 1.5M of them into it at the
    // end (and again between the prefix and suffix) took ~0.1 s of cpu in one step after the last yield
    const ids = addSpecial ? this.prefix.slice() : [];
    for (const [piece, literal] of this.pieces(text, options)) {
      const fast = this.fastEncoder(literal);
      if (!fast) {
        const chunks = this.libraryChunks(piece);
        for (let i = 0; i < chunks.length; i++) {
          if (i > 0) await yieldToEventLoop();
          this.libraryEncode(chunks[i]!, literal, ids);
        }
        continue;
      }
      const run = fast.start(piece, ids);
      while (!fast.advance(run, ASYNC_SLICE_CHARS)) await yieldToEventLoop();
    }
    if (addSpecial) for (const id of this.suffix) ids.push(id);
    return ids;
  }

  /**
   * `text` cut into pieces of about ASYNC_SLICE_CHARS that the library encodes into the ids of the
   * whole (one piece where the layout gives no such cuts, libraryCutsText): each cut is a single
   * space between two letters or digits of any script (cutChar), "a| b", "я| б". No normalizer it is let through changes
   * those three characters or joins them to their neighbours, the right piece starts with the
   * space so that no prefix space / "▁" is put before it, the pre-tokenizer starts a word there
   * or no token of the vocabulary spans "a▁", and no added token can match across it or strip it.
   */
  private libraryChunks(text: string): string[] {
    if (text.length <= ASYNC_SLICE_CHARS || !(this.libraryCuts ??= libraryCutsText(this.source.tokenizerJson))) return [text];
    const chunks: string[] = [];
    let start = 0;
    while (text.length - start > ASYNC_SLICE_CHARS) {
      LIBRARY_CUT.lastIndex = start + ASYNC_SLICE_CHARS;
      let m = LIBRARY_CUT.exec(text);
      // overlapping candidates ("a b c") are found by searching again from the right letter
      while (m && !(cutChar(m[1]!) && cutChar(m[2]!))) {
        LIBRARY_CUT.lastIndex = m.index + m[1]!.length + 1;
        m = LIBRARY_CUT.exec(text);
      }
      if (!m) break;
      const space = m.index + m[1]!.length;
      chunks.push(text.slice(start, space));
      start = space;
    }
    chunks.push(text.slice(start));
    return chunks;
  }
  private libraryCuts?: boolean;

  /**
   * The text cut at literal ranges, each piece with whether only non-special added tokens match in
   * it: the library matches added tokens everywhere, so those pieces go through a tokenizer built
   * without the special ones (parseSpecial false: all of the text).
   */
  private pieces(text: string, options: EncodeOptions): [string, boolean][] {
    const literalAll = !(options.parseSpecial ?? true);
    const pieces: [string, boolean][] = [];
    let at = 0;
    for (const [start, end] of options.literalRanges ?? []) {
      if (start > at) pieces.push([text.slice(at, start), literalAll]);
      pieces.push([text.slice(Math.max(start, at), end), true]);
      at = Math.max(at, end);
    }
    if (at < text.length || pieces.length === 0) pieces.push([text.slice(at), literalAll]);
    return pieces.filter(([t]) => t !== "");
  }

  private libraryEncode(text: string, literal: boolean, out: number[]): void {
    let ids: (number | undefined)[];
    try {
      ids = (literal ? this.literal() : this.encodingLib()).encode(text, { add_special_tokens: false }).ids;
    } catch (e) {
      if (!(e instanceof RangeError)) throw e;
      throw new Error(`${this.source.where}: a text of ${text.length} characters with no place to cut it is too long for @huggingface/tokenizers to encode in one piece (${e.message}); split it at spaces`);
    }
    for (const id of ids) {
      if (id === undefined) throw new Error(`${this.source.where}: text ${JSON.stringify(text.slice(0, 40))} has a piece outside the vocabulary and the tokenizer has no unknown token`);
      out.push(id);
    }
  }

  /**
   * tsllm's own encoder for this tokenizer.json with all added tokens, or only the non-special ones
   * (literal), as the library's two tokenizers have them; undefined where the library must encode.
   * Made on first use: building it costs about what building the library's did.
   */
  private fastEncoder(literal: boolean): HFFastEncoder | undefined {
    const slot = literal ? 1 : 0;
    if (this.source.libraryOnly) return undefined;
    if (this.fast[slot] === undefined) {
      const all = (this.source.tokenizerJson.added_tokens as JsonObject[] | undefined) ?? [];
      const added = literal ? all.filter((t) => t.special !== true) : all;
      this.fast[slot] = fastEncoderFor(this.source.tokenizerJson, added, this.source.config ?? {}, this.lib as unknown as LibraryPipeline, this.merges) ?? null;
    }
    return this.fast[slot] ?? undefined;
  }
  /** who encodes text: tsllm's own cores (fastEncoderFor) or @huggingface/tokenizers */
  get encoder(): "tsllm" | "library" {
    return this.fastEncoder(false) ? "tsllm" : "library";
  }
  /** [all added tokens, non-special ones]: undefined until asked for, null where the library encodes */
  private readonly fast: (HFFastEncoder | null | undefined)[] = [undefined, undefined];

  decode(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    checkDecodeOptions(options);
    const list = Array.from(ids);
    for (const id of list) this.checkId(id);
    const text = this.decodeChecked(list, options);
    return this.cleanUpSpaces ? cleanUpTokenization(text) : text;
  }

  createStreamDecoder(options: StreamDecoderOptions = {}): StreamDecoder {
    checkStreamDecoderOptions(options);
    const raw = windowedStreamDecoder((ids) => this.decodeChecked(ids, options), (id) => this.checkId(id), options.context);
    if (!this.cleanUpSpaces) return raw;
    // the clean-up joins across chunks: it needs the context's own text (its tail) before it
    const context = Array.from(options.context ?? []);
    for (const id of context) this.checkId(id);
    return cleanUpStream(raw, this.decodeChecked(context, options));
  }

  piece(id: number): string {
    this.checkId(id);
    return this.lib.id_to_token(id) ?? "";
  }

  isSpecial(id: number): boolean {
    return this.addedIds.has(id);
  }

  tokenBytes(id: number): Uint8Array {
    this.checkId(id);
    let bytes = this.bytesCache.get(id);
    if (bytes) return bytes;
    const piece = this.lib.id_to_token(id) ?? "";
    const byte = /^<0x([0-9A-Fa-f]{2})>$/.exec(piece);
    if (this.addedIds.has(id)) bytes = utf8.encode(piece);
    else if (byte) bytes = Uint8Array.of(parseInt(byte[1]!, 16));
    else if (this.type === "gpt2") bytes = byteLevelDecode(piece);
    else {
      // the decoder's pipeline (Metaspace, Replace, Strip, WordPiece's "##"...) decides the
      // text, mid-text: after a plain token, whose own text is then taken off (encode's ids are
      // the library's; lib, without merges, could cut "▁a" where the library does not)
      const context = this.encode("a", { addSpecialTokens: false }).slice(0, 1);
      bytes = utf8.encode(this.decodeChecked([...context, id], {}).slice(this.decodeChecked(context, {}).length));
    }
    this.bytesCache.set(id, bytes);
    return bytes;
  }

  private decodeChecked(ids: number[], options: DecodeOptions): string {
    if (options.skipSpecialTokens) ids = ids.filter((id) => !this.specialIds.has(id));
    if (ids.length === 0) return "";
    const own = this.ownDecoder();
    if (own) return own.decode(ids);
    return this.lib.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  }

  /**
   * tsllm's decoder for this tokenizer.json (ownDecoderFor), undefined where the library decodes
   * (libraryOnly, a decoder step not reproduced, an id without text and no unknown token to stand
   * for it). Made on first use: it holds every token's text.
   */
  private ownDecoder(): OwnDecoder | undefined {
    if (this.source.libraryOnly) return undefined;
    if (this.own === undefined) {
      const unk = (this.lib as unknown as { model?: { unk_token?: unknown } }).model?.unk_token;
      const texts = new Array<string>(this.vocabSize);
      let holes = false;
      for (let id = 0; id < this.vocabSize; id++) {
        // the library's text for an id: the vocabulary's, else its unknown token's
        const t = this.lib.id_to_token(id) ?? (typeof unk === "string" ? unk : undefined);
        if (t === undefined) holes = true;
        texts[id] = t ?? "";
      }
      const added = new Set<string>();
      for (const t of (this.source.tokenizerJson.added_tokens as JsonObject[] | undefined) ?? []) added.add(t.content as string);
      this.own = (holes ? undefined : ownDecoderFor(this.source.tokenizerJson, texts, added)) ?? null;
    }
    return this.own ?? undefined;
  }
  private own?: OwnDecoder | null;

  /** who decodes ids: tsllm's own decoder (ownDecoderFor) or @huggingface/tokenizers */
  get decoder(): "tsllm" | "library" {
    return this.ownDecoder() ? "tsllm" : "library";
  }

  /** the library with model.merges, built on the first text it must encode (a layout tsllm's encoder leaves to it, libraryOnly) */
  private encodingLib(): HFLibTokenizer {
    return (this.fullLib ??= this.build(this.source.tokenizerJson.added_tokens as JsonObject[] | undefined, this.source.config ?? {}));
  }

  /** the library for `addedTokens`, from tokenizer.json with `model` in place of its own where given */
  private build(addedTokens: JsonObject[] | undefined, config: JsonObject, model?: JsonObject): HFLibTokenizer {
    try {
      const lib = new HFLib(this.libraryJson(addedTokens, model), libraryConfig(config));
      return (this.source.tokenizerJson.model as JsonObject).type === "Unigram" ? withUnigramPushes(lib) : lib;
    } catch (e) {
      const message = String((e as Error).message).split("\n")[0];
      throw new Error(`${this.source.where}: ${this.culprit(addedTokens, config, model)}: cannot build the tokenizer: ${message}`);
    }
  }

  /** tokenizer.json as the library takes it: absent sections (meaning "none") spelled out as null */
  private libraryJson(addedTokens: JsonObject[] | undefined, model: JsonObject | undefined): JsonObject {
    const json = { normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null, ...this.source.tokenizerJson, added_tokens: addedTokens ?? [] };
    return model ? { ...json, model } : json;
  }

  /** which section the library failed on: the first one without which it builds ("model" when none) */
  private culprit(addedTokens: JsonObject[] | undefined, config: JsonObject, model: JsonObject | undefined): string {
    const json = this.libraryJson(addedTokens, model);
    for (const section of SECTIONS) {
      try {
        new HFLib({ ...json, [section]: section === "added_tokens" ? [] : null }, libraryConfig(config));
        return `"${section}"`;
      } catch {
        // not this one
      }
    }
    return `"model"`;
  }

  /** The same tokenizer with only non-special added tokens matched (EncodeOptions.parseSpecial = false). */
  private literal(): HFLibTokenizer {
    this.literalLib ??= this.build(
      ((this.source.tokenizerJson.added_tokens as JsonObject[] | undefined) ?? []).filter((t) => t.special !== true),
      this.source.config ?? {},
    );
    return this.literalLib;
  }

  /** the special tokens the post-processor puts around one text and around a pair, with their type ids */
  get inputTemplate(): InputTemplate {
    return (this.template ??= this.probeTemplate());
  }
  private template?: InputTemplate;

  private probeTemplate(): InputTemplate {
    const a = this.lib.encode("a", { add_special_tokens: false }).ids, b = this.lib.encode("b", { add_special_tokens: false }).ids;
    const full = this.lib.encode("a", { add_special_tokens: true, text_pair: "b", return_token_type_ids: true });
    // tokenizers whose model takes no segment ids (model_input_names without token_type_ids: RoBERTa) give zeros
    const names = this.source.config?.model_input_names;
    const typed = !Array.isArray(names) || names.includes("token_type_ids");
    const types = typed && full.token_type_ids ? full.token_type_ids : full.ids.map(() => 0);
    const find = (what: number[], from: number) => {
      for (let i = from; i + what.length <= full.ids.length; i++) if (what.every((id, k) => full.ids[i + k] === id)) return i;
      return -1;
    };
    const ia = find(a, 0), ib = ia < 0 ? -1 : find(b, ia + a.length);
    const span = (s: number, e: number): TemplateToken[] => full.ids.slice(s, e).map((id, k) => ({ id, typeId: types[s + k]! }));
    const single = { prefix: this.prefix.map((id) => ({ id, typeId: 0 })), suffix: this.suffix.map((id) => ({ id, typeId: 0 })) };
    if (ia < 0 || ib < 0) return { single, pair: { prefix: single.prefix, middle: [], suffix: single.suffix, typeA: 0, typeB: 0 } };
    return {
      single,
      pair: { prefix: span(0, ia), middle: span(ia + a.length, ib), suffix: span(ib + b.length, full.ids.length), typeA: types[ia] ?? 0, typeB: types[ib] ?? 0 },
    };
  }

  /**
   * Character offsets of the tokens of `encode(text, { addSpecialTokens: false })` in `text`
   * (Hugging Face's offset mapping).
   */
  tokenOffsets(text: string, ids: readonly number[]): Offset[] | undefined {
    const tj = this.source.tokenizerJson;
    const pieces = ids.map((id) => this.lib.id_to_token(id) ?? "");
    const model = tj.model as JsonObject;
    if (model.type === "WordPiece") {
      const norm = isObject(tj.normalizer) && tj.normalizer.type === "BertNormalizer" ? tj.normalizer : undefined;
      const lowercase = norm?.lowercase === true;
      return wordPieceOffsets(text, pieces, {
        lowercase, stripAccents: typeof norm?.strip_accents === "boolean" ? norm.strip_accents : lowercase, chineseChars: norm?.handle_chinese_chars !== false,
        prefix: typeof model.continuing_subword_prefix === "string" ? model.continuing_subword_prefix : "##", unkPiece: typeof model.unk_token === "string" ? model.unk_token : undefined,
      });
    }
    if (this.type === "gpt2") {
      const pp = isObject(tj.post_processor) ? tj.post_processor : isObject(tj.pre_tokenizer) ? tj.pre_tokenizer : {};
      return byteLevelOffsets(text, pieces, pp.trim_offsets !== false);
    }
    // SentencePiece-style (XLM-RoBERTa, Llama 2, ...)
    return metaspaceOffsets(text, pieces);
  }

  /** the WordPiece continuing-subword prefix ("##"); undefined for other models */
  get continuingSubwordPrefix(): string | undefined {
    const model = this.source.tokenizerJson.model as JsonObject;
    const p = model.continuing_subword_prefix;
    return typeof p === "string" && p !== "" ? p : undefined;
  }

  /** tokenizer_config.json's model_max_length (absent or HF's "very large" sentinel: undefined) */
  get modelMaxLength(): number | undefined {
    const m = this.source.config?.model_max_length;
    return typeof m === "number" && Number.isSafeInteger(m) && m > 0 && m < 1e12 ? m : undefined;
  }

  /** tokens -> text as the tokenizer's decoder joins them (convert_tokens_to_string) */
  tokensToString(tokens: readonly string[]): string {
    const dec = (this.lib as unknown as { decoder?: { decode?: (t: string[]) => string } }).decoder;
    if (dec?.decode) return dec.decode([...tokens]);
    return tokens.join("");
  }

  private checkId(id: number): void {
    const refusal = tokenIdRefusal(id, this.vocabSize);
    if (refusal) throw new RangeError(refusal);
  }
}
