import type { ChatMessage, EncodeChatOptions } from "../chat/index.js";
import type { Tokenizer } from "../tokenizer/index.js";
import { invalid, paramPath } from "./errors.js";
import { MAX_JSON_DEPTH, nestedTooDeep, nestsPast } from "./http.js";
import { optBoolean, type Body } from "./params.js";

const ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);

/**
 * `messages`: [{role, content}] where content is a string, null (assistant) or text parts;
 * "developer" is a system message; an assistant's tool_calls, a tool's tool_call_id, a turn's name
 * and its reasoning_content go to the template with it
 */
export function messagesOf(body: Body): ChatMessage[] {
  const v = body.messages;
  if (!Array.isArray(v) || v.length === 0) throw invalid("messages", "'messages' must be a non-empty array of {role, content} objects", v === undefined ? "missing_required_parameter" : "invalid_type");
  return v.map((m: unknown, i): ChatMessage => {
    const where = `messages[${i}]`;
    if (typeof m !== "object" || m === null || Array.isArray(m)) throw invalid(where, `'${where}' must be an object {role, content}`, "invalid_type");
    const { role, content } = m as Body;
    if (typeof role !== "string" || !ROLES.has(role)) throw invalid(`${where}.role`, `'${where}.role' must be one of ${[...ROLES].join(", ")}, got ${JSON.stringify(role)}`);
    const toolCalls = role === "assistant" ? toolCallsOf((m as Body)["tool_calls"], `${where}.tool_calls`) : undefined;
    const out: ChatMessage = { role: role === "developer" ? "system" : role, content: contentOf(content, `${where}.content`, role) };
    if (toolCalls) out.tool_calls = toolCalls;
    // a turn's reasoning goes back to the template as llama.cpp hands it over (a field of the message, when not empty): Qwen3's writes it after the last user turn
    const reasoning = optionalString(m as Body, "reasoning_content", where);
    if (reasoning) out.reasoning_content = reasoning;
    // (OpenAI's participant name on a user, system or assistant turn, a tool turn's function name:
    // the template gets it on every role when not empty, as llama.cpp hands it over
    // (common_chat_msg's name, written back into the template's message when set) and vLLM passes
    // the message's fields; a template that writes names shows who spoke; a name that is not a
    // string is the request's 400)
    const name = optionalString(m as Body, "name", where);
    if (name) out.name = name;
    if (role === "tool") {
      // templates match a result to its call by this id (Command R7B, Mistral)
      const id = optionalString(m as Body, "tool_call_id", where);
      if (id !== undefined) out.tool_call_id = id;
    }
    return out;
  });
}

