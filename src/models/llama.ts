import type { GGUFMetadata } from "../formats/index.js";
import { GGUFError } from "../formats/index.js";
import type { Backend, DeviceArray, KVCacheTypes } from "../kernels/index.js";
import type { RopeParams } from "../kernels/ops/index.js";
import type { Tensor } from "../tensor/index.js";
import type { ModelInfo } from "./model.js";
import type { WeightStore } from "./weights.js";
import type { BatchLayout } from "./batch.js";
import { DecoderModel, type PassOutput } from "./decoder.js";
import { checkDecoderShape, declaredVocabSize, type DecoderShape } from "./hyperparameters.js";

/**
 * The Llama family: Llama 2/3, Mistral, SmolLM, TinyLlama (arch "llama"), Qwen2 (Q/K/V
 * biases) and Qwen3 (per-head RMSNorm on Q and K). Pre-norm decoder blocks:
 *   h = x + Wo · attention(rope(Wq · rms(x)), rope(Wk · rms(x)), Wv · rms(x))
 *   y = h + Wdown · (silu(Wgate · rms(h)) * (Wup · rms(h)))
 */
export interface LlamaConfig extends ModelInfo {
  readonly normEps: number;
  readonly rope: RopeParams;
}

interface Layer {
  attnNorm: Float32Array;
  /** fused [q; k; v] rows, or separate matrices when their types differ */
  qkv: Tensor | Tensor[];
  qBias?: Float32Array; kBias?: Float32Array; vBias?: Float32Array;
  qNorm?: Float32Array; kNorm?: Float32Array;
  wo: Tensor;
  /** Llama with attention_bias (HF) has an output projection bias too */
  woBias?: Float32Array;
  ffnNorm: Float32Array;
  gateUp: Tensor | Tensor[];
  down: Tensor;
}

/** where each shape field comes from in llama.cpp's metadata (after the architecture prefix) */
const LLAMA_KEYS = {
  embeddingLength: "embedding_length", blockCount: "block_count", headCount: "attention.head_count", headCountKv: "attention.head_count_kv",
  headDim: "attention.key_length", feedForwardLength: "feed_forward_length", contextLength: "context_length",
  normEps: "attention.layer_norm_rms_epsilon", rope: "rope.dimension_count", ropeDim: "rope.dimension_count", ropeBase: "rope.freq_base",
} as const;

/** The shape of a Llama-family model (checked against itself), read from its metadata alone: no weight is touched. */
export function readLlamaShape(arch: string, meta: GGUFMetadata): DecoderShape & { readonly rope: { readonly ropeDim: number; readonly base: number } } {
  const key = (k: string) => `${arch}.${k}`;
  const embeddingLength = meta.requireNumber(key("embedding_length"));
  const headCount = meta.requireNumber(key("attention.head_count"));
  const headCountKv = meta.number(key("attention.head_count_kv")) ?? headCount;
  const headDim = meta.number(key("attention.key_length")) ?? embeddingLength / headCount;
  const shape = {
    embeddingLength, headCount, headCountKv, headDim,
    blockCount: meta.requireNumber(key("block_count")),
    feedForwardLength: meta.requireNumber(key("feed_forward_length")),
    contextLength: meta.number(key("context_length")) ?? 2048,
    normEps: meta.number(key("attention.layer_norm_rms_epsilon")) ?? 1e-5,
    rope: { ropeDim: meta.number(key("rope.dimension_count")) ?? headDim, base: meta.number(key("rope.freq_base")) ?? 10000 },
  };
  checkDecoderShape(meta, shape, (field) => key(LLAMA_KEYS[field]));
  return shape;
}

