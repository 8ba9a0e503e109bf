import type { LanguageModel } from "../../src/models/index.js";

/** the passes a model was given through forwardAsync / forwardBatchAsync, and their token rows */
export interface PassCount {
  passes: number;
  rows: number;
}

/**
 * Counts the passes `lm` (a draft model's) is given from now on, and the token rows of each, as
 * the engine calls it: the judge of EngineStats' and /metrics' draft counters. Set the fields back
 * to 0 to count afresh.
 */
export function countPasses(lm: LanguageModel): PassCount {
  const count: PassCount = { passes: 0, rows: 0 };
  const forwardAsync = lm.forwardAsync.bind(lm), forwardBatchAsync = lm.forwardBatchAsync.bind(lm);
  lm.forwardAsync = (tokens, cache, options) => {
    count.passes++;
    count.rows += tokens.length;
    return forwardAsync(tokens, cache, options);
  };
  lm.forwardBatchAsync = (seqs) => {
    count.passes++;
    for (const q of seqs) count.rows += q.tokens.length;
    return forwardBatchAsync(seqs);
  };
  return count;
}
