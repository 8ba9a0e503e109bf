import type { KVCache } from "../cache/index.js";

/** One sequence of a batched forward pass: its new tokens and the KV cache they extend. */
export interface SequenceInput {
  readonly tokens: readonly number[];
  readonly cache: KVCache;
  /** the last token's logits (true, the default), every token's ("all": speculative verification), or none (a prompt chunk that more chunks follow) */
  readonly logits?: boolean | "all";
}

export interface Segment {
  /** first row of this sequence in the concatenated batch */
  readonly offset: number;
  readonly count: number;
  readonly cache: KVCache;
  /** position of its first new token (the cache length before the pass) */
  readonly startPos: number;
  /** which of this sequence's logits the pass computes */
  readonly logits: boolean | "all";
}

/** Several sequences laid out back to back: matmuls see one matrix of rows, attention and the cache see segments. */
export interface BatchLayout {
  readonly n: number;
  readonly tokens: number[];
  readonly positions: number[];
  readonly segments: Segment[];
}

/** Validates the whole batch before any work is done (token ids, cache room, no cache twice). */
export function layoutBatch(seqs: readonly SequenceInput[], vocabSize: number): BatchLayout {
  if (seqs.length === 0) throw new Error("forward: no sequences");
  const tokens: number[] = [];
  const positions: number[] = [];
  const segments: Segment[] = [];
  const seen = new Set<KVCache>();
  for (const [i, { tokens: ids, cache, logits = true }] of seqs.entries()) {
    if (ids.length === 0) throw new Error(`forward: sequence ${i} has no tokens`);
    if (seen.has(cache)) throw new Error(`forward: sequence ${i} uses a KV cache that another sequence of the batch uses`);
    seen.add(cache);
    cache.ensureRoom(ids.length);
    for (const t of ids) {
      if (!Number.isInteger(t) || t < 0 || t >= vocabSize) throw new Error(`token id ${t} is outside the vocabulary [0, ${vocabSize})`);
    }
    segments.push({ offset: tokens.length, count: ids.length, cache, startPos: cache.length, logits });
    for (let j = 0; j < ids.length; j++) {
      tokens.push(ids[j]!);
      positions.push(cache.length + j);
    }
  }
  return { n: tokens.length, tokens, positions, segments };
}

/** rows whose logits are wanted: every row (all), or each segment's last row or all its rows, as it asks */
export function outputRows(layout: BatchLayout, all: boolean): number[] {
  if (all) return layout.tokens.map((_, i) => i);
  return layout.segments.flatMap((s) => {
    if (s.logits === "all") return Array.from({ length: s.count }, (_, j) => s.offset + j);
    return s.logits ? [s.offset + s.count - 1] : [];
  });
}
