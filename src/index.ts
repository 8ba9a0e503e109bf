// The public surface of tsllm.
export { loadModel, loadTokenizer, Model, type LoadModelOptions, type ChatOptions, type ChoiceStep, type GenerationRun } from "./llm.js";
export type { GenerateOptions, GenerationResult, GenerationStep, TokenStep, EndStep, EndToken, Choice, FinishDetail, FinishReason, Timings, TokenLogprob, TopLogprob, PromptLogprobs } from "./generation/index.js";
export { RequestError, type Engine, type EngineStats, type RequestEvent } from "./engine/index.js";
export { DisposedError, OptionError } from "./units/index.js";
export { samplerStepsFromLlamaCpp, type SamplerOrder, type SamplerStep, type SamplingOptions } from "./sampling/index.js";
export type { Tokenizer, EncodeOptions, DecodeOptions, StreamDecoder, StreamDecoderOptions } from "./tokenizer/index.js";
export type { ModelInfo, LanguageModel } from "./models/index.js";
export { ChatTemplate, ChatTemplateError, NoChatTemplateError, type ChatContentPart, type ChatMessage, type ChatMessageInput, type ChatTemplateSource } from "./chat/index.js";
export { startServer, OpenAIServer, type ServeOptions } from "./server/index.js";
export { computePerplexity, computeKlDivergence, type PerplexityOptions, type PerplexityProgress, type PerplexityResult, type KlDivergenceOptions, type KlDivergenceProgress, type KlDivergenceResult } from "./perplexity/index.js";
export { downloadModel, resolveModelReference, listCachedRepos, removeCachedRepo, HubError, ModelNotFoundError, type HubErrorCode, type DownloadOptions, type DownloadResult, type DownloadProgress, type CachedRepo, type RemoveResult } from "./hub/index.js";
export { convertHFToGGUF, quantizeModel, type ConvertOptions, type ConvertResult, type QuantizeOptions, type QuantizeResult, type TypeFallback } from "./convert/index.js";
export { planMemory, checkMemoryPlan, availableMemoryBytes, type MemoryPlan, type PlanRequest } from "./engine/index.js";
export { loadPlanRequest } from "./llm.js";
export { QUANTIZATIONS, type Quantization } from "./tensor/index.js";
export { KV_CACHE_TYPES, type KVCacheType } from "./kernels/index.js";
export { readGGUFHeader, GGUFError } from "./formats/gguf-reader.js";
export { FileFieldError, HFConfigError, SafetensorsError, type FileFieldErrorCode } from "./formats/index.js";
export { writeGGUF } from "./formats/gguf-writer.js";
export {
  pipeline, embed, loadEmbeddingModel, openEmbeddingModel, embeddingsOf, DEFAULT_MODELS,
  type DecoderEmbeddingModel, type EmbeddingVectors, type PromptOptions, type PipelineTask, type PipelineOptions, type EmbeddingModel, type EmbeddingInput, type EmbedOptions, type TextClassificationOptions, type TokenClassificationOptions,
  type FillMaskOptions, type FeatureExtractionOptions, type TextGenerationOptions, type AggregationStrategy, type Truncation, type TextClassificationPipeline, type TokenClassificationPipeline,
  type FillMaskPipeline, type FeatureExtractionPipeline, type TextGenerationPipeline,
} from "./pipelines/index.js";
