import type { ChatTemplateSource, EncodeOptions, Tokenizer } from "../tokenizer/index.js";
import { ChatTemplate, ChatTemplateError, contentText, contentTexts, mapContentText, type ChatMessage, type ChatMessageInput, type RenderOptions, type TemplateMessage } from "./template.js";

// defined beside the tokenizer, which reads a model's own template (Tokenizer.chatTemplate)
export type { ChatTemplateSource };

/** Puts a system message first (replacing one that is already there) when `system` is given. */
export function withSystem<M extends ChatMessageInput = ChatMessage>(messages: readonly M[], system: string | undefined): (M | ChatMessage)[] {
  if (system === undefined) return [...messages];
  const rest = messages[0]?.role === "system" ? messages.slice(1) : messages;
  return [{ role: "system", content: system }, ...rest];
}

export interface EncodeChatOptions {
  /** let special-token text inside message contents become special tokens (the behaviour before content was data); default false */
  parseSpecialInContent?: boolean;
  /** end with the assistant's header (default true), as a template's add_generation_prompt */
  addGenerationPrompt?: boolean;
  /** end inside the last message, for the reply to go on from its text (an assistant's prefill; transformers' continue_final_message), or from its reasoning when it has no content (continuesReasoning) */
  continueFinalMessage?: boolean;
}

const MARK = "\u0001tsllm-reply\u0001";

/**
 * the content with MARK after its text: after the string, or in its last text (a text part's, or a
 * reasoning block's when it ends the content), a text part of its own when it has none
 */
function withMark(content: ChatMessageInput["content"]): ChatMessageInput["content"] {
  const texts = contentTexts(content).length;
  if (typeof content !== "string" && texts === 0) return [...content, { type: "text", text: MARK }];
  return mapContentText(content, (t, k) => (k === texts - 1 ? t + MARK : t));
}

/**
 * Whether continuing `message` goes on inside its reasoning: it has reasoning_content and no
 * content, as llama.cpp tells a reasoning continuation (COMMON_CHAT_CONTINUATION_REASONING) from
 * a content one; the prompt then ends after the reasoning as the template writes it.
 */
export function continuesReasoning(message: ChatMessageInput): boolean {
  return message.content.length === 0 && !!message.reasoning_content;
}

/**
 * A chat template bound to a tokenizer: renders conversations, tokenizes them (special-token text
 * becomes special tokens; BOS is added only when the template did not write it), and knows the
 * tokens that end an assistant turn.
 */
export class ChatFormatter {
  readonly template: ChatTemplate;
  /** tokens that end the assistant's turn in this template (<|eot_id|>, <|im_end|>, <end_of_turn>, </s>...) */
  readonly endOfTurnIds: readonly number[];
  private readonly renderOptions: RenderOptions;
  private specialsByFirst: Map<string, string[]> | undefined;
  private callForm: { readonly objectArguments: boolean; readonly nullContent: boolean } | undefined;
  private parallelCalls: boolean | undefined;

  constructor(private readonly tokenizer: Tokenizer, source: string, where: string) {
    this.template = new ChatTemplate(source, where);
    const texts = (tokenizer as { specialTokenTexts?: { bos?: string; eos?: string; unk?: string; pad?: string } }).specialTokenTexts;
    const piece = (id: number | undefined) => (id === undefined ? undefined : tokenizer.piece(id));
    this.renderOptions = {
      bosToken: texts?.bos ?? piece(tokenizer.bosId),
      eosToken: texts?.eos ?? piece(tokenizer.eosId),
      unkToken: texts?.unk ?? piece(tokenizer.unkId),
      padToken: texts?.pad ?? piece(tokenizer.padId),
    };
    this.endOfTurnIds = this.findEndOfTurn();
  }

  render(messages: readonly ChatMessageInput[], addGenerationPrompt = true, variables?: Record<string, unknown>): string {
    // content given as parts goes to the template as given; a model that reads text only takes text parts alone
    messages.forEach((m, i) => { if (Array.isArray(m?.content)) contentText(m.content, i); });
    const calls = messages.some((m) => m.tool_calls && m.tool_calls.length > 0);
    return this.template.render(calls ? this.asTemplateTakesCalls(messages, variables) : messages, { ...this.renderOptions, addGenerationPrompt, variables });
  }

