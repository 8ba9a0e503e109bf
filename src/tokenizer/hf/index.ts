export { HFTokenizer, type HFTokenizerSource } from "./hf-tokenizer.js";
export { tokenizerFromFolder, tokenizerFilesIn } from "./folder.js";
export { gpt2TokenizerJson, bertTokenizerJson } from "./legacy.js";
export { windowedStreamDecoder } from "./stream.js";
