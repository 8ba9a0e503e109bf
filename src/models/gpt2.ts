import type { GGUFMetadata } from "../formats/index.js";
import type { Backend, DeviceArray, KVCacheTypes } from "../kernels/index.js";
import type { Tensor } from "../tensor/index.js";
import type { ModelInfo } from "./model.js";
import type { WeightStore } from "./weights.js";
import type { BatchLayout, SequenceInput } from "./batch.js";
import { DecoderModel, type PassOutput } from "./decoder.js";
import { checkDecoderShape, declaredVocabSize, type DecoderShape } from "./hyperparameters.js";

/**
 * GPT-2: learned absolute position embeddings, pre-LayerNorm blocks with biases, fused QKV,
 * GELU MLP, no RoPE.
 *   h = x + Wo · attention(split(Wqkv · ln1(x) + b)) + bo
 *   y = h + Wdown · gelu(Wup · ln2(h) + bup) + bdown
 */
interface Gpt2Config extends ModelInfo {
  readonly normEps: number;
}

interface Layer {
  ln1w: Float32Array; ln1b: Float32Array;
  qkv: Tensor; qkvBias: Float32Array;
  wo: Tensor; woBias: Float32Array;
  ln2w: Float32Array; ln2b: Float32Array;
  up: Tensor; upBias: Float32Array;
  down: Tensor; downBias: Float32Array;
}

/** GPT-2's shape (checked against itself), read from its metadata alone: no weight is touched. */
export function readGpt2Shape(meta: GGUFMetadata): DecoderShape {
  const embeddingLength = meta.requireNumber("gpt2.embedding_length");
  const headCount = meta.requireNumber("gpt2.attention.head_count");
  const shape = {
    embeddingLength, headCount, headCountKv: headCount, headDim: embeddingLength / headCount,
    blockCount: meta.requireNumber("gpt2.block_count"),
    feedForwardLength: meta.requireNumber("gpt2.feed_forward_length"),
    contextLength: meta.requireNumber("gpt2.context_length"),
    normEps: meta.number("gpt2.attention.layer_norm_epsilon") ?? 1e-5,
  };
  checkDecoderShape(meta, shape, (field) => `gpt2.${GPT2_KEYS[field as keyof typeof GPT2_KEYS] ?? "attention.head_count"}`);
  return shape;
}

export function readGpt2Config(meta: GGUFMetadata, store: WeightStore): Gpt2Config {
  return { architecture: "gpt2", vocabSize: declaredVocabSize(meta, "gpt2.vocab_size", store.info("token_embd.weight").dims[1]!), ...readGpt2Shape(meta), maxPositions: store.info("position_embd.weight").dims[1]!, parameterCount: store.parameterCount() };
}

/** where each shape field comes from in llama.cpp's GPT-2 metadata (the head size from the width and the head count) */
const GPT2_KEYS = {
  embeddingLength: "embedding_length", blockCount: "block_count", headCount: "attention.head_count", headCountKv: "attention.head_count",
  headDim: "attention.head_count", feedForwardLength: "feed_forward_length", contextLength: "context_length", normEps: "attention.layer_norm_epsilon",
} as const;

export class Gpt2Model extends DecoderModel {
  private readonly layers: Layer[] = [];
  private readonly tokenEmbedding: Tensor;
  private readonly positionEmbedding: Tensor;
  private readonly outNormW: Float32Array;
  private readonly outNormB: Float32Array;
  private readonly output: Tensor;

