/** The arguments of a chat call, checked where it is made (Model.chat / streamChat, and the browser build's page). */
import { checkFlags, OptionError, shownValue } from "../units/index.js";
import type { ChatTemplateSource } from "./formatter.js";

/**
 * chat's own arguments, checked as the typed signature would before they reach the template (a
 * messages string, a system or chatTemplate that is not text, crashed inside it with "Cannot
 * read properties of undefined"); the generation options are checked by the stream
 * that runs the reply (Model.stream, or the browser build's page before it posts the request)
 */
export function checkChatArguments(messages: unknown, options: unknown): void {
  if (!Array.isArray(messages)) throw new OptionError(`messages: expected an array of { role, content } messages, got ${shownValue(messages)}`, "messages");
  messages.forEach((m: unknown, i) => {
    const role = typeof m === "object" && m !== null ? (m as { role?: unknown }).role : undefined;
    if (typeof role !== "string") throw new OptionError(`messages[${i}]: expected a message { role: string, content }, got ${typeof m === "object" && m !== null ? `role ${shownValue(role)}` : shownValue(m)}`, "messages");
  });
  if (typeof options !== "object" || options === null || Array.isArray(options)) throw new OptionError(`chat options: expected an object, got ${shownValue(options)}`, "options");
  const { system, chatTemplate, chatTemplateName, parseSpecialInContent } = options as Record<string, unknown>;
  if (system !== undefined && typeof system !== "string") throw new OptionError(`system: expected a string, got ${shownValue(system)}`, "system");
  const templateLike = typeof chatTemplate === "string" || (typeof chatTemplate === "object" && chatTemplate !== null && typeof (chatTemplate as ChatTemplateSource).source === "string" && typeof (chatTemplate as ChatTemplateSource).where === "string");
  if (chatTemplate !== undefined && !templateLike) throw new OptionError(`chatTemplate: expected a Jinja template's source (a string) or { source, where }, got ${shownValue(chatTemplate)}`, "chatTemplate");
  if (chatTemplateName !== undefined && typeof chatTemplateName !== "string") throw new OptionError(`chatTemplateName: expected the name of one of the model's chat templates (a string), got ${shownValue(chatTemplateName)}`, "chatTemplateName");
  if (chatTemplateName !== undefined && chatTemplate !== undefined) throw new OptionError("chatTemplateName: give a template (chatTemplate) or the name of one of the model's (chatTemplateName), not both", "chatTemplateName");
  checkFlags({ parseSpecialInContent }, ["parseSpecialInContent"]);
}
