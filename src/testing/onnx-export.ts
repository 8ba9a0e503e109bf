import { GGUFMetadata, GGUFTensorSource, readGGUFHeader } from "../formats/index.js";
import { ropeAngles, type RopeParams } from "../kernels/ops/index.js";
import { readLlamaShape } from "../models/llama.js";
import { dequantizeRow, GGMLType, readF16, rowByteLength, typeName } from "../tensor/index.js";
import { encodeOnnxModel, OnnxType, tensorProto, type AttrValue, type OnnxNode, type OnnxValueInfo, type ProtoWriter } from "./onnx-proto.js";

/**
 * An ONNX export of a Llama-architecture GGUF (the project's random test models), so
 * onnxruntime-web can run the same model as tsllm. The graph follows the transformers.js /
 * Optimum decoder-with-past convention:
 *
 *   inputs  input_ids [batch, seq] int64, attention_mask [batch, past + seq] int64,
 *           position_ids [batch, seq] int64, past_key_values.{i}.key / .value [batch, kvHeads, past, headDim]
 *   outputs logits [batch, seq (or 1), vocab], present.{i}.key / .value [batch, kvHeads, past + seq, headDim]
 *
 * built from standard ONNX ops (opset 17): RMSNorm as Pow / ReduceMean / Add / Sqrt / Div / Mul
 * (onnxruntime fuses it), RoPE from cos/sin tables gathered by position_ids, GQA by repeating
 * KV heads, a causal + padding mask added before Softmax, SiLU as x * Sigmoid(x). Only the
 * quantized matrices differ by variant (see OnnxExportOptions.weights).
 */
export interface OnnxExportOptions {
  /**
   * "f32": every matrix as a float MatMul (quantized GGUF weights dequantized — the values tsllm
   * multiplies by); "nbits": Q4_0 and Q8_0 matrices as com.microsoft MatMulNBits (bits 4 / 8,
   * block 32, the GGUF blocks' own scales and quants), other matrices float; "int8": transformers.js's
   * "q8" (onnxruntime's quantize_dynamic): every matrix requantized from its float values to int8
   * with one symmetric scale per output column, the activations by DynamicQuantizeLinear (one uint8
   * scale and zero point per tensor), MatMulInteger — an approximation of the GGUF model, not its
   * exact weights. Default "f32".
   */
  readonly weights?: "f32" | "nbits" | "int8";
  /**
   * MatMulNBits' accuracy_level: 0 computes in float; 4 quantizes the activations to int8 per
   * block (as tsllm's and llama.cpp's quantized kernels do). Default 0.
   */
  readonly accuracyLevel?: 0 | 4;
  /**
   * logits of the last position only (the work tsllm's forward does) instead of every position
   * (the Optimum convention). Default false.
   */
  readonly lastTokenLogits?: boolean;
  /** rows of the cos/sin tables (the largest position + 1); default the model's context length */
  readonly maxPositions?: number;
}

const OPSET = 17;
/** IR version 8 is the one that goes with opset 17 (onnx's versioning table) */
const IR_VERSION = 8;
/** the most negative float32: a masked score's softmax weight is exactly 0 without -inf's NaN risk */
const MASKED = -3.4028234663852886e38;