  /** assistant turns with tool calls in the form the template takes (toolCallForm) */
  private asTemplateTakesCalls(messages: readonly ChatMessageInput[], variables?: Record<string, unknown>): TemplateMessage[] {
    const form = this.toolCallForm(variables);
    return messages.map((m) => {
      if (!m.tool_calls || m.tool_calls.length === 0) return m;
      const tool_calls = m.tool_calls.map((c) => {
        const a = c.function.arguments;
        let args = a;
        if (!form.objectArguments && typeof a !== "string") args = JSON.stringify(a);
        else if (form.objectArguments && typeof a === "string") {
          try {
            args = JSON.parse(a);
          } catch {
            // not JSON: the template gets the text as given
          }
        }
        return args === a ? c : { ...c, function: { ...c.function, arguments: args } };
      });
      return { ...m, tool_calls, content: m.content === "" && form.nullContent ? null : m.content };
    });
  }

  /**
   * Whether the template writes a system message, found as llama.cpp (minja) finds it: a system
   * message with a marker in it must render, and the marker must show in the text.
   */
  systemRole(): { ok: true } | { ok: false; why: string } {
    const marker = "tsllm-system-probe";
    try {
      const text = this.render([{ role: "system", content: marker }, { role: "user", content: "x" }]);
      return text.includes(marker) ? { ok: true } : { ok: false, why: "it leaves the system message out" };
    } catch (e) {
      return { ok: false, why: `it raised: ${(e as Error).message}` };
    }
  }

  /**
   * Whether the template writes an assistant turn of two tool calls, found once as llama.cpp finds
   * supports_parallel_tool_calls (common/jinja/caps.cpp): a history with a turn of two calls and
   * one answer must render, and the second call must show (Llama 3.x's templates raise "only
   * supports single tool-calls"). Probed with the render's variables, as toolCallForm is.
   */
  writesParallelCalls(variables?: Record<string, unknown>): boolean {
    if (this.parallelCalls !== undefined) return this.parallelCalls;
    const second = "tsllm_probe_second";
    const call = (id: string, name: string) => ({ id, type: "function" as const, function: { name, arguments: { arg: "x" } } });
    try {
      const text = this.render([
        { role: "user", content: "x" },
        { role: "assistant", content: "", tool_calls: [call("call00001", "tsllm_probe"), call("call00002", second)] },
        { role: "tool", content: "y", tool_call_id: "call00001" },
        { role: "assistant", content: "z" },
        { role: "user", content: "x" },
      ], false, variables);
      this.parallelCalls = text.includes(second);
    } catch {
      this.parallelCalls = false;
    }
    return this.parallelCalls;
  }

  /**
   * How the template takes an assistant turn's tool calls, found once by rendering a call each
   * way, as llama.cpp probes a template's capabilities: arguments as the JSON string OpenAI's API
   * carries, or as an object where only an object shows (`arguments | tojson` double-encodes a
   * string; DeepSeek-R1's `'...' + arguments` fails on an object, in jinja2 too); and a turn
   * without text as null, as clients send it (DeepSeek-R1 writes the calls only when the content
   * is none), or "" for a template that cannot take null. Probed with the render's variables: a
   * template may need some to render at all (Firefunction v2's `functions`).
   */
  private toolCallForm(variables?: Record<string, unknown>): { readonly objectArguments: boolean; readonly nullContent: boolean } {
    if (this.callForm) return this.callForm;
    const key = "tsllm_probe_argument";
    const shows = (args: unknown, content: string | null): boolean => {
      // an id of nine letters and digits: Mistral's templates refuse others
      const call = { id: "call00001", type: "function" as const, function: { name: "tsllm_probe", arguments: args } };
      try {
        const out = this.template.render([{ role: "user", content: "x" }, { role: "assistant", content, tool_calls: [call] }], { ...this.renderOptions, addGenerationPrompt: false, variables });
        // (as a JSON or Python key, or Qwen3-Coder's XML parameter, which walks the arguments with |items)
        return out.includes(`"${key}":`) || out.includes(`'${key}':`) || out.includes(`<parameter=${key}>`);
      } catch {
        return false;
      }
    };
    const value = { [key]: "x" };
    for (const content of [null, ""]) {
      const asString = shows(JSON.stringify(value), content), asObject = shows(value, content);
      if (asString || asObject) return (this.callForm = { objectArguments: !asString, nullContent: content === null });
    }
    // the template writes no calls (or could not render without variables it was not given): nothing to adapt, and not kept
    return { objectArguments: false, nullContent: false };
  }

