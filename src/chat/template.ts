import * as jinja from "@huggingface/jinja";
import { applyFilterLikeJinja2, array, dictGlobal, formatString, functionValue, pyStr, pyType, STATEMENT_TYPES, str, tuplesAsLists, type Value } from "./jinja-compat.js";
import { checkTemplateTokens, checkTreeDepth, type TemplateToken } from "./template-check.js";

/*
 * The parts of @huggingface/jinja used here, typed locally: its .d.ts files import each other
 * without extensions, which NodeNext resolution cannot follow.
 */
type RuntimeValue = Value;
interface JinjaEnvironment { set(name: string, value: unknown): void; variables: Map<string, RuntimeValue> }
/** a parse-tree node as far as the overrides below read it */
interface JinjaNode { type: string; [field: string]: unknown }
interface JinjaInterpreter {
  run(program: unknown): RuntimeValue;
  evaluate(node: unknown, env: unknown): RuntimeValue;
  evaluateBlock(statements: readonly JinjaNode[], env: unknown): RuntimeValue;
  evaluateBinaryExpression(node: JinjaNode, env: unknown): RuntimeValue;
  evaluateFor(node: JinjaNode, env: unknown): RuntimeValue;
  evaluateMemberExpression(node: JinjaNode, env: unknown): RuntimeValue;
  applyFilter(operand: RuntimeValue, filterNode: JinjaNode, env: unknown): RuntimeValue;
}
const Environment = jinja.Environment as unknown as new () => JinjaEnvironment;
const Interpreter = jinja.Interpreter as unknown as new (env: JinjaEnvironment) => JinjaInterpreter;
const tokenize = jinja.tokenize as unknown as (source: string, options: { lstrip_blocks: boolean; trim_blocks: boolean }) => TemplateToken[];
const parse = jinja.parse as unknown as (tokens: readonly TemplateToken[]) => unknown;

export interface ChatMessage {
  role: "system" | "user" | "assistant" | (string & {});
  content: string;
  /** an assistant turn's tool calls (arguments an object or the JSON string: ChatFormatter gives a template the form it takes) */
  tool_calls?: readonly { readonly type: "function"; readonly function: { readonly name: string; readonly arguments: unknown } }[];
  /** a tool turn: which call it answers */
  tool_call_id?: string;
  /** a tool turn: the function's name */
  name?: string;
}

/** a message as a template receives it: an assistant turn that only calls tools may have null content, as clients send it */
export type TemplateMessage = ChatMessage | (Omit<ChatMessage, "content"> & { readonly content: null });

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
  /** deepest nesting of blocks, of brackets, and of the parse tree (the library's parser and interpreter recurse once per level) */
  maxDepth?: number;
}

export const DEFAULT_LIMITS: Required<TemplateLimits> = {
  maxSourceChars: 256 * 1024, maxRenderMs: 2000, maxOutputChars: 4 * 1024 * 1024, maxRange: 100_000, maxRangeTotal: 20_000_000, maxItems: 100_000, maxDepth: 256,
};

export class ChatTemplateError extends Error {
  override name = "ChatTemplateError";
}

/**
 * Evaluates like the library's interpreter, but every node checks the clock (the library has no
 * step or time limit) and the size of the string or list it produced, so a runaway template stops
 * with an error instead of hanging or exhausting memory. A loop whose body evaluates nothing
 * cannot spin unseen: its list comes from range() (a per-render budget) or from an expression
 * evaluated here.
 */
class BoundedInterpreter extends Interpreter {
  private steps = 0;

  constructor(env: JinjaEnvironment, private readonly deadline: number, private readonly limits: Required<TemplateLimits>, private readonly where: string) {
    super(env);
  }

  override evaluate(node: unknown, env: unknown): RuntimeValue {
    if ((node as JinjaNode | undefined)?.type === EVALUATED) return (node as unknown as { value: RuntimeValue }).value;
    this.steps++;
    if (performance.now() > this.deadline) {
      throw new ChatTemplateError(`${this.where}: rendering took too long (stopped after ${this.steps} steps); the template may loop without end`);
    }
    const value = super.evaluate(node, env);
    const v = value?.value;
    if (typeof v === "string" && v.length > this.limits.maxOutputChars) {
      throw new ChatTemplateError(`${this.where}: rendering produced more than ${this.limits.maxOutputChars} characters; the template may be runaway`);
    }
    if (Array.isArray(v) && v.length > this.limits.maxItems) {
      throw new ChatTemplateError(`${this.where}: rendering produced a list of ${v.length} items, more than the ${this.limits.maxItems} allowed; the template may be runaway`);
    }
    return value;
  }

  /*
   * Where the library departs from jinja2 (and so from transformers, whose rendering the models
   * were trained on): test/chat-template-jinja.test.ts compares the two on real templates.
   */

