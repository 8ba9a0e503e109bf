/** Model files: GGUF and safetensors readers and writers, Hugging Face config files, tensor sources. */
export { GGUFError, GGUFMetadata, readGGUFHeader } from "./gguf-reader.js";
export { GGUFValueType, type GGUFEntry, type GGUFHeader, type GGUFTensorInfo } from "./gguf-types.js";
export { ggufEntry, writeGGUF, type GGUFTensorSpec, type GGUFWriteEntry } from "./gguf-writer.js";
export { firstSplitPart, GGUFSplitTensorSource, readGGUFSplit, splitCount } from "./gguf-split.js";
export { FileFieldError, readFailure, type FileFieldErrorCode } from "./errors.js";
export { HF_ARCHITECTURES, HFConfigError, generationConfigOf, readGenerationConfig, readHFConfig, readJsonObject, type GenerationDefaults, type HFModelConfig } from "./hf-config.js";
export { SafetensorsError, SafetensorsModel, type SafetensorsDType, type SafetensorsTensorInfo } from "./safetensors.js";
export { writeSafetensors, writeSafetensorsSharded, type SafetensorsTensorSpec } from "./safetensors-writer.js";
export { GGUFTensorSource, type SourceTensorInfo, type TensorSource } from "./tensor-source.js";
export { assertNotAnInput, writeOutputFile } from "./output-file.js";
export { HF_ENCODER_ARCHITECTURES, isEncoderModel, loadsAsEncoder, readHFEncoderConfig, type EncoderFamily, type EncoderHead, type HFEncoderConfig, type ProblemType } from "./hf-encoder-config.js";
export { readSentenceTransformerConfig, transformerFolder, type Pooling, type SentenceTransformerConfig } from "./sentence-transformers.js";
export { readWholeFile } from "./read-file.js";
