import type { ChatTemplateReading } from "../types.js";
import { isObject, type JsonObject } from "./json-files.js";

/**
 * tokenizer_config.json's chat_template read whole, for `convert`: the reading a chat uses
 * (chatTemplateOf) plus the templates a chat names, which llama.cpp's converter writes too.
 */
export interface ChatTemplateField extends ChatTemplateReading {
  /** a list's or map's templates other than "default", name -> template, in the field's order (none for a string) */
  readonly named: ReadonlyMap<string, string>;
  /** the field is a list or map of named templates with no "default": a chat needs a name, yet the field is well formed */
  readonly noDefault: boolean;
  /** a named template (not "default") that is no string, naming the field and entry */
  readonly malformed?: string;
}

/**
 * tokenizer_config.json's chat_template as transformers resolves it with no template name given:
 * a string; a list of {name, template} (transformers' tokenizer makes it a name -> template map
 * at load and fails there on an entry without both keys) or such a map, whose "default" one is
 * used; null or absent: none. A map without "default" fails only when a chat is templated
 * (get_chat_template names the templates), as does a value of another type (jinja gets no string),
 * so the tokenizer still loads for everything else. The one reading of the field: the tokenizer
 * loader's and `convert`'s.
 */
export function chatTemplateOf(value: unknown, configPath: string): ChatTemplateReading {
  const { chatTemplate, chatTemplateProblem, named } = chatTemplateField(value, configPath);
  const reading = chatTemplate ? { chatTemplate } : chatTemplateProblem !== undefined ? { chatTemplateProblem } : {};
  if (named.size === 0) return reading;
  const sources = new Map([...named].map(([name, source]) => [name, { source, where: `${configPath}: chat template ${JSON.stringify(name)} (chat_template)` }]));
  return { ...reading, namedChatTemplates: sources };
}

/** why a chat has no template when the model has only named ones: which names there are, and how to choose one */
export function onlyNamedProblem(where: string, names: Iterable<string>): string {
  const list = [...names].sort().map((n) => JSON.stringify(n)).join(", ");
  return `${where}: the model has several named chat templates and none is "default" (names: ${list || "none"}); transformers needs a template name then`;
}

/** chatTemplateOf's reading of the field with its named templates, for `convert` */
export function chatTemplateField(value: unknown, configPath: string): ChatTemplateField {
  const none = { named: new Map<string, string>(), noDefault: false };
  if (value === undefined || value === null) return none;
  const field = `${configPath}: chat_template`;
  if (typeof value === "string") return { ...none, chatTemplate: { source: value, where: `${configPath}: chat template (chat_template)` } };
  const all = namedTemplates(value, field);
  if (all === undefined) return { ...none, chatTemplateProblem: `${field}: expected a template string or a list of {"name", "template"} objects, found ${JSON.stringify(value)?.slice(0, 60)}` };
  const named = new Map<string, string>();
  let malformed: string | undefined;
  for (const [name, template] of Object.entries(all)) {
    if (name === "default") continue;
    if (typeof template === "string") named.set(name, template);
    else malformed ??= `${field}[${JSON.stringify(name)}]: expected a template string, found ${JSON.stringify(template)?.slice(0, 60)}`;
  }
  const rest = { named, noDefault: !Object.hasOwn(all, "default"), ...(malformed ? { malformed } : {}) };
  if (rest.noDefault) {
    return { ...rest, chatTemplateProblem: onlyNamedProblem(field, Object.keys(all)) };
  }
  const chosen = all.default;
  if (typeof chosen !== "string") return { ...rest, chatTemplateProblem: `${field}: the "default" template: expected a string, found ${JSON.stringify(chosen)?.slice(0, 60)}` };
  return { ...rest, chatTemplate: { source: chosen, where: `${configPath}: chat template (chat_template)` } };
}

/** a list of {name, template} or a map as name -> template; undefined for a value of another type */
function namedTemplates(value: unknown, field: string): JsonObject | undefined {
  if (isObject(value)) return value;
  if (!Array.isArray(value)) return undefined;
  const named: JsonObject = {};
  value.forEach((entry, i) => {
    if (!isObject(entry) || typeof entry.name !== "string" || typeof entry.template !== "string") {
      throw new Error(`${field}[${i}]: expected an object with "name" and "template" strings, found ${JSON.stringify(entry)?.slice(0, 60)}`);
    }
    named[entry.name] = entry.template;
  });
  return named;
}
