export { convertHFToGGUF, CONVERT_TYPES, type ConvertOptions, type ConvertResult, type ConvertType } from "./convert.js";
export { HFTensorSource, hfNameMap, permuteHeadRows, transposeBytes } from "./hf-tensors.js";
export { hfModelMetadata } from "./hf-metadata.js";
export { encoderLayout } from "./hf-encoder-tensors.js";
export { quantizeModel, tensorTypesRefusal, QUANTIZE_TYPES, TENSOR_TYPES, type QuantizeOptions, type QuantizeResult } from "./quantize.js";
export type { TypeFallback } from "./quant-mixture.js";