  /** `{{ x }}` writes str(x): None, True, a dict or list as Python writes them, not JSON or "true" */
  override evaluateBlock(statements: readonly JinjaNode[], env: unknown): RuntimeValue {
    let out = "";
    for (const statement of statements) {
      const v = this.evaluate(statement, env);
      if (STATEMENT_TYPES.has(statement.type)) {
        if (v.type !== "NullValue" && v.type !== "UndefinedValue") out += v.toString();
      } else out += pyStr(v);
    }
    return str(out);
  }

  /** `~` joins str() of both sides; `+` joins only two strings (Python's TypeError otherwise, not "[object Map]") */
  override evaluateBinaryExpression(node: JinjaNode, env: unknown): RuntimeValue {
    const op = (node.operator as { value: string }).value;
    if (op !== "~" && op !== "+") return super.evaluateBinaryExpression(node, env);
    const left = this.evaluate(node.left, env), right = this.evaluate(node.right, env);
    if (op === "~") return str(pyStr(left) + pyStr(right));
    const isStr = (v: RuntimeValue) => v.type === "StringValue";
    if (isStr(left) !== isStr(right) && left.type !== "UndefinedValue" && right.type !== "UndefinedValue") {
      throw new Error(isStr(left) ? `can only concatenate str (not "${pyType(right)}") to str` : `unsupported operand type(s) for +: '${pyType(left)}' and '${pyType(right)}'`);
    }
    return super.evaluateBinaryExpression({ ...node, left: evaluated(left), right: evaluated(right) }, env);
  }

  /** a loop over an undefined value loops over nothing (jinja2's Undefined is an empty iterable) */
  override evaluateFor(node: JinjaNode, env: unknown): RuntimeValue {
    const select = (node.iterable as JinjaNode).type === "SelectExpression" ? (node.iterable as JinjaNode) : undefined;
    const iterable = this.evaluate(select ? select.lhs : node.iterable, env);
    const items = evaluated(iterable.type === "UndefinedValue" ? array([]) : (node.loopvar as JinjaNode).type === "TupleLiteral" ? tuplesAsLists(iterable) : iterable);
    return super.evaluateFor({ ...node, iterable: select ? { ...select, lhs: items } : items }, env);
  }

  /** a string's .format(), which the library lacks */
  override evaluateMemberExpression(expr: JinjaNode, env: unknown): RuntimeValue {
    const object = this.evaluate(expr.object, env);
    if (object.type === "StringValue" && !expr.computed && (expr.property as JinjaNode).value === "format") {
      return functionValue((args) => formatString(object.value as string, args));
    }
    return super.evaluateMemberExpression({ ...expr, object: evaluated(object) }, env);
  }

  /** filters on undefined values, |string, |min, |max as jinja2 has them */
  override applyFilter(operand: RuntimeValue, filterNode: JinjaNode, env: unknown): RuntimeValue {
    const call = filterNode.type === "CallExpression";
    const name = call ? (filterNode.callee as JinjaNode).value : filterNode.value;
    const done = typeof name === "string" ? applyFilterLikeJinja2(operand, name, call, (m) => { throw new Error(m); }) : undefined;
    if (done && "value" in done) return done.value;
    return super.applyFilter(done ? done.operand : operand, filterNode, env);
  }
}

/** a node standing for a value already evaluated (so an override can look at operands before the library's own evaluation) */
const EVALUATED = "tsllm:Evaluated";
const evaluated = (value: RuntimeValue): JinjaNode => ({ type: EVALUATED, value });

/** the library's runtime messages that name its own classes, said in the template's terms */
function explainRenderError(message: string): string {
  const call = /^Cannot call something that is not a function: got (\w+?)(?:Value)?$/.exec(message);
  if (call) return `it calls a value that cannot be called (${call[1]!.toLowerCase()}): a name the template never defines, or a macro calling itself (this renderer gives a macro no access to its own name)`;
  const iterate = /^'(\w+?)Value' object is not iterable$/.exec(message);
  if (iterate) return `it loops over or unpacks a value that holds no items (${iterate[1]!.toLowerCase()}): a list, a string or a mapping was expected (a name the template never defines?)`;
  return message;
}

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

/**
 * A model's chat template, parsed once, rendered with @huggingface/jinja under size and time
 * limits. `where` names the template's origin in errors (e.g. "tokenizer_config.json: chat_template").
 */
/**
 * The lexer's "Unexpected end of input" (the template ends inside a {% tag %} or {{ expression }})
 * and "Missing end of comment tag", said in the template's terms: which tag, where it starts.
 */
function explainLexError(source: string, message: string): string {
  const opener = message === "Unexpected end of input" ? lastUnclosed(source, ["{%", "{{"]) : message === "Missing end of comment tag" ? lastUnclosed(source, ["{#"]) : undefined;
  if (!opener) return message;
  const closer = { "{%": "%}", "{{": "}}", "{#": "#}" }[opener.open]!;
  const what = { "{%": "tag", "{{": "expression", "{#": "comment" }[opener.open]!;
  const text = source.slice(opener.at, opener.at + 40).split("\n")[0]!;
  return `unterminated ${what} ${JSON.stringify(text)} (line ${source.slice(0, opener.at).split("\n").length}): no ${closer} follows`;
}

