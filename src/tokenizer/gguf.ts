import { GGUFError, GGUFMetadata, readGGUFHeader } from "../formats/index.js";
import { parseMergeLines } from "./bpe.js";
import { KNOWN_PRE_TOKENIZERS, preTokenizerPatterns } from "./pre-tokenizers.js";
import { detectSpecialTokens } from "./gguf-eog.js";
import { onlyNamedProblem } from "./hf/chat-template.js";
import { TokenType, type ChatTemplateReading, type ChatTemplateSource, type Tokenizer } from "./types.js";
import { type SpecialIdRole, tokenIndex, VocabTokenizer } from "./vocab-tokenizer.js";

type Model = "llama" | "gpt2" | "bert";

/** the longest control or user-defined token accepted (real ones are a few dozen characters) */
const MAX_SPECIAL_TOKEN_CHARS = 4096;

/** llama.cpp's default special ids per tokenizer model, used when the metadata has no key. */
const DEFAULT_IDS: Record<Model, { bos?: number; eos?: number; unk?: number; sep?: number; pad?: number; mask?: number }> = {
  llama: { bos: 1, eos: 2, unk: 0 },
  bert: { bos: 101, unk: 100, sep: 102, pad: 0, mask: 103 },
  gpt2: { bos: 11, eos: 11 },
};

/** Pre-tokenizers for which llama.cpp's vocabulary loader turns on add_bos / ignore_merges (llama-vocab.cpp, per name). */
const LLAMA3_NAMES = ["llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"];
const ADD_BOS_PRE = new Set([...LLAMA3_NAMES, "tekken", "chameleon"]);
const IGNORE_MERGES_PRE = new Set([...LLAMA3_NAMES, "tekken", "youtu", "minicpm5", "granite-embed-multi-97m"]);
/** Pre-tokenizers for which llama.cpp has no default BOS (only the file's tokenizer.ggml.bos_token_id). */
const NO_DEFAULT_BOS_PRE = new Set(["chatglm-bpe", "glm4"]);
/** Pre-tokenizers whose BPE llama.cpp runs over the raw text, not GPT-2's byte alphabet (byte_encode false) */
const RAW_TEXT_PRE = new Set(["gemma4", "granite-embed-multi-311m", "sarvam-moe", "whitespace"]);
/** ... with spaces written as U+2581 (escape_whitespaces) */
const ESCAPE_SPACES_PRE = new Set(["gemma4", "granite-embed-multi-311m", "sarvam-moe"]);
/** LLAMA_VOCAB_PRE_TYPE_GEMMA4: a piece of line breaks that is a token is taken whole, and a BOS is always added */
const GEMMA4_PRE = new Set(["gemma4", "granite-embed-multi-311m"]);

/**
 * Builds a tokenizer from a GGUF file's `tokenizer.ggml.*` metadata, applying llama.cpp's rules:
 * default special ids per model, add_bos/add_eos defaults, the pre-tokenizer chosen by
 * `tokenizer.ggml.pre`, end-of-generation tokens recognised by their text.
 */
