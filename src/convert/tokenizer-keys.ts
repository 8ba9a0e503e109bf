import { join } from "node:path";
import { ggufEntry, type GGUFWriteEntry } from "../formats/index.js";
import { folderChatTemplate, tokenizerFilesIn, tokenizerFromFolder } from "../tokenizer/hf/folder.js";
import { isObject, readJsonObject, readTokenizerFile, type JsonObject } from "../tokenizer/hf/json-files.js";
import { gpt2TokenizerJson } from "../tokenizer/hf/legacy.js";
import type { ChatTemplateField } from "../tokenizer/hf/chat-template.js";
import { TokenType } from "../tokenizer/index.js";

/**
 * A Hugging Face folder's own tokenizer files as GGUF `tokenizer.ggml.*` keys, following what
 * llama.cpp's convert_hf_to_gguf.py writes:
 * - byte-level BPE (tokenizer.json with ByteLevel, or GPT-2's vocab.json + merges.txt):
 *   model "gpt2", the byte-level token strings as they are, the merges as "left right" lines,
 *   and `tokenizer.ggml.pre` named after the pre-tokenizer's split pattern;
 * - SentencePiece-style BPE tokenizer.json ("▁" for spaces, <0xNN> byte fallback): model "llama"
 *   with scores and token types.
 * Special ids and add_bos/add_eos come from the folder's HFTokenizer, which already resolves
 * tokenizer_config.json, special_tokens_map.json and the post-processor; the chat template as the
 * converter reads it (folderChatTemplate). Anything else is refused with an error that points at --vocab.
 */

const SUGGEST = "pass --vocab FILE.gguf (a GGUF with the same tokenizer) to copy its tokenizer.* keys instead";

/** tokenizer.json's Split regexes (as HF spells them) -> llama.cpp's pre-tokenizer name */
const SPLIT_PRE: Record<string, string> = {
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+": "llama-bpe",
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+": "qwen2",
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+": "gpt-2",
};

/** normalizers llama.cpp's byte-level path can stand in for: none, or NFC (text is taken as given) */
const BYTE_LEVEL_NORMALIZERS = new Set(["NFC"]);

function fail(where: string, what: string): never {
  throw new Error(`${where}: ${what}; converting this tokenizer to GGUF keys is not supported, ${SUGGEST}`);
}

/** the steps of a pre-tokenizer / normalizer / decoder (a Sequence is flattened) */
function steps(section: unknown, listKey: string): JsonObject[] {
  if (section === null || section === undefined) return [];
  if (!isObject(section)) return [];
  if (section.type === "Sequence" && Array.isArray(section[listKey])) return (section[listKey] as unknown[]).filter(isObject);
  return [section];
}

/** llama.cpp's `tokenizer.ggml.pre` for a byte-level tokenizer.json pre-tokenizer */
export function byteLevelPreName(where: string, preTokenizer: unknown): string {
  const list = steps(preTokenizer, "pretokenizers");
  const types = list.map((s) => s.type);
  const byteLevel = list.find((s) => s.type === "ByteLevel");
  if (!byteLevel) fail(where, `pre_tokenizer ${JSON.stringify(types)} has no ByteLevel step`);
  if (byteLevel.add_prefix_space === true) fail(where, "pre_tokenizer ByteLevel with add_prefix_space");
  // GPT-2 proper: ByteLevel does the splitting with its built-in GPT-2 pattern
  if (list.length === 1) {
    if (byteLevel.use_regex === false) fail(where, "pre_tokenizer ByteLevel without a split pattern");
    return "gpt-2";
  }
  // StarCoder / SmolLM: single digits first, then GPT-2's pattern
  if (list.length === 2 && list[0]!.type === "Digits" && list[0]!.individual_digits === true && byteLevel.use_regex !== false) return "starcoder";
  if (list.length === 2 && list[0]!.type === "Split" && byteLevel.use_regex === false) {
    const split = list[0]!;
    const pattern = isObject(split.pattern) ? split.pattern.Regex : undefined;
    const name = typeof pattern === "string" ? SPLIT_PRE[pattern] : undefined;
    if (name !== undefined && split.behavior === "Isolated" && split.invert !== true) return name;
    fail(where, `pre_tokenizer Split pattern ${JSON.stringify(pattern)} is not one of the known ones (llama3, qwen2, gpt-2)`);
  }
  return fail(where, `pre_tokenizer ${JSON.stringify(types)} is not a known byte-level layout`);
}

