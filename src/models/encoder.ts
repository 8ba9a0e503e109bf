import type { EncoderFamily, HFEncoderConfig } from "../formats/index.js";
import type { Backend } from "../kernels/index.js";
import { addBias, addInPlace, layerNorm, relu } from "../kernels/ops/index.js";
import type { Tensor } from "../tensor/index.js";
import type { WeightStore } from "./weights.js";

/**
 * The shared part of the encoder architectures (BERT, RoBERTa, DistilBERT: bert.ts and
 * distilbert.ts supply the embeddings): post-LayerNorm blocks with bidirectional attention,
 *   h = LN1(x + Wo · attention(Wq x, Wk x, Wv x) + bo)
 *   y = LN2(h + Wdown · act(Wup · h + bup) + bdown)
 * and the heads on top of the last hidden state: the pooler, sequence classification (on the
 * first token), token classification, masked LM. A batch of ragged sequences runs as one set of
 * rows through every matrix product (the backend's kernels); attention runs per sequence, each
 * token seeing exactly its own sequence, which is what the padding mask of a padded batch computes.
 */

/** one sequence: token ids and (BERT) their segment ids */
export interface EncoderInput {
  readonly ids: readonly number[];
  readonly typeIds?: readonly number[];
}

export interface EncoderInfo extends Pick<HFEncoderConfig, "hfArchitecture" | "head" | "vocabSize" | "hiddenSize" | "blockCount" | "headCount" | "feedForwardLength" | "labels" | "problemType"> {
  readonly architecture: EncoderFamily;
  /** tokens one sequence may hold (the position table minus RoBERTa's offset) */
  readonly maxTokens: number;
  readonly parameterCount: number;
}

export interface EncoderOutput {
  /** per sequence: its tokens x hiddenSize (last_hidden_state) */
  readonly hidden: Float32Array[];
  /** per sequence: the pooler's output (BertModel / RobertaModel with a pooler) */
  readonly pooled?: Float32Array[];
  /**
   * per sequence: sequence classification, [labels]; token classification, tokens x labels;
   * masked LM, one vocabulary row per position asked for (all tokens by default)
   */
  readonly logits?: Float32Array[];
}

export interface EncodeOptions {
  /** masked LM: the positions of each sequence to compute vocabulary logits for (default: every token) */
  readonly positions?: readonly (readonly number[])[];
}

export interface EncoderConfig extends EncoderInfo {
  /** the first position id (RoBERTa: padding_idx + 1) */
  readonly positionOffset: number;
  readonly normEps: number;
  readonly activation: "gelu" | "relu";
  readonly tieWordEmbeddings: boolean;
}

interface Layer {
  qkv: Tensor | Tensor[]; qkvBias: Float32Array;
  wo: Tensor; woBias: Float32Array;
  ln1w: Float32Array; ln1b: Float32Array;
  up: Tensor; upBias: Float32Array;
  down: Tensor; downBias: Float32Array;
  ln2w: Float32Array; ln2b: Float32Array;
}

interface Dense { w: Tensor; b: Float32Array }

