export { DEFAULT_BLOCK_SIZE, KVBlockPool, type Alloc, type KVPoolStats } from "./block-pool.js";
export { KVCache } from "./kv-cache.js";
