/**
 * The messages between a page (client.ts) and the engine worker (engine-worker.ts). Every
 * request carries an id; the worker answers it with one `result` or `error`, and a generation
 * sends `step` messages before that. `abort` ends a generation early (its result then has
 * finishReason "abort"), or a load (its error is an AbortError); `aborted` on the request itself
 * says the page's signal was aborted before it was sent (an abort message would come after the
 * generation's first token).
 */
import type { ChatMessageInput } from "../chat/index.js";
import type { RequestLimits } from "../engine/request-checks.js";
import type { ChatOptions } from "../llm.js";
import type { ForwardTiming, GenerateOptions, GenerationResult, GenerationStep } from "../generation/index.js";
import type { ModelInfo } from "../models/index.js";
import type { BrowserLoadOptions, BrowserModelSource } from "./engine.js";
import type { SentError } from "./errors.js";
import type { CachedModel, LoadProgress } from "./model-cache.js";

/** generation options that survive postMessage: everything but the signal (abort instead) and a draft model */
export type WorkerGenerateOptions = Omit<GenerateOptions, "signal" | "draftModel">;
export type WorkerChatOptions = Omit<ChatOptions, "signal" | "draftModel">;

export type Request =
  | { id: number; op: "load"; source: BrowserModelSource; options?: WorkerLoadOptions; progress?: boolean; aborted?: boolean }
  | { id: number; op: "tokenize"; text: string; addSpecialTokens?: boolean }
  | { id: number; op: "detokenize"; tokens: number[] }
  | { id: number; op: "generate"; prompt: string | number[]; options?: WorkerGenerateOptions; aborted?: boolean }
  | { id: number; op: "chat"; messages: ChatMessageInput[]; options?: WorkerChatOptions; aborted?: boolean }
  | { id: number; op: "timeForward"; promptTokens: number[]; genTokens: number; contextSize: number }
  | { id: number; op: "abort"; target: number }
  | { id: number; op: "unload" }
  | { id: number; op: "cachedModels" }
  | { id: number; op: "deleteCachedModels"; url?: string };

/** load options that survive postMessage (progress comes back as messages, a signal becomes an abort message) */
export type WorkerLoadOptions = Omit<BrowserLoadOptions, "onProgress" | "signal">;

/** what `load` answers */
export interface LoadedModel {
  /** the URL or the file's name */
  source: string;
  info: ModelInfo;
  /** the backend that runs it */
  backend: string;
  /** threads the wasm backend computes on (1 for the others; 1 on a page that is not cross-origin isolated) */
  threads: number;
  /** why the wasm backend runs on fewer threads than asked for (the page is not cross-origin isolated) and which headers give them; also logged to the console */
  threadsNote?: string;
  /** the wasm backend's kernels build: "relaxed" where the browser has Relaxed SIMD, else "plain" (SIMD128) */
  simd?: "relaxed" | "plain";
  /** the wasm backend's WebAssembly memories holding the weights (1 unless they outgrow one) */
  memories?: number;
  contextSize: number;
  /** what the engine checks a request against (the vocabulary, the context, the sequences at once): the page checks stream() with them at its call */
  limits: RequestLimits;
  /** the maxTokens a request that leaves it out gets (the model's generation config's, else 256, as Model.stream applies it): the page checks a token prompt's KV worst case with it at the call */
  defaultMaxTokens: number;
  loadMs: number;
  /** whether the GGUF has a chat template (chat() needs one) */
  hasChatTemplate: boolean;
  /** the end-of-turn ids of the GGUF's chat template (a chat ends at them; streamChat's stopTokens come after them): the page checks streamChat's stopTokens with them at its call; absent without a template or where it does not parse */
  endOfTurnIds?: number[];
  /** bytes of the GGUF file */
  size: number;
  /** the file came from the model cache: nothing was downloaded */
  fromCache: boolean;
  /** the file is in the model cache now (the next load of this URL makes no request) */
  cached: boolean;
  /** why a URL's file is not in the model cache though caching was asked for (e.g. the storage quota is used up) */
  notCached?: string;
  /** the cached copy was damaged (it differed from the download, or no longer loaded): what was wrong, and that it was downloaded again */
  refetched?: string;
}

export type Reply =
  // the worker's module ran (its first message): an error event before it is a worker that never started
  | { id: 0; kind: "ready" }
  // a request the worker could not read (messageerror): which one is unknown, so every pending call rejects with this
  | { id: 0; kind: "lost"; message: string }
  | { id: number; kind: "result"; value: unknown }
  | ({ id: number; kind: "error" } & SentError)
  | { id: number; kind: "step"; step: GenerationStep & { choice?: number } }
  | { id: number; kind: "progress"; progress: LoadProgress };

export type { CachedModel, ForwardTiming, GenerationResult, LoadProgress };