export function readLlamaConfig(arch: string, meta: GGUFMetadata, store: WeightStore): LlamaConfig {
  const key = (k: string) => `${arch}.${k}`;
  const shape = readLlamaShape(arch, meta);
  const scalingType = meta.string(key("rope.scaling.type")) ?? "none";
  const scalingFactor = meta.number(key("rope.scaling.factor")) ?? 1;
  if (scalingType !== "none" && scalingType !== "linear") {
    throw new GGUFError(meta.path, key("rope.scaling.type"), `unsupported RoPE scaling "${scalingType}" (supported: none, linear; llama3 scaling comes as rope_freqs.weight)`);
  }
  // 0 is llama.cpp's "not scaled"; a negative, NaN or infinite factor was taken as 1 without a word (config.json's rope_scaling is bounded alike)
  if (!(Number.isFinite(scalingFactor) && scalingFactor >= 0 && scalingFactor <= 1e6)) {
    throw new GGUFError(meta.path, key("rope.scaling.factor"), `expected a linear RoPE scaling factor in (0, 1e6] (0: not scaled), found ${scalingFactor}`);
  }
  const { headDim } = shape, { ropeDim } = shape.rope;
  const vocabSize = declaredVocabSize(meta, key("vocab_size"), store.info("token_embd.weight").dims[1]!);
  return {
    architecture: arch,
    vocabSize,
    ...shape,
    parameterCount: store.parameterCount(),
    rope: {
      headDim,
      ropeDim,
      base: shape.rope.base,
      freqScale: scalingType === "linear" && scalingFactor > 0 ? 1 / scalingFactor : 1,
      // llama.cpp's converter permutes Llama Q/K rows for adjacent-pair rotation; Qwen keeps
      // the Hugging Face half-split layout
      style: arch === "llama" ? "norm" : "neox",
      // llama3-style scaling arrives precomputed as per-frequency divisors
      freqFactors: store.optionalVector("rope_freqs.weight", ropeDim / 2),
    },
  };
}

export class LlamaModel extends DecoderModel {
  private readonly layers: Layer[] = [];
  private readonly tokenEmbedding: Tensor;
  private readonly outputNorm: Float32Array;
  private readonly output: Tensor;

