import { existsSync, readdirSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import type { ChatTemplateReading, ChatTemplateSource } from "../types.js";
import { chatTemplateField, chatTemplateOf, onlyNamedProblem, type ChatTemplateField } from "./chat-template.js";
import { HFTokenizer } from "./hf-tokenizer.js";
import { readJsonObject, readTokenizerFile, tokenText, type JsonObject } from "./json-files.js";
import { BERT_CONFIG, bertTokenizerJson, GPT2_CONFIG, gpt2TokenizerJson } from "./legacy.js";

const SPECIAL_KEYS = ["bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"];

/** tokenizer_config.json, with special tokens that only special_tokens_map.json names filled in (older repos). */
function readConfig(dir: string): JsonObject {
  const configPath = join(dir, "tokenizer_config.json");
  const config = existsSync(configPath) ? readJsonObject(configPath) : {};
  const mapPath = join(dir, "special_tokens_map.json");
  if (existsSync(mapPath)) {
    const map = readJsonObject(mapPath);
    for (const k of SPECIAL_KEYS) if (tokenText(config[k]) === undefined && tokenText(map[k]) !== undefined) config[k] = map[k];
  }
  return config;
}

/**
 * A folder's chat template as its tokenizer reads it: tokenizer_config.json's chat_template
 * (chatTemplateOf), else chat_template.jinja beside it (newer repos), named by the file it is in.
 */
function chatTemplateIn(dir: string, config: JsonObject): ChatTemplateReading {
  const reading = jinjaTemplate(dir, config) ?? chatTemplateOf(config.chat_template, join(dir, "tokenizer_config.json"));
  const files = additionalTemplates(dir);
  if (files.size === 0) return reading;
  // transformers: each additional_chat_templates/<name>.jinja is the template of that name, beside (or over) the config's
  const named = new Map([...(reading.namedChatTemplates ?? []), ...files]);
  const problem = reading.chatTemplate || reading.chatTemplateProblem !== undefined ? {} : { chatTemplateProblem: onlyNamedProblem(join(dir, ADDITIONAL), named.keys()) };
  return { ...reading, ...problem, namedChatTemplates: named };
}

const ADDITIONAL = "additional_chat_templates";

/** additional_chat_templates/<name>.jinja, name -> template, as newer transformers saves the named templates */
function additionalTemplates(dir: string): Map<string, ChatTemplateSource> {
  const folder = join(dir, ADDITIONAL);
  const out = new Map<string, ChatTemplateSource>();
  if (!existsSync(folder) || !statSync(folder).isDirectory()) return out;
  for (const file of readdirSync(folder).filter((f) => f.endsWith(".jinja")).sort()) {
    const path = join(folder, file);
    if (statSync(path).isFile()) out.set(file.slice(0, -".jinja".length), { source: readTokenizerFile(path), where: `${path}: chat template` });
  }
  return out;
}

/** chat_template.jinja, read when tokenizer_config.json has no chat_template */
function jinjaTemplate(dir: string, config: JsonObject): ChatTemplateReading | undefined {
  const jinjaPath = join(dir, "chat_template.jinja");
  if (config.chat_template !== undefined || !existsSync(jinjaPath)) return undefined;
  return { chatTemplate: { source: readTokenizerFile(jinjaPath), where: `${jinjaPath}: chat template` } };
}

/** The chat template of a folder as its tokenizer reads it, with the named ones of a list or map, for `convert`. */
export function folderChatTemplate(dir: string): ChatTemplateField {
  const config = readConfig(dir);
  const jinja = jinjaTemplate(dir, config);
  const field = jinja ? { ...jinja, named: new Map<string, string>(), noDefault: false } : chatTemplateField(config.chat_template, join(dir, "tokenizer_config.json"));
  const files = additionalTemplates(dir);
  if (files.size === 0) return field;
  const named = new Map([...field.named, ...[...files].map(([name, t]) => [name, t.source] as const)]);
  if (field.chatTemplate || field.chatTemplateProblem !== undefined) return { ...field, named };
  return { ...field, named, noDefault: true, chatTemplateProblem: onlyNamedProblem(join(dir, ADDITIONAL), named.keys()) };
}

/** generation_config.json's eos_token_id (a number or a list), which also ends generation. */
function readExtraEos(dir: string): number[] {
  const p = join(dir, "generation_config.json");
  if (!existsSync(p)) return [];
  const eos = readJsonObject(p).eos_token_id;
  const list = Array.isArray(eos) ? eos : [eos];
  return list.filter((x): x is number => typeof x === "number" && Number.isInteger(x));
}

/** Which tokenizer files a folder holds, in order of preference. */
export function tokenizerFilesIn(dir: string): "tokenizer.json" | "gpt2" | "bert" | undefined {
  if (existsSync(join(dir, "tokenizer.json"))) return "tokenizer.json";
  if (existsSync(join(dir, "vocab.json")) && existsSync(join(dir, "merges.txt"))) return "gpt2";
  if (existsSync(join(dir, "vocab.txt"))) return "bert";
  return undefined;
}

/**
 * The tokenizer of a Hugging Face model folder: tokenizer.json (+ tokenizer_config.json), or the
 * legacy GPT-2 pair vocab.json + merges.txt, or BERT's vocab.txt.
 */
export function tokenizerFromFolder(dir: string, options: { libraryOnly?: boolean } = {}): HFTokenizer {
  const kind = tokenizerFilesIn(dir);
  if (kind === undefined) throw new Error(`${dir}: no tokenizer files found (expected tokenizer.json, vocab.json + merges.txt, or vocab.txt)`);
  const config = readConfig(dir);
  const extraEosIds = readExtraEos(dir);
  const template = chatTemplateIn(dir, config);
  switch (kind) {
    case "tokenizer.json": {
      const where = join(dir, "tokenizer.json");
      return new HFTokenizer({ where, tokenizerJson: readJsonObject(where), config, extraEosIds, ...template, ...options });
    }
    case "gpt2": {
      const where = join(dir, "vocab.json");
      const tokenizerJson = gpt2TokenizerJson(readJsonObject(where), readTokenizerFile(join(dir, "merges.txt")), dir);
      return new HFTokenizer({ where, tokenizerJson, config: { ...GPT2_CONFIG, ...config }, extraEosIds, ...template, ...options });
    }
    case "bert": {
      const where = join(dir, "vocab.txt");
      // transformers' BertTokenizer lowercases unless told otherwise; a "-cased" folder name says otherwise
      const lower = typeof config.do_lower_case === "boolean" ? config.do_lower_case : !/(^|[^n])cased/i.test(basename(dir));
      const tokenizerJson = bertTokenizerJson(readTokenizerFile(where), lower, where);
      return new HFTokenizer({ where, tokenizerJson, config: { ...BERT_CONFIG, ...config }, extraEosIds, ...template, ...options });
    }
  }
}

