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
  /** parallel_tool_calls: whether a reply may hold more than one call (OpenAI's default: true) */
  readonly parallel: boolean;
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
    parallelOf(body);
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
  return { functions, choice, parallel: parallelOf(body), raw: v };
}

function parallelOf(body: Body): boolean {
  const p = body["parallel_tool_calls"];
  if (p !== undefined && p !== null && typeof p !== "boolean") throw invalid("parallel_tool_calls", `'parallel_tool_calls' must be a boolean, got ${JSON.stringify(p)}`, "invalid_type");
  return p !== false;
}

/** the call format of a chat template: Hermes blocks where it speaks of <tool_call>, Mistral's list after [TOOL_CALLS], else a JSON object */
export function toolFormatOf(templateSource: string): ToolFormat {
  if (templateSource.includes("<tool_call>")) return "hermes";
  return templateSource.includes("[TOOL_CALLS]") ? "mistral" : "json";
}

/**
 * A GBNF grammar that admits a call of the allowed functions in the format: one, or (with
 * parallel_tool_calls, and where the format can hold several) one or more, as llama.cpp's grammars do
 */
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
  if (format === "mistral") return `${calls}root ::= "[TOOL_CALLS]" space "[" space call${tools.parallel ? ` ("," space call)*` : ""} "]"\n`;
  return `${calls}block ::= "<tool_call>\\n" call "\\n</tool_call>"\nroot ::= block${tools.parallel ? ` ("\\n" block)*` : ""}\n`;
}

/**
 * The calls in a reply (and the text around them), in the format; malformed blocks stay text.
 * Without parallel_tool_calls only the first call is kept (OpenAI's promise of at most one): the
 * others are dropped, not sent as text.
 */
export function parseToolCalls(text: string, format: ToolFormat, tools: Tools): { content: string; calls: ToolCall[] } {
  const found = findToolCalls(text, format, tools);
  return tools.parallel ? found : { content: found.content, calls: found.calls.slice(0, 1) };
}

