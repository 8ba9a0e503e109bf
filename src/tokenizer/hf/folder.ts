import { existsSync, readdirSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import { FileFieldError } from "../../formats/index.js";
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
 * A folder's chat templates as transformers' tokenizer loads them: template files, when there are
 * any, are its templates (chat_template.jinja the one a chat uses when none is named,
 * additional_chat_templates/<name>.jinja the named ones) and tokenizer_config.json's chat_template
 * is not read (its loader: the files "take priority over template entries in the tokenizer
 * config"); else the config's chat_template (chatTemplateOf).
 */
function chatTemplateIn(dir: string, config: JsonObject): ChatTemplateReading {
  const files = templateFiles(dir);
  if (files === undefined) return chatTemplateOf(config.chat_template, join(dir, "tokenizer_config.json"));
  const named = files.named.size > 0 ? { namedChatTemplates: files.named } : {};
  if (files.chatTemplate) return { chatTemplate: files.chatTemplate, ...named };
  return { chatTemplateProblem: onlyNamedProblem(join(dir, ADDITIONAL), files.named.keys()), ...named };
}

const ADDITIONAL = "additional_chat_templates";

/** chat_template.jinja and additional_chat_templates/<name>.jinja (name -> template), as newer transformers saves templates; undefined when there are none */
function templateFiles(dir: string): { chatTemplate?: ChatTemplateSource; named: Map<string, ChatTemplateSource> } | undefined {
  const chatTemplate = jinjaTemplate(dir);
  const named = additionalTemplates(dir);
  if (chatTemplate === undefined && named.size === 0) return undefined;
  return { ...(chatTemplate ? { chatTemplate } : {}), named };
}

/** additional_chat_templates/<name>.jinja, name -> template */
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

/** chat_template.jinja, when the folder has one */
function jinjaTemplate(dir: string): ChatTemplateSource | undefined {
  const jinjaPath = join(dir, "chat_template.jinja");
  return existsSync(jinjaPath) ? { source: readTokenizerFile(jinjaPath), where: `${jinjaPath}: chat template` } : undefined;
}

/**
 * A folder's chat templates as llama.cpp's converter reads them (gguf-py's SpecialVocab), for
 * `convert`: tokenizer_config.json's chat_template when the config has the field; else
 * chat_template.jinja, with additional_chat_templates/<name>.jinja as its named ones; else
 * chat_template.json's chat_template. Where the config and chat_template.jinja both have one, the
 * converter writes the config's while transformers' tokenizer chats with the file's.
 */
export function folderChatTemplate(dir: string): ChatTemplateField {
  const config = readConfig(dir);
  const configPath = join(dir, "tokenizer_config.json");
  if (config.chat_template !== undefined) return chatTemplateField(config.chat_template, configPath);
  const chatTemplate = jinjaTemplate(dir);
  if (chatTemplate) return { chatTemplate, named: new Map([...additionalTemplates(dir)].map(([name, t]) => [name, t.source])), noDefault: false };
  const jsonPath = join(dir, "chat_template.json");
  if (existsSync(jsonPath)) return chatTemplateField(readJsonObject(jsonPath).chat_template, jsonPath);
  return chatTemplateField(undefined, configPath);
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
  // the line readHFConfig gives for a folder without config.json, of the class a caller catches for any model file
  if (kind === undefined) throw new FileFieldError(join(dir, "tokenizer.json"), "file", "not found (no tokenizer files: expected tokenizer.json, vocab.json + merges.txt, or vocab.txt)");
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

