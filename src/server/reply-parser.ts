import { randomBytes, randomUUID } from "node:crypto";
import { decodeStringPrefix, flat, type Scan, ScanMemo, scanString, scanValue, skipWs } from "./json-scan.js";

/**
 * A chat reply read apart into reasoning, text and tool calls, in the form its template's model
 * writes them (llama.cpp's common/chat.cpp formats). One parser serves both answers: the
 * non-streamed one reads the whole reply; a stream reads the reply so far (`partial`) after each
 * token and sends what grew. The partial reading only ever holds what can no longer change — a
 * call is shown once its name is known and it can no longer turn into text, text that may be the
 * start of a marker or stand next to a call waits — so what a stream sends adds up to the
 * non-streamed message, whatever the reply.
 *
 * A call stands once its name is read and is one of the tools; its arguments are then the text of
 * the JSON value that follows (or the text of a JSON string there, decoded, as llama.cpp accepts
 * them) for as far as it stays JSON: a call cut off by max_tokens is still a call, its arguments
 * cut off too, as OpenAI's are. Before its name a call that stops being one (not JSON, no tool of
 * that name, its text ending) is text, its marker included. Whitespace next to a call is dropped.
 */

export type ToolFormat =
  | "hermes" | "qwen3-coder" | "mistral" | "mistral-args" | "llama3" | "functionary-v3.1" | "functionary-v3.2"
  | "deepseek-r1" | "command-r7b" | "firefunction-v2" | "generic";

/** what to look for in a reply */
export interface ReplySyntax {
  /** the calls' format, with the tools' names; none when the request has no tools (or tool_choice "none") */
  readonly calls?: {
    readonly format: ToolFormat;
    readonly names: ReadonlySet<string>;
    /** parallel_tool_calls: without it only the first call is kept (the others are dropped, not shown as text) */
    readonly parallel: boolean;
    /** Llama 3.1 built-in tools, written `<|python_tag|>name.call(arg=value, ...)` */
    readonly builtins?: ReadonlySet<string>;
    /** Qwen3-Coder's XML parameters: per function, those whose schema is a string (their values are raw text, the others JSON) */
    readonly stringParameters?: ReadonlyMap<string, ReadonlySet<string>>;
  };
  /**
   * reasoning between these markers becomes reasoning_content; forcedOpen: the prompt ends inside
   * it (the reply begins with reasoning); endsBefore: markers that also end it, left to what follows
   * (Qwen3.5 may open its call without closing its reasoning)
   */
  readonly thinking?: { readonly open: string; readonly close: string; readonly forcedOpen: boolean; readonly endsBefore?: readonly string[] };
  /** the text is JSON inside a ```json fence (Ministral 3's response_format, as llama.cpp reads it): answered without the fence */
  readonly jsonFence?: boolean;
}

export interface ParsedCall {
  readonly name: string;
  readonly arguments: string;
  /** the id the model wrote with the call (Mistral's [CALL_ID] or "id", Command R7B's "tool_call_id"), kept as llama.cpp keeps it */
  readonly id?: string;
}

type Call = { name: string; arguments: string; id?: string };

export interface ParsedReply {
  readonly reasoning: string;
  readonly content: string;
  readonly calls: readonly ParsedCall[];
}

/**
 * Where the readings of a reply that only grows stopped (a stream reads it again after each
 * token): its JSON values' scans, its raw strings' JSON so far, so each reading does the new
 * text's work, not the whole reply's again.
 */
export class ReplyMemo {
  readonly json = new ScanMemo();
  /** a raw text's JSON string (less its quotes) from its start up to `upTo` */
  readonly raw = new Map<number, { readonly upTo: number; readonly json: string }>();
  /** a word looked for from a position: found nowhere before `upTo` */
  readonly searched = new Map<string, number>();
}

/** the reply's reasoning, text and calls; `partial`: the reply may go on, so only what is settled; `memo`: what earlier readings of the reply's beginning found */
export function parseReply(text: string, syntax: ReplySyntax, partial: boolean, memo?: ReplyMemo): ParsedReply {
  const out = new Reply(text, partial, memo);
  let pos = 0;
  if (syntax.thinking) pos = readThinking(out, syntax.thinking);
  if (!out.stopped) {
    if (syntax.calls) FORMATS[syntax.calls.format](out, pos, syntax.calls);
    else out.text(pos, text.length, []);
  }
  const calls = syntax.calls && !syntax.calls.parallel ? out.calls.slice(0, 1) : out.calls;
  const content = syntax.jsonFence ? unfenced(out.contentText(), partial) : out.contentText();
  return { reasoning: out.reasoningText(), content, calls };
}

const FENCE_OPEN = "```json";
const FENCE_CLOSE = "```";

/**
 * The JSON of a text inside a ```json fence (a text that does not open one, as it is). A partial
 * reply holds back what may still become the fence: an opening not yet complete, backticks at the
 * end (the closing fence, or the JSON's own), so what is read only grows.
 */
