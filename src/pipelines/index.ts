/** Hugging Face-style pipelines and sentence embeddings. */
export {
  pipeline, embed, loadEmbeddingModel, openEmbeddingModel, DEFAULT_MODELS, PIPELINE_TASKS,
  type PipelineTask, type PipelineOptions, type AnyPipeline, type EmbeddingModel,
  type TextClassificationPipeline, type TokenClassificationPipeline, type FillMaskPipeline, type FeatureExtractionPipeline, type TextGenerationPipeline,
} from "./pipeline.js";
export type { TextClassificationInput, TextClassificationOptions, LabelScore } from "./text-classification.js";
export type { AggregationStrategy, TokenClassificationOptions, TokenEntity, EntityGroup } from "./token-classification.js";
export type { FillMaskOptions, FillMaskProposal } from "./fill-mask.js";
export type { FeatureExtractionOptions } from "./feature-extraction.js";
export type { Truncation } from "./inputs.js";
export type { TextGenerationOptions } from "./text-generation.js";
export { embeddingsOf, embdNormalize, tokenIdsProblem, type DecoderEmbeddingModel, type EmbeddingVectors, type EmbedOptions, type EmbeddingInput, type PromptOptions } from "./embed.js";
export type { EncoderLoadOptions } from "./encoder-runner.js";