export function tokenizerFromGGUF(meta: GGUFMetadata): Tokenizer {
  const modelName = meta.string("tokenizer.ggml.model");
  if (modelName === undefined) throw new GGUFError(meta.path, "tokenizer.ggml.model", "required metadata key is missing (the file has no tokenizer)");
  if (modelName !== "llama" && modelName !== "gpt2" && modelName !== "bert" && modelName !== "gemma4" && modelName !== "whitespace") {
    throw new GGUFError(meta.path, "tokenizer.ggml.model", `expected "llama", "gpt2", "bert", "gemma4" or "whitespace", found ${JSON.stringify(modelName)} (not supported)`);
  }
  // llama.cpp's "gemma4" and "whitespace" models are BPE: gemma4's with no default special ids and
  // its own pre-tokenizer whatever the file names; whitespace's dropping white space between words
  const model: Model = modelName === "gemma4" || modelName === "whitespace" ? "gpt2" : modelName;
  const pre = modelName === "gemma4" ? "gemma4" : meta.string("tokenizer.ggml.pre");

  const rawTokens = meta.strings("tokenizer.ggml.tokens");
  if (!rawTokens || rawTokens.length === 0) throw new GGUFError(meta.path, "tokenizer.ggml.tokens", "required non-empty array of strings is missing");
  const n = rawTokens.length;
  const tokens = rawTokens.map((t, i) => (t === "" ? `[EMPTY_${i}]` : t)); // as llama.cpp names empty entries

  const scores = meta.numbers("tokenizer.ggml.scores");
  if (scores && scores.length !== n) throw new GGUFError(meta.path, "tokenizer.ggml.scores", `expected ${n} scores (one per token), found ${scores.length}`);
  const rawTypes = meta.numbers("tokenizer.ggml.token_type");
  if (rawTypes && rawTypes.length !== n) throw new GGUFError(meta.path, "tokenizer.ggml.token_type", `expected ${n} token types (one per token), found ${rawTypes.length}`);
  const types = rawTypes ? Int32Array.from(rawTypes) : new Int32Array(n).fill(TokenType.Normal);
  // special tokens are matched as text before tokenizing (a trie over them): bound their length as tokenizer.json's added tokens are
  for (let i = 0; i < n; i++) {
    if ((types[i] === TokenType.Control || types[i] === TokenType.UserDefined) && tokens[i]!.length > MAX_SPECIAL_TOKEN_CHARS) {
      throw new GGUFError(meta.path, `tokenizer.ggml.tokens[${i}]`, `a special token of ${tokens[i]!.length} characters, more than the ${MAX_SPECIAL_TOKEN_CHARS} a token may have`);
    }
  }

  let merges: Array<[string, string]> | undefined;
  let prePatterns: RegExp[] | undefined;
  if (model === "gpt2") {
    const lines = meta.strings("tokenizer.ggml.merges");
    if (!lines) throw new GGUFError(meta.path, "tokenizer.ggml.merges", "required for a gpt2 (BPE) tokenizer but missing");
    // a merge outside the vocabulary is refused by the BPE table as it is built (mergeName below)
    merges = parseMergeLines(lines, `${meta.path}: tokenizer.ggml.merges`);
    prePatterns = preTokenizerPatterns(pre ?? "default");
    if (!prePatterns) {
      throw new GGUFError(meta.path, "tokenizer.ggml.pre", `unknown pre-tokenizer ${JSON.stringify(pre)}; known: ${KNOWN_PRE_TOKENIZERS.join(", ")}`);
    }
    // the whitespace model's session cuts the text at white space first, then splits each word by the pre-tokenizer's patterns
    if (modelName === "whitespace" && pre !== "whitespace") prePatterns = [...preTokenizerPatterns("whitespace")!, ...prePatterns];
  }

  const specialId = (key: string, fallback: number | undefined): number | undefined => {
    const full = `tokenizer.ggml.${key}`;
    // a float or signed id is refused, as llama.cpp's loader refuses it (not read as "no id")
    const v = meta.u32(full);
    // llama.cpp ignores ids outside the vocabulary (converters write 0xFFFFFFFF for "none") and keeps the default
    const inVocab = (id: number | undefined) => id !== undefined && Number.isInteger(id) && id >= 0 && id < n;
    if (inVocab(v)) return v;
    // a default that does not exist in this vocabulary (gpt2's 11 in a tiny one) means "none"
    return inVocab(fallback) ? fallback : undefined;
  };
  const defaults = modelName === "gemma4" ? {} : DEFAULT_IDS[model];
  const bosId = NO_DEFAULT_BOS_PRE.has(pre ?? "") ? specialId("bos_token_id", undefined) : specialId("bos_token_id", defaults.bos);
  const eosId = specialId("eos_token_id", defaults.eos);
  const unkId = specialId("unknown_token_id", defaults.unk);
  const sepId = specialId("seperator_token_id", defaults.sep); // sic: the GGUF key is spelled this way
  const padId = specialId("padding_token_id", defaults.pad);
  const maskId = specialId("mask_token_id", defaults.mask);
  const clsId = specialId("cls_token_id", model === "bert" ? bosId : undefined);

  let addBos = model !== "gpt2" || ADD_BOS_PRE.has(pre ?? "");
  let addEos = false;
  addBos = meta.bool("tokenizer.ggml.add_bos_token") ?? addBos;
  addEos = meta.bool("tokenizer.ggml.add_eos_token") ?? addEos;
  // llama.cpp's workaround for Gemma 4 (its PR 21500): add_bos whatever the file says
  if (model === "gpt2" && GEMMA4_PRE.has(pre ?? "")) addBos = true;
  const addSpacePrefix = meta.bool("tokenizer.ggml.add_space_prefix") ?? model === "llama";

  // one index of the tokens by text for every lookup below and the tokenizer's own (~5 ms each at 49K tokens)
  const byText = tokenIndex(tokens);
  const special = detectSpecialTokens(tokens, types, {
    eos: eosId,
    eot: specialId("eot_token_id", undefined),
    eom: specialId("eom_token_id", undefined),
    fimPre: specialId("fim_pre_token_id", undefined) ?? specialId("prefix_token_id", undefined),
    fimSuf: specialId("fim_suf_token_id", undefined) ?? specialId("suffix_token_id", undefined),
    fimMid: specialId("fim_mid_token_id", undefined) ?? specialId("middle_token_id", undefined),
    fimPad: specialId("fim_pad_token_id", undefined),
    fimRep: specialId("fim_rep_token_id", undefined),
    fimSep: specialId("fim_sep_token_id", undefined),
  }, byText);

  // per-model whitespace stripping around special tokens (llama.cpp sets these by model name)
  const lstripIds = new Set<number>();
  const rstripIds = new Set<number>();
  const name = (meta.raw("general.name") as string | undefined)?.toString().toLowerCase() ?? "";
  if (/jina-v2-(de|es|code)/.test(pre ?? "")) {
    const mask = byText.get("<mask>");
    if (mask !== undefined) lstripIds.add(mask);
  } else if (name.includes("phi-3") || name.includes("phi3")) {
    for (let id = 0; id < n; id++) {
      const t = types[id];
      if (t === TokenType.Control || t === TokenType.UserDefined || t === TokenType.Unknown) rstripIds.add(id);
    }
    const eosText = byText.get("</s>");
    if (eosText !== undefined) rstripIds.add(eosText);
    for (const t of ["<unk>", "<s>", "<|endoftext|>"]) { const id = byText.get(t); if (id !== undefined) rstripIds.delete(id); }
  }

  // llama.cpp has no default BOS for gemma4 (nor glm4) and asserts when it tokenizes with special tokens;
  // tsllm loads such a file as it does and names the key wanted when one is needed
  const missingIdMessage = (what: SpecialIdRole): string => {
    const key = { BOS: "bos_token_id", EOS: "eos_token_id", CLS: "cls_token_id", SEP: "seperator_token_id", UNK: "unknown_token_id" }[what];
    const full = `tokenizer.ggml.${key}`;
    const found = meta.has(full) ? `${meta.u32(full)} is outside the vocabulary of ${n} tokens` : what === "CLS" ? "missing (and no tokenizer.ggml.bos_token_id)" : "missing";
    const role = {
      BOS: `the BOS token this ${modelName} tokenizer puts in front of the text${modelName === "gemma4" ? " (always; llama.cpp has no default id for gemma4)" : ""}`,
      EOS: `the EOS token this ${modelName} tokenizer puts after the text (add_eos)`,
      CLS: "the CLS token a BERT tokenizer puts in front of the text",
      SEP: "the SEP token a BERT tokenizer puts after the text",
      UNK: "the unknown token WordPiece writes for a word it cannot spell",
    }[what];
    return `${meta.path}: ${full}: ${found}; expected the id of ${role}`;
  };

  return new VocabTokenizer({
    model, pre, tokens, types, scores, merges, prePatterns,
    mergeName: (i) => `${meta.path}: tokenizer.ggml.merges[${i}]`,
    textToId: byText,
    ignoreMerges: model === "gpt2" && IGNORE_MERGES_PRE.has(pre ?? ""),
    rawText: model === "gpt2" && RAW_TEXT_PRE.has(pre ?? ""),
    escapeSpaces: model === "gpt2" && ESCAPE_SPACES_PRE.has(pre ?? ""),
    newlinesWhole: model === "gpt2" && GEMMA4_PRE.has(pre ?? ""),
    // the "whitespace" pre-tokenizer turns lowercasing off; the file's key says last (llama.cpp's loader)
    dropWhitespace: modelName === "whitespace" ? { lowercase: meta.bool("tokenizer.ggml.normalizer.lowercase") ?? pre !== "whitespace" } : undefined,
    bosId, eosId, unkId, padId, sepId, clsId, maskId,
    eogIds: special.endOfGeneration, eotId: special.endOfTurn, fimIds: special.fim, addBos, addEos, addSpacePrefix, lstripIds, rstripIds,
    missingIdMessage,
    ...ggufChatTemplate(meta),
  });
}