  /**
   * Token ids of the rendered conversation, ready to generate the assistant's reply. The
   * template's own markup becomes special tokens; special-token text inside a message's content
   * stays plain text (a user cannot forge a turn with "<|im_end|>"), unless
   * `parseSpecialInContent` asks for the old behaviour.
   */
  encode(messages: readonly ChatMessageInput[], variables?: Record<string, unknown>, options: EncodeChatOptions = {}): number[] {
    const { text, encodeOptions } = this.toEncode(messages, variables, options);
    return this.withBos(this.tokenizer.encode(text, encodeOptions));
  }

  /** encode()'s ids, tokenized a slice at a time with turns of the event loop between (Tokenizer.encodeAsync) */
  async encodeAsync(messages: readonly ChatMessageInput[], variables?: Record<string, unknown>, options: EncodeChatOptions = {}): Promise<number[]> {
    const { text, encodeOptions } = this.toEncode(messages, variables, options);
    return this.withBos(await this.tokenizer.encodeAsync(text, encodeOptions));
  }

  /**
   * The prompt's text as encode() tokenizes it: the conversation with the assistant's header, or
   * without it, or ending inside the last message — rendered with a marker after its content and
   * cut there, as transformers' continue_final_message cuts it.
   */
  prompt(messages: readonly ChatMessageInput[], variables?: Record<string, unknown>, options: EncodeChatOptions = {}): string {
    const last = messages.at(-1);
    if (!options.continueFinalMessage || !last) return this.render(messages, options.addGenerationPrompt ?? true, variables);
    const inReasoning = continuesReasoning(last);
    const marked = inReasoning
      ? { ...last, reasoning_content: last.reasoning_content + MARK, ...(last.thinking === undefined ? {} : { thinking: last.thinking + MARK }) }
      : { ...last, content: withMark(last.content) };
    const text = this.render([...messages.slice(0, -1), marked], false, variables);
    const at = text.lastIndexOf(MARK);
    if (at < 0) throw new ChatTemplateError(`messages[${messages.length - 1}]: the template does not write the last message's ${inReasoning ? "reasoning_content" : "content"} as given, so it cannot be continued`);
    return text.slice(0, at);
  }

  /** the rendered conversation and how to tokenize it */
  private toEncode(messages: readonly ChatMessageInput[], variables: Record<string, unknown> | undefined, options: EncodeChatOptions): { text: string; encodeOptions: EncodeOptions } {
    const text = this.prompt(messages, variables, options);
    const forged = options.parseSpecialInContent ? [] : this.forgedSpecials(messages, text, variables);
    return { text, encodeOptions: { addSpecialTokens: false, parseSpecial: true, literalRanges: forged } };
  }

  private withBos(ids: number[]): number[] {
    const bos = this.tokenizer.bosId;
    if (this.tokenizer.addBos && bos !== undefined && ids[0] !== bos) ids.unshift(bos);
    return ids;
  }

  /** the texts that tokenize as one special token (control, user-defined, unknown), longest first per first character */
  private specialTexts(): Map<string, string[]> {
    if (this.specialsByFirst) return this.specialsByFirst;
    const byFirst = new Map<string, string[]>();
    const t = this.tokenizer;
    for (let id = 0; id < t.vocabSize; id++) {
      if (!t.isSpecial(id) && id !== t.unkId) continue;
      const text = t.piece(id);
      if (!text || t.encode(text, { addSpecialTokens: false, parseSpecial: true }).length !== 1) continue;
      const list = byFirst.get(text[0]!) ?? [];
      list.push(text);
      byFirst.set(text[0]!, list);
    }
    for (const list of byFirst.values()) list.sort((a, b) => b.length - a.length);
    this.specialsByFirst = byFirst;
    return byFirst;
  }