/** tokenizer.json of the folder (or the one GPT-2's legacy files describe) */
function folderTokenizerJson(folder: string): { where: string; tj: JsonObject } {
  const kind = tokenizerFilesIn(folder);
  if (kind === "tokenizer.json") {
    const where = join(folder, "tokenizer.json");
    return { where, tj: readJsonObject(where) };
  }
  if (kind === "gpt2") {
    const where = join(folder, "vocab.json");
    return { where, tj: gpt2TokenizerJson(readJsonObject(where), readTokenizerFile(join(folder, "merges.txt")), folder) };
  }
  if (kind === "bert") fail(join(folder, "vocab.txt"), "a WordPiece (BERT) vocabulary");
  throw new Error(`${folder}: no tokenizer files found (expected tokenizer.json or vocab.json + merges.txt); ${SUGGEST}`);
}

/**
 * How many tokens the folder's own tokenizer files hold (and which file says so), or undefined
 * when it has none this reader takes: what a --vocab shorter than the embedding must match.
 */
export function folderVocabularySize(folder: string): { where: string; tokens: number } | undefined {
  const kind = tokenizerFilesIn(folder);
  if (kind === undefined) return undefined;
  try {
    const hf = tokenizerFromFolder(folder);
    return { where: join(folder, kind === "gpt2" ? "vocab.json" : kind === "bert" ? "vocab.txt" : "tokenizer.json"), tokens: hf.vocabSize };
  } catch {
    return undefined; // files this reader cannot read say nothing about the size
  }
}

/** a merge as GGUF's "left right" line (tokenizer.json holds either that string or a pair) */
function mergeLine(where: string, m: unknown, i: number): string {
  if (typeof m === "string") return m;
  if (Array.isArray(m) && m.length === 2 && typeof m[0] === "string" && typeof m[1] === "string") return `${m[0]} ${m[1]}`;
  throw new Error(`${where}: "model.merges[${i}]": expected "left right" or ["left", "right"], found ${JSON.stringify(m)}`);
}

/** does the SentencePiece-style tokenizer.json put "▁" in front of the text (llama.cpp's add_space_prefix)? */
function spmLayout(where: string, tj: JsonObject): boolean {
  const norm = steps(tj.normalizer, "normalizers");
  const pre = steps(tj.pre_tokenizer, "pretokenizers");
  const normTypes = norm.map((s) => s.type);
  // llama2 / mistral (newer files): normalizer Prepend("▁") + Replace(" " -> "▁"), no pre-tokenizer
  const replaces = norm.some((s) => s.type === "Replace" && isObject(s.pattern) && s.pattern.String === " " && s.content === "▁");
  if (replaces && pre.length === 0 && norm.every((s) => s.type === "Replace" || (s.type === "Prepend" && s.prepend === "▁"))) {
    return norm.some((s) => s.type === "Prepend");
  }
  // older files: Metaspace pre-tokenizer, no normalizer
  if (norm.length === 0 && pre.length === 1 && pre[0]!.type === "Metaspace" && (pre[0]!.replacement ?? "▁") === "▁" && pre[0]!.split !== true) {
    const scheme = pre[0]!.prepend_scheme;
    if (scheme === "never") return false;
    if (scheme === undefined || scheme === "always" || scheme === "first") return pre[0]!.add_prefix_space !== false;
  }
  return fail(where, `normalizer ${JSON.stringify(normTypes)} with pre_tokenizer ${JSON.stringify(pre.map((s) => s.type))} is not a known SentencePiece layout`);
}

/**
 * The `tokenizer.ggml.*` keys (and the chat template keys, chatTemplateEntries) for the tokenizer files in
 * `folder`, with the token list padded to `rows` (the model's embedding rows) as llama.cpp's
 * converter pads a short vocabulary.
 */
