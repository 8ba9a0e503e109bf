import type { Tokenizer } from "../tokenizer/types.js";
import { ChatTemplate, ChatTemplateError, type ChatMessage, type RenderOptions } from "./template.js";

/** Something with GGUF-style string metadata (GGUFMetadata). */
export interface StringMetadata {
  string(key: string): string | undefined;
}

/** Where a model's chat template comes from: tokenizer_config.json (HF folders) or GGUF metadata. */
export function findChatTemplate(tokenizer: Tokenizer, metadata?: StringMetadata): { source: string; where: string } | undefined {
  const fromTokenizer = (tokenizer as { chatTemplate?: unknown }).chatTemplate;
  if (typeof fromTokenizer === "string") return { source: fromTokenizer, where: "tokenizer_config.json: chat_template" };
  const fromGGUF = metadata?.string("tokenizer.chat_template");
  if (fromGGUF !== undefined) return { source: fromGGUF, where: "GGUF tokenizer.chat_template" };
  return undefined;
}

/** Puts a system message first (replacing one that is already there) when `system` is given. */
export function withSystem(messages: readonly ChatMessage[], system: string | undefined): ChatMessage[] {
  if (system === undefined) return [...messages];
  const rest = messages[0]?.role === "system" ? messages.slice(1) : messages;
  return [{ role: "system", content: system }, ...rest];
}

const MARK = "\u0001tsllm-reply\u0001";

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

  render(messages: readonly ChatMessage[], addGenerationPrompt = true, variables?: Record<string, unknown>): string {
    return this.template.render(messages, { ...this.renderOptions, addGenerationPrompt, variables });
  }

  /** Token ids of the rendered conversation, ready to generate the assistant's reply. */
  encode(messages: readonly ChatMessage[], variables?: Record<string, unknown>): number[] {
    const ids = this.tokenizer.encode(this.render(messages, true, variables), { addSpecialTokens: false, parseSpecial: true });
    const bos = this.tokenizer.bosId;
    if (this.tokenizer.addBos && bos !== undefined && ids[0] !== bos) ids.unshift(bos);
    return ids;
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
 * The chat formatter of a model, parsed once per tokenizer and template. `override` replaces the
 * model's own template (e.g. a --chat-template file). Throws when the model has none.
 */
export function chatFormatterFor(tokenizer: Tokenizer, metadata?: StringMetadata, override?: { source: string; where: string }): ChatFormatter {
  const found = override ?? findChatTemplate(tokenizer, metadata);
  if (!found) throw new ChatTemplateError("the model has no chat template (no tokenizer.chat_template in the GGUF, no chat_template in tokenizer_config.json); give one with --chat-template FILE");
  let byTemplate = cache.get(tokenizer);
  if (!byTemplate) cache.set(tokenizer, (byTemplate = new Map()));
  let f = byTemplate.get(found.source);
  if (!f) {
    f = new ChatFormatter(tokenizer, found.source, found.where);
    byTemplate.set(found.source, f);
  }
  return f;
}
