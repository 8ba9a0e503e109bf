import type { ChatTemplateReading } from "../types.js";
import { isObject, type JsonObject } from "./json-files.js";

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
  if (value === undefined || value === null) return {};
  const field = `${configPath}: chat_template`;
  const chosen = typeof value === "string" ? value : defaultTemplate(value, field);
  if (typeof chosen !== "string") return { chatTemplateProblem: chosen.problem };
  return { chatTemplate: { source: chosen, where: `${configPath}: chat template (chat_template)` } };
}

/** the "default" template of a list or map of named ones, or why there is none */
function defaultTemplate(value: unknown, field: string): string | { problem: string } {
  let named: JsonObject;
  if (Array.isArray(value)) {
    named = {};
    value.forEach((entry, i) => {
      if (!isObject(entry) || typeof entry.name !== "string" || typeof entry.template !== "string") {
        throw new Error(`${field}[${i}]: expected an object with "name" and "template" strings, found ${JSON.stringify(entry)?.slice(0, 60)}`);
      }
      named[entry.name] = entry.template;
    });
  } else if (isObject(value)) named = value;
  else return { problem: `${field}: expected a template string or a list of {"name", "template"} objects, found ${JSON.stringify(value)?.slice(0, 60)}` };
  if (!Object.hasOwn(named, "default")) {
    const names = Object.keys(named).sort().map((n) => JSON.stringify(n)).join(", ");
    return { problem: `${field}: the model has several named chat templates and none is "default" (names: ${names || "none"}); transformers needs a template name then` };
  }
  const chosen = named.default;
  if (typeof chosen !== "string") return { problem: `${field}: the "default" template: expected a string, found ${JSON.stringify(chosen)?.slice(0, 60)}` };
  return chosen;
}
