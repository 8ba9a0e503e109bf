export { rmsNorm, layerNorm } from "./norm.js";
export { swiglu, gelu } from "./activations.js";
export { applyRope, ropeAngles, type RopeParams } from "./rope.js";
export { attention } from "./attention.js";
export { addBias, addInPlace } from "./elementwise.js";
