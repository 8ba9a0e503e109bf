import { continuesReasoning, strftime, type ChatContentPart, type ChatMessage, type ChatMessageInput } from "../chat/index.js";
import type { GenerateOptions } from "../generation/index.js";
import { anyJsonGbnf, gbnfAlternatives, gbnfLiteral, GrammarError, strictSchemaProblem, type JsonSchema } from "../sampling/constraints/index.js";
import { invalid, schemaFaultParam } from "./errors.js";
import { responseFormatParam, type Body } from "./params.js";
import { schemaGrammar, TextCache } from "./schema-grammar.js";
import { CALL_MARKERS, callIdOf, LLAMA3_OPENING, PARAMETER_END, parseReply, PYTHON_TAG, type ParsedReply, type ReplySyntax, type ToolFormat } from "./reply-parser.js";

export { ReplyStream, type ReplyDelta, type ReplySyntax, type ToolFormat } from "./reply-parser.js";

/**
 * OpenAI-style tool calling: `tools` go to the chat template as its `tools` variable (as
 * transformers' apply_chat_template(tools=...) does), the model's reply is read for calls in its
 * template family's format (reply-parser.ts), and `tool_choice` "required" or a named function
 * constrains the reply to calls (a grammar over the functions' parameter schemas, in the format).
 * The family is found in the template's text, as llama.cpp's common/chat.cpp finds it; a template
 * that knows no tool calls gets llama.cpp's generic format (a JSON object the grammar always
 * shapes). Templates that think (<think>, Command R7B's <|START_THINKING|>, Ministral 3's [THINK]) have their reasoning
 * answered apart as reasoning_content, as llama-server's default --reasoning-format deepseek does.
 */
export interface ToolFunction {
  readonly name: string;
  readonly description?: string;
  readonly parameters: JsonSchema;
  /** OpenAI's function.strict: the arguments must match the parameters, under tool_choice "auto" too */
  readonly strict?: boolean;
}

export type ToolChoice = "none" | "auto" | "required" | { readonly name: string };

export interface Tools {
  readonly functions: readonly ToolFunction[];
  readonly choice: ToolChoice;
  /** parallel_tool_calls: whether a reply may hold more than one call (OpenAI's default: true; never with a named function) */
  readonly parallel: boolean;
  /** the tools as the request gave them: what the template sees */
  readonly raw: readonly unknown[];
}

export interface ToolCall {
  readonly id: string;
  readonly type: "function";
  readonly function: { readonly name: string; readonly arguments: string };
}