/** a message's field that is a string when given (null is not given) */
function optionalString(m: Body, field: string, where: string): string | undefined {
  const v = m[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw invalid(`${where}.${field}`, `'${where}.${field}' must be a string, got ${Array.isArray(v) ? "an array" : typeof v}`, "invalid_type");
  return v;
}

/**
 * an assistant message's `tool_calls` for the template, as transformers hands them to one:
 * `{id, type, function: {name, arguments}}`, the id kept (templates match tool results to calls by
 * it: Command R7B numbers them, Mistral's write it and refuse a call without one of 9 characters);
 * arguments (a JSON string in OpenAI's API) parsed into objects, as most templates expect (the
 * formatter hands them back as strings to a template that takes strings)
 */
function toolCallsOf(v: unknown, where: string): ChatMessage["tool_calls"] {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw invalid(where, `'${where}' must be an array of {type: "function", function: {name, arguments}}`, "invalid_type");
  return v.map((c: unknown, j) => {
    const f = (c as Body | null)?.["function"] as Body | undefined;
    if (typeof f !== "object" || f === null || typeof f["name"] !== "string") throw invalid(`${where}[${j}]`, `'${where}[${j}]' must be {type: "function", function: {name, arguments}}`);
    let args: unknown = f["arguments"] ?? {};
    if (typeof args === "string") {
      // the template walks them (tojson): no deeper than the body itself may nest, read before
      // the parse (which of a string nested millions deep would hold the event loop for seconds)
      // (named down to the spot inside the string's JSON where the depth ran out, as a body nested too deep is)
      const deep = nestsPast(args, MAX_JSON_DEPTH);
      if (deep) throw nestedTooDeep(`${where}[${j}].function.arguments`, paramPath(`${where}[${j}].function.arguments`, deep.path));
      try {
        args = JSON.parse(args);
      } catch {
        throw invalid(`${where}[${j}].function.arguments`, `'${where}[${j}].function.arguments' must be a JSON object (as a string)`);
      }
    }
    const id = optionalString(c as Body, "id", `${where}[${j}]`);
    return { ...(id !== undefined ? { id } : {}), type: "function" as const, function: { name: f["name"], arguments: args } };
  });
}

/** content parts whose `text` is the message's text (OpenAI's chat part, the Responses API's two) */
const TEXT_PARTS = new Set(["text", "input_text", "output_text"]);

function contentOf(content: unknown, where: string, role: string): string {
  if (typeof content === "string") return content;
  if (content === null || content === undefined) {
    if (role === "assistant") return "";
    throw invalid(where, `'${where}' is required for a ${role} message`, "missing_required_parameter");
  }
  if (!Array.isArray(content)) throw invalid(where, `'${where}' must be a string or an array of text parts`, "invalid_type");
  return content.map((part: unknown, j) => {
    const p = part as Body | null;
    // the text a part holds: OpenAI's text part, an assistant's refusal part ({type: "refusal",
    // refusal}: a client sending back an earlier reply), and the Responses API's input_text and
    // output_text, as vLLM reads them all as text (refused, a conversation replayed as OpenAI's
    // client holds it was a 400)
    const key = p === null || typeof p !== "object" ? undefined : p.type === "refusal" ? "refusal" : TEXT_PARTS.has(p.type as string) ? "text" : undefined;
    const text = key === undefined ? undefined : p![key];
    if (typeof text !== "string") {
      throw invalid(`${where}[${j}]`, `'${where}[${j}]' must be {type: "text", text: string} (or an assistant's {type: "refusal", refusal: string}): this model reads text only${p && typeof p.type === "string" ? ` (got a part of type ${JSON.stringify(p.type)}${key ? ` without its '${key}' string` : ""})` : ""}`);
    }
    return text;
    // joined by a line break, as llama-server (common_chat_msg's concatenation of typed text) and
    // vLLM (a template taking string content) join text parts before the template sees them
  }).join("\n");
}

/**
 * One prompt of a text completion: a string, token ids, or llama-server's mix of the two in one
 * list (`[12, 34, "text", 56]`: the ids as given, each text tokenized in its place)
 */
export type PromptInput = string | (number | string)[];

/** one prompt of a request and the field that holds it (`prompt`, `input[2]`, `prompt[1].prompt_string`), which a fault found in it later names */
export interface GivenPrompt {
  readonly prompt: PromptInput;
  readonly where: string;
}

/** `prompt` of a text completion, checked by promptsIn */
export function promptsOf(body: Body, vocabSize: number): PromptInput[] {
  return promptsIn(body.prompt, "prompt", vocabSize).map((p) => p.prompt);
}

/**
 * The prompts a request gives in its field `param` (a completion's `prompt`, an embedding's
 * `input` or `content`), read as llama-server's tokenize_input_prompts reads them for every route:
 * a string, strings, token ids, or arrays of token ids (OpenAI's four forms), token ids and
 * strings in one list as one prompt, an object {prompt_string} (alone, or in a list), and a list
 * of prompts holding strings, id lists, mixed lists and such objects side by side (a list holding
 * an id at its top level is one prompt). A fault is a 400 naming the field it lies in.
 */
export function promptsIn(v: unknown, param: string, vocabSize: number): GivenPrompt[] {
  if (typeof v === "string") return [{ prompt: v, where: param }];
  if (isObject(v)) return [promptObject(v, param, vocabSize)];
  const forms = "a string, an array of strings, an array of token ids or an array of arrays of token ids (llama-server's lists of token ids and strings mixed, and its {\"prompt_string\": ...} objects, too)";
  if (!Array.isArray(v) || v.length === 0) throw invalid(param, `'${param}' must be ${forms}, got ${kindOf(v)}`, v === undefined ? "missing_required_parameter" : "invalid_type");
  // (a list of strings alone is several prompts; one with an id among them is one prompt)
  if (v.some((p) => typeof p === "number")) return [{ prompt: idsAndTexts(v, param, vocabSize), where: param }];
  return v.map((p: unknown, i): GivenPrompt => {
    const where = `${param}[${i}]`;
    if (typeof p === "string") return { prompt: p, where };
    if (isObject(p)) return promptObject(p, where, vocabSize);
    if (Array.isArray(p) && p.length === 0) throw invalid(where, `${where} is an empty array: token ids must hold at least one token`);
    if (Array.isArray(p) && p.some((t) => typeof t === "number")) return { prompt: idsAndTexts(p, where, vocabSize), where };
    throw invalid(where, `'${where}' must be a string, an array of token ids (strings may stand among them) or a {"prompt_string": ...} object, got ${kindOf(p)}`, "invalid_type");
  });
}

/** a value as a message quotes it: its JSON, cut after 40 characters (a request's megabyte of it stays out of the answer and the log) */
function shortJson(v: unknown): string {
  const json = JSON.stringify(v) ?? String(v);
  return json.length > 40 ? `${json.slice(0, 40)}...` : json;
}

/** what a JSON value is, for a message saying what was expected instead */
export function kindOf(v: unknown): string {
  if (v === undefined) return "none";
  if (v === null) return "null";
  if (Array.isArray(v)) return v.length === 0 ? "an empty array" : "an array holding other values";
  return typeof v === "object" ? "an object" : typeof v;
}

function isObject(v: unknown): v is Body {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** a list of token ids and texts as one prompt, each id in the vocabulary (a fault named by its index: `prompt[3]`) */
export function idsAndTexts(a: readonly unknown[], where: string, vocabSize: number): (number | string)[] {
  a.forEach((t, i) => {
    if (typeof t !== "string" && (typeof t !== "number" || !Number.isInteger(t) || t < 0 || t >= vocabSize)) throw invalid(where, `${where}[${i}] is ${shortJson(t)}: token ids are integers in [0, ${vocabSize})`);
  });
  return a as (number | string)[];
}

/**
 * llama-server's prompt object: its `prompt_string`, a string or a list of token ids and strings
 * (which llama-server reads as tokenize_mixed does: one prompt). A `multimodal_data` key is
 * refused whatever it holds, an empty list too, as llama-server refuses the key on a model without
 * a multimodal projector: this server reads text only, and a prompt read without its images would
 * be answered as if they had not been sent
 */
function promptObject(o: Body, where: string, vocabSize: number): GivenPrompt {
  if (Object.hasOwn(o, "multimodal_data")) {
    throw invalid(`${where}.multimodal_data`, `'${where}.multimodal_data' cannot be read: this server reads text only, and this model has no multimodal support (send the prompt_string alone, without the key)`);
  }
  const text = o["prompt_string"], at = `${where}.prompt_string`;
  if (typeof text === "string") return { prompt: text, where: at };
  if (Array.isArray(text) && text.length > 0 && text.every((t) => typeof t === "string" || typeof t === "number")) return { prompt: idsAndTexts(text, at, vocabSize), where: at };
  throw invalid(at, `'${at}' must be a string or a non-empty array of token ids and strings, got ${kindOf(text)}`, text === undefined ? "missing_required_parameter" : "invalid_type");
}

/**
 * A prompt's tokens, as llama-server's tokenize_mixed reads a list of ids and texts: the ids as
 * given, each text tokenized in its place, with the special tokens (BOS; `how.addSpecial`, a
 * prompt's default) for a text that begins the list only. Tokenized a slice at a time: a
 * multi-megabyte prompt must not stop /health and the other requests.
 */
export async function promptTokens(tokenizer: Tokenizer, prompt: PromptInput, how: { addSpecial: boolean; parseSpecial?: boolean } = { addSpecial: true }): Promise<number[]> {
  const options = (addSpecialTokens: boolean) => ({ addSpecialTokens, ...(how.parseSpecial === undefined ? {} : { parseSpecial: how.parseSpecial }) });
  if (typeof prompt === "string") return tokenizer.encodeAsync(prompt, options(how.addSpecial));
  const out: number[] = [];
  for (const [i, p] of prompt.entries()) {
    if (typeof p === "number") out.push(p);
    else out.push(...(await tokenizer.encodeAsync(p, options(how.addSpecial && i === 0))));
  }
  return out;
}

/** template variables a request sets by its own parameters, which chat_template_kwargs may not replace */
const SET_BY_THE_REQUEST: Readonly<Record<string, string>> = {
  messages: "give the conversation in 'messages'",
  tools: "give them in 'tools'",
  add_generation_prompt: "give it as the request's 'add_generation_prompt'",
};

/**
 * Why `kwargs` cannot be a chat template's extra variables (as llama-server's and vLLM's
 * chat_template_kwargs): it must be an object; the conversation, the tools and
 * add_generation_prompt come from the request itself (llama.cpp lets them be overwritten, vLLM
 * lets tools and add_generation_prompt be: here they stay what the request's own parameters and
 * the tool-call grammar were made from); `enable_thinking` is a boolean, as llama-server checks
 * it, and so is `preserve_reasoning` (llama.cpp ignores another value). `where` names the value
 * in the message. Undefined when it can be.
 */
export function templateKwargsProblem(kwargs: unknown, where: string): { param: string; message: string } | undefined {
  if (typeof kwargs !== "object" || kwargs === null || Array.isArray(kwargs)) {
    return { param: where, message: `'${where}' must be an object of template variables, got ${Array.isArray(kwargs) ? "an array" : kwargs === null ? "null" : typeof kwargs}` };
  }
  for (const [key, value] of Object.entries(kwargs)) {
    const how = Object.hasOwn(SET_BY_THE_REQUEST, key) ? SET_BY_THE_REQUEST[key] : undefined;
    if (how) return { param: `${where}.${key}`, message: `'${where}.${key}' cannot be set: the template's '${key}' comes from the request (${how})` };
    if ((key === "enable_thinking" || key === "preserve_reasoning") && typeof value !== "boolean") return { param: `${where}.${key}`, message: `'${where}.${key}' must be true or false, got ${JSON.stringify(value)}` };
  }
  return undefined;
}

/**
 * A chat request's extra template variables: the server's defaults (tsllm serve
 * --chat-template-kwargs), then the request's `chat_template_kwargs`, then its top-level
 * `enable_thinking` (a shorthand some OpenAI-compatible APIs take; Qwen3's templates read it),
 * which must agree with chat_template_kwargs.enable_thinking when both are given, then OpenAI's
 * `reasoning_effort` as llama-server takes it: "none" turns the thinking off (enable_thinking
 * false, so it contradicts a true one), another value is the template's `reasoning_effort`
 * (gpt-oss's and DeepSeek V4's templates read it).
 */
export function templateKwargsOf(body: Body, defaults: Readonly<Record<string, unknown>>): Record<string, unknown> {
  return withSpelledVariables(requestKwargs(body, defaults));
}

/**
 * The variables llama.cpp derives from two of them for the templates that spell them their own
 * way (common/jinja/caps.cpp): `preserve_reasoning` sets preserve_thinking, and clear_thinking,
 * truncate_history_thinking and drop_thinking to its opposite (GLM 4.7's, Nemotron 3 Nano's and
 * DeepSeek V4's templates keep or drop the history's reasoning by them); `reasoning_effort` is
 * also `reasoning_strength`. Set before the given variables, which override them, as llama.cpp
 * sets them before the template's inputs.
 */
function withSpelledVariables(kwargs: Record<string, unknown>): Record<string, unknown> {
  const derived: Record<string, unknown> = {};
  const keep = kwargs["preserve_reasoning"];
  if (typeof keep === "boolean") Object.assign(derived, { preserve_thinking: keep, clear_thinking: !keep, truncate_history_thinking: !keep, drop_thinking: !keep });
  const effort = kwargs["reasoning_effort"];
  if (typeof effort === "string" && effort !== "") derived["reasoning_strength"] = effort;
  return { ...derived, ...kwargs };
}

function requestKwargs(body: Body, defaults: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const given = body["chat_template_kwargs"] ?? {};
  const problem = templateKwargsProblem(given, "chat_template_kwargs");
  if (problem) throw invalid(problem.param, problem.message, typeof given === "object" && !Array.isArray(given) ? "invalid_value" : "invalid_type");
  const kwargs: Record<string, unknown> = { ...defaults, ...(given as Body) };
  const thinking = body["enable_thinking"];
  if (thinking !== undefined && thinking !== null) {
    if (typeof thinking !== "boolean") throw invalid("enable_thinking", `'enable_thinking' must be true or false, got ${JSON.stringify(thinking)}`, "invalid_type");
    const inKwargs = (given as Body)["enable_thinking"];
    if (inKwargs !== undefined && inKwargs !== thinking) throw invalid("enable_thinking", `'enable_thinking' (${thinking}) contradicts 'chat_template_kwargs.enable_thinking' (${String(inKwargs)})`);
    kwargs["enable_thinking"] = thinking;
  }
  const effort = body["reasoning_effort"];
  if (effort === undefined || effort === null) return kwargs;
  if (typeof effort !== "string" || effort === "") throw invalid("reasoning_effort", `'reasoning_effort' must be a string such as "low", "medium", "high" or "none", got ${JSON.stringify(effort)}`, "invalid_type");
  if (effort !== "none") return { ...kwargs, reasoning_effort: effort };
  const on = thinking ?? (given as Body)["enable_thinking"];
  if (on === true) throw invalid("reasoning_effort", `'reasoning_effort' "none" turns the thinking off: it contradicts ${thinking === true ? "'enable_thinking'" : "'chat_template_kwargs.enable_thinking'"} true`);
  const { reasoning_effort: _, ...rest } = kwargs;
  return { ...rest, enable_thinking: false };
}

/**
 * How a chat prompt ends, as llama-server ends it: with the assistant's header
 * (`add_generation_prompt`, default true), or inside the last message (`continue_final_message`),
 * which a last message of the assistant's asks for by itself (llama-server's assistant prefill: the
 * reply goes on from its text), unless continue_final_message is false. Refused as llama-server
 * refuses them: both true, two assistant messages at the end of a prefill, continuing a message's
 * tool calls.
 */
export function promptEndOf(body: Body, messages: readonly ChatMessage[]): Required<Pick<EncodeChatOptions, "addGenerationPrompt" | "continueFinalMessage">> {
  const header = optBoolean(body, "add_generation_prompt");
  let continued = optBoolean(body, "continue_final_message");
  const last = messages.length - 1;
  if (continued === undefined && messages[last]?.role === "assistant") {
    if (messages[last - 1]?.role === "assistant") throw invalid("messages", `'messages' ends with two assistant messages: the last one is continued (an assistant prefill), so it must follow another role's`);
    if (header === true) throw invalid("add_generation_prompt", "'add_generation_prompt' true with a last message of the assistant's: that message is continued (an assistant prefill); send continue_final_message false to start a new reply after it");
    continued = true;
  }
  if (!continued) return { addGenerationPrompt: header ?? true, continueFinalMessage: false };
  if (header === true) throw invalid("add_generation_prompt", "'add_generation_prompt' and 'continue_final_message' cannot both be true: the prompt ends with a new reply's header or inside the last message");
  if (messages[last]?.tool_calls?.length) throw invalid("continue_final_message", `'continue_final_message': messages[${last}] holds tool calls, which cannot be continued`);
  return { addGenerationPrompt: false, continueFinalMessage: true };
}
