import { parseMergeLines } from "../bpe.js";
import type { JsonObject } from "./json-files.js";

/**
 * tokenizer.json equivalents of the files older models ship instead, so one pipeline serves all.
 * They describe what transformers' GPT2Tokenizer and BertTokenizer do with the same files.
 */

const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };

/** GPT-2's vocab.json (token -> id) and merges.txt ("#version" header, then "left right" lines). */
export function gpt2TokenizerJson(vocab: JsonObject, mergesText: string, where: string): JsonObject {
  const lines = mergesText.split(/\r?\n/).filter((l, i) => l !== "" && !(i === 0 && l.startsWith("#version")));
  const merges = parseMergeLines(lines, `${where}: merges.txt line`);
  const eot = vocab["<|endoftext|>"];
  return {
    added_tokens: typeof eot === "number" ? [{ id: eot, content: "<|endoftext|>", single_word: false, lstrip: false, rstrip: false, normalized: true, special: true }] : [],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: byteLevel,
    decoder: byteLevel,
    model: { type: "BPE", vocab, merges, dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "", fuse_unk: false, byte_fallback: false },
  };
}

/** The tokenizer_config.json GPT-2's files imply: <|endoftext|> is BOS, EOS and UNK; nothing is added around a text. */
export const GPT2_CONFIG: JsonObject = { bos_token: "<|endoftext|>", eos_token: "<|endoftext|>", unk_token: "<|endoftext|>", add_bos_token: false };

const BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];

/** BERT's vocab.txt (one token per line, id = line number), lowercasing or not. */
export function bertTokenizerJson(vocabText: string, lowercase: boolean, where: string): JsonObject {
  const lines = vocabText.split(/\r?\n/);
  if (lines.at(-1) === "") lines.pop();
  const vocab: Record<string, number> = {};
  lines.forEach((t, i) => { vocab[t] = i; }); // a later duplicate wins, as in transformers' load_vocab
  for (const t of ["[UNK]", "[CLS]", "[SEP]"]) {
    if (vocab[t] === undefined) throw new Error(`${where}: the vocabulary has no ${t} token (expected a BERT vocab.txt)`);
  }
  const cls = vocab["[CLS]"]!, sep = vocab["[SEP]"]!;
  const seq = (id: string, typeId: number) => ({ Sequence: { id, type_id: typeId } });
  const special = (id: string, typeId: number) => ({ SpecialToken: { id, type_id: typeId } });
  return {
    added_tokens: BERT_SPECIALS.filter((t) => vocab[t] !== undefined).map((t) => ({
      id: vocab[t], content: t, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
    })),
    normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: {
      type: "TemplateProcessing",
      single: [special("[CLS]", 0), seq("A", 0), special("[SEP]", 0)],
      pair: [special("[CLS]", 0), seq("A", 0), special("[SEP]", 0), seq("B", 1), special("[SEP]", 1)],
      special_tokens: { "[CLS]": { id: "[CLS]", ids: [cls], tokens: ["[CLS]"] }, "[SEP]": { id: "[SEP]", ids: [sep], tokens: ["[SEP]"] } },
    },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 100, vocab },
  };
}

export const BERT_CONFIG: JsonObject = { unk_token: "[UNK]", sep_token: "[SEP]", pad_token: "[PAD]", cls_token: "[CLS]", mask_token: "[MASK]" };