function concat(parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((s, p) => s + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}

export abstract class EncoderModel {
  protected readonly tokenEmbedding: Tensor;
  protected readonly positionEmbedding: Tensor;
  private readonly embNormW: Float32Array;
  private readonly embNormB: Float32Array;
  private readonly layers: Layer[] = [];
  private readonly pooler?: Dense;
  private readonly clsDense?: Dense;
  private readonly clsOut?: Dense;
  private readonly mlm?: { dense: Dense; normW: Float32Array; normB: Float32Array; out: Tensor; bias: Float32Array };
  /** the activation after the classification head's first dense layer */
  protected abstract readonly clsActivation: "tanh" | "relu";

  constructor(readonly info: EncoderConfig, protected readonly backend: Backend, store: WeightStore) {
    const d = info.hiddenSize, ff = info.feedForwardLength, nl = info.labels.length;
    this.tokenEmbedding = store.get("token_embd.weight", [d, info.vocabSize]);
    this.positionEmbedding = store.get("position_embd.weight", [d, store.info("position_embd.weight").dims[1]!]);
    this.embNormW = store.vector("token_embd_norm.weight", d);
    this.embNormB = store.vector("token_embd_norm.bias", d);
    for (let l = 0; l < info.blockCount; l++) {
      const p = `blk.${l}.`;
      this.layers.push({
        qkv: store.fused([p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"], d, [d, d, d]),
        qkvBias: concat([store.vector(p + "attn_q.bias", d), store.vector(p + "attn_k.bias", d), store.vector(p + "attn_v.bias", d)]),
        wo: store.get(p + "attn_output.weight", [d, d]), woBias: store.vector(p + "attn_output.bias", d),
        ln1w: store.vector(p + "attn_output_norm.weight", d), ln1b: store.vector(p + "attn_output_norm.bias", d),
        up: store.get(p + "ffn_up.weight", [d, ff]), upBias: store.vector(p + "ffn_up.bias", ff),
        down: store.get(p + "ffn_down.weight", [ff, d]), downBias: store.vector(p + "ffn_down.bias", d),
        ln2w: store.vector(p + "layer_output_norm.weight", d), ln2b: store.vector(p + "layer_output_norm.bias", d),
      });
    }
    const dense = (name: string, rows: number): Dense | undefined => (store.has(name + ".weight") ? { w: store.get(name + ".weight", [d, rows]), b: store.vector(name + ".bias", rows) } : undefined);
    this.pooler = dense("pooler", d);
    this.clsDense = dense("cls", d);
    if (info.head === "sequence-classification" || info.head === "token-classification") this.clsOut = dense("cls.output", nl);
    if (info.head === "masked-lm") {
      this.mlm = {
        dense: dense("mlm.dense", d)!,
        normW: store.vector("mlm.norm.weight", d), normB: store.vector("mlm.norm.bias", d),
        out: store.optional("mlm.output.weight", [d, info.vocabSize]) ?? this.tokenEmbedding,
        bias: store.vector("mlm.output.bias", info.vocabSize),
      };
    }
  }

  /** the position ids of a sequence of n tokens */
  protected abstract positions(n: number): number[];
  /** adds what the family adds to word + position embeddings (BERT's token types) into x */
  protected abstract addEmbeddings(x: Float32Array, inputs: readonly EncoderInput[]): void;

  /** Runs the sequences (ragged, any number) through the encoder and the model's head. */
  encode(inputs: readonly EncoderInput[], options: EncodeOptions = {}): EncoderOutput {
    const c = this.info, be = this.backend, d = c.hiddenSize, ff = c.feedForwardLength;
    if (inputs.length === 0) return { hidden: [], logits: [] };
    for (const [i, s] of inputs.entries()) {
      if (s.ids.length === 0) throw new RangeError(`encode: sequence ${i} has no tokens`);
      if (s.ids.length > c.maxTokens) throw new RangeError(`encode: sequence ${i} has ${s.ids.length} tokens; ${c.hfArchitecture} takes at most ${c.maxTokens} (truncate the input)`);
      for (const id of s.ids) if (!Number.isInteger(id) || id < 0 || id >= c.vocabSize) throw new RangeError(`encode: token id ${id} is outside the vocabulary (expected an integer in [0, ${c.vocabSize}))`);
      if (s.typeIds && s.typeIds.length !== s.ids.length) throw new RangeError(`encode: sequence ${i} has ${s.ids.length} tokens but ${s.typeIds.length} token type ids`);
    }
    const offsets: number[] = [];
    let n = 0;
    for (const s of inputs) { offsets.push(n); n += s.ids.length; }
    const x = new Float32Array(n * d), pos = new Float32Array(n * d);
    be.getRows(x, this.tokenEmbedding, inputs.flatMap((s) => s.ids));
    be.getRows(pos, this.positionEmbedding, inputs.flatMap((s) => this.positions(s.ids.length)));
    addInPlace(x, pos);
    this.addEmbeddings(x, inputs);
    layerNorm(x, x, this.embNormW, this.embNormB, d, n, c.normEps);

    const qkv = new Float32Array(n * 3 * d), att = new Float32Array(n * d), proj = new Float32Array(n * d);
    const hidden = new Float32Array(n * ff), act = new Float32Array(n * ff);
    const scale = 1 / Math.sqrt(d / c.headCount);
    for (const L of this.layers) {
      const stride = 3 * d;
      if (Array.isArray(L.qkv)) {
        // types differ: three products into the column blocks of one buffer
        const part = new Float32Array(n * d);
        L.qkv.forEach((w, j) => {
          be.matmul(part, w, x, n);
          for (let t = 0; t < n; t++) qkv.set(part.subarray(t * d, (t + 1) * d), t * 3 * d + j * d);
        });
        addBias(qkv, L.qkvBias, n);
      } else be.matmul(qkv, L.qkv, x, n, { bias: L.qkvBias });
      for (const [i, s] of inputs.entries()) {
        const o = offsets[i]!, m = s.ids.length;
        const base = qkv.subarray(o * stride);
        be.bidirectionalAttention(att.subarray(o * d, (o + m) * d), base, base.subarray(d), base.subarray(2 * d), m, c.headCount, d / c.headCount, scale, stride);
      }
      be.matmul(proj, L.wo, att, n, { bias: L.woBias });
      addInPlace(proj, x);
      layerNorm(x, proj, L.ln1w, L.ln1b, d, n, c.normEps);
      if (c.activation === "gelu") be.matmul(act, L.up, x, n, { bias: L.upBias, activation: "gelu-erf" });
      else {
        be.matmul(hidden, L.up, x, n, { bias: L.upBias });
        relu(act, hidden, n * ff);
      }
      be.matmul(proj, L.down, act, n, { bias: L.downBias });
      addInPlace(proj, x);
      layerNorm(x, proj, L.ln2w, L.ln2b, d, n, c.normEps);
    }
    const rows = inputs.map((s, i) => x.slice(offsets[i]! * d, (offsets[i]! + s.ids.length) * d));
    const first = () => concat(rows.map((r) => r.subarray(0, d)));
    const pooled = this.pooler ? this.split(this.dense(first(), this.pooler, inputs.length, "tanh"), d) : undefined;
    return { hidden: rows, ...(pooled ? { pooled } : {}), ...this.head(x, rows, first, offsets, options) };
  }

  private head(x: Float32Array, rows: Float32Array[], first: () => Float32Array, offsets: number[], options: EncodeOptions): { logits?: Float32Array[] } {
    const c = this.info, d = c.hiddenSize, n = x.length / d, nl = c.labels.length;
    if (c.head === "sequence-classification") {
      // BERT: classifier(pooler); RoBERTa: out_proj(tanh(dense(h0))); DistilBERT: classifier(relu(pre_classifier(h0)))
      const inner = this.pooler ? this.dense(first(), this.pooler, rows.length, "tanh") : this.dense(first(), this.clsDense!, rows.length, this.clsActivation);
      return { logits: this.split(this.dense(inner, this.clsOut!, rows.length), nl) };
    }
    if (c.head === "token-classification") {
      const logits = this.dense(x, this.clsOut!, n);
      return { logits: rows.map((r, i) => logits.slice(offsets[i]! * nl, (offsets[i]! + r.length / d) * nl)) };
    }
    if (c.head === "masked-lm") {
      const m = this.mlm!;
      const picks = rows.map((r, i) => options.positions?.[i] ?? Array.from({ length: r.length / d }, (_, t) => t));
      picks.forEach((ps, i) => ps.forEach((p) => {
        if (!Number.isInteger(p) || p < 0 || p >= rows[i]!.length / d) throw new RangeError(`encode: position ${p} is outside sequence ${i}`);
      }));
      const sel = concat(picks.flatMap((ps, i) => ps.map((p) => rows[i]!.subarray(p * d, (p + 1) * d))));
      const k = sel.length / d;
      if (k === 0) return { logits: picks.map(() => new Float32Array(0)) };
      const t = this.dense(sel, m.dense, k);
      this.backend.geluErf(t, t, t.length);
      layerNorm(t, t, m.normW, m.normB, d, k, c.normEps);
      const logits = new Float32Array(k * c.vocabSize);
      this.backend.matmul(logits, m.out, t, k, { bias: m.bias });
      let at = 0;
      return { logits: picks.map((ps) => logits.slice(at * c.vocabSize, (at += ps.length) * c.vocabSize)) };
    }
    return {};
  }

  private dense(x: Float32Array, layer: Dense, n: number, act?: "tanh" | "relu"): Float32Array {
    const rows = layer.b.length;
    const out = new Float32Array(n * rows);
    this.backend.matmul(out, layer.w, x, n, { bias: layer.b });
    if (act === "tanh") for (let i = 0; i < out.length; i++) out[i] = Math.tanh(out[i]!);
    if (act === "relu") relu(out, out, out.length);
    return out;
  }

  private split(x: Float32Array, width: number): Float32Array[] {
    return Array.from({ length: x.length / width }, (_, i) => x.slice(i * width, (i + 1) * width));
  }
}

/** the encoder settings of a config.json */
export function encoderConfig(cfg: HFEncoderConfig, parameterCount: number): EncoderConfig {
  return {
    architecture: cfg.family, hfArchitecture: cfg.hfArchitecture, head: cfg.head,
    vocabSize: cfg.vocabSize, hiddenSize: cfg.hiddenSize, blockCount: cfg.blockCount, headCount: cfg.headCount,
    feedForwardLength: cfg.feedForwardLength, maxTokens: cfg.maxPositions - cfg.positionOffset,
    labels: cfg.labels, problemType: cfg.problemType, parameterCount,
    positionOffset: cfg.positionOffset, normEps: cfg.normEps, activation: cfg.activation, tieWordEmbeddings: cfg.tieWordEmbeddings,
  };
}