function unfenced(text: string, partial: boolean): string {
  const lead = /^\s*/.exec(text)![0].length;
  if (!text.startsWith(FENCE_OPEN, lead)) return partial && FENCE_OPEN.startsWith(text.slice(lead)) ? "" : text;
  const body = text.slice(lead + FENCE_OPEN.length).trimStart();
  if (partial) return body.replace(/`+$/, "").trimEnd();
  return body.endsWith(FENCE_CLOSE) ? body.slice(0, -FENCE_CLOSE.length).trimEnd() : body;
}

/** what parseReply has read so far: text, reasoning, calls, and whether it stopped where the reply is not yet settled */
class Reply {
  reasoning = "";
  /** the reasoning reached its end marker (or the reply ended): nothing more is added to it */
  reasoningClosed = false;
  content = "";
  calls: Call[] = [];
  /** the text read stops here: more of the reply decides what comes next */
  stopped = false;
  /** after a call: whitespace that joins it to text after it (kept only between text and text) */
  private afterCall = false;
  private pendingWs = "";

  constructor(readonly s: string, readonly partial: boolean, readonly memo?: ReplyMemo) {}

  /** the JSON value at i */
  scan(i: number): Scan {
    return scanValue(this.s, i, this.memo?.json);
  }

  /** the characters of the JSON string at i, decoded as far as they are certain */
  decode(i: number): string {
    return decodeStringPrefix(this.s, i, this.memo?.json);
  }

  /** the raw text from `from` to `to` as a JSON string's contents (a partial reading's `to` is never after half a surrogate pair) */
  rawJson(from: number, to: number): string {
    const known = this.memo?.raw.get(from);
    const upTo = known && known.upTo <= to ? known.upTo : from;
    const json = flat((known && upTo === known.upTo ? known.json : "") + JSON.stringify(this.s.slice(upTo, to)).slice(1, -1));
    if (this.partial) this.memo?.raw.set(from, { upTo: to, json });
    return json;
  }

  /** where `word` first occurs from `from` on (-1: nowhere yet) */
  indexOf(word: string, from: number): number {
    const key = `${from} ${word}`;
    const known = this.memo?.searched.get(key) ?? from;
    const at = this.s.indexOf(word, Math.max(from, known - word.length + 1));
    if (at < 0) this.memo?.searched.set(key, this.s.length);
    return at;
  }

  /** text from `from` to `to`; with `markers`, a partial reply holds back an ending that may begin one (and stops there) */
  text(from: number, to: number, markers: readonly string[]): void {
    let end = to;
    if (this.partial && to === this.s.length) {
      const held = heldBack(this.s, from, markers);
      if (held < end) { end = held; this.stopped = true; }
    }
    this.addText(this.s.slice(from, end));
  }

  addText(t: string): void {
    if (t === "") return;
    if (this.afterCall) {
      const lead = /^\s*/.exec(t)![0];
      if (lead.length === t.length) { this.pendingWs += t; return; }
      this.content += this.content === "" ? t.slice(lead.length) : this.pendingWs + t;
      this.afterCall = false;
      this.pendingWs = "";
      return;
    }
    this.content += t;
  }

  /** a call begins: the whitespace before it goes */
  startCall(name: string, id?: string): Call {
    this.content = this.content.trimEnd();
    const call: Call = id === undefined ? { name, arguments: "" } : { name, arguments: "", id };
    this.calls.push(call);
    this.afterCall = true;
    this.pendingWs = "";
    return call;
  }

  /** a stop where the reply is not settled: nothing after this point is read */
  stop(): void {
    this.stopped = true;
  }

  /** the rest of the reply is a call cut off before its name: it goes, with the whitespace before it */
  drop(): void {
    this.content = this.content.trimEnd();
    this.pendingWs = "";
    this.stopped = true;
  }

  contentText(): string {
    // a partial reply's trailing whitespace waits: a call after it would drop it
    return this.partial ? this.content.trimEnd() : this.content;
  }

  reasoningText(): string {
    return this.partial && !this.reasoningClosed ? this.reasoning.trimEnd() : this.reasoning;
  }
}

/**
 * Where the text from `from` on ends but for a tail that is the beginning of a marker (the text's
 * length when none is), or a high surrogate whose pair is still to come: a piece sent alone would
 * be a lone surrogate, which JSON clients outside JavaScript refuse.
 */
function heldBack(s: string, from: number, markers: readonly string[]): number {
  let held = s.length > from && isHighSurrogate(s.charCodeAt(s.length - 1)) ? s.length - 1 : s.length;
  for (const m of markers) {
    for (let k = Math.min(m.length - 1, s.length - from); k > 0; k--) {
      if (s.endsWith(m.slice(0, k))) { held = Math.min(held, s.length - k); break; }
    }
  }
  return held;
}

const isHighSurrogate = (c: number) => c >= 0xd800 && c <= 0xdbff;

/** the earliest of the markers in s from `from` on */
function findMarker(s: string, from: number, markers: readonly string[]): { at: number; marker: string } | undefined {
  let best: { at: number; marker: string } | undefined;
  for (const m of markers) {
    const at = s.indexOf(m, from);
    if (at >= 0 && (!best || at < best.at)) best = { at, marker: m };
  }
  return best;
}

/** reasoning at the start of the reply (llama.cpp's --reasoning-format deepseek): where the rest begins */
function readThinking(out: Reply, t: NonNullable<ReplySyntax["thinking"]>): number {
  const s = out.s;
  let i = skipWs(s, 0);
  if (s.startsWith(t.open, i)) i += t.open.length;
  else if (!t.forcedOpen) {
    // a reply that may still begin with the marker waits
    if (out.partial && t.open.startsWith(s.slice(i))) out.stop();
    return 0;
  }
  const ends = [t.close, ...(t.endsBefore ?? [])];
  let close = -1, marker = t.close;
  for (const m of ends) {
    const at = out.indexOf(m, i);
    if (at >= 0 && (close < 0 || at < close)) { close = at; marker = m; }
  }
  if (close < 0) {
    const end = out.partial ? heldBack(s, i, ends) : s.length;
    out.reasoning = s.slice(i, end).trim();
    out.reasoningClosed = !out.partial;
    if (out.partial) out.stop();
    return s.length;
  }
  out.reasoning = s.slice(i, close).trim();
  out.reasoningClosed = true;
  const after = skipWs(s, marker === t.close ? close + t.close.length : close);
  if (out.partial && after === s.length) out.stop();
  return after;
}

type Calls = NonNullable<ReplySyntax["calls"]>;

/**
 * what reading a call's construct found: calls (the reply goes on at `end`), not a call (its
 * marker is text), not yet known, or (the reply over) a call cut off before its name was read
 */
type Found = CallsFound | { readonly kind: "text" } | { readonly kind: "wait" } | { readonly kind: "cut" };
type CallsFound = { readonly kind: "calls"; readonly end: number };

const TEXT: Found = { kind: "text" };

/** calls read up to `end`, and the rest not yet settled: reading stops */
function callsThenWait(out: Reply, end: number): CallsFound {
  out.stop();
  return { kind: "calls", end };
}
const WAIT: Found = { kind: "wait" };
/**
 * The text ends before the call's name is read (a stop string, max_tokens): more may still make it
 * a call, and once the reply is over it is dropped, marker and all, as llama.cpp's lenient parse
 * drops a call it cannot name (a marker is no text: its content ends before it).
 */
const cut = (out: Reply): Found => (out.partial ? WAIT : { kind: "cut" });

/**
 * A reply of text with calls marked where they begin: each marker's construct is read where it
 * occurs; one that is no call leaves its marker as text, and the search goes on after it.
 */
function markedCalls(out: Reply, pos: number, markers: readonly string[], read: (at: number, marker: string) => Found): void {
  const s = out.s;
  while (!out.stopped) {
    const next = findMarker(s, pos, markers);
    if (!next) { out.text(pos, s.length, markers); return; }
    out.text(pos, next.at, []);
    const found = read(next.at, next.marker);
    if (found.kind === "wait") { out.stop(); return; }
    if (found.kind === "cut") { out.drop(); return; }
    if (found.kind === "text") {
      out.addText(next.marker);
      pos = next.at + next.marker.length;
      continue;
    }
    pos = found.end;
  }
}

interface ObjectKeys {
  readonly name: readonly string[];
  readonly args: readonly string[];
}

const NAME_ARGUMENTS: ObjectKeys = { name: ["name"], args: ["arguments", "parameters"] };
/** the keys of the model's own id in a call object (Mistral Nemo's last, Command R7B's first) */
const ID_KEYS = new Set(["id", "tool_call_id"]);
/** other keys a call object may carry (Llama's "type": "function") */
const OTHER_KEYS = new Set(["type"]);

/**
 * A call written as a JSON object ({"name": ..., "arguments": {...}}, keys in any order) at s[i]:
 * a call once its name is read and is a tool's. Where it ends: after its `}`, or where it stops
 * being JSON or the text ends (a call cut short).
 */
function objectCall(out: Reply, i: number, calls: Calls, keys: ObjectKeys = NAME_ARGUMENTS): Found {
  const s = out.s;
  if (i >= s.length) return cut(out);
  if (s[i] !== "{") return TEXT;
  let call: Call | undefined;
  let args: string | undefined;
  let id: string | undefined;
  let argsStart = -1;
  const cutShort = (end: number, incomplete: boolean): Found => {
    if (!call) return incomplete ? cut(out) : TEXT;
    call.arguments = args ?? "";
    if (incomplete && out.partial) out.stop();
    return { kind: "calls", end };
  };
  let j = skipWs(s, i + 1);
  if (s[j] === "}") return TEXT;
  for (;;) {
    if (j >= s.length) return cutShort(j, true);
    if (s[j] !== "\"") return cutShort(j, false);
    const k = scanString(s, j);
    if (!k.ok) return cutShort(k.end, k.incomplete);
    const key = JSON.parse(s.slice(j, k.end)) as string;
    j = skipWs(s, k.end);
    if (j >= s.length) return cutShort(j, true);
    if (s[j] !== ":") return cutShort(j, false);
    j = skipWs(s, j + 1);
    if (j >= s.length) return cutShort(j, true);
    const v = out.scan(j);
    if (keys.name.includes(key)) {
      if (s[j] !== "\"" || !v.ok) return call ? cutShort(v.end, !v.ok && v.incomplete) : (!v.ok && v.incomplete && [...calls.names].some((n) => n.startsWith(out.decode(j))) ? cut(out) : TEXT);
      const name = JSON.parse(s.slice(j, v.end)) as string;
      if (!call) {
        if (!calls.names.has(name)) return TEXT;
        call = out.startCall(name, id);
        if (argsStart >= 0) call.arguments = args!;
      }
    } else if (keys.args.includes(key) && argsStart < 0) {
      argsStart = j;
      args = s[j] === "\"" ? out.decode(j) : s.slice(j, v.end);
      if (call) call.arguments = args;
    } else if (ID_KEYS.has(key)) {
      if (s[j] === "\"" && v.ok && id === undefined) {
        id = JSON.parse(s.slice(j, v.end)) as string;
        if (call) call.id = id;
      }
    } else if (!OTHER_KEYS.has(key) && !keys.name.includes(key) && !keys.args.includes(key)) {
      // not a call's key: a JSON reply that is no call shows as text at once
      return call ? cutShort(j, false) : TEXT;
    }
    if (!v.ok) return cutShort(v.end, v.incomplete);
    j = skipWs(s, v.end);
    if (j >= s.length) return cutShort(j, true);
    if (s[j] === ",") { j = skipWs(s, j + 1); continue; }
    if (s[j] !== "}") return cutShort(j, false);
    if (!call) return TEXT;
    call.arguments = args ?? "{}";
    return { kind: "calls", end: j + 1 };
  }
}

/** a JSON list of call objects at s[i] ([{...}, {...}]): its calls, up to the first that is none */
function listCalls(out: Reply, i: number, calls: Calls, keys: ObjectKeys = NAME_ARGUMENTS): Found {
  const s = out.s;
  if (i >= s.length) return cut(out);
  if (s[i] !== "[") return TEXT;
  let j = skipWs(s, i + 1);
  let any = false;
  for (;;) {
    const f = objectCall(out, j, calls, keys);
    if (f.kind !== "calls") {
      if (!any) return f;
      // (a cut call after whole ones goes, as a lone cut call does)
      if (f.kind === "cut") out.drop();
      return f.kind === "wait" ? callsThenWait(out, j) : { kind: "calls", end: j };
    }
    any = true;
    if (out.stopped) return f;
    j = skipWs(s, f.end);
    if (j >= s.length) { if (out.partial) out.stop(); return { kind: "calls", end: j }; }
    if (s[j] === "]") return { kind: "calls", end: j + 1 };
    if (s[j] !== ",") return { kind: "calls", end: f.end };
    j = skipWs(s, j + 1);
  }
}

/** after a call, an optional closing marker: where the reply goes on */
function closer(out: Reply, end: number, close: string): CallsFound {
  const s = out.s;
  if (out.stopped) return { kind: "calls", end };
  const j = skipWs(s, end);
  if (s.startsWith(close, j)) return { kind: "calls", end: j + close.length };
  if (out.partial && close.startsWith(s.slice(j))) out.stop();
  return { kind: "calls", end };
}

/**
 * a function name at s[i] followed by `end`: the name when it is a tool's, "wait" while it may
 * still become one; "cut": the reply is over where it might still have become one (a tool's name
 * begins with what was written)
 */
function nameBefore(out: Reply, i: number, end: string, calls: Calls, pattern = /^[A-Za-z0-9_.-]*/): string | "wait" | "cut" | undefined {
  const s = out.s;
  const name = pattern.exec(s.slice(i, i + 256))![0];
  const after = i + name.length;
  if (after >= s.length || (s.length - after < end.length && end.startsWith(s.slice(after)))) {
    if (out.partial) return "wait";
    return [...calls.names].some((n) => after >= s.length ? n.startsWith(name) : n === name) ? "cut" : undefined;
  }
  if (!s.startsWith(end, after) || !calls.names.has(name)) return undefined;
  return name;
}

/** a call whose arguments are the JSON value at s[i] (any JSON: text that is not ends them) */
function valueArguments(out: Reply, call: { arguments: string }, i: number): number {
  const s = out.s;
  if (i >= s.length) { if (out.partial) out.stop(); return i; }
  const v = out.scan(i);
  call.arguments = s[i] === "\"" ? out.decode(i) : s.slice(i, v.end);
  if (!v.ok && v.incomplete && out.partial) out.stop();
  return v.end;
}

/** code after a python marker, as the python tool's {"code": ...} (to the end of the reply) */
function rawPython(out: Reply, i: number): Found {
  const call = out.startCall("python");
  const code = JSON.stringify(out.s.slice(i, out.partial ? heldBack(out.s, i, []) : out.s.length));
  // a partial reply's code may go on: the string stays open
  call.arguments = out.partial ? `{"code": ${code.slice(0, -1)}` : `{"code": ${code}}`;
  if (out.partial) out.stop();
  return { kind: "calls", end: out.s.length };
}

const FUNCTION_TAG = "<function=";

/** `<function=name>{...}</function>` (Functionary v3.1, and Hermes-family models that write it) */
function functionTag(out: Reply, at: number, calls: Calls): Found {
  const name = nameBefore(out, at + FUNCTION_TAG.length, ">", calls);
  if (name === "wait" || name === "cut") return cut(out);
  if (name === undefined) return TEXT;
  const call = out.startCall(name);
  const end = valueArguments(out, call, skipWs(out.s, at + FUNCTION_TAG.length + name.length + 1));
  return closer(out, end, "</function>");
}

export const PYTHON_TAG = "<|python_tag|>";

const PARAMETER_TAG = "<parameter=";
/** what ends a Qwen3-Coder parameter's value (the grammar of its calls keeps it out of string values) */
export const PARAMETER_END = "</parameter>";

/**
 * Qwen3-Coder's XML call at s[at] (`<function=NAME>`): `<parameter=P>\nVALUE\n</parameter>`
 * after `<parameter=P>\nVALUE\n</parameter>`, then `</function>` (llama.cpp's qwen3_coder
 * format). The arguments are the JSON object of the parameters in their order: a value whose
 * schema is a string is its raw text (a JSON string, growing as it is written); any other is JSON
 * (taken once its </parameter> is read; a value that is not JSON is a string, as the raw text it is).
 */
function xmlFunction(out: Reply, at: number, calls: Calls): Found {
  const s = out.s;
  const name = nameBefore(out, at + FUNCTION_TAG.length, ">", calls);
  if (name === "wait" || name === "cut") return cut(out);
  if (name === undefined) return TEXT;
  const call = out.startCall(name);
  const strings = calls.stringParameters?.get(name);
  let args = "{";
  call.arguments = args;
  let i = at + FUNCTION_TAG.length + name.length + 1;
  for (;;) {
    i = skipWs(s, i);
    if (s.startsWith("</function>", i)) { call.arguments = `${args}}`; return { kind: "calls", end: i + "</function>".length }; }
    if (!s.startsWith(PARAMETER_TAG, i)) {
      // the text ends before the next tag is known, or the call ends without its closing tag (cut off or malformed)
      if (out.partial && i >= s.length - Math.max(PARAMETER_TAG.length, "</function>".length) && [PARAMETER_TAG, "</function>"].some((m) => m.startsWith(s.slice(i)))) out.stop();
      return { kind: "calls", end: i };
    }
    const nameEnd = s.indexOf(">", i + PARAMETER_TAG.length);
    const param = nameEnd < 0 ? undefined : s.slice(i + PARAMETER_TAG.length, nameEnd);
    if (param === undefined || param.includes("\n") || param.length > 256) {
      if (out.partial && nameEnd < 0 && s.length - i < 256 + PARAMETER_TAG.length) out.stop();
      return { kind: "calls", end: i };
    }
    let from = nameEnd + 1;
    if (s[from] === "\n") from++;
    else if (out.partial && from >= s.length) { out.stop(); return { kind: "calls", end: i }; }
    let close = -1;
    if (!strings?.has(param)) {
      // a JSON value ends where its JSON does: a "</parameter>" inside one of its strings is no end (the grammar admits one there)
      const j = skipWs(s, from);
      const v = "{[\"".includes(s[j] ?? "x") ? out.scan(j) : undefined;
      const after = v?.ok ? skipWs(s, v.end) : -1;
      // (more text decides: the value, or what follows it, is not finished)
      if (out.partial && v && (v.ok ? s.length - after < PARAMETER_END.length && PARAMETER_END.startsWith(s.slice(after)) : v.incomplete)) { out.stop(); return { kind: "calls", end: s.length }; }
      if (v?.ok && s.startsWith(PARAMETER_END, after)) close = after;
    }
    if (close < 0) close = out.indexOf(PARAMETER_END, from);
    const key = `${args === "{" ? "" : ", "}${JSON.stringify(param)}: `;
    if (close < 0) {
      // the value is not finished: a string's text so far (less what may begin its closing), nothing of another
      if (strings?.has(param)) {
        const end = out.partial ? heldBack(s, from, [`\n${PARAMETER_END}`, PARAMETER_END]) : s.length;
        call.arguments = `${args + key}"${out.rawJson(from, end)}`;
      } else if (!out.partial) call.arguments = args + key + s.slice(from);
      if (out.partial) out.stop();
      return { kind: "calls", end: s.length };
    }
    const rawEnd = s[close - 1] === "\n" && close > from ? close - 1 : close;
    args += key + (strings?.has(param) ? `"${out.rawJson(from, rawEnd)}"` : jsonOrString(s.slice(from, rawEnd)));
    call.arguments = args;
    i = close + PARAMETER_END.length;
  }
}

