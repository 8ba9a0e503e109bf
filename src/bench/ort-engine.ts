import type * as Ort from "onnxruntime-web";

/**
 * onnxruntime-web's side: its WebAssembly execution provider in Node, on an ONNX export of the
 * same model (src/testing/onnx-export.ts). onnxruntime-web is a devDependency, imported only
 * here, so tsllm itself never needs it.
 */
export type OrtModule = typeof Ort;

/**
 * onnxruntime-web with `threads` wasm threads (its own worker pool; numThreads must be set
 * before the first session), or an Error saying why it cannot load.
 */
export async function loadOrt(threads: number): Promise<OrtModule> {
  const ort = (await import("onnxruntime-web")) as OrtModule;
  ort.env.wasm.numThreads = threads;
  ort.env.logLevel = "error";
  return ort;
}

/**
 * One sequence through a decoder-with-past ONNX model: `forward` feeds new tokens with the
 * present KV tensors of the previous call as the past, like transformers.js's generate loop.
 */
export class OrtDecoder {
  private past = new Map<string, Ort.Tensor>();
  private length = 0;

  private constructor(
    private readonly ort: OrtModule,
    readonly session: Ort.InferenceSession,
    private readonly layers: number,
    private readonly kvHeads: number,
    private readonly headDim: number,
  ) {
    this.reset();
  }

  static async create(ort: OrtModule, model: Uint8Array, shape: { layers: number; kvHeads: number; headDim: number }): Promise<OrtDecoder> {
    const session = await ort.InferenceSession.create(model, { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
    return new OrtDecoder(ort, session, shape.layers, shape.kvHeads, shape.headDim);
  }

  /** back to an empty cache */
  reset(): void {
    for (const t of this.past.values()) t.dispose();
    this.past = new Map();
    const empty = new Float32Array(0);
    for (let l = 0; l < this.layers; l++) {
      for (const kv of ["key", "value"]) this.past.set(`past_key_values.${l}.${kv}`, new this.ort.Tensor("float32", empty, [1, this.kvHeads, 0, this.headDim]));
    }
    this.length = 0;
  }

  /** logits ([tokens or 1] x vocab, as the export writes them) after `tokens` */
  async forward(tokens: readonly number[]): Promise<Float32Array> {
    const T = tokens.length, total = this.length + T;
    const feeds: Record<string, Ort.Tensor> = {
      input_ids: new this.ort.Tensor("int64", BigInt64Array.from(tokens.map(BigInt)), [1, T]),
      attention_mask: new this.ort.Tensor("int64", new BigInt64Array(total).fill(1n), [1, total]),
      position_ids: new this.ort.Tensor("int64", BigInt64Array.from({ length: T }, (_, i) => BigInt(this.length + i)), [1, T]),
    };
    for (const [name, t] of this.past) feeds[name] = t;
    const out = await this.session.run(feeds);
    for (const t of this.past.values()) t.dispose();
    this.past = new Map();
    for (let l = 0; l < this.layers; l++) {
      for (const kv of ["key", "value"]) this.past.set(`past_key_values.${l}.${kv}`, out[`present.${l}.${kv}`]!);
    }
    this.length = total;
    const logits = out["logits"]!;
    return logits.data as Float32Array;
  }

  async release(): Promise<void> {
    for (const t of this.past.values()) t.dispose();
    await this.session.release();
  }
}
