export type { ForwardOptions, LanguageModel, ModelInfo } from "./model.js";
export type { SequenceInput } from "./batch.js";
export { openModel, withEndOfGeneration, type OpenedModel, type OpenModelOptions } from "./open.js";
export { buildModel, buildModelFrom, SUPPORTED_ARCHITECTURES } from "./registry.js";
export { type LoadQuantization, type WeightStoreOptions } from "./weights.js";
