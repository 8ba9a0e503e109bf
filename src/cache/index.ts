export { DEFAULT_BLOCK_SIZE, KV_ALLOCATION_REMEDY, KV_POOL_FULL_REMEDY, KVBlockPool, kvArrayBytesPerToken, kvBlocksPerBuffer, kvBytesForContext, kvBytesPerToken, type KVStorage, type KVPoolStats, type KVShape } from "./block-pool.js";
export { KVCache } from "./kv-cache.js";
