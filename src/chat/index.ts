export { ChatTemplate, ChatTemplateError, contentText, contentTexts, DEFAULT_LIMITS, mapContentText, strftime, type ChatContentPart, type ChatMessage, type ChatMessageInput, type RenderOptions, type TemplateLimits } from "./template.js";
export { ChatFormatter, chatFormatterFor, chatTemplateNames, continuesReasoning, NoChatTemplateError, withSystem, type ChatTemplateChoice, type ChatTemplateSource, type EncodeChatOptions } from "./formatter.js";
export { checkChatArguments } from "./arguments.js";
