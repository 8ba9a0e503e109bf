/**
 * Public surface of the reference backend: the backend itself and its per-format dot kernels
 * (pure functions, so other backends' kernels can be tested against them one by one).
 */
export { checkEpilogue, createReferenceBackend, matrixDims, matrixShape } from "./backend.js";
export { device, host, hostMemory, hostMemoryOps, type HostMemoryOps } from "./host-memory.js";
export { VEC_DOT, type DotKernel, type VecDot } from "./vec-dot.js";
export { dotBF16, dotF16, dotF32 } from "./dot-float.js";
export { dotQ4_0 } from "./dot-q4_0.js";
export { dotQ4_1 } from "./dot-q4_1.js";
export { dotQ5_0 } from "./dot-q5_0.js";
export { dotQ5_1 } from "./dot-q5_1.js";
export { dotQ8_0 } from "./dot-q8_0.js";
export { dotQ2_K } from "./dot-q2_k.js";
export { dotQ3_K } from "./dot-q3_k.js";
export { dotQ4_K } from "./dot-q4_k.js";
export { dotQ5_K } from "./dot-q5_k.js";
export { dotQ6_K } from "./dot-q6_k.js";
export { dotIQ4_NL, dotIQ4_XS } from "./dot-iq4.js";
export { attentionEncoded, attentionMatmulOrder } from "./kv-attention.js";
export { quantizeActivationsQ8_0 } from "./activation-quant.js";
export { bytesOf, checkAttentionOrder, checkKVCacheType, halfSidesOf, decodeKV, encodeKVRow, F32_CACHE, F32_ENCODING, headRowIndex, isPlainF32, KV_CACHE_TYPES, kvBytes, kvCacheEncoding, kvRowFloats, parseKVCacheType, type KVCacheEncoding, type KVCacheType, type KVCacheTypes, type KVRowEncoding } from "./kv-encoding.js";
