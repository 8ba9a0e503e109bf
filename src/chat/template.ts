import { Callable, Float, Interpreter, checkFiltersAndTests, RenderLimitError, TemplateRuntimeError, TemplateSyntaxError, fromJS, jinjaGlobals, num, parse, pyRange, str, tokenize, type Stmt, type Value } from "./jinja/index.js";
import { checkTemplateTokens, checkTreeDepth } from "./template-check.js";

/**
 * One part of a message's content given as a list, as OpenAI's API and Hugging Face's multimodal
 * messages write it: `{type: "text", text}`, or another type (image, audio...) that a template may
 * write a placeholder for; the template gets the parts as given, as transformers passes them.
 */
export interface ChatContentPart {
  readonly type: "text" | (string & {});
  readonly text?: string;
  readonly [field: string]: unknown;
}

export interface ChatMessage {
  role: "system" | "user" | "assistant" | (string & {});
  content: string;
  /** an assistant turn's tool calls (arguments an object or the JSON string: ChatFormatter gives a template the form it takes) */
  tool_calls?: readonly { readonly id?: string; readonly type: "function"; readonly function: { readonly name: string; readonly arguments: unknown } }[];
  /** a tool turn: which call it answers */
  tool_call_id?: string;
  /** a tool turn: the function's name; another turn: the participant's (OpenAI's `name`), for templates that write it */
  name?: string;
  /** an assistant turn's reasoning, apart from its content (templates that keep it write it back: Qwen3's after the last user turn) */
  reasoning_content?: string;
  /** the same reasoning under the name gpt-oss's and LFM2's templates read */
  thinking?: string;
}

/**
 * A message as the library's chat entry points take it: content is its text or a list of parts
 * (templates test `message.content is string` and iterate them; transformers passes them as given)
 */
export type ChatMessageInput = Omit<ChatMessage, "content"> & { content: string | readonly ChatContentPart[] };

/** a message as a template receives it: an assistant turn that only calls tools may have null content, as clients send it */
export type TemplateMessage = ChatMessageInput | (Omit<ChatMessage, "content"> & { readonly content: null });

export interface RenderOptions {
  /** end with the header that starts the assistant's reply (default true) */
  addGenerationPrompt?: boolean;
  /** the special-token strings templates refer to */
  bosToken?: string;
  eosToken?: string;
  unkToken?: string;
  padToken?: string;
  /** more template variables (tools, enable_thinking, date_string, ...) */
  variables?: Record<string, unknown>;
}

export interface TemplateLimits {
  /** longest template source accepted, in characters */
  maxSourceChars: number;
  /** wall-clock budget for one render */
  maxRenderMs: number;
  /** longest string any expression may produce (bounds the output and runaway concatenation) */
  maxOutputChars: number;
  /** most elements one range() may produce */
  maxRange: number;
  /** most elements all range() calls of one render may produce together (a loop nested in a loop calls it again and again) */
  maxRangeTotal?: number;
  /** longest list any expression may produce (bounds `a + a` doubling, split, list filters) */
  maxItems?: number;
  /** deepest nesting of blocks, of brackets, and of the parse tree (the parser and the interpreter recurse once per level) */
  maxDepth?: number;
}

export const DEFAULT_LIMITS: Required<TemplateLimits> = {
  maxSourceChars: 256 * 1024, maxRenderMs: 2000, maxOutputChars: 4 * 1024 * 1024, maxRange: 100_000, maxRangeTotal: 20_000_000, maxItems: 100_000, maxDepth: 256,
};

/** what a template may write around each message (its role header, separators, a tool call's wrapping) beyond maxOutputChars */
const PER_MESSAGE_CHARS = 256;

export class ChatTemplateError extends Error {
  override name = "ChatTemplateError";
}

/** raise_exception(message) called by the template (a runtime error, so that it is placed at its line) */
class TemplateRaised extends TemplateRuntimeError {}

const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];

/** Python's strftime for the codes chat templates use (Llama 3.1+ put today's date in the system prompt). */
export function strftime(date: Date, format: string): string {
  const pad = (n: number) => String(n).padStart(2, "0");
  return format.replace(/%[YmdbBHMS%]/g, (c) => {
    switch (c) {
      case "%Y": return String(date.getFullYear());
      case "%m": return pad(date.getMonth() + 1);
      case "%d": return pad(date.getDate());
      case "%b": return MONTHS[date.getMonth()]!.slice(0, 3);
      case "%B": return MONTHS[date.getMonth()]!;
      case "%H": return pad(date.getHours());
      case "%M": return pad(date.getMinutes());
      case "%S": return pad(date.getSeconds());
      default: return "%";
    }
  });
}