  constructor(
    readonly info: LlamaConfig,
    backend: Backend,
    store: WeightStore,
    kvCacheTypes?: KVCacheTypes,
  ) {
    super(backend, kvCacheTypes);
    const c = info;
    const d = c.embeddingLength, qDim = c.headCount * c.headDim, kvDim = c.headCountKv * c.headDim, ff = c.feedForwardLength;
    this.tokenEmbedding = store.get("token_embd.weight", [d, c.vocabSize]);
    this.outputNorm = store.vector("output_norm.weight", d);
    this.output = store.optional("output.weight", [d, c.vocabSize]) ?? this.tokenEmbedding;
    for (let l = 0; l < c.blockCount; l++) {
      const p = `blk.${l}.`;
      this.layers.push({
        attnNorm: store.vector(p + "attn_norm.weight", d),
        qkv: store.fused([p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"], d, [qDim, kvDim, kvDim]),
        qBias: store.optionalVector(p + "attn_q.bias", qDim),
        kBias: store.optionalVector(p + "attn_k.bias", kvDim),
        vBias: store.optionalVector(p + "attn_v.bias", kvDim),
        qNorm: store.optionalVector(p + "attn_q_norm.weight", c.headDim),
        kNorm: store.optionalVector(p + "attn_k_norm.weight", c.headDim),
        wo: store.get(p + "attn_output.weight", [qDim, d]),
        woBias: store.optionalVector(p + "attn_output.bias", d),
        ffnNorm: store.vector(p + "ffn_norm.weight", d),
        gateUp: store.fused([p + "ffn_gate.weight", p + "ffn_up.weight"], d, [ff, ff]),
        down: store.get(p + "ffn_down.weight", [ff, d]),
      });
    }
  }

  protected *pass(layout: BatchLayout, rows: readonly number[], output: PassOutput): Generator<undefined, DeviceArray> {
    const c = this.info, be = this.backend, s = this.scratch;
    const { n, positions, segments } = layout;
    const d = c.embeddingLength, qDim = c.headCount * c.headDim, kvDim = c.headCountKv * c.headDim, ff = c.feedForwardLength;

    const x = s.get("x", n * d);
    be.getRows(x, this.tokenEmbedding, layout.tokens);
    const xn = s.get("xn", n * d);
    const qkvOut = s.get("qkv", n * (qDim + 2 * kvDim));
    const attnOut = s.get("attn", n * qDim);
    const proj = s.get("proj", n * d);
    const gateUp = s.get("gateUp", n * 2 * ff);
    const hidden = s.get("hidden", n * ff);
    const scale = 1 / Math.sqrt(c.headDim);
    yield;

    for (let l = 0; l < c.blockCount; l++) {
      const L = this.layers[l]!;
      be.rmsNorm(xn, x, L.attnNorm, d, n, c.normEps);
      const [q, k, v] = this.project(L.qkv, xn, n, ["q", "k", "v"], [qDim, kvDim, kvDim], qkvOut) as [DeviceArray, DeviceArray, DeviceArray];
      if (L.qBias) be.addBias(q, L.qBias, n);
      if (L.kBias) be.addBias(k, L.kBias, n);
      if (L.vBias) be.addBias(v, L.vBias, n);
      if (L.qNorm) be.rmsNorm(q, q, L.qNorm, c.headDim, n * c.headCount, c.normEps);
      if (L.kNorm) be.rmsNorm(k, k, L.kNorm, c.headDim, n * c.headCountKv, c.normEps);
      be.rope(q, n, c.headCount, positions, c.rope);
      be.rope(k, n, c.headCountKv, positions, c.rope);
      for (const g of segments) {
        g.cache.store(l, g.startPos, be.view(k, g.offset * kvDim, g.count * kvDim), be.view(v, g.offset * kvDim, g.count * kvDim), g.count);
        be.attention(be.view(attnOut, g.offset * qDim, g.count * qDim), be.view(q, g.offset * qDim, g.count * qDim), g.cache.keys[l]!, g.cache.values[l]!, g.count, g.startPos, c.headCount, c.headCountKv, c.headDim, scale, g.cache.rows, g.cache.encoding);
      }
      yield;
      be.matmul(proj, L.wo, attnOut, n, L.woBias ? { bias: L.woBias } : undefined);
      be.add(x, proj);

      be.rmsNorm(xn, x, L.ffnNorm, d, n, c.normEps);
      const [gate, up] = this.project(L.gateUp, xn, n, ["gate", "up"], [ff, ff], gateUp) as [DeviceArray, DeviceArray];
      yield;
      be.swiglu(hidden, gate, up, n * ff);
      be.matmul(proj, L.down, hidden, n);
      be.add(x, proj);
      yield;
    }
    for (const g of segments) g.cache.length = g.startPos + g.count;

    const picked = s.get("picked", rows.length * d);
    be.gatherRows(picked, x, rows, d);
    const normed = be.view(xn, 0, rows.length * d);
    be.rmsNorm(normed, picked, this.outputNorm, d, rows.length, c.normEps);
    if (output === "hidden") return normed;
    const logits = s.get("logits", rows.length * c.vocabSize);
    be.matmul(logits, this.output, normed, rows.length);
    return logits;
  }

  /**
   * Runs a fused (or separate) projection; returns its parts (scratch buffers `names`, of
   * n * sizes[i] floats each). A single token's fused output is already its parts back to back:
   * they are views into it, not copies.
   *
   * Plain loops into an array literal rather than Array.prototype.map: the arrays map() makes
   * take one elements kind when it runs as the builtin and another when V8 inlines it, so the
   * optimized layer pass, which checks the kind of what this returns, was thrown away and
   * recompiled twice in the first decode steps (~50-80 ms of compiler time each, on a core
   * the kernels need).
   */
  private project(w: Tensor | Tensor[], x: DeviceArray, n: number, names: string[], sizes: number[], fusedOut: DeviceArray): DeviceArray[] {
    const be = this.backend;
    const parts: DeviceArray[] = [];
    if (Array.isArray(w)) {
      for (let i = 0; i < w.length; i++) {
        const dest = this.scratch.get(names[i]!, n * sizes[i]!);
        be.matmul(dest, w[i]!, x, n);
        parts.push(dest);
      }
      return parts;
    }
    be.matmul(fusedOut, w, x, n);
    let total = 0;
    for (const size of sizes) total += size;
    for (let i = 0, offset = 0; i < sizes.length; offset += sizes[i]!, i++) {
      const size = sizes[i]!;
      if (n === 1) {
        parts.push(be.view(fusedOut, offset, size));
      } else {
        const dest = this.scratch.get(names[i]!, n * size);
        be.copy2d(dest, 0, size, fusedOut, offset, total, n, size);
        parts.push(dest);
      }
    }
    return parts;
  }
}
