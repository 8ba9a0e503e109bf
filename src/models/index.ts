export type { ForwardOptions, LanguageModel, ModelInfo } from "./model.js";
export type { SequenceInput } from "./batch.js";
export { openModel, withEndOfGeneration, type OpenedModel, type OpenModelOptions } from "./open.js";
export { buildModel, buildModelFrom, decoderShape, SUPPORTED_ARCHITECTURES } from "./registry.js";
export type { DecoderShape } from "./hyperparameters.js";
export type { LoadQuantization, WeightStoreOptions } from "./weights.js";
export { LOAD_QUANTIZATIONS } from "./weights.js";
export { EncoderModel, type EncoderInfo, type EncoderInput, type EncoderOutput, type EncodeOptions as EncoderEncodeOptions } from "./encoder.js";
export { openEncoder, type OpenedEncoder } from "./open-encoder.js";
