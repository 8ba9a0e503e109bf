import type { KVCache } from "../cache/index.js";
import type { Backend, DeviceArray, KVCacheTypes } from "../kernels/index.js";
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
  /** how the caches createCache makes store K and V */
  readonly kvCacheTypes: KVCacheTypes;
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
  /** forward on any backend: the logits come back once the backend has read them (a GPU's read is asynchronous) */
  forwardAsync(tokens: readonly number[], cache: KVCache, options?: ForwardOptions): Promise<Float32Array>;
  /** forwardBatch on any backend */
  forwardBatchAsync(seqs: readonly SequenceInput[]): Promise<Float32Array[]>;
  /**
   * forwardBatch as a pass that pauses (yields) between its stages — after the embedding, after
   * each layer's attention, after its feed-forward up-projection and after each layer — so that a caller driving it can give its event
   * loop a turn mid-pass. Its result is each sequence's last-token logits (every token's, back to
   * back, for `logits: "all"`), or undefined for a sequence whose `logits` is false (a prompt
   * chunk that does not end the prompt). While a pass
   * is paused the model's other passes refuse to start: they would overwrite its activations.
   */
  passBatch(seqs: readonly SequenceInput[]): Pass<(Float32Array | undefined)[]>;
  /**
   * Every token's hidden state after the final norm (tokens x embeddingLength per sequence), the
   * vectors the LM head would read: what llama.cpp's embedding mode pools. Runs without pausing
   * on a backend that reads synchronously.
   */
  hiddenStatesAsync(seqs: readonly SequenceInput[]): Promise<Float32Array[]>;
}

/**
 * A forward pass as a generator. It yields `undefined` between its stages (its driver may give
 * the event loop a turn, then calls next()) and, where the backend reads results back
 * asynchronously (a GPU), the promise of a read: the driver awaits it and passes the result to
 * next(result). `runPass` drives one to its end; `drainPass` does so without awaiting, for
 * backends that read synchronously.
 */
export type Pass<T> = Generator<Promise<Float32Array> | undefined, T, Float32Array | undefined>;

/** the host copy of `a`: at once where the backend reads synchronously, else through the pass's driver */
export function* readBack(backend: Backend, a: DeviceArray): Pass<Float32Array> {
  if (backend.readSync) return backend.readSync(a);
  const result = yield backend.read(a);
  if (!result) throw new Error(`${backend.name} backend: a pass's read was resumed without its result (drive passes with runPass)`);
  return result;
}

/** runs a pass to its end without pausing; a backend that reads asynchronously needs runPass */
export function drainPass<T>(pass: Pass<T>, backendName: string): T {
  for (;;) {
    const r = pass.next();
    if (r.done) return r.value;
    if (r.value !== undefined) {
      r.value.catch(() => {}); // nobody awaits it: the error below says why
      throw new Error(`the ${backendName} backend reads its results asynchronously: this call cannot wait for them; use the asynchronous API (forwardAsync, encodeAsync, generate / stream / chat)`);
    }
  }
}

/** drives a pass to its end, awaiting its reads; `pause` is called at every stage boundary (it may give the event loop a turn) */
export async function runPass<T>(pass: Pass<T>, pause: () => Promise<void> | undefined = () => undefined): Promise<T> {
  let sent: Float32Array | undefined;
  let done = false;
  try {
    for (;;) {
      const r = pass.next(sent);
      sent = undefined;
      if (r.done) { done = true; return r.value; }
      if (r.value !== undefined) sent = await r.value;
      else {
        const p = pause();
        if (p) await p;
      }
    }
  } finally {
    // a read or a pause that failed: end the pass, so its finally blocks run (a model's "pass under way" guard)
    if (!done) pass.return(undefined as T);
  }
}

/** Reusable activation buffers in the backend's memory, grown on demand and kept across decode steps. */
export class Scratch {
  private readonly buffers = new Map<string, DeviceArray>();
  constructor(private readonly backend: Backend) {}
  get(name: string, size: number): DeviceArray {
    let b = this.buffers.get(name);
    if (!b || b.length < size) {
      b = this.backend.allocActivations(Math.max(size, (b?.length ?? 0) * 2));
      this.buffers.set(name, b);
    }
    return this.backend.view(b, 0, size);
  }
}