/** a parameter value's JSON: the text when it is JSON, else the text as a JSON string */
function jsonOrString(raw: string): string {
  try {
    return JSON.stringify(JSON.parse(raw));
  } catch {
    return JSON.stringify(raw);
  }
}

/**
 * The Mistral form of Devstral, Magistral / Ministral 3 and Mistral Small 3.2 at s[i] (after
 * [TOOL_CALLS]): `NAME[ARGS]{...}`, Small 3.2 with `[CALL_ID]id` before [ARGS]; each call has
 * its own [TOOL_CALLS].
 */
function argsCall(out: Reply, i: number, calls: Calls): Found {
  const s = out.s;
  const name = nameBefore(out, i, "[", calls);
  if (name === "wait" || name === "cut") return cut(out);
  if (name === undefined) return TEXT;
  let j = i + name.length;
  let id: string | undefined;
  if (s.startsWith("[CALL_ID]", j)) {
    const end = s.indexOf("[ARGS]", j);
    if (end < 0) return out.partial && s.length - j < 64 ? WAIT : TEXT;
    id = s.slice(j + "[CALL_ID]".length, end).trim();
    j = end;
  } else if (!s.startsWith("[ARGS]", j)) {
    return out.partial && ["[ARGS]", "[CALL_ID]"].some((m) => m.startsWith(s.slice(j))) ? WAIT : TEXT;
  }
  const call = out.startCall(name, id);
  return { kind: "calls", end: valueArguments(out, call, skipWs(s, j + "[ARGS]".length)) };
}