  /**
   * [start, end) of every special-token text inside a message's own text in the rendered `text`:
   * its content and its reasoning (reasoning_content, or thinking), which a template may write back (Qwen3's)
   */
  private forgedSpecials(messages: readonly ChatMessageInput[], text: string, variables?: Record<string, unknown>): [number, number][] {
    const specials = this.specialTexts();
    const find = (s: string, from = 0, to = s.length, out: [number, number][] = [], offset = 0) => {
      for (let i = from; i < to; i++) {
        const hit = specials.get(s[i]!)?.find((sp) => s.startsWith(sp, i) && i + sp.length <= to);
        if (hit) { out.push([offset + i, offset + i + hit.length]); i += hit.length - 1; }
      }
      return out;
    };
    // each message's texts in the order templates write them: the reasoning, then the content (its text parts one by one)
    const reasoningOf = (m: ChatMessageInput) => m.reasoning_content ?? m.thinking;
    const firstOfContent = messages.map((m) => (reasoningOf(m) === undefined ? 0 : 1));
    const texts = messages.map((m) => { const r = reasoningOf(m); return r === undefined ? contentTexts(m.content) : [r, ...contentTexts(m.content)]; });
    if (!texts.some((ts) => ts.some((t) => find(t).length > 0))) return [];
    // where each text sits: render with markers in its place (templates that copy it verbatim),
    // or else find the texts in order (templates that trim or rewrite them around it)
    const marker = (i: number, k: number) => `\uE000${i}.${k}\uE001`;
    const marked = this.render(messages.map((m, i) => ({
      ...m, content: mapContentText(m.content, (_, k) => marker(i, firstOfContent[i]! + k)),
      ...(m.reasoning_content === undefined ? {} : { reasoning_content: marker(i, 0) }), ...(m.thinking === undefined ? {} : { thinking: marker(i, 0) }),
    })), true, variables);
    const out: [number, number][] = [];
    const parts = marked.split(/\uE000(\d+\.\d+)\uE001/);
    const textOf = (key: string) => {
      const [i, k] = key.split(".").map(Number);
      return texts[i!]![k!]!;
    };
    if (parts.map((p, j) => (j % 2 === 1 ? textOf(p) : p)).join("") === text) {
      let pos = 0;
      parts.forEach((p, j) => {
        const t = j % 2 === 1 ? textOf(p) : p;
        if (j % 2 === 1) find(t, 0, t.length, out, pos);
        pos += t.length;
      });
      return out;
    }
    // (reasoning whose marker the template does not write is left out of the prompt, as DeepSeek R1's drops it: nothing of it to keep plain)
    const written = new Set(parts.filter((_, j) => j % 2 === 1));
    let cursor = 0;
    texts.forEach((ts, i) => {
      for (const [k, t] of ts.entries()) {
        if ((k < firstOfContent[i]! && !written.has(`${i}.${k}`)) || find(t).length === 0) continue;
        const own = text.indexOf(t, cursor) >= 0 ? t : t.trim();
        const start = text.indexOf(own, cursor);
        if (start < 0) throw new ChatTemplateError(`messages[${i}]: its ${k >= firstOfContent[i]! ? "content" : "reasoning_content"} holds special-token text and the template rewrites it, so it cannot be kept as plain text; remove the special-token text or allow it explicitly (parseSpecialInContent)`);
        find(text, start, start + own.length, out);
        cursor = start + own.length;
      }
    });
    return out;
  }

  /**
   * Renders a finished assistant turn with a marker as its content and reads which special token
   * the template writes right after it: that token ends a turn.
   */
  private findEndOfTurn(): number[] {
    const tries: ChatMessage[][] = [
      [{ role: "user", content: "Hi" }, { role: "assistant", content: MARK }],
      [{ role: "system", content: "S" }, { role: "user", content: "Hi" }, { role: "assistant", content: MARK }],
    ];
    for (const messages of tries) {
      let text: string;
      try {
        text = this.render(messages, false);
      } catch (e) {
        if (e instanceof ChatTemplateError) continue;
        throw e;
      }
      const at = text.indexOf(MARK);
      if (at < 0) continue;
      const after = this.tokenizer.encode(text.slice(at + MARK.length), { addSpecialTokens: false, parseSpecial: true });
      const id = after.find((t) => this.tokenizer.isSpecial(t) || this.tokenizer.endOfGenerationIds.has(t));
      return id === undefined ? [] : [id];
    }
    return [];
  }
}