/** the last of these openers with no closer after it, and where it is */
function lastUnclosed(source: string, opens: readonly string[]): { open: string; at: number } | undefined {
  let best: { open: string; at: number } | undefined;
  for (const open of opens) {
    const at = source.lastIndexOf(open);
    const closer = { "{%": "%}", "{{": "}}", "{#": "#}" }[open]!;
    if (at >= 0 && source.indexOf(closer, at + 2) < 0 && (!best || at > best.at)) best = { open, at };
  }
  return best;
}

export class ChatTemplate {
  private readonly program: unknown;
  private readonly limits: Required<TemplateLimits>;

  constructor(readonly source: string, readonly where: string, limits: TemplateLimits = DEFAULT_LIMITS) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
    if (source.length > this.limits.maxSourceChars) {
      throw new ChatTemplateError(`${where}: the template has ${source.length} characters, more than the ${limits.maxSourceChars} allowed`);
    }
    const fail = (message: string): never => { throw new ChatTemplateError(`${where}: the template does not parse: ${message}`); };
    let tokens: TemplateToken[];
    try {
      // the options the library's own Template uses
      tokens = tokenize(source, { lstrip_blocks: true, trim_blocks: true });
    } catch (e) {
      fail(explainLexError(source, (e as Error).message));
    }
    checkTemplateTokens(source, tokens!, this.limits.maxDepth, fail);
    try {
      this.program = parse(tokens!);
    } catch (e) {
      fail(e instanceof RangeError ? `it nests too deeply (${e.message})` : (e as Error).message);
    }
    checkTreeDepth(this.program, this.limits.maxDepth, fail);
  }

  render(messages: readonly TemplateMessage[], options: RenderOptions = {}): string {
    messages.forEach((m, i) => {
      if (typeof m?.role !== "string" || (typeof m.content !== "string" && !(m.content === null && m.tool_calls))) {
        throw new TypeError(`messages[${i}]: expected {role: string, content: string}`);
      }
    });
    const env = new Environment();
    // the globals the library's own render() sets up
    for (const [k, v] of [["true", true], ["false", false], ["none", null], ["True", true], ["False", false], ["None", null]] as const) env.set(k, v);
    env.set("raise_exception", (message: unknown) => { throw new ChatTemplateError(`${this.where}: the template raised an error: ${String(message)}`); });
    const ranged = { elements: 0 };
    env.set("range", (...a: number[]) => this.range(a, ranged));
    env.set("strftime_now", (format: string) => strftime(new Date(), String(format)));
    // jinja2's dict(), which the library lacks
    env.variables.set("dict", functionValue((args) => dictGlobal(args)));
    const vars: Record<string, unknown> = {
      bos_token: options.bosToken ?? "", eos_token: options.eosToken ?? "", unk_token: options.unkToken ?? "", pad_token: options.padToken ?? "",
      // transformers always passes these (None when not given): `tools is not none` is false without tools
      tools: null, documents: null,
      ...options.variables,
      messages: messages.map((m) => ({ ...m })),
      add_generation_prompt: options.addGenerationPrompt ?? true,
    };
    for (const [k, v] of Object.entries(vars)) env.set(k, v);
    const interpreter = new BoundedInterpreter(env, performance.now() + this.limits.maxRenderMs, this.limits, this.where);
    try {
      const out = interpreter.run(this.program).value;
      if (typeof out !== "string") throw new ChatTemplateError(`${this.where}: the template rendered no text`);
      return out;
    } catch (e) {
      if (e instanceof ChatTemplateError) throw e;
      if (e instanceof RangeError) throw new ChatTemplateError(`${this.where}: rendering failed: ${e.message} (runaway recursion?)`);
      throw new ChatTemplateError(`${this.where}: rendering failed: ${explainRenderError((e as Error).message)}`);
    }
  }

  /** Python's range(), refusing to build more than maxRange elements in one render (`ranged` counts them) */
  private range(a: number[], ranged: { elements: number }): number[] {
    const [start, stop, step] = a.length === 1 ? [0, a[0]!, 1] : [a[0]!, a[1]!, a[2] ?? 1];
    if (![start, stop, step].every(Number.isInteger) || step === 0) throw new ChatTemplateError(`${this.where}: range() needs integer arguments and a non-zero step`);
    const n = Math.max(0, Math.ceil((stop - start) / step));
    if (n > this.limits.maxRange) throw new ChatTemplateError(`${this.where}: range() of ${n} elements is more than the ${this.limits.maxRange} allowed`);
    ranged.elements += n;
    if (ranged.elements > this.limits.maxRangeTotal) {
      throw new ChatTemplateError(`${this.where}: range() calls produced ${ranged.elements} elements in one render, more than the ${this.limits.maxRangeTotal} allowed (a loop nested in a loop?)`);
    }
    return Array.from({ length: n }, (_, i) => start + i * step);
  }
}