  constructor(
    readonly info: Gpt2Config,
    backend: Backend,
    store: WeightStore,
    kvCacheTypes?: KVCacheTypes,
  ) {
    super(backend, kvCacheTypes);
    const d = info.embeddingLength, ff = info.feedForwardLength;
    this.tokenEmbedding = store.get("token_embd.weight", [d, info.vocabSize]);
    this.positionEmbedding = store.get("position_embd.weight", [d, store.info("position_embd.weight").dims[1]!]);
    this.outNormW = store.vector("output_norm.weight", d);
    this.outNormB = store.vector("output_norm.bias", d);
    this.output = store.optional("output.weight", [d, info.vocabSize]) ?? this.tokenEmbedding;
    for (let l = 0; l < info.blockCount; l++) {
      const p = `blk.${l}.`;
      this.layers.push({
        ln1w: store.vector(p + "attn_norm.weight", d), ln1b: store.vector(p + "attn_norm.bias", d),
        qkv: store.get(p + "attn_qkv.weight", [d, 3 * d]), qkvBias: store.vector(p + "attn_qkv.bias", 3 * d),
        wo: store.get(p + "attn_output.weight", [d, d]), woBias: store.vector(p + "attn_output.bias", d),
        ln2w: store.vector(p + "ffn_norm.weight", d), ln2b: store.vector(p + "ffn_norm.bias", d),
        up: store.get(p + "ffn_up.weight", [d, ff]), upBias: store.vector(p + "ffn_up.bias", ff),
        down: store.get(p + "ffn_down.weight", [ff, d]), downBias: store.vector(p + "ffn_down.bias", d),
      });
    }
  }

  protected override layout(seqs: readonly SequenceInput[]): BatchLayout {
    const layout = super.layout(seqs);
    const maxPos = this.info.maxPositions!;
    for (const g of layout.segments) {
      if (g.startPos + g.count > maxPos) throw new Error(`GPT-2 has learned positions for ${maxPos} tokens; ${g.startPos + g.count} requested`);
    }
    return layout;
  }

  protected *pass(layout: BatchLayout, rows: readonly number[], output: PassOutput): Generator<undefined, DeviceArray> {
    const c = this.info, be = this.backend, s = this.scratch;
    const { n, segments } = layout;
    const d = c.embeddingLength, ff = c.feedForwardLength;
    const x = s.get("x", n * d), pos = s.get("pos", n * d), xn = s.get("xn", n * d);
    be.getRows(x, this.tokenEmbedding, layout.tokens);
    be.getRows(pos, this.positionEmbedding, layout.positions);
    be.add(x, pos);
    const qkv = s.get("qkv", n * 3 * d);
    const q = s.get("q", n * d), k = s.get("k", n * d), v = s.get("v", n * d);
    const attnOut = s.get("attn", n * d), proj = s.get("proj", n * d), hidden = s.get("hidden", n * ff), act = s.get("act", n * ff);
    const scale = 1 / Math.sqrt(c.headDim);
    yield;

    for (let l = 0; l < c.blockCount; l++) {
      const L = this.layers[l]!;
      be.layerNorm(xn, x, L.ln1w, L.ln1b, d, n, c.normEps);
      be.matmul(qkv, L.qkv, xn, n, { bias: L.qkvBias });
      be.copy2d(q, 0, d, qkv, 0, 3 * d, n, d);
      be.copy2d(k, 0, d, qkv, d, 3 * d, n, d);
      be.copy2d(v, 0, d, qkv, 2 * d, 3 * d, n, d);
      for (const g of segments) {
        const at = g.offset * d, len = g.count * d;
        g.cache.store(l, g.startPos, be.view(k, at, len), be.view(v, at, len), g.count);
        be.attention(be.view(attnOut, at, len), be.view(q, at, len), g.cache.keys[l]!, g.cache.values[l]!, g.count, g.startPos, c.headCount, c.headCount, c.headDim, scale, g.cache.rows, g.cache.encoding);
      }
      yield;
      be.matmul(proj, L.wo, attnOut, n, { bias: L.woBias });
      be.add(x, proj);

      be.layerNorm(xn, x, L.ln2w, L.ln2b, d, n, c.normEps);
      be.matmul(hidden, L.up, xn, n, { bias: L.upBias });
      be.unary("gelu", act, hidden, n * ff);
      yield;
      be.matmul(proj, L.down, act, n, { bias: L.downBias });
      be.add(x, proj);
      yield;
    }
    for (const g of segments) g.cache.length = g.startPos + g.count;

    const picked = s.get("picked", rows.length * d);
    be.gatherRows(picked, x, rows, d);
    const normed = be.view(xn, 0, rows.length * d);
    be.layerNorm(normed, picked, this.outNormW, this.outNormB, d, rows.length, c.normEps);
    if (output === "hidden") return normed;
    const logits = s.get("logits", rows.length * c.vocabSize);
    be.matmul(logits, this.output, normed, rows.length);
    return logits;
  }
}
