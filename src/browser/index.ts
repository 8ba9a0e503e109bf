/**
 * tsllm in a web page: the browser build's entry for pages (bundled to dist-browser/tsllm.js
 * by `npm run build:browser`). The engine runs in a dedicated Worker (engine-worker.js, built
 * from engine-worker.ts); a page drives it with TsllmWorker: load a GGUF from a URL or a File,
 * tokenize, generate / stream / chat with the library's options, timings in each result.
 * Code that runs in a worker of its own imports loadBrowserModel from ./engine.ts instead,
 * which returns the library's Model. See docs/browser.md.
 */
export { TsllmWorker, type StreamOptions } from "./client.js";
// the library's error classes, as a worker's refusal is rebuilt on the page (errors.ts): `e instanceof OptionError` as in Node
export { ChatTemplateError, NoChatTemplateError } from "../chat/index.js";
export { RequestError } from "../engine/errors.js";
export { GGUFError } from "../formats/gguf-reader.js";
// GGUFError's base, the class Node's README tells a caller to catch for any refused model file (code, path, field)
export { FileFieldError, type FileFieldErrorCode } from "../formats/errors.js";
export { DisposedError, OptionError } from "../units/index.js";
export type { BrowserLoadOptions, BrowserModelSource } from "./engine.js";
export type { BrowserBackendName, BrowserBackendOptions } from "./backends.js";
export type { CachedModel, LoadedModel, LoadProgress, WorkerChatOptions, WorkerGenerateOptions, WorkerLoadOptions } from "./protocol.js";
export type { ForwardTiming, GenerateOptions, GenerationResult, GenerationStep, Timings } from "../generation/index.js";
export type { SamplingOptions } from "../sampling/index.js";
export type { ChatContentPart, ChatMessage, ChatMessageInput } from "../chat/index.js";
