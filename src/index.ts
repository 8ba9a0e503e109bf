// The public surface of tsllm.
export { loadModel, loadTokenizer, Model, type LoadModelOptions, type ChatOptions } from "./llm.js";
export type { GenerateOptions, GenerationResult, GenerationStep, FinishReason } from "./generation/generate.js";
export type { Timings } from "./generation/timings.js";
export type { SamplingOptions } from "./sampling/index.js";
export type { Tokenizer } from "./tokenizer/index.js";
export type { ModelInfo, LanguageModel } from "./models/model.js";
export { ChatTemplate, type ChatMessage } from "./chat/index.js";
export { computePerplexity, computeKlDivergence, type PerplexityOptions, type PerplexityResult, type KlDivergenceResult } from "./perplexity/index.js";
export { downloadModel, resolveModelReference, listCachedRepos, removeCachedRepo, HubError, type DownloadOptions, type DownloadResult } from "./hub/index.js";
export { convertHFToGGUF, type ConvertOptions, type ConvertResult } from "./convert/convert.js";
export { readGGUFHeader, GGUFError } from "./formats/gguf-reader.js";
export { writeGGUF } from "./formats/gguf-writer.js";