/** the ways DeepSeek R1 models open their calls (the Qwen distills vary it, llama.cpp takes these) */
const DEEPSEEK_BEGIN = ["<｜tool▁calls▁begin｜>", "<｜tool_calls_begin｜>", "<｜tool calls begin｜>", "<｜tool\\_calls\\_begin｜>", "<｜tool▁calls｜>"];

/**
 * The formats whose calls may follow text, each opened by one of these markers: text that holds
 * none of them is text whatever follows (what a grammar under tool_choice "auto" keeps calls out of)
 */
export const CALL_MARKERS: Partial<Record<ToolFormat, readonly string[]>> = {
  hermes: ["<tool_call>", FUNCTION_TAG],
  "qwen3-coder": ["<tool_call>", FUNCTION_TAG],
  mistral: ["[TOOL_CALLS]"],
  "mistral-args": ["[TOOL_CALLS]"],
  "firefunction-v2": ["functools["],
  "command-r7b": ["<|START_ACTION|>"],
  "deepseek-r1": DEEPSEEK_BEGIN,
  "functionary-v3.1": [FUNCTION_TAG, PYTHON_TAG],
};

const FORMATS: Record<ToolFormat, (out: Reply, pos: number, calls: Calls) => void> = {
  hermes: (out, pos, calls) => markedCalls(out, pos, CALL_MARKERS.hermes!, (at, marker) => {
    if (marker === FUNCTION_TAG) return functionTag(out, at, calls);
    const f = objectCall(out, skipWs(out.s, at + marker.length), calls);
    return f.kind === "calls" ? closer(out, f.end, "</tool_call>") : f;
  }),
  "qwen3-coder": (out, pos, calls) => markedCalls(out, pos, CALL_MARKERS["qwen3-coder"]!, (at, marker) => {
    if (marker === FUNCTION_TAG) return xmlFunction(out, at, calls);
    const i = skipWs(out.s, at + marker.length);
    if (i >= out.s.length - FUNCTION_TAG.length && FUNCTION_TAG.startsWith(out.s.slice(i))) return cut(out);
    if (!out.s.startsWith(FUNCTION_TAG, i)) return TEXT;
    const f = xmlFunction(out, i, calls);
    return f.kind === "calls" ? closer(out, f.end, "</tool_call>") : f;
  }),
  mistral: (out, pos, calls) => markedCalls(out, pos, CALL_MARKERS.mistral!, (at, marker) => listCalls(out, skipWs(out.s, at + marker.length), calls)),
  "mistral-args": (out, pos, calls) => markedCalls(out, pos, CALL_MARKERS["mistral-args"]!, (at, marker) => argsCall(out, skipWs(out.s, at + marker.length), calls)),
  "firefunction-v2": (out, pos, calls) => markedCalls(out, pos, CALL_MARKERS["firefunction-v2"]!, (at, marker) => listCalls(out, at + marker.length - 1, calls)),
  "command-r7b": (out, pos, calls) => markedCalls(out, pos, ["<|START_ACTION|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>"], (at, marker) => {
    // the response's markers frame the text: they go
    if (marker !== "<|START_ACTION|>") return { kind: "calls", end: at + marker.length };
    const f = listCalls(out, skipWs(out.s, at + marker.length), calls, { name: ["tool_name"], args: ["parameters"] });
    return f.kind === "calls" ? closer(out, f.end, "<|END_ACTION|>") : f;
  }),
  "deepseek-r1": (out, pos, calls) => markedCalls(out, pos, CALL_MARKERS["deepseek-r1"]!, (at, marker) => deepseekCalls(out, at + marker.length, calls)),
  "functionary-v3.1": (out, pos, calls) => markedCalls(out, pos, CALL_MARKERS["functionary-v3.1"]!, (at, marker) => {
    if (marker === PYTHON_TAG) return rawPython(out, at + marker.length);
    return functionTag(out, at, calls);
  }),
  "functionary-v3.2": functionaryV32,
  llama3: llama3,
  generic: generic,
};