function findToolCalls(text: string, format: ToolFormat, tools: Tools): { content: string; calls: ToolCall[] } {
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

/** one piece of a streamed chat reply: text, or a tool call's start (id, name) or a piece of its arguments */
export type ReplyDelta =
  | { readonly content: string }
  | { readonly call: { readonly index: number; readonly id?: string; readonly type?: "function"; readonly function: { readonly name?: string; readonly arguments: string } } };

/** where a call's object stands after scanning it: its name, where its arguments' value starts and ends, where the object ends */
interface ScannedCall {
  name?: string;
  argsStart?: number;
  argsEnd?: number;
  end?: number;
}

/**
 * Scans the text of one call object ({"name": ..., "arguments": {...}}) as far as it goes: JSON
 * strings and nesting are tracked so braces inside strings do not count. Keys are read at depth 1.
 */
function scanCall(s: string): ScannedCall {
  const out: ScannedCall = {};
  let depth = 0, inString = false, escaped = false, stringStart = -1;
  let lastString: string | undefined, key: string | undefined, expectValue = false, valueKey: string | undefined;
  for (let i = 0; i < s.length; i++) {
    const ch = s[i]!;
    if (inString) {
      if (escaped) escaped = false;
      else if (ch === "\\") escaped = true;
      else if (ch === "\"") {
        inString = false;
        if (depth === 1) {
          try {
            lastString = JSON.parse(s.slice(stringStart, i + 1)) as string;
          } catch {
            lastString = undefined;
          }
          if (valueKey === "name" && out.name === undefined) out.name = lastString;
          if (valueKey === "arguments" || valueKey === "parameters") out.argsEnd = i + 1;
        }
      }
      continue;
    }
    if (/\s/.test(ch)) continue;
    if (expectValue) {
      // the first character of a depth-1 value
      expectValue = false;
      valueKey = key;
      if ((key === "arguments" || key === "parameters") && out.argsStart === undefined) out.argsStart = i;
    }
    if (ch === "\"") {
      inString = true;
      stringStart = i;
    } else if (ch === "{" || ch === "[") depth++;
    else if (ch === "}" || ch === "]") {
      depth--;
      if (depth === 1 && (valueKey === "arguments" || valueKey === "parameters") && out.argsEnd === undefined) out.argsEnd = i + 1;
      if (depth === 0) {
        out.end = i + 1;
        return out;
      }
    } else if (ch === ":" && depth === 1) {
      key = lastString;
      expectValue = true;
    } else if (ch === "," && depth === 1) valueKey = undefined;
  }
  return out;
}

/**
 * A chat reply with tools, as it is generated: text streams as content until a call begins (the
 * format's marker: "<tool_call>" blocks, "[TOOL_CALLS]" lists, or a reply that is one JSON
 * object); each call then streams as OpenAI's do — a first delta with its id and name once the
 * name is known (and is one of the tools), then the text of its arguments as it comes. A call
 * whose name is no tool, or that never closes, is sent as content at the end, as parseToolCalls
 * leaves malformed calls as text.
 */
export class ToolCallStream {
  private text = "";
  /** chars of text handled: sent as content, or part of a call block */
  private done = 0;
  /** the call being read: where its object starts in text, its index, what of it was sent */
  private call: { start: number; index: number; id?: string; argsSent: number; dead: boolean; dropped: boolean } | undefined;
  /** inside the calls part (after a marker) but between call objects */
  private inCalls = false;
  private calls = 0;
  private readonly known: Set<string>;
  private readonly marker: string | undefined;
  /** without parallel_tool_calls: calls after the first are read and dropped, as parseToolCalls drops them */
  private readonly parallel: boolean;

  constructor(private readonly format: ToolFormat, tools: Tools) {
    this.known = new Set(tools.functions.map((f) => f.name));
    this.parallel = tools.parallel;
    this.marker = format === "hermes" ? "<tool_call>" : format === "mistral" ? "[TOOL_CALLS]" : undefined;
  }

  /** calls started so far (their name was a tool's) */
  get callCount(): number {
    return this.calls;
  }

  push(delta: string): ReplyDelta[] {
    this.text += delta;
    return this.advance(false);
  }

  /** what is left once the reply has ended */
  end(): ReplyDelta[] {
    return this.advance(true);
  }

  private advance(final: boolean): ReplyDelta[] {
    const out: ReplyDelta[] = [];
    for (;;) {
      if (this.call) {
        if (!this.readCall(out, final)) break;
        continue;
      }
      if (this.inCalls) {
        // between call objects: a separator, a closer, or the next object
        const rest = this.text.slice(this.done);
        const m = /^[\s,]*(<\/tool_call>)?[\s,]*/.exec(rest)!;
        const after = rest.slice(m[0].length);
        if (after.startsWith("{")) { this.done += m[0].length; this.startCall(); continue; }
        if (this.format === "mistral" && after.startsWith("[")) { this.done += m[0].length + 1; continue; }
        if (this.format === "mistral" && after.startsWith("]")) { this.done += m[0].length + 1; this.inCalls = false; continue; }
        if (this.format === "hermes" && m[1]) { this.done += m[0].length; this.inCalls = false; continue; }
        // more may come: nothing yet, or the start of </tool_call>
        if (!final && (after === "" || (this.format === "hermes" && "</tool_call>".startsWith(after)))) break;
        this.inCalls = false;
        continue;
      }
      // content: up to a marker, holding back what may be its beginning
      const rest = this.text.slice(this.done);
      if (this.format === "json") {
        const lead = rest.replace(/^\s*(<\|python_tag\|>)?\s*/, "");
        if (this.done === 0 && lead.startsWith("{")) { this.done = this.text.length - lead.length; this.startCall(); continue; }
        if (this.done === 0 && !final && (lead === "" || "<|python_tag|>".startsWith(lead))) break;
        if (rest) out.push({ content: rest });
        this.done = this.text.length;
        break;
      }
      const at = rest.indexOf(this.marker!);
      if (at >= 0) {
        if (at > 0) out.push({ content: rest.slice(0, at) });
        this.done += at + this.marker!.length;
        this.inCalls = true;
        continue;
      }
      let keep = final ? 0 : Math.min(rest.length, this.marker!.length - 1);
      while (keep > 0 && !this.marker!.startsWith(rest.slice(rest.length - keep))) keep--;
      if (rest.length > keep) out.push({ content: rest.slice(0, rest.length - keep) });
      this.done += rest.length - keep;
      break;
    }
    // once calls have begun, whitespace between and after them is no content (parseToolCalls trims it)
    return out.filter((d) => !("content" in d) || (this.calls > 0 ? d.content.trim() !== "" : d.content !== ""));
  }

  private startCall(): void {
    this.call = { start: this.done, index: this.calls, argsSent: 0, dead: false, dropped: false };
  }

  /** sends what is new of the current call; whether the call is over (read on) */
  private readCall(out: ReplyDelta[], final: boolean): boolean {
    const c = this.call!;
    const body = this.text.slice(c.start);
    const s = scanCall(body);
    if (!c.id && !c.dead && !c.dropped && s.name !== undefined) {
      if (this.known.has(s.name) && !this.parallel && this.calls >= 1) c.dropped = true;
      else if (this.known.has(s.name)) {
        c.id = `call_${randomUUID().replaceAll("-", "").slice(0, 24)}`;
        this.calls++;
        out.push({ call: { index: c.index, id: c.id, type: "function", function: { name: s.name, arguments: "" } } });
      } else c.dead = true;
    }
    if (c.id && s.argsStart !== undefined) {
      const upTo = s.argsEnd ?? body.length;
      if (upTo > s.argsStart + c.argsSent) {
        out.push({ call: { index: c.index, function: { arguments: body.slice(s.argsStart + c.argsSent, upTo) } } });
        c.argsSent = upTo - s.argsStart;
      }
    }
    if (s.end === undefined && !final) return false;
    // not a call after all: its text, marker included, is content (as parseToolCalls leaves it)
    if (!c.dropped && (c.dead || !c.id)) out.push({ content: (this.marker && c.index === this.calls ? this.marker : "") + (s.end === undefined ? body : body.slice(0, s.end)) });
    this.done = s.end === undefined ? this.text.length : c.start + s.end;
    this.call = undefined;
    // after a dead call its closer is text too
    this.inCalls = this.format !== "json" && (c.id !== undefined || c.dropped);
    return true;
  }
}
