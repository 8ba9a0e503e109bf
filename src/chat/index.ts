export { ChatTemplate, ChatTemplateError, DEFAULT_LIMITS, strftime, type ChatMessage, type RenderOptions, type TemplateLimits } from "./template.js";
export { ChatFormatter, chatFormatterFor, continuesReasoning, findChatTemplate, NoChatTemplateError, withSystem, type ChatTemplateSource, type EncodeChatOptions, type StringMetadata } from "./formatter.js";
