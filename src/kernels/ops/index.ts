export { rmsNorm, layerNorm } from "./norm.js";
export { swiglu, gelu, geluErf, erf, relu, tanh } from "./activations.js";
export { bidirectionalAttention } from "./bidirectional-attention.js";
export { applyRope, ropeAngles, type RopeParams } from "./rope.js";
export { attention } from "./attention.js";
export { addBias, addInPlace } from "./elementwise.js";