/** `tools` and `tool_choice` of a chat request (undefined without tools) */
export function toolsOf(body: Body): Tools | undefined {
  const v = body["tools"];
  if (v === undefined || v === null || (Array.isArray(v) && v.length === 0)) {
    // (null is no choice, as with tools: clients that write every field send it, and llama-server reads it as unset)
    const choice = body["tool_choice"] ?? "auto";
    if (choice !== "none" && choice !== "auto") throw invalid("tool_choice", "'tool_choice' needs 'tools'");
    parallelOf(body);
    return undefined;
  }
  if (!Array.isArray(v)) throw invalid("tools", "'tools' must be an array of {type: \"function\", function: {name, description, parameters}}", "invalid_type");
  const functions = v.map((t: unknown, i): ToolFunction => {
    const where = `tools[${i}]`;
    const f = (t as Body | null)?.["function"] as Body | undefined;
    if (typeof t !== "object" || t === null || (t as Body)["type"] !== "function" || typeof f !== "object" || f === null) throw invalid(where, `'${where}' must be {type: "function", function: {name, ...}}`);
    if (typeof f["name"] !== "string" || !/^[A-Za-z0-9_-]{1,64}$/.test(f["name"])) throw invalid(`${where}.function.name`, `'${where}.function.name' must be 1-64 letters, digits, _ or -`);
    // (OpenAI: "omitting parameters defines a function with an empty parameter list": its arguments are {}, no keys the model makes up)
    const parameters = f["parameters"] ?? { type: "object", properties: {}, additionalProperties: false };
    if (typeof parameters !== "object" || parameters === null || Array.isArray(parameters)) throw invalid(`${where}.function.parameters`, `'${where}.function.parameters' must be a JSON Schema object`);
    const strict = f["strict"];
    if (strict !== undefined && strict !== null && typeof strict !== "boolean") throw invalid(`${where}.function.strict`, `'${where}.function.strict' must be a boolean, got ${JSON.stringify(strict)}`, "invalid_type");
    if (strict === true) strictParameters(parameters as Body, f["name"], where);
    return { name: f["name"], ...(typeof f["description"] === "string" ? { description: f["description"] } : {}), parameters: parameters as JsonSchema, ...(strict === true ? { strict } : {}) };
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
  // a named function is called once, whatever parallel_tool_calls says: OpenAI's forced function is "exactly one" call (vLLM's too)
  const parallel = parallelOf(body);
  return { functions, choice, parallel: typeof choice === "object" ? false : parallel, raw: v };
}

/**
 * A strict function's parameters as OpenAI's strict mode takes them (its "Supported schemas"): an
 * object at the top; every object closed (additionalProperties false) with every property
 * required; no oneOf (read here as anyOf, which admits a value two alternatives both take). And
 * a schema the grammar can enforce. Else a 400 naming the field and the schema path, as OpenAI's
 * ("invalid_function_parameters").
 */
function strictParameters(parameters: Body, name: string, where: string): void {
  const field = `${where}.function.parameters`;
  // (param: the spot in the schema the fault's message names, as OpenAI names a nested parameter)
  const refuse = (fault: string, prefix = "") => invalid(schemaFaultParam(field, fault), `Invalid schema for function '${name}' ('${field}', strict: true): ${prefix}${fault}`, "invalid_function_parameters");
  const problem = strictSchemaProblem(parameters);
  if (problem !== undefined) throw refuse(problem);
  try {
    schemaGrammar(parameters as JsonSchema);
  } catch (e) {
    if (e instanceof GrammarError) throw refuse(e.message, "cannot be enforced: ");
    throw e;
  }
}

/**
 * `tools` with parallel_tool_calls, when the request leaves it out, as llama-server defaults it: to
 * whether the template writes a turn of several calls (`writesParallel`, probed only then), so that
 * a reply's calls can go back through it (Llama 3.x's templates refuse two calls in a turn). The
 * generic format's calls are the server's own JSON, not the template's: OpenAI's default (true) stays.
 */
export function withTemplateParallel(body: Body, tools: Tools, templateSource: string, writesParallel: () => boolean): Tools {
  const given = body["parallel_tool_calls"];
  if ((given !== undefined && given !== null) || !tools.parallel || toolFormatOf(templateSource) === "generic") return tools;
  return writesParallel() ? tools : { ...tools, parallel: false };
}

function parallelOf(body: Body): boolean {
  const p = body["parallel_tool_calls"];
  if (p !== undefined && p !== null && typeof p !== "boolean") throw invalid("parallel_tool_calls", `'parallel_tool_calls' must be a boolean, got ${JSON.stringify(p)}`, "invalid_type");
  return p !== false;
}

/**
 * The call format of a chat template, told by the text only that family's templates hold, in
 * llama.cpp's order (common_chat_templates_apply_jinja): DeepSeek R1's call markers, Command R7B's
 * action after thinking, Hermes' <tool_call>, Functionary v3.2's ">>>all", Firefunction v2's
 * " functools[", Functionary v3.1's <function= in a Llama 3 template, Llama 3.x's ipython role,
 * Mistral's [TOOL_CALLS]; else the generic JSON format. Hermes' <tool_call> with <function= and
 * <parameter= is Qwen3-Coder's XML (also Qwen3.5's, Nemotron Nano 3's); [TOOL_CALLS] with [ARGS]
 * is the Mistral form of Devstral, Ministral 3 and Mistral Small 3.2 (NAME[ARGS]{...}).
 */
export function toolFormatOf(templateSource: string): ToolFormat {
  const has = (s: string) => templateSource.includes(s);
  if (has("<｜tool▁calls▁begin｜>")) return "deepseek-r1";
  if (has("<|END_THINKING|><|START_ACTION|>")) return "command-r7b";
  if (has("<tool_call>") && has("<function=") && has("<parameter=")) return "qwen3-coder";
  if (has("<tool_call>")) return "hermes";
  if (has(">>>all")) return "functionary-v3.2";
  if (has(" functools[")) return "firefunction-v2";
  if (has("<|start_header_id|>") && has("<function=")) return "functionary-v3.1";
  if (has("<|start_header_id|>ipython<|end_header_id|>")) return "llama3";
  if (has("[TOOL_CALLS]") && has("[ARGS]")) return "mistral-args";
  if (has("[TOOL_CALLS]")) return "mistral";
  return "generic";
}

/**
 * Llama 3.1's built-in tools among the request's (llama.cpp's set: a search tool taking exactly
 * {query}, a code tool taking exactly {code}), for templates that write <|python_tag|> calls: the
 * template lists them (builtin_tools) and the model calls them as `name.call(query="...")`.
 */
function builtinToolsOf(templateSource: string, tools: Tools): Set<string> {
  const out = new Set<string>();
  if (toolFormatOf(templateSource) !== "llama3" || !templateSource.includes("<|python_tag|>")) return out;
  for (const f of tools.functions) {
    const want = ["wolfram_alpha", "web_search", "brave_search"].includes(f.name) ? "query" : ["python", "code_interpreter"].includes(f.name) ? "code" : undefined;
    const p = f.parameters as { properties?: Record<string, unknown>; required?: unknown };
    if (want && p.properties && Object.keys(p.properties).join() === want && Array.isArray(p.required) && p.required.includes(want)) out.add(f.name);
  }
  return out;
}

/**
 * The variables a template of the family needs besides messages: the tools; Firefunction v2's
 * `functions` (the tools as indented JSON) and `datetime`, which its template needs even without
 * tools; Llama 3.1's `builtin_tools`; `enable_thinking` true for a template that thinks, as
 * llama-server passes it to every template that supports reasoning (its copies of DeepSeek R1's
 * and QwQ's templates close the reasoning in the prompt when it is not true); the server's
 * --chat-template-kwargs and a request's chat_template_kwargs may set it false.
 */
export function templateVariablesOf(templateSource: string, tools: Tools | undefined, now = new Date()): Record<string, unknown> {
  const vars: Record<string, unknown> = tools ? { tools: tools.raw } : {};
  if (thinkingOf(templateSource, "")) vars["enable_thinking"] = true;
  if (toolFormatOf(templateSource) === "firefunction-v2") {
    vars["functions"] = tools ? JSON.stringify(tools.raw, null, 2) : "";
    vars["datetime"] = strftime(now, "%b %d %Y %H:%M:%S GMT");
  }
  const builtins = tools ? builtinToolsOf(templateSource, tools) : new Set<string>();
  if (builtins.size > 0) vars["builtin_tools"] = [...builtins];
  return vars;
}

/**
 * Ministral 3's template (Ministral / Magistral 3), told as llama.cpp's
 * common_chat_try_specialized_template tells it: Mistral's [ARGS] calls and [SYSTEM_PROMPT]
 * without Mistral Small 3.2's [CALL_ID]
 */
function isMinistral3(templateSource: string): boolean {
  return ["[SYSTEM_PROMPT]", "[TOOL_CALLS]", "[ARGS]"].every((s) => templateSource.includes(s)) && !templateSource.includes("[CALL_ID]");
}

/**
 * The messages as the template is to see them: a template without tool calls of its own (the
 * generic format) is told in a system message how to answer; a turn's reasoning_content is also
 * `thinking` for a template that reads only that; Ministral 3's gets system and assistant turns as
 * llama.cpp builds them for it: content blocks, the reasoning's first, then the content's. A
 * continued last message there ends as llama.cpp ends its prompt: "[THINK]" and the reasoning,
 * then, continuing the content, "[/THINK]" and the content (a reasoning block even when empty; none
 * after it when only the reasoning goes on).
 */
export function messagesForTemplate(given: readonly ChatMessage[], templateSource: string, tools: Tools | undefined, continued = false): ChatMessageInput[] {
  // a template that reads a turn's reasoning as `thinking`, never as reasoning_content (gpt-oss's, LFM2's), gets it so, as llama.cpp copies it for them
  const readsThinking = /\.thinking\b/.test(templateSource) && !templateSource.includes("reasoning_content");
  let messages: readonly ChatMessageInput[] = readsThinking ? given.map((m) => (m.reasoning_content === undefined ? m : { ...m, thinking: m.reasoning_content })) : given;
  // (it reads a turn's reasoning only as a content block {type: "thinking", thinking})
  if (isMinistral3(templateSource)) {
    messages = messages.map((m, i) => {
      if (m.role !== "system" && m.role !== "assistant") return m;
      const { reasoning_content, ...rest } = m;
      const last = continued && i === messages.length - 1;
      if (last && continuesReasoning(m)) return { ...rest, content: [{ type: "thinking", thinking: reasoning_content }] };
      const blocks: ChatContentPart[] = reasoning_content === undefined && !last ? [] : [{ type: "thinking", thinking: reasoning_content ?? "" }];
      return { ...rest, content: typeof m.content === "string" ? [...blocks, { type: "text", text: m.content }] : [...blocks, ...m.content] };
    });
  }
  if (!tools || toolFormatOf(templateSource) !== "generic") return [...messages];
  const calls = tools.parallel ? "{\"tool_calls\": [{\"name\": ..., \"arguments\": {...}}, ...]}" : "{\"tool_call\": {\"name\": ..., \"arguments\": {...}}}";
  const how = `Answer with a single JSON object: ${calls} to call tools, or {"response": ...} to answer the user.`;
  if (messages[0]?.role === "system") return [{ ...messages[0], content: `${messages[0].content}\n\n${how}` }, ...messages.slice(1)];
  return [{ role: "system", content: how }, ...messages];
}

export type ReasoningFormat = "deepseek" | "none";

/**
 * `reasoning_format` (llama-server's per-request field): "none" leaves reasoning in the content;
 * "deepseek" (and "auto", the default) answers it as reasoning_content; so does "deepseek-legacy",
 * which llama-server still takes (its reasoning_in_content flag is set but no parser reads it)
 */
export function reasoningFormatOf(body: Body): ReasoningFormat {
  const v = body["reasoning_format"];
  if (v === undefined || v === null || v === "auto" || v === "deepseek" || v === "deepseek-legacy") return "deepseek";
  if (v === "none") return "none";
  throw invalid("reasoning_format", `'reasoning_format' must be "auto", "deepseek", "deepseek-legacy" or "none", got ${JSON.stringify(v)}`);
}

/**
 * The reasoning markers of a template that thinks, and whether the prompt (its text as rendered)
 * leaves the reply inside them: DeepSeek R1's generation prompt ends with "<think>\n", an
 * assistant prefill (`prefill`: the continued message's content) may open the reasoning and not
 * close it, and a continued message of reasoning only goes on inside it (`inReasoning`).
 */
export function thinkingOf(templateSource: string, prompt: string, prefill = "", inReasoning = false): ReplySyntax["thinking"] {
  // (Ministral / Magistral 3 reason between [THINK] and [/THINK], as llama.cpp's common_chat_params_init_ministral_3 reads them)
  for (const [open, close] of [["<think>", "</think>"], ["<|START_THINKING|>", "<|END_THINKING|>"], ["[THINK]", "[/THINK]"]] as const) {
    if (!templateSource.includes(open)) continue;
    // Qwen3.5's and Nemotron 3 Nano's reasoning also ends where a call begins (llama.cpp's qwen3_coder format: until </think> or <tool_call>)
    const endsBefore = open === "<think>" && toolFormatOf(templateSource) === "qwen3-coder" ? { endsBefore: ["<tool_call>"] } : {};
    const forcedOpen = inReasoning || prompt.trimEnd().endsWith(open) || prefill.lastIndexOf(open) > prefill.lastIndexOf(close);
    return { open, close, forcedOpen, ...endsBefore };
  }
  return undefined;
}

/**
 * what to read in a chat reply: the calls of the request's tools (unless tool_choice is "none"),
 * reasoning, unless reasoning_format is "none", and with a JSON response_format (`formatted`) the
 * JSON out of its fence, for a model that fences it
 */
export function replySyntaxOf(templateSource: string, tools: Tools | undefined, thinking: ReplySyntax["thinking"], reasoning: ReasoningFormat, formatted = false): ReplySyntax | undefined {
  const calls = tools && tools.choice !== "none"
    ? {
      format: toolFormatOf(templateSource), names: new Set(tools.functions.map((f) => f.name)), parallel: tools.parallel, builtins: builtinToolsOf(templateSource, tools),
      stringParameters: new Map(tools.functions.map((f) => [f.name, new Set(parametersOf(f).filter(([, schema]) => isStringSchema(schema, f.parameters)).map(([name]) => name))])),
    }
    : undefined;
  const think = reasoning === "none" ? undefined : thinking;
  const jsonFence = formatted && fencesJson(templateSource);
  if (!calls && !think && !jsonFence) return undefined;
  return { ...(calls ? { calls } : {}), ...(think ? { thinking: think } : {}), ...(jsonFence ? { jsonFence } : {}) };
}

const lit = (s: string) => JSON.stringify(s);

/** a function's parameters: [name, schema] of its properties, and whether each is required */
function parametersOf(f: ToolFunction): [string, JsonSchema, boolean][] {
  const p = f.parameters as { properties?: Record<string, JsonSchema>; required?: unknown };
  const required = Array.isArray(p.required) ? p.required : [];
  return Object.entries(p.properties ?? {}).map(([name, schema]) => [name, schema, required.includes(name)]);
}

/** formats that only strings take (llama.cpp's list) */
const STRING_FORMATS = new Set(["date", "time", "date-time", "uri", "email", "hostname", "ipv4", "ipv6", "uuid"]);

/**
 * Whether a string may satisfy the schema, through any of its branches (llama.cpp's
 * resolves_to_string): type string or a type list holding it (["string", "null"]), a string
 * const or enum value, anyOf/oneOf with such a branch, allOf of such, string keywords (pattern,
 * minLength, maxLength, a string format), a local $ref to one. Qwen3-Coder writes such a
 * parameter's value as raw text, and it is read (and constrained) as text.
 */
function isStringSchema(schema: JsonSchema, root: JsonSchema, depth = 0): boolean {
  if (typeof schema !== "object" || schema === null || depth > 16) return false;
  const s = schema as Record<string, unknown>;
  const any = (alts: unknown) => Array.isArray(alts) && alts.some((a) => isStringSchema(a as JsonSchema, root, depth + 1));
  if (typeof s["$ref"] === "string") {
    if (!s["$ref"].startsWith("#/")) return false;
    let target: unknown = root;
    for (const part of s["$ref"].slice(2).split("/")) target = (target as Record<string, unknown> | undefined)?.[part.replaceAll("~1", "/").replaceAll("~0", "~")];
    return isStringSchema(target as JsonSchema, root, depth + 1);
  }
  const type = s["type"];
  if (type === "string" || (Array.isArray(type) && type.includes("string"))) return true;
  if (any(s["oneOf"]) || any(s["anyOf"])) return true;
  if (Array.isArray(s["allOf"]) && s["allOf"].length > 0 && s["allOf"].every((a) => isStringSchema(a as JsonSchema, root, depth + 1))) return true;
  if (typeof s["const"] === "string") return true;
  if (Array.isArray(s["enum"]) && s["enum"].some((v) => typeof v === "string")) return true;
  if ("pattern" in s || "minLength" in s || "maxLength" in s) return true;
  return typeof s["format"] === "string" && (STRING_FORMATS.has(s["format"]) || s["format"].startsWith("uuid"));
}

/** required parameters up to this many may come in any order (2^n rules); past it, in the schema's order (llama.cpp's COMMON_CHAT_MAX_PERMUTE) */
const MAX_PERMUTED = 6;

/**
 * Qwen3-Coder's XML call of `f`, admitting what the parser reads: its required parameters in any
 * order (the model does not always keep the schema's, llama.cpp's grammar permutes them too), its
 * optional ones anywhere among them; a string's value raw text up to its `</parameter>` (code
 * holds "</" and "<"), any other value JSON under its schema.
 */
function xmlCallGbnf(f: ToolFunction): string {
  const rules: string[] = [excludingGbnf("xml-text", [PARAMETER_END])];
  const params = parametersOf(f).map(([name, schema, required], k) => {
    let value = "xml-text";
    if (!isStringSchema(schema, f.parameters)) {
      value = `xml-json-${k}`;
      rules.push(gbnfAlternatives([schemaGbnf(schema)]).replace(/^root ::= g0-root\n/, "").replaceAll("g0-", `p${k}-`) + `${value} ::= p${k}-root\n`);
    }
    rules.push(`xml-param-${k} ::= ${lit(`<parameter=${name}>\n`)} ${value} ${lit(`\n${PARAMETER_END}\n`)}\n`);
    return { rule: `xml-param-${k}`, required };
  });
  const required = params.filter((p) => p.required).map((p) => p.rule);
  const optional = params.filter((p) => !p.required).map((p) => p.rule);
  const opt = optional.length > 0 ? `(${optional.join(" | ")})*` : "";
  let body: string;
  if (required.length <= MAX_PERMUTED) {
    // xml-args-M: the parameters still to come are the required ones in the bits of M
    for (let m = (1 << required.length) - 1; m >= 0; m--) {
      const next = required.map((r, i) => (m & (1 << i) ? `${r} xml-args-${m & ~(1 << i)}` : "")).filter((x) => x);
      const parts = [opt, next.length > 0 ? `(${next.join(" | ")})` : ""].filter((x) => x);
      rules.push(`xml-args-${m} ::= ${parts.length > 0 ? parts.join(" ") : '""'}\n`);
    }
    body = `xml-args-${(1 << required.length) - 1}`;
  } else body = [opt, ...required.flatMap((r) => [r, opt])].join(" ");
  return `${rules.join("")}root ::= ${lit(`<function=${f.name}>\n`)} ${body} ${lit("</function>")}\n`;
}

/** a GBNF class of any character but `chars` */
function noneOf(chars: readonly string[]): string {
  const escaped: Record<string, string> = { "]": "\\]", "\\": "\\\\", "^": "\\^", "-": "\\-", "\t": "\\t", "\n": "\\n", "\r": "\\r" };
  return `[^${chars.map((c) => escaped[c] ?? c).join("")}]`;
}

/**
 * GBNF rule `name`: any text that holds none of `words` (its states: the longest ending of the text
 * that begins one of them; a character that would complete one has no way on)
 */
function excludingGbnf(name: string, words: readonly string[]): string {
  const chars = [...new Set(words.join(""))];
  const prefixes = [...new Set(words.flatMap((w) => [...Array(w.length).keys()].map((k) => w.slice(0, k))))];
  /** the state after `p` then c: undefined when the text then ends with a whole word */
  const step = (p: string, c: string): number | undefined => {
    const t = p + c;
    if (words.some((w) => t.endsWith(w))) return undefined;
    let best = 0;
    prefixes.forEach((q, k) => { if (q.length > prefixes[best]!.length && t.endsWith(q)) best = k; });
    return best;
  };
  const klass = noneOf(chars);
  const rules = prefixes.map((p, k) => {
    const ways = chars.flatMap((c) => {
      const n = step(p, c);
      return n === undefined ? [] : [`${lit(c)} ${name}-${n}`];
    });
    return `${name}-${k} ::= (${[...ways, `${klass} ${name}-0`].join(" | ")})?\n`;
  });
  return `${name} ::= ${name}-0\n${rules.join("")}`;
}

/** how text leaves a word it was keeping to, on any character but `except`: the GBNF alternatives */
type Leave = (except: readonly string[]) => string;

/**
 * GBNF rule `name`: any text that, past the JSON whitespace it begins with (which Llama 3.x's parser
 * skips), opens with none of `words` (its states: the proper prefixes of the words, each going on
 * with a character that keeps to a word, or leaving them all with any other character, into rule
 * `${name}-rest`: any text, unless `leave` says otherwise); the one word `onward.word` goes on into
 * rule `onward.rule` instead
 */
function notOpeningGbnf(name: string, words: readonly string[], onward?: { word: string; rule: string }, leave?: Leave): string {
  const prefixes = [...new Set(words.flatMap((w) => [...Array(w.length).keys()].map((k) => w.slice(0, k))))];
  const rules = prefixes.map((p, k) => {
    const next = [...new Set(words.filter((w) => w.length > p.length && w.startsWith(p)).map((w) => w[p.length]!))];
    // a character that completes a word has no way on (but onward's)
    const ways = next.flatMap((c) => {
      if (p + c === onward?.word) return [`${lit(c)} ${onward.rule}`];
      return words.includes(p + c) ? [] : [`${lit(c)} ${name}-${prefixes.indexOf(p + c)}`];
    });
    // at the start whitespace is what the parser skips: the text's first other character decides
    const except = p === "" ? [...next, ...JSON_WS] : next;
    return `${name}-${k} ::= (${[...ways, leave ? leave(except) : `${noneOf(except)} ${name}-rest`].join(" | ")})?\n`;
  });
  return `${name} ::= [ \\t\\n\\r]* ${name}-0\n${leave ? "" : `${name}-rest ::= .*\n`}${rules.join("")}`;
}

const JSON_WS = [" ", "\t", "\n", "\r"];

/**
 * GBNF rules `${name}-0`...: text that leaves `piece` (its " ": any JSON whitespace) for any text
 * (rule `rest`), or keeps to it into rule `then` (null: the piece completed has no way on)
 */
function pieceGbnf(name: string, piece: string, rest: string, then: string | null, leave: Leave = (except) => `${noneOf(except)} ${rest}`): string {
  const steps: { c: string; ws: boolean }[] = [];
  let ws = false;
  for (const c of piece) {
    if (c === " ") ws = true;
    else { steps.push({ c, ws }); ws = false; }
  }
  return steps.map(({ c, ws }, k) => {
    const next = k + 1 < steps.length ? `${name}-${k + 1}` : then;
    const ways = [...(ws ? [`[ \\t\\n\\r] ${name}-${k}`] : []), ...(next ? [`${lit(c)} ${next}`] : []), leave(ws ? [c, ...JSON_WS] : [c])];
    return `${name}-${k} ::= (${ways.join(" | ")})?\n`;
  }).join("");
}

/**
 * GBNF rule `name`: Llama 3.x text, which past its leading whitespace opens with none of `words`
 * and no call (LLAMA3_OPENING, llama.cpp's lazy grammar's trigger): `{"a": 1}` and `{x}` are text,
 * `{"name": "` and `{"type": "function", "name": "` open calls. With `nowhere`, text that holds
 * that word nowhere either (a word trigger fires anywhere).
 */
function llama3TextGbnf(name: string, words: readonly string[], nowhere?: string): string {
  const { start, type, name: key } = LLAMA3_OPENING;
  const rest = `${name}-rest`, n = key[0]!, t = type[0]!;
  let leave: Leave = (except) => `${noneOf(except)} ${rest}`;
  let restGbnf = `${rest} ::= .*\n`;
  if (nowhere) {
    // the rest holds no `nowhere`; text leaves the opening words on a character that may begin it
    // (none of the words or the opening's pieces holds its first character past their start, so
    // no longer beginning of it can end there): then the rest goes on from that beginning
    const first = nowhere[0]!;
    leave = (except) => `${noneOf([...except, first])} ${rest}${except.includes(first) ? "" : ` | ${lit(first)} ${name}-x-1`}`;
    restGbnf = `${rest} ::= ${name}-x\n${excludingGbnf(`${name}-x`, [nowhere])}`;
  }
  return `${notOpeningGbnf(name, [start[0]!, ...words], { word: start[0]!, rule: `${name}-o-0` }, leave)}${restGbnf}${pieceGbnf(`${name}-o`, start.slice(1), rest, `${name}-key`, leave)}`
    + `${name}-key ::= (${lit(n)} ${name}-n-0 | ${lit(t)} ${name}-t-0 | ${leave([n, t])})?\n`
    + `${name}-key2 ::= (${lit(n)} ${name}-n-0 | ${leave([n])})?\n`
    + pieceGbnf(`${name}-n`, key.slice(1), rest, null, leave) + pieceGbnf(`${name}-t`, type.slice(1), rest, `${name}-key2`, leave);
}

/**
 * The grammar's rules renamed apart (gbnfAlternatives prefixes every name, references to its root
 * included), its start rule `g0-root`: to be wrapped by a new root
 */
function inner(g: string): string {
  return rulesApart([g]);
}

/** the grammars' rules renamed apart, as gbnfAlternatives names them (the `i`th's start rule `g${i}-root`), without a root */
function rulesApart(grammars: readonly string[]): string {
  const g = gbnfAlternatives(grammars);
  return g.slice(g.indexOf("\n") + 1);
}

/** a function's arguments grammar wrapped as `before args after` */
function wrappedArgs(f: ToolFunction, before: string, after: string): string {
  return `${inner(schemaGbnf(f.parameters))}root ::= ${lit(before)} g0-root${after ? ` ${lit(after)}` : ""}\n`;
}

function schemaGbnf(schema: JsonSchema): string {
  try {
    return schemaGrammar(schema);
  } catch (e) {
    throw invalid("tools", `'tools': a function's parameters cannot be enforced: ${(e as Error).message}`);
  }
}

/** the `i`th slot of a schema of call objects (slottedGbnf): a value no call writes */
const slot = (i: number): JsonSchema => ({ const: `\u0000slot-${i}` });

/**
 * The GBNF of a schema of call objects holding slots (slot(i): a function's arguments, the
 * generic format's response): the schema compiled with the slots in place, then slot i's rule
 * made the root of `slots[i]`'s own grammar. Each is compiled alone, as a document of its own:
 * once (schemaGrammar remembers it: a strict function's parameters were compiled when the tools
 * were read, to refuse what no grammar holds), and with its `$ref`s pointing into its own `$defs`
 * (inside the call object they pointed at the call object's root, which holds none).
 */
function slottedGbnf(schema: JsonSchema, slots: readonly JsonSchema[]): string {
  const all = gbnfAlternatives([schemaGbnf(schema), ...slots.map(schemaGbnf)]);
  // (gbnfAlternatives names the call objects' rules g0-..., slot i's g{i+1}-...; its own root is dropped)
  const lines = all.slice(all.indexOf("\n") + 1).split("\n");
  slots.forEach((_, i) => {
    // a const compiles to its literal then JSON whitespace, as a grammar's root ends
    const rule = ` ::= (${gbnfLiteral(JSON.stringify((slot(i) as { const: string }).const))}) g0-space`;
    const at = lines.findIndex((l) => l.startsWith("g0-") && l.endsWith(rule));
    if (at < 0) throw new Error(`the call objects' grammar has no rule for slot ${i}`);
    lines[at] = `${lines[at]!.slice(0, -rule.length)} ::= g${i + 1}-root`;
  });
  return `${lines.join("\n")}root ::= g0-root\n`;
}

/** `one` once, or (parallel) one or more times with `sep` between; each time inside `each`, all of them inside `around` */
function repeated(one: string, parallel: boolean, sep: string, each: readonly [string, string] = ["", ""], around: readonly [string, string] = ["", ""]): string {
  const wrap = ([before, after]: readonly [string, string], x: string) => `${before ? `${lit(before)} ` : ""}${x}${after ? ` ${lit(after)}` : ""}`;
  const element = wrap(each, "g0-root");
  return `${inner(one)}root ::= ${wrap(around, parallel ? `${element} (${sep} ${element})*` : element)}\n`;
}

/** the GBNF of each of the built-in tools' calls (`<|python_tag|>name.call(key=value)`) among `functions` */
function builtinCallsGbnf(functions: readonly ToolFunction[], builtins: ReadonlySet<string>): string[] {
  return functions.filter((f) => builtins.has(f.name)).map((f) => {
    const key = Object.keys((f.parameters as { properties: object }).properties)[0]!;
    const value = schemaGbnf((f.parameters as { properties: Record<string, JsonSchema> }).properties[key]!);
    return `${inner(value)}root ::= ${lit(`${PYTHON_TAG}${f.name}.call(${key}=`)} g0-root ")"\n`;
  });
}

/**
 * A GBNF grammar that admits a reply of calls of the allowed functions in the format — one, or
 * (with parallel_tool_calls) one or more, as llama.cpp's grammars do. For the generic format it
 * also admits a {"response": ...} answer unless the choice requires a call (`response`: the
 * answer's schema, a string when not given). Reasoning may come first: after a prompt that opened it,
 * up to its close; else between its markers at the reply's start.
 */
export function toolCallGrammar(tools: Tools, format: ToolFormat, options: { response?: JsonSchema; thinking?: ReplySyntax["thinking"]; templateSource?: string } = {}): string {
  const allowed = typeof tools.choice === "object" ? tools.functions.filter((f) => f.name === (tools.choice as { name: string }).name) : tools.functions;
  /** the GBNF of a schema of call objects, each function's arguments in its slot (then the `more` slots' schemas) */
  const callsGbnf = (schema: JsonSchema, more: readonly JsonSchema[] = []) => slottedGbnf(schema, [...allowed.map((f) => f.parameters), ...more]);
  /** call objects, with the model's own id where its template writes one (Command R7B's first, Mistral's last) */
  const objects = (keys: { name: string; args: string; firstId?: JsonSchema; lastId?: JsonSchema }): JsonSchema => ({
    anyOf: allowed.map((f, i) => ({
      type: "object",
      properties: { ...(keys.firstId ? { tool_call_id: keys.firstId } : {}), [keys.name]: { const: f.name }, [keys.args]: slot(i), ...(keys.lastId ? { id: keys.lastId } : {}) },
      required: [...(keys.firstId ? ["tool_call_id"] : []), keys.name, keys.args, ...(keys.lastId ? ["id"] : [])],
    })),
  });
  const nameArgs = objects({ name: "name", args: "arguments" });
  const alternatives = (before: (f: ToolFunction) => string, after: string) => gbnfAlternatives(allowed.map((f) => wrappedArgs(f, before(f), after)));
  const p = tools.parallel;
  /** a JSON list of calls (one without parallel_tool_calls) after `before` */
  const list = (items: JsonSchema, before: string, after = "") => {
    const g = callsGbnf({ type: "array", items, minItems: 1, ...(p ? {} : { maxItems: 1 }) });
    return `${inner(g)}root ::= ${before} g0-root${after ? ` ${lit(after)}` : ""}\n`;
  };
  let g: string;
  switch (format) {
    case "hermes":
      g = repeated(callsGbnf(nameArgs), p, "\"\\n\"", ["<tool_call>\n", "\n</tool_call>"]);
      break;
    case "qwen3-coder":
      g = repeated(gbnfAlternatives(allowed.map(xmlCallGbnf)), p, "\"\\n\"", ["<tool_call>\n", "\n</tool_call>"]);
      break;
    case "mistral-args": {
      // Mistral Small 3.2's template writes the call's 9-character id between its name and arguments
      const id = options.templateSource?.includes("[CALL_ID]") ? ` "[CALL_ID]" ${"[a-zA-Z0-9] ".repeat(9)}` : " ";
      g = repeated(gbnfAlternatives(allowed.map((f) => `${inner(schemaGbnf(f.parameters))}root ::= ${lit(`[TOOL_CALLS]${f.name}`)}${id}"[ARGS]" g0-root\n`)), p, "\"\"");
      break;
    }
    case "mistral":
      // Mistral's templates write a 9-character id with each call (and refuse others)
      g = list(objects({ name: "name", args: "arguments", lastId: { type: "string", pattern: "^[a-zA-Z0-9]{9}$" } }), `${lit("[TOOL_CALLS]")} " "?`);
      break;
    case "firefunction-v2":
      g = list(nameArgs, `" "? ${lit("functools")}`);
      break;
    case "command-r7b":
      g = list(objects({ name: "tool_name", args: "parameters", firstId: { type: "string", pattern: "^[0-9]{1,10}$" } }), lit("<|START_ACTION|>"), "<|END_ACTION|>");
      break;
    case "llama3": {
      const calls = [callsGbnf(objects({ name: "name", args: "parameters" })), ...builtinCallsGbnf(allowed, builtinToolsOf(options.templateSource ?? "", tools))];
      g = repeated(calls.length === 1 ? calls[0]! : gbnfAlternatives(calls), p, "\";\" \" \"?");
      break;
    }
    case "functionary-v3.1":
      g = repeated(alternatives((f) => `<function=${f.name}>`, "</function>"), p, "\"\\n\"?");
      break;
    case "functionary-v3.2":
      g = repeated(alternatives((f) => `${f.name}\n`, ""), p, "\">>>\"");
      break;
    case "deepseek-r1":
      g = repeated(alternatives((f) => `<｜tool▁call▁begin｜>function<｜tool▁sep｜>${f.name}\n\`\`\`json\n`, "\n```<｜tool▁call▁end｜>"), p, "\"\\n\"", ["", ""], ["<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"]);
      break;
    case "generic": {
      const call = { anyOf: allowed.map((f, i) => ({ type: "object", properties: { name: { const: f.name }, arguments: slot(i) }, required: ["name", "arguments"] })) };
      const calls: JsonSchema = p
        ? { type: "object", properties: { tool_calls: { type: "array", items: call, minItems: 1 } }, required: ["tool_calls"] }
        : { type: "object", properties: { tool_call: call }, required: ["tool_call"] };
      // (the response_format's schema a slot too: its $refs point into its own $defs)
      const answer: JsonSchema = { type: "object", properties: { response: options.response ? slot(allowed.length) : { type: "string" } }, required: ["response"] };
      g = tools.choice === "auto" ? callsGbnf({ anyOf: [calls, answer] }, options.response ? [options.response] : []) : callsGbnf(calls);
      break;
    }
  }
  return reasoningFirst(g, options.thinking);
}

/**
 * Under tool_choice "auto" with a strict function (whose arguments must match its parameters, as
 * OpenAI's strict mode guarantees): text, or calls as a required choice writes them, where the
 * format's parser would read them (llama.cpp's lazy grammar, calls constrained from their trigger
 * on, written as one grammar). Formats with call markers: text that holds none of them, then calls.
 * Llama 3.x, whose calls are JSON at the reply's start (llama.cpp's trigger: a reply opening with
 * {"name"...): calls, or text that opens with no call (LLAMA3_OPENING), <|python_tag|> or built-in
 * `name.call(` — `{"a": 1}` is text.
 * Functionary v3.2, whose prompt ends with ">>>": calls (`name\n{...}`), or "all\n" then text up
 * to a ">>>" that opens calls (llama.cpp's functionary v3.2 parser: content_and_tools). The other
 * functions keep their parameters' schemas where a grammar can hold them (else any object: only
 * strict ones must compile).
 */
function strictAutoGrammar(tools: Tools, format: ToolFormat, templateSource: string): string {
  const enforceable = (schema: JsonSchema): boolean => {
    try {
      schemaGrammar(schema);
      return true;
    } catch {
      return false;
    }
  };
  const functions = tools.functions.map((f) => (f.strict || enforceable(f.parameters) ? f : { ...f, parameters: { type: "object" } }));
  const required = toolCallGrammar({ ...tools, functions, choice: "required" }, format, { templateSource });
  const calls = inner(required);
  const markers = CALL_MARKERS[format];
  if (markers) return `${calls}${excludingGbnf("free-text", markers)}root ::= free-text g0-root?\n`;
  if (format === "llama3") {
    const builtins = builtinToolsOf(templateSource, { ...tools, functions });
    const opening = [PYTHON_TAG, ...[...builtins].map((name) => `${name}.call(`)];
    if (builtins.size === 0) return `${calls}${llama3TextGbnf("free-text", opening)}root ::= g0-root | free-text\n`;
    // with built-in tools llama.cpp's lazy grammar also fires on the word <|python_tag|> anywhere,
    // and holds what follows to its call grammar, where only a built-in call opens with the tag
    // (the parser reads such calls after text): text holds no tag, and from one on come built-in
    // calls (g1-root: one, or with parallel_tool_calls one after another), nothing after them,
    // as llama.cpp's grammar ends there
    const after = repeated(gbnfAlternatives(builtinCallsGbnf(functions, builtins)), tools.parallel, "\"\"");
    return `${rulesApart([required, after])}${llama3TextGbnf("free-text", opening, PYTHON_TAG)}root ::= g0-root | free-text g1-root?\n`;
  }
  if (format === "functionary-v3.2") {
    // text before calls ends in no ">" (its ">>>" would be read first, one character early)
    const text = `${lit("all\n")} free-text`, before = `${lit("all\n")} (free-text [^>])? ${lit(">>>")}`;
    return `${calls}${excludingGbnf("free-text", [">>>"])}root ::= g0-root | ${text} | ${before} g0-root\n`;
  }
  // (the generic format's grammar holds calls or an answer already: not asked here)
  throw new Error(`no strict auto grammar for the format ${format}`);
}

/**
 * The grammar `g` after the reasoning of a template that thinks, as llama.cpp's grammars admit it
 * before calls and a response_format alike: a prompt that opened it goes on to its close, else it
 * may open the reply. `g` itself without one.
 */
export function reasoningFirst(g: string, thinking: ReplySyntax["thinking"]): string {
  const t = thinking;
  if (!t) return g;
  const reasoning = `think-text ${lit(t.close)} [ \\n]*`;
  return `${inner(g)}${excludingGbnf("think-text", [t.close, ...(t.endsBefore ?? [])])}root ::= ${t.forcedOpen ? reasoning : `(${lit(t.open)} ${reasoning})?`} g0-root\n`;
}

/**
 * Whether the template's model writes a response_format's JSON inside a ```json fence: Ministral
 * and Magistral 3, told as llama.cpp tells them (common_chat_params_init_ministral_3: Mistral's
 * [ARGS] calls and [SYSTEM_PROMPT] without Mistral Small 3.2's [CALL_ID]); its grammar wants the
 * fence and its parser answers the JSON without it, "Ministral wants to emit json surrounded by
 * code fences".
 */
export function fencesJson(templateSource: string): boolean {
  return isMinistral3(templateSource);
}

/** the GBNF of a JSON response_format, inside a ```json fence for a model that fences it (a schema the grammar cannot express is the parameter's 400) */
function responseFormatGbnf(constraint: ReplyConstraint, templateSource: string): string {
  let g: string;
  try {
    g = constraint.jsonSchema !== undefined ? schemaGrammar(constraint.jsonSchema) : anyJsonGbnf(constraint.json);
  } catch (e) {
    if (e instanceof GrammarError) {
      const param = responseFormatParam(constraint);
      throw invalid(schemaFaultParam(param, e.message), `'${param}': ${e.message}`);
    }
    throw e;
  }
  if (!fencesJson(templateSource)) return g;
  // (the space between is llama.cpp's JSON grammar's: none, a space, or a line or two and an indent)
  return `${inner(g)}fence-space ::= ("" | " " | "\n" "\n"? [ \t]{0,20})\nroot ::= ${lit("```json")} fence-space g0-root fence-space ${lit("```")}\n`;
}

/** what a request gave to shape its reply: a JSON response_format, or llama-server's grammar */
export type ReplyConstraint = Pick<GenerateOptions, "json" | "jsonSchema" | "grammar">;

/**
 * The grammar that shapes a chat reply in place of the request's constraint, and the parameter it
 * stands for (what a grammar failing mid-generation names), or undefined where the constraint
 * stays as given. With tools: a required call (never with a response_format: the reply must be a
 * call); under "auto", a call or a text reply in the response_format (as OpenAI's: the tools stay
 * callable), and the generic format's JSON always. A template that thinks reasons first, before
 * calls and a response_format alike, as llama.cpp's grammars let it (its prompt may have opened
 * the reasoning: the format applied from the reply's start would be written inside it), unless
 * reasoning_format is "none": llama.cpp's parsers then read no reasoning, and the grammars it makes
 * from them admit none (the format or the call from the reply's first token). A request's own
 * grammar is its own: applied as given, and refused with tools (as llama-server refuses it).
 */
export function replyGrammar(constraint: ReplyConstraint, tools: Tools | undefined, templateSource: string, thinking: ReplySyntax["thinking"], reasoning: ReasoningFormat = "deepseek"): ShapedReply | undefined {
  // (all that the grammar is made of: an agent sends the same tools and format with every turn, and
  // writing the grammar of many functions takes milliseconds; a refused request is refused anew)
  const key = JSON.stringify([constraint.jsonSchema, constraint.json, constraint.grammar, tools && [tools.functions, tools.choice, tools.parallel], templateSource, thinking, reasoning]);
  return shapedReplies.get(key, () => {
    const shaped = shapeReply(constraint, tools, templateSource, thinking, reasoning);
    // the reasoning's markers too where the grammar writes them (Qwen3's <think> is an added token), as llama.cpp's formats preserve them
    const think = reasoning === "none" ? undefined : thinking;
    const preserved = [...((tools && PRESERVED_TOKENS[toolFormatOf(templateSource)]) || []), ...(think ? [think.open, think.close] : [])];
    return shaped && preserved.length > 0 ? { ...shaped, preserved } : shaped;
  });
}

/**
 * The markers each format's grammar writes as literals, which a vocabulary may hold as one special
 * token (Llama 3.1's <|python_tag|>, Mistral's [TOOL_CALLS] are control tokens): the grammar takes
 * that token where it writes the marker, and the reply keeps its text for the parser, as
 * llama.cpp's chat formats list them as preserved tokens. Formats without: none of their markers
 * is a special token anywhere.
 */
const PRESERVED_TOKENS: Partial<Record<ToolFormat, readonly string[]>> = {
  hermes: ["<tool_call>", "</tool_call>"],
  "qwen3-coder": ["<tool_call>", "</tool_call>"],
  mistral: ["[TOOL_CALLS]"],
  "mistral-args": ["[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"],
  "firefunction-v2": [" functools["],
  "command-r7b": ["<|START_ACTION|>", "<|END_ACTION|>"],
  llama3: [PYTHON_TAG],
  "functionary-v3.1": [PYTHON_TAG],
  "deepseek-r1": ["<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"],
};

/** the reply's grammar, the parameter it stands for, and the special tokens it may take as its markers (its format's, its reasoning's) */
type ShapedReply = { readonly grammar: string; readonly param: string; readonly preserved?: readonly string[] };
const shapedReplies = new TextCache<ShapedReply | undefined>((v) => v?.grammar.length ?? 0, 64);

function shapeReply(constraint: ReplyConstraint, tools: Tools | undefined, templateSource: string, thinking: ReplySyntax["thinking"], reasoning: ReasoningFormat): ShapedReply | undefined {
  // reasoning_format "none": the grammars admit no reasoning, as llama.cpp's parsers (and the grammars made from them) read none then
  const think = reasoning === "none" ? undefined : thinking;
  const formatted = constraint.jsonSchema !== undefined || constraint.json !== undefined;
  if (!tools) return formatted && (think || fencesJson(templateSource)) ? { grammar: reasoningFirst(responseFormatGbnf(constraint, templateSource), think), param: responseFormatParam(constraint) } : undefined;
  if (constraint.grammar !== undefined) {
    throw invalid("grammar", "'grammar' cannot be used with 'tools' (unless tool_choice is \"none\"): it would shape the whole reply, tool calls included. " +
      "To shape a text reply while the tools stay callable, give a JSON 'response_format' instead; to apply the grammar, send tool_choice \"none\"");
  }
  const format = toolFormatOf(templateSource);
  if (tools.choice !== "auto") {
    if (formatted) {
      throw invalid("tool_choice", "a required tool call and a 'response_format' cannot both shape the reply: the reply must be a call, and 'response_format' shapes text replies (with tool_choice \"auto\" the reply is a call or text in the format)");
    }
    return { grammar: toolCallGrammar(tools, format, { thinking: think, templateSource }), param: "tool_choice" };
  }
  const param = formatted ? responseFormatParam(constraint) : "tool_choice";
  const strict = tools.functions.some((f) => f.strict);
  if (format === "generic") {
    // a template without calls of its own answers in JSON, a call or a response (in the response_format when one is given), as llama.cpp's generic format
    const response = constraint.jsonSchema ?? (constraint.json === undefined ? undefined : constraint.json === "object" ? { type: "object" } : {});
    // a response schema the grammar cannot hold is the response_format's fault, not the tools': found apart first
    if (constraint.jsonSchema !== undefined) responseFormatGbnf(constraint, templateSource);
    return { grammar: toolCallGrammar(tools, format, { thinking: think, ...(response ? { response } : {}) }), param };
  }
  if (!formatted) return strict ? { grammar: reasoningFirst(strictAutoGrammar(tools, format, templateSource), think), param: "tools" } : undefined;
  return { grammar: reasoningFirst(gbnfAlternatives([toolCallGrammar(tools, format, { templateSource }), responseFormatGbnf(constraint, templateSource)]), think), param };
}

/** a parsed reply's calls as OpenAI's message carries them, each with the model's id or a new one (of the form the family's template takes back) */
export function toolCallsOf(reply: ParsedReply, syntax: ReplySyntax | undefined): ToolCall[] {
  const ids: string[] = [];
  for (const c of reply.calls) ids.push(callIdOf(c, syntax?.calls?.format, ids));
  return reply.calls.map((c, i) => ({ id: ids[i]!, type: "function", function: { name: c.name, arguments: c.arguments } }));
}

/**
 * the reply read with the syntax (reasoning, text, calls), or all of it text without one; `cut`:
 * max_tokens cut it off, so it is read as partial (ReplyStream.end's `cut`): a call's closing
 * marker or the next call's opening, cut short, is not text
 */
export function readReply(text: string, syntax: ReplySyntax | undefined, cut = false): ParsedReply {
  return syntax ? parseReply(text, syntax, cut) : { reasoning: "", content: text, calls: [] };
}
