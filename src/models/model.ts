import type { KVCache } from "../cache/index.js";
import type { SequenceInput } from "./batch.js";

/** What every architecture exposes to generation. */
export interface ModelInfo {
  readonly architecture: string;
  readonly vocabSize: number;
  readonly embeddingLength: number;
  readonly blockCount: number;
  readonly headCount: number;
  readonly headCountKv: number;
  readonly headDim: number;
  readonly feedForwardLength: number;
  /** context length the model was trained with */
  readonly contextLength: number;
  /** positions the model can compute at all (learned position embeddings: GPT-2's position_embd rows); undefined: no such limit (RoPE) */
  readonly maxPositions?: number;
  readonly parameterCount: number;
}

export interface ForwardOptions {
  /** return logits for every input token (nTokens * vocab) instead of only the last one */
  readonly allLogits?: boolean;
}

export interface LanguageModel {
  readonly info: ModelInfo;
  createCache(contextSize: number): KVCache;
  /**
   * Runs `tokens` at positions cache.length, cache.length + 1, ... through every layer in one
   * batched pass, appends their K/V to the cache and returns the logits of the last token
   * (or of all tokens with `allLogits`).
   */
  forward(tokens: readonly number[], cache: KVCache, options?: ForwardOptions): Float32Array;
  /**
   * Several sequences (each with its own cache, ragged lengths) in one pass: every weight
   * matrix is applied once to all their rows. Returns each sequence's last-token logits.
   */
  forwardBatch(seqs: readonly SequenceInput[]): Float32Array[];
  /**
   * forwardBatch as a pass that pauses (yields) between its stages — after the embedding, after
   * each layer's attention, after its feed-forward up-projection and after each layer — so that a caller driving it can give its event
   * loop a turn mid-pass. Its result is each sequence's last-token logits (every token's, back to
   * back, for `logits: "all"`), or undefined for a sequence whose `logits` is false (a prompt
   * chunk that does not end the prompt). While a pass
   * is paused the model's other passes refuse to start: they would overwrite its activations.
   */
  passBatch(seqs: readonly SequenceInput[]): Generator<void, (Float32Array | undefined)[]>;
}

/** Reusable activation buffers, grown on demand and kept across decode steps. */
export class Scratch {
  private readonly buffers = new Map<string, Float32Array>();
  get(name: string, size: number): Float32Array {
    let b = this.buffers.get(name);
    if (!b || b.length < size) {
      b = new Float32Array(Math.max(size, (b?.length ?? 0) * 2));
      this.buffers.set(name, b);
    }
    return b.subarray(0, size);
  }
}
