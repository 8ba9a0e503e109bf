/** llama.cpp's token-type enum, stored per token in GGUF `tokenizer.ggml.token_type`. */
export enum TokenType {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
}

/**
 * Why `id` is no token of a `vocabSize`-token vocabulary (not an integer, or outside [0,
 * vocabSize)), or undefined: the tokenizers' refusal of it (decode, idToToken), and the browser
 * page's at detokenize()'s call.
 */
export function tokenIdRefusal(id: number, vocabSize: number): string | undefined {
  return Number.isInteger(id) && id >= 0 && id < vocabSize ? undefined : `token id ${id} is outside the vocabulary (expected an integer in [0, ${vocabSize}))`;
}

export interface EncodeOptions {
  /** add BOS/EOS (CLS/SEP for bert) as the vocabulary says; default true */
  addSpecialTokens?: boolean;
  /** let the text of control/unknown tokens in the input become those tokens; default true (user-defined tokens always match) */
  parseSpecial?: boolean;
  /** [start, end) character ranges of the text where special-token text stays plain text (chat message contents) */
  literalRanges?: readonly (readonly [number, number])[];
}

export interface DecodeOptions {
  /** drop control and unknown-type tokens (BOS, EOS, <|im_end|>, [CLS], ...); default false */
  skipSpecialTokens?: boolean;
}

export interface StreamDecoderOptions extends DecodeOptions {
  /**
   * Tokens that come before the streamed ones (the prompt): the stream then yields exactly the
   * text that decode(context + streamed) adds to decode(context) — a completion's first word keeps
   * its leading space, which decoding it alone would drop as the start of a text.
   */
  context?: readonly number[];
}

export interface StreamDecoder {
  /** text completed by this token; an incomplete UTF-8 sequence is held back until its last byte arrives */
  push(id: number): string;
  /** whatever is still held back (an unfinished sequence becomes U+FFFD) */
  flush(): string;
}

/** a chat template's text and where it comes from, as errors name it ("model.gguf: chat template (tokenizer.chat_template)", "--chat-template FILE") */
export interface ChatTemplateSource {
  readonly source: string;
  readonly where: string;
}

/** what a model's files say of its chat template: the template, or why the field that is there gives none */
export interface ChatTemplateReading {
  /** the template a chat uses when none is named (a GGUF's tokenizer.chat_template; tokenizer_config.json's chat_template, its "default" one when it names several, else chat_template.jinja) */
  readonly chatTemplate?: ChatTemplateSource;
  /** why a chat template field that is there gives no template (a list with no "default" one, a number), naming the file and field: said when a chat needs one */
  readonly chatTemplateProblem?: string;
  /**
   * the model's named templates other than the default, name -> template (a GGUF's
   * tokenizer.chat_template.<name>; tokenizer_config.json's list or map, additional_chat_templates/<name>.jinja):
   * "tool_use" is the one a chat with tools uses, as transformers and llama.cpp choose it; any can be named
   */
  readonly namedChatTemplates?: ReadonlyMap<string, ChatTemplateSource>;
}

/**
 * A vocabulary's fill-in-the-middle tokens, as llama.cpp reads them (llama_vocab_fim_pre ...): the
 * tokenizer.ggml.fim_*_token_id keys (the older prefix/suffix/middle_token_id too), else the token
 * spelled as one of the family's texts ("<|fim_prefix|>", "<fim-prefix>", "<PRE>", ...)
 */
export interface FimTokenIds {
  readonly prefix?: number;
  readonly suffix?: number;
  readonly middle?: number;
  readonly pad?: number;
  /** the repository-name marker of the repo-level pattern ("<|repo_name|>", "<reponame>") */
  readonly repo?: number;
  /** the marker before each file of the repo-level pattern ("<|file_sep|>") */
  readonly fileSeparator?: number;
}

export interface Tokenizer extends ChatTemplateReading {
  /**
   * the kind of tokenizer, named as tokenizer.ggml.model names it: llama = SentencePiece BPE, gpt2 =
   * BPE with merges (byte-level; over the raw text for GGUF gemma4, sarvam-moe and whitespace), bert =
   * WordPiece. llama.cpp's BPE models "gemma4" and "whitespace" are gpt2 here (`tsllm inspect` prints
   * the file's own name)
   */
  readonly type: "llama" | "gpt2" | "bert";
  /** tokenizer.ggml.pre */
  readonly pre?: string;
  readonly vocabSize: number;
  readonly bosId?: number;
  readonly eosId?: number;
  readonly unkId?: number;
  readonly padId?: number;
  readonly sepId?: number;
  readonly clsId?: number;
  readonly maskId?: number;
  /** ids that end generation: eos, eot (<|eot_id|>, <|im_end|>, <|end|>...), eom, per llama.cpp's rules */
  readonly endOfGenerationIds: ReadonlySet<number>;
  /** the end-of-turn token among them (llama.cpp's token_eot(): <|eot_id|>, <|im_end|>, <|endoftext|>, ...), if any */
  readonly endOfTurnId?: number;
  /** the fill-in-the-middle tokens the vocabulary has (none: an empty object) */
  readonly fimIds: FimTokenIds;
  readonly addBos: boolean;
  readonly addEos: boolean;
  encode(text: string, options?: EncodeOptions): number[];
  /**
   * encode()'s ids, made a slice of text at a time with turns of the event loop between slices,
   * so that a server keeps answering while a multi-megabyte prompt is tokenized (GGUF
   * vocabularies and tokenizer.json ones alike; a layout left to @huggingface/tokenizers is cut
   * only where the library's ids are those of the whole text, and encodes in one piece where its
   * normalizer or pre-tokenizer gives no such places).
   */
  encodeAsync(text: string, options?: EncodeOptions): Promise<number[]>;
  decode(ids: ArrayLike<number>, options?: DecodeOptions): string;
  /** the piece exactly as stored in the vocabulary (e.g. "▁the", "Ġthe", "<0x0A>") */
  piece(id: number): string;
  /**
   * The bytes token `id` adds to a text it continues (a SentencePiece word start's space
   * included): a byte token's one byte, a byte-level piece's bytes, a special token's text. Not
   * always whole UTF-8: a character may be split across tokens, which is what this is for
   */
  tokenBytes(id: number): Uint8Array;
  /** control or user-defined tokens */
  isSpecial(id: number): boolean;
  /** incremental decoder for streaming; concatenating every push() and flush() equals decode() */
  createStreamDecoder(options?: StreamDecoderOptions): StreamDecoder;
}

/** what encoders read of a vocabulary: a Map from token text to id, or a view of one */
export type TokenIds = Pick<ReadonlyMap<string, number>, "get" | "has" | "keys">;