export function folderTokenizerEntries(folder: string, rows: number, warn: (line: string) => void = toStderr): [string, GGUFWriteEntry][] {
  const { where, tj } = folderTokenizerJson(folder);
  const model = tj.model;
  if (!isObject(model)) throw new Error(`${where}: "model": required section is missing; ${SUGGEST}`);
  if (model.type !== "BPE") fail(where, `model type ${JSON.stringify(model.type)} (only BPE is converted)`);
  const hf = tokenizerFromFolder(folder);
  if (hf.vocabSize > rows) throw new Error(`${where}: the tokenizer has ${hf.vocabSize} tokens, but the model's embedding has only ${rows} rows`);

  const vocab = model.vocab;
  if (!isObject(vocab)) throw new Error(`${where}: "model.vocab": expected an object of token -> id`);
  const tokens: (string | undefined)[] = new Array(rows).fill(undefined);
  for (const [t, id] of Object.entries(vocab)) tokens[id as number] = t;
  const added = (Array.isArray(tj.added_tokens) ? tj.added_tokens : []).filter(isObject);
  for (const a of added) tokens[a.id as number] = a.content as string;

  const byteLevel = JSON.stringify([tj.pre_tokenizer, tj.decoder]).includes('"ByteLevel"');
  const types = new Int32Array(rows).fill(TokenType.Normal);
  for (const a of added) {
    const text = a.content as string;
    // llama.cpp also treats <|...|>-style added tokens as control tokens when the file does not mark them special
    const looksSpecial = (text.startsWith("<|") && text.endsWith("|>")) || text === "<pad>" || text === "<mask>";
    types[a.id as number] = a.special === true || looksSpecial ? TokenType.Control : TokenType.UserDefined;
  }
  const merges = (Array.isArray(model.merges) ? model.merges : []).map((m, i) => mergeLine(where, m, i));
  const out: [string, GGUFWriteEntry][] = [];

  if (byteLevel) {
    const normTypes = steps(tj.normalizer, "normalizers").map((s) => s.type);
    if (normTypes.some((t) => !BYTE_LEVEL_NORMALIZERS.has(t as string))) fail(where, `normalizer ${JSON.stringify(normTypes)} on a byte-level tokenizer`);
    const pre = byteLevelPreName(where, tj.pre_tokenizer);
    // holes in the id range and rows past the vocabulary: "[PADn]", user-defined, as llama.cpp's gpt2 path writes them
    const list = tokens.map((t, i) => {
      if (t !== undefined) return t;
      types[i] = TokenType.UserDefined;
      return `[PAD${i}]`;
    });
    out.push(
      ["tokenizer.ggml.model", ggufEntry.string("gpt2")],
      ["tokenizer.ggml.pre", ggufEntry.string(pre)],
      ["tokenizer.ggml.tokens", ggufEntry.strings(list)],
      ["tokenizer.ggml.token_type", ggufEntry.i32s(types)],
      ["tokenizer.ggml.merges", ggufEntry.strings(merges)],
    );
  } else {
    const addSpacePrefix = spmLayout(where, tj);
    /*
     * llama.cpp's SentencePiece tokenizer merges the adjacent pair whose joined text has the
     * highest score; HF's BPE merges the pair with the lowest merge rank. A token's score is
     * minus the rank of the first merge that makes it, so both pick the same pair (files
     * converted from a SentencePiece model list every split of each piece, ranked by piece).
     */
    const scores = new Float32Array(rows);
    const rank = new Map<string, number>();
    merges.forEach((line, r) => {
      const sp = line.indexOf(" ", 1);
      const joined = line.slice(0, sp) + line.slice(sp + 1);
      if (!rank.has(joined)) rank.set(joined, r);
    });
    const unk = hf.unkId;
    const list = tokens.map((t, i) => {
      if (t === undefined) { types[i] = TokenType.Unused; return `[PAD${i}]`; }
      if (/^<0x[0-9A-Fa-f]{2}>$/.test(t) && types[i] === TokenType.Normal) types[i] = TokenType.Byte;
      if (i === unk) types[i] = TokenType.Unknown;
      const r = rank.get(t);
      // single characters are never the result of a merge: score 0 keeps them out of the ordering
      scores[i] = types[i] === TokenType.Normal && r !== undefined ? -(r + 1) : 0;
      return t;
    });
    out.push(
      ["tokenizer.ggml.model", ggufEntry.string("llama")],
      ["tokenizer.ggml.pre", ggufEntry.string("default")],
      ["tokenizer.ggml.tokens", ggufEntry.strings(list)],
      ["tokenizer.ggml.scores", ggufEntry.f32s(scores)],
      ["tokenizer.ggml.token_type", ggufEntry.i32s(types)],
      ["tokenizer.ggml.add_space_prefix", ggufEntry.bool(addSpacePrefix)],
    );
  }

  const ids: [string, number | undefined][] = [
    ["bos_token_id", hf.bosId], ["eos_token_id", hf.eosId], ["unknown_token_id", hf.unkId], ["padding_token_id", hf.padId],
  ];
  for (const [key, id] of ids) if (id !== undefined) out.push([`tokenizer.ggml.${key}`, ggufEntry.u32(id)]);
  out.push(["tokenizer.ggml.add_bos_token", ggufEntry.bool(hf.addBos)], ["tokenizer.ggml.add_eos_token", ggufEntry.bool(hf.addEos)]);
  out.push(...chatTemplateEntries(folderChatTemplate(folder), warn));
  return out;
}