const cache = new WeakMap<Tokenizer, Map<string, ChatFormatter>>();

/**
 * The model has no chat template. Its message names the library's `chatTemplate` option; `reason`
 * is the same without that remedy, so the CLI and the server can name their own way to give one.
 */
export class NoChatTemplateError extends ChatTemplateError {
  override name = "NoChatTemplateError";
  readonly reason: string;
  /** the model's templates a chat can name instead (chatTemplateNames), when it has named ones */
  readonly names: readonly string[];
  /** `reason`: why the template the model names gives none (tokenizer_config.json's chat_template of the wrong kind, only named ones) */
  constructor(reason = "the model has no chat template (no tokenizer.chat_template in the GGUF, no chat_template in tokenizer_config.json)", names: readonly string[] = []) {
    super("");
    this.reason = reason;
    this.names = names;
    this.message = `${this.reason}; give one with the chatTemplate option${names.length > 0 ? " or name one with chatTemplateName" : ""}`;
  }
}

/** which of a model's templates a chat uses: one named, or the one its tools ask for */
export interface ChatTemplateChoice {
  /** the name of one of the model's templates ("default", "tool_use", "rag"...), as transformers' apply_chat_template takes a name in chat_template */
  readonly name?: string;
  /** the chat passes tools: the model's "tool_use" template is used when it has one, as transformers and llama.cpp choose it */
  readonly tools?: boolean;
}

/** every name a chat can give for the model's templates ("default" when it has one), sorted */
export function chatTemplateNames(tokenizer: Tokenizer): string[] {
  return [...(tokenizer.chatTemplate ? ["default"] : []), ...(tokenizer.namedChatTemplates?.keys() ?? [])].sort();
}

/**
 * The model's template a chat uses, chosen as transformers' get_chat_template chooses it: the one
 * named; else "tool_use" when tools are given and the model has it (llama.cpp's common_chat_templates
 * does the same); else the default. Throws NoChatTemplateError naming the templates there are.
 */
function chosenTemplate(tokenizer: Tokenizer, choice: ChatTemplateChoice): ChatTemplateSource {
  const named = tokenizer.namedChatTemplates;
  if (choice.name !== undefined) {
    const found = choice.name === "default" ? tokenizer.chatTemplate : named?.get(choice.name);
    if (found) return found;
    const names = chatTemplateNames(tokenizer);
    throw new NoChatTemplateError(`the model has no chat template named ${JSON.stringify(choice.name)} (its templates: ${names.map((n) => JSON.stringify(n)).join(", ") || "none"})`, names);
  }
  const toolUse = choice.tools ? named?.get("tool_use") : undefined;
  const found = toolUse ?? tokenizer.chatTemplate;
  if (!found) throw new NoChatTemplateError(tokenizer.chatTemplateProblem, chatTemplateNames(tokenizer));
  return found;
}

/**
 * The chat formatter of a model, parsed once per tokenizer and template. `override` replaces the
 * model's own templates (e.g. a --chat-template file); else `choice` picks one of them
 * (chosenTemplate). Throws NoChatTemplateError when the model has none to use.
 */
export function chatFormatterFor(tokenizer: Tokenizer, override?: ChatTemplateSource, choice: ChatTemplateChoice = {}): ChatFormatter {
  const found = override ?? chosenTemplate(tokenizer, choice);
  let byTemplate = cache.get(tokenizer);
  if (!byTemplate) cache.set(tokenizer, (byTemplate = new Map()));
  let f = byTemplate.get(found.source);
  if (!f) {
    f = new ChatFormatter(tokenizer, found.source, found.where);
    byTemplate.set(found.source, f);
  }
  return f;
}