/** Encodes the ONNX model of the Llama GGUF at `ggufPath` (the file's bytes; write them or hand them to a runtime). */
export function exportLlamaOnnx(ggufPath: string, options: OnnxExportOptions = {}): Uint8Array {
  const header = readGGUFHeader(ggufPath);
  const meta = new GGUFMetadata(header.path, header.metadata);
  const arch = meta.string("general.architecture");
  if (arch !== "llama") throw new Error(`${ggufPath}: general.architecture: the ONNX export handles "llama", found "${arch}"`);
  const shape = readLlamaShape(arch, meta);
  if (meta.has("llama.rope.scaling.type") || header.tensors.some((t) => t.name === "rope_freqs.weight")) {
    throw new Error(`${ggufPath}: the ONNX export has no RoPE scaling (rope.scaling.type / rope_freqs.weight)`);
  }
  if (shape.rope.ropeDim !== shape.headDim) throw new Error(`${ggufPath}: llama.rope.dimension_count: the ONNX export rotates whole heads (${shape.headDim}), found ${shape.rope.ropeDim}`);
  const source = new GGUFTensorSource(header);
  try {
    const g = new GraphBuilder();
    const w = new Weights(source, g, options);
    const E = shape.embeddingLength, H = shape.headCount, KV = shape.headCountKv, D = shape.headDim, L = shape.blockCount;
    const vocab = source.tensors.get("token_embd.weight")!.dims[1]!;
    // GGUF Llama Q/K rows are permuted for adjacent-pair rotation: tsllm's "norm" style, which this graph rotates too
    const rope: RopeParams = { headDim: D, ropeDim: D, base: shape.rope.base, freqScale: 1, style: "norm" };
    const maxPositions = options.maxPositions ?? shape.contextLength;

    const inputs: OnnxValueInfo[] = [
      { name: "input_ids", type: OnnxType.INT64, dims: ["batch_size", "sequence_length"] },
      { name: "attention_mask", type: OnnxType.INT64, dims: ["batch_size", "total_sequence_length"] },
      { name: "position_ids", type: OnnxType.INT64, dims: ["batch_size", "sequence_length"] },
    ];
    const outputs: OnnxValueInfo[] = [{ name: "logits", type: OnnxType.FLOAT, dims: ["batch_size", options.lastTokenLogits ? 1 : "sequence_length", vocab] }];
    for (let l = 0; l < L; l++) {
      for (const kv of ["key", "value"]) {
        inputs.push({ name: `past_key_values.${l}.${kv}`, type: OnnxType.FLOAT, dims: ["batch_size", KV, "past_sequence_length", D] });
        outputs.push({ name: `present.${l}.${kv}`, type: OnnxType.FLOAT, dims: ["batch_size", KV, "total_sequence_length", D] });
      }
    }

    // position-independent of the layer: RoPE's cos/sin for each token, broadcast over heads and the pair axis
    const { cos, sin } = ropeTables(rope, maxPositions);
    const ropeAt = (table: Float32Array, name: string) =>
      g.op("Unsqueeze", [g.op("Gather", [g.init(name, OnnxType.FLOAT, [maxPositions, D / 2], table), "position_ids"]), g.i64([2, 4])]);
    const cosB = ropeAt(cos, "rope.cos"), sinB = ropeAt(sin, "rope.sin");
    const maskBias = attentionBias(g);

    let x = g.op("Gather", [w.embedding(), "input_ids"]);
    for (let l = 0; l < L; l++) {
      const p = `blk.${l}.`;
      const xn = rmsNorm(g, x, w.vector(p + "attn_norm.weight", E), shape.normEps);
      const heads = (t: string, n: number) => g.op("Reshape", [t, g.i64([0, 0, n, D])]);
      const q = applyRope(g, heads(w.matmul(xn, p + "attn_q.weight"), H), cosB, sinB, H, D);
      const k = applyRope(g, heads(w.matmul(xn, p + "attn_k.weight"), KV), cosB, sinB, KV, D);
      const v = heads(w.matmul(xn, p + "attn_v.weight"), KV);
      const toHeadMajor = (t: string) => g.op("Transpose", [t], { perm: [0, 2, 1, 3] });
      const presentK = g.op("Concat", [`past_key_values.${l}.key`, toHeadMajor(k)], { axis: 2 }, `present.${l}.key`);
      const presentV = g.op("Concat", [`past_key_values.${l}.value`, toHeadMajor(v)], { axis: 2 }, `present.${l}.value`);
      // query head h reads kv head floor(h / group) (llama.cpp's and tsllm's grouping): repeat each kv head `group` times
      const repeat = (t: string) => KV === H ? t : g.op("Reshape", [g.op("Expand", [g.op("Unsqueeze", [t, g.i64([2])]), g.i64([1, 1, H / KV, 1, 1])]), g.i64([0, H, -1, D])]);
      const scores = g.op("Mul", [g.op("MatMul", [toHeadMajor(q), g.op("Transpose", [repeat(presentK)], { perm: [0, 1, 3, 2] })]), g.f32(1 / Math.sqrt(D))]);
      const probs = g.op("Softmax", [g.op("Add", [scores, maskBias])], { axis: -1 });
      const ctx = g.op("Reshape", [toHeadMajor(g.op("MatMul", [probs, repeat(presentV)])), g.i64([0, 0, H * D])]);
      x = g.op("Add", [x, w.matmul(ctx, p + "attn_output.weight")]);

      const hn = rmsNorm(g, x, w.vector(p + "ffn_norm.weight", E), shape.normEps);
      const gate = w.matmul(hn, p + "ffn_gate.weight");
      const silu = g.op("Mul", [gate, g.op("Sigmoid", [gate])]);
      x = g.op("Add", [x, w.matmul(g.op("Mul", [silu, w.matmul(hn, p + "ffn_up.weight")]), p + "ffn_down.weight")]);
    }
    if (options.lastTokenLogits) x = g.op("Slice", [x, g.i64([-1]), g.i64([Number.MAX_SAFE_INTEGER]), g.i64([1])]);
    const xn = rmsNorm(g, x, w.vector("output_norm.weight", E), shape.normEps);
    // tied embeddings: llama.cpp falls back to token_embd when there is no output.weight
    w.matmul(xn, source.tensors.has("output.weight") ? "output.weight" : "token_embd.weight", "logits");

    return encodeOnnxModel({
      graphName: "tsllm_llama", producer: "tsllm", irVersion: IR_VERSION, nodes: g.nodes, initializers: g.initializers,
      inputs, outputs, opsets: { "": OPSET, "com.microsoft": 1 },
    });
  } finally {
    source.close();
  }
}