/** <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜> ... <｜tool▁calls▁end｜> */
function deepseekCalls(out: Reply, i: number, calls: Calls): Found {
  const s = out.s;
  let any = false, end = i;
  for (;;) {
    let j = skipWs(s, end);
    const begin = "<｜tool▁call▁begin｜>", head = "function<｜tool▁sep｜>";
    if (s.startsWith(begin, j)) j += begin.length;
    else if (j < s.length && begin.startsWith(s.slice(j)) && (out.partial || !any)) return any ? callsThenWait(out, end) : cut(out);
    const rest = s.slice(j, j + head.length);
    if (!s.startsWith(head, j)) {
      if (head.startsWith(rest) && (out.partial || !any)) return any ? callsThenWait(out, end) : cut(out);
      return any ? closer(out, end, "<｜tool▁calls▁end｜>") : TEXT;
    }
    const name = nameBefore(out, j + head.length, "\n```json\n", calls, /^[^\n]*/);
    if (name === "wait") return any ? callsThenWait(out, end) : WAIT;
    if (name === "cut") { if (any) out.drop(); return any ? { kind: "calls", end } : cut(out); }
    if (name === undefined) return any ? closer(out, end, "<｜tool▁calls▁end｜>") : TEXT;
    const call = out.startCall(name);
    any = true;
    end = valueArguments(out, call, j + head.length + name.length + "\n```json\n".length);
    if (out.stopped) return { kind: "calls", end };
    const f = closer(out, skipWs(s, end), "```");
    if (out.stopped) return f;
    const g = closer(out, f.end, "<｜tool▁call▁end｜>");
    if (out.stopped) return g;
    end = g.end;
  }
}