/** a part of messages[i].content must be {type: string}, with a string text when its type is "text" */
function checkPart(parts: readonly unknown[], i: number, j: number): void {
  const p = parts[j] as { type?: unknown; text?: unknown } | null;
  if (typeof p !== "object" || p === null || Array.isArray(p) || typeof p.type !== "string") {
    throw new TypeError(`messages[${i}].content[${j}]: expected a part {type: string, ...}, got ${p === null ? "null" : Array.isArray(p) ? "an array" : typeof p}`);
  }
  if (p.type === "text" && typeof p.text !== "string") throw new TypeError(`messages[${i}].content[${j}]: a part of type "text" needs text: string`);
}

/**
 * A message's content as one text, for what reads it outside the template (a text-only model's
 * prompt, normalization, continuing it): a string as given, text parts joined as the OpenAI API
 * joins them (with nothing between); a part of another type is refused, naming the message and
 * the part, since this library's models read text only.
 */
export function contentText(content: string | readonly ChatContentPart[], i: number): string {
  if (typeof content === "string") return content;
  return content.map((p, j) => {
    checkPart(content, i, j);
    // a reasoning block is not content's text (a template writes it apart)
    if (p.type === "thinking" && textField(p)) return "";
    if (p.type !== "text") throw new TypeError(`messages[${i}].content[${j}]: a part of type ${JSON.stringify(p.type)}: this model reads text only ({type: "text", text} parts)`);
    return p.text!;
  }).join("");
}

/**
 * The field holding a part's text: `text` of a text part, `thinking` of a reasoning block
 * ({type: "thinking", thinking}, how Ministral 3's template takes a turn's reasoning); none for
 * other parts
 */
function textField(p: ChatContentPart | null | undefined): "text" | "thinking" | undefined {
  if (p?.type === "text" && typeof p.text === "string") return "text";
  if (p?.type === "thinking" && typeof p["thinking"] === "string") return "thinking";
  return undefined;
}

/** the content with each text's (a text part's, a reasoning block's, or the string) replaced by `f` of it and its index among the texts */
export function mapContentText(content: string | readonly ChatContentPart[], f: (text: string, k: number) => string): string | ChatContentPart[] {
  if (typeof content === "string") return f(content, 0);
  let k = 0;
  return content.map((p) => {
    const field = textField(p);
    return field ? { ...p, [field]: f(p[field] as string, k++) } : p;
  });
}

/** the texts of the content, in order: the string, or each text part's and reasoning block's */
export function contentTexts(content: string | readonly ChatContentPart[]): string[] {
  if (typeof content === "string") return [content];
  return content.flatMap((p) => {
    const field = textField(p);
    return field ? [p[field] as string] : [];
  });
}

/**
 * A model's chat template, parsed once (jinja/lexer.ts, jinja/parser.ts), rendered as jinja2
 * renders it (jinja/interpreter.ts) under size and time limits. `where` names the template's
 * origin in errors (e.g. "tokenizer_config.json: chat_template").
 */
export class ChatTemplate {
  private readonly program!: Stmt[];
  private readonly limits: Required<TemplateLimits>;