/**
 * The chat template keys as llama.cpp's converter writes them (gguf-py's add_chat_template): the
 * template a chat uses when none is named as `tokenizer.chat_template` (the loader's reading,
 * chatTemplateOf), each other named one of a list or map as `tokenizer.chat_template.<name>` (the
 * name's characters outside [A-Za-z0-9] made "_") and their names as `tokenizer.chat_templates`.
 * Named ones with no "default" are converted without tokenizer.chat_template, saying so through
 * `warn`; a field of the wrong type is refused in the loader's words, as a chat with the folder fails.
 */
export function chatTemplateEntries(field: ChatTemplateField, warn: (line: string) => void): [string, GGUFWriteEntry][] {
  const refuse = (problem: string) => new Error(`${problem}; convert writes the template a chat uses as tokenizer.chat_template`);
  if (field.malformed !== undefined) throw refuse(field.malformed);
  if (field.chatTemplateProblem !== undefined) {
    if (!field.noDefault) throw refuse(field.chatTemplateProblem);
    warn(`${field.chatTemplateProblem}; no tokenizer.chat_template written, a chat with the GGUF names one of tokenizer.chat_templates`);
  }
  const out: [string, GGUFWriteEntry][] = [];
  const names: string[] = [];
  for (const [given, template] of field.named) {
    const name = given.replace(/[^A-Za-z0-9]/g, "_");
    if (name === "") continue;
    if (!names.includes(name)) names.push(name);
    out.push([`tokenizer.chat_template.${name}`, ggufEntry.string(template)]);
  }
  if (names.length > 0) out.push(["tokenizer.chat_templates", ggufEntry.strings(names)]);
  if (field.chatTemplate) out.push(["tokenizer.chat_template", ggufEntry.string(field.chatTemplate.source)]);
  return out;
}

/** convert's warnings where the caller takes none: one line each on stderr */
export function toStderr(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** the keys chatTemplateEntries writes, which replace a --vocab GGUF's own */
export function isChatTemplateKey(key: string): boolean {
  return key === "tokenizer.chat_template" || key === "tokenizer.chat_templates" || key.startsWith("tokenizer.chat_template.");
}

/**
 * A WordPiece (BERT) tokenizer as llama.cpp's `bert` keys, the way convert_hf_to_gguf.py writes
 * them: a word-initial piece gets the phantom space "▁" ("the" -> "▁the"), a continuation loses
 * its "##" ("##s" -> "s"), bracketed specials stay as they are; special added tokens are control
 * tokens; the CLS / SEP / PAD / UNK / MASK ids.
 */
export function wordPieceTokenizerEntries(folder: string, rows: number): [string, GGUFWriteEntry][] {
  const hf = tokenizerFromFolder(folder);
  if (hf.type !== "bert") throw new Error(`${folder}: expected a WordPiece tokenizer (BERT), found ${hf.type}; ${SUGGEST}`);
  if (hf.vocabSize > rows) throw new Error(`${folder}: the tokenizer has ${hf.vocabSize} tokens, but the model's embedding has only ${rows} rows`);
  const prefix = hf.continuingSubwordPrefix ?? "##";
  const tokens: string[] = [], types = new Int32Array(rows).fill(TokenType.Normal);
  for (let id = 0; id < rows; id++) {
    if (id >= hf.vocabSize) { tokens.push(`[PAD${id}]`); types[id] = TokenType.Unused; continue; }
    const t = hf.piece(id);
    if (hf.isSpecial(id) || (t.startsWith("[") && t.endsWith("]"))) {
      tokens.push(t);
      if (hf.isSpecial(id)) types[id] = TokenType.Control;
    } else tokens.push(t.startsWith(prefix) ? t.slice(prefix.length) : `\u2581${t}`);
  }
  const out: [string, GGUFWriteEntry][] = [
    ["tokenizer.ggml.model", ggufEntry.string("bert")],
    ["tokenizer.ggml.tokens", ggufEntry.strings(tokens)],
    ["tokenizer.ggml.token_type", ggufEntry.i32s([...types])],
  ];
  const ids: [string, number | undefined][] = [
    ["unknown_token_id", hf.unkId], ["seperator_token_id", hf.sepId], ["padding_token_id", hf.padId], ["cls_token_id", hf.clsId], ["mask_token_id", hf.maskId],
  ];
  for (const [k, v] of ids) if (v !== undefined) out.push([`tokenizer.ggml.${k}`, ggufEntry.u32(v)]);
  return out;
}
