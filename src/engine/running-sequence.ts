import type { KVCache } from "../cache/index.js";

/** A sequence the engine runs: the tokens its cache must hold and the KV cache (in the engine's pool) they are computed into. */
export class RunningSequence {
  /** set by its strategy when it takes no more steps */
  finished = false;
  /**
   * its request was preempted after its prompt was computed: its rows are being recomputed from
   * its tokens (as a prompt is, in chunks), the last chunk's logits going to its strategy as a
   * decode's would; cleared by that chunk
   */
  recomputing = false;
  /**
   * where its recompute ends: its tokens' end, the last chunk's logits going to the strategy; for a
   * sequence that wants every row's logits, where its pending tokens start (they are computed after
   * the recompute as before: a speculative proposal verified whole)
   */
  recomputeTo = 0;
  /** the strategy wants the logits of every computed token of its next chunk, not only the last (speculative verification) */
  allLogits = false;
  /**
   * leading positions whose rows were all computed in chunks of two or more rows (or came from the
   * prefix cache): only these may be cached as prefixes. A decoded token's row is computed alone,
   * in attention's one-query order, so its K/V differ in the last bits from what a prompt's chunk
   * computes for the same tokens (Scheduler.cacheFullBlocks)
   */
  chunkedRows = 0;

  constructor(
    /** prompt and chosen tokens; those past cache.length are pending (the next step computes them) */
    public tokens: number[],
    readonly cache: KVCache,
  ) {}

  /** tokens whose K/V the cache does not hold yet */
  get pending(): number {
    return this.tokens.length - this.cache.length;
  }
}