/**
 * Functionary v3.2: the prompt ends with ">>>", the reply names its recipient on its first line —
 * "all" for text to the user, a function's name for a call (its JSON arguments follow) — and each
 * later part begins with ">>>recipient\n".
 */
function functionaryV32(out: Reply, pos: number, calls: Calls): void {
  const s = out.s;
  /** a part at s[i] after its ">>>": where it goes on, or text/wait */
  const part = (i: number): Found => {
    const name = nameBefore(out, i, "\n", { ...calls, names: new Set([...calls.names, "all", "python"]) }, /^\w*/);
    if (name === "wait") return WAIT;
    if (name === undefined || name === "cut") return TEXT;
    const body = i + name.length + 1;
    if (name === "all") return { kind: "calls", end: body };
    if (name === "python" && !calls.names.has("python")) return TEXT;
    if (body >= s.length) return out.partial ? WAIT : TEXT;
    if (s[body] !== "{") return name === "python" ? rawPython(out, body) : TEXT;
    const call = out.startCall(name);
    const end = valueArguments(out, call, body);
    return { kind: "calls", end };
  };
  const first = part(pos);
  if (first.kind === "wait") return out.stop();
  markedCalls(out, first.kind === "calls" ? first.end : pos, [">>>"], (at, marker) => part(at + marker.length));
}