/** Nodes and initializers with generated names; constants of equal value are written once. */
class GraphBuilder {
  readonly nodes: OnnxNode[] = [];
  readonly initializers: ProtoWriter[] = [];
  private count = 0;
  private readonly constants = new Map<string, string>();

  /** adds a node with one output (named `output`, or generated) and returns that name */
  op(op: string, inputs: readonly string[], attrs?: Readonly<Record<string, AttrValue>>, output?: string, domain?: string): string {
    const out = output ?? `${op.toLowerCase()}_${this.count++}`;
    this.nodes.push({ op, inputs, outputs: [out], attrs, domain, name: `${op}_${this.nodes.length}` });
    return out;
  }

  /** a node with several outputs */
  multi(op: string, inputs: readonly string[], outputs: number, attrs?: Readonly<Record<string, AttrValue>>): string[] {
    const outs = Array.from({ length: outputs }, () => `${op.toLowerCase()}_${this.count++}`);
    this.nodes.push({ op, inputs, outputs: outs, attrs, name: `${op}_${this.nodes.length}` });
    return outs;
  }

  init(name: string, type: OnnxType, dims: readonly number[], data: Float32Array | Uint8Array | BigInt64Array): string {
    this.initializers.push(tensorProto(name, type, dims, new Uint8Array(data.buffer, data.byteOffset, data.byteLength)));
    return name;
  }

  /** a 1-D int64 constant (shapes, axes) */
  i64(values: readonly number[]): string {
    return this.constant(`i64:${values.join(",")}`, () => this.init(`const_${this.count++}`, OnnxType.INT64, [values.length], BigInt64Array.from(values.map(BigInt))));
  }

  /** an int64 scalar */
  i64Scalar(value: number): string {
    return this.constant(`i64s:${value}`, () => this.init(`const_${this.count++}`, OnnxType.INT64, [], BigInt64Array.of(BigInt(value))));
  }

  /** a float scalar */
  f32(value: number): string {
    return this.constant(`f32:${value}`, () => this.init(`const_${this.count++}`, OnnxType.FLOAT, [], Float32Array.of(value)));
  }

  private constant(key: string, make: () => string): string {
    let name = this.constants.get(key);
    if (name === undefined) {
      name = make();
      this.constants.set(key, name);
    }
    return name;
  }
}

/** The model's tensors as initializers, in the chosen weight variant. */
class Weights {
  constructor(
    private readonly source: GGUFTensorSource,
    private readonly g: GraphBuilder,
    private readonly options: OnnxExportOptions,
  ) {}

  /** token_embd as a float [vocab, E] table for Gather (also the tied LM head's float weight) */
  embedding(): string {
    return this.floatRows("token_embd.weight");
  }

  vector(name: string, n: number): string {
    const info = this.info(name);
    if (info.dims.length !== 1 || info.dims[0] !== n) throw new Error(`${this.source.path}: tensor "${name}": expected [${n}], found [${info.dims.join(", ")}]`);
    return this.floatRows(name);
  }

