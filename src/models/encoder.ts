import type { EncoderFamily, HFEncoderConfig } from "../formats/index.js";
import type { Backend, DeviceArray } from "../kernels/index.js";
import { drainPass, readBack, runPass, type Pass } from "./model.js";
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
  protected abstract addEmbeddings(x: DeviceArray, inputs: readonly EncoderInput[]): void;

  /** Runs the sequences (ragged, any number) through the encoder and the model's head, on a backend that reads synchronously. */
  encode(inputs: readonly EncoderInput[], options: EncodeOptions = {}): EncoderOutput {
    return drainPass(this.encodePass(inputs, options), this.backend.name);
  }

  /** encode on any backend: the results come back once the backend has read them */
  encodeAsync(inputs: readonly EncoderInput[], options: EncodeOptions = {}): Promise<EncoderOutput> {
    return runPass(this.encodePass(inputs, options));
  }

  private *encodePass(inputs: readonly EncoderInput[], options: EncodeOptions): Pass<EncoderOutput> {
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
    const alloc = (length: number) => be.allocActivations(length);
    const x = alloc(n * d), pos = alloc(n * d);
    be.getRows(x, this.tokenEmbedding, inputs.flatMap((s) => s.ids));
    be.getRows(pos, this.positionEmbedding, inputs.flatMap((s) => this.positions(s.ids.length)));
    be.add(x, pos);
    this.addEmbeddings(x, inputs);
    be.layerNorm(x, x, this.embNormW, this.embNormB, d, n, c.normEps);

    const qkv = alloc(n * 3 * d), att = alloc(n * d), proj = alloc(n * d), act = alloc(n * ff);
    const scale = 1 / Math.sqrt(d / c.headCount);
    for (const L of this.layers) {
      const stride = 3 * d;
      if (Array.isArray(L.qkv)) {
        // types differ: three products into the column blocks of one buffer
        const part = alloc(n * d);
        L.qkv.forEach((w, j) => {
          be.matmul(part, w, x, n);
          be.copy2d(qkv, j * d, stride, part, 0, d, n, d);
        });
        be.addBias(qkv, L.qkvBias, n);
      } else be.matmul(qkv, L.qkv, x, n, { bias: L.qkvBias });
      for (const [i, s] of inputs.entries()) {
        const o = offsets[i]!, m = s.ids.length;
        const base = be.view(qkv, o * stride);
        be.bidirectionalAttention(be.view(att, o * d, m * d), base, be.view(base, d), be.view(base, 2 * d), m, c.headCount, d / c.headCount, scale, stride);
      }
      be.matmul(proj, L.wo, att, n, { bias: L.woBias });
      be.add(proj, x);
      be.layerNorm(x, proj, L.ln1w, L.ln1b, d, n, c.normEps);
      if (c.activation === "gelu") be.matmul(act, L.up, x, n, { bias: L.upBias, activation: "gelu-erf" });
      else {
        be.matmul(act, L.up, x, n, { bias: L.upBias });
        be.unary("relu", act, act, n * ff);
      }
      be.matmul(proj, L.down, act, n, { bias: L.downBias });
      be.add(proj, x);
      be.layerNorm(x, proj, L.ln2w, L.ln2b, d, n, c.normEps);
    }
    // each sequence's first token (the [CLS] the pooler and the sequence classifiers read)
    const first = alloc(inputs.length * d);
    be.gatherRows(first, x, offsets, d);
    const pooled = this.pooler ? this.dense(first, this.pooler, inputs.length, "tanh") : undefined;
    const logits = this.head(x, n, first, pooled, inputs, offsets, options);

    const all = yield* readBack(be, x);
    const hidden = inputs.map((s, i) => all.slice(offsets[i]! * d, (offsets[i]! + s.ids.length) * d));
    const out: { hidden: Float32Array[]; pooled?: Float32Array[]; logits?: Float32Array[] } = { hidden };
    if (pooled) out.pooled = this.split(yield* readBack(be, pooled), d);
    if (logits) out.logits = logits.rows(yield* readBack(be, logits.values));
    return out;
  }

  /** the head's logits in the backend's memory and how they split into each sequence's rows (undefined: no head) */
  private head(x: DeviceArray, n: number, first: DeviceArray, pooled: DeviceArray | undefined, inputs: readonly EncoderInput[], offsets: number[], options: EncodeOptions): { values: DeviceArray; rows: (all: Float32Array) => Float32Array[] } | undefined {
    const c = this.info, be = this.backend, d = c.hiddenSize, nl = c.labels.length, count = inputs.length;
    if (c.head === "sequence-classification") {
      // BERT: classifier(pooler); RoBERTa: out_proj(tanh(dense(h0))); DistilBERT: classifier(relu(pre_classifier(h0)))
      const inner = pooled ?? this.dense(first, this.clsDense!, count, this.clsActivation);
      return { values: this.dense(inner, this.clsOut!, count), rows: (all) => this.split(all, nl) };
    }
    if (c.head === "token-classification") {
      return { values: this.dense(x, this.clsOut!, n), rows: (all) => inputs.map((s, i) => all.slice(offsets[i]! * nl, (offsets[i]! + s.ids.length) * nl)) };
    }
    if (c.head === "masked-lm") {
      const m = this.mlm!;
      const picks = inputs.map((s, i) => options.positions?.[i] ?? Array.from({ length: s.ids.length }, (_, t) => t));
      picks.forEach((ps, i) => ps.forEach((p) => {
        if (!Number.isInteger(p) || p < 0 || p >= inputs[i]!.ids.length) throw new RangeError(`encode: position ${p} is outside sequence ${i}`);
      }));
      const k = picks.reduce((sum, ps) => sum + ps.length, 0);
      const split = (all: Float32Array): Float32Array[] => {
        let at = 0;
        return picks.map((ps) => all.slice(at * c.vocabSize, (at += ps.length) * c.vocabSize));
      };
      const logits = be.allocActivations(k * c.vocabSize);
      if (k === 0) return { values: logits, rows: split };
      const sel = be.allocActivations(k * d);
      be.gatherRows(sel, x, picks.flatMap((ps, i) => ps.map((p) => offsets[i]! + p)), d);
      const t = this.dense(sel, m.dense, k, "gelu-erf");
      be.layerNorm(t, t, m.normW, m.normB, d, k, c.normEps);
      be.matmul(logits, m.out, t, k, { bias: m.bias });
      return { values: logits, rows: split };
    }
    return undefined;
  }

  private dense(x: DeviceArray, layer: Dense, n: number, act?: "tanh" | "relu" | "gelu-erf"): DeviceArray {
    const be = this.backend, rows = layer.b.length;
    const out = be.allocActivations(n * rows);
    be.matmul(out, layer.w, x, n, { bias: layer.b });
    if (act) be.unary(act, out, out, n * rows);
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