/**
 * tokenizer.chat_template, the template llama.cpp uses when none is named. One of another type
 * is kept as the reason a chat has no template, so the tokenizer still loads for plain text.
 */
function ggufChatTemplate(meta: GGUFMetadata): ChatTemplateReading {
  const key = "tokenizer.chat_template";
  const named = ggufNamedTemplates(meta);
  const withNamed = named.size > 0 ? { namedChatTemplates: named } : {};
  try {
    const source = meta.string(key);
    if (source !== undefined) return { chatTemplate: { source, where: `${meta.path}: chat template (${key})` }, ...withNamed };
    return named.size > 0 ? { chatTemplateProblem: onlyNamedProblem(`${meta.path}: ${key}`, named.keys()), ...withNamed } : {};
  } catch (e) {
    if (e instanceof GGUFError) return { chatTemplateProblem: e.message, ...withNamed };
    throw e;
  }
}

/**
 * tokenizer.chat_template.<name>, the named templates llama.cpp's converter writes (and
 * llama_model_chat_template(model, name) reads); a key of another type is left out, as llama.cpp
 * finds no template there
 */
function ggufNamedTemplates(meta: GGUFMetadata): Map<string, ChatTemplateSource> {
  const prefix = "tokenizer.chat_template.";
  const out = new Map<string, ChatTemplateSource>();
  for (const [key, entry] of meta.entries) {
    if (!key.startsWith(prefix) || key.length === prefix.length || typeof entry.value !== "string") continue;
    out.set(key.slice(prefix.length), { source: entry.value, where: `${meta.path}: chat template (${key})` });
  }
  return out;
}

/** Reads only the GGUF header of `path` and builds its tokenizer. */
export function loadGGUFTokenizer(path: string): Tokenizer {
  return tokenizerFromGGUF(new GGUFMetadata(path, readGGUFHeader(path).metadata));
}