/**
 * Llama 3.x: a reply that begins with a call (a JSON object {"name", "parameters"}, after an
 * optional <|python_tag|>; or a built-in tool's `name.call(arg="...")`), then more calls
 * (parallel, separated by whitespace or ";"), then text. With built-in tools a
 * `<|python_tag|>name.call(...)` is read wherever it occurs, the text before it content, as
 * llama.cpp's Llama 3.1 parser finds the tag (try_find_regex) and its lazy grammar's word trigger
 * fires anywhere; a JSON call is read only at the start (its function_regex is start-only there).
 */
function llama3(out: Reply, pos: number, calls: Calls): void {
  const s = out.s;
  /** the rest of the reply from `from`: text, with built-in calls after a <|python_tag|> anywhere in it */
  const rest = (from: number): void => {
    if (!calls.builtins?.size) return out.text(from, s.length, []);
    markedCalls(out, from, [PYTHON_TAG], (at, marker) => builtinCall(out, skipWs(s, at + marker.length), calls));
  };
  let i = skipWs(s, pos);
  let any = false;
  for (;;) {
    if (out.partial && i < s.length && s.length - i < PYTHON_TAG.length && PYTHON_TAG.startsWith(s.slice(i))) return out.stop();
    let j = i;
    if (s.startsWith(PYTHON_TAG, j)) j = skipWs(s, j + PYTHON_TAG.length);
    // a "{" that opens no call as llama.cpp's trigger reads it is text; one that ends the reply
    // before that is known is read as a call's start (dropped where it ends there, as llama.cpp's final parse drops it)
    const opens = llama3Opens(s, j);
    const f = opens !== false || j >= s.length ? objectCall(out, j, calls) : s[j] === "{" ? TEXT : builtinCall(out, j, calls);
    if (f.kind === "wait") return out.stop();
    // a call cut off before its name is dropped, as markedCalls drops one (llama.cpp's lenient parse cannot name it)
    if (f.kind === "cut") return out.drop();
    if (f.kind === "text") return rest(any ? i : pos);
    any = true;
    if (out.stopped) return;
    i = skipWs(s, f.end);
    if (s[i] === ";") i = skipWs(s, i + 1);
    if (i >= s.length) { if (out.partial) out.stop(); return; }
    if (s[i] !== "{" && !s.startsWith(PYTHON_TAG, i) && !(out.partial && PYTHON_TAG.startsWith(s.slice(i)))) return rest(i);
  }
}

/**
 * How a Llama 3.x call opens, as llama.cpp's lazy grammar's trigger and its parser's function_regex
 * read it: `{`, then `"type": "function",` or nothing, then `"name": "` (a " " here: any JSON
 * whitespace). A reply opening otherwise is text, `{"a": 1}` and `{not a call}` included.
 */
export const LLAMA3_OPENING = { start: '{ "', type: 'type" : "function" , "', name: 'name" : "' } as const;

/** s at i against a LLAMA3_OPENING piece: where it ends, false where it goes elsewhere, "more" where s ends first */
function openingPiece(s: string, i: number, piece: string): number | false | "more" {
  for (const c of piece) {
    if (c === " ") { i = skipWs(s, i); continue; }
    if (i >= s.length) return "more";
    if (s[i] !== c) return false;
    i++;
  }
  return i;
}

/** whether s at i opens a Llama 3.x call (LLAMA3_OPENING), or "more" where s ends before that is known */
function llama3Opens(s: string, i: number): boolean | "more" {
  const { start, type, name } = LLAMA3_OPENING;
  const a = openingPiece(s, i, start);
  if (typeof a !== "number") return a;
  const direct = openingPiece(s, a, name);
  if (typeof direct === "number") return true;
  const typed = openingPiece(s, a, type);
  const then = typeof typed === "number" ? openingPiece(s, typed, name) : typed;
  if (typeof then === "number") return true;
  return direct === "more" || then === "more" ? "more" : false;
}

/** `name.call(arg=value, ...)`, a Llama 3.1 built-in tool's call: arguments {"arg": value, ...} */
function builtinCall(out: Reply, i: number, calls: Calls): Found {
  const s = out.s;
  if (!calls.builtins?.size) return TEXT;
  const name = nameBefore(out, i, ".call(", { ...calls, names: calls.builtins }, /^\w*/);
  if (name === "wait") return WAIT;
  if (name === undefined || name === "cut" || !calls.names.has(name)) return TEXT;
  const call = out.startCall(name);
  let j = skipWs(s, i + name.length + ".call(".length);
  let args = "{";
  for (;;) {
    if (j >= s.length) break;
    if (s[j] === ")") { call.arguments = `${args}}`; return { kind: "calls", end: j + 1 }; }
    const key = /^\w+/.exec(s.slice(j, j + 256))?.[0];
    if (!key) break;
    let k = skipWs(s, j + key.length);
    if (k >= s.length) break;
    if (s[k] !== "=") break;
    k = skipWs(s, k + 1);
    if (k >= s.length) break;
    const v = out.scan(k);
    args += `${args === "{" ? "" : ", "}${JSON.stringify(key)}: ${s.slice(k, v.end)}`;
    if (!v.ok) { call.arguments = args; if (v.incomplete && out.partial) out.stop(); return { kind: "calls", end: v.end }; }
    j = skipWs(s, v.end);
    if (s[j] === ",") j = skipWs(s, j + 1);
  }
  call.arguments = args === "{" ? "" : args;
  // the text ends inside the next argument's name or before its value: more decides
  if (out.partial && /^\w*\s*(=\s*)?$/.test(s.slice(j))) out.stop();
  return { kind: "calls", end: j };
}