  constructor(readonly source: string, readonly where: string, limits: TemplateLimits = DEFAULT_LIMITS) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
    if (source.length > this.limits.maxSourceChars) {
      throw new ChatTemplateError(`${where}: the template has ${source.length} characters, more than the ${limits.maxSourceChars} allowed`);
    }
    const fail = (message: string): never => { throw new ChatTemplateError(`${where}: the template does not parse: ${message}`); };
    try {
      const tokens = tokenize(source, this.limits.maxDepth);
      checkTemplateTokens(tokens, this.limits.maxDepth, fail);
      this.program = parse(tokens, this.limits.maxDepth);
      checkTreeDepth(this.program, this.limits.maxDepth, fail);
      // jinja2 refuses an unknown filter or test when it compiles the template, not when it renders it (after the depth check: it recurses)
      checkFiltersAndTests(this.program);
    } catch (e) {
      if (e instanceof TemplateSyntaxError) fail(e.message);
      throw e;
    }
  }

  render(messages: readonly TemplateMessage[], options: RenderOptions = {}): string {
    messages.forEach((m, i) => {
      if (typeof m?.role !== "string" || (typeof m.content !== "string" && !Array.isArray(m.content) && !(m.content === null && m.tool_calls))) {
        throw new TypeError(`messages[${i}]: expected {role: string, content: string or a list of parts {type, ...}}`);
      }
      if (Array.isArray(m.content)) m.content.forEach((_, j) => checkPart(m.content as readonly unknown[], i, j));
    });
    const raise = new Callable("raise_exception", ([message = null]) => { throw new TemplateRaised(str(message)); });
    const ranged = { elements: 0 };
    const globals = new Map<string, Value>([
      ...jinjaGlobals(),
      // transformers' globals
      ["raise_exception", raise],
      ["strftime_now", new Callable("strftime_now", ([format = ""]) => strftime(new Date(), str(format)))],
      ["range", new Callable("range", (args) => this.range(args, ranged))],
    ]);
    const vars: Record<string, unknown> = {
      bos_token: options.bosToken ?? "", eos_token: options.eosToken ?? "", unk_token: options.unkToken ?? "", pad_token: options.padToken ?? "",
      // transformers always passes these (None when not given): `tools is not none` is false without tools
      tools: null, documents: null,
      ...options.variables,
      messages,
      add_generation_prompt: options.addGenerationPrompt ?? true,
    };
    // the size bounds stop a runaway template, so they bound what it writes beyond its input: a chat of 131,072 messages is a list
    // of that many items and writes each message's text and header, which is not runaway however far past the bare limits it goes
    let inputChars = 0;
    for (const m of messages) for (const t of m.content === null ? [] : contentTexts(m.content)) inputChars += t.length + PER_MESSAGE_CHARS;
    const interpreter = new Interpreter({
      deadline: performance.now() + this.limits.maxRenderMs,
      maxOutputChars: this.limits.maxOutputChars,
      maxItems: this.limits.maxItems,
      input: { items: messages.length, chars: inputChars },
    });
    try {
      for (const [k, v] of Object.entries(vars)) globals.set(k, fromJS(v));
      return interpreter.render(this.program, globals);
    } catch (e) {
      if (e instanceof ChatTemplateError) throw e;
      if (e instanceof RenderLimitError) throw new ChatTemplateError(`${this.where}: ${e.message}`);
      const at = e instanceof TemplateRuntimeError && e.line !== undefined ? ` (line ${e.line})` : "";
      if (e instanceof TemplateRaised) throw new ChatTemplateError(`${this.where}: the template raised an error: ${e.message}${at}`);
      if (e instanceof TemplateRuntimeError) throw new ChatTemplateError(`${this.where}: rendering failed: ${e.message}${at}`);
      if (e instanceof RangeError) throw new ChatTemplateError(`${this.where}: rendering failed: ${e.message} (runaway recursion?)`);
      throw new ChatTemplateError(`${this.where}: rendering failed: ${(e as Error).message}`);
    }
  }

  /** Python's range(), refusing to build more than maxRange elements in one render (`ranged` counts them) */
  private range(args: Value[], ranged: { elements: number }): Value[] {
    const a = args.map((v) => (typeof v === "number" || typeof v === "boolean" ? Number(v) : v instanceof Float ? num(v) + 0.5 : Number.NaN));
    const [start, stop, step] = a.length === 1 ? [0, a[0]!, 1] : [a[0]!, a[1]!, a[2] ?? 1];
    if (a.length < 1 || a.length > 3 || ![start, stop, step].every(Number.isInteger) || step === 0) throw new ChatTemplateError(`${this.where}: range() needs 1 to 3 integer arguments and a non-zero step`);
    const n = Math.max(0, Math.ceil((stop - start) / step));
    if (n > this.limits.maxRange) throw new ChatTemplateError(`${this.where}: range() of ${n} elements is more than the ${this.limits.maxRange} allowed`);
    ranged.elements += n;
    if (ranged.elements > this.limits.maxRangeTotal) {
      throw new ChatTemplateError(`${this.where}: range() calls produced ${ranged.elements} elements in one render, more than the ${this.limits.maxRangeTotal} allowed (a loop nested in a loop?)`);
    }
    return pyRange(start, stop, step);
  }
}
