/** Public surface of src/tensor: ggml dtypes, the Tensor type, and the quant block formats. */
export * from "./dtypes.js";
export * from "./tensor.js";
export * from "./quant/index.js";
export { convertRows } from "./convert-rows.js";
export * from "./quantization.js";
