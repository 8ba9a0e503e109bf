import { randomUUID } from "node:crypto";
import { jsonSchemaToGbnf, type JsonSchema } from "../sampling/constraints/index.js";
import { invalid } from "./errors.js";
import type { Body } from "./params.js";

/**
 * OpenAI-style tool calling: `tools` go to the chat template as its `tools` variable (as
 * transformers' apply_chat_template(tools=...) does), the model's reply is searched for calls in
 * its template family's format, and `tool_choice` "required" or a named function constrains the
 * reply to a call (a grammar over the functions' parameter schemas).
 *
 * Formats: "hermes" — `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, one block
 * per call (Qwen2.5 / Qwen3 / Hermes templates, whose text mentions <tool_call>); "mistral" —
 * `[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]` (Mistral templates); "json" — the reply
 * is one JSON object {"name": ..., "parameters" | "arguments": {...}} (Llama 3.1+).
 */
export interface ToolFunction {
  readonly name: string;
  readonly description?: string;
  readonly parameters: JsonSchema;
}

export type ToolChoice = "none" | "auto" | "required" | { readonly name: string };

export interface Tools {
  readonly functions: readonly ToolFunction[];
  readonly choice: ToolChoice;
  /** the tools as the request gave them: what the template sees */
  readonly raw: readonly unknown[];
}

export type ToolFormat = "hermes" | "mistral" | "json";

export interface ToolCall {
  readonly id: string;
  readonly type: "function";
  readonly function: { readonly name: string; readonly arguments: string };
}

/** `tools` and `tool_choice` of a chat request (undefined without tools) */
export function toolsOf(body: Body): Tools | undefined {
  const v = body["tools"];
  if (v === undefined || v === null || (Array.isArray(v) && v.length === 0)) {
    if (body["tool_choice"] !== undefined && body["tool_choice"] !== "none" && body["tool_choice"] !== "auto") throw invalid("tool_choice", "'tool_choice' needs 'tools'");
    return undefined;
  }
  if (!Array.isArray(v)) throw invalid("tools", "'tools' must be an array of {type: \"function\", function: {name, description, parameters}}", "invalid_type");
  const functions = v.map((t: unknown, i): ToolFunction => {
    const where = `tools[${i}]`;
    const f = (t as Body | null)?.["function"] as Body | undefined;
    if (typeof t !== "object" || t === null || (t as Body)["type"] !== "function" || typeof f !== "object" || f === null) throw invalid(where, `'${where}' must be {type: "function", function: {name, ...}}`);
    if (typeof f["name"] !== "string" || !/^[A-Za-z0-9_-]{1,64}$/.test(f["name"])) throw invalid(`${where}.function.name`, `'${where}.function.name' must be 1-64 letters, digits, _ or -`);
    const parameters = f["parameters"] ?? { type: "object", properties: {} };
    if (typeof parameters !== "object" || parameters === null || Array.isArray(parameters)) throw invalid(`${where}.function.parameters`, `'${where}.function.parameters' must be a JSON Schema object`);
    return { name: f["name"], ...(typeof f["description"] === "string" ? { description: f["description"] } : {}), parameters: parameters as JsonSchema };
  });
  const names = new Set(functions.map((f) => f.name));
  if (names.size !== functions.length) throw invalid("tools", "'tools' names a function twice");
  const c = body["tool_choice"] ?? "auto";
  let choice: ToolChoice;
  if (c === "none" || c === "auto" || c === "required") choice = c;
  else {
    const name = (c as Body | null)?.["function"] && ((c as Body)["function"] as Body)["name"];
    if (typeof c !== "object" || c === null || (c as Body)["type"] !== "function" || typeof name !== "string") throw invalid("tool_choice", `'tool_choice' must be "none", "auto", "required" or {type: "function", function: {name}}`);
    if (!names.has(name)) throw invalid("tool_choice", `'tool_choice' names the function ${JSON.stringify(name)}, which is not among the tools`);
    choice = { name };
  }
  return { functions, choice, raw: v };
}

/** the call format of a chat template: Hermes blocks where it speaks of <tool_call>, Mistral's list after [TOOL_CALLS], else a JSON object */
export function toolFormatOf(templateSource: string): ToolFormat {
  if (templateSource.includes("<tool_call>")) return "hermes";
  return templateSource.includes("[TOOL_CALLS]") ? "mistral" : "json";
}

/** a GBNF grammar that admits exactly one call of the allowed functions in the format */
export function toolCallGrammar(tools: Tools, format: ToolFormat): string {
  const allowed = typeof tools.choice === "object" ? tools.functions.filter((f) => f.name === (tools.choice as { name: string }).name) : tools.functions;
  const argsKey = format === "json" ? "parameters" : "arguments";
  const schema: JsonSchema = {
    anyOf: allowed.map((f) => ({ type: "object", properties: { name: { const: f.name }, [argsKey]: f.parameters }, required: ["name", argsKey] })),
  };
  let gbnf: string;
  try {
    gbnf = jsonSchemaToGbnf(schema);
  } catch (e) {
    throw invalid("tools", `'tools': a function's parameters cannot be enforced: ${(e as Error).message}`);
  }
  if (format === "json") return gbnf;
  const calls = gbnf.replace(/^root ::=/m, "call ::=");
  if (format === "mistral") return `${calls}root ::= "[TOOL_CALLS]" space "[" space call "]"\n`;
  return `${calls}root ::= "<tool_call>\\n" call "\\n</tool_call>"\n`;
}

/** the calls in a reply (and the text around them), in the format; malformed blocks stay text */
export function parseToolCalls(text: string, format: ToolFormat, tools: Tools): { content: string; calls: ToolCall[] } {
  const known = new Set(tools.functions.map((f) => f.name));
  const call = (json: string): ToolCall | undefined => {
    let v: unknown;
    try {
      v = JSON.parse(json);
    } catch {
      return undefined;
    }
    const o = v as Body | null;
    const args = o?.["arguments"] ?? o?.["parameters"];
    if (typeof o !== "object" || o === null || typeof o["name"] !== "string" || !known.has(o["name"]) || typeof args !== "object" || args === null) return undefined;
    return { id: `call_${randomUUID().replaceAll("-", "").slice(0, 24)}`, type: "function", function: { name: o["name"], arguments: JSON.stringify(args) } };
  };
  if (format === "json") {
    const c = call(text.replace(/^\s*<\|python_tag\|>/, "").trim());
    return c ? { content: "", calls: [c] } : { content: text, calls: [] };
  }
  if (format === "mistral") {
    const at = text.indexOf("[TOOL_CALLS]");
    if (at < 0) return { content: text, calls: [] };
    let list: unknown;
    try {
      list = JSON.parse(text.slice(at + "[TOOL_CALLS]".length).trim());
    } catch {
      return { content: text, calls: [] };
    }
    const found = Array.isArray(list) ? list.map((c) => call(JSON.stringify(c))) : [];
    if (found.length === 0 || found.some((c) => c === undefined)) return { content: text, calls: [] };
    return { content: text.slice(0, at).trim(), calls: found as ToolCall[] };
  }
  const calls: ToolCall[] = [];
  const content = text.replace(/<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g, (whole, json: string) => {
    const c = call(json);
    if (!c) return whole;
    calls.push(c);
    return "";
  });
  return { content: calls.length > 0 ? content.trim() : text, calls };
}