  /** x · Wᵀ for the GGUF matrix `name` ([cols = K, rows = N] in ggml order, rows contiguous) */
  matmul(x: string, name: string, output?: string): string {
    const info = this.info(name);
    const [K, N] = info.dims as [number, number];
    if (this.options.weights === "nbits" && (info.type === GGMLType.Q4_0 || info.type === GGMLType.Q8_0)) {
      const { blob, scales } = matMulNBitsWeights(info.type, this.read(name), N, K);
      const bits = info.type === GGMLType.Q4_0 ? 4 : 8;
      const blocks = K / 32;
      const b = this.g.init(`${name}.nbits`, OnnxType.UINT8, [N, blocks, (32 * bits) / 8], blob);
      const s = this.g.init(`${name}.scales`, OnnxType.FLOAT, [N * blocks], scales);
      return this.g.op("MatMulNBits", [x, b, s], { K, N, bits, block_size: 32, accuracy_level: this.options.accuracyLevel ?? 0 }, output, "com.microsoft");
    }
    const int8 = this.options.weights === "int8";
    // MatMul wants B as [K, N]: a transposed float copy, except for the tied head, whose table
    // the embedding Gather already holds (onnxruntime folds the Transpose once at load)
    if (!int8 && name === "token_embd.weight") return this.g.op("MatMul", [x, this.g.op("Transpose", [this.embedding()], { perm: [1, 0] })], undefined, output);
    const rows = this.dequantized(name);
    if (int8) return this.matmulInteger(x, name, rows, K, N, output);
    const t = new Float32Array(K * N);
    for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) t[k * N + n] = rows[n * K + k]!;
    return this.g.op("MatMul", [x, this.g.init(`${name}.t`, OnnxType.FLOAT, [K, N], t)], undefined, output);
  }

  /** one DynamicQuantizeLinear per activation, however many matrices read it (q/k/v, gate/up) */
  private readonly quantizedInputs = new Map<string, [q: string, scale: string, zeroPoint: string]>();

  /**
   * x · Wᵀ as quantize_dynamic writes it: DynamicQuantizeLinear -> MatMulInteger -> Cast ->
   * Mul by x's scale times each column's (onnxruntime fuses it into DynamicQuantizeMatMul).
   */
  private matmulInteger(x: string, name: string, rows: Float32Array, K: number, N: number, output?: string): string {
    let qx = this.quantizedInputs.get(x);
    if (qx === undefined) {
      qx = this.g.multi("DynamicQuantizeLinear", [x], 3) as [string, string, string];
      this.quantizedInputs.set(x, qx);
    }
    const w = new Int8Array(K * N), scales = new Float32Array(N);
    for (let n = 0; n < N; n++) {
      let max = 0;
      for (let k = 0; k < K; k++) max = Math.max(max, Math.abs(rows[n * K + k]!));
      const scale = max / 127 || 1;
      scales[n] = scale;
      for (let k = 0; k < K; k++) w[k * N + n] = Math.round(rows[n * K + k]! / scale);
    }
    const b = this.g.init(`${name}.int8`, OnnxType.INT8, [K, N], new Uint8Array(w.buffer));
    const acc = this.g.op("Cast", [this.g.op("MatMulInteger", [qx[0], b, qx[2]])], { to: OnnxType.FLOAT });
    const scale = this.g.op("Mul", [qx[1], this.g.init(`${name}.int8_scales`, OnnxType.FLOAT, [N], scales)]);
    return this.g.op("Mul", [acc, scale], undefined, output);
  }

  private readonly floats = new Map<string, string>();

  /** the tensor as float values in its own layout (written once however often it is used) */
  private floatRows(name: string): string {
    let init = this.floats.get(name);
    if (init === undefined) {
      const dims = [...this.info(name).dims].reverse();
      init = this.g.init(name, OnnxType.FLOAT, dims, this.dequantized(name));
      this.floats.set(name, init);
    }
    return init;
  }

  private dequantized(name: string): Float32Array {
    const info = this.info(name);
    const n = info.dims[0]!;
    const rows = info.byteLength / rowByteLength(info.type, n);
    const bytes = this.read(name);
    if (info.type === GGMLType.F32) return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
    const out = new Float32Array(n * rows);
    const rb = rowByteLength(info.type, n);
    for (let r = 0; r < rows; r++) dequantizeRow(info.type, bytes.subarray(r * rb, (r + 1) * rb), out.subarray(r * n, (r + 1) * n), n);
    return out;
  }

  private read(name: string): Uint8Array {
    const bytes = new Uint8Array(this.info(name).byteLength);
    this.source.read(name, bytes, 0);
    return bytes;
  }

  private info(name: string) {
    const info = this.source.tensors.get(name);
    if (!info) throw new Error(`${this.source.path}: tensor "${name}" not found`);
    return info;
  }
}

/**
 * MatMulNBits' B and scales from Q4_0 / Q8_0 rows (N rows of K). Both are symmetric 32-blocks
 * with one f16 scale, and MatMulNBits without zero_points subtracts 2^(bits-1):
 *   Q4_0 quant q (0..15) is d * (q - 8): the nibble as is; GGUF packs element j and j + 16 of a
 *        block into byte j, MatMulNBits elements 2i and 2i + 1 into byte i (low nibble first)
 *   Q8_0 quant q (int8) is d * q: stored as q + 128
 */
