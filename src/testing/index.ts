/** Test-data generation: seeded RNG, random quantized rows, random-weight GGUF models. */
export { Rng, deriveSeed } from "./rng.js";
export { randomQuantizedRow, canRandomQuantize } from "./random-quant.js";
export {
  writeRandomModel,
  planRandomModel,
  randomModelMetadata,
  readTokenizerEntries,
  type RandomModelSpec,
  type RandomModelArch,
  type RandomTensorPlan,
} from "./random-model.js";
export { SHARED_DIR, SMOLLM_135M, TINYLLAMA_1_1B, tinyLlama, tinyQwen2, tinyQwen3, tinyGpt2 } from "./presets.js";
export { ensureRandomModel, randomModelKey, defaultModelCacheDir } from "./model-cache.js";
export { splitGGUF } from "./split-gguf.js";
export { ensureLlama3Vocab } from "./llama3-vocab.js";
export { exportLlamaOnnx, type OnnxExportOptions } from "./onnx-export.js";
