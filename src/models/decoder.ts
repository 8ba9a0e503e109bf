import { KVCache } from "../cache/index.js";
import { F32_CACHE, type Backend, type KVCacheTypes } from "../kernels/index.js";
import { layoutBatch, outputRows, type BatchLayout, type SequenceInput } from "./batch.js";
import type { DeviceArray } from "../kernels/index.js";
import { drainPass, readBack, runPass, Scratch, type ForwardOptions, type LanguageModel, type ModelInfo, type Pass } from "./model.js";

/** what a pass returns for its output rows: vocabulary logits, or the hidden states the LM head reads (llama.cpp's t_embd, what its embeddings pool) */
export type PassOutput = "logits" | "hidden";

/**
 * What every decoder architecture shares around its layers: the KV cache it needs, the batch
 * layout, and the three ways to run a pass (forward, forwardBatch, the pausable passBatch). An
 * architecture supplies `pass`: its layers as a generator that yields between stages.
 */
export abstract class DecoderModel implements LanguageModel {
  abstract readonly info: ModelInfo;
  protected readonly scratch: Scratch;
  /** a pass has started and not ended (it may be paused at a yield, holding the scratch buffers) */
  private passing = false;

  constructor(
    protected readonly backend: Backend,
    /** how this model's KV caches store K and V (checked against the backend and the head dim by the builder) */
    readonly kvCacheTypes: KVCacheTypes = F32_CACHE,
  ) {
    this.scratch = new Scratch(backend);
  }

  createCache(contextSize: number): KVCache {
    return new KVCache(this.info.blockCount, this.info.headCountKv, this.info.headDim, contextSize, this.backend, this.kvCacheTypes);
  }

  forward(tokens: readonly number[], cache: KVCache, options: ForwardOptions = {}): Float32Array {
    return drainPass(this.guarded([{ tokens, cache }], options.allLogits ?? false), this.backend.name);
  }

  forwardBatch(seqs: readonly SequenceInput[]): Float32Array[] {
    const all = seqs.map((s) => ({ ...s, logits: true as const }));
    return this.split(all, drainPass(this.guarded(all, false), this.backend.name)) as Float32Array[];
  }

  forwardAsync(tokens: readonly number[], cache: KVCache, options: ForwardOptions = {}): Promise<Float32Array> {
    return runPass(this.guarded([{ tokens, cache }], options.allLogits ?? false));
  }

  async forwardBatchAsync(seqs: readonly SequenceInput[]): Promise<Float32Array[]> {
    const all = seqs.map((s) => ({ ...s, logits: true as const }));
    return this.split(all, await runPass(this.guarded(all, false))) as Float32Array[];
  }

  *passBatch(seqs: readonly SequenceInput[]): Pass<(Float32Array | undefined)[]> {
    return this.split(seqs, yield* this.guarded(seqs, false));
  }

  async hiddenStatesAsync(seqs: readonly SequenceInput[]): Promise<Float32Array[]> {
    const d = this.info.embeddingLength;
    const all = await runPass(this.guarded(seqs, true, "hidden"));
    let row = 0;
    return seqs.map((s) => all.subarray(row * d, (row += s.tokens.length) * d));
  }

  /** validates the batch and gives its rows their cache positions (an architecture adds its own limits) */
  protected layout(seqs: readonly SequenceInput[]): BatchLayout {
    return layoutBatch(seqs, this.info.vocabSize);
  }

  /**
   * the layers over every row of the batch, yielding between stages; returns the logits of `rows`
   * (or, for "hidden", their hidden states after the final norm), back to back, in the backend's memory
   */
  protected abstract pass(layout: BatchLayout, rows: readonly number[], output: PassOutput): Generator<undefined, DeviceArray>;

  private *guarded(seqs: readonly SequenceInput[], allLogits: boolean, output: PassOutput = "logits"): Pass<Float32Array> {
    if (this.passing) throw new Error("forward: another pass of this model is under way (paused mid-way by its caller); passes share the activation buffers, so run them one after another");
    this.passing = true;
    try {
      const layout = this.layout(seqs);
      const logits = yield* this.pass(layout, outputRows(layout, allLogits), output);
      return yield* readBack(this.backend, logits);
    } finally {
      this.passing = false;
    }
  }

  /** each sequence's rows of the logits, views of the pass's fresh output (undefined where it asked for none) */
  private split(seqs: readonly SequenceInput[], logits: Float32Array): (Float32Array | undefined)[] {
    const V = this.info.vocabSize;
    let row = 0;
    return seqs.map((s) => {
      if (s.logits === false) return undefined;
      const n = s.logits === "all" ? s.tokens.length : 1;
      return logits.subarray(row * V, (row += n) * V);
    });
  }
}