/**
 * llama.cpp's generic format, for templates that know no tool calls: the reply is one JSON
 * object, {"tool_calls": [calls]}, {"tool_call": call} or {"response": text or JSON}.
 */
function generic(out: Reply, pos: number, calls: Calls): void {
  const s = out.s;
  const i = skipWs(s, pos);
  const whole = (): void => out.text(pos, s.length, []);
  if (i >= s.length) return out.partial ? out.stop() : whole();
  if (s[i] !== "{") return whole();
  let j = skipWs(s, i + 1);
  if (j >= s.length) return out.partial ? out.stop() : whole();
  if (s[j] !== "\"") return whole();
  const k = scanString(s, j);
  if (!k.ok) return k.incomplete && out.partial ? out.stop() : whole();
  const key = JSON.parse(s.slice(j, k.end)) as string;
  j = skipWs(s, k.end);
  if (j < s.length && s[j] !== ":") return whole();
  j = skipWs(s, j + 1);
  if (j >= s.length) return out.partial ? out.stop() : whole();
  let f: Found;
  if (key === "tool_calls") f = listCalls(out, j, calls);
  else if (key === "tool_call") f = objectCall(out, j, calls);
  else if (key === "response") {
    const v = out.scan(j);
    out.addText(s[j] === "\"" ? out.decode(j) : s.slice(j, v.end));
    if (!v.ok && v.incomplete && out.partial) out.stop();
    f = { kind: "calls", end: v.end };
  } else return whole();
  if (f.kind === "wait") return out.stop();
  if (f.kind === "text" || f.kind === "cut") return whole();
  if (out.stopped) return;
  // the object's end, then any text after it
  let e = skipWs(s, f.end);
  if (s[e] === "}") e++;
  else if (out.partial && e >= s.length) return out.stop();
  out.text(e, s.length, []);
}

/** one piece of a streamed chat reply: reasoning, text, or a tool call's start (id, name) or a piece of its arguments */
export type ReplyDelta =
  | { readonly reasoning_content: string }
  | { readonly content: string }
  | { readonly call: { readonly index: number; readonly id?: string; readonly type?: "function"; readonly function: { readonly name?: string; readonly arguments: string } } };

const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/**
 * A call's id: the model's own where it wrote one its template takes back (llama.cpp keeps it;
 * Mistral's templates refuse any but 9 letters and digits) and no earlier call of the message has
 * (`taken`: a client matches each tool result to its call by id), else a new one.
 */
export function callIdOf(call: ParsedCall, format: ToolFormat | undefined, taken: readonly string[]): string {
  const mistral = format === "mistral" || format === "mistral-args";
  if (call.id && (!mistral || /^[a-zA-Z0-9]{9}$/.test(call.id)) && !taken.includes(call.id)) return call.id;
  return newCallId(format);
}

/** an id for a call: OpenAI's form, or for Mistral 9 letters and digits (its templates refuse other ids when the call comes back) */
export function newCallId(format?: ToolFormat): string {
  if (format === "mistral" || format === "mistral-args") return [...randomBytes(9)].map((b) => ALNUM[b % ALNUM.length]).join("");
  return `call_${randomUUID().replaceAll("-", "").slice(0, 24)}`;
}

/**
 * A chat reply as it is generated: after each piece, the reply so far is read again (partial)
 * and what grew since is sent — reasoning, text, a call's id and name once it stands, then its
 * arguments as they come; at the end the whole reply is read as the non-streamed answer reads it.
 */
export class ReplyStream {
  private text = "";
  private sent: ParsedReply = { reasoning: "", content: "", calls: [] };
  private readonly ids: string[] = [];
  private readonly memo = new ReplyMemo();

  constructor(private readonly syntax: ReplySyntax) {}

  /** the calls read so far (once the reply has ended, as the non-streamed answer reads them) */
  get calls(): readonly ParsedCall[] {
    return this.sent.calls;
  }

  push(delta: string): ReplyDelta[] {
    this.text += delta;
    return this.advance(parseReply(this.text, this.syntax, true, this.memo));
  }

  /**
   * what is left once the reply has ended; `cut`: max_tokens cut it off, so it is read as the
   * partial reply it is (as llama-server reads every reply the model did not end): a marker it
   * was writing is held back, not shown as text
   */
  end(cut = false): ReplyDelta[] {
    return this.advance(parseReply(this.text, this.syntax, cut, this.memo));
  }

  private advance(now: ParsedReply): ReplyDelta[] {
    const out: ReplyDelta[] = [];
    const was = this.sent;
    // (a partial reading only grows: what was sent is a prefix of what is read now)
    if (now.reasoning.length > was.reasoning.length) out.push({ reasoning_content: now.reasoning.slice(was.reasoning.length) });
    if (now.content.length > was.content.length) out.push({ content: now.content.slice(was.content.length) });
    now.calls.forEach((c, index) => {
      const before = was.calls[index];
      if (!before) {
        // (an id the model writes after the call's name and arguments, as Mistral Nemo's "id", is not known yet: the stream's is new)
        this.ids[index] = callIdOf(c, this.syntax.calls?.format, this.ids);
        out.push({ call: { index, id: this.ids[index]!, type: "function", function: { name: c.name, arguments: c.arguments } } });
      } else if (c.arguments.length > before.arguments.length) {
        out.push({ call: { index, function: { arguments: c.arguments.slice(before.arguments.length) } } });
      }
    });
    this.sent = now;
    return out;
  }
}
