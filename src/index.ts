export { loadModel, loadTokenizer, Model, type LoadModelOptions } from "./llm.js";
export type { GenerateOptions, GenerationResult, GenerationStep, FinishReason } from "./generation/generate.js";
export type { Timings } from "./generation/timings.js";
export type { SamplingOptions } from "./sampling/index.js";
export type { Tokenizer } from "./tokenizer/index.js";
export type { ModelInfo, LanguageModel } from "./models/model.js";