function matMulNBitsWeights(type: GGMLType, data: Uint8Array, N: number, K: number): { blob: Uint8Array; scales: Float32Array } {
  if (K % 32 !== 0) throw new Error(`MatMulNBits needs rows of a multiple of 32, found ${K}`);
  const blocks = (N * K) / 32;
  const q4 = type === GGMLType.Q4_0;
  const blockBytes = q4 ? 18 : 34, outBytes = q4 ? 16 : 32;
  if (data.length !== blocks * blockBytes) throw new Error(`${typeName(type)} data: expected ${blocks * blockBytes} bytes, found ${data.length}`);
  const blob = new Uint8Array(blocks * outBytes);
  const scales = new Float32Array(blocks);
  const nibble = new Uint8Array(32);
  for (let b = 0; b < blocks; b++) {
    const src = data.subarray(b * blockBytes, (b + 1) * blockBytes);
    scales[b] = readF16(src, 0);
    const dst = blob.subarray(b * outBytes, (b + 1) * outBytes);
    if (q4) {
      for (let j = 0; j < 16; j++) {
        nibble[j] = src[2 + j]! & 15;
        nibble[j + 16] = src[2 + j]! >> 4;
      }
      for (let i = 0; i < 16; i++) dst[i] = nibble[2 * i]! | (nibble[2 * i + 1]! << 4);
    } else {
      for (let j = 0; j < 32; j++) dst[j] = (src[2 + j]! + 128) & 255;
    }
  }
  return { blob, scales };
}

/** RMSNorm in the ops Optimum exports (onnxruntime's optimizer fuses them into SimplifiedLayerNormalization) */
function rmsNorm(g: GraphBuilder, x: string, weight: string, eps: number): string {
  const meanSq = g.op("ReduceMean", [g.op("Pow", [x, g.f32(2)])], { axes: [-1], keepdims: 1 });
  return g.op("Mul", [g.op("Div", [x, g.op("Sqrt", [g.op("Add", [meanSq, g.f32(eps)])])]), weight]);
}

/**
 * Adjacent-pair RoPE on [batch, seq, heads, D]: the pairs (2i, 2i+1) as a trailing axis of two,
 * rotated by the cos/sin of [batch, seq, 1, D/2, 1].
 */
function applyRope(g: GraphBuilder, x: string, cos: string, sin: string, heads: number, D: number): string {
  const [x0, x1] = g.multi("Split", [g.op("Reshape", [x, g.i64([0, 0, heads, D / 2, 2])]), g.i64([1, 1])], 2, { axis: -1 }) as [string, string];
  const r0 = g.op("Sub", [g.op("Mul", [x0, cos]), g.op("Mul", [x1, sin])]);
  const r1 = g.op("Add", [g.op("Mul", [x0, sin]), g.op("Mul", [x1, cos])]);
  return g.op("Reshape", [g.op("Concat", [r0, r1], { axis: -1 }), g.i64([0, 0, heads, D])]);
}

/**
 * The additive attention bias [batch, 1, seq, past + seq]: 0 where query t (at position past + t)
 * may see key s (s <= past + t and attention_mask[s] = 1), the most negative float elsewhere.
 */
function attentionBias(g: GraphBuilder): string {
  const seq = g.op("Gather", [g.op("Shape", ["input_ids"]), g.i64Scalar(1)], { axis: 0 });
  const past = g.op("Gather", [g.op("Shape", ["past_key_values.0.key"]), g.i64Scalar(2)], { axis: 0 });
  const total = g.op("Add", [past, seq]);
  const keyPos = g.op("Range", [g.i64Scalar(0), total, g.i64Scalar(1)]);
  const queryPos = g.op("Unsqueeze", [g.op("Range", [past, total, g.i64Scalar(1)]), g.i64([1])]);
  const causal = g.op("LessOrEqual", [keyPos, queryPos]);
  const padding = g.op("Unsqueeze", [g.op("Cast", ["attention_mask"], { to: OnnxType.BOOL }), g.i64([1, 2])]);
  return g.op("Where", [g.op("And", [causal, padding]), g.f32(0), g.f32(MASKED)]);
}

/** cos/sin [positions, D/2] from tsllm's own angle tables, so both engines rotate by the same floats */
function ropeTables(rope: RopeParams, positions: number): { cos: Float32Array; sin: Float32Array } {
  const half = rope.ropeDim / 2;
  const cos = new Float32Array(positions * half), sin = new Float32Array(positions * half);
  for (let p = 0; p < positions; p++) {
    const a = ropeAngles(p, rope);
    for (let i = 0; i < half; i++) {
      cos[p * half + i] = a[2 * i]!;
      sin[p * half + i] = a[2 * i + 1]!;
    }
  }
  return { cos, sin };
}
