import { KVCache } from "../cache/index.js";
import type { Backend } from "../kernels/index.js";
import { layoutBatch, outputRows, type BatchLayout, type SequenceInput } from "./batch.js";
import { Scratch, type ForwardOptions, type LanguageModel, type ModelInfo } from "./model.js";

/**
 * What every decoder architecture shares around its layers: the KV cache it needs, the batch
 * layout, and the three ways to run a pass (forward, forwardBatch, the pausable passBatch). An
 * architecture supplies `pass`: its layers as a generator that yields between stages.
 */
export abstract class DecoderModel implements LanguageModel {
  abstract readonly info: ModelInfo;
  protected readonly scratch = new Scratch();
  /** a pass has started and not ended (it may be paused at a yield, holding the scratch buffers) */
  private passing = false;

  constructor(protected readonly backend: Backend) {}

  createCache(contextSize: number): KVCache {
    return new KVCache(this.info.blockCount, this.info.headCountKv, this.info.headDim, contextSize, (n) => this.backend.allocActivations(n));
  }

  forward(tokens: readonly number[], cache: KVCache, options: ForwardOptions = {}): Float32Array {
    return drain(this.guarded([{ tokens, cache }], options.allLogits ?? false));
  }

  forwardBatch(seqs: readonly SequenceInput[]): Float32Array[] {
    const all = seqs.map((s) => ({ ...s, logits: true as const }));
    return this.split(all, drain(this.guarded(all, false))) as Float32Array[];
  }

  *passBatch(seqs: readonly SequenceInput[]): Generator<void, (Float32Array | undefined)[]> {
    return this.split(seqs, yield* this.guarded(seqs, false));
  }

  /** validates the batch and gives its rows their cache positions (an architecture adds its own limits) */
  protected layout(seqs: readonly SequenceInput[]): BatchLayout {
    return layoutBatch(seqs, this.info.vocabSize);
  }

  /** the layers over every row of the batch, yielding between stages; returns the logits of `rows`, back to back */
  protected abstract pass(layout: BatchLayout, rows: readonly number[]): Generator<void, Float32Array>;

  private *guarded(seqs: readonly SequenceInput[], allLogits: boolean): Generator<void, Float32Array> {
    if (this.passing) throw new Error("forward: another pass of this model is under way (paused mid-way by its caller); passes share the activation buffers, so run them one after another");
    this.passing = true;
    try {
      const layout = this.layout(seqs);
      return yield* this.pass(layout, outputRows(layout, allLogits));
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

/** runs a pass to its end without pausing */
function drain<T>(gen: Generator<void, T>): T {
  for (;;) {
    const r = gen.next();
    if (r.done) return r.value;
  }
}
